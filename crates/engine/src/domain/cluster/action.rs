//! Durable actions (Senlin's actions): every change to a cluster or node is
//! a row that a dispatcher claims, runs and finishes. Their statuses and the
//! moves between them are decided here.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

/// What an action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    ClusterCreate,
    ClusterDelete,
    ClusterScaleIn,
    ClusterScaleOut,
    ClusterResize,
    ClusterDelNodes,
    ClusterAddNodes,
    ClusterAttachPolicy,
    ClusterDetachPolicy,
    ClusterCheck,
    ClusterRecover,
    ClusterUpdate,
    ClusterUpdatePolicy,
    ClusterReplaceNodes,
    ClusterOperation,
    NodeCreate,
    NodeDelete,
    NodeUpdate,
    NodeCheck,
    NodeRecover,
    NodeOperation,
}

impl ActionKind {
    pub const ALL: [ActionKind; 21] = [
        ActionKind::ClusterCreate,
        ActionKind::ClusterDelete,
        ActionKind::ClusterScaleIn,
        ActionKind::ClusterScaleOut,
        ActionKind::ClusterResize,
        ActionKind::ClusterDelNodes,
        ActionKind::ClusterAddNodes,
        ActionKind::ClusterAttachPolicy,
        ActionKind::ClusterDetachPolicy,
        ActionKind::ClusterCheck,
        ActionKind::ClusterRecover,
        ActionKind::ClusterUpdate,
        ActionKind::ClusterUpdatePolicy,
        ActionKind::ClusterReplaceNodes,
        ActionKind::ClusterOperation,
        ActionKind::NodeCreate,
        ActionKind::NodeDelete,
        ActionKind::NodeUpdate,
        ActionKind::NodeCheck,
        ActionKind::NodeRecover,
        ActionKind::NodeOperation,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ActionKind::ClusterCreate => "CLUSTER_CREATE",
            ActionKind::ClusterDelete => "CLUSTER_DELETE",
            ActionKind::ClusterScaleIn => "CLUSTER_SCALE_IN",
            ActionKind::ClusterScaleOut => "CLUSTER_SCALE_OUT",
            ActionKind::ClusterResize => "CLUSTER_RESIZE",
            ActionKind::ClusterDelNodes => "CLUSTER_DEL_NODES",
            ActionKind::ClusterAddNodes => "CLUSTER_ADD_NODES",
            ActionKind::ClusterAttachPolicy => "CLUSTER_ATTACH_POLICY",
            ActionKind::ClusterDetachPolicy => "CLUSTER_DETACH_POLICY",
            ActionKind::ClusterCheck => "CLUSTER_CHECK",
            ActionKind::ClusterRecover => "CLUSTER_RECOVER",
            ActionKind::ClusterUpdate => "CLUSTER_UPDATE",
            ActionKind::ClusterUpdatePolicy => "CLUSTER_UPDATE_POLICY",
            ActionKind::ClusterReplaceNodes => "CLUSTER_REPLACE_NODES",
            ActionKind::ClusterOperation => "CLUSTER_OPERATION",
            ActionKind::NodeCreate => "NODE_CREATE",
            ActionKind::NodeDelete => "NODE_DELETE",
            ActionKind::NodeUpdate => "NODE_UPDATE",
            ActionKind::NodeCheck => "NODE_CHECK",
            ActionKind::NodeRecover => "NODE_RECOVER",
            ActionKind::NodeOperation => "NODE_OPERATION",
        }
    }

    pub fn parse(text: &str) -> Option<ActionKind> {
        ActionKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
    }
}

/// How many times an action is run (claimed) before an engine that keeps
/// going away while running it fails it instead of taking it over again.
pub const MAX_RUN_ATTEMPTS: i32 = 5;

/// The fencing token of one run of an action: which engine claimed it and
/// which claim this is. Every write the run makes is conditional on the
/// action still being RUNNING under this token, so a run that lost its
/// action (its lease expired and another claim took it, possibly by the
/// same engine) cannot write over the run that took it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence {
    pub action_id: Uuid,
    pub owner: Uuid,
    pub attempt: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionStatus {
    Init,
    /// Waiting for the actions it depends on.
    Waiting,
    /// A NODE_DELETE waiting for complete_lifecycle or its deadline.
    WaitingLifecycleCompletion,
    Ready,
    Running,
    Suspended,
    Succeeded,
    Failed,
    Cancelled,
}

impl ActionStatus {
    pub const ALL: [ActionStatus; 9] = [
        ActionStatus::Init,
        ActionStatus::Waiting,
        ActionStatus::WaitingLifecycleCompletion,
        ActionStatus::Ready,
        ActionStatus::Running,
        ActionStatus::Suspended,
        ActionStatus::Succeeded,
        ActionStatus::Failed,
        ActionStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ActionStatus::Init => "INIT",
            ActionStatus::Waiting => "WAITING",
            ActionStatus::WaitingLifecycleCompletion => "WAITING_LIFECYCLE_COMPLETION",
            ActionStatus::Ready => "READY",
            ActionStatus::Running => "RUNNING",
            ActionStatus::Suspended => "SUSPENDED",
            ActionStatus::Succeeded => "SUCCEEDED",
            ActionStatus::Failed => "FAILED",
            ActionStatus::Cancelled => "CANCELLED",
        }
    }

    pub fn parse(text: &str) -> Option<ActionStatus> {
        ActionStatus::ALL
            .into_iter()
            .find(|status| status.as_str().eq_ignore_ascii_case(text))
    }

    /// The statuses an action ends in.
    pub const FINAL: [ActionStatus; 3] = [
        ActionStatus::Succeeded,
        ActionStatus::Failed,
        ActionStatus::Cancelled,
    ];

    pub fn is_final(self) -> bool {
        ActionStatus::FINAL.contains(&self)
    }

    /// The statuses of an action not yet ended: every one but [`Self::FINAL`].
    pub fn unfinished() -> impl Iterator<Item = ActionStatus> {
        ActionStatus::ALL
            .into_iter()
            .filter(|status| !status.is_final())
    }
}

