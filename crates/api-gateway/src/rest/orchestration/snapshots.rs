//! Stack snapshots, as Heat serves them: `POST …/snapshots` (`{"name"}`,
//! optional) → 200 with the snapshot itself; `GET …/snapshots` →
//! `{"snapshots": […]}`; `GET …/snapshots/{id}` → `{"snapshot": {…}}`;
//! `DELETE …/snapshots/{id}` → 204; `POST …/snapshots/{id}/restore` → 202.
//! A snapshot reads `{id, name, status, status_reason, data,
//! creation_time}`.

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use ember_proto::engine::v1 as pb;
use serde::Deserialize;
use serde_json::{Value, json};

use super::heat_view::heat_time;
use super::protobuf_json::struct_to_json;
use super::{HeatCaller, StackPath, identified_stack, stack_service};
use crate::GatewayState;
use crate::error::RestError;

#[derive(Debug, Deserialize)]
pub struct SnapshotPath {
    pub stack_name: String,
    pub stack_id: String,
    pub snapshot_id: String,
}

impl SnapshotPath {
    fn stack(&self) -> StackPath {
        StackPath {
            stack_name: self.stack_name.clone(),
            stack_id: self.stack_id.clone(),
        }
    }
}

fn snapshot_view(snapshot: &pb::StackSnapshot) -> Value {
    json!({
        "id": snapshot.id,
        "name": if snapshot.name.is_empty() { Value::Null } else { snapshot.name.clone().into() },
        "status": snapshot.status,
        "status_reason": snapshot.status_reason,
        "data": struct_to_json(snapshot.data.as_ref()),
        "creation_time": heat_time(snapshot.created_at.as_ref()),
    })
}

/// The `name` of a snapshot request body (`{}` or no body: no name).
fn snapshot_name(body: &Bytes) -> Result<String, RestError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(String::new());
    }
    let body: Value = serde_json::from_slice(body).map_err(|error| {
        RestError::new(
            ember_runtime::ErrorKind::InvalidInput,
            format!("the request body is not JSON: {error}"),
        )
    })?;
    match body.get("name") {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(name)) => Ok(name.clone()),
        Some(other) => Err(RestError::new(
            ember_runtime::ErrorKind::InvalidInput,
            format!(
                "name must be a string, got {}",
                ember_runtime::quote::quoted(&other.to_string())
            ),
        )),
    }
}

pub async fn create_snapshot(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackPath>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let name = snapshot_name(&body)?;
    let stack = identified_stack(&state, &caller.identity, &path).await?;
    let snapshot = stack_service(&state)
        .create_snapshot(state.internal_request(
            &caller.identity,
            pb::CreateSnapshotRequest {
                stack: stack.id,
                name,
            },
        ))
        .await?
        .into_inner();
    Ok(Json(snapshot_view(&snapshot)))
}

pub async fn list_snapshots(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackPath>,
) -> Result<Json<Value>, RestError> {
    let stack = identified_stack(&state, &caller.identity, &path).await?;
    let snapshots = stack_service(&state)
        .list_snapshots(
            state.internal_request(&caller.identity, pb::GetStackRequest { stack: stack.id }),
        )
        .await?
        .into_inner()
        .snapshots;
    Ok(Json(json!({
        "snapshots": snapshots.iter().map(snapshot_view).collect::<Vec<_>>(),
    })))
}

pub async fn show_snapshot(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<SnapshotPath>,
) -> Result<Json<Value>, RestError> {
    let request = snapshot_request(&state, &caller, &path).await?;
    let snapshot = stack_service(&state)
        .get_snapshot(request)
        .await?
        .into_inner();
    Ok(Json(json!({ "snapshot": snapshot_view(&snapshot) })))
}

pub async fn delete_snapshot(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<SnapshotPath>,
) -> Result<Response, RestError> {
    let request = snapshot_request(&state, &caller, &path).await?;
    stack_service(&state).delete_snapshot(request).await?;
    Ok(http::StatusCode::NO_CONTENT.into_response())
}

pub async fn restore_snapshot(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<SnapshotPath>,
) -> Result<Response, RestError> {
    let request = snapshot_request(&state, &caller, &path).await?;
    stack_service(&state).restore_snapshot(request).await?;
    Ok(http::StatusCode::ACCEPTED.into_response())
}

/// The engine's request for `path`'s snapshot of the caller's stack (the
/// stack looked up by its name and id first).
async fn snapshot_request(
    state: &GatewayState,
    caller: &HeatCaller,
    path: &SnapshotPath,
) -> Result<tonic::Request<pb::SnapshotRequest>, RestError> {
    let stack = identified_stack(state, &caller.identity, &path.stack()).await?;
    Ok(state.internal_request(
        &caller.identity,
        pb::SnapshotRequest {
            stack: stack.id,
            snapshot_id: path.snapshot_id.clone(),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_body_names_it_or_not() {
        assert_eq!(snapshot_name(&Bytes::new()).expect("empty"), "");
        assert_eq!(snapshot_name(&Bytes::from_static(b"{}")).expect("{}"), "");
        assert_eq!(
            snapshot_name(&Bytes::from_static(br#"{"name": "before"}"#)).expect("named"),
            "before"
        );
        assert!(
            snapshot_name(&Bytes::from_static(br#"{"name": 3}"#))
                .expect_err("a number")
                .message()
                .contains("name must be a string")
        );
        assert!(snapshot_name(&Bytes::from_static(b"{")).is_err());
    }
}
