//! Senlin's update, validate, collect, cluster-policy and cancel calls:
//! `PATCH` of profiles, policies, clusters and actions, `POST
//! /{profiles,policies}/validate`, `GET /clusters/{id}/attrs/{path}` and
//! `GET /clusters/{id}/policies/{policy}`. Bodies and messages are
//! Senlin's (`Malformed request data, missing 'cluster' key in request
//! body.`, `Additional properties are not allowed (…)`), because its
//! clients and conformance suite compare them.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::action_service_client::ActionServiceClient;
use ember_proto::engine::v1::cluster_service_client::ClusterServiceClient;
use ember_proto::engine::v1::policy_service_client::PolicyServiceClient;
use ember_proto::engine::v1::profile_service_client::ProfileServiceClient;
use serde_json::{Map, Value, json};

use super::version::ApiVersion;
use super::{accepted, bad_request, boolean, int32, string, views};
use crate::GatewayState;
use crate::error::RestError;
use crate::rest::Authenticated;

/// The object under `key` of a JSON body; `missing` words its absence
/// (Senlin words it differently for updates and for validations).
fn inner_object(
    body: &[u8],
    key: &str,
    missing: impl FnOnce() -> String,
) -> Result<Map<String, Value>, RestError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|error| bad_request(format!("The request body is not JSON: {error}")))?;
    let inner = match value {
        Value::Object(mut object) => object.remove(key),
        _ => None,
    };
    match inner {
        Some(Value::Object(inner)) => Ok(inner),
        Some(_) => Err(bad_request("The data provided is not a map")),
        None => Err(bad_request(missing())),
    }
}

/// A PATCH body: the object under `key`, with only `allowed` keys.
fn patch_body(body: &[u8], key: &str, allowed: &[&str]) -> Result<Map<String, Value>, RestError> {
    let inner = inner_object(body, key, || {
        format!("Malformed request data, missing '{key}' key in request body.")
    })?;
    refuse_unknown(&inner, allowed)?;
    Ok(inner)
}

/// A validate body: `{"<key>": {"spec": {…}}}`; the spec as JSON text.
fn spec_body(body: &[u8], key: &str) -> Result<String, RestError> {
    let inner = inner_object(body, key, || format!("Request body missing '{key}' key."))?;
    refuse_unknown(&inner, &["spec"])?;
    match inner.get("spec") {
        Some(spec @ Value::Object(_)) => Ok(spec.to_string()),
        Some(_) => Err(bad_request("The spec must be a map")),
        None => Err(bad_request("'spec' is a required property")),
    }
}

/// Senlin's JSON-schema refusal of keys its request schema lacks.
pub(super) fn refuse_unknown(
    object: &Map<String, Value>,
    allowed: &[&str],
) -> Result<(), RestError> {
    let unknown: Vec<String> = object
        .keys()
        .filter(|key| !allowed.contains(&key.as_str()))
        .map(|key| format!("'{key}'"))
        .collect();
    match unknown.len() {
        0 => Ok(()),
        1 => Err(bad_request(format!(
            "Additional properties are not allowed ({} was unexpected)",
            unknown[0]
        ))),
        _ => Err(bad_request(format!(
            "Additional properties are not allowed ({} were unexpected)",
            unknown.join(", ")
        ))),
    }
}

/// An object-valued field as JSON text (`metadata`), if given.
fn object_text(body: &Map<String, Value>, key: &str) -> Result<Option<String>, RestError> {
    match body.get(key) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some("{}".into())),
        Some(value @ Value::Object(_)) => Ok(Some(value.to_string())),
        Some(_) => Err(bad_request(format!("The value for '{key}' must be a map"))),
    }
}

pub async fn update_profile(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let body = patch_body(&body, "profile", &["name", "metadata"])?;
    let request = pb::UpdateProfileRequest {
        id,
        name: string(&body, "name")?,
        metadata: object_text(&body, "metadata")?,
    };
    let profile = ProfileServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .update_profile(state.internal_request(&identity, request))
        .await?
        .into_inner();
    Ok(Json(json!({ "profile": views::profile(&profile) })))
}

pub async fn validate_profile(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    version.require(ApiVersion::new(1, 2))?;
    let spec = spec_body(&body, "profile")?;
    let profile = ProfileServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .validate_profile(state.internal_request(&identity, pb::ValidateSpecRequest { spec }))
        .await?
        .into_inner();
    let mut view = views::profile(&profile);
    view["id"] = Value::Null;
    Ok(Json(json!({ "profile": view })))
}

pub async fn update_policy(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let body = patch_body(&body, "policy", &["name"])?;
    let name =
        string(&body, "name")?.ok_or_else(|| bad_request("'name' is a required property"))?;
    let request = pb::UpdatePolicyRequest {
        id,
        name: Some(name),
    };
    let policy = PolicyServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .update_policy(state.internal_request(&identity, request))
        .await?
        .into_inner();
    Ok(Json(json!({ "policy": views::policy(&policy) })))
}

