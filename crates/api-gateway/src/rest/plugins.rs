//! The lifecycle plug-ins over REST (Ember's own, under Heat's root as the
//! audit trail is): the registry's list, one plug-in with its circuit, and
//! changes an operator makes from the console or a script — enable,
//! enforce or observe, order, failure mode, timeout, breaker settings,
//! closing a circuit. Registering and removing stay with gRPC and the CLI.
//! The registry decides who may: admins only (403 naming the roles).
//!
//! | call | success |
//! |---|---|
//! | `GET /orchestration/v1/{project_id}/plugins` | 200 `{"plugins": [plugin, …]}` in calling order |
//! | `GET /orchestration/v1/{project_id}/plugins/{name}` | 200 `{"plugin": plugin}` |
//! | `PATCH /orchestration/v1/{project_id}/plugins/{name}` `{"plugin": {enabled?, enforce?, ordinal?, failure_mode?, timeout_ms?, breaker_failures?, breaker_cooldown_ms?, close_circuit?}}` | 200 `{"plugin": plugin}` |

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use ember_proto::common::v1::StackOperation;
use ember_proto::pluginregistry::v1 as pb;
use ember_proto::pluginregistry::v1::plugin_registry_service_client::PluginRegistryServiceClient;
use ember_runtime::ErrorKind;
use serde::Deserialize;
use serde_json::{Value, json};

use super::orchestration::HeatCaller;
use crate::GatewayState;
use crate::error::RestError;

fn client(
    state: &GatewayState,
) -> PluginRegistryServiceClient<ember_runtime::in_process::Upstream> {
    PluginRegistryServiceClient::new(state.upstreams.plugin_registry.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

pub async fn list(
    State(state): State<GatewayState>,
    caller: HeatCaller,
) -> Result<Json<Value>, RestError> {
    let plugins = client(&state)
        .list_plugins(state.internal_request(&caller.identity, pb::ListPluginsRequest {}))
        .await?
        .into_inner()
        .plugins;
    Ok(Json(
        json!({"plugins": plugins.iter().map(view).collect::<Vec<_>>()}),
    ))
}

pub async fn show(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path((_, name)): Path<(String, String)>,
) -> Result<Json<Value>, RestError> {
    let plugin = client(&state)
        .get_plugin(state.internal_request(&caller.identity, pb::GetPluginRequest { name }))
        .await?
        .into_inner();
    Ok(Json(json!({"plugin": view(&plugin)})))
}

/// What a PATCH may change.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Change {
    enabled: Option<bool>,
    enforce: Option<bool>,
    ordinal: Option<i32>,
    failure_mode: Option<String>,
    timeout_ms: Option<u32>,
    breaker_failures: Option<u32>,
    breaker_cooldown_ms: Option<u32>,
    #[serde(default)]
    close_circuit: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChangeBody {
    plugin: Change,
}

pub async fn update(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path((_, name)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let ChangeBody { plugin: change } = serde_json::from_slice(&body).map_err(|error| {
        RestError::new(
            ErrorKind::InvalidInput,
            format!(
                "the body must be {{\"plugin\": {{enabled, enforce, ordinal, failure_mode, timeout_ms, \
                 breaker_failures, breaker_cooldown_ms, close_circuit}}}}: {error}"
            ),
        )
    })?;
    let failure_mode = change
        .failure_mode
        .as_deref()
        .map(|mode| match mode {
            "fail" => Ok(pb::FailureMode::Fail as i32),
            "warn" => Ok(pb::FailureMode::Warn as i32),
            other => Err(RestError::new(
                ErrorKind::InvalidInput,
                format!("plugin.failure_mode: {other:?} is not one of \"fail\", \"warn\""),
            )),
        })
        .transpose()?;
    let request = pb::UpdatePluginRequest {
        name,
        enabled: change.enabled,
        enforce: change.enforce,
        ordinal: change.ordinal,
        failure_mode,
        timeout_ms: change.timeout_ms,
        breaker_failures: change.breaker_failures,
        breaker_cooldown_ms: change.breaker_cooldown_ms,
        close_circuit: change.close_circuit,
        ..pb::UpdatePluginRequest::default()
    };
    let plugin = client(&state)
        .update_plugin(state.internal_request(&caller.identity, request))
        .await?
        .into_inner();
    Ok(Json(json!({"plugin": view(&plugin)})))
}

fn time(timestamp: Option<&prost_types::Timestamp>) -> Value {
    super::rfc3339(timestamp, chrono::SecondsFormat::Millis)
}

fn view(plugin: &pb::Plugin) -> Value {
    let operations: Vec<String> = plugin
        .operations
        .iter()
        .filter_map(|operation| StackOperation::try_from(*operation).ok())
        .map(|operation| {
            operation
                .as_str_name()
                .trim_start_matches("STACK_OPERATION_")
                .to_ascii_lowercase()
        })
        .collect();
    let failure_mode = match pb::FailureMode::try_from(plugin.failure_mode) {
        Ok(pb::FailureMode::Warn) => "warn",
        _ => "fail",
    };
    let circuit = plugin.circuit.clone().unwrap_or_default();
    let state = match pb::CircuitState::try_from(circuit.state) {
        Ok(pb::CircuitState::Open) => "OPEN",
        Ok(pb::CircuitState::HalfOpen) => "HALF_OPEN",
        _ => "CLOSED",
    };
    json!({
        "name": plugin.name,
        "endpoint": plugin.endpoint,
        "ordinal": plugin.ordinal,
        "operations": operations,
        "project_ids": plugin.project_ids,
        "failure_mode": failure_mode,
        "timeout_ms": plugin.timeout_ms,
        "enabled": plugin.enabled,
        "enforce": plugin.enforce,
        "breaker_failures": plugin.breaker_failures,
        "breaker_cooldown_ms": plugin.breaker_cooldown_ms,
        "circuit": {
            "state": state,
            "consecutive_failures": circuit.consecutive_failures,
            "opened_at": time(circuit.opened_at.as_ref()),
            "open_until": time(circuit.open_until.as_ref()),
            "last_failure": (!circuit.last_failure.is_empty()).then_some(circuit.last_failure),
        },
        "created_at": time(plugin.created_at.as_ref()),
        "updated_at": time(plugin.updated_at.as_ref()),
    })
}
