//! Resource steps in flight outside the engine survive the engine, on
//! SQLite and PostgreSQL: an engine dies while a server is being built,
//! powered off or on, a nested stack is being created, suspended, resumed
//! or checked, a wait condition waits, a software deployment waits for
//! its agent, software configs are being made, a delete of them runs, or
//! a maintenance lock or unlock reaches a server and a nested stack;
//! another engine resumes the operation, finds what the dead one made or
//! started (instances, nested stacks, deployments and configs have ids
//! derived from the resource's row) and finishes it — one instance, one
//! nested stack whose own operation is continued rather than started
//! again, no config made twice, no power action or deployment trigger
//! asked twice, the stack `*_COMPLETE`. A wait resumed keeps its original deadline, and a type
//! that cannot take a step over still fails the stack, saying why.
//!
//! "Dies" is as the database sees it: the engine's stack leases move on
//! and expire (its late writes are refused), and its instance tasks stop.

mod stack_support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ember_engine::compute::simulated::{SimulatedComputeConfig, SimulatedDriver};
use ember_engine::domain::instance::{InstanceStatus, PowerState};
use ember_engine::domain::software::{DeploymentStatus, SoftwareDeployment};
use ember_engine::domain::{Event, LockLevel, Stack, StackWideAction};
use ember_engine::instances::{InstanceFilter, InstanceService};
use ember_engine::resources::wait_condition::WaitConditions;
use ember_engine::resources::{
    ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType, ResourceTypeRegistry,
    ResourceTypeSchema,
};
use ember_engine::software::SoftwareService;
use ember_engine::stacks::{CreateStack, StackOperations, StackSettings, Swept};
use ember_engine::store::instances::SqlInstanceStore;
use ember_engine::store::signals::SqlWaitSignalStore;
use ember_engine::store::software::SqlSoftwareStore;
use ember_engine::store::{EventListQuery, SqlStackStore, StackStore, migrations::Migrator};
use ember_runtime::Identity;
use ember_runtime::database::{connect_and_migrate, testing::TestDatabase};
use ember_runtime::testing::wait_for;
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

