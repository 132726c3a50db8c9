//! A health policy recovers members whose machines die, within its budget:
//! at most `max_recoveries` per `window` (the rest held, with one event
//! saying why, and recovered once the window frees them), and none at all
//! while more than `max_unhealthy` members are unhealthy. The machines of
//! the simulated driver are told to die 400 ms after they start, so a
//! recovered member dies again: only the budget stops the loop.

mod cluster_support;

use std::time::{Duration, Instant};

use cluster_support::{Engine, active_cluster, all_actions, all_events, driver, member};
use ember_engine::clusters::dispatcher::DispatcherSettings;
use ember_engine::compute::simulated::SIMULATE_EXIT_AFTER_MS_KEY;
use ember_engine::domain::cluster::{ActionKind, ClusterAction};
use ember_runtime::database::testing::TestDatabase;
use ember_runtime::testing::wait_for;
use serde_json::{Map, Value, json};
use uuid::Uuid;

async fn mortal_cluster(engine: &Engine, name: &str, size: i32, remediation: Value) -> Uuid {
    engine
        .service
        .create_profile(
            &member(),
            name,
            json!({"type": "ember.instance", "version": "1.0", "properties": {
                "flavor": "m1.small", "image": "debian-12",
                "metadata": {SIMULATE_EXIT_AFTER_MS_KEY: "400"}}}),
            Map::new(),
            false,
        )
        .await
        .expect("profile");
    let policy = format!("{name}-health");
    engine
        .service
        .create_policy(
            &member(),
            &policy,
            json!({"type": "senlin.policy.health", "version": "1.1", "properties": {
                "detection": {"detection_modes": [{"type": "NODE_STATUS_POLLING"}], "interval": 1},
                "recovery": {"actions": [{"name": "RECREATE"}]},
                "remediation": remediation}}),
        )
        .await
        .expect("policy");
    let cluster = active_cluster(engine, name, (0, 5, size)).await;
    let attach = engine
        .service
        .attach_policy(&member(), name, &policy, 0, true)
        .await
        .expect("attached");
    let attach = cluster_support::wait_for_action(engine, attach.id, Duration::from_secs(10)).await;
    assert!(
        cluster_support::succeeded(&attach),
        "{}",
        attach.status_reason
    );
    cluster.id
}

fn by_policy(actions: &[ClusterAction]) -> Vec<&ClusterAction> {
    actions
        .iter()
        .filter(|action| {
            action.kind == ActionKind::NodeRecover && action.inputs.contains_key("by_health_policy")
        })
        .collect()
}

