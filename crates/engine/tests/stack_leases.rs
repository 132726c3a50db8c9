//! The stack lease conformance suite, on SQLite and PostgreSQL: takes race
//! to one winner, a fence that moved on writes nothing, the orphan sweep
//! decides once and never overwrites a stack that finished, a dropped guard
//! frees the stack, a busy take is refused with a typed refusal (which a
//! parent's step waits out on its nested stack), and an engine that lost
//! its lease stops writing. Races
//! run two connection pools, as two engine replicas would.

mod stack_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use ember_engine::Error;
use ember_engine::domain::{
    ActionStatus, Event, Resource, Stack, StackAction, StackDefinition, StackWideAction,
};
use ember_engine::resources::ResourceTypeRegistry;
use ember_engine::stacks::{
    CreateStack, LeaseHolder, StackBusy, StackLease, StackOperations, StackSettings, Stops, Swept,
    TakeRecord, TransitionWriter,
};
use ember_engine::store::{
    EventListQuery, FencedTransition, FencedWrite, LeaseFence, LeaseRenewal, LeaseRequest,
    LeaseTake, NewStack, OperationStart, SqlStackStore, StackStore, StartWrites, WriteBatch,
    lease_lost, migrations::Migrator,
};
use ember_runtime::Identity;
use ember_runtime::database::{connect_and_migrate, testing::TestDatabase};
use sea_orm::{ConnectionTrait, DatabaseBackend, DatabaseConnection, Statement};
use uuid::Uuid;

/// Runs `sql` (written with `$1`, `$2`… placeholders) on either backend.
async fn execute(connection: &DatabaseConnection, sql: &str, values: Vec<sea_orm::Value>) {
    let backend = connection.get_database_backend();
    let sql = match backend {
        DatabaseBackend::Sqlite => (1..=values.len()).rev().fold(sql.to_owned(), |sql, index| {
            sql.replace(&format!("${index}"), "?")
        }),
        _ => sql.to_owned(),
    };
    connection
        .execute_raw(Statement::from_sql_and_values(backend, sql, values))
        .await
        .expect("executed");
}

async fn store(database: &TestDatabase) -> Arc<dyn StackStore> {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    Arc::new(SqlStackStore::new(connection))
}

fn alice() -> Identity {
    Identity::new("alice", "project-a", vec!["member".to_owned()])
}

fn new_stack(name: &str) -> Stack {
    Stack {
        status: ActionStatus::InProgress,
        status_reason: "Stack CREATE started".into(),
        ..stack_support::stack_row("project-a", name)
    }
}

/// A take by a new engine now, for 30 s: the fence, or `None` while
/// another holds the lease.
async fn take_now(
    store: &Arc<dyn StackStore>,
    stack_id: Uuid,
    operation: &str,
) -> Option<LeaseFence> {
    let now = ember_runtime::time::now();
    store
        .take_stack_lease(&LeaseTake::new(
            stack_id,
            Uuid::new_v4(),
            operation,
            now,
            now + chrono::Duration::seconds(30),
        ))
        .await
        .expect("take")
}

/// How long a test's new lease has left: a live engine's, and one whose
/// engine "died" half a minute ago.
const LIVE: chrono::Duration = chrono::Duration::seconds(30);
const EXPIRED: chrono::Duration = chrono::Duration::seconds(-30);

/// A stack recorded CREATE_IN_PROGRESS by `engine` under a new lease that
/// expires `expires_in` from now, with one resource in progress; the lease's
/// fence and the resource.
async fn recorded_by(
    store: &Arc<dyn StackStore>,
    stack: &Stack,
    engine: Uuid,
    expires_in: chrono::Duration,
) -> (LeaseFence, Resource) {
    let mut resource = Resource::initial(stack.id, "server", "OS::Heat::None", stack.created_at);
    let now = ember_runtime::time::now();
    let fence = store
        .create_stack_with_lease(&NewStack {
            stack: stack.clone(),
            definition: StackDefinition::default(),
            resources: vec![resource.clone()],
            event: Event::for_stack(stack, "Stack CREATE started", stack.created_at),
            lease: LeaseRequest::new(engine, "CREATE", now, now + expires_in),
        })
        .await
        .expect("created");
    resource.action = StackAction::Create;
    resource.status = ActionStatus::InProgress;
    let lost = store
        .record_resource_transitions(&[FencedTransition {
            fence,
            event: Event::for_resource(&resource, Utc::now()),
            resource: resource.clone(),
        }])
        .await
        .expect("recorded");
    assert!(lost.is_empty());
    (fence, resource)
}

/// [`recorded_by`] a new engine.
async fn recorded(
    store: &Arc<dyn StackStore>,
    stack: &Stack,
    expires_in: chrono::Duration,
) -> (LeaseFence, Resource) {
    recorded_by(store, stack, Uuid::new_v4(), expires_in).await
}

/// The stack's new state (`finish`: its final state, releasing the lease)
/// written alone, as the transition writer would in a batch of one:
/// `Error::LeaseLost` when the fence no longer holds.
async fn stack_write(
    store: &Arc<dyn StackStore>,
    stack: &Stack,
    event: &Event,
    fence: LeaseFence,
    finish: bool,
) -> ember_engine::Result<()> {
    let (stack, event) = (stack.clone(), event.clone());
    let write = if finish {
        FencedWrite::Finish {
            fence,
            stack,
            event,
        }
    } else {
        FencedWrite::Stack {
            fence,
            stack,
            event,
            audit: None,
        }
    };
    if store.record_fenced_writes(&[write]).await?.is_empty() {
        Ok(())
    } else {
        Err(lease_lost(fence))
    }
}

async fn stack_events(store: &Arc<dyn StackStore>, stack: &Stack) -> Vec<Event> {
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
        .collect()
}

fn complete(stack: &Stack) -> (Stack, Event) {
    let mut done = stack.clone();
    done.status = ActionStatus::Complete;
    done.status_reason = "Stack CREATE completed successfully".into();
    done.updated_at = Utc::now();
    let event = Event::for_stack(&done, &done.status_reason, done.updated_at);
    (done, event)
}

async fn racing_takes_give_the_lease_to_one(database: &TestDatabase) {
    let pools = [store(database).await, store(database).await];
    for _ in 0..10 {
        let stack_id = Uuid::new_v4();
        let takes = (0..8).map(|index| take_now(&pools[index % 2], stack_id, "UPDATE"));
        let winners = futures::future::join_all(takes)
            .await
            .into_iter()
            .flatten()
            .count();
        assert_eq!(winners, 1, "exactly one take wins");
    }
}

