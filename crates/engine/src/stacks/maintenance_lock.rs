//! Maintenance lock and unlock of stacks (spec heat-lock-stack). Locking
//! records who locked, when, how far and why, then asks every resource to
//! lock what it manages — nested stacks lock with their root at the same
//! level; at level `all` instances are locked as the caller. A resource
//! that fails leaves LOCK_FAILED, from which unlock brings everything back.
//! An admin's lock can only be lifted by an admin. A lock may carry an
//! expiry: every engine's sweep ([`StackOperations::unlock_expired_stacks`])
//! unlocks a root stack whose lock expired, as the lock's holder, once.

use std::collections::BTreeSet;
use std::sync::Arc;

use ember_runtime::Identity;

use super::executor::{
    Direction, RunTarget, StackEngine, current, end_step, snapshot, transition, walk,
};
use super::failure::{RunFailure, RunResult, resource_reason};
use super::lease::WhenBusy;
use super::{
    LeaseHolder, StackCaller, StackOperation, StackOperations, conclude, lease, stack_event,
};
use crate::domain::{ActionStatus, LockLevel, MaintenanceLock, Stack, StackAction};
use crate::error::{Error, Result};
use crate::resources::{LockChange, LockRequest, ResourceType};

/// The most expired stack locks one sweep acts on (the next takes the
/// rest).
const EXPIRED_LOCKS_PER_SWEEP: u64 = 200;

/// How many expired stack locks one engine begins unlocking at once.
const EXPIRED_UNLOCKS_AT_ONCE: usize = 64;

/// On whose behalf a stack's lock moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockedFor {
    /// The user's own request.
    User,
    /// The lock of the stack above reaching this nested stack, still on
    /// behalf of that user.
    ParentStack,
    /// The engine lifting a lock whose expiry passed, as its holder.
    Expiry,
}

/// Whether an operation would be allowed now, and everything that blocks
/// it (the first is what the operation answers).
#[derive(Debug, Clone)]
pub struct OperationCheck {
    pub blockers: Vec<crate::domain::admission::Blocker>,
    /// Whether an admin's break-glass would run it.
    pub break_glass_would_pass: bool,
    pub lock: Option<MaintenanceLock>,
}

impl OperationCheck {
    pub fn allowed(&self) -> bool {
        self.blockers.is_empty()
    }
}

impl StackOperations {
    pub async fn lock_stack(
        &self,
        identity: &Identity,
        name_or_id: &str,
        level: LockLevel,
        reason: Option<String>,
    ) -> Result<Stack> {
        self.lock_stack_until(identity, name_or_id, level, reason, None)
            .await
    }

