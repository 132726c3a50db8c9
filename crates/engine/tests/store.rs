//! The engine store's conformance suite, on SQLite and PostgreSQL.

mod stack_support;

use chrono::{DateTime, Duration, Utc};
use ember_engine::Error;
use ember_engine::domain::{
    ActionStatus, Event, LockLevel, MaintenanceLock, Resource, Stack, StackAction, StackDefinition,
};
use ember_engine::store::{
    FencedTransition, FencedWrite, LeaseFence, LeaseRequest, LeaseTake, NewStack, ResourceFilter,
    SqlStackStore, StackListQuery, StackStore, migrations::Migrator,
};
use ember_runtime::database::{connect, connect_and_migrate, testing::TestDatabase};
use uuid::Uuid;

/// Records `stack` as a create does: with its lease, an empty definition,
/// no resources and its first event, in one transaction; then releases the
/// lease.
async fn insert_stack(store: &SqlStackStore, stack: &Stack) -> ember_engine::Result<()> {
    let now = ember_runtime::time::now();
    let event = Event::for_stack(stack, "Stack CREATE started", now);
    let fence = store
        .create_stack_with_lease(&NewStack {
            stack: stack.clone(),
            definition: StackDefinition::default(),
            resources: Vec::new(),
            event,
            lease: LeaseRequest::new(Uuid::now_v7(), "CREATE", now, now + Duration::seconds(60)),
        })
        .await?;
    store.release_stack_lease(fence).await
}

fn stack(project: &str, name: &str, seconds_after_start: i64) -> Stack {
    let created_at = ember_runtime::time::now() + Duration::seconds(seconds_after_start);
    Stack {
        status_reason: "Stack CREATE completed successfully".to_owned(),
        description: "a test stack".to_owned(),
        tags: vec!["web".to_owned(), "prod".to_owned()],
        timeout_mins: Some(60),
        created_at,
        updated_at: created_at,
        ..stack_support::stack_row(project, name)
    }
}

async fn a_stack_reads_back_by_name_and_by_id(database: &TestDatabase) {
    let store = stack_support::stack_store(database).await;
    let web = stack("project-a", "web", 0);
    insert_stack(&store, &web).await.expect("inserted");
    let by_name = store.find_stack("project-a", "web").await.expect("read");
    let by_id = store
        .find_stack("project-a", &web.id.to_string())
        .await
        .expect("read");
    assert_eq!(by_name.as_ref(), Some(&web));
    assert_eq!(by_id.as_ref(), Some(&web));
}

async fn another_projects_stack_is_invisible(database: &TestDatabase) {
    let store = stack_support::stack_store(database).await;
    let web = stack("project-a", "web", 0);
    insert_stack(&store, &web).await.expect("inserted");
    assert!(
        store
            .find_stack("project-b", "web")
            .await
            .expect("read")
            .is_none()
    );
    assert!(
        store
            .find_stack("project-b", &web.id.to_string())
            .await
            .expect("read")
            .is_none()
    );
    let listed = store
        .list_stacks("project-b", &StackListQuery::default())
        .await
        .expect("listed");
    assert!(listed.is_empty());
}

async fn a_duplicate_name_in_a_project_is_a_conflict(database: &TestDatabase) {
    let store = stack_support::stack_store(database).await;
    insert_stack(&store, &stack("project-a", "web", 0))
        .await
        .expect("inserted");
    let duplicate = stack("project-a", "web", 1);
    let error = insert_stack(&store, &duplicate)
        .await
        .expect_err("duplicate");
    assert!(matches!(error, Error::Conflict(_)), "{error:?}");
    // Nothing of the refused create is left, its lease neither.
    assert!(store.get_stack(duplicate.id).await.expect("read").is_none());
    let now = ember_runtime::time::now();
    let lease = store
        .take_stack_lease(&LeaseTake::new(
            duplicate.id,
            Uuid::now_v7(),
            "CREATE",
            now,
            now + Duration::seconds(60),
        ))
        .await
        .expect("take")
        .expect("no lease was left behind");
    assert_eq!(lease.generation, 1, "the first take of this stack's lease");
    insert_stack(&store, &stack("project-b", "web", 2))
        .await
        .expect("other project may reuse the name");
}

