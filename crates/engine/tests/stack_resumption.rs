//! Resource steps in flight outside the engine survive the engine, on
//! SQLite and PostgreSQL: an engine dies while a server is being built, a
//! nested stack is being created, a wait condition waits, or a delete of
//! them runs; another engine resumes the operation, finds what the dead
//! one made (the instance and the nested stack have ids derived from the
//! resource's row) and finishes it — one instance, one nested stack, the
//! stack `*_COMPLETE`. A wait resumed keeps its original deadline, and a
//! type that cannot take a step over still fails the stack, saying why.
//!
//! "Dies" is as the database sees it: the engine's stack leases move on
//! and expire (its late writes are refused), and its instance tasks stop.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ember_engine::compute::simulated::{SimulatedComputeConfig, SimulatedDriver};
use ember_engine::domain::instance::InstanceStatus;
use ember_engine::domain::{ActionStatus, Stack};
use ember_engine::instances::{InstanceFilter, InstanceService};
use ember_engine::resources::wait_condition::WaitConditions;
use ember_engine::resources::{
    ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType, ResourceTypeRegistry,
    ResourceTypeSchema,
};
use ember_engine::stacks::{CreateStack, StackOperations, StackSettings, Swept};
use ember_engine::store::instances::SqlInstanceStore;
use ember_engine::store::signals::SqlWaitSignalStore;
use ember_engine::store::{EventListQuery, SqlStackStore, StackStore, migrations::Migrator};
use ember_runtime::Identity;
use ember_runtime::database::{connect_and_migrate, testing::TestDatabase};
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use tokio_util::sync::CancellationToken;

/// A type that acts outside its row and has not opted into taking steps
/// over: its create takes two seconds.
struct Outside {
    schema: ResourceTypeSchema,
}

impl Outside {
    fn new() -> Self {
        Outside {
            schema: ResourceTypeSchema {
                type_name: "Ember::Test::Outside",
                description: "Makes something outside the engine, slowly.",
                properties: Vec::new(),
                attributes: Vec::new(),
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
        }
    }
}

#[async_trait]
impl ResourceType for Outside {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        tokio::time::sleep(Duration::from_secs(2)).await;
        Ok(ResourceOutcome {
            physical_id: request.physical_resource_name(),
            ..ResourceOutcome::default()
        })
    }
}

/// One engine of two on one database: its stack operations and its own
/// instance service (its own simulated machines), whose tasks stop when
/// `instances_stop` is cancelled.
struct Engine {
    operations: Arc<StackOperations>,
    instances: Arc<InstanceService>,
    instances_stop: CancellationToken,
}

struct Replicas {
    connection: DatabaseConnection,
    store: Arc<dyn StackStore>,
    a: Engine,
    b: Engine,
}

fn alice() -> Identity {
    Identity::new("alice", "project-a", vec!["member".to_owned()])
}

fn bob() -> Identity {
    Identity::new("bob", "project-b", vec!["member".to_owned()])
}

async fn replicas(database: &TestDatabase, latency: Duration) -> Replicas {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let store: Arc<dyn StackStore> = Arc::new(SqlStackStore::new(connection.clone()));
    let engine = || {
        let instances_stop = CancellationToken::new();
        let driver = SimulatedDriver::new(SimulatedComputeConfig {
            build_latency: latency,
            power_latency: Duration::from_millis(5),
            reboot_latency: Duration::from_millis(5),
            delete_latency: latency,
            fail_builds_matching: "doomed".to_owned(),
        })
        .expect("driver");
        let instances = Arc::new(InstanceService::new(
            Arc::new(SqlInstanceStore::new(connection.clone())),
            Arc::new(driver),
            instances_stop.clone(),
        ));
        let conditions = WaitConditions::new(
            Arc::new(SqlWaitSignalStore::new(
                connection.clone(),
                connection.clone(),
            )),
            store.clone(),
            "http://ember.test",
        );
        let mut registry =
            ResourceTypeRegistry::with_compute(instances.clone()).with_wait_conditions(conditions);
        registry.register(Arc::new(Outside::new()));
        let operations = StackOperations::configured(
            store.clone(),
            Arc::new(registry),
            StackSettings {
                lease_ttl: Duration::from_secs(3),
                ..StackSettings::default()
            },
        );
        Engine {
            operations,
            instances,
            instances_stop,
        }
    };
    let (a, b) = (engine(), engine());
    Replicas {
        connection,
        store,
        a,
        b,
    }
}

