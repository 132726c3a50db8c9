//! Node-scoped actions beyond create and delete, as Senlin has them:
//! update (NODE_UPDATE), check (NODE_CHECK), recover (NODE_RECOVER) and
//! the profile type's operations (NODE_OPERATION).
//!
//! The request side checks what Senlin checks (with its messages, which
//! clients and its API suite compare) and records the action READY; the
//! run side works on the one node, under its cluster's lock when it is a
//! member (as every node action on a member does). Names, roles, metadata
//! and taint are written when asked (only those columns, so a running
//! action's writes are never undone); a profile change replaces the
//! node's resource in the NODE_UPDATE run, in the recover's two durable
//! steps: the old resource is deleted, then one fenced write moves the
//! node to the new profile, CREATING with its new resource id, and the
//! create follows (a taken-over run finishes a node left CREATING).

use std::time::Instant;

use ember_runtime::Identity;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::run::{Ran, Run, RunResult, Stop};
use super::{ClusterService, action_event};
use crate::domain::admission::cluster::ClusterOperation;
use crate::domain::cluster::operations::{self, NodeOperation};
use crate::domain::cluster::{
    ActionKind, ActionStatus, ClusterAction, Node, NodeStatus, Profile, ProfileKind, validate_name,
};
use crate::domain::instance::{InstanceStatus, PowerAction};
use crate::error::{Error, Result};
use crate::store::clusters::{ClusterChange, NodeDetails, NodeStatusChange, Settle};

/// What a user asks of a node update; `None` leaves a field as it is.
#[derive(Debug, Default)]
pub struct NodeUpdate {
    pub name: Option<String>,
    pub role: Option<String>,
    pub tainted: Option<bool>,
    pub metadata: Option<Map<String, Value>>,
    /// Name or id of the profile to move the node to.
    pub profile: Option<String>,
}

/// Senlin's recovery operations (`consts.RECOVERY_ACTIONS`).
const RECOVERY_OPERATIONS: [&str; 3] = ["REBOOT", "REBUILD", "RECREATE"];

/// The parameters a node recover takes besides `operation`.
const RECOVER_PARAMETERS: [&str; 5] = [
    "operation",
    "operation_params",
    "check",
    "delete_timeout",
    "force_recreate",
];

fn admit(operation: ClusterOperation<'_>, caller: &Identity) -> Result<()> {
    crate::domain::admission::admit(crate::domain::admission::Subject::Cluster {
        operation: &operation,
        caller,
    })
}

/// Refuses to start work on a node another action is creating or
/// deleting (its resource is that action's until it ends).
fn settled(node: &Node) -> Result<()> {
    match node.status {
        NodeStatus::Init | NodeStatus::Creating | NodeStatus::Deleting => {
            Err(Error::Conflict(format!(
                "node {:?} is {}: try again once its current action has finished",
                node.name,
                node.status.as_str()
            )))
        }
        _ => Ok(()),
    }
}

/// Checks a recover's parameters as Senlin does.
fn check_recover_params(params: &Map<String, Value>) -> Result<()> {
    let unknown: Vec<&str> = params
        .keys()
        .map(String::as_str)
        .filter(|key| !RECOVER_PARAMETERS.contains(key))
        .collect();
    if !unknown.is_empty() {
        return Err(Error::InvalidInput(format!(
            "Action parameter {unknown:?} is not recognizable."
        )));
    }
    if let Some(operation) = params.get("operation") {
        let Some(operation) = operation.as_str() else {
            return Err(Error::InvalidInput("operation has to be a string".into()));
        };
        if !RECOVERY_OPERATIONS.contains(&operation.to_ascii_uppercase().as_str()) {
            return Err(Error::InvalidInput(format!(
                "Operation value '{operation}' has to be one of the following: {}.",
                RECOVERY_OPERATIONS.join(", ")
            )));
        }
    }
    if let Some(check) = params.get("check")
        && !check.is_boolean()
    {
        return Err(Error::InvalidInput("check: must be a boolean".into()));
    }
    Ok(())
}

/// The physical id a replaced resource is created with: an instance's is
/// chosen now (so a rerun finds it); a stack's is known once it exists.
fn planned_physical_id(profile: &Profile) -> Option<String> {
    match profile.spec.kind {
        ProfileKind::Instance { .. } => Some(Uuid::now_v7().to_string()),
        ProfileKind::Stack { .. } => None,
    }
}

