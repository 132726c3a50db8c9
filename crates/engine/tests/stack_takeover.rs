//! Stack operations outlive the engine that ran them, on SQLite and
//! PostgreSQL: an engine that shuts down hands its creates, deletes,
//! updates and rollbacks back unfinished (the steps in flight finish, no
//! new one starts, the lease is released) and another engine's sweep
//! resumes them at once, keeping what was done — an update's in-place
//! changes, replacements and removals are not made twice; an engine that
//! dies has its operations resumed once its lease expires; an orphan whose
//! step was in flight outside the engine (here a nested stack being made)
//! is resumed without making it twice (see `stack_resumption.rs`).

mod stack_support;

use stack_support::assert_status;

use std::sync::Arc;
use std::time::Duration;

use ember_engine::domain::Stack;
use ember_engine::resources::ResourceTypeRegistry;
use ember_engine::stacks::{CreateStack, StackOperations, StackSettings, Swept, UpdateStack};
use ember_engine::store::{EventListQuery, SqlStackStore, StackStore, migrations::Migrator};
use ember_runtime::Identity;
use ember_runtime::database::{connect_and_migrate, testing::TestDatabase};
use ember_runtime::testing::wait_for;
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};

/// Two engines on one database, as two replicas.
struct Replicas {
    connection: DatabaseConnection,
    store: Arc<dyn StackStore>,
    a: Arc<StackOperations>,
    b: Arc<StackOperations>,
}

async fn replicas(database: &TestDatabase) -> Replicas {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let store: Arc<dyn StackStore> = Arc::new(SqlStackStore::new(connection.clone()));
    let engine = || {
        StackOperations::configured(
            store.clone(),
            Arc::new(ResourceTypeRegistry::builtin()),
            StackSettings {
                lease_ttl: Duration::from_secs(3),
                ..StackSettings::default()
            },
        )
    };
    let (a, b) = (engine(), engine());
    Replicas {
        connection,
        store,
        a,
        b,
    }
}

fn alice() -> Identity {
    Identity::new("alice", "project-a", vec!["member".to_owned()])
}

impl Replicas {
    /// Engine A starts creating `name` from `template` (no rollback).
    async fn create_on_a(&self, name: &str, template: &str) -> Stack {
        self.a
            .create_stack(
                &alice(),
                CreateStack {
                    name: name.into(),
                    template: template.into(),
                    disable_rollback: true,
                    ..CreateStack::default()
                },
            )
            .await
            .expect("accepted")
    }

    /// Engine A creates `name` from `template` and waits until it is
    /// CREATE_COMPLETE.
    async fn created_on_a(&self, name: &str, template: &str) -> Stack {
        let stack = self.create_on_a(name, template).await;
        settled_as(&self.store, &stack, "CREATE_COMPLETE").await;
        stack
    }

    /// Engine A starts `request` (an update of `stack`).
    async fn update_on_a(&self, stack: &Stack, request: UpdateStack) {
        self.a
            .update_stack(
                &alice(),
                UpdateStack {
                    name_or_id: stack.id.to_string(),
                    ..request
                },
            )
            .await
            .expect("update accepted");
    }

    /// A dies as far as the database can tell: its lease generation moves
    /// on (its writes are refused) and the lease runs out in half a second.
    async fn cut_a_lease(&self, stack: &Stack) {
        let soon = ember_runtime::time::now() + chrono::Duration::milliseconds(500);
        self.run_sql(
            "UPDATE stack_leases SET generation = generation + 1, expires_at = $1 WHERE stack_id = $2",
            vec![soon.into(), stack.id.into()],
        )
        .await;
    }

    /// The stack's row as stored now.
    async fn row(&self, stack: &Stack) -> Stack {
        self.store
            .get_stack(stack.id)
            .await
            .expect("read")
            .expect("the stack row")
    }

    /// Runs `sql` (written with `$1`, `$2`, `$3` placeholders) on either backend.
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

