//! `GET /build-info` and `GET /services`: what is running behind the
//! Clustering API.
//!
//! Senlin reports its API and engine revisions, and (to admins) each of
//! its service processes with a heartbeat-derived state. Ember's services
//! are built together and shipped as one `ember` binary, so the revision
//! is this build's version for both. The services are the ones the gateway
//! calls — engine, lifecycle-hook and plugin-registry — one entry each,
//! `up` when its gRPC health check answers SERVING now and `down`
//! otherwise. Replicas of a service sit behind one balanced channel and are
//! not told apart: the entry says whether the service answers.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use ember_runtime::ErrorKind;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

use crate::GatewayState;
use crate::error::RestError;
use crate::rest::Authenticated;

/// The version of this build (every Ember service is built with it).
const REVISION: &str = env!("CARGO_PKG_VERSION");

/// How long a service may take to answer its health check here.
const HEALTH_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// `GET /build-info`: `{"build_info": {"api": {"revision"}, "engine": {"revision"}}}`.
pub async fn build_info(Authenticated(_identity): Authenticated) -> Json<Value> {
    Json(json!({
        "build_info": {
            "api": {"revision": REVISION},
            "engine": {"revision": REVISION},
        }
    }))
}

/// `GET /services` (admins): Senlin's service entries for the services
/// behind the gateway.
pub async fn list_services(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
) -> Result<Json<Value>, RestError> {
    if !identity.is_admin() {
        return Err(RestError::new(
            ErrorKind::Forbidden,
            "You are not authorized to complete this operation.",
        ));
    }
    let checks = state.upstreams.named().map(|(name, channel)| async move {
        let up = serving(channel).await;
        service_entry(name, up, chrono::Utc::now())
    });
    let services = futures::future::join_all(checks).await;
    Ok(Json(json!({ "services": services })))
}

/// Whether the service on `channel` says it is SERVING.
async fn serving(channel: ember_runtime::in_process::Upstream) -> bool {
    let mut request = tonic::Request::new(HealthCheckRequest {
        service: String::new(),
    });
    request.set_timeout(HEALTH_CHECK_TIMEOUT);
    HealthClient::new(channel)
        .check(request)
        .await
        .is_ok_and(|response| response.get_ref().status == ServingStatus::Serving as i32)
}

/// One of Senlin's service entries. The id is derived from the name, so it
/// is the same on every call and every gateway.
fn service_entry(name: &str, up: bool, checked_at: chrono::DateTime<chrono::Utc>) -> Value {
    let digest = Sha256::digest(format!("ember-service:{name}").as_bytes());
    let mut bytes = [0_u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    let id = uuid::Builder::from_sha1_bytes(bytes).into_uuid();
    json!({
        "id": id.to_string(),
        "binary": format!("ember-{name}"),
        "host": name,
        "topic": name,
        "status": "enabled",
        "state": if up { "up" } else { "down" },
        "disabled_reason": null,
        "updated_at": checked_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_has_senlins_keys_and_a_stable_id() {
        let at = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let entry = service_entry("engine", true, at);
        for key in [
            "binary",
            "host",
            "id",
            "state",
            "status",
            "topic",
            "updated_at",
        ] {
            assert!(entry.get(key).is_some(), "{key}");
        }
        assert_eq!(entry["state"], "up");
        assert_eq!(entry["binary"], "ember-engine");
        assert_eq!(service_entry("engine", false, at)["state"], "down");
        assert_eq!(entry["id"], service_entry("engine", false, at)["id"]);
        assert_ne!(entry["id"], service_entry("lifecycle-hook", true, at)["id"]);
    }
}
