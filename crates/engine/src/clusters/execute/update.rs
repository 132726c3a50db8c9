//! CLUSTER_UPDATE, CLUSTER_UPDATE_POLICY and CLUSTER_REPLACE_NODES.
//!
//! - CLUSTER_UPDATE writes the new name, metadata, timeout, config and profile in
//!   its final write. With a new profile (and not `profile_only`) each
//!   member is first rebuilt on it, one durable step per member as
//!   CLUSTER_RECOVER does: its old resource deleted, then one fenced write
//!   makes it CREATING on the new profile with the id of its new resource,
//!   and the create follows. A rerun skips members already on the new
//!   profile and finishes those left CREATING.
//! - CLUSTER_UPDATE_POLICY changes an attached policy's `enabled` in one
//!   final write.
//! - CLUSTER_REPLACE_NODES, in one final write, makes each old member a
//!   node of no cluster (kept, as Senlin's NODE_LEAVE keeps it) and adopts
//!   its replacement (adoption is conditional: a rerun adopts nothing
//!   twice).

use serde_json::Value;
use uuid::Uuid;

use super::super::ClusterService;
use super::super::run::{Ran, Run, RunResult, Stop};
use crate::domain::cluster::{
    ActionStatus, Cluster, ClusterConfig, Node, NodeStatus, PolicyBinding, Profile,
};
use crate::error::Error;
use crate::store::clusters::{ClusterChange, ClusterColumns, Settle};

fn failed(message: impl Into<String>) -> Stop {
    Stop::Failed(Error::InvalidInput(message.into()))
}

fn input_uuid(run: &Run, key: &str) -> RunResult<Option<Uuid>> {
    match run.action.inputs.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Uuid::parse_str(text)
            .map(Some)
            .map_err(|_| failed(format!("input {key} is not an id"))),
        Some(_) => Err(failed(format!("input {key} is not an id"))),
    }
}

impl ClusterService {
    pub(in crate::clusters) async fn run_cluster_update(
        &self,
        run: &Run,
        cluster: &Cluster,
        members: Vec<Node>,
    ) -> RunResult<Ran> {
        let inputs = &run.action.inputs;
        let new_profile =
            match input_uuid(run, "profile_id")? {
                Some(id) => Some(self.store.get_profile(id).await?.ok_or_else(|| {
                    Stop::Failed(Error::NotFound(format!("profile {id} is gone")))
                })?),
                None => None,
            };
        let profile_only = inputs
            .get("profile_only")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let mut rebuilt = 0;
        let mut failures = 0;
        let mut abandoned = 0;
        if let Some(profile) = new_profile.as_ref().filter(|_| !profile_only) {
            let caller = run.action.caller();
            // With a launch policy each rebuilt member waits on its hook
            // before it is back in service; the update resumes once they
            // are answered, from the members still on the old profile.
            let launch = self.launch_policy(cluster).await?;
            let left_creating: Vec<Uuid> = members
                .iter()
                .filter(|node| node.status == NodeStatus::Creating && node.profile_id == profile.id)
                .map(|node| node.id)
                .collect();
            if !left_creating.is_empty() {
                self.converge_nodes(run, profile, &left_creating, launch.is_some())
                    .await?;
            }
            let mut touched = left_creating.clone();
            for node in members
                .iter()
                .filter(|node| node.profile_id != profile.id && node.status != NodeStatus::Deleting)
            {
                touched.push(node.id);
                if self
                    .rebuild_node(run, &caller, node, profile, launch.is_some())
                    .await?
                {
                    rebuilt += 1;
                } else {
                    failures += 1;
                }
            }
            if let Some(launch) = launch {
                let nodes = self.store.get_nodes(&touched).await?;
                let built: Vec<&Node> = nodes
                    .iter()
                    .filter(|node| node.status == NodeStatus::Creating)
                    .collect();
                if !built.is_empty() {
                    self.hold_for_launch(run, cluster, &built, &launch).await?;
                    return Ok(Ran::Handed);
                }
                // Resumed: how the members it held came out.
                let held = super::super::launch::held_nodes(&run.action);
                if !held.is_empty() {
                    let nodes = self.store.get_nodes(&held).await?;
                    rebuilt = nodes
                        .iter()
                        .filter(|node| node.status == NodeStatus::Active)
                        .count();
                    abandoned = held.len() - nodes.len();
                    let unwell = self
                        .store
                        .list_cluster_nodes(cluster.id)
                        .await?
                        .iter()
                        .filter(|node| {
                            node.profile_id == profile.id && node.status != NodeStatus::Active
                        })
                        .count();
                    failures = abandoned + unwell;
                }
            }
        }
        let timeout = inputs
            .get("timeout")
            .map(|value| value.as_i64().and_then(|v| i32::try_from(v).ok()));
        let change = ClusterChange {
            cluster_id: Some(cluster.id),
            cluster: ClusterColumns {
                name: inputs
                    .get("name")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                metadata: inputs.get("metadata").and_then(Value::as_object).cloned(),
                timeout,
                profile_id: new_profile.as_ref().map(|profile| profile.id),
                config: inputs
                    .get("config")
                    .and_then(Value::as_object)
                    .cloned()
                    .map(ClusterConfig::stored),
                ..ClusterColumns::default()
            },
            ..ClusterChange::default()
        };
        let (status, reason) = if failures == 0 {
            (
                ActionStatus::Succeeded,
                format!("Cluster update completed ({rebuilt} node(s) updated)"),
            )
        } else if abandoned > 0 {
            (
                ActionStatus::Failed,
                format!(
                    "{failures} node(s) could not be updated to the new profile ({abandoned} abandoned by the launch lifecycle hook and deleted)"
                ),
            )
        } else {
            (
                ActionStatus::Failed,
                format!("{failures} node(s) could not be updated to the new profile"),
            )
        };
        Ok(Ran::Finished {
            status,
            reason,
            change,
            settle: Settle::FromNodes {
                // The nodes abandoned are gone: the size is what is left.
                keep_desired: abandoned == 0,
                lead: "CLUSTER_UPDATE completed".into(),
            },
        })
    }

