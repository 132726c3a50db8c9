//! An engine dies in the middle of a cluster action and another engine
//! finishes it, on SQLite and PostgreSQL: the action is taken over when its
//! lease expires and resumed from its durable steps, and the cluster ends
//! ACTIVE with desired capacity = nodes = instances, none leaked or doubled.

mod cluster_support;

use std::time::Duration;

use cluster_support::{
    Engine, active_cluster, all_instances, assert_settled_invariants, driver, instance_profile,
    member, members, wait_for_action,
};
use ember_engine::clusters::ResizeRequest;
use ember_engine::clusters::dispatcher::DispatcherSettings;
use ember_engine::compute::simulated::SimulatedComputeConfig;
use ember_engine::domain::cluster::sizing::AdjustmentType;
use ember_engine::domain::cluster::{ActionStatus, ClusterStatus, NodeStatus};
use ember_engine::domain::instance::InstanceStatus;
use ember_runtime::database::testing::TestDatabase;
use ember_runtime::testing::wait_for;
use uuid::Uuid;

fn short_lease() -> DispatcherSettings {
    DispatcherSettings {
        action_lease: Duration::from_millis(800),
        sweep_interval: Duration::from_millis(100),
        max_running: 64,
        ..DispatcherSettings::default()
    }
}

async fn web_cluster(engine: &Engine, desired_capacity: i32) -> Uuid {
    instance_profile(engine, "web").await;
    active_cluster(engine, "web", (0, 10, desired_capacity))
        .await
        .id
}

/// SIGKILL after the plan of a scale-out: its nodes are CREATING, their
/// instances BUILDING. The next engine resumes the builds, takes the action
/// over and finishes it.
async fn a_growth_whose_engine_died_is_finished_by_another(database: &TestDatabase) {
    let slow = driver(Duration::from_millis(1500));
    let doomed = Engine::start(database, slow, short_lease(), true).await;
    let cluster_id = web_cluster(&doomed, 1).await;
    let scale = doomed
        .service
        .scale(&member(), &cluster_id.to_string(), true, 3)
        .await
        .expect("scale out");
    wait_for("the growth plan", Duration::from_secs(10), || async {
        members(&doomed, cluster_id)
            .await
            .iter()
            .filter(|node| node.status == NodeStatus::Creating)
            .count()
            == 3
    })
    .await;
    let planned = doomed
        .store()
        .get_action(scale.id)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(planned.status, ActionStatus::Running);
    assert_eq!(
        cluster_support::cluster(&doomed, cluster_id).await.status,
        ClusterStatus::Resizing
    );
    doomed.kill().await;

    let survivor = Engine::start(
        database,
        driver(Duration::from_millis(20)),
        short_lease(),
        true,
    )
    .await;
    let finished = wait_for_action(&survivor, scale.id, Duration::from_secs(30)).await;
    assert_eq!(
        finished.status,
        ActionStatus::Succeeded,
        "{}",
        finished.status_reason
    );
    assert_eq!(finished.attempt, 2, "run again once, by the survivor");
    let cluster = assert_settled_invariants(&survivor, cluster_id).await;
    assert_eq!(
        cluster.status,
        ClusterStatus::Active,
        "{}",
        cluster.status_reason
    );
    assert_eq!(cluster.desired_capacity, 4);
    assert!(
        members(&survivor, cluster_id)
            .await
            .iter()
            .all(|node| node.status == NodeStatus::Active)
    );
    assert_eq!(all_instances(&survivor).await.len(), 4);
    survivor.kill().await;
}

/// An engine claimed a resize and died before writing anything: the
/// survivor's sweeper queues it again (keeping the cluster's lock, so the
/// scale-in asked for after it still waits its turn) and it runs from the
/// start; then the scale-in runs.
async fn an_action_claimed_by_a_dead_engine_runs_again_in_its_turn(database: &TestDatabase) {
    let survivor = Engine::start(
        database,
        driver(Duration::from_millis(10)),
        short_lease(),
        false,
    )
    .await;
    // No dispatcher yet: only the dead engine claims.
    let requests = Engine::start(
        database,
        driver(Duration::from_millis(10)),
        short_lease(),
        true,
    )
    .await;
    let cluster_id = web_cluster(&requests, 2).await;
    requests.kill().await;
    let resize = survivor
        .service
        .resize(
            &member(),
            &cluster_id.to_string(),
            ResizeRequest {
                adjustment: Some((AdjustmentType::ExactCapacity, 5.0)),
                min_size: None,
                max_size: None,
                min_step: 1,
                strict: true,
            },
        )
        .await
        .expect("resize");
    let dead_engine = Uuid::now_v7();
    let past = ember_runtime::time::now() - chrono::Duration::seconds(1);
    let claimed = survivor
        .store()
        .claim_ready_actions(dead_engine, past, 10)
        .await
        .expect("claimed");
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, resize.id);
    let scale_in = survivor
        .service
        .scale(&member(), &cluster_id.to_string(), false, 1)
        .await
        .expect("scale in");
    assert!(
        survivor
            .store()
            .claim_ready_actions(Uuid::now_v7(), past, 10)
            .await
            .expect("claimed")
            .is_empty(),
        "the scale-in waits for the resize's lock"
    );
    let survivor = {
        survivor.kill().await;
        Engine::start(
            database,
            driver(Duration::from_millis(10)),
            short_lease(),
            true,
        )
        .await
    };
    let resized = wait_for_action(&survivor, resize.id, Duration::from_secs(30)).await;
    assert_eq!(
        resized.status,
        ActionStatus::Succeeded,
        "{}",
        resized.status_reason
    );
    assert_eq!(resized.attempt, 2);
    let scaled_in = wait_for_action(&survivor, scale_in.id, Duration::from_secs(30)).await;
    assert_eq!(
        scaled_in.status,
        ActionStatus::Succeeded,
        "{}",
        scaled_in.status_reason
    );
    assert!(
        scaled_in.updated_at >= resized.updated_at,
        "the scale-in ran after the resize"
    );
    wait_for("every action to end", Duration::from_secs(30), || {
        cluster_support::quiescent(&survivor, cluster_id)
    })
    .await;
    let cluster = assert_settled_invariants(&survivor, cluster_id).await;
    assert_eq!(
        cluster.desired_capacity, 4,
        "5 by the resize, then one fewer"
    );
    assert_eq!(
        cluster.status,
        ClusterStatus::Active,
        "{}",
        cluster.status_reason
    );
    survivor.kill().await;
}

