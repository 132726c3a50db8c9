//! Deleting a stack: the operation still running on it stopped first
//! (Heat's delete of a stack in progress), DELETE_IN_PROGRESS recorded with
//! the take of its lease (usually in one commit, the run started behind the
//! take; else the state re-read under the lease first), then the run that
//! deletes its resources (and the old rows of replaced ones).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ember_runtime::Identity;

use super::bounds::STOP_WAIT;
use super::executor::{RunTarget, StackEngine};
use super::failure::RunFailure;
use super::run_end::{complete_or_fail, end_failed};
use super::writer::{Recorded, TakeRecord};
use super::{
    LeaseHolder, LeaseSeen, Run, StackCaller, StackOperation, StackOperations, conclude, executor,
    lease, plugins, stack_event, update,
};
use crate::domain::admission::stack::stops_running;
use crate::domain::{ActionStatus, Stack, StackAction};
use crate::error::{Error, Result};
use crate::store::{LeaseFence, OperationStart, StartWrites};
use uuid::Uuid;

impl StackOperations {
    /// Starts deleting a stack and its resources.
    pub async fn delete_stack(&self, identity: &Identity, name_or_id: &str) -> Result<Stack> {
        let (stack, lease_seen) = self
            .find_stack_with_free_lease(identity, name_or_id)
            .await?;
        let caller = StackCaller::User(identity);
        self.admit(&stack, StackOperation::Delete, caller).await?;
        let (stack, lease_seen) = self
            .stop_running_operation(identity, name_or_id, stack, lease_seen)
            .await?;
        let (stack, run) = self
            .begin_delete(stack, lease_seen, name_or_id, caller)
            .await?;
        self.engine.spawn_run(run);
        Ok(stack)
    }

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
        if let Some(started) = self
            .start_delete_at_once(&stack, lease_seen, name_or_id, caller)
            .await?
        {
            return Ok(started);
        }
        let (stack, target, stack_lease) = self.start_delete(stack, name_or_id, caller).await?;
        let run = Box::pin(run_delete(
            self.engine.clone(),
            stack.clone(),
            target,
            stack_lease,
            Recorded::already(),
        ));
        Ok((stack, run))
    }

    /// The usual case in one commit: the lease is seen free, the stack and
    /// its resources are read after that (the stack with it, when the
    /// caller read both in one statement), and the lease is taken — with
    /// DELETE_IN_PROGRESS recorded in the same transaction — only if no
    /// operation took it in between (its generation unchanged: every take
    /// moves it on). The take gives the lease a holder token of its own, so
    /// its fence is known before it commits: where the writer batches takes
    /// the run starts at once, and its first writes (usually the whole
    /// delete of resources that act only on their rows) commit with the
    /// take, or are refused with it. Returns the stack and a run that
    /// awaits the one started; `None` when the lease is held or moved on
    /// (nothing of this take is written, its run stops by itself): then
    /// [`Self::start_delete`].
    async fn start_delete_at_once(
        &self,
        stack: &Stack,
        lease_seen: LeaseSeen,
        name_or_id: &str,
        caller: StackCaller<'_>,
    ) -> Result<Option<(Stack, Run)>> {
        let holder = Uuid::new_v4();
        let next = |generation: i64| LeaseFence::after_take(stack.id, generation, holder);
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
        let start = OperationStart {
            generation,
            holder,
            writes: StartWrites::Stack {
                event: stack_event(&stack, "Stack DELETE started"),
                stack: stack.clone(),
            },
        };
        let take =
            self.engine
                .lease_take_at(stack.id, LeaseHolder::Action(StackAction::Delete), start);
        let recorded = match self.engine.writer.queue_take(take).await? {
            TakeRecord::Answered(None) => return Ok(None),
            TakeRecord::Answered(Some(_)) => Recorded::already(),
            TakeRecord::Queued(taken) => Recorded::pending_take(taken, stack.id),
        };
        let stack_lease = self.engine.hold_lease(target.fence);
        let running = self.engine.spawn_run(run_delete(
            self.engine.clone(),
            stack.clone(),
            target,
            stack_lease,
            recorded.clone(),
        ));
        if !recorded.wait().await {
            return Ok(None);
        }
        let run: Run = Box::pin(async move {
            // A run that panicked leaves the stack in progress for the
            // sweep, as any run does.
            let _ = running.await;
        });
        Ok(Some((stack, run)))
    }

    /// Heat's delete of a stack in progress: the operation running on it
    /// is stopped (see `bounds.rs`) — here, or by the engine running it,
    /// asked through the stack's lease — and the stack is read again once
    /// that operation let go of it, and admitted again as it is then
    /// (another delete may have deleted it meanwhile: it is not deleted
    /// twice). A stack in a final state is returned as it is. Refused
    /// (409) when the operation does not let go within [`STOP_WAIT`].
    pub(super) async fn stop_running_operation(
        &self,
        identity: &Identity,
        name_or_id: &str,
        stack: Stack,
        lease_seen: LeaseSeen,
    ) -> Result<(Stack, LeaseSeen)> {
        if !stops_running(&stack, StackOperation::Delete) {
            return Ok((stack, lease_seen));
        }
        let started = Instant::now();
        let mut stopped = false;
        let mut asked = false;
        // When the stop was last asked through the lease (a lease held by
        // nobody — an engine that went away — is asked again once a
        // second, not on every poll).
        let mut last_ask: Option<Instant> = None;
        let mut current = (stack, lease_seen);
        loop {
            // A run registers as it starts: a stop may have to be asked again.
            stopped = self.engine.stops.stop(current.0.id) || stopped;
            let (stack, lease_seen) = &current;
            let settled = stack.status != ActionStatus::InProgress
                && !matches!(lease_seen, LeaseSeen::NotFree);
            if settled {
                self.admit(stack, StackOperation::Delete, StackCaller::User(identity))
                    .await?;
                return Ok(current);
            }
            let waited = started.elapsed();
            if !stopped
                && !asked
                && waited >= NOT_HERE
                && last_ask.is_none_or(|at| at.elapsed() >= NOT_HERE)
            {
                // Another engine runs it: its lease's heartbeat stops it.
                last_ask = Some(Instant::now());
                asked = self
                    .store()
                    .request_stack_stop(
                        stack.id,
                        crate::store::StopRequest::Delete,
                        ember_runtime::time::now(),
                    )
                    .await?;
            }
            if waited >= STOP_WAIT {
                let whose = if stopped { "" } else { " on another engine" };
                return Err(Error::Conflict(format!(
                    "stack {:?} is {}: its operation{whose} did not stop within {} s for the delete: try again",
                    stack.name,
                    stack.stack_status(),
                    STOP_WAIT.as_secs()
                )));
            }
            tokio::time::sleep(STOP_POLL).await;
            current = self
                .find_stack_with_free_lease(identity, name_or_id)
                .await?;
        }
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
            .engine
            .take_lease(
                stack.id,
                &stack.name,
                LeaseHolder::Action(StackAction::Delete),
            )
            .await?;
        let fence = stack_lease.fence();
        let ((stack, target), stack_lease) = stack_lease
            .start(async {
                let (mut stack, target) = self
                    .read_target(stack.id, name_or_id, StackOperation::Delete, caller, fence)
                    .await?;
                mark_deleting(&mut stack);
                self.engine
                    .writer
                    .record_stack(fence, &stack, stack_event(&stack, "Stack DELETE started"))
                    .await?;
                Ok((stack, target))
            })
            .await?;
        Ok((stack, target, stack_lease))
    }
}

