//! Node actions, operations and update, and one event, as Senlin's
//! Clustering API has them:
//!
//! - `POST /nodes/{id}/actions` `{"check": {}}` or `{"recover": {…}}`:
//!   202 `{"action": id}` with `Location`;
//! - `POST /nodes/{id}/ops` `{"<operation>": {params}}` (microversion 1.4
//!   and later): 202 `{"action": id}` with `Location`;
//! - `PATCH /nodes/{id}` `{"node": {name?, role?, metadata?, profile_id?,
//!   tainted?}}`: 202 with the node and the `Location` of its NODE_UPDATE;
//! - `POST /nodes/adopt` `{identity, type, name?, role?, metadata?,
//!   overrides?, snapshot?}` and `POST /nodes/adopt-preview` `{identity,
//!   type, overrides?, snapshot?}` (1.7 on): 200 `{"node": …}` /
//!   `{"node_profile": {"node_preview": spec}}`;
//! - `GET /events/{id}`: 200 `{"event": …}`.
//!
//! The body checks Senlin's controller makes come first, with its
//! messages (clients and its API suite compare them); the engine decides
//! the rest.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::Response;
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::action_service_client::ActionServiceClient;
use ember_proto::engine::v1::node_service_client::NodeServiceClient;
use serde_json::{Map, Value, json};

use super::version::ApiVersion;
use super::{accepted, bad_request, boolean, json_text, string, views, wrapped};
use crate::GatewayState;
use crate::error::RestError;
use crate::rest::Authenticated;

use ember_runtime::in_process::Upstream;

fn nodes(state: &GatewayState) -> NodeServiceClient<Upstream> {
    NodeServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

/// The body as a JSON object; an empty body is an empty object.
fn object_body(body: &[u8]) -> Result<Map<String, Value>, RestError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice(body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(_) => Err(bad_request("the body must be a JSON object")),
        Err(error) => Err(bad_request(format!("the body is not JSON: {error}"))),
    }
}

/// The one `{"<name>": params}` entry of an action or operation body;
/// `what` is Senlin's word for it in the messages ("action", "operation").
fn the_one_entry(body: Map<String, Value>, what: &str) -> Result<(String, Value), RestError> {
    if body.len() > 1 {
        return Err(bad_request(format!("Multiple {what}s specified.")));
    }
    body.into_iter()
        .next()
        .ok_or_else(|| bad_request(format!("No {what} specified.")))
}

/// `POST /nodes/{id}/actions`: NODE_CHECK or NODE_RECOVER.
pub async fn node_action(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, RestError> {
    let (action, params) = the_one_entry(object_body(&body)?, "action")?;
    if action == "mark_unhealthy" {
        return mark_unhealthy(&state, &identity, id, &params).await;
    }
    if action != "check" && action != "recover" {
        return Err(bad_request(format!(
            "Unrecognized action '{action}' specified"
        )));
    }
    if !params.is_object() {
        return Err(bad_request("The params provided is not a map."));
    }
    let request = pb::NodeActionRequest {
        node: id,
        params: params.to_string(),
    };
    let request = state.internal_request(&identity, request);
    let response = if action == "check" {
        nodes(&state).check_node(request).await?
    } else {
        nodes(&state).recover_node(request).await?
    }
    .into_inner();
    Ok(accepted(
        &response.action_id,
        json!({ "action": response.action_id }),
    ))
}

/// `{"mark_unhealthy": {"reason"?}}` (Ember's): the node, ERROR now, 200.
async fn mark_unhealthy(
    state: &GatewayState,
    identity: &ember_runtime::Identity,
    node: String,
    params: &Value,
) -> Result<Response, RestError> {
    let Some(params) = params.as_object() else {
        return Err(bad_request("The params provided is not a map."));
    };
    if let Some(unknown) = params.keys().find(|key| key.as_str() != "reason") {
        return Err(bad_request(format!(
            "mark_unhealthy takes only a reason ('{unknown}' was unexpected)"
        )));
    }
    let reason = match params.get("reason") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(reason)) => reason.clone(),
        Some(other) => {
            return Err(bad_request(format!(
                "mark_unhealthy.reason must be a string, got {other}"
            )));
        }
    };
    let marked = nodes(state)
        .mark_node_unhealthy(
            state.internal_request(identity, pb::MarkNodeUnhealthyRequest { node, reason }),
        )
        .await?
        .into_inner();
    Ok(axum::response::IntoResponse::into_response(Json(
        json!({ "node": views::node(&marked) }),
    )))
}

