//! Profiles, policies, nodes, actions and events of the Clustering API.

use std::collections::HashMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::action_service_client::ActionServiceClient;
use ember_proto::engine::v1::node_service_client::NodeServiceClient;
use ember_proto::engine::v1::policy_service_client::PolicyServiceClient;
use ember_proto::engine::v1::profile_service_client::ProfileServiceClient;
use http::StatusCode;
use serde_json::{Value, json};

use super::lists::{self, ListQuery, ListRules};
use super::version::ApiVersion;
use super::{
    accepted, accepted_without_body, boolean, json_text, only, required, required_json_text, shown,
    string, views, wrapped,
};
use crate::GatewayState;
use crate::error::RestError;
use crate::rest::Authenticated;

use ember_runtime::in_process::Upstream;

/// What `GET /profiles` and `GET /policies` take.
const PROFILE_OR_POLICY_LIST: ListRules = ListRules {
    filters: &["name", "type"],
    sort_keys: &["type", "name", "created_at", "updated_at"],
    enumerated: &[],
    quote_unknown: false,
};

fn object_list(pairs: &[(String, String)]) -> Result<pb::ListObjectsRequest, RestError> {
    let query = ListQuery::parse(pairs, &PROFILE_OR_POLICY_LIST)?;
    Ok(pb::ListObjectsRequest {
        types: query.values("type"),
        ..objects_request(&query)
    })
}

/// The page and the names a list of profiles, policies or clusters asks
/// for; each adds its own filters.
pub(super) fn objects_request(query: &ListQuery) -> pb::ListObjectsRequest {
    pb::ListObjectsRequest {
        limit: query.limit,
        marker: query.marker.clone(),
        sort: query.sort.clone(),
        global_project: query.global_project,
        names: query.values("name"),
        ..pb::ListObjectsRequest::default()
    }
}

fn created(key: &str, view: Value) -> Response {
    (StatusCode::CREATED, Json(json!({ key: view }))).into_response()
}

// ----- profiles -----

