//! The plugin store's conformance suite, on SQLite and PostgreSQL.

use chrono::Duration;
use ember_plugin_registry::Error;
use std::sync::Arc;

use ember_plugin_registry::domain::{
    BreakerSettings, Circuit, FailureMode, NewPlugin, Operation, PluginUpdate,
};
use ember_plugin_registry::runner::RegistryCache;
use ember_plugin_registry::store::{PluginStore, SqlPluginStore, migrations::Migrator};
use ember_runtime::database::{connect_and_migrate, connect_reader, testing::TestDatabase};

/// The store as the service builds it: on a SQLite file, reads go through
/// connections of their own.
async fn store(database: &TestDatabase) -> SqlPluginStore {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let reader = connect_reader(&database.url, &connection)
        .await
        .expect("reader");
    SqlPluginStore::with_reader(connection, reader)
}

fn plugin(name: &str, ordinal: i32) -> NewPlugin {
    NewPlugin {
        name: name.to_owned(),
        endpoint: format!("http://127.0.0.1:7000/{name}"),
        ordinal,
        operations: vec![Operation::Create, Operation::Lock],
        project_ids: vec!["project-a".to_owned()],
        failure_mode: FailureMode::Warn,
        timeout_ms: Some(250),
        enabled: true,
        enforce: true,
        breaker_failures: None,
        breaker_cooldown_ms: None,
    }
}

async fn a_registered_plugin_reads_back_unchanged(database: &TestDatabase) {
    let store = store(database).await;
    let registered = plugin("quota", 5)
        .into_plugin(ember_runtime::time::now())
        .expect("valid");
    store
        .register_plugin(&registered)
        .await
        .expect("registered");
    let read = store
        .get_plugin("quota")
        .await
        .expect("read")
        .expect("present");
    assert_eq!(read, registered);
    assert!(store.get_plugin("absent").await.expect("read").is_none());
}

async fn plugins_list_in_calling_order(database: &TestDatabase) {
    let store = store(database).await;
    let now = ember_runtime::time::now();
    for (name, ordinal) in [("zeta", 1), ("beta", 2), ("alpha", 2), ("first", -5)] {
        let plugin = plugin(name, ordinal)
            .into_plugin(now + Duration::seconds(i64::from(ordinal)))
            .expect("valid");
        store.register_plugin(&plugin).await.expect("registered");
    }
    let names: Vec<String> = store
        .list_plugins()
        .await
        .expect("listed")
        .into_iter()
        .map(|plugin| plugin.name)
        .collect();
    assert_eq!(names, ["first", "zeta", "alpha", "beta"]);
}

async fn a_duplicate_name_is_a_conflict_and_keeps_the_first(database: &TestDatabase) {
    let store = store(database).await;
    let now = ember_runtime::time::now();
    store
        .register_plugin(&plugin("audit", 1).into_plugin(now).expect("valid"))
        .await
        .expect("registered");
    let error = store
        .register_plugin(&plugin("audit", 99).into_plugin(now).expect("valid"))
        .await
        .expect_err("duplicate");
    assert!(matches!(error, Error::Conflict(_)), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("\"audit\" is already registered")
    );
    let kept = store
        .get_plugin("audit")
        .await
        .expect("read")
        .expect("present");
    assert_eq!(kept.ordinal, 1);
}

async fn migrations_are_idempotent(database: &TestDatabase) {
    let store_one = store(database).await;
    store_one
        .register_plugin(
            &plugin("kept", 1)
                .into_plugin(ember_runtime::time::now())
                .expect("valid"),
        )
        .await
        .expect("registered");
    let store_two = store(database).await;
    assert_eq!(store_two.list_plugins().await.expect("listed").len(), 1);
}

async fn register(store: &SqlPluginStore, name: &str, ordinal: i32) {
    store
        .register_plugin(
            &plugin(name, ordinal)
                .into_plugin(ember_runtime::time::now())
                .expect("valid"),
        )
        .await
        .expect("registered");
}

async fn an_update_changes_only_the_named_fields(database: &TestDatabase) {
    let store = store(database).await;
    register(&store, "quota", 5).await;
    let before = store
        .get_plugin("quota")
        .await
        .expect("read")
        .expect("present");
    let later = before.created_at + Duration::seconds(3);
    let update = PluginUpdate {
        endpoint: Some("https://quota.example:7443".to_owned()),
        operations: Some(vec![]),
        project_ids: Some(vec!["team-b".to_owned(), "team-a".to_owned()]),
        failure_mode: Some(FailureMode::Fail),
        enabled: Some(false),
        ..PluginUpdate::default()
    };
    let updated = store
        .update_plugin("quota", &update, later)
        .await
        .expect("updated");
    let read = store
        .get_plugin("quota")
        .await
        .expect("read")
        .expect("present");
    assert_eq!(read, updated);
    assert_eq!(read.endpoint, "https://quota.example:7443");
    assert!(
        read.operations.is_empty(),
        "cleared filter = all operations"
    );
    assert_eq!(read.project_ids, ["team-a", "team-b"]);
    assert_eq!(read.failure_mode, FailureMode::Fail);
    assert!(!read.enabled);
    assert_eq!(read.ordinal, before.ordinal, "unnamed fields are kept");
    assert_eq!(read.timeout_ms, before.timeout_ms);
    assert_eq!(read.created_at, before.created_at);
    assert_eq!(read.updated_at, later);
}

