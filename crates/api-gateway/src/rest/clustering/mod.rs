//! The Clustering API (Senlin v1), at `/clustering/v1`: profiles, policies,
//! clusters and their actions (including the scale-in lifecycle hooks'
//! `complete_lifecycle`), nodes, cluster policies, actions and events.
//! Bodies are Senlin's (`{"cluster": {…}}`); operations that change a
//! cluster or node answer 202 with `Location: /clustering/v1/actions/{id}`.
//! Every decision is the engine's; this module reads bodies and shapes
//! answers.
//!
//! Microversions: `version::negotiate` (a layer over every route here)
//! reads `OpenStack-API-Version: clustering X.Y` (1.0 when absent, 1.14 for
//! `latest`) and names it back in each answer. A handler whose answer or
//! availability depends on it takes a `version: ApiVersion` argument
//! (`super::version::ApiVersion`, an extractor, in any position before the
//! body) and compares:
//! `version >= ApiVersion::new(1, 13)` to add fields, or
//! `version.require(ApiVersion::new(1, 4))?` for a call Senlin added in 1.4
//! (400 "API version '1.3' is not supported on this method.").
//!
//! List calls read their query with `lists::ListQuery::parse` against the
//! list's `ListRules` (Senlin's messages for unknown parameters, `limit`,
//! `marker`, `sort`, `global_project` and enumerated filters); bodies are
//! read with `wrapped` ("Request body missing 'cluster' key."), `only`
//! (Senlin's "Additional properties are not allowed (…)") and `required`
//! ("'name' is a required property").
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
//! | `POST /clusters/{id}/ops` `{"<op>": {"params", "filters"}}` (1.4; see `ops`) | 202 `{"action": id}` |
//! | `GET /clusters/{id}/policies` | 200 `{"cluster_policies": […]}` |
//! | `GET /clusters/{id}/lifecycle-actions` (Ember's; see `lifecycle`) | 200 `{"lifecycle_actions": [{lifecycle_action_token, node_id, lifecycle_transition_type, deadline, delivery_state, …}]}` |
//! | `POST /nodes`, `GET /nodes?cluster_id=`, `GET\|PATCH\|DELETE /nodes/{id}` | 202 / 200 / 202 / 202 |
//! | `POST /nodes/{id}/actions` `{"check"\|"recover": {…}}`, `POST /nodes/{id}/ops` `{"<op>": {…}}` (see `nodes`) | 202 `{"action": id}` |
//! | `POST /nodes/adopt`, `POST /nodes/adopt-preview` (1.7; see `nodes`) | 200 `{"node": …}` / `{"node_profile": …}` |
//! | `GET /actions?cluster_id=&target=&status=&name=&action=`, `GET /actions/{id}` | 200 |
//! | `GET /events?cluster_id=&oid=&otype=&oname=&action=&level=`, `GET /events/{id}` | 200 `{"events": […]}` / `{"event": …}` |
//! | `POST /receivers`, `GET /receivers`, `GET\|PATCH\|DELETE /receivers/{id}` (see `receivers`) | 201 / 200 / 200 / 200 / 204 |
//! | `POST /receivers/{id}/notify` (message receivers: runs their pending messages) | 204 |
//! | `POST /webhooks/{id}/trigger?V=2` (no token: the URL is the credential) | 202 `{"action": id}` |
//! | `GET /build-info` | 200 `{"build_info": {"api": {revision}, "engine": {revision}}}` |
//! | `GET /services` (admins) | 200 `{"services": [{id, binary, host, topic, status, state, …}]}` |
//! | `GET /profile-types`, `GET /profile-types/{type}`, `GET /profile-types/{type}/ops` | 200 |
//! | `GET /policy-types`, `GET /policy-types/{type}` | 200 |

mod cluster_actions;
mod clusters;
mod info;
mod lifecycle;
mod lists;
mod nodes;
mod objects;
mod ops;
mod receivers;
mod types;
mod updates;
mod version;
pub(super) mod views;

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
        .route("/audit", get(super::audit::list_for_caller))
        .route("/clusters/{id}/allowed", get(super::allowed::cluster))
        .route("/nodes/{id}/allowed", get(super::allowed::node))
        .route(
            "/profiles",
            get(objects::list_profiles).post(objects::create_profile),
        )
        .route(
            "/profiles/{id}",
            get(objects::show_profile)
                .patch(updates::update_profile)
                .delete(objects::delete_profile),
        )
        .route("/profiles/validate", post(updates::validate_profile))
        .route(
            "/policies",
            get(objects::list_policies).post(objects::create_policy),
        )
        .route(
            "/policies/{id}",
            get(objects::show_policy)
                .patch(updates::update_policy)
                .delete(objects::delete_policy),
        )
        .route("/policies/validate", post(updates::validate_policy))
        .route(
            "/clusters",
            get(clusters::list_clusters).post(clusters::create_cluster),
        )
        .route(
            "/clusters/{id}",
            get(clusters::show_cluster)
                .patch(updates::update_cluster)
                .delete(clusters::delete_cluster),
        )
        .route(
            "/clusters/{id}/policies/{policy}",
            get(updates::show_cluster_policy),
        )
        .route("/clusters/{id}/attrs/{*path}", get(updates::collect))
        .route(
            "/clusters/{id}/actions",
            post(cluster_actions::cluster_action),
        )
        .route("/clusters/{id}/ops", post(ops::cluster_operation))
        .route("/clusters/{id}/policies", get(clusters::cluster_policies))
        .route("/clusters/{id}/lifecycle-actions", get(lifecycle::pending))
        .route(
            "/nodes",
            get(objects::list_nodes).post(objects::create_node),
        )
        .route(
            "/nodes/{id}",
            get(objects::show_node)
                .patch(nodes::update_node)
                .delete(objects::delete_node),
        )
        .route("/nodes/adopt", post(nodes::adopt_node))
        .route("/nodes/adopt-preview", post(nodes::adopt_preview))
        .route("/nodes/{id}/actions", post(nodes::node_action))
        .route("/nodes/{id}/ops", post(nodes::node_operation))
        .route("/actions", get(objects::list_actions))
        .route(
            "/actions/{id}",
            get(objects::show_action).patch(updates::update_action),
        )
        .route("/events", get(objects::list_events))
        .route("/events/{id}", get(nodes::show_event))
        .route(
            "/receivers",
            get(receivers::list_receivers).post(receivers::create_receiver),
        )
        .route(
            "/receivers/{id}",
            get(receivers::show_receiver)
                .patch(receivers::update_receiver)
                .delete(receivers::delete_receiver),
        )
        .route("/receivers/{id}/notify", post(receivers::notify_receiver))
        // No token: the receiver id in the URL is the credential.
        .route("/webhooks/{id}/trigger", post(receivers::trigger_webhook))
        .route("/build-info", get(info::build_info))
        .route("/services", get(info::list_services))
        .route("/profile-types", get(types::list_profile_types))
        .route("/profile-types/{type_name}", get(types::show_profile_type))
        .route(
            "/profile-types/{type_name}/ops",
            get(types::list_profile_type_operations),
        )
        .route("/policy-types", get(types::list_policy_types))
        .route("/policy-types/{type_name}", get(types::show_policy_type))
        .layer(axum::middleware::from_fn(version::negotiate))
}

