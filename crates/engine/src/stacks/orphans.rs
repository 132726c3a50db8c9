//! The orphan sweep and the hand-over: stacks left in progress by an engine
//! that went away (its lease expired, or it released it when it shut down)
//! are resumed where the operation allows it, and marked failed otherwise —
//! one store decision each, now and then while the engine runs. On
//! shutdown an engine hands its root operations back (see
//! [`StackOperations::hand_back`]) so that another engine, or itself
//! restarted, resumes them at once.
//!
//! Resumed: create, delete, update (PUT and PATCH), the rollback of a
//! failed create or update, suspend, resume, check, and a maintenance lock
//! or unlock (an expiry's unlock included: interrupted, the lock it lifts
//! would otherwise stay past its expiry). Not resumed (marked
//! failed, saying why): a snapshot restore and an adopt (what they put
//! back was only in the engine's memory), and anything else.
//!
//! A resource step the engine had in flight (its row still
//! `*_IN_PROGRESS`) is taken over when its type says it can
//! ([`crate::resources::ResourceType::take_over`]): the type finds what the
//! earlier attempt made — the instance, the nested stack, the deployment,
//! by an id derived from the resource's row — and finishes it. A nested
//! stack whose parent is in progress is not resumed by the sweep on its
//! own: the parent's resumed step continues it (see `nested.rs`), so it is
//! never run twice.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::lease::{StackLease, expiry_after};
use super::{StackOperations, actions, create, delete, maintenance_lock, stack_event, update};
use crate::domain::{
    ActionStatus, MaintenanceLock, Resource, Stack, StackAction, StackDefinition, StackWideAction,
};
use crate::error::{Error, Result};
use crate::store::OrphanCandidate;

/// How many orphaned stacks one sweep pass looks at.
const ORPHAN_SWEEP_BATCH: u64 = 500;

/// How an orphaned operation continues.
enum Resumption {
    Create,
    Delete,
    /// An update, and the definition it started from (what it rolls back to).
    Update(StackDefinition),
    /// The rollback of an update, and the definition the update had moved
    /// to (whose resources it retires).
    UpdateRollback(StackDefinition),
    /// The rollback of a failed create: its resources are deleted.
    CreateRollback,
    Action(StackWideAction),
    /// A maintenance lock or unlock of this lock, as its holder.
    LockChange(MaintenanceLock),
}

/// What became of one orphan.
pub(super) enum TakenOver {
    /// Its lease is this engine's now: the run continues its operation
    /// (spawned by the sweep, awaited by a parent's step).
    Resumed(super::Run),
    /// Marked failed: its operation cannot be resumed.
    Failed,
    /// Finished, or taken by another replica, meanwhile: left alone.
    Moved,
}

/// What a sweep pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Operations this engine took over and continues.
    pub resumed: usize,
    /// Stacks marked failed: their operation cannot be resumed.
    pub failed: usize,
}

impl StackOperations {
    /// Takes over stacks whose engine went away (in progress, lease expired
    /// or released). An operation that can be resumed (see the module's
    /// doc) resumes here when every resource step it had in flight can be
    /// taken over by its type (a step that made an instance, a nested
    /// stack or a deployment finds it, and does not make it twice): what
    /// was done is kept and the rest runs. Anything else is marked failed
    /// with its in-progress resources, as Heat does. Each take-over is one
    /// conditional store decision from the lease generation the sweep saw,
    /// so a stack that finished meanwhile, or that another replica took,
    /// is left alone. A nested stack whose parent is in progress is left to
    /// the parent (see the module's doc).
    pub async fn recover_orphaned_stacks(&self) -> Result<Swept> {
        let now = ember_runtime::time::now();
        let candidates = self
            .store()
            .list_orphan_candidates(now, ORPHAN_SWEEP_BATCH)
            .await?;
        let mut swept = Swept::default();
        for candidate in candidates {
            if self.continued_by_its_parent(&candidate.stack).await? {
                continue;
            }
            match self.take_over_orphan(&candidate).await? {
                TakenOver::Resumed(run) => {
                    self.engine.spawn_run(run);
                    swept.resumed += 1;
                }
                TakenOver::Failed => swept.failed += 1,
                // The next pass looks again.
                TakenOver::Moved => {}
            }
        }
        Ok(swept)
    }

