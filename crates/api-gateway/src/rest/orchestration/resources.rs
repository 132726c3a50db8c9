//! A stack's resources: the list (with Heat's filters, which the engine
//! applies in its query), one resource with its attributes, and its
//! metadata. Also marking a resource unhealthy (PATCH) and signalling it
//! (POST …/signal), both 200 with an empty body as Heat answers.

use axum::Json;
use axum::extract::{Path, State};
use bytes::Bytes;
use ember_proto::engine::v1 as pb;
use ember_runtime::Identity;
use http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::heat_request::{self, QueryParams, invalid};
use super::heat_view;
use super::protobuf_json::{json_to_value, struct_to_json};
use super::{HeatCaller, StackPath, identified_stack, resource_service};
use crate::GatewayState;
use crate::error::RestError;

/// The query keys `GET …/resources` takes; Heat refuses others.
const RESOURCE_LIST_QUERY: &[&str] = &[
    "type",
    "status",
    "name",
    "action",
    "id",
    "physical_resource_id",
    "nested_depth",
    "with_detail",
];

/// `GET …/resources?nested_depth=N&type=T&status=S…`.
pub async fn list_resources(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<StackPath>,
    query: QueryParams,
) -> Result<Json<Value>, RestError> {
    query.refuse_unknown(RESOURCE_LIST_QUERY)?;
    let nested_depth = query.whole_number("nested_depth")?.unwrap_or(0);
    // Accepted for Heat clients; list entries carry no attributes either way.
    query.boolean("with_detail")?;
    let mut physical_resource_ids = query.all("physical_resource_id");
    // Ember resources have no id of their own apart from the physical one.
    physical_resource_ids.extend(query.all("id"));
    let stack = identified_stack(&state, &caller.identity, &path).await?;
    let request = pb::ListResourcesRequest {
        stack: stack.id,
        nested_depth,
        types: query.all("type"),
        statuses: query.all("status"),
        names: query.all("name"),
        actions: query.all("action"),
        physical_resource_ids,
    };
    let listed = resource_service(&state)
        .list_resources(state.internal_request(&caller.identity, request))
        .await?
        .into_inner()
        .resources;
    let resources: Vec<Value> = listed
        .iter()
        .map(|resource| heat_view::resource_view(&caller.urls, resource, false))
        .collect();
    Ok(Json(json!({ "resources": resources })))
}

#[derive(Debug, Deserialize)]
pub struct ResourcePath {
    stack_name: String,
    stack_id: String,
    resource_name: String,
}

async fn get_resource(
    state: &GatewayState,
    caller: &HeatCaller,
    path: ResourcePath,
    attributes: Vec<String>,
) -> Result<pb::Resource, RestError> {
    let stack_path = StackPath {
        stack_name: path.stack_name,
        stack_id: path.stack_id,
    };
    let stack = identified_stack(state, &caller.identity, &stack_path).await?;
    let request = pb::GetResourceRequest {
        stack: stack.id,
        resource_name: path.resource_name,
        attributes,
    };
    Ok(resource_service(state)
        .get_resource(state.internal_request(&caller.identity, request))
        .await?
        .into_inner())
}

/// `GET …/resources/{name}[?with_attr=A…]`: the resource with attributes.
pub async fn show_resource(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<ResourcePath>,
    query: QueryParams,
) -> Result<Json<Value>, RestError> {
    let resource = get_resource(&state, &caller, path, query.all("with_attr")).await?;
    Ok(Json(json!({
        "resource": heat_view::resource_view(&caller.urls, &resource, true),
    })))
}

/// `GET …/resources/{name}/metadata`: `{"metadata": {...}}`.
pub async fn resource_metadata(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<ResourcePath>,
) -> Result<Json<Value>, RestError> {
    let resource = get_resource(&state, &caller, path, Vec::new()).await?;
    Ok(Json(
        json!({ "metadata": struct_to_json(resource.metadata.as_ref()) }),
    ))
}

/// `PATCH …/resources/{name or physical id}` with `{"mark_unhealthy":
/// bool, "resource_status_reason": "…"}`: 200; 400 for a bad body, 404 for
/// an unknown resource, 409 while the stack is busy or locked.
pub async fn mark_unhealthy(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(path): Path<ResourcePath>,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    let body = heat_request::mark_unhealthy_body(heat_request::parse_body(&body)?)?;
    let stack_path = StackPath {
        stack_name: path.stack_name,
        stack_id: path.stack_id,
    };
    let stack = identified_stack(&state, &caller.identity, &stack_path).await?;
    let request = pb::MarkUnhealthyRequest {
        stack: stack.id,
        resource: path.resource_name,
        mark_unhealthy: body.mark_unhealthy,
        resource_status_reason: body.resource_status_reason,
    };
    resource_service(&state)
        .mark_unhealthy(state.internal_request(&caller.identity, request))
        .await?;
    Ok(StatusCode::OK)
}

