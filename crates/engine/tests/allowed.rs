//! "Allowed?" answers what the call then does, on SQLite and PostgreSQL:
//! for every cluster operation × lock state × caller, the dry run's
//! verdict and first blocker are the real call's outcome and message; the
//! same for instance operations; and several blockers come back at once.

mod cluster_support;

use std::time::Duration;

use cluster_support::{Engine, driver, instance_profile, member, succeeded, wait_for_action};
use ember_engine::clusters::dispatcher::DispatcherSettings;
use ember_engine::clusters::{ClusterLockRequest, HealthAction, NewCluster};
use ember_engine::domain::admission::BlockerKind;
use ember_engine::domain::cluster::{Cluster, ClusterLockLevel};
use ember_engine::domain::instance::NewInstance;
use ember_engine::error::{Error, Result};
use ember_runtime::Identity;
use ember_runtime::database::testing::TestDatabase;
use ember_runtime::testing::wait_for;
use serde_json::Map;

fn admin() -> Identity {
    Identity::new("ops", "demo", vec!["admin".to_owned()])
}

fn reader() -> Identity {
    Identity::new("rita", "demo", vec!["reader".to_owned()])
}

fn other_member() -> Identity {
    Identity::new("bob", "demo", vec!["member".to_owned()])
}

const OPERATIONS: [&str; 7] = [
    "scale_out",
    "scale_in",
    "check",
    "recover",
    "lock",
    "unlock",
    "delete",
];

#[derive(Debug, Clone, Copy)]
enum LockState {
    Unlocked,
    ByMember,
    ByAdmin,
    /// Expired, and not lifted yet: it holds nothing back.
    Expired,
}

fn lock_request(expires_in: Option<i64>) -> ClusterLockRequest {
    ClusterLockRequest {
        level: ClusterLockLevel::Clusters,
        reason: Some("maintenance".to_owned()),
        expires_in,
        expires_at: None,
    }
}

async fn one_node_cluster(engine: &Engine, name: &str) -> Cluster {
    let (cluster, create) = engine
        .service
        .create_cluster(
            &member(),
            NewCluster {
                name: name.into(),
                profile: "web".into(),
                min_size: 0,
                max_size: 5,
                desired_capacity: 1,
                metadata: Map::new(),
                timeout: None,
                config: Map::new(),
            },
        )
        .await
        .expect("cluster");
    let create = wait_for_action(engine, create.id, Duration::from_secs(30)).await;
    assert!(succeeded(&create), "{}", create.status_reason);
    cluster
}

/// The real call; only whether it was accepted and its refusal matter.
async fn call(engine: &Engine, caller: &Identity, id: &str, operation: &str) -> Result<()> {
    let service = &engine.service;
    match operation {
        "scale_out" => service.scale(caller, id, true, 1).await.map(|_| ()),
        "scale_in" => service.scale(caller, id, false, 1).await.map(|_| ()),
        "check" => service
            .check_or_recover(caller, id, HealthAction::Check)
            .await
            .map(|_| ()),
        "recover" => service
            .check_or_recover(caller, id, HealthAction::Recover)
            .await
            .map(|_| ()),
        "lock" => service
            .lock_cluster(caller, id, lock_request(None))
            .await
            .map(|_| ()),
        "unlock" => service.unlock_cluster(caller, id).await.map(|_| ()),
        "delete" => service.delete_cluster(caller, id).await.map(|_| ()),
        other => panic!("no call for {other}"),
    }
}

