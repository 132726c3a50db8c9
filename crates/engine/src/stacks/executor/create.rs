//! Creating resources: rows, properties, requests, adopting external
//! resources, and resuming a create a previous engine left in flight.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::domain::template::resolve;
use crate::domain::{ActionStatus, Resource, StackAction};
use crate::resources::{ResourceFailure, ResourceRequest, validate_properties};
use crate::stacks::context::{RuntimeContext, usable};
use crate::stacks::failure::{RunFailure, RunResult, resource_reason};

use super::stack_engine::StackEngine;
use super::target::{RunTarget, current, transition, with_states};
use super::walk::{Direction, walk};

/// Creates `names` (a subset of the enabled resources) in dependency order.
/// Returns the first failure as Heat words it.
pub async fn create_resources(
    engine: Arc<StackEngine>,
    target: RunTarget,
    names: BTreeSet<String>,
) -> RunResult {
    let graph = target.parsed.graph.clone();
    walk(&graph, &names, Direction::DependenciesFirst, |name| {
        let engine = engine.clone();
        let target = target.clone();
        async move {
            if engine.handing_back(&target) {
                return Err(RunFailure::HandedBack);
            }
            create_one(&engine, &target, &name).await
        }
    })
    .await
}

/// A resource of a stack create: breakpoint hooks (pre-create, post-create)
/// around its create.
async fn create_one(engine: &StackEngine, target: &RunTarget, name: &str) -> RunResult {
    let current = current(&target.resources, name)
        .ok_or_else(|| format!("resources.{name}: no state recorded"))?;
    // A create another engine had in flight passed its pre-create hook.
    if in_flight(&current).is_none() {
        crate::stacks::breakpoints::break_if_required(
            engine,
            target,
            name,
            StackAction::Create,
            "pre-create",
        )
        .await?;
    }
    create_row(engine, target, current, "state changed").await?;
    crate::stacks::breakpoints::break_if_required(
        engine,
        target,
        name,
        StackAction::Create,
        "post-create",
    )
    .await
}

/// The resource's `external_id`, resolved: an existing physical resource
/// the stack takes as it is (Heat: not created, not updated, not deleted).
pub(in crate::stacks) fn external_id_of(
    engine: &StackEngine,
    target: &RunTarget,
    name: &str,
) -> Result<Option<String>, String> {
    let Some(expression) = target
        .parsed
        .template
        .resources
        .get(name)
        .and_then(|definition| definition.external_id.clone())
    else {
        return Ok(None);
    };
    let path = format!("resources.{name}.external_id");
    let value = with_states(&target.resources, |states| {
        let context = RuntimeContext {
            parsed: &target.parsed,
            resources: states,
            registry: &engine.registry,
        };
        resolve(&expression, &context, &path).map_err(|error| error.to_string())
    })?;
    match value {
        Value::Null => Ok(None),
        Value::String(id) if !id.trim().is_empty() && id.len() <= 255 => Ok(Some(id)),
        other => Err(format!(
            "{path}: must be the id of the existing resource (a string of 1 to 255 characters), got {}",
            ember_runtime::quote::quoted(&other.to_string())
        )),
    }
}

/// Takes an external resource into the stack: ADOPT_IN_PROGRESS, then
/// ADOPT_COMPLETE with the external id as its physical id (Heat's create
/// of a resource with `external_id`).
async fn adopt_external(
    engine: &StackEngine,
    target: &RunTarget,
    row: Resource,
    external_id: String,
) -> RunResult {
    let in_progress = transition(
        engine,
        target,
        row,
        StackAction::Adopt,
        ActionStatus::InProgress,
        "state changed",
    )
    .await?;
    let mut adopted = in_progress;
    adopted.physical_id = Some(external_id);
    adopted.attributes = Value::Object(Map::new());
    adopted.data = Value::Null;
    let name = adopted.name.clone();
    let found = match engine.registry.get(&adopted.type_name) {
        Some(resource_type) => {
            let request = request_for(target, &name, Map::new());
            resource_type.adopt(&request, &adopted).await
        }
        None => Err(ResourceFailure::new(format!(
            "unknown resource type {:?}",
            adopted.type_name
        ))),
    };
    match found {
        Ok(outcome) => {
            adopted.attributes = Value::Object(outcome.attributes);
            adopted.data = outcome.data;
            transition(
                engine,
                target,
                adopted,
                StackAction::Adopt,
                ActionStatus::Complete,
                "external resource: not managed by the stack",
            )
            .await?;
            Ok(())
        }
        Err(failure) => {
            let reason = format!(
                "resources.{name}.external_id: {}",
                resource_reason(failure)?
            );
            transition(
                engine,
                target,
                adopted,
                StackAction::Adopt,
                ActionStatus::Failed,
                &reason,
            )
            .await?;
            Err(format!("Resource ADOPT failed: {reason}").into())
        }
    }
}

/// The reason of the IN_PROGRESS a resumed step records again.
pub(in crate::stacks) const RESUMED_STEP: &str =
    "state changed (resumed: the engine that started this step went away)";

/// The row as an engine that went away left it, when `row` is a step that
/// engine had in flight: still `*_IN_PROGRESS` as a run starts on it (a
/// step of this run records its IN_PROGRESS only as it starts).
pub(in crate::stacks) fn in_flight(row: &Resource) -> Option<Resource> {
    (row.status == ActionStatus::InProgress).then(|| row.clone())
}

