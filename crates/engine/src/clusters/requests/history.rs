//! What happened: a cluster's (or every) action and event, listed or read
//! by id; an action cancelled before it runs.

use ember_runtime::Identity;
use uuid::Uuid;

use super::list_scope;
use crate::clusters::{ClusterService, action_event, launch, not_found};
use crate::domain::admission::cluster::ClusterOperation;
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

    /// Cancels an action that has not started running (INIT, READY) or
    /// waits for a lifecycle completion: Senlin's `PATCH /actions/{id}`
    /// with status CANCELLED. A running action is not interrupted mid-step
    /// (409): Ember leaves nothing half-done.
    pub async fn cancel_action(&self, caller: &Identity, id: &str) -> Result<ClusterAction> {
        self.admit(ClusterOperation::CancelAction, caller).await?;
        let action = self.get_action(caller, id).await?;
        if launch::is_launch_wait(&action) {
            // Cancelled, its node would stay built and never in service.
            return Err(Error::Conflict(format!(
                "Action ({}) is the lifecycle action of a launching node: complete it with CONTINUE to put the node in service or ABANDON to delete it.",
                &action.id.to_string()[..8]
            )));
        }
        let outcome = self
            .store
            .cancel_action(action.id, &|cancelled| {
                action_event(cancelled, "CANCELLED", "Action execution cancelled")
            })
            .await?
            .ok_or_else(|| Error::NotFound(format!("The action '{id}' could not be found.")))?;
        let cancelled = match outcome {
            Ok(cancelled) => cancelled,
            Err(current) => {
                return Err(Error::Conflict(format!(
                    "Action ({}) is in status ({}) while expected status must be one of (INIT, READY, WAITING_LIFECYCLE_COMPLETION).",
                    &current.id.to_string()[..8],
                    current.status.as_str()
                )));
            }
        };
        for parent in &cancelled.depended_by {
            self.store.finish_parent_if_done(*parent).await?;
        }
        Ok(cancelled)
    }

    /// One event by id, as `caller` may see it.
    pub async fn get_event(
        &self,
        caller: &Identity,
        id: &str,
    ) -> Result<crate::domain::cluster::ClusterEvent> {
        let not_found = || not_found("event", id);
        let uuid = Uuid::parse_str(id).map_err(|_| not_found())?;
        self.store
            .get_event(Self::scope(caller), uuid)
            .await?
            .ok_or_else(not_found)
    }
}
