//! Mark unhealthy and scaling groups (spec heat-mark-unhealthy) against a
//! real database (SQLite, and PostgreSQL when EMBER_TEST_DATABASE_URL is
//! set): marks and resets, the lease and the gate, the next update
//! replacing marked resources (dependents refreshed, nested members, whole
//! nested stacks), ResourceGroup replacing only failed members,
//! AutoScalingGroup dropping failed members first and keeping names, and
//! scaling policy signals with clamping and cooldown.

mod stack_support;

use stack_support::assert_status;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ember_engine::Error;
use ember_engine::domain::{ActionStatus, Event, LockLevel, Resource, Stack, StackAction};
use ember_engine::resources::ResourceTypeRegistry;
use ember_engine::stacks::{CreateStack, DEFAULT_HEALTH_REASON, StackOperations, UpdateStack};
use ember_engine::store::{
    FencedTransition, LeaseTake, SqlStackStore, StackStore, migrations::Migrator,
};
use ember_runtime::Identity;
use ember_runtime::database::{connect_and_migrate, testing::TestDatabase};
use serde_json::{Value, json};
use uuid::Uuid;

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

fn alice() -> Identity {
    Identity::new("alice", "project-a", vec!["member".to_owned()])
}

const SETTLE: Duration = Duration::from_secs(30);

async fn create(operations: &StackOperations, name: &str, template: &str) -> Stack {
    let request = CreateStack {
        name: name.to_owned(),
        template: template.to_owned(),
        disable_rollback: true,
        ..CreateStack::default()
    };
    operations
        .create_stack(&alice(), request)
        .await
        .expect("create accepted");
    settled_as(operations, name, "CREATE_COMPLETE").await
}

/// Polls until the stack leaves IN_PROGRESS.
async fn settled(operations: &StackOperations, name_or_id: &str) -> Stack {
    stack_support::settled(operations, &alice(), name_or_id, SETTLE).await
}

/// [`settled`], and ended `status`.
async fn settled_as(operations: &StackOperations, name_or_id: &str, status: &str) -> Stack {
    let stack = settled(operations, name_or_id).await;
    assert_status(&stack, status);
    stack
}

/// PATCH with nothing but `parameters`: the same template.
async fn update_existing(operations: &StackOperations, name: &str, parameters: Value) -> Stack {
    let mut update = UpdateStack {
        name_or_id: name.to_owned(),
        existing: true,
        ..UpdateStack::default()
    };
    if let Value::Object(parameters) = parameters {
        update.parameters = parameters;
    }
    operations
        .update_stack(&alice(), update)
        .await
        .expect("update accepted");
    settled_as(operations, name, "UPDATE_COMPLETE").await
}

/// The current row of each resource, by name.
async fn resources_of(
    operations: &StackOperations,
    stack: &Stack,
) -> std::collections::BTreeMap<String, Resource> {
    operations
        .resources(stack, 0)
        .await
        .expect("resources")
        .into_iter()
        .map(|view| (view.resource.name.clone(), view.resource))
        .collect()
}

async fn events_of(operations: &StackOperations, stack: &Stack) -> Vec<Event> {
    operations
        .events(stack, None, 0, (1000, None, false))
        .await
        .expect("events")
        .0
}

/// The nested stack a nested-stack or group resource points at.
async fn nested_stack_of(operations: &StackOperations, resource: &Resource) -> Stack {
    let id = resource.physical_id.clone().expect("a nested stack id");
    operations
        .find_stack(&alice(), &id)
        .await
        .expect("nested stack")
}

const REPLACED: &str = r#"
heat_template_version: 2021-04-16
resources:
  flaky: {type: OS::Heat::RandomString, properties: {length: 16}}
  user:
    type: OS::Heat::Value
    properties: {value: {get_attr: [flaky, value]}}
  bystander: {type: OS::Heat::TestResource, properties: {value: calm}}
outputs:
  used: {value: {get_attr: [user, value]}}
"#;