    /// Whether `stack` is a nested stack whose parent is in progress: the
    /// parent's operation (resumed, or still running) continues it.
    async fn continued_by_its_parent(&self, stack: &Stack) -> Result<bool> {
        let Some(parent_id) = stack.parent_id else {
            return Ok(false);
        };
        Ok(self
            .store()
            .get_stack(parent_id)
            .await?
            .is_some_and(|parent| parent.status == ActionStatus::InProgress))
    }

    /// Resumes `candidate`'s operation (the run is returned, not started)
    /// or marks it failed, saying why it cannot be resumed.
    pub(super) async fn take_over_orphan(&self, candidate: &OrphanCandidate) -> Result<TakenOver> {
        let now = ember_runtime::time::now();
        let engine = candidate.holder.map_or_else(
            || "an unknown engine".to_owned(),
            |id| format!("engine {id}"),
        );
        // Decided on the rows as they are; `resume` checks again once it
        // holds the lease.
        let rows = self.store().list_resources(candidate.stack.id).await?;
        let why = match self.resumption(&candidate.stack, &rows).await? {
            Ok(_) => {
                return Ok(match self.resume(candidate, &engine).await? {
                    Some(run) => TakenOver::Resumed(run),
                    None => TakenOver::Moved,
                });
            }
            Err(why) => why,
        };
        let reason = format!(
            "{} interrupted: {engine} went away while it ran (its stack lease expired); not resumed: {why}",
            candidate.stack.action.as_str()
        );
        Ok(
            match self
                .store()
                .fail_orphaned_stack(candidate, self.engine.engine_id, now, &reason)
                .await?
            {
                Some(stack) => {
                    tracing::warn!(stack_id = %stack.id, %reason, "orphaned stack marked failed");
                    TakenOver::Failed
                }
                None => TakenOver::Moved,
            },
        )
    }

    /// How the operation `stack` is in continues from `rows`, or why it
    /// cannot (`Err` inside).
    async fn resumption(
        &self,
        stack: &Stack,
        rows: &[Resource],
    ) -> Result<std::result::Result<Resumption, String>> {
        let resumption = match stack.action {
            StackAction::Create => Resumption::Create,
            StackAction::Delete => Resumption::Delete,
            StackAction::Update => match self.store().load_update_origin(stack.id).await? {
                Some(origin) => Resumption::Update(origin),
                None => {
                    return Ok(Err(
                        "the definition the update started from is not recorded (the update began on an engine that did not keep it), so it could not be rolled back".to_owned(),
                    ));
                }
            },
            // An update's rollback has the update's origin; a create's has
            // none (the update's goes when the update ends).
            StackAction::Rollback => match self.store().load_update_origin(stack.id).await? {
                Some(origin) => Resumption::UpdateRollback(origin),
                None => Resumption::CreateRollback,
            },
            StackAction::Suspend => Resumption::Action(StackWideAction::Suspend),
            StackAction::Resume => Resumption::Action(StackWideAction::Resume),
            StackAction::Check => Resumption::Action(StackWideAction::Check),
            // The lock is recorded when a lock begins and dropped when an
            // unlock completes: either way the run has it to continue.
            StackAction::Lock | StackAction::Unlock => match &stack.maintenance_lock {
                Some(lock) => Resumption::LockChange(lock.clone()),
                None => {
                    return Ok(Err(format!(
                        "no maintenance lock is recorded for the {} to continue",
                        stack.action.as_str()
                    )));
                }
            },
            StackAction::Restore => {
                return Ok(Err(
                    "a snapshot restore is not resumed: which snapshot it puts back is not recorded; restore the snapshot again".to_owned(),
                ));
            }
            StackAction::Adopt => {
                return Ok(Err(
                    "an adopt is not resumed: the adopt data is not recorded; delete the stack and adopt again".to_owned(),
                ));
            }
            other => {
                return Ok(Err(format!(
                    "a stack {} is not resumed; run it again",
                    other.as_str()
                )));
            }
        };
        for row in rows
            .iter()
            .filter(|row| row.status == ActionStatus::InProgress)
        {
            let step = in_flight_step(&resumption, row);
            if matches!(step, StackAction::Lock | StackAction::Unlock) {
                // Lock handlers are idempotent: called again, they finish
                // what the earlier call began.
                continue;
            }
            let verdict = match self.engine.registry.get(&row.type_name) {
                Some(kind) => kind.take_over(step),
                None => Err("its type is unknown to this engine".to_owned()),
            };
            if let Err(why) = verdict {
                return Ok(Err(format!(
                    "resource {:?} ({}) was in progress outside the engine and may be half made: {why}",
                    row.name, row.type_name
                )));
            }
        }
        Ok(Ok(resumption))
    }

