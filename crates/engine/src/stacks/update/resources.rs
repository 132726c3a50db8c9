//! Bringing each resource to the update's target: unchanged ones are left
//! alone, changes their type allows are made in place, anything else is
//! replaced (new one first); resources no longer defined, and the old rows
//! of replaced ones, are retired at the end.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::domain::template::{DeletionPolicy, DependencyGraph};
use crate::domain::{ActionStatus, Event, Resource, StackAction};
use crate::stacks::executor::{
    Direction, RESUMED_STEP, RunTarget, StackEngine, create_row, current, delete_action, end_step,
    fail_step, in_flight, request_for, resolve_properties, snapshot, transition, walk,
};
use crate::stacks::failure::{RunFailure, RunResult, resource_reason};

/// Brings every enabled resource to the target definition, then deletes
/// resources no longer in it (dependents first, by `old_graph`) and the old
/// rows of replaced ones.
pub(super) async fn update_resources(
    engine: Arc<StackEngine>,
    target: RunTarget,
    old_graph: DependencyGraph,
    action: StackAction,
    cancel: CancellationToken,
) -> RunResult {
    let names: BTreeSet<String> = target.parsed.enabled.iter().cloned().collect();
    let graph = target.parsed.graph.clone();
    walk(&graph, &names, Direction::DependenciesFirst, |name| {
        let engine = engine.clone();
        let target = target.clone();
        let cancel = cancel.clone();
        async move {
            // Handed back at shutdown, to be resumed (see `resume.rs`).
            if engine.handing_back(&target) {
                return Err(RunFailure::HandedBack);
            }
            // Breakpoint hooks stop an update of an existing resource (a
            // new one is just created), not a rollback — nor a step another
            // engine had in flight (it passed its pre-update hook).
            let hooked = action == StackAction::Update
                && current(&target.resources, &name).is_some_and(|row| {
                    row.action != StackAction::Init && in_flight(&row).is_none()
                });
            if hooked {
                crate::stacks::breakpoints::break_if_required(
                    &engine,
                    &target,
                    &name,
                    action,
                    "pre-update",
                )
                .await?;
            }
            update_one(&engine, &target, &name, action, &cancel).await?;
            if hooked {
                crate::stacks::breakpoints::break_if_required(
                    &engine,
                    &target,
                    &name,
                    action,
                    "post-update",
                )
                .await?;
            }
            Ok(())
        }
    })
    .await?;

    let removed: BTreeSet<String> = snapshot(&target.resources)
        .keys()
        .filter(|name| !names.contains(*name))
        .cloned()
        .collect();
    walk(&old_graph, &removed, Direction::DependentsFirst, |name| {
        let engine = engine.clone();
        let target = target.clone();
        async move {
            if engine.handing_back(&target) {
                return Err(RunFailure::HandedBack);
            }
            let row = current(&target.resources, &name).ok_or_else(|| {
                RunFailure::Failed(format!("resources.{name}: no state recorded"))
            })?;
            retire(&engine, &target, row, DeletionPolicy::Delete).await
        }
    })
    .await?;
    if engine.handing_back(&target) {
        return Err(RunFailure::HandedBack);
    }
    retire_superseded(&engine, &target).await
}

/// Deletes the old rows of replaced resources and forgets them.
pub(in crate::stacks) async fn retire_superseded(
    engine: &Arc<StackEngine>,
    target: &RunTarget,
) -> RunResult {
    let superseded = match target.superseded.lock() {
        Ok(mut guard) => std::mem::take(&mut *guard),
        Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
    };
    // Old rows have no dependents left: they go in parallel (bounded), so
    // their transitions share group commits instead of one commit each.
    use futures::StreamExt;
    let results: Vec<(Resource, RunResult)> = futures::stream::iter(superseded)
        .map(|row| async move {
            let result = retire(engine, target, row.clone(), DeletionPolicy::Delete).await;
            (row, result)
        })
        .buffer_unordered(PARALLEL_RETIREMENTS)
        .collect()
        .await;
    let mut first_failure = None;
    for (row, result) in results {
        if let Err(failure) = result {
            RunFailure::keep_worst(&mut first_failure, failure);
            if let Ok(mut guard) = target.superseded.lock() {
                guard.push(row);
            }
        }
    }
    first_failure.map_or(Ok(()), Err)
}

/// How many replaced rows are deleted at once.
const PARALLEL_RETIREMENTS: usize = 64;

/// Deletes one resource for good: DELETE_IN_PROGRESS, the type's delete,
/// then the row goes (its events stay).
async fn retire(
    engine: &StackEngine,
    target: &RunTarget,
    row: Resource,
    policy: DeletionPolicy,
) -> RunResult {
    let name = row.name.clone();
    // A step an engine that went away had in flight may have made
    // something even without a physical id (a create): its type looks.
    let in_flight = in_flight(&row);
    let never_created =
        row.action == StackAction::Init || (row.physical_id.is_none() && in_flight.is_none());
    let now = ember_runtime::time::now();
    let mut deleting = row.clone();
    deleting.action = StackAction::Delete;
    deleting.status = ActionStatus::InProgress;
    deleting.status_reason = if in_flight.is_some() {
        RESUMED_STEP
    } else {
        "state changed"
    }
    .to_owned();
    deleting.updated_at = now;
    engine
        .writer
        .record(
            target.fence,
            deleting.clone(),
            Event::for_resource(&deleting, now),
        )
        .await?;
    if !never_created
        && policy == DeletionPolicy::Delete
        && let Err(failure) = delete_action(engine, &deleting, in_flight.as_ref()).await
    {
        let reason = format!("resources.{name}: {}", resource_reason(failure)?);
        let mut failed = deleting;
        failed.status = ActionStatus::Failed;
        failed.status_reason = reason.clone();
        failed.updated_at = ember_runtime::time::now();
        engine
            .writer
            .record(
                target.fence,
                failed.clone(),
                Event::for_resource(&failed, failed.updated_at),
            )
            .await?;
        return Err(RunFailure::Failed(format!(
            "Resource DELETE failed: {reason}"
        )));
    }
    let mut deleted = deleting;
    deleted.status = ActionStatus::Complete;
    deleted.updated_at = ember_runtime::time::now();
    let event = Event::for_resource(&deleted, deleted.updated_at);
    engine
        .store
        .retire_resources(&[(deleted, event)], target.fence)
        .await?;
    // Forget it unless a newer row of the same name is the current one.
    if let Ok(mut guard) = target.resources.lock()
        && guard.get(&name).is_some_and(|current| current.id == row.id)
    {
        guard.remove(&name);
    }
    Ok(())
}

