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

use super::{
    accepted, boolean, json_text, list_parameters, listed, required, string, views, wanted, wrapped,
};
use crate::GatewayState;
use crate::error::RestError;
use crate::rest::Authenticated;

type Channel = tonic::transport::Channel;

fn object_list(query: &HashMap<String, String>) -> Result<pb::ListObjectsRequest, RestError> {
    let (limit, marker) = list_parameters(query, &["name", "type"])?;
    Ok(pb::ListObjectsRequest {
        limit,
        marker,
        name: query.get("name").cloned().unwrap_or_default(),
    })
}

fn created(key: &str, view: Value) -> Response {
    (StatusCode::CREATED, Json(json!({ key: view }))).into_response()
}

// ----- profiles -----

fn profiles(state: &GatewayState) -> ProfileServiceClient<Channel> {
    ProfileServiceClient::new(state.upstreams.engine.clone())
}

pub async fn create_profile(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    body: Bytes,
) -> Result<Response, RestError> {
    let body = wrapped(&body, "profile")?;
    let request = pb::CreateProfileRequest {
        name: required(&body, "name")?,
        spec: json_text(&body, "spec")?,
        metadata: json_text(&body, "metadata")?,
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
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, RestError> {
    let request = object_list(&query)?;
    let list = profiles(&state)
        .list_profiles(state.internal_request(&identity, request))
        .await?
        .into_inner()
        .profiles;
    Ok(listed("profiles", &list, views::profile))
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
    Ok(Json(json!({ "profile": views::profile(&profile) })))
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

fn policies(state: &GatewayState) -> PolicyServiceClient<Channel> {
    PolicyServiceClient::new(state.upstreams.engine.clone())
}

pub async fn create_policy(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    body: Bytes,
) -> Result<Response, RestError> {
    let body = wrapped(&body, "policy")?;
    let request = pb::CreatePolicyRequest {
        name: required(&body, "name")?,
        spec: json_text(&body, "spec")?,
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
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, RestError> {
    let request = object_list(&query)?;
    let list = policies(&state)
        .list_policies(state.internal_request(&identity, request))
        .await?
        .into_inner()
        .policies;
    Ok(listed("policies", &list, views::policy))
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
    Ok(Json(json!({ "policy": views::policy(&policy) })))
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

fn nodes(state: &GatewayState) -> NodeServiceClient<Channel> {
    NodeServiceClient::new(state.upstreams.engine.clone())
}

pub async fn create_node(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    body: Bytes,
) -> Result<Response, RestError> {
    let body = wrapped(&body, "node")?;
    let request = pb::CreateNodeRequest {
        name: required(&body, "name")?,
        profile: match string(&body, "profile_id")? {
            Some(profile) => profile,
            None => required(&body, "profile")?,
        },
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
        json!({ "node": response.node.as_ref().map(views::node) }),
    ))
}

pub async fn list_nodes(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, RestError> {
    let (limit, marker) = list_parameters(&query, &["cluster_id", "status", "name"])?;
    let request = pb::ListNodesRequest {
        cluster: query.get("cluster_id").cloned().unwrap_or_default(),
        limit,
        marker,
    };
    let list = nodes(&state)
        .list_nodes(state.internal_request(&identity, request))
        .await?
        .into_inner()
        .nodes;
    let status = query.get("status");
    let name = query.get("name");
    let shown = list
        .iter()
        .filter(|node| wanted(status, &node.status) && wanted(name, &node.name));
    Ok(listed("nodes", shown, views::node))
}

pub async fn show_node(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
) -> Result<Json<Value>, RestError> {
    let node = nodes(&state)
        .get_node(state.internal_request(&identity, pb::GetObjectRequest { id }))
        .await?
        .into_inner();
    Ok(Json(json!({ "node": views::node(&node) })))
}

pub async fn update_node(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let body = wrapped(&body, "node")?;
    let request = pb::UpdateNodeRequest {
        id,
        name: string(&body, "name")?,
        role: string(&body, "role")?,
        tainted: boolean(&body, "tainted")?,
    };
    let node = nodes(&state)
        .update_node(state.internal_request(&identity, request))
        .await?
        .into_inner();
    Ok(Json(json!({ "node": views::node(&node) })))
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
    Ok(accepted(&response.action_id, json!({})))
}

// ----- actions and events -----

fn actions(state: &GatewayState) -> ActionServiceClient<Channel> {
    ActionServiceClient::new(state.upstreams.engine.clone())
}

pub async fn list_actions(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, RestError> {
    let (limit, marker) = list_parameters(
        &query,
        &["cluster_id", "target", "status", "name", "action"],
    )?;
    let request = pb::ListActionsRequest {
        cluster: query
            .get("cluster_id")
            .or_else(|| query.get("target"))
            .cloned()
            .unwrap_or_default(),
        status: query.get("status").cloned().unwrap_or_default(),
        limit,
        marker,
    };
    let list = actions(&state)
        .list_actions(state.internal_request(&identity, request))
        .await?
        .into_inner()
        .actions;
    let name = query.get("name");
    let kind = query.get("action");
    let shown = list
        .iter()
        .filter(|action| wanted(name, &action.name) && wanted(kind, &action.action));
    Ok(listed("actions", shown, views::action))
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
    Ok(Json(json!({ "action": views::action(&action) })))
}

pub async fn list_events(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, RestError> {
    // Senlin names the object filters `oid`, `otype` and `oname` (what
    // openstacksdk sends); `obj_id` is kept for callers of earlier Ember.
    let (limit, marker) = list_parameters(
        &query,
        &[
            "cluster_id",
            "oid",
            "obj_id",
            "otype",
            "oname",
            "action",
            "level",
        ],
    )?;
    let request = pb::ListClusterEventsRequest {
        cluster: query.get("cluster_id").cloned().unwrap_or_default(),
        obj_id: query
            .get("oid")
            .or_else(|| query.get("obj_id"))
            .cloned()
            .unwrap_or_default(),
        limit,
        marker,
    };
    let list = actions(&state)
        .list_cluster_events(state.internal_request(&identity, request))
        .await?
        .into_inner()
        .events;
    let object_type = query.get("otype");
    let object_name = query.get("oname");
    let action = query.get("action");
    let level = query.get("level");
    let shown = list.iter().filter(|event| {
        wanted(object_type, &event.obj_type)
            && wanted(object_name, &event.obj_name)
            && wanted(action, &event.action)
            && wanted(level, &event.level)
    });
    Ok(listed("events", shown, views::event))
}
