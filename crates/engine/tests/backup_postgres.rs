//! A PostgreSQL deployment is backed up and restored with PostgreSQL's own
//! tools, as the docs say (docs/guide/deployment.md): `pg_dump -Fc` of
//! the engine's schema while it is in use, the schema lost, `pg_restore`,
//! and the engine works on it again. Runs when EMBER_TEST_DATABASE_URL
//! names a server (as `./scripts/test` and CI set it); otherwise it says
//! loudly that it did not run.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ember_engine::domain::ActionStatus;
use ember_engine::resources::ResourceTypeRegistry;
use ember_engine::stacks::{CreateStack, StackOperations};
use ember_engine::store::{SqlStackStore, StackStore, migrations::Migrator};
use ember_runtime::Identity;
use ember_runtime::database::{connect_and_migrate, testing::TestDatabase};

fn operations(connection: sea_orm::DatabaseConnection) -> Arc<StackOperations> {
    let store: Arc<dyn StackStore> = Arc::new(SqlStackStore::new(connection));
    StackOperations::new(store, Arc::new(ResourceTypeRegistry::builtin()))
}

fn run(command: &mut Command) {
    let output = command.output().unwrap_or_else(|error| {
        panic!("{command:?} cannot run ({error}): install PostgreSQL's client tools")
    });
    assert!(
        output.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn pg_dump_and_pg_restore_bring_the_engines_schema_back() {
    let Some(database) = TestDatabase::postgres().await else {
        eprintln!(
            "SKIPPED: EMBER_TEST_DATABASE_URL is not set: the PostgreSQL backup test did not run"
        );
        return;
    };
    let base = std::env::var("EMBER_TEST_DATABASE_URL").expect("set");
    let schema = database
        .url
        .rsplit("search_path]=")
        .next()
        .expect("a schema")
        .to_owned();
    let caller = Identity::new("alice", "demo", vec!["member".to_owned()]);
    let template = "heat_template_version: 2021-04-16\nresources:\n  word: {type: OS::Heat::RandomString}\noutputs:\n  word: {value: {get_attr: [word, value]}}\n";
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let engine = operations(connection.clone());
    engine
        .create_stack(
            &caller,
            CreateStack {
                name: "kept".into(),
                template: template.into(),
                ..CreateStack::default()
            },
        )
        .await
        .expect("created");
    let deadline = Instant::now() + Duration::from_secs(20);
    let stack = loop {
        let stack = engine.find_stack(&caller, "kept").await.expect("stack");
        if stack.status != ActionStatus::InProgress {
            break stack;
        }
        assert!(Instant::now() < deadline, "still in progress");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let word = engine.output(&stack, "word").await.expect("output").value;

    let dump = tempfile::tempdir().expect("tempdir");
    let file = dump.path().join("engine.dump");
    run(Command::new("pg_dump")
        .args(["--format=custom", "--schema", &schema, "--file"])
        .arg(&file)
        .arg(&base));
    connection.close().await.expect("closed");
    database.drop_schema().await;
    run(Command::new("pg_restore")
        .args(["--dbname", &base, "--no-owner"])
        .arg(&file));

    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("the restored schema is current");
    let engine = operations(connection);
    let restored = engine.find_stack(&caller, "kept").await.expect("restored");
    assert_eq!(restored.stack_status(), "CREATE_COMPLETE");
    assert_eq!(
        engine
            .output(&restored, "word")
            .await
            .expect("output")
            .value,
        word
    );
    engine.delete_stack(&caller, "kept").await.expect("deletes");
    database.drop_schema().await;
}