/// How often a delete that stopped an operation reads the stack again.
const STOP_POLL: Duration = Duration::from_millis(50);

/// How long a delete asks a run it cannot find here to stop before it
/// concludes that another engine runs it and asks that one (a run
/// registers its stop as it starts, a moment after its IN_PROGRESS is
/// recorded).
const NOT_HERE: Duration = Duration::from_secs(1);

fn mark_deleting(stack: &mut Stack) {
    stack.action = StackAction::Delete;
    stack.status = ActionStatus::InProgress;
    stack.status_reason = "Stack DELETE started".to_owned();
    stack.updated_at = ember_runtime::time::now();
}

pub(super) async fn run_delete(
    engine: Arc<StackEngine>,
    mut stack: Stack,
    target: RunTarget,
    stack_lease: lease::StackLease,
    recorded: Recorded,
) {
    let passed = match plugins::before_recorded(&engine, &stack, None, &recorded).await {
        Some(Ok(passed)) => passed,
        Some(Err(reason)) => {
            conclude(&mut stack, ActionStatus::Failed, reason, stack_lease).await;
            return;
        }
        // Another operation took the lease first: nothing to do or undo.
        None => return,
    };
    // A breakpoint hook is an effect outside the run's fenced writes:
    // hooks wait until the take committed.
    if target.parsed.environment.has_hooks() && !recorded.wait().await {
        return;
    }
    let deleting = async {
        executor::delete_resources(engine.clone(), target.clone(), StackAction::Delete).await?;
        update::retire_superseded(&engine, &target).await
    };
    let outcome = tokio::time::timeout(engine.operation_timeout(&stack), deleting)
        .await
        .unwrap_or_else(|_| Err(RunFailure::Failed("Delete timed out".to_owned())));
    let ended = match complete_or_fail(&mut stack, &target, outcome, "DELETE", stack_lease).await {
        Ok(()) => true,
        // The take was refused: every write of this run was refused with
        // it, and nothing outside its rows was done.
        Err(_) if !recorded.wait().await => return,
        Err((failure, stack_lease)) => end_failed(&mut stack, failure, "DELETE", stack_lease).await,
    };
    if ended {
        plugins::after(&engine, &stack, StackAction::Delete, passed).await;
    }
    if stack.parent_id.is_none()
        && stack.status == ActionStatus::Complete
        && let Some(cloud) = engine.cloud.as_ref()
        && let Err(error) = cloud
            .revoke(
                crate::domain::delegation::DelegationOwner::Stack(stack.id),
                None,
            )
            .await
    {
        tracing::warn!(stack_id = %stack.id, %error, "the deleted stack's delegation stays recorded");
    }
}
