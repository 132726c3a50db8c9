//! What happened: a cluster's (or every) action and event, listed.

use ember_runtime::Identity;
use uuid::Uuid;

use super::super::ClusterService;
use super::list_scope;
use crate::domain::cluster::{ClusterAction, ClusterEvent};
use crate::error::{Error, Result};
use crate::store::clusters::{ActionQuery, EventQuery};

impl ClusterService {
    /// The cluster whose actions or events are asked for: a live one by
    /// name or id, or, by id, one already deleted (its history stays
    /// listable, still only within the caller's project).
    async fn history_cluster_id(&self, caller: &Identity, name_or_id: &str) -> Result<Uuid> {
        match self.find_cluster(caller, name_or_id).await {
            Err(Error::NotFound(message)) => {
                Uuid::parse_str(name_or_id).map_err(|_| Error::NotFound(message))
            }
            other => other.map(|cluster| cluster.id),
        }
    }

    /// A page of the actions `query` selects, of `cluster` when given.
    pub async fn list_actions(
        &self,
        caller: &Identity,
        cluster: Option<&str>,
        global_project: bool,
        mut query: ActionQuery,
    ) -> Result<Vec<ClusterAction>> {
        query.project_id = list_scope(caller, global_project)?;
        query.cluster_id = match cluster {
            Some(name) => Some(self.history_cluster_id(caller, name).await?),
            None => None,
        };
        self.store.list_actions(&query).await
    }

    /// A page of the events `query` selects, of `cluster` when given.
    pub async fn list_events(
        &self,
        caller: &Identity,
        cluster: Option<&str>,
        global_project: bool,
        mut query: EventQuery,
    ) -> Result<Vec<ClusterEvent>> {
        query.project_id = list_scope(caller, global_project)?;
        query.cluster_id = match cluster {
            Some(name) => Some(self.history_cluster_id(caller, name).await?),
            None => None,
        };
        self.store.list_events(&query).await
    }
}