async fn a_marked_resource_is_replaced_by_the_next_update_and_dependents_follow(
    database: &TestDatabase,
) {
    let (operations, _) = operations(database).await;
    let stack = create(&operations, "marked", REPLACED).await;
    let before = resources_of(&operations, &stack).await;

    let marked = operations
        .mark_unhealthy(&alice(), "marked", "flaky", true, None)
        .await
        .expect("marked");
    assert_eq!(marked.resource_status(), "CHECK_FAILED");
    assert_eq!(marked.status_reason, DEFAULT_HEALTH_REASON);
    let stack_now = settled(&operations, "marked").await;
    assert_eq!(
        stack_now.stack_status(),
        "CREATE_COMPLETE",
        "marking changes the resource, not the stack"
    );
    let events = events_of(&operations, &stack).await;
    let last = events.last().expect("an event");
    assert_eq!(
        (
            last.resource_name.as_str(),
            last.resource_status().as_str(),
            last.reason.as_str()
        ),
        ("flaky", "CHECK_FAILED", DEFAULT_HEALTH_REASON)
    );

    // false resets only CHECK_FAILED; an empty reason is the default one.
    let reset = operations
        .mark_unhealthy(&alice(), "marked", "flaky", false, Some(String::new()))
        .await
        .expect("reset");
    assert_eq!(reset.resource_status(), "CHECK_COMPLETE");
    let count = events_of(&operations, &stack).await.len();
    let again = operations
        .mark_unhealthy(&alice(), "marked", "flaky", false, None)
        .await
        .expect("no-op");
    assert_eq!(again.resource_status(), "CHECK_COMPLETE");
    assert_eq!(
        events_of(&operations, &stack).await.len(),
        count,
        "nothing changed, nothing recorded"
    );
    let bystander = before["bystander"].physical_id.clone().expect("id");
    let unchanged = operations
        .mark_unhealthy(&alice(), "marked", &bystander, false, None)
        .await
        .expect("found by physical id");
    assert_eq!(unchanged.name, "bystander");
    assert_eq!(unchanged.resource_status(), "CREATE_COMPLETE");

    let marked = operations
        .mark_unhealthy(
            &alice(),
            &stack.id.to_string(),
            "flaky",
            true,
            Some("disk broken".into()),
        )
        .await
        .expect("marked by stack id");
    assert_eq!(marked.status_reason, "disk broken");

    let updated = update_existing(&operations, "marked", json!({})).await;
    let after = resources_of(&operations, &updated).await;
    assert_eq!(after.len(), 3, "the replaced row was retired");
    let flaky = &after["flaky"];
    assert_eq!(flaky.resource_status(), "CREATE_COMPLETE");
    assert_ne!(flaky.id, before["flaky"].id, "a new resource");
    assert_ne!(
        flaky.attributes["value"],
        before["flaky"].attributes["value"]
    );
    assert_eq!(
        after["user"].attributes["value"], flaky.attributes["value"],
        "the dependent was updated with the new value"
    );
    assert_eq!(after["user"].resource_status(), "UPDATE_COMPLETE");
    assert_eq!(
        after["bystander"].updated_at, before["bystander"].updated_at,
        "an unrelated resource is left alone"
    );
    let output = operations.output(&updated, "used").await.expect("output");
    assert_eq!(output.value, Ok(flaky.attributes["value"].clone()));
}

