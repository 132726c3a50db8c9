//! Heat's stack snapshots: `snapshot` saves the stack's definition and each
//! resource's state (what export gives) under the stack's lease, as the
//! stack action SNAPSHOT; `restore` is an update back to a snapshot's
//! definition (the stack action RESTORE) that then puts back the data of
//! resources whose state is Ember's own — a `RandomString` gets its value
//! back even when it was replaced since — and the live state resources
//! record (a server kept since is powered back on or off as it was).
//!
//! Unlike Heat, whose snapshot answers IN_PROGRESS and completes in the
//! background, the snapshot is complete when the call answers: it only
//! reads the store.

use std::sync::Arc;

use ember_runtime::Identity;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::executor::{RunTarget, StackEngine, current, snapshot as resource_states, transition};
use super::failure::{RunFailure, RunResult, resource_reason};
use super::update::{UpdateKind, UpdateStack};
use super::{LeaseHolder, StackCaller, StackOperation, StackOperations, conclude, stack_event};
use crate::domain::{ActionStatus, Stack, StackAction, StackSnapshot};
use crate::error::{Error, Result};
use crate::resources::ResourceFailure;

/// Resource types whose whole state is Ember's own data, put back by a
/// restore (others are brought back by the update to the snapshot's
/// definition).
const RESTORED_TYPES: &[&str] = &["OS::Heat::RandomString"];

/// The longest snapshot name.
const MAX_NAME: usize = 255;

impl StackOperations {
    /// Refuses a snapshot beyond the project's `snapshots_per_stack`.
    async fn admit_one_more_snapshot(&self, stack: &Stack) -> Result<()> {
        let Some(quotas) = self.engine.quotas.as_ref() else {
            return Ok(());
        };
        let kept = self.store().count_snapshots(stack.id).await?;
        quotas
            .admit_size(
                &stack.project_id,
                crate::domain::quota::QuotaKind::SnapshotsPerStack,
                kept + 1,
            )
            .await
    }

    /// Saves a snapshot of the stack (SNAPSHOT_IN_PROGRESS, then
    /// SNAPSHOT_COMPLETE); refused while an operation runs or a lock holds.
    pub async fn snapshot_stack(
        &self,
        identity: &Identity,
        name_or_id: &str,
        name: &str,
    ) -> Result<StackSnapshot> {
        if name.chars().count() > MAX_NAME {
            return Err(Error::InvalidInput(format!(
                "name: at most {MAX_NAME} characters"
            )));
        }
        let found = self.find_stack(identity, name_or_id).await?;
        let caller = StackCaller::User(identity);
        self.admit(&found, StackOperation::Snapshot, caller).await?;
        let stack_lease = self
            .engine
            .take_lease(
                found.id,
                &found.name,
                LeaseHolder::Action(StackAction::Snapshot),
            )
            .await?;
        let fence = stack_lease.fence();
        let ((mut stack, saved), stack_lease) = stack_lease
            .start(async {
                let mut stack =
                    self.store().get_stack(found.id).await?.ok_or_else(|| {
                        Error::NotFound(format!("stack {name_or_id:?} not found"))
                    })?;
                self.admit(&stack, StackOperation::Snapshot, caller).await?;
                self.admit_one_more_snapshot(&stack).await?;
                stack.action = StackAction::Snapshot;
                stack.status = ActionStatus::InProgress;
                stack.status_reason = "Stack SNAPSHOT started".to_owned();
                stack.updated_at = ember_runtime::time::now();
                self.engine
                    .writer
                    .record_stack(fence, &stack, stack_event(&stack, &stack.status_reason))
                    .await?;
                let definition = self.store().load_definition(stack.id).await?;
                let target = self.load_target(&stack, fence).await?;
                let resources = resource_states(&target.resources);
                let mut live = Map::new();
                for resource in resources.values() {
                    let Some(resource_type) = self.engine.registry.get(&resource.type_name) else {
                        continue;
                    };
                    let state = resource_type.snapshot_state(resource).await.map_err(
                        |failure| match failure {
                            ResourceFailure::Failed(reason) => Error::Conflict(format!(
                                "resources.{}: its state cannot be read for the snapshot: {reason}",
                                resource.name
                            )),
                            ResourceFailure::Store(error) => error,
                        },
                    )?;
                    if let Some(state) = state {
                        live.insert(resource.name.clone(), state);
                    }
                }
                let mut data = super::abandon::stack_data(&stack, &definition, resources);
                for (name, state) in live {
                    if let Some(entry) = data["resources"].get_mut(&name) {
                        entry["state"] = state;
                    }
                }
                let saved = StackSnapshot {
                    id: Uuid::now_v7(),
                    stack_id: stack.id,
                    project_id: stack.project_id.clone(),
                    name: name.to_owned(),
                    status: "COMPLETE".to_owned(),
                    status_reason: "Stack SNAPSHOT completed successfully".to_owned(),
                    data,
                    created_at: ember_runtime::time::now(),
                };
                self.store().insert_snapshot(&saved).await?;
                Ok((stack, saved))
            })
            .await?;
        conclude(
            &mut stack,
            ActionStatus::Complete,
            "Stack SNAPSHOT completed successfully".to_owned(),
            stack_lease,
        )
        .await;
        Ok(saved)
    }

    pub async fn list_snapshots(
        &self,
        identity: &Identity,
        name_or_id: &str,
    ) -> Result<Vec<StackSnapshot>> {
        let stack = self.find_stack(identity, name_or_id).await?;
        self.store().list_snapshots(stack.id).await
    }

