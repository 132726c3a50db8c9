//! Clusters: made (with their CLUSTER_CREATE), listed, deleted; and the
//! cluster actions a request records — scale, resize, add/del nodes,
//! check and recover — behind the admission and the cluster's queue.

use ember_runtime::Identity;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{json_object, list_scope};
use crate::clusters::{ClusterService, action_event, event};
use crate::domain::admission::cluster::ClusterOperation;
use crate::domain::cluster::sizing::{self, AdjustmentType};
use crate::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, ClusterConfig, ClusterStatus, validate_name,
};
use crate::domain::quota::QuotaKind;
use crate::error::{Error, Result};
use crate::store::clusters::{ActionQuery, ObjectQuery};

pub struct NewCluster {
    pub name: String,
    pub profile: String,
    pub min_size: i32,
    pub max_size: i32,
    pub desired_capacity: i32,
    pub metadata: Map<String, Value>,
    /// Seconds an action on the cluster may take; None = the default.
    pub timeout: Option<i32>,
    /// Senlin's `config`, as the caller gave it (checked here).
    pub config: Map<String, Value>,
}

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
    pub async fn create_cluster(
        &self,
        caller: &Identity,
        new: NewCluster,
    ) -> Result<(Cluster, ClusterAction)> {
        self.create_cluster_delegating(caller, None, new).await
    }

    /// [`Self::create_cluster`] for a caller who came with their Keystone
    /// token: on a cloud the cluster is made with a trust from the caller,
    /// which its nodes act through (deleted with the cluster).
    pub async fn create_cluster_delegating(
        &self,
        caller: &Identity,
        subject_token: Option<&ember_runtime::identity::SubjectToken>,
        new: NewCluster,
    ) -> Result<(Cluster, ClusterAction)> {
        self.admit(ClusterOperation::CreateCluster, caller).await?;
        validate_name("cluster", &new.name)?;
        // Names need not be unique (Senlin's default): a name two
        // clusters share finds neither, and callers use the id.
        let profile = self
            .find_profile(caller, &new.profile)
            .await
            .map_err(|error| {
                crate::clusters::specified_not_found("profile", &new.profile, error)
            })?;
        Cluster::validate_sizes(new.min_size, new.max_size, new.desired_capacity)?;
        let config = ClusterConfig::parse(new.config)?;
        self.admit_one(
            &caller.project_id,
            QuotaKind::Clusters,
            crate::store::quotas::Usage::Clusters,
        )
        .await?;
        let now = ember_runtime::time::now();
        let cluster = Cluster {
            id: Uuid::now_v7(),
            name: new.name,
            profile_id: profile.id,
            min_size: new.min_size,
            max_size: new.max_size,
            desired_capacity: new.desired_capacity,
            status: ClusterStatus::Init,
            status_reason: "creating".into(),
            metadata: new.metadata,
            next_index: 1,
            timeout: new.timeout,
            config,
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            created_at: now,
            updated_at: now,
            maintenance_lock: None,
        };
        let action = ClusterAction::new(
            ActionKind::ClusterCreate,
            cluster.id,
            Some(cluster.id),
            ActionStatus::Ready,
            Map::new(),
            caller,
            now,
        );
        let created = event(
            "CLUSTER",
            cluster.id,
            &cluster.name,
            Some(cluster.id),
            "CLUSTER_CREATE",
            "INIT",
            "cluster recorded",
            caller,
        );
        self.admit_growth(&cluster, 0, i64::from(cluster.desired_capacity))
            .await?;
        let owner = crate::domain::delegation::DelegationOwner::Cluster(cluster.id);
        self.delegate(owner, caller, subject_token).await?;
        if let Err(error) = self.store.create_cluster(&cluster, &action, &created).await {
            self.revoke(owner).await;
            return Err(error);
        }
        self.wake_dispatcher();
        Ok((cluster, action))
    }

    pub async fn list_clusters(
        &self,
        caller: &Identity,
        global_project: bool,
        mut query: ObjectQuery,
    ) -> Result<Vec<Cluster>> {
        query.project_id = list_scope(caller, global_project)?;
        self.store.list_clusters(&query).await
    }

    /// [`ClusterService::list_clusters`] with each cluster's member ids.
    pub(in crate::clusters) async fn list_clusters_with_members(
        &self,
        caller: &Identity,
        global_project: bool,
        mut query: ObjectQuery,
    ) -> Result<Vec<(Cluster, Vec<Uuid>)>> {
        query.project_id = list_scope(caller, global_project)?;
        self.store.list_clusters_with_members(&query).await
    }

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

    pub async fn delete_cluster(
        &self,
        caller: &Identity,
        name_or_id: &str,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        self.admit(ClusterOperation::DeleteCluster(&cluster), caller)
            .await?;
        self.cluster_action(caller, &cluster, ActionKind::ClusterDelete, Map::new())
            .await
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
