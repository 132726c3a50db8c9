//! One node waiting for `complete_lifecycle` or its deadline, and where its
//! notification stands.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Where the notification goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A message-bus queue (Senlin's `zaqar`): NATS JetStream when
    /// configured, else the embedded queue.
    Queue { queue: String },
    /// An HTTP POST signed with HMAC-SHA256.
    Webhook { url: String },
}

impl Target {
    pub fn type_name(&self) -> &'static str {
        match self {
            Target::Queue { .. } => "queue",
            Target::Webhook { .. } => "webhook",
        }
    }

    /// The queue name or URL.
    pub fn address(&self) -> &str {
        match self {
            Target::Queue { queue } => queue,
            Target::Webhook { url } => url,
        }
    }

    pub fn from_parts(type_name: &str, address: String) -> Option<Target> {
        match type_name {
            "queue" => Some(Target::Queue { queue: address }),
            "webhook" => Some(Target::Webhook { url: address }),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryState {
    Pending,
    Delivered,
    Retrying,
    /// Given up: a final refusal from the target, or the deadline came first.
    Failed,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "PENDING",
            DeliveryState::Delivered => "DELIVERED",
            DeliveryState::Retrying => "RETRYING",
            DeliveryState::Failed => "FAILED",
        }
    }

    pub fn parse(text: &str) -> Option<DeliveryState> {
        [
            DeliveryState::Pending,
            DeliveryState::Delivered,
            DeliveryState::Retrying,
            DeliveryState::Failed,
        ]
        .into_iter()
        .find(|state| state.as_str() == text)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingLifecycleAction {
    /// The lifecycle action token: the engine's NODE_DELETE action id.
    pub token: Uuid,
    pub node_id: Uuid,
    /// Physical id of the node (instance or stack id).
    pub resource_id: String,
    pub cluster_id: Uuid,
    pub project_id: String,
    pub target: Target,
    pub deadline: DateTime<Utc>,
    pub delivery_state: DeliveryState,
    pub delivery_attempts: u32,
    pub last_error: Option<String>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_round_trip_through_their_parts() {
        for target in [
            Target::Queue {
                queue: "drain".into(),
            },
            Target::Webhook {
                url: "http://127.0.0.1:9/hook".into(),
            },
        ] {
            let rebuilt = Target::from_parts(target.type_name(), target.address().to_owned());
            assert_eq!(rebuilt, Some(target));
        }
        assert_eq!(Target::from_parts("zaqar", "q".into()), None);
    }

    #[test]
    fn delivery_states_round_trip() {
        for state in [
            DeliveryState::Pending,
            DeliveryState::Delivered,
            DeliveryState::Retrying,
            DeliveryState::Failed,
        ] {
            assert_eq!(DeliveryState::parse(state.as_str()), Some(state));
        }
    }
}