    pub async fn show_snapshot(
        &self,
        identity: &Identity,
        name_or_id: &str,
        snapshot_id: &str,
    ) -> Result<StackSnapshot> {
        let stack = self.find_stack(identity, name_or_id).await?;
        self.find_snapshot(&stack, snapshot_id).await
    }

    pub async fn delete_snapshot(
        &self,
        identity: &Identity,
        name_or_id: &str,
        snapshot_id: &str,
    ) -> Result<()> {
        let stack = self.find_stack(identity, name_or_id).await?;
        if crate::domain::instance::policy::is_read_only(identity) {
            return Err(Error::Forbidden(format!(
                "user {:?} has only the reader role: deleting a snapshot needs the member or admin role",
                identity.user_id
            )));
        }
        let snapshot = self.find_snapshot(&stack, snapshot_id).await?;
        if !self.store().delete_snapshot(stack.id, snapshot.id).await? {
            return Err(snapshot_not_found(snapshot_id));
        }
        Ok(())
    }

    /// Updates the stack back to the snapshot (RESTORE_IN_PROGRESS, then
    /// RESTORE_COMPLETE); the run goes on in the background.
    pub async fn restore_snapshot(
        &self,
        identity: &Identity,
        name_or_id: &str,
        snapshot_id: &str,
    ) -> Result<Stack> {
        let found = self.find_stack(identity, name_or_id).await?;
        let caller = StackCaller::User(identity);
        self.admit(&found, StackOperation::Restore, caller).await?;
        let snapshot = self.find_snapshot(&found, snapshot_id).await?;
        if snapshot.status != "COMPLETE" {
            return Err(Error::InvalidInput(format!(
                "snapshot {snapshot_id} is {}: only a COMPLETE snapshot can be restored",
                snapshot.status
            )));
        }
        self.admit_quotas(&found, 0, false).await?;
        let data = &snapshot.data;
        let text = |value: &Value| match value {
            Value::Null => String::new(),
            other => other.to_string(),
        };
        let request = UpdateStack {
            name_or_id: found.id.to_string(),
            // Accepted when the snapshot was taken: taken as it is.
            template: String::new(),
            generated_template: Some(data["template"].clone())
                .filter(|template| !template.is_null()),
            environment: text(&data["environment"]),
            environment_files: Vec::new(),
            files: data["files"]
                .as_object()
                .map(|files| {
                    files
                        .iter()
                        .filter_map(|(name, body)| Some((name.clone(), body.as_str()?.to_owned())))
                        .collect()
                })
                .unwrap_or_default(),
            parameters: data["parameters"].as_object().cloned().unwrap_or_default(),
            timeout_mins: None,
            disable_rollback: None,
            existing: false,
            clear_parameters: Vec::new(),
            tags: None,
        };
        let recorded = Arc::new(data["resources"].as_object().cloned().unwrap_or_default());
        let (stack, run) = self
            .begin_update_stack_as(
                found,
                super::LeaseSeen::Unknown,
                &request,
                caller,
                UpdateKind::Restore(recorded),
            )
            .await?;
        self.engine.spawn_run(run);
        Ok(stack)
    }

    async fn find_snapshot(&self, stack: &Stack, snapshot_id: &str) -> Result<StackSnapshot> {
        let id = Uuid::parse_str(snapshot_id).map_err(|_| snapshot_not_found(snapshot_id))?;
        self.store()
            .get_snapshot(stack.id, id)
            .await?
            .ok_or_else(|| snapshot_not_found(snapshot_id))
    }
}

fn snapshot_not_found(snapshot_id: &str) -> Error {
    Error::NotFound(format!(
        "The Snapshot ({}) could not be found.",
        ember_runtime::quote::quoted(snapshot_id)
    ))
}

/// After the update to the snapshot's definition: puts back the recorded
/// data and attributes of resources whose state is Ember's own.
pub(super) async fn restore_data(
    engine: &Arc<StackEngine>,
    target: &RunTarget,
    recorded: &Map<String, Value>,
) -> RunResult {
    for (name, entry) in recorded {
        let Some(resource) = current(&target.resources, name) else {
            continue;
        };
        let same_type = entry["type"].as_str() == Some(resource.type_name.as_str());
        if !same_type {
            continue;
        }
        // The same physical resource as then: its live state goes back.
        if let Some(state) = entry.get("state")
            && entry["resource_id"].as_str().is_some()
            && entry["resource_id"].as_str() == resource.physical_id.as_deref()
            && let Some(resource_type) = engine.registry.get(&resource.type_name)
            && let Err(failure) = resource_type.restore_state(&resource, state).await
        {
            return Err(RunFailure::Failed(format!(
                "resources.{name}: restoring its state: {}",
                resource_reason(failure)?
            )));
        }
        if !RESTORED_TYPES.contains(&resource.type_name.as_str()) {
            continue;
        }
        let mut restored = resource;
        restored.data = entry.get("resource_data").cloned().unwrap_or(Value::Null);
        if let Some(attributes) = entry.get("attributes").filter(|value| value.is_object()) {
            restored.attributes = attributes.clone();
        }
        transition(
            engine,
            target,
            restored,
            StackAction::Update,
            ActionStatus::Complete,
            "state restored from the snapshot",
        )
        .await?;
    }
    Ok(())
}
