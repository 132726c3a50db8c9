//! Receivers (`/receivers`) and the webhook trigger
//! (`POST /webhooks/{id}/trigger?V=2`). The trigger takes no token: the
//! receiver id in its URL is the credential, and the engine runs the
//! receiver's action as the receiver's creator.
//!
//! | call | success |
//! |---|---|
//! | `POST /receivers` `{"receiver": {name, type, cluster_id?, action?, params?}}` | 201 `{"receiver": …}` |
//! | `GET /receivers?name=&type=&cluster_id=&action=&user=&limit=&marker=&sort=&global_project=` | 200 `{"receivers": […]}` |
//! | `GET\|PATCH\|DELETE /receivers/{id}` | 200 / 200 / 204 |
//! | `POST /receivers/{id}/notify` (a message receiver's creator or an admin) | 204 |
//! | `POST /webhooks/{id}/trigger?V=2` (body: params, optional) | 202 `{"action": id}` |

use std::collections::HashMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::receiver_service_client::ReceiverServiceClient;
use ember_runtime::Identity;
use http::StatusCode;
use serde_json::{Map, Value, json};

use super::lists::{self, ACTION_NAMES, ListQuery, ListRules};
use super::views::{document, optional, time};
use super::{accepted, bad_request, json_text, only, required, string, wrapped};
use crate::GatewayState;
use crate::error::RestError;
use crate::rest::Authenticated;

