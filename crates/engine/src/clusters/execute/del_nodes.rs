//! The run of CLUSTER_DEL_NODES: the named members that are still
//! members are removed — deleted, or left as nodes of no cluster when
//! `destroy_after_deletion` is false (Senlin's default without a deletion
//! policy) — the desired capacity following them unless the deletion
//! policy says to keep it.

use uuid::Uuid;

use super::id_list;
use crate::clusters::ClusterService;
use crate::clusters::removal::Removal;
use crate::clusters::run::{Ran, Run, RunResult, Stop};
use crate::domain::cluster::{Cluster, Node, NodeStatus};
use crate::error::Error;
use crate::store::clusters::ClusterColumns;

impl ClusterService {
    /// Removes the named members.
    pub(super) async fn run_del_nodes(
        &self,
        run: &Run,
        cluster: &Cluster,
        members: Vec<Node>,
        live: i32,
    ) -> RunResult<Ran> {
        let action = &run.action;
        let wanted: Vec<Uuid> = id_list(action.inputs.get("nodes"));
        let victims: Vec<Node> = members
            .into_iter()
            .filter(|node| wanted.contains(&node.id) && node.status != NodeStatus::Deleting)
            .collect();
        if victims.is_empty() {
            return Err(Stop::Failed(Error::Conflict(format!(
                "none of the {} node(s) to delete is a member of cluster {:?} any more",
                wanted.len(),
                cluster.name
            ))));
        }
        let policy = self.deletion_policy(cluster).await?;
        // Senlin's: as asked, else as the deletion policy says, else the
        // nodes leave the cluster and stay.
        let destroy = action
            .inputs
            .get("destroy_after_deletion")
            .and_then(serde_json::Value::as_bool)
            .or(policy.as_ref().map(|policy| policy.destroy_after_deletion))
            .unwrap_or(false);
        let removed = i32::try_from(victims.len()).unwrap_or(i32::MAX);
        let desired = if policy
            .as_ref()
            .is_none_or(|policy| policy.reduce_desired_capacity)
        {
            live.saturating_sub(removed).max(0)
        } else {
            cluster.desired_capacity
        };
        self.remove_nodes(
            run,
            cluster,
            victims,
            desired,
            ClusterColumns::default(),
            Removal {
                policy,
                destroy,
                kept_protected: 0,
            },
        )
        .await
    }
}