async fn listing_pages_newest_first_with_markers(database: &TestDatabase) {
    let store = stack_support::stack_store(database).await;
    for index in 0..5 {
        insert_stack(
            &store,
            &stack("project-a", &format!("stack-{index}"), index),
        )
        .await
        .expect("inserted");
    }
    let mut seen = Vec::new();
    let mut marker = None;
    loop {
        let page = store
            .list_stacks(
                "project-a",
                &StackListQuery {
                    limit: 2,
                    marker,
                    ..Default::default()
                },
            )
            .await
            .expect("listed");
        seen.extend(page.iter().map(|stack| stack.name.clone()));
        if page.len() < 2 {
            break;
        }
        marker = page.last().map(|stack| stack.id);
    }
    assert_eq!(
        seen,
        ["stack-4", "stack-3", "stack-2", "stack-1", "stack-0"]
    );
}

async fn nested_stacks_are_listed_only_on_request(database: &TestDatabase) {
    let store = stack_support::stack_store(database).await;
    let parent = stack("project-a", "parent", 0);
    insert_stack(&store, &parent).await.expect("inserted");
    let child = Stack {
        parent_id: Some(parent.id),
        ..stack("project-a", "parent-child", 1)
    };
    insert_stack(&store, &child).await.expect("inserted");
    let roots = store
        .list_stacks("project-a", &StackListQuery::default())
        .await
        .expect("listed");
    assert_eq!(roots.len(), 1);
    let all = store
        .list_stacks(
            "project-a",
            &StackListQuery {
                show_nested: true,
                ..Default::default()
            },
        )
        .await
        .expect("listed");
    assert_eq!(all.len(), 2);
}

async fn an_unknown_marker_is_not_found(database: &TestDatabase) {
    let store = stack_support::stack_store(database).await;
    let error = store
        .list_stacks(
            "project-a",
            &StackListQuery {
                marker: Some(Uuid::now_v7()),
                ..Default::default()
            },
        )
        .await
        .expect_err("unknown marker");
    assert!(matches!(error, Error::NotFound(_)), "{error:?}");
}

