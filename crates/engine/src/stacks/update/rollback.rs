//! Rolling a failed update back: an update towards the previous
//! definition, recorded as ROLLBACK.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::resources::update_resources;
use crate::domain::{ActionStatus, Resource, Stack, StackAction, StackDefinition};
use crate::stacks::definition::ParsedStack;
use crate::stacks::executor::{RunTarget, StackEngine, snapshot};
use crate::stacks::failure::RunResult;
use crate::stacks::stack_event;

/// Moves the stack back to `previous`: an update towards the old definition.
pub(super) async fn rollback(
    engine: &Arc<StackEngine>,
    stack: &mut Stack,
    previous: Arc<ParsedStack>,
    previous_definition: StackDefinition,
    failed: &RunTarget,
    failure: &str,
) -> RunResult {
    stack.action = StackAction::Rollback;
    stack.status = ActionStatus::InProgress;
    stack.status_reason = format!("Stack ROLLBACK started: {failure}");
    stack.updated_at = ember_runtime::time::now();
    let rows = engine.store.list_resources(stack.id).await?;
    let target = RunTarget::new(stack, previous.clone(), rows, failed.fence);
    let existing: BTreeSet<String> = snapshot(&target.resources).keys().cloned().collect();
    let now = ember_runtime::time::now();
    let new_rows: Vec<Resource> = previous
        .enabled
        .iter()
        .filter(|name| !existing.contains(*name))
        .map(|name| Resource::initial(stack.id, name, &previous.resource_types[name], now))
        .collect();
    for row in &new_rows {
        crate::stacks::executor::store_state(&target.resources, row.clone());
    }
    engine
        .store
        .begin_stack_update(
            stack,
            &previous_definition,
            &new_rows,
            &stack_event(stack, &stack.status_reason),
            target.fence,
        )
        .await?;
    let rolled_back = update_resources(
        engine.clone(),
        target.clone(),
        failed.parsed.graph.clone(),
        StackAction::Rollback,
        CancellationToken::new(),
    )
    .await;
    crate::stacks::executor::settled(&target, rolled_back).await
}
