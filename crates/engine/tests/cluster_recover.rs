//! CLUSTER_RECOVER on SQLite and PostgreSQL: a member whose old resource
//! cannot be deleted stays ERROR with the reason and gets no new resource
//! (nothing leaks); one whose old resource goes is rebuilt.

mod cluster_support;

use std::time::Duration;

use cluster_support::{
    Engine, active_cluster, all_instances, assert_settled_invariants, driver, member, members,
    wait_for_action,
};
use ember_engine::clusters::HealthAction;
use ember_engine::clusters::dispatcher::DispatcherSettings;
use ember_engine::domain::cluster::{ActionStatus, ClusterStatus, NodeStatus};
use ember_runtime::database::testing::TestDatabase;
use ember_runtime::testing::wait_for;
use serde_json::{Map, json};

/// One engine whose simulated instance builds take 10 ms.
async fn quick_engine(database: &TestDatabase) -> Engine {
    Engine::start(
        database,
        driver(Duration::from_millis(10)),
        DispatcherSettings::default(),
        true,
    )
    .await
}

async fn failing_cluster(engine: &Engine, failures: &str) -> uuid::Uuid {
    engine
        .service
        .create_profile(
            &member(),
            "flaky",
            json!({
                "type": "ember.instance",
                "version": "1.0",
                "properties": {
                    "flavor": "m1.small",
                    "image": "debian-12",
                    "metadata": {"ember:simulate_failure": failures}
                }
            }),
            Map::new(),
            false,
        )
        .await
        .expect("profile");
    let cluster = active_cluster(engine, "flaky", (0, 5, 1)).await;
    let nodes = members(engine, cluster.id).await;
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].status, NodeStatus::Error, "the build failed");
    cluster.id
}

async fn a_member_whose_resource_cannot_be_deleted_is_not_rebuilt(database: &TestDatabase) {
    let engine = quick_engine(database).await;
    let cluster_id = failing_cluster(&engine, "build,delete").await;
    let before = members(&engine, cluster_id).await;
    let recover = engine
        .service
        .check_or_recover(&member(), &cluster_id.to_string(), HealthAction::Recover)
        .await
        .expect("recover");
    let recover = wait_for_action(&engine, recover.id, Duration::from_secs(20)).await;
    assert_eq!(
        recover.status,
        ActionStatus::Succeeded,
        "{}",
        recover.status_reason
    );
    assert!(
        recover.status_reason.starts_with("0 of 1"),
        "{}",
        recover.status_reason
    );
    let after = members(&engine, cluster_id).await;
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].status, NodeStatus::Error);
    assert!(
        after[0].status_reason.contains("NODE_RECOVER failed")
            && after[0].status_reason.contains("could not be deleted"),
        "{}",
        after[0].status_reason
    );
    assert_eq!(
        after[0].physical_id, before[0].physical_id,
        "the same resource"
    );
    let instances = all_instances(&engine).await;
    assert_eq!(instances.len(), 1, "no new instance: {instances:?}");
    let cluster = assert_settled_invariants(&engine, cluster_id).await;
    assert_eq!(
        cluster.status,
        ClusterStatus::Warning,
        "{}",
        cluster.status_reason
    );
    engine.kill().await;
}

async fn a_member_whose_instance_went_away_is_rebuilt(database: &TestDatabase) {
    let engine = quick_engine(database).await;
    cluster_support::instance_profile(&engine, "web").await;
    let cluster = active_cluster(&engine, "web", (1, 5, 2)).await;
    let before = members(&engine, cluster.id).await;
    let lost: uuid::Uuid = before[0]
        .physical_id
        .as_deref()
        .and_then(|id| id.parse().ok())
        .expect("instance id");
    // Deleted behind the cluster's back.
    engine
        .instances
        .delete(&member(), lost)
        .await
        .expect("deleting");
    wait_for("the instance gone", Duration::from_secs(10), || async {
        engine.instances.get(&member(), lost).await.is_err()
    })
    .await;
    let recover = engine
        .service
        .check_or_recover(&member(), &cluster.id.to_string(), HealthAction::Recover)
        .await
        .expect("recover");
    let recover = wait_for_action(&engine, recover.id, Duration::from_secs(20)).await;
    assert_eq!(recover.status_reason, "1 of 1 unhealthy node(s) recovered");
    let after = members(&engine, cluster.id).await;
    let rebuilt = after
        .iter()
        .find(|node| node.id == before[0].id)
        .expect("same node");
    assert_eq!(
        rebuilt.status,
        NodeStatus::Active,
        "{}",
        rebuilt.status_reason
    );
    assert_ne!(rebuilt.physical_id, before[0].physical_id, "a new instance");
    let settled = assert_settled_invariants(&engine, cluster.id).await;
    assert_eq!(
        settled.status,
        ClusterStatus::Active,
        "{}",
        settled.status_reason
    );
    assert_eq!(all_instances(&engine).await.len(), 2);
    engine.kill().await;
}

ember_runtime::store_suite!(
    a_member_whose_resource_cannot_be_deleted_is_not_rebuilt,
    a_member_whose_instance_went_away_is_rebuilt,
);
