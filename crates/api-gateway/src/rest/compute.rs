//! The Compute instances API (Mogan style), at `/compute/v1`: instances and
//! their maintenance lock (spec `mogan-lock-instance-api`). Bodies are read
//! here, strictly — a missing or mistyped key, or one this API does not
//! know, is a 400 naming it — and every decision is the engine's.
//!
//! | call | success |
//! |---|---|
//! | `POST /instances` `{"instance": {name, flavor, image, metadata?}}` | 202 `{"instance": …}` |
//! | `GET /instances?status=&locked=&name=&limit=&marker=&all_projects=` | 200 `{"instances": […]}` |
//! | `GET /instances/{uuid}` | 200 `{"instance": …}` |
//! | `PATCH /instances/{uuid}` `{name?, metadata?}` | 200 `{"instance": …}` |
//! | `DELETE /instances/{uuid}` | 202 |
//! | `PUT /instances/{uuid}/states/power` `{"target": "on"\|"off"\|"reboot"}` | 202 |
//! | `PUT /instances/{uuid}/lock` `{"target": true\|false, "reason"?}` | 202 |

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Json, Router};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::instance_service_client::InstanceServiceClient;
use ember_runtime::ErrorKind;
use http::StatusCode;
use serde_json::{Map, Value, json};

use super::Authenticated;
use crate::GatewayState;
use crate::error::RestError;

pub fn routes() -> Router<GatewayState> {
    Router::new()
        .route("/instances", get(list_instances).post(create_instance))
        .route(
            "/instances/{uuid}",
            get(show_instance)
                .patch(update_instance)
                .delete(delete_instance),
        )
        .route("/instances/{uuid}/states/power", put(set_power_state))
        .route("/instances/{uuid}/lock", put(set_lock))
}

fn client(state: &GatewayState) -> InstanceServiceClient<tonic::transport::Channel> {
    InstanceServiceClient::new(state.upstreams.engine.clone())
}

fn bad_request(message: impl Into<String>) -> RestError {
    RestError::new(ErrorKind::InvalidInput, message)
}

async fn create_instance(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    body: Bytes,
) -> Result<Response, RestError> {
    let body = unwrap_instance(json_object(&body)?)?;
    refuse_unknown_keys(
        &body,
        &["name", "flavor", "image", "metadata"],
        "an instance",
    )?;
    let request = pb::CreateInstanceRequest {
        name: required_string(&body, "name")?,
        flavor: required_string(&body, "flavor")?,
        image: required_string(&body, "image")?,
        metadata: match body.get("metadata") {
            None | Some(Value::Null) => HashMap::new(),
            Some(value) => metadata(value)?,
        },
    };
    let instance = client(&state)
        .create_instance(state.internal_request(&identity, request))
        .await?
        .into_inner();
    let location = self_link(&instance.uuid);
    Ok((
        StatusCode::ACCEPTED,
        [(http::header::LOCATION, location)],
        Json(json!({ "instance": instance_view(&instance) })),
    )
        .into_response())
}

async fn list_instances(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, RestError> {
    let known = [
        "limit",
        "marker",
        "name",
        "status",
        "locked",
        "all_projects",
    ];
    if let Some(unknown) = query.keys().find(|key| !known.contains(&key.as_str())) {
        return Err(bad_request(format!(
            "unknown query parameter {unknown:?}: filter with {}",
            known.join(", ")
        )));
    }
    let limit = match query.get("limit") {
        None => 0,
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|limit| (1..=1000).contains(limit))
            .ok_or_else(|| {
                bad_request(format!(
                    "limit: must be a number from 1 to 1000 (got {text:?})"
                ))
            })?,
    };
    let marker = match query.get("marker") {
        None => String::new(),
        Some(marker) => parse_uuid("marker", marker)?.to_string(),
    };
    let status = match query.get("status") {
        None => pb::InstanceStatus::Unspecified,
        Some(text) => pb::InstanceStatus::from_str_name(&format!(
            "INSTANCE_STATUS_{}",
            text.to_ascii_uppercase()
        ))
        .filter(|status| *status != pb::InstanceStatus::Unspecified)
        .ok_or_else(|| {
            bad_request(format!(
                "status: {text:?} is not an instance status: use BUILDING, ACTIVE, STOPPED, REBOOTING, ERROR, DELETING or DELETED"
            ))
        })?,
    };
    let request = pb::ListInstancesRequest {
        limit,
        marker,
        name: query.get("name").cloned().unwrap_or_default(),
        status: status as i32,
        locked: query
            .get("locked")
            .map(|text| query_bool("locked", text))
            .transpose()?,
        all_projects: query
            .get("all_projects")
            .map(|text| query_bool("all_projects", text))
            .transpose()?
            .unwrap_or(false),
    };
    let response = client(&state)
        .list_instances(state.internal_request(&identity, request))
        .await?
        .into_inner();
    let mut body = json!({
        "instances": response.instances.iter().map(instance_view).collect::<Vec<_>>(),
    });
    if !response.next_marker.is_empty() {
        let mut next = format!("/compute/v1/instances?marker={}", response.next_marker);
        if limit != 0 {
            next.push_str(&format!("&limit={limit}"));
        }
        body["instances_links"] = json!([{ "rel": "next", "href": next }]);
    }
    Ok(Json(body))
}

