//! The machine watcher on the simulated driver (whose machines can be told
//! to die): an instance whose machine dies behind the engine's back goes
//! ERROR with the exit in its reason and an `observed` event, on SQLite and
//! PostgreSQL; a cluster node whose machine dies goes ERROR by itself with
//! a NODE_CHECK event; a request that lands first wins over a late
//! observation (the write is conditional on the revision it judged).

mod cluster_support;

use std::sync::Arc;
use std::time::Duration;

use cluster_support::{Engine, active_cluster, driver, member, members};
use ember_engine::clusters::dispatcher::DispatcherSettings;
use ember_engine::compute::ComputeConfig;
use ember_engine::compute::simulated::{SIMULATE_EXIT_AFTER_MS_KEY, SIMULATE_EXIT_CODE_KEY};
use ember_engine::domain::cluster::NodeStatus;
use ember_engine::domain::instance::observation::{MachineExit, MachineState, reconcile};
use ember_engine::domain::instance::{InstanceStatus, NewInstance, PowerState};
use ember_engine::instances::{InstanceService, InstanceSettings};
use ember_engine::store::instances::{InstanceStore, SqlInstanceStore};
use ember_engine::store::migrations::Migrator;
use ember_runtime::database::{connect_and_migrate, testing::TestDatabase};
use ember_runtime::testing::wait_for;
use serde_json::{Map, json};
use tokio_util::sync::CancellationToken;

async fn an_instance_whose_machine_dies_is_error_with_the_reason(database: &TestDatabase) {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let store: Arc<dyn InstanceStore> = Arc::new(SqlInstanceStore::new(connection));
    let shutdown = CancellationToken::new();
    let mut compute = ComputeConfig::simulated(driver(Duration::from_millis(5)));
    compute.resync_interval = Duration::from_millis(200);
    let service = InstanceService::start_with(
        store.clone(),
        &compute,
        InstanceSettings::default(),
        shutdown.clone(),
    )
    .await
    .expect("service");
    let new = NewInstance {
        name: "doomed".into(),
        flavor: "m1.small".into(),
        image: "debian-12".into(),
        metadata: [
            (SIMULATE_EXIT_AFTER_MS_KEY.to_owned(), "150".to_owned()),
            (SIMULATE_EXIT_CODE_KEY.to_owned(), "139".to_owned()),
        ]
        .into(),
        workload: Default::default(),
        placement: Default::default(),
        delegation: None,
    };
    let created = service.create(&member(), new).await.expect("created");
    wait_for("the machine to die", Duration::from_secs(10), || async {
        service
            .get(&member(), created.uuid)
            .await
            .is_ok_and(|instance| instance.status == InstanceStatus::Error)
    })
    .await;
    let dead = service
        .get(&member(), created.uuid)
        .await
        .expect("instance");
    assert_eq!(dead.power_state, PowerState::Off);
    assert!(
        dead.status_reason
            .starts_with("the simulated machine died: killed by SIGSEGV (exit code 139)"),
        "{}",
        dead.status_reason
    );
    let events = service
        .events(&member(), created.uuid, 0)
        .await
        .expect("events");
    let kinds: Vec<&str> = events.iter().map(|event| event.kind.as_str()).collect();
    assert_eq!(kinds, ["build", "observed"], "{events:?}");
    assert_eq!(events[1].status, InstanceStatus::Error);
    assert_eq!(events[1].reason, dead.status_reason);

    // A decision made on an old revision is not written: what landed in
    // between stands.
    let stale = reconcile(
        &created,
        &MachineState::Exited(MachineExit::default()),
        "machine",
        ember_runtime::time::now(),
    );
    assert!(stale.is_none(), "BUILDING is never judged");
    let mut judged_active = dead.clone();
    judged_active.status = InstanceStatus::Active;
    judged_active.power_state = PowerState::On;
    judged_active.revision -= 1;
    let late = reconcile(
        &judged_active,
        &MachineState::Missing,
        "machine",
        ember_runtime::time::now(),
    )
    .expect("a contradiction");
    assert!(
        !store.record_observation(&late).await.expect("write"),
        "the revision moved on"
    );
    assert_eq!(
        store
            .list_instance_events(created.uuid, 10)
            .await
            .expect("events")
            .len(),
        2
    );

    // Started again, it is ACTIVE (and dies again later, as told).
    service
        .power(
            &member(),
            created.uuid,
            ember_engine::domain::instance::PowerAction::On,
        )
        .await
        .expect("power on an ERROR instance whose machine is off");
    wait_for("ACTIVE again", Duration::from_secs(10), || async {
        service
            .get(&member(), created.uuid)
            .await
            .is_ok_and(|instance| instance.status == InstanceStatus::Active)
    })
    .await;
    shutdown.cancel();
    service.drain().await;
}