    /// Replaces one member's resource by one of `profile`; true when it is
    /// ACTIVE on it (with `hold`, a member built stays CREATING for its
    /// launch hook).
    async fn rebuild_node(
        &self,
        run: &Run,
        caller: &ember_runtime::Identity,
        node: &Node,
        profile: &Profile,
        hold: bool,
    ) -> RunResult<bool> {
        let old = self
            .store
            .get_profile(node.profile_id)
            .await?
            .unwrap_or_else(|| profile.clone());
        self.replace_or_mark(run, caller, node, &old, profile, "NODE_UPDATE", hold)
            .await
    }

    pub(in crate::clusters) async fn run_update_policy(
        &self,
        run: &Run,
        cluster: &Cluster,
    ) -> RunResult<Ran> {
        let policy_id =
            input_uuid(run, "policy_id")?.ok_or_else(|| failed("input policy_id missing"))?;
        let binding = self
            .store
            .list_bindings(cluster.id)
            .await?
            .into_iter()
            .map(|(binding, _)| binding)
            .find(|binding| binding.policy_id == policy_id)
            .ok_or_else(|| {
                Stop::Failed(Error::NotFound(format!(
                    "The policy '{policy_id}' is not attached to the specified cluster '{}'.",
                    cluster.id
                )))
            })?;
        let enabled = run
            .action
            .inputs
            .get("enabled")
            .and_then(Value::as_bool)
            .unwrap_or(binding.enabled);
        Ok(Ran::Finished {
            status: ActionStatus::Succeeded,
            reason: "Policy updated.".into(),
            change: ClusterChange {
                cluster_id: Some(cluster.id),
                bind_policy: Some(PolicyBinding { enabled, ..binding }),
                ..ClusterChange::default()
            },
            settle: Settle::Unchanged,
        })
    }

    pub(in crate::clusters) async fn run_replace_nodes(
        &self,
        run: &Run,
        cluster: &Cluster,
    ) -> RunResult<Ran> {
        let caller = run.action.caller();
        let candidates = run
            .action
            .inputs
            .get("candidates")
            .and_then(Value::as_object)
            .ok_or_else(|| failed("input candidates missing"))?;
        let mut change = ClusterChange {
            cluster_id: Some(cluster.id),
            ..ClusterChange::default()
        };
        for (old, new) in candidates {
            let parse =
                |text: &str| Uuid::parse_str(text).map_err(|_| failed("candidates: not ids"));
            let (old_id, new_id) = (parse(old)?, parse(new.as_str().unwrap_or_default())?);
            // The member leaves (and stays, a node of no cluster, as
            // Senlin's NODE_LEAVE leaves it); its replacement joins.
            if let Some(old) = self.store.get_node(old_id).await?
                && old.cluster_id == Some(cluster.id)
            {
                change.release_nodes.push((
                    old.id,
                    old.status,
                    format!("replaced in cluster {} by node {new_id}", cluster.name),
                ));
                change.events.push(super::super::node_event(
                    &old,
                    "NODE_LEAVE",
                    old.status.as_str(),
                    format!("replaced by node {new_id}"),
                    &caller,
                ));
            }
            change.adopt_nodes.push(new_id);
        }
        let replaced = change.release_nodes.len();
        Ok(Ran::Finished {
            status: ActionStatus::Succeeded,
            reason: format!("Completed replacing nodes ({replaced})."),
            change,
            settle: Settle::FromNodes {
                keep_desired: true,
                lead: "CLUSTER_REPLACE_NODES completed".into(),
            },
        })
    }
}
