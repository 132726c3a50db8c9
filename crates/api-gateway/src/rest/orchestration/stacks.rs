//! Stack lifecycle routes: list, create, preview, show, update (PUT/PATCH),
//! delete, abandon and the actions endpoint. Status codes are Heat's: create
//! 201 with `Location`, update 202 and delete 204 with empty bodies, actions
//! 200 with an empty body, abandon 200 with the abandon data.

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use ember_proto::engine::v1 as pb;
use serde_json::{Value, json};

use super::heat_request::{self, QueryParams};
use super::heat_view;
use super::protobuf_json::struct_to_json;
use super::{HeatCaller, StackPath, identified_stack, stack_service};
use crate::GatewayState;
use crate::error::RestError;

/// The engine's largest page of stacks.
const ENGINE_PAGE: u32 = 1000;

/// `GET /stacks`: the caller's stacks, newest first. Without a `limit`
/// Heat returns them all, so the gateway pages through the engine; with one,
/// a `next` link carries the marker. Heat's sort and tag filters are
/// accepted and ignored: the engine lists newest first.
pub async fn list_stacks(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    query: QueryParams,
) -> Result<Response, RestError> {
    let limit = query.whole_number("limit")?.filter(|limit| *limit > 0);
    let mut request = pb::ListStacksRequest {
        limit: limit.unwrap_or(ENGINE_PAGE),
        marker: query.first("marker").unwrap_or_default().to_owned(),
        name: query
            .first("stack_name")
            .or_else(|| query.first("name"))
            .unwrap_or_default()
            .to_owned(),
        show_nested: query.boolean("show_nested")?.unwrap_or(false),
        locked: query.boolean("locked")?,
    };
    let mut stacks = Vec::new();
    let next_marker = loop {
        let page = stack_service(&state)
            .list_stacks(state.internal_request(&caller.identity, request.clone()))
            .await?
            .into_inner();
        stacks.extend(page.stacks);
        if limit.is_some() || page.next_marker.is_empty() {
            break page.next_marker;
        }
        request.marker = page.next_marker;
    };
    let links = match limit {
        Some(limit) if !next_marker.is_empty() => {
            let next = format!(
                "{}?limit={limit}&marker={}",
                caller.urls.stacks(),
                heat_view::path_segment(&next_marker)
            );
            Some(json!([{ "href": next, "rel": "next" }]))
        }
        _ => None,
    };
    let list = StackList {
        stacks: stacks
            .iter()
            .map(|stack| heat_view::StackSummary::new(&caller.urls, stack))
            .collect(),
        links,
    };
    // Written into a buffer sized for the list at once (a stack's summary
    // is ~700 bytes): growing a small one by doubling copied the body
    // over and over.
    Ok(super::json_response(&list, 768 * list.stacks.len() + 64))
}

/// `GET /stacks`'s body: the stacks, and a `next` link when paged.
#[derive(serde::Serialize)]
pub struct StackList<'a> {
    stacks: Vec<heat_view::StackSummary<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    links: Option<Value>,
}

/// `POST /stacks` → 201 `{"stack": {"id", "links"}}` and `Location`.
pub async fn create_stack(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    body: Bytes,
) -> Result<Response, RestError> {
    let request = heat_request::create_stack_request(heat_request::parse_body(&body)?, false)?;
    let stack = stack_service(&state)
        .create_stack(state.internal_request(&caller.identity, request))
        .await?
        .into_inner();
    let location = caller.urls.stack(&stack.name, &stack.id);
    Ok((
        http::StatusCode::CREATED,
        [(http::header::LOCATION, location)],
        Json(json!({ "stack": heat_view::created_stack(&caller.urls, &stack) })),
    )
        .into_response())
}

