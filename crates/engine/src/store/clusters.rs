//! Persistence of clusters, nodes, profiles, policies, actions and events:
//! the [`ClusterStore`] trait, named after what the clustering code does,
//! and its sea-orm implementation. Every state change that must happen once
//! (claiming an action, completion versus deadline, finishing a parent) is
//! one conditional update whose affected row count decides who won.

mod convert;
mod entity;
mod sql_actions;
mod sql_objects;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, ClusterEvent, LifecycleOutcome, Node,
    PolicyBinding, PolicyDefinition, Profile,
};
use crate::error::Result;

pub use sql_objects::SqlClusterStore;

/// A page of objects, oldest first.
#[derive(Debug, Clone, Default)]
pub struct ObjectQuery {
    /// `None` = every project (admins).
    pub project_id: Option<String>,
    pub name: Option<String>,
    /// 0 = 100; at most 1000.
    pub limit: u32,
    pub marker: Option<Uuid>,
}

impl ObjectQuery {
    pub fn page_size(&self) -> u64 {
        u64::from(match self.limit {
            0 => super::DEFAULT_PAGE_SIZE,
            limit => limit.min(super::MAX_PAGE_SIZE),
        })
    }
}

#[derive(Debug, Clone, Default)]
pub struct NodeQuery {
    pub project_id: Option<String>,
    pub cluster_id: Option<Uuid>,
    pub limit: u32,
    pub marker: Option<Uuid>,
}

#[derive(Debug, Clone, Default)]
pub struct ActionQuery {
    pub project_id: Option<String>,
    pub cluster_id: Option<Uuid>,
    pub status: Option<ActionStatus>,
    pub limit: u32,
    pub marker: Option<Uuid>,
}

#[derive(Debug, Clone, Default)]
pub struct EventQuery {
    pub project_id: Option<String>,
    pub cluster_id: Option<Uuid>,
    pub obj_id: Option<String>,
    pub limit: u32,
    pub marker: Option<Uuid>,
}

/// What happened when a waiting action was asked to become READY.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadyOutcome {
    /// This call moved it.
    Moved(ClusterAction),
    /// It was not in the expected status: here it is as it is now.
    NotWaiting(ClusterAction),
    Unknown,
}