fn client(state: &GatewayState) -> ReceiverServiceClient<ember_runtime::in_process::Upstream> {
    ReceiverServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

/// Senlin's view of a receiver.
fn view(receiver: &pb::Receiver) -> Value {
    json!({
        "id": receiver.id,
        "name": receiver.name,
        "type": receiver.r#type,
        "cluster_id": optional(&receiver.cluster_id),
        "action": optional(&receiver.action),
        "params": document(&receiver.params),
        "actor": document(&receiver.actor),
        "channel": document(&receiver.channel),
        "user": receiver.user_id,
        "project": receiver.project_id,
        "domain": null,
        "created_at": time(receiver.created_at.as_ref()),
        "updated_at": time(receiver.updated_at.as_ref()),
    })
}

fn shown(receiver: &pb::Receiver) -> Json<Value> {
    Json(json!({ "receiver": view(receiver) }))
}

pub async fn create_receiver(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    body: Bytes,
) -> Result<Response, RestError> {
    let body = wrapped(&body, "receiver")?;
    only(
        &body,
        &["name", "type", "cluster_id", "action", "actor", "params"],
    )?;
    let request = pb::CreateReceiverRequest {
        name: required(&body, "name")?,
        r#type: required(&body, "type")?,
        cluster: string(&body, "cluster_id")?.unwrap_or_default(),
        action: string(&body, "action")?.unwrap_or_default(),
        params: json_text(&body, "params")?,
    };
    let receiver = client(&state)
        .create_receiver(state.internal_request(&identity, request))
        .await?
        .into_inner();
    Ok((StatusCode::CREATED, shown(&receiver)).into_response())
}

/// What `GET /receivers` takes (Senlin's receiver list).
const RECEIVER_LIST: ListRules = ListRules {
    filters: &["name", "type", "cluster_id", "action", "user"],
    sort_keys: &["name", "type", "action", "cluster_id", "created_at", "user"],
    enumerated: &[("type", &["webhook", "message"]), ("action", ACTION_NAMES)],
    quote_unknown: false,
};

/// The engine's list request for a checked query (one value per filter).
fn list_request(query: &ListQuery) -> pb::ListReceiversRequest {
    pb::ListReceiversRequest {
        limit: query.limit,
        marker: query.marker.clone(),
        sort: query.sort.clone(),
        global_project: query.global_project,
        name: query.first("name"),
        r#type: query.first("type"),
        cluster_id: query.first("cluster_id"),
        action: query.first("action"),
        user_id: query.first("user"),
    }
}

pub async fn list_receivers(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    location: lists::ListLocation,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, RestError> {
    let request = list_request(&ListQuery::parse(&pairs, &RECEIVER_LIST)?);
    let limit = request.limit;
    let receivers = client(&state)
        .list_receivers(state.internal_request(&identity, request))
        .await?
        .into_inner()
        .receivers;
    Ok(lists::paged(
        "receivers",
        &receivers,
        view,
        |object| &object.id,
        limit,
        &location,
    ))
}

pub async fn show_receiver(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
) -> Result<Json<Value>, RestError> {
    let receiver = client(&state)
        .get_receiver(state.internal_request(&identity, pb::GetReceiverRequest { id }))
        .await?
        .into_inner();
    Ok(shown(&receiver))
}

pub async fn update_receiver(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let body = wrapped(&body, "receiver")?;
    only(&body, &["name", "action", "params"])?;
    let params = match body.get("params") {
        None | Some(Value::Null) => None,
        Some(_) => Some(json_text(&body, "params")?),
    };
    let request = pb::UpdateReceiverRequest {
        id,
        name: string(&body, "name")?,
        action: string(&body, "action")?,
        params,
    };
    let receiver = client(&state)
        .update_receiver(state.internal_request(&identity, request))
        .await?
        .into_inner();
    Ok(shown(&receiver))
}

pub async fn delete_receiver(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
) -> Result<StatusCode, RestError> {
    client(&state)
        .delete_receiver(state.internal_request(&identity, pb::GetReceiverRequest { id }))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /receivers/{id}/notify` (Senlin's): the message receiver's
/// pending messages run now; any body is ignored, as Senlin does.
pub async fn notify_receiver(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
) -> Result<StatusCode, RestError> {
    client(&state)
        .notify_receiver(state.internal_request(&identity, pb::GetReceiverRequest { id }))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Who fires a webhook: whoever holds its URL. The engine runs the action
/// as the receiver's creator, never as this identity.
fn webhook_identity() -> Identity {
    Identity::new(
        "webhook-trigger",
        "ember-webhooks",
        vec!["webhook".to_owned()],
    )
}

/// The trigger's params: the body's JSON object (version 2), or its
/// `params` object (version 1's `{"params": {…}}`); none when empty.
fn trigger_params(body: &[u8]) -> Result<String, RestError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(String::new());
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| bad_request(format!("the body is not JSON: {error}")))?;
    let params = match value {
        Value::Null => return Ok(String::new()),
        Value::Object(mut object) => match object.remove("params") {
            Some(Value::Object(params)) if object.is_empty() => params,
            Some(Value::Null) if object.is_empty() => Map::new(),
            Some(other) => {
                object.insert("params".into(), other);
                object
            }
            None => object,
        },
        _ => return Err(bad_request("the body must be a JSON object of params")),
    };
    Ok(Value::Object(params).to_string())
}

/// `POST /webhooks/{id}/trigger?V=2`: no token; 202 naming the action.
pub async fn trigger_webhook(
    State(state): State<GatewayState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> Result<Response, RestError> {
    if !query.contains_key("V") {
        return Err(bad_request(
            "V query parameter is required in webhook trigger URL",
        ));
    }
    let request = pb::TriggerWebhookRequest {
        id,
        params: trigger_params(&body)?,
    };
    let response = client(&state)
        .trigger_webhook(state.internal_request(&webhook_identity(), request))
        .await?
        .into_inner();
    Ok(accepted(
        &response.action_id,
        json!({ "action": response.action_id }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigger_params_take_either_version() {
        assert_eq!(trigger_params(b"").unwrap(), "");
        assert_eq!(trigger_params(b"null").unwrap(), "");
        assert_eq!(
            trigger_params(br#"{"params": {"count": 2}}"#).unwrap(),
            r#"{"count":2}"#
        );
        assert_eq!(
            trigger_params(br#"{"count": 2}"#).unwrap(),
            r#"{"count":2}"#
        );
        assert!(trigger_params(b"[1]").is_err());
        assert!(trigger_params(b"{").is_err());
    }
}
