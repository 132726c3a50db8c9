//! Receivers (Senlin's): a standing request to run one cluster action when
//! something outside Ember asks — a webhook whose URL is the only
//! credential, or a message queue. What a receiver may name and which
//! parameters each action takes are decided here; running it is
//! `crate::receivers`'.

use chrono::{DateTime, Utc};
use ember_runtime::Identity;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{Error, Result};

/// How a receiver is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceiverType {
    /// A URL that runs the action when POSTed to, no token needed.
    Webhook,
    /// A queue whose messages name the cluster and action to run.
    Message,
}

impl ReceiverType {
    /// Senlin's field message for anything else.
    pub fn parse(text: &str) -> Result<ReceiverType> {
        match text {
            "webhook" => Ok(ReceiverType::Webhook),
            "message" => Ok(ReceiverType::Message),
            other => Err(not_acceptable(other, "type")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ReceiverType::Webhook => "webhook",
            ReceiverType::Message => "message",
        }
    }
}

/// A receiver as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Receiver {
    /// 128 random bits (see [`new_receiver_id`]): a webhook's URL carries
    /// it and nothing else, so it must not be guessable.
    pub id: Uuid,
    pub name: String,
    pub kind: ReceiverType,
    pub cluster_id: Option<Uuid>,
    /// One of [`CLUSTER_ACTION_NAMES`]; `None` for a message receiver.
    pub action: Option<String>,
    pub params: Map<String, Value>,
    /// Whom the action runs as beyond user and project: `{"roles": […]}`,
    /// the creator's roles when the receiver was made.
    pub actor: Map<String, Value>,
    pub channel: Map<String, Value>,
    pub user_id: String,
    pub project_id: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
}