#[async_trait]
pub trait ClusterStore: Send + Sync + 'static {
    async fn insert_profile(&self, profile: &Profile) -> Result<()>;
    /// By id or name (exact), within `project_id` unless `None`.
    async fn find_profile(
        &self,
        project_id: Option<&str>,
        name_or_id: &str,
    ) -> Result<Option<Profile>>;
    async fn get_profile(&self, id: Uuid) -> Result<Option<Profile>>;
    async fn list_profiles(&self, query: &ObjectQuery) -> Result<Vec<Profile>>;
    /// Conflict while a cluster or node uses it.
    async fn delete_profile(&self, id: Uuid) -> Result<()>;

    async fn insert_policy(&self, policy: &PolicyDefinition) -> Result<()>;
    async fn find_policy(
        &self,
        project_id: Option<&str>,
        name_or_id: &str,
    ) -> Result<Option<PolicyDefinition>>;
    async fn list_policies(&self, query: &ObjectQuery) -> Result<Vec<PolicyDefinition>>;
    /// Conflict while attached.
    async fn delete_policy(&self, id: Uuid) -> Result<()>;

    /// The cluster and its CLUSTER_CREATE action, together.
    async fn create_cluster(
        &self,
        cluster: &Cluster,
        action: &ClusterAction,
        event: &ClusterEvent,
    ) -> Result<()>;
    async fn find_cluster(
        &self,
        project_id: Option<&str>,
        name_or_id: &str,
    ) -> Result<Option<Cluster>>;
    async fn get_cluster(&self, id: Uuid) -> Result<Option<Cluster>>;
    async fn list_clusters(&self, query: &ObjectQuery) -> Result<Vec<Cluster>>;
    async fn save_cluster(&self, cluster: &Cluster) -> Result<()>;
    /// The cluster row and its policy bindings.
    async fn delete_cluster(&self, id: Uuid) -> Result<()>;
    /// Reserves `count` node indexes; returns the first.
    async fn take_node_indexes(&self, cluster_id: Uuid, count: i32) -> Result<i32>;

    async fn find_node(&self, project_id: Option<&str>, name_or_id: &str) -> Result<Option<Node>>;
    async fn get_node(&self, id: Uuid) -> Result<Option<Node>>;
    async fn list_nodes(&self, query: &NodeQuery) -> Result<Vec<Node>>;
    /// Inserts or replaces.
    async fn save_node(&self, node: &Node) -> Result<()>;
    async fn delete_node(&self, id: Uuid) -> Result<()>;

    /// Inserts or replaces the binding.
    async fn bind_policy(&self, binding: &PolicyBinding) -> Result<()>;
    async fn unbind_policy(&self, cluster_id: Uuid, policy_id: Uuid) -> Result<bool>;
    /// The cluster's bindings with their policies, highest priority first.
    async fn list_bindings(
        &self,
        cluster_id: Uuid,
    ) -> Result<Vec<(PolicyBinding, PolicyDefinition)>>;

    /// Inserts actions and events in one transaction.
    async fn insert_actions(
        &self,
        actions: &[ClusterAction],
        events: &[ClusterEvent],
    ) -> Result<()>;
    async fn get_action(&self, id: Uuid) -> Result<Option<ClusterAction>>;
    async fn list_actions(&self, query: &ActionQuery) -> Result<Vec<ClusterAction>>;
    /// Claims up to `limit` READY actions for `engine_id`, each with one
    /// conditional update (READY → RUNNING): two engines never both win.
    async fn claim_ready_actions(
        &self,
        engine_id: Uuid,
        lease_until: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<ClusterAction>>;
    /// Extends the lease of every action `engine_id` runs.
    async fn renew_action_leases(&self, engine_id: Uuid, lease_until: DateTime<Utc>)
    -> Result<u64>;
    /// RUNNING (owned by `engine_id`) → a final status; false when the
    /// action is no longer this engine's.
    async fn finish_action(
        &self,
        action: &ClusterAction,
        engine_id: Uuid,
        status: ActionStatus,
        reason: &str,
        events: &[ClusterEvent],
    ) -> Result<bool>;
    /// In one transaction: the parent (RUNNING, owned by `engine_id`) waits
    /// for `children`, which are inserted, and the cluster and the nodes are
    /// saved as given. False when the parent is no longer this engine's.
    async fn start_waiting_on_children(
        &self,
        parent: &ClusterAction,
        engine_id: Uuid,
        children: &[ClusterAction],
        cluster: Option<&Cluster>,
        nodes: &[Node],
        events: &[ClusterEvent],
    ) -> Result<bool>;
    /// `from` → READY in one conditional update, recording the lifecycle
    /// outcome when given.
    async fn make_ready(
        &self,
        action_id: Uuid,
        from: ActionStatus,
        outcome: Option<(LifecycleOutcome, &str)>,
        event: Option<&ClusterEvent>,
    ) -> Result<ReadyOutcome>;
    /// The deadline passed for `ids`: those still
    /// WAITING_LIFECYCLE_COMPLETION move to READY (outcome EXPIRED,
    /// `detail`) in one conditional update, each with the event `event`
    /// makes of it, in one transaction. Returns the actions this call
    /// moved, and the others of `ids` that exist, as they are.
    async fn expire_waiting<'a>(
        &'a self,
        ids: &[Uuid],
        detail: &str,
        event: &'a (dyn for<'b> Fn(&'b ClusterAction) -> ClusterEvent + Send + Sync + 'a),
    ) -> Result<(Vec<ClusterAction>, Vec<ClusterAction>)>;
    async fn mark_hooks_recorded(&self, action_ids: &[Uuid]) -> Result<()>;
    /// WAITING_LIFECYCLE_COMPLETION actions not yet handed to lifecycle-hook.
    async fn list_unrecorded_hooks(&self, limit: u64) -> Result<Vec<ClusterAction>>;
    /// When every action `parent_id` depends on is final, WAITING →
    /// SUCCEEDED (or FAILED if one failed) in one conditional update, and
    /// the cluster back to ACTIVE. Returns the parent if this call finished it.
    async fn finish_parent_if_done(&self, parent_id: Uuid) -> Result<Option<ClusterAction>>;
    async fn list_waiting_parents(&self, limit: u64) -> Result<Vec<ClusterAction>>;
    /// When the cluster's last `kind` action that SUCCEEDED finished (a
    /// scaling policy's cooldown runs from there).
    async fn last_success(
        &self,
        cluster_id: Uuid,
        kind: ActionKind,
    ) -> Result<Option<DateTime<Utc>>>;
    /// RUNNING actions whose lease ended before `now`.
    async fn list_expired_leases(
        &self,
        now: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<ClusterAction>>;
    /// An action whose engine died: READY again (`requeue`) or FAILED, by
    /// one conditional update on its expired lease.
    async fn recover_expired_action(
        &self,
        action: &ClusterAction,
        now: DateTime<Utc>,
        requeue: bool,
        event: &ClusterEvent,
    ) -> Result<bool>;

    async fn record_events(&self, events: &[ClusterEvent]) -> Result<()>;
    async fn list_events(&self, query: &EventQuery) -> Result<Vec<ClusterEvent>>;
}
