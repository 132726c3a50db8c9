//! Deleting resources, dependents first, honouring deletion policies, and
//! resuming a delete a previous engine left in flight.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::domain::template::DeletionPolicy;
use crate::domain::{ActionStatus, Resource, StackAction};
use crate::resources::ResourceFailure;
use crate::stacks::context::RuntimeContext;
use crate::stacks::failure::{RunFailure, RunResult};

use super::create::{RESUMED_STEP, in_flight};
use super::stack_engine::StackEngine;
use super::target::{RunTarget, current, end_step, snapshot, transition, with_states};
use super::walk::{Direction, walk};

/// Deletes every resource of the run that is not yet deleted, dependents
/// first. `action` is DELETE, or ROLLBACK when undoing a failed create.
pub async fn delete_resources(
    engine: Arc<StackEngine>,
    target: RunTarget,
    action: StackAction,
) -> RunResult {
    // Deleted already: by this operation before it was resumed, too.
    let names: BTreeSet<String> = snapshot(&target.resources)
        .values()
        .filter(|resource| {
            let deleted = resource.status == ActionStatus::Complete
                && (resource.action == StackAction::Delete
                    || (action == StackAction::Rollback && resource.action == action));
            !deleted
        })
        .map(|resource| resource.name.clone())
        .collect();
    let graph = target.parsed.graph.clone();
    walk(&graph, &names, Direction::DependentsFirst, |name| {
        let engine = engine.clone();
        let target = target.clone();
        async move {
            // Handed back at shutdown, to be resumed (see `orphans.rs`).
            if engine.handing_back(&target) {
                return Err(RunFailure::HandedBack);
            }
            // Breakpoint hooks stop a stack delete, not a rollback.
            if action == StackAction::Delete {
                crate::stacks::breakpoints::break_if_required(
                    &engine,
                    &target,
                    &name,
                    action,
                    "pre-delete",
                )
                .await?;
            }
            delete_one(&engine, &target, &name, action).await?;
            if action == StackAction::Delete {
                crate::stacks::breakpoints::break_if_required(
                    &engine,
                    &target,
                    &name,
                    action,
                    "post-delete",
                )
                .await?;
            }
            Ok(())
        }
    })
    .await
}

async fn delete_one(
    engine: &StackEngine,
    target: &RunTarget,
    name: &str,
    action: StackAction,
) -> RunResult {
    let current = current(&target.resources, name)
        .ok_or_else(|| format!("resources.{name}: no state recorded"))?;
    // A step an engine that went away had in flight may have made
    // something even without a physical id (a create): its type looks.
    let in_flight = in_flight(&current);
    // A create that failed may have made something before it failed (a
    // server Nova put in ERROR, a volume that went to error): a type that
    // acts outside its row is asked to delete it, finding it as it finds
    // what a create in flight made.
    let failed_create = current.action == StackAction::Create
        && current.status == ActionStatus::Failed
        && engine
            .registry
            .get(&current.type_name)
            .is_some_and(|resource_type| resource_type.acts_outside_its_row());
    let never_created = current.action == StackAction::Init
        || (current.physical_id.is_none() && in_flight.is_none() && !failed_create);
    let external = target
        .parsed
        .template
        .resources
        .get(name)
        .is_some_and(|definition| definition.external_id.is_some());
    let retained = match target.parsed.template.resources.get(name) {
        Some(definition) => with_states(&target.resources, |states| {
            let context = RuntimeContext {
                parsed: &target.parsed,
                resources: states,
                registry: &engine.registry,
            };
            definition
                .resolve_deletion_policy(&context)
                .is_ok_and(|policy| policy == DeletionPolicy::Retain)
        }),
        None => false,
    };
    let in_progress = transition(
        engine,
        target,
        current,
        action,
        ActionStatus::InProgress,
        if in_flight.is_some() {
            RESUMED_STEP
        } else {
            "state changed"
        },
    )
    .await?;
    if never_created || retained || external {
        let reason = if external {
            "external resource: left in place"
        } else if retained {
            "resource retained (deletion_policy Retain)"
        } else {
            "state changed"
        };
        transition(
            engine,
            target,
            in_progress,
            action,
            ActionStatus::Complete,
            reason,
        )
        .await?;
        return Ok(());
    }
    let result = delete_action(engine, &in_progress, in_flight.as_ref()).await;
    end_step(engine, target, in_progress, action, result, |done, ()| done).await
}

/// Calls the type's delete of `row` — its resumed delete when another
/// engine had a step of the row `in_flight` (the row as it left it). A
/// store failure is kept typed, for the run to stop on (see
/// [`resource_reason`]).
pub(in crate::stacks) async fn delete_action(
    engine: &StackEngine,
    row: &Resource,
    in_flight: Option<&Resource>,
) -> Result<(), ResourceFailure> {
    let Some(resource_type) = engine.registry.get(&row.type_name) else {
        return Err(ResourceFailure::new(format!(
            "unknown resource type {:?}",
            row.type_name
        )));
    };
    match in_flight {
        Some(in_flight) => resource_type.resume_delete(in_flight).await,
        None => resource_type.delete(row).await,
    }
}