/// `POST /stacks/preview` → the stack as it would be, with its resources.
pub async fn preview_stack(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let request = heat_request::create_stack_request(heat_request::parse_body(&body)?, true)?;
    let preview = stack_service(&state)
        .preview_stack(state.internal_request(&caller.identity, request))
        .await?
        .into_inner();
    Ok(Json(
        json!({ "stack": heat_view::stack_preview(&caller.urls, &preview) }),
    ))
}

/// `GET /stacks/{name}/{id}`.
pub async fn show_stack(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackPath>,
) -> Result<Json<Value>, RestError> {
    // The full view: outputs and parameters resolved.
    let stack = super::get_stack(&state, &caller.identity, path.stack_id.clone()).await?;
    if stack.name != path.stack_name {
        return Err(RestError::new(
            ember_runtime::ErrorKind::NotFound,
            format!(
                "stack {:?} with id {} not found",
                path.stack_name, path.stack_id
            ),
        ));
    }
    Ok(Json(
        json!({ "stack": heat_view::stack_detail(&caller.urls, &stack) }),
    ))
}

/// `PUT /stacks/{name}/{id}`: a full update → 202.
pub async fn update_stack(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackPath>,
    body: Bytes,
) -> Result<Response, RestError> {
    update(&state, &caller, &path, &body, false).await
}

/// `PATCH /stacks/{name}/{id}`: changes to the current stack → 202.
pub async fn patch_stack(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackPath>,
    body: Bytes,
) -> Result<Response, RestError> {
    update(&state, &caller, &path, &body, true).await
}

async fn update(
    state: &GatewayState,
    caller: &HeatCaller,
    path: &StackPath,
    body: &[u8],
    existing: bool,
) -> Result<Response, RestError> {
    let map = heat_request::parse_body(body)?;
    let stack = identified_stack(state, &caller.identity, path).await?;
    let request = heat_request::update_stack_request(&stack.name, &stack.id, map, existing)?;
    stack_service(state)
        .update_stack(state.internal_request(&caller.identity, request))
        .await?;
    Ok(http::StatusCode::ACCEPTED.into_response())
}

/// `PUT /stacks/{name}/{id}/preview` (PATCH: on top of the current
/// definition): what the update would do, changing nothing →
/// `{"resource_changes": {added, deleted, replaced, updated, unchanged}}`.
pub async fn preview_update(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackPath>,
    method: http::Method,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let existing = method == http::Method::PATCH;
    let map = heat_request::parse_body(&body)?;
    let stack = identified_stack(&state, &caller.identity, &path).await?;
    let request = heat_request::update_stack_request(&stack.name, &stack.id, map, existing)?;
    let preview = stack_service(&state)
        .preview_stack_update(state.internal_request(&caller.identity, request))
        .await?
        .into_inner();
    let view = |resources: &[pb::Resource]| -> Vec<Value> {
        resources
            .iter()
            .map(|resource| heat_view::resource_view(&caller.urls, resource, false))
            .collect()
    };
    Ok(Json(json!({
        "resource_changes": {
            "added": view(&preview.added),
            "deleted": view(&preview.deleted),
            "replaced": view(&preview.replaced),
            "updated": view(&preview.updated),
            "unchanged": view(&preview.unchanged),
        }
    })))
}

/// `DELETE /stacks/{name}/{id}` → 204.
pub async fn delete_stack(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackPath>,
) -> Result<Response, RestError> {
    let stack = identified_stack(&state, &caller.identity, &path).await?;
    stack_service(&state)
        .delete_stack(
            state.internal_request(&caller.identity, pb::GetStackRequest { stack: stack.id }),
        )
        .await?;
    Ok(http::StatusCode::NO_CONTENT.into_response())
}

/// `DELETE /stacks/{name}/{id}/abandon` → 200 with the data adopt takes.
pub async fn abandon_stack(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackPath>,
) -> Result<Json<Value>, RestError> {
    let stack = identified_stack(&state, &caller.identity, &path).await?;
    let response = stack_service(&state)
        .abandon_stack(
            state.internal_request(&caller.identity, pb::GetStackRequest { stack: stack.id }),
        )
        .await?
        .into_inner();
    Ok(Json(struct_to_json(response.data.as_ref())))
}