/// The quota check of every create counts the project's root stacks in
/// progress: through the partial index of those, not through the
/// project's indexes, which also hold every stack deleted since the
/// project began (the count would grow with its history). Sequential
/// scans are switched off for the plan so that PostgreSQL, on a table this
/// small, shows which index it would take.
async fn the_in_progress_count_reads_only_stacks_in_progress(database: &TestDatabase) {
    use sea_orm::{ConnectionTrait, DbBackend, TransactionTrait};
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let backend = connection.get_database_backend();
    let count = "SELECT COUNT(*) FROM stacks WHERE project_id = 'demo' \
                 AND status = 'IN_PROGRESS' AND parent_id IS NULL";
    let transaction = connection.begin().await.expect("a transaction");
    let explain = match backend {
        DbBackend::Postgres => {
            transaction
                .execute_unprepared("SET LOCAL enable_seqscan = off")
                .await
                .expect("planner setting");
            format!("EXPLAIN {count}")
        }
        _ => format!("EXPLAIN QUERY PLAN {count}"),
    };
    let plan: Vec<String> = transaction
        .query_all_raw(sea_orm::Statement::from_string(backend, explain))
        .await
        .expect("a plan")
        .into_iter()
        .map(|row| {
            (0..4)
                .filter_map(|column| row.try_get_by_index::<String>(column).ok())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    transaction.rollback().await.expect("rolled back");
    assert!(
        plan.iter()
            .any(|line| line.contains("stacks_in_progress_roots_by_project")),
        "the count should use the partial index of root stacks in progress: {plan:?}"
    );
}

/// The definition's version: 1 as created; an update moves it on with the
/// definition it writes, and state changes leave it alone (parsed
/// templates are cached by it).
async fn a_new_definition_moves_the_definition_version_on(database: &TestDatabase) {
    let store = stack_support::stack_store(database).await;
    let mut web = stack("project-a", "web", 0);
    insert_stack(&store, &web).await.expect("inserted");
    let (_, created) = store.load_versioned_definition(web.id).await.expect("read");
    assert_eq!(created, 1);

    let fence = store
        .take_stack_lease(&LeaseTake::new(
            web.id,
            Uuid::now_v7(),
            "UPDATE",
            ember_runtime::time::now(),
            ember_runtime::time::now() + Duration::seconds(60),
        ))
        .await
        .expect("taken")
        .expect("the lease was free");
    web.action = StackAction::Update;
    web.status = ActionStatus::InProgress;
    web.updated_at = ember_runtime::time::now();
    let template = serde_json::json!({"heat_template_version": "2018-08-31", "description": "new"});
    let definition = StackDefinition {
        template: template.clone(),
        ..StackDefinition::default()
    };
    let event = Event::for_stack(&web, "Stack UPDATE started", web.updated_at);
    store
        .begin_stack_update(&web, &definition, &[], &event, fence)
        .await
        .expect("update begun");
    let (stored, updated) = store.load_versioned_definition(web.id).await.expect("read");
    assert_eq!(updated, 2);
    assert_eq!(stored.template, template);
    let read = store
        .get_stack(web.id)
        .await
        .expect("read")
        .expect("the stack");
    assert_eq!(read.definition_version, 2, "the stack row carries it");

    // A state change (the update's end) writes no definition.
    web.status = ActionStatus::Complete;
    web.updated_at = ember_runtime::time::now();
    let finished = Event::for_stack(&web, "Stack UPDATE completed successfully", web.updated_at);
    let lost = store
        .record_fenced_writes(&[FencedWrite::Finish {
            fence,
            stack: web.clone(),
            event: finished,
        }])
        .await
        .expect("finished");
    assert!(lost.is_empty());
    let read = store
        .get_stack(web.id)
        .await
        .expect("read")
        .expect("the stack");
    assert_eq!(read.status, ActionStatus::Complete);
    assert_eq!(read.definition_version, 2);
}

/// A row no write of Ember's makes (edited by hand, or by a newer
/// version) is an error naming the stack and the column, never a panic or
/// a stack made up.
async fn a_corrupt_stack_row_is_an_error_naming_it(database: &TestDatabase) {
    use sea_orm::ConnectionTrait;
    let store = stack_support::stack_store(database).await;
    let web = stack("project-a", "web", 0);
    insert_stack(&store, &web).await.expect("inserted");
    let writer = connect(&database.url).await.expect("connected");
    for (column, value, what) in [
        ("action", "'REBOOT'", "stack action"),
        ("status", "'DONE'", "stack status"),
        ("tags", "'{\"web\": 1}'", "stack tags"),
    ] {
        writer
            .execute_unprepared(&format!(
                "UPDATE stacks SET {column} = {value} WHERE name = 'web'"
            ))
            .await
            .expect("corrupted");
        for read in [
            store.find_stack("project-a", "web").await,
            store
                .list_stacks("project-a", &StackListQuery::default())
                .await
                .map(|mut stacks| stacks.pop()),
            store.get_stack(web.id).await,
        ] {
            match read {
                Err(Error::Database(message)) => assert!(
                    message.contains(&web.id.to_string()) && message.contains(what),
                    "{message}"
                ),
                other => panic!("{what}: {other:?}"),
            }
        }
        writer
            .execute_unprepared(
                "UPDATE stacks SET action = 'CREATE', status = 'COMPLETE', tags = '[]' \
                 WHERE name = 'web'",
            )
            .await
            .expect("repaired");
    }
    assert!(
        store
            .find_stack("project-a", "web")
            .await
            .expect("read")
            .is_some()
    );
}

/// A time of its own for each timestamp column, to the microsecond
/// (PostgreSQL keeps no more).
fn distinct_time(minutes: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(1_790_000_000_123_456).expect("a time")
        + Duration::minutes(minutes)
}

/// A nested, locked, deleted stack in the middle of an operation: every
/// field set, none to its usual value, and no two columns of one type
/// holding the same value — so a column read into another field's place
/// (two columns swapped in a list, or in a write) cannot go unnoticed.
fn stack_with_every_field(name: &str, parent_id: Uuid) -> Stack {
    Stack {
        id: Uuid::now_v7(),
        name: name.to_owned(),
        project_id: "project-a".to_owned(),
        user_id: "user of every field".to_owned(),
        parent_id: Some(parent_id),
        action: StackAction::Update,
        status: ActionStatus::InProgress,
        status_reason: "status reason of every field".to_owned(),
        description: "description of every field".to_owned(),
        tags: vec!["tag-one".to_owned(), "tag-two".to_owned()],
        timeout_mins: Some(47),
        // Unlike `locked_by_admin`, the other boolean.
        disable_rollback: false,
        created_at: distinct_time(1),
        updated_at: distinct_time(2),
        nested_depth: 3,
        parent_resource: Some("parent resource of every field".to_owned()),
        deleted_at: Some(distinct_time(3)),
        definition_version: 5,
        maintenance_lock: Some(MaintenanceLock {
            level: LockLevel::All,
            locked_by_user: "locker of every field".to_owned(),
            locked_by_admin: true,
            locked_at: distinct_time(4),
            reason: Some("lock reason of every field".to_owned()),
            expires_at: Some(distinct_time(5)),
        }),
    }
}

/// A resource with every field set, no two columns of one type alike
/// (see [`stack_with_every_field`]).
fn resource_with_every_field(stack_id: Uuid, name: &str) -> Resource {
    Resource {
        id: Uuid::now_v7(),
        stack_id,
        name: name.to_owned(),
        type_name: "OS::Every::Field".to_owned(),
        physical_id: Some("physical id of every field".to_owned()),
        action: StackAction::Check,
        status: ActionStatus::Failed,
        status_reason: "resource reason of every field".to_owned(),
        properties: serde_json::json!({"property": 1}),
        attributes: serde_json::json!({"attribute": [2]}),
        metadata: serde_json::json!({"metadata": "3"}),
        data: serde_json::json!({"data": {"four": 4}}),
        created_at: distinct_time(7),
        updated_at: distinct_time(8),
    }
}

/// `expected` is the only resource of stack `owner`, read whole through
/// every reader, listed and filtered by its name.
async fn resource_reads_back(
    database: &TestDatabase,
    owner: Uuid,
    expected: &Resource,
    when: &str,
) {
    let only_it = ResourceFilter {
        names: vec![expected.name.clone()],
        ..Default::default()
    };
    for (reads, reader) in every_reader(database).await {
        let listed = reader.list_resources(owner).await.expect("list");
        assert_eq!(
            listed,
            std::slice::from_ref(expected),
            "{reads}: list_resources {when}"
        );
        let filtered = reader
            .list_filtered_resources(owner, &only_it)
            .await
            .expect("filtered");
        assert_eq!(
            filtered,
            std::slice::from_ref(expected),
            "{reads}: filtered {when}"
        );
    }
}

/// The store on each kind of reader a deployment gives it: its own (on a
/// SQLite file, rows stepped on read-only connections of their own) and
/// the writer's pool (rows sea-orm reads; PostgreSQL's one kind).
async fn every_reader(database: &TestDatabase) -> [(&'static str, SqlStackStore); 2] {
    let pool = connect(&database.url).await.expect("connected");
    [
        ("own readers", stack_support::stack_store(database).await),
        ("the writer's pool", SqlStackStore::new(pool)),
    ]
}

/// Takes `stack_id`'s (released) lease, as an operation's start does.
async fn take_lease(store: &SqlStackStore, stack_id: Uuid) -> LeaseFence {
    let now = ember_runtime::time::now();
    store
        .take_stack_lease(&LeaseTake::new(
            stack_id,
            Uuid::now_v7(),
            "UPDATE",
            now,
            now + Duration::seconds(60),
        ))
        .await
        .expect("take")
        .expect("the lease was free")
}

/// Every field of a stack, recorded with it, reads back whole through
/// every read of stacks (by id, by name, in lists, with its free lease, as
/// an orphan), on each kind of reader.
async fn every_field_of_a_stack_reads_back_through_every_read(database: &TestDatabase) {
    let writer = stack_support::stack_store(database).await;
    let parent = stack("project-a", "parent", 0);
    insert_stack(&writer, &parent).await.expect("parent");
    let live = Stack {
        deleted_at: None,
        ..stack_with_every_field("every-field", parent.id)
    };
    let deleted = stack_with_every_field("every-field-deleted", parent.id);
    insert_stack(&writer, &live).await.expect("live");
    insert_stack(&writer, &deleted).await.expect("deleted");
    let now = ember_runtime::time::now();
    for (reads, store) in every_reader(database).await {
        // Deleted stacks too, by id.
        for expected in [&live, &deleted] {
            let id = expected.id.to_string();
            let name = &expected.name;
            let got = store.get_stack(expected.id).await.expect("get");
            assert_eq!(got.as_ref(), Some(expected), "{reads}: get_stack {name}");
            let found = store.find_stack("project-a", &id).await.expect("find");
            assert_eq!(
                found.as_ref(),
                Some(expected),
                "{reads}: find_stack {name} by id"
            );
            let with_lease = store
                .find_stack_with_free_lease("project-a", &id, now)
                .await
                .expect("find with lease");
            assert_eq!(
                with_lease,
                Some((expected.clone(), Some(LeaseFence::FIRST_GENERATION))),
                "{reads}: find_stack_with_free_lease {name} by id"
            );
            let orphan = store
                .orphan_candidate(expected.id, now)
                .await
                .expect("orphan")
                .map(|candidate| candidate.stack);
            assert_eq!(
                orphan.as_ref(),
                Some(expected),
                "{reads}: orphan_candidate {name}"
            );
        }
        let mut orphans: Vec<Stack> = store
            .list_orphan_candidates(now, 100)
            .await
            .expect("orphans")
            .into_iter()
            .map(|candidate| candidate.stack)
            .filter(|stack| stack.id != parent.id)
            .collect();
        orphans.sort_by_key(|stack| stack.id);
        assert_eq!(orphans, [live.clone(), deleted.clone()], "{reads}: orphans");

        // A live stack by name and in lists.
        let found = store
            .find_stack("project-a", "every-field")
            .await
            .expect("find");
        assert_eq!(found.as_ref(), Some(&live), "{reads}: find_stack by name");
        let with_lease = store
            .find_stack_with_free_lease("project-a", "every-field", now)
            .await
            .expect("find with lease");
        assert_eq!(
            with_lease,
            Some((live.clone(), Some(LeaseFence::FIRST_GENERATION))),
            "{reads}: find_stack_with_free_lease by name"
        );
        let listed = store
            .list_stacks(
                "project-a",
                &StackListQuery {
                    name: Some("every-field".to_owned()),
                    show_nested: true,
                    locked: Some(true),
                    ..Default::default()
                },
            )
            .await
            .expect("list");
        assert_eq!(listed, std::slice::from_ref(&live), "{reads}: list_stacks");
        let children = store.list_child_stacks(parent.id).await.expect("children");
        assert_eq!(
            children,
            std::slice::from_ref(&live),
            "{reads}: list_child_stacks"
        );
    }
}

/// Every column a stack's writes after its create change reads back as
/// written: an update's start (the whole row but the version, which moves
/// on) and a state write under the lease (the action, status, reason,
/// times, deletion and every part of the lock).
async fn every_field_a_stack_write_changes_reads_back(database: &TestDatabase) {
    let store = stack_support::stack_store(database).await;
    let parent = stack("project-a", "parent", 0);
    insert_stack(&store, &parent).await.expect("parent");
    let created = stack("project-a", "plain", 1);
    insert_stack(&store, &created).await.expect("created");

    let fence = take_lease(&store, created.id).await;
    let updating = Stack {
        id: created.id,
        deleted_at: None,
        ..stack_with_every_field("every-field", parent.id)
    };
    let event = Event::for_stack(&updating, "Stack UPDATE started", updating.updated_at);
    store
        .begin_stack_update(&updating, &StackDefinition::default(), &[], &event, fence)
        .await
        .expect("update begun");
    let updated = Stack {
        definition_version: created.definition_version + 1,
        ..updating.clone()
    };
    for (reads, store) in every_reader(database).await {
        let got = store.get_stack(created.id).await.expect("get");
        assert_eq!(
            got.as_ref(),
            Some(&updated),
            "{reads}: after an update's start"
        );
    }

    let written = Stack {
        action: StackAction::Delete,
        status: ActionStatus::Complete,
        status_reason: "written status reason".to_owned(),
        updated_at: distinct_time(6),
        deleted_at: Some(distinct_time(9)),
        maintenance_lock: Some(MaintenanceLock {
            level: LockLevel::Stacks,
            locked_by_user: "another locker".to_owned(),
            locked_by_admin: false,
            locked_at: distinct_time(10),
            reason: Some("another lock reason".to_owned()),
            expires_at: Some(distinct_time(11)),
        }),
        ..updated.clone()
    };
    let event = Event::for_stack(&written, "Stack DELETE completed", written.updated_at);
    let lost = store
        .record_fenced_writes(&[FencedWrite::Stack {
            fence,
            stack: written.clone(),
            event,
            audit: None,
        }])
        .await
        .expect("written");
    assert!(lost.is_empty(), "{lost:?}");
    for (reads, store) in every_reader(database).await {
        let got = store.get_stack(created.id).await.expect("get");
        assert_eq!(got.as_ref(), Some(&written), "{reads}: after a state write");
        let found = store
            .find_stack("project-a", &created.id.to_string())
            .await
            .expect("find");
        assert_eq!(
            found.as_ref(),
            Some(&written),
            "{reads}: found after a state write"
        );
    }
}

/// Every field of a resource reads back whole, as recorded with its stack
/// and as a transition under the lease rewrites it, through both reads
/// of a stack's resources, on each kind of reader.
async fn every_field_of_a_resource_reads_back(database: &TestDatabase) {
    let store = stack_support::stack_store(database).await;
    let owner = stack("project-a", "owner", 0);
    let recorded = resource_with_every_field(owner.id, "every-field");
    let now = ember_runtime::time::now();
    let fence = store
        .create_stack_with_lease(&NewStack {
            stack: owner.clone(),
            definition: StackDefinition::default(),
            resources: vec![recorded.clone()],
            event: Event::for_stack(&owner, "Stack CREATE started", now),
            lease: LeaseRequest::new(Uuid::now_v7(), "CREATE", now, now + Duration::seconds(60)),
        })
        .await
        .expect("recorded");
    resource_reads_back(database, owner.id, &recorded, "as recorded").await;

    let rewritten = Resource {
        physical_id: Some("another physical id".to_owned()),
        action: StackAction::Resume,
        status: ActionStatus::InProgress,
        status_reason: "another resource reason".to_owned(),
        properties: serde_json::json!({"property": "one"}),
        attributes: serde_json::json!({"attribute": "two"}),
        metadata: serde_json::json!({"metadata": "three"}),
        data: serde_json::json!({"data": "four"}),
        updated_at: distinct_time(12),
        ..recorded.clone()
    };
    let lost = store
        .record_fenced_writes(&[FencedWrite::Resource(FencedTransition {
            fence,
            resource: rewritten.clone(),
            event: Event::for_resource(&rewritten, now),
        })])
        .await
        .expect("written");
    assert!(lost.is_empty(), "{lost:?}");
    resource_reads_back(database, owner.id, &rewritten, "rewritten").await;
}

ember_runtime::store_suite!(
    every_field_of_a_stack_reads_back_through_every_read,
    every_field_a_stack_write_changes_reads_back,
    every_field_of_a_resource_reads_back,
    a_corrupt_stack_row_is_an_error_naming_it,
    a_new_definition_moves_the_definition_version_on,
    the_in_progress_count_reads_only_stacks_in_progress,
    a_stack_reads_back_by_name_and_by_id,
    another_projects_stack_is_invisible,
    a_duplicate_name_in_a_project_is_a_conflict,
    listing_pages_newest_first_with_markers,
    nested_stacks_are_listed_only_on_request,
    an_unknown_marker_is_not_found,
);