/// One engine of two on one database: its stack operations, its own
/// instance service (its own simulated machines), whose tasks stop when
/// `instances_stop` is cancelled, and its software configuration service
/// (what an agent signals).
struct Engine {
    operations: Arc<StackOperations>,
    instances: Arc<InstanceService>,
    instances_stop: CancellationToken,
    software: Arc<SoftwareService>,
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

/// Two engines whose machines build and are deleted in `latency`, and
/// power on and off at once.
async fn replicas(database: &TestDatabase, latency: Duration) -> Replicas {
    replicas_powering(database, latency, Duration::from_millis(5)).await
}

/// Two engines whose machines build and are deleted in `latency`, and
/// power on or off in `power_latency`.
async fn replicas_powering(
    database: &TestDatabase,
    latency: Duration,
    power_latency: Duration,
) -> Replicas {
    replicas_timed(database, latency, power_latency, Duration::from_secs(3600)).await
}

/// As [`replicas_powering`], whose operations end at `action_timeout`.
async fn replicas_timed(
    database: &TestDatabase,
    latency: Duration,
    power_latency: Duration,
    action_timeout: Duration,
) -> Replicas {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let store: Arc<dyn StackStore> = Arc::new(SqlStackStore::new(connection.clone()));
    let engine = || {
        let instances_stop = CancellationToken::new();
        let driver = SimulatedDriver::new(SimulatedComputeConfig {
            build_latency: latency,
            power_latency,
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
        let software = SoftwareService::new(
            Arc::new(SqlSoftwareStore::new(
                connection.clone(),
                connection.clone(),
            )),
            conditions.clone(),
            None,
        );
        let mut registry = ResourceTypeRegistry::with_compute(instances.clone())
            .with_wait_conditions(conditions.clone())
            .with_software(software.clone(), conditions);
        registry.register(Arc::new(Outside::new()));
        let operations = StackOperations::configured(
            store.clone(),
            Arc::new(registry),
            StackSettings {
                lease_ttl: Duration::from_secs(3),
                action_timeout,
                ..StackSettings::default()
            },
        );
        Engine {
            operations,
            instances,
            instances_stop,
            software,
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

    /// [`Self::create_on_a`] (rollback disabled), waited for to
    /// CREATE_COMPLETE.
    async fn created_on_a(&self, name: &str, template: &str) -> Stack {
        let stack = self.create_on_a(name, template, true).await;
        settled_as(&self.store, stack.id, "CREATE_COMPLETE").await;
        stack
    }

    /// A locks alice's `name` at level `all` ("patching"), waited for to
    /// LOCK_COMPLETE.
    async fn locked_on_a(&self, name: &str, stack: &Stack) {
        self.a
            .operations
            .lock_stack(&alice(), name, LockLevel::All, Some("patching".into()))
            .await
            .expect("lock accepted");
        settled_as(&self.store, stack.id, "LOCK_COMPLETE").await;
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
            sea_orm::DatabaseBackend::Sqlite => {
                sql.replace("$1", "?").replace("$2", "?").replace("$3", "?")
            }
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

    /// The software configs alice's project holds now (derived ones too).
    async fn configs_held(&self) -> i64 {
        self.count(
            "SELECT COUNT(*) FROM software_configs WHERE project_id = $1",
            "project-a".into(),
        )
        .await
    }

    /// A left `stack` in the middle of `action`: the stack and its
    /// resources `names` `action`_IN_PROGRESS, as A records them before it
    /// acts (a create's rows have no physical id yet).
    async fn left_in_progress(&self, stack: &Stack, action: &str, names: &[&str]) {
        self.run_sql(
            "UPDATE stacks SET action = $1, status = 'IN_PROGRESS' WHERE id = $2",
            vec![action.into(), stack.id.into()],
        )
        .await;
        for name in names {
            self.run_sql(
                "UPDATE resources SET action = $1, status = 'IN_PROGRESS' WHERE stack_id = $2 AND name = $3",
                vec![action.into(), stack.id.into(), (*name).into()],
            )
            .await;
            if action == "CREATE" {
                self.run_sql(
                    "UPDATE resources SET physical_id = NULL WHERE stack_id = $1 AND name = $2",
                    vec![stack.id.into(), (*name).into()],
                )
                .await;
            }
        }
    }

    /// A runs `action` on `name` (alice's stack).
    async fn act_on_a(&self, name: &str, action: StackWideAction) {
        self.a
            .operations
            .run_stack_wide_action(&alice(), name, action)
            .await
            .expect("action accepted");
    }

    /// Deployment `id` as the store holds it once it is `action` and
    /// `status` (waits up to 10 s).
    async fn deployment_reaches(
        &self,
        id: uuid::Uuid,
        action: &str,
        status: DeploymentStatus,
    ) -> SoftwareDeployment {
        poll_until(
            &format!("deployment {id} reaching {action} {status:?}"),
            || async {
                self.b
                    .software
                    .store()
                    .get_deployment(None, id)
                    .await
                    .expect("read")
                    .filter(|deployment| deployment.action == action && deployment.status == status)
            },
        )
        .await
    }

    /// The deployments alice's project holds for `server-1`.
    async fn deployments_on_server_1(&self) -> Vec<SoftwareDeployment> {
        self.a
            .software
            .store()
            .list_deployments(Some("project-a"), Some("server-1"))
            .await
            .expect("deployments")
    }

    /// The agent on the server reports deployment `id` done (through B).
    async fn agent_signals(&self, id: uuid::Uuid) {
        self.b
            .software
            .signal_deployment(
                Some("project-a"),
                id,
                &serde_json::json!({"deploy_stdout": "done", "deploy_status_code": 0}),
            )
            .await
            .expect("signalled");
    }

    /// Instance `uuid` as B reads it once `done` says so (up to 10 s).
    async fn instance_when(
        &self,
        uuid: uuid::Uuid,
        done: impl Fn(&ember_engine::domain::instance::Instance) -> bool,
    ) -> ember_engine::domain::instance::Instance {
        poll_until(
            &format!("instance {uuid} reaching the state waited for"),
            || async {
                Some(
                    self.b
                        .instances
                        .get(&alice(), uuid)
                        .await
                        .expect("instance"),
                )
                .filter(|instance| done(instance))
            },
        )
        .await
    }

    /// How many outcomes of driver task `kind` instance `uuid` recorded.
    async fn task_outcomes(&self, uuid: uuid::Uuid, kind: &str) -> usize {
        self.b
            .instances
            .events(&alice(), uuid, 0)
            .await
            .expect("events")
            .iter()
            .filter(|event| event.kind == kind)
            .count()
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

    /// B's sweep resumes one orphan (the stack A left) and fails none.
    async fn b_resumes_one(&self) {
        self.b_sweeps(Swept {
            resumed: 1,
            failed: 0,
        })
        .await;
    }

    /// B's sweep resumes and fails exactly what `expected` counts.
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

/// What `found` finds; fails naming `what` after 10 s.
async fn poll_until<T, F, Fut>(what: &str, found: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    ember_runtime::testing::poll_until(what, Duration::from_secs(10), found).await
}

/// The stack's row once its operation ended (at most 30 s).
async fn settled(store: &Arc<dyn StackStore>, stack_id: uuid::Uuid) -> Stack {
    stack_support::settled_row(store, stack_id, Duration::from_secs(30)).await
}

/// [`settled`], and ended `status`; fails with the stack's reason if not.
async fn settled_as(store: &Arc<dyn StackStore>, stack_id: uuid::Uuid, status: &str) -> Stack {
    let stack = settled(store, stack_id).await;
    stack_support::assert_status(&stack, status);
    stack
}

/// Waits (at most 10 s) until resource `name` of stack `stack_id` is
/// `state`.
async fn reaches(store: &Arc<dyn StackStore>, stack_id: uuid::Uuid, name: &str, state: &str) {
    let what = format!("resource {name} of {stack_id} to reach {state}");
    wait_for(&what, Duration::from_secs(10), || async {
        let rows = store.list_resources(stack_id).await.expect("rows");
        rows.iter()
            .any(|row| row.name == name && row.resource_status() == state)
    })
    .await;
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
    poll_until(
        &format!("{} having one nested stack", stack.name),
        || async {
            match store
                .list_child_stacks(stack.id)
                .await
                .expect("children")
                .as_slice()
            {
                [child] => Some(child.clone()),
                _ => None,
            }
        },
    )
    .await
}

/// Events of `stack_id` (its own and its resources'), oldest first.
async fn event_rows(store: &Arc<dyn StackStore>, stack_id: uuid::Uuid) -> Vec<Event> {
    store
        .list_events(&EventListQuery {
            stack_ids: vec![stack_id],
            limit: 1000,
            ..EventListQuery::default()
        })
        .await
        .expect("events")
}

/// An event as `NAME STATE: reason`.
fn event_line(event: &Event) -> String {
    format!(
        "{} {}: {}",
        event.resource_name,
        event.resource_status(),
        event.reason
    )
}

/// Events of `stack_id` (its own and its resources') as `NAME STATE: reason`.
async fn events(store: &Arc<dyn StackStore>, stack_id: uuid::Uuid) -> Vec<String> {
    event_rows(store, stack_id)
        .await
        .iter()
        .map(event_line)
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
    replicas.b_resumes_one().await;
    settled_as(&replicas.store, stack.id, "CREATE_COMPLETE").await;
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
    settled_as(&replicas.store, child.id, "CREATE_COMPLETE").await;
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
    settled_as(&replicas.store, stack.id, "CREATE_COMPLETE").await;
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
    replicas.b_resumes_one().await;
    settled_as(&replicas.store, stack.id, "DELETE_COMPLETE").await;
    assert!(
        replicas.live_instances(&alice()).await.is_empty(),
        "the instance is gone"
    );
    assert_eq!(
        replicas.instances_made().await,
        1,
        "and was never made again"
    );
    settled_as(&replicas.store, child.id, "DELETE_COMPLETE").await;
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

/// The parent's create ended (stopped, failed) while its nested stack's
/// create went on — on a resource that never ends — and then A died; a
/// delete of the parent on B takes the nested create over (resumed on B,
/// it registers there only as it starts) and stops it rather than waiting
/// for it: the whole tree is deleted.
async fn a_delete_stops_the_nested_create_it_takes_over(database: &TestDatabase) {
    let replicas = replicas(database, Duration::from_millis(5)).await;
    let endless = r#"heat_template_version: 2021-04-16
resources:
  child:
    type: OS::Heat::Stack
    properties:
      template: |
        heat_template_version: 2021-04-16
        resources:
          forever:
            type: OS::Heat::Delay
            properties: {min_wait: 1000000}
"#;
    let stack = replicas.create_on_a("endless", endless, true).await;
    let child = the_nested_stack(&replicas.store, &stack).await;
    reaches(&replicas.store, child.id, "forever", "CREATE_IN_PROGRESS").await;
    replicas.a_dies(&[stack.id, child.id]).await;
    replicas
        .run_sql(
            "UPDATE stacks SET status = 'FAILED', status_reason = 'stopped' WHERE id = $1",
            vec![stack.id.into()],
        )
        .await;
    replicas
        .b
        .operations
        .delete_stack(&alice(), "endless")
        .await
        .expect("delete accepted");
    settled_as(&replicas.store, stack.id, "DELETE_COMPLETE").await;
    settled_as(&replicas.store, child.id, "DELETE_COMPLETE").await;
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
    replicas.b_resumes_one().await;
    let done = settled_as(&replicas.store, stack.id, "CREATE_FAILED").await;
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
    let failed = settled_as(&replicas.store, stack.id, "CREATE_FAILED").await;
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
/// it began: nobody signals, and the wait times out 3 s after it began,
/// not 3 s after the take-over. Judged by the events' own times (when the
/// wait began, when it was resumed, when it failed), so a loaded machine
/// delaying the test's steps cannot fail it.
async fn a_wait_taken_over_keeps_its_original_deadline(database: &TestDatabase) {
    let replicas = replicas(database, Duration::from_millis(5)).await;
    let stack = replicas.create_on_a("deadline", WAITING, true).await;
    reaches(&replicas.store, stack.id, "waiting", "CREATE_IN_PROGRESS").await;
    tokio::time::sleep(Duration::from_millis(2000)).await;
    replicas.a_dies(&[stack.id]).await;
    replicas.b_resumes_one().await;
    let done = settled_as(&replicas.store, stack.id, "CREATE_FAILED").await;
    assert!(
        done.status_reason.contains("WaitConditionTimeout"),
        "{}",
        done.status_reason
    );
    let waits = timed_events(&replicas.store, stack.id, "waiting").await;
    let at = |prefix: &str, whole: bool| {
        let found: Vec<_> = waits
            .iter()
            .filter(|(event, _)| {
                if whole {
                    event == prefix
                } else {
                    event.starts_with(prefix)
                }
            })
            .map(|(_, at)| *at)
            .collect();
        assert_eq!(found.len(), 1, "one {prefix:?} event in {waits:?}");
        found[0]
    };
    let began = at("waiting CREATE_IN_PROGRESS: state changed", true);
    let resumed = at("waiting CREATE_IN_PROGRESS: state changed (resumed", false);
    let failed = at("waiting CREATE_FAILED", false);
    let waited = (failed - began).to_std().expect("failed after it began");
    let after_resume = (failed - resumed).to_std().expect("failed after resume");
    assert!(
        waited >= Duration::from_millis(2900),
        "the wait timed out {waited:?} after it began, before its 3 s"
    );
    assert!(
        after_resume < Duration::from_millis(2500),
        "the wait timed out {after_resume:?} after the take-over: its deadline was counted again from the take-over"
    );
}

/// `NAME STATE: reason` and when, for every event of resource `name`.
async fn timed_events(
    store: &Arc<dyn StackStore>,
    stack_id: uuid::Uuid,
    name: &str,
) -> Vec<(String, chrono::DateTime<chrono::Utc>)> {
    event_rows(store, stack_id)
        .await
        .iter()
        .filter(|event| event.resource_name == name)
        .map(|event| (event_line(event), event.created_at))
        .collect()
}

/// How many events of `stack_id` start with `prefix` (`NAME STATE: reason`).
async fn count_events(store: &Arc<dyn StackStore>, stack_id: uuid::Uuid, prefix: &str) -> usize {
    events(store, stack_id)
        .await
        .iter()
        .filter(|event| event.starts_with(prefix))
        .count()
}

const ONE_SERVER: &str = r#"heat_template_version: 2021-04-16
resources:
  web:
    type: OS::Nova::Server
    properties: {flavor: m1.small, image: debian-12, name: web-1}
"#;

/// A dies while `web`'s machine is powering off for a suspend (its power
/// task stops with A); B takes the step over, finds the instance's power
/// off under way and continues it instead of asking again: STOPPED,
/// SUSPEND_COMPLETE, one power off.
async fn a_suspend_with_a_server_powering_off_is_finished_by_another_engine(
    database: &TestDatabase,
) {
    let replicas = replicas_powering(
        database,
        Duration::from_millis(5),
        Duration::from_millis(1500),
    )
    .await;
    let stack = replicas.create_on_a("suspending", ONE_SERVER, true).await;
    settled_as(&replicas.store, stack.id, "CREATE_COMPLETE").await;
    let uuid = instance_of(&replicas.store, &stack).await;
    replicas
        .act_on_a("suspending", StackWideAction::Suspend)
        .await;
    reaches(&replicas.store, stack.id, "web", "SUSPEND_IN_PROGRESS").await;
    replicas
        .instance_when(uuid, |instance| {
            instance.power_state == PowerState::PoweringOff
        })
        .await;
    replicas.a_dies(&[stack.id]).await;
    replicas.b_resumes_one().await;
    settled_as(&replicas.store, stack.id, "SUSPEND_COMPLETE").await;
    let instance = replicas
        .instance_when(uuid, |instance| instance.status == InstanceStatus::Stopped)
        .await;
    assert_eq!(instance.power_state, PowerState::Off);
    assert_eq!(
        replicas.task_outcomes(uuid, "power_off").await,
        1,
        "powered off once"
    );
    assert_eq!(replicas.instances_made().await, 1);
    assert_event_counts(
        &replicas.store,
        stack.id,
        &["web SUSPEND_IN_PROGRESS", "web SUSPEND_COMPLETE"],
        &[2, 1],
        "A's step and B's, then one end",
    )
    .await;
}

/// A dies while `web`'s machine is powering on for a resume; the power on
/// finishes before B takes the step over (B's instance service continued
/// it). B finds the instance ACTIVE — the finished step — and completes
/// it without powering on again (which the instance would refuse: it is
/// on already).
async fn a_resume_whose_server_is_on_already_completes_without_powering_it_again(
    database: &TestDatabase,
) {
    let replicas = replicas_powering(
        database,
        Duration::from_millis(5),
        Duration::from_millis(1500),
    )
    .await;
    let stack = replicas.created_on_a("resuming", ONE_SERVER).await;
    let uuid = instance_of(&replicas.store, &stack).await;
    replicas
        .act_on_a("resuming", StackWideAction::Suspend)
        .await;
    settled_as(&replicas.store, stack.id, "SUSPEND_COMPLETE").await;
    replicas.act_on_a("resuming", StackWideAction::Resume).await;
    reaches(&replicas.store, stack.id, "web", "RESUME_IN_PROGRESS").await;
    replicas
        .instance_when(uuid, |instance| {
            instance.power_state == PowerState::PoweringOn
        })
        .await;
    replicas.a_dies(&[stack.id]).await;
    replicas
        .b
        .instances
        .continue_unfinished_task(&alice(), uuid)
        .await
        .expect("continued");
    replicas
        .instance_when(uuid, |instance| instance.status == InstanceStatus::Active)
        .await;
    replicas.b_resumes_one().await;
    settled_as(&replicas.store, stack.id, "RESUME_COMPLETE").await;
    assert_eq!(
        replicas.task_outcomes(uuid, "power_on").await,
        1,
        "powered on once"
    );
    assert_eq!(replicas.instances_made().await, 1);
}

const DEPLOYED: &str = r##"heat_template_version: 2021-04-16
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {config: "#!/bin/sh
echo $deploy_action"}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: server-1
      actions: [SUSPEND, RESUME]
"##;

/// A deployment whose server never answers, cut short by the stack's
/// timeout, fails `Deployment cancelled.` (Heat's handle_create_cancel):
/// it does not wait forever in the server's metadata.
async fn a_deployment_cut_short_by_the_timeout_fails(database: &TestDatabase) {
    let replicas = replicas_timed(
        database,
        Duration::from_millis(5),
        Duration::from_millis(5),
        Duration::from_secs(2),
    )
    .await;
    let template = DEPLOYED.replace("      actions: [SUSPEND, RESUME]\n", "");
    let stack = replicas.create_on_a("unanswered", &template, true).await;
    let failed = settled_as(&replicas.store, stack.id, "CREATE_FAILED").await;
    assert!(
        failed.status_reason.contains("CREATE timed out"),
        "{}",
        failed.status_reason
    );
    let deployments = replicas.deployments_on_server_1().await;
    assert_eq!(deployments.len(), 1, "{deployments:?}");
    assert_eq!(deployments[0].status, DeploymentStatus::Failed);
    assert_eq!(deployments[0].status_reason, "Deployment cancelled.");
}

/// A deployment group (its members in a nested stack) that begins late
/// in the root's timeout: when the root is cut short, the nested stack's
/// run is stopped with it — not left to its own timeout — and its
/// deployments fail `Deployment cancelled.` (Heat's
/// `test_deployments_timeout_failed`).
async fn a_nested_stack_is_cut_short_with_its_timed_out_parent(database: &TestDatabase) {
    let replicas = replicas_timed(
        database,
        Duration::from_millis(5),
        Duration::from_millis(5),
        Duration::from_secs(3),
    )
    .await;
    let template = r##"heat_template_version: 2021-04-16
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {config: "#!/bin/sh\necho hello"}
  first:
    type: OS::Heat::TestResource
    properties: {action_wait_secs: {create: 2}}
  deploys:
    type: OS::Heat::SoftwareDeploymentGroup
    depends_on: first
    properties:
      config: {get_resource: config}
      servers: {'0': server-1, '1': server-1}
"##;
    let stack = replicas.create_on_a("grouped", template, true).await;
    settled_as(&replicas.store, stack.id, "CREATE_FAILED").await;
    let cut_at = std::time::Instant::now();
    // The nested stack began ~2 s after its parent: its own timeout is
    // ~2 s away, and it is stopped well before that.
    let nested = replicas
        .store
        .list_child_stacks(stack.id)
        .await
        .expect("nested stacks");
    assert_eq!(nested.len(), 1, "{nested:?}");
    let nested = settled(&replicas.store, nested[0].id).await;
    assert!(
        cut_at.elapsed() < Duration::from_millis(1500),
        "the nested stack ran on for {:?}",
        cut_at.elapsed()
    );
    assert_eq!(nested.stack_status(), "CREATE_FAILED");
    assert_eq!(nested.status_reason, "Stack CREATE cancelled");
    let deployments = replicas.deployments_on_server_1().await;
    assert_eq!(deployments.len(), 2, "{deployments:?}");
    for deployment in deployments {
        assert_eq!(deployment.status, DeploymentStatus::Failed);
        assert_eq!(deployment.status_reason, "Deployment cancelled.");
    }
}

/// The instance of `web` in `stack`.
async fn instance_of(store: &Arc<dyn StackStore>, stack: &Stack) -> uuid::Uuid {
    uuid::Uuid::parse_str(&physical_id(store, stack, "web").await).expect("an instance uuid")
}

/// The deployment of `deploy` in `stack`.
async fn deployment_of(store: &Arc<dyn StackStore>, stack: &Stack) -> uuid::Uuid {
    uuid::Uuid::parse_str(&physical_id(store, stack, "deploy").await).expect("a deployment id")
}

/// A dies while a suspend waits for the agent to run the deployment A
/// triggered for it; B takes the step over and waits for that trigger
/// again — no second trigger (the deployment keeps A's derived config, no
/// config is added) — and the agent's one signal completes the suspend.
async fn a_suspend_waiting_for_a_deployment_is_waited_for_again_by_another_engine(
    database: &TestDatabase,
) {
    let replicas = replicas(database, Duration::from_millis(5)).await;
    let stack = replicas.created_on_a("deployed", DEPLOYED).await;
    let id = deployment_of(&replicas.store, &stack).await;
    replicas
        .act_on_a("deployed", StackWideAction::Suspend)
        .await;
    let triggered = replicas
        .deployment_reaches(id, "SUSPEND", DeploymentStatus::InProgress)
        .await;
    let configs = replicas.configs_held().await;
    replicas.a_dies(&[stack.id]).await;
    replicas.b_resumes_one().await;
    // B's own IN_PROGRESS is recorded before it acts.
    poll_until("B's SUSPEND_IN_PROGRESS of the deployment", || async {
        (count_events(&replicas.store, stack.id, "deploy SUSPEND_IN_PROGRESS").await == 2)
            .then_some(())
    })
    .await;
    replicas.agent_signals(id).await;
    settled_as(&replicas.store, stack.id, "SUSPEND_COMPLETE").await;
    let finished = replicas
        .deployment_reaches(id, "SUSPEND", DeploymentStatus::Complete)
        .await;
    assert_eq!(
        finished.config_id, triggered.config_id,
        "the agent's config was not triggered again"
    );
    assert_eq!(replicas.configs_held().await, configs, "no config added");
    assert_eq!(
        count_events(&replicas.store, stack.id, "deploy SUSPEND_IN_PROGRESS").await,
        2
    );
}

/// A dies while a resume waits for its deployment; the agent signals
/// while no engine runs the stack. B takes the step over, finds the
/// deployment this step triggered finished and completes the resume
/// without triggering the agent again.
async fn a_resume_whose_deployment_was_signalled_meanwhile_completes_without_a_second_trigger(
    database: &TestDatabase,
) {
    let replicas = replicas(database, Duration::from_millis(5)).await;
    let stack = replicas.created_on_a("signalled", DEPLOYED).await;
    let id = deployment_of(&replicas.store, &stack).await;
    replicas
        .act_on_a("signalled", StackWideAction::Suspend)
        .await;
    replicas
        .deployment_reaches(id, "SUSPEND", DeploymentStatus::InProgress)
        .await;
    replicas.agent_signals(id).await;
    settled_as(&replicas.store, stack.id, "SUSPEND_COMPLETE").await;
    replicas
        .act_on_a("signalled", StackWideAction::Resume)
        .await;
    let triggered = replicas
        .deployment_reaches(id, "RESUME", DeploymentStatus::InProgress)
        .await;
    replicas.a_dies(&[stack.id]).await;
    replicas.agent_signals(id).await;
    let configs = replicas.configs_held().await;
    replicas.b_resumes_one().await;
    settled_as(&replicas.store, stack.id, "RESUME_COMPLETE").await;
    let finished = replicas
        .deployment_reaches(id, "RESUME", DeploymentStatus::Complete)
        .await;
    assert_eq!(
        finished.config_id, triggered.config_id,
        "not triggered again"
    );
    assert_eq!(replicas.configs_held().await, configs, "no config added");
}

/// A began a suspend and went away before triggering the deployment,
/// which an earlier suspend left SUSPEND COMPLETE (its resume triggers
/// nothing): B's step is not fooled by that earlier trigger — it triggers
/// the deployment for this suspend, and completes once the agent signals.
async fn a_suspend_its_engine_never_triggered_is_triggered_once_by_another_engine(
    database: &TestDatabase,
) {
    let replicas = replicas(database, Duration::from_millis(5)).await;
    let template = DEPLOYED.replace("actions: [SUSPEND, RESUME]", "actions: [SUSPEND]");
    let stack = replicas.create_on_a("again", &template, true).await;
    settled_as(&replicas.store, stack.id, "CREATE_COMPLETE").await;
    let id = deployment_of(&replicas.store, &stack).await;
    replicas.act_on_a("again", StackWideAction::Suspend).await;
    replicas
        .deployment_reaches(id, "SUSPEND", DeploymentStatus::InProgress)
        .await;
    replicas.agent_signals(id).await;
    settled_as(&replicas.store, stack.id, "SUSPEND_COMPLETE").await;
    replicas.act_on_a("again", StackWideAction::Resume).await;
    settled_as(&replicas.store, stack.id, "RESUME_COMPLETE").await;
    let earlier = replicas
        .deployment_reaches(id, "SUSPEND", DeploymentStatus::Complete)
        .await;
    replicas
        .left_in_progress(&stack, "SUSPEND", &["deploy"])
        .await;
    replicas.a_dies(&[stack.id]).await;
    replicas.b_resumes_one().await;
    let triggered = replicas
        .deployment_reaches(id, "SUSPEND", DeploymentStatus::InProgress)
        .await;
    assert_ne!(
        triggered.config_id, earlier.config_id,
        "triggered for this suspend"
    );
    replicas.agent_signals(id).await;
    settled_as(&replicas.store, stack.id, "SUSPEND_COMPLETE").await;
}

const ROWS_ONLY: &str = r##"heat_template_version: 2021-04-16
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties: {config: "#!/bin/sh
echo hello"}
  cloud:
    type: OS::Heat::CloudConfig
    properties: {cloud_config: {runcmd: [echo hello]}}
  parts:
    type: OS::Heat::MultipartMime
    properties:
      parts: [{config: {get_resource: config}}, {config: {get_resource: cloud}, subtype: cloud-config}]
  server:
    type: OS::Heat::DeployedServer
  policy:
    type: OS::Heat::ScalingPolicy
    properties: {auto_scaling_group_id: a-group, adjustment_type: change_in_capacity, scaling_adjustment: 1}
  launch:
    type: AWS::AutoScaling::LaunchConfiguration
    properties: {ImageId: debian-12, InstanceType: m1.small}
"##;

const ROWS_ONLY_NAMES: [&str; 6] = ["config", "cloud", "parts", "server", "policy", "launch"];

/// A dies after the creates of types that write nothing but Ember's own
/// rows made what they make, before recording it; B redoes each create,
/// which finds the configs and the server id the first attempt made: no
/// config made twice, the same ids, CREATE_COMPLETE.
async fn creates_that_write_only_embers_rows_are_redone_without_making_twice(
    database: &TestDatabase,
) {
    let replicas = replicas(database, Duration::from_millis(5)).await;
    let stack = replicas.create_on_a("rows", ROWS_ONLY, true).await;
    settled_as(&replicas.store, stack.id, "CREATE_COMPLETE").await;
    let mut ids = Vec::new();
    for name in ["config", "cloud", "parts", "server"] {
        ids.push(physical_id(&replicas.store, &stack, name).await);
    }
    assert_eq!(replicas.configs_held().await, 3);
    replicas
        .left_in_progress(&stack, "CREATE", &ROWS_ONLY_NAMES)
        .await;
    replicas.a_dies(&[stack.id]).await;
    replicas.b_resumes_one().await;
    settled_as(&replicas.store, stack.id, "CREATE_COMPLETE").await;
    for (name, id) in ["config", "cloud", "parts", "server"].iter().zip(&ids) {
        assert_eq!(
            &physical_id(&replicas.store, &stack, name).await,
            id,
            "{name} found what the first attempt made"
        );
    }
    assert_eq!(replicas.configs_held().await, 3, "no config made twice");
    for name in ROWS_ONLY_NAMES {
        assert_eq!(
            count_events(
                &replicas.store,
                stack.id,
                &format!("{name} CREATE_IN_PROGRESS: state changed (resumed")
            )
            .await,
            1,
            "{name}"
        );
    }
}

/// A dies while deleting a stack whose config creates were in flight
/// (their rows name no config yet); B's delete finds the configs those
/// creates made by their derived ids and deletes them: nothing left.
async fn a_delete_over_config_creates_in_flight_deletes_what_they_made(database: &TestDatabase) {
    let replicas = replicas(database, Duration::from_millis(5)).await;
    let stack = replicas.created_on_a("forgotten", ROWS_ONLY).await;
    assert_eq!(replicas.configs_held().await, 3);
    replicas
        .left_in_progress(&stack, "CREATE", &ROWS_ONLY_NAMES)
        .await;
    replicas
        .run_sql(
            "UPDATE stacks SET action = 'DELETE' WHERE id = $1",
            vec![stack.id.into()],
        )
        .await;
    replicas.a_dies(&[stack.id]).await;
    replicas.b_resumes_one().await;
    settled_as(&replicas.store, stack.id, "DELETE_COMPLETE").await;
    assert_eq!(replicas.configs_held().await, 0, "the configs are gone");
}

/// A nested stack whose suspend and resume are slow in the middle:
/// suspended dependents first (`last`, `pause`, `first`), resumed
/// dependencies first (`first`, `pause`, `last`).
const NESTED_PAUSING: &str = r#"heat_template_version: 2021-04-16
resources:
  child:
    type: OS::Heat::Stack
    properties:
      template: |
        heat_template_version: 2021-04-16
        resources:
          first: {type: OS::Heat::None}
          pause:
            type: OS::Heat::Delay
            depends_on: first
            properties: {min_wait: 1.5, actions: [SUSPEND, RESUME]}
          last: {type: OS::Heat::None, depends_on: pause}
"#;

/// Asserts how many of `stack_id`'s events (as [`events`] shows them)
/// start with each of `prefixes`; on a mismatch says `why` and shows them
/// all.
async fn assert_event_counts(
    store: &Arc<dyn StackStore>,
    stack_id: uuid::Uuid,
    prefixes: &[&str],
    expected: &[usize],
    why: &str,
) {
    let all = events(store, stack_id).await;
    let counts: Vec<usize> = prefixes
        .iter()
        .map(|prefix| all.iter().filter(|event| event.starts_with(prefix)).count())
        .collect();
    assert_eq!(counts, expected, "{why}: {all:#?}");
}

/// A dies while `action` (SUSPEND or RESUME) of the nested stack runs,
/// its middle resource `pause` in progress and `done` finished already;
/// B takes the parent's step over, which continues the nested stack's
/// operation: both stacks `action`_COMPLETE, the nested stack's action
/// started once and resumed once, `done` not done again, `pause` redone
/// once, the parent's step completed once, one nested stack.
async fn a_nested_action_in_flight_is_finished_by_another_engine(
    replicas: &Replicas,
    stack: &Stack,
    action: &str,
    done: &str,
) {
    let child = the_nested_stack(&replicas.store, stack).await;
    reaches(
        &replicas.store,
        child.id,
        "pause",
        &format!("{action}_IN_PROGRESS"),
    )
    .await;
    reaches(
        &replicas.store,
        child.id,
        done,
        &format!("{action}_COMPLETE"),
    )
    .await;
    replicas.a_dies(&[stack.id, child.id]).await;
    // The nested stack is its parent's to continue.
    replicas.b_resumes_one().await;
    settled_as(&replicas.store, stack.id, &format!("{action}_COMPLETE")).await;
    settled_as(&replicas.store, child.id, &format!("{action}_COMPLETE")).await;
    for row in replicas.store.list_resources(child.id).await.expect("rows") {
        assert_eq!(
            row.resource_status(),
            format!("{action}_COMPLETE"),
            "{}",
            row.name
        );
    }
    let verb = match action {
        "SUSPEND" => "suspend",
        _ => "resume",
    };
    assert_event_counts(
        &replicas.store,
        child.id,
        &[
            &format!(
                "{} {action}_IN_PROGRESS: Stack {action} started",
                child.name
            ),
            &format!(
                "{} {action}_IN_PROGRESS: Stack {action} resumed",
                child.name
            ),
            &format!("{done} {action}_IN_PROGRESS"),
            &format!("{done} {action}_COMPLETE"),
            &format!("pause {action}_IN_PROGRESS"),
            &format!("pause {action}_COMPLETE"),
        ],
        &[1, 1, 1, 1, 2, 1],
        &format!("the nested stack's {verb} was continued, not started again"),
    )
    .await;
    assert_event_counts(
        &replicas.store,
        stack.id,
        &[
            &format!("child {action}_IN_PROGRESS"),
            &format!("child {action}_COMPLETE"),
        ],
        &[2, 1],
        "its events",
    )
    .await;
    assert_eq!(replicas.nested_made(stack).await, 1);
}

/// A dies while the nested stack's suspend runs; B finishes it through
/// the parent's step, suspending nothing twice.
async fn a_nested_stacks_suspend_in_flight_is_finished_by_another_engine(database: &TestDatabase) {
    let replicas = replicas(database, Duration::from_millis(5)).await;
    let stack = replicas
        .created_on_a("nested-suspend", NESTED_PAUSING)
        .await;
    replicas
        .act_on_a("nested-suspend", StackWideAction::Suspend)
        .await;
    a_nested_action_in_flight_is_finished_by_another_engine(&replicas, &stack, "SUSPEND", "last")
        .await;
}

/// A dies while the nested stack's resume runs; B finishes it through
/// the parent's step, resuming nothing twice.
async fn a_nested_stacks_resume_in_flight_is_finished_by_another_engine(database: &TestDatabase) {
    let replicas = replicas(database, Duration::from_millis(5)).await;
    let stack = replicas.created_on_a("nested-resume", NESTED_PAUSING).await;
    replicas
        .act_on_a("nested-resume", StackWideAction::Suspend)
        .await;
    settled_as(&replicas.store, stack.id, "SUSPEND_COMPLETE").await;
    replicas
        .act_on_a("nested-resume", StackWideAction::Resume)
        .await;
    a_nested_action_in_flight_is_finished_by_another_engine(&replicas, &stack, "RESUME", "first")
        .await;
}

/// A dies after the nested stack's suspend finished, before it recorded
/// the parent's step done: B takes the step over, finds the nested stack
/// suspended already and completes the step without suspending it again
/// (Heat's stack suspend would refuse a suspended stack).
async fn a_nested_stack_suspended_before_its_engine_died_is_not_suspended_again(
    database: &TestDatabase,
) {
    let replicas = replicas(database, Duration::from_millis(5)).await;
    let stack = replicas.created_on_a("nested-done", NESTED_PAUSING).await;
    replicas
        .act_on_a("nested-done", StackWideAction::Suspend)
        .await;
    settled_as(&replicas.store, stack.id, "SUSPEND_COMPLETE").await;
    let child = the_nested_stack(&replicas.store, &stack).await;
    replicas
        .left_in_progress(&stack, "SUSPEND", &["child"])
        .await;
    replicas.a_dies(&[stack.id]).await;
    replicas.b_resumes_one().await;
    settled_as(&replicas.store, stack.id, "SUSPEND_COMPLETE").await;
    settled_as(&replicas.store, child.id, "SUSPEND_COMPLETE").await;
    assert_event_counts(
        &replicas.store,
        child.id,
        &[
            &format!("{} SUSPEND_IN_PROGRESS", child.name),
            "first SUSPEND_IN_PROGRESS",
            "pause SUSPEND_IN_PROGRESS",
            "last SUSPEND_IN_PROGRESS",
        ],
        &[1, 1, 1, 1],
        "suspended once",
    )
    .await;
    assert_event_counts(
        &replicas.store,
        stack.id,
        &["child SUSPEND_IN_PROGRESS", "child SUSPEND_COMPLETE"],
        &[2, 2],
        "the step redone once, after the first suspend's",
    )
    .await;
}

const GROUP: &str = r#"heat_template_version: 2021-04-16
resources:
  group:
    type: OS::Heat::ResourceGroup
    properties:
      count: 2
      resource_def: {type: OS::Heat::None}
"#;

/// A dies while a check runs on a group's members (the members' nested
/// stack CHECK_IN_PROGRESS, member `0` in flight); B takes the group's
/// step over, which continues the members' check — it checks every member
/// again, once, and starts no second check: both stacks CHECK_COMPLETE.
async fn a_groups_check_in_flight_is_checked_again_by_another_engine(database: &TestDatabase) {
    let replicas = replicas(database, Duration::from_millis(5)).await;
    let stack = replicas.created_on_a("checked", GROUP).await;
    let members = the_nested_stack(&replicas.store, &stack).await;
    replicas.left_in_progress(&stack, "CHECK", &["group"]).await;
    replicas.left_in_progress(&members, "CHECK", &["0"]).await;
    replicas.a_dies(&[stack.id, members.id]).await;
    replicas.b_resumes_one().await;
    settled_as(&replicas.store, stack.id, "CHECK_COMPLETE").await;
    settled_as(&replicas.store, members.id, "CHECK_COMPLETE").await;
    assert_event_counts(
        &replicas.store,
        members.id,
        &[
            &format!("{} CHECK_IN_PROGRESS: Stack CHECK started", members.name),
            &format!("{} CHECK_IN_PROGRESS: Stack CHECK resumed", members.name),
            &format!("{} CHECK_COMPLETE", members.name),
            "0 CHECK_COMPLETE",
            "1 CHECK_COMPLETE",
        ],
        &[0, 1, 1, 1, 1],
        "the members' check continued, each member checked once",
    )
    .await;
    assert_event_counts(
        &replicas.store,
        stack.id,
        &["group CHECK_IN_PROGRESS", "group CHECK_COMPLETE"],
        &[1, 1],
        "the group's step redone once",
    )
    .await;
}

/// A dies while it unlocks a stack locked at level `all` (its server and
/// its nested stack in flight, the nested stack's own unlock begun); B
/// takes the unlock over as the lock's holder, and the parent's step
/// continues the nested stack's: both stacks UNLOCK_COMPLETE with no lock
/// left, the server unlocked. (Marked failed instead, an expiry's unlock
/// left the lock on past its expiry: the sweep lifts only LOCK_COMPLETE
/// stacks.)
async fn an_unlock_in_flight_is_finished_by_another_engine(database: &TestDatabase) {
    let replicas = replicas(database, Duration::from_millis(5)).await;
    let stack = replicas.created_on_a("unlocking", SERVER_AND_NESTED).await;
    replicas.locked_on_a("unlocking", &stack).await;
    let uuid = instance_of(&replicas.store, &stack).await;
    assert!(replicas.instance_when(uuid, |_| true).await.is_locked());
    let child = the_nested_stack(&replicas.store, &stack).await;
    replicas
        .left_in_progress(&stack, "UNLOCK", &["web", "child"])
        .await;
    replicas.left_in_progress(&child, "UNLOCK", &["slow"]).await;
    replicas.a_dies(&[stack.id, child.id]).await;
    // The nested stack is its parent's to continue.
    replicas.b_resumes_one().await;
    let done = settled_as(&replicas.store, stack.id, "UNLOCK_COMPLETE").await;
    assert!(done.maintenance_lock.is_none(), "the lock is lifted");
    let nested = settled_as(&replicas.store, child.id, "UNLOCK_COMPLETE").await;
    assert!(nested.maintenance_lock.is_none());
    assert!(!replicas.instance_when(uuid, |_| true).await.is_locked());
    assert_event_counts(
        &replicas.store,
        child.id,
        &[
            &format!("{} UNLOCK_IN_PROGRESS: Stack UNLOCK started", child.name),
            &format!("{} UNLOCK_IN_PROGRESS: Stack UNLOCK resumed", child.name),
            &format!("{} UNLOCK_COMPLETE", child.name),
        ],
        // A's start is the state written above, without its event.
        &[0, 1, 1],
        "the nested stack's unlock was continued, not started again",
    )
    .await;
}

/// A dies while it locks a stack at level `all`, before it locked the
/// server; B continues the lock as its holder: LOCK_COMPLETE, the server
/// locked with the lock's reason, the stack's lock as it was asked.
async fn a_lock_in_flight_is_finished_by_another_engine(database: &TestDatabase) {
    let replicas = replicas(database, Duration::from_millis(5)).await;
    let stack = replicas.created_on_a("locking", ONE_SERVER).await;
    replicas.locked_on_a("locking", &stack).await;
    let uuid = instance_of(&replicas.store, &stack).await;
    // As if A had not reached the server yet.
    replicas
        .b
        .instances
        .unlock(&alice(), uuid)
        .await
        .expect("instance unlocked");
    replicas.left_in_progress(&stack, "LOCK", &["web"]).await;
    replicas.a_dies(&[stack.id]).await;
    replicas.b_resumes_one().await;
    let done = settled_as(&replicas.store, stack.id, "LOCK_COMPLETE").await;
    let lock = done.maintenance_lock.expect("the lock is kept");
    assert_eq!(
        (
            lock.level,
            lock.locked_by_user.as_str(),
            lock.reason.as_deref()
        ),
        (LockLevel::All, "alice", Some("patching"))
    );
    let instance = replicas.instance_when(uuid, |_| true).await;
    let instance_lock = instance
        .maintenance_lock
        .expect("the server is locked again");
    assert_eq!(instance_lock.reason.as_deref(), Some("patching"));
    assert_event_counts(
        &replicas.store,
        stack.id,
        &["web LOCK_IN_PROGRESS", "web LOCK_COMPLETE"],
        &[2, 2],
        "the server's step ran again once",
    )
    .await;
}

ember_runtime::store_suite!(
    a_deployment_cut_short_by_the_timeout_fails,
    a_nested_stack_is_cut_short_with_its_timed_out_parent,
    a_create_with_a_server_and_a_nested_stack_in_flight_is_finished_by_another_engine,
    a_delete_with_a_server_and_a_nested_stack_in_flight_is_finished_by_another_engine,
    a_delete_stops_the_nested_create_it_takes_over,
    a_server_that_fails_to_build_after_a_take_over_fails_the_stack_with_its_reason,
    a_step_of_a_type_that_cannot_take_it_over_fails_the_stack_with_why,
    a_wait_taken_over_keeps_its_original_deadline,
    a_suspend_with_a_server_powering_off_is_finished_by_another_engine,
    a_resume_whose_server_is_on_already_completes_without_powering_it_again,
    a_suspend_waiting_for_a_deployment_is_waited_for_again_by_another_engine,
    a_resume_whose_deployment_was_signalled_meanwhile_completes_without_a_second_trigger,
    a_suspend_its_engine_never_triggered_is_triggered_once_by_another_engine,
    creates_that_write_only_embers_rows_are_redone_without_making_twice,
    a_delete_over_config_creates_in_flight_deletes_what_they_made,
    a_nested_stacks_suspend_in_flight_is_finished_by_another_engine,
    a_nested_stacks_resume_in_flight_is_finished_by_another_engine,
    a_nested_stack_suspended_before_its_engine_died_is_not_suspended_again,
    a_groups_check_in_flight_is_checked_again_by_another_engine,
    an_unlock_in_flight_is_finished_by_another_engine,
    a_lock_in_flight_is_finished_by_another_engine,
);
