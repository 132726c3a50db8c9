//! Stack operations against a real database (SQLite, and PostgreSQL when
//! EMBER_TEST_DATABASE_URL is set): create along the dependency graph,
//! failures and rollback, delete with Retain, outputs, the stack lease, and
//! recovery of stacks whose engine went away.

mod stack_support;

use stack_support::assert_status;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ember_engine::Error;
use ember_engine::domain::{
    ActionStatus, Event, Stack, StackAction, StackDefinition, StackWideAction,
};
use ember_engine::resources::ResourceTypeRegistry;
use ember_engine::resources::wait_condition::WaitConditions;
use ember_engine::stacks::{CreateStack, StackOperations, Swept, UpdateStack};
use ember_engine::store::signals::SqlWaitSignalStore;
use ember_engine::store::{
    LeaseRenewal, LeaseRequest, LeaseTake, NewStack, SqlStackStore, StackStore, StopRequest,
    migrations::Migrator,
};
use ember_runtime::Identity;
use ember_runtime::database::{connect_and_migrate, testing::TestDatabase};
use ember_runtime::testing::{poll_until, wait_for};
use sea_orm::{ConnectionTrait, DatabaseBackend, DatabaseConnection};
use serde_json::json;

async fn operations(database: &TestDatabase) -> (Arc<StackOperations>, Arc<dyn StackStore>) {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let store: Arc<dyn StackStore> = Arc::new(SqlStackStore::new(connection));
    (
        StackOperations::new(store.clone(), Arc::new(ResourceTypeRegistry::builtin())),
        store,
    )
}

/// [`operations`], with the database connection itself (for faults
/// injected by triggers, and counts of rows).
async fn operations_on_connection(
    database: &TestDatabase,
) -> (Arc<StackOperations>, DatabaseConnection) {
    let (store, connection) = store_on_connection(database).await;
    (
        StackOperations::new(store, Arc::new(ResourceTypeRegistry::builtin())),
        connection,
    )
}

/// A migrated database's stack store, and the connection under it.
async fn store_on_connection(database: &TestDatabase) -> (Arc<dyn StackStore>, DatabaseConnection) {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    (Arc::new(SqlStackStore::new(connection.clone())), connection)
}

fn alice() -> Identity {
    Identity::new("alice", "project-a", vec!["member".to_owned()])
}

fn request(name: &str, template: &str) -> CreateStack {
    CreateStack {
        name: name.to_owned(),
        template: template.to_owned(),
        disable_rollback: true,
        ..CreateStack::default()
    }
}

/// Polls until the stack leaves IN_PROGRESS.
async fn settled(operations: &StackOperations, name_or_id: &str) -> Stack {
    settled_within(operations, name_or_id, Duration::from_secs(20)).await
}

/// [`settled`], and ended `status`.
async fn settled_as(operations: &StackOperations, name_or_id: &str, status: &str) -> Stack {
    let stack = settled(operations, name_or_id).await;
    assert_status(&stack, status);
    stack
}

async fn settled_within(operations: &StackOperations, name_or_id: &str, within: Duration) -> Stack {
    stack_support::settled(operations, &alice(), name_or_id, within).await
}

const CHAIN: &str = r#"
heat_template_version: 2021-04-16
parameters:
  greeting: {type: string, default: hello}
resources:
  first:
    type: OS::Heat::TestResource
    properties: {value: {get_param: greeting}}
  second:
    type: OS::Heat::TestResource
    properties: {value: {list_join: ['-', [{get_attr: [first, output]}, world]]}}
  secret:
    type: OS::Heat::RandomString
    properties: {length: 12}
  kept:
    type: OS::Heat::Value
    deletion_policy: Retain
    properties: {value: {get_resource: secret}}
outputs:
  combined: {value: {get_attr: [second, output]}, description: both words}
  secret_length: {value: {str_split: [',', {get_attr: [secret, value]}]}}
"#;

async fn a_stack_is_created_along_its_graph_and_deleted(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    let mut create = request("chain", CHAIN);
    create.parameters.insert("greeting".into(), json!("hi"));
    let started = operations
        .create_stack(&alice(), create)
        .await
        .expect("create accepted");
    assert_eq!(started.stack_status(), "CREATE_IN_PROGRESS");

    let stack = settled_as(&operations, "chain", "CREATE_COMPLETE").await;
    assert_eq!(stack.status_reason, "Stack CREATE completed successfully");

    let details = operations
        .stack_details(stack.clone())
        .await
        .expect("details");
    let combined = details
        .outputs
        .iter()
        .find(|output| output.key == "combined")
        .expect("output");
    assert_eq!(combined.value, Ok(json!("hi-world")));
    assert_eq!(combined.description, "both words");
    // An output the template says nothing of is described as Heat does.
    let unsaid = details
        .outputs
        .iter()
        .find(|output| output.key == "secret_length")
        .expect("output");
    assert_eq!(unsaid.description, "No description given");
    assert_eq!(details.parameters["greeting"], json!("hi"));
    assert_eq!(details.parameters["OS::stack_name"], json!("chain"));

    let resources = operations.resources(&stack, 0).await.expect("resources");
    assert_eq!(resources.len(), 4);
    assert!(
        resources
            .iter()
            .all(|view| view.resource.resource_status() == "CREATE_COMPLETE")
    );
    let first = resources
        .iter()
        .find(|view| view.resource.name == "first")
        .expect("first");
    assert_eq!(first.required_by, ["second"]);
    let kept = resources
        .iter()
        .find(|view| view.resource.name == "kept")
        .expect("kept");
    let secret = resources
        .iter()
        .find(|view| view.resource.name == "secret")
        .expect("secret");
    assert_eq!(
        kept.resource.attributes["value"], secret.resource.attributes["value"],
        "get_resource of a RandomString is its value"
    );

    // `second` started only after `first` completed.
    let (events, _) = operations
        .events(&stack, None, 0, (0, None, false))
        .await
        .expect("events");
    let position = |name: &str, status: &str| {
        events
            .iter()
            .position(|event| event.resource_name == name && event.resource_status() == status)
            .unwrap_or_else(|| panic!("no {status} event for {name}"))
    };
    assert!(position("first", "CREATE_COMPLETE") < position("second", "CREATE_IN_PROGRESS"));
    assert_eq!(
        events.first().map(|event| event.reason.as_str()),
        Some("Stack CREATE started")
    );

    operations
        .delete_stack(&alice(), "chain")
        .await
        .expect("delete accepted");
    let deleted = settled_as(&operations, &stack.id.to_string(), "DELETE_COMPLETE").await;
    let resources = operations.resources(&deleted, 0).await.expect("resources");
    let kept = resources
        .iter()
        .find(|view| view.resource.name == "kept")
        .expect("kept");
    assert_eq!(
        kept.resource.status_reason,
        "resource retained (deletion_policy Retain)"
    );
    let error = operations
        .find_stack(&alice(), "chain")
        .await
        .expect_err("gone by name");
    assert!(matches!(error, Error::NotFound(_)));
    // The name is free again.
    operations
        .create_stack(&alice(), request("chain", CHAIN))
        .await
        .expect("name reused");
    settled(&operations, "chain").await;
}

async fn a_failing_resource_fails_the_stack_and_rollback_deletes_the_rest(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    let template = r#"
heat_template_version: 2021-04-16
resources:
  good: {type: OS::Heat::TestResource}
  bad:
    type: OS::Heat::TestResource
    depends_on: good
    properties: {fail: true}
  never:
    type: OS::Heat::TestResource
    depends_on: bad
"#;
    operations
        .create_stack(&alice(), request("kept-failed", template))
        .await
        .expect("accepted");
    let stack = settled(&operations, "kept-failed").await;
    assert_eq!(stack.stack_status(), "CREATE_FAILED");
    assert_eq!(
        stack.status_reason,
        "Resource CREATE failed: resources.bad: Test Resource failed"
    );
    let resources = operations.resources(&stack, 0).await.expect("resources");
    let status = |name: &str| {
        resources
            .iter()
            .find(|view| view.resource.name == name)
            .map(|view| view.resource.resource_status())
            .unwrap_or_default()
    };
    assert_eq!(status("good"), "CREATE_COMPLETE");
    assert_eq!(status("bad"), "CREATE_FAILED");
    assert_eq!(
        status("never"),
        "INIT_COMPLETE",
        "nothing starts after a failure"
    );

    let mut with_rollback = request("rolled-back", template);
    with_rollback.disable_rollback = false;
    operations
        .create_stack(&alice(), with_rollback)
        .await
        .expect("accepted");
    let stack = settled_as(&operations, "rolled-back", "ROLLBACK_COMPLETE").await;
    let resources = operations.resources(&stack, 0).await.expect("resources");
    assert!(
        resources
            .iter()
            .all(|view| view.resource.action == StackAction::Rollback
                && view.resource.status == ActionStatus::Complete),
        "every resource rolled back"
    );
}