async fn update_one(
    engine: &StackEngine,
    target: &RunTarget,
    name: &str,
    action: StackAction,
    cancel: &CancellationToken,
) -> RunResult {
    if cancel.is_cancelled() {
        return Err(RunFailure::Failed("Stack UPDATE cancelled".to_owned()));
    }
    let current = current(&target.resources, name)
        .ok_or_else(|| format!("resources.{name}: no state recorded"))?;
    let new_type = target
        .parsed
        .resource_types
        .get(name)
        .cloned()
        .ok_or_else(|| format!("resources.{name}: no type"))?;
    // A new resource, or one whose create was in flight when the engine
    // before this one went away (a resumed update: only a resource that
    // acts on nothing but its row is left in progress, see `orphans.rs`) —
    // created on its own row, not replaced by another.
    if current.action == StackAction::Init
        || (current.action == StackAction::Create && current.status == ActionStatus::InProgress)
    {
        return create_row(engine, target, current, "state changed").await;
    }
    // An external resource is not the stack's to change: its id cannot
    // change (Heat refuses it), and its properties are not applied.
    match crate::stacks::executor::external_id_of(engine, target, name) {
        Ok(None) => {}
        Ok(Some(external_id)) if current.physical_id.as_deref() == Some(external_id.as_str()) => {
            return Ok(());
        }
        outcome => {
            let reason = match outcome {
                Err(reason) => reason,
                _ => format!(
                    "resources.{name}.external_id: an external resource's id cannot be updated (it is {:?})",
                    current.physical_id.as_deref().unwrap_or_default()
                ),
            };
            return fail_step(engine, target, current, action, reason).await;
        }
    }
    let properties = match resolve_properties(engine, target, name, &new_type) {
        Ok(properties) => properties,
        Err(reason) => return fail_step(engine, target, current, action, reason).await,
    };
    let resource_type = engine
        .registry
        .get(&new_type)
        .ok_or_else(|| format!("resources.{name}: unknown resource type {new_type:?}"))?;
    let old_properties = current.properties.as_object().cloned().unwrap_or_default();
    // An in-place update (a rollback's too) another engine had in flight:
    // finished by the type, on the same row.
    let in_flight = in_flight(&current)
        .filter(|row| matches!(row.action, StackAction::Update | StackAction::Rollback));
    // A nested stack is replaced only when marked unhealthy; any other
    // failure is repaired by updating it, which replaces its failed members.
    let nested = resource_type.is_nested_stack();
    let failed = if nested {
        (current.action, current.status) == (StackAction::Check, ActionStatus::Failed)
    } else {
        current.status == ActionStatus::Failed
    };
    let replace = current.type_name != new_type
        || failed
        || current.physical_id.is_none()
        || resource_type.needs_replacement(&old_properties, &properties);
    if !replace {
        if old_properties == properties && !nested && in_flight.is_none() {
            return Ok(());
        }
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
        let request = request_for(target, name, properties.clone());
        let updated = match &in_flight {
            Some(in_flight) => resource_type.resume_update(&request, in_flight).await,
            None => resource_type.update(&request, &in_progress).await,
        };
        return end_step(
            engine,
            target,
            in_progress,
            action,
            updated,
            |mut done, outcome| {
                done.physical_id = Some(outcome.physical_id);
                done.attributes = Value::Object(outcome.attributes);
                done.data = outcome.data;
                done.properties = Value::Object(properties);
                done
            },
        )
        .await;
    }
    // Replacement: the new resource first; the old row is deleted at the end.
    // What the new one must take from the old (a server's ports) is let go
    // before.
    if current.physical_id.is_some()
        && current.status != ActionStatus::Failed
        && let Some(old_type) = engine.registry.get(&current.type_name)
        && let Err(failure) = old_type.prepare_for_replace(&current).await
    {
        let reason = format!(
            "resources.{name}: cannot be replaced: {}",
            resource_reason(failure)?
        );
        return Err(RunFailure::Failed(format!(
            "Resource {} failed: {reason}",
            action.as_str()
        )));
    }
    let replaced = current
        .physical_id
        .clone()
        .unwrap_or_else(|| "a failed resource".to_owned());
    if let Ok(mut guard) = target.superseded.lock() {
        guard.push(current);
    }
    let now = ember_runtime::time::now();
    let fresh = Resource::initial(target.stack_id, name, &new_type, now);
    create_row(engine, target, fresh, &format!("replacing {replaced}"))
        .await
        .map_err(|failure| match failure {
            RunFailure::Failed(reason) => RunFailure::Failed(reason.replacen(
                "Resource CREATE failed",
                &format!("Resource {} failed", action.as_str()),
                1,
            )),
            other => other,
        })
}