#[tokio::test]
async fn an_instance_whose_machine_dies_is_error_with_the_reason_on_sqlite() {
    an_instance_whose_machine_dies_is_error_with_the_reason(&TestDatabase::sqlite().await).await;
}

#[tokio::test]
async fn an_instance_whose_machine_dies_is_error_with_the_reason_on_postgres() {
    if let Some(database) = TestDatabase::postgres().await {
        an_instance_whose_machine_dies_is_error_with_the_reason(&database).await;
    }
}

/// Nothing watching when the machine died: the resync finds it.
#[tokio::test]
async fn a_death_nobody_observed_is_found_by_the_resync() {
    let database = TestDatabase::sqlite().await;
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let store: Arc<dyn InstanceStore> = Arc::new(SqlInstanceStore::new(connection));
    let shutdown = CancellationToken::new();
    let driver = ComputeConfig::simulated(driver(Duration::from_millis(1)))
        .driver()
        .expect("driver");
    // No watcher runs: `new` starts none.
    let service = InstanceService::new(store, driver, shutdown.clone());
    let new = NewInstance {
        name: "unwatched".into(),
        flavor: "m1.small".into(),
        image: "debian-12".into(),
        metadata: [(SIMULATE_EXIT_AFTER_MS_KEY.to_owned(), "50".to_owned())].into(),
        workload: Default::default(),
        placement: Default::default(),
        delegation: None,
    };
    let created = service.create(&member(), new).await.expect("created");
    wait_for("ACTIVE", Duration::from_secs(10), || async {
        service
            .get(&member(), created.uuid)
            .await
            .is_ok_and(|instance| instance.status == InstanceStatus::Active)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(
        service
            .get(&member(), created.uuid)
            .await
            .expect("read")
            .status,
        InstanceStatus::Active,
        "nobody watched"
    );
    let watcher = service.watcher(Duration::from_secs(3600));
    assert_eq!(watcher.resync().await, Ok(1));
    let dead = service.get(&member(), created.uuid).await.expect("read");
    assert_eq!(dead.status, InstanceStatus::Error, "{}", dead.status_reason);
    assert_eq!(watcher.resync().await, Ok(0), "once is enough");
    shutdown.cancel();
    service.drain().await;
}

#[tokio::test]
async fn a_node_whose_machine_dies_goes_error_by_itself() {
    let database = TestDatabase::sqlite().await;
    let engine = Engine::start(
        &database,
        driver(Duration::from_millis(5)),
        DispatcherSettings::default(),
        true,
    )
    .await;
    engine
        .service
        .create_profile(
            &member(),
            "mortal",
            json!({"type": "ember.instance", "version": "1.0", "properties": {
                "flavor": "m1.small", "image": "debian-12",
                "metadata": {SIMULATE_EXIT_AFTER_MS_KEY: "400"}}}),
            Map::new(),
            false,
        )
        .await
        .expect("profile");
    let cluster = active_cluster(&engine, "mortal", (0, 5, 2)).await;
    wait_for("both nodes ERROR", Duration::from_secs(10), || async {
        members(&engine, cluster.id)
            .await
            .iter()
            .all(|node| node.status == NodeStatus::Error)
    })
    .await;
    for node in members(&engine, cluster.id).await {
        assert!(
            node.status_reason
                .contains("is ERROR: the simulated machine died: killed by SIGKILL"),
            "{}",
            node.status_reason
        );
    }
    let events = cluster_support::all_events(&engine, cluster.id).await;
    let checks = events
        .iter()
        .filter(|event| event.action == "NODE_CHECK" && event.status == "ERROR")
        .count();
    assert_eq!(checks, 2, "{events:?}");
    engine.kill().await;
}