async fn bad_requests_are_refused_before_anything_is_recorded(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    let cases = [
        (request("1starts-with-digit", CHAIN), "stack_name"),
        (
            request(
                "bad-type",
                "heat_template_version: 2021-04-16\nresources:\n  x: {type: OS::Nope}\n",
            ),
            "resources.x.type",
        ),
        (
            request("bad-yaml", "heat_template_version: [\n"),
            "template",
        ),
        (request("no-template", ""), "template"),
        (
            request(
                "bad-param",
                "heat_template_version: 2021-04-16\nparameters:\n  n: {type: number}\n",
            ),
            "parameters.n",
        ),
    ];
    for (create, expected) in cases {
        let name = create.name.clone();
        let error = operations
            .create_stack(&alice(), create)
            .await
            .expect_err("refused");
        assert!(matches!(error, Error::InvalidInput(_)), "{name}: {error:?}");
        assert!(
            error.to_string().contains(expected),
            "{name}: {error} should mention {expected}"
        );
    }
    let listed = operations
        .list_stacks(&alice(), &Default::default())
        .await
        .expect("listed");
    assert!(listed.is_empty(), "nothing was recorded");

    operations
        .create_stack(&alice(), request("twice", CHAIN))
        .await
        .expect("first");
    let error = operations
        .create_stack(&alice(), request("twice", CHAIN))
        .await
        .expect_err("duplicate");
    assert!(matches!(error, Error::Conflict(_)), "{error:?}");
    settled(&operations, "twice").await;
}

async fn an_operation_in_progress_holds_the_stack_lease(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    let slow = "heat_template_version: 2021-04-16\nresources:\n  slow:\n    type: OS::Heat::TestResource\n    properties: {action_wait_secs: {create: 1}}\n";
    operations
        .create_stack(&alice(), request("slow", slow))
        .await
        .expect("accepted");
    let error = operations
        .run_stack_wide_action(&alice(), "slow", StackWideAction::Check)
        .await
        .expect_err("busy");
    assert!(matches!(error, Error::Conflict(_)), "{error:?}");
    assert!(
        error.to_string().contains(
            "is CREATE_IN_PROGRESS: check must wait until the running operation finishes"
        ),
        "{error}"
    );
    let stack = settled(&operations, "slow").await;
    assert_eq!(stack.stack_status(), "CREATE_COMPLETE");
    operations
        .delete_stack(&alice(), "slow")
        .await
        .expect("free again");
}

