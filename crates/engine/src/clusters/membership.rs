//! Changing what a cluster is made of besides its size: adding nodes of
//! no cluster (one conditional update each, so a rerun adopts nothing
//! twice) and attaching or detaching policies (in the action's final
//! write).

use ember_runtime::Identity;
use serde_json::{Value, json};
use uuid::Uuid;

use super::execute::id_list;
use super::run::{Ran, Run, RunResult, Stop};
use super::{ClusterService, python_list};
use crate::domain::cluster::{
    ActionKind, ActionStatus, Cluster, Node, NodeStatus, PolicyBinding, sizing,
};
use crate::error::{Error, Result};
use crate::store::clusters::{ClusterChange, ClusterColumns, Settle};

impl ClusterService {
    /// The nodes an add_nodes (`add`) or del_nodes request names, checked
    /// as Senlin checks them before it records the action, and refused in
    /// its words (a 400 listing every problem, one per line): names that
    /// find no node (or more than one); to add, nodes of another profile
    /// type than the cluster's, nodes already in a cluster, nodes not
    /// ACTIVE; to delete, nodes not members of this cluster. Then the
    /// cluster's size after the change must fit its min_size and max_size.
    pub(super) async fn nodes_to_change(
        &self,
        caller: &Identity,
        cluster: &Cluster,
        identities: &[String],
        add: bool,
    ) -> Result<Vec<Node>> {
        let cluster_type = match add {
            true => self
                .store
                .get_profile(cluster.profile_id)
                .await?
                .map(|profile| profile.spec.type_name()),
            false => None,
        };
        let mut found = Vec::with_capacity(identities.len());
        let mut not_found = Vec::new();
        let (mut other_type, mut owned, mut not_active, mut not_members) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for identity in identities {
            let node = match self.find_node(caller, identity).await {
                Ok(node) => node,
                Err(Error::NotFound(_) | Error::InvalidInput(_)) => {
                    not_found.push(identity.clone());
                    continue;
                }
                Err(other) => return Err(other),
            };
            if add {
                if node.status != NodeStatus::Active {
                    not_active.push(node.id);
                }
                if node.cluster_id.is_some() {
                    owned.push(node.id);
                }
                let node_type = self
                    .store
                    .get_profile(node.profile_id)
                    .await?
                    .map(|profile| profile.spec.type_name());
                if node_type != cluster_type {
                    other_type.push(node.id);
                }
            } else if node.cluster_id != Some(cluster.id) {
                not_members.push(node.id);
            }
            found.push(node);
        }
        let mut problems = Vec::new();
        if !other_type.is_empty() {
            problems.push(format!(
                "Profile type of nodes {} does not match that of the cluster.",
                python_list(&other_type)
            ));
        }
        if !owned.is_empty() {
            problems.push(format!(
                "Nodes {} already owned by some cluster.",
                python_list(&owned)
            ));
        }
        if !not_active.is_empty() {
            problems.push(format!(
                "Nodes are not ACTIVE: {}.",
                python_list(&not_active)
            ));
        }
        if !not_found.is_empty() {
            problems.push(format!("Nodes not found: {}.", python_list(&not_found)));
        }
        if !not_members.is_empty() {
            problems.push(format!(
                "Nodes not members of specified cluster: {}.",
                python_list(&not_members)
            ));
        }
        if !problems.is_empty() {
            return Err(Error::InvalidInput(problems.join("\n")));
        }
        let count = i32::try_from(found.len()).unwrap_or(i32::MAX);
        let target = if add {
            cluster.desired_capacity.saturating_add(count)
        } else {
            cluster.desired_capacity.saturating_sub(count)
        };
        sizing::check_size_params(Some(cluster), Some(target), None, None, true)?;
        Ok(found)
    }

    /// CLUSTER_ADD_NODES: the named nodes that are still free join (one
    /// conditional update each); max_size grows to fit them.
    pub(super) async fn add_nodes(&self, run: &Run, cluster: &Cluster) -> RunResult<Ran> {
        let wanted: Vec<Uuid> = id_list(run.action.inputs.get("nodes"));
        let outcome = run
            .apply(
                self,
                &ClusterChange {
                    cluster_id: Some(cluster.id),
                    adopt_nodes: wanted.clone(),
                    ..ClusterChange::default()
                },
            )
            .await?;
        let live = i32::try_from(self.counted_members(cluster.id).await?.len()).unwrap_or(i32::MAX);
        let columns = ClusterColumns {
            max_size: (cluster.max_size != -1 && live > cluster.max_size).then_some(live),
            ..ClusterColumns::default()
        };
        let reason = if run.is_rerun() || outcome.adopted.len() == wanted.len() {
            format!("{} node(s) added", outcome.adopted.len())
        } else {
            format!(
                "{} of {} node(s) added: the others joined a cluster or went away meanwhile",
                outcome.adopted.len(),
                wanted.len()
            )
        };
        Ok(Ran::Finished {
            status: ActionStatus::Succeeded,
            reason,
            change: ClusterChange {
                cluster_id: Some(cluster.id),
                cluster: columns,
                ..ClusterChange::default()
            },
            settle: Settle::FromNodes {
                keep_desired: false,
                lead: "CLUSTER_ADD_NODES completed".into(),
            },
        })
    }

    /// CLUSTER_ATTACH_POLICY / CLUSTER_DETACH_POLICY, in the final write.
    pub(super) async fn change_policy(&self, run: &Run, cluster: &Cluster) -> RunResult<Ran> {
        let action = &run.action;
        let policy_id = id_list(Some(&json!([action.inputs.get("policy_id")])))
            .into_iter()
            .next()
            .ok_or_else(|| Stop::Failed(Error::InvalidInput("policy_id missing".into())))?;
        let mut change = ClusterChange {
            cluster_id: Some(cluster.id),
            ..ClusterChange::default()
        };
        let reason = if action.kind == ActionKind::ClusterAttachPolicy {
            let priority = action
                .inputs
                .get("priority")
                .and_then(Value::as_i64)
                .and_then(|v| i32::try_from(v).ok())
                .unwrap_or(0);
            let enabled = action
                .inputs
                .get("enabled")
                .and_then(Value::as_bool)
                .unwrap_or(true);
            change.bind_policy = Some(PolicyBinding {
                cluster_id: cluster.id,
                policy_id,
                priority,
                enabled,
            });
            format!("policy {policy_id} attached")
        } else {
            let bound = self
                .store
                .list_bindings(cluster.id)
                .await?
                .iter()
                .any(|(binding, _)| binding.policy_id == policy_id);
            if !bound {
                return Err(Stop::Failed(Error::NotFound(format!(
                    "policy {policy_id} is not attached to cluster {}",
                    cluster.name
                ))));
            }
            change.unbind_policy = Some(policy_id);
            format!("policy {policy_id} detached")
        };
        Ok(Ran::Finished {
            status: ActionStatus::Succeeded,
            reason,
            change,
            settle: Settle::Unchanged,
        })
    }
}
