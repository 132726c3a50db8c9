//! Suspend, resume and check: one action on every resource, along the
//! graph (suspend dependents first; resume and check dependencies first).
//! Check visits every resource even after a failure and reports them all,
//! as Heat's stack check does.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use ember_runtime::Identity;

use super::bounds::within_bounds;
use super::executor::{
    Direction, RunTarget, StackEngine, current, end_step, snapshot, transition, walk,
};
use super::failure::{RunFailure, RunResult};
use super::lease::WhenBusy;
use super::{
    LeaseHolder, StackCaller, StackOperation, StackOperations, conclude, lease, stack_event,
};
use crate::domain::{ActionStatus, Stack, StackAction, StackWideAction};
use crate::error::Result;
use crate::resources::ResourceFailure;

impl StackWideAction {
    fn operation(self) -> StackOperation {
        match self {
            StackWideAction::Suspend => StackOperation::Suspend,
            StackWideAction::Resume => StackOperation::Resume,
            StackWideAction::Check => StackOperation::Check,
        }
    }

    fn direction(self) -> Direction {
        match self {
            StackWideAction::Suspend => Direction::DependentsFirst,
            StackWideAction::Resume | StackWideAction::Check => Direction::DependenciesFirst,
        }
    }
}

impl StackOperations {
    pub async fn run_stack_wide_action(
        &self,
        identity: &Identity,
        name_or_id: &str,
        action: StackWideAction,
    ) -> Result<Stack> {
        let found = self.find_stack(identity, name_or_id).await?;
        let caller = StackCaller::User(identity);
        self.admit(&found, action.operation(), caller).await?;
        let (stack, run) = self
            .begin_stack_wide_action(found, name_or_id, action, caller, WhenBusy::Refuse)
            .await?;
        self.engine.spawn_run(run);
        Ok(stack)
    }

    /// Takes the lease (as `when_busy` says when another operation holds
    /// it), records the action as started and returns its run.
    pub(crate) async fn begin_stack_wide_action(
        &self,
        found: Stack,
        name_or_id: &str,
        action: StackWideAction,
        caller: StackCaller<'_>,
        when_busy: WhenBusy,
    ) -> Result<(Stack, super::Run)> {
        let operation = action.stack_action().as_str();
        let stack_lease = self
            .engine
            .take_lease_when(
                found.id,
                &found.name,
                LeaseHolder::Action(action.stack_action()),
                when_busy,
            )
            .await?;
        let fence = stack_lease.fence();
        let ((stack, target), stack_lease) = stack_lease
            .start(async {
                let (mut stack, target) = self
                    .read_target(found.id, name_or_id, action.operation(), caller, fence)
                    .await?;
                stack.action = action.stack_action();
                stack.status = ActionStatus::InProgress;
                stack.status_reason = format!("Stack {operation} started");
                stack.updated_at = ember_runtime::time::now();
                self.engine
                    .writer
                    .record_stack(fence, &stack, stack_event(&stack, &stack.status_reason))
                    .await?;
                Ok((stack, target))
            })
            .await?;
        let run: super::Run = Box::pin(run_action(
            self.engine.clone(),
            stack.clone(),
            target,
            action,
            stack_lease,
            false,
        ));
        Ok((stack, run))
    }
}

/// The run that continues a suspend, resume or check an engine handed back
/// or left behind (see `orphans.rs`): a suspend or resume skips the
/// resources it finished already (their row says so: SUSPEND_COMPLETE,
/// RESUME_COMPLETE); a check checks every resource again, so that it
/// reports every failure.
pub(super) fn resume_action(
    engine: Arc<StackEngine>,
    stack: Stack,
    target: RunTarget,
    action: StackWideAction,
    stack_lease: lease::StackLease,
) -> super::Run {
    Box::pin(run_action(engine, stack, target, action, stack_lease, true))
}

async fn run_action(
    engine: Arc<StackEngine>,
    mut stack: Stack,
    target: RunTarget,
    action: StackWideAction,
    stack_lease: lease::StackLease,
    resumed: bool,
) {
    let stop = engine.stops.register(stack.id);
    let passed = match super::plugins::before(&engine, &stack, None).await {
        Ok(passed) => passed,
        Err(reason) => {
            conclude(&mut stack, ActionStatus::Failed, reason, stack_lease).await;
            return;
        }
    };
    let stack_action = action.stack_action();
    let done_before = |resource: &crate::domain::Resource| {
        resumed
            && action != StackWideAction::Check
            && (resource.action, resource.status) == (stack_action, ActionStatus::Complete)
    };
    let names: BTreeSet<String> = snapshot(&target.resources)
        .values()
        .filter(|resource| resource.action != StackAction::Init && !done_before(resource))
        .map(|resource| resource.name.clone())
        .collect();
    let check_failures = Arc::new(Mutex::new(Vec::new()));
    let graph = target.parsed.graph.clone();
    let walking = walk(&graph, &names, action.direction(), |name| {
        let engine = engine.clone();
        let target = target.clone();
        let check_failures = check_failures.clone();
        async move {
            // Handed back at shutdown, to be resumed (see `orphans.rs`).
            if engine.handing_back(&target) {
                return Err(RunFailure::HandedBack);
            }
            let result = act_on_one(&engine, &target, &name, action).await;
            match (action, result) {
                // Check goes on after a failure and reports every one.
                (StackWideAction::Check, Err(RunFailure::Failed(reason))) => {
                    if let Ok(mut failures) = check_failures.lock() {
                        failures.push(reason);
                    }
                    Ok(())
                }
                (_, result) => result,
            }
        }
    });
    let outcome = within_bounds(
        (&engine, &target),
        walking,
        engine.operation_timeout(&stack),
        &stop,
        &format!("{} timed out", stack_action.as_str()),
        stack_action.as_str(),
    )
    .await;
    let check_failures = check_failures
        .lock()
        .map(|failures| failures.clone())
        .unwrap_or_default();
    let outcome = match outcome {
        Ok(()) if !check_failures.is_empty() => Err(RunFailure::Failed(check_failures.join("; "))),
        other => other,
    };
    let operation = stack_action.as_str();
    if super::end(&mut stack, &target, outcome, operation, stack_lease).await {
        super::plugins::after(&engine, &stack, stack_action, passed).await;
    }
}

async fn act_on_one(
    engine: &StackEngine,
    target: &RunTarget,
    name: &str,
    action: StackWideAction,
) -> RunResult {
    let stack_action = action.stack_action();
    let current = current(&target.resources, name)
        .ok_or_else(|| format!("resources.{name}: no state recorded"))?;
    let in_progress = transition(
        engine,
        target,
        current,
        stack_action,
        ActionStatus::InProgress,
        "state changed",
    )
    .await?;
    let result = match engine.registry.get(&in_progress.type_name) {
        Some(resource_type) => match action {
            StackWideAction::Suspend => resource_type.suspend(&in_progress).await,
            StackWideAction::Resume => resource_type.resume(&in_progress).await,
            StackWideAction::Check => resource_type.check(&in_progress).await,
        },
        None => Err(ResourceFailure::new(format!(
            "unknown resource type {:?}",
            in_progress.type_name
        ))),
    };
    end_step(
        engine,
        target,
        in_progress,
        stack_action,
        result,
        |done, ()| done,
    )
    .await
}
