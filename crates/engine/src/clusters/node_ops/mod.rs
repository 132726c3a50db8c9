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
//!
//! This file is the request side; `run` is what the dispatcher runs.

mod run;

use ember_runtime::Identity;
use serde_json::{Map, Value, json};

use super::{ClusterService, action_event};
use crate::domain::admission::cluster::ClusterOperation;
use crate::domain::cluster::operations;
use crate::domain::cluster::{
    ActionKind, ActionStatus, ClusterAction, Node, NodeStatus, validate_name,
};
use crate::error::{Error, Result};
use crate::store::clusters::NodeDetails;

/// What a user asks of a node update; `None` leaves a field as it is.
#[derive(Debug, Default)]
pub struct NodeUpdate {
    pub name: Option<String>,
    pub role: Option<String>,
    pub tainted: Option<bool>,
    /// Protect the node from scale-in, or clear its protection.
    pub protected: Option<bool>,
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
            "Action parameter {} is not recognizable.",
            super::python_list(&unknown)
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
        self.admit(ClusterOperation::UpdateNode(&node), caller)
            .await?;
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
        if let Some(protected) = update
            .protected
            .filter(|protected| *protected != node.protected)
        {
            inputs.insert("protected".into(), json!(protected));
            details.protected = Some(protected);
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
        health: super::HealthAction,
        params: Map<String, Value>,
    ) -> Result<(Node, ClusterAction)> {
        let node = self.find_node(caller, name_or_id).await?;
        self.admit(ClusterOperation::UpdateNode(&node), caller)
            .await?;
        let kind = match health {
            super::HealthAction::Recover => {
                check_recover_params(&params)?;
                ActionKind::NodeRecover
            }
            super::HealthAction::Check => ActionKind::NodeCheck,
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
        self.admit(ClusterOperation::UpdateNode(&node), caller)
            .await?;
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
        assert_eq!(
            message(json!({"bogus": 1})),
            "Action parameter ['bogus'] is not recognizable."
        );
    }
}
