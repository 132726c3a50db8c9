//! `POST /clusters/{id}/ops` (microversion 1.4 on): Senlin's cluster
//! operation, `{"<operation>": {"params": {…}, "filters": {…}}}` — run
//! the profile type's operation on every member the filters select
//! (`name`, `profile_id`, `status`, `role`). 202 `{"action": id}` with
//! `Location`. The body's shape is checked here with the messages of
//! Senlin's controller; the engine checks the operation, its parameters
//! and the filters (`OperateCluster`).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::Response;
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::cluster_service_client::ClusterServiceClient;
use serde_json::{Map, Value, json};

use super::version::ApiVersion;
use super::{accepted, bad_request};
use crate::GatewayState;
use crate::error::RestError;
use crate::rest::Authenticated;

/// The operation named by the body and its `params` and `filters` (JSON
/// text each), with Senlin's messages for a body naming none or several.
fn read_operation(body: &[u8]) -> Result<(String, String, String), RestError> {
    let body: Map<String, Value> = if body.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        match serde_json::from_slice(body) {
            Ok(Value::Object(object)) => object,
            Ok(Value::Null) => Map::new(),
            Ok(_) => return Err(bad_request("the body must be a JSON object")),
            Err(error) => return Err(bad_request(format!("the body is not JSON: {error}"))),
        }
    };
    if body.len() > 1 {
        return Err(bad_request("Multiple operations specified"));
    }
    let Some((operation, inner)) = body.into_iter().next() else {
        return Err(bad_request("No operation specified"));
    };
    let inner = match inner {
        Value::Null => Map::new(),
        Value::Object(inner) => inner,
        _ => {
            return Err(bad_request(format!(
                "the body of operation '{operation}' must be an object with 'params' and 'filters'"
            )));
        }
    };
    // Senlin reads only these two keys of the operation's object.
    let object_text = |key: &str| match inner.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(value @ Value::Object(_)) => Ok(value.to_string()),
        Some(_) => Err(bad_request(format!("{key}: must be an object"))),
    };
    Ok((
        operation.clone(),
        object_text("params")?,
        object_text("filters")?,
    ))
}

pub async fn cluster_operation(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, RestError> {
    version.require(ApiVersion::new(1, 4))?;
    let (operation, params, filters) = read_operation(&body)?;
    let request = pb::ClusterOperationRequest {
        cluster: id,
        operation,
        params,
        filters,
    };
    let response = ClusterServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .operate_cluster(state.internal_request(&identity, request))
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

    fn refused(body: &str) -> String {
        read_operation(body.as_bytes())
            .expect_err("refused")
            .message()
            .to_owned()
    }

    #[test]
    fn senlins_messages_for_the_body() {
        assert_eq!(refused(""), "No operation specified");
        assert_eq!(refused("{}"), "No operation specified");
        assert_eq!(
            refused(r#"{"reboot": {}, "stop": {}}"#),
            "Multiple operations specified"
        );
        assert_eq!(
            refused(r#"{"reboot": {"params": [1]}}"#),
            "params: must be an object"
        );
        assert!(refused(r#"{"reboot": 3}"#).contains("must be an object"));
    }

    #[test]
    fn params_and_filters_are_passed_on() {
        let (operation, params, filters) = read_operation(
            br#"{"reboot": {"params": {"type": "HARD"}, "filters": {"role": "master"}}}"#,
        )
        .expect("read");
        assert_eq!(operation, "reboot");
        assert_eq!(params, r#"{"type":"HARD"}"#);
        assert_eq!(filters, r#"{"role":"master"}"#);
        let (_, params, filters) = read_operation(br#"{"stop": null}"#).expect("read");
        assert_eq!((params.as_str(), filters.as_str()), ("", ""));
    }
}
