//! An update's run, in the task holding the stack lease: plugins before,
//! the resources brought to the target within the timeout, a restore's
//! data put back, a rollback when it failed (unless disabled), the final
//! state, plugins after.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::resources::update_resources;
use super::rollback::rollback;
use super::{Previous, UpdateKind};
use crate::domain::{ActionStatus, Stack, StackAction};
use crate::stacks::bounds::within_bounds;
use crate::stacks::executor::{RunTarget, StackEngine};
use crate::stacks::failure::RunFailure;
use crate::stacks::{conclude, lease};

pub(super) async fn run_update(
    engine: Arc<StackEngine>,
    mut stack: Stack,
    target: RunTarget,
    previous: Previous,
    stack_lease: lease::StackLease,
    cancel: CancellationToken,
    kind: UpdateKind,
) {
    let stop = engine.stops.register(stack.id);
    let Previous {
        parsed: previous,
        definition: previous_definition,
        before,
    } = previous;
    let previous_stack =
        before
            .as_ref()
            .map(|(stack, rows)| crate::stacks::plugins::PreviousStack {
                stack,
                rows,
                definition: &previous_definition,
                parsed: previous.as_deref(),
            });
    let passed = crate::stacks::plugins::before(&engine, &stack, previous_stack).await;
    drop(before);
    let passed = match passed {
        Ok(passed) => passed,
        Err(reason) => {
            engine.stops.forget_update(stack.id);
            conclude(&mut stack, ActionStatus::Failed, reason, stack_lease).await;
            return;
        }
    };
    let old_graph = previous.as_ref().map_or_else(
        || target.parsed.graph.clone(),
        |parsed| parsed.graph.clone(),
    );
    let outcome = within_bounds(
        (&engine, &target),
        update_resources(
            engine.clone(),
            target.clone(),
            old_graph,
            StackAction::Update,
            cancel.clone(),
        ),
        engine.operation_timeout(&stack),
        &stop,
        "Update timed out",
        stack.action.as_str(),
    )
    .await;
    let outcome = match (outcome, &kind) {
        (Ok(()), UpdateKind::Restore(recorded)) => {
            crate::stacks::snapshots::restore_data(&engine, &target, recorded).await
        }
        (outcome, _) => outcome,
    };
    if outcome.is_ok() {
        engine.stops.forget_update(stack.id);
    }
    let operation = stack.action.as_str();
    let (failure, stack_lease) =
        match crate::stacks::complete_or_fail(&mut stack, &target, outcome, operation, stack_lease)
            .await
        {
            Ok(()) => {
                crate::stacks::plugins::after(&engine, &stack, kind.action(), passed).await;
                return;
            }
            Err(failed) => failed,
        };
    let outcome = match (failure, previous) {
        (stop @ (RunFailure::LeaseLost | RunFailure::HandedBack), _) => Err(stop),
        // No FAILED in between: pollers must not stop before the rollback.
        // A delete stopped it: the delete removes what it made.
        (failure, Some(previous))
            if !stop.stopped() && (cancel.is_cancelled() || !stack.disable_rollback) =>
        {
            rollback(
                &engine,
                &mut stack,
                previous,
                previous_definition,
                &target,
                &failure.reason(),
            )
            .await
        }
        (failure, _) => Err(failure),
    };
    engine.stops.forget_update(stack.id);
    let (status, reason) = match crate::stacks::final_state(outcome, stack.action.as_str()) {
        Ok(end) => end,
        Err(stop) => {
            return crate::stacks::stop_without_final_state(&stack, stop, stack_lease).await;
        }
    };
    conclude(&mut stack, status, reason, stack_lease).await;
    crate::stacks::plugins::after(&engine, &stack, kind.action(), passed).await;
}