impl Receiver {
    /// The identity the receiver's action runs as: its creator, with the
    /// roles recorded in its actor.
    pub fn owner(&self) -> Identity {
        let roles = self
            .actor
            .get("roles")
            .and_then(Value::as_array)
            .map(|roles| {
                roles
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        Identity::new(self.user_id.clone(), self.project_id.clone(), roles)
    }
}

/// The actor recorded for a receiver made by `caller`.
pub fn actor_of(caller: &Identity) -> Map<String, Value> {
    let mut actor = Map::new();
    actor.insert(
        "roles".into(),
        Value::Array(caller.roles.iter().cloned().map(Value::String).collect()),
    );
    actor
}

/// A receiver id: 128 bits from the operating system's random source,
/// written as a UUID. Not a v7 (its first 48 bits would be the time) and
/// not a strict v4 (6 of its bits would be fixed): all 128 bits are secret.
pub fn new_receiver_id() -> Uuid {
    use rand::RngCore;
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    Uuid::from_bytes(bytes)
}

/// Senlin's cluster action names: what a receiver's `action` may be.
pub const CLUSTER_ACTION_NAMES: &[&str] = &[
    "CLUSTER_CREATE",
    "CLUSTER_DELETE",
    "CLUSTER_UPDATE",
    "CLUSTER_ADD_NODES",
    "CLUSTER_DEL_NODES",
    "CLUSTER_RESIZE",
    "CLUSTER_CHECK",
    "CLUSTER_RECOVER",
    "CLUSTER_REPLACE_NODES",
    "CLUSTER_SCALE_OUT",
    "CLUSTER_SCALE_IN",
    "CLUSTER_ATTACH_POLICY",
    "CLUSTER_DETACH_POLICY",
    "CLUSTER_UPDATE_POLICY",
    "CLUSTER_OPERATION",
];

/// The parameters each action a receiver can run takes (the same names
/// as the cluster action bodies of the REST API).
pub fn action_parameters(action: &str) -> Option<&'static [&'static str]> {
    Some(match action {
        "CLUSTER_SCALE_OUT" | "CLUSTER_SCALE_IN" => &["count"],
        "CLUSTER_RESIZE" => &[
            "adjustment_type",
            "number",
            "min_size",
            "max_size",
            "min_step",
            "strict",
        ],
        "CLUSTER_ADD_NODES" | "CLUSTER_DEL_NODES" => &["nodes"],
        "CLUSTER_ATTACH_POLICY" => &["policy_id", "priority", "enabled"],
        "CLUSTER_DETACH_POLICY" => &["policy_id"],
        "CLUSTER_CHECK" | "CLUSTER_RECOVER" | "CLUSTER_DELETE" => &[],
        _ => return None,
    })
}

/// Checks the action a receiver is made (or updated) with: one of
/// Senlin's names (Senlin's message otherwise), never CLUSTER_CREATE, and
/// one Ember can run from a receiver.
pub fn validate_action(action: &str) -> Result<()> {
    if !CLUSTER_ACTION_NAMES.contains(&action) {
        return Err(not_acceptable(action, "action"));
    }
    if action == "CLUSTER_CREATE" {
        return Err(Error::InvalidInput(
            "Action name cannot be any of ['CLUSTER_CREATE'].".into(),
        ));
    }
    if action_parameters(action).is_none() {
        let runnable: Vec<&str> = CLUSTER_ACTION_NAMES
            .iter()
            .copied()
            .filter(|name| action_parameters(name).is_some())
            .collect();
        return Err(Error::InvalidInput(format!(
            "a receiver cannot run {action} in Ember: use one of {}",
            runnable.join(", ")
        )));
    }
    Ok(())
}

/// Checks that `params` only names parameters `action` takes.
pub fn validate_params(action: &str, params: &Map<String, Value>) -> Result<()> {
    let known = action_parameters(action).unwrap_or_default();
    match params.keys().find(|key| !known.contains(&key.as_str())) {
        None => Ok(()),
        Some(unknown) if known.is_empty() => Err(Error::InvalidInput(format!(
            "params: {action} takes no parameters (got {unknown:?})"
        ))),
        Some(unknown) => Err(Error::InvalidInput(format!(
            "params: {action} takes {} (got {unknown:?})",
            known.join(", ")
        ))),
    }
}

/// `params` with `overrides` laid over it (a trigger's parameters win).
pub fn merged_params(
    params: &Map<String, Value>,
    overrides: Map<String, Value>,
) -> Map<String, Value> {
    let mut merged = params.clone();
    merged.extend(overrides);
    merged
}

/// The queue of message receiver `id` (Senlin's name for its Zaqar queue).
pub fn queue_name(id: Uuid) -> String {
    format!("{QUEUE_PREFIX}{id}")
}

const QUEUE_PREFIX: &str = "senlin-receiver-";

/// The receiver whose queue `queue` is, when it is a receiver's queue name
/// as [`queue_name`] writes it (one spelling only: lowercase, with dashes).
pub fn queue_receiver_id(queue: &str) -> Option<Uuid> {
    let id = Uuid::parse_str(queue.strip_prefix(QUEUE_PREFIX)?).ok()?;
    (queue_name(id) == queue).then_some(id)
}

/// A message waiting in a receiver's queue.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceiverMessage {
    /// A v7 UUID: messages of one queue run in the order they were posted.
    pub id: Uuid,
    pub receiver_id: Uuid,
    pub project_id: String,
    /// `{"cluster": …, "action": …, "params": {…}}` (see [`message_command`]).
    pub body: Map<String, Value>,
    pub posted_at: DateTime<Utc>,
    /// Not run after this: dropped.
    pub expires_at: DateTime<Utc>,
}

/// Zaqar's default time to live of a message, and its bounds.
pub const DEFAULT_MESSAGE_TTL_SECONDS: i64 = 3600;
pub const MIN_MESSAGE_TTL_SECONDS: i64 = 60;
pub const MAX_MESSAGE_TTL_SECONDS: i64 = 1_209_600;

/// The time to live a poster asks for (Zaqar's default when none), within
/// Zaqar's bounds (its message otherwise).
pub fn message_ttl(ttl: Option<i64>) -> Result<chrono::Duration> {
    let seconds = ttl.unwrap_or(DEFAULT_MESSAGE_TTL_SECONDS);
    if !(MIN_MESSAGE_TTL_SECONDS..=MAX_MESSAGE_TTL_SECONDS).contains(&seconds) {
        return Err(Error::InvalidInput(format!(
            "The TTL for a message may not exceed {MAX_MESSAGE_TTL_SECONDS} seconds, \
             and must be at least {MIN_MESSAGE_TTL_SECONDS} seconds long."
        )));
    }
    Ok(chrono::Duration::seconds(seconds))
}

