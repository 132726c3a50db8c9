//! Maintenance locks of clusters on SQLite and PostgreSQL: a locked
//! cluster refuses scaling, resize, node changes, recover and delete with
//! a conflict naming the lock, and takes check, renewal and unlock; an
//! admin's lock is the admin's; level `all` locks the members' instances
//! and its unlock lifts exactly those; an expiry is lifted by the engine
//! once — by an engine started after the lock was taken too — with one
//! event.

mod cluster_support;

use std::time::Duration;

use cluster_support::{
    Engine, active_cluster, all_events, all_instances, cluster, driver, instance_profile, member,
};
use ember_engine::clusters::dispatcher::DispatcherSettings;
use ember_engine::clusters::{ClusterLockRequest, HealthAction, ResizeRequest};
use ember_engine::domain::cluster::ClusterLockLevel;
use ember_engine::error::Error;
use ember_runtime::Identity;
use ember_runtime::database::testing::TestDatabase;
use ember_runtime::testing::wait_for;

async fn engine(database: &TestDatabase) -> Engine {
    Engine::start(
        database,
        driver(Duration::from_millis(5)),
        DispatcherSettings::default(),
        true,
    )
    .await
}

fn admin() -> Identity {
    Identity::new("ops", "demo", vec!["admin".to_owned()])
}

fn lock(level: ClusterLockLevel, reason: &str, expires_in: Option<i64>) -> ClusterLockRequest {
    ClusterLockRequest {
        level,
        reason: Some(reason.to_owned()),
        expires_in,
        expires_at: None,
    }
}

/// The conflict's message, which must name the lock.
fn refused_by_the_lock(result: ember_engine::error::Result<impl std::fmt::Debug>) -> String {
    match result {
        Err(Error::Conflict(message)) => {
            assert!(
                message.contains("is locked (level ") && message.contains("unlock it first"),
                "{message}"
            );
            message
        }
        other => panic!("expected a conflict naming the lock, got {other:?}"),
    }
}

async fn a_locked_cluster_refuses_every_change_until_unlocked(database: &TestDatabase) {
    let engine = engine(database).await;
    instance_profile(&engine, "web").await;
    let web = active_cluster(&engine, "web", (1, 5, 2)).await;
    let id = web.id.to_string();
    let service = &engine.service;
    let locked = service
        .lock_cluster(
            &member(),
            &id,
            lock(ClusterLockLevel::Clusters, "database maintenance", None),
        )
        .await
        .expect("locked");
    let held = locked.maintenance_lock.expect("a lock");
    assert_eq!(held.locked_by_user, "demo");
    assert!(!held.locked_by_admin);
    assert_eq!(
        cluster(&engine, web.id).await.maintenance_lock,
        Some(held.clone()),
        "stored"
    );

    let message = refused_by_the_lock(service.scale(&member(), &id, true, 1).await);
    assert!(message.contains("database maintenance"), "{message}");
    refused_by_the_lock(service.scale(&member(), &id, false, 1).await);
    refused_by_the_lock(
        service
            .resize(
                &member(),
                &id,
                ResizeRequest {
                    adjustment: None,
                    min_size: Some(0),
                    max_size: None,
                    min_step: 0,
                    strict: true,
                },
            )
            .await,
    );
    refused_by_the_lock(
        service
            .check_or_recover(&member(), &id, HealthAction::Recover)
            .await,
    );
    refused_by_the_lock(service.delete_cluster(&admin(), &id).await);
    // A check only reads.
    service
        .check_or_recover(&member(), &id, HealthAction::Check)
        .await
        .expect("a check passes the lock");
    // Unchanged: still two members.
    assert_eq!(cluster(&engine, web.id).await.desired_capacity, 2);

    // Another project does not find it to lock or unlock.
    let outsider = Identity::new("mallory", "other", vec!["member".to_owned()]);
    assert!(matches!(
        service.unlock_cluster(&outsider, &id).await,
        Err(Error::NotFound(_))
    ));

    // Unlocked: the events say so, and scaling works again.
    let unlocked = service
        .unlock_cluster(&member(), &id)
        .await
        .expect("unlocked");
    assert!(unlocked.maintenance_lock.is_none());
    assert!(matches!(
        service.unlock_cluster(&member(), &id).await,
        Err(Error::Conflict(message)) if message.contains("is not locked")
    ));
    service
        .scale(&member(), &id, true, 1)
        .await
        .expect("scaling is admitted again");
    let events = all_events(&engine, web.id).await;
    let lock_events: Vec<_> = events
        .iter()
        .filter(|event| event.action == "CLUSTER_LOCK" || event.action == "CLUSTER_UNLOCK")
        .map(|event| (event.action.as_str(), event.user_id.as_str()))
        .collect();
    assert_eq!(
        lock_events,
        vec![("CLUSTER_LOCK", "demo"), ("CLUSTER_UNLOCK", "demo")]
    );
}

