//! Stack and resource events, oldest first (or newest with
//! `sort_dir=desc`), paged by `limit` and `marker` (the last event id seen).
//! Heat returns every event when no limit is given, so the gateway pages
//! through the engine until the end; Heat's filters the engine does not take
//! (status, action, name, type) apply here, paging on until the page is full.

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

/// Heat's event filters that the engine does not apply.
#[derive(Debug, Default)]
struct EventFilter {
    statuses: Vec<String>,
    actions: Vec<String>,
    names: Vec<String>,
    types: Vec<String>,
}

impl EventFilter {
    fn from_query(query: &QueryParams) -> EventFilter {
        EventFilter {
            statuses: query.all("resource_status"),
            actions: query.all("resource_action"),
            names: query.all("resource_name"),
            types: query.all("resource_type"),
        }
    }

    fn is_empty(&self) -> bool {
        self.statuses.is_empty()
            && self.actions.is_empty()
            && self.names.is_empty()
            && self.types.is_empty()
    }

    fn matches(&self, event: &pb::Event) -> bool {
        let (action, status) = event
            .resource_status
            .split_once('_')
            .unwrap_or((event.resource_status.as_str(), ""));
        let any = |wanted: &[String], value: &str| {
            wanted.is_empty() || wanted.iter().any(|wanted| wanted == value)
        };
        (any(&self.statuses, status) || any(&self.statuses, &event.resource_status))
            && any(&self.actions, action)
            && any(&self.names, &event.resource_name)
            && any(&self.types, &event.resource_type)
    }
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
    let filter = EventFilter::from_query(query);
    let stack = identified_stack(state, &caller.identity, path).await?;
    let wanted = limit.map_or(MOST_EVENTS_UNLIMITED, |limit| limit as usize);
    let mut request = pb::ListEventsRequest {
        stack: stack.id,
        resource_name: resource_name.clone().unwrap_or_default(),
        nested_depth,
        limit: match limit {
            Some(limit) if filter.is_empty() => limit.min(ENGINE_PAGE),
            _ => ENGINE_PAGE,
        },
        marker: marker.clone(),
        descending,
    };
    let mut events = Vec::new();
    loop {
        let page = event_service(state)
            .list_events(state.internal_request(&caller.identity, request.clone()))
            .await?
            .into_inner();
        events.extend(
            page.events
                .into_iter()
                .filter(|event| filter.matches(event)),
        );
        if events.len() >= wanted || page.next_marker.is_empty() {
            break;
        }
        request.marker = page.next_marker;
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

    #[test]
    fn filters_match_heats_split_status_and_action() {
        let event = pb::Event {
            resource_name: "a".into(),
            resource_type: "OS::Heat::None".into(),
            resource_status: "CREATE_IN_PROGRESS".into(),
            ..pb::Event::default()
        };
        let filter = |key: &str, value: &str| {
            EventFilter::from_query(&QueryParams(vec![(key.into(), value.into())]))
        };
        assert!(filter("resource_status", "IN_PROGRESS").matches(&event));
        assert!(filter("resource_status", "CREATE_IN_PROGRESS").matches(&event));
        assert!(!filter("resource_status", "COMPLETE").matches(&event));
        assert!(filter("resource_action", "CREATE").matches(&event));
        assert!(filter("resource_type", "OS::Heat::None").matches(&event));
        assert!(!filter("resource_name", "b").matches(&event));
        assert!(EventFilter::default().is_empty());
    }
}