async fn a_fence_that_moved_on_writes_nothing(database: &TestDatabase) {
    let store = store(database).await;
    let stack = new_stack("fenced");
    let (old, resource) = recorded(&store, &stack, EXPIRED).await;
    // Another engine takes the expired lease over.
    let now = ember_runtime::time::now();
    let new = take_now(&store, stack.id, "DELETE")
        .await
        .expect("expired, so taken over");
    assert!(new.generation > old.generation);
    let before = stack_events(&store, &stack).await.len();

    let (done, event) = complete(&stack);
    for result in [
        stack_write(&store, &done, &event, old, false).await,
        stack_write(&store, &done, &event, old, true).await,
        store
            .begin_stack_update(&done, &StackDefinition::default(), &[], &event, old)
            .await,
        store
            .retire_resources(
                &[(resource.clone(), Event::for_resource(&resource, now))],
                old,
            )
            .await,
    ] {
        assert!(matches!(result, Err(Error::LeaseLost(_))), "{result:?}");
    }
    let current = store
        .get_stack(stack.id)
        .await
        .expect("read")
        .expect("stack");
    assert_eq!(
        current.stack_status(),
        "CREATE_IN_PROGRESS",
        "nothing written"
    );
    assert_eq!(stack_events(&store, &stack).await.len(), before);
    assert_eq!(store.list_resources(stack.id).await.expect("rows").len(), 1);

    // A batch that spans stacks: the stale fence's transitions are dropped,
    // the other stack's are committed.
    let other = new_stack("other");
    let (held, other_resource) = recorded(&store, &other, LIVE).await;
    let mut stale = resource.clone();
    stale.status = ActionStatus::Complete;
    let mut fresh = other_resource.clone();
    fresh.status = ActionStatus::Complete;
    let lost = store
        .record_resource_transitions(&[
            FencedTransition {
                fence: old,
                event: Event::for_resource(&stale, now),
                resource: stale,
            },
            FencedTransition {
                fence: held,
                event: Event::for_resource(&fresh, now),
                resource: fresh,
            },
        ])
        .await
        .expect("batch");
    assert_eq!(lost, vec![old]);
    let rows = store.list_resources(stack.id).await.expect("rows");
    assert_eq!(
        rows[0].status,
        ActionStatus::InProgress,
        "stale row unchanged"
    );
    let rows = store.list_resources(other.id).await.expect("rows");
    assert_eq!(rows[0].status, ActionStatus::Complete, "held row written");

    // The new holder writes; the old one cannot release it.
    store.release_stack_lease(old).await.expect("no-op");
    stack_write(&store, &done, &event, new, false)
        .await
        .expect("the new holder writes");
}

async fn the_sweep_never_overwrites_a_finished_stack(database: &TestDatabase) {
    let holder_pool = store(database).await;
    let sweeper_pool = store(database).await;
    let sweeper = Uuid::new_v4();
    let (mut finished, mut swept) = (0, 0);
    for round in 0..25 {
        let stack = new_stack(&format!("race-{round}"));
        let engine = Uuid::new_v4();
        let (fence, _) = recorded_by(&holder_pool, &stack, engine, EXPIRED).await;
        // The sweep has seen the orphan; now the slow holder finishes at
        // the same moment the sweep decides.
        let candidate = sweeper_pool
            .list_orphan_candidates(ember_runtime::time::now(), 1000)
            .await
            .expect("candidates")
            .into_iter()
            .find(|candidate| candidate.stack.id == stack.id)
            .expect("an orphan");
        assert_eq!(candidate.holder, Some(engine));
        let (done, event) = complete(&stack);
        let (finish, sweep) = tokio::join!(
            stack_write(&holder_pool, &done, &event, fence, true),
            sweeper_pool.fail_orphaned_stack(
                &candidate,
                sweeper,
                ember_runtime::time::now(),
                "CREATE interrupted: engine went away",
            ),
        );
        let sweep = sweep.expect("sweep ran");
        let current = holder_pool
            .get_stack(stack.id)
            .await
            .expect("read")
            .expect("stack");
        let statuses: Vec<String> = stack_events(&holder_pool, &stack)
            .await
            .iter()
            .map(Event::resource_status)
            .collect();
        match (finish, sweep) {
            (Ok(()), None) => {
                finished += 1;
                assert_eq!(current.stack_status(), "CREATE_COMPLETE");
                assert_eq!(statuses, ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]);
            }
            (Err(Error::LeaseLost(_)), Some(failed)) => {
                swept += 1;
                assert_eq!(failed.stack_status(), "CREATE_FAILED");
                assert_eq!(current.stack_status(), "CREATE_FAILED");
                assert_eq!(statuses, ["CREATE_IN_PROGRESS", "CREATE_FAILED"]);
                let rows = holder_pool.list_resources(stack.id).await.expect("rows");
                assert_eq!(rows[0].resource_status(), "CREATE_FAILED");
            }
            other => panic!("round {round}: both or neither decided: {other:?} ({statuses:?})"),
        }
        // Either way the stack is free for the next operation.
        assert!(
            take_now(&holder_pool, stack.id, "DELETE").await.is_some(),
            "round {round}: the lease was released with the decision"
        );
    }
    eprintln!("the holder won {finished} rounds, the sweep {swept}");
    assert_eq!(finished + swept, 25);
}

async fn two_sweepers_fail_an_orphan_once(database: &TestDatabase) {
    let pools = [store(database).await, store(database).await];
    for round in 0..10 {
        let stack = new_stack(&format!("orphan-{round}"));
        recorded(&pools[0], &stack, EXPIRED).await;
        let candidates = pools[1]
            .list_orphan_candidates(ember_runtime::time::now(), 1000)
            .await
            .expect("candidates");
        let candidate = candidates
            .iter()
            .find(|candidate| candidate.stack.id == stack.id)
            .expect("orphan");
        let now = ember_runtime::time::now();
        let (one, two) = tokio::join!(
            pools[0].fail_orphaned_stack(candidate, Uuid::new_v4(), now, "interrupted"),
            pools[1].fail_orphaned_stack(candidate, Uuid::new_v4(), now, "interrupted"),
        );
        let decided = [one.expect("one"), two.expect("two")]
            .into_iter()
            .flatten()
            .count();
        assert_eq!(decided, 1, "round {round}");
        let failed = stack_events(&pools[0], &stack)
            .await
            .iter()
            .filter(|event| event.resource_status() == "CREATE_FAILED")
            .count();
        assert_eq!(failed, 1, "one FAILED event");
    }
}

