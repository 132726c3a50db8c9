//! Deleting a stack: its state re-read and recorded DELETE_IN_PROGRESS
//! under the lease, then the run that deletes its resources (and the old
//! rows of replaced ones).

use std::sync::Arc;

use super::executor::{RunTarget, Shared};
use super::failure::RunFailure;
use super::{
    LeaseSeen, Run, StackCaller, StackOperation, StackOperations, conclude, end, executor, lease,
    operation_timeout, plugins, stack_event, update,
};
use crate::domain::{ActionStatus, Stack, StackAction};
use crate::error::Result;
use crate::store::{LeaseFence, StartWrites};

impl StackOperations {
    /// Takes the lease, records DELETE_IN_PROGRESS and returns the run that
    /// deletes the resources; the caller spawns or awaits it. `stack` was
    /// admitted by the caller.
    pub(crate) async fn begin_delete(
        &self,
        stack: Stack,
        lease_seen: LeaseSeen,
        name_or_id: &str,
        caller: StackCaller<'_>,
    ) -> Result<(Stack, Run)> {
        let started = match self
            .start_delete_at_once(&stack, lease_seen, name_or_id, caller)
            .await?
        {
            Some(started) => started,
            None => self.start_delete(stack, name_or_id, caller).await?,
        };
        let (stack, target, stack_lease) = started;
        let run = Box::pin(run_delete(
            self.shared.clone(),
            stack.clone(),
            target,
            stack_lease,
        ));
        Ok((stack, run))
    }

    /// The usual case in one commit: the lease is seen free, the stack and
    /// its resources are read after that (the stack with it, when the
    /// caller read both in one statement), and the lease is taken — with
    /// DELETE_IN_PROGRESS recorded in the same transaction — only if no
    /// operation took it in between (its generation unchanged: every take
    /// moves it on). `None`, nothing written, when the lease is held or
    /// moved on: then [`Self::start_delete`].
    async fn start_delete_at_once(
        &self,
        stack: &Stack,
        lease_seen: LeaseSeen,
        name_or_id: &str,
        caller: StackCaller<'_>,
    ) -> Result<Option<(Stack, RunTarget, lease::StackLease)>> {
        let next = |generation: i64| LeaseFence {
            stack_id: stack.id,
            generation: generation + 1,
        };
        let (generation, mut stack, target) = match lease_seen {
            LeaseSeen::FreeAt(generation) => {
                let rows = self.store().list_resources(stack.id).await?;
                let target = self.target_of(stack, rows, next(generation)).await?;
                (generation, stack.clone(), target)
            }
            LeaseSeen::NotFree => return Ok(None),
            LeaseSeen::Unknown => {
                let seen_at = ember_runtime::time::now();
                let Some(generation) = self
                    .store()
                    .free_lease_generation(stack.id, seen_at)
                    .await?
                else {
                    return Ok(None);
                };
                let (stack, target) = self
                    .read_target(
                        stack.id,
                        name_or_id,
                        StackOperation::Delete,
                        caller,
                        next(generation),
                    )
                    .await?;
                (generation, stack, target)
            }
        };
        mark_deleting(&mut stack);
        let writes = StartWrites::Stack {
            event: stack_event(&stack, "Stack DELETE started"),
            stack: stack.clone(),
        };
        let taken = self
            .shared
            .take_lease_at(stack.id, "DELETE", generation, writes)
            .await?;
        Ok(taken.map(|fence| (stack, target, self.shared.hold_lease(fence))))
    }

    /// Takes the lease, then reads the stack under it and records
    /// DELETE_IN_PROGRESS.
    async fn start_delete(
        &self,
        stack: Stack,
        name_or_id: &str,
        caller: StackCaller<'_>,
    ) -> Result<(Stack, RunTarget, lease::StackLease)> {
        let stack_lease = self
            .shared
            .take_lease(stack.id, &stack.name, "DELETE")
            .await?;
        let fence = stack_lease.fence();
        let ((stack, target), stack_lease) = stack_lease
            .start(async {
                let (mut stack, target) = self
                    .read_target(stack.id, name_or_id, StackOperation::Delete, caller, fence)
                    .await?;
                mark_deleting(&mut stack);
                self.shared
                    .writer
                    .record_stack(fence, &stack, stack_event(&stack, "Stack DELETE started"))
                    .await?;
                Ok((stack, target))
            })
            .await?;
        Ok((stack, target, stack_lease))
    }
}

fn mark_deleting(stack: &mut Stack) {
    stack.action = StackAction::Delete;
    stack.status = ActionStatus::InProgress;
    stack.status_reason = "Stack DELETE started".to_owned();
    stack.updated_at = ember_runtime::time::now();
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