    /// B's sweep resumes exactly one orphan, and it ends `expected`.
    async fn b_resumes(&self, stack: &Stack, expected: &str) {
        assert_eq!(
            self.b.recover_orphaned_stacks().await.expect("swept"),
            Swept {
                resumed: 1,
                failed: 0
            }
        );
        settled_as(&self.store, stack, expected).await;
    }
}

/// The stack's row once its operation ended (at most 20 s).
async fn settled(store: &Arc<dyn StackStore>, stack: &Stack) -> Stack {
    stack_support::settled_row(store, stack.id, Duration::from_secs(20)).await
}

/// [`settled`], and ended `status`.
async fn settled_as(store: &Arc<dyn StackStore>, stack: &Stack, status: &str) -> Stack {
    let done = settled(store, stack).await;
    assert_status(&done, status);
    done
}

/// Waits (at most 10 s) until resource `name` of `stack` is `state`.
async fn reaches(store: &Arc<dyn StackStore>, stack: &Stack, name: &str, state: &str) {
    let what = format!("resource {name} of {} to reach {state}", stack.name);
    wait_for(&what, Duration::from_secs(10), || async {
        resource_states(store, stack)
            .await
            .get(name)
            .map(String::as_str)
            == Some(state)
    })
    .await;
}

/// Each resource's `ACTION_STATUS`, by name.
async fn resource_states(
    store: &Arc<dyn StackStore>,
    stack: &Stack,
) -> std::collections::BTreeMap<String, String> {
    store
        .list_resources(stack.id)
        .await
        .expect("rows")
        .into_iter()
        .map(|row| (row.name.clone(), row.resource_status()))
        .collect()
}

/// The stack's own events' reasons (not its resources').
async fn stack_reasons(store: &Arc<dyn StackStore>, stack: &Stack) -> Vec<String> {
    store
        .list_events(&EventListQuery {
            stack_ids: vec![stack.id],
            limit: 1000,
            ..EventListQuery::default()
        })
        .await
        .expect("events")
        .into_iter()
        .filter(|event| event.resource_type == "OS::Heat::Stack")
        .map(|event| format!("{}: {}", event.resource_status(), event.reason))
        .collect()
}

/// How many of the stack's resource events are `name` in `state`
/// (`ACTION_STATUS`) with a reason starting with `reason`.
async fn count_events(
    store: &Arc<dyn StackStore>,
    stack: &Stack,
    name: &str,
    state: &str,
    reason: &str,
) -> usize {
    store
        .list_events(&EventListQuery {
            stack_ids: vec![stack.id],
            limit: 1000,
            ..EventListQuery::default()
        })
        .await
        .expect("events")
        .into_iter()
        .filter(|event| {
            event.resource_name == name
                && event.resource_status() == state
                && event.reason.starts_with(reason)
        })
        .count()
}

