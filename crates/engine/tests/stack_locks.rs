//! Maintenance lock and unlock of stacks (spec heat-lock-stack) on SQLite
//! and PostgreSQL: the allowed-action table, nested stacks locked with their
//! root, instances locked at level `all` (and only those the stack locked
//! unlocked again), a failing resource leaving LOCK_FAILED that unlock
//! cleans up, and the admin rule.

mod stack_support;

use stack_support::assert_status;

use std::sync::Arc;
use std::time::Duration;

use ember_engine::Error;
use ember_engine::domain::instance::{InstanceStatus, NewInstance};
use ember_engine::domain::{LockLevel, Stack, StackWideAction};
use ember_engine::instances::InstanceService;
use ember_engine::stacks::{
    CreateStack, StackOperation as Operation, StackOperations, UpdateStack,
};
use ember_engine::store::StackStore;
use ember_runtime::Identity;
use ember_runtime::database::testing::TestDatabase;
use serde_json::json;
use uuid::Uuid;

async fn engine(
    database: &TestDatabase,
) -> (
    Arc<StackOperations>,
    Arc<InstanceService>,
    Arc<dyn StackStore>,
) {
    let engine =
        stack_support::simulated_compute_engine(database, Duration::from_millis(2), "").await;
    (engine.operations, engine.instances, engine.store)
}

fn owner() -> Identity {
    Identity::new("demo", "demo", vec!["member".to_owned()])
}

fn admin() -> Identity {
    Identity::new(
        "root",
        "demo",
        vec!["admin".to_owned(), "member".to_owned()],
    )
}

async fn settled(operations: &StackOperations, name_or_id: &str) -> Stack {
    stack_support::settled(operations, &owner(), name_or_id, Duration::from_secs(20)).await
}

/// [`settled`], and ended `status`.
async fn settled_as(operations: &StackOperations, name_or_id: &str, status: &str) -> Stack {
    let stack = settled(operations, name_or_id).await;
    assert_status(&stack, status);
    stack
}

const CHILD: &str = "heat_template_version: 2021-04-16\nresources:\n  inner: {type: OS::Heat::TestResource}\n  server: {type: OS::Nova::Server, properties: {flavor: m1.small, image: debian}}\n";

const ROOT: &str = r#"
heat_template_version: 2021-04-16
parameters:
  fail_lock: {type: boolean, default: false}
resources:
  web: {type: OS::Nova::Server, properties: {flavor: m1.small, image: debian, name: web-1}}
  flaky: {type: OS::Heat::TestResource, properties: {fail_lock: {get_param: fail_lock}}}
  tier: {type: child.yaml}
"#;

/// Starts creating `name` from `template` (no rollback), as `shape` sets
/// its files and parameters.
async fn start_create(
    operations: &StackOperations,
    name: &str,
    template: &str,
    shape: impl FnOnce(&mut CreateStack),
) {
    let mut create = CreateStack {
        name: name.to_owned(),
        template: template.to_owned(),
        disable_rollback: true,
        ..CreateStack::default()
    };
    shape(&mut create);
    operations
        .create_stack(&owner(), create)
        .await
        .expect("create");
}

fn with_child(create: &mut CreateStack) {
    create.files.insert("child.yaml".into(), CHILD.into());
}

async fn create_root(operations: &StackOperations, name: &str) -> Stack {
    start_create(operations, name, ROOT, with_child).await;
    settled_as(operations, name, "CREATE_COMPLETE").await
}

async fn server_ids(operations: &StackOperations, stack: &Stack) -> Vec<Uuid> {
    operations
        .resources(stack, 1)
        .await
        .expect("resources")
        .into_iter()
        .filter(|view| view.resource.type_name == "OS::Nova::Server")
        .map(|view| {
            Uuid::parse_str(view.resource.physical_id.as_deref().expect("id")).expect("uuid")
        })
        .collect()
}
/// Asserts each of `stack`'s servers' instances is `locked` (or not),
/// saying `why` and which instance when one is not.
async fn assert_servers_locked(
    operations: &StackOperations,
    instances: &InstanceService,
    stack: &Stack,
    locked: bool,
    why: &str,
) {
    for id in server_ids(operations, stack).await {
        let instance = instances.get(&owner(), id).await.expect("instance");
        assert_eq!(instance.is_locked(), locked, "{why}: instance {id}");
    }
}