/// A signal's body: any JSON, or nothing.
fn signal_details(body: &[u8]) -> Result<Value, RestError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body)
        .map_err(|error| invalid(format!("the signal body must be JSON (or empty): {error}")))
}

/// `POST …/resources/{name or physical id}/signal` with any JSON body:
/// 200 once the signal is taken (a scaling runs on); 400 for a resource
/// that takes no signals, 409 while the stack is busy or locked.
pub async fn signal_resource(
    State(state): State<GatewayState>,
    caller: SignalCaller,
    Path(path): Path<ResourcePath>,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    let details = signal_details(&body)?;
    let request = match caller {
        SignalCaller::User(caller) => {
            let stack_path = StackPath {
                stack_name: path.stack_name,
                stack_id: path.stack_id,
            };
            let stack = identified_stack(&state, &caller.identity, &stack_path).await?;
            let request = pb::SignalResourceRequest {
                stack: stack.id,
                resource: path.resource_name,
                details: Some(json_to_value(details)),
                signal_token: String::new(),
            };
            state.internal_request(&caller.identity, request)
        }
        // A wait condition handle's secret as X-Auth-Token (its curl_cli).
        SignalCaller::HandleToken(token) => state.internal_request(
            &signal_identity(),
            pb::SignalResourceRequest {
                stack: path.stack_id,
                resource: path.resource_name,
                details: Some(json_to_value(details)),
                signal_token: token,
            },
        ),
    };
    resource_service(&state).signal(request).await?;
    Ok(StatusCode::OK)
}

#[derive(Debug, Deserialize)]
pub struct SignalUrlPath {
    stack_id: String,
    handle_id: String,
}

/// `POST`/`PUT /orchestration/v1/signals/{stack_id}/{handle_id}?token=…`:
/// the signal URL a wait condition handle hands out (TEMP_URL_SIGNAL,
/// CFN_SIGNAL, and the CloudFormation handles' reference). The token in
/// the URL is the credential; no user token is needed.
pub async fn signal_url(
    State(state): State<GatewayState>,
    Path(path): Path<SignalUrlPath>,
    query: QueryParams,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    let token = query
        .first("token")
        .filter(|token| !token.is_empty())
        .ok_or_else(|| {
            RestError::new(
                ember_runtime::ErrorKind::Unauthenticated,
                "a signal URL carries its token: use the whole URL the handle gave",
            )
        })?
        .to_owned();
    let details = signal_details(&body)?;
    let request = state.internal_request(
        &signal_identity(),
        pb::SignalResourceRequest {
            stack: path.stack_id,
            resource: path.handle_id,
            details: Some(json_to_value(details)),
            signal_token: token,
        },
    );
    resource_service(&state).signal(request).await?;
    Ok(StatusCode::OK)
}

/// Who signals with a handle's secret: no user (the engine checks the
/// secret against the handle instead).
fn signal_identity() -> Identity {
    Identity::new(
        "wait-condition-signal",
        "ember-signals",
        vec!["signal".to_owned()],
    )
}

/// The caller of a resource signal: a user, or whoever holds a wait
/// condition handle's secret (sent as X-Auth-Token, as Heat's curl_cli
/// sends the handle's token).
pub enum SignalCaller {
    User(HeatCaller),
    HandleToken(String),
}

impl axum::extract::FromRequestParts<GatewayState> for SignalCaller {
    type Rejection = RestError;

    async fn from_request_parts(
        parts: &mut http::request::Parts,
        state: &GatewayState,
    ) -> Result<Self, RestError> {
        let handle_token = parts
            .headers
            .get(crate::auth::AUTH_TOKEN_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
            .filter(|token| token.starts_with(SIGNAL_TOKEN_PREFIX));
        if let Some(token) = handle_token {
            return Ok(SignalCaller::HandleToken(token.to_owned()));
        }
        Ok(SignalCaller::User(
            HeatCaller::from_request_parts(parts, state).await?,
        ))
    }
}

/// The prefix of wait condition handle secrets (the engine makes them).
const SIGNAL_TOKEN_PREFIX: &str = "ember-signal-";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_bodies_are_any_json_or_nothing() {
        assert_eq!(signal_details(b"").expect("empty"), Value::Null);
        assert_eq!(signal_details(b" \n").expect("blank"), Value::Null);
        assert_eq!(
            signal_details(br#"{"current": "alarm"}"#).expect("object"),
            json!({"current": "alarm"})
        );
        assert_eq!(signal_details(b"[1, 2]").expect("list"), json!([1, 2]));
        let error = signal_details(b"{nope").expect_err("not JSON");
        assert!(format!("{error:?}").contains("must be JSON"), "{error:?}");
    }
}
