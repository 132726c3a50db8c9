//! The clustering service (Senlin's model): what every entry point calls to
//! manage profiles, policies, clusters and nodes on behalf of a caller.
//! Requests that change a cluster or node only record a durable action and
//! wake the [`dispatcher`]; the action runs there, on whichever engine
//! claims it.

pub mod dispatcher;
mod execute;
pub mod hooks;
pub mod lifecycle;
mod physical;
mod removal;
mod requests;

use std::sync::Arc;

use ember_runtime::Identity;
use uuid::Uuid;

use crate::domain::cluster::{
    Cluster, ClusterAction, ClusterEvent, Node, PolicyDefinition, Profile,
};
use crate::error::{Error, Result};
use crate::instances::InstanceService;
use crate::stacks::StackOperations;
use crate::store::clusters::ClusterStore;

pub use requests::{NewCluster, NewNode, ResizeRequest};

/// Everything the clustering code needs, shared by the request side and
/// the dispatcher.
pub struct ClusterService {
    store: Arc<dyn ClusterStore>,
    instances: Arc<InstanceService>,
    stacks: Arc<StackOperations>,
    hooks: hooks::HookClient,
    wake: Arc<tokio::sync::Notify>,
    engine_id: Uuid,
}

impl ClusterService {
    pub fn new(
        store: Arc<dyn ClusterStore>,
        instances: Arc<InstanceService>,
        stacks: Arc<StackOperations>,
        hooks: hooks::HookClient,
    ) -> Arc<ClusterService> {
        Arc::new(ClusterService {
            store,
            instances,
            stacks,
            hooks,
            wake: Arc::new(tokio::sync::Notify::new()),
            engine_id: Uuid::now_v7(),
        })
    }

    pub fn engine_id(&self) -> Uuid {
        self.engine_id
    }

    pub fn store(&self) -> &Arc<dyn ClusterStore> {
        &self.store
    }

    /// Wakes the dispatcher: an action became READY.
    pub(crate) fn wake_dispatcher(&self) {
        self.wake.notify_one();
    }

    /// The project a caller's lookups are limited to (`None` for admins).
    fn scope(caller: &Identity) -> Option<&str> {
        (!caller.is_admin()).then_some(caller.project_id.as_str())
    }

    pub async fn find_profile(&self, caller: &Identity, name_or_id: &str) -> Result<Profile> {
        self.store
            .find_profile(Self::scope(caller), name_or_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("profile {name_or_id:?} not found")))
    }

    pub async fn find_policy(
        &self,
        caller: &Identity,
        name_or_id: &str,
    ) -> Result<PolicyDefinition> {
        self.store
            .find_policy(Self::scope(caller), name_or_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("policy {name_or_id:?} not found")))
    }

    pub async fn find_cluster(&self, caller: &Identity, name_or_id: &str) -> Result<Cluster> {
        self.store
            .find_cluster(Self::scope(caller), name_or_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("cluster {name_or_id:?} not found")))
    }

    pub async fn find_node(&self, caller: &Identity, name_or_id: &str) -> Result<Node> {
        self.store
            .find_node(Self::scope(caller), name_or_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("node {name_or_id:?} not found")))
    }

    pub async fn get_action(&self, caller: &Identity, id: &str) -> Result<ClusterAction> {
        let not_found = || Error::NotFound(format!("action {id:?} not found"));
        let id = Uuid::parse_str(id).map_err(|_| not_found())?;
        match self.store.get_action(id).await? {
            Some(action) if caller.is_admin() || action.project_id == caller.project_id => {
                Ok(action)
            }
            _ => Err(not_found()),
        }
    }

    /// Records actions READY (with their events) and wakes the dispatcher.
    async fn submit(&self, actions: &[ClusterAction], events: &[ClusterEvent]) -> Result<()> {
        self.store.insert_actions(actions, events).await?;
        self.wake_dispatcher();
        Ok(())
    }
}

/// An event about an object, by `caller`.
#[allow(clippy::too_many_arguments)] // Senlin's event fields, in Senlin's order
pub(crate) fn event(
    obj_type: &str,
    obj_id: impl ToString,
    obj_name: &str,
    cluster_id: Option<Uuid>,
    action: &str,
    status: &str,
    reason: impl Into<String>,
    caller: &Identity,
) -> ClusterEvent {
    let status_reason = reason.into();
    let level = if status == "FAILED" || status == "ERROR" {
        "ERROR"
    } else {
        "INFO"
    };
    ClusterEvent {
        id: Uuid::now_v7(),
        generated_at: ember_runtime::time::now(),
        obj_id: obj_id.to_string(),
        obj_type: obj_type.to_owned(),
        obj_name: obj_name.to_owned(),
        cluster_id,
        action: action.to_owned(),
        status: status.to_owned(),
        status_reason,
        level: level.to_owned(),
        project_id: caller.project_id.clone(),
        user_id: caller.user_id.clone(),
    }
}

/// An event about an action.
pub(crate) fn action_event(
    action: &ClusterAction,
    status: &str,
    reason: impl Into<String>,
) -> ClusterEvent {
    event(
        "ACTION",
        action.id,
        &action.name,
        action.cluster_id,
        action.kind.as_str(),
        status,
        reason,
        &action.caller(),
    )
}