async fn show_instance(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(uuid): Path<String>,
) -> Result<Json<Value>, RestError> {
    let uuid = parse_uuid("instance uuid", &uuid)?.to_string();
    let instance = client(&state)
        .get_instance(state.internal_request(&identity, pb::GetInstanceRequest { uuid }))
        .await?
        .into_inner();
    Ok(Json(json!({ "instance": instance_view(&instance) })))
}

async fn update_instance(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(uuid): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let uuid = parse_uuid("instance uuid", &uuid)?.to_string();
    let body = unwrap_instance(json_object(&body)?)?;
    refuse_unknown_keys(&body, &["name", "metadata"], "an instance update")?;
    let name = match body.get("name") {
        None => None,
        Some(Value::String(name)) => Some(name.clone()),
        Some(other) => return Err(bad_request(format!("name: must be a string (got {other})"))),
    };
    let metadata = body
        .get("metadata")
        .map(|value| metadata(value).map(|items| pb::InstanceMetadata { items }))
        .transpose()?;
    if name.is_none() && metadata.is_none() {
        return Err(bad_request(
            "nothing to update: give \"name\" and/or \"metadata\"",
        ));
    }
    let request = pb::UpdateInstanceRequest {
        uuid,
        name,
        metadata,
    };
    let instance = client(&state)
        .update_instance(state.internal_request(&identity, request))
        .await?
        .into_inner();
    Ok(Json(json!({ "instance": instance_view(&instance) })))
}

async fn delete_instance(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(uuid): Path<String>,
) -> Result<StatusCode, RestError> {
    let uuid = parse_uuid("instance uuid", &uuid)?.to_string();
    client(&state)
        .delete_instance(state.internal_request(&identity, pb::DeleteInstanceRequest { uuid }))
        .await?;
    Ok(StatusCode::ACCEPTED)
}

async fn set_power_state(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(uuid): Path<String>,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    let uuid = parse_uuid("instance uuid", &uuid)?.to_string();
    let body = json_object(&body)?;
    refuse_unknown_keys(&body, &["target"], "a power request")?;
    let target = match body.get("target") {
        None => {
            return Err(bad_request(
                "target: missing: give \"on\", \"off\" or \"reboot\"",
            ));
        }
        Some(Value::String(target)) if target == "on" => pb::PowerAction::On,
        Some(Value::String(target)) if target == "off" => pb::PowerAction::Off,
        Some(Value::String(target)) if target == "reboot" => pb::PowerAction::Reboot,
        Some(other) => {
            return Err(bad_request(format!(
                "target: must be \"on\", \"off\" or \"reboot\" (got {other})"
            )));
        }
    };
    let request = pb::SetPowerStateRequest {
        uuid,
        target: target as i32,
    };
    client(&state)
        .set_power_state(state.internal_request(&identity, request))
        .await?;
    Ok(StatusCode::ACCEPTED)
}

async fn set_lock(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(uuid): Path<String>,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    let uuid = parse_uuid("instance uuid", &uuid)?.to_string();
    let body = json_object(&body)?;
    refuse_unknown_keys(&body, &["target", "reason"], "a lock request")?;
    let target = match body.get("target") {
        None => {
            return Err(bad_request(
                "target: missing: give true to lock or false to unlock",
            ));
        }
        Some(Value::Bool(target)) => *target,
        Some(other) => {
            return Err(bad_request(format!(
                "target: must be true or false (got {other})"
            )));
        }
    };
    let reason = match body.get("reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(reason)) => {
            let length = reason.chars().count();
            if !(1..=255).contains(&length) {
                return Err(bad_request(format!(
                    "reason: must be 1-255 characters (got {length})"
                )));
            }
            Some(reason.clone())
        }
        Some(other) => {
            return Err(bad_request(format!(
                "reason: must be a string (got {other})"
            )));
        }
    };
    let mut engine = client(&state);
    if target {
        let request = pb::LockInstanceRequest { uuid, reason };
        engine
            .lock_instance(state.internal_request(&identity, request))
            .await?;
    } else {
        if reason.is_some() {
            return Err(bad_request(
                "reason: only a lock (\"target\": true) takes a reason",
            ));
        }
        let request = pb::UnlockInstanceRequest { uuid };
        engine
            .unlock_instance(state.internal_request(&identity, request))
            .await?;
    }
    Ok(StatusCode::ACCEPTED)
}

