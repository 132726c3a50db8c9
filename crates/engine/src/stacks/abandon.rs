//! Abandon and adopt. Abandoning forgets a stack but keeps its resources,
//! returning what is needed to take them over again; adopting creates a
//! stack whose resources are those existing ones instead of new ones.

use std::sync::Arc;

use ember_runtime::Identity;
use serde_json::{Map, Value, json};

use super::executor::{RunTarget, StackEngine, current, resolve_properties, snapshot, transition};
use super::failure::RunResult;
use super::{LeaseHolder, StackCaller, StackOperation, StackOperations};
use crate::domain::{ActionStatus, Stack, StackAction};
use crate::error::{Error, Result};

impl StackOperations {
    /// Heat's abandon: the stack disappears (ABANDON_COMPLETE, hidden like a
    /// deleted stack), its resources stay where they are.
    pub async fn abandon_stack(&self, identity: &Identity, name_or_id: &str) -> Result<Value> {
        let found = self.find_stack(identity, name_or_id).await?;
        let caller = StackCaller::User(identity);
        self.admit(&found, StackOperation::Abandon, caller).await?;
        let stack_lease = self
            .engine
            .take_lease(
                found.id,
                &found.name,
                LeaseHolder::Action(StackAction::Abandon),
            )
            .await?;
        let fence = stack_lease.fence();
        let ((mut stack, data), stack_lease) = stack_lease
            .start(self.abandon_data(found.id, name_or_id, fence, caller))
            .await?;
        stack.action = StackAction::Abandon;
        let passed = match super::plugins::before(&self.engine, &stack, None).await {
            Ok(passed) => passed,
            Err(reason) => {
                // The stack stays as it was; the refusal is the answer.
                stack_lease.release().await;
                return Err(Error::Conflict(format!("abandon refused: {reason}")));
            }
        };
        let reason = "Stack ABANDON completed successfully".to_owned();
        super::conclude(&mut stack, ActionStatus::Complete, reason, stack_lease).await;
        super::plugins::after(&self.engine, &stack, StackAction::Abandon, passed).await;
        Ok(data)
    }

    async fn abandon_data(
        &self,
        stack_id: uuid::Uuid,
        name_or_id: &str,
        fence: crate::store::LeaseFence,
        caller: StackCaller<'_>,
    ) -> Result<(Stack, Value)> {
        let stack = self
            .store()
            .get_stack(stack_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("stack {name_or_id:?} not found")))?;
        self.admit(&stack, StackOperation::Abandon, caller).await?;
        let definition = self.store().load_definition(stack.id).await?;
        let target = self.load_target(&stack, fence).await?;
        let data = stack_data(&stack, &definition, snapshot(&target.resources));
        Ok((stack, data))
    }

    /// Heat's export: the abandon data of a stack, which stays as it is
    /// (what `openstack stack export` saves, and adopt takes).
    pub async fn export_stack(&self, identity: &Identity, name_or_id: &str) -> Result<Value> {
        let stack = self.find_stack(identity, name_or_id).await?;
        let definition = self.store().load_definition(stack.id).await?;
        let mut current: std::collections::BTreeMap<String, crate::domain::Resource> =
            std::collections::BTreeMap::new();
        for row in self.store().list_resources(stack.id).await? {
            let newer = current.get(&row.name).is_none_or(|existing| {
                (existing.created_at, existing.id) < (row.created_at, row.id)
            });
            if newer {
                current.insert(row.name.clone(), row);
            }
        }
        Ok(stack_data(&stack, &definition, current))
    }
}

/// A stack as abandon and export describe it: its definition and each
/// resource's physical id, state, metadata, data and attributes.
pub fn stack_data(
    stack: &Stack,
    definition: &crate::domain::StackDefinition,
    resources: std::collections::BTreeMap<String, crate::domain::Resource>,
) -> Value {
    let resources: Map<String, Value> = resources
        .into_values()
        .map(|resource| {
            let entry = json!({
                "name": resource.name,
                "type": resource.type_name,
                "resource_id": resource.physical_id,
                "action": resource.action.as_str(),
                "status": resource.status.as_str(),
                "metadata": resource.metadata,
                "resource_data": resource.data,
                // Ember keeps attributes so an adopted resource answers
                // get_attr as before.
                "attributes": resource.attributes,
            });
            (resource.name, entry)
        })
        .collect();
    json!({
        "name": stack.name,
        "id": stack.id.to_string(),
        "action": stack.action.as_str(),
        "status": stack.status.as_str(),
        "project_id": stack.project_id,
        "stack_user_project_id": stack.project_id,
        "template": definition.template,
        "environment": definition.environment,
        "files": definition.files,
        "parameters": definition.parameters,
        "resources": resources,
    })
}