impl Replicas {
    async fn create_on_a(&self, name: &str, template: &str, disable_rollback: bool) -> Stack {
        self.a
            .operations
            .create_stack(
                &alice(),
                CreateStack {
                    name: name.into(),
                    template: template.into(),
                    disable_rollback,
                    ..CreateStack::default()
                },
            )
            .await
            .expect("accepted")
    }

    /// A dies as far as the database can tell: the leases of `stacks` move
    /// on and expired long ago (A's late writes are refused), and its
    /// instance tasks stop (a machine it was building stays BUILDING).
    async fn a_dies(&self, stacks: &[uuid::Uuid]) {
        self.a.instances_stop.cancel();
        let long_ago = ember_runtime::time::now() - chrono::Duration::hours(1);
        for stack_id in stacks {
            self.run_sql(
                "UPDATE stack_leases SET generation = generation + 1, expires_at = $1 WHERE stack_id = $2",
                vec![long_ago.into(), (*stack_id).into()],
            )
            .await;
        }
    }

    async fn run_sql(&self, sql: &str, values: Vec<sea_orm::Value>) {
        let backend = self.connection.get_database_backend();
        let sql = match backend {
            sea_orm::DatabaseBackend::Sqlite => sql.replace("$1", "?").replace("$2", "?"),
            _ => sql.to_owned(),
        };
        self.connection
            .execute_raw(Statement::from_sql_and_values(backend, sql, values))
            .await
            .expect("executed");
    }

    /// How many rows `sql` (a `SELECT COUNT(*) … WHERE x = $1`) counts.
    async fn count(&self, sql: &str, value: sea_orm::Value) -> i64 {
        let backend = self.connection.get_database_backend();
        let sql = match backend {
            sea_orm::DatabaseBackend::Sqlite => sql.replace("$1", "?"),
            _ => sql.to_owned(),
        };
        let row = self
            .connection
            .query_one_raw(Statement::from_sql_and_values(backend, sql, vec![value]))
            .await
            .expect("counted")
            .expect("a row");
        row.try_get_by_index::<i64>(0).expect("a count")
    }

    /// Every instance ever recorded for alice's project, deleted ones too.
    async fn instances_made(&self) -> i64 {
        self.count(
            "SELECT COUNT(*) FROM instances WHERE project_id = $1",
            "project-a".into(),
        )
        .await
    }

    /// Every nested stack ever made under `stack`, deleted ones too.
    async fn nested_made(&self, stack: &Stack) -> i64 {
        self.count(
            "SELECT COUNT(*) FROM stacks WHERE parent_id = $1",
            stack.id.into(),
        )
        .await
    }

    /// The instances `who` can list now (deleted ones are never listed).
    async fn live_instances(
        &self,
        who: &Identity,
    ) -> Vec<ember_engine::domain::instance::Instance> {
        self.b
            .instances
            .list(who, &InstanceFilter::default())
            .await
            .expect("listed")
            .instances
    }

    /// B's sweep resumes exactly `resumed` orphans and fails none.
    async fn b_sweeps(&self, expected: Swept) {
        assert_eq!(
            self.b
                .operations
                .recover_orphaned_stacks()
                .await
                .expect("swept"),
            expected
        );
    }
}

