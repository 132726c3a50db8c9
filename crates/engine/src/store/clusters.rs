//! Persistence of clusters, nodes, profiles, policies, actions and events:
//! the [`ClusterStore`] trait, named after what the clustering code does,
//! and its sea-orm implementation. Every state change that must happen once
//! (claiming an action, completion versus deadline, finishing a parent) is
//! one conditional update whose affected row count decides who won.
//!
//! Two rules keep concurrent runs and replicas apart (a cluster's
//! *maintenance* lock, which users take, is another thing: one JSON column
//! changed by [`ClusterStore::change_cluster_lock`]):
//! - **The cluster lock.** An action that needs it (see
//!   [`ClusterAction::takes_cluster_lock`]) is claimed only in the
//!   transaction that takes its cluster's lock (`clusters.lock_action_id`),
//!   and only when it is the cluster's oldest READY such action; the lock
//!   is released in the transaction that makes the action (or the parent
//!   waiting on its NODE_DELETE children) final, and kept when an expired
//!   run is queued again for takeover.
//! - **Fenced writes.** Every write of a run ([`ClusterStore::apply_cluster_change`],
//!   [`ClusterStore::finish_action`], …) first updates the action row
//!   `WHERE id = ? AND status = RUNNING AND owner = ? AND attempt = ?` and
//!   writes nothing unless that matched: a run whose lease was taken over
//!   (even by its own engine) stops without writing.
//!
//! Transactions that read before they write begin as write transactions on
//! SQLite (`BEGIN IMMEDIATE`), so two replicas on one SQLite file queue on
//! its lock instead of failing with a stale snapshot.

mod changes;
mod convert;
mod entity;
mod lookup;
mod sql_actions;
mod sql_adopt;
mod sql_lists;
mod sql_locks;
mod sql_objects;
mod sql_runs;
mod sql_updates;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use serde_json::{Map, Value};

use crate::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, ClusterEvent, ClusterLock, ClusterStatus,
    Fence, LifecycleOutcome, Node, NodeStatus, PolicyBinding, PolicyDefinition, Profile,
};
use crate::error::Result;

pub use sql_objects::SqlClusterStore;
pub use sql_runs::{
    KEEP_DESIRED_OUTPUT, KEPT_PROTECTED_OUTPUT, KEPT_PROTECTED_REASON, RESUME_AFTER_CHILDREN_OUTPUT,
};

/// The keys each list may be sorted by (Senlin's).
pub use crate::domain::cluster::query::{
    ACTION_SORT_KEYS, ActionQuery, CLUSTER_SORT_KEYS, EVENT_SORT_KEYS, EventQuery, NODE_SORT_KEYS,
    NodeQuery, ObjectQuery, POLICY_SORT_KEYS, PROFILE_SORT_KEYS, SortKey,
};

/// One expired cluster lock to lift, with what records it.
#[derive(Debug, Clone)]
pub struct ExpiredLift {
    pub cluster_id: Uuid,
    /// The lock as it was read: lifted only if it is still this one.
    pub lock: ClusterLock,
    pub event: ClusterEvent,
    pub audit: Option<crate::domain::audit::AuditRecord>,
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

/// The columns of a cluster a run sets; `None` leaves a column as it is.
/// `next_index` is never among them (only the atomic allocator moves it),
/// nor the lock (only claims and final writes move it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterColumns {
    pub desired_capacity: Option<i32>,
    pub min_size: Option<i32>,
    pub max_size: Option<i32>,
    pub status: Option<(ClusterStatus, String)>,
    /// CLUSTER_UPDATE's: the new name, metadata, timeout (`Some(None)`
    /// clears it), profile and config.
    pub name: Option<String>,
    pub metadata: Option<Map<String, Value>>,
    pub timeout: Option<Option<i32>>,
    pub profile_id: Option<Uuid>,
    pub config: Option<crate::domain::cluster::ClusterConfig>,
}

/// A node status a run records.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeStatusChange {
    pub node_id: Uuid,
    pub status: NodeStatus,
    pub status_reason: String,
    /// `Some` sets the physical id as given.
    pub physical_id: Option<Option<String>>,
    /// Only from one of these statuses (empty: from any).
    pub only_from: Vec<NodeStatus>,
    /// Only while the node's cluster is this (`Some(None)`: no cluster).
    pub only_in_cluster: Option<Option<Uuid>>,
    /// `Some` moves the node to this profile (a NODE_UPDATE that replaced
    /// its resource).
    pub profile_id: Option<Uuid>,
}

