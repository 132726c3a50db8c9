//! `POST /clusters/{id}/actions`: Senlin's one-key action bodies
//! (`{"scale_in": {"count": 2}}`), including the lifecycle hooks'
//! `complete_lifecycle` and `record_lifecycle_heartbeat` and Ember's
//! `lock`/`unlock`. A body is first decoded, whole, into one
//! [`ClusterActionRequest`] — each action by its own decoder, with Senlin's
//! messages — and only then sent to the engine by one dispatch; the actions
//! this API takes are the names in [`DECODERS`], and nowhere else.

use std::collections::{HashMap, HashSet};

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use ember_proto::engine::v1 as pb;
use serde_json::{Map, Value, json};

use super::clusters::client;
use super::updates::refuse_unknown;
use super::{accepted, bad_request, boolean, int32, integer, only, required, string, views};
use crate::GatewayState;
use crate::error::RestError;
use crate::rest::Authenticated;

/// One cluster action, decoded: the engine request it becomes.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum ClusterActionRequest {
    ScaleIn(pb::ScaleRequest),
    ScaleOut(pb::ScaleRequest),
    Resize(pb::ResizeRequest),
    DelNodes(pb::NodesRequest),
    AddNodes(pb::NodesRequest),
    PolicyAttach(pb::AttachPolicyRequest),
    PolicyDetach(pb::DetachPolicyRequest),
    PolicyUpdate(pb::UpdateClusterPolicyRequest),
    ReplaceNodes(pb::ReplaceNodesRequest),
    Check(pb::GetObjectRequest),
    Recover(pb::GetObjectRequest),
    CompleteLifecycle(pb::LifecycleTokenRequest),
    RecordLifecycleHeartbeat(pb::LifecycleTokenRequest),
    Lock(pb::LockClusterRequest),
    Unlock(pb::GetObjectRequest),
}

/// Decodes one action's parameters for the cluster named in the path.
type Decoder = fn(String, &Map<String, Value>) -> Result<ClusterActionRequest, RestError>;

/// The actions this API takes, by the name a body gives them.
const DECODERS: &[(&str, Decoder)] = &[
    ("scale_in", scale_in),
    ("scale_out", scale_out),
    ("resize", resize),
    ("del_nodes", del_nodes),
    ("add_nodes", add_nodes),
    ("policy_attach", policy_attach),
    ("policy_detach", policy_detach),
    ("policy_update", policy_update),
    ("replace_nodes", replace_nodes),
    ("check", check),
    ("recover", recover),
    ("complete_lifecycle", complete_lifecycle),
    ("record_lifecycle_heartbeat", record_lifecycle_heartbeat),
    ("lock", lock),
    ("unlock", unlock),
];

impl ClusterActionRequest {
    /// The one action a body names, decoded, with Senlin's messages for
    /// none, several, an unknown one, parameters that are not an object,
    /// and each action's own parameters.
    pub(super) fn decode(cluster: String, body: Value) -> Result<Self, RestError> {
        let Value::Object(object) = body else {
            return Err(bad_request("The data provided is not a map"));
        };
        if object.len() > 1 {
            return Err(bad_request("Multiple actions specified"));
        }
        let Some((name, parameters)) = object.into_iter().next() else {
            return Err(bad_request("No action specified"));
        };
        let Some((_, decoder)) = DECODERS.iter().find(|(known, _)| *known == name) else {
            return Err(bad_request(format!(
                "Unrecognized action '{name}' specified"
            )));
        };
        let parameters = match parameters {
            Value::Object(parameters) => parameters,
            Value::Null => Map::new(),
            _ => return Err(bad_request("The data provided is not a map")),
        };
        decoder(cluster, &parameters)
    }

