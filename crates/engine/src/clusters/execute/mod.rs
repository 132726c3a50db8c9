//! Running one claimed action, under its cluster's lock when it takes one
//! (the claim took it), with every write fenced by the run's token.
//!
//! Each kind runs in durable steps, so that the run that takes an action
//! over after its engine died (every kind is taken over; see the
//! dispatcher) finishes it from where the dead run stopped:
//!
//! | kind | resumes from |
//! |---|---|
//! | CLUSTER_CREATE, CLUSTER_SCALE_OUT, CLUSTER_RESIZE up, NODE_CREATE | the growth plan in the action's outputs (`planned_nodes`): nodes still CREATING are created idempotently and settled (see `grow`); no plan yet = start again. With a launch policy, once the waits are recorded the growth WAITs and runs again only when they are all answered (see `launch`) |
//! | NODE_CREATE of a launching node (a growth's child) | the node row: no longer CREATING = answered already; otherwise CONTINUE again, or delete its resource again (see `launch`) |
//! | CLUSTER_SCALE_IN, CLUSTER_RESIZE down, CLUSTER_DEL_NODES, NODE_DELETE of a member | nothing written = start again; once the removal is recorded the parent WAITs and is never run again: its NODE_DELETE children carry on (see `removal`) |
//! | NODE_DELETE (child, or of a node of no cluster) | the node row: gone after a takeover = done; otherwise delete its resource again (a delete of a gone resource succeeds) |
//! | CLUSTER_RECOVER | members left CREATING by the dead run are created with their recorded id; the rest are checked and recovered again (see `maintenance`) |
//! | CLUSTER_CHECK, CLUSTER_ADD_NODES, CLUSTER_ATTACH/DETACH_POLICY | the cluster as it is: one final write each (adoptions are conditional, so a rerun adopts nothing twice) |
//! | CLUSTER_DELETE | the nodes left: each deleted again, idempotently, then the cluster row (see `maintenance`) |
//! | CLUSTER_OPERATION | the node outcomes in the action's outputs: nodes with one recorded are skipped, the rest operated on (see `cluster_ops`) |
//!
//! Every action that holds the cluster's lock ends with one transaction
//! that makes it final, settles the cluster from its nodes (never left
//! RESIZING; desired capacity = its members) and releases the lock.

use serde_json::Value;
use uuid::Uuid;

use super::ClusterService;
use super::run::{Ran, Run, RunResult, Stop};
use crate::domain::cluster::{ActionKind, ClusterStatus, NodeStatus};
use crate::error::Error;
use crate::store::clusters::{ClusterChange, NodeStatusChange, Settle};

mod del_nodes;
mod scale;
mod update;

impl ClusterService {
    pub(super) async fn execute(&self, run: &Run) -> RunResult<Ran> {
        match run.action.kind {
            ActionKind::NodeCreate if super::launch::is_launch_wait(&run.action) => {
                self.run_launch_answer(run).await
            }
            ActionKind::NodeCreate => self.run_node_create(run).await,
            ActionKind::NodeDelete => self.run_node_delete(run).await,
            ActionKind::NodeUpdate
            | ActionKind::NodeCheck
            | ActionKind::NodeRecover
            | ActionKind::NodeOperation => self.run_node_maintenance(run).await,
            _ => self.run_cluster_action(run).await,
        }
    }

