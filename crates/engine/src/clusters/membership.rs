//! Changing what a cluster is made of besides its size: adding nodes of
//! no cluster (one conditional update each, so a rerun adopts nothing
//! twice) and attaching or detaching policies (in the action's final
//! write).

use serde_json::{Value, json};
use uuid::Uuid;

use super::ClusterService;
use super::execute::id_list;
use super::run::{Ran, Run, RunResult, Stop};
use crate::domain::cluster::{ActionKind, ActionStatus, Cluster, PolicyBinding};
use crate::error::Error;
use crate::store::clusters::{ClusterChange, ClusterColumns, Settle};

impl ClusterService {
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