/// `GET /stacks/{name}/{id}/export` → 200 with the stack's abandon data;
/// the stack stays as it is.
pub async fn export_stack(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackPath>,
) -> Result<Json<Value>, RestError> {
    let stack = identified_stack(&state, &caller.identity, &path).await?;
    let response = stack_service(&state)
        .export_stack(
            state.internal_request(&caller.identity, pb::GetStackRequest { stack: stack.id }),
        )
        .await?
        .into_inner();
    Ok(Json(struct_to_json(response.data.as_ref())))
}

/// `POST /stacks/{name}/{id}/actions` with one of `{"suspend": null}`,
/// `{"resume": null}`, `{"check": null}`, `{"cancel_update": null}`,
/// `{"lock": {"level": "stacks"|"all", "reason": …}}` (or `{"lock": null}`
/// = all) and `{"unlock": null}` → 200.
pub async fn run_stack_action(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackPath>,
    body: Bytes,
) -> Result<Response, RestError> {
    let action = heat_request::stack_action(heat_request::parse_body(&body)?)?;
    let stack = identified_stack(&state, &caller.identity, &path).await?;
    let option = |key: &str| {
        action
            .options
            .get(key)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut client = stack_service(&state);
    match action.kind {
        heat_request::ActionKind::Run(kind) => {
            let request = pb::StackActionRequest {
                stack: stack.id,
                action: kind as i32,
            };
            client
                .run_stack_action(state.internal_request(&caller.identity, request))
                .await?;
        }
        heat_request::ActionKind::Lock => {
            let request = pb::LockStackRequest {
                stack: stack.id,
                level: option("level"),
                reason: option("reason"),
                expires_in: action
                    .options
                    .get("expires_in")
                    .and_then(serde_json::Value::as_i64),
                expires_at: action
                    .options
                    .get("expires_at")
                    .and_then(serde_json::Value::as_str)
                    .and_then(|text| chrono::DateTime::parse_from_rfc3339(text).ok())
                    .map(|at| ember_runtime::time::to_timestamp(at.with_timezone(&chrono::Utc))),
            };
            client
                .lock_stack(state.internal_request(&caller.identity, request))
                .await?;
        }
        heat_request::ActionKind::Unlock => {
            let request = pb::GetStackRequest { stack: stack.id };
            client
                .unlock_stack(state.internal_request(&caller.identity, request))
                .await?;
        }
    }
    Ok(http::StatusCode::OK.into_response())
}

#[derive(Debug, serde::Deserialize)]
pub struct OperationPath {
    stack_name: String,
    stack_id: String,
    action: String,
}

/// `GET /stacks/{name}/{id}/actions/{action}/allowed`: would the action be
/// allowed now? `{"allowed", "reason", "stack_lock"}`.
pub async fn check_stack_operation(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<OperationPath>,
) -> Result<Json<serde_json::Value>, RestError> {
    let operation = path.action;
    let path = StackPath {
        stack_name: path.stack_name,
        stack_id: path.stack_id,
    };
    let stack = identified_stack(&state, &caller.identity, &path).await?;
    let response = stack_service(&state)
        .check_operation(state.internal_request(
            &caller.identity,
            pb::CheckOperationRequest {
                stack: stack.id,
                operation,
            },
        ))
        .await?
        .into_inner();
    Ok(Json(serde_json::json!({
        "allowed": response.allowed,
        "reason": if response.reason.is_empty() { serde_json::Value::Null } else { response.reason.into() },
        "stack_lock": response.stack_lock.as_ref().map(heat_view::stack_lock),
        "blockers": crate::rest::allowed::blockers_view(&response.blockers),
        "break_glass_would_pass": response.break_glass_would_pass,
    })))
}