    /// A cluster action: the cluster and its counted members read once,
    /// then the kind's own run.
    async fn run_cluster_action(&self, run: &Run) -> RunResult<Ran> {
        let action = &run.action;
        let cluster = self
            .store
            .get_cluster(action.target_id)
            .await?
            .ok_or_else(|| {
                Stop::Failed(Error::NotFound(format!(
                    "cluster {} is gone",
                    action.target_id
                )))
            })?;
        let members = self.counted_members(cluster.id).await?;
        let live = i32::try_from(members.len()).unwrap_or(i32::MAX);
        match action.kind {
            ActionKind::ClusterCreate => self.run_cluster_create(run, &cluster, live).await,
            ActionKind::ClusterScaleOut => self.run_scale_out(run, &cluster, live).await,
            ActionKind::ClusterScaleIn => self.run_scale_in(run, &cluster, &members, live).await,
            ActionKind::ClusterResize => self.run_resize(run, &cluster, &members, live).await,
            ActionKind::ClusterDelNodes => self.run_del_nodes(run, &cluster, members, live).await,
            ActionKind::ClusterAddNodes => self.add_nodes(run, &cluster).await,
            ActionKind::ClusterAttachPolicy | ActionKind::ClusterDetachPolicy => {
                self.change_policy(run, &cluster).await
            }
            ActionKind::ClusterCheck | ActionKind::ClusterRecover => {
                self.check_or_recover_nodes(run, &cluster, members).await
            }
            ActionKind::ClusterDelete => self.delete_cluster_nodes(run, &cluster).await,
            ActionKind::ClusterUpdate => self.run_cluster_update(run, &cluster, members).await,
            ActionKind::ClusterUpdatePolicy => self.run_update_policy(run, &cluster).await,
            ActionKind::ClusterReplaceNodes => self.run_replace_nodes(run, &cluster).await,
            ActionKind::ClusterOperation => self.run_cluster_operation(run, &cluster).await,
            ActionKind::NodeCreate
            | ActionKind::NodeDelete
            | ActionKind::NodeUpdate
            | ActionKind::NodeCheck
            | ActionKind::NodeRecover
            | ActionKind::NodeOperation => Err(Stop::Failed(Error::InvalidInput(
                "not a cluster action".into(),
            ))),
        }
    }

    /// What a failed run writes with its FAILED status: the node of a node
    /// action ERROR (a member still INIT leaves the cluster: it never
    /// joined), and the cluster settled from its nodes (a failed delete
    /// leaves it ERROR; policy changes leave it as it is).
    pub(super) async fn failure_finish(&self, run: &Run, error: &Error) -> (ClusterChange, Settle) {
        let action = &run.action;
        let lead = format!("{} failed: {error}", action.kind.as_str());
        let mut change = ClusterChange::default();
        match action.kind {
            ActionKind::NodeCreate => {
                let node = self.store.get_node(action.target_id).await.ok().flatten();
                match node {
                    Some(node) if node.status == NodeStatus::Init && node.cluster_id.is_some() => {
                        change.release_nodes.push((
                            node.id,
                            NodeStatus::Error,
                            format!("not created: {error}"),
                        ));
                    }
                    Some(node) => {
                        let mut failed =
                            NodeStatusChange::new(node.id, NodeStatus::Error, error.to_string());
                        failed.only_from = vec![NodeStatus::Init, NodeStatus::Creating];
                        change.node_changes.push(failed);
                    }
                    None => {}
                }
            }
            ActionKind::NodeDelete => {
                let mut failed = NodeStatusChange::new(
                    action.target_id,
                    NodeStatus::Error,
                    format!("not deleted: {error}"),
                );
                failed.only_from = vec![NodeStatus::Deleting];
                change.node_changes.push(failed);
            }
            ActionKind::NodeUpdate | ActionKind::NodeRecover => {
                // A resource being replaced when the run failed.
                let mut failed = NodeStatusChange::new(
                    action.target_id,
                    NodeStatus::Error,
                    format!("not recreated: {error}"),
                );
                failed.only_from = vec![NodeStatus::Creating];
                change.node_changes.push(failed);
            }
            _ => {}
        }
        let settle = match action.kind {
            ActionKind::ClusterDelete => Settle::Status(ClusterStatus::Error, lead),
            ActionKind::ClusterAttachPolicy
            | ActionKind::ClusterDetachPolicy
            | ActionKind::ClusterUpdatePolicy => Settle::Unchanged,
            _ => Settle::FromNodes {
                keep_desired: false,
                lead,
            },
        };
        (change, settle)
    }
}

pub(in crate::clusters) fn id_list(value: Option<&Value>) -> Vec<Uuid> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().and_then(|text| Uuid::parse_str(text).ok()))
                .collect()
        })
        .unwrap_or_default()
}