async fn an_admins_lock_is_changed_and_lifted_only_by_an_admin(database: &TestDatabase) {
    let engine = engine(database).await;
    instance_profile(&engine, "db").await;
    let db = active_cluster(&engine, "db", (0, 3, 1)).await;
    let id = db.id.to_string();
    let service = &engine.service;
    service
        .lock_cluster(
            &admin(),
            &id,
            lock(ClusterLockLevel::Clusters, "audit", Some(3600)),
        )
        .await
        .expect("locked by an admin");
    assert!(matches!(
        service.unlock_cluster(&member(), &id).await,
        Err(Error::Forbidden(message)) if message.contains("only an admin")
    ));
    assert!(matches!(
        service
            .lock_cluster(&member(), &id, lock(ClusterLockLevel::All, "mine", None))
            .await,
        Err(Error::Forbidden(_))
    ));
    // The admin renews it: same holder and time, a later expiry.
    let before = cluster(&engine, db.id)
        .await
        .maintenance_lock
        .expect("lock");
    let renewed = service
        .lock_cluster(
            &admin(),
            &id,
            lock(ClusterLockLevel::Clusters, "audit, longer", Some(7200)),
        )
        .await
        .expect("renewed")
        .maintenance_lock
        .expect("lock");
    assert_eq!(renewed.locked_at, before.locked_at);
    assert!(renewed.expires_at > before.expires_at);
    assert_eq!(renewed.reason.as_deref(), Some("audit, longer"));
    // Bad requests name what is wrong.
    for (request, expected) in [
        (
            lock(ClusterLockLevel::Clusters, "", None),
            "reason: must be 1-255 characters",
        ),
        (
            lock(ClusterLockLevel::Clusters, "x", Some(0)),
            "expires_in: 0 is not a positive",
        ),
    ] {
        match service.lock_cluster(&admin(), &id, request).await {
            Err(Error::InvalidInput(message)) => assert!(message.contains(expected), "{message}"),
            other => panic!("expected {expected}, got {other:?}"),
        }
    }
    service
        .unlock_cluster(&admin(), &id)
        .await
        .expect("unlocked");
}

async fn level_all_locks_the_members_instances_and_unlock_lifts_exactly_those(
    database: &TestDatabase,
) {
    let engine = engine(database).await;
    instance_profile(&engine, "app").await;
    let app = active_cluster(&engine, "app", (0, 5, 3)).await;
    let id = app.id.to_string();
    // One member's instance is locked by its owner already: not the
    // cluster lock's to lift.
    let instances = all_instances(&engine).await;
    assert_eq!(instances.len(), 3);
    let already = instances[0].uuid;
    engine
        .instances
        .lock(&member(), already, Some("someone else's".to_owned()))
        .await
        .expect("locked by its owner");
    let held = engine
        .service
        .lock_cluster(
            &member(),
            &id,
            lock(ClusterLockLevel::All, "patching", None),
        )
        .await
        .expect("locked")
        .maintenance_lock
        .expect("lock");
    assert_eq!(held.locked_instances.len(), 2, "{held:?}");
    assert!(!held.locked_instances.contains(&already));
    for instance in all_instances(&engine).await {
        assert!(
            instance.maintenance_lock.is_some(),
            "{} locked",
            instance.uuid
        );
    }
    engine
        .service
        .unlock_cluster(&member(), &id)
        .await
        .expect("unlocked");
    for instance in all_instances(&engine).await {
        assert_eq!(
            instance.maintenance_lock.is_some(),
            instance.uuid == already,
            "{}: only the instance locked before stays locked",
            instance.uuid
        );
    }
}

async fn an_expired_lock_is_lifted_once_even_by_an_engine_started_after_it(
    database: &TestDatabase,
) {
    let first = engine(database).await;
    instance_profile(&first, "batch").await;
    let batch = active_cluster(&first, "batch", (0, 3, 1)).await;
    let id = batch.id.to_string();
    first
        .service
        .lock_cluster(
            &member(),
            &id,
            lock(ClusterLockLevel::All, "nightly window", Some(2)),
        )
        .await
        .expect("locked");
    // The engine that took it goes away; two others start (replicas
    // racing to lift it).
    first.kill().await;
    let second = engine(database).await;
    let third = engine(database).await;
    wait_for("the lock lifted", Duration::from_secs(15), || async {
        cluster(&second, batch.id).await.maintenance_lock.is_none()
    })
    .await;
    // Sweeping again, on either engine, lifts nothing more: a sweep that
    // read the lock before it was lifted loses the conditional write.
    assert_eq!(second.service.lift_expired_locks().await.expect("sweep"), 0);
    assert_eq!(third.service.lift_expired_locks().await.expect("sweep"), 0);
    let expiries: Vec<_> = all_events(&second, batch.id)
        .await
        .into_iter()
        .filter(|event| event.action == "CLUSTER_UNLOCK")
        .collect();
    assert_eq!(expiries.len(), 1, "{expiries:?}");
    // And one audit record of it, in the lift's transaction.
    let records = third
        .audit
        .list(
            &admin(),
            ember_engine::domain::audit::AuditQuery {
                target_id: Some(id.clone()),
                outcome: Some(ember_engine::domain::audit::AuditOutcome::Expired),
                ..Default::default()
            },
            true,
        )
        .await
        .expect("audit");
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0].operation, "unlock");
    assert_eq!(records[0].user_id, "demo", "the lock's holder");
    assert!(
        expiries[0]
            .status_reason
            .starts_with("lock expired (was level all"),
        "{}",
        expiries[0].status_reason
    );
    // Its instance lock went with it, and scaling is admitted again.
    for instance in all_instances(&second).await {
        assert!(instance.maintenance_lock.is_none(), "{}", instance.uuid);
    }
    third
        .service
        .scale(&member(), &id, true, 1)
        .await
        .expect("admitted after the expiry");
}

ember_runtime::store_suite!(
    a_locked_cluster_refuses_every_change_until_unlocked,
    an_admins_lock_is_changed_and_lifted_only_by_an_admin,
    level_all_locks_the_members_instances_and_unlock_lifts_exactly_those,
    an_expired_lock_is_lifted_once_even_by_an_engine_started_after_it,
);
