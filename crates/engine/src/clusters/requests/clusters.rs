//! Clusters: made (with their CLUSTER_CREATE), shown with their profile's
//! name, members and policies, listed, updated (CLUSTER_UPDATE), deleted.

use std::collections::HashMap;

use ember_runtime::Identity;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{list_scope, nothing_to_update};
use crate::clusters::{ClusterService, event, specified_not_found};
use crate::domain::admission::cluster::ClusterOperation;
use crate::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, ClusterConfig, ClusterStatus, validate_name,
};
use crate::domain::quota::QuotaKind;
use crate::error::{Error, Result};
use crate::store::clusters::ObjectQuery;

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

/// What `PATCH /clusters/{id}` asks to change.
#[derive(Debug, Default)]
pub struct ClusterUpdate {
    pub name: Option<String>,
    pub metadata: Option<Map<String, Value>>,
    pub timeout: Option<i32>,
    /// Name or id of the new profile.
    pub profile: Option<String>,
    /// Only the cluster's profile changes; members keep theirs.
    pub profile_only: bool,
    /// Replaces the cluster's `config` (checked as on create).
    pub config: Option<Map<String, Value>>,
}

/// A cluster as a caller sees it.
#[derive(Debug, Clone)]
pub struct ClusterDetails {
    pub cluster: Cluster,
    /// Empty when the profile is gone.
    pub profile_name: String,
    /// The ids of every member, however many, in index order.
    pub node_ids: Vec<Uuid>,
    /// The attached policies, in the store's order.
    pub policy_ids: Vec<Uuid>,
    /// The health policy's budget (shown for one cluster, not in lists).
    pub remediation: Option<crate::clusters::remediation::RemediationStatus>,
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
            .map_err(|error| specified_not_found("profile", &new.profile, error))?;
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

    /// CLUSTER_UPDATE, checked as Senlin checks it: a new profile is found
    /// (400 when not), of the cluster's profile type; something changes.
    pub async fn update_cluster(
        &self,
        caller: &Identity,
        name_or_id: &str,
        update: ClusterUpdate,
    ) -> Result<(Cluster, ClusterAction)> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        self.admit(ClusterOperation::UpdateCluster(&cluster), caller)
            .await?;
        let mut inputs = Map::new();
        if let Some(name) = update.name.filter(|name| *name != cluster.name) {
            validate_name("cluster", &name)?;
            inputs.insert("name".into(), Value::String(name));
        }
        if let Some(metadata) = update
            .metadata
            .filter(|metadata| *metadata != cluster.metadata)
        {
            inputs.insert("metadata".into(), Value::Object(metadata));
        }
        if let Some(timeout) = update
            .timeout
            .filter(|timeout| Some(*timeout) != cluster.timeout)
        {
            if timeout < 0 {
                return Err(Error::InvalidInput(format!(
                    "Value must be >= 0 for field 'timeout'. (got {timeout})"
                )));
            }
            inputs.insert("timeout".into(), json!(timeout));
        }
        if let Some(config) = update.config {
            let config = ClusterConfig::parse(config)?;
            if config != cluster.config {
                inputs.insert("config".into(), Value::Object(config.values().clone()));
            }
        }
        if let Some(wanted) = &update.profile {
            let profile = self
                .find_profile(caller, wanted)
                .await
                .map_err(|error| specified_not_found("profile", wanted, error))?;
            if profile.id != cluster.profile_id {
                let current = self.cluster_profile(&cluster).await?;
                if current.spec.type_name() != profile.spec.type_name() {
                    return Err(Error::InvalidInput(
                        "Cannot update a cluster to a different profile type, operation aborted."
                            .into(),
                    ));
                }
                inputs.insert("profile_id".into(), Value::String(profile.id.to_string()));
                inputs.insert("profile_only".into(), Value::Bool(update.profile_only));
            }
        }
        if inputs.is_empty() {
            return Err(nothing_to_update());
        }
        let action = self
            .cluster_action(caller, &cluster, ActionKind::ClusterUpdate, inputs)
            .await?;
        Ok((cluster, action))
    }

    /// The cluster `name_or_id` with its profile's name, members and
    /// policies.
    pub async fn cluster_details(
        &self,
        caller: &Identity,
        name_or_id: &str,
    ) -> Result<ClusterDetails> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        let remediation = self.remediation_status(&cluster).await?;
        let mut details = self.details_of(vec![cluster]).await?;
        Ok(ClusterDetails {
            remediation,
            ..details.remove(0)
        })
    }

    /// The clusters `query` selects, each with its details.
    pub async fn list_cluster_details(
        &self,
        caller: &Identity,
        global_project: bool,
        query: ObjectQuery,
    ) -> Result<Vec<ClusterDetails>> {
        let clusters = self
            .list_clusters_with_members(caller, global_project, query)
            .await?;
        self.details_with(clusters).await
    }

    /// `clusters` with their details (see [`ClusterService::details_with`]).
    async fn details_of(&self, clusters: Vec<Cluster>) -> Result<Vec<ClusterDetails>> {
        let ids: Vec<Uuid> = clusters.iter().map(|cluster| cluster.id).collect();
        let mut members = self.store.member_ids_of(&ids).await?;
        let clusters = clusters
            .into_iter()
            .map(|cluster| {
                let ids = members.remove(&cluster.id).unwrap_or_default();
                (cluster, ids)
            })
            .collect();
        self.details_with(clusters).await
    }

    /// `clusters` (with their member ids) with their profile names and
    /// policy ids, in two queries whatever their number (not two per
    /// cluster).
    async fn details_with(
        &self,
        clusters: Vec<(Cluster, Vec<Uuid>)>,
    ) -> Result<Vec<ClusterDetails>> {
        let ids: Vec<Uuid> = clusters.iter().map(|(cluster, _)| cluster.id).collect();
        // Clusters often share a profile: each is asked for once.
        let mut profile_ids: Vec<Uuid> = clusters
            .iter()
            .map(|(cluster, _)| cluster.profile_id)
            .collect();
        profile_ids.sort_unstable();
        profile_ids.dedup();
        let names = self.store.profile_names(&profile_ids).await?;
        let mut policies: HashMap<Uuid, Vec<Uuid>> = HashMap::new();
        for (binding, _) in self.store.bindings_of(&ids).await? {
            policies
                .entry(binding.cluster_id)
                .or_default()
                .push(binding.policy_id);
        }
        Ok(clusters
            .into_iter()
            .map(|(cluster, node_ids)| ClusterDetails {
                profile_name: names.get(&cluster.profile_id).cloned().unwrap_or_default(),
                node_ids,
                policy_ids: policies.remove(&cluster.id).unwrap_or_default(),
                remediation: None,
                cluster,
            })
            .collect())
    }
}