fn profiles(state: &GatewayState) -> ProfileServiceClient<Upstream> {
    ProfileServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

pub async fn create_profile(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    body: Bytes,
) -> Result<Response, RestError> {
    let body = wrapped(&body, "profile")?;
    only(&body, &["name", "spec", "metadata", "protected"])?;
    let request = pb::CreateProfileRequest {
        name: required(&body, "name")?,
        spec: required_json_text(&body, "spec")?,
        metadata: json_text(&body, "metadata")?,
        // Ember's: the nodes made from it start protected from scale-in.
        protected: boolean(&body, "protected")?.unwrap_or(false),
    };
    let profile = profiles(&state)
        .create_profile(state.internal_request(&identity, request))
        .await?
        .into_inner();
    Ok(created("profile", views::profile(&profile)))
}

pub async fn list_profiles(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    location: lists::ListLocation,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, RestError> {
    let request = object_list(&pairs)?;
    let limit = request.limit;
    let list = profiles(&state)
        .list_profiles(state.internal_request(&identity, request))
        .await?
        .into_inner()
        .profiles;
    Ok(lists::paged(
        "profiles",
        &list,
        views::profile,
        |object| &object.id,
        limit,
        &location,
    ))
}

pub async fn show_profile(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
) -> Result<Json<Value>, RestError> {
    let profile = profiles(&state)
        .get_profile(state.internal_request(&identity, pb::GetObjectRequest { id }))
        .await?
        .into_inner();
    Ok(shown("profile", views::profile(&profile)))
}

pub async fn delete_profile(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
) -> Result<StatusCode, RestError> {
    profiles(&state)
        .delete_profile(state.internal_request(&identity, pb::GetObjectRequest { id }))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

// ----- policies -----

fn policies(state: &GatewayState) -> PolicyServiceClient<Upstream> {
    PolicyServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

pub async fn create_policy(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    body: Bytes,
) -> Result<Response, RestError> {
    let body = wrapped(&body, "policy")?;
    only(&body, &["name", "spec"])?;
    let request = pb::CreatePolicyRequest {
        name: required(&body, "name")?,
        spec: required_json_text(&body, "spec")?,
    };
    let policy = policies(&state)
        .create_policy(state.internal_request(&identity, request))
        .await?
        .into_inner();
    Ok(created("policy", views::policy(&policy)))
}

pub async fn list_policies(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    location: lists::ListLocation,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, RestError> {
    let request = object_list(&pairs)?;
    let limit = request.limit;
    let list = policies(&state)
        .list_policies(state.internal_request(&identity, request))
        .await?
        .into_inner()
        .policies;
    Ok(lists::paged(
        "policies",
        &list,
        views::policy,
        |object| &object.id,
        limit,
        &location,
    ))
}

pub async fn show_policy(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
) -> Result<Json<Value>, RestError> {
    let policy = policies(&state)
        .get_policy(state.internal_request(&identity, pb::GetObjectRequest { id }))
        .await?
        .into_inner();
    Ok(shown("policy", views::policy(&policy)))
}

pub async fn delete_policy(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
) -> Result<StatusCode, RestError> {
    policies(&state)
        .delete_policy(state.internal_request(&identity, pb::GetObjectRequest { id }))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

// ----- nodes -----

fn nodes(state: &GatewayState) -> NodeServiceClient<Upstream> {
    NodeServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

pub async fn create_node(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
    body: Bytes,
) -> Result<Response, RestError> {
    let body = senlin_node_body(&body)?;
    let request = pb::CreateNodeRequest {
        name: string(&body, "name")?.unwrap_or_default(),
        profile: string(&body, "profile_id")?.unwrap_or_default(),
        cluster: string(&body, "cluster_id")?.unwrap_or_default(),
        role: string(&body, "role")?.unwrap_or_default(),
        metadata: json_text(&body, "metadata")?,
    };
    let response = nodes(&state)
        .create_node(state.internal_request(&identity, request))
        .await?
        .into_inner();
    Ok(accepted(
        &response.action_id,
        json!({ "node": response.node.as_ref().map(|node| views::node_at(node, version)) }),
    ))
}

/// The `{"node": {…}}` of a node create, checked as Senlin's request
/// schema checks it (its messages: clients and its API suite compare them).
fn senlin_node_body(body: &[u8]) -> Result<serde_json::Map<String, Value>, RestError> {
    const FIELDS: [&str; 5] = ["name", "profile_id", "cluster_id", "role", "metadata"];
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| super::bad_request(format!("the body is not JSON: {error}")))?;
    let node = match value {
        Value::Object(mut object) => object.remove("node"),
        _ => None,
    };
    let node = match node {
        Some(Value::Object(node)) => node,
        Some(_) => return Err(super::bad_request("The data provided is not a map")),
        None => return Err(super::bad_request("Request body missing 'node' key.")),
    };
    if let Some(unknown) = node.keys().find(|key| !FIELDS.contains(&key.as_str())) {
        return Err(super::bad_request(format!(
            "Additional properties are not allowed ('{unknown}' was unexpected)"
        )));
    }
    for required in ["name", "profile_id"] {
        if !node.contains_key(required) {
            return Err(super::bad_request(format!(
                "'{required}' is a required property"
            )));
        }
    }
    Ok(node)
}

/// What `GET /nodes` takes.
const NODE_LIST: ListRules = ListRules {
    filters: &["cluster_id", "name", "status"],
    sort_keys: &[
        "index",
        "name",
        "status",
        "init_at",
        "created_at",
        "updated_at",
    ],
    enumerated: &[("status", lists::NODE_STATUSES)],
    quote_unknown: false,
};

pub async fn list_nodes(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
    location: lists::ListLocation,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, RestError> {
    let query = ListQuery::parse(&pairs, &NODE_LIST)?;
    let request = pb::ListNodesRequest {
        cluster: query.first("cluster_id"),
        limit: query.limit,
        marker: query.marker.clone(),
        sort: query.sort.clone(),
        global_project: query.global_project,
        names: query.values("name"),
        statuses: query.values("status"),
    };
    let list = nodes(&state)
        .list_nodes(state.internal_request(&identity, request))
        .await?
        .into_inner()
        .nodes;
    Ok(lists::paged(
        "nodes",
        &list,
        |node| views::node_at(node, version),
        |object| &object.id,
        query.limit,
        &location,
    ))
}

/// `GET /nodes/{id}[?show_details=true]`: with details, the node's
/// resource as it is now under `details` (Senlin's view).
pub async fn show_node(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, RestError> {
    if let Some(unknown) = query.keys().find(|key| key.as_str() != "show_details") {
        return Err(super::bad_request(format!(
            "Invalid parameter {unknown} (only show_details is accepted)"
        )));
    }
    let show_details = match query
        .get("show_details")
        .map(|text| text.to_ascii_lowercase())
    {
        None => false,
        Some(text) if ["true", "1", "yes", "on", "y", "t"].contains(&text.as_str()) => true,
        Some(text) if ["false", "0", "no", "off", "n", "f"].contains(&text.as_str()) => false,
        Some(_) => {
            return Err(super::bad_request(format!(
                "Invalid value '{}' specified for 'show_details'",
                query.get("show_details").map_or("", String::as_str)
            )));
        }
    };
    let request = state.internal_request(&identity, pb::GetObjectRequest { id });
    let node = if show_details {
        nodes(&state).get_node_details(request).await?
    } else {
        nodes(&state).get_node(request).await?
    }
    .into_inner();
    let mut view = views::node_at(&node, version);
    if show_details && let Some(fields) = view.as_object_mut() {
        let details = serde_json::from_str(&node.details).unwrap_or_else(|_| json!({}));
        fields.insert("details".into(), details);
    }
    Ok(shown("node", view))
}

pub async fn delete_node(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
) -> Result<Response, RestError> {
    let response = nodes(&state)
        .delete_node(state.internal_request(&identity, pb::GetObjectRequest { id }))
        .await?
        .into_inner();
    Ok(accepted_without_body(&response.action_id))
}

// ----- actions and events -----

fn actions(state: &GatewayState) -> ActionServiceClient<Upstream> {
    ActionServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

/// What `GET /actions` takes.
const ACTION_LIST: ListRules = ListRules {
    filters: &["name", "cluster_id", "action", "target", "status"],
    sort_keys: &["name", "target", "action", "created_at", "status"],
    enumerated: &[
        ("action", lists::ACTION_NAMES),
        ("status", lists::ACTION_STATUSES),
    ],
    quote_unknown: false,
};

pub async fn list_actions(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    location: lists::ListLocation,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, RestError> {
    let query = ListQuery::parse(&pairs, &ACTION_LIST)?;
    let request = pb::ListActionsRequest {
        cluster: query.first("cluster_id"),
        limit: query.limit,
        marker: query.marker.clone(),
        sort: query.sort.clone(),
        global_project: query.global_project,
        names: query.values("name"),
        actions: query.values("action"),
        targets: query.values("target"),
        statuses: query.values("status"),
        ..pb::ListActionsRequest::default()
    };
    let list = actions(&state)
        .list_actions(state.internal_request(&identity, request))
        .await?
        .into_inner()
        .actions;
    Ok(lists::paged(
        "actions",
        &list,
        views::action,
        |object| &object.id,
        query.limit,
        &location,
    ))
}

pub async fn show_action(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
) -> Result<Json<Value>, RestError> {
    let action = actions(&state)
        .get_action(state.internal_request(&identity, pb::GetObjectRequest { id }))
        .await?
        .into_inner();
    Ok(shown("action", views::action(&action)))
}

/// What `GET /events` takes. Senlin names the object filters `oid`,
/// `otype` and `oname` (what openstacksdk sends); `obj_id` is kept for
/// callers of earlier Ember.
const EVENT_LIST: ListRules = ListRules {
    filters: &[
        "cluster_id",
        "oid",
        "obj_id",
        "otype",
        "oname",
        "action",
        "level",
    ],
    sort_keys: &[
        "timestamp",
        "level",
        "otype",
        "oname",
        "action",
        "status",
        "oid",
        "cluster_id",
    ],
    enumerated: &[
        ("action", lists::ACTION_NAMES),
        ("level", lists::EVENT_LEVELS),
    ],
    quote_unknown: false,
};

pub async fn list_events(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    location: lists::ListLocation,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, RestError> {
    let query = ListQuery::parse(&pairs, &EVENT_LIST)?;
    let object_id = match query.first("oid").as_str() {
        "" => query.first("obj_id"),
        oid => oid.to_owned(),
    };
    let request = pb::ListClusterEventsRequest {
        cluster: query.first("cluster_id"),
        obj_id: object_id,
        limit: query.limit,
        marker: query.marker.clone(),
        sort: query.sort.clone(),
        global_project: query.global_project,
        obj_types: query.values("otype"),
        obj_names: query.values("oname"),
        actions: query.values("action"),
        levels: query.values("level"),
    };
    let list = actions(&state)
        .list_cluster_events(state.internal_request(&identity, request))
        .await?
        .into_inner()
        .events;
    Ok(lists::paged(
        "events",
        &list,
        views::event,
        |object| &object.id,
        query.limit,
        &location,
    ))
}