    /// [`Self::lock_stack`], the engine unlocking the stack at
    /// `expires_at` (locking it again before then renews or changes it).
    pub async fn lock_stack_until(
        &self,
        identity: &Identity,
        name_or_id: &str,
        level: LockLevel,
        reason: Option<String>,
        expires_at: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<Stack> {
        if let Some(reason) = &reason
            && (reason.is_empty() || reason.chars().count() > 255)
        {
            return Err(Error::InvalidInput(
                "reason: must be 1-255 characters".to_owned(),
            ));
        }
        let found = self.find_stack(identity, name_or_id).await?;
        let request = LockRequest {
            level,
            caller: identity.clone(),
            reason,
            expires_at,
        };
        let (stack, run) = self
            .begin_maintenance_lock(
                found,
                request,
                LockChange::Lock,
                LockedFor::User,
                WhenBusy::Refuse,
            )
            .await?;
        self.engine.spawn_run(run);
        Ok(stack)
    }

    pub async fn unlock_stack(&self, identity: &Identity, name_or_id: &str) -> Result<Stack> {
        let found = self.find_stack(identity, name_or_id).await?;
        let level = found
            .maintenance_lock
            .as_ref()
            .map_or(LockLevel::All, |lock| lock.level);
        let request = LockRequest {
            level,
            caller: identity.clone(),
            reason: None,
            expires_at: None,
        };
        let (stack, run) = self
            .begin_maintenance_lock(
                found,
                request,
                LockChange::Unlock,
                LockedFor::User,
                WhenBusy::Refuse,
            )
            .await?;
        self.engine.spawn_run(run);
        Ok(stack)
    }

    /// Unlocks every root stack whose lock expired (as its holder; the
    /// unlock reaches its nested stacks and instances as any unlock does);
    /// returns how many unlocks this engine began. A stack another engine
    /// began unlocking first, or that was unlocked or locked again since,
    /// is refused by admission and left alone: the expiry is acted on
    /// once.
    pub async fn unlock_expired_stacks(&self) -> Result<usize> {
        use futures::StreamExt;
        let now = ember_runtime::time::now();
        let expired = self
            .store()
            .expired_stack_locks(now, EXPIRED_LOCKS_PER_SWEEP)
            .await?;
        // Begun many at once, so that their lease takes and starts share
        // the writer's commits (one after another, each waited for its
        // own: ~3 ms a stack on SQLite).
        let begun: Vec<Result<bool>> = futures::stream::iter(expired)
            .map(|stack| self.unlock_expired(stack))
            .buffer_unordered(EXPIRED_UNLOCKS_AT_ONCE)
            .collect()
            .await;
        let mut count = 0;
        for outcome in begun {
            if outcome? {
                count += 1;
            }
        }
        Ok(count)
    }

    /// Begins unlocking one stack whose lock expired: whether this engine
    /// began it.
    async fn unlock_expired(&self, stack: Stack) -> Result<bool> {
        let Some(lock) = stack.maintenance_lock.clone() else {
            return Ok(false);
        };
        let holder = crate::lock_expiry::holder(
            &lock.locked_by_user,
            &stack.project_id,
            lock.locked_by_admin,
        );
        let request = LockRequest {
            level: lock.level,
            caller: holder,
            reason: None,
            expires_at: None,
        };
        match self
            .begin_maintenance_lock(
                stack,
                request,
                LockChange::Unlock,
                LockedFor::Expiry,
                WhenBusy::Refuse,
            )
            .await
        {
            Ok((stack, run)) => {
                tracing::info!(stack_id = %stack.id, "stack lock expired: unlocking");
                self.engine.spawn_run(run);
                Ok(true)
            }
            // Busy, or changed since it was read: another engine (or the
            // holder) got there first.
            Err(Error::Conflict(_) | Error::NotFound(_)) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Runs [`Self::unlock_expired_stacks`] until `shutdown` (see `lock_expiry::spawn_sweep`).
    pub fn spawn_lock_expiry(self: &Arc<Self>, shutdown: tokio_util::sync::CancellationToken) {
        crate::lock_expiry::spawn_sweep(
            self,
            shutdown,
            "stack locks",
            |operations| async move { operations.unlock_expired_stacks().await },
            |operations| async move { operations.store().next_stack_lock_expiry().await },
        );
    }

    /// The dry run: would `operation` be allowed on the stack now?
    pub async fn check_operation(
        &self,
        identity: &Identity,
        name_or_id: &str,
        operation: StackOperation,
    ) -> Result<OperationCheck> {
        let stack = self.find_stack(identity, name_or_id).await?;
        // The very function the operation asks: they cannot disagree.
        let (mut blockers, _) = self
            .blockers(&stack, operation, StackCaller::User(identity))
            .await?;
        // The lifecycle plug-ins' verdicts, asked in their dry-run mode.
        for (plugin, reason) in super::plugins::ask(&self.engine, &stack, operation).await {
            blockers.push(crate::domain::admission::Blocker::new(
                crate::domain::admission::BlockerKind::Plugin,
                Error::Conflict(format!(
                    "lifecycle plugin {plugin:?} would stop {}: {reason}",
                    operation.as_str()
                )),
            ));
        }
        Ok(OperationCheck {
            break_glass_would_pass: crate::domain::admission::break_glass_would_pass(
                &blockers,
                crate::domain::admission::stack::BREAKABLE_BY_GLASS.contains(&operation),
            ),
            blockers,
            lock: stack.maintenance_lock,
        })
    }

    /// Admission of a lock or unlock: a user's is recorded when refused;
    /// an expiry's is not (a stack unlocked or locked again since is left
    /// alone, on every sweep, by every engine).
    async fn admit_lock_change(
        &self,
        stack: &Stack,
        operation: StackOperation,
        caller: StackCaller<'_>,
        locked_for: LockedFor,
    ) -> Result<()> {
        match locked_for {
            LockedFor::Expiry => {
                crate::domain::admission::first(&self.blockers(stack, operation, caller).await?.0)
            }
            LockedFor::User | LockedFor::ParentStack => self.admit(stack, operation, caller).await,
        }
    }

    /// The audit record of a lock or unlock begun on `stack` (as it was
    /// `before`): a user's, or the expiry's on the holder's behalf. Nested
    /// stacks moving with their root are not recorded again.
    /// The audit record of a user's lock change or an expiry, written
    /// with the change's start (none for a parent stack's change of its
    /// nested stacks, nor without an audit trail).
    fn lock_change_record(
        &self,
        stack: &Stack,
        request: &LockRequest,
        operation: StackOperation,
        locked_for: LockedFor,
    ) -> Option<crate::domain::audit::AuditRecord> {
        use crate::domain::audit::AuditOutcome;
        self.engine.audit.get()?;
        let (outcome, reason) = match locked_for {
            LockedFor::ParentStack => return None,
            LockedFor::User => (
                AuditOutcome::Accepted,
                request.reason.clone().unwrap_or_default(),
            ),
            LockedFor::Expiry => (
                AuditOutcome::Expired,
                stack
                    .maintenance_lock
                    .as_ref()
                    .map(MaintenanceLock::describe)
                    .unwrap_or_default(),
            ),
        };
        Some(crate::audit::AuditTrail::record_of(
            &request.caller.user_id,
            &super::stack_audit_subject(stack),
            operation.as_str(),
            outcome,
            &reason,
            "",
        ))
    }

    /// Takes the lease (as `when_busy` says when another operation holds
    /// it), records LOCK/UNLOCK_IN_PROGRESS and returns the run.
    pub(crate) async fn begin_maintenance_lock(
        &self,
        found: Stack,
        request: LockRequest,
        change: LockChange,
        locked_for: LockedFor,
        when_busy: WhenBusy,
    ) -> Result<(Stack, super::Run)> {
        let locking = change == LockChange::Lock;
        let operation = if locking {
            StackOperation::Lock
        } else {
            StackOperation::Unlock
        };
        let caller = match locked_for {
            LockedFor::User | LockedFor::Expiry => StackCaller::User(&request.caller),
            LockedFor::ParentStack => StackCaller::ParentOperation(Some(&request.caller)),
        };
        self.admit_lock_change(&found, operation, caller, locked_for)
            .await?;
        let label = change.action().as_str();
        let stack_lease = self
            .engine
            .take_lease_when(
                found.id,
                &found.name,
                LeaseHolder::Action(change.action()),
                when_busy,
            )
            .await?;
        let fence = stack_lease.fence();
        let ((stack, target), stack_lease) = stack_lease
            .start(async {
                let mut stack =
                    self.store().get_stack(found.id).await?.ok_or_else(|| {
                        Error::NotFound(format!("stack {:?} not found", found.name))
                    })?;
                self.admit_lock_change(&stack, operation, caller, locked_for)
                    .await?;
                let target = self.load_target(&stack, fence).await?;
                let now = ember_runtime::time::now();
                stack.action = change.action();
                stack.status = ActionStatus::InProgress;
                stack.status_reason = match (&locked_for, &stack.maintenance_lock) {
                    (LockedFor::Expiry, Some(lock)) => format!(
                        "Stack {label} started: lock expired (was {})",
                        lock.describe()
                    ),
                    _ => format!("Stack {label} started"),
                };
                stack.updated_at = now;
                // Of the lock as it was (the expiry's record describes it).
                let audit = self.lock_change_record(&stack, &request, operation, locked_for);
                if locking {
                    stack.maintenance_lock = Some(MaintenanceLock {
                        level: request.level,
                        locked_by_user: request.caller.user_id.clone(),
                        locked_by_admin: request.caller.is_admin(),
                        locked_at: now,
                        reason: request.reason.clone(),
                        expires_at: request.expires_at,
                    });
                }
                self.engine
                    .writer
                    .record_stack_audited(
                        fence,
                        &stack,
                        stack_event(&stack, &stack.status_reason),
                        audit,
                    )
                    .await?;
                Ok((stack, target))
            })
            .await?;
        let run: super::Run = Box::pin(run_maintenance_lock(
            self.engine.clone(),
            stack.clone(),
            target,
            request,
            stack_lease,
        ));
        Ok((stack, run))
    }
}

/// Continues the lock or unlock of `lock` an engine that went away began
/// (see `orphans.rs`), as the lock's holder, at its level, with its reason
/// and expiry. Every resource is asked again (lock handlers are
/// idempotent); the audit record and the start event were written when it
/// began, and are not written twice.
pub(super) fn resume_lock_change(
    engine: Arc<StackEngine>,
    stack: Stack,
    target: RunTarget,
    lock: &MaintenanceLock,
    stack_lease: lease::StackLease,
) -> super::Run {
    let request = LockRequest {
        level: lock.level,
        caller: crate::lock_expiry::holder(
            &lock.locked_by_user,
            &stack.project_id,
            lock.locked_by_admin,
        ),
        reason: lock.reason.clone(),
        expires_at: lock.expires_at,
    };
    Box::pin(run_maintenance_lock(
        engine,
        stack,
        target,
        request,
        stack_lease,
    ))
}

async fn run_maintenance_lock(
    engine: Arc<StackEngine>,
    mut stack: Stack,
    target: RunTarget,
    request: LockRequest,
    stack_lease: lease::StackLease,
) {
    let locking = stack.action == StackAction::Lock;
    let passed = match super::plugins::before(&engine, &stack, None).await {
        Ok(passed) => passed,
        Err(reason) => {
            conclude(&mut stack, ActionStatus::Failed, reason, stack_lease).await;
            return;
        }
    };
    let names: BTreeSet<String> = snapshot(&target.resources)
        .values()
        .filter(|resource| resource.action != StackAction::Init && resource.physical_id.is_some())
        .map(|resource| resource.name.clone())
        .collect();
    let graph = target.parsed.graph.clone();
    let action = stack.action;
    let walking = walk(&graph, &names, Direction::DependenciesFirst, |name| {
        let engine = engine.clone();
        let target = target.clone();
        let request = request.clone();
        async move { lock_one(&engine, &target, &name, action, &request).await }
    });
    let outcome = tokio::time::timeout(engine.operation_timeout(&stack), walking)
        .await
        .unwrap_or_else(|_| Err(RunFailure::Failed(format!("{} timed out", action.as_str()))));
    let outcome = super::executor::settled(&target, outcome).await;
    // A failure leaves the lock recorded so unlock can clean the dirty
    // state up.
    let (status, reason) = match super::final_state(outcome, action.as_str()) {
        Ok(end) => end,
        Err(stop) => return super::stop_without_final_state(&stack, stop, stack_lease).await,
    };
    if status == ActionStatus::Complete && !locking {
        stack.maintenance_lock = None;
    }
    conclude(&mut stack, status, reason, stack_lease).await;
    super::plugins::after(&engine, &stack, action, passed).await;
}

async fn lock_one(
    engine: &StackEngine,
    target: &RunTarget,
    name: &str,
    action: StackAction,
    request: &LockRequest,
) -> RunResult {
    let current = current(&target.resources, name)
        .ok_or_else(|| format!("resources.{name}: no state recorded"))?;
    let Some(resource_type) = engine.registry.get(&current.type_name) else {
        return Err(RunFailure::Failed(format!(
            "resources.{name}: unknown resource type {:?}",
            current.type_name
        )));
    };
    // A lock's or unlock's own failure is what the next one repairs; any
    // other is kept.
    let failed_otherwise = current.status == ActionStatus::Failed
        && !matches!(current.action, StackAction::Lock | StackAction::Unlock);
    if failed_otherwise {
        return keep_failure(engine, target, current, resource_type, action, request).await;
    }
    if !resource_type.has_lock_handler() {
        // Nothing to lock: one transition, straight to the final state.
        transition(
            engine,
            target,
            current,
            action,
            ActionStatus::Complete,
            "state changed",
        )
        .await?;
        return Ok(());
    }
    let in_progress = transition(
        engine,
        target,
        current,
        action,
        ActionStatus::InProgress,
        "state changed",
    )
    .await?;
    let answered = call_lock_handler(resource_type, &in_progress, action, request).await;
    end_step(
        engine,
        target,
        in_progress,
        action,
        answered,
        |mut done, data| {
            done.data = data;
            done
        },
    )
    .await
}

/// Locks or unlocks a failed resource — one marked unhealthy
/// (`CHECK_FAILED`), or one another failed operation left — keeping its
/// failure:
/// the lock is not a repair, and the next update must still replace it
/// (heat-mark-unhealthy). A type without a lock handler is left as it is;
/// one with a handler is locked without an IN_PROGRESS state, so a crash
/// while it is called leaves the failure recorded and the run taken over
/// calls the handler again (locking is idempotent).
async fn keep_failure(
    engine: &StackEngine,
    target: &RunTarget,
    current: crate::domain::Resource,
    resource_type: &Arc<dyn ResourceType>,
    action: StackAction,
    request: &LockRequest,
) -> RunResult {
    if !resource_type.has_lock_handler() {
        return Ok(());
    }
    let result = call_lock_handler(resource_type, &current, action, request).await;
    let data = match result {
        Ok(data) => data,
        Err(failure) => {
            return Err(RunFailure::Failed(format!(
                "Resource {} failed: resources.{}: {}",
                action.as_str(),
                current.name,
                resource_reason(failure)?
            )));
        }
    };
    let mut done = current;
    done.data = data;
    let (kept_action, reason) = (done.action, done.status_reason.clone());
    transition(
        engine,
        target,
        done,
        kept_action,
        ActionStatus::Failed,
        &reason,
    )
    .await?;
    Ok(())
}

/// `resource_type`'s lock handler (`action` Lock) or unlock handler (any
/// other) on `resource`: the type's private data after it.
async fn call_lock_handler(
    resource_type: &Arc<dyn ResourceType>,
    resource: &crate::domain::Resource,
    action: StackAction,
    request: &LockRequest,
) -> Result<serde_json::Value, crate::resources::ResourceFailure> {
    if action == StackAction::Lock {
        resource_type.lock(resource, request).await
    } else {
        resource_type.unlock(resource, request).await
    }
}