/// What a message asks for: `action` with `params` on the cluster named
/// `cluster` (id, name or short id, in the receiver's project).
#[derive(Debug, Clone, PartialEq)]
pub struct MessageCommand {
    pub cluster: String,
    pub action: String,
    pub params: Map<String, Value>,
}

/// Reads a message body: a JSON object with `cluster` and `action` (one
/// of Senlin's cluster action names a receiver can run) and optional
/// `params` of that action. Senlin's messages where it has them.
pub fn message_command(body: &Value) -> Result<MessageCommand> {
    let Value::Object(body) = body else {
        return Err(Error::InvalidInput(
            "the body must be a JSON object {\"cluster\": …, \"action\": …, \"params\": {…}}"
                .into(),
        ));
    };
    let text = |key: &str| match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.is_empty() => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(Error::InvalidInput(format!("{key} must be a string"))),
    };
    let (Some(cluster), Some(action)) = (text("cluster")?, text("action")?) else {
        return Err(Error::InvalidInput(
            "Both cluster identity and action must be specified.".into(),
        ));
    };
    if !CLUSTER_ACTION_NAMES.contains(&action.as_str()) {
        return Err(Error::InvalidInput(format!(
            "Illegal cluster action '{action}' specified."
        )));
    }
    validate_action(&action)?;
    let params = match body.get("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params.clone(),
        Some(_) => {
            return Err(Error::InvalidInput("params must be a JSON object".into()));
        }
    };
    validate_params(&action, &params)?;
    Ok(MessageCommand {
        cluster,
        action,
        params,
    })
}

/// Senlin's message for a value outside a field's choices.
fn not_acceptable(value: &str, field: &str) -> Error {
    Error::InvalidInput(format!(
        "Value '{value}' is not acceptable for field '{field}'."
    ))
}

/// The columns a listing may be sorted by (Senlin's receiver sort keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceiverSortKey {
    Name,
    Type,
    Action,
    ClusterId,
    CreatedAt,
    User,
}

impl ReceiverSortKey {
    /// Senlin's key name (`None` for any other).
    pub fn parse(key: &str) -> Option<ReceiverSortKey> {
        Some(match key {
            "name" => ReceiverSortKey::Name,
            "type" => ReceiverSortKey::Type,
            "action" => ReceiverSortKey::Action,
            "cluster_id" => ReceiverSortKey::ClusterId,
            "created_at" => ReceiverSortKey::CreatedAt,
            "user" => ReceiverSortKey::User,
            _ => return None,
        })
    }
}

