//! What callers read about a cluster: the cluster with its profile's name,
//! its members and the policies attached to it, gathered here so the gRPC
//! edge only encodes.

use ember_runtime::Identity;
use uuid::Uuid;

use super::ClusterService;
use crate::domain::cluster::{Cluster, Node};
use crate::error::Result;
use crate::store::clusters::ObjectQuery;

/// A cluster as a caller sees it.
#[derive(Debug, Clone)]
pub struct ClusterDetails {
    pub cluster: Cluster,
    /// Empty when the profile is gone.
    pub profile_name: String,
    /// Every member, however many.
    pub nodes: Vec<Node>,
    /// The attached policies, in the store's order.
    pub policy_ids: Vec<Uuid>,
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
        let profile_name = self
            .store
            .get_profile(cluster.profile_id)
            .await?
            .map(|profile| profile.name)
            .unwrap_or_default();
        let nodes = self.store.list_cluster_nodes(cluster.id).await?;
        let policy_ids = self
            .store
            .list_bindings(cluster.id)
            .await?
            .into_iter()
            .map(|(binding, _)| binding.policy_id)
            .collect();
        Ok(ClusterDetails {
            cluster,
            profile_name,
            nodes,
            policy_ids,
        })
    }

    /// The clusters `query` selects, each with its details.
    pub async fn list_cluster_details(
        &self,
        caller: &Identity,
        global_project: bool,
        query: ObjectQuery,
    ) -> Result<Vec<ClusterDetails>> {
        let clusters = self.list_clusters(caller, global_project, query).await?;
        let mut details = Vec::with_capacity(clusters.len());
        for cluster in clusters {
            details.push(
                self.cluster_details(caller, &cluster.id.to_string())
                    .await?,
            );
        }
        Ok(details)
    }
}