async fn a_locked_stack_allows_only_lock_and_unlock_and_nested_stacks_follow(
    database: &TestDatabase,
) {
    let (operations, instances, store) = engine(database).await;
    let stack = create_root(&operations, "locked").await;
    operations
        .lock_stack(
            &owner(),
            "locked",
            LockLevel::Stacks,
            Some("db maintenance".into()),
        )
        .await
        .expect("lock accepted");
    let locked = settled_as(&operations, "locked", "LOCK_COMPLETE").await;
    let lock = locked.maintenance_lock.clone().expect("lock recorded");
    assert_eq!(
        (
            lock.level,
            lock.locked_by_user.as_str(),
            lock.locked_by_admin
        ),
        (LockLevel::Stacks, "demo", false)
    );
    assert_eq!(lock.reason.as_deref(), Some("db maintenance"));
    let children = store.list_child_stacks(stack.id).await.expect("children");
    assert!(
        children
            .iter()
            .all(|child| child.stack_status() == "LOCK_COMPLETE"),
        "nested stacks lock with the root"
    );
    assert_servers_locked(
        &operations,
        &instances,
        &stack,
        false,
        "level stacks leaves instances alone",
    )
    .await;

    // Everything but lock and unlock is refused, naming the lock.
    let error = operations
        .delete_stack(&owner(), "locked")
        .await
        .expect_err("locked");
    assert!(matches!(error, Error::Conflict(_)), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("is locked (level stacks, by owner \"demo\" at"),
        "{error}"
    );
    assert!(error.to_string().contains("db maintenance"), "{error}");
    let update = UpdateStack {
        name_or_id: "locked".into(),
        existing: true,
        ..UpdateStack::default()
    };
    assert!(matches!(
        operations.update_stack(&owner(), update).await,
        Err(Error::Conflict(_))
    ));
    for action in [StackWideAction::Suspend, StackWideAction::Check] {
        assert!(matches!(
            operations
                .run_stack_wide_action(&owner(), "locked", action)
                .await,
            Err(Error::Conflict(_))
        ));
    }
    assert!(matches!(
        operations.abandon_stack(&owner(), "locked").await,
        Err(Error::Conflict(_))
    ));
    let child = &children[0];
    let error = operations
        .delete_stack(&owner(), &child.id.to_string())
        .await
        .expect_err("a nested stack addressed directly is locked too");
    assert!(matches!(error, Error::Conflict(_)), "{error:?}");
    let check = operations
        .check_operation(&owner(), "locked", Operation::Delete)
        .await
        .expect("check");
    assert!(!check.allowed() && check.lock.is_some(), "{check:?}");
    let check = operations
        .check_operation(&owner(), "locked", Operation::Unlock)
        .await
        .expect("check");
    assert!(check.allowed(), "{check:?}");

    // Lock again to change the level: instances now lock too.
    operations
        .lock_stack(&owner(), "locked", LockLevel::All, None)
        .await
        .expect("relock");
    settled_as(&operations, "locked", "LOCK_COMPLETE").await;
    assert_servers_locked(
        &operations,
        &instances,
        &stack,
        true,
        "level all locks every instance",
    )
    .await;

    operations
        .unlock_stack(&owner(), "locked")
        .await
        .expect("unlock accepted");
    let unlocked = settled_as(&operations, "locked", "UNLOCK_COMPLETE").await;
    assert!(unlocked.maintenance_lock.is_none());
    assert_servers_locked(
        &operations,
        &instances,
        &stack,
        false,
        "unlock lifts the stack's instance locks",
    )
    .await;
    let error = operations
        .unlock_stack(&owner(), "locked")
        .await
        .expect_err("not locked");
    assert!(error.to_string().contains("is not locked"), "{error}");
    operations
        .delete_stack(&owner(), "locked")
        .await
        .expect("delete allowed again");
}

async fn unlock_lifts_only_the_instance_locks_the_stack_placed(database: &TestDatabase) {
    let (operations, instances, _) = engine(database).await;
    let stack = create_root(&operations, "mine").await;
    let ids = server_ids(&operations, &stack).await;
    // The user locked one instance on their own before the stack lock.
    instances
        .lock(&owner(), ids[0], Some("my own".into()))
        .await
        .expect("own lock");
    operations
        .lock_stack(&owner(), "mine", LockLevel::All, None)
        .await
        .expect("lock");
    settled_as(&operations, "mine", "LOCK_COMPLETE").await;
    operations
        .unlock_stack(&owner(), "mine")
        .await
        .expect("unlock");
    settled_as(&operations, "mine", "UNLOCK_COMPLETE").await;
    let own = instances.get(&owner(), ids[0]).await.expect("instance");
    assert!(own.is_locked(), "the user's own lock stays");
    assert!(
        !instances
            .get(&owner(), ids[1])
            .await
            .expect("instance")
            .is_locked()
    );
}

