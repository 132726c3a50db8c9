//! Profile and policy types: what the engine makes profiles and policies
//! of, with their spec schemas, shaped by microversion as Senlin shapes
//! them — before 1.5 a list names each type `name-version` and a type
//! shows no `support_status`; from 1.5 a list gives `name`, `version` and
//! `support_status`. Operations (`/profile-types/{type}/ops`) came in 1.4.

use axum::Json;
use axum::extract::{Path, State};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::policy_service_client::PolicyServiceClient;
use ember_proto::engine::v1::profile_service_client::ProfileServiceClient;
use serde_json::{Value, json};

use super::version::ApiVersion;
use crate::GatewayState;
use crate::error::RestError;
use crate::rest::Authenticated;

/// The first microversion that shows `support_status` and lists types by
/// name and version.
const SUPPORT_STATUS_VERSION: ApiVersion = ApiVersion::new(1, 5);
/// The microversion that added profile type operations.
const OPERATIONS_VERSION: ApiVersion = ApiVersion::new(1, 4);

fn profiles(state: &GatewayState) -> ProfileServiceClient<ember_runtime::in_process::Upstream> {
    ProfileServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

fn policies(state: &GatewayState) -> PolicyServiceClient<ember_runtime::in_process::Upstream> {
    PolicyServiceClient::new(state.upstreams.engine.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

/// JSON the engine sent as text; `{}` if it is not JSON (never expected).
fn document(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| json!({}))
}

/// One entry of a type list, in the shape of `version`.
fn listed_type(description: &pb::TypeDescription, version: ApiVersion) -> Value {
    if version < SUPPORT_STATUS_VERSION {
        json!({ "name": format!("{}-{}", description.name, description.version) })
    } else {
        json!({
            "name": description.name,
            "version": description.version,
            "support_status": document(&description.support_status),
        })
    }
}

/// One type shown by the name it was asked by, in the shape of `version`.
fn shown_type(type_name: &str, description: &pb::TypeDescription, version: ApiVersion) -> Value {
    let mut shown = json!({
        "name": type_name,
        "schema": document(&description.schema),
    });
    if version >= SUPPORT_STATUS_VERSION {
        shown["support_status"] = document(&description.support_status);
    }
    shown
}

pub async fn list_profile_types(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
) -> Result<Json<Value>, RestError> {
    let types = profiles(&state)
        .list_profile_types(state.internal_request(&identity, pb::ListTypesRequest {}))
        .await?
        .into_inner()
        .types;
    let listed: Vec<Value> = types
        .iter()
        .map(|description| listed_type(description, version))
        .collect();
    Ok(Json(json!({ "profile_types": listed })))
}

pub async fn show_profile_type(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
    Path(type_name): Path<String>,
) -> Result<Json<Value>, RestError> {
    let request = pb::GetTypeRequest {
        type_name: type_name.clone(),
    };
    let description = profiles(&state)
        .get_profile_type(state.internal_request(&identity, request))
        .await?
        .into_inner();
    Ok(Json(
        json!({ "profile_type": shown_type(&type_name, &description, version) }),
    ))
}

pub async fn list_profile_type_operations(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
    Path(type_name): Path<String>,
) -> Result<Json<Value>, RestError> {
    version.require(OPERATIONS_VERSION)?;
    let operations = profiles(&state)
        .list_profile_type_operations(
            state.internal_request(&identity, pb::GetTypeRequest { type_name }),
        )
        .await?
        .into_inner()
        .operations;
    Ok(Json(json!({ "operations": document(&operations) })))
}

pub async fn list_policy_types(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
) -> Result<Json<Value>, RestError> {
    let types = policies(&state)
        .list_policy_types(state.internal_request(&identity, pb::ListTypesRequest {}))
        .await?
        .into_inner()
        .types;
    let listed: Vec<Value> = types
        .iter()
        .map(|description| listed_type(description, version))
        .collect();
    Ok(Json(json!({ "policy_types": listed })))
}

pub async fn show_policy_type(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    version: ApiVersion,
    Path(type_name): Path<String>,
) -> Result<Json<Value>, RestError> {
    let request = pb::GetTypeRequest {
        type_name: type_name.clone(),
    };
    let description = policies(&state)
        .get_policy_type(state.internal_request(&identity, request))
        .await?
        .into_inner();
    Ok(Json(
        json!({ "policy_type": shown_type(&type_name, &description, version) }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> pb::TypeDescription {
        pb::TypeDescription {
            name: "os.nova.server".to_owned(),
            version: "1.0".to_owned(),
            schema: r#"{"flavor": {"type": "String"}}"#.to_owned(),
            support_status: r#"{"1.0": [{"status": "SUPPORTED", "since": "2016.04"}]}"#.to_owned(),
        }
    }

    #[test]
    fn before_one_five_a_type_is_listed_by_its_full_name() {
        assert_eq!(
            listed_type(&server(), ApiVersion::new(1, 4)),
            json!({"name": "os.nova.server-1.0"})
        );
        let listed = listed_type(&server(), ApiVersion::new(1, 5));
        assert_eq!(listed["name"], "os.nova.server");
        assert_eq!(listed["version"], "1.0");
        assert_eq!(listed["support_status"]["1.0"][0]["status"], "SUPPORTED");
    }

    #[test]
    fn support_status_is_shown_from_one_five() {
        let old = shown_type("os.nova.server-1.0", &server(), ApiVersion::new(1, 4));
        assert_eq!(old["name"], "os.nova.server-1.0");
        assert_eq!(old["schema"]["flavor"]["type"], "String");
        assert!(old.get("support_status").is_none());
        let new = shown_type("os.nova.server-1.0", &server(), ApiVersion::new(1, 14));
        assert!(new["support_status"]["1.0"].is_array());
    }
}