impl NodeStatusChange {
    pub fn new(node_id: Uuid, status: NodeStatus, reason: impl Into<String>) -> Self {
        NodeStatusChange {
            node_id,
            status,
            status_reason: reason.into(),
            physical_id: None,
            only_from: Vec::new(),
            only_in_cluster: None,
            profile_id: None,
        }
    }
}

/// The columns of a node a user changes directly (`None` leaves one as it
/// is): never its status, resource or membership, which are its actions'.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeDetails {
    pub name: Option<String>,
    pub role: Option<String>,
    pub tainted: Option<bool>,
    pub protected: Option<bool>,
    pub metadata: Option<Map<String, Value>>,
}

/// Everything one write of a run changes, in one transaction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterChange {
    /// The cluster whose columns, new members and adoptions these are.
    pub cluster_id: Option<Uuid>,
    pub cluster: ClusterColumns,
    /// Inserted as members of `cluster_id`: each gets the next index
    /// (allocated in the same transaction) and, if its name is empty, the
    /// member name of that index.
    pub new_members: Vec<Node>,
    /// Nodes of no cluster, not being deleted, that join `cluster_id`
    /// with the next indexes; those no longer free are left out.
    pub adopt_nodes: Vec<Uuid>,
    pub node_changes: Vec<NodeStatusChange>,
    /// Node rows that go.
    pub delete_nodes: Vec<Uuid>,
    /// Nodes that leave their cluster and stay, in this status, with this
    /// reason.
    pub release_nodes: Vec<(Uuid, NodeStatus, String)>,
    pub bind_policy: Option<PolicyBinding>,
    /// The policy detached from `cluster_id`.
    pub unbind_policy: Option<Uuid>,
    /// Replaces the action's outputs.
    pub outputs: Option<Map<String, Value>>,
    pub events: Vec<ClusterEvent>,
}

/// What a change did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChangeOutcome {
    /// The new members as inserted (indexes and names given).
    pub new_members: Vec<Node>,
    /// The nodes adopted.
    pub adopted: Vec<Uuid>,
    /// The nodes whose status changed (a conditional change that did not
    /// match is absent).
    pub changed_nodes: Vec<Uuid>,
}

/// How an action's final write leaves its cluster (when the action holds
/// the cluster's lock; otherwise the cluster is not touched).
#[derive(Debug, Clone, PartialEq)]
pub enum Settle {
    /// Status and desired capacity recomputed from the member nodes
    /// ([`crate::domain::cluster::settle::settle`]); nodes left CREATING or
    /// DELETING become ERROR first. `lead` opens the status reason.
    FromNodes { keep_desired: bool, lead: String },
    /// This status and reason.
    Status(ClusterStatus, String),
    /// As it is.
    Unchanged,
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
    /// The page of [`ClusterStore::list_clusters`], each cluster with the
    /// ids of its members in index order (on SQLite read with the rows, in
    /// one query; elsewhere joined in a second).
    async fn list_clusters_with_members(
        &self,
        query: &ObjectQuery,
    ) -> Result<Vec<(Cluster, Vec<Uuid>)>>;
    /// The action holding the cluster's lock, if any.
    async fn cluster_lock_holder(&self, cluster_id: Uuid) -> Result<Option<Uuid>>;
    /// Sets the cluster's maintenance lock to `next` (`None` lifts it)
    /// where it is still `expected`, recording `events` with it; false
    /// when it changed since it was read (a racing lock, unlock or expiry
    /// won).
    async fn change_cluster_lock(
        &self,
        cluster_id: Uuid,
        expected: Option<&ClusterLock>,
        next: Option<&ClusterLock>,
        events: &[ClusterEvent],
    ) -> Result<bool>;
    /// The clusters whose maintenance lock expired by `now`, soonest
    /// first, at most `limit`.
    async fn expired_cluster_locks(&self, now: DateTime<Utc>, limit: u64) -> Result<Vec<Cluster>>;
    /// When the soonest cluster lock expires; `None` when none has an
    /// expiry.
    async fn next_cluster_lock_expiry(&self) -> Result<Option<DateTime<Utc>>>;
    /// Lifts each expired lock of `lifts` where it is still the lock
    /// read, with its event and audit record, all in one transaction;
    /// returns the clusters lifted (a lock changed since is left alone).
    async fn lift_expired_cluster_locks(&self, lifts: &[ExpiredLift]) -> Result<Vec<Uuid>>;
    /// Reserves `count` node indexes of the cluster with one atomic
    /// `UPDATE … SET next_index = next_index + count RETURNING`; returns
    /// the first. Concurrent callers get disjoint ranges.
    async fn take_node_indexes(&self, cluster_id: Uuid, count: i32) -> Result<i32>;

