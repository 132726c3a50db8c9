//! What the service keeps about pending actions besides the actions
//! themselves: the events of their course and the messages of the embedded
//! queue.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::PendingLifecycleAction;

/// A message of the embedded queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueMessage {
    pub id: i64,
    pub project_id: String,
    pub queue: String,
    pub token: Uuid,
    pub body: String,
    pub created_at: DateTime<Utc>,
}

/// Something that happened to a lifecycle action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookEvent {
    pub id: Uuid,
    pub token: Uuid,
    pub cluster_id: Uuid,
    pub node_id: Uuid,
    pub project_id: String,
    /// SENT, DELIVERY_FAILED, DELIVERY_RETRY, COMPLETED, EXPIRED, HEARTBEAT.
    pub kind: String,
    pub detail: String,
    pub created_at: DateTime<Utc>,
}

impl HookEvent {
    pub fn about(
        action: &PendingLifecycleAction,
        kind: &str,
        detail: impl Into<String>,
    ) -> HookEvent {
        HookEvent {
            id: Uuid::now_v7(),
            token: action.token,
            cluster_id: action.cluster_id,
            node_id: action.node_id,
            project_id: action.project_id.clone(),
            kind: kind.to_owned(),
            detail: detail.into(),
            created_at: ember_runtime::time::now(),
        }
    }
}