async fn cluster_dry_runs_answer_what_the_calls_do(database: &TestDatabase) {
    let engine = Engine::start(
        database,
        driver(Duration::from_millis(1)),
        DispatcherSettings::default(),
        true,
    )
    .await;
    instance_profile(&engine, "web").await;
    let states = [
        LockState::Unlocked,
        LockState::ByMember,
        LockState::ByAdmin,
        LockState::Expired,
    ];
    let callers = [
        ("member", member()),
        ("other member", other_member()),
        ("admin", admin()),
        ("reader", reader()),
    ];
    // A cluster per cell: a call that is accepted changes its cluster.
    let mut cells = Vec::new();
    for (s, state) in states.iter().enumerate() {
        for (c, _) in callers.iter().enumerate() {
            for (o, operation) in OPERATIONS.iter().enumerate() {
                let cluster = one_node_cluster(&engine, &format!("c{s}-{c}-{o}")).await;
                let id = cluster.id.to_string();
                let locker = match state {
                    LockState::Unlocked => None,
                    LockState::ByMember => Some((member(), None)),
                    LockState::ByAdmin => Some((admin(), None)),
                    LockState::Expired => Some((member(), Some(1))),
                };
                if let Some((locker, expires_in)) = locker {
                    engine
                        .service
                        .lock_cluster(&locker, &id, lock_request(expires_in))
                        .await
                        .expect("locked");
                }
                cells.push((*state, c, *operation, id));
            }
        }
    }
    let expiring: Vec<uuid::Uuid> = cells
        .iter()
        .filter(|(state, ..)| matches!(state, LockState::Expired))
        .map(|(.., id)| id.parse().expect("a cluster id"))
        .collect();
    wait_for(
        "the 1 s locks to expire",
        Duration::from_secs(10),
        || async {
            let now = chrono::Utc::now();
            for id in &expiring {
                let held = cluster_support::cluster(&engine, *id)
                    .await
                    .maintenance_lock
                    .is_some_and(|lock| lock.holds_at(now));
                if held {
                    return false;
                }
            }
            true
        },
    )
    .await;
    let mut refused = 0;
    for (state, c, operation, id) in &cells {
        let (who, caller) = &callers[*c];
        let check = engine
            .service
            .check_cluster_operation(caller, id, operation, 1)
            .await
            .expect("dry run");
        let real = call(&engine, caller, id, operation).await;
        let cell = format!("{operation} by {who} on a cluster {state:?}");
        match (&real, check.blockers.first()) {
            (Ok(()), None) => {}
            (Err(error), Some(first)) => {
                refused += 1;
                assert_eq!(error.to_string(), first.error.to_string(), "{cell}");
            }
            (real, first) => panic!("{cell}: the call said {real:?}, the dry run {first:?}"),
        }
        if matches!(state, LockState::ByMember | LockState::ByAdmin)
            && !matches!(*operation, "check" | "lock" | "unlock")
        {
            assert!(
                check
                    .blockers
                    .iter()
                    .any(|blocker| blocker.kind == BlockerKind::MaintenanceLock),
                "{cell}: {:?}",
                check.blockers
            );
            assert_eq!(
                check.break_glass_would_pass,
                *who != "reader",
                "{cell}: {:?}",
                check.blockers
            );
        }
    }
    assert!(refused > 20, "the table refuses something: {refused}");
}

/// A reader asking to scale out a locked cluster past its quota hears all
/// of it at once.
async fn several_blockers_come_back_at_once(database: &TestDatabase) {
    let engine = Engine::start(
        database,
        driver(Duration::from_millis(1)),
        DispatcherSettings::default(),
        true,
    )
    .await;
    instance_profile(&engine, "web").await;
    let cluster = one_node_cluster(&engine, "db").await;
    let id = cluster.id.to_string();
    engine
        .service
        .lock_cluster(&member(), &id, lock_request(None))
        .await
        .expect("locked");
    let check = engine
        .service
        .check_cluster_operation(&reader(), &id, "scale_out", 1)
        .await
        .expect("dry run");
    let kinds: Vec<BlockerKind> = check.blockers.iter().map(|blocker| blocker.kind).collect();
    assert_eq!(
        kinds,
        [BlockerKind::Role, BlockerKind::MaintenanceLock],
        "{:?}",
        check.blockers
    );
    assert!(!check.break_glass_would_pass);
    let error = engine
        .service
        .scale(&reader(), &id, true, 1)
        .await
        .expect_err("refused");
    assert!(matches!(error, Error::Forbidden(_)), "{error:?}");
    // A scale out queued behind another shows it.
    engine
        .service
        .unlock_cluster(&member(), &id)
        .await
        .expect("unlocked");
    let unknown = engine
        .service
        .check_cluster_operation(&member(), &id, "explode", 0)
        .await
        .expect_err("not an operation");
    assert!(
        unknown.to_string().contains("\"explode\" is not one"),
        "{unknown}"
    );
    let stranger = Identity::new("eve", "other", vec!["member".to_owned()]);
    let hidden = engine
        .service
        .check_cluster_operation(&stranger, &id, "delete", 0)
        .await
        .expect_err("another project's");
    assert!(matches!(hidden, Error::NotFound(_)), "{hidden:?}");
}