/// A stack whose create cannot finish — nor its nested stack's — is
/// deleted by its owner at once, as Heat's delete of a stack in progress:
/// the create stops (no rollback), and the delete removes the whole tree.
async fn a_delete_stops_the_operation_in_progress_and_deletes_the_whole_tree(
    database: &TestDatabase,
) {
    let (operations, store) = operations(database).await;
    let endless = "heat_template_version: 2021-04-16\nresources:\n  forever: {type: OS::Heat::Delay, properties: {min_wait: 1000000}}\n";
    let parent = "heat_template_version: 2021-04-16\nresources:\n  quick: {type: OS::Heat::None}\n  forever: {type: OS::Heat::Delay, properties: {min_wait: 1000000}}\n  inner: {type: endless.yaml}\n";
    let mut create = request("endless", parent);
    create.disable_rollback = false;
    create.files.insert("endless.yaml".into(), endless.into());
    let created = operations
        .create_stack(&alice(), create)
        .await
        .expect("accepted");
    // The nested stack exists and is creating its own endless resource.
    let nested_id = poll_until(
        "the nested stack to start",
        Duration::from_secs(20),
        || async {
            match store
                .list_child_stacks(created.id)
                .await
                .expect("children")
                .as_slice()
            {
                [child] => Some(child.id),
                _ => None,
            }
        },
    )
    .await;
    let deleting = operations
        .delete_stack(&alice(), "endless")
        .await
        .expect("a delete stops the create");
    assert_eq!(deleting.stack_status(), "DELETE_IN_PROGRESS");
    wait_for("endless to be deleted", Duration::from_secs(20), || async {
        operations.find_stack(&alice(), "endless").await.is_err()
    })
    .await;
    let nested = store
        .get_stack(nested_id)
        .await
        .expect("read")
        .expect("recorded");
    assert!(nested.deleted_at.is_some(), "{}", nested.stack_status());
    let (events, _) = operations
        .events(&created, None, 0, (0, None, false))
        .await
        .expect("events");
    let reasons: Vec<String> = events.iter().map(|event| event.reason.clone()).collect();
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

/// Without `timeout_mins`, an operation ends at the engine's
/// `stack_action_timeout`; with it, at the stack's own.
/// Nested stacks whose create failed — a template resource, a group's
/// member, a nested stack too deep — are deleted with their root: a
/// delete is complete only when the whole tree is gone.
async fn a_failed_nested_create_leaves_nothing_after_the_root_is_deleted(database: &TestDatabase) {
    let (operations, store) = operations(database).await;
    let failing = "heat_template_version: 2021-04-16\nresources:\n  made: {type: OS::Heat::None}\n  broken: {type: OS::Heat::TestResource, properties: {fail: true}, depends_on: made}\n";
    // Each way a nested stack is made, and one nested too deep (its own
    // create refused at the depth limit, under a stack that was made).
    let parent = "heat_template_version: 2021-04-16\nresources:\n  inner: {type: failing.yaml}\n  group: {type: OS::Heat::ResourceGroup, properties: {count: 2, resource_def: {type: failing.yaml}}}\n  remote: {type: OS::Heat::Stack, properties: {template: {get_file: failing.yaml}}}\n  deep: {type: deep.yaml}\n";
    let deep = "heat_template_version: 2021-04-16\nresources:\n  made: {type: OS::Heat::None}\n  deeper: {type: deep.yaml, depends_on: made}\n";
    for disable_rollback in [true, false] {
        let mut create = request("leaky", parent);
        create.disable_rollback = disable_rollback;
        create.files.insert("failing.yaml".into(), failing.into());
        create.files.insert("deep.yaml".into(), deep.into());
        let created = operations
            .create_stack(&alice(), create)
            .await
            .expect("accepted");
        let stack = settled(&operations, "leaky").await;
        assert_ne!(stack.stack_status(), "CREATE_COMPLETE");
        let mut tree = vec![created.id];
        let mut index = 0;
        while let Some(id) = tree.get(index).copied() {
            tree.extend(
                store
                    .list_child_stacks(id)
                    .await
                    .expect("children")
                    .into_iter()
                    .map(|child| child.id),
            );
            index += 1;
        }
        // A rollback deletes them itself; without one they stay for the
        // delete.
        assert_eq!(
            tree.len() > 1,
            disable_rollback,
            "nested stacks left after the create: {}",
            stack.status_reason
        );
        operations
            .delete_stack(&alice(), "leaky")
            .await
            .expect("delete");
        wait_for("leaky to be deleted", Duration::from_secs(20), || async {
            operations.find_stack(&alice(), "leaky").await.is_err()
        })
        .await;
        for id in tree {
            let left = store.get_stack(id).await.expect("read");
            assert!(
                left.as_ref().is_none_or(|stack| stack.deleted_at.is_some()),
                "rollback disabled: {disable_rollback}: {:?} left",
                left.map(|stack| (stack.stack_status(), stack.name))
            );
        }
    }
}

/// A group's nested stack is the engine's own template: however large it
/// grows (thousands of members), updating it is not held to the size
/// limit on users' templates (512 KiB).
async fn a_group_grows_past_the_template_size_limit(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    let group = |count: usize| {
        format!(
            "heat_template_version: 2021-04-16\nresources:\n  group:\n    type: OS::Heat::ResourceGroup\n    properties:\n      count: {count}\n      resource_def: {{type: OS::Heat::Value, properties: {{value: {}}}}}\n",
            "x".repeat(200 * 1024)
        )
    };
    operations
        .create_stack(&alice(), request("large", &group(3)))
        .await
        .expect("accepted");
    settled_as(&operations, "large", "CREATE_COMPLETE").await;
    operations
        .update_stack(&alice(), update("large", &group(4)))
        .await
        .expect("accepted");
    settled_as(&operations, "large", "UPDATE_COMPLETE").await;
}

async fn an_operation_that_cannot_finish_times_out(database: &TestDatabase) {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let store: Arc<dyn StackStore> = Arc::new(SqlStackStore::new(connection));
    let operations = StackOperations::configured(
        store,
        Arc::new(ResourceTypeRegistry::builtin()),
        ember_engine::stacks::StackSettings {
            action_timeout: Duration::from_secs(1),
            ..ember_engine::stacks::StackSettings::default()
        },
    );
    let endless = "heat_template_version: 2021-04-16\nresources:\n  forever: {type: OS::Heat::Delay, properties: {min_wait: 1000000}}\n";
    operations
        .create_stack(&alice(), request("endless", endless))
        .await
        .expect("accepted");
    let stack = settled(&operations, "endless").await;
    assert_eq!(stack.stack_status(), "CREATE_FAILED");
    assert!(
        stack.status_reason.contains("CREATE timed out"),
        "{}",
        stack.status_reason
    );
    operations
        .delete_stack(&alice(), "endless")
        .await
        .expect("deleted");
}

async fn an_update_left_in_progress_by_a_dead_engine_is_failed(database: &TestDatabase) {
    let (operations, store) = operations(database).await;
    let now = ember_runtime::time::now();
    let orphan = Stack {
        // An update whose origin (the definition it started from) was not
        // kept, as by an engine from before it was: it could not roll back.
        action: StackAction::Update,
        status: ActionStatus::InProgress,
        status_reason: "Stack UPDATE started".into(),
        created_at: now,
        updated_at: now,
        ..stack_support::stack_row("project-a", "orphan")
    };
    // Created as a create does — with its lease, in one transaction — by
    // an engine that then went away.
    let dead_engine = uuid::Uuid::new_v4();
    let long_ago = now - chrono::Duration::minutes(10);
    store
        .create_stack_with_lease(&NewStack {
            event: Event::for_stack(&orphan, "Stack UPDATE started", long_ago),
            stack: orphan.clone(),
            definition: StackDefinition::default(),
            resources: Vec::new(),
            lease: LeaseRequest::new(
                dead_engine,
                "CREATE",
                long_ago,
                long_ago + chrono::Duration::seconds(30),
            ),
        })
        .await
        .expect("created");
    assert_eq!(
        operations.recover_orphaned_stacks().await.expect("swept"),
        Swept {
            resumed: 0,
            failed: 1
        }
    );
    let stack = operations
        .find_stack(&alice(), "orphan")
        .await
        .expect("stack");
    assert_eq!(stack.stack_status(), "UPDATE_FAILED");
    assert!(
        stack
            .status_reason
            .contains(&format!("engine {dead_engine} went away"))
            && stack
                .status_reason
                .contains("not resumed: the definition the update started from is not recorded"),
        "{}",
        stack.status_reason
    );
    // A live stack is left alone.
    assert_eq!(
        operations.recover_orphaned_stacks().await.expect("swept"),
        Swept::default()
    );
}

async fn an_unexpired_lease_cannot_be_stolen_but_an_expired_one_can(database: &TestDatabase) {
    let (_, store) = operations(database).await;
    let stack_id = uuid::Uuid::new_v4();
    let (one, two) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    let now = ember_runtime::time::now();
    let later = now + chrono::Duration::seconds(30);
    let first = store
        .take_stack_lease(&LeaseTake::new(stack_id, one, "CREATE", now, later))
        .await
        .expect("take")
        .expect("taken");
    assert!(
        store
            .take_stack_lease(&LeaseTake::new(stack_id, two, "DELETE", now, later))
            .await
            .expect("take")
            .is_none()
    );
    assert_eq!(
        store.renew_stack_lease(first, later).await.expect("renew"),
        LeaseRenewal::Renewed
    );
    // A delete on another engine asks the holder to stop: its next
    // renewal says so.
    assert!(
        store
            .request_stack_stop(stack_id, StopRequest::Delete, now)
            .await
            .expect("asked")
    );
    assert_eq!(
        store.renew_stack_lease(first, later).await.expect("renew"),
        LeaseRenewal::StopRequested(StopRequest::Delete)
    );
    let after_expiry = later + chrono::Duration::seconds(1);
    let second = store
        .take_stack_lease(&LeaseTake::new(
            stack_id,
            two,
            "DELETE",
            after_expiry,
            after_expiry + chrono::Duration::seconds(30),
        ))
        .await
        .expect("steal")
        .expect("stolen");
    assert!(
        second.generation > first.generation,
        "a takeover moves the generation on: {first:?} then {second:?}"
    );
    assert_eq!(
        store.renew_stack_lease(first, later).await.expect("renew"),
        LeaseRenewal::Lost,
        "the old holder lost it"
    );
    // The request was the old holder's: the new one is not asked.
    assert_eq!(
        store
            .renew_stack_lease(second, after_expiry + chrono::Duration::seconds(30))
            .await
            .expect("renew"),
        LeaseRenewal::Renewed
    );
    // Releasing with the old fence does nothing; with the new one it frees.
    store.release_stack_lease(first).await.expect("release");
    assert!(
        store
            .take_stack_lease(&LeaseTake::new(stack_id, one, "UPDATE", now, later))
            .await
            .expect("take")
            .is_none(),
        "a stale release must not free the new holder's lease"
    );
    store.release_stack_lease(second).await.expect("release");
    // A heartbeat's renewal that raced the release must not hold the stack
    // again (the next operation would be refused for a whole TTL).
    assert_eq!(
        store.renew_stack_lease(second, later).await.expect("renew"),
        LeaseRenewal::Lost,
        "a released lease is not renewed"
    );
    assert!(
        !store
            .request_stack_stop(stack_id, StopRequest::Delete, now)
            .await
            .expect("asked"),
        "no held lease, nothing to ask"
    );
    let third = store
        .take_stack_lease(&LeaseTake::new(stack_id, one, "UPDATE", now, later))
        .await
        .expect("take")
        .expect("free again");
    assert!(third.generation > second.generation);
}

fn resource_named<'a>(
    views: &'a [ember_engine::stacks::ResourceView],
    name: &str,
) -> &'a ember_engine::domain::Resource {
    &views
        .iter()
        .find(|view| view.resource.name == name)
        .unwrap_or_else(|| panic!("no resource {name}"))
        .resource
}

fn update(name: &str, template: &str) -> UpdateStack {
    UpdateStack {
        name_or_id: name.to_owned(),
        template: template.to_owned(),
        ..UpdateStack::default()
    }
}

async fn an_update_changes_in_place_replaces_adds_and_removes(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    let before = r#"
heat_template_version: 2021-04-16
resources:
  a: {type: OS::Heat::TestResource, properties: {value: one}}
  b:
    type: OS::Heat::TestResource
    properties: {value: {get_attr: [a, output]}, update_replace: true}
  c: {type: OS::Heat::None}
outputs:
  b_value: {value: {get_attr: [b, output]}}
"#;
    let after = r#"
heat_template_version: 2021-04-16
description: after the update
resources:
  a: {type: OS::Heat::TestResource, properties: {value: two}}
  b:
    type: OS::Heat::TestResource
    properties: {value: {get_attr: [a, output]}, update_replace: true}
  d: {type: OS::Heat::Value, properties: {value: {get_resource: a}}}
outputs:
  b_value: {value: {get_attr: [b, output]}}
"#;
    operations
        .create_stack(&alice(), request("evolving", before))
        .await
        .expect("create");
    let created = settled(&operations, "evolving").await;
    assert_eq!(created.stack_status(), "CREATE_COMPLETE");
    let shown = operations
        .stack_details(created.clone())
        .await
        .expect("details");
    assert_eq!(shown.template_description, "");
    let old = operations.resources(&created, 0).await.expect("resources");
    let old_a = resource_named(&old, "a").physical_id.clone();
    let old_b = resource_named(&old, "b").physical_id.clone();

    let started = operations
        .update_stack(&alice(), update("evolving", after))
        .await
        .expect("update accepted");
    assert_eq!(started.stack_status(), "UPDATE_IN_PROGRESS");
    let updated = settled_as(&operations, "evolving", "UPDATE_COMPLETE").await;

    let new = operations.resources(&updated, 0).await.expect("resources");
    let names: Vec<&str> = new.iter().map(|view| view.resource.name.as_str()).collect();
    assert_eq!(new.len(), 3, "c removed, old b retired: {names:?}");
    let a = resource_named(&new, "a");
    assert_eq!(a.physical_id, old_a, "a changed in place");
    assert_eq!(a.resource_status(), "UPDATE_COMPLETE");
    assert_eq!(a.attributes["output"], json!("two"));
    let b = resource_named(&new, "b");
    assert_ne!(b.physical_id, old_b, "b was replaced");
    assert_eq!(b.resource_status(), "CREATE_COMPLETE");
    assert_eq!(
        resource_named(&new, "d").attributes["value"],
        json!(old_a.clone().expect("id"))
    );
    let outputs = operations.outputs(&updated).await.expect("outputs");
    assert_eq!(outputs[0].value, Ok(json!("two")));
    // Shown from the new definition, not the one parsed before the update.
    let shown = operations
        .stack_details(updated.clone())
        .await
        .expect("details");
    assert_eq!(shown.template_description, "after the update");

    // An update that changes nothing touches nothing.
    operations
        .update_stack(&alice(), update("evolving", after))
        .await
        .expect("update accepted");
    let again = settled(&operations, "evolving").await;
    assert_eq!(again.stack_status(), "UPDATE_COMPLETE");
    let unchanged = operations.resources(&again, 0).await.expect("resources");
    assert_eq!(resource_named(&unchanged, "b").updated_at, b.updated_at);
}