/// Each row's name, state and `value` property, sorted: one row per
/// resource once an update ended (replaced rows are gone).
async fn rows(store: &Arc<dyn StackStore>, stack: &Stack) -> Vec<(String, String, String)> {
    let mut rows: Vec<(String, String, String)> = store
        .list_resources(stack.id)
        .await
        .expect("rows")
        .into_iter()
        .map(|row| {
            let value = row.properties["value"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            (row.name.clone(), row.resource_status(), value)
        })
        .collect();
    rows.sort();
    rows
}

const CREATE_CHAIN: &str = "heat_template_version: 2021-04-16\nresources:\n  quick: {type: OS::Heat::None}\n  slow:\n    type: OS::Heat::TestResource\n    depends_on: quick\n    properties: {action_wait_secs: {create: 1}}\n  after:\n    type: OS::Heat::None\n    depends_on: slow\n";

async fn a_create_handed_back_at_shutdown_is_resumed_by_another_engine(database: &TestDatabase) {
    let replicas = replicas(database).await;
    let stack = replicas.create_on_a("handed", CREATE_CHAIN).await;
    // A shuts down while `slow` runs: `slow` finishes, `after` never starts.
    reaches(&replicas.store, &stack, "slow", "CREATE_IN_PROGRESS").await;
    assert_eq!(replicas.a.hand_back(Duration::from_secs(5)).await, 0);
    let states = resource_states(&replicas.store, &stack).await;
    assert_eq!(states["quick"], "CREATE_COMPLETE");
    assert_eq!(
        states["slow"], "CREATE_COMPLETE",
        "the step in flight finished"
    );
    assert_eq!(states["after"], "INIT_COMPLETE", "no step started after");
    let handed = replicas.row(&stack).await;
    assert_eq!(handed.stack_status(), "CREATE_IN_PROGRESS");
    // B's sweep takes it at once (the lease was released, not left to
    // expire) and finishes it.
    replicas.b_resumes(&stack, "CREATE_COMPLETE").await;
    assert!(
        resource_states(&replicas.store, &stack)
            .await
            .values()
            .all(|state| state == "CREATE_COMPLETE")
    );
    let reasons = stack_reasons(&replicas.store, &stack).await;
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(
        reasons[1].starts_with("CREATE_IN_PROGRESS: Stack CREATE resumed")
            && reasons[1].contains(&replicas.a.engine_id().to_string())
            && reasons[1].contains(&replicas.b.engine_id().to_string()),
        "{reasons:?}"
    );
    assert_eq!(
        replicas.b.recover_orphaned_stacks().await.expect("swept"),
        Swept::default()
    );
}

const DELETE_CHAIN: &str = "heat_template_version: 2021-04-16\nresources:\n  first: {type: OS::Heat::None}\n  slow:\n    type: OS::Heat::TestResource\n    depends_on: first\n    properties: {action_wait_secs: {delete: 1}}\n  last:\n    type: OS::Heat::None\n    depends_on: slow\n";

async fn a_delete_handed_back_at_shutdown_is_resumed_by_another_engine(database: &TestDatabase) {
    let replicas = replicas(database).await;
    let stack = replicas.create_on_a("deleted", DELETE_CHAIN).await;
    settled_as(&replicas.store, &stack, "CREATE_COMPLETE").await;
    replicas
        .a
        .delete_stack(&alice(), "deleted")
        .await
        .expect("delete accepted");
    // Dependents first: `last` goes, `slow` is being deleted, `first` waits.
    reaches(&replicas.store, &stack, "slow", "DELETE_IN_PROGRESS").await;
    assert_eq!(replicas.a.hand_back(Duration::from_secs(5)).await, 0);
    let handed = replicas.row(&stack).await;
    assert_eq!(handed.stack_status(), "DELETE_IN_PROGRESS");
    assert_eq!(
        resource_states(&replicas.store, &stack)
            .await
            .get("first")
            .map(String::as_str),
        Some("CREATE_COMPLETE"),
        "the rest waits for whoever resumes"
    );
    replicas.b_resumes(&stack, "DELETE_COMPLETE").await;
    assert!(
        resource_states(&replicas.store, &stack)
            .await
            .values()
            .all(|state| state == "DELETE_COMPLETE"),
        "every resource deleted once"
    );
}

const NESTED: &str = r#"heat_template_version: 2021-04-16
resources:
  child:
    type: OS::Heat::Stack
    properties:
      template: |
        heat_template_version: 2021-04-16
        resources:
          slow:
            type: OS::Heat::TestResource
            properties: {action_wait_secs: {create: 2}}
"#;

async fn an_orphan_with_a_nested_stack_in_flight_is_resumed_without_making_it_twice(
    database: &TestDatabase,
) {
    let replicas = replicas(database).await;
    let stack = replicas.create_on_a("nesting", NESTED).await;
    reaches(&replicas.store, &stack, "child", "CREATE_IN_PROGRESS").await;
    // A dies as far as the database can tell: its lease expired long ago
    // (and its generation moved on, so its late writes are refused).
    let long_ago = ember_runtime::time::now() - chrono::Duration::hours(1);
    replicas
        .run_sql(
            "UPDATE stack_leases SET generation = generation + 1, expires_at = $1 WHERE stack_id = $2",
            vec![long_ago.into(), stack.id.into()],
        )
        .await;
    // B resumes it: `child`'s step finds the nested stack A made (whose
    // own lease A still holds: B waits for it) instead of making another.
    replicas.b_resumes(&stack, "CREATE_COMPLETE").await;
    let children = replicas
        .store
        .list_child_stacks(stack.id)
        .await
        .expect("children");
    assert_eq!(children.len(), 1, "one nested stack");
    assert_eq!(children[0].stack_status(), "CREATE_COMPLETE");
}

async fn a_dead_engines_create_is_taken_over_as_soon_as_its_lease_expires(database: &TestDatabase) {
    let replicas = replicas(database).await;
    let stack = replicas.create_on_a("crashed", CREATE_CHAIN).await;
    reaches(&replicas.store, &stack, "slow", "CREATE_IN_PROGRESS").await;
    // A dies as far as the database can tell: its generation moved on (its
    // writes are refused) and the lease runs out in half a second.
    let soon = ember_runtime::time::now() + chrono::Duration::milliseconds(500);
    replicas
        .run_sql(
            "UPDATE stack_leases SET generation = generation + 1, expires_at = $1 WHERE stack_id = $2",
            vec![soon.into(), stack.id.into()],
        )
        .await;
    // B sweeps every 10 s, but after a pass it sleeps only until the
    // soonest lease of a stack in progress expires.
    let shutdown = tokio_util::sync::CancellationToken::new();
    replicas
        .b
        .spawn_orphan_sweeper_every(Duration::from_secs(10), shutdown.clone());
    let started = std::time::Instant::now();
    settled_as(&replicas.store, &stack, "CREATE_COMPLETE").await;
    // The lease ran out 0.5 s in, `slow` takes 1 s again: well under the
    // 10 s the sweep would otherwise sleep.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "resumed {:?} after the lease was cut short",
        started.elapsed()
    );
    shutdown.cancel();
}

