//! Clusters: create, list, show, delete, and the policies bound to one.
//! Their actions (`POST /clusters/{id}/actions`) are in `cluster_actions`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::cluster_service_client::ClusterServiceClient;
use serde_json::{Map, Value, json};

use super::lists::{self, ListQuery, ListRules};
use super::objects::objects_request;
use super::{
    accepted, accepted_without_body, bad_request, int32, json_text, listed, missing, only,
    required, shown, string, views, wrapped,
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
        statuses: query.values("status"),
        packed_node_ids: true,
        ..objects_request(&query)
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
    Ok(shown("cluster", views::cluster(&cluster)))
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
    Ok(accepted_without_body(&response.action_id))
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
