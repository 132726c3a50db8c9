//! CLUSTER_OPERATION (Senlin's `POST /clusters/{id}/ops`, microversion
//! 1.4): one operation of the cluster's profile type (`reboot`, `stop`,
//! `start`, …; the table is `domain::cluster::operations`) run on every
//! member its `filters` select.
//!
//! The request side checks what Senlin's `cluster_op` checks, in its order
//! and with its messages (the operation against the profile type, the
//! parameters against the operation's schema, the filter keys, at least
//! one member selected), fixes the selected node ids in the action's
//! inputs and records it READY: it queues behind the cluster's other
//! actions like any of them.
//!
//! The run holds the cluster's lock and works node by node (at most
//! [`super::NODES_IN_FLIGHT`] at once); each node's outcome is written to
//! the action's outputs (`{"operation", "nodes": {id: {name, status,
//! reason}}}`) in a fenced write as soon as it is known, so a run taken
//! over after its engine died skips the nodes already done (an operation
//! is not run twice on a node whose outcome was recorded). A node whose
//! operation fails keeps its status, as a NODE_OPERATION leaves it; the
//! action then ends FAILED naming each failed node, as Senlin's parent
//! action fails when one of its NODE_OPERATION children does.

use ember_runtime::Identity;
use serde_json::{Map, Value, json};
use tokio::sync::Mutex;
use uuid::Uuid;

use super::ClusterService;
use super::run::{Ran, Run, RunResult};
use crate::domain::admission::cluster::ClusterOperation;
use crate::domain::cluster::operations::{self, MemberFilter, NodeOperation};
use crate::domain::cluster::{ActionKind, ActionStatus, Cluster, ClusterAction, NodeStatus};
use crate::error::{Error, Result};
use crate::store::clusters::{ClusterChange, Settle};

/// The outcome of one node, as its entry in the outputs says.
const SUCCEEDED: &str = "SUCCEEDED";
const FAILED: &str = "FAILED";
const SKIPPED: &str = "SKIPPED";

impl ClusterService {
    /// Records a CLUSTER_OPERATION of `operation` with `params` on the
    /// members of the caller's cluster `name_or_id` that `filters` select.
    pub async fn operate_cluster(
        &self,
        caller: &Identity,
        name_or_id: &str,
        operation: &str,
        params: Map<String, Value>,
        filters: Map<String, Value>,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        self.admit(ClusterOperation::Operate(&cluster), caller)
            .await?;
        let profile = self.cluster_profile(&cluster).await?;
        operations::parse(profile.spec.type_name(), operation, &params)?;
        let filter = MemberFilter::parse(&filters)?;
        let nodes: Vec<Value> = self
            .store
            .list_cluster_nodes(cluster.id)
            .await?
            .into_iter()
            .filter(|node| node.is_counted_member() && filter.matches(node))
            .map(|node| json!(node.id.to_string()))
            .collect();
        if nodes.is_empty() {
            return Err(Error::InvalidInput(
                "No node (matching the filter) could be found".into(),
            ));
        }
        let inputs = json!({
            "operation": operation,
            "params": params,
            "filters": filters,
            "nodes": nodes,
        });
        self.cluster_action(
            caller,
            &cluster,
            ActionKind::ClusterOperation,
            super::requests::json_object(inputs),
        )
        .await
    }