async fn a_lease_that_expired_while_a_sweep_pass_ran_is_swept_at_once(database: &TestDatabase) {
    let replicas = replicas(database).await;
    let stack = replicas.create_on_a("crashed", CREATE_CHAIN).await;
    reaches(&replicas.store, &stack, "slow", "CREATE_IN_PROGRESS").await;
    // A died; its lease ran out a moment ago.
    let now = ember_runtime::time::now();
    let expired = now - chrono::Duration::milliseconds(100);
    replicas
        .run_sql(
            "UPDATE stack_leases SET generation = generation + 1, expires_at = $1 WHERE stack_id = $2",
            vec![expired.into(), stack.id.into()],
        )
        .await;
    let period = Duration::from_secs(10);
    // A pass that began before the expiry did not see it: the next one
    // comes at once, not a period later.
    let pass_began_before = now - chrono::Duration::seconds(1);
    let pause = replicas.b.until_next_sweep(period, pass_began_before).await;
    assert!(pause < Duration::from_millis(100), "{pause:?}");
    // A pass that began after it had it among its candidates: no lease
    // left to wait for, the sweep sleeps its period.
    let pause = replicas.b.until_next_sweep(period, now).await;
    assert_eq!(pause, period);
    assert_eq!(
        replicas.b.recover_orphaned_stacks().await.expect("swept"),
        Swept {
            resumed: 1,
            failed: 0
        }
    );
    settled_as(&replicas.store, &stack, "CREATE_COMPLETE").await;
}

/// `first` is replaced, `slow` updated in place (1 s), `replaced` replaced,
/// `gone` removed and `added` added when `v` moves from a to b and the
/// template from [`UPDATE_FROM`] to [`UPDATE_TO`].
const UPDATE_FROM: &str = r#"heat_template_version: 2021-04-16
parameters:
  v: {type: string, default: a}