async fn marks_are_refused_while_the_stack_is_busy_and_change_nothing(database: &TestDatabase) {
    let (operations, store) = operations(database).await;
    let template = r#"
heat_template_version: 2021-04-16
parameters:
  word: {type: string, default: one}
resources:
  slow:
    type: OS::Heat::TestResource
    properties: {value: {get_param: word}, action_wait_secs: {update: 1.5}}
  other: {type: OS::Heat::None}
"#;
    let stack = create(&operations, "busy", template).await;

    // Another engine holds the lease: Conflict, nothing written.
    let other_engine = Uuid::new_v4();
    let now = ember_runtime::time::now();
    let held = store
        .take_stack_lease(&LeaseTake::new(
            stack.id,
            other_engine,
            "UPDATE",
            now,
            now + chrono::Duration::seconds(30),
        ))
        .await
        .expect("lease")
        .expect("taken");
    let count = events_of(&operations, &stack).await.len();
    let error = operations
        .mark_unhealthy(&alice(), "busy", "other", true, None)
        .await
        .expect_err("busy");
    assert!(matches!(error, Error::Conflict(_)), "{error:?}");
    assert!(error.to_string().contains("busy"), "{error}");
    assert_eq!(events_of(&operations, &stack).await.len(), count);
    assert_eq!(
        resources_of(&operations, &stack).await["other"].resource_status(),
        "CREATE_COMPLETE"
    );
    store.release_stack_lease(held).await.expect("released");

    // A running update: Conflict too.
    operations
        .update_stack(
            &alice(),
            UpdateStack {
                name_or_id: "busy".into(),
                existing: true,
                parameters: json!({"word": "two"}).as_object().cloned().expect("map"),
                ..UpdateStack::default()
            },
        )
        .await
        .expect("update accepted");
    let error = operations
        .mark_unhealthy(&alice(), "busy", "other", true, None)
        .await
        .expect_err("update in progress");
    assert!(matches!(error, Error::Conflict(_)), "{error:?}");
    let updated = settled(&operations, "busy").await;
    assert_eq!(updated.stack_status(), "UPDATE_COMPLETE");
    assert_eq!(
        resources_of(&operations, &updated).await["other"].resource_status(),
        "CREATE_COMPLETE",
        "the refused mark left nothing behind"
    );
    // The lease is free again after a mark.
    operations
        .mark_unhealthy(&alice(), "busy", "other", true, None)
        .await
        .expect("marked");
    let held = store
        .take_stack_lease(&LeaseTake::new(
            stack.id,
            other_engine,
            "UPDATE",
            now,
            now + chrono::Duration::seconds(30),
        ))
        .await
        .expect("lease")
        .expect("marking released the lease in its transaction");
    store.release_stack_lease(held).await.expect("released");

    let unknown = operations
        .mark_unhealthy(&alice(), "busy", "nope", true, None)
        .await
        .expect_err("unknown");
    assert!(matches!(unknown, Error::NotFound(_)), "{unknown:?}");
    let unknown_stack = operations
        .mark_unhealthy(&alice(), "nope", "other", true, None)
        .await
        .expect_err("unknown stack");
    assert!(
        matches!(unknown_stack, Error::NotFound(_)),
        "{unknown_stack:?}"
    );
    let foreign = operations
        .mark_unhealthy(
            &Identity::new("bob", "project-b", vec!["member".to_owned()]),
            "busy",
            "other",
            true,
            None,
        )
        .await
        .expect_err("another project's stack");
    assert!(matches!(foreign, Error::NotFound(_)), "{foreign:?}");

    // A resource being deleted is left alone; a shared physical id is
    // ambiguous.
    let mut rows = resources_of(&operations, &stack).await;
    let mut deleting = rows.remove("other").expect("other");
    deleting.action = StackAction::Delete;
    deleting.status = ActionStatus::Failed;
    let mut twin = rows.remove("slow").expect("slow");
    twin.physical_id = deleting.physical_id.clone();
    let at = ember_runtime::time::now();
    let fence = store
        .take_stack_lease(&LeaseTake::new(
            stack.id,
            other_engine,
            "TEST",
            at,
            at + chrono::Duration::seconds(30),
        ))
        .await
        .expect("lease")
        .expect("free");
    let lost = store
        .record_resource_transitions(&[
            FencedTransition {
                fence,
                event: Event::for_resource(&deleting, at),
                resource: deleting.clone(),
            },
            FencedTransition {
                fence,
                event: Event::for_resource(&twin, at),
                resource: twin.clone(),
            },
        ])
        .await
        .expect("recorded");
    assert!(lost.is_empty(), "{lost:?}");
    store.release_stack_lease(fence).await.expect("released");
    let left = operations
        .mark_unhealthy(&alice(), "busy", "other", true, None)
        .await
        .expect("no-op");
    assert_eq!(left.resource_status(), "DELETE_FAILED");
    let shared = deleting.physical_id.clone().expect("id");
    let ambiguous = operations
        .mark_unhealthy(&alice(), "busy", &shared, true, None)
        .await
        .expect_err("ambiguous");
    assert!(matches!(ambiguous, Error::InvalidInput(_)), "{ambiguous:?}");
}

const NESTED_PARENT: &str = r#"
heat_template_version: 2021-04-16
parameters:
  wait: {type: number, default: 0}
resources:
  inner:
    type: OS::Heat::Stack
    properties:
      template: |
        heat_template_version: 2021-04-16
        resources:
          a: {type: OS::Heat::TestResource, properties: {value: first}}
          b: {type: OS::Heat::TestResource, properties: {value: second}}
        outputs:
          a_id: {value: {get_resource: a}}
  reader:
    type: OS::Heat::Value
    properties: {value: {get_attr: [inner, outputs, a_id]}}
  pause:
    type: OS::Heat::TestResource
    properties: {action_wait_secs: {update: {get_param: wait}}, value: {get_param: wait}}
"#;

