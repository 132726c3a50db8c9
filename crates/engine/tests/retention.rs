//! Retention against a real database (SQLite, and PostgreSQL when
//! EMBER_TEST_DATABASE_URL is set): what was deleted or ended before the
//! cutoff goes — a deleted stack with every row of its own, a deleted
//! cluster's ended actions and events, deleted instances with their events
//! — in batches, and nothing live is touched.

mod cluster_support;
mod stack_support;

use std::sync::Arc;
use std::time::Duration;

use cluster_support::{Engine, active_cluster, driver, instance_profile, member, quiescent};
use ember_engine::clusters::dispatcher::DispatcherSettings;
use ember_engine::resources::ResourceTypeRegistry;
use ember_engine::retention::{BATCH, Retention, RetentionSettings};
use ember_engine::stacks::{CreateStack, StackOperations};
use ember_engine::store::retention::RetentionStore;
use ember_engine::store::{SqlStackStore, StackStore, migrations::Migrator};
use ember_runtime::Identity;
use ember_runtime::database::{connect_and_migrate, statement, testing::TestDatabase};
use ember_runtime::testing::wait_for;
use sea_orm::{ConnectionTrait, DatabaseConnection};

async fn count(connection: &DatabaseConnection, sql: &str, id: uuid::Uuid) -> i64 {
    let backend = connection.get_database_backend();
    connection
        .query_one_raw(statement(backend, sql, vec![id.into()]))
        .await
        .expect("count")
        .expect("a row")
        .try_get_by_index::<i64>(0)
        .expect("a number")
}

async fn settled(operations: &StackOperations, caller: &Identity, name: &str) {
    stack_support::settled(operations, caller, name, Duration::from_secs(20)).await;
}

/// Creates the stack `name` of `template` and waits until it settles.
async fn created(
    operations: &StackOperations,
    caller: &Identity,
    name: &str,
    template: &str,
) -> ember_engine::domain::Stack {
    let stack = operations
        .create_stack(
            caller,
            CreateStack {
                name: name.to_owned(),
                template: template.to_owned(),
                ..CreateStack::default()
            },
        )
        .await
        .expect("created");
    settled(operations, caller, name).await;
    stack
}

async fn what_is_old_goes_and_what_lives_stays(database: &TestDatabase) {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let store: Arc<dyn StackStore> = Arc::new(SqlStackStore::new(connection.clone()));
    let operations = StackOperations::new(store, Arc::new(ResourceTypeRegistry::builtin()));
    let caller = member();
    let template = "heat_template_version: 2021-04-16\nresources:\n  a: {type: OS::Heat::None}\n  b: {type: OS::Heat::RandomString}\n";
    let mut ids = Vec::new();
    for name in ["gone", "kept"] {
        ids.push(created(&operations, &caller, name, template).await.id);
    }
    operations
        .delete_stack(&caller, "gone")
        .await
        .expect("deleted");
    wait_for("the delete", Duration::from_secs(20), || async {
        operations.find_stack(&caller, "gone").await.is_err()
    })
    .await;

    // A cluster made and deleted: its actions ended, its instances deleted.
    let engine = Engine::start(
        database,
        driver(Duration::from_millis(5)),
        DispatcherSettings::default(),
        true,
    )
    .await;
    instance_profile(&engine, "web").await;
    let cluster = active_cluster(&engine, "web", (0, 4, 2)).await;
    engine
        .service
        .delete_cluster(&caller, &cluster.id.to_string())
        .await
        .expect("delete");
    wait_for("the cluster delete", Duration::from_secs(20), || async {
        quiescent(&engine, cluster.id).await
            && engine
                .service
                .find_cluster(&caller, &cluster.id.to_string())
                .await
                .is_err()
    })
    .await;
    let actions = "SELECT COUNT(*) FROM cluster_actions WHERE cluster_id = $1";
    assert!(count(&connection, actions, cluster.id).await > 0);

    // Retention kept for a week: nothing is old enough yet.
    let retention = Retention::new(
        RetentionStore::new(connection.clone()),
        RetentionSettings::default(),
    );
    let purged = retention.purge_expired().await.expect("purge");
    assert_eq!(purged, Default::default());
    let stacks = "SELECT COUNT(*) FROM stacks WHERE id = $1";
    assert_eq!(count(&connection, stacks, ids[0]).await, 1, "kept a week");

    // An admin's purge of what ended more than a second ago, once it has.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let refused = retention
        .purge_now(&caller, Duration::from_secs(1))
        .await
        .expect_err("members do not purge");
    assert!(
        matches!(refused, ember_engine::Error::Forbidden(_)),
        "{refused:?}"
    );
    let admin = Identity::new("root", "admin", vec!["admin".to_owned()]);
    let purged = retention
        .purge_now(&admin, Duration::from_secs(1))
        .await
        .expect("purge");
    assert_eq!(purged.stacks, 1, "{purged:?}");
    assert!(
        purged.cluster_actions > 0 && purged.cluster_events > 0,
        "{purged:?}"
    );
    assert_eq!(purged.instances, 2, "{purged:?}");
    for table in [
        "stacks WHERE id",
        "resources WHERE stack_id",
        "events WHERE stack_id",
    ] {
        let sql = format!("SELECT COUNT(*) FROM {table} = $1");
        assert_eq!(
            count(&connection, &sql, ids[0]).await,
            0,
            "{table} of the deleted stack"
        );
        assert!(
            count(&connection, &sql, ids[1]).await > 0,
            "{table} of the live stack"
        );
    }
    assert_eq!(count(&connection, actions, cluster.id).await, 0);
    let events = "SELECT COUNT(*) FROM cluster_events WHERE cluster_id = $1";
    assert_eq!(count(&connection, events, cluster.id).await, 0);
    // The live stack still works.
    operations
        .delete_stack(&caller, "kept")
        .await
        .expect("the live stack is whole");
    engine.kill().await;
}