resources:
  first:
    type: OS::Heat::TestResource
    properties: {value: {get_param: v}, update_replace: true}
  slow:
    type: OS::Heat::TestResource
    depends_on: first
    properties: {value: {get_param: v}, action_wait_secs: {update: 1}}
  replaced:
    type: OS::Heat::TestResource
    depends_on: slow
    properties: {value: {get_param: v}, update_replace: true}
  gone: {type: OS::Heat::None}
"#;

const UPDATE_TO: &str = r#"heat_template_version: 2021-04-16
parameters:
  v: {type: string, default: a}
resources:
  first:
    type: OS::Heat::TestResource
    properties: {value: {get_param: v}, update_replace: true}
  slow:
    type: OS::Heat::TestResource
    depends_on: first
    properties: {value: {get_param: v}, action_wait_secs: {update: 1}}
  replaced:
    type: OS::Heat::TestResource
    depends_on: slow
    properties: {value: {get_param: v}, update_replace: true}
  added:
    type: OS::Heat::None
    depends_on: replaced
"#;

fn v_is_b() -> serde_json::Map<String, serde_json::Value> {
    serde_json::Map::from_iter([("v".to_owned(), serde_json::json!("b"))])
}

/// Each replacement was made once and each old row deleted once.
async fn replaced_once(store: &Arc<dyn StackStore>, stack: &Stack) {
    for name in ["first", "replaced"] {
        assert_eq!(
            count_events(store, stack, name, "CREATE_IN_PROGRESS", "replacing").await,
            1,
            "{name} replaced once"
        );
        assert_eq!(
            count_events(store, stack, name, "DELETE_COMPLETE", "").await,
            1,
            "the old {name} deleted once"
        );
    }
}

async fn an_update_handed_back_at_shutdown_is_resumed_by_another_engine(database: &TestDatabase) {
    let replicas = replicas(database).await;
    let stack = replicas.created_on_a("updated", UPDATE_FROM).await;
    replicas
        .update_on_a(
            &stack,
            UpdateStack {
                template: UPDATE_TO.into(),
                parameters: v_is_b(),
                disable_rollback: Some(false),
                ..UpdateStack::default()
            },
        )
        .await;
    // A shuts down while `slow` is updated: `first` was replaced, `slow`
    // finishes, `replaced`, `added` and `gone` wait.
    reaches(&replicas.store, &stack, "slow", "UPDATE_IN_PROGRESS").await;
    assert_eq!(replicas.a.hand_back(Duration::from_secs(5)).await, 0);
    let handed = replicas.row(&stack).await;
    assert_eq!(handed.stack_status(), "UPDATE_IN_PROGRESS");
    let states = resource_states(&replicas.store, &stack).await;
    assert_eq!(
        states["slow"], "UPDATE_COMPLETE",
        "the step in flight finished"
    );
    assert_eq!(states["added"], "INIT_COMPLETE", "no step started after");
    assert_eq!(states["gone"], "CREATE_COMPLETE");
    replicas.b_resumes(&stack, "UPDATE_COMPLETE").await;
    assert_eq!(
        rows(&replicas.store, &stack).await,
        [
            ("added", "CREATE_COMPLETE", ""),
            ("first", "CREATE_COMPLETE", "b"),
            ("replaced", "CREATE_COMPLETE", "b"),
            ("slow", "UPDATE_COMPLETE", "b"),
        ]
        .map(|(name, state, value)| (name.to_owned(), state.to_owned(), value.to_owned()))
    );
    replaced_once(&replicas.store, &stack).await;
    assert_eq!(
        count_events(&replicas.store, &stack, "slow", "UPDATE_IN_PROGRESS", "").await,
        1,
        "slow updated once"
    );
    assert_eq!(
        count_events(&replicas.store, &stack, "gone", "DELETE_COMPLETE", "").await,
        1
    );
    let reasons = stack_reasons(&replicas.store, &stack).await;
    assert!(
        reasons
            .iter()
            .any(|reason| reason.starts_with("UPDATE_IN_PROGRESS: Stack UPDATE resumed")),
        "{reasons:?}"
    );
    // The update's origin went with it: nothing is left to resume.
    assert_eq!(
        replicas.b.recover_orphaned_stacks().await.expect("swept"),
        Swept::default()
    );
}

