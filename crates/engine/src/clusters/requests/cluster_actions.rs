//! The cluster actions a request records — scale, resize, add and delete
//! nodes, replace nodes, check and recover — behind the admission and the
//! cluster's queue, and collect, which reads every member. Checks and
//! messages follow Senlin's engine (`service.py`), because its clients and
//! conformance suite compare them.

use ember_runtime::Identity;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::json_object;
use crate::clusters::{ClusterService, action_event, python_list};
use crate::domain::admission::cluster::ClusterOperation;
use crate::domain::cluster::sizing::{self, AdjustmentType};
use crate::domain::cluster::{ActionKind, ActionStatus, Cluster, ClusterAction, Node, NodeStatus};
use crate::domain::quota::QuotaKind;
use crate::error::{Error, Result};
use crate::store::clusters::ActionQuery;

/// What a resize asks (Senlin's CLUSTER_RESIZE): an adjustment of the
/// desired capacity and new bounds, each optional.
pub struct ResizeRequest {
    pub adjustment: Option<(AdjustmentType, f64)>,
    pub min_size: Option<i32>,
    pub max_size: Option<i32>,
    pub min_step: i32,
    pub strict: bool,
}

/// A cluster's or node's check, or its recover (Senlin's CLUSTER_CHECK /
/// CLUSTER_RECOVER, NODE_CHECK / NODE_RECOVER).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthAction {
    Check,
    Recover,
}

impl ClusterService {
    /// Records a cluster action READY (admitted by the caller): it runs
    /// when the cluster's earlier actions have.
    pub(in crate::clusters) async fn cluster_action(
        &self,
        caller: &Identity,
        cluster: &Cluster,
        kind: ActionKind,
        inputs: Map<String, Value>,
    ) -> Result<ClusterAction> {
        if kind != ActionKind::ClusterDelete {
            self.refuse_a_full_queue(cluster, kind).await?;
        }
        self.admit_one(
            &caller.project_id,
            QuotaKind::ConcurrentOperations,
            crate::store::quotas::Usage::RunningOperations,
        )
        .await?;
        let action = ClusterAction::new(
            kind,
            cluster.id,
            Some(cluster.id),
            ActionStatus::Ready,
            inputs,
            caller,
            ember_runtime::time::now(),
        );
        let accepted = action_event(&action, "READY", "accepted");
        self.submit(std::slice::from_ref(&action), &[accepted])
            .await?;
        Ok(action)
    }

    /// Refuses one more action on `cluster` when as many as it queues
    /// already run or wait there: Senlin's `ActionConflict` (a 409 naming
    /// them; Senlin refuses any second action), so requests never pile up
    /// minutes behind the cluster's lock. A delete is never refused here.
    async fn refuse_a_full_queue(&self, cluster: &Cluster, kind: ActionKind) -> Result<()> {
        let most = self.dispatcher.max_queued_per_cluster;
        let active = self
            .store
            .list_actions(&ActionQuery {
                targets: vec![cluster.id],
                statuses: vec![
                    ActionStatus::Init,
                    ActionStatus::Ready,
                    ActionStatus::Running,
                    ActionStatus::Waiting,
                    ActionStatus::WaitingLifecycleCompletion,
                    ActionStatus::Suspended,
                ],
                limit: u32::try_from(most).unwrap_or(u32::MAX),
                ..ActionQuery::default()
            })
            .await?;
        if active.len() < most {
            return Ok(());
        }
        let ids: Vec<String> = active.iter().map(|action| action.id.to_string()).collect();
        Err(Error::Conflict(format!(
            "The {} action for target {} conflicts with the following action(s): {} (a cluster runs or queues at most {most} actions: try again when one has ended)",
            kind.as_str(),
            cluster.id,
            ids.join(",")
        )))
    }