    /// A node create request: the node (INIT; given the next index of its
    /// cluster, if it names one), its NODE_CREATE action and event, in one
    /// transaction. Returns the node as recorded.
    async fn create_node(
        &self,
        node: &Node,
        action: &ClusterAction,
        event: &ClusterEvent,
    ) -> Result<Node>;
    async fn find_node(&self, project_id: Option<&str>, name_or_id: &str) -> Result<Option<Node>>;
    async fn get_node(&self, id: Uuid) -> Result<Option<Node>>;
    /// These nodes, those that exist.
    async fn get_nodes(&self, ids: &[Uuid]) -> Result<Vec<Node>>;
    /// A page of nodes (the API's listing).
    async fn list_nodes(&self, query: &NodeQuery) -> Result<Vec<Node>>;
    /// Every node of the cluster, however many (what actions read).
    async fn list_cluster_nodes(&self, cluster_id: Uuid) -> Result<Vec<Node>>;
    /// Changes a node's name, role and taint (only those columns); `None`
    /// when it is gone.
    async fn update_node_details(&self, id: Uuid, details: NodeDetails) -> Result<Option<Node>>;

    /// The cluster's bindings with their policies, highest priority first.
    async fn list_bindings(
        &self,
        cluster_id: Uuid,
    ) -> Result<Vec<(PolicyBinding, PolicyDefinition)>>;

    /// The clusters, of every project, with an enabled health policy.
    async fn clusters_with_health_policies(&self) -> Result<Vec<Uuid>>;