/// The body as a JSON object.
fn json_object(body: &[u8]) -> Result<Map<String, Value>, RestError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(other) => Err(bad_request(format!(
            "the body must be a JSON object (got {})",
            kind_of(&other)
        ))),
        Err(error) => Err(bad_request(format!("the body is not JSON: {error}"))),
    }
}

/// `{"instance": {…}}` or the bare object.
fn unwrap_instance(body: Map<String, Value>) -> Result<Map<String, Value>, RestError> {
    match body.get("instance") {
        Some(Value::Object(inner)) if body.len() == 1 => Ok(inner.clone()),
        Some(other) if body.len() == 1 => Err(bad_request(format!(
            "instance: must be an object (got {})",
            kind_of(other)
        ))),
        _ => Ok(body),
    }
}

fn refuse_unknown_keys(
    body: &Map<String, Value>,
    allowed: &[&str],
    what: &str,
) -> Result<(), RestError> {
    match body.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(unknown) => Err(bad_request(format!(
            "unknown key {unknown:?}: {what} takes only {}",
            allowed
                .iter()
                .map(|key| format!("{key:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        None => Ok(()),
    }
}

fn required_string(body: &Map<String, Value>, key: &str) -> Result<String, RestError> {
    match body.get(key) {
        Some(Value::String(text)) => Ok(text.clone()),
        None | Some(Value::Null) => Err(bad_request(format!("{key}: missing"))),
        Some(other) => Err(bad_request(format!(
            "{key}: must be a string (got {})",
            kind_of(other)
        ))),
    }
}

fn metadata(value: &Value) -> Result<HashMap<String, String>, RestError> {
    let Value::Object(items) = value else {
        return Err(bad_request(format!(
            "metadata: must be an object of strings (got {})",
            kind_of(value)
        )));
    };
    items
        .iter()
        .map(|(key, value)| match value {
            Value::String(text) => Ok((key.clone(), text.clone())),
            other => Err(bad_request(format!(
                "metadata {key:?}: values must be strings (got {})",
                kind_of(other)
            ))),
        })
        .collect()
}

fn parse_uuid(what: &str, text: &str) -> Result<uuid::Uuid, RestError> {
    uuid::Uuid::parse_str(text).map_err(|_| bad_request(format!("{what}: {text:?} is not a UUID")))
}

fn query_bool(key: &str, text: &str) -> Result<bool, RestError> {
    match text.to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(bad_request(format!(
            "{key}: must be true or false (got {text:?})"
        ))),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn self_link(uuid: &str) -> String {
    format!("/compute/v1/instances/{uuid}")
}

fn time(timestamp: Option<&prost_types::Timestamp>) -> Value {
    timestamp
        .and_then(|time| chrono::DateTime::from_timestamp(time.seconds, 0))
        .map(|time| Value::String(time.format("%Y-%m-%dT%H:%M:%SZ").to_string()))
        .unwrap_or(Value::Null)
}

fn text_or_null(text: &str) -> Value {
    if text.is_empty() {
        Value::Null
    } else {
        Value::String(text.to_owned())
    }
}

/// An instance as this API shows it.
fn instance_view(instance: &pb::Instance) -> Value {
    let status = pb::InstanceStatus::try_from(instance.status)
        .ok()
        .and_then(|status| {
            status
                .as_str_name()
                .strip_prefix("INSTANCE_STATUS_")
                .map(str::to_owned)
        })
        .unwrap_or_default();
    let power_state = pb::PowerState::try_from(instance.power_state)
        .ok()
        .and_then(|state| {
            state
                .as_str_name()
                .strip_prefix("POWER_STATE_")
                .map(|name| name.to_ascii_lowercase().replace('_', "-"))
        })
        .unwrap_or_default();
    let locked_by = match pb::LockedBy::try_from(instance.locked_by) {
        Ok(pb::LockedBy::Owner) => json!("owner"),
        Ok(pb::LockedBy::Admin) => json!("admin"),
        _ => Value::Null,
    };
    json!({
        "uuid": instance.uuid,
        "name": instance.name,
        "project_id": instance.project_id,
        "user_id": instance.user_id,
        "flavor": instance.flavor,
        "image": instance.image,
        "metadata": instance.metadata.iter().collect::<std::collections::BTreeMap<_, _>>(),
        "status": status,
        "power_state": power_state,
        "status_reason": text_or_null(&instance.status_reason),
        "locked": instance.locked,
        "locked_by": locked_by,
        "locked_by_user": text_or_null(&instance.locked_by_user),
        "locked_at": time(instance.locked_at.as_ref()),
        "locked_reason": text_or_null(&instance.locked_reason),
        "created_at": time(instance.created_at.as_ref()),
        "updated_at": time(instance.updated_at.as_ref()),
        "links": [{ "href": self_link(&instance.uuid), "rel": "self" }],
    })
}
