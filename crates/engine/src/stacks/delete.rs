//! Deleting a stack: its state re-read and recorded DELETE_IN_PROGRESS
//! under the lease, then the run that deletes its resources (and the old
//! rows of replaced ones).

use std::sync::Arc;

use super::executor::{RunTarget, Shared};
use super::failure::RunFailure;
use super::{
    Run, StackCaller, StackOperation, StackOperations, conclude, end, executor, lease,
    operation_timeout, plugins, stack_event, update,
};
use crate::domain::{ActionStatus, Stack, StackAction};
use crate::error::Result;

impl StackOperations {
    /// Takes the lease, records DELETE_IN_PROGRESS and returns the run that
    /// deletes the resources; the caller spawns or awaits it.
    pub(crate) async fn begin_delete(
        &self,
        stack: Stack,
        name_or_id: &str,
        caller: StackCaller<'_>,
    ) -> Result<(Stack, Run)> {
        let stack_lease = self
            .shared
            .take_lease(stack.id, &stack.name, "DELETE")
            .await?;
        let fence = stack_lease.fence();
        let ((stack, target), stack_lease) = stack_lease
            .start(async {
                let (mut stack, target) = self
                    .reread_under_lease(stack.id, name_or_id, StackOperation::Delete, caller, fence)
                    .await?;
                stack.action = StackAction::Delete;
                stack.status = ActionStatus::InProgress;
                stack.status_reason = "Stack DELETE started".to_owned();
                stack.updated_at = ember_runtime::time::now();
                self.shared
                    .writer
                    .record_stack(fence, &stack, stack_event(&stack, "Stack DELETE started"))
                    .await?;
                Ok((stack, target))
            })
            .await?;
        let run = Box::pin(run_delete(
            self.shared.clone(),
            stack.clone(),
            target,
            stack_lease,
        ));
        Ok((stack, run))
    }
}

pub(super) async fn run_delete(
    shared: Arc<Shared>,
    mut stack: Stack,
    target: RunTarget,
    stack_lease: lease::StackLease,
) {
    let passed = match plugins::before(&shared, &stack, None).await {
        Ok(passed) => passed,
        Err(reason) => {
            conclude(&mut stack, ActionStatus::Failed, reason, stack_lease).await;
            return;
        }
    };
    let deleting = async {
        executor::delete_resources(shared.clone(), target.clone(), StackAction::Delete).await?;
        update::retire_superseded(&shared, &target).await
    };
    let outcome = tokio::time::timeout(operation_timeout(&stack), deleting)
        .await
        .unwrap_or_else(|_| Err(RunFailure::Failed("Delete timed out".to_owned())));
    if end(&mut stack, &target, outcome, "DELETE", stack_lease).await {
        plugins::after(&shared, &stack, StackAction::Delete, passed).await;
    }
}
