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

/// The lifecycle transition a node waits in (AWS's
/// `EC2_INSTANCE_LAUNCHING` / `EC2_INSTANCE_TERMINATING`), said in every
/// message as `lifecycle_transition_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// A new node is built and waits before it goes into service (a launch
    /// hook; the token is its NODE_CREATE action).
    Launching,
    /// A node chosen for removal waits before it goes (a deletion policy's
    /// hook; the token is its NODE_DELETE action).
    Terminating,
}

impl Transition {
    pub fn as_str(self) -> &'static str {
        match self {
            Transition::Launching => "launching",
            Transition::Terminating => "terminating",
        }
    }

    pub fn parse(text: &str) -> Option<Transition> {
        [Transition::Launching, Transition::Terminating]
            .into_iter()
            .find(|transition| transition.as_str() == text)
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
    /// The lifecycle action token: the engine's NODE_DELETE (terminating)
    /// or NODE_CREATE (launching) action id.
    pub token: Uuid,
    pub transition: Transition,
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
    /// The hook's timeout: a heartbeat extends the deadline by this much.
    pub timeout_secs: u32,
    /// `None` while waiting.
    pub resolution: Option<Resolution>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub resolved_by: Option<String>,
}

/// A pending action as the engine hands it over, before it is recorded:
/// what it waits for, where its notification goes and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPendingAction {
    pub token: Uuid,
    pub transition: Transition,
    pub node_id: Uuid,
    pub resource_id: String,
    pub cluster_id: Uuid,
    pub project_id: String,
    pub target: Target,
    pub deadline: DateTime<Utc>,
    pub timeout_secs: u32,
}

impl NewPendingAction {
    /// The action as recorded at `now`: its notification not yet sent,
    /// the wait not yet resolved.
    pub fn into_pending(self, now: DateTime<Utc>) -> PendingLifecycleAction {
        PendingLifecycleAction {
            token: self.token,
            transition: self.transition,
            node_id: self.node_id,
            resource_id: self.resource_id,
            cluster_id: self.cluster_id,
            project_id: self.project_id,
            target: self.target,
            deadline: self.deadline,
            delivery_state: DeliveryState::Pending,
            delivery_attempts: 0,
            last_error: None,
            delivered_at: None,
            created_at: now,
            timeout_secs: self.timeout_secs,
            resolution: None,
            resolved_at: None,
            resolved_by: None,
        }
    }
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// complete_lifecycle (the engine told us).
    Completed,
    /// The deadline fired and the engine continued.
    Expired,
}

impl Resolution {
    pub fn as_str(self) -> &'static str {
        match self {
            Resolution::Completed => "COMPLETED",
            Resolution::Expired => "EXPIRED",
        }
    }

    pub fn parse(text: &str) -> Option<Resolution> {
        [Resolution::Completed, Resolution::Expired]
            .into_iter()
            .find(|r| r.as_str() == text)
    }
}

/// The most a heartbeat may push a deadline: this many timeouts after the
/// action was recorded, or [`MAX_WAIT`], whichever comes first (AWS's rule
/// for lifecycle hooks).
pub const MAX_TIMEOUTS_PER_WAIT: i64 = 100;
pub const MAX_WAIT: chrono::Duration = chrono::Duration::hours(48);

impl PendingLifecycleAction {
    /// The deadline after a heartbeat at `now`.
    pub fn extended_deadline(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        let timeout = chrono::Duration::seconds(i64::from(self.timeout_secs));
        let cap = self.created_at
            + (timeout * i32::try_from(MAX_TIMEOUTS_PER_WAIT).unwrap_or(100)).min(MAX_WAIT);
        (now + timeout).max(self.deadline).min(cap)
    }

    /// The message every target receives, as JSON text.
    pub fn message_body(&self) -> String {
        serde_json::json!({
            "lifecycle_action_token": self.token.to_string(),
            "node_id": self.node_id.to_string(),
            "resource_id": self.resource_id,
            "cluster_id": self.cluster_id.to_string(),
            "lifecycle_transition_type": self.transition.as_str(),
            "deadline": self.deadline.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        })
        .to_string()
    }
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
    fn heartbeats_extend_by_the_timeout_up_to_a_hundred_timeouts() {
        let created = chrono::Utc::now();
        let action = PendingLifecycleAction {
            token: Uuid::nil(),
            transition: Transition::Terminating,
            node_id: Uuid::nil(),
            resource_id: String::new(),
            cluster_id: Uuid::nil(),
            project_id: "p".into(),
            target: Target::Queue { queue: "q".into() },
            deadline: created + chrono::Duration::seconds(10),
            delivery_state: DeliveryState::Pending,
            delivery_attempts: 0,
            last_error: None,
            delivered_at: None,
            created_at: created,
            timeout_secs: 10,
            resolution: None,
            resolved_at: None,
            resolved_by: None,
        };
        let later = created + chrono::Duration::seconds(5);
        assert_eq!(
            action.extended_deadline(later),
            later + chrono::Duration::seconds(10)
        );
        let far = created + chrono::Duration::seconds(5000);
        assert_eq!(
            action.extended_deadline(far),
            created + chrono::Duration::seconds(1000)
        );
        assert!(
            action
                .message_body()
                .contains("\"lifecycle_transition_type\":\"terminating\"")
        );
        let launching = PendingLifecycleAction {
            transition: Transition::Launching,
            ..action.clone()
        };
        assert!(
            launching
                .message_body()
                .contains("\"lifecycle_transition_type\":\"launching\"")
        );
        assert_eq!(Transition::parse("launching"), Some(Transition::Launching));
        assert_eq!(Transition::parse("termination"), None);
        // An hour-long hook: 100 timeouts would be 100 h; 48 h is the most.
        let long = PendingLifecycleAction {
            timeout_secs: 3_600,
            deadline: created + chrono::Duration::hours(1),
            ..action
        };
        assert_eq!(
            long.extended_deadline(created + chrono::Duration::hours(60)),
            created + chrono::Duration::hours(48)
        );
    }

    #[test]
    fn a_new_action_is_recorded_pending_and_unresolved() {
        let now = chrono::Utc::now();
        let new = NewPendingAction {
            token: Uuid::now_v7(),
            transition: Transition::Launching,
            node_id: Uuid::now_v7(),
            resource_id: "instance-1".into(),
            cluster_id: Uuid::now_v7(),
            project_id: "p".into(),
            target: Target::Webhook {
                url: "http://127.0.0.1:9/hook".into(),
            },
            deadline: now + chrono::Duration::seconds(60),
            timeout_secs: 60,
        };
        let action = new.clone().into_pending(now);
        assert_eq!(
            (
                action.token,
                action.transition,
                action.node_id,
                action.cluster_id
            ),
            (new.token, new.transition, new.node_id, new.cluster_id)
        );
        assert_eq!(
            (&action.resource_id, &action.project_id, &action.target),
            (&new.resource_id, &new.project_id, &new.target)
        );
        assert_eq!((action.deadline, action.timeout_secs), (new.deadline, 60));
        assert_eq!(action.delivery_state, DeliveryState::Pending);
        assert_eq!(action.delivery_attempts, 0);
        assert_eq!(action.created_at, now);
        assert_eq!(
            (action.last_error, action.delivered_at, action.resolution),
            (None, None, None)
        );
        assert_eq!((action.resolved_at, action.resolved_by), (None, None));
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