async fn a_failing_resource_leaves_lock_failed_and_unlock_cleans_up(database: &TestDatabase) {
    let (operations, instances, _) = engine(database).await;
    start_create(&operations, "dirty", ROOT, |create| {
        with_child(create);
        create.parameters.insert("fail_lock".into(), json!(true));
    })
    .await;
    let stack = settled(&operations, "dirty").await;
    operations
        .lock_stack(&owner(), "dirty", LockLevel::All, None)
        .await
        .expect("lock");
    let failed = settled(&operations, "dirty").await;
    assert_eq!(failed.stack_status(), "LOCK_FAILED");
    assert!(
        failed
            .status_reason
            .contains("Test Resource failed to lock"),
        "{}",
        failed.status_reason
    );
    let error = operations
        .update_stack(
            &owner(),
            UpdateStack {
                name_or_id: "dirty".into(),
                existing: true,
                ..UpdateStack::default()
            },
        )
        .await
        .expect_err("LOCK_FAILED allows only unlock, delete, lock");
    assert!(error.to_string().contains("LOCK_FAILED"), "{error}");
    operations
        .unlock_stack(&owner(), "dirty")
        .await
        .expect("unlock from LOCK_FAILED");
    settled_as(&operations, "dirty", "UNLOCK_COMPLETE").await;
    assert_servers_locked(&operations, &instances, &stack, false, "unlocked").await;
}

async fn an_admin_lock_is_lifted_only_by_an_admin(database: &TestDatabase) {
    let (operations, instances, _) = engine(database).await;
    let stack = create_root(&operations, "admin-locked").await;
    operations
        .lock_stack(
            &admin(),
            "admin-locked",
            LockLevel::All,
            Some("audit".into()),
        )
        .await
        .expect("lock");
    let locked = settled(&operations, "admin-locked").await;
    assert!(
        locked
            .maintenance_lock
            .as_ref()
            .is_some_and(|lock| lock.locked_by_admin)
    );
    let error = operations
        .unlock_stack(&owner(), "admin-locked")
        .await
        .expect_err("owner refused");
    assert!(matches!(error, Error::Forbidden(_)), "{error:?}");
    assert!(
        error.to_string().contains("only an admin can unlock"),
        "{error}"
    );
    operations
        .unlock_stack(&admin(), "admin-locked")
        .await
        .expect("admin unlocks");
    settled_as(&operations, "admin-locked", "UNLOCK_COMPLETE").await;
    assert_servers_locked(&operations, &instances, &stack, false, "unlocked").await;
}

async fn lock_needs_a_created_stack(database: &TestDatabase) {
    let (operations, instances, _) = engine(database).await;
    let template = "heat_template_version: 2021-04-16\nresources:\n  slow: {type: OS::Heat::TestResource, properties: {action_wait_secs: {create: 1}}}\n";
    start_create(&operations, "young", template, |_| {}).await;
    let error = operations
        .lock_stack(&owner(), "young", LockLevel::All, None)
        .await
        .expect_err("in progress");
    assert!(matches!(error, Error::Conflict(_)), "{error:?}");
    settled(&operations, "young").await;
    let error = operations
        .lock_stack(&owner(), "young", LockLevel::All, Some(String::new()))
        .await
        .expect_err("empty reason");
    assert!(matches!(error, Error::InvalidInput(_)), "{error:?}");
    // An unrelated instance in the project is never touched by stack locks.
    let loose = instances
        .create(
            &owner(),
            NewInstance {
                name: "loose".into(),
                flavor: "f".into(),
                image: "i".into(),
                metadata: Default::default(),
                workload: Default::default(),
                placement: Default::default(),
                delegation: None,
            },
        )
        .await
        .expect("instance");
    operations
        .lock_stack(&owner(), "young", LockLevel::All, None)
        .await
        .expect("lock");
    settled(&operations, "young").await;
    let loose = instances.get(&owner(), loose.uuid).await.expect("instance");
    assert!(!loose.is_locked() && loose.status != InstanceStatus::Error);
}