async fn a_refused_update_changes_nothing(database: &TestDatabase) {
    let store = store(database).await;
    register(&store, "quota", 5).await;
    let before = store
        .get_plugin("quota")
        .await
        .expect("read")
        .expect("present");
    let generation = store.registry_generation().await.expect("generation");
    let error = store
        .update_plugin(
            "quota",
            &PluginUpdate {
                ordinal: Some(1),
                timeout_ms: Some(0),
                ..PluginUpdate::default()
            },
            ember_runtime::time::now(),
        )
        .await
        .expect_err("invalid");
    assert!(matches!(error, Error::InvalidInput(_)), "{error:?}");
    assert!(error.to_string().starts_with("timeout_ms"), "{error}");
    let error = store
        .update_plugin(
            "absent",
            &PluginUpdate::default(),
            ember_runtime::time::now(),
        )
        .await
        .expect_err("unknown");
    assert!(matches!(error, Error::NotFound(_)), "{error:?}");
    assert!(error.to_string().contains("\"absent\""), "{error}");
    assert_eq!(store.get_plugin("quota").await.expect("read"), Some(before));
    assert_eq!(
        store.registry_generation().await.expect("generation"),
        generation,
        "a refused write is rolled back entirely"
    );
}

async fn deregistering_removes_the_plugin_and_returns_it(database: &TestDatabase) {
    let store = store(database).await;
    register(&store, "quota", 5).await;
    register(&store, "audit", 1).await;
    let removed = store.deregister_plugin("quota").await.expect("removed");
    assert_eq!(removed.name, "quota");
    assert_eq!(removed.ordinal, 5);
    assert!(store.get_plugin("quota").await.expect("read").is_none());
    let names: Vec<String> = store
        .list_plugins()
        .await
        .expect("listed")
        .into_iter()
        .map(|plugin| plugin.name)
        .collect();
    assert_eq!(names, ["audit"]);
    let error = store
        .deregister_plugin("quota")
        .await
        .expect_err("already gone");
    assert!(matches!(error, Error::NotFound(_)), "{error:?}");
    // The name is free again.
    register(&store, "quota", 7).await;
}

async fn every_write_and_only_writes_advance_the_generation(database: &TestDatabase) {
    let store = store(database).await;
    let start = store.registry_generation().await.expect("generation");
    register(&store, "quota", 5).await;
    let after_register = store.registry_generation().await.expect("generation");
    assert!(after_register > start);
    store.list_plugins().await.expect("listed");
    store.get_plugin("quota").await.expect("read");
    assert_eq!(
        store.registry_generation().await.expect("generation"),
        after_register,
        "reads leave it alone"
    );
    let duplicate = plugin("quota", 1)
        .into_plugin(ember_runtime::time::now())
        .expect("valid");
    store
        .register_plugin(&duplicate)
        .await
        .expect_err("duplicate");
    assert_eq!(
        store.registry_generation().await.expect("generation"),
        after_register,
        "a refused registration is rolled back"
    );
    store
        .update_plugin(
            "quota",
            &PluginUpdate {
                ordinal: Some(2),
                ..PluginUpdate::default()
            },
            ember_runtime::time::now(),
        )
        .await
        .expect("updated");
    let after_update = store.registry_generation().await.expect("generation");
    assert!(after_update > after_register);
    store.deregister_plugin("quota").await.expect("removed");
    assert!(store.registry_generation().await.expect("generation") > after_update);
}

async fn a_write_on_one_replica_reaches_another_replicas_cache(database: &TestDatabase) {
    let writer = store(database).await;
    let reader: Arc<dyn PluginStore> = Arc::new(store(database).await);
    let cache = RegistryCache::new(reader);
    assert!(cache.current().await.expect("read").plugins.is_empty());
    let cached = cache.current().await.expect("read");
    assert!(
        !cached.reloaded,
        "an unchanged registry is served from the cache"
    );

    register(&writer, "quota", 5).await;
    let seen = cache.current().await.expect("read");
    assert!(seen.reloaded);
    assert_eq!(seen.plugins.len(), 1);

    writer
        .update_plugin(
            "quota",
            &PluginUpdate {
                enabled: Some(false),
                ..PluginUpdate::default()
            },
            ember_runtime::time::now(),
        )
        .await
        .expect("updated");
    assert!(!cache.current().await.expect("read").plugins[0].enabled);

    writer.deregister_plugin("quota").await.expect("removed");
    assert!(cache.current().await.expect("read").plugins.is_empty());
}

