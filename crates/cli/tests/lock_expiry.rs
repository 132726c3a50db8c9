//! Lock expiry across crashes, on the deployment shape (four `ember serve`
//! processes; the engine killed with SIGKILL and started again on the same
//! data). A stack's, a cluster's and an instance's lock with an expiry:
//!
//! - is lifted on time though the engine was down when it passed;
//! - is lifted once when the engine is killed at the moment it passes;
//! - is lifted once when its holder's unlock races the expiry.
//!
//! "Once" is read where a user reads it: each lift has exactly one audit
//! record (an unlock `accepted`, or `expired`) and each expiry exactly one
//! event.

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::deployment::{Deployment, Service};

const TEMPLATE: &str =
    "heat_template_version: 2021-04-16\nresources:\n  a: {type: OS::Heat::None}\n";
const PROFILE: &str =
    "type: ember.instance\nversion: \"1.0\"\nproperties: {flavor: m1.small, image: debian-12}\n";

/// The three kinds of lock target, by the name each was made with.
const STACK: &str = "db";
const CLUSTER: &str = "web";
const INSTANCE: &str = "vm";
const TARGETS: [(&str, &str); 3] = [
    ("stack", STACK),
    ("cluster", CLUSTER),
    ("instance", INSTANCE),
];

impl Deployment {
    /// The stack `db`, the one-node cluster `web` and the instance `vm`.
    fn make_targets(&self) {
        let dir = self.data_dir.path();
        let template = dir.join("db.yaml");
        std::fs::write(&template, TEMPLATE).expect("template written");
        let profile = dir.join("web-profile.yaml");
        std::fs::write(&profile, PROFILE).expect("profile written");
        let template = template.display().to_string();
        let profile = profile.display().to_string();
        for command in [
            vec!["stack", "create", "--template", &template, STACK, "--wait"],
            vec!["cluster", "profile-create", "web", "--spec", &profile],
            vec![
                "cluster",
                "create",
                CLUSTER,
                "--profile",
                "web",
                "--desired",
                "1",
                "--wait",
            ],
            vec![
                "instance",
                "create",
                INSTANCE,
                "--flavor",
                "m1.small",
                "--image",
                "debian-12",
                "--wait",
            ],
        ] {
            self.ember(&command);
        }
    }

    /// Locks all three until `expires_in` from now; returns when each
    /// lock was taken, in [`TARGETS`]' order.
    fn lock_all(&self, expires_in: &str) -> [Instant; 3] {
        TARGETS.map(|(kind, name)| {
            let mut lock = vec![kind, "lock", name, "--expires-in", expires_in];
            if kind == "stack" {
                lock.push("--wait");
            }
            self.ember(&lock);
            Instant::now()
        })
    }

    fn show(&self, kind: &str, name: &str) -> Value {
        let shown = self.ember(&[kind, "show", name, "-f", "json"]);
        serde_json::from_str(&shown).unwrap_or_else(|error| panic!("{kind} show: {error}: {shown}"))
    }