/// A lock with an expiry is unlocked by the engine once its time has
/// come — two engines racing to do it begin one unlock — as its holder,
/// the reason saying so; the instances it locked are unlocked with it.
async fn an_expired_stack_lock_is_unlocked_once(database: &TestDatabase) {
    let (operations, instances, store) = engine(database).await;
    let (other, _, _) = engine(database).await;
    let stack = create_root(&operations, "expiring").await;
    let expires_at = ember_runtime::time::now() + chrono::Duration::seconds(2);
    let locking = operations
        .lock_stack_until(
            &owner(),
            "expiring",
            LockLevel::All,
            Some("quiet hours".to_owned()),
            Some(expires_at),
        )
        .await
        .expect("lock accepted");
    let lock = locking.maintenance_lock.clone().expect("a lock");
    assert_eq!(lock.expires_at, Some(expires_at));
    assert!(lock.describe().contains(" until "), "{}", lock.describe());
    settled_as(&operations, "expiring", "LOCK_COMPLETE").await;
    // Nothing to do before the expiry.
    assert_eq!(operations.unlock_expired_stacks().await.expect("sweep"), 0);
    // Until the lock's own expiry (a time, not a condition to poll for).
    let until_expiry = (expires_at - ember_runtime::time::now())
        .to_std()
        .unwrap_or_default();
    tokio::time::sleep(until_expiry + Duration::from_millis(50)).await;
    let (mine, theirs) = tokio::join!(
        operations.unlock_expired_stacks(),
        other.unlock_expired_stacks()
    );
    assert_eq!(
        mine.expect("sweep") + theirs.expect("sweep"),
        1,
        "one unlock begun"
    );
    let unlocked = settled_as(&operations, "expiring", "UNLOCK_COMPLETE").await;
    assert!(unlocked.maintenance_lock.is_none());
    let events = store
        .list_events(&ember_engine::store::EventListQuery {
            stack_ids: vec![stack.id],
            limit: 1000,
            ..ember_engine::store::EventListQuery::default()
        })
        .await
        .expect("events");
    let started: Vec<&str> = events
        .iter()
        .filter(|event| event.resource_name == stack.name)
        .map(|event| event.reason.as_str())
        .filter(|reason| reason.starts_with("Stack UNLOCK started"))
        .collect();
    assert_eq!(started.len(), 1, "{started:?}");
    assert!(
        started[0].contains("lock expired (was level all, by owner \"demo\""),
        "{}",
        started[0]
    );
    assert_servers_locked(
        &operations,
        &instances,
        &stack,
        false,
        "instances unlocked with the stack",
    )
    .await;
    // Swept once: nothing more to do.
    assert_eq!(operations.unlock_expired_stacks().await.expect("sweep"), 0);
}

/// A lock is not a repair: a resource marked unhealthy is still marked
/// after a lock and an unlock — its instance locked and unlocked all the
/// same — and the next update replaces it (heat-mark-unhealthy).
async fn a_mark_survives_lock_and_unlock_and_the_update_still_replaces(database: &TestDatabase) {
    let (operations, instances, _) = engine(database).await;
    let stack = create_root(&operations, "marked").await;
    let web_of = |operations: Arc<StackOperations>, stack: Stack| async move {
        operations
            .resources(&stack, 0)
            .await
            .expect("resources")
            .into_iter()
            .map(|view| view.resource)
            .find(|resource| resource.name == "web")
            .expect("web")
    };
    let before = web_of(operations.clone(), stack.clone()).await;
    let instance = Uuid::parse_str(before.physical_id.as_deref().expect("an id")).expect("uuid");
    operations
        .mark_unhealthy(&owner(), "marked", "web", true, Some("disk broken".into()))
        .await
        .expect("marked");

    operations
        .lock_stack(&owner(), "marked", LockLevel::All, Some("patching".into()))
        .await
        .expect("lock accepted");
    let locked = settled_as(&operations, "marked", "LOCK_COMPLETE").await;
    let web = web_of(operations.clone(), locked.clone()).await;
    assert_eq!(
        (web.resource_status().as_str(), web.status_reason.as_str()),
        ("CHECK_FAILED", "disk broken"),
        "the lock kept the mark"
    );
    assert!(
        instances
            .get(&owner(), instance)
            .await
            .expect("instance")
            .is_locked(),
        "the marked server's instance is locked all the same"
    );

    operations
        .unlock_stack(&owner(), "marked")
        .await
        .expect("unlock accepted");
    let unlocked = settled_as(&operations, "marked", "UNLOCK_COMPLETE").await;
    let web = web_of(operations.clone(), unlocked.clone()).await;
    assert_eq!(
        web.resource_status(),
        "CHECK_FAILED",
        "the unlock kept the mark"
    );
    assert!(
        !instances
            .get(&owner(), instance)
            .await
            .expect("instance")
            .is_locked()
    );

    let update = UpdateStack {
        name_or_id: "marked".into(),
        existing: true,
        ..UpdateStack::default()
    };
    operations
        .update_stack(&owner(), update)
        .await
        .expect("update accepted");
    let updated = settled_as(&operations, "marked", "UPDATE_COMPLETE").await;
    let web = web_of(operations.clone(), updated).await;
    assert_eq!(web.resource_status(), "CREATE_COMPLETE");
    assert_ne!(
        web.physical_id, before.physical_id,
        "the marked server was replaced"
    );
}

