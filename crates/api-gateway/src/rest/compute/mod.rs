//! The Compute instances API (Mogan style), at `/compute/v1`: instances and
//! their maintenance lock (spec `mogan-lock-instance-api`). Bodies are read
//! here, strictly — a missing or mistyped key, or one this API does not
//! know, is a 400 naming it — and every decision is the engine's.
//!
//! | call | success |
//! |---|---|
//! | `POST /instances` `{"instance": {name, flavor, image, metadata?, user_data?, command?, env?, networks?, security_groups?, key_name?}}` | 202 `{"instance": …}` |
//! | `GET /instances?status=&locked=&name=&limit=&marker=&all_projects=` | 200 `{"instances": […]}` |
//! | `GET /instances/{uuid}` | 200 `{"instance": …}` |
//! | `PATCH /instances/{uuid}` `{name?, metadata?}` | 200 `{"instance": …}` |
//! | `DELETE /instances/{uuid}` | 202 (DELETING; once done, the instance answers 404, as in Nova) |
//! | `PUT /instances/{uuid}/states/power` `{"target": "on"\|"off"\|"reboot"}` | 202 |
//! | `PUT /instances/{uuid}/lock` `{"target": true\|false, "reason"?}` | 202 |
//! | `GET /instances/{uuid}/events?limit=` | 200 `{"events": […]}` (task outcomes and observations of the machine, oldest first) |
//!
//! `user_data` is base64, as Nova and Mogan take it; `command` is a list of
//! strings and `env` an object of strings (Ember's additions: with the
//! docker driver, the container's command and environment).

mod request_body;
mod view;

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Json, Router};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::instance_service_client::InstanceServiceClient;
use ember_runtime::ids::parse_uuid;
use http::StatusCode;
use serde_json::{Value, json};

use self::request_body::{
    bad_request, json_object, metadata, networks, query_bool, refuse_unknown_keys, required_string,
    string_list, string_map, unwrap_instance, user_data,
};
use self::view::{event_view, instance_view, self_link};
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
        .route("/instances/{uuid}/events", get(list_events))
        .route("/instances/{uuid}/allowed", get(super::allowed::instance))
}

fn client(state: &GatewayState) -> InstanceServiceClient<ember_runtime::in_process::Upstream> {
    InstanceServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

async fn create_instance(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    body: Bytes,
) -> Result<Response, RestError> {
    let body = unwrap_instance(json_object(&body)?)?;
    refuse_unknown_keys(
        &body,
        &[
            "name",
            "flavor",
            "image",
            "metadata",
            "user_data",
            "command",
            "env",
            "networks",
            "security_groups",
            "key_name",
        ],
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
        user_data: match body.get("user_data") {
            None | Some(Value::Null) => String::new(),
            Some(value) => user_data(value)?,
        },
        command: match body.get("command") {
            None | Some(Value::Null) => Vec::new(),
            Some(value) => string_list("command", value)?,
        },
        env: match body.get("env") {
            None | Some(Value::Null) => HashMap::new(),
            Some(value) => string_map("env", value)?,
        },
        networks: match body.get("networks") {
            None | Some(Value::Null) => Vec::new(),
            Some(value) => networks(value)?,
        },
        security_groups: match body.get("security_groups") {
            None | Some(Value::Null) => Vec::new(),
            Some(value) => string_list("security_groups", value)?,
        },
        key_name: match body.get("key_name") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(name)) => name.clone(),
            Some(other) => {
                return Err(request_body::bad_request(format!(
                    "key_name: must be a string (got {other})"
                )));
            }
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
                "status: {text:?} is not an instance status: use BUILDING, ACTIVE, STOPPED, REBOOTING, ERROR or DELETING (an instance whose delete completed is gone: never listed, 404)"
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

async fn list_events(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(uuid): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, RestError> {
    let uuid = parse_uuid("instance uuid", &uuid)?.to_string();
    if let Some(unknown) = query.keys().find(|key| key.as_str() != "limit") {
        return Err(bad_request(format!(
            "unknown query parameter {unknown:?}: only limit is known"
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
    let response = client(&state)
        .list_instance_events(
            state.internal_request(&identity, pb::ListInstanceEventsRequest { uuid, limit }),
        )
        .await?
        .into_inner();
    Ok(Json(json!({
        "events": response.events.iter().map(event_view).collect::<Vec<_>>(),
    })))
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
    refuse_unknown_keys(
        &body,
        &["target", "reason", "expires_in", "expires_at"],
        "a lock request",
    )?;
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
    let expires_in = match body.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(Value::Number(seconds)) => Some(seconds.as_i64().ok_or_else(|| {
            bad_request(format!("expires_in: must be whole seconds (got {seconds})"))
        })?),
        Some(other) => {
            return Err(bad_request(format!(
                "expires_in: must be whole seconds (got {other})"
            )));
        }
    };
    let expires_at = match body.get("expires_at") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => {
            let at = chrono::DateTime::parse_from_rfc3339(text).map_err(|_| {
                bad_request(format!(
                    "expires_at: {text:?} is not an ISO 8601 time with its offset (2026-11-29T12:00:00Z)"
                ))
            })?;
            Some(ember_runtime::time::to_timestamp(
                at.with_timezone(&chrono::Utc),
            ))
        }
        Some(other) => {
            return Err(bad_request(format!(
                "expires_at: must be an ISO 8601 time (got {other})"
            )));
        }
    };
    let mut engine = client(&state);
    if target {
        let request = pb::LockInstanceRequest {
            uuid,
            reason,
            expires_in,
            expires_at,
        };
        engine
            .lock_instance(state.internal_request(&identity, request))
            .await?;
    } else {
        if reason.is_some() {
            return Err(bad_request(
                "reason: only a lock (\"target\": true) takes a reason",
            ));
        }
        if expires_in.is_some() || expires_at.is_some() {
            return Err(bad_request(
                "expires_in, expires_at: only a lock (\"target\": true) expires",
            ));
        }
        let request = pb::UnlockInstanceRequest { uuid };
        engine
            .unlock_instance(state.internal_request(&identity, request))
            .await?;
    }
    Ok(StatusCode::ACCEPTED)
}