/// Creates the resource `row` stands for (a new row when replacing), or
/// finishes its create when another engine had it in flight.
pub(in crate::stacks) async fn create_row(
    engine: &StackEngine,
    target: &RunTarget,
    row: Resource,
    reason: &str,
) -> RunResult {
    let name = row.name.clone();
    let name = name.as_str();
    let in_flight = in_flight(&row).filter(|row| row.action == StackAction::Create);
    let reason = if in_flight.is_some() {
        RESUMED_STEP
    } else {
        reason
    };
    match external_id_of(engine, target, name) {
        Ok(Some(external_id)) => return adopt_external(engine, target, row, external_id).await,
        Ok(None) => {}
        Err(failure) => {
            transition(
                engine,
                target,
                row,
                StackAction::Create,
                ActionStatus::Failed,
                &failure,
            )
            .await?;
            return Err(format!("Resource CREATE failed: {failure}").into());
        }
    }
    let in_progress = transition(
        engine,
        target,
        row,
        StackAction::Create,
        ActionStatus::InProgress,
        reason,
    )
    .await?;
    match create_action(engine, target, name, &in_progress, in_flight.as_ref()).await {
        Ok((properties, outcome)) => {
            let mut created = in_progress;
            created.physical_id = Some(outcome.physical_id);
            created.attributes = Value::Object(outcome.attributes);
            created.data = outcome.data;
            created.properties = Value::Object(properties);
            transition(
                engine,
                target,
                created,
                StackAction::Create,
                ActionStatus::Complete,
                "state changed",
            )
            .await?;
            Ok(())
        }
        Err(failure) => {
            let reason = resource_reason(failure)?;
            transition(
                engine,
                target,
                in_progress,
                StackAction::Create,
                ActionStatus::Failed,
                &reason,
            )
            .await?;
            Err(format!("Resource CREATE failed: {reason}").into())
        }
    }
}

/// Resolves a resource's properties against the stack as it is now and
/// validates them against its type's schema.
pub(in crate::stacks) fn resolve_properties(
    engine: &StackEngine,
    target: &RunTarget,
    name: &str,
    type_name: &str,
) -> Result<Map<String, Value>, String> {
    let resource_type = engine
        .registry
        .get(type_name)
        .ok_or_else(|| format!("resources.{name}: unknown resource type {type_name:?}"))?;
    let definition = target
        .parsed
        .template
        .resources
        .get(name)
        .ok_or_else(|| format!("resources.{name}: not in the template"))?;
    let path = format!("resources.{name}.properties");
    let resolved = with_states(&target.resources, |states| {
        for dependency in target
            .parsed
            .graph
            .dependencies_of(name)
            .into_iter()
            .flatten()
        {
            if states.get(dependency).is_some_and(|state| !usable(state)) {
                return Err(format!(
                    "resources.{name}: dependency {dependency:?} is not ready"
                ));
            }
        }
        let context = RuntimeContext {
            parsed: &target.parsed,
            resources: states,
            registry: &engine.registry,
        };
        resolve(&definition.properties, &context, &path).map_err(|error| error.to_string())
    })?;
    validate_properties(resource_type.schema(), &resolved, &path)
}

pub(in crate::stacks) fn request_for(
    target: &RunTarget,
    name: &str,
    properties: Map<String, Value>,
) -> ResourceRequest {
    ResourceRequest {
        stack_id: target.stack_id,
        stack_name: target.stack_name.clone(),
        project_id: target.project_id.clone(),
        user_id: target.user_id.clone(),
        nested_depth: target.nested_depth,
        type_name: with_states(&target.resources, |states| {
            states
                .get(name)
                .map(|resource| resource.type_name.clone())
                .unwrap_or_default()
        }),
        resource_name: name.to_owned(),
        resource_id: with_states(&target.resources, |states| {
            states
                .get(name)
                .map(|resource| resource.id)
                .unwrap_or_default()
        }),
        properties,
    }
}

/// Resolves, validates and calls the type's create — its resumed create
/// when another engine had it `in_flight`. A resource's own failure reads
/// as its status reason (`resources.<name>: …`); a store failure is kept
/// typed, for the run to stop on (see [`resource_reason`]).
async fn create_action(
    engine: &StackEngine,
    target: &RunTarget,
    name: &str,
    resource: &Resource,
    in_flight: Option<&Resource>,
) -> Result<(Map<String, Value>, crate::resources::ResourceOutcome), ResourceFailure> {
    let properties = resolve_properties(engine, target, name, &resource.type_name)
        .map_err(ResourceFailure::new)?;
    let resource_type = engine.registry.get(&resource.type_name).ok_or_else(|| {
        ResourceFailure::new(format!(
            "resources.{name}: unknown resource type {:?}",
            resource.type_name
        ))
    })?;
    let request = request_for(target, name, properties.clone());
    let outcome = match in_flight {
        Some(in_flight) => resource_type.resume_create(&request, in_flight).await,
        None => resource_type.create(&request).await,
    }
    .map_err(|failure| failure.map_reason(|reason| format!("resources.{name}: {reason}")))?;
    Ok((properties, outcome))
}