async fn patch_keeps_the_template_and_parameters_it_does_not_name(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    let template = r#"
heat_template_version: 2021-04-16
parameters:
  first: {type: string, default: one}
  second: {type: string, default: two}
resources:
  joined:
    type: OS::Heat::Value
    properties: {value: {list_join: ['+', [{get_param: first}, {get_param: second}]]}}
outputs:
  joined: {value: {get_attr: [joined, value]}}
"#;
    let mut create = request("patched", template);
    create.parameters.insert("first".into(), json!("uno"));
    operations
        .create_stack(&alice(), create)
        .await
        .expect("create");
    settled(&operations, "patched").await;

    let mut patch = UpdateStack {
        name_or_id: "patched".into(),
        existing: true,
        ..UpdateStack::default()
    };
    patch.parameters.insert("second".into(), json!("dos"));
    operations
        .update_stack(&alice(), patch)
        .await
        .expect("patch accepted");
    let stack = settled_as(&operations, "patched", "UPDATE_COMPLETE").await;
    let outputs = operations.outputs(&stack).await.expect("outputs");
    assert_eq!(outputs[0].value, Ok(json!("uno+dos")));

    let clear = UpdateStack {
        name_or_id: "patched".into(),
        existing: true,
        clear_parameters: vec!["first".into()],
        ..UpdateStack::default()
    };
    operations
        .update_stack(&alice(), clear)
        .await
        .expect("patch accepted");
    let stack = settled(&operations, "patched").await;
    let outputs = operations.outputs(&stack).await.expect("outputs");
    assert_eq!(outputs[0].value, Ok(json!("one+dos")));

    let error = operations
        .update_stack(
            &alice(),
            UpdateStack {
                name_or_id: "patched".into(),
                ..UpdateStack::default()
            },
        )
        .await
        .expect_err("a PUT needs a template");
    assert!(error.to_string().contains("template"), "{error}");
}

async fn a_failed_resource_is_replaced_by_the_next_update(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    let template = r#"
heat_template_version: 2021-04-16
parameters:
  broken: {type: boolean, default: true}
resources:
  flaky:
    type: OS::Heat::TestResource
    properties: {fail: {get_param: broken}}
"#;
    operations
        .create_stack(&alice(), request("flaky", template))
        .await
        .expect("create");
    let stack = settled(&operations, "flaky").await;
    assert_eq!(stack.stack_status(), "CREATE_FAILED");
    let mut fix = UpdateStack {
        name_or_id: "flaky".into(),
        existing: true,
        ..UpdateStack::default()
    };
    fix.parameters.insert("broken".into(), json!(false));
    operations
        .update_stack(&alice(), fix)
        .await
        .expect("update accepted");
    let stack = settled_as(&operations, "flaky", "UPDATE_COMPLETE").await;
    let resources = operations.resources(&stack, 0).await.expect("resources");
    assert_eq!(resources.len(), 1, "the failed row was retired");
    assert_eq!(resources[0].resource.resource_status(), "CREATE_COMPLETE");
    let (events, _) = operations
        .events(&stack, Some("flaky".into()), 0, (0, None, false))
        .await
        .expect("events");
    assert!(
        events
            .iter()
            .any(|event| event.reason.starts_with("replacing")),
        "a replacement event names the failed resource"
    );
}

async fn a_failed_update_rolls_back_unless_rollback_is_disabled(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    let good = "heat_template_version: 2021-04-16\nresources:\n  r: {type: OS::Heat::TestResource, properties: {value: good}}\n";
    let bad = "heat_template_version: 2021-04-16\nresources:\n  r: {type: OS::Heat::TestResource, properties: {value: bad, fail: true}}\n";
    let mut create = request("rollbacker", good);
    create.disable_rollback = false;
    operations
        .create_stack(&alice(), create)
        .await
        .expect("create");
    settled(&operations, "rollbacker").await;
    operations
        .update_stack(&alice(), update("rollbacker", bad))
        .await
        .expect("update accepted");
    let stack = settled_as(&operations, "rollbacker", "ROLLBACK_COMPLETE").await;
    let resources = operations.resources(&stack, 0).await.expect("resources");
    assert_eq!(resources[0].resource.attributes["output"], json!("good"));
    let template = operations
        .definition(&stack)
        .await
        .expect("definition")
        .template;
    assert_eq!(
        template["resources"]["r"]["properties"]["value"],
        json!("good"),
        "the old template is back"
    );

    operations
        .create_stack(&alice(), request("no-rollback", good))
        .await
        .expect("create");
    settled(&operations, "no-rollback").await;
    operations
        .update_stack(&alice(), update("no-rollback", bad))
        .await
        .expect("update accepted");
    let stack = settled(&operations, "no-rollback").await;
    assert_eq!(stack.stack_status(), "UPDATE_FAILED");
    assert!(
        stack.status_reason.contains("Test Resource failed"),
        "{}",
        stack.status_reason
    );
}

async fn cancel_update_stops_the_update_and_rolls_back(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    let before = "heat_template_version: 2021-04-16\nresources:\n  r: {type: OS::Heat::TestResource, properties: {value: before}}\n";
    let slow = "heat_template_version: 2021-04-16\nresources:\n  r: {type: OS::Heat::TestResource, properties: {value: before}}\n  slow:\n    type: OS::Heat::TestResource\n    depends_on: r\n    properties: {action_wait_secs: {create: 1}}\n  after_slow: {type: OS::Heat::None, depends_on: slow}\n";
    operations
        .create_stack(&alice(), request("cancelled", before))
        .await
        .expect("create");
    settled(&operations, "cancelled").await;
    let error = operations
        .cancel_update(&alice(), "cancelled")
        .await
        .expect_err("nothing to cancel");
    assert!(matches!(error, Error::Conflict(_)), "{error:?}");
    operations
        .update_stack(&alice(), update("cancelled", slow))
        .await
        .expect("update accepted");
    operations
        .cancel_update(&alice(), "cancelled")
        .await
        .expect("cancelled");
    let stack = settled_as(&operations, "cancelled", "ROLLBACK_COMPLETE").await;
    let resources = operations.resources(&stack, 0).await.expect("resources");
    let names: Vec<&str> = resources
        .iter()
        .map(|view| view.resource.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["r"],
        "resources added by the cancelled update are gone"
    );
}

async fn suspend_resume_and_check_visit_every_resource(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    operations
        .create_stack(&alice(), request("cycle", CHAIN))
        .await
        .expect("create");
    settled(&operations, "cycle").await;
    for (action, expected) in [
        (StackWideAction::Suspend, "SUSPEND_COMPLETE"),
        (StackWideAction::Resume, "RESUME_COMPLETE"),
        (StackWideAction::Check, "CHECK_COMPLETE"),
    ] {
        operations
            .run_stack_wide_action(&alice(), "cycle", action)
            .await
            .expect("accepted");
        let stack = settled(&operations, "cycle").await;
        assert_eq!(stack.stack_status(), expected, "{}", stack.status_reason);
        let resources = operations.resources(&stack, 0).await.expect("resources");
        assert!(
            resources
                .iter()
                .all(|view| view.resource.resource_status() == expected),
            "every resource is {expected}"
        );
        if action == StackWideAction::Suspend {
            let error = operations
                .run_stack_wide_action(&alice(), "cycle", StackWideAction::Suspend)
                .await
                .expect_err("already suspended");
            assert!(
                matches!(error, Error::Conflict(_))
                    && error.to_string().contains("already suspended"),
                "{error}"
            );
        }
    }
    let error = operations
        .run_stack_wide_action(&alice(), "cycle", StackWideAction::Resume)
        .await
        .expect_err("not suspended");
    assert!(
        error
            .to_string()
            .contains("only a suspended stack can be resumed"),
        "{error}"
    );
}

