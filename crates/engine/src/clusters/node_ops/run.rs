//! The run side of node update, check, recover and operations: one node,
//! under its cluster's lock when it is a member. A resource is replaced in
//! two durable steps (old deleted; then one fenced write moves the node to
//! its profile, CREATING with its new resource id) and a taken-over run
//! first finishes a node left CREATING.

use ember_runtime::Identity;
use serde_json::Value;
use uuid::Uuid;

use crate::clusters::ClusterService;
use crate::clusters::physical::{PHYSICAL_TIMEOUT, too_long};
use crate::clusters::run::{Ran, Run, RunResult, Stop};
use crate::domain::cluster::operations::{self, NodeOperation};
use crate::domain::cluster::{
    ActionKind, ActionStatus, ClusterAction, Node, NodeStatus, Profile, ProfileKind,
};
use crate::domain::instance::{InstanceStatus, PowerAction};
use crate::error::{Error, Result};
use crate::store::clusters::{ClusterChange, NodeStatusChange, Settle};

/// The physical id a replaced resource is created with: an instance's is
/// chosen now (so a rerun finds it); a stack's is known once it exists.
impl ClusterService {
    /// Runs NODE_UPDATE, NODE_CHECK, NODE_RECOVER or NODE_OPERATION.
    pub(in crate::clusters) async fn run_node_maintenance(&self, run: &Run) -> RunResult<Ran> {
        let action = &run.action;
        if matches!(
            action.kind,
            ActionKind::NodeRecover | ActionKind::NodeUpdate
        ) && crate::clusters::launch::resumed_runs(action) > 0
        {
            return self.finish_held_rebuild(run).await;
        }
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
            self.converge_nodes(run, &profile, &[node.id], false)
                .await?;
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
            events: vec![crate::clusters::node_event(
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
        // A health policy's recovery of a node no longer ERROR (another
        // engine's, or a user's, recovered it first) does nothing.
        if inputs.contains_key(crate::clusters::remediation::BY_HEALTH_POLICY)
            && node.status != NodeStatus::Error
        {
            return Ok(Ran::succeeded(
                format!(
                    "node {} is {}: {}",
                    node.name,
                    node.status.as_str(),
                    crate::clusters::remediation::NOTHING_TO_RECOVER
                ),
                settle("NODE_RECOVER"),
            ));
        }
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
            events: vec![crate::clusters::node_event(
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
                    events: vec![crate::clusters::node_event(
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
                        events: vec![crate::clusters::node_event(
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
        // A member rebuilt (a recover, or an update to a new profile) waits
        // on the cluster's launch hook, if it has one, before the node is
        // back in service.
        let launch = match (run.action.kind, node.cluster_id) {
            (ActionKind::NodeRecover | ActionKind::NodeUpdate, Some(cluster_id)) => {
                match self.store.get_cluster(cluster_id).await? {
                    Some(cluster) => self
                        .launch_policy(&cluster)
                        .await?
                        .map(|launch| (cluster, launch)),
                    None => None,
                }
            }
            _ => None,
        };
        if let Err(reason) = self
            .replace_node_resource(run, caller, node, old, new, launch.is_some())
            .await?
        {
            return Err(Stop::Failed(Error::Conflict(format!(
                "{kind} failed: {reason}"
            ))));
        }
        let node =
            self.store.get_node(node.id).await?.ok_or_else(|| {
                Stop::Failed(Error::NotFound(format!("node {} is gone", node.name)))
            })?;
        if let Some((cluster, launch)) = launch
            && node.status == NodeStatus::Creating
        {
            self.hold_for_launch(run, &cluster, &[&node], &launch)
                .await?;
            return Ok(Ran::Handed);
        }
        Ok(finished(run.action.kind, &node, caller))
    }

    /// A NODE_RECOVER or NODE_UPDATE resumed after its rebuilt node's
    /// launch wait: the node built again (and held again), in service, or
    /// abandoned.
    async fn finish_held_rebuild(&self, run: &Run) -> RunResult<Ran> {
        let action = &run.action;
        let caller = action.caller();
        let name = action
            .inputs
            .get("node_name")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| action.target_id.to_string());
        let Some(node) = self.store.get_node(action.target_id).await? else {
            return Ok(Ran::Finished {
                status: ActionStatus::Failed,
                reason: format!(
                    "node {name} was rebuilt, then abandoned by the launch lifecycle hook and deleted"
                ),
                change: ClusterChange::default(),
                settle: settle(action.kind.as_str()),
            });
        };
        let cluster = match node.cluster_id {
            Some(cluster_id) => self.store.get_cluster(cluster_id).await?,
            None => None,
        };
        if let Some(cluster) = cluster {
            let profile = self.node_profile(&node).await?;
            if let crate::clusters::launch::Building::Held =
                self.resume_held(run, &cluster, &profile).await?
            {
                return Ok(Ran::Handed);
            }
        }
        let node =
            self.store.get_node(node.id).await?.ok_or_else(|| {
                Stop::Failed(Error::NotFound(format!("node {} is gone", node.name)))
            })?;
        Ok(finished(action.kind, &node, &caller))
    }

    /// Runs an operation on the node's instance and waits until the
    /// instance is where the operation leaves it.
    pub(in crate::clusters) async fn run_instance_operation(
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
        self.instances
            .wait(caller, uuid, PHYSICAL_TIMEOUT, |read| match read {
                Ok(instance) if instance.status == expected => Some(Ok(())),
                Ok(instance) if instance.status == InstanceStatus::Error => {
                    Some(Err(Error::Conflict(format!(
                        "instance {uuid} is ERROR: {}",
                        instance.status_reason
                    ))))
                }
                Ok(_) => None,
                Err(error) => Some(Err(error)),
            })
            .await
            .unwrap_or_else(|| Err(Error::Conflict(too_long("instance operation"))))
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
            events: vec![crate::clusters::node_event(
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
            events: vec![crate::clusters::node_event(
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