/// How a lifecycle wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleOutcome {
    /// complete_lifecycle came first, with CONTINUE.
    Completed,
    /// complete_lifecycle came first, with ABANDON.
    Abandoned,
    /// The deadline came first: the hook's default result applies.
    Expired,
}

impl LifecycleOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            LifecycleOutcome::Completed => "COMPLETED",
            LifecycleOutcome::Abandoned => "ABANDONED",
            LifecycleOutcome::Expired => "EXPIRED",
        }
    }

    pub fn parse(text: &str) -> Option<LifecycleOutcome> {
        [
            LifecycleOutcome::Completed,
            LifecycleOutcome::Abandoned,
            LifecycleOutcome::Expired,
        ]
        .into_iter()
        .find(|outcome| outcome.as_str() == text)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClusterAction {
    pub id: Uuid,
    pub name: String,
    pub kind: ActionKind,
    /// The cluster or node acted on.
    pub target_id: Uuid,
    pub cluster_id: Option<Uuid>,
    pub status: ActionStatus,
    pub status_reason: String,
    pub inputs: Map<String, Value>,
    pub outputs: Map<String, Value>,
    pub depends_on: Vec<Uuid>,
    pub depended_by: Vec<Uuid>,
    /// The engine running it and until when its lease holds.
    pub owner: Option<Uuid>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub lifecycle_outcome: Option<LifecycleOutcome>,
    /// Who completed the lifecycle, or when it expired.
    pub lifecycle_detail: String,
    /// Handed to lifecycle-hook (for WAITING_LIFECYCLE_COMPLETION actions).
    pub hook_recorded: bool,
    /// How many times the action was claimed: the fencing token of the
    /// current run.
    pub attempt: i32,
    /// The caller the action acts for.
    pub project_id: String,
    pub user_id: String,
    pub roles: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When it was first claimed to run.
    pub started_at: Option<DateTime<Utc>>,
}

impl ClusterAction {
    /// A new action for `caller`, in `status`.
    pub fn new(
        kind: ActionKind,
        target_id: Uuid,
        cluster_id: Option<Uuid>,
        status: ActionStatus,
        inputs: Map<String, Value>,
        caller: &ember_runtime::Identity,
        now: DateTime<Utc>,
    ) -> ClusterAction {
        let id = Uuid::now_v7();
        ClusterAction {
            id,
            name: format!(
                "{}_{}",
                kind.as_str().to_ascii_lowercase(),
                &id.simple().to_string()[..8]
            ),
            kind,
            target_id,
            cluster_id,
            status,
            status_reason: String::new(),
            inputs,
            outputs: Map::new(),
            depends_on: Vec::new(),
            depended_by: Vec::new(),
            owner: None,
            lease_expires_at: None,
            lifecycle_outcome: None,
            lifecycle_detail: String::new(),
            hook_recorded: false,
            attempt: 0,
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            roles: caller.roles.clone(),
            created_at: now,
            updated_at: now,
            started_at: None,
        }
    }

    /// The identity the action acts with.
    pub fn caller(&self) -> ember_runtime::Identity {
        ember_runtime::Identity::new(&self.user_id, &self.project_id, self.roles.clone())
    }

    pub fn input_u64(&self, key: &str) -> Option<u64> {
        self.inputs.get(key).and_then(Value::as_u64)
    }

    /// Whether running the action needs its cluster's lock: every cluster
    /// action, and a node action on a member (it changes the membership),
    /// but not the NODE_DELETE children of a removal, which run under the
    /// lock their parent holds (needing it would deadlock the parent).
    pub fn takes_cluster_lock(&self) -> bool {
        self.cluster_id.is_some() && self.depended_by.is_empty()
    }

    /// The fencing token of the run that claimed this action.
    pub fn fence(&self) -> Option<Fence> {
        self.owner.map(|owner| Fence {
            action_id: self.id,
            owner,
            attempt: self.attempt,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in ActionKind::ALL {
            assert_eq!(ActionKind::parse(kind.as_str()), Some(kind));
        }
        for status in ActionStatus::ALL {
            assert_eq!(ActionStatus::parse(status.as_str()), Some(status));
        }
    }

    #[test]
    fn the_children_of_a_removal_run_under_their_parents_lock() {
        let caller = ember_runtime::Identity::new("u", "p", vec!["member".into()]);
        let now = chrono::Utc::now();
        let cluster = Some(Uuid::now_v7());
        let new = |kind, cluster_id| {
            ClusterAction::new(
                kind,
                Uuid::now_v7(),
                cluster_id,
                ActionStatus::Ready,
                Map::new(),
                &caller,
                now,
            )
        };
        assert!(new(ActionKind::ClusterScaleIn, cluster).takes_cluster_lock());
        assert!(new(ActionKind::NodeDelete, cluster).takes_cluster_lock());
        assert!(new(ActionKind::NodeCreate, cluster).takes_cluster_lock());
        assert!(!new(ActionKind::NodeDelete, None).takes_cluster_lock());
        let mut child = new(ActionKind::NodeDelete, cluster);
        child.depended_by = vec![Uuid::now_v7()];
        assert!(!child.takes_cluster_lock());
        assert_eq!(child.fence(), None);
    }
}