    pub async fn scale(
        &self,
        caller: &Identity,
        name_or_id: &str,
        out: bool,
        count: u32,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        let count = u64::from(count);
        let (kind, operation) = if out {
            (
                ActionKind::ClusterScaleOut,
                ClusterOperation::ScaleOut {
                    cluster: &cluster,
                    count,
                },
            )
        } else {
            (
                ActionKind::ClusterScaleIn,
                ClusterOperation::ScaleIn {
                    cluster: &cluster,
                    count,
                },
            )
        };
        // With the quota and the cooldown: said now rather than as a
        // FAILED action later (the dispatcher checks again when the action
        // runs).
        self.admit(operation, caller).await?;
        let inputs = if count == 0 {
            Map::new()
        } else {
            json_object(json!({"count": count}))
        };
        self.cluster_action(caller, &cluster, kind, inputs).await
    }

    /// Checks the resize against the cluster now (a strict resize that does
    /// not fit is refused at once) and records it with its adjustment: the
    /// action computes the capacity again from the cluster as it is when it
    /// runs.
    pub async fn resize(
        &self,
        caller: &Identity,
        name_or_id: &str,
        request: ResizeRequest,
    ) -> Result<ClusterAction> {
        check_resize_request(&request)?;
        let cluster = self.find_cluster(caller, name_or_id).await?;
        self.admit(ClusterOperation::Resize(&cluster), caller)
            .await?;
        let min_step = request.min_step.max(1);
        let requested = match request.adjustment {
            Some((adjustment, number)) => Some(sizing::desired_after(
                cluster.desired_capacity,
                adjustment,
                number,
                min_step,
            )?),
            None => None,
        };
        sizing::check_size_params(
            Some(&cluster),
            requested,
            request.min_size,
            request.max_size,
            request.strict,
        )?;
        let min_size = request.min_size.unwrap_or(cluster.min_size);
        let max_size = request.max_size.unwrap_or(cluster.max_size);
        let desired = sizing::fit(
            requested.unwrap_or(cluster.desired_capacity),
            min_size,
            max_size,
            request.strict,
        )?;
        self.admit_growth(
            &cluster,
            i64::from(cluster.desired_capacity),
            i64::from(desired),
        )
        .await?;
        let mut inputs = json_object(json!({
            "requested_capacity": desired,
            "min_size": min_size,
            "max_size": max_size,
            "strict": request.strict,
            "min_step": min_step,
        }));
        if let Some((adjustment, number)) = request.adjustment {
            inputs.insert("adjustment_type".into(), json!(adjustment.as_str()));
            inputs.insert("number".into(), json!(number));
        }
        self.cluster_action(caller, &cluster, ActionKind::ClusterResize, inputs)
            .await
    }

    /// add_nodes (`add`) or del_nodes; a del_nodes's
    /// `destroy_after_deletion` (Senlin's: given, else the deletion
    /// policy's, else false — the nodes leave the cluster and stay).
    pub async fn change_nodes(
        &self,
        caller: &Identity,
        name_or_id: &str,
        nodes: &[String],
        add: bool,
        destroy_after_deletion: Option<bool>,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        let found = self.nodes_to_change(caller, &cluster, nodes, add).await?;
        let (kind, operation) = if add {
            (
                ActionKind::ClusterAddNodes,
                ClusterOperation::AddNodes {
                    cluster: &cluster,
                    nodes: &found,
                },
            )
        } else {
            (
                ActionKind::ClusterDelNodes,
                ClusterOperation::DelNodes {
                    cluster: &cluster,
                    nodes: &found,
                },
            )
        };
        self.admit(operation, caller).await?;
        if add {
            // Adopted nodes already count in the project's nodes; the
            // cluster's size grows.
            let current = i64::from(cluster.desired_capacity);
            let size = current.saturating_add(i64::try_from(found.len()).unwrap_or(i64::MAX));
            if let Some(quotas) = self.quotas() {
                quotas
                    .admit_size(
                        &cluster.project_id,
                        QuotaKind::NodesPerCluster,
                        u64::try_from(size).unwrap_or(u64::MAX),
                    )
                    .await?;
            }
        }
        let ids: Vec<Value> = found
            .iter()
            .map(|node| Value::String(node.id.to_string()))
            .collect();
        let mut inputs = json_object(json!({ "nodes": ids }));
        if let (false, Some(destroy)) = (add, destroy_after_deletion) {
            inputs.insert("destroy_after_deletion".into(), Value::Bool(destroy));
        }
        self.cluster_action(caller, &cluster, kind, inputs).await
    }