impl ClusterService {
    /// Records `kind` READY on `node` with its event.
    async fn submit_node_action(
        &self,
        caller: &Identity,
        node: &Node,
        kind: ActionKind,
        mut inputs: Map<String, Value>,
    ) -> Result<ClusterAction> {
        inputs.insert("node_name".into(), json!(node.name));
        let action = ClusterAction::new(
            kind,
            node.id,
            node.cluster_id,
            ActionStatus::Ready,
            inputs,
            caller,
            ember_runtime::time::now(),
        );
        self.submit(
            std::slice::from_ref(&action),
            &[action_event(&action, "READY", "accepted")],
        )
        .await?;
        Ok(action)
    }

    /// Senlin's node update: the node as updated and its NODE_UPDATE.
    pub async fn update_node_with_action(
        &self,
        caller: &Identity,
        name_or_id: &str,
        update: NodeUpdate,
    ) -> Result<(Node, ClusterAction)> {
        let node = self.find_node(caller, name_or_id).await?;
        admit(ClusterOperation::UpdateNode(&node), caller)?;
        let mut inputs = Map::new();
        if let Some(wanted) = &update.profile {
            let profile = self
                .find_profile(caller, wanted)
                .await
                .map_err(|error| super::specified_not_found("profile", wanted, error))?;
            let current = self.store.get_profile(node.profile_id).await?;
            if current.is_some_and(|current| current.spec.type_name() != profile.spec.type_name()) {
                return Err(Error::InvalidInput(
                    "Cannot update a node to a different profile type, operation aborted.".into(),
                ));
            }
            if profile.id != node.profile_id {
                settled(&node)?;
                inputs.insert("new_profile_id".into(), json!(profile.id.to_string()));
            }
        }
        let mut details = NodeDetails::default();
        if let Some(name) = update
            .name
            .filter(|name| !name.is_empty() && *name != node.name)
        {
            validate_name("node", &name)?;
            inputs.insert("name".into(), json!(name));
            details.name = Some(name);
        }
        if let Some(role) = update.role.filter(|role| *role != node.role) {
            inputs.insert("role".into(), json!(role));
            details.role = Some(role);
        }
        if let Some(metadata) = update
            .metadata
            .filter(|metadata| *metadata != node.metadata)
        {
            inputs.insert("metadata".into(), Value::Object(metadata.clone()));
            details.metadata = Some(metadata);
        }
        if let Some(tainted) = update.tainted.filter(|tainted| *tainted != node.tainted) {
            inputs.insert("tainted".into(), json!(tainted));
            details.tainted = Some(tainted);
        }
        if inputs.is_empty() {
            return Err(Error::InvalidInput("No property needs an update.".into()));
        }
        let node = if details == NodeDetails::default() {
            node
        } else {
            self.store
                .update_node_details(node.id, details)
                .await?
                .ok_or_else(|| super::not_found("node", name_or_id))?
        };
        let action = self
            .submit_node_action(caller, &node, ActionKind::NodeUpdate, inputs)
            .await?;
        Ok((node, action))
    }

    /// NODE_CHECK (`recover` false) or NODE_RECOVER with Senlin's
    /// parameters.
    pub async fn check_or_recover_node(
        &self,
        caller: &Identity,
        name_or_id: &str,
        recover: bool,
        params: Map<String, Value>,
    ) -> Result<(Node, ClusterAction)> {
        let node = self.find_node(caller, name_or_id).await?;
        admit(ClusterOperation::UpdateNode(&node), caller)?;
        let kind = if recover {
            check_recover_params(&params)?;
            ActionKind::NodeRecover
        } else {
            ActionKind::NodeCheck
        };
        settled(&node)?;
        let action = self.submit_node_action(caller, &node, kind, params).await?;
        Ok((node, action))
    }

    /// NODE_OPERATION: `operation` of the node's profile type.
    pub async fn operate_node(
        &self,
        caller: &Identity,
        name_or_id: &str,
        operation: &str,
        params: Map<String, Value>,
    ) -> Result<(Node, ClusterAction)> {
        let node = self.find_node(caller, name_or_id).await?;
        admit(ClusterOperation::UpdateNode(&node), caller)?;
        let profile = self.node_profile(&node).await?;
        operations::parse(profile.spec.type_name(), operation, &params)?;
        settled(&node)?;
        let inputs = json!({"operation": operation, "params": params});
        let action = self
            .submit_node_action(
                caller,
                &node,
                ActionKind::NodeOperation,
                super::requests::json_object(inputs),
            )
            .await?;
        Ok((node, action))
    }

