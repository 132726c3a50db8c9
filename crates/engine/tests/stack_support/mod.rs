//! What the stack engine tests share: an engine on simulated compute and
//! the stack store as the engine builds them, a stack's row to start from,
//! and waiting until a stack's operation has ended, read as a caller reads
//! it or as its row in the store.

#![allow(dead_code)] // each test binary uses its own part of the support

use std::sync::Arc;
use std::time::Duration;

use ember_engine::compute::simulated::SimulatedComputeConfig;
use ember_engine::domain::{ActionStatus, Stack};
use ember_engine::instances::InstanceService;
use ember_engine::resources::ResourceTypeRegistry;
use ember_engine::stacks::StackOperations;
use ember_engine::store::instances::SqlInstanceStore;
use ember_engine::store::{SqlStackStore, StackStore, migrations::Migrator};
use ember_runtime::Identity;
use ember_runtime::database::{connect_and_migrate, connect_reader, testing::TestDatabase};
use ember_runtime::testing::poll_until_ok;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// The stack store as the engine builds it on `database` (migrated here):
/// on a SQLite file, reads step on connections of their own
/// (`Reader::rows`), not the writer's pool.
pub async fn stack_store(database: &TestDatabase) -> SqlStackStore {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let reader = connect_reader(&database.url, &connection)
        .await
        .expect("reader");
    SqlStackStore::with_reader(connection, reader)
}

/// A stack engine whose servers are instances of the simulated compute
/// driver, and what it runs on.
pub struct ComputeEngine {
    pub operations: Arc<StackOperations>,
    pub instances: Arc<InstanceService>,
    pub store: Arc<dyn StackStore>,
}

/// A stack engine on `database` (migrated here) whose servers are
/// simulated instances: each build, power change, reboot and delete takes
/// `latency`, and a build fails when its name contains
/// `fail_builds_matching` (empty: none fails).
pub async fn simulated_compute_engine(
    database: &TestDatabase,
    latency: Duration,
    fail_builds_matching: &str,
) -> ComputeEngine {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let driver = SimulatedComputeConfig {
        build_latency: latency,
        power_latency: latency,
        reboot_latency: latency,
        delete_latency: latency,
        fail_builds_matching: fail_builds_matching.to_owned(),
    };
    let instances = InstanceService::start(
        Arc::new(SqlInstanceStore::new(connection.clone())),
        &driver,
        CancellationToken::new(),
    )
    .await
    .expect("instances");
    let store: Arc<dyn StackStore> = Arc::new(SqlStackStore::new(connection));
    let operations = StackOperations::new(
        store.clone(),
        Arc::new(ResourceTypeRegistry::with_compute(instances.clone())),
    );
    ComputeEngine {
        operations,
        instances,
        store,
    }
}

/// A root stack's row of `project` named `name`, alice's, CREATE_COMPLETE
/// now with rollback disabled; a test changes what it needs with
/// `Stack { …, ..stack_row(project, name) }`.
pub fn stack_row(project: &str, name: &str) -> Stack {
    let now = ember_runtime::time::now();
    Stack {
        status: ActionStatus::Complete,
        status_reason: String::new(),
        ..Stack::starting_create(Uuid::now_v7(), name, project, "alice", now)
    }
}

/// Asserts `stack` is `status` (`CREATE_COMPLETE`), saying its reason when
/// it is not.
pub fn assert_status(stack: &Stack, status: &str) {
    assert_eq!(
        stack.stack_status(),
        status,
        "{}: {}",
        stack.name,
        stack.status_reason
    );
}

/// Stack `name_or_id` as `caller` finds it once it has left IN_PROGRESS;
/// fails after `within`, saying the status it was still in.
pub async fn settled(
    operations: &StackOperations,
    caller: &Identity,
    name_or_id: &str,
    within: Duration,
) -> Stack {
    poll_until_ok(&format!("stack {name_or_id} to settle"), within, || async {
        let stack = operations
            .find_stack(caller, name_or_id)
            .await
            .expect("stack");
        match stack.status {
            ActionStatus::InProgress => Err(stack.stack_status()),
            ActionStatus::Complete | ActionStatus::Failed => Ok(stack),
        }
    })
    .await
}

/// The stack's row once its operation has ended (as a replica that did not
/// run it sees it); fails after `within`, saying the status it was still in.
pub async fn settled_row(store: &Arc<dyn StackStore>, stack_id: Uuid, within: Duration) -> Stack {
    poll_until_ok(&format!("stack {stack_id} to settle"), within, || async {
        let stack = store
            .get_stack(stack_id)
            .await
            .expect("read")
            .expect("the stack row");
        match stack.status {
            ActionStatus::InProgress => {
                Err(format!("{} still {}", stack.name, stack.stack_status()))
            }
            ActionStatus::Complete | ActionStatus::Failed => Ok(stack),
        }
    })
    .await
}
