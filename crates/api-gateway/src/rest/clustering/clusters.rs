//! Clusters and `POST /clusters/{id}/actions`: Senlin's one-key action
//! bodies (`{"scale_in": {"count": 2}}`), including the lifecycle hooks'
//! `complete_lifecycle` and `record_lifecycle_heartbeat`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::cluster_service_client::ClusterServiceClient;
use serde_json::{Map, Value, json};

use super::lists::{self, ListQuery, ListRules};
use super::{
    accepted, bad_request, boolean, int32, integer, json_text, listed, missing, only, required,
    string, views, wrapped,
};
use crate::GatewayState;
use crate::error::RestError;
use crate::rest::Authenticated;

pub(super) fn client(
    state: &GatewayState,
) -> ClusterServiceClient<ember_runtime::in_process::Upstream> {
    ClusterServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

/// The keys of Senlin's cluster create body, and Ember's `profile`.
const CLUSTER_CREATE_KEYS: &[&str] = &[
    "config",
    "name",
    "profile_id",
    "profile",
    "min_size",
    "max_size",
    "desired_capacity",
    "metadata",
    "timeout",
];

pub async fn create_cluster(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    body: Bytes,
) -> Result<Response, RestError> {
    let body = wrapped(&body, "cluster")?;
    only(&body, CLUSTER_CREATE_KEYS)?;
    let desired = int32(&body, "desired_capacity")?;
    let min_size = int32(&body, "min_size")?.unwrap_or(0);
    let request = pb::CreateClusterRequest {
        name: required(&body, "name")?,
        // `profile` is Ember's earlier name for `profile_id`.
        profile: match string(&body, "profile_id")? {
            Some(profile) => profile,
            None => string(&body, "profile")?.ok_or_else(|| missing("profile_id"))?,
        },
        min_size,
        max_size: int32(&body, "max_size")?.unwrap_or(-1),
        desired_capacity: desired.unwrap_or(min_size),
        metadata: json_text(&body, "metadata")?,
        timeout: int32(&body, "timeout")?,
        // Senlin reads a create's `config` at every microversion (its
        // create request has no version map), so does Ember.
        config: config(&body)?.unwrap_or_default(),
    };
    let response = client(&state)
        .create_cluster(state.internal_request(&identity, request))
        .await?
        .into_inner();
    Ok(accepted(
        &response.action_id,
        json!({ "cluster": response.cluster.as_ref().map(views::cluster) }),
    ))
}

/// A cluster's `config` as JSON text (absent or null: `None`); anything
/// but an object is refused in Senlin's words (its JSON field first reads
/// text as JSON, then its schema wants an object). The engine checks the
/// values.
pub(super) fn config(body: &Map<String, Value>) -> Result<Option<String>, RestError> {
    match body.get("config") {
        None | Some(Value::Null) => Ok(None),
        Some(config @ Value::Object(_)) => Ok(Some(config.to_string())),
        Some(Value::String(text)) if serde_json::from_str::<Value>(text).is_err() => Err(
            bad_request(format!("The value ({text}) is not a valid JSON.")),
        ),
        Some(other) => Err(bad_request(format!(
            "{} is not of type 'object'",
            python_repr(other)
        ))),
    }
}

/// A JSON value as Python prints it (Senlin's schema messages do).
fn python_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(number) => number.to_string(),
        Value::String(text) => format!("'{text}'"),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(python_repr).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(fields) => format!(
            "{{{}}}",
            fields
                .iter()
                .map(|(key, value)| format!("'{key}': {}", python_repr(value)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// What `GET /clusters` takes (Senlin quotes an unknown name here).
const CLUSTER_LIST: ListRules = ListRules {
    filters: &["name", "status"],
    sort_keys: &["name", "status", "init_at", "created_at", "updated_at"],
    enumerated: &[("status", lists::CLUSTER_STATUSES)],
    quote_unknown: true,
};

pub async fn list_clusters(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    location: lists::ListLocation,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, RestError> {
    let query = ListQuery::parse(&pairs, &CLUSTER_LIST)?;
    let request = pb::ListObjectsRequest {
        limit: query.limit,
        marker: query.marker.clone(),
        sort: query.sort.clone(),
        global_project: query.global_project,
        names: query.values("name"),
        statuses: query.values("status"),
        packed_node_ids: true,
        ..pb::ListObjectsRequest::default()
    };
    let clusters = client(&state)
        .list_clusters(state.internal_request(&identity, request))
        .await?
        .into_inner()
        .clusters;
    Ok(lists::paged(
        "clusters",
        &clusters,
        views::cluster,
        |object| &object.id,
        query.limit,
        &location,
    ))
}

pub async fn show_cluster(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
) -> Result<Json<Value>, RestError> {
    let cluster = client(&state)
        .get_cluster(state.internal_request(&identity, pb::GetObjectRequest { id }))
        .await?
        .into_inner();
    Ok(Json(json!({ "cluster": views::cluster(&cluster) })))
}

pub async fn delete_cluster(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
) -> Result<Response, RestError> {
    let response = client(&state)
        .delete_cluster(state.internal_request(&identity, pb::GetObjectRequest { id }))
        .await?
        .into_inner();
    // Senlin answers a delete with no body, only the action's Location.
    Ok((
        http::StatusCode::ACCEPTED,
        [(
            http::header::LOCATION,
            super::action_location(&response.action_id),
        )],
    )
        .into_response())
}

/// What `GET /clusters/{id}/policies` takes. A cluster's bindings are few
/// and come unpaged, so they are filtered and ordered here. Senlin pages
/// them neither: `limit`, `marker` and `global_project` are refused as any
/// unknown parameter is ([`CLUSTER_POLICY_PARAMETERS`]).
const CLUSTER_POLICY_LIST: ListRules = ListRules {
    filters: &["policy_name", "policy_type", "enabled"],
    sort_keys: &["enabled"],
    enumerated: &[],
    quote_unknown: false,
};

/// Every parameter Senlin's cluster-policy list accepts.
const CLUSTER_POLICY_PARAMETERS: &[&str] = &["enabled", "policy_name", "policy_type", "sort"];

pub async fn cluster_policies(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, RestError> {
    if let Some((unknown, _)) = pairs
        .iter()
        .find(|(key, _)| !CLUSTER_POLICY_PARAMETERS.contains(&key.as_str()))
    {
        return Err(bad_request(format!("Invalid parameter {unknown}")));
    }
    let query = ListQuery::parse(&pairs, &CLUSTER_POLICY_LIST)?;
    let enabled = match query.first("enabled").as_str() {
        "" => None,
        text => Some(lists::parse_bool("enabled", text)?),
    };
    let policy_name = query.first("policy_name");
    let policy_type = query.first("policy_type");
    let mut policies: Vec<pb::ClusterPolicy> = client(&state)
        .list_cluster_policies(state.internal_request(&identity, pb::GetObjectRequest { id }))
        .await?
        .into_inner()
        .policies
        .into_iter()
        .filter(|binding| {
            enabled.is_none_or(|enabled| binding.enabled == enabled)
                && (policy_name.is_empty() || binding.policy_name == policy_name)
                && (policy_type.is_empty() || binding.policy_type == policy_type)
        })
        .collect();
    // `enabled` is the one key Senlin sorts bindings by.
    if let Some(direction) = query.sort.strip_prefix("enabled") {
        policies.sort_by_key(|binding| binding.enabled);
        if direction == ":desc" {
            policies.reverse();
        }
    }
    Ok(listed("cluster_policies", &policies, views::cluster_policy))
}

/// The cluster actions this API takes, for error messages.
const ACTIONS: &[&str] = &[
    "scale_in",
    "scale_out",
    "resize",
    "del_nodes",
    "add_nodes",
    "policy_attach",
    "policy_detach",
    "policy_update",
    "replace_nodes",
    "check",
    "recover",
    "complete_lifecycle",
    "record_lifecycle_heartbeat",
    "lock",
    "unlock",
];

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
    let mut seen = std::collections::HashSet::new();
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

/// The one action a `POST /clusters/{id}/actions` body names, and its
/// parameters, with Senlin's messages for none, several, an unknown one,
/// and parameters that are not an object.
fn one_action(value: Value) -> Result<(String, Map<String, Value>), RestError> {
    let Value::Object(object) = value else {
        return Err(bad_request("The data provided is not a map"));
    };
    if object.len() > 1 {
        return Err(bad_request("Multiple actions specified"));
    }
    let Some((name, parameters)) = object.into_iter().next() else {
        return Err(bad_request("No action specified"));
    };
    if !ACTIONS.contains(&name.as_str()) {
        return Err(bad_request(format!(
            "Unrecognized action '{name}' specified"
        )));
    }
    match parameters {
        Value::Object(parameters) => Ok((name, parameters)),
        Value::Null => Ok((name, Map::new())),
        _ => Err(bad_request("The data provided is not a map")),
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
    let (name, parameters) = one_action(value)?;
    let mut client = client(&state);
    let response = match name.as_str() {
        "scale_in" | "scale_out" => {
            let message = pb::ScaleRequest {
                cluster,
                count: count(&parameters)?,
            };
            if name == "scale_in" {
                client
                    .scale_in(state.internal_request(&identity, message))
                    .await?
            } else {
                client
                    .scale_out(state.internal_request(&identity, message))
                    .await?
            }
        }
        "resize" => {
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
            let message = pb::ResizeRequest {
                cluster,
                adjustment_type: string(&parameters, "adjustment_type")?.unwrap_or_default(),
                number,
                min_size: int32(&parameters, "min_size")?,
                max_size: int32(&parameters, "max_size")?,
                min_step: int32(&parameters, "min_step")?.unwrap_or(0),
                strict: boolean(&parameters, "strict")?.unwrap_or(true),
            };
            client
                .resize(state.internal_request(&identity, message))
                .await?
        }
        "del_nodes" | "add_nodes" => {
            let message = pb::NodesRequest {
                cluster,
                nodes: nodes(&parameters)?,
                destroy_after_deletion: if name == "del_nodes" {
                    boolean(&parameters, "destroy_after_deletion")?
                } else {
                    None
                },
            };
            if name == "del_nodes" {
                client
                    .del_nodes(state.internal_request(&identity, message))
                    .await?
            } else {
                client
                    .add_nodes(state.internal_request(&identity, message))
                    .await?
            }
        }
        "policy_attach" => {
            let message = pb::AttachPolicyRequest {
                cluster,
                policy: required(&parameters, "policy_id")?,
                priority: int32(&parameters, "priority")?.unwrap_or(0),
                enabled: boolean(&parameters, "enabled")?,
            };
            client
                .attach_policy(state.internal_request(&identity, message))
                .await?
        }
        "policy_detach" => {
            let message = pb::DetachPolicyRequest {
                cluster,
                policy: required(&parameters, "policy_id")?,
            };
            client
                .detach_policy(state.internal_request(&identity, message))
                .await?
        }
        "check" | "recover" => {
            let message = pb::GetObjectRequest { id: cluster };
            if name == "check" {
                client
                    .check(state.internal_request(&identity, message))
                    .await?
            } else {
                client
                    .recover(state.internal_request(&identity, message))
                    .await?
            }
        }
        "policy_update" => tonic::Response::new(
            super::updates::policy_update(&state, &identity, cluster, &parameters).await?,
        ),
        "replace_nodes" => tonic::Response::new(
            super::updates::replace_nodes(&state, &identity, cluster, &parameters).await?,
        ),
        "complete_lifecycle" => {
            let message = pb::LifecycleTokenRequest {
                cluster,
                lifecycle_action_token: required(&parameters, "lifecycle_action_token")?,
                // Ember's (AWS's LifecycleActionResult): CONTINUE or ABANDON.
                lifecycle_action_result: string(&parameters, "lifecycle_action_result")?
                    .unwrap_or_default(),
            };
            client
                .complete_lifecycle(state.internal_request(&identity, message))
                .await?
        }
        "lock" => {
            only(&parameters, &["level", "reason", "expires_in", "expires_at"])?;
            let expires_at = match string(&parameters, "expires_at")? {
                None => None,
                Some(text) => {
                    let at = chrono::DateTime::parse_from_rfc3339(&text).map_err(|_| {
                        bad_request(format!(
                            "expires_at: {text:?} is not an ISO 8601 time with its offset (2026-11-29T12:00:00Z)"
                        ))
                    })?;
                    Some(ember_runtime::time::to_timestamp(at.with_timezone(&chrono::Utc)))
                }
            };
            // gRPC reads an empty reason as none; here one given is checked.
            let reason = string(&parameters, "reason")?;
            if reason.as_ref().is_some_and(String::is_empty) {
                return Err(bad_request("reason: must be 1-255 characters"));
            }
            let message = pb::LockClusterRequest {
                cluster,
                level: string(&parameters, "level")?.unwrap_or_default(),
                reason: reason.unwrap_or_default(),
                expires_in: integer(&parameters, "expires_in")?,
                expires_at,
            };
            let locked = client
                .lock_cluster(state.internal_request(&identity, message))
                .await?
                .into_inner();
            return Ok(Json(json!({ "cluster": views::cluster(&locked) })).into_response());
        }
        "unlock" => {
            only(&parameters, &[])?;
            let unlocked = client
                .unlock_cluster(state.internal_request(&identity, pb::GetObjectRequest { id: cluster }))
                .await?
                .into_inner();
            return Ok(Json(json!({ "cluster": views::cluster(&unlocked) })).into_response());
        }
        "record_lifecycle_heartbeat" => {
            let token = required(&parameters, "lifecycle_action_token")?;
            let message = pb::LifecycleTokenRequest {
                cluster,
                lifecycle_action_token: token.clone(),
                ..pb::LifecycleTokenRequest::default()
            };
            let response = client
                .record_lifecycle_heartbeat(state.internal_request(&identity, message))
                .await?
                .into_inner();
            return Ok(Json(json!({
                "lifecycle_action_token": token,
                "deadline": views::deadline(response.deadline.as_ref()),
            }))
            .into_response());
        }
        other => {
            return Err(bad_request(format!(
                "Unrecognized action '{other}' specified"
            )));
        }
    }
    .into_inner();
    Ok(accepted(
        &response.action_id,
        json!({ "action": response.action_id }),
    ))
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

    fn action_refusal(body: Value) -> String {
        one_action(body).unwrap_err().message().to_owned()
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
        assert_eq!(
            action_refusal(json!({"check": "k1"})),
            "The data provided is not a map"
        );
        assert_eq!(
            action_refusal(json!(["check"])),
            "The data provided is not a map"
        );
        let (name, parameters) = one_action(json!({"check": null})).unwrap();
        assert_eq!(name, "check");
        assert!(parameters.is_empty());
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