    /// The names of the profiles of `nodes`, by profile id (one read per
    /// profile, however many nodes share it).
    pub async fn profile_names(
        &self,
        nodes: &[Node],
    ) -> Result<std::collections::HashMap<Uuid, String>> {
        let mut names = std::collections::HashMap::new();
        for node in nodes {
            if names.contains_key(&node.profile_id) {
                continue;
            }
            if let Some(profile) = self.store.get_profile(node.profile_id).await? {
                names.insert(profile.id, profile.name);
            }
        }
        Ok(names)
    }

    /// The profile a node was made from.
    pub async fn node_profile(&self, node: &Node) -> Result<Profile> {
        self.store
            .get_profile(node.profile_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("the profile of node {:?} is gone", node.name)))
    }

    /// Runs NODE_UPDATE, NODE_CHECK, NODE_RECOVER or NODE_OPERATION.
    pub(super) async fn run_node_maintenance(&self, run: &Run) -> RunResult<Ran> {
        let action = &run.action;
        let node = self
            .store
            .get_node(action.target_id)
            .await?
            .ok_or_else(|| {
                Stop::Failed(Error::NotFound(format!(
                    "node {} is gone",
                    action.target_id
                )))
            })?;
        let profile = self.node_profile(&node).await?;
        let caller = action.caller();
        // A run taken over after its engine died: the node it left
        // CREATING (moved to its profile already) is created first.
        if node.status == NodeStatus::Creating {
            self.converge_nodes(run, &profile, &[node.id]).await?;
            let node = self.store.get_node(node.id).await?.ok_or_else(|| {
                Stop::Failed(Error::NotFound(format!("node {} is gone", node.name)))
            })?;
            return Ok(finished(action.kind, &node, &caller));
        }
        match action.kind {
            ActionKind::NodeCheck => Ok(self.check_one(&caller, &node, &profile).await),
            ActionKind::NodeRecover => self.recover_one(run, &caller, &node, &profile).await,
            ActionKind::NodeOperation => self.operate_one(&caller, &node, &profile, action).await,
            ActionKind::NodeUpdate => self.update_one(run, &caller, &node, &profile).await,
            other => Err(Stop::Failed(Error::InvalidInput(format!(
                "{} is not a node maintenance action",
                other.as_str()
            )))),
        }
    }

    /// NODE_CHECK: the node's status as its resource says, in the final
    /// write; Senlin fails the action when the node is unhealthy.
    async fn check_one(&self, caller: &Identity, node: &Node, profile: &Profile) -> Ran {
        let (status, reason) = self.check_physical(caller, node, profile).await;
        let mut found = NodeStatusChange::new(node.id, status, reason.clone());
        found.only_from = vec![node.status];
        let change = ClusterChange {
            node_changes: vec![found],
            events: vec![super::node_event(
                node,
                "NODE_CHECK",
                status.as_str(),
                reason.clone(),
                caller,
            )],
            ..ClusterChange::default()
        };
        let (status, reason) = if status == NodeStatus::Active {
            (ActionStatus::Succeeded, "Node check succeeded.".to_owned())
        } else {
            (ActionStatus::Failed, format!("Node check failed: {reason}"))
        };
        Ran::Finished {
            status,
            reason,
            change,
            settle: settle("NODE_CHECK"),
        }
    }

    /// NODE_RECOVER: with `check` a healthy node is left alone; REBOOT
    /// reboots an instance; otherwise the resource is replaced.
    async fn recover_one(
        &self,
        run: &Run,
        caller: &Identity,
        node: &Node,
        profile: &Profile,
    ) -> RunResult<Ran> {
        let inputs = &run.action.inputs;
        if inputs.get("check").and_then(Value::as_bool) == Some(true) {
            let (status, _) = self.check_physical(caller, node, profile).await;
            if status == NodeStatus::Active {
                return Ok(Ran::succeeded(
                    format!("node {} is healthy: nothing to recover", node.name),
                    settle("NODE_RECOVER"),
                ));
            }
        }
        let operation = inputs
            .get("operation")
            .and_then(Value::as_str)
            .map(str::to_ascii_uppercase);
        let rebootable = matches!(profile.spec.kind, ProfileKind::Instance { .. });
        if operation.as_deref() == Some("REBOOT") && rebootable {
            return Ok(
                match self
                    .run_instance_operation(caller, node, NodeOperation::Power(PowerAction::Reboot))
                    .await
                {
                    Ok(()) => self.node_recovered(caller, node, "rebooted"),
                    Err(error) => failed_on(node, "NODE_RECOVER", &error, caller),
                },
            );
        }
        self.replace_resource(run, caller, node, profile, profile)
            .await
    }

    fn node_recovered(&self, caller: &Identity, node: &Node, how: &str) -> Ran {
        let reason = format!("recovered: {how}");
        let change = ClusterChange {
            node_changes: vec![NodeStatusChange::new(
                node.id,
                NodeStatus::Active,
                reason.clone(),
            )],
            events: vec![super::node_event(
                node,
                "NODE_RECOVER",
                "ACTIVE",
                reason,
                caller,
            )],
            ..ClusterChange::default()
        };
        Ran::Finished {
            status: ActionStatus::Succeeded,
            reason: format!("node {} {how}", node.name),
            change,
            settle: settle("NODE_RECOVER"),
        }
    }

    /// NODE_OPERATION: the operation checked again against the node's
    /// profile type (it may have changed since the request), then run.
    async fn operate_one(
        &self,
        caller: &Identity,
        node: &Node,
        profile: &Profile,
        action: &ClusterAction,
    ) -> RunResult<Ran> {
        let name = action
            .inputs
            .get("operation")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let params = action
            .inputs
            .get("params")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let operation = operations::parse(profile.spec.type_name(), name, &params)?;
        match self.run_instance_operation(caller, node, operation).await {
            Ok(()) => Ok(Ran::Finished {
                status: ActionStatus::Succeeded,
                reason: format!("operation {name} of node {} done", node.name),
                change: ClusterChange {
                    events: vec![super::node_event(
                        node,
                        "NODE_OPERATION",
                        node.status.as_str(),
                        format!("operation {name} done"),
                        caller,
                    )],
                    ..ClusterChange::default()
                },
                settle: settle("NODE_OPERATION"),
            }),
            Err(error) => Err(Stop::Failed(Error::Conflict(format!(
                "operation {name} of node {} failed: {error}",
                node.name
            )))),
        }
    }

    /// NODE_UPDATE: the new profile's resource replaces the old one; the
    /// other changes were written with the request.
    async fn update_one(
        &self,
        run: &Run,
        caller: &Identity,
        node: &Node,
        profile: &Profile,
    ) -> RunResult<Ran> {
        let new_profile_id = run
            .action
            .inputs
            .get("new_profile_id")
            .and_then(Value::as_str)
            .and_then(|id| Uuid::parse_str(id).ok());
        match new_profile_id {
            Some(new_profile_id) if new_profile_id != node.profile_id => {
                let new_profile =
                    self.store
                        .get_profile(new_profile_id)
                        .await?
                        .ok_or_else(|| {
                            Stop::Failed(Error::NotFound(format!(
                                "profile {new_profile_id} is gone"
                            )))
                        })?;
                self.replace_resource(run, caller, node, profile, &new_profile)
                    .await
            }
            _ => {
                let changed: Vec<&str> = run
                    .action
                    .inputs
                    .keys()
                    .map(String::as_str)
                    .filter(|key| *key != "node_name" && *key != "new_profile_id")
                    .collect();
                let reason = format!("node {} updated: {}", node.name, changed.join(", "));
                Ok(Ran::Finished {
                    status: ActionStatus::Succeeded,
                    reason: reason.clone(),
                    change: ClusterChange {
                        events: vec![super::node_event(
                            node,
                            "NODE_UPDATE",
                            node.status.as_str(),
                            reason,
                            caller,
                        )],
                        ..ClusterChange::default()
                    },
                    settle: Settle::Unchanged,
                })
            }
        }
    }

    /// Deletes the node's resource and creates one from `new` (the same
    /// profile for a recover), moving the node to `new` in the same write
    /// that makes it CREATING.
    async fn replace_resource(
        &self,
        run: &Run,
        caller: &Identity,
        node: &Node,
        old: &Profile,
        new: &Profile,
    ) -> RunResult<Ran> {
        let kind = run.action.kind.as_str();
        run.check_still_owned(self).await?;
        if let Err(error) = self.delete_physical(caller, node, old).await {
            let reason = format!(
                "{kind} failed: its resource {} could not be deleted: {error}",
                node.physical_id.as_deref().unwrap_or("(none)")
            );
            return Err(Stop::Failed(Error::Conflict(reason)));
        }
        let mut recreating = NodeStatusChange::new(node.id, NodeStatus::Creating, "recreating");
        recreating.physical_id = Some(planned_physical_id(new));
        if new.id != node.profile_id {
            recreating.profile_id = Some(new.id);
        }
        run.apply(
            self,
            &ClusterChange {
                node_changes: vec![recreating],
                ..ClusterChange::default()
            },
        )
        .await?;
        self.converge_nodes(run, new, &[node.id]).await?;
        let node =
            self.store.get_node(node.id).await?.ok_or_else(|| {
                Stop::Failed(Error::NotFound(format!("node {} is gone", node.name)))
            })?;
        Ok(finished(run.action.kind, &node, caller))
    }

    /// Runs an operation on the node's instance and waits until the
    /// instance is where the operation leaves it.
    async fn run_instance_operation(
        &self,
        caller: &Identity,
        node: &Node,
        operation: NodeOperation,
    ) -> Result<()> {
        let uuid = node
            .physical_id
            .as_deref()
            .and_then(|id| Uuid::parse_str(id).ok())
            .ok_or_else(|| {
                Error::Conflict(format!(
                    "node {:?} has no instance to operate on",
                    node.name
                ))
            })?;
        let expected = match operation {
            NodeOperation::Power(action) => {
                self.instances.power(caller, uuid, action).await?;
                match action {
                    PowerAction::Off => InstanceStatus::Stopped,
                    PowerAction::On | PowerAction::Reboot => InstanceStatus::Active,
                }
            }
            NodeOperation::Lock => {
                self.instances
                    .lock(
                        caller,
                        uuid,
                        Some(format!("node {} lock operation", node.name)),
                    )
                    .await?;
                return Ok(());
            }
            NodeOperation::Unlock => {
                self.instances.unlock(caller, uuid).await?;
                return Ok(());
            }
        };
        let started = Instant::now();
        loop {
            let instance = self.instances.get(caller, uuid).await?;
            if instance.status == expected {
                return Ok(());
            }
            if instance.status == InstanceStatus::Error {
                return Err(Error::Conflict(format!(
                    "instance {uuid} is ERROR: {}",
                    instance.status_reason
                )));
            }
            super::physical::pause(started, "instance operation").await?;
        }
    }

    /// One event by id, as `caller` may see it.
    pub async fn get_event(
        &self,
        caller: &Identity,
        id: &str,
    ) -> Result<crate::domain::cluster::ClusterEvent> {
        let not_found = || super::not_found("event", id);
        let uuid = Uuid::parse_str(id).map_err(|_| not_found())?;
        self.store
            .get_event(Self::scope(caller), uuid)
            .await?
            .ok_or_else(not_found)
    }
}