async fn a_dropped_guard_frees_the_stack(database: &TestDatabase) {
    let writer = TransitionWriter::start(store(database).await);
    let stack_id = Uuid::new_v4();
    let stops = Stops::default();
    let take = || {
        StackLease::take(
            &writer,
            &stops,
            stack_id,
            "guarded",
            Uuid::new_v4(),
            LeaseHolder::Action(StackAction::Update),
            Duration::from_secs(30),
        )
    };
    let lease = take().await.expect("free");
    let busy = take().await.err().expect("busy while held");
    assert!(matches!(busy, Error::Conflict(_)), "{busy:?}");
    // A request that went away between the take and the run: the guard is
    // dropped, the lease is released in the background.
    drop(lease);
    let deadline = Instant::now() + Duration::from_secs(5);
    let lease = loop {
        match take().await {
            Ok(lease) => break lease,
            Err(error) => {
                assert!(Instant::now() < deadline, "never released: {error}");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    // A start that fails releases before it answers.
    let failed = lease
        .start(async { Err::<(), _>(Error::Conflict("refused".into())) })
        .await;
    assert!(failed.is_err());
    take().await.expect("free at once after a failed start");
}

/// A take of a lease another operation holds is refused with a typed
/// [`StackBusy`] naming the stack — what a caller that waits a busy lease
/// out matches on — and to a user it is the same 409 as ever, in the same
/// words.
async fn a_busy_lease_is_refused_with_a_typed_refusal(database: &TestDatabase) {
    let writer = TransitionWriter::start(store(database).await);
    let stack_id = Uuid::new_v4();
    let stops = Stops::default();
    let try_take = || {
        StackLease::try_take(
            &writer,
            &stops,
            stack_id,
            "wanted",
            Uuid::new_v4(),
            LeaseHolder::Action(StackAction::Suspend),
            Duration::from_secs(30),
        )
    };
    let _held = try_take().await.expect("answered").expect("free");
    let busy = try_take()
        .await
        .expect("answered")
        .err()
        .expect("busy while held");
    assert_eq!(
        busy,
        StackBusy {
            stack_name: "wanted".into()
        }
    );
    let refused = StackLease::take(
        &writer,
        &stops,
        stack_id,
        "wanted",
        Uuid::new_v4(),
        LeaseHolder::Action(StackAction::Suspend),
        Duration::from_secs(30),
    )
    .await
    .err()
    .expect("busy while held");
    let words = "stack \"wanted\" is busy: another operation is in progress on it (try again when it finishes)";
    assert_eq!(refused, Error::Conflict(words.into()));
    assert_eq!(Error::from(busy), refused);
    let status = tonic::Status::from(refused);
    assert_eq!(
        (status.code(), status.message()),
        (tonic::Code::FailedPrecondition, words),
        "a 409 as ever"
    );
}

/// A parent's suspend reaching its nested stack while the nested stack's
/// lease is held though it is not in progress (an engine that went away
/// took it and died before it wrote anything) waits the lease out — the
/// typed busy refusal asked again until the lease expired — instead of
/// failing the parent with "is busy".
async fn a_parents_step_waits_out_a_nested_stacks_stale_lease(database: &TestDatabase) {
    let store = store(database).await;
    let operations = StackOperations::configured(
        store.clone(),
        Arc::new(ResourceTypeRegistry::builtin()),
        StackSettings {
            lease_ttl: Duration::from_secs(2),
            ..StackSettings::default()
        },
    );
    let child = "heat_template_version: 2021-04-16\nresources:\n  inner: {type: OS::Heat::None}\n";
    let parent = "heat_template_version: 2021-04-16\nresources:\n  nested: {type: child.yaml}\n";
    let mut create = CreateStack {
        name: "patient".into(),
        template: parent.into(),
        disable_rollback: true,
        ..CreateStack::default()
    };
    create.files.insert("child.yaml".into(), child.into());
    let stack = operations
        .create_stack(&alice(), create)
        .await
        .expect("accepted");
    let created = settled(&operations, "patient").await;
    assert_eq!(
        created.stack_status(),
        "CREATE_COMPLETE",
        "{}",
        created.status_reason
    );
    let nested_id: Uuid = store
        .list_resources(stack.id)
        .await
        .expect("rows")
        .into_iter()
        .find(|row| row.name == "nested")
        .and_then(|row| row.physical_id)
        .expect("the nested stack's id")
        .parse()
        .expect("a uuid");
    // Another engine's lease on the nested stack, with nothing written
    // under it: it expires in a second.
    let now = ember_runtime::time::now();
    store
        .take_stack_lease(&LeaseTake::new(
            nested_id,
            Uuid::new_v4(),
            "SUSPEND",
            now,
            now + chrono::Duration::seconds(1),
        ))
        .await
        .expect("take")
        .expect("taken");
    operations
        .run_stack_wide_action(&alice(), "patient", StackWideAction::Suspend)
        .await
        .expect("suspend accepted");
    let suspended = settled(&operations, "patient").await;
    assert_eq!(
        suspended.stack_status(),
        "SUSPEND_COMPLETE",
        "{}",
        suspended.status_reason
    );
}

/// Alice's `name` once it has left IN_PROGRESS.
async fn settled(operations: &StackOperations, name: &str) -> Stack {
    stack_support::settled(operations, &alice(), name, Duration::from_secs(20)).await
}

const SLOW: &str = "heat_template_version: 2021-04-16\nresources:\n  quick: {type: OS::Heat::None}\n  slow:\n    type: OS::Heat::TestResource\n    depends_on: quick\n    properties: {action_wait_secs: {create: 2}}\n  after:\n    type: OS::Heat::None\n    depends_on: slow\n";

async fn an_engine_that_lost_its_lease_stops_writing(database: &TestDatabase) {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let store: Arc<dyn StackStore> = Arc::new(SqlStackStore::new(connection.clone()));
    let settings = || StackSettings {
        lease_ttl: Duration::from_secs(3),
        ..StackSettings::default()
    };
    let engine_a = StackOperations::configured(
        store.clone(),
        Arc::new(ResourceTypeRegistry::builtin()),
        settings(),
    );
    let engine_b = StackOperations::configured(
        store.clone(),
        Arc::new(ResourceTypeRegistry::builtin()),
        settings(),
    );
    let stack = engine_a
        .create_stack(
            &alice(),
            CreateStack {
                name: "stolen".into(),
                template: SLOW.into(),
                disable_rollback: true,
                ..CreateStack::default()
            },
        )
        .await
        .expect("accepted");
    // Engine B takes the stack over while A is inside the slow resource
    // (as the sweep does once A's lease expired: the generation moves on).
    tokio::time::sleep(Duration::from_millis(300)).await;
    execute(
        &connection,
        "UPDATE stack_leases SET generation = generation + 1, engine_id = $1 WHERE stack_id = $2",
        vec![engine_b.engine_id().into(), stack.id.into()],
    )
    .await;
    // A finishes its slow resource and stops: nothing more is written.
    tokio::time::sleep(Duration::from_millis(2700)).await;
    let current = engine_a
        .find_stack(&alice(), "stolen")
        .await
        .expect("stack");
    assert_eq!(
        current.stack_status(),
        "CREATE_IN_PROGRESS",
        "A may not write the end"
    );
    let rows: std::collections::BTreeMap<String, String> = store
        .list_resources(stack.id)
        .await
        .expect("rows")
        .into_iter()
        .map(|row| (row.name.clone(), row.resource_status()))
        .collect();
    assert_eq!(rows["quick"], "CREATE_COMPLETE");
    assert_eq!(rows["slow"], "CREATE_IN_PROGRESS", "its end was refused");
    assert_eq!(
        rows["after"], "INIT_COMPLETE",
        "nothing started after the loss"
    );
    // The new holder's lease lapses; B's sweep takes the stack over and
    // resumes the create (the slow resource only acts on its row): what A
    // made is kept, the rest is made, once.
    let long_ago = ember_runtime::time::now() - chrono::Duration::hours(1);
    execute(
        &connection,
        "UPDATE stack_leases SET expires_at = $1 WHERE stack_id = $2",
        vec![long_ago.into(), stack.id.into()],
    )
    .await;
    let quick_before = store
        .list_resources(stack.id)
        .await
        .expect("rows")
        .into_iter()
        .find(|row| row.name == "quick")
        .expect("quick");
    assert_eq!(
        engine_b.recover_orphaned_stacks().await.expect("swept"),
        Swept {
            resumed: 1,
            failed: 0
        }
    );
    let current = wait_for_final(&engine_b, "stolen").await;
    assert_eq!(current.stack_status(), "CREATE_COMPLETE");
    let rows = store.list_resources(stack.id).await.expect("rows");
    assert!(
        rows.iter()
            .all(|row| row.resource_status() == "CREATE_COMPLETE"),
        "{rows:?}"
    );
    let quick_after = rows.iter().find(|row| row.name == "quick").expect("quick");
    assert_eq!(
        (quick_after.id, quick_after.updated_at),
        (quick_before.id, quick_before.updated_at),
        "what A made is kept as it was"
    );
    let events = stack_events(&store, &stack).await;
    let statuses: Vec<String> = events.iter().map(Event::resource_status).collect();
    assert_eq!(
        statuses,
        [
            "CREATE_IN_PROGRESS",
            "CREATE_IN_PROGRESS",
            "CREATE_COMPLETE"
        ]
    );
    assert!(
        events[1].reason.contains("resumed")
            && events[1].reason.contains(&engine_b.engine_id().to_string()),
        "{}",
        events[1].reason
    );
    assert_eq!(
        engine_b.recover_orphaned_stacks().await.expect("swept"),
        Swept::default(),
        "nothing is left to take over"
    );
    // And the stack can be deleted.
    engine_b
        .delete_stack(&alice(), "stolen")
        .await
        .expect("delete accepted");
}

/// The stack named `name` once its operation ended (at most 20 s).
async fn wait_for_final(engine: &StackOperations, name: &str) -> Stack {
    for _ in 0..400 {
        let stack = engine.find_stack(&alice(), name).await.expect("stack");
        if stack.status != ActionStatus::InProgress {
            return stack;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("stack {name} is still in progress after 20 s");
}

/// The transition writer's batch: resource transitions, stack transitions
/// and operation ends of several stacks in one transaction, each under its
/// own fence — a stale fence's writes are dropped, the others committed, and
/// an end releases its lease with the final state.
async fn one_batch_commits_every_stacks_writes_under_its_own_fence(database: &TestDatabase) {
    let store = store(database).await;
    let take = |stack_id| take_now(&store, stack_id, "CREATE");
    let (ending, moving, stale) = (new_stack("ending"), new_stack("moving"), new_stack("stale"));
    let (ending_fence, mut ending_resource) = recorded(&store, &ending, LIVE).await;
    let (moving_fence, _) = recorded(&store, &moving, LIVE).await;
    let (stale_fence, mut stale_resource) = recorded(&store, &stale, EXPIRED).await;
    let taken_over = take(stale.id).await.expect("expired, so taken over");
    let events_before = [
        stack_events(&store, &ending).await.len(),
        stack_events(&store, &moving).await.len(),
        stack_events(&store, &stale).await.len(),
    ];

    let now = Utc::now();
    ending_resource.status = ActionStatus::Complete;
    stale_resource.status = ActionStatus::Complete;
    let (ended, ended_event) = complete(&ending);
    let mut moved = moving.clone();
    moved.action = StackAction::Rollback;
    moved.status_reason = "Stack ROLLBACK started".into();
    let moved_event = Event::for_stack(&moved, &moved.status_reason, now);
    let (stale_end, stale_end_event) = complete(&stale);
    let lost = store
        .record_fenced_writes(&[
            FencedWrite::Resource(FencedTransition {
                fence: ending_fence,
                event: Event::for_resource(&ending_resource, now),
                resource: ending_resource,
            }),
            FencedWrite::Resource(FencedTransition {
                fence: stale_fence,
                event: Event::for_resource(&stale_resource, now),
                resource: stale_resource,
            }),
            FencedWrite::Stack {
                fence: moving_fence,
                stack: moved,
                event: moved_event,
                audit: None,
            },
            FencedWrite::Finish {
                fence: ending_fence,
                stack: ended,
                event: ended_event,
            },
            FencedWrite::Finish {
                fence: stale_fence,
                stack: stale_end,
                event: stale_end_event,
            },
        ])
        .await
        .expect("batch");
    assert_eq!(lost, vec![stale_fence], "only the stale fence is lost");

    let status = |stack: Stack| {
        let store = store.clone();
        async move {
            store
                .get_stack(stack.id)
                .await
                .expect("read")
                .expect("stack")
                .stack_status()
        }
    };
    assert_eq!(status(ending.clone()).await, "CREATE_COMPLETE");
    assert_eq!(status(moving.clone()).await, "ROLLBACK_IN_PROGRESS");
    assert_eq!(
        status(stale.clone()).await,
        "CREATE_IN_PROGRESS",
        "stale: nothing written"
    );
    let rows = store.list_resources(ending.id).await.expect("rows");
    assert_eq!(rows[0].status, ActionStatus::Complete);
    let rows = store.list_resources(stale.id).await.expect("rows");
    assert_eq!(
        rows[0].status,
        ActionStatus::InProgress,
        "stale row unchanged"
    );
    assert_eq!(
        [
            stack_events(&store, &ending).await.len(),
            stack_events(&store, &moving).await.len(),
            stack_events(&store, &stale).await.len(),
        ],
        [events_before[0] + 1, events_before[1] + 1, events_before[2]],
        "one stack event per committed stack write, none for the stale one"
    );
    // The end released its lease; the moving stack's is still held, and
    // the stale end released nothing of the new holder's.
    assert!(
        take(ending.id).await.is_some(),
        "released with the final state"
    );
    assert!(take(moving.id).await.is_none(), "still held");
    assert!(take(stale.id).await.is_none(), "the new holder keeps it");
    let held = Event::for_stack(&stale, "held", now);
    stack_write(&store, &stale, &held, taken_over, false)
        .await
        .expect("the new holder writes");
}

/// A new stack for a batch: one resource, its first event, a lease for a
/// new engine.
fn new_in_batch(name: &str) -> NewStack {
    let stack = new_stack(name);
    let now = ember_runtime::time::now();
    NewStack {
        resources: vec![Resource::initial(stack.id, "server", "OS::Heat::None", now)],
        event: Event::for_stack(&stack, "Stack CREATE started", now),
        definition: StackDefinition::default(),
        lease: LeaseRequest {
            engine_id: Uuid::new_v4(),
            operation: "CREATE".into(),
            now,
            expires_at: now + LIVE,
        },
        stack,
    }
}

fn take_in_batch(stack_id: Uuid) -> LeaseTake {
    let now = ember_runtime::time::now();
    LeaseTake::new(stack_id, Uuid::new_v4(), "DELETE", now, now + LIVE)
}

/// The writer's whole batch: fenced writes, new stacks and lease takes at
/// once. A new stack whose name a live stack has — recorded before, or
/// earlier in the same batch — is refused alone (nothing of it written);
/// a take of a held lease gets nothing, of a released one the next
/// generation; the rest is committed.
async fn one_batch_records_new_stacks_and_takes_leases(database: &TestDatabase) {
    let store = store(database).await;
    let (existing, busy, done) = (new_stack("existing"), new_stack("busy"), new_stack("done"));
    recorded(&store, &existing, LIVE).await;
    let (busy_fence, _) = recorded(&store, &busy, LIVE).await;
    let (done_fence, _) = recorded(&store, &done, LIVE).await;
    let (ended, ended_event) = complete(&done);

    let batch = WriteBatch {
        writes: vec![FencedWrite::Finish {
            fence: done_fence,
            stack: ended,
            event: ended_event,
        }],
        new_stacks: vec![
            new_in_batch("fresh"),
            new_in_batch("existing"),
            new_in_batch("twin"),
            new_in_batch("twin"),
        ],
        takes: vec![take_in_batch(busy.id), take_in_batch(done.id)],
    };
    let outcome = store.record_batch(&batch).await.expect("batch");
    assert!(outcome.lost.is_empty());
    let fresh = &batch.new_stacks[0].stack;
    let twin = &batch.new_stacks[2].stack;
    assert_eq!(
        outcome.new_stacks[0].as_ref().expect("fresh recorded"),
        &LeaseFence::first(fresh.id)
    );
    assert!(outcome.new_stacks[2].is_ok(), "the first twin is recorded");
    for refused in [1, 3] {
        match &outcome.new_stacks[refused] {
            Err(Error::Conflict(message)) => assert!(
                message.contains("already exists in this project"),
                "{message}"
            ),
            other => panic!("a taken name should be a conflict: {other:?}"),
        }
        let stack = &batch.new_stacks[refused].stack;
        assert!(
            store.get_stack(stack.id).await.expect("read").is_none(),
            "nothing of a refused stack is written"
        );
        assert!(
            store
                .list_resources(stack.id)
                .await
                .expect("rows")
                .is_empty()
        );
        assert!(stack_events(&store, stack).await.is_empty());
    }
    for recorded in [fresh, twin] {
        let read = store.get_stack(recorded.id).await.expect("read");
        assert_eq!(read.as_ref(), Some(recorded));
        assert_eq!(
            store.list_resources(recorded.id).await.expect("rows").len(),
            1
        );
        assert_eq!(stack_events(&store, recorded).await.len(), 1);
        assert!(
            take_now(&store, recorded.id, "DELETE").await.is_none(),
            "its lease is held"
        );
    }
    let takes: Vec<Option<LeaseFence>> = outcome
        .takes
        .into_iter()
        .map(|taken| taken.expect("take"))
        .collect();
    assert_eq!(takes[0], None, "busy: another operation holds it");
    assert_eq!(
        takes[1],
        Some(LeaseFence::at(done.id, done_fence.generation + 1)),
        "released in this batch, then taken"
    );
    assert_ne!(busy_fence.generation, 0);
}

/// Through the transition writer: racing creates of one name get one
/// stack, racing takes of one lease get one holder, and a new stack whose
/// rows the database refuses (here two resources with one id) fails alone
/// — the batch it shared is committed in parts.
async fn the_writer_answers_each_new_stack_and_take_alone(database: &TestDatabase) {
    let store = store(database).await;
    // SQLite's one writer takes them into its batches; PostgreSQL commits
    // each on a connection of its own, in parallel.
    assert_eq!(
        store.commits_one_at_a_time(),
        database.url.starts_with("sqlite:")
    );
    let writer = TransitionWriter::start(store.clone());
    let creates = (0..6).map(|_| writer.create_stack(new_in_batch("contested")));
    let created = futures::future::join_all(creates).await;
    assert_eq!(created.iter().filter(|created| created.is_ok()).count(), 1);
    assert!(
        created
            .iter()
            .filter_map(|created| created.as_ref().err())
            .all(|error| matches!(error, Error::Conflict(_))),
        "{created:?}"
    );

    let (done, _) = recorded(&store, &new_stack("released"), LIVE).await;
    store.release_stack_lease(done).await.expect("released");
    let takes = (0..6).map(|_| writer.take_lease(take_in_batch(done.stack_id)));
    let taken: Vec<Option<LeaseFence>> = futures::future::join_all(takes)
        .await
        .into_iter()
        .map(|taken| taken.expect("take"))
        .collect();
    assert_eq!(taken.iter().flatten().count(), 1, "one holder: {taken:?}");

    let good = new_in_batch("good");
    let mut bad = new_in_batch("bad");
    let mut twin = bad.resources[0].clone();
    twin.name = "twin".into();
    bad.resources.push(twin);
    let (good_id, bad_id) = (good.stack.id, bad.stack.id);
    let (good, bad, take) = tokio::join!(
        writer.create_stack(good),
        writer.create_stack(bad),
        writer.take_lease(take_in_batch(Uuid::new_v4())),
    );
    good.expect("the good stack is recorded");
    assert!(
        matches!(bad, Err(Error::Database(_)) | Err(Error::Conflict(_))),
        "the bad stack fails: {bad:?}"
    );
    assert!(
        take.expect("take").is_some(),
        "a stack's first lease is free"
    );
    assert!(store.get_stack(good_id).await.expect("read").is_some());
    assert!(store.get_stack(bad_id).await.expect("read").is_none());
}

/// An end queued with `finish_after_earlier` is written only if every
/// write its run queued before it commits: behind a write the database
/// refused — answered in an earlier batch, or failing with its own —
/// nothing of the end is written and the lease stays held, until the run
/// ends as any run does; another run's end commits all along.
async fn an_end_queued_behind_a_failed_write_is_not_written(database: &TestDatabase) {
    let store = store(database).await;
    let writer = TransitionWriter::start(store.clone());
    let (broken, other) = (new_stack("broken"), new_stack("other"));
    let (fence, mut resource) = recorded(&store, &broken, LIVE).await;
    let (other_fence, _) = recorded(&store, &other, LIVE).await;
    resource.action = StackAction::Create;
    resource.status = ActionStatus::InProgress;
    let event = Event::for_resource(&resource, Utc::now());
    writer
        .record(fence, resource.clone(), event.clone())
        .await
        .expect("recorded");
    // The same event again: its id is taken, the database refuses it.
    let refused = writer.record(fence, resource.clone(), event.clone()).await;
    assert!(
        matches!(refused, Err(Error::Database(_)) | Err(Error::Conflict(_))),
        "{refused:?}"
    );
    let (ended, ended_event) = complete(&broken);
    let end = writer
        .finish_after_earlier(fence, &ended, ended_event.clone())
        .expect("queued")
        .await
        .expect("answered");
    assert!(end.is_err(), "an end behind a refused write: {end:?}");

    // Another run: a refused write and its end queued at once (one batch,
    // or two).
    let at_once = new_stack("at-once");
    let (at_once_fence, mut at_once_resource) = recorded(&store, &at_once, LIVE).await;
    at_once_resource.status = ActionStatus::InProgress;
    let mut taken_id = Event::for_resource(&at_once_resource, Utc::now());
    taken_id.id = event.id;
    let refused = writer
        .enqueue(at_once_fence, at_once_resource, taken_id)
        .expect("queued");
    let (at_once_ended, at_once_event) = complete(&at_once);
    let end = writer
        .finish_after_earlier(at_once_fence, &at_once_ended, at_once_event)
        .expect("queued");
    assert!(refused.await.expect("answered").is_err());
    assert!(end.await.expect("answered").is_err());
    for stack in [&broken, &at_once] {
        let read = store
            .get_stack(stack.id)
            .await
            .expect("read")
            .expect("stack");
        assert_eq!(read.status, ActionStatus::InProgress, "no end written");
        assert!(
            take_now(&store, stack.id, "DELETE").await.is_none(),
            "the lease is still held"
        );
    }

    let (other_ended, other_event) = complete(&other);
    writer
        .finish_after_earlier(other_fence, &other_ended, other_event)
        .expect("queued")
        .await
        .expect("answered")
        .expect("another run's end is written");
    assert_eq!(
        store
            .get_stack(other.id)
            .await
            .expect("read")
            .map(|stack| stack.status_reason),
        Some(other_ended.status_reason)
    );

    // The run ends as failed with an end of its own.
    let mut failed = broken.clone();
    failed.status = ActionStatus::Failed;
    failed.status_reason = "recording the operation's progress failed".into();
    let failed_event = Event::for_stack(&failed, &failed.status_reason, Utc::now());
    writer
        .finish(fence, &failed, failed_event)
        .await
        .expect("the failed end is written");
    assert_eq!(
        store
            .get_stack(broken.id)
            .await
            .expect("read")
            .map(|stack| stack.status),
        Some(ActionStatus::Failed)
    );
    assert!(
        take_now(&store, broken.id, "DELETE").await.is_some(),
        "released with it"
    );
}

/// A take expecting the generation at which the lease was seen free starts
/// the operation only if no operation took the lease since: then the
/// stack's new state and its event are written with the take, in one
/// transaction; otherwise — the lease moved on, or is held — nothing is.
/// Alone, and through the transition writer (in its batch on SQLite).
async fn a_take_expecting_a_generation_starts_only_if_none_ran_between(database: &TestDatabase) {
    let store = store(database).await;
    let writer = TransitionWriter::start(store.clone());
    let stack = new_stack("optimistic");
    let (fence, _) = recorded(&store, &stack, LIVE).await;
    let free_generation = || async {
        store
            .free_lease_generation(stack.id, ember_runtime::time::now())
            .await
            .expect("read")
    };
    // The same, read with the stack in one statement: by name or id, in
    // its project only.
    let found_free = |project: &'static str, name_or_id: String| {
        let store = store.clone();
        async move {
            store
                .find_stack_with_free_lease(project, &name_or_id, ember_runtime::time::now())
                .await
                .expect("read")
        }
    };
    assert_eq!(free_generation().await, None, "held by its create");
    let (found, free_at) = found_free("project-a", stack.name.clone())
        .await
        .expect("found");
    assert_eq!((found.id, free_at), (stack.id, None), "held by its create");
    store.release_stack_lease(fence).await.expect("released");
    let seen = free_generation().await.expect("free once released");
    assert_eq!(seen, fence.generation);
    for name_or_id in [stack.name.clone(), stack.id.to_string()] {
        let (found, free_at) = found_free("project-a", name_or_id.clone())
            .await
            .expect("found");
        assert_eq!((found.id, free_at), (stack.id, Some(seen)), "{name_or_id}");
        assert!(
            found_free("project-b", name_or_id).await.is_none(),
            "another project's stack"
        );
    }

    let mut deleting = stack.clone();
    deleting.action = StackAction::Delete;
    deleting.status_reason = "Stack DELETE started".into();
    let starting = |generation: i64| {
        starting_at(
            stack.id,
            generation,
            StartWrites::Stack {
                stack: deleting.clone(),
                event: Event::for_stack(&deleting, &deleting.status_reason, Utc::now()),
            },
        )
    };
    let started_events = || async {
        stack_events(&store, &stack)
            .await
            .iter()
            .filter(|event| event.reason == "Stack DELETE started")
            .count()
    };
    // Another operation took the lease (and let it go) since it was seen.
    let between = take_now(&store, stack.id, "UPDATE").await.expect("taken");
    store.release_stack_lease(between).await.expect("released");
    assert_eq!(
        store.take_stack_lease(&starting(seen)).await.expect("ran"),
        None
    );
    assert_eq!(writer.take_lease(starting(seen)).await.expect("ran"), None);
    let read = store
        .get_stack(stack.id)
        .await
        .expect("read")
        .expect("stack");
    assert_eq!(read.action, StackAction::Create, "nothing written");
    assert_eq!(started_events().await, 0);
    assert!(free_generation().await.is_some(), "not taken");

    let seen = free_generation().await.expect("free");
    let started = writer
        .take_lease(starting(seen))
        .await
        .expect("ran")
        .expect("taken");
    assert_eq!(started.generation, seen + 1);
    let read = store
        .get_stack(stack.id)
        .await
        .expect("read")
        .expect("stack");
    assert_eq!(
        (read.action, read.status_reason.as_str()),
        (StackAction::Delete, "Stack DELETE started")
    );
    assert_eq!(started_events().await, 1);
    assert!(take_now(&store, stack.id, "UPDATE").await.is_none(), "held");
    // Held: refused even at its current generation.
    assert_eq!(
        store
            .take_stack_lease(&starting(started.generation))
            .await
            .expect("ran"),
        None
    );
    // Alone, once free again.
    store.release_stack_lease(started).await.expect("released");
    let alone = store
        .take_stack_lease(&starting(started.generation))
        .await
        .expect("ran")
        .expect("taken");
    assert_eq!(alone.generation, started.generation + 1);
    assert_eq!(started_events().await, 2);
}

/// An update's start and a health mark, each made with a take at the
/// generation the lease was seen free at: written whole in the take's
/// transaction when no operation took the lease since, nothing written
/// when one did. The update holds the lease it took; the mark leaves it
/// free again (at the next generation).
async fn an_update_or_a_health_mark_is_written_only_at_the_generation_seen(
    database: &TestDatabase,
) {
    let store = store(database).await;
    let writer = TransitionWriter::start(store.clone());
    let (stack, server) = idle_stack(&store, "at-once").await;
    let free_generation = || async {
        store
            .free_lease_generation(stack.id, ember_runtime::time::now())
            .await
            .expect("read")
    };
    let resource_rows = || async { store.list_resources(stack.id).await.expect("rows") };

    // A health mark: the resource CHECK_FAILED with its event, the lease
    // taken and released in one transaction.
    let mut marked = server.clone();
    marked.action = StackAction::Check;
    marked.status = ActionStatus::Failed;
    marked.status_reason = "marked by the test".into();
    let mark = |generation: i64| {
        starting_at(
            stack.id,
            generation,
            StartWrites::ResourceHealth {
                resource: marked.clone(),
                event: Event::for_resource(&marked, Utc::now()),
            },
        )
    };
    let seen = free_generation().await.expect("free");
    let between = take_now(&store, stack.id, "UPDATE").await.expect("taken");
    store.release_stack_lease(between).await.expect("released");
    assert_eq!(writer.take_lease(mark(seen)).await.expect("ran"), None);
    assert_eq!(resource_rows().await[0].status, server.status, "not marked");
    let seen = free_generation().await.expect("free");
    let taken = writer
        .take_lease(mark(seen))
        .await
        .expect("ran")
        .expect("taken");
    assert_eq!(taken.generation, seen + 1);
    let rows = resource_rows().await;
    assert_eq!(
        (
            rows[0].action,
            rows[0].status,
            rows[0].status_reason.as_str()
        ),
        (
            StackAction::Check,
            ActionStatus::Failed,
            "marked by the test"
        )
    );
    assert_eq!(
        free_generation().await,
        Some(seen + 1),
        "released with the mark"
    );
    // A row gone without the lease (not something Ember does): refused,
    // and the take with it.
    let mut gone = marked.clone();
    gone.id = Uuid::new_v4();
    let refused = store
        .take_stack_lease(&starting_at(
            stack.id,
            seen + 1,
            StartWrites::ResourceHealth {
                event: Event::for_resource(&gone, Utc::now()),
                resource: gone,
            },
        ))
        .await;
    assert!(matches!(refused, Err(Error::NotFound(_))), "{refused:?}");
    assert_eq!(free_generation().await, Some(seen + 1), "nothing taken");

    // An update's start: the stack's new state and definition (its version
    // moved on), a new resource's row and the event, under the new lease.
    let mut updating = stack.clone();
    updating.action = StackAction::Update;
    updating.status = ActionStatus::InProgress;
    updating.status_reason = "Stack UPDATE started".into();
    updating.description = "updated".into();
    let added = Resource::initial(stack.id, "added", "OS::Heat::None", Utc::now());
    let definition = StackDefinition {
        template: serde_json::json!({"heat_template_version": "2021-04-16"}),
        ..StackDefinition::default()
    };
    let update = |generation: i64| {
        starting_at(
            stack.id,
            generation,
            StartWrites::Update {
                stack: updating.clone(),
                definition: definition.clone(),
                new_resources: vec![added.clone()],
                event: Event::for_stack(&updating, &updating.status_reason, Utc::now()),
            },
        )
    };
    let (before, version) = store
        .load_versioned_definition(stack.id)
        .await
        .expect("definition");
    let seen = free_generation().await.expect("free");
    let between = take_now(&store, stack.id, "CHECK").await.expect("taken");
    store.release_stack_lease(between).await.expect("released");
    assert_eq!(writer.take_lease(update(seen)).await.expect("ran"), None);
    assert_eq!(resource_rows().await.len(), 1, "no row added");
    assert_eq!(
        store
            .load_versioned_definition(stack.id)
            .await
            .expect("read"),
        (before, version),
        "definition unchanged"
    );
    let seen = free_generation().await.expect("free");
    let taken = writer
        .take_lease(update(seen))
        .await
        .expect("ran")
        .expect("taken");
    assert_eq!(taken.generation, seen + 1);
    assert!(free_generation().await.is_none(), "held by the update");
    let read = store
        .get_stack(stack.id)
        .await
        .expect("read")
        .expect("stack");
    assert_eq!(
        (read.action, read.status, read.description.as_str()),
        (StackAction::Update, ActionStatus::InProgress, "updated")
    );
    assert_eq!(
        store
            .load_versioned_definition(stack.id)
            .await
            .expect("read"),
        (definition, version + 1)
    );
    let mut names: Vec<String> = resource_rows()
        .await
        .into_iter()
        .map(|row| row.name)
        .collect();
    names.sort();
    assert_eq!(names, ["added", "server"]);
    assert!(
        store
            .load_update_origin(stack.id)
            .await
            .expect("read")
            .is_some(),
        "the update's origin kept"
    );
    assert_eq!(
        stack_events(&store, &stack)
            .await
            .iter()
            .filter(|event| event.reason == "Stack UPDATE started")
            .count(),
        1
    );
}

/// A take that starts an operation gives the lease a holder token, so
/// its fence is known before it commits and its run may queue writes at
/// once: they commit after the take (in its batch: written after the
/// takes) when it is taken, and are refused when another take of the same
/// generation won — their generation matches the winner's, their holder
/// does not. Renewing or releasing with the loser's fence leaves the
/// winner's lease alone.
async fn writes_queued_behind_a_take_commit_with_it_or_are_refused_with_it(
    database: &TestDatabase,
) {
    let store = store(database).await;
    let writer = TransitionWriter::start(store.clone());
    let (stack, server) = idle_stack(&store, "pipelined").await;
    let mut deleting = stack.clone();
    deleting.action = StackAction::Delete;
    deleting.status_reason = "Stack DELETE started".into();
    let take_at = |generation: i64| {
        let start = OperationStart {
            generation,
            holder: Uuid::new_v4(),
            writes: StartWrites::Stack {
                stack: deleting.clone(),
                event: Event::for_stack(&deleting, &deleting.status_reason, Utc::now()),
            },
        };
        let fence = start.fence(stack.id);
        (take_in_batch(stack.id).starting(start), fence)
    };
    let transition = |fence: LeaseFence, reason: &str| {
        let mut resource = server.clone();
        resource.action = StackAction::Delete;
        resource.status = ActionStatus::Complete;
        resource.status_reason = reason.to_owned();
        FencedWrite::Resource(FencedTransition {
            fence,
            event: Event::for_resource(&resource, Utc::now()),
            resource,
        })
    };
    let server_reason = || async {
        store.list_resources(stack.id).await.expect("rows")[0]
            .status_reason
            .clone()
    };
    let free = free_generation_of(&store, stack.id).await;

    // Through the writer, as a delete queues them (in one batch or two).
    let (winner, winner_fence) = take_at(free);
    let (loser, loser_fence) = take_at(free);
    assert_eq!(
        (winner_fence.generation, winner_fence.stack_id),
        (loser_fence.generation, loser_fence.stack_id)
    );
    let answer = |record: TakeRecord| async move {
        match record {
            TakeRecord::Answered(taken) => taken,
            TakeRecord::Queued(taken) => taken.await.expect("answered").expect("ran"),
        }
    };
    let won = writer.queue_take(winner).await.expect("queued");
    let lost = writer.queue_take(loser).await.expect("queued");
    let FencedWrite::Resource(refused) = transition(loser_fence, "the loser's") else {
        unreachable!("a resource transition")
    };
    let refused = writer
        .enqueue(refused.fence, refused.resource, refused.event)
        .expect("queued");
    assert_eq!(answer(won).await, Some(winner_fence));
    assert_eq!(answer(lost).await, None);
    assert!(
        matches!(refused.await.expect("answered"), Err(Error::LeaseLost(_))),
        "the loser's write is refused"
    );
    assert_ne!(server_reason().await, "the loser's");
    // The loser's guard neither renews nor releases the winner's lease.
    let later = Utc::now() + chrono::Duration::seconds(60);
    assert_eq!(
        store
            .renew_stack_lease(loser_fence, later)
            .await
            .expect("ran"),
        LeaseRenewal::Lost
    );
    store.release_stack_lease(loser_fence).await.expect("ran");
    assert!(
        store
            .free_lease_generation(stack.id, ember_runtime::time::now())
            .await
            .expect("read")
            .is_none(),
        "still held by the winner"
    );
    writer
        .record(
            winner_fence,
            server.clone(),
            Event::for_resource(&server, Utc::now()),
        )
        .await
        .expect("the winner writes under its fence");
    store
        .release_stack_lease(winner_fence)
        .await
        .expect("released");

    // In one batch, where takes are batched (PostgreSQL's are not: each
    // is answered before its run starts): the write after the take.
    if store.commits_one_at_a_time() {
        let free = free_generation_of(&store, stack.id).await;
        let (take, fence) = take_at(free);
        let outcome = store
            .record_batch(&WriteBatch {
                writes: vec![transition(fence, "with its take")],
                takes: vec![take],
                ..WriteBatch::default()
            })
            .await
            .expect("committed");
        assert_eq!(outcome.takes.len(), 1);
        assert_eq!(*outcome.takes[0].as_ref().expect("ran"), Some(fence));
        assert!(outcome.lost.is_empty(), "{:?}", outcome.lost);
        assert_eq!(server_reason().await, "with its take");
        store.release_stack_lease(fence).await.expect("released");

        let free = free_generation_of(&store, stack.id).await;
        let (first, first_fence) = take_at(free);
        let (second, second_fence) = take_at(free);
        let outcome = store
            .record_batch(&WriteBatch {
                writes: vec![
                    transition(second_fence, "the loser's"),
                    transition(first_fence, "the winner's"),
                ],
                takes: vec![first, second],
                ..WriteBatch::default()
            })
            .await
            .expect("committed");
        let takes: Vec<Option<LeaseFence>> = outcome
            .takes
            .into_iter()
            .map(|taken| taken.expect("ran"))
            .collect();
        assert_eq!(takes, [Some(first_fence), None]);
        assert_eq!(outcome.lost, [second_fence]);
        assert_eq!(server_reason().await, "the winner's");
    }
}

/// A take of `stack_id`'s lease at `generation` that starts an operation
/// writing `writes`, with a holder token of its own.
fn starting_at(stack_id: Uuid, generation: i64, writes: StartWrites) -> LeaseTake {
    take_in_batch(stack_id).starting(OperationStart {
        generation,
        holder: Uuid::new_v4(),
        writes,
    })
}

/// A recorded stack (with one resource) whose lease is free.
async fn idle_stack(store: &Arc<dyn StackStore>, name: &str) -> (Stack, Resource) {
    let stack = new_stack(name);
    let (fence, resource) = recorded(store, &stack, LIVE).await;
    store.release_stack_lease(fence).await.expect("released");
    (stack, resource)
}

/// The generation `stack_id`'s lease is free at (it must be).
async fn free_generation_of(store: &Arc<dyn StackStore>, stack_id: Uuid) -> i64 {
    store
        .free_lease_generation(stack_id, ember_runtime::time::now())
        .await
        .expect("read")
        .expect("free")
}

ember_runtime::store_suite!(
    one_batch_records_new_stacks_and_takes_leases,
    writes_queued_behind_a_take_commit_with_it_or_are_refused_with_it,
    an_update_or_a_health_mark_is_written_only_at_the_generation_seen,
    the_writer_answers_each_new_stack_and_take_alone,
    an_end_queued_behind_a_failed_write_is_not_written,
    a_take_expecting_a_generation_starts_only_if_none_ran_between,
    racing_takes_give_the_lease_to_one,
    a_fence_that_moved_on_writes_nothing,
    the_sweep_never_overwrites_a_finished_stack,
    two_sweepers_fail_an_orphan_once,
    a_dropped_guard_frees_the_stack,
    a_busy_lease_is_refused_with_a_typed_refusal,
    a_parents_step_waits_out_a_nested_stacks_stale_lease,
    an_engine_that_lost_its_lease_stops_writing,
    one_batch_commits_every_stacks_writes_under_its_own_fence,
);