/// The stack's row once its operation ended (at most 30 s).
async fn settled(store: &Arc<dyn StackStore>, stack_id: uuid::Uuid) -> Stack {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let current = store
            .get_stack(stack_id)
            .await
            .expect("read")
            .expect("the stack row");
        if current.status != ActionStatus::InProgress {
            return current;
        }
        assert!(
            Instant::now() < deadline,
            "stack {} still {} after 30 s",
            current.name,
            current.stack_status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (at most 10 s) until resource `name` of stack `stack_id` is
/// `state`.
async fn reaches(store: &Arc<dyn StackStore>, stack_id: uuid::Uuid, name: &str, state: &str) {
    for _ in 0..200 {
        let rows = store.list_resources(stack_id).await.expect("rows");
        if rows
            .iter()
            .any(|row| row.name == name && row.resource_status() == state)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("resource {name} of {stack_id} never reached {state}");
}

/// The id of the stack resource `name` of `stack` stands for.
async fn physical_id(store: &Arc<dyn StackStore>, stack: &Stack, name: &str) -> String {
    store
        .list_resources(stack.id)
        .await
        .expect("rows")
        .into_iter()
        .find(|row| row.name == name)
        .and_then(|row| row.physical_id)
        .unwrap_or_else(|| panic!("{name} has no physical id"))
}

/// The single nested stack under `stack` (waits up to 10 s for it).
async fn the_nested_stack(store: &Arc<dyn StackStore>, stack: &Stack) -> Stack {
    for _ in 0..200 {
        let children = store.list_child_stacks(stack.id).await.expect("children");
        if let [child] = children.as_slice() {
            return child.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{} never had one nested stack", stack.name);
}

/// Events of `stack_id` (its own and its resources') as `NAME STATE: reason`.
async fn events(store: &Arc<dyn StackStore>, stack_id: uuid::Uuid) -> Vec<String> {
    store
        .list_events(&EventListQuery {
            stack_ids: vec![stack_id],
            limit: 1000,
            ..EventListQuery::default()
        })
        .await
        .expect("events")
        .into_iter()
        .map(|event| {
            format!(
                "{} {}: {}",
                event.resource_name,
                event.resource_status(),
                event.reason
            )
        })
        .collect()
}

const SERVER_AND_NESTED: &str = r#"heat_template_version: 2021-04-16
resources:
  web:
    type: OS::Nova::Server
    properties: {flavor: m1.small, image: debian-12, name: web-1}
  child:
    type: OS::Heat::Stack
    properties:
      template: |
        heat_template_version: 2021-04-16
        resources:
          slow:
            type: OS::Heat::TestResource
            properties: {action_wait_secs: {create: 1.5, delete: 1.5}}
"#;

/// A dies while `web` is being built and `child`'s nested stack is being
/// created; B finds both and finishes them: one instance, one nested
/// stack, CREATE_COMPLETE.
async fn a_create_with_a_server_and_a_nested_stack_in_flight_is_finished_by_another_engine(
    database: &TestDatabase,
) {
    let replicas = replicas(database, Duration::from_millis(1500)).await;
    let stack = replicas
        .create_on_a("inflight", SERVER_AND_NESTED, true)
        .await;
    reaches(&replicas.store, stack.id, "web", "CREATE_IN_PROGRESS").await;
    let child = the_nested_stack(&replicas.store, &stack).await;
    reaches(&replicas.store, child.id, "slow", "CREATE_IN_PROGRESS").await;
    replicas.a_dies(&[stack.id, child.id]).await;
    // The nested stack is its parent's to continue, not resumed on its own.
    replicas
        .b_sweeps(Swept {
            resumed: 1,
            failed: 0,
        })
        .await;
    let done = settled(&replicas.store, stack.id).await;
    assert_eq!(
        done.stack_status(),
        "CREATE_COMPLETE",
        "{}",
        done.status_reason
    );
    // One instance, ACTIVE, the one `web` names; one nested stack.
    assert_eq!(replicas.instances_made().await, 1, "the instance made once");
    let live = replicas.live_instances(&alice()).await;
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].status, InstanceStatus::Active);
    assert_eq!(
        physical_id(&replicas.store, &stack, "web").await,
        live[0].uuid.to_string()
    );
    assert_eq!(
        replicas.nested_made(&stack).await,
        1,
        "the nested stack made once"
    );
    assert_eq!(
        physical_id(&replicas.store, &stack, "child").await,
        child.id.to_string()
    );
    let nested = settled(&replicas.store, child.id).await;
    assert_eq!(nested.stack_status(), "CREATE_COMPLETE");
    // Each step redone once, saying so; the nested stack's own operation
    // resumed by the parent's step.
    let parent_events = events(&replicas.store, stack.id).await;
    for name in ["web", "child"] {
        let resumed = parent_events
            .iter()
            .filter(|event| {
                event.starts_with(&format!(
                    "{name} CREATE_IN_PROGRESS: state changed (resumed"
                ))
            })
            .count();
        assert_eq!(resumed, 1, "{name}: {parent_events:#?}");
        let completed = parent_events
            .iter()
            .filter(|event| event.starts_with(&format!("{name} CREATE_COMPLETE")))
            .count();
        assert_eq!(completed, 1, "{name} completed once: {parent_events:#?}");
    }
    let nested_events = events(&replicas.store, child.id).await;
    assert!(
        nested_events
            .iter()
            .any(|event| event.contains("CREATE_IN_PROGRESS: Stack CREATE resumed")),
        "{nested_events:#?}"
    );
    // Another project sees nothing of it.
    assert!(replicas.live_instances(&bob()).await.is_empty());
    assert_eq!(
        replicas
            .b
            .operations
            .recover_orphaned_stacks()
            .await
            .expect("swept"),
        Swept::default()
    );
}

/// A dies while deleting `web` (the machine being torn down) and
/// `child`'s nested stack; B finishes both deletes: nothing left,
/// DELETE_COMPLETE.
async fn a_delete_with_a_server_and_a_nested_stack_in_flight_is_finished_by_another_engine(
    database: &TestDatabase,
) {
    let replicas = replicas(database, Duration::from_millis(1500)).await;
    let stack = replicas
        .create_on_a("deleting", SERVER_AND_NESTED, true)
        .await;
    let created = settled(&replicas.store, stack.id).await;
    assert_eq!(
        created.stack_status(),
        "CREATE_COMPLETE",
        "{}",
        created.status_reason
    );
    let child = the_nested_stack(&replicas.store, &stack).await;
    replicas
        .a
        .operations
        .delete_stack(&alice(), "deleting")
        .await
        .expect("delete accepted");
    reaches(&replicas.store, stack.id, "web", "DELETE_IN_PROGRESS").await;
    reaches(&replicas.store, child.id, "slow", "DELETE_IN_PROGRESS").await;
    replicas.a_dies(&[stack.id, child.id]).await;
    replicas
        .b_sweeps(Swept {
            resumed: 1,
            failed: 0,
        })
        .await;
    let done = settled(&replicas.store, stack.id).await;
    assert_eq!(
        done.stack_status(),
        "DELETE_COMPLETE",
        "{}",
        done.status_reason
    );
    assert!(
        replicas.live_instances(&alice()).await.is_empty(),
        "the instance is gone"
    );
    assert_eq!(
        replicas.instances_made().await,
        1,
        "and was never made again"
    );
    assert_eq!(
        settled(&replicas.store, child.id).await.stack_status(),
        "DELETE_COMPLETE"
    );
    assert!(
        replicas
            .store
            .list_child_stacks(stack.id)
            .await
            .expect("children")
            .is_empty()
    );
    assert_eq!(replicas.nested_made(&stack).await, 1);
}

/// A dies while `web`'s create is in flight and nothing else of the stack
/// runs; the build A started is never finished by A — B continues it.
/// Then B's resumed create of a server that fails to build ends
/// CREATE_FAILED with the build's reason: the work itself failed.
async fn a_server_that_fails_to_build_after_a_take_over_fails_the_stack_with_its_reason(
    database: &TestDatabase,
) {
    let replicas = replicas(database, Duration::from_millis(1500)).await;
    let template = SERVER_AND_NESTED
        .replace("name: web-1", "name: doomed-1")
        .replace("{action_wait_secs: {create: 1.5, delete: 1.5}}", "{}");
    let stack = replicas.create_on_a("doomed", &template, true).await;
    reaches(&replicas.store, stack.id, "web", "CREATE_IN_PROGRESS").await;
    replicas.a_dies(&[stack.id]).await;
    replicas
        .b_sweeps(Swept {
            resumed: 1,
            failed: 0,
        })
        .await;
    let done = settled(&replicas.store, stack.id).await;
    assert_eq!(done.stack_status(), "CREATE_FAILED");
    assert!(
        done.status_reason.contains("went into ERROR")
            && done.status_reason.contains("fail_builds_matching"),
        "{}",
        done.status_reason
    );
    assert_eq!(replicas.instances_made().await, 1, "not built twice");
}

/// A step of a type that cannot take it over still fails the stack, with
/// the resource, its type and why.
async fn a_step_of_a_type_that_cannot_take_it_over_fails_the_stack_with_why(
    database: &TestDatabase,
) {
    let replicas = replicas(database, Duration::from_millis(5)).await;
    let template =
        "heat_template_version: 2021-04-16\nresources:\n  thing: {type: Ember::Test::Outside}\n";
    let stack = replicas.create_on_a("refused", template, true).await;
    reaches(&replicas.store, stack.id, "thing", "CREATE_IN_PROGRESS").await;
    replicas.a_dies(&[stack.id]).await;
    replicas
        .b_sweeps(Swept {
            resumed: 0,
            failed: 1,
        })
        .await;
    let failed = settled(&replicas.store, stack.id).await;
    assert_eq!(failed.stack_status(), "CREATE_FAILED");
    assert!(
        failed.status_reason.contains(
            "not resumed: resource \"thing\" (Ember::Test::Outside) was in progress outside the engine and may be half made: a CREATE of Ember::Test::Outside is not taken over by another engine"
        ),
        "{}",
        failed.status_reason
    );
}

const WAITING: &str = r#"heat_template_version: 2021-04-16
resources:
  handle: {type: OS::Heat::WaitConditionHandle}
  waiting:
    type: OS::Heat::WaitCondition
    properties: {handle: {get_resource: handle}, timeout: 3}
"#;

/// A wait resumed by another engine keeps the deadline counted from when
/// it began: nobody signals, and the stack fails at about 3 s, not 3 s
/// after the take-over.
async fn a_wait_taken_over_keeps_its_original_deadline(database: &TestDatabase) {
    let replicas = replicas(database, Duration::from_millis(5)).await;
    let started = Instant::now();
    let stack = replicas.create_on_a("waiting", WAITING, true).await;
    reaches(&replicas.store, stack.id, "waiting", "CREATE_IN_PROGRESS").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    replicas.a_dies(&[stack.id]).await;
    replicas
        .b_sweeps(Swept {
            resumed: 1,
            failed: 0,
        })
        .await;
    let done = settled(&replicas.store, stack.id).await;
    let elapsed = started.elapsed();
    assert_eq!(done.stack_status(), "CREATE_FAILED");
    assert!(
        done.status_reason.contains("WaitConditionTimeout"),
        "{}",
        done.status_reason
    );
    assert!(
        elapsed < Duration::from_millis(4200),
        "the wait ran {elapsed:?}: its deadline was counted again from the take-over"
    );
    let resumed = events(&replicas.store, stack.id)
        .await
        .into_iter()
        .filter(|event| event.starts_with("waiting CREATE_IN_PROGRESS: state changed (resumed"))
        .count();
    assert_eq!(resumed, 1);
}

ember_runtime::store_suite!(
    a_create_with_a_server_and_a_nested_stack_in_flight_is_finished_by_another_engine,
    a_delete_with_a_server_and_a_nested_stack_in_flight_is_finished_by_another_engine,
    a_server_that_fails_to_build_after_a_take_over_fails_the_stack_with_its_reason,
    a_step_of_a_type_that_cannot_take_it_over_fails_the_stack_with_why,
    a_wait_taken_over_keeps_its_original_deadline,
);
