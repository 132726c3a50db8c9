//! The instance service over a real store, on SQLite and PostgreSQL: driver
//! tasks left in progress by a previous run are resumed at start, a lock
//! racing a delete never lets both through, a completed delete answers 404
//! (as Nova does; clients wait for it), and a create with a chosen uuid is
//! idempotent.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ember_engine::Error;
use ember_engine::audit::AuditTrail;
use ember_engine::compute::ComputeConfig;
use ember_engine::compute::simulated::SimulatedComputeConfig;
use ember_engine::domain::audit::{AuditOutcome, AuditQuery};
use ember_engine::domain::instance::{Instance, InstanceStatus, NewInstance, PowerState};
use ember_engine::instances::{InstanceFilter, InstanceService, InstanceSettings};
use ember_engine::store::audit::SqlAuditStore;
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
        workload: Default::default(),
        placement: Default::default(),
        delegation: None,
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
        // None once the delete has completed (it answers 404 then).
        let stored = store.get_instance(instance.uuid).await.expect("read");
        match (&locked, &deleted) {
            (Ok(_), Err(Error::Conflict(message))) => {
                assert!(message.contains("is locked"), "{message}");
                let stored = stored.expect("kept");
                assert!(stored.is_locked());
                assert!(!stored.status.is_going_away());
            }
            (Err(Error::Conflict(message)), Ok(_)) => {
                assert!(message.contains("cannot be locked"), "{message}");
                assert!(
                    stored
                        .is_none_or(|stored| !stored.is_locked() && stored.status.is_going_away())
                );
            }
            // The delete won and completed before the lock, decided again
            // on the changed instance, read it: it is gone.
            (Err(Error::NotFound(_)), Ok(_)) => assert!(stored.is_none()),
            other => panic!("round {round}: exactly one may win, got {other:?}"),
        }
    }
    shutdown.cancel();
    service.drain().await;
}