/// More than a batch goes, batch by batch.
async fn more_than_a_batch_goes_in_batches(database: &TestDatabase) {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let store: Arc<dyn StackStore> = Arc::new(SqlStackStore::new(connection.clone()));
    let operations = StackOperations::new(store, Arc::new(ResourceTypeRegistry::builtin()));
    let caller = member();
    let template = "heat_template_version: 2021-04-16\nresources:\n  a: {type: OS::Heat::None}\n";
    let stacks = usize::try_from(BATCH).expect("small") + 5;
    for index in 0..stacks {
        let name = format!("s{index}");
        created(&operations, &caller, &name, template).await;
        operations
            .delete_stack(&caller, &name)
            .await
            .expect("deleted");
    }
    wait_for("every delete", Duration::from_secs(60), || async {
        operations
            .list_stacks(&caller, &Default::default())
            .await
            .is_ok_and(|listed| listed.is_empty())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let retention = Retention::new(
        RetentionStore::new(connection),
        RetentionSettings::default(),
    );
    let admin = Identity::new("root", "admin", vec!["admin".to_owned()]);
    let purged = retention
        .purge_now(&admin, Duration::from_secs(1))
        .await
        .expect("purge");
    assert_eq!(purged.stacks, u64::try_from(stacks).expect("small"));
}

/// A live stack keeps its newest events only (Heat's
/// `max_events_per_stack`); another stack's are not touched.
async fn a_live_stack_keeps_its_newest_events(database: &TestDatabase) {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let store: Arc<dyn StackStore> = Arc::new(SqlStackStore::new(connection.clone()));
    let operations = StackOperations::new(store, Arc::new(ResourceTypeRegistry::builtin()));
    let caller = member();
    let resources: String = (0..10)
        .map(|index| format!("  r{index}: {{type: OS::Heat::None}}\n"))
        .collect();
    let mut ids = Vec::new();
    for name in ["busy", "quiet"] {
        let template = if name == "busy" {
            format!("heat_template_version: 2021-04-16\nresources:\n{resources}")
        } else {
            "heat_template_version: 2021-04-16\nresources:\n  a: {type: OS::Heat::None}\n"
                .to_owned()
        };
        ids.push(created(&operations, &caller, name, &template).await.id);
    }
    let events = "SELECT COUNT(*) FROM events WHERE stack_id = $1";
    assert!(count(&connection, events, ids[0]).await > 20);
    let quiet_before = count(&connection, events, ids[1]).await;
    let newest = "SELECT COUNT(*) FROM events WHERE stack_id = $1 AND reason = 'Stack CREATE completed successfully'";
    assert_eq!(count(&connection, newest, ids[0]).await, 1);
    let retention = Retention::new(
        RetentionStore::new(connection.clone()),
        RetentionSettings {
            events_per_stack: Some(5),
            ..RetentionSettings::default()
        },
    );
    let purged = retention.purge_expired().await.expect("purge");
    assert!(purged.events > 15, "{purged:?}");
    assert_eq!(count(&connection, events, ids[0]).await, 5);
    assert_eq!(
        count(&connection, newest, ids[0]).await,
        1,
        "the newest kept"
    );
    assert_eq!(
        count(&connection, events, ids[1]).await,
        quiet_before.min(5)
    );
}

ember_runtime::store_suite!(
    what_is_old_goes_and_what_lives_stays,
    more_than_a_batch_goes_in_batches,
    a_live_stack_keeps_its_newest_events
);
