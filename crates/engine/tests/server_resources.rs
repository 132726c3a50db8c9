//! `OS::Nova::Server` stack resources backed by the instance service, on
//! SQLite and PostgreSQL: create waits for ACTIVE, suspend and resume power
//! the instance, name/metadata change in place while a new flavor replaces
//! it, delete removes it, and a locked instance stops a member's delete.

mod stack_support;

use std::sync::Arc;
use std::time::Duration;

use ember_engine::domain::instance::InstanceStatus;
use ember_engine::domain::{Stack, StackWideAction};
use ember_engine::instances::InstanceService;
use ember_engine::stacks::{CreateStack, StackOperations, UpdateStack};
use ember_runtime::Identity;
use ember_runtime::database::testing::TestDatabase;
use serde_json::json;
use uuid::Uuid;

async fn engine(database: &TestDatabase) -> (Arc<StackOperations>, Arc<InstanceService>) {
    let engine =
        stack_support::simulated_compute_engine(database, Duration::from_millis(5), "doomed").await;
    (engine.operations, engine.instances)
}

fn demo() -> Identity {
    Identity::new("demo", "demo", vec!["member".to_owned()])
}

async fn settled(operations: &StackOperations, name_or_id: &str) -> Stack {
    stack_support::settled(operations, &demo(), name_or_id, Duration::from_secs(20)).await
}

const SERVER: &str = r#"
heat_template_version: 2021-04-16
parameters:
  flavor: {type: string, default: m1.small}
  label: {type: string, default: one}
resources:
  web:
    type: OS::Nova::Server
    properties:
      name: web-1
      flavor: {get_param: flavor}
      image: debian-12
      metadata: {label: {get_param: label}}
      security_groups: [default]
outputs:
  id: {value: {get_attr: [web, id]}}
  status: {value: {get_attr: [web, status]}}
"#;

async fn instance_id(operations: &StackOperations, stack: &Stack) -> Uuid {
    let id = operations
        .output(stack, "id")
        .await
        .expect("output")
        .value
        .expect("resolved");
    Uuid::parse_str(id.as_str().expect("string")).expect("uuid")
}

async fn a_server_resource_manages_an_instance_through_its_life(database: &TestDatabase) {
    let (operations, instances) = engine(database).await;
    let create = CreateStack {
        name: "servers".into(),
        template: SERVER.into(),
        disable_rollback: true,
        ..CreateStack::default()
    };
    operations
        .create_stack(&demo(), create)
        .await
        .expect("create");
    let stack = settled(&operations, "servers").await;
    assert_eq!(
        stack.stack_status(),
        "CREATE_COMPLETE",
        "{}",
        stack.status_reason
    );
    let first = instance_id(&operations, &stack).await;
    let instance = instances.get(&demo(), first).await.expect("instance");
    assert_eq!(
        (instance.status, instance.name.as_str()),
        (InstanceStatus::Active, "web-1")
    );
    assert_eq!(instance.metadata["label"], "one");
    assert_eq!(
        operations
            .output(&stack, "status")
            .await
            .expect("output")
            .value,
        Ok(json!("ACTIVE"))
    );

    operations
        .run_stack_wide_action(&demo(), "servers", StackWideAction::Suspend)
        .await
        .expect("suspend");
    assert_eq!(
        settled(&operations, "servers").await.stack_status(),
        "SUSPEND_COMPLETE"
    );
    assert_eq!(
        instances
            .get(&demo(), first)
            .await
            .expect("instance")
            .status,
        InstanceStatus::Stopped
    );
    operations
        .run_stack_wide_action(&demo(), "servers", StackWideAction::Resume)
        .await
        .expect("resume");
    assert_eq!(
        settled(&operations, "servers").await.stack_status(),
        "RESUME_COMPLETE"
    );
    assert_eq!(
        instances
            .get(&demo(), first)
            .await
            .expect("instance")
            .status,
        InstanceStatus::Active
    );

    let mut relabel = UpdateStack {
        name_or_id: "servers".into(),
        existing: true,
        ..UpdateStack::default()
    };
    relabel.parameters.insert("label".into(), json!("two"));
    operations
        .update_stack(&demo(), relabel)
        .await
        .expect("update");
    let stack = settled(&operations, "servers").await;
    assert_eq!(
        stack.stack_status(),
        "UPDATE_COMPLETE",
        "{}",
        stack.status_reason
    );
    assert_eq!(
        instance_id(&operations, &stack).await,
        first,
        "metadata changes in place"
    );
    assert_eq!(
        instances
            .get(&demo(), first)
            .await
            .expect("instance")
            .metadata["label"],
        "two"
    );

    let mut resize = UpdateStack {
        name_or_id: "servers".into(),
        existing: true,
        ..UpdateStack::default()
    };
    resize.parameters.insert("flavor".into(), json!("m1.large"));
    operations
        .update_stack(&demo(), resize)
        .await
        .expect("update");
    let stack = settled(&operations, "servers").await;
    assert_eq!(
        stack.stack_status(),
        "UPDATE_COMPLETE",
        "{}",
        stack.status_reason
    );
    let second = instance_id(&operations, &stack).await;
    assert_ne!(second, first, "a new flavor replaces the instance");
    assert!(
        matches!(
            instances.get(&demo(), first).await,
            Err(ember_engine::Error::NotFound(_))
        ),
        "the replaced instance is gone (404)"
    );

    // A member's lock on the instance stops the stack delete, naming the lock.
    instances
        .lock(&demo(), second, Some("maintenance".into()))
        .await
        .expect("locked");
    operations
        .delete_stack(&demo(), "servers")
        .await
        .expect("delete accepted");
    let stack = settled(&operations, "servers").await;
    assert_eq!(stack.stack_status(), "DELETE_FAILED");
    assert!(
        stack.status_reason.contains("locked"),
        "{}",
        stack.status_reason
    );
    instances.unlock(&demo(), second).await.expect("unlocked");
    operations
        .delete_stack(&demo(), "servers")
        .await
        .expect("delete accepted");
    let stack = settled(&operations, &stack.id.to_string()).await;
    assert_eq!(
        stack.stack_status(),
        "DELETE_COMPLETE",
        "{}",
        stack.status_reason
    );
    assert!(
        matches!(
            instances.get(&demo(), second).await,
            Err(ember_engine::Error::NotFound(_))
        ),
        "the deleted stack's instance is gone (404)"
    );
}

async fn a_server_that_fails_to_build_fails_the_stack(database: &TestDatabase) {
    let (operations, _) = engine(database).await;
    let template = SERVER.replace("name: web-1", "name: doomed-1");
    let create = CreateStack {
        name: "doomed".into(),
        template,
        disable_rollback: true,
        ..CreateStack::default()
    };
    operations
        .create_stack(&demo(), create)
        .await
        .expect("create");
    let stack = settled(&operations, "doomed").await;
    assert_eq!(stack.stack_status(), "CREATE_FAILED");
    assert!(
        stack.status_reason.contains("went into ERROR"),
        "{}",
        stack.status_reason
    );
}

ember_runtime::store_suite!(
    a_server_resource_manages_an_instance_through_its_life,
    a_server_that_fails_to_build_fails_the_stack,
);
