//! How a running operation records its states and ends: the in-between
//! transitions (fenced with the run's lease), the final state written with
//! the lease's release.

use super::executor::{RunTarget, StackEngine};
use super::failure::{RunFailure, RunResult};
use super::{lease, stack_event};
use crate::domain::{ActionStatus, Stack, StackAction};

/// Records a new state of a running operation (e.g. ROLLBACK_IN_PROGRESS),
/// fenced with the run's lease.
pub(crate) async fn finish(
    engine: &StackEngine,
    stack: &mut Stack,
    status: ActionStatus,
    reason: String,
    fence: crate::store::LeaseFence,
) -> RunResult {
    set_state(stack, status, &reason);
    engine
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

/// Ends a run whose walk came to `outcome`, as far as it can without the
/// caller. A walk that succeeded ends `operation` COMPLETE at once: the
/// final state is queued behind the transitions the run still has in
/// flight, to be written only if every one of them commits — usually in
/// their commit, one commit sooner than waiting for them first. Otherwise,
/// or when one of them did not commit, the run's worst failure comes back
/// once its transitions settled, with the lease, for the caller to end the
/// operation as failed (or roll it back).
pub(crate) async fn complete_or_fail(
    stack: &mut Stack,
    target: &RunTarget,
    outcome: RunResult,
    operation: &str,
    stack_lease: lease::StackLease,
) -> Result<(), (RunFailure, lease::StackLease)> {
    let failure = match outcome {
        Ok(()) => match complete(stack, target, operation, &stack_lease).await {
            Ok(Completion::Written) => {
                stack_lease.settle();
                return Ok(());
            }
            Ok(Completion::ToRetry(end)) => {
                // Only the end failed (e.g. a briefly busy database, or
                // the lease was lost): written as any end is.
                let (ended, event) = *end;
                stack_lease.finish(&ended, &event).await;
                *stack = ended;
                return Ok(());
            }
            Err(failure) => failure,
        },
        Err(failure) => failure,
    };
    match target.settle().await {
        Ok(()) => Err((failure, stack_lease)),
        Err(other) => Err((failure.worse(other), stack_lease)),
    }
}

/// What became of a COMPLETE queued behind the run's transitions.
enum Completion {
    /// Committed with (or after) every one of them.
    Written,
    /// They committed, the end itself did not: this state and event are
    /// still to be written.
    ToRetry(Box<(Stack, crate::domain::Event)>),
}

/// Queues `stack`'s COMPLETE behind the run's transitions in flight; on
/// success `stack` is the state written. Fails with the run's failure when
/// one of its transitions did not commit (nothing of the end is written
/// then).
async fn complete(
    stack: &mut Stack,
    target: &RunTarget,
    operation: &str,
    stack_lease: &lease::StackLease,
) -> RunResult<Completion> {
    let (status, reason) = final_state(Ok(()), operation)?;
    let mut ended = stack.clone();
    set_state(&mut ended, status, &reason);
    let event = stack_event(&ended, &reason);
    let finishing = stack_lease.queue_finish(&ended, event.clone());
    let settled = target.settle().await;
    let finished = match finishing {
        Ok(committed) => super::writer::answer(committed).await,
        Err(error) => Err(error),
    };
    match (settled, finished) {
        (Ok(()), Ok(())) => {
            *stack = ended;
            Ok(Completion::Written)
        }
        (Ok(()), Err(_)) => Ok(Completion::ToRetry(Box::new((ended, event)))),
        (Err(failure), Err(_)) => Err(failure),
        (Err(failure), Ok(())) => {
            // The writer refuses an end queued behind a write that failed;
            // should that ever not hold, say so: the stack shows COMPLETE.
            tracing::error!(stack_id = %stack.id, %failure, "an operation's end was written although one of its transitions was not");
            *stack = ended;
            Ok(Completion::Written)
        }
    }
}

/// Ends a run whose walk came to `outcome` (see [`complete_or_fail`]),
/// failed if it failed, or without a final state ([`final_state`]).
/// Whether a final state was written: the post-operation plugins are due.
pub(crate) async fn end(
    stack: &mut Stack,
    target: &RunTarget,
    outcome: RunResult,
    operation: &str,
    stack_lease: lease::StackLease,
) -> bool {
    match complete_or_fail(stack, target, outcome, operation, stack_lease).await {
        Ok(()) => true,
        Err((failure, stack_lease)) => end_failed(stack, failure, operation, stack_lease).await,
    }
}

/// Ends a run that failed (as [`complete_or_fail`] returned it): FAILED,
/// or without a final state ([`final_state`]). Whether a final state was
/// written.
pub(crate) async fn end_failed(
    stack: &mut Stack,
    failure: RunFailure,
    operation: &str,
    stack_lease: lease::StackLease,
) -> bool {
    match final_state(Err(failure), operation) {
        Ok((status, reason)) => {
            conclude(stack, status, reason, stack_lease).await;
            true
        }
        Err(stop) => {
            stop_without_final_state(stack, stop, stack_lease).await;
            false
        }
    }
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