    /// Sends the action to the engine: 202 with the action's `Location`,
    /// or, for `lock`, `unlock` and a heartbeat, their own answers.
    async fn send(
        self,
        state: &GatewayState,
        identity: &ember_runtime::Identity,
    ) -> Result<Response, RestError> {
        let mut client = client(state);
        let started = match self {
            ClusterActionRequest::ScaleIn(message) => {
                client
                    .scale_in(state.internal_request(identity, message))
                    .await?
            }
            ClusterActionRequest::ScaleOut(message) => {
                client
                    .scale_out(state.internal_request(identity, message))
                    .await?
            }
            ClusterActionRequest::Resize(message) => {
                client
                    .resize(state.internal_request(identity, message))
                    .await?
            }
            ClusterActionRequest::DelNodes(message) => {
                client
                    .del_nodes(state.internal_request(identity, message))
                    .await?
            }
            ClusterActionRequest::AddNodes(message) => {
                client
                    .add_nodes(state.internal_request(identity, message))
                    .await?
            }
            ClusterActionRequest::PolicyAttach(message) => {
                client
                    .attach_policy(state.internal_request(identity, message))
                    .await?
            }
            ClusterActionRequest::PolicyDetach(message) => {
                client
                    .detach_policy(state.internal_request(identity, message))
                    .await?
            }
            ClusterActionRequest::PolicyUpdate(message) => {
                client
                    .update_cluster_policy(state.internal_request(identity, message))
                    .await?
            }
            ClusterActionRequest::ReplaceNodes(message) => {
                client
                    .replace_nodes(state.internal_request(identity, message))
                    .await?
            }
            ClusterActionRequest::Check(message) => {
                client
                    .check(state.internal_request(identity, message))
                    .await?
            }
            ClusterActionRequest::Recover(message) => {
                client
                    .recover(state.internal_request(identity, message))
                    .await?
            }
            ClusterActionRequest::CompleteLifecycle(message) => {
                client
                    .complete_lifecycle(state.internal_request(identity, message))
                    .await?
            }
            ClusterActionRequest::RecordLifecycleHeartbeat(message) => {
                let token = message.lifecycle_action_token.clone();
                let response = client
                    .record_lifecycle_heartbeat(state.internal_request(identity, message))
                    .await?
                    .into_inner();
                return Ok(Json(json!({
                    "lifecycle_action_token": token,
                    "deadline": views::deadline(response.deadline.as_ref()),
                }))
                .into_response());
            }
            ClusterActionRequest::Lock(message) => {
                let locked = client
                    .lock_cluster(state.internal_request(identity, message))
                    .await?
                    .into_inner();
                return Ok(Json(json!({ "cluster": views::cluster(&locked) })).into_response());
            }
            ClusterActionRequest::Unlock(message) => {
                let unlocked = client
                    .unlock_cluster(state.internal_request(identity, message))
                    .await?
                    .into_inner();
                return Ok(Json(json!({ "cluster": views::cluster(&unlocked) })).into_response());
            }
        }
        .into_inner();
        Ok(accepted(
            &started.action_id,
            json!({ "action": started.action_id }),
        ))
    }
}

/// `POST /clusters/{id}/actions`.
pub async fn cluster_action(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(cluster): Path<String>,
    body: Bytes,
) -> Result<Response, RestError> {
    let value: Value = serde_json::from_slice(&body)
        .map_err(|error| bad_request(format!("the body is not JSON: {error}")))?;
    ClusterActionRequest::decode(cluster, value)?
        .send(&state, &identity)
        .await
}

fn scale_in(
    cluster: String,
    parameters: &Map<String, Value>,
) -> Result<ClusterActionRequest, RestError> {
    Ok(ClusterActionRequest::ScaleIn(pb::ScaleRequest {
        cluster,
        count: count(parameters)?,
    }))
}

fn scale_out(
    cluster: String,
    parameters: &Map<String, Value>,
) -> Result<ClusterActionRequest, RestError> {
    Ok(ClusterActionRequest::ScaleOut(pb::ScaleRequest {
        cluster,
        count: count(parameters)?,
    }))
}