async fn a_dead_engines_update_is_resumed_once_its_lease_expires(database: &TestDatabase) {
    let replicas = replicas(database).await;
    let stack = replicas.created_on_a("patched", UPDATE_FROM).await;
    // PATCH: the same template, `v` changed; rollback stays disabled.
    replicas
        .update_on_a(
            &stack,
            UpdateStack {
                existing: true,
                parameters: v_is_b(),
                ..UpdateStack::default()
            },
        )
        .await;
    reaches(&replicas.store, &stack, "slow", "UPDATE_IN_PROGRESS").await;
    replicas.cut_a_lease(&stack).await;
    let shutdown = tokio_util::sync::CancellationToken::new();
    replicas
        .b
        .spawn_orphan_sweeper_every(Duration::from_secs(10), shutdown.clone());
    let done = settled(&replicas.store, &stack).await;
    shutdown.cancel();
    assert_status(&done, "UPDATE_COMPLETE");
    assert_eq!(
        rows(&replicas.store, &stack).await,
        [
            ("first", "CREATE_COMPLETE", "b"),
            ("gone", "CREATE_COMPLETE", ""),
            ("replaced", "CREATE_COMPLETE", "b"),
            ("slow", "UPDATE_COMPLETE", "b"),
        ]
        .map(|(name, state, value)| (name.to_owned(), state.to_owned(), value.to_owned()))
    );
    replaced_once(&replicas.store, &stack).await;
    // The step A had in flight was redone once by B, on the same row.
    assert_eq!(
        count_events(&replicas.store, &stack, "slow", "UPDATE_IN_PROGRESS", "").await,
        2
    );
    assert_eq!(
        count_events(&replicas.store, &stack, "slow", "UPDATE_COMPLETE", "").await,
        1,
        "A's late end was refused"
    );
}

/// `slow` takes a second to update either way; `breaker` fails the update.
const ROLLED_BACK_FROM: &str = "heat_template_version: 2021-04-16\nresources:\n  slow:\n    type: OS::Heat::TestResource\n    properties: {value: a, action_wait_secs: {update: 1}}\n";

const ROLLED_BACK_TO: &str = "heat_template_version: 2021-04-16\nresources:\n  slow:\n    type: OS::Heat::TestResource\n    properties: {value: b, action_wait_secs: {update: 1}}\n  breaker:\n    type: OS::Heat::TestResource\n    depends_on: slow\n    properties: {fail: true}\n";

async fn a_rollback_handed_back_at_shutdown_is_resumed_by_another_engine(database: &TestDatabase) {
    let replicas = replicas(database).await;
    let stack = replicas.created_on_a("rolled", ROLLED_BACK_FROM).await;
    replicas
        .update_on_a(
            &stack,
            UpdateStack {
                template: ROLLED_BACK_TO.into(),
                disable_rollback: Some(false),
                ..UpdateStack::default()
            },
        )
        .await;
    // `breaker` failed; A shuts down while `slow` is put back.
    reaches(&replicas.store, &stack, "slow", "ROLLBACK_IN_PROGRESS").await;
    assert_eq!(replicas.a.hand_back(Duration::from_secs(5)).await, 0);
    assert_eq!(
        replicas.row(&stack).await.stack_status(),
        "ROLLBACK_IN_PROGRESS"
    );
    let states = resource_states(&replicas.store, &stack).await;
    assert_eq!(states["slow"], "ROLLBACK_COMPLETE");
    assert_eq!(states["breaker"], "CREATE_FAILED", "not retired yet");
    replicas.b_resumes(&stack, "ROLLBACK_COMPLETE").await;
    assert_eq!(
        rows(&replicas.store, &stack).await,
        [(
            "slow".to_owned(),
            "ROLLBACK_COMPLETE".to_owned(),
            "a".to_owned()
        )]
    );
    assert_eq!(
        count_events(&replicas.store, &stack, "slow", "ROLLBACK_IN_PROGRESS", "").await,
        1,
        "slow rolled back once"
    );
    assert_eq!(
        count_events(&replicas.store, &stack, "breaker", "DELETE_COMPLETE", "").await,
        1
    );
    let reasons = stack_reasons(&replicas.store, &stack).await;
    assert!(
        reasons
            .iter()
            .any(|reason| reason.starts_with("ROLLBACK_IN_PROGRESS: Stack ROLLBACK resumed")),
        "{reasons:?}"
    );
}