async fn nested_members_and_nested_stacks_can_be_marked(database: &TestDatabase) {
    let (operations, store) = operations(database).await;
    let parent = create(&operations, "outer", NESTED_PARENT).await;
    let top = resources_of(&operations, &parent).await;
    let nested = nested_stack_of(&operations, &top["inner"]).await;
    let members = resources_of(&operations, &nested).await;

    // A member is addressed inside its nested stack, by name or id.
    let marked = operations
        .mark_unhealthy(
            &alice(),
            &nested.name,
            "a",
            true,
            Some("app says no".into()),
        )
        .await
        .expect("member marked");
    assert_eq!(marked.resource_status(), "CHECK_FAILED");

    let updated = update_existing(&operations, "outer", json!({})).await;
    let top_after = resources_of(&operations, &updated).await;
    assert_eq!(
        top_after["inner"].physical_id, top["inner"].physical_id,
        "the nested stack was updated in place"
    );
    let members_after = resources_of(&operations, &nested).await;
    assert_ne!(
        members_after["a"].physical_id, members["a"].physical_id,
        "a replaced"
    );
    assert_eq!(members_after["a"].resource_status(), "CREATE_COMPLETE");
    assert_eq!(
        members_after["b"].physical_id, members["b"].physical_id,
        "b kept"
    );
    assert_eq!(members_after.len(), 2, "the old a was retired");
    assert_eq!(
        top_after["reader"].attributes["value"],
        json!(members_after["a"].physical_id.clone().expect("id")),
        "the parent's dependent sees the new member"
    );

    // While the root updates, its nested stacks cannot be marked.
    operations
        .update_stack(
            &alice(),
            UpdateStack {
                name_or_id: "outer".into(),
                existing: true,
                parameters: json!({"wait": 1.5}).as_object().cloned().expect("map"),
                ..UpdateStack::default()
            },
        )
        .await
        .expect("update accepted");
    let error = operations
        .mark_unhealthy(&alice(), &nested.id.to_string(), "b", true, None)
        .await
        .expect_err("root busy");
    assert!(matches!(error, Error::Conflict(_)), "{error:?}");
    assert!(
        error.to_string().contains("outer"),
        "names the busy root: {error}"
    );
    settled(&operations, "outer").await;

    // The nested stack resource itself: replaced as a whole.
    operations
        .mark_unhealthy(&alice(), "outer", "inner", true, None)
        .await
        .expect("nested stack marked");
    let replaced = update_existing(&operations, "outer", json!({})).await;
    let top_replaced = resources_of(&operations, &replaced).await;
    assert_ne!(
        top_replaced["inner"].physical_id, top["inner"].physical_id,
        "a new nested stack"
    );
    assert_eq!(top_replaced["inner"].resource_status(), "CREATE_COMPLETE");
    let old_nested = store
        .get_stack(nested.id)
        .await
        .expect("read")
        .expect("row");
    assert_eq!(
        old_nested.stack_status(),
        "DELETE_COMPLETE",
        "the old one is gone"
    );
    let new_nested = nested_stack_of(&operations, &top_replaced["inner"]).await;
    assert_eq!(resources_of(&operations, &new_nested).await.len(), 2);
}

const RESOURCE_GROUP: &str = r#"
heat_template_version: 2021-04-16
parameters:
  count: {type: number, default: 3}
  removed: {type: comma_delimited_list, default: []}
resources:
  group:
    type: OS::Heat::ResourceGroup
    properties:
      count: {get_param: count}
      removal_policies: [{resource_list: {get_param: removed}}]
      resource_def:
        type: OS::Heat::TestResource
        properties: {value: "node-%index%"}
outputs:
  refs: {value: {get_attr: [group, refs]}}
  outputs: {value: {get_attr: [group, attributes, output]}}
  listed: {value: {get_attr: [group, output]}}
  first: {value: {get_attr: [group, resource.0, output]}}
  removed: {value: {get_attr: [group, removed_rsrc_list]}}
"#;

async fn outputs_of(
    operations: &StackOperations,
    stack: &Stack,
) -> std::collections::BTreeMap<String, Value> {
    operations
        .outputs(stack)
        .await
        .expect("outputs")
        .into_iter()
        .map(|output| (output.key, output.value.unwrap_or(Value::Null)))
        .collect()
}

async fn a_resource_group_replaces_only_its_failed_members(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    let stack = create(&operations, "grouped", RESOURCE_GROUP).await;
    let group = resources_of(&operations, &stack)
        .await
        .remove("group")
        .expect("group");
    let nested = nested_stack_of(&operations, &group).await;
    assert_eq!(nested.parent_resource.as_deref(), Some("group"));
    let members = resources_of(&operations, &nested).await;
    assert_eq!(members.keys().collect::<Vec<_>>(), ["0", "1", "2"]);
    let outputs = outputs_of(&operations, &stack).await;
    assert_eq!(
        outputs["outputs"],
        json!({"0": "node-0", "1": "node-1", "2": "node-2"})
    );
    assert_eq!(outputs["listed"], json!(["node-0", "node-1", "node-2"]));
    assert_eq!(outputs["first"], json!("node-0"));
    let ids = |members: &std::collections::BTreeMap<String, Resource>, name: &str| {
        members[name].physical_id.clone().expect("id")
    };
    assert_eq!(
        outputs["refs"],
        json!([ids(&members, "0"), ids(&members, "1"), ids(&members, "2")])
    );

    operations
        .mark_unhealthy(&alice(), &nested.id.to_string(), "1", true, None)
        .await
        .expect("member marked");
    let updated = update_existing(&operations, "grouped", json!({})).await;
    let after = resources_of(&operations, &nested).await;
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        ["0", "1", "2"],
        "names kept"
    );
    assert_eq!(ids(&after, "0"), ids(&members, "0"), "healthy members kept");
    assert_eq!(ids(&after, "2"), ids(&members, "2"), "healthy members kept");
    assert_ne!(
        ids(&after, "1"),
        ids(&members, "1"),
        "the failed member replaced"
    );
    assert_eq!(after["1"].resource_status(), "CREATE_COMPLETE");
    assert_eq!(
        after["0"].updated_at, members["0"].updated_at,
        "not even updated"
    );
    let outputs = outputs_of(&operations, &updated).await;
    assert_eq!(
        outputs["refs"][1],
        json!(ids(&after, "1")),
        "the group's refs follow"
    );

    // A removal policy takes "0" out for good; the count is kept with "3".
    let removed = update_existing(&operations, "grouped", json!({"removed": "0"})).await;
    let after_removal = resources_of(&operations, &nested).await;
    assert_eq!(after_removal.keys().collect::<Vec<_>>(), ["1", "2", "3"]);
    assert_eq!(
        outputs_of(&operations, &removed).await["removed"],
        json!(["0"])
    );
    // Scaling down drops the highest index.
    update_existing(&operations, "grouped", json!({"count": 2})).await;
    let smaller = resources_of(&operations, &nested).await;
    assert_eq!(smaller.keys().collect::<Vec<_>>(), ["1", "2"]);
    assert_eq!(ids(&smaller, "1"), ids(&after, "1"));
}