fn resize(
    cluster: String,
    parameters: &Map<String, Value>,
) -> Result<ClusterActionRequest, RestError> {
    // Senlin's pairing checks, made before the cluster is looked up.
    let has = |key: &str| parameters.get(key).is_some_and(|value| !value.is_null());
    if has("number") && !has("adjustment_type") {
        return Err(bad_request(
            "Missing adjustment_type value for size adjustment.",
        ));
    }
    if has("adjustment_type") && !has("number") {
        return Err(bad_request("Missing number value for size adjustment."));
    }
    let number = match parameters.get("number") {
        None | Some(Value::Null) => 0.0,
        Some(Value::Number(number)) => number.as_f64().unwrap_or(0.0),
        Some(Value::String(text)) => text
            .parse()
            .map_err(|_| bad_request(format!("number: {text:?} is not a number")))?,
        Some(_) => return Err(bad_request("number: must be a number")),
    };
    Ok(ClusterActionRequest::Resize(pb::ResizeRequest {
        cluster,
        adjustment_type: string(parameters, "adjustment_type")?.unwrap_or_default(),
        number,
        min_size: int32(parameters, "min_size")?,
        max_size: int32(parameters, "max_size")?,
        min_step: int32(parameters, "min_step")?.unwrap_or(0),
        strict: boolean(parameters, "strict")?.unwrap_or(true),
    }))
}

fn del_nodes(
    cluster: String,
    parameters: &Map<String, Value>,
) -> Result<ClusterActionRequest, RestError> {
    Ok(ClusterActionRequest::DelNodes(pb::NodesRequest {
        cluster,
        nodes: nodes(parameters)?,
        destroy_after_deletion: boolean(parameters, "destroy_after_deletion")?,
    }))
}

fn add_nodes(
    cluster: String,
    parameters: &Map<String, Value>,
) -> Result<ClusterActionRequest, RestError> {
    Ok(ClusterActionRequest::AddNodes(pb::NodesRequest {
        cluster,
        nodes: nodes(parameters)?,
        destroy_after_deletion: None,
    }))
}

fn policy_attach(
    cluster: String,
    parameters: &Map<String, Value>,
) -> Result<ClusterActionRequest, RestError> {
    Ok(ClusterActionRequest::PolicyAttach(
        pb::AttachPolicyRequest {
            cluster,
            policy: required(parameters, "policy_id")?,
            priority: int32(parameters, "priority")?.unwrap_or(0),
            enabled: boolean(parameters, "enabled")?,
        },
    ))
}

fn policy_detach(
    cluster: String,
    parameters: &Map<String, Value>,
) -> Result<ClusterActionRequest, RestError> {
    Ok(ClusterActionRequest::PolicyDetach(
        pb::DetachPolicyRequest {
            cluster,
            policy: required(parameters, "policy_id")?,
        },
    ))
}

/// `{"policy_id": …, "enabled": …}`, keys checked as Senlin's schema does.
fn policy_update(
    cluster: String,
    parameters: &Map<String, Value>,
) -> Result<ClusterActionRequest, RestError> {
    refuse_unknown(parameters, &["policy_id", "enabled"])?;
    let policy = string(parameters, "policy_id")?
        .ok_or_else(|| bad_request("'policy_id' is a required property"))?;
    Ok(ClusterActionRequest::PolicyUpdate(
        pb::UpdateClusterPolicyRequest {
            cluster,
            policy,
            enabled: boolean(parameters, "enabled")?,
        },
    ))
}