    /// Which of the three are still locked (a stack also while its unlock
    /// runs).
    fn still_locked(&self) -> Vec<&'static str> {
        let stack = self.show("stack", STACK);
        let cluster = self.show("cluster", CLUSTER);
        let instance = self.show("instance", INSTANCE);
        [
            (
                STACK,
                !stack["lock"].is_null() || stack["status"] != "UNLOCK_COMPLETE",
            ),
            (CLUSTER, !cluster["lock"].is_null()),
            (INSTANCE, !instance["locked"].is_null()),
        ]
        .into_iter()
        .filter(|(_, locked)| *locked)
        .map(|(name, _)| name)
        .collect()
    }

    /// The target's audit records of an unlock with `outcome`.
    fn unlocks(&self, kind: &str, name: &str, outcome: &str) -> usize {
        let listed = self.ember(&[
            "audit",
            "list",
            "--type",
            kind,
            "--target",
            name,
            "--outcome",
            outcome,
            "--limit",
            "1000",
            "-f",
            "json",
        ]);
        let records: Vec<Value> = serde_json::from_str(&listed).expect("audit records");
        records
            .iter()
            .filter(|record| record["operation"] == "unlock")
            .count()
    }

    /// The expiry events of each target: the stack's UNLOCK that an expiry
    /// began, the cluster's CLUSTER_UNLOCK event and the instance's
    /// `lock_expired` event.
    async fn expiry_events(&self) -> [usize; 3] {
        let stack = self
            .ember(&["stack", "events", STACK])
            .lines()
            .filter(|line| line.contains("UNLOCK_IN_PROGRESS") && line.contains("lock expired"))
            .count();
        let cluster_id = self.show("cluster", CLUSTER)["id"]
            .as_str()
            .expect("cluster id")
            .to_owned();
        let events = self
            .get(&format!("/events?obj_id={cluster_id}&limit=1000"))
            .await;
        let cluster = events["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|event| {
                event["action"] == "CLUSTER_UNLOCK"
                    && event["status_reason"]
                        .as_str()
                        .is_some_and(|reason| reason.starts_with("lock expired"))
            })
            .count();
        let instance = self
            .ember(&["instance", "events", INSTANCE])
            .lines()
            .filter(|line| line.contains("lock_expired"))
            .count();
        [stack, cluster, instance]
    }

    async fn wait_all_unlocked(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let locked = self.still_locked();
            if locked.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "still locked after {timeout:?}: {locked:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn restart_engine(&mut self) {
        self.spawn(Service::Engine);
        self.wait_healthy().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiring_locks_are_lifted_on_time_across_an_engine_restart_and_once_when_killed_at_the_expiry()
 {
    let mut deployment = Deployment::start_with(&[("EMBER_ENGINE__STACK_LEASE_TTL_MS", "1500")]);
    deployment.wait_healthy().await;
    deployment.make_targets();

    // Down when the expiry passes: lifted as soon as the engine is back.
    deployment.lock_all("3s");
    let locked_at = Instant::now();
    deployment.kill(Service::Engine);
    tokio::time::sleep(Duration::from_secs(4).saturating_sub(locked_at.elapsed())).await;
    deployment.restart_engine().await;
    let restarted = Instant::now();
    deployment.wait_all_unlocked(Duration::from_secs(10)).await;
    println!(
        "lifted {:.2} s after the engine was serving again",
        restarted.elapsed().as_secs_f64()
    );
    assert!(
        restarted.elapsed() < Duration::from_secs(3),
        "the sweep runs every 250 ms: lifted {:?} after the restart",
        restarted.elapsed()
    );

    // Killed around the moment of the expiry: before the sweep, while a
    // stack's unlock runs, or after — each lock lifted once either way.
    let kills_after = [1_700, 1_950, 2_050, 2_200, 2_500];
    for after in kills_after {
        deployment.lock_all("2s");
        tokio::time::sleep(Duration::from_millis(after)).await;
        deployment.kill(Service::Engine);
        deployment.restart_engine().await;
        deployment.wait_all_unlocked(Duration::from_secs(15)).await;
    }

    let expiries = 1 + kills_after.len();
    for (kind, name) in TARGETS {
        assert_eq!(
            deployment.unlocks(kind, name, "expired"),
            expiries,
            "one expired record per expiry of the {kind}'s lock"
        );
        assert_eq!(
            deployment.unlocks(kind, name, "accepted"),
            0,
            "nobody unlocked the {kind}"
        );
    }
    assert_eq!(
        deployment.expiry_events().await,
        [expiries; 3],
        "one event per expiry (stack, cluster, instance)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_racing_the_expiry_lifts_each_lock_once() {
    let deployment = Deployment::start();
    deployment.wait_healthy().await;
    deployment.make_targets();

    // The holder unlocks each around the moment its lock expires (from
    // before to after the sweep, which runs every 250 ms): whichever comes
    // first lifts the lock, the other is refused.
    let unlock_after = [800, 950, 1_000, 1_050, 1_150, 1_300];
    for after in unlock_after {
        let locked_at = deployment.lock_all("1s");
        let mut unlocks = Vec::new();
        for ((kind, name), locked_at) in TARGETS.iter().zip(locked_at) {
            let at = locked_at + Duration::from_millis(after);
            tokio::time::sleep(at.saturating_duration_since(Instant::now())).await;
            unlocks.push(deployment.ember_command(&[kind, "unlock", name]).spawn());
        }
        for unlock in unlocks {
            unlock
                .expect("ember unlock runs")
                .wait()
                .expect("ember unlock ends");
        }
        deployment.wait_all_unlocked(Duration::from_secs(10)).await;
    }

    let mut expired_total = 0;
    for (kind, name) in TARGETS {
        let accepted = deployment.unlocks(kind, name, "accepted");
        let expired = deployment.unlocks(kind, name, "expired");
        println!("{kind}: {accepted} unlocked by the holder, {expired} expired");
        assert_eq!(
            accepted + expired,
            unlock_after.len(),
            "each of the {kind}'s locks lifted once: {accepted} unlocks and {expired} expiries"
        );
        expired_total += expired;
    }
    let events = deployment.expiry_events().await;
    for ((kind, name), events) in TARGETS.iter().zip(events) {
        assert_eq!(
            events,
            deployment.unlocks(kind, name, "expired"),
            "one event per expiry of the {kind}'s lock"
        );
    }
    assert!(expired_total > 0, "some locks expired before their unlock");
}