const SCALING: &str = r#"
heat_template_version: 2021-04-16
parameters:
  desired: {type: number, default: 4}
  member_wait: {type: number, default: 0}
resources:
  asg:
    type: OS::Heat::AutoScalingGroup
    properties:
      min_size: 1
      max_size: 5
      desired_capacity: {get_param: desired}
      cooldown: 0
      rolling_updates: {min_in_service: 1}
      resource:
        type: OS::Heat::TestResource
        properties: {value: member, action_wait_secs: {create: {get_param: member_wait}}}
  scale_out:
    type: OS::Heat::ScalingPolicy
    properties:
      auto_scaling_group_id: {get_resource: asg}
      adjustment_type: change_in_capacity
      scaling_adjustment: 2
  scale_in:
    type: OS::Heat::ScalingPolicy
    properties:
      auto_scaling_group_id: {get_resource: asg}
      adjustment_type: change_in_capacity
      scaling_adjustment: -10
  exactly_three:
    type: OS::Heat::ScalingPolicy
    properties:
      auto_scaling_group_id: {get_resource: asg}
      adjustment_type: exact_capacity
      scaling_adjustment: 3
      cooldown: 600
  tenth:
    type: OS::Heat::ScalingPolicy
    properties:
      auto_scaling_group_id: {get_resource: asg}
      adjustment_type: percent_change_in_capacity
      scaling_adjustment: 10
outputs:
  size: {value: {get_attr: [asg, current_size]}}
  refs: {value: {get_attr: [asg, refs]}}
  values: {value: {get_attr: [asg, outputs_list, output]}}
  url: {value: {get_attr: [scale_out, signal_url]}}
"#;

async fn an_autoscaling_group_removes_failed_members_first_and_keeps_names(
    database: &TestDatabase,
) {
    let (operations, _) = operations(database).await;
    let stack = create(&operations, "scaled", SCALING).await;
    let group = resources_of(&operations, &stack)
        .await
        .remove("asg")
        .expect("asg");
    let nested = nested_stack_of(&operations, &group).await;
    let members = resources_of(&operations, &nested).await;
    assert_eq!(members.keys().collect::<Vec<_>>(), ["0", "1", "2", "3"]);
    let outputs = outputs_of(&operations, &stack).await;
    assert_eq!(outputs["size"], json!(4));
    assert_eq!(
        outputs["values"],
        json!(["member", "member", "member", "member"])
    );
    assert_eq!(
        outputs["url"],
        json!(format!(
            "/orchestration/v1/project-a/stacks/scaled/{}/resources/scale_out/signal",
            stack.id
        ))
    );

    // "2" is failed: scaling down to 3 removes it rather than the oldest.
    operations
        .mark_unhealthy(&alice(), &nested.name, "2", true, None)
        .await
        .expect("marked");
    update_existing(&operations, "scaled", json!({"desired": 3})).await;
    let after = resources_of(&operations, &nested).await;
    assert_eq!(after.keys().collect::<Vec<_>>(), ["0", "1", "3"]);
    for name in ["0", "1", "3"] {
        assert_eq!(
            after[name].physical_id, members[name].physical_id,
            "{name} kept"
        );
    }

    // A failed member that stays is replaced under its name.
    operations
        .mark_unhealthy(&alice(), &nested.name, "1", true, None)
        .await
        .expect("marked");
    let updated = update_existing(&operations, "scaled", json!({})).await;
    let replaced = resources_of(&operations, &nested).await;
    assert_eq!(
        replaced.keys().collect::<Vec<_>>(),
        ["0", "1", "3"],
        "names continuous"
    );
    assert_ne!(
        replaced["1"].physical_id, members["1"].physical_id,
        "1 replaced"
    );
    assert_eq!(replaced["1"].resource_status(), "CREATE_COMPLETE");
    assert_eq!(replaced["0"].physical_id, members["0"].physical_id);
    assert_eq!(outputs_of(&operations, &updated).await["size"], json!(3));

    // Without a failed member, the oldest leaves.
    update_existing(&operations, "scaled", json!({"desired": 2})).await;
    let oldest_gone = resources_of(&operations, &nested).await;
    assert_eq!(
        oldest_gone.keys().collect::<Vec<_>>(),
        ["1", "3"],
        "0 was the oldest"
    );
}

