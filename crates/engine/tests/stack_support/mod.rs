//! What the stack engine tests share: waiting until a stack's operation
//! has ended, read as a caller reads it or as its row in the store.

#![allow(dead_code)] // each test binary uses its own part of the support

use std::sync::Arc;
use std::time::Duration;

use ember_engine::domain::{ActionStatus, Stack};
use ember_engine::stacks::StackOperations;
use ember_engine::store::StackStore;
use ember_runtime::Identity;
use ember_runtime::testing::poll_until_ok;
use uuid::Uuid;

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