const NONE_CHAIN: &str = "heat_template_version: 2021-04-16\nresources:\n  a: {type: OS::Heat::None}\n  b:\n    type: OS::Heat::None\n    depends_on: a\n  c:\n    type: OS::Heat::None\n    depends_on: b\n";

/// Leaves `stack` as an engine that died in the middle of `action` would:
/// the stack `<action>_IN_PROGRESS` (its lease, released when the create
/// ended, long expired) and resource `done` finished already.
async fn left_mid(replicas: &Replicas, stack: &Stack, action: &str, done: &str) {
    replicas
        .run_sql(
            "UPDATE stacks SET action = $1, status = 'IN_PROGRESS' WHERE id = $2",
            vec![action.into(), stack.id.into()],
        )
        .await;
    replicas
        .run_sql(
            "UPDATE resources SET action = $1, status = 'COMPLETE' WHERE stack_id = $2 AND name = $3",
            vec![action.into(), stack.id.into(), done.into()],
        )
        .await;
}

async fn a_dead_engines_suspend_is_resumed_without_suspending_twice(database: &TestDatabase) {
    let replicas = replicas(database).await;
    let stack = replicas.created_on_a("suspending", NONE_CHAIN).await;
    // Dependents first: `c` was suspended when the engine died.
    left_mid(&replicas, &stack, "SUSPEND", "c").await;
    replicas.b_resumes(&stack, "SUSPEND_COMPLETE").await;
    assert!(
        resource_states(&replicas.store, &stack)
            .await
            .values()
            .all(|state| state == "SUSPEND_COMPLETE")
    );
    for (name, times) in [("a", 1), ("b", 1), ("c", 0)] {
        assert_eq!(
            count_events(&replicas.store, &stack, name, "SUSPEND_IN_PROGRESS", "").await,
            times,
            "{name}"
        );
    }
}

async fn a_dead_engines_restore_is_failed_with_why(database: &TestDatabase) {
    let replicas = replicas(database).await;
    let stack = replicas.created_on_a("restoring", NONE_CHAIN).await;
    left_mid(&replicas, &stack, "RESTORE", "a").await;
    assert_eq!(
        replicas.b.recover_orphaned_stacks().await.expect("swept"),
        Swept {
            resumed: 0,
            failed: 1
        }
    );
    let failed = replicas.row(&stack).await;
    assert_eq!(failed.stack_status(), "RESTORE_FAILED");
    assert!(
        failed.status_reason.contains(
            "not resumed: a snapshot restore is not resumed: which snapshot it puts back is not recorded"
        ),
        "{}",
        failed.status_reason
    );
}

