//! The REST side of the gateway: health, metrics and the OpenStack-compatible
//! APIs. Handlers authenticate with the [`Authenticated`] extractor and call
//! the engine with the caller's identity attached.

mod clustering;
mod compute;
pub mod orchestration;

use std::sync::atomic::Ordering;

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use ember_runtime::{ErrorKind, Identity};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

use crate::GatewayState;
use crate::auth::authenticate;
use crate::error::RestError;

pub fn router(state: GatewayState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .nest("/orchestration/v1/{project_id}", orchestration::routes())
        .nest("/compute/v1", compute::routes())
        .nest(clustering::PREFIX, clustering::routes())
        .fallback(not_found)
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            http::StatusCode::GATEWAY_TIMEOUT,
            state.request_timeout,
        ))
        .with_state(state)
}

/// The caller, authenticated from `X-Auth-Token` or `Authorization: Bearer`.
pub struct Authenticated(pub Identity);

impl FromRequestParts<GatewayState> for Authenticated {
    type Rejection = RestError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &GatewayState,
    ) -> Result<Self, RestError> {
        state.metrics.rest_requests.fetch_add(1, Ordering::Relaxed);
        authenticate(&state.signer, &parts.headers)
            .map(Authenticated)
            .map_err(|error| {
                state
                    .metrics
                    .unauthenticated
                    .fetch_add(1, Ordering::Relaxed);
                RestError::new(ErrorKind::Unauthenticated, error.to_string())
            })
    }
}

impl GatewayState {
    /// A request to an internal service on behalf of `identity`.
    pub fn internal_request<T>(&self, identity: &Identity, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        identity.attach(&self.credential, &mut request);
        request
    }
}

/// Readiness: 200 when every service behind the gateway answers its health
/// check as SERVING, 503 naming the ones that do not.
async fn healthz(State(state): State<GatewayState>) -> Response {
    let upstreams = [
        ("engine", state.upstreams.engine.clone()),
        ("lifecycle-hook", state.upstreams.lifecycle_hook.clone()),
        ("plugin-registry", state.upstreams.plugin_registry.clone()),
    ];
    let checks = upstreams.map(|(name, channel)| async move {
        let mut client = HealthClient::new(channel);
        let mut request = tonic::Request::new(HealthCheckRequest {
            service: String::new(),
        });
        request.set_timeout(std::time::Duration::from_secs(2));
        let status = match client.check(request).await {
            Ok(response) if response.get_ref().status == ServingStatus::Serving as i32 => {
                "SERVING".to_owned()
            }
            Ok(_) => "NOT_SERVING".to_owned(),
            Err(status) => format!("UNAVAILABLE: {}", status.message()),
        };
        (name, status)
    });
    let results = futures::future::join_all(checks).await;
    let healthy = results.iter().all(|(_, status)| status == "SERVING");
    let services: serde_json::Map<String, serde_json::Value> = results
        .into_iter()
        .map(|(name, status)| (name.to_owned(), status.into()))
        .collect();
    let code = if healthy {
        http::StatusCode::OK
    } else {
        http::StatusCode::SERVICE_UNAVAILABLE
    };
    let body = serde_json::json!({
        "status": if healthy { "ok" } else { "degraded" },
        "services": services,
    });
    (code, Json(body)).into_response()
}

async fn metrics(State(state): State<GatewayState>) -> Response {
    (
        [(http::header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
        .into_response()
}

async fn not_found(uri: http::Uri) -> RestError {
    RestError::new(
        ErrorKind::NotFound,
        format!("no API at {}: see the README for the endpoints", uri.path()),
    )
}
