//! The plugin store's conformance suite, on SQLite and PostgreSQL.

use chrono::Duration;
use ember_plugin_registry::Error;
use ember_plugin_registry::domain::{FailureMode, NewPlugin, Operation};
use ember_plugin_registry::store::{PluginStore, SqlPluginStore, migrations::Migrator};
use ember_runtime::database::{connect_and_migrate, testing::TestDatabase};

async fn store(database: &TestDatabase) -> SqlPluginStore {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    SqlPluginStore::new(connection)
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

ember_runtime::store_suite!(
    a_registered_plugin_reads_back_unchanged,
    plugins_list_in_calling_order,
    a_duplicate_name_is_a_conflict_and_keeps_the_first,
    migrations_are_idempotent,
);