/// Every resource that keeps its members in a nested stack — each kind of
/// group and chain — locks that nested stack with the stack, and at level
/// `all` the servers in it (an instance group's too); unlock undoes both.
async fn every_group_locks_its_members_with_the_stack(database: &TestDatabase) {
    let (operations, instances, store) = engine(database).await;
    let template = r#"
heat_template_version: 2021-04-16
resources:
  launch:
    type: AWS::AutoScaling::LaunchConfiguration
    properties: {ImageId: debian, InstanceType: m1.small}
  instances:
    type: OS::Heat::InstanceGroup
    properties: {AvailabilityZones: [nova], Size: 2, LaunchConfigurationName: {get_resource: launch}}
  group:
    type: OS::Heat::ResourceGroup
    properties:
      count: 1
      resource_def: {type: OS::Nova::Server, properties: {flavor: m1.small, image: debian}}
  scaled:
    type: OS::Heat::AutoScalingGroup
    properties:
      min_size: 1
      max_size: 2
      resource: {type: OS::Nova::Server, properties: {flavor: m1.small, image: debian}}
  chain:
    type: OS::Heat::ResourceChain
    properties: {resources: [OS::Heat::TestResource]}
"#;
    start_create(&operations, "grouped", template, |_| {}).await;
    let stack = settled_as(&operations, "grouped", "CREATE_COMPLETE").await;
    let children = store.list_child_stacks(stack.id).await.expect("children");
    assert_eq!(children.len(), 4, "one nested stack a group: {children:?}");
    let servers = server_ids(&operations, &stack).await;
    assert_eq!(servers.len(), 4, "2 + 1 + 1 servers in the groups");

    operations
        .lock_stack(&owner(), "grouped", LockLevel::All, None)
        .await
        .expect("lock accepted");
    settled_as(&operations, "grouped", "LOCK_COMPLETE").await;
    for child in store.list_child_stacks(stack.id).await.expect("children") {
        assert_eq!(
            child.stack_status(),
            "LOCK_COMPLETE",
            "{}: the group's nested stack locks with the stack",
            child.name
        );
    }
    assert_servers_locked(
        &operations,
        &instances,
        &stack,
        true,
        "level all locks every group's servers",
    )
    .await;

    operations
        .unlock_stack(&owner(), "grouped")
        .await
        .expect("unlock accepted");
    settled_as(&operations, "grouped", "UNLOCK_COMPLETE").await;
    for child in store.list_child_stacks(stack.id).await.expect("children") {
        assert_eq!(
            child.stack_status(),
            "UNLOCK_COMPLETE",
            "{}: unlocked with the stack",
            child.name
        );
    }
    assert_servers_locked(
        &operations,
        &instances,
        &stack,
        false,
        "unlock lifts every group's server locks",
    )
    .await;
}

ember_runtime::store_suite!(
    a_locked_stack_allows_only_lock_and_unlock_and_nested_stacks_follow,
    unlock_lifts_only_the_instance_locks_the_stack_placed,
    a_failing_resource_leaves_lock_failed_and_unlock_cleans_up,
    an_admin_lock_is_lifted_only_by_an_admin,
    lock_needs_a_created_stack,
    an_expired_stack_lock_is_unlocked_once,
    a_mark_survives_lock_and_unlock_and_the_update_still_replaces,
    every_group_locks_its_members_with_the_stack,
);
