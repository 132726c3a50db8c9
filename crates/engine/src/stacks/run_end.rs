//! How a running operation records its states and ends: the in-between
//! transitions (fenced with the run's lease), the final state written with
//! the lease's release, and the operation's timeout.

use std::time::Duration;

use super::executor::Shared;
use super::failure::{RunFailure, RunResult};
use super::{lease, stack_event};
use crate::domain::{ActionStatus, Stack, StackAction};

/// Records a new state of a running operation (e.g. ROLLBACK_IN_PROGRESS),
/// fenced with the run's lease.
pub(crate) async fn finish(
    shared: &Shared,
    stack: &mut Stack,
    status: ActionStatus,
    reason: String,
    fence: crate::store::LeaseFence,
) -> RunResult {
    set_state(stack, status, &reason);
    shared
        .writer
        .record_stack(fence, stack, stack_event(stack, &reason))
        .await
        .map_err(RunFailure::from)
}

/// Records the final state of an operation and releases its lease in the
/// same transaction.
pub(crate) async fn conclude(
    stack: &mut Stack,
    status: ActionStatus,
    reason: String,
    stack_lease: lease::StackLease,
) {
    set_state(stack, status, &reason);
    stack_lease
        .finish(stack, &stack_event(stack, &reason))
        .await;
}

/// How a run's outcome ends the operation: its final status and reason,
/// or `None` when the run stops without a final state — the lease was lost
/// (another engine owns the stack now) or the operation was handed back at
/// shutdown (an engine resumes it): write nothing; the dropped lease guard
/// stops the heartbeat and releases what is still held.
pub(crate) fn final_state(
    outcome: RunResult,
    operation: &str,
) -> Result<(ActionStatus, String), RunFailure> {
    match outcome {
        Ok(()) => Ok((
            ActionStatus::Complete,
            format!("Stack {operation} completed successfully"),
        )),
        Err(stop @ (RunFailure::LeaseLost | RunFailure::HandedBack)) => Err(stop),
        Err(failure) => Ok((ActionStatus::Failed, failure.reason())),
    }
}

/// Ends a run that stops without a final state (see [`final_state`]): says
/// why in the log and, when the operation was handed back, releases the
/// lease now — the engine is about to exit, and the next engine should not
/// wait for it to expire. A lost lease is another engine's: nothing to do.
pub(crate) async fn stop_without_final_state(
    stack: &Stack,
    stop: RunFailure,
    stack_lease: lease::StackLease,
) {
    if matches!(stop, RunFailure::HandedBack) {
        tracing::info!(stack_id = %stack.id, action = stack.action.as_str(), "engine shutting down: operation handed back unfinished, to be resumed");
        stack_lease.release().await;
    } else {
        tracing::error!(stack_id = %stack.id, action = stack.action.as_str(), "stack lease taken over by another engine: this run stops without writing");
    }
}

fn set_state(stack: &mut Stack, status: ActionStatus, reason: &str) {
    stack.status = status;
    stack.status_reason = reason.to_owned();
    stack.updated_at = ember_runtime::time::now();
    if matches!(stack.action, StackAction::Delete | StackAction::Abandon)
        && status == ActionStatus::Complete
    {
        stack.deleted_at = Some(stack.updated_at);
    }
}

pub(crate) fn operation_timeout(stack: &Stack) -> Duration {
    stack
        .timeout_mins
        .map_or(Duration::from_secs(24 * 3600), |minutes| {
            Duration::from_secs(u64::from(minutes) * 60)
        })
}
