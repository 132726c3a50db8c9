//! The instance service over a real store, on SQLite and PostgreSQL: driver
//! tasks left in progress by a previous run are resumed at start, and a lock
//! racing a delete never lets both through.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ember_engine::Error;
use ember_engine::compute::simulated::SimulatedComputeConfig;
use ember_engine::domain::instance::{Instance, InstanceStatus, NewInstance, PowerState};
use ember_engine::instances::InstanceService;
use ember_engine::store::instances::{InstanceStore, SqlInstanceStore};
use ember_engine::store::migrations::Migrator;
use ember_runtime::Identity;
use ember_runtime::database::{connect_and_migrate, testing::TestDatabase};
use tokio_util::sync::CancellationToken;

async fn store(database: &TestDatabase) -> Arc<SqlInstanceStore> {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    Arc::new(SqlInstanceStore::new(connection))
}

fn quick_driver() -> SimulatedComputeConfig {
    SimulatedComputeConfig {
        build_latency: Duration::from_millis(10),
        power_latency: Duration::from_millis(10),
        reboot_latency: Duration::from_millis(10),
        delete_latency: Duration::from_millis(10),
        fail_builds_matching: String::new(),
    }
}

fn member(user: &str) -> Identity {
    Identity::new(user, "demo", vec!["member".to_owned()])
}

fn new_instance(name: &str) -> NewInstance {
    NewInstance {
        name: name.to_owned(),
        flavor: "m1.small".to_owned(),
        image: "debian-12".to_owned(),
        metadata: Default::default(),
    }
}

async fn wait_for_status(store: &SqlInstanceStore, instance: &Instance, status: InstanceStatus) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let current = store
            .get_instance(instance.uuid)
            .await
            .expect("read")
            .expect("exists");
        if current.status == status {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "instance {} still {:?}, not {status:?}",
            instance.name,
            current.status
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn tasks_left_in_progress_are_resumed_at_start(database: &TestDatabase) {
    let store = store(database).await;
    // A previous run recorded these and went away before the driver answered.
    let building = Instance::new_building(
        "demo",
        "demo",
        new_instance("building"),
        ember_runtime::time::now(),
    )
    .expect("valid");
    let powering_off = Instance {
        status: InstanceStatus::Active,
        power_state: PowerState::PoweringOff,
        ..Instance::new_building(
            "demo",
            "demo",
            new_instance("powering-off"),
            ember_runtime::time::now(),
        )
        .expect("valid")
    };
    store
        .insert_instances(&[building.clone(), powering_off.clone()])
        .await
        .expect("inserted");

    let shutdown = CancellationToken::new();
    let service = InstanceService::start(store.clone(), &quick_driver(), shutdown.clone())
        .await
        .expect("started");
    wait_for_status(&store, &building, InstanceStatus::Active).await;
    wait_for_status(&store, &powering_off, InstanceStatus::Stopped).await;
    shutdown.cancel();
    service.drain().await;
}

async fn a_lock_racing_a_delete_never_lets_both_through(database: &TestDatabase) {
    let store = store(database).await;
    let shutdown = CancellationToken::new();
    let service = InstanceService::start(store.clone(), &quick_driver(), shutdown.clone())
        .await
        .expect("started");
    let owner = member("demo");
    let colleague = member("bob");
    for round in 0..20 {
        let instance = service
            .create(&owner, new_instance(&format!("race-{round}")))
            .await
            .expect("created");
        let (locked, deleted) = tokio::join!(
            service.lock(&owner, instance.uuid, Some("keep".to_owned())),
            service.delete(&colleague, instance.uuid),
        );
        let stored = store
            .get_instance(instance.uuid)
            .await
            .expect("read")
            .expect("exists");
        match (&locked, &deleted) {
            (Ok(_), Err(Error::Conflict(message))) => {
                assert!(message.contains("is locked"), "{message}");
                assert!(stored.is_locked());
                assert!(!stored.status.is_going_away());
            }
            (Err(Error::Conflict(message)), Ok(_)) => {
                assert!(message.contains("cannot be locked"), "{message}");
                assert!(!stored.is_locked());
                assert!(stored.status.is_going_away());
            }
            other => panic!("round {round}: exactly one may win, got {other:?}"),
        }
    }
    shutdown.cancel();
    service.drain().await;
}

ember_runtime::store_suite!(
    tasks_left_in_progress_are_resumed_at_start,
    a_lock_racing_a_delete_never_lets_both_through,
);