    /// Runs a CLUSTER_OPERATION under the cluster's lock.
    pub(super) async fn run_cluster_operation(
        &self,
        run: &Run,
        cluster: &Cluster,
    ) -> RunResult<Ran> {
        let inputs = &run.action.inputs;
        let name = inputs
            .get("operation")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let params = inputs
            .get("params")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        // Checked again: the cluster's profile may have changed since.
        let profile = self.cluster_profile(cluster).await?;
        let operation = operations::parse(profile.spec.type_name(), &name, &params)?;
        let selected = super::execute::id_list(inputs.get("nodes"));
        let recorded = run
            .action
            .outputs
            .get("nodes")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let pending: Vec<Uuid> = selected
            .iter()
            .copied()
            .filter(|id| !recorded.contains_key(&id.to_string()))
            .collect();
        let outcomes = Mutex::new(recorded);
        let caller = run.action.caller();
        let results = super::for_each_node(pending.iter().map(|node_id| {
            self.operate_member(run, &caller, cluster, *node_id, &name, operation, &outcomes)
        }))
        .await;
        for result in results {
            result?;
        }
        let outcomes = outcomes.into_inner();
        let failed: Vec<String> = selected
            .iter()
            .filter_map(|id| outcomes.get(&id.to_string()))
            .filter(|outcome| outcome["status"] == FAILED)
            .map(|outcome| {
                format!(
                    "{} ({})",
                    outcome["name"].as_str().unwrap_or_default(),
                    outcome["reason"].as_str().unwrap_or_default()
                )
            })
            .collect();
        let (status, reason) = if failed.is_empty() {
            (
                ActionStatus::Succeeded,
                format!("Cluster operation '{name}' completed."),
            )
        } else {
            (
                ActionStatus::Failed,
                format!(
                    "Cluster operation '{name}' failed on {} of {} node(s): {}",
                    failed.len(),
                    selected.len(),
                    failed.join("; ")
                ),
            )
        };
        Ok(Ran::Finished {
            status,
            reason,
            change: ClusterChange {
                outputs: Some(operation_outputs(&name, outcomes)),
                ..ClusterChange::default()
            },
            settle: Settle::FromNodes {
                keep_desired: true,
                lead: "CLUSTER_OPERATION completed".into(),
            },
        })
    }

    /// Runs the operation on one selected node and records its outcome
    /// (with an event) in one fenced write.
    #[allow(clippy::too_many_arguments)] // one node's step of the run: each is needed
    async fn operate_member(
        &self,
        run: &Run,
        caller: &Identity,
        cluster: &Cluster,
        node_id: Uuid,
        name: &str,
        operation: NodeOperation,
        outcomes: &Mutex<Map<String, Value>>,
    ) -> RunResult<()> {
        let node = self.store.get_node(node_id).await?;
        let (status, reason) = match &node {
            None => (SKIPPED, "the node is gone".to_owned()),
            Some(node) if node.cluster_id != Some(cluster.id) => (
                SKIPPED,
                format!("the node is no longer a member of cluster {}", cluster.name),
            ),
            Some(node)
                if matches!(
                    node.status,
                    NodeStatus::Init | NodeStatus::Creating | NodeStatus::Deleting
                ) =>
            {
                (FAILED, format!("the node is {}", node.status.as_str()))
            }
            Some(node) => {
                run.check_still_owned(self).await?;
                match self.run_instance_operation(caller, node, operation).await {
                    Ok(()) => (SUCCEEDED, format!("Operation '{name}' succeeded")),
                    Err(error) => (FAILED, error.to_string()),
                }
            }
        };
        let mut events = Vec::new();
        if let Some(node) = &node {
            events.push(super::node_event(
                node,
                "NODE_OPERATION",
                node.status.as_str(),
                format!("operation {name} {}: {reason}", status.to_ascii_lowercase()),
                caller,
            ));
        }
        let node_name = node.as_ref().map(|node| node.name.clone());
        let mut outcomes = outcomes.lock().await;
        outcomes.insert(
            node_id.to_string(),
            json!({"name": node_name.unwrap_or_else(|| node_id.to_string()), "status": status, "reason": reason}),
        );
        run.apply(
            self,
            &ClusterChange {
                outputs: Some(operation_outputs(name, outcomes.clone())),
                events,
                ..ClusterChange::default()
            },
        )
        .await?;
        Ok(())
    }
}

fn operation_outputs(name: &str, outcomes: Map<String, Value>) -> Map<String, Value> {
    let mut outputs = Map::new();
    outputs.insert("operation".into(), json!(name));
    outputs.insert("nodes".into(), Value::Object(outcomes));
    outputs
}