/// `POST /nodes/{id}/ops`: NODE_OPERATION (microversion 1.4 on).
pub async fn node_operation(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, RestError> {
    version.require(ApiVersion::new(1, 4))?;
    let (operation, params) = the_one_entry(object_body(&body)?, "operation")?;
    let params = match params {
        Value::Null => Value::Object(Map::new()),
        params @ Value::Object(_) => params,
        _ => return Err(bad_request("The params provided is not a map.")),
    };
    let request = pb::NodeOperationRequest {
        node: id,
        operation,
        params: params.to_string(),
    };
    let response = nodes(&state)
        .operate_node(state.internal_request(&identity, request))
        .await?
        .into_inner();
    Ok(accepted(
        &response.action_id,
        json!({ "action": response.action_id }),
    ))
}

/// `PATCH /nodes/{id}`: the node as updated, 202 with its NODE_UPDATE.
pub async fn update_node(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, RestError> {
    let body = wrapped(&body, "node")?;
    const FIELDS: [&str; 6] = [
        "name",
        "role",
        "metadata",
        "profile_id",
        "tainted",
        "protected",
    ];
    if let Some(unknown) = body.keys().find(|key| !FIELDS.contains(&key.as_str())) {
        return Err(bad_request(format!(
            "Additional properties are not allowed ('{unknown}' was unexpected)"
        )));
    }
    let tainted = boolean(&body, "tainted")?;
    if tainted.is_some() {
        version.require(ApiVersion::new(1, 13))?;
    }
    let request = pb::UpdateNodeRequest {
        id,
        name: string(&body, "name")?,
        role: string(&body, "role")?,
        tainted,
        metadata: body
            .contains_key("metadata")
            .then(|| json_text(&body, "metadata"))
            .transpose()?,
        profile: string(&body, "profile_id")?,
        // Ember's scale-in protection, at every version.
        protected: boolean(&body, "protected")?,
    };
    let response = nodes(&state)
        .update_node_action(state.internal_request(&identity, request))
        .await?
        .into_inner();
    let node = response
        .node
        .as_ref()
        .map(|node| views::node_at(node, version));
    Ok(accepted(&response.action_id, json!({ "node": node })))
}

/// The body of an adopt or adopt-preview, checked as Senlin's request
/// schema checks it; `fields` are the ones it takes.
fn adoption(body: &[u8], fields: &[&str]) -> Result<pb::AdoptNodeRequest, RestError> {
    let body = object_body(body)?;
    if let Some(unknown) = body.keys().find(|key| !fields.contains(&key.as_str())) {
        return Err(bad_request(format!(
            "Additional properties are not allowed ('{unknown}' was unexpected)"
        )));
    }
    for required in ["identity", "type"] {
        if !body.contains_key(required) {
            return Err(bad_request(format!("'{required}' is a required property")));
        }
    }
    Ok(pb::AdoptNodeRequest {
        identity: string(&body, "identity")?.unwrap_or_default(),
        r#type: string(&body, "type")?.unwrap_or_default(),
        name: string(&body, "name")?.unwrap_or_default(),
        role: string(&body, "role")?.unwrap_or_default(),
        metadata: json_text(&body, "metadata")?,
        overrides: json_text(&body, "overrides")?,
        snapshot: boolean(&body, "snapshot")?.unwrap_or(false),
    })
}

/// `POST /nodes/adopt`: the node made for an existing instance.
pub async fn adopt_node(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    version.require(ApiVersion::new(1, 7))?;
    let request = adoption(
        &body,
        &[
            "identity",
            "type",
            "name",
            "role",
            "metadata",
            "overrides",
            "snapshot",
        ],
    )?;
    let node = nodes(&state)
        .adopt_node(state.internal_request(&identity, request))
        .await?
        .into_inner();
    Ok(Json(json!({ "node": views::node_at(&node, version) })))
}

/// `POST /nodes/adopt-preview`: the profile spec an adoption would make.
pub async fn adopt_preview(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    version.require(ApiVersion::new(1, 7))?;
    let request = adoption(&body, &["identity", "type", "overrides", "snapshot"])?;
    let preview = nodes(&state)
        .preview_adopt_node(state.internal_request(&identity, request))
        .await?
        .into_inner();
    let spec: Value = serde_json::from_str(&preview.spec).unwrap_or(Value::Null);
    Ok(Json(json!({ "node_profile": { "node_preview": spec } })))
}

/// `GET /events/{id}`.
pub async fn show_event(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
) -> Result<Json<Value>, RestError> {
    let event = ActionServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .get_cluster_event(state.internal_request(&identity, pb::GetObjectRequest { id }))
        .await?
        .into_inner();
    Ok(Json(json!({ "event": views::event(&event) })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(error: RestError) -> String {
        format!("{error:?}")
    }

    #[test]
    fn one_action_or_operation_per_body() {
        let one = object_body(br#"{"check": {}}"#).map(|body| the_one_entry(body, "action"));
        assert!(matches!(one, Ok(Ok((name, _))) if name == "check"));
        let none = object_body(b"").and_then(|body| the_one_entry(body, "action"));
        assert!(message(none.expect_err("refused")).contains("No action specified."));
        let two = object_body(br#"{"foo": {}, "bar": {}}"#)
            .and_then(|body| the_one_entry(body, "operation"));
        assert!(message(two.expect_err("refused")).contains("Multiple operations specified."));
    }
}