/// Which receivers to list. Filters match exactly; `None` lets all through.
#[derive(Debug, Clone, Default)]
pub struct ReceiverQuery {
    /// `None` = every project (admins asking for it).
    pub project_id: Option<String>,
    pub name: Option<String>,
    pub kind: Option<ReceiverType>,
    pub cluster_id: Option<String>,
    pub action: Option<String>,
    pub user_id: Option<String>,
    /// Keys and whether each is descending; after them, oldest first.
    pub sort: Vec<(ReceiverSortKey, bool)>,
    /// 0 = 100; at most 1000.
    pub limit: u32,
    /// Only the receivers after this one in the listing's order.
    pub marker: Option<Uuid>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn ids_are_random_and_not_time_ordered() {
        let ids: Vec<Uuid> = (0..64).map(|_| new_receiver_id()).collect();
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len());
        // A v7 id's first 48 bits are the time: 64 random ids do not all
        // share their first byte as ids made within a millisecond would.
        let first_bytes: std::collections::HashSet<u8> =
            ids.iter().map(|id| id.as_bytes()[0]).collect();
        assert!(first_bytes.len() > 8, "{first_bytes:?}");
    }

    #[test]
    fn actions_are_senlins_names_that_ember_runs() {
        assert!(validate_action("CLUSTER_SCALE_OUT").is_ok());
        assert_eq!(
            validate_action("ILLEGAL_ACTION").unwrap_err().to_string(),
            "Value 'ILLEGAL_ACTION' is not acceptable for field 'action'."
        );
        assert_eq!(
            validate_action("CLUSTER_CREATE").unwrap_err().to_string(),
            "Action name cannot be any of ['CLUSTER_CREATE']."
        );
        let message = validate_action("CLUSTER_OPERATION")
            .unwrap_err()
            .to_string();
        assert!(message.contains("CLUSTER_RESIZE"), "{message}");
    }

    #[test]
    fn params_name_what_the_action_takes() {
        assert!(validate_params("CLUSTER_SCALE_IN", &object(json!({"count": 5}))).is_ok());
        let message = validate_params("CLUSTER_SCALE_IN", &object(json!({"number": 5})))
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            "params: CLUSTER_SCALE_IN takes count (got \"number\")"
        );
        assert!(validate_params("CLUSTER_CHECK", &object(json!({"x": 1}))).is_err());
    }

    #[test]
    fn queue_names_name_one_receiver() {
        let id = new_receiver_id();
        assert_eq!(queue_receiver_id(&queue_name(id)), Some(id));
        assert_eq!(
            queue_receiver_id(
                &queue_name(id)
                    .to_uppercase()
                    .replace("SENLIN-RECEIVER-", "senlin-receiver-")
            ),
            None,
            "one spelling"
        );
        assert_eq!(queue_receiver_id("senlin-receiver-"), None);
        assert_eq!(queue_receiver_id(&id.to_string()), None);
    }

    #[test]
    fn ttls_are_zaqars() {
        assert_eq!(message_ttl(None).unwrap(), chrono::Duration::seconds(3600));
        assert_eq!(
            message_ttl(Some(60)).unwrap(),
            chrono::Duration::seconds(60)
        );
        for bad in [0, 59, 1_209_601, -1] {
            assert_eq!(
                message_ttl(Some(bad)).unwrap_err().to_string(),
                "The TTL for a message may not exceed 1209600 seconds, and must be at least 60 seconds long."
            );
        }
    }

    #[test]
    fn message_bodies_name_a_cluster_and_an_action_it_can_run() {
        let command = message_command(
            &json!({"cluster": "web", "action": "CLUSTER_SCALE_OUT", "params": {"count": 2}}),
        )
        .unwrap();
        assert_eq!(command.cluster, "web");
        assert_eq!(command.action, "CLUSTER_SCALE_OUT");
        assert_eq!(Value::Object(command.params), json!({"count": 2}));
        let refused = [
            (json!([1]), "the body must be a JSON object"),
            (
                json!({"cluster": "web"}),
                "Both cluster identity and action must be specified.",
            ),
            (
                json!({"action": "CLUSTER_CHECK", "cluster": ""}),
                "Both cluster",
            ),
            (
                json!({"cluster": "web", "action": "SCALE"}),
                "Illegal cluster action 'SCALE' specified.",
            ),
            (
                json!({"cluster": "web", "action": "CLUSTER_CREATE"}),
                "Action name cannot be any of",
            ),
            (
                json!({"cluster": 1, "action": "CLUSTER_CHECK"}),
                "cluster must be a string",
            ),
            (
                json!({"cluster": "web", "action": "CLUSTER_CHECK", "params": [1]}),
                "params must be a JSON object",
            ),
            (
                json!({"cluster": "web", "action": "CLUSTER_SCALE_IN", "params": {"number": 1}}),
                "takes count",
            ),
        ];
        for (body, expected) in refused {
            let message = message_command(&body).unwrap_err().to_string();
            assert!(message.contains(expected), "{body}: {message}");
        }
    }

    #[test]
    fn a_trigger_overrides_the_receivers_params() {
        let merged = merged_params(
            &object(json!({"count": 1, "keep": true})),
            object(json!({"count": 3})),
        );
        assert_eq!(Value::Object(merged), json!({"count": 3, "keep": true}));
    }

    #[test]
    fn the_owner_keeps_the_creators_roles() {
        let creator = Identity::new("alice", "demo", vec!["member".into()]);
        let receiver = Receiver {
            id: new_receiver_id(),
            name: "r".into(),
            kind: ReceiverType::Webhook,
            cluster_id: None,
            action: Some("CLUSTER_SCALE_OUT".into()),
            params: Map::new(),
            actor: actor_of(&creator),
            channel: Map::new(),
            user_id: "alice".into(),
            project_id: "demo".into(),
            created_at: ember_runtime::time::now(),
            updated_at: None,
        };
        assert_eq!(receiver.owner(), creator);
    }
}