pub const PREFIX: &str = "/clustering/v1";

fn bad_request(message: impl Into<String>) -> RestError {
    RestError::new(ErrorKind::InvalidInput, message)
}

/// The body as a JSON object holding `wrapper` (`{"cluster": {…}}`), with
/// Senlin's message when the key is missing.
fn wrapped(body: &[u8], wrapper: &str) -> Result<Map<String, Value>, RestError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| bad_request(format!("the body is not JSON: {error}")))?;
    let missing = || bad_request(format!("Request body missing '{wrapper}' key."));
    match value {
        Value::Object(mut object) => match object.remove(wrapper) {
            Some(Value::Object(inner)) => Ok(inner),
            Some(other) => Err(bad_request(format!("{other} is not of type 'object'"))),
            None => Err(missing()),
        },
        _ => Err(missing()),
    }
}

/// Refuses keys Senlin's schema for this body does not have, with the
/// message of Senlin's JSON schema check.
fn only(body: &Map<String, Value>, allowed: &[&str]) -> Result<(), RestError> {
    let unexpected: Vec<String> = body
        .keys()
        .filter(|key| !allowed.contains(&key.as_str()))
        .map(|key| format!("'{key}'"))
        .collect();
    match unexpected.len() {
        0 => Ok(()),
        1 => Err(bad_request(format!(
            "Additional properties are not allowed ({} was unexpected)",
            unexpected[0]
        ))),
        _ => Err(bad_request(format!(
            "Additional properties are not allowed ({} were unexpected)",
            unexpected.join(", ")
        ))),
    }
}

fn string(body: &Map<String, Value>, key: &str) -> Result<Option<String>, RestError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(bad_request(format!("{key}: must be a string"))),
    }
}

/// Senlin's message for a property its schema requires.
fn missing(key: &str) -> RestError {
    bad_request(format!("'{key}' is a required property"))
}

fn required(body: &Map<String, Value>, key: &str) -> Result<String, RestError> {
    string(body, key)?
        .filter(|text| !text.is_empty())
        .ok_or_else(|| missing(key))
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

/// A boolean of a body, read as Senlin's flexible booleans are (oslo's
/// strict `bool_from_string`): JSON booleans, or the texts (and numbers)
/// below in any case; anything else gets Senlin's message.
fn boolean(body: &Map<String, Value>, key: &str) -> Result<Option<bool>, RestError> {
    let text = match body.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Bool(flag)) => return Ok(Some(*flag)),
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    };
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "t" | "true" | "on" | "y" | "yes" => Ok(Some(true)),
        "0" | "f" | "false" | "off" | "n" | "no" => Ok(Some(false)),
        _ => Err(bad_request(format!(
            "Unrecognized value '{text}', acceptable values are: '0', '1', 'f', 'false', \
             'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'"
        ))),
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

/// A JSON object the body must carry (a spec), as JSON text.
fn required_json_text(body: &Map<String, Value>, key: &str) -> Result<String, RestError> {
    match body.get(key) {
        None | Some(Value::Null) => Err(missing(key)),
        Some(_) => json_text(body, key),
    }
}

/// A list answer: `{"<key>": [each object in its Senlin view]}`.
fn listed<'a, T: 'a>(
    key: &str,
    objects: impl IntoIterator<Item = &'a T>,
    view: impl Fn(&T) -> Value,
) -> Json<Value> {
    Json(json!({ key: objects.into_iter().map(view).collect::<Vec<_>>() }))
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

/// 202 with no body: Senlin answers a delete so, the `Location` naming
/// the action says it all.
fn accepted_without_body(action_id: &str) -> Response {
    (
        StatusCode::ACCEPTED,
        [(http::header::LOCATION, action_location(action_id))],
    )
        .into_response()
}

/// One object's answer: `{"<key>": view}`.
fn shown(key: &str, view: impl serde::Serialize) -> Json<Value> {
    Json(json!({ key: view }))
}