/// A delete on engine B of a stack whose create runs on engine A — and
/// cannot finish, nor can its nested stack's — stops A's runs through
/// the stacks' leases and deletes the whole tree, as a delete on A would.
async fn a_delete_on_another_engine_stops_the_operation_and_deletes_the_tree(
    database: &TestDatabase,
) {
    let replicas = replicas(database).await;
    let endless = "heat_template_version: 2021-04-16\nresources:\n  forever: {type: OS::Heat::Delay, properties: {min_wait: 1000000}}\n";
    let parent = "heat_template_version: 2021-04-16\nresources:\n  forever: {type: OS::Heat::Delay, properties: {min_wait: 1000000}}\n  inner: {type: endless.yaml}\n";
    let mut files = std::collections::BTreeMap::new();
    files.insert("endless.yaml".to_owned(), endless.to_owned());
    let stack = replicas
        .a
        .create_stack(
            &alice(),
            CreateStack {
                name: "endless".into(),
                template: parent.into(),
                files,
                ..CreateStack::default()
            },
        )
        .await
        .expect("accepted");
    reaches(&replicas.store, &stack, "inner", "CREATE_IN_PROGRESS").await;
    let nested = loop {
        if let [child] = replicas
            .store
            .list_child_stacks(stack.id)
            .await
            .expect("children")
            .as_slice()
        {
            break child.clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let deleting = replicas
        .b
        .delete_stack(&alice(), "endless")
        .await
        .expect("B's delete stops A's create");
    assert_eq!(deleting.stack_status(), "DELETE_IN_PROGRESS");
    let gone = settled(&replicas.store, &stack).await;
    assert!(gone.deleted_at.is_some(), "{}", gone.stack_status());
    let nested = replicas.row(&nested).await;
    assert!(nested.deleted_at.is_some(), "{}", nested.stack_status());
    let reasons = stack_reasons(&replicas.store, &stack).await;
    assert!(
        reasons
            .iter()
            .any(|reason| reason.contains("CREATE stopped: the stack is being deleted")),
        "{reasons:?}"
    );
    assert!(
        !reasons.iter().any(|reason| reason.contains("ROLLBACK")),
        "a stopped create does not roll back: {reasons:?}"
    );
}

/// A cancel on engine B of an update engine A runs reaches A through the
/// stack's lease: the update stops and rolls back, as a cancel on A does.
async fn a_cancel_on_another_engine_rolls_the_update_back(database: &TestDatabase) {
    let replicas = replicas(database).await;
    let before = "heat_template_version: 2021-04-16\nresources:\n  r: {type: OS::Heat::TestResource, properties: {value: before}}\n";
    let slow = "heat_template_version: 2021-04-16\nresources:\n  r: {type: OS::Heat::TestResource, properties: {value: before}}\n  slow:\n    type: OS::Heat::TestResource\n    depends_on: r\n    properties: {action_wait_secs: {create: 4}}\n  after_slow: {type: OS::Heat::None, depends_on: slow}\n";
    let stack = replicas.created_on_a("cancelled", before).await;
    replicas
        .update_on_a(
            &stack,
            UpdateStack {
                template: slow.into(),
                ..UpdateStack::default()
            },
        )
        .await;
    reaches(&replicas.store, &stack, "slow", "CREATE_IN_PROGRESS").await;
    replicas
        .b
        .cancel_update(&alice(), "cancelled")
        .await
        .expect("B's cancel is accepted");
    settled_as(&replicas.store, &stack, "ROLLBACK_COMPLETE").await;
    let names: Vec<String> = resource_states(&replicas.store, &stack)
        .await
        .into_keys()
        .collect();
    assert_eq!(names, ["r"], "what the cancelled update added is gone");
}

ember_runtime::store_suite!(
    a_cancel_on_another_engine_rolls_the_update_back,
    a_delete_on_another_engine_stops_the_operation_and_deletes_the_tree,
    a_dead_engines_suspend_is_resumed_without_suspending_twice,
    a_dead_engines_restore_is_failed_with_why,
    a_dead_engines_create_is_taken_over_as_soon_as_its_lease_expires,
    a_lease_that_expired_while_a_sweep_pass_ran_is_swept_at_once,
    an_update_handed_back_at_shutdown_is_resumed_by_another_engine,
    a_dead_engines_update_is_resumed_once_its_lease_expires,
    a_rollback_handed_back_at_shutdown_is_resumed_by_another_engine,
    a_create_handed_back_at_shutdown_is_resumed_by_another_engine,
    a_delete_handed_back_at_shutdown_is_resumed_by_another_engine,
    an_orphan_with_a_nested_stack_in_flight_is_resumed_without_making_it_twice,
);