/// `{"nodes": {old: new, …}}`: every new node named once.
fn replace_nodes(
    cluster: String,
    parameters: &Map<String, Value>,
) -> Result<ClusterActionRequest, RestError> {
    refuse_unknown(parameters, &["nodes"])?;
    let nodes = match parameters.get("nodes") {
        Some(Value::Object(nodes)) => nodes,
        Some(_) => return Err(bad_request("The data provided is not a map")),
        None => return Err(bad_request("'nodes' is a required property")),
    };
    let mut pairs = HashMap::new();
    let mut replacements = HashSet::new();
    for (old, new) in nodes {
        let new = match new {
            Value::String(new) if !new.is_empty() => new.clone(),
            _ => return Err(bad_request("Field `nodes[old_node]' cannot be None")),
        };
        if !replacements.insert(new.clone()) {
            return Err(bad_request("Map contains duplicated values"));
        }
        pairs.insert(old.clone(), new);
    }
    // Senlin's schema refuses an empty map as it refuses a list.
    if pairs.is_empty() {
        return Err(bad_request("The data provided is not a map"));
    }
    Ok(ClusterActionRequest::ReplaceNodes(
        pb::ReplaceNodesRequest {
            cluster,
            nodes: pairs,
        },
    ))
}

fn check(cluster: String, _: &Map<String, Value>) -> Result<ClusterActionRequest, RestError> {
    Ok(ClusterActionRequest::Check(pb::GetObjectRequest {
        id: cluster,
    }))
}

fn recover(cluster: String, _: &Map<String, Value>) -> Result<ClusterActionRequest, RestError> {
    Ok(ClusterActionRequest::Recover(pb::GetObjectRequest {
        id: cluster,
    }))
}

fn complete_lifecycle(
    cluster: String,
    parameters: &Map<String, Value>,
) -> Result<ClusterActionRequest, RestError> {
    Ok(ClusterActionRequest::CompleteLifecycle(
        pb::LifecycleTokenRequest {
            cluster,
            lifecycle_action_token: required(parameters, "lifecycle_action_token")?,
            // Ember's (AWS's LifecycleActionResult): CONTINUE or ABANDON.
            lifecycle_action_result: string(parameters, "lifecycle_action_result")?
                .unwrap_or_default(),
        },
    ))
}

fn record_lifecycle_heartbeat(
    cluster: String,
    parameters: &Map<String, Value>,
) -> Result<ClusterActionRequest, RestError> {
    Ok(ClusterActionRequest::RecordLifecycleHeartbeat(
        pb::LifecycleTokenRequest {
            cluster,
            lifecycle_action_token: required(parameters, "lifecycle_action_token")?,
            ..pb::LifecycleTokenRequest::default()
        },
    ))
}

/// Ember's `{"lock": {"level", "reason", "expires_in" | "expires_at"}}`.
fn lock(
    cluster: String,
    parameters: &Map<String, Value>,
) -> Result<ClusterActionRequest, RestError> {
    only(parameters, &["level", "reason", "expires_in", "expires_at"])?;
    let expires_at = match string(parameters, "expires_at")? {
        None => None,
        Some(text) => {
            let at = chrono::DateTime::parse_from_rfc3339(&text).map_err(|_| {
                bad_request(format!(
                    "expires_at: {text:?} is not an ISO 8601 time with its offset (2026-11-29T12:00:00Z)"
                ))
            })?;
            Some(ember_runtime::time::to_timestamp(
                at.with_timezone(&chrono::Utc),
            ))
        }
    };
    // gRPC reads an empty reason as none; here one given is checked.
    let reason = string(parameters, "reason")?;
    if reason.as_ref().is_some_and(String::is_empty) {
        return Err(bad_request("reason: must be 1-255 characters"));
    }
    Ok(ClusterActionRequest::Lock(pb::LockClusterRequest {
        cluster,
        level: string(parameters, "level")?.unwrap_or_default(),
        reason: reason.unwrap_or_default(),
        expires_in: integer(parameters, "expires_in")?,
        expires_at,
    }))
}

fn unlock(
    cluster: String,
    parameters: &Map<String, Value>,
) -> Result<ClusterActionRequest, RestError> {
    only(parameters, &[])?;
    Ok(ClusterActionRequest::Unlock(pb::GetObjectRequest {
        id: cluster,
    }))
}