pub async fn validate_policy(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    version.require(ApiVersion::new(1, 2))?;
    let spec = spec_body(&body, "policy")?;
    let policy = PolicyServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .validate_policy(state.internal_request(&identity, pb::ValidateSpecRequest { spec }))
        .await?
        .into_inner();
    let mut view = views::policy(&policy);
    view["id"] = Value::Null;
    Ok(Json(json!({ "policy": view })))
}

/// `PATCH /clusters/{id}`: 202 with the cluster and the CLUSTER_UPDATE
/// action's `Location`. `profile_only` is read from 1.6 on, as Senlin.
pub async fn update_cluster(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
    Path(cluster): Path<String>,
    body: Bytes,
) -> Result<Response, RestError> {
    let body = patch_body(
        &body,
        "cluster",
        &[
            "name",
            "metadata",
            "timeout",
            "profile_id",
            "profile_only",
            "config",
        ],
    )?;
    let profile_only = if version >= ApiVersion::new(1, 6) {
        boolean(&body, "profile_only")?.unwrap_or(false)
    } else {
        false
    };
    // Read from 1.7 on; Senlin drops it from older requests (a PATCH of
    // only `config` is then "No property needs an update.").
    let config = if version >= ApiVersion::new(1, 7) {
        super::clusters::config(&body)?
    } else {
        None
    };
    let request = pb::UpdateClusterRequest {
        cluster,
        name: string(&body, "name")?,
        metadata: object_text(&body, "metadata")?,
        timeout: int32(&body, "timeout")?,
        profile: string(&body, "profile_id")?,
        profile_only,
        config,
    };
    let response = ClusterServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .update_cluster(state.internal_request(&identity, request))
        .await?
        .into_inner();
    Ok(accepted(
        &response.action_id,
        json!({ "cluster": response.cluster.as_ref().map(views::cluster) }),
    ))
}

/// `GET /clusters/{id}/policies/{policy}`.
pub async fn show_cluster_policy(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path((cluster, policy)): Path<(String, String)>,
) -> Result<Json<Value>, RestError> {
    let binding = ClusterServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .get_cluster_policy(
            state.internal_request(&identity, pb::ClusterPolicyRequest { cluster, policy }),
        )
        .await?
        .into_inner();
    Ok(Json(
        json!({ "cluster_policy": views::cluster_policy(&binding) }),
    ))
}

/// `GET /clusters/{id}/attrs/{path}` (1.2 on): `{"cluster_attributes":
/// [{"id": node, "value": …}]}`.
pub async fn collect(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
    Path((cluster, path)): Path<(String, String)>,
) -> Result<Json<Value>, RestError> {
    version.require(ApiVersion::new(1, 2))?;
    let values = ClusterServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .collect_cluster_attributes(
            state.internal_request(&identity, pb::CollectRequest { cluster, path }),
        )
        .await?
        .into_inner()
        .values;
    let attributes: Vec<Value> = values
        .iter()
        .map(|attribute| {
            let value = serde_json::from_str(&attribute.value)
                .unwrap_or_else(|_| Value::String(attribute.value.clone()));
            json!({ "id": attribute.node_id, "value": value })
        })
        .collect();
    Ok(Json(json!({ "cluster_attributes": attributes })))
}

/// `PATCH /actions/{id}` (1.12 on) `{"action": {"status": "CANCELLED"}}`:
/// 202 once the action is cancelled.
pub async fn update_action(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, RestError> {
    version.require(ApiVersion::new(1, 12))?;
    let body = patch_body(&body, "action", &["status"])?;
    let status =
        string(&body, "status")?.ok_or_else(|| bad_request("'status' is a required property"))?;
    if status != "CANCELLED" {
        return Err(bad_request(format!(
            "Unknown status {status} for action {id}"
        )));
    }
    ActionServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .cancel_action(state.internal_request(&identity, pb::GetObjectRequest { id }))
        .await?;
    Ok(http::StatusCode::ACCEPTED.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_bodies_are_checked_as_senlin_does() {
        let error = patch_body(b"{}", "cluster", &["name"]).expect_err("refused");
        assert_eq!(
            error.message(),
            "Malformed request data, missing 'cluster' key in request body."
        );
        let error =
            patch_body(br#"{"cluster": {"bad": 1}}"#, "cluster", &["name"]).expect_err("refused");
        assert_eq!(
            error.message(),
            "Additional properties are not allowed ('bad' was unexpected)"
        );
        let body =
            patch_body(br#"{"cluster": {"name": "x"}}"#, "cluster", &["name"]).expect("accepted");
        assert_eq!(body["name"], "x");
    }

    #[test]
    fn validate_bodies_need_a_spec() {
        assert_eq!(
            spec_body(b"{}", "profile").expect_err("refused").message(),
            "Request body missing 'profile' key."
        );
        assert_eq!(
            spec_body(br#"{"profile": {}}"#, "profile")
                .expect_err("refused")
                .message(),
            "'spec' is a required property"
        );
        assert_eq!(
            spec_body(br#"{"profile": {"spec": {"type": "t"}}}"#, "profile").expect("accepted"),
            r#"{"type":"t"}"#
        );
    }
}