/// Two engines: the survivor first, without its dispatcher (so only the
/// doomed one claims actions until the test starts it), then the doomed
/// one on `compute`.
async fn survivor_then_doomed(
    database: &TestDatabase,
    compute: SimulatedComputeConfig,
) -> (Engine, Engine) {
    let survivor = Engine::start(
        database,
        driver(Duration::from_millis(20)),
        short_lease(),
        false,
    )
    .await;
    let doomed = Engine::start(database, compute, short_lease(), true).await;
    (survivor, doomed)
}

/// The engine that takes a growth over was running when the other died:
/// its instance service started before those builds existed, so nothing but
/// the taken-over run can continue the builds the dead engine's driver
/// tasks left BUILDING (an engine resumes unfinished tasks only as it
/// starts).
async fn a_growth_is_finished_by_an_engine_that_was_running_already(database: &TestDatabase) {
    let (survivor, doomed) =
        survivor_then_doomed(database, driver(Duration::from_millis(1500))).await;
    let cluster_id = web_cluster(&doomed, 1).await;
    let scale = doomed
        .service
        .scale(&member(), &cluster_id.to_string(), true, 2)
        .await
        .expect("scale out");
    wait_for("the two builds", Duration::from_secs(10), || async {
        all_instances(&doomed)
            .await
            .iter()
            .filter(|instance| instance.status == InstanceStatus::Building)
            .count()
            == 2
    })
    .await;
    doomed.kill().await;

    survivor.dispatch();
    let finished = wait_for_action(&survivor, scale.id, Duration::from_secs(30)).await;
    assert_eq!(
        finished.status,
        ActionStatus::Succeeded,
        "{}",
        finished.status_reason
    );
    assert_eq!(finished.attempt, 2, "run again once, by the survivor");
    let cluster = assert_settled_invariants(&survivor, cluster_id).await;
    assert_eq!(cluster.desired_capacity, 3);
    let instances = all_instances(&survivor).await;
    assert_eq!(instances.len(), 3, "none leaked or doubled");
    assert!(
        instances
            .iter()
            .all(|instance| instance.status == InstanceStatus::Active)
    );
    survivor.kill().await;
}

/// The same for a shrink: the dead engine's instance deletes were under
/// way (instances DELETING); the running survivor continues them and the
/// cluster ends with what is left.
async fn a_shrink_is_finished_by_an_engine_that_was_running_already(database: &TestDatabase) {
    let slow_deletes = SimulatedComputeConfig {
        delete_latency: Duration::from_millis(1500),
        ..driver(Duration::from_millis(10))
    };
    let (survivor, doomed) = survivor_then_doomed(database, slow_deletes).await;
    let cluster_id = web_cluster(&doomed, 3).await;
    let scale = doomed
        .service
        .scale(&member(), &cluster_id.to_string(), false, 2)
        .await
        .expect("scale in");
    wait_for("the instance deletes", Duration::from_secs(10), || async {
        all_instances(&doomed)
            .await
            .iter()
            .filter(|instance| instance.status == InstanceStatus::Deleting)
            .count()
            == 2
    })
    .await;
    doomed.kill().await;

    survivor.dispatch();
    let finished = wait_for_action(&survivor, scale.id, Duration::from_secs(30)).await;
    assert_eq!(
        finished.status,
        ActionStatus::Succeeded,
        "{}",
        finished.status_reason
    );
    wait_for("every action to end", Duration::from_secs(30), || {
        cluster_support::quiescent(&survivor, cluster_id)
    })
    .await;
    let cluster = assert_settled_invariants(&survivor, cluster_id).await;
    assert_eq!(cluster.desired_capacity, 1);
    let instances = all_instances(&survivor).await;
    assert_eq!(instances.len(), 1, "the two deletes completed");
    assert_eq!(instances[0].status, InstanceStatus::Active);
    survivor.kill().await;
}

ember_runtime::store_suite!(
    a_growth_whose_engine_died_is_finished_by_another,
    a_growth_is_finished_by_an_engine_that_was_running_already,
    a_shrink_is_finished_by_an_engine_that_was_running_already,
    an_action_claimed_by_a_dead_engine_runs_again_in_its_turn,
);