/// `nodes` of add_nodes / del_nodes, checked as Senlin's identity list is:
/// at least one, no repeats. Senlin reads a string as the list of its
/// characters (Python's `list("abc")`), so `"node_id"` repeats `d`; the
/// same is done here, so such a body gets Senlin's answer.
fn nodes(body: &Map<String, Value>) -> Result<Vec<String>, RestError> {
    let items: Vec<String> = match body.get("nodes") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| bad_request(format!("{item} is not of type 'string'")))
            })
            .collect::<Result<_, _>>()?,
        Some(Value::String(text)) => text.chars().map(String::from).collect(),
        Some(other) => return Err(bad_request(format!("{other} is not of type 'array'"))),
    };
    if items.is_empty() {
        return Err(bad_request(
            "Value for 'nodes' must have at least 1 item(s).",
        ));
    }
    let mut seen = HashSet::new();
    if !items.iter().all(|item| seen.insert(item)) {
        return Err(bad_request("Items for 'nodes' must be unique"));
    }
    Ok(items)
}

/// `count` of scale_in / scale_out: a non-negative integer, given as a
/// number or text, with Senlin's messages.
fn count(body: &Map<String, Value>) -> Result<u32, RestError> {
    let not_integer = |shown: &str| {
        bad_request(format!(
            "The value for count must be an integer: '{shown}'."
        ))
    };
    let count = match body.get("count") {
        None | Some(Value::Null) => return Ok(0),
        Some(Value::Number(number)) => number
            .as_i64()
            .ok_or_else(|| not_integer(&number.to_string()))?,
        Some(Value::String(text)) => text.trim().parse().map_err(|_| not_integer(text))?,
        Some(other) => return Err(not_integer(&other.to_string())),
    };
    if count < 0 {
        return Err(bad_request("Value must be >= 0 for field 'count'."));
    }
    Ok(u32::try_from(count).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(value: Value) -> String {
        let body = json!({ "nodes": value });
        nodes(body.as_object().unwrap())
            .unwrap_err()
            .message()
            .to_owned()
    }

    #[test]
    fn node_lists_are_checked_as_senlin_checks_them() {
        assert_eq!(
            refused(json!([])),
            "Value for 'nodes' must have at least 1 item(s)."
        );
        assert_eq!(
            refused(json!(["id1", "id1"])),
            "Items for 'nodes' must be unique"
        );
        // Senlin reads a string as its characters: `d` repeats.
        assert_eq!(
            refused(json!("node_id")),
            "Items for 'nodes' must be unique"
        );
        assert_eq!(
            refused(Value::Null),
            "Value for 'nodes' must have at least 1 item(s)."
        );
        let body = json!({"nodes": ["web-1", "web-2"]});
        assert_eq!(
            nodes(body.as_object().unwrap()).unwrap(),
            ["web-1", "web-2"]
        );
    }

    fn decode(body: Value) -> Result<ClusterActionRequest, RestError> {
        ClusterActionRequest::decode("web".to_owned(), body)
    }

    fn action_refusal(body: Value) -> String {
        decode(body).unwrap_err().message().to_owned()
    }

    #[test]
    fn action_bodies_get_senlins_messages() {
        assert_eq!(action_refusal(json!({})), "No action specified");
        assert_eq!(
            action_refusal(json!({"check": {}, "recover": {}})),
            "Multiple actions specified"
        );
        assert_eq!(
            action_refusal(json!({"bogus": {}})),
            "Unrecognized action 'bogus' specified"
        );
        // An unknown action is named before its parameters are looked at.
        assert_eq!(
            action_refusal(json!({"bogus": "k1"})),
            "Unrecognized action 'bogus' specified"
        );
        assert_eq!(
            action_refusal(json!({"check": "k1"})),
            "The data provided is not a map"
        );
        assert_eq!(
            action_refusal(json!(["check"])),
            "The data provided is not a map"
        );
        assert_eq!(
            decode(json!({"check": null})).unwrap(),
            ClusterActionRequest::Check(pb::GetObjectRequest { id: "web".into() })
        );
    }

    #[test]
    fn every_action_decodes_into_its_own_request() {
        assert_eq!(
            decode(json!({"scale_in": {"count": "2"}})).unwrap(),
            ClusterActionRequest::ScaleIn(pb::ScaleRequest {
                cluster: "web".into(),
                count: 2,
            })
        );
        assert_eq!(
            decode(json!({"del_nodes": {"nodes": ["n1"], "destroy_after_deletion": true}}))
                .unwrap(),
            ClusterActionRequest::DelNodes(pb::NodesRequest {
                cluster: "web".into(),
                nodes: vec!["n1".into()],
                destroy_after_deletion: Some(true),
            })
        );
        // add_nodes takes no destroy_after_deletion: it is not read.
        assert_eq!(
            decode(json!({"add_nodes": {"nodes": ["n1"], "destroy_after_deletion": "bogus"}}))
                .unwrap(),
            ClusterActionRequest::AddNodes(pb::NodesRequest {
                cluster: "web".into(),
                nodes: vec!["n1".into()],
                destroy_after_deletion: None,
            })
        );
        assert_eq!(
            decode(json!({"resize": {"adjustment_type": "EXACT_CAPACITY", "number": "3"}}))
                .unwrap(),
            ClusterActionRequest::Resize(pb::ResizeRequest {
                cluster: "web".into(),
                adjustment_type: "EXACT_CAPACITY".into(),
                number: 3.0,
                strict: true,
                ..pb::ResizeRequest::default()
            })
        );
        assert_eq!(
            action_refusal(json!({"resize": {"number": 3}})),
            "Missing adjustment_type value for size adjustment."
        );
        assert_eq!(
            action_refusal(json!({"policy_update": {"enabled": true}})),
            "'policy_id' is a required property"
        );
        assert_eq!(
            action_refusal(json!({"replace_nodes": {"nodes": {"a": "x", "b": "x"}}})),
            "Map contains duplicated values"
        );
        assert_eq!(
            action_refusal(json!({"lock": {"reason": ""}})),
            "reason: must be 1-255 characters"
        );
        assert_eq!(
            decode(json!({"record_lifecycle_heartbeat": {"lifecycle_action_token": "t"}})).unwrap(),
            ClusterActionRequest::RecordLifecycleHeartbeat(pb::LifecycleTokenRequest {
                cluster: "web".into(),
                lifecycle_action_token: "t".into(),
                ..pb::LifecycleTokenRequest::default()
            })
        );
        for (name, _) in DECODERS {
            let body = Map::from_iter([((*name).to_owned(), json!("not a map"))]);
            let error = decode(Value::Object(body)).unwrap_err();
            assert_eq!(error.message(), "The data provided is not a map", "{name}");
        }
    }

    #[test]
    fn counts_and_booleans_are_read_as_senlin_reads_them() {
        let refused = |value: Value| {
            count(json!({ "count": value }).as_object().unwrap())
                .unwrap_err()
                .message()
                .to_owned()
        };
        assert_eq!(
            refused(json!("bad-count")),
            "The value for count must be an integer: 'bad-count'."
        );
        assert_eq!(refused(json!(-1)), "Value must be >= 0 for field 'count'.");
        assert_eq!(
            count(json!({"count": "2"}).as_object().unwrap()).unwrap(),
            2
        );
        let flag =
            |value: Value| boolean(json!({ "enabled": value }).as_object().unwrap(), "enabled");
        assert_eq!(flag(json!("Off")).unwrap(), Some(false));
        assert_eq!(flag(json!("y")).unwrap(), Some(true));
        assert_eq!(flag(json!(1)).unwrap(), Some(true));
        assert_eq!(
            flag(json!("not-bool")).unwrap_err().message(),
            "Unrecognized value 'not-bool', acceptable values are: '0', '1', 'f', 'false', \
             'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'"
        );
    }
}
