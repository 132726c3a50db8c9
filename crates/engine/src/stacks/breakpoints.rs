//! Breakpoint hooks (Heat's `hooks` in the environment's
//! `resource_registry.resources.<name or pattern>`): a resource stops
//! before (or after) it is created, updated or deleted until someone
//! signals it `{"unset_hook": "<hook>"}` — what `openstack stack hook
//! poll|clear` drive. Not to be confused with Ember's lifecycle
//! plug-points (plugins around whole operations) or Senlin's lifecycle
//! hooks on scale-in.
//!
//! Reaching a hook leaves the event Heat leaves (`CREATE paused until Hook
//! pre-create is cleared`), clearing it `Hook pre-create is cleared`; the
//! resource keeps its state meanwhile (a pre-create stays INIT_COMPLETE).
//! The pause is a row every replica sees, so a clear reaching another
//! engine still releases it.

use ember_runtime::Identity;
use serde_json::Value;

use super::StackOperations;
use super::executor::{RunTarget, StackEngine, current};
use super::failure::RunResult;
use super::mark_unhealthy::find_resource;
use crate::domain::{Event, Resource, StackAction};
use crate::error::{Error, Result};
use crate::resources::wait_condition::HOOK_TYPES;

/// Pauses `resource` at `hook` when the stack's environment sets that hook
/// for it; returns once the hook is cleared.
pub(super) async fn break_if_required(
    engine: &StackEngine,
    target: &RunTarget,
    name: &str,
    action: StackAction,
    hook: &str,
) -> RunResult {
    if !target.parsed.environment.hooks_for(name).contains(hook) {
        return Ok(());
    }
    let Some(conditions) = engine.registry.wait_conditions() else {
        return Ok(());
    };
    let Some(resource) = current(&target.resources, name) else {
        return Ok(());
    };
    // Set before the event says so: a client that reads the event and
    // clears the hook at once must find it set.
    conditions
        .set_breakpoint(target.stack_id, name, hook)
        .await?;
    record(
        engine,
        &resource,
        format!("{} paused until Hook {hook} is cleared", action.as_str()),
    )
    .await?;
    tracing::info!(stack_id = %target.stack_id, resource = name, hook, "paused at a breakpoint hook");
    conditions
        .wait_at_breakpoint(target.stack_id, name, hook)
        .await?;
    Ok(())
}

async fn record(engine: &StackEngine, resource: &Resource, reason: String) -> Result<()> {
    let mut event = Event::for_resource(resource, ember_runtime::time::now());
    event.reason = reason;
    engine.store.record_events(&[event]).await
}

/// The hook a signal's `{"unset_hook": …}` names, if it has one.
pub(super) fn unset_hook_of(details: &Value) -> Option<&Value> {
    details.as_object()?.get("unset_hook")
}

impl StackOperations {
    /// Clears breakpoint `hook` of resource `name` of `stack` (a signal
    /// `{"unset_hook": hook}`): 400 for a hook type Heat does not know or
    /// one the resource is not paused at.
    pub(super) async fn clear_breakpoint(
        &self,
        identity: &Identity,
        stack: &str,
        name: &str,
        hook: &Value,
    ) -> Result<String> {
        let stack = self.find_stack(identity, stack).await?;
        let resource = find_resource(
            &stack.name,
            self.store().list_resources(stack.id).await?,
            name,
        )?;
        let hook = hook.as_str().unwrap_or_default();
        if !HOOK_TYPES.contains(&hook) {
            return Err(Error::InvalidInput(format!(
                "Invalid hook type {:?} for resource {:?}: the hook types are {}",
                ember_runtime::quote::quoted(hook),
                resource.name,
                HOOK_TYPES.join(", ")
            )));
        }
        let conditions = self
            .engine
            .registry
            .wait_conditions()
            .ok_or_else(|| Error::Unavailable("breakpoints are not enabled".to_owned()))?;
        if !conditions
            .clear_breakpoint(stack.id, &resource.name, hook)
            .await?
        {
            return Err(Error::InvalidInput(format!(
                "The \"{hook}\" hook is not defined on resource {:?} (it is not paused there)",
                resource.name
            )));
        }
        let message = format!("Hook {hook} is cleared");
        record(&self.engine, &resource, message.clone()).await?;
        Ok(message)
    }
}