/// Instance operations × lock state × caller: the dry run's first blocker
/// is the call's refusal.
async fn instance_dry_runs_answer_what_the_calls_do(database: &TestDatabase) {
    let engine = Engine::start(
        database,
        driver(Duration::from_millis(1)),
        DispatcherSettings::default(),
        false,
    )
    .await;
    let instances = &engine.instances;
    let operations = ["update", "power_off", "reboot", "lock", "unlock", "delete"];
    let callers = [
        ("member", member()),
        ("admin", admin()),
        ("reader", reader()),
    ];
    let mut cells = 0;
    for locked_by in [None, Some(member()), Some(admin())] {
        for (who, caller) in &callers {
            for operation in operations {
                let instance = instances
                    .create(
                        &member(),
                        NewInstance {
                            name: format!("vm-{cells}"),
                            flavor: "m1.small".into(),
                            image: "debian-12".into(),
                            metadata: Default::default(),
                            workload: Default::default(),
                            placement: Default::default(),
                            delegation: None,
                        },
                    )
                    .await
                    .expect("created");
                let uuid = instance.uuid;
                wait_for("active", Duration::from_secs(10), || async {
                    instances
                        .get(&member(), uuid)
                        .await
                        .is_ok_and(|instance| instance.status.as_str() == "ACTIVE")
                })
                .await;
                if let Some(locker) = &locked_by {
                    instances
                        .lock(locker, uuid, Some("maintenance".into()))
                        .await
                        .expect("locked");
                }
                let blockers = instances
                    .check_operation(caller, uuid, operation)
                    .await
                    .expect("dry run");
                let real = match operation {
                    "update" => instances
                        .update(
                            caller,
                            uuid,
                            ember_engine::domain::instance::InstanceChanges {
                                name: Some(format!("vm-{cells}")),
                                metadata: None,
                                networks: None,
                            },
                        )
                        .await
                        .map(|_| ()),
                    "power_off" => instances
                        .power(
                            caller,
                            uuid,
                            ember_engine::domain::instance::PowerAction::Off,
                        )
                        .await
                        .map(|_| ()),
                    "reboot" => instances
                        .power(
                            caller,
                            uuid,
                            ember_engine::domain::instance::PowerAction::Reboot,
                        )
                        .await
                        .map(|_| ()),
                    "lock" => instances.lock(caller, uuid, None).await.map(|_| ()),
                    "unlock" => instances.unlock(caller, uuid).await.map(|_| ()),
                    "delete" => instances.delete(caller, uuid).await.map(|_| ()),
                    other => panic!("no call for {other}"),
                };
                let cell = format!(
                    "{operation} by {who} on an instance locked by {:?}",
                    locked_by.as_ref().map(|locker| &locker.user_id)
                );
                match (&real, blockers.first()) {
                    (Ok(()), None) => {}
                    (Err(error), Some(first)) => {
                        assert_eq!(error.to_string(), first.error.to_string(), "{cell}");
                    }
                    (real, first) => {
                        panic!("{cell}: the call said {real:?}, the dry run {first:?}")
                    }
                }
                cells += 1;
            }
        }
    }
    assert_eq!(cells, 3 * 3 * 6);
}

ember_runtime::store_suite!(
    cluster_dry_runs_answer_what_the_calls_do,
    several_blockers_come_back_at_once,
    instance_dry_runs_answer_what_the_calls_do,
);
