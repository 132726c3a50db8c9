//! The Clustering API (Senlin v1), at `/clustering/v1`: profiles, policies,
//! clusters and their actions (including the scale-in lifecycle hooks'
//! `complete_lifecycle`), nodes, cluster policies, actions and events.
//! Bodies are Senlin's (`{"cluster": {…}}`); operations that change a
//! cluster or node answer 202 with `Location: /clustering/v1/actions/{id}`.
//! `OpenStack-API-Version: clustering 1.x` is accepted and ignored. Every
//! decision is the engine's; this module reads bodies and shapes answers.
//!
//! | call | success |
//! |---|---|
//! | `GET /` (no token: version discovery) | 200 `{"version": {…}}` |
//! | `POST /profiles` `{"profile": {name, spec, metadata?}}` | 201 `{"profile": …}` |
//! | `GET /profiles`, `GET\|DELETE /profiles/{id}` | 200 / 204 |
//! | `POST /policies` `{"policy": {name, spec}}` | 201 `{"policy": …}` |
//! | `GET /policies`, `GET\|DELETE /policies/{id}` | 200 / 204 |
//! | `POST /clusters` `{"cluster": {name, profile_id, min_size?, max_size?, desired_capacity?, metadata?}}` | 202 `{"cluster": …}` |
//! | `GET /clusters`, `GET /clusters/{id}`, `DELETE /clusters/{id}` | 200 / 202 |
//! | `POST /clusters/{id}/actions` `{"<action>": {…}}` | 202 `{"action": id}` |
//! | `GET /clusters/{id}/policies` | 200 `{"cluster_policies": […]}` |
//! | `POST /nodes`, `GET /nodes?cluster_id=`, `GET\|PATCH\|DELETE /nodes/{id}` | 202 / 200 / 200 / 202 |
//! | `GET /actions?cluster_id=&target=&status=&name=&action=`, `GET /actions/{id}` | 200 |
//! | `GET /events?cluster_id=&oid=&otype=&oname=&action=&level=` | 200 `{"events": […]}` |

mod clusters;
mod objects;
mod version;
mod views;

use std::collections::HashMap;

use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use ember_runtime::ErrorKind;
use http::StatusCode;
use serde_json::{Map, Value, json};

use crate::GatewayState;
use crate::error::RestError;

pub use version::{list_versions as versions, show_version as version};

pub fn routes() -> Router<GatewayState> {
    Router::new()
        .route("/", get(version::show_version))
        .route(
            "/profiles",
            get(objects::list_profiles).post(objects::create_profile),
        )
        .route(
            "/profiles/{id}",
            get(objects::show_profile).delete(objects::delete_profile),
        )
        .route(
            "/policies",
            get(objects::list_policies).post(objects::create_policy),
        )
        .route(
            "/policies/{id}",
            get(objects::show_policy).delete(objects::delete_policy),
        )
        .route(
            "/clusters",
            get(clusters::list_clusters).post(clusters::create_cluster),
        )
        .route(
            "/clusters/{id}",
            get(clusters::show_cluster).delete(clusters::delete_cluster),
        )
        .route("/clusters/{id}/actions", post(clusters::cluster_action))
        .route("/clusters/{id}/policies", get(clusters::cluster_policies))
        .route(
            "/nodes",
            get(objects::list_nodes).post(objects::create_node),
        )
        .route(
            "/nodes/{id}",
            get(objects::show_node)
                .patch(objects::update_node)
                .delete(objects::delete_node),
        )
        .route("/actions", get(objects::list_actions))
        .route("/actions/{id}", get(objects::show_action))
        .route("/events", get(objects::list_events))
}

pub const PREFIX: &str = "/clustering/v1";

fn bad_request(message: impl Into<String>) -> RestError {
    RestError::new(ErrorKind::InvalidInput, message)
}

