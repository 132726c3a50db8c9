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
    NodeCreate,
    NodeDelete,
}

impl ActionKind {
    pub const ALL: [ActionKind; 13] = [
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
        ActionKind::NodeCreate,
        ActionKind::NodeDelete,
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
            ActionKind::NodeCreate => "NODE_CREATE",
            ActionKind::NodeDelete => "NODE_DELETE",
        }
    }

    pub fn parse(text: &str) -> Option<ActionKind> {
        ActionKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
    }

    /// Node actions are idempotent (a delete of a gone resource succeeds),
    /// so another engine may run them again after their engine died; a
    /// cluster action is failed instead, never run twice.
    pub fn can_be_taken_over(self) -> bool {
        matches!(self, ActionKind::NodeDelete)
    }
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
}

/// How a lifecycle wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleOutcome {
    /// complete_lifecycle came first.
    Completed,
    /// The deadline came first.
    Expired,
}

impl LifecycleOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            LifecycleOutcome::Completed => "COMPLETED",
            LifecycleOutcome::Expired => "EXPIRED",
        }
    }

    pub fn parse(text: &str) -> Option<LifecycleOutcome> {
        [LifecycleOutcome::Completed, LifecycleOutcome::Expired]
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
    /// The caller the action acts for.
    pub project_id: String,
    pub user_id: String,
    pub roles: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
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
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            roles: caller.roles.clone(),
            created_at: now,
            updated_at: now,
        }
    }

    /// The identity the action acts with.
    pub fn caller(&self) -> ember_runtime::Identity {
        ember_runtime::Identity::new(&self.user_id, &self.project_id, self.roles.clone())
    }

    pub fn input_u64(&self, key: &str) -> Option<u64> {
        self.inputs.get(key).and_then(Value::as_u64)
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
        assert!(ActionKind::NodeDelete.can_be_taken_over());
        assert!(!ActionKind::ClusterScaleIn.can_be_taken_over());
    }
}
