//! Heat's software configuration API: `/software_configs` (create, show,
//! list, delete — configs are immutable) and `/software_deployments`
//! (create, show, list by server, update, delete, and the metadata an
//! agent on a server polls), with Heat's bodies: requests unwrapped,
//! answers wrapped in `software_config` / `software_deployment`.

use axum::Json;
use axum::extract::{Path, State};
use bytes::Bytes;
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::software_config_service_client::SoftwareConfigServiceClient;
use ember_proto::engine::v1::software_deployment_service_client::SoftwareDeploymentServiceClient;
use ember_runtime::ErrorKind;
use ember_runtime::in_process::Upstream;
use http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::HeatCaller;
use super::heat_request::{QueryParams, parse_body};
use super::protobuf_json::{json_to_value, struct_to_json};
use crate::GatewayState;
use crate::error::RestError;

fn configs(state: &GatewayState) -> SoftwareConfigServiceClient<Upstream> {
    SoftwareConfigServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

fn deployments(state: &GatewayState) -> SoftwareDeploymentServiceClient<Upstream> {
    SoftwareDeploymentServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

fn invalid(message: impl Into<String>) -> RestError {
    RestError::new(ErrorKind::InvalidInput, message)
}

/// A string field of a body (`null` or absent: empty).
fn text(body: &Map<String, Value>, key: &str) -> Result<String, RestError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(other) => Err(invalid(format!(
            "{key} must be a string, got {}",
            ember_runtime::quote::quoted(&other.to_string())
        ))),
    }
}

fn optional_text(body: &Map<String, Value>, key: &str) -> Result<Option<String>, RestError> {
    Ok(match body.get(key) {
        None | Some(Value::Null) => None,
        Some(_) => Some(text(body, key)?),
    })
}

fn nullable(text: &str) -> Value {
    if text.is_empty() {
        Value::Null
    } else {
        json!(text)
    }
}

fn list_json(list: Option<&prost_types::ListValue>) -> Value {
    ember_runtime::protobuf_json::list_to_json(list)
}

/// Heat's software config, whole (`detail`) or as listed.
fn config_view(config: &pb::SoftwareConfig, detail: bool, admin: bool) -> Value {
    let mut view = json!({
        "id": config.id,
        "name": nullable(&config.name),
        "group": nullable(&config.group),
        "creation_time": config.creation_time,
    });
    if detail {
        view["config"] =
            ember_runtime::protobuf_json::optional_value_to_json(config.config.as_ref());
        view["inputs"] = list_json(config.inputs.as_ref());
        view["outputs"] = list_json(config.outputs.as_ref());
        view["options"] = struct_to_json(config.options.as_ref());
    }
    if admin {
        view["project"] = json!(config.project_id);
    }
    view
}

fn deployment_view(deployment: &pb::SoftwareDeployment) -> Value {
    let mut view = json!({
        "id": deployment.id,
        "server_id": deployment.server_id,
        "config_id": deployment.config_id,
        "input_values": struct_to_json(deployment.input_values.as_ref()),
        "output_values": struct_to_json(deployment.output_values.as_ref()),
        "action": deployment.action,
        "status": deployment.status,
        "status_reason": deployment.status_reason,
        "creation_time": deployment.creation_time,
    });
    if !deployment.updated_time.is_empty() {
        view["updated_time"] = json!(deployment.updated_time);
    }
    view
}

/// `POST /software_configs` with `{name, group, config, inputs, outputs,
/// options}` → 200 `{"software_config": …}` (Heat answers 200).
pub async fn create_config(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let body = parse_body(&body)?;
    let request = pb::CreateSoftwareConfigRequest {
        name: text(&body, "name")?,
        group: text(&body, "group")?,
        config: body.get("config").cloned().map(json_to_value),
        inputs: body.get("inputs").cloned().map(json_to_value),
        outputs: body.get("outputs").cloned().map(json_to_value),
        options: body.get("options").cloned().map(json_to_value),
    };
    let config = configs(&state)
        .create_software_config(state.internal_request(&caller.identity, request))
        .await?
        .into_inner();
    Ok(Json(
        json!({ "software_config": config_view(&config, true, caller.identity.is_admin()) }),
    ))
}

#[derive(Debug, Deserialize)]
pub struct ConfigPath {
    config_id: String,
}

pub async fn show_config(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<ConfigPath>,
) -> Result<Json<Value>, RestError> {
    let config = configs(&state)
        .get_software_config(state.internal_request(
            &caller.identity,
            pb::GetSoftwareConfigRequest { id: path.config_id },
        ))
        .await?
        .into_inner();
    Ok(Json(
        json!({ "software_config": config_view(&config, true, caller.identity.is_admin()) }),
    ))
}