/// The body as a JSON object holding `wrapper` (`{"cluster": {…}}`).
fn wrapped(body: &[u8], wrapper: &str) -> Result<Map<String, Value>, RestError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| bad_request(format!("the body is not JSON: {error}")))?;
    match value {
        Value::Object(mut object) => match object.remove(wrapper) {
            Some(Value::Object(inner)) => Ok(inner),
            Some(_) => Err(bad_request(format!("{wrapper}: must be an object"))),
            None => Err(bad_request(format!(
                "the body must be {{\"{wrapper}\": {{…}}}}"
            ))),
        },
        _ => Err(bad_request("the body must be a JSON object")),
    }
}

fn string(body: &Map<String, Value>, key: &str) -> Result<Option<String>, RestError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(bad_request(format!("{key}: must be a string"))),
    }
}

fn required(body: &Map<String, Value>, key: &str) -> Result<String, RestError> {
    string(body, key)?
        .filter(|text| !text.is_empty())
        .ok_or_else(|| bad_request(format!("{key}: missing")))
}

/// An integer, given as a number or as text (Senlin clients send both).
fn integer(body: &Map<String, Value>, key: &str) -> Result<Option<i64>, RestError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) => number
            .as_i64()
            .map(Some)
            .ok_or_else(|| bad_request(format!("{key}: must be an integer"))),
        Some(Value::String(text)) => text
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| bad_request(format!("{key}: {text:?} is not an integer"))),
        Some(_) => Err(bad_request(format!("{key}: must be an integer"))),
    }
}

fn int32(body: &Map<String, Value>, key: &str) -> Result<Option<i32>, RestError> {
    integer(body, key)?
        .map(|value| {
            i32::try_from(value).map_err(|_| bad_request(format!("{key}: {value} is too large")))
        })
        .transpose()
}

fn boolean(body: &Map<String, Value>, key: &str) -> Result<Option<bool>, RestError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(*flag)),
        Some(Value::String(text)) => match text.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Ok(Some(true)),
            "false" | "0" | "no" => Ok(Some(false)),
            _ => Err(bad_request(format!("{key}: {text:?} is not a boolean"))),
        },
        Some(_) => Err(bad_request(format!("{key}: must be a boolean"))),
    }
}

/// A JSON object carried as JSON text (spec, metadata); empty when absent.
fn json_text(body: &Map<String, Value>, key: &str) -> Result<String, RestError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(value @ Value::Object(_)) => Ok(value.to_string()),
        Some(_) => Err(bad_request(format!("{key}: must be an object"))),
    }
}

/// Paging and filters of list calls.
fn list_parameters(
    query: &HashMap<String, String>,
    known: &[&str],
) -> Result<(u32, String), RestError> {
    let mut allowed = vec!["limit", "marker", "sort", "global_project"];
    allowed.extend_from_slice(known);
    if let Some(unknown) = query.keys().find(|key| !allowed.contains(&key.as_str())) {
        return Err(bad_request(format!(
            "unknown query parameter {unknown:?}: use {}",
            allowed.join(", ")
        )));
    }
    let limit = match query.get("limit") {
        None => 0,
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|limit| (1..=1000).contains(limit))
            .ok_or_else(|| bad_request(format!("limit: must be 1 to 1000 (got {text:?})")))?,
    };
    Ok((limit, query.get("marker").cloned().unwrap_or_default()))
}

/// A list answer: `{"<key>": [each object in its Senlin view]}`.
fn listed<'a, T: 'a>(
    key: &str,
    objects: impl IntoIterator<Item = &'a T>,
    view: impl Fn(&T) -> Value,
) -> Json<Value> {
    Json(json!({ key: objects.into_iter().map(view).collect::<Vec<_>>() }))
}

/// Whether a Senlin filter the engine does not take lets `value` through
/// (no filter lets everything through); applied to the page it gave.
fn wanted(filter: Option<&String>, value: &str) -> bool {
    filter.is_none_or(|wanted| wanted == value)
}

fn action_location(action_id: &str) -> String {
    format!("{PREFIX}/actions/{action_id}")
}

/// 202 with `Location` naming the action, and `body`.
fn accepted(action_id: &str, body: Value) -> Response {
    (
        StatusCode::ACCEPTED,
        [(http::header::LOCATION, action_location(action_id))],
        Json(body),
    )
        .into_response()
}