    pub async fn check_or_recover(
        &self,
        caller: &Identity,
        name_or_id: &str,
        health: HealthAction,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        let (kind, operation) = match health {
            HealthAction::Recover => (
                ActionKind::ClusterRecover,
                ClusterOperation::Recover(&cluster),
            ),
            HealthAction::Check => (ActionKind::ClusterCheck, ClusterOperation::Check(&cluster)),
        };
        self.admit(operation, caller).await?;
        self.cluster_action(caller, &cluster, kind, Map::new())
            .await
    }

    /// CLUSTER_REPLACE_NODES: `pairs` of (member, orphan replacement), by
    /// name or id, checked all at once with every problem in the message.
    pub async fn replace_nodes(
        &self,
        caller: &Identity,
        name_or_id: &str,
        pairs: Vec<(String, String)>,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        self.admit(ClusterOperation::ReplaceNodes(&cluster), caller)
            .await?;
        if pairs.is_empty() {
            return Err(Error::InvalidInput(
                "Value for 'nodes' must have at least 1 item(s).".into(),
            ));
        }
        let cluster_type = self.cluster_profile(&cluster).await?.spec.type_name();
        let mut found = Map::new();
        let mut replaced = Vec::new();
        let (mut not_member, mut owned, mut inactive, mut unmatched) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut old_missing, mut new_missing) = (Vec::new(), Vec::new());
        for (old, new) in pairs {
            let Ok(old_node) = self.find_node(caller, &old).await else {
                old_missing.push(old);
                continue;
            };
            let Ok(new_node) = self.find_node(caller, &new).await else {
                new_missing.push(new);
                continue;
            };
            if old_node.cluster_id != Some(cluster.id) {
                not_member.push(old);
            }
            if new_node.cluster_id.is_some() {
                owned.push(new.clone());
            }
            if new_node.status != NodeStatus::Active {
                inactive.push(new.clone());
            }
            if self.node_profile_type(&new_node).await? != cluster_type {
                unmatched.push(new);
            }
            found.insert(
                old_node.id.to_string(),
                Value::String(new_node.id.to_string()),
            );
            replaced.push(old_node);
        }
        let mut problems = Vec::new();
        if !not_member.is_empty() {
            problems.push(format!(
                "The specified nodes {} to be replaced are not members of the cluster {}.",
                python_list(&not_member),
                cluster.id
            ));
        }
        if !owned.is_empty() {
            problems.push(format!(
                "Nodes {} already member of a cluster.",
                python_list(&owned)
            ));
        }
        if !inactive.is_empty() {
            problems.push(format!("Nodes are not ACTIVE: {}.", python_list(&inactive)));
        }
        if !unmatched.is_empty() {
            problems.push(format!(
                "Profile type of nodes {} do not match that of the cluster.",
                python_list(&unmatched)
            ));
        }
        if !old_missing.is_empty() {
            problems.push(format!(
                "Original nodes not found: {}.",
                python_list(&old_missing)
            ));
        }
        if !new_missing.is_empty() {
            problems.push(format!(
                "Replacement nodes not found: {}.",
                python_list(&new_missing)
            ));
        }
        if !problems.is_empty() {
            return Err(Error::InvalidInput(problems.join("\n")));
        }
        // A replaced node is deleted: not one protected from scale-in.
        if let Some(refusal) = crate::domain::admission::cluster::protected_from_deletion(&replaced)
        {
            return Err(refusal);
        }
        let inputs = json_object(json!({ "candidates": found }));
        self.cluster_action(caller, &cluster, ActionKind::ClusterReplaceNodes, inputs)
            .await
    }

    async fn node_profile_type(&self, node: &Node) -> Result<&'static str> {
        let profile = self
            .store
            .get_profile(node.profile_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("the profile of node {} is gone", node.id)))?;
        Ok(profile.spec.type_name())
    }

    /// Senlin's collect: the value at `path` of every member, for those that
    /// have it. The path starts with a node field (`name`, `status`,
    /// `role`, `index`, `physical_id`, `details` …), then keys into
    /// objects (`details.status`, `metadata.key`).
    pub async fn collect(
        &self,
        caller: &Identity,
        name_or_id: &str,
        path: &str,
    ) -> Result<Vec<(Uuid, Value)>> {
        let path = path.trim();
        if path.is_empty() || path == "None" {
            return Err(Error::InvalidInput(
                "Required path attribute is missing.".into(),
            ));
        }
        let cluster = self.find_cluster(caller, name_or_id).await?;
        let nodes = self.store.list_cluster_nodes(cluster.id).await?;
        let mut values = Vec::with_capacity(nodes.len());
        for node in &nodes {
            let document = self.node_document(node).await?;
            if let Some(value) = lookup(&document, path) {
                values.push((node.id, value.clone()));
            }
        }
        Ok(values)
    }

    /// A node as collect walks it: its fields and `details` (the physical
    /// resource as the profile sees it).
    async fn node_document(&self, node: &Node) -> Result<Value> {
        let details = match &node.physical_id {
            Some(physical_id) => json!({
                "id": physical_id,
                "status": node.status.as_str(),
                "name": node.name,
            }),
            None => json!({}),
        };
        Ok(json!({
            "id": node.id.to_string(),
            "name": node.name,
            "cluster_id": node.cluster_id.map(|id| id.to_string()),
            "profile_id": node.profile_id.to_string(),
            "index": node.index,
            "role": node.role,
            "status": node.status.as_str(),
            "status_reason": node.status_reason,
            "physical_id": node.physical_id,
            "metadata": node.metadata,
            "details": details,
        }))
    }
}