/// The cluster of a member settles from its nodes when the action ends.
fn settle(kind: &str) -> Settle {
    Settle::FromNodes {
        keep_desired: false,
        lead: format!("{kind} completed"),
    }
}

/// The end of an action whose node's resource was replaced: succeeded
/// when the node is ACTIVE, with the node's event under the action's kind.
fn finished(kind: ActionKind, node: &Node, caller: &Identity) -> Ran {
    let kind = kind.as_str();
    let (status, reason) = if node.status == NodeStatus::Active {
        (
            ActionStatus::Succeeded,
            format!("node {} is ACTIVE on a new resource", node.name),
        )
    } else {
        (
            ActionStatus::Failed,
            format!(
                "node {} is {}: {}",
                node.name,
                node.status.as_str(),
                node.status_reason
            ),
        )
    };
    Ran::Finished {
        status,
        reason: reason.clone(),
        change: ClusterChange {
            events: vec![super::node_event(
                node,
                kind,
                node.status.as_str(),
                reason,
                caller,
            )],
            ..ClusterChange::default()
        },
        settle: settle(kind),
    }
}

/// A failed operation on the node: the action fails saying why, the node
/// is left as it is (its resource is still there).
fn failed_on(node: &Node, kind: &str, error: &Error, caller: &Identity) -> Ran {
    let reason = format!("{kind} of node {} failed: {error}", node.name);
    Ran::Finished {
        status: ActionStatus::Failed,
        reason: reason.clone(),
        change: ClusterChange {
            events: vec![super::node_event(
                node,
                kind,
                node.status.as_str(),
                reason,
                caller,
            )],
            ..ClusterChange::default()
        },
        settle: settle(kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn recover_parameters_are_senlins() {
        assert!(check_recover_params(&params(json!({"operation": "rebuild"}))).is_ok());
        let message = |value| match check_recover_params(&params(value)) {
            Err(Error::InvalidInput(message)) => message,
            other => panic!("expected InvalidInput, got {other:?}"),
        };
        assert_eq!(
            message(json!({"operation": "DANCE"})),
            "Operation value 'DANCE' has to be one of the following: REBOOT, REBUILD, RECREATE."
        );
        assert!(message(json!({"bogus": 1})).contains("bogus"));
    }
}
