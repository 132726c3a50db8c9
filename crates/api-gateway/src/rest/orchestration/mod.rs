//! The Orchestration API v1 (Heat), at `/orchestration/v1/{project_id}`.
//! Request and response bodies follow Heat's so python-heatclient and the
//! `openstack stack` commands work unchanged.

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::stack_service_client::StackServiceClient;
use ember_runtime::{ErrorKind, Identity};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Authenticated;
use crate::GatewayState;
use crate::error::RestError;

pub fn routes() -> Router<GatewayState> {
    Router::new()
        .route("/stacks", get(list_stacks))
        .route("/stacks/{stack}", get(find_stack))
        .route("/stacks/{stack_name}/{stack_id}", get(show_stack))
}

/// Heat refuses a token scoped to another project than the URL names.
fn check_project(identity: &Identity, project_id: &str) -> Result<(), RestError> {
    if identity.project_id == project_id || identity.is_admin() {
        Ok(())
    } else {
        Err(RestError::new(
            ErrorKind::Forbidden,
            format!(
                "the URL names project {project_id:?} but the token is scoped to {:?}",
                identity.project_id
            ),
        ))
    }
}

#[derive(Debug, Deserialize)]
struct ListStacksQuery {
    limit: Option<u32>,
    marker: Option<String>,
    stack_name: Option<String>,
    name: Option<String>,
    show_nested: Option<bool>,
}

async fn list_stacks(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(project_id): Path<String>,
    Query(query): Query<ListStacksQuery>,
) -> Result<Json<Value>, RestError> {
    check_project(&identity, &project_id)?;
    let request = pb::ListStacksRequest {
        limit: query.limit.unwrap_or(0),
        marker: query.marker.unwrap_or_default(),
        name: query.stack_name.or(query.name).unwrap_or_default(),
        show_nested: query.show_nested.unwrap_or(false),
    };
    let response = StackServiceClient::new(state.upstreams.engine.clone())
        .list_stacks(state.internal_request(&identity, request))
        .await?
        .into_inner();
    let stacks: Vec<Value> = response
        .stacks
        .iter()
        .map(|stack| stack_summary(&project_id, stack))
        .collect();
    Ok(Json(json!({ "stacks": stacks })))
}

/// `GET /stacks/{name or id}` redirects to the canonical URL, as Heat does.
async fn find_stack(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path((project_id, stack)): Path<(String, String)>,
) -> Result<Response, RestError> {
    check_project(&identity, &project_id)?;
    let found = get_stack(&state, &identity, stack).await?;
    let location = format!(
        "/orchestration/v1/{project_id}/stacks/{}/{}",
        found.name, found.id
    );
    Ok(Redirect::to(&location).into_response())
}

async fn show_stack(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path((project_id, stack_name, stack_id)): Path<(String, String, String)>,
) -> Result<Json<Value>, RestError> {
    check_project(&identity, &project_id)?;
    let found = get_stack(&state, &identity, stack_id.clone()).await?;
    if found.name != stack_name {
        return Err(RestError::new(
            ErrorKind::NotFound,
            format!("stack {stack_name:?} with id {stack_id} not found"),
        ));
    }
    Ok(Json(json!({ "stack": stack_summary(&project_id, &found) })))
}

async fn get_stack(
    state: &GatewayState,
    identity: &Identity,
    stack: String,
) -> Result<pb::Stack, RestError> {
    Ok(StackServiceClient::new(state.upstreams.engine.clone())
        .get_stack(state.internal_request(identity, pb::GetStackRequest { stack }))
        .await?
        .into_inner())
}

fn heat_time(timestamp: Option<&prost_types::Timestamp>) -> Value {
    timestamp
        .and_then(|time| chrono::DateTime::from_timestamp(time.seconds, 0))
        .map(|time| Value::String(time.format("%Y-%m-%dT%H:%M:%SZ").to_string()))
        .unwrap_or(Value::Null)
}

/// A stack as Heat lists it.
fn stack_summary(project_id: &str, stack: &pb::Stack) -> Value {
    json!({
        "id": stack.id,
        "stack_name": stack.name,
        "description": stack.description,
        "stack_status": stack.stack_status,
        "stack_status_reason": stack.status_reason,
        "creation_time": heat_time(stack.created_at.as_ref()),
        "updated_time": heat_time(stack.updated_at.as_ref()),
        "deletion_time": null,
        "stack_owner": stack.user_id,
        "stack_user_project_id": stack.project_id,
        "parent": if stack.parent_id.is_empty() { Value::Null } else { Value::String(stack.parent_id.clone()) },
        "tags": if stack.tags.is_empty() { Value::Null } else { json!(stack.tags) },
        "timeout_mins": if stack.timeout_mins == 0 { Value::Null } else { json!(stack.timeout_mins) },
        "disable_rollback": stack.disable_rollback,
        "project": stack.project_id,
        "links": [{
            "href": format!("/orchestration/v1/{project_id}/stacks/{}/{}", stack.name, stack.id),
            "rel": "self",
        }],
    })
}