/// What Senlin checks of a resize before it looks the cluster up (its API
/// layer), in its words: each size field in range, an exact capacity not
/// below 0, a min_size not above the max_size given with it.
fn check_resize_request(request: &ResizeRequest) -> Result<()> {
    if let Some(min_size) = request.min_size {
        sizing::check_capacity_field("min_size", min_size, 0)?;
    }
    if let Some(max_size) = request.max_size {
        sizing::check_capacity_field("max_size", max_size, -1)?;
    }
    if let Some((AdjustmentType::ExactCapacity, number)) = request.adjustment
        && number < 0.0
    {
        return Err(Error::InvalidInput(
            "The 'number' must be non-negative integer for adjustment type 'EXACT_CAPACITY'."
                .into(),
        ));
    }
    if let (Some(min_size), Some(max_size)) = (request.min_size, request.max_size)
        && max_size > 0
        && min_size > max_size
    {
        return Err(Error::InvalidInput(format!(
            "The specified min_size ({min_size}) is greater than the specified max_size ({max_size})."
        )));
    }
    Ok(())
}

/// The value at a dotted `path` in `document`.
fn lookup<'a>(document: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(document, |value, key| value.as_object()?.get(key))
        .filter(|value| !value.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collect_paths_walk_objects() {
        let document = json!({"name": "n1", "details": {"status": "ACTIVE"}, "physical_id": null});
        assert_eq!(lookup(&document, "name"), Some(&json!("n1")));
        assert_eq!(lookup(&document, "details.status"), Some(&json!("ACTIVE")));
        assert_eq!(lookup(&document, "details.missing"), None);
        assert_eq!(lookup(&document, "physical_id"), None);
    }
}
