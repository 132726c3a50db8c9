//! Resuming an update, or an update's rollback, that an engine handed back
//! at shutdown or left behind when it died (see `orphans.rs`). What the
//! update already did is in the resource rows: a resource updated in place
//! has its new properties (and is left alone), a replacement is the newest
//! row of its name (the older one is retired at the end), a removed
//! resource is gone; a step a dead engine had in flight is redone on its
//! own row. The definition the update moves away from was kept when it
//! began (`StackStore::load_update_origin`): a resumed update rolls back to
//! it, and a resumed rollback retires what the update added by its graph.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::resources::update_resources;
use super::run::run_update;
use super::{Previous, UpdateKind};
use crate::domain::template::StackIdentity;
use crate::domain::{Stack, StackAction, StackDefinition};
use crate::stacks::definition::ParsedStack;
use crate::stacks::executor::{RunTarget, StackEngine};

use crate::stacks::bounds::within_bounds;
use crate::stacks::{Run, conclude, end, lease, plugins};

/// The run that continues `stack`'s UPDATE towards its stored definition
/// (`target`), rolling back to `origin` if it fails (unless rollback is
/// disabled) — cancellable on this engine from now on.
pub(in crate::stacks) fn resume_update(
    engine: Arc<StackEngine>,
    stack: Stack,
    target: RunTarget,
    origin: StackDefinition,
    stack_lease: lease::StackLease,
) -> Run {
    let previous = Previous {
        parsed: parse(&engine, &stack, &origin).map(Arc::new),
        definition: origin,
        before: None,
    };
    let cancel = CancellationToken::new();
    engine.stops.register_update(stack.id, cancel.clone());
    Box::pin(run_update(
        engine,
        stack,
        target,
        previous,
        stack_lease,
        cancel,
        UpdateKind::Update,
    ))
}

/// The run that continues rolling `stack` back to its stored definition
/// (`target`); `origin` is the definition the failed update had moved to.
pub(in crate::stacks) fn resume_rollback(
    engine: Arc<StackEngine>,
    stack: Stack,
    target: RunTarget,
    origin: StackDefinition,
    stack_lease: lease::StackLease,
) -> Run {
    Box::pin(run_rollback(engine, stack, target, origin, stack_lease))
}

async fn run_rollback(
    engine: Arc<StackEngine>,
    mut stack: Stack,
    target: RunTarget,
    origin: StackDefinition,
    stack_lease: lease::StackLease,
) {
    let passed = match plugins::before(&engine, &stack, None).await {
        Ok(passed) => passed,
        Err(reason) => {
            conclude(
                &mut stack,
                crate::domain::ActionStatus::Failed,
                reason,
                stack_lease,
            )
            .await;
            return;
        }
    };
    // Resources the update added are retired dependents first, by the
    // graph of the definition it had moved to.
    let old_graph = parse(&engine, &stack, &origin).map_or_else(
        || target.parsed.graph.clone(),
        |parsed| parsed.graph.clone(),
    );
    let stop = engine.stops.register(stack.id);
    let operation = StackAction::Rollback.as_str();
    let outcome = within_bounds(
        (&engine, &target),
        update_resources(
            engine.clone(),
            target.clone(),
            old_graph,
            StackAction::Rollback,
            CancellationToken::new(),
        ),
        engine.operation_timeout(&stack),
        &stop,
        "Rollback timed out",
        operation,
    )
    .await;
    if end(&mut stack, &target, outcome, operation, stack_lease).await {
        plugins::after(&engine, &stack, StackAction::Rollback, passed).await;
    }
}

/// `definition` parsed for `stack`; `None` when it no longer parses (then
/// there is nothing to roll back to, as for an update whose previous
/// template does not parse).
fn parse(engine: &StackEngine, stack: &Stack, definition: &StackDefinition) -> Option<ParsedStack> {
    ParsedStack::build(
        definition,
        StackIdentity {
            stack_name: stack.name.clone(),
            stack_id: stack.id.to_string(),
            project_id: stack.project_id.clone(),
        },
        &engine.registry,
    )
    .ok()
}