async fn an_abandoned_stack_can_be_adopted_with_its_resources(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    operations
        .create_stack(&alice(), request("wanderer", CHAIN))
        .await
        .expect("create");
    let original = settled(&operations, "wanderer").await;
    let before = operations.resources(&original, 0).await.expect("resources");
    let outputs_before = operations.outputs(&original).await.expect("outputs");

    let data = operations
        .abandon_stack(&alice(), "wanderer")
        .await
        .expect("abandoned");
    assert_eq!(data["name"], json!("wanderer"));
    assert_eq!(
        data["resources"]["first"]["resource_id"],
        json!(resource_named(&before, "first").physical_id)
    );
    let gone = operations
        .find_stack(&alice(), "wanderer")
        .await
        .expect_err("gone");
    assert!(matches!(gone, Error::NotFound(_)));

    let mut adopt = request("wanderer", CHAIN);
    adopt.adopt_data = Some(data.to_string());
    let started = operations
        .create_stack(&alice(), adopt)
        .await
        .expect("adopt accepted");
    assert_eq!(started.stack_status(), "ADOPT_IN_PROGRESS");
    let adopted = settled_as(&operations, "wanderer", "ADOPT_COMPLETE").await;
    let after = operations.resources(&adopted, 0).await.expect("resources");
    for name in ["first", "second", "secret", "kept"] {
        assert_eq!(
            resource_named(&after, name).physical_id,
            resource_named(&before, name).physical_id,
            "{name}"
        );
        assert_eq!(
            resource_named(&after, name).resource_status(),
            "ADOPT_COMPLETE"
        );
    }
    assert_eq!(
        operations.outputs(&adopted).await.expect("outputs"),
        outputs_before
    );

    let mut incomplete = request("half", CHAIN);
    incomplete.adopt_data = Some(json!({"resources": {}}).to_string());
    operations
        .create_stack(&alice(), incomplete)
        .await
        .expect("accepted");
    let failed = settled(&operations, "half").await;
    assert_eq!(failed.stack_status(), "ADOPT_FAILED");
    assert!(
        failed
            .status_reason
            .contains("Resource ID was not provided"),
        "{}",
        failed.status_reason
    );

    let mut malformed = request("bad-data", CHAIN);
    malformed.adopt_data = Some("{not json".to_owned());
    let error = operations
        .create_stack(&alice(), malformed)
        .await
        .expect_err("bad data");
    assert!(
        matches!(error, Error::InvalidInput(_)) && error.to_string().contains("adopt_stack_data"),
        "{error}"
    );
}

const CHILD: &str = r#"
heat_template_version: 2021-04-16
parameters:
  greeting: {type: string, default: hello}
resources:
  inner: {type: OS::Heat::TestResource, properties: {value: {get_param: greeting}}}
outputs:
  message: {value: {get_attr: [inner, output]}}
"#;

fn with_child_file(mut create: CreateStack) -> CreateStack {
    create.files.insert("child.yaml".into(), CHILD.into());
    create
}

async fn nested_stacks_are_real_stacks_created_updated_and_deleted_with_their_parent(
    database: &TestDatabase,
) {
    let (operations, store) = operations(database).await;
    let parent = r#"
heat_template_version: 2021-04-16
parameters:
  word: {type: string, default: hi}
resources:
  from_file: {type: child.yaml, properties: {greeting: {get_param: word}}}
  from_alias: {type: My::Child}
  inline:
    type: OS::Heat::Stack
    properties:
      template: {get_file: child.yaml}
      parameters: {greeting: inline}
outputs:
  file_message: {value: {get_attr: [from_file, message]}}
  alias_message: {value: {get_attr: [from_alias, message]}}
  inline_message: {value: {get_attr: [inline, outputs, message]}}
"#;
    let mut create = with_child_file(request("parent", parent));
    create.environment = "resource_registry:\n  My::Child: child.yaml\n".into();
    operations
        .create_stack(&alice(), create)
        .await
        .expect("create");
    let stack = settled_as(&operations, "parent", "CREATE_COMPLETE").await;
    let outputs: std::collections::BTreeMap<String, serde_json::Value> = operations
        .outputs(&stack)
        .await
        .expect("outputs")
        .into_iter()
        .map(|output| (output.key, output.value.expect("resolved")))
        .collect();
    assert_eq!(outputs["file_message"], json!("hi"));
    assert_eq!(outputs["alias_message"], json!("hello"));
    assert_eq!(outputs["inline_message"], json!("inline"));

    let children = store.list_child_stacks(stack.id).await.expect("children");
    assert_eq!(children.len(), 3);
    assert!(
        children
            .iter()
            .all(|child| child.nested_depth == 1 && child.stack_status() == "CREATE_COMPLETE")
    );
    assert!(
        children
            .iter()
            .any(|child| child.parent_resource.as_deref() == Some("from_file"))
    );
    let all = operations.resources(&stack, 1).await.expect("resources");
    assert_eq!(
        all.len(),
        6,
        "3 nested stack resources and one inner resource in each"
    );
    let only_top = operations.resources(&stack, 0).await.expect("resources");
    assert_eq!(only_top.len(), 3);

    let mut patch = UpdateStack {
        name_or_id: "parent".into(),
        existing: true,
        ..UpdateStack::default()
    };
    patch.parameters.insert("word".into(), json!("bonjour"));
    operations
        .update_stack(&alice(), patch)
        .await
        .expect("update accepted");
    let updated = settled_as(&operations, "parent", "UPDATE_COMPLETE").await;
    let message = operations
        .output(&updated, "file_message")
        .await
        .expect("output");
    assert_eq!(message.value, Ok(json!("bonjour")));
    let file_child = store
        .list_child_stacks(stack.id)
        .await
        .expect("children")
        .into_iter()
        .find(|child| child.parent_resource.as_deref() == Some("from_file"))
        .expect("child");
    assert_eq!(
        file_child.stack_status(),
        "UPDATE_COMPLETE",
        "the nested stack was updated in place"
    );

    operations
        .run_stack_wide_action(&alice(), "parent", StackWideAction::Suspend)
        .await
        .expect("suspend");
    settled(&operations, "parent").await;
    let child = store
        .get_stack(file_child.id)
        .await
        .expect("read")
        .expect("child");
    assert_eq!(
        child.stack_status(),
        "SUSPEND_COMPLETE",
        "suspend reaches nested stacks"
    );

    operations
        .delete_stack(&alice(), "parent")
        .await
        .expect("delete accepted");
    settled_as(&operations, &stack.id.to_string(), "DELETE_COMPLETE").await;
    let child = store
        .get_stack(file_child.id)
        .await
        .expect("read")
        .expect("child");
    assert_eq!(
        child.stack_status(),
        "DELETE_COMPLETE",
        "deleting the parent deleted the nested stack"
    );
}