    /// Takes the orphan's lease over and returns the run of this engine
    /// that continues its operation. `None` when the lease or the stack
    /// moved meanwhile, or when what the store now holds cannot be resumed
    /// (the next pass decides again).
    async fn resume(&self, candidate: &OrphanCandidate, gone: &str) -> Result<Option<super::Run>> {
        let now = ember_runtime::time::now();
        let ttl = self.engine.lease_ttl;
        let Some(fence) = self
            .store()
            .take_over_orphaned_stack(
                candidate,
                self.engine.engine_id,
                now,
                expiry_after(now, ttl),
            )
            .await?
        else {
            return Ok(None);
        };
        let stack_lease =
            StackLease::taken_over(self.engine.writer.clone(), &self.engine.stops, fence, ttl);
        let started = stack_lease
            .start(async {
                let mut stack = self
                    .store()
                    .get_stack(candidate.stack.id)
                    .await?
                    .ok_or_else(|| Error::NotFound("the stack is gone".to_owned()))?;
                let target = self.load_target(&stack, fence).await?;
                let rows: Vec<Resource> = super::executor::snapshot(&target.resources)
                    .into_values()
                    .chain(
                        target
                            .superseded
                            .lock()
                            .map(|superseded| superseded.clone())
                            .unwrap_or_default(),
                    )
                    .collect();
                let resumption = self
                    .resumption(&stack, &rows)
                    .await?
                    .map_err(Error::Conflict)?;
                let reason = format!(
                    "Stack {} resumed: {gone} went away while it ran; engine {} continues it",
                    stack.action.as_str(),
                    self.engine.engine_id
                );
                stack.status_reason.clone_from(&reason);
                stack.updated_at = ember_runtime::time::now();
                self.engine
                    .writer
                    .record_stack(fence, &stack, stack_event(&stack, &reason))
                    .await?;
                Ok((stack, target, resumption))
            })
            .await;
        let ((stack, target, resumption), stack_lease) = match started {
            Ok(started) => started,
            Err(error) => {
                tracing::warn!(stack_id = %candidate.stack.id, %error, "orphaned stack not resumed");
                return Ok(None);
            }
        };
        tracing::warn!(stack_id = %stack.id, action = stack.action.as_str(), %gone, "resuming an orphaned stack operation");
        let engine = self.engine.clone();
        let run: super::Run = match resumption {
            Resumption::Create => Box::pin(create::run_create(
                engine,
                stack,
                target,
                stack_lease,
                None,
                super::writer::Recorded::already(),
            )),
            Resumption::Delete => Box::pin(delete::run_delete(
                engine,
                stack,
                target,
                stack_lease,
                super::writer::Recorded::already(),
            )),
            Resumption::Update(origin) => {
                update::resume_update(engine, stack, target, origin, stack_lease)
            }
            Resumption::UpdateRollback(origin) => {
                update::resume_rollback(engine, stack, target, origin, stack_lease)
            }
            Resumption::CreateRollback => Box::pin(create::run_create_rollback(
                engine,
                stack,
                target,
                stack_lease,
            )),
            Resumption::Action(action) => {
                actions::resume_action(engine, stack, target, action, stack_lease)
            }
            Resumption::LockChange(lock) => {
                maintenance_lock::resume_lock_change(engine, stack, target, &lock, stack_lease)
            }
        };
        Ok(Some(run))
    }

