//! Stack and resource events, oldest first (or newest with
//! `sort_dir=desc`), paged by `limit` and `marker` (the last event id seen).
//! Heat's filters (resource status, action, name, type) go to the engine,
//! whose query applies them with the page: a limit the engine's page holds
//! is one call. Heat returns every event when no limit is given, so then
//! (or for a larger limit) the gateway asks for the following pages too.

use axum::Json;
use axum::extract::{Path, State};
use ember_proto::engine::v1 as pb;
use ember_runtime::ErrorKind;
use serde::Deserialize;
use serde_json::{Value, json};

use super::heat_request::QueryParams;
use super::heat_view;
use super::{HeatCaller, StackPath, event_service, identified_stack};
use crate::GatewayState;
use crate::error::RestError;

/// The engine's largest page.
const ENGINE_PAGE: u32 = 1000;
/// Events returned when no limit is given, at most: a guard, not a page.
const MOST_EVENTS_UNLIMITED: usize = 100_000;

/// `GET /stacks/{name}/{id}/events`.
pub async fn list_stack_events(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackPath>,
    query: QueryParams,
) -> Result<Json<Value>, RestError> {
    list_events(&state, &caller, &path, None, &query).await
}

#[derive(Debug, Deserialize)]
pub struct ResourceEventsPath {
    stack_name: String,
    stack_id: String,
    resource_name: String,
}

/// `GET /stacks/{name}/{id}/resources/{resource}/events`.
pub async fn list_resource_events(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<ResourceEventsPath>,
    query: QueryParams,
) -> Result<Json<Value>, RestError> {
    let stack_path = StackPath {
        stack_name: path.stack_name,
        stack_id: path.stack_id,
    };
    list_events(
        &state,
        &caller,
        &stack_path,
        Some(path.resource_name),
        &query,
    )
    .await
}

/// The engine's page for `wanted` more events.
fn engine_page(wanted: usize) -> u32 {
    u32::try_from(wanted).map_or(ENGINE_PAGE, |wanted| wanted.min(ENGINE_PAGE))
}

fn descending(query: &QueryParams) -> Result<bool, RestError> {
    match query.first("sort_dir") {
        None => Ok(false),
        Some(direction) if direction.eq_ignore_ascii_case("asc") => Ok(false),
        Some(direction) if direction.eq_ignore_ascii_case("desc") => Ok(true),
        Some(other) => Err(RestError::new(
            ErrorKind::InvalidInput,
            format!("sort_dir must be asc or desc, got {other:?}"),
        )),
    }
}

async fn list_events(
    state: &GatewayState,
    caller: &HeatCaller,
    path: &StackPath,
    resource_name: Option<String>,
    query: &QueryParams,
) -> Result<Json<Value>, RestError> {
    let limit = query.whole_number("limit")?.filter(|limit| *limit > 0);
    let descending = descending(query)?;
    let nested_depth = query.whole_number("nested_depth")?.unwrap_or(0);
    let marker = query.first("marker").unwrap_or_default().to_owned();
    let stack = identified_stack(state, &caller.identity, path).await?;
    let wanted = limit.map_or(MOST_EVENTS_UNLIMITED, |limit| limit as usize);
    let mut request = pb::ListEventsRequest {
        stack: stack.id,
        resource_name: resource_name.clone().unwrap_or_default(),
        nested_depth,
        limit: engine_page(wanted),
        marker: marker.clone(),
        descending,
        resource_names: query.all("resource_name"),
        resource_types: query.all("resource_type"),
        resource_actions: query.all("resource_action"),
        resource_statuses: query.all("resource_status"),
    };
    let mut events = Vec::new();
    loop {
        let page = event_service(state)
            .list_events(state.internal_request(&caller.identity, request.clone()))
            .await?
            .into_inner();
        events.extend(page.events);
        if events.len() >= wanted || page.next_marker.is_empty() {
            break;
        }
        request.marker = page.next_marker;
        request.limit = engine_page(wanted - events.len());
    }
    events.truncate(wanted);
    if let Some(resource_name) = resource_name.filter(|_| events.is_empty() && marker.is_empty()) {
        return Err(RestError::new(
            ErrorKind::NotFound,
            format!("no events found for resource {resource_name:?}"),
        ));
    }
    let events: Vec<Value> = events
        .iter()
        .map(|event| heat_view::event_view(&caller.urls, event, false))
        .collect();
    Ok(Json(json!({ "events": events })))
}

#[derive(Debug, Deserialize)]
pub struct EventPath {
    stack_name: String,
    stack_id: String,
    resource_name: String,
    event_id: String,
}

/// `GET …/resources/{resource}/events/{event_id}`: `{"event": {...}}`.
pub async fn show_event(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<EventPath>,
) -> Result<Json<Value>, RestError> {
    let stack_path = StackPath {
        stack_name: path.stack_name,
        stack_id: path.stack_id,
    };
    let stack = identified_stack(&state, &caller.identity, &stack_path).await?;
    let request = pb::GetEventRequest {
        stack: stack.id,
        resource_name: path.resource_name,
        event_id: path.event_id,
    };
    let event = event_service(&state)
        .get_event(state.internal_request(&caller.identity, request))
        .await?
        .into_inner();
    Ok(Json(
        json!({ "event": heat_view::event_view(&caller.urls, &event, true) }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_dir_is_asc_or_desc() {
        let query = |value: &str| QueryParams(vec![("sort_dir".into(), value.into())]);
        assert!(!descending(&QueryParams::default()).expect("default"));
        assert!(descending(&query("DESC")).expect("desc"));
        assert!(!descending(&query("asc")).expect("asc"));
        let refused = descending(&query("sideways")).expect_err("refused");
        assert!(format!("{refused:?}").contains("sort_dir"));
    }
}