/// `GET /software_configs[?limit&marker&tenant_safe=false]`.
pub async fn list_configs(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    query: QueryParams,
) -> Result<Json<Value>, RestError> {
    query.refuse_unknown(&["limit", "marker", "tenant_safe", "global_tenant"])?;
    let limit = match query.first("limit") {
        None => 0,
        Some(text) => text.trim().parse::<u32>().map_err(|_| {
            invalid(format!(
                "limit must be a whole number, got {:?}",
                ember_runtime::quote::quoted(text)
            ))
        })?,
    };
    let all_projects = query.boolean("global_tenant")?.unwrap_or(false)
        || query.boolean("tenant_safe")? == Some(false);
    let request = pb::ListSoftwareConfigsRequest {
        limit,
        marker: query.first("marker").unwrap_or_default().to_owned(),
        all_projects,
    };
    let listed = configs(&state)
        .list_software_configs(state.internal_request(&caller.identity, request))
        .await?
        .into_inner()
        .software_configs;
    let admin = caller.identity.is_admin();
    let listed: Vec<Value> = listed
        .iter()
        .map(|config| config_view(config, false, admin))
        .collect();
    Ok(Json(json!({ "software_configs": listed })))
}

pub async fn delete_config(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<ConfigPath>,
) -> Result<StatusCode, RestError> {
    configs(&state)
        .delete_software_config(state.internal_request(
            &caller.identity,
            pb::GetSoftwareConfigRequest { id: path.config_id },
        ))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /software_deployments` with `{config_id, server_id, input_values,
/// action, status, status_reason}` → 200 `{"software_deployment": …}`.
pub async fn create_deployment(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let body = parse_body(&body)?;
    let request = pb::CreateSoftwareDeploymentRequest {
        config_id: text(&body, "config_id")?,
        server_id: text(&body, "server_id")?,
        input_values: body.get("input_values").cloned().map(json_to_value),
        action: text(&body, "action")?,
        status: text(&body, "status")?,
        status_reason: text(&body, "status_reason")?,
    };
    if request.config_id.is_empty() {
        return Err(invalid("config_id is required"));
    }
    let deployment = deployments(&state)
        .create_software_deployment(state.internal_request(&caller.identity, request))
        .await?
        .into_inner();
    Ok(Json(
        json!({ "software_deployment": deployment_view(&deployment) }),
    ))
}

#[derive(Debug, Deserialize)]
pub struct DeploymentPath {
    deployment_id: String,
}

pub async fn show_deployment(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<DeploymentPath>,
) -> Result<Json<Value>, RestError> {
    let deployment = deployments(&state)
        .get_software_deployment(state.internal_request(
            &caller.identity,
            pb::GetSoftwareDeploymentRequest {
                id: path.deployment_id,
            },
        ))
        .await?
        .into_inner();
    Ok(Json(
        json!({ "software_deployment": deployment_view(&deployment) }),
    ))
}

/// `GET /software_deployments[?server_id=…]`.
pub async fn list_deployments(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    query: QueryParams,
) -> Result<Json<Value>, RestError> {
    query.refuse_unknown(&["server_id"])?;
    let request = pb::ListSoftwareDeploymentsRequest {
        server_id: query.first("server_id").unwrap_or_default().to_owned(),
    };
    let listed = deployments(&state)
        .list_software_deployments(state.internal_request(&caller.identity, request))
        .await?
        .into_inner()
        .software_deployments;
    let listed: Vec<Value> = listed.iter().map(deployment_view).collect();
    Ok(Json(json!({ "software_deployments": listed })))
}

/// `PUT /software_deployments/{id}`: what the body gives (non-null) is set.
pub async fn update_deployment(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<DeploymentPath>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let body = parse_body(&body)?;
    let present = |key: &str| body.get(key).filter(|value| !value.is_null()).cloned();
    let request = pb::UpdateSoftwareDeploymentRequest {
        id: path.deployment_id,
        config_id: optional_text(&body, "config_id")?,
        input_values: present("input_values").map(json_to_value),
        output_values: present("output_values").map(json_to_value),
        action: optional_text(&body, "action")?,
        status: optional_text(&body, "status")?,
        status_reason: optional_text(&body, "status_reason")?,
    };
    let deployment = deployments(&state)
        .update_software_deployment(state.internal_request(&caller.identity, request))
        .await?
        .into_inner();
    Ok(Json(
        json!({ "software_deployment": deployment_view(&deployment) }),
    ))
}

pub async fn delete_deployment(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<DeploymentPath>,
) -> Result<StatusCode, RestError> {
    deployments(&state)
        .delete_software_deployment(state.internal_request(
            &caller.identity,
            pb::GetSoftwareDeploymentRequest {
                id: path.deployment_id,
            },
        ))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
pub struct ServerPath {
    server_id: String,
}

/// `GET /software_deployments/metadata/{server_id}` → `{"metadata": [the
/// configs of the server's deployments]}`.
pub async fn server_metadata(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<ServerPath>,
) -> Result<Json<Value>, RestError> {
    let metadata = deployments(&state)
        .get_server_metadata(state.internal_request(
            &caller.identity,
            pb::GetServerMetadataRequest {
                server_id: path.server_id,
            },
        ))
        .await?
        .into_inner()
        .metadata;
    let admin = caller.identity.is_admin();
    let metadata: Vec<Value> = metadata
        .iter()
        .map(|config| config_view(config, true, admin))
        .collect();
    Ok(Json(json!({ "metadata": metadata })))
}