async fn nested_stack_problems_surface_in_the_parent(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    let bad_property = "heat_template_version: 2021-04-16\nresources:\n  c: {type: child.yaml, properties: {colour: red}}\n";
    let error = operations
        .create_stack(
            &alice(),
            with_child_file(request("bad-property", bad_property)),
        )
        .await
        .expect_err("refused");
    assert!(
        error
            .to_string()
            .contains("resources.c.properties: unknown property \"colour\""),
        "{error}"
    );

    let missing_file = "heat_template_version: 2021-04-16\nresources:\n  c: {type: absent.yaml}\n";
    let error = operations
        .create_stack(&alice(), request("missing-file", missing_file))
        .await
        .expect_err("refused");
    assert!(
        error
            .to_string()
            .contains("\"absent.yaml\" is not among the files"),
        "{error}"
    );

    let failing_child = "heat_template_version: 2021-04-16\nresources:\n  bad: {type: OS::Heat::TestResource, properties: {fail: true}}\n";
    let parent = "heat_template_version: 2021-04-16\nresources:\n  c: {type: failing.yaml}\n";
    let mut create = request("failing-parent", parent);
    create
        .files
        .insert("failing.yaml".into(), failing_child.into());
    operations
        .create_stack(&alice(), create)
        .await
        .expect("accepted");
    let stack = settled(&operations, "failing-parent").await;
    assert_eq!(stack.stack_status(), "CREATE_FAILED");
    assert!(
        stack.status_reason.contains("Test Resource failed"),
        "{}",
        stack.status_reason
    );

    let recursive = "heat_template_version: 2021-04-16\nresources:\n  again: {type: self.yaml}\n";
    let mut create = request("recursive", recursive);
    create.files.insert("self.yaml".into(), recursive.into());
    operations
        .create_stack(&alice(), create)
        .await
        .expect("accepted");
    let stack = settled(&operations, "recursive").await;
    assert_eq!(stack.stack_status(), "CREATE_FAILED");
    assert!(
        stack.status_reason.contains("exceeds the maximum of 5"),
        "{}",
        stack.status_reason
    );
}

async fn the_next_operation_can_start_as_soon_as_the_final_state_is_visible(
    database: &TestDatabase,
) {
    let (operations, _) = operations(database).await;
    for round in 0..5 {
        let name = format!("back-to-back-{round}");
        operations
            .create_stack(&alice(), request(&name, CHAIN))
            .await
            .expect("create");
        let stack = settled(&operations, &name).await;
        assert_eq!(stack.stack_status(), "CREATE_COMPLETE");
        // No gap between the final state and the lease release.
        operations
            .delete_stack(&alice(), &name)
            .await
            .expect("delete right away");
        let deleted = settled(&operations, &stack.id.to_string()).await;
        assert_eq!(deleted.stack_status(), "DELETE_COMPLETE");
    }
}

/// A stack of 3,000 resources: every statement that writes them is
/// batched below the databases' limits on bound values (SQLite allows
/// 32,766; one insert of 3,000 rows went past it), on create, update
/// (half of them replaced by a type change), and delete.
async fn a_stack_of_three_thousand_resources_is_created_updated_and_deleted(
    database: &TestDatabase,
) {
    let (operations, store) = operations(database).await;
    let template = |type_name: &str| {
        let resources: serde_json::Map<String, serde_json::Value> = (0..3000)
            .map(|index| {
                let type_name = if index % 2 == 0 {
                    type_name
                } else {
                    "OS::Heat::None"
                };
                (format!("r{index}"), json!({"type": type_name}))
            })
            .collect();
        json!({"heat_template_version": "2021-04-16", "resources": resources}).to_string()
    };
    operations
        .create_stack(&alice(), request("large", &template("OS::Heat::None")))
        .await
        .expect("accepted");
    let started = Instant::now();
    let created = settled_within(&operations, "large", Duration::from_secs(120)).await;
    eprintln!("3,000 resources created in {:?}", started.elapsed());
    assert_status(&created, "CREATE_COMPLETE");
    assert_eq!(
        store.list_resources(created.id).await.expect("rows").len(),
        3000
    );
    operations
        .update_stack(
            &alice(),
            UpdateStack {
                name_or_id: "large".into(),
                template: template("OS::Heat::RandomString"),
                ..UpdateStack::default()
            },
        )
        .await
        .expect("update accepted");
    let started = Instant::now();
    let updated = settled_within(&operations, "large", Duration::from_secs(120)).await;
    eprintln!("1,500 replaced in {:?}", started.elapsed());
    assert_status(&updated, "UPDATE_COMPLETE");
    assert_eq!(
        store.list_resources(updated.id).await.expect("rows").len(),
        3000,
        "the 1,500 replaced rows are gone"
    );
    operations
        .delete_stack(&alice(), "large")
        .await
        .expect("delete accepted");
    let started = Instant::now();
    let deleted = settled_within(
        &operations,
        &created.id.to_string(),
        Duration::from_secs(120),
    )
    .await;
    assert_status(&deleted, "DELETE_COMPLETE");
    eprintln!("3,000 deleted in {:?}", started.elapsed());
}

/// Refuses, by a trigger in the database, the event of resource `doomed`
/// reaching `action` COMPLETE — its transition fails as a write the
/// database refuses would.
async fn refuse_doomed(connection: &DatabaseConnection, action: &str) {
    refuse_inserts(
        connection,
        "refuse_doomed",
        "events",
        &format!(
            "NEW.resource_name = 'doomed' AND NEW.action = '{action}' AND NEW.status = 'COMPLETE'"
        ),
        "injected: doomed refused",
    )
    .await;
}

async fn accept_doomed(connection: &DatabaseConnection) {
    accept_inserts(connection, "refuse_doomed", "events").await;
}

/// Refuses, by a trigger named `name` on `table`, every insert of a row
/// for which `when` (SQL over `NEW`, the same on both backends) holds,
/// with `message`.
async fn refuse_inserts(
    connection: &DatabaseConnection,
    name: &str,
    table: &str,
    when: &str,
    message: &str,
) {
    let statements = match connection.get_database_backend() {
        DatabaseBackend::Sqlite => vec![format!(
            "CREATE TRIGGER {name} BEFORE INSERT ON {table} WHEN {when} \
             BEGIN SELECT RAISE(ABORT, '{message}'); END"
        )],
        _ => vec![
            format!(
                "CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 BEGIN IF {when} THEN RAISE EXCEPTION '{message}'; \
                 END IF; RETURN NEW; END $$"
            ),
            format!(
                "CREATE TRIGGER {name} BEFORE INSERT ON {table} \
                 FOR EACH ROW EXECUTE FUNCTION {name}()"
            ),
        ],
    };
    for statement in statements {
        connection
            .execute_unprepared(&statement)
            .await
            .expect("trigger");
    }
}

/// Drops what [`refuse_inserts`] made.
async fn accept_inserts(connection: &DatabaseConnection, name: &str, table: &str) {
    let statements = match connection.get_database_backend() {
        DatabaseBackend::Sqlite => vec![format!("DROP TRIGGER {name}")],
        _ => vec![
            format!("DROP TRIGGER {name} ON {table}"),
            format!("DROP FUNCTION {name}()"),
        ],
    };
    for statement in statements {
        connection
            .execute_unprepared(&statement)
            .await
            .expect("trigger dropped");
    }
}

/// A resource transition the database refuses fails the operation: the
/// end a run queues behind its transitions is not written over one that
/// was not recorded, so the stack never shows COMPLETE; it ends FAILED,
/// naming the store's error, and the lease is released with that end.
async fn a_transition_the_database_refuses_fails_the_operation(database: &TestDatabase) {
    let (operations, connection) = operations_on_connection(database).await;
    let template = r#"
heat_template_version: 2021-04-16
resources:
  fine: {type: OS::Heat::None}
  doomed: {type: OS::Heat::None}
"#;
    let stack_events = |stack: Stack| {
        let operations = operations.clone();
        async move {
            let (events, _) = operations
                .events(&stack, Some(stack.name.clone()), 0, (0, None, false))
                .await
                .expect("events");
            events
                .iter()
                .map(|event| event.resource_status())
                .collect::<Vec<_>>()
        }
    };

    refuse_doomed(&connection, "CREATE").await;
    operations
        .create_stack(&alice(), request("refused", template))
        .await
        .expect("create accepted");
    let stack = settled_as(&operations, "refused", "CREATE_FAILED").await;
    assert!(
        stack
            .status_reason
            .contains("recording the operation's progress failed")
            && stack.status_reason.contains("injected"),
        "{}",
        stack.status_reason
    );
    assert!(
        !stack_events(stack.clone())
            .await
            .contains(&"CREATE_COMPLETE".to_owned()),
        "the stack never showed CREATE_COMPLETE"
    );
    accept_doomed(&connection).await;

    refuse_doomed(&connection, "DELETE").await;
    operations
        .delete_stack(&alice(), "refused")
        .await
        .expect("the failed create's end released the lease");
    let stack = settled_as(&operations, &stack.id.to_string(), "DELETE_FAILED").await;
    assert!(
        !stack_events(stack.clone())
            .await
            .contains(&"DELETE_COMPLETE".to_owned())
    );
    accept_doomed(&connection).await;

    operations
        .delete_stack(&alice(), "refused")
        .await
        .expect("delete accepted again");
    settled_as(&operations, &stack.id.to_string(), "DELETE_COMPLETE").await;
}