async fn a_completed_delete_answers_not_found(database: &TestDatabase) {
    let store = store(database).await;
    let shutdown = CancellationToken::new();
    let service = InstanceService::start(store.clone(), &quick_driver(), shutdown.clone())
        .await
        .expect("started");
    let owner = member("demo");
    let instance = service
        .create(&owner, new_instance("short-lived"))
        .await
        .expect("created");
    wait_for_status(&store, &instance, InstanceStatus::Active).await;
    let deleting = service
        .delete(&owner, instance.uuid)
        .await
        .expect("deleting");
    assert_eq!(deleting.status, InstanceStatus::Deleting);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match service.get(&owner, instance.uuid).await {
            Err(Error::NotFound(message)) => {
                assert!(message.contains(&instance.uuid.to_string()), "{message}");
                break;
            }
            Ok(seen) => {
                assert_eq!(seen.status, InstanceStatus::Deleting, "never DELETED");
                assert!(Instant::now() < deadline, "still {:?}", seen.status);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert!(matches!(
        service.delete(&owner, instance.uuid).await,
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        service.lock(&owner, instance.uuid, None).await,
        Err(Error::NotFound(_))
    ));
    for status in [None, Some(InstanceStatus::Deleted)] {
        let page = service
            .list(
                &owner,
                &InstanceFilter {
                    status,
                    ..Default::default()
                },
            )
            .await
            .expect("listed");
        assert!(
            page.instances
                .iter()
                .all(|listed| listed.uuid != instance.uuid),
            "listed after its delete ({status:?})"
        );
    }
    shutdown.cancel();
    service.drain().await;
}

async fn a_create_with_a_chosen_uuid_is_idempotent(database: &TestDatabase) {
    let store = store(database).await;
    let shutdown = CancellationToken::new();
    let service = InstanceService::start(store.clone(), &quick_driver(), shutdown.clone())
        .await
        .expect("started");
    let owner = member("demo");
    let uuid = uuid::Uuid::now_v7();
    let (first, second) = tokio::join!(
        service.create_with_uuid(&owner, uuid, new_instance("node-1")),
        service.create_with_uuid(&owner, uuid, new_instance("node-1")),
    );
    let (first, second) = (first.expect("created"), second.expect("found"));
    assert_eq!((first.uuid, second.uuid), (uuid, uuid));
    wait_for_status(&store, &first, InstanceStatus::Active).await;
    let again = service
        .create_with_uuid(&owner, uuid, new_instance("node-1"))
        .await
        .expect("found");
    assert_eq!(
        again.status,
        InstanceStatus::Active,
        "the existing one, as it is"
    );
    let listed = service
        .list(&owner, &InstanceFilter::default())
        .await
        .expect("listed");
    assert_eq!(listed.instances.len(), 1, "one instance, not two");
    // Another project cannot take it over, and a deleted one is not
    // created again.
    let stranger = Identity::new("eve", "other", vec!["member".to_owned()]);
    assert!(matches!(
        service
            .create_with_uuid(&stranger, uuid, new_instance("node-1"))
            .await,
        Err(Error::Conflict(_))
    ));
    service.delete(&owner, uuid).await.expect("deleting");
    let deadline = Instant::now() + Duration::from_secs(10);
    while service.get(&owner, uuid).await.is_ok() {
        assert!(Instant::now() < deadline, "not deleted");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let error = service
        .create_with_uuid(&owner, uuid, new_instance("node-1"))
        .await
        .expect_err("deleted");
    assert!(
        matches!(&error, Error::Conflict(message) if message.contains("was deleted")),
        "{error:?}"
    );
    shutdown.cancel();
    service.drain().await;
}

/// A lock with an expiry holds until then, can be renewed by its holder
/// (not by a colleague), and is lifted by the engine once — by an engine
/// started after it was taken, racing another — with one `lock_expired`
/// event; a delete refused while it held is admitted after.
async fn an_expired_instance_lock_is_lifted_once(database: &TestDatabase) {
    let store = store(database).await;
    let first_shutdown = CancellationToken::new();
    let first = InstanceService::start(store.clone(), &quick_driver(), first_shutdown.clone())
        .await
        .expect("started");
    let owner = member("demo");
    let colleague = member("bob");
    let instance = first
        .create(&owner, new_instance("expiring"))
        .await
        .expect("created");
    wait_for_status(&store, &instance, InstanceStatus::Active).await;
    let now = ember_runtime::time::now();
    let locked = first
        .lock_until(
            &owner,
            instance.uuid,
            Some("nightly window".to_owned()),
            Some(now + chrono::Duration::seconds(60)),
        )
        .await
        .expect("locked")
        .instance;
    let lock = locked.maintenance_lock.clone().expect("a lock");
    assert!(lock.describe().contains(" until "), "{}", lock.describe());
    // A colleague cannot renew it; its holder can — shorter, here.
    assert!(matches!(
        first
            .lock_until(&colleague, instance.uuid, None, Some(now + chrono::Duration::seconds(600)))
            .await,
        Err(Error::Conflict(message)) if message.contains("only its holder or an admin")
    ));
    let renewed = first
        .lock_until(
            &owner,
            instance.uuid,
            None,
            Some(now + chrono::Duration::seconds(2)),
        )
        .await
        .expect("renewed")
        .instance
        .maintenance_lock
        .expect("a lock");
    assert_eq!(renewed.locked_at, lock.locked_at);
    assert_eq!(renewed.reason.as_deref(), Some("nightly window"), "kept");
    assert!(matches!(
        first.delete(&colleague, instance.uuid).await,
        Err(Error::Conflict(message)) if message.contains("is locked")
    ));
    // The engine that took it goes; two others race to lift it.
    first_shutdown.cancel();
    first.drain().await;
    let shutdown = CancellationToken::new();
    // Both record in the audit trail from their first sweep, which runs
    // as they start: the lock expired while no engine ran.
    let compute = ComputeConfig::simulated(quick_driver());
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("connected");
    let trail = AuditTrail::new(Arc::new(SqlAuditStore::new(connection.clone(), connection)));
    let engine = || async {
        InstanceService::start_with(
            store.clone(),
            &compute,
            InstanceSettings {
                audit: Some(trail.clone()),
                ..InstanceSettings::default()
            },
            shutdown.clone(),
        )
        .await
        .expect("started")
    };
    let (second, third) = (engine().await, engine().await);
    let deadline = Instant::now() + Duration::from_secs(15);
    while store
        .get_instance(instance.uuid)
        .await
        .expect("read")
        .expect("exists")
        .is_locked()
    {
        assert!(Instant::now() < deadline, "the lock was not lifted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Sweeping again, on either engine, lifts nothing more: a sweep that
    // read the lock before it was lifted loses the conditional write.
    assert_eq!(second.lift_expired_locks().await.expect("sweep"), 0);
    assert_eq!(third.lift_expired_locks().await.expect("sweep"), 0);
    let expired: Vec<_> = second
        .events(&owner, instance.uuid, 100)
        .await
        .expect("events")
        .into_iter()
        .filter(|event| event.kind == "lock_expired")
        .collect();
    assert_eq!(expired.len(), 1, "{expired:?}");
    let audited = trail
        .list(
            &owner,
            AuditQuery {
                outcome: Some(AuditOutcome::Expired),
                limit: 100,
                ..AuditQuery::default()
            },
            false,
        )
        .await
        .expect("audit records");
    assert_eq!(audited.len(), 1, "one expiry, recorded once: {audited:?}");
    assert!(
        expired[0]
            .reason
            .starts_with("lock expired (was by owner \"demo\""),
        "{}",
        expired[0].reason
    );
    second
        .delete(&colleague, instance.uuid)
        .await
        .expect("admitted once the lock expired");
    shutdown.cancel();
}

ember_runtime::store_suite!(
    a_completed_delete_answers_not_found,
    a_create_with_a_chosen_uuid_is_idempotent,
    tasks_left_in_progress_are_resumed_at_start,
    a_lock_racing_a_delete_never_lets_both_through,
    an_expired_instance_lock_is_lifted_once,
);
