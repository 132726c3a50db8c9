//! What callers read about a cluster: the cluster with its profile's name,
//! its members and the policies attached to it, gathered here so the gRPC
//! edge only encodes.

use std::collections::HashMap;

use ember_runtime::Identity;
use uuid::Uuid;

use super::ClusterService;
use crate::domain::cluster::Cluster;
use crate::error::Result;
use crate::store::clusters::ObjectQuery;

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
    pub remediation: Option<super::remediation::RemediationStatus>,
}

impl ClusterService {
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