    /// How long the sweep sleeps: until just after the soonest lease of a
    /// stack in progress expires — a holder that is alive renews it before,
    /// one that died is taken over then, not up to a period later — and at
    /// most `period`. Leases are looked at from `since`, when the pass that
    /// just ran began: one that expired while it ran was not among its
    /// candidates and is swept at once (looking from now, it waited a whole
    /// period: a take-over 10 s late in a compose run); one that expired
    /// before was, and left alone for a reason.
    pub async fn until_next_sweep(&self, period: Duration, since: DateTime<Utc>) -> Duration {
        let now = ember_runtime::time::now();
        match self.store().next_lease_expiry(since).await {
            Ok(Some(expiry)) => {
                let wait = (expiry - now).to_std().unwrap_or(Duration::ZERO);
                (wait + Duration::from_millis(20)).min(period)
            }
            Ok(None) => period,
            Err(error) => {
                tracing::warn!(%error, "cannot read the next lease expiry");
                period
            }
        }
    }

    /// The start of [`Self::hand_back`]: from now on root operations that
    /// can be resumed start no new resource step.
    pub fn begin_hand_back(&self) {
        self.engine.draining.cancel();
    }

    /// Shutdown: root operations that can be resumed (see the module's
    /// doc) start no new resource step and hand their operations back
    /// unfinished, with their leases released, for another engine — or
    /// this one, restarted — to resume at once; other operations run on. Waits up to `grace` for every run this
    /// engine started to stop, and returns how many were still running then
    /// (their leases expire, and the sweep decides).
    pub async fn hand_back(&self, grace: Duration) -> usize {
        self.begin_hand_back();
        self.engine.runs.close();
        if tokio::time::timeout(grace, self.engine.runs.wait())
            .await
            .is_err()
        {
            let left = self.engine.runs.len();
            tracing::warn!(
                left,
                ?grace,
                "stack operations still running at the end of the shutdown grace period: their leases will expire and another engine's sweep takes them over"
            );
            return left;
        }
        0
    }

    /// Runs [`Self::recover_orphaned_stacks`] now and then every third of
    /// the lease TTL, until `shutdown`.
    pub fn spawn_orphan_sweeper(self: &Arc<Self>, shutdown: tokio_util::sync::CancellationToken) {
        // A third of the TTL: an orphan waits at most 4/3 of it.
        self.spawn_orphan_sweeper_every(self.engine.lease_ttl / 3, shutdown);
    }

    /// [`Self::spawn_orphan_sweeper`] with another period (tests that run
    /// with short leases).
    pub fn spawn_orphan_sweeper_every(
        self: &Arc<Self>,
        period: Duration,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        let operations = self.clone();
        tokio::spawn(async move {
            loop {
                let pass_started = ember_runtime::time::now();
                if let Err(error) = operations.recover_orphaned_stacks().await {
                    tracing::warn!(%error, "sweeping orphaned stacks failed");
                }
                let pause = operations.until_next_sweep(period, pass_started).await;
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(pause) => {}
                }
            }
        });
    }
}

/// What kind of step a resource row left `*_IN_PROGRESS` was, for its
/// type's [`crate::resources::ResourceType::take_over`]: in a delete, or
/// the rollback of a create, every row is deleted; a rollback row of an
/// update is an in-place update; otherwise the row's own action.
fn in_flight_step(resumption: &Resumption, row: &Resource) -> StackAction {
    match (resumption, row.action) {
        (Resumption::Delete | Resumption::CreateRollback, _) => StackAction::Delete,
        (_, StackAction::Rollback) => StackAction::Update,
        (_, action) => action,
    }
}