async fn held(engine: &Engine, cluster_id: Uuid) -> Vec<String> {
    all_events(engine, cluster_id)
        .await
        .into_iter()
        .filter(|event| event.action == "CLUSTER_RECOVER" && event.status == "HELD")
        .map(|event| event.status_reason)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recoveries_stay_within_the_window_and_resume_when_it_passes() {
    let database = TestDatabase::sqlite().await;
    let engine = Engine::start(
        &database,
        driver(Duration::from_millis(5)),
        DispatcherSettings::default(),
        true,
    )
    .await;
    let started = Instant::now();
    let cluster_id = mortal_cluster(
        &engine,
        "phoenix",
        3,
        json!({"max_recoveries": 2, "window": 3}),
    )
    .await;
    wait_for("a held recovery", Duration::from_secs(10), || async {
        !held(&engine, cluster_id).await.is_empty()
    })
    .await;
    let reasons = held(&engine, cluster_id).await;
    assert!(
        reasons[0]
            .starts_with("automatic recovery held: the budget of 2 recoveries per 3 s is spent"),
        "{reasons:?}"
    );
    // Once the window passes, the held member is recovered too.
    wait_for(
        "recoveries beyond the first window",
        Duration::from_secs(15),
        || async { by_policy(&all_actions(&engine, cluster_id).await).len() >= 3 },
    )
    .await;
    // Watched a while longer, for the bound to be tested over more windows.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let actions = all_actions(&engine, cluster_id).await;
    let recoveries = by_policy(&actions);
    // Never more than 2 starts in any 3 s.
    let mut starts: Vec<_> = recoveries.iter().map(|action| action.created_at).collect();
    starts.sort();
    for (index, start) in starts.iter().enumerate() {
        let in_window = starts[index..]
            .iter()
            .take_while(|later| **later < *start + chrono::Duration::seconds(3))
            .count();
        assert!(
            in_window <= 2,
            "{in_window} recoveries within 3 s of {start}: {starts:?}"
        );
    }
    let elapsed = started.elapsed().as_secs_f64();
    assert!(
        (recoveries.len() as f64) <= 2.0 * (elapsed / 3.0).ceil(),
        "{} recoveries in {elapsed:.1} s",
        recoveries.len()
    );
    assert!(
        recoveries
            .iter()
            .all(|action| action.inputs.get("operation") == Some(&json!("RECREATE"))),
        "{recoveries:?}"
    );
    engine.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_recovered_while_more_than_max_unhealthy_members_are_unhealthy() {
    let database = TestDatabase::sqlite().await;
    let engine = Engine::start(
        &database,
        driver(Duration::from_millis(5)),
        DispatcherSettings::default(),
        true,
    )
    .await;
    let cluster_id = mortal_cluster(&engine, "frail", 2, json!({"max_unhealthy": 1})).await;
    wait_for("a stopped recovery", Duration::from_secs(10), || async {
        !held(&engine, cluster_id).await.is_empty()
    })
    .await;
    // Both die together: the first failure alone is within the budget and
    // may be recovered; once both are down, nothing more is.
    let stopped =
        "automatic recovery stopped: 2 of 2 members are unhealthy, more than max_unhealthy 1 (1)";
    wait_for(
        "recovery stopped at max_unhealthy",
        Duration::from_secs(10),
        || async {
            held(&engine, cluster_id)
                .await
                .iter()
                .any(|reason| reason == stopped)
        },
    )
    .await;
    let before = by_policy(&all_actions(&engine, cluster_id).await).len();
    // Nothing may happen: watched for more than a detection interval.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let after = by_policy(&all_actions(&engine, cluster_id).await).len();
    assert_eq!(
        before, after,
        "no recovery while the cluster is beyond max_unhealthy"
    );
    assert!(after <= 1, "{after}");
    engine.kill().await;
}

/// The sweep every engine runs finds a cluster whose health policy came
/// after its member failed; two engines sweeping at once recover the
/// member once (the second recovery finds it no longer ERROR).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_recovers_what_no_failure_triggered_and_twice_is_once() {
    let database = TestDatabase::sqlite().await;
    let engine = Engine::start(
        &database,
        driver(Duration::from_millis(5)),
        DispatcherSettings::default(),
        true,
    )
    .await;
    cluster_support::instance_profile(&engine, "steady").await;
    let cluster = active_cluster(&engine, "steady", (0, 5, 1)).await;
    let node = cluster_support::members(&engine, cluster.id).await[0].clone();
    let marked = engine
        .service
        .mark_node_unhealthy(&member(), &node.name, "bad disk")
        .await
        .expect("marked");
    assert_eq!(marked.status_reason, "marked unhealthy by demo: bad disk");
    engine
        .service
        .create_policy(
            &member(),
            "steady-health",
            json!({"type": "senlin.policy.health", "version": "1.1", "properties": {}}),
        )
        .await
        .expect("policy");
    let attach = engine
        .service
        .attach_policy(&member(), "steady", "steady-health", 0, true)
        .await
        .expect("attached");
    cluster_support::wait_for_action(&engine, attach.id, Duration::from_secs(10)).await;
    let (first, second) = tokio::join!(
        engine.service.sweep_remediation(),
        engine.service.sweep_remediation()
    );
    first.expect("swept");
    second.expect("swept");
    wait_for("the member recovered", Duration::from_secs(10), || async {
        cluster_support::members(&engine, cluster.id).await[0].status
            == ember_engine::domain::cluster::NodeStatus::Active
    })
    .await;
    wait_for("the recoveries ended", Duration::from_secs(10), || async {
        cluster_support::quiescent(&engine, cluster.id).await
    })
    .await;
    let actions = all_actions(&engine, cluster.id).await;
    let recoveries = by_policy(&actions);
    let real: Vec<_> = recoveries
        .iter()
        .filter(|action| !action.status_reason.ends_with("nothing to recover"))
        .collect();
    assert_eq!(real.len(), 1, "{recoveries:?}");
    engine.service.sweep_remediation().await.expect("swept");
    assert_eq!(
        by_policy(&all_actions(&engine, cluster.id).await).len(),
        recoveries.len(),
        "a healthy cluster gets no recovery"
    );
    engine.kill().await;
}