/// Polls until the group is no longer UPDATE_IN_PROGRESS; returns it.
async fn group_settled(operations: &StackOperations, stack: &Stack) -> Resource {
    let deadline = Instant::now() + SETTLE;
    loop {
        let group = resources_of(operations, stack)
            .await
            .remove("asg")
            .expect("asg");
        if group.status != ActionStatus::InProgress {
            return group;
        }
        assert!(
            Instant::now() < deadline,
            "group still {}",
            group.resource_status()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn signal(
    operations: &Arc<StackOperations>,
    policy: &str,
    details: Value,
) -> ember_engine::stacks::SignalOutcome {
    operations
        .signal_resource(&alice(), "signalled", policy, details)
        .await
        .unwrap_or_else(|error| panic!("signal {policy}: {error}"))
}

async fn scaling_policies_resize_the_group_within_bounds_and_cooldown(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    let stack = create(
        &operations,
        "signalled",
        &SCALING.replace("default: 4", "default: 2"),
    )
    .await;
    let group = resources_of(&operations, &stack)
        .await
        .remove("asg")
        .expect("asg");
    let nested = nested_stack_of(&operations, &group).await;

    let out = signal(&operations, "scale_out", json!({})).await;
    let scaling = out.scaling.expect("scaling started");
    assert_eq!((scaling.from_capacity, scaling.to_capacity), (2, 4));
    let group = group_settled(&operations, &stack).await;
    assert_eq!(
        group.resource_status(),
        "UPDATE_COMPLETE",
        "{}",
        group.status_reason
    );
    assert_eq!(group.attributes["current_size"], json!(4));
    assert_eq!(
        resources_of(&operations, &nested)
            .await
            .keys()
            .collect::<Vec<_>>(),
        ["0", "1", "2", "3"]
    );
    assert_eq!(
        nested.id.to_string(),
        group.physical_id.clone().expect("id"),
        "same members stack"
    );

    // Clamped to max_size, then nothing left to add.
    let clamped = signal(&operations, "scale_out", json!(null)).await;
    assert_eq!(clamped.scaling.map(|scaling| scaling.to_capacity), Some(5));
    group_settled(&operations, &stack).await;
    let at_max = signal(&operations, "scale_out", json!({"current": "alarm"})).await;
    assert_eq!(at_max.scaling, None);
    assert!(
        at_max
            .message
            .starts_with("signal ignored: group \"asg\" stays at 5"),
        "{}",
        at_max.message
    );

    // An alarm that is not in alarm state changes nothing.
    let ok = signal(&operations, "scale_in", json!({"current": "ok"})).await;
    assert_eq!(ok.scaling, None);
    assert!(
        ok.message.contains("alarm state is \"ok\""),
        "{}",
        ok.message
    );

    // Clamped to min_size.
    let shrunk = signal(&operations, "scale_in", json!({})).await;
    assert_eq!(shrunk.scaling.map(|scaling| scaling.to_capacity), Some(1));
    group_settled(&operations, &stack).await;
    // 10% of 1 rounds up to one member.
    let tenth = signal(&operations, "tenth", json!({})).await;
    assert_eq!(tenth.scaling.map(|scaling| scaling.to_capacity), Some(2));
    group_settled(&operations, &stack).await;

    // A policy's cooldown ignores its next signal, with an event.
    let exact = signal(&operations, "exactly_three", json!({})).await;
    assert_eq!(exact.scaling.map(|scaling| scaling.to_capacity), Some(3));
    group_settled(&operations, &stack).await;
    let cooling = signal(&operations, "exactly_three", json!({})).await;
    assert_eq!(cooling.scaling, None);
    assert!(
        cooling
            .message
            .contains("policy \"exactly_three\" is in cooldown"),
        "{}",
        cooling.message
    );
    let events = events_of(&operations, &stack).await;
    assert!(
        events
            .iter()
            .any(|event| event.resource_name == "exactly_three"
                && event
                    .reason
                    .starts_with("signal ignored: policy \"exactly_three\" is in cooldown")),
        "the ignored signal left an event"
    );
    assert_eq!(
        group_settled(&operations, &stack).await.attributes["current_size"],
        json!(3)
    );

    // The capacity a signal reached survives an update that does not
    // change desired_capacity.
    update_existing(&operations, "signalled", json!({})).await;
    let group = resources_of(&operations, &stack)
        .await
        .remove("asg")
        .expect("asg");
    assert_eq!(group.attributes["current_size"], json!(3));

    // Only scaling policies take signals.
    let error = operations
        .signal_resource(&alice(), "signalled", "asg", json!({}))
        .await
        .expect_err("not a policy");
    assert!(matches!(error, Error::InvalidInput(_)), "{error:?}");
    let error = operations
        .signal_resource(&alice(), "signalled", "nope", json!({}))
        .await
        .expect_err("unknown");
    assert!(matches!(error, Error::NotFound(_)), "{error:?}");
}

/// A policy whose create never ran (its group failed first, and the stack
/// with it) takes no signal yet: a 409 saying so, not a 400 about its
/// settings.
async fn a_policy_never_created_refuses_signals_until_it_is(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    let template = SCALING.replace(
        "properties: {value: member,",
        "properties: {fail: true, value: member,",
    );
    operations
        .create_stack(
            &alice(),
            CreateStack {
                name: "broken".into(),
                template,
                disable_rollback: true,
                ..CreateStack::default()
            },
        )
        .await
        .expect("create accepted");
    settled_as(&operations, "broken", "CREATE_FAILED").await;
    let error = operations
        .signal_resource(&alice(), "broken", "scale_out", json!({}))
        .await
        .expect_err("never created");
    assert!(matches!(error, Error::Conflict(_)), "{error:?}");
    assert!(
        error.to_string().contains(
            "scaling policy \"scale_out\" is INIT_COMPLETE: it takes signals once created"
        ),
        "{error}"
    );
}

async fn a_signal_during_a_scaling_or_an_update_is_refused_with_an_event(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    let template = SCALING.replace("default: 4", "default: 1").replace(
        "member_wait: {type: number, default: 0}",
        "member_wait: {type: number, default: 1}",
    );
    let stack = create(&operations, "signalled", &template).await;

    let out = signal(&operations, "scale_out", json!({})).await;
    assert!(out.scaling.is_some());
    // The scaling holds the stack lease until its members exist.
    let error = operations
        .signal_resource(&alice(), "signalled", "scale_out", json!({}))
        .await
        .expect_err("busy");
    assert!(matches!(error, Error::Conflict(_)), "{error:?}");
    let events = events_of(&operations, &stack).await;
    assert!(
        events.iter().any(|event| event.resource_name == "scale_out"
            && event
                .reason
                .starts_with("signal ignored: stack \"signalled")),
        "an event of the signalled policy says the signal was ignored"
    );
    let group = group_settled(&operations, &stack).await;
    assert_eq!(
        group.attributes["current_size"],
        json!(3),
        "only the first signal scaled"
    );

    // While the stack updates, the gate refuses signals.
    operations
        .update_stack(
            &alice(),
            UpdateStack {
                name_or_id: "signalled".into(),
                existing: true,
                parameters: json!({"desired": 4}).as_object().cloned().expect("map"),
                ..UpdateStack::default()
            },
        )
        .await
        .expect("update accepted");
    let error = operations
        .signal_resource(&alice(), "signalled", "scale_in", json!({}))
        .await
        .expect_err("updating");
    assert!(error.to_string().contains("UPDATE_IN_PROGRESS"), "{error}");
    let events = events_of(&operations, &stack).await;
    assert!(
        events.iter().any(|event| event
            .reason
            .starts_with("signal ignored: stack \"signalled\" is UPDATE_IN_PROGRESS")),
        "refused by the gate, with an event"
    );
    let updated = settled_as(&operations, "signalled", "UPDATE_COMPLETE").await;
    let group = resources_of(&operations, &updated)
        .await
        .remove("asg")
        .expect("asg");
    assert_eq!(group.attributes["current_size"], json!(4));
}

async fn a_locked_stack_refuses_marks_and_signals_with_an_event(database: &TestDatabase) {
    let (operations, _) = operations(database).await;
    let stack = create(&operations, "signalled", SCALING).await;
    let group = resources_of(&operations, &stack)
        .await
        .remove("asg")
        .expect("asg");
    let nested = nested_stack_of(&operations, &group).await;
    operations
        .lock_stack(
            &alice(),
            "signalled",
            LockLevel::Stacks,
            Some("maintenance".into()),
        )
        .await
        .expect("lock accepted");
    settled_as(&operations, "signalled", "LOCK_COMPLETE").await;

    let error = operations
        .mark_unhealthy(&alice(), "signalled", "asg", true, None)
        .await
        .expect_err("locked");
    assert!(matches!(error, Error::Conflict(_)), "{error:?}");
    assert!(error.to_string().contains("is locked"), "{error}");
    let error = operations
        .mark_unhealthy(&alice(), &nested.id.to_string(), "0", true, None)
        .await
        .expect_err("a member of a locked stack");
    assert!(matches!(error, Error::Conflict(_)), "{error:?}");
    assert_ne!(
        resources_of(&operations, &nested).await["0"].resource_status(),
        "CHECK_FAILED",
        "nothing changed"
    );

    let error = operations
        .signal_resource(&alice(), "signalled", "scale_out", json!({}))
        .await
        .expect_err("locked");
    assert!(matches!(error, Error::Conflict(_)), "{error:?}");
    let events = events_of(&operations, &stack).await;
    assert!(
        events.iter().any(|event| event.resource_name == "scale_out"
            && event
                .reason
                .starts_with("signal ignored: stack \"signalled\" is locked")),
        "the refused signal left an event on the policy"
    );
    let group = resources_of(&operations, &stack)
        .await
        .remove("asg")
        .expect("asg");
    assert_eq!(group.attributes["current_size"], json!(4), "no scaling");

    operations
        .unlock_stack(&alice(), "signalled")
        .await
        .expect("unlock accepted");
    settled(&operations, "signalled").await;
    let out = signal(&operations, "scale_out", json!({})).await;
    assert_eq!(out.scaling.map(|scaling| scaling.to_capacity), Some(5));
    group_settled(&operations, &stack).await;
}

async fn the_health_store_call_writes_row_event_and_lease_release_at_once(database: &TestDatabase) {
    let (operations, store) = operations(database).await;
    let stack = create(&operations, "stored", REPLACED).await;
    let engine = Uuid::new_v4();
    let now = ember_runtime::time::now();
    let later = now + chrono::Duration::seconds(30);
    let take = |engine: Uuid| {
        let store = store.clone();
        async move {
            store
                .take_stack_lease(&LeaseTake::new(stack.id, engine, "UPDATE", now, later))
                .await
                .expect("lease")
        }
    };
    let fence = take(engine).await.expect("free");
    let mut resource = resources_of(&operations, &stack)
        .await
        .remove("bystander")
        .expect("row");
    resource.action = StackAction::Check;
    resource.status = ActionStatus::Failed;
    resource.status_reason = "stored".into();
    resource.updated_at = ember_runtime::time::now();
    let event = Event::for_resource(&resource, resource.updated_at);
    store
        .mark_resource_health(&resource, &event, fence)
        .await
        .expect("written");
    let row = resources_of(&operations, &stack)
        .await
        .remove("bystander")
        .expect("row");
    assert_eq!(
        (row.resource_status().as_str(), row.status_reason.as_str()),
        ("CHECK_FAILED", "stored")
    );
    assert_eq!(
        row.physical_id, resource.physical_id,
        "only the state changed"
    );
    assert_eq!(
        row.updated_at.timestamp_micros(),
        resource.updated_at.timestamp_micros()
    );
    let events = events_of(&operations, &stack).await;
    assert_eq!(events.last().map(|event| event.id), Some(event.id));
    let other = Uuid::new_v4();
    let other_fence = take(other)
        .await
        .expect("the lease was released in the same transaction");

    // A stale fence (the lease moved on): refused, nothing written.
    let count = events_of(&operations, &stack).await.len();
    let error = store
        .mark_resource_health(&resource, &Event::for_resource(&resource, now), fence)
        .await
        .expect_err("stale");
    assert!(matches!(error, Error::LeaseLost(_)), "{error:?}");
    assert_eq!(events_of(&operations, &stack).await.len(), count);

    // A row that is gone: NotFound, nothing recorded, the lease released.
    let mut gone = resource.clone();
    gone.id = Uuid::new_v4();
    let error = store
        .mark_resource_health(&gone, &Event::for_resource(&gone, now), other_fence)
        .await
        .expect_err("gone");
    assert!(matches!(error, Error::NotFound(_)), "{error:?}");
    assert_eq!(events_of(&operations, &stack).await.len(), count);
    let fence = take(engine).await.expect("released");

    // The end of a scaling: the whole row, its event and the release.
    let mut scaled = resource.clone();
    scaled.action = StackAction::Update;
    scaled.status = ActionStatus::Complete;
    scaled.attributes = json!({"current_size": 7});
    scaled.data = json!({"capacity": 7});
    let event = Event::for_resource(&scaled, ember_runtime::time::now());
    store
        .finish_scaling(&scaled, &event, fence)
        .await
        .expect("written");
    let row = resources_of(&operations, &stack)
        .await
        .remove("bystander")
        .expect("row");
    assert_eq!(row.resource_status(), "UPDATE_COMPLETE");
    assert_eq!(
        (row.attributes.clone(), row.data.clone()),
        (scaled.attributes, scaled.data)
    );
    let events = events_of(&operations, &stack).await;
    assert_eq!(events.last().map(|event| event.id), Some(event.id));
    assert!(take(other).await.is_some(), "released with the final state");
}

ember_runtime::store_suite!(
    a_marked_resource_is_replaced_by_the_next_update_and_dependents_follow,
    marks_are_refused_while_the_stack_is_busy_and_change_nothing,
    nested_members_and_nested_stacks_can_be_marked,
    a_resource_group_replaces_only_its_failed_members,
    an_autoscaling_group_removes_failed_members_first_and_keeps_names,
    scaling_policies_resize_the_group_within_bounds_and_cooldown,
    a_signal_during_a_scaling_or_an_update_is_refused_with_an_event,
    a_policy_never_created_refuses_signals_until_it_is,
    a_locked_stack_refuses_marks_and_signals_with_an_event,
    the_health_store_call_writes_row_event_and_lease_release_at_once,
);