/// Refuses, by a trigger in the database, every insert of a nested stack
/// (a stack with a parent): the nested stack's create fails in the store.
async fn refuse_nested_stacks(connection: &DatabaseConnection) {
    refuse_inserts(
        connection,
        "refuse_nested",
        "stacks",
        "NEW.parent_id IS NOT NULL",
        "injected: nested stack refused",
    )
    .await;
}

async fn accept_nested_stacks(connection: &DatabaseConnection) {
    accept_inserts(connection, "refuse_nested", "stacks").await;
}

/// A resource whose step fails because Ember's own store failed under it
/// (here: the database refuses the nested stack a template resource
/// makes) is no failure of the resource: the operation ends as the store
/// failure it is — "recording the operation's progress failed: database
/// error: …" — and the resource is not marked CREATE_FAILED with the
/// store's words as if its properties were bad. Its row stays as the step
/// left it, and a delete once the database is back removes everything.
async fn a_resource_step_the_store_fails_fails_the_operation_as_a_store_failure(
    database: &TestDatabase,
) {
    let (operations, connection) = operations_on_connection(database).await;
    refuse_nested_stacks(&connection).await;
    operations
        .create_stack(
            &alice(),
            with_child_file(request("store-fails", NESTED_ONLY)),
        )
        .await
        .expect("create accepted");
    let stack = settled_as(&operations, "store-fails", "CREATE_FAILED").await;
    assert!(
        stack
            .status_reason
            .starts_with("recording the operation's progress failed: database error: ")
            && stack
                .status_reason
                .contains("injected: nested stack refused"),
        "{}",
        stack.status_reason
    );
    let resources = operations.resources(&stack, 0).await.expect("resources");
    let child = resource_named(&resources, "child");
    assert_eq!(
        (child.action, child.status),
        (StackAction::Create, ActionStatus::InProgress),
        "not failed as if its properties were bad: {}",
        child.status_reason
    );
    let (events, _) = operations
        .events(&stack, None, 0, (0, None, false))
        .await
        .expect("events");
    let child_failed = events
        .iter()
        .any(|event| event.resource_name == "child" && event.resource_status() == "CREATE_FAILED");
    assert!(!child_failed, "the resource never showed CREATE_FAILED");
    accept_nested_stacks(&connection).await;

    operations
        .delete_stack(&alice(), "store-fails")
        .await
        .expect("delete accepted");
    settled_as(&operations, &stack.id.to_string(), "DELETE_COMPLETE").await;
}

const NESTED_ONLY: &str =
    "heat_template_version: 2021-04-16\nresources:\n  child: {type: child.yaml}\n";

/// Rows of `table` in the whole database.
async fn rows_in(connection: &DatabaseConnection, table: &str) -> i64 {
    let backend = connection.get_database_backend();
    let row = connection
        .query_one_raw(sea_orm::Statement::from_string(
            backend,
            format!("SELECT COUNT(*) AS n FROM {table}"),
        ))
        .await
        .expect("count")
        .expect("a row");
    row.try_get("", "n").expect("n")
}

/// Creates racing for one name: one stack is recorded and created, the
/// others are refused with Conflict — and the runs that started behind
/// their records (a run may queue its first steps before its stack's
/// record commits) leave nothing behind: no stack, lease, resource or
/// event but the winner's.
async fn a_create_refused_for_its_name_leaves_no_trace(database: &TestDatabase) {
    let (operations, connection) = operations_on_connection(database).await;
    let template = r#"
heat_template_version: 2021-04-16
resources:
  one: {type: OS::Heat::None}
  two: {type: OS::Heat::None}
  three: {type: OS::Heat::RandomString}
"#;
    let caller = alice();
    let creates = (0..6).map(|_| operations.create_stack(&caller, request("twin", template)));
    let outcomes = futures::future::join_all(creates).await;
    let created: Vec<&Stack> = outcomes
        .iter()
        .filter_map(|outcome| outcome.as_ref().ok())
        .collect();
    assert_eq!(created.len(), 1, "{outcomes:?}");
    for outcome in &outcomes {
        if let Err(error) = outcome {
            assert!(matches!(error, Error::Conflict(_)), "{error:?}");
        }
    }
    let winner = settled(&operations, "twin").await;
    assert_eq!(winner.id, created[0].id);
    assert_status(&winner, "CREATE_COMPLETE");
    // Every run this engine started — the refused ones included — has
    // ended before anything is counted.
    assert_eq!(
        operations.hand_back(Duration::from_secs(10)).await,
        0,
        "runs still going"
    );
    let (events, _) = operations
        .events(&winner, None, 0, (0, None, false))
        .await
        .expect("events");
    assert_eq!(rows_in(&connection, "stacks").await, 1);
    assert_eq!(rows_in(&connection, "stack_leases").await, 1);
    assert_eq!(rows_in(&connection, "resources").await, 3);
    assert_eq!(
        rows_in(&connection, "events").await,
        i64::try_from(events.len()).expect("count"),
        "only the winner's events: {:?}",
        events
            .iter()
            .map(|event| event.resource_status())
            .collect::<Vec<_>>()
    );
    // 1 stack start + 3 × (IN_PROGRESS, COMPLETE) + 1 stack end.
    assert_eq!(events.len(), 8, "{events:?}");
}

/// A hook set for a nested stack's resource (`resources: {nested: {one:
/// {hooks: …}}}`, Heat's nested hooks) pauses that resource in the nested
/// stack — not the parent's resource of the same name — and is cleared by
/// a signal to the nested stack.
async fn a_hook_for_a_nested_stacks_resource_pauses_it_there(database: &TestDatabase) {
    let (operations, connection) = operations_with_hooks(database).await;
    let inner = "heat_template_version: 2021-04-16\nresources:\n  one: {type: OS::Heat::None}\n  two: {type: OS::Heat::None, depends_on: one}\n";
    let outer = "heat_template_version: 2021-04-16\nresources:\n  one: {type: OS::Heat::None}\n  nested: {type: inner.yaml, depends_on: one}\n";
    let mut create = request("nested-hooks", outer);
    create.files.insert("inner.yaml".into(), inner.into());
    create.environment =
        json!({"resource_registry": {"resources": {"nested": {"one": {"hooks": "pre-create"}}}}})
            .to_string();
    let created = operations
        .create_stack(&alice(), create)
        .await
        .expect("accepted");
    let paused = "CREATE paused until Hook pre-create is cleared";
    wait_for(
        "the nested resource to pause",
        Duration::from_secs(10),
        || async { events_with_reason(&connection, paused).await > 0 },
    )
    .await;
    let children = SqlStackStore::new(connection.clone())
        .list_child_stacks(created.id)
        .await
        .expect("children");
    let [nested] = children.as_slice() else {
        panic!("one nested stack: {children:?}");
    };
    let nested = nested.id.to_string();
    // The parent's own `one` did not pause: it is made.
    let parent_one = operations
        .resource(&created, "one")
        .await
        .expect("one")
        .resource;
    assert_eq!(parent_one.resource_status(), "CREATE_COMPLETE");
    let refused = operations
        .signal_resource(
            &alice(),
            "nested-hooks",
            "one",
            json!({"unset_hook": "pre-create"}),
        )
        .await
        .expect_err("the parent's one is not paused");
    assert!(matches!(refused, Error::InvalidInput(_)), "{refused:?}");
    operations
        .signal_resource(
            &alice(),
            &nested,
            "one",
            json!({"unset_hook": "pre-create"}),
        )
        .await
        .expect("the nested stack's hook cleared");
    settled_as(&operations, "nested-hooks", "CREATE_COMPLETE").await;
    assert_eq!(events_with_reason(&connection, paused).await, 1);
}