    /// Inserts actions and events in one transaction.
    async fn insert_actions(
        &self,
        actions: &[ClusterAction],
        events: &[ClusterEvent],
    ) -> Result<()>;
    async fn get_action(&self, id: Uuid) -> Result<Option<ClusterAction>>;
    async fn list_actions(&self, query: &ActionQuery) -> Result<Vec<ClusterAction>>;
    /// Claims up to `limit` READY actions for `engine_id` in one
    /// transaction: first each free cluster with READY work is locked for
    /// its oldest READY lock-taking action, then the READY actions that
    /// need no lock or hold their cluster's lock become RUNNING (attempt
    /// + 1). Rows another claim holds are skipped on PostgreSQL (`FOR
    /// UPDATE SKIP LOCKED`), so claims never wait on each other.
    async fn claim_ready_actions(
        &self,
        engine_id: Uuid,
        lease_until: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<ClusterAction>>;
    /// Extends the lease of those of `action_ids` that `engine_id` runs.
    async fn renew_action_leases(
        &self,
        engine_id: Uuid,
        action_ids: &[Uuid],
        lease_until: DateTime<Utc>,
    ) -> Result<u64>;
    /// Whether the run `fence` still owns its action.
    async fn still_owned(&self, fence: &Fence) -> Result<bool>;
    /// One fenced write of a run; `None` when the run lost its action
    /// (nothing was written).
    async fn apply_cluster_change(
        &self,
        fence: &Fence,
        change: &ClusterChange,
    ) -> Result<Option<ChangeOutcome>>;
    /// RUNNING (under `action`'s fence) → `status`, with `change`, and —
    /// when the action holds its cluster's lock — the cluster settled as
    /// `settle` says and the lock released, all in one transaction. False
    /// when the run lost the action (nothing written).
    async fn finish_action(
        &self,
        action: &ClusterAction,
        status: ActionStatus,
        reason: &str,
        change: &ClusterChange,
        settle: &Settle,
    ) -> Result<bool>;
    /// The end of a CLUSTER_DELETE whose nodes are gone: in one
    /// transaction, the action SUCCEEDED, the cluster row and its
    /// bindings deleted (nodes still INIT with it), and the actions queued
    /// on it FAILED. Conflict if other nodes remain; false when the run
    /// lost the action.
    async fn finish_cluster_delete(
        &self,
        action: &ClusterAction,
        reason: &str,
        events: &[ClusterEvent],
    ) -> Result<bool>;
    /// In one fenced transaction: `parent` waits for `children`, which are
    /// inserted, with `change` (the cluster's new size, the victims
    /// DELETING, the parent's outputs). It keeps the cluster's lock. False
    /// when the run lost the parent.
    async fn start_waiting_on_children(
        &self,
        parent: &ClusterAction,
        children: &[ClusterAction],
        change: &ClusterChange,
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
    /// A launching node's CONTINUE at once: its waiting NODE_CREATE
    /// SUCCEEDED (outcome COMPLETED, `detail`, `reason`) and the node
    /// CREATING → ACTIVE (`node_reason`), with `events`, in one
    /// transaction.
    async fn continue_launch(
        &self,
        action_id: Uuid,
        detail: &str,
        reason: &str,
        node_reason: &str,
        events: &[ClusterEvent],
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
    /// SUCCEEDED (or FAILED if one failed) in one conditional update, the
    /// cluster settled from its nodes and its lock released, in one
    /// transaction. Returns the parent if this call finished it.
    async fn finish_parent_if_done(&self, parent_id: Uuid) -> Result<Option<ClusterAction>>;
    /// A profile's new name and/or metadata; `None` when it is gone.
    async fn update_profile(
        &self,
        id: Uuid,
        name: Option<String>,
        metadata: Option<Map<String, Value>>,
    ) -> Result<Option<Profile>>;
    /// The member ids of every cluster of `cluster_ids` that has members,
    /// in index order, in one query.
    async fn member_ids_of(
        &self,
        cluster_ids: &[Uuid],
    ) -> Result<std::collections::HashMap<Uuid, Vec<Uuid>>>;
    /// The names of the profiles of `ids` that exist, in one query.
    async fn profile_names(&self, ids: &[Uuid]) -> Result<std::collections::HashMap<Uuid, String>>;
    /// The bindings of every cluster of `cluster_ids` with their policies,
    /// highest priority first, in two queries.
    async fn bindings_of(
        &self,
        cluster_ids: &[Uuid],
    ) -> Result<Vec<(PolicyBinding, PolicyDefinition)>>;
    /// A policy's new name; `None` when it is gone.
    async fn update_policy(&self, id: Uuid, name: String) -> Result<Option<PolicyDefinition>>;
    /// Cancels an action still INIT, READY or WAITING_LIFECYCLE_COMPLETION
    /// (see `sql_updates::cancel_action`): `Ok(action)` cancelled,
    /// `Err(action)` as it is when it no longer could be; `None` = gone.
    async fn cancel_action<'a>(
        &'a self,
        id: Uuid,
        event: &'a (dyn for<'b> Fn(&'b ClusterAction) -> ClusterEvent + Send + Sync + 'a),
    ) -> Result<Option<std::result::Result<ClusterAction, ClusterAction>>>;
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
    /// An action whose engine died, by one conditional update on its
    /// expired lease: READY again (`requeue`; it keeps its cluster's lock,
    /// so the next claim of it takes it over) or FAILED — then, in the same
    /// transaction, a NODE_DELETE child's node ERROR and, if it holds its
    /// cluster's lock, the cluster settled from its nodes and the lock
    /// released.
    async fn recover_expired_action(
        &self,
        action: &ClusterAction,
        now: DateTime<Utc>,
        requeue: bool,
        event: &ClusterEvent,
    ) -> Result<bool>;

    async fn record_events(&self, events: &[ClusterEvent]) -> Result<()>;
    /// The ACTIVE node whose physical resource is `physical_id` becomes
    /// ERROR with `reason` (its machine died or was removed), with its
    /// NODE_CHECK event, in one conditional write; returns the node as it
    /// was, `None` when no ACTIVE node has that physical id.
    async fn mark_node_machine_failed(
        &self,
        physical_id: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<Option<Node>>;
    async fn list_events(&self, query: &EventQuery) -> Result<Vec<ClusterEvent>>;
    /// Records an adopted instance: its new profile, the node (of no
    /// cluster) and its event, in one transaction; a conflict when a node
    /// already has the node's physical id.
    async fn adopt_node(
        &self,
        profile: &Profile,
        node: &Node,
        event: &ClusterEvent,
    ) -> Result<Node>;
    /// One event by id, of `project_id` when given.
    async fn get_event(&self, project_id: Option<&str>, id: Uuid) -> Result<Option<ClusterEvent>>;
}
