//! The dry runs of cluster and node operations ("allowed?"): every reason
//! the operation would be refused now, from the function the operation
//! itself asks ([`ClusterService::blockers`]), so the answer and the call
//! cannot disagree — plus, for a cluster, the actions a new one would
//! queue behind (an accepted operation waits its turn; it is not refused,
//! as in Senlin). Nothing is recorded: asking is not acting.

use ember_runtime::Identity;

use super::ClusterService;
use crate::domain::admission::{Blocker, ClusterOperation, break_glass_would_pass};
use crate::domain::cluster::{ActionStatus, Cluster, ClusterAction};
use crate::error::{Error, Result};
use crate::store::clusters::ActionQuery;

/// The cluster operations a dry run answers for.
pub const CLUSTER_OPERATIONS: &[&str] = &[
    "scale_out",
    "scale_in",
    "resize",
    "update",
    "delete",
    "check",
    "recover",
    "lock",
    "unlock",
    "attach_policy",
    "detach_policy",
    "update_policy",
    "replace_nodes",
    "operation",
];

/// The node operations a dry run answers for.
pub const NODE_OPERATIONS: &[&str] = &["update", "delete", "check", "recover", "operation"];

/// The most queued actions an answer lists.
const QUEUED_SHOWN: u32 = 20;

/// What a cluster's dry run answers.
#[derive(Debug, Clone)]
pub struct ClusterCheck {
    pub cluster: Cluster,
    /// Everything that refuses it; the first is what the operation answers.
    pub blockers: Vec<Blocker>,
    /// Whether an admin's break-glass would run it (every blocker is the
    /// maintenance lock).
    pub break_glass_would_pass: bool,
    /// The cluster's actions that have not ended, oldest first.
    pub queued_behind: Vec<ClusterAction>,
    /// The health policy's recovery budget.
    pub remediation: Option<super::remediation::RemediationStatus>,
}

/// What a node's dry run answers.
#[derive(Debug, Clone)]
pub struct NodeCheck {
    pub blockers: Vec<Blocker>,
    pub break_glass_would_pass: bool,
}

fn unknown(what: &str, operation: &str, known: &[&str]) -> Error {
    Error::InvalidInput(format!(
        "operation {operation:?} is not one a {what} dry run answers for: {}",
        known.join(", ")
    ))
}

impl ClusterService {
    /// Would `operation` (one of [`CLUSTER_OPERATIONS`]; `count` for a
    /// scale) be accepted on the caller's cluster now?
    pub async fn check_cluster_operation(
        &self,
        caller: &Identity,
        name_or_id: &str,
        operation: &str,
        count: u32,
    ) -> Result<ClusterCheck> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        let count = u64::from(count);
        let asked = match operation {
            "scale_out" => ClusterOperation::ScaleOut {
                cluster: &cluster,
                count,
            },
            "scale_in" => ClusterOperation::ScaleIn {
                cluster: &cluster,
                count,
            },
            "resize" => ClusterOperation::Resize(&cluster),
            "update" => ClusterOperation::UpdateCluster(&cluster),
            "delete" => ClusterOperation::DeleteCluster(&cluster),
            "check" => ClusterOperation::Check(&cluster),
            "recover" => ClusterOperation::Recover(&cluster),
            "lock" => ClusterOperation::Lock(&cluster),
            "unlock" => ClusterOperation::Unlock(&cluster),
            "attach_policy" => ClusterOperation::AttachPolicy(&cluster),
            "detach_policy" => ClusterOperation::DetachPolicy(&cluster),
            "update_policy" => ClusterOperation::UpdateClusterPolicy(&cluster),
            "replace_nodes" => ClusterOperation::ReplaceNodes(&cluster),
            "operation" => ClusterOperation::Operate(&cluster),
            other => return Err(unknown("cluster", other, CLUSTER_OPERATIONS)),
        };
        let blockers = self.blockers(&asked, caller).await?;
        let queued_behind = self
            .store
            .list_actions(&ActionQuery {
                cluster_id: Some(cluster.id),
                statuses: ActionStatus::unfinished().collect(),
                limit: QUEUED_SHOWN,
                ..ActionQuery::default()
            })
            .await?;
        Ok(ClusterCheck {
            break_glass_would_pass: break_glass_would_pass(&blockers, true),
            blockers,
            queued_behind,
            remediation: self.remediation_status(&cluster).await?,
            cluster,
        })
    }

    /// Would `operation` (one of [`NODE_OPERATIONS`]) be accepted on the
    /// caller's node now?
    pub async fn check_node_operation(
        &self,
        caller: &Identity,
        name_or_id: &str,
        operation: &str,
    ) -> Result<NodeCheck> {
        let node = self.find_node(caller, name_or_id).await?;
        let cluster = match node.cluster_id {
            Some(cluster_id) => self.store.get_cluster(cluster_id).await?,
            None => None,
        };
        let asked = match operation {
            "delete" => ClusterOperation::DeleteNode {
                node: &node,
                cluster: cluster.as_ref(),
            },
            "update" | "check" | "recover" | "operation" => ClusterOperation::UpdateNode(&node),
            other => return Err(unknown("node", other, NODE_OPERATIONS)),
        };
        let blockers = self.blockers(&asked, caller).await?;
        Ok(NodeCheck {
            break_glass_would_pass: break_glass_would_pass(&blockers, true),
            blockers,
        })
    }
}