/// A nested stack's output that names a parameter it lacks does not fail
/// the stack (Heat resolves outputs when they are read): it is that
/// output's error, and the parent's output that reads it through
/// `get_attr` says where it came from, in Heat's words.
async fn a_nested_output_error_is_passed_up_to_the_parent(database: &TestDatabase) {
    let (operations, _store) = operations(database).await;
    let inner = "heat_template_version: 2015-10-15\nresources:\n  a: {type: OS::Heat::Value, properties: {value: a}}\noutputs:\n  out_a: {value: {get_attr: [a, value]}}\n  out_b: {value: {get_param: foo}}\n";
    let outer = "heat_template_version: 2015-10-15\nresources:\n  parent: {type: inner.yaml}\noutputs:\n  a: {value: {get_attr: [parent, out_a]}}\n  b: {value: {get_attr: [parent, out_b]}}\n";
    let mut create = request("lazy-outputs", outer);
    create.files.insert("inner.yaml".into(), inner.into());
    operations
        .create_stack(&alice(), create)
        .await
        .expect("accepted");
    let stack = settled_as(&operations, "lazy-outputs", "CREATE_COMPLETE").await;
    let outputs: std::collections::BTreeMap<String, Result<serde_json::Value, String>> = operations
        .outputs(&stack)
        .await
        .expect("outputs")
        .into_iter()
        .map(|output| (output.key, output.value))
        .collect();
    assert_eq!(outputs["a"], Ok(json!("a")));
    assert_eq!(
        outputs["b"],
        Err("Error in parent output out_b: The Parameter (foo) was not provided.".to_owned())
    );
}

/// Operations whose registry pauses at breakpoint hooks.
async fn operations_with_hooks(
    database: &TestDatabase,
) -> (Arc<StackOperations>, DatabaseConnection) {
    let (store, connection) = store_on_connection(database).await;
    let conditions = WaitConditions::new(
        Arc::new(SqlWaitSignalStore::new(
            connection.clone(),
            connection.clone(),
        )),
        store.clone(),
        "http://ember.test",
    );
    let registry = ResourceTypeRegistry::builtin().with_wait_conditions(conditions);
    (StackOperations::new(store, Arc::new(registry)), connection)
}

/// Stack `name` of two resources, `one` with `hook` set.
fn request_with_hook(name: &str, hook: &str) -> CreateStack {
    let template = r#"
heat_template_version: 2021-04-16
resources:
  one: {type: OS::Heat::None}
  two: {type: OS::Heat::None, depends_on: one}
"#;
    let mut create = request(name, template);
    create.environment =
        json!({"resource_registry": {"resources": {"one": {"hooks": hook}}}}).to_string();
    create
}

/// Waits until resource `one` of `stack` paused at `hook` (an event
/// says `paused`), then clears it.
async fn clear_once_paused(
    operations: &Arc<StackOperations>,
    connection: &DatabaseConnection,
    stack: &str,
    hook: &str,
    paused: &str,
) {
    wait_for(
        &format!("a pause at {hook}"),
        Duration::from_secs(10),
        || async { events_with_reason(connection, paused).await > 0 },
    )
    .await;
    operations
        .signal_resource(&alice(), stack, "one", json!({ "unset_hook": hook }))
        .await
        .expect("hook cleared");
}

/// Once every run the engine started has ended (the refused ones'
/// included): exactly one event says `paused`.
async fn paused_once_after_every_run(
    operations: &StackOperations,
    connection: &DatabaseConnection,
    paused: &str,
) {
    assert_eq!(
        operations.hand_back(Duration::from_secs(10)).await,
        0,
        "runs still going"
    );
    assert_eq!(
        events_with_reason(connection, paused).await,
        1,
        "paused once"
    );
}

async fn events_with_reason(connection: &DatabaseConnection, reason: &str) -> i64 {
    let backend = connection.get_database_backend();
    let sql = match backend {
        DatabaseBackend::Postgres => "SELECT COUNT(*) AS n FROM events WHERE reason = $1",
        _ => "SELECT COUNT(*) AS n FROM events WHERE reason = ?",
    };
    let row = connection
        .query_one_raw(sea_orm::Statement::from_sql_and_values(
            backend,
            sql,
            [reason.into()],
        ))
        .await
        .expect("count")
        .expect("a row");
    row.try_get::<i64>("", "n").expect("n")
}

/// Creates racing for one name with a pre-create hook set (an effect
/// outside the runs' fenced writes): the refused ones' runs never reach
/// it — the winner's resource pauses once — and the winner is created
/// once the hook is cleared.
async fn creates_racing_for_one_name_pause_at_a_hook_once(database: &TestDatabase) {
    let (operations, connection) = operations_with_hooks(database).await;
    let caller = alice();
    let creates =
        (0..6).map(|_| operations.create_stack(&caller, request_with_hook("hooked", "pre-create")));
    let outcomes = futures::future::join_all(creates).await;
    assert_eq!(
        outcomes.iter().filter(|outcome| outcome.is_ok()).count(),
        1,
        "{outcomes:?}"
    );
    let paused = "CREATE paused until Hook pre-create is cleared";
    clear_once_paused(&operations, &connection, "hooked", "pre-create", paused).await;
    settled_as(&operations, "hooked", "CREATE_COMPLETE").await;
    paused_once_after_every_run(&operations, &connection, paused).await;
    assert_eq!(rows_in(&connection, "stacks").await, 1);
}

/// Deletes racing for one stack: one is accepted, the others answer
/// Conflict — and the runs some of them started before their takes were
/// refused (a delete's run may queue its first steps before its take
/// commits) leave nothing behind. With a pre-delete hook set (an effect
/// outside the run's fenced writes), the resource pauses at it once: one
/// event, one hook; once cleared, the stack is deleted.
async fn deletes_racing_for_one_stack_start_one_delete(database: &TestDatabase) {
    let (operations, connection) = operations_with_hooks(database).await;
    let caller = alice();
    let create = request_with_hook("contested", "pre-delete");
    operations
        .create_stack(&caller, create)
        .await
        .expect("created");
    let created = settled(&operations, "contested").await;
    assert_eq!(created.stack_status(), "CREATE_COMPLETE");

    let deletes = (0..6).map(|_| operations.delete_stack(&caller, "contested"));
    let outcomes = futures::future::join_all(deletes).await;
    let accepted = outcomes.iter().filter(|outcome| outcome.is_ok()).count();
    assert_eq!(accepted, 1, "{outcomes:?}");
    for outcome in &outcomes {
        if let Err(error) = outcome {
            assert!(matches!(error, Error::Conflict(_)), "{error:?}");
        }
    }
    let paused = "DELETE paused until Hook pre-delete is cleared";
    clear_once_paused(&operations, &connection, "contested", "pre-delete", paused).await;
    wait_for(
        "contested to be deleted",
        Duration::from_secs(20),
        || async { operations.find_stack(&caller, "contested").await.is_err() },
    )
    .await;
    paused_once_after_every_run(&operations, &connection, paused).await;
    let (events, _) = operations
        .events(&created, None, 0, (0, None, false))
        .await
        .expect("events");
    let deleting: Vec<String> = events
        .iter()
        .filter(|event| event.reason == "Stack DELETE started")
        .map(|event| event.resource_status())
        .collect();
    assert_eq!(deleting.len(), 1, "one delete started: {deleting:?}");
}

ember_runtime::store_suite!(
    a_nested_output_error_is_passed_up_to_the_parent,
    a_hook_for_a_nested_stacks_resource_pauses_it_there,
    a_stack_of_three_thousand_resources_is_created_updated_and_deleted,
    deletes_racing_for_one_stack_start_one_delete,
    creates_racing_for_one_name_pause_at_a_hook_once,
    a_stack_is_created_along_its_graph_and_deleted,
    a_failing_resource_fails_the_stack_and_rollback_deletes_the_rest,
    bad_requests_are_refused_before_anything_is_recorded,
    an_operation_in_progress_holds_the_stack_lease,
    a_delete_stops_the_operation_in_progress_and_deletes_the_whole_tree,
    an_operation_that_cannot_finish_times_out,
    a_group_grows_past_the_template_size_limit,
    a_failed_nested_create_leaves_nothing_after_the_root_is_deleted,
    an_update_left_in_progress_by_a_dead_engine_is_failed,
    an_unexpired_lease_cannot_be_stolen_but_an_expired_one_can,
    an_update_changes_in_place_replaces_adds_and_removes,
    patch_keeps_the_template_and_parameters_it_does_not_name,
    a_failed_resource_is_replaced_by_the_next_update,
    a_failed_update_rolls_back_unless_rollback_is_disabled,
    cancel_update_stops_the_update_and_rolls_back,
    suspend_resume_and_check_visit_every_resource,
    an_abandoned_stack_can_be_adopted_with_its_resources,
    nested_stacks_are_real_stacks_created_updated_and_deleted_with_their_parent,
    nested_stack_problems_surface_in_the_parent,
    the_next_operation_can_start_as_soon_as_the_final_state_is_visible,
    a_transition_the_database_refuses_fails_the_operation,
    a_resource_step_the_store_fails_fails_the_operation_as_a_store_failure,
    a_create_refused_for_its_name_leaves_no_trace,
);