/// Failures recorded on one replica open the circuit every replica's
/// cache sees; one probe is claimed among them; an answer closes it.
async fn a_circuit_is_shared_by_every_replica(database: &TestDatabase) {
    let one = store(database).await;
    let other: Arc<dyn PluginStore> = Arc::new(store(database).await);
    let cache = RegistryCache::new(Arc::clone(&other));
    register(&one, "quota", 5).await;
    let settings = BreakerSettings {
        failures: 2,
        cooldown_ms: 1_000,
    };
    let now = ember_runtime::time::now();
    let first = one
        .record_failure("quota", settings, now, "timed out after 250 ms", false)
        .await
        .expect("recorded")
        .expect("registered");
    assert_eq!(first.circuit(now), Circuit::Closed);
    let seen = &cache.current().await.expect("read").plugins[0];
    assert_eq!(seen.circuit.consecutive_failures, 1);
    assert_eq!(seen.circuit.last_failure, "timed out after 250 ms");

    let second = one
        .record_failure("quota", settings, now, "refused", false)
        .await
        .expect("recorded")
        .expect("registered");
    let until = now + Duration::seconds(1);
    assert_eq!(second.circuit(now), Circuit::Open { since: now, until });
    let seen = cache.current().await.expect("read");
    assert!(seen.reloaded, "a circuit's change advances the generation");
    assert_eq!(
        seen.plugins[0].circuit.circuit(now),
        Circuit::Open { since: now, until }
    );

    // Not claimable while open; once half-open, by exactly one caller
    // until the claim lapses.
    let claim_until = until + Duration::seconds(6);
    assert!(
        !one.claim_probe("quota", now, claim_until)
            .await
            .expect("claim")
    );
    assert!(
        one.claim_probe("quota", until, claim_until)
            .await
            .expect("claim")
    );
    assert!(
        !other
            .claim_probe("quota", until, claim_until)
            .await
            .expect("claim")
    );
    assert!(
        other
            .claim_probe(
                "quota",
                claim_until + Duration::milliseconds(1),
                claim_until + Duration::seconds(6)
            )
            .await
            .expect("claim"),
        "a probe whose replica died is claimed again once its claim lapses"
    );

    one.record_success("quota").await.expect("recorded");
    let closed = &cache.current().await.expect("read").plugins[0];
    assert!(closed.circuit.is_clear(), "{:?}", closed.circuit);

    // A failure of a plug-in deregistered meanwhile leaves nothing behind.
    one.deregister_plugin("quota").await.expect("removed");
    assert_eq!(
        one.record_failure("quota", settings, now, "x", false)
            .await
            .expect("recorded"),
        None
    );
    register(&one, "quota", 5).await;
    assert!(
        one.get_plugin("quota")
            .await
            .expect("read")
            .expect("there")
            .circuit
            .is_clear(),
        "a plug-in registered again starts closed"
    );
}

/// An operator closes a circuit by asking, or by moving the plug-in.
async fn an_update_may_close_the_circuit(database: &TestDatabase) {
    let store = store(database).await;
    register(&store, "quota", 5).await;
    let settings = BreakerSettings {
        failures: 1,
        cooldown_ms: 60_000,
    };
    let now = ember_runtime::time::now();
    for update in [
        PluginUpdate {
            close_circuit: true,
            ..PluginUpdate::default()
        },
        PluginUpdate {
            endpoint: Some("http://127.0.0.1:7001".to_owned()),
            ..PluginUpdate::default()
        },
    ] {
        store
            .record_failure("quota", settings, now, "refused", false)
            .await
            .expect("recorded");
        let open = store
            .get_plugin("quota")
            .await
            .expect("read")
            .expect("there");
        assert!(matches!(open.circuit.circuit(now), Circuit::Open { .. }));
        // A change that does not move it keeps the circuit.
        let kept = store
            .update_plugin(
                "quota",
                &PluginUpdate {
                    ordinal: Some(6),
                    ..PluginUpdate::default()
                },
                now,
            )
            .await
            .expect("updated");
        assert!(matches!(kept.circuit.circuit(now), Circuit::Open { .. }));
        let updated = store
            .update_plugin("quota", &update, now)
            .await
            .expect("updated");
        assert!(updated.circuit.is_clear(), "{update:?}");
        assert!(
            store
                .get_plugin("quota")
                .await
                .expect("read")
                .expect("there")
                .circuit
                .is_clear(),
            "{update:?}"
        );
    }
}

ember_runtime::store_suite!(
    a_circuit_is_shared_by_every_replica,
    an_update_may_close_the_circuit,
    an_update_changes_only_the_named_fields,
    a_refused_update_changes_nothing,
    deregistering_removes_the_plugin_and_returns_it,
    every_write_and_only_writes_advance_the_generation,
    a_write_on_one_replica_reaches_another_replicas_cache,
    a_registered_plugin_reads_back_unchanged,
    plugins_list_in_calling_order,
    a_duplicate_name_is_a_conflict_and_keeps_the_first,
    migrations_are_idempotent,
);