/// Parses abandon data given to adopt: a JSON object with `resources`.
pub fn parse_adopt_data(text: &str) -> Result<Map<String, Value>> {
    let value: Value = serde_json::from_str(text).map_err(|error| {
        Error::InvalidInput(format!("adopt_stack_data is not valid JSON: {error}"))
    })?;
    match value {
        Value::Object(map) if map.get("resources").is_some_and(Value::is_object) => Ok(map),
        _ => Err(Error::InvalidInput(
            "adopt_stack_data must be a JSON object with a resources map (what abandon returned)"
                .to_owned(),
        )),
    }
}

/// Takes over one resource from adopt data: ADOPT_IN_PROGRESS, then
/// ADOPT_COMPLETE with the recorded physical id, data and attributes.
pub async fn adopt_one(
    engine: &StackEngine,
    target: &RunTarget,
    name: &str,
    adopt_data: &Map<String, Value>,
) -> RunResult {
    let current = current(&target.resources, name)
        .ok_or_else(|| format!("resources.{name}: no state recorded"))?;
    let in_progress = transition(
        engine,
        target,
        current,
        StackAction::Adopt,
        ActionStatus::InProgress,
        "state changed",
    )
    .await?;
    let entry = adopt_data
        .get("resources")
        .and_then(|resources| resources.get(name))
        .and_then(Value::as_object);
    let adopted = match entry
        .and_then(|entry| entry.get("resource_id"))
        .and_then(Value::as_str)
    {
        None => Err(format!(
            "resources.{name}: Resource ID was not provided in adopt_stack_data"
        )),
        Some(physical_id) => resolve_properties(engine, target, name, &in_progress.type_name)
            .map(|properties| (physical_id.to_owned(), properties)),
    };
    match adopted {
        Ok((physical_id, properties)) => {
            let mut resource = in_progress;
            resource.physical_id = Some(physical_id);
            resource.properties = Value::Object(properties);
            if let Some(entry) = entry {
                resource.data = entry.get("resource_data").cloned().unwrap_or(Value::Null);
                resource.attributes = entry
                    .get("attributes")
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                resource.metadata = entry.get("metadata").cloned().unwrap_or_else(|| json!({}));
            }
            transition(
                engine,
                target,
                resource,
                StackAction::Adopt,
                ActionStatus::Complete,
                "state changed",
            )
            .await?;
            Ok(())
        }
        Err(reason) => {
            transition(
                engine,
                target,
                in_progress,
                StackAction::Adopt,
                ActionStatus::Failed,
                &reason,
            )
            .await?;
            Err(format!("Resource ADOPT failed: {reason}").into())
        }
    }
}

/// Adopts every enabled resource along the graph.
pub async fn adopt_resources(
    engine: Arc<StackEngine>,
    target: RunTarget,
    adopt_data: Arc<Map<String, Value>>,
) -> RunResult {
    let names = target.parsed.enabled.iter().cloned().collect();
    let graph = target.parsed.graph.clone();
    super::executor::walk(
        &graph,
        &names,
        super::executor::Direction::DependenciesFirst,
        |name| {
            let engine = engine.clone();
            let target = target.clone();
            let adopt_data = adopt_data.clone();
            async move { adopt_one(&engine, &target, &name, &adopt_data).await }
        },
    )
    .await
}

/// Marks `stack` as being adopted (the create path sets CREATE otherwise).
pub fn mark_adopting(stack: &mut Stack) {
    stack.action = StackAction::Adopt;
    stack.status_reason = "Stack ADOPT started".to_owned();
}
