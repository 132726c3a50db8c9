//! What a stack was made from and what it gives back: its template,
//! environment and files as stored, and its outputs resolved now.

use axum::Json;
use axum::extract::{Path, State};
use ember_proto::engine::v1 as pb;
use serde::Deserialize;
use serde_json::{Value, json};

use super::heat_view;
use super::protobuf_json::struct_to_json;
use super::{HeatCaller, StackPath, identified_stack, stack_service};
use crate::GatewayState;
use crate::error::RestError;

async fn stack_template(
    state: &GatewayState,
    caller: &HeatCaller,
    path: &StackPath,
) -> Result<pb::StackTemplate, RestError> {
    let stack = identified_stack(state, &caller.identity, path).await?;
    Ok(stack_service(state)
        .get_stack_template(
            state.internal_request(&caller.identity, pb::GetStackRequest { stack: stack.id }),
        )
        .await?
        .into_inner())
}

/// `GET …/template`: the template object.
pub async fn template(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackPath>,
) -> Result<Json<Value>, RestError> {
    let stored = stack_template(&state, &caller, &path).await?;
    Ok(Json(struct_to_json(stored.template.as_ref())))
}

/// `GET …/environment`: the merged environment object.
pub async fn environment(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackPath>,
) -> Result<Json<Value>, RestError> {
    let stored = stack_template(&state, &caller, &path).await?;
    Ok(Json(struct_to_json(stored.environment.as_ref())))
}

/// `GET …/files`: file name → content.
pub async fn files(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackPath>,
) -> Result<Json<Value>, RestError> {
    let stored = stack_template(&state, &caller, &path).await?;
    let files: serde_json::Map<String, Value> = stored
        .files
        .into_iter()
        .map(|(name, content)| (name, Value::String(content)))
        .collect();
    Ok(Json(Value::Object(files)))
}

/// `GET …/outputs`: `{"outputs": [{"output_key", "description"}]}`.
pub async fn list_outputs(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackPath>,
) -> Result<Json<Value>, RestError> {
    let stack = identified_stack(&state, &caller.identity, &path).await?;
    let response = stack_service(&state)
        .list_outputs(
            state.internal_request(&caller.identity, pb::GetStackRequest { stack: stack.id }),
        )
        .await?
        .into_inner();
    let outputs: Vec<Value> = response
        .outputs
        .iter()
        .map(heat_view::output_summary)
        .collect();
    Ok(Json(json!({ "outputs": outputs })))
}

#[derive(Debug, Deserialize)]
pub struct OutputPath {
    stack_name: String,
    stack_id: String,
    output_key: String,
}

/// `GET …/outputs/{key}`: `{"output": {"output_key", "output_value",
/// "description", "output_error"?}}`.
pub async fn show_output(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<OutputPath>,
) -> Result<Json<Value>, RestError> {
    let stack_path = StackPath {
        stack_name: path.stack_name,
        stack_id: path.stack_id,
    };
    let stack = identified_stack(&state, &caller.identity, &stack_path).await?;
    let request = pb::GetOutputRequest {
        stack: stack.id,
        output_key: path.output_key,
    };
    let output = stack_service(&state)
        .get_output(state.internal_request(&caller.identity, request))
        .await?
        .into_inner();
    Ok(Json(json!({ "output": heat_view::output_detail(&output) })))
}
