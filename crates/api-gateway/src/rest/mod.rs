//! The REST side of the gateway: health, metrics and the OpenStack-compatible
//! APIs. Handlers authenticate with the [`Authenticated`] extractor and call
//! the engine with the caller's identity attached.

pub mod allowed;
pub mod audit;
mod clustering;
mod compute;
pub mod identity;
mod messaging;
pub mod orchestration;
mod plugins;
mod quotas;

use std::sync::atomic::Ordering;

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use ember_proto::readiness::v1::readiness_service_client::ReadinessServiceClient;
use ember_proto::readiness::v1::{GetReadinessRequest, ReadinessReport};
use ember_runtime::{ErrorKind, Identity};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

use crate::GatewayState;
use crate::error::RestError;

pub fn router(state: GatewayState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route(
            "/orchestration/v1/signals/{stack_id}/{handle_id}",
            axum::routing::post(orchestration::resources::signal_url)
                .put(orchestration::resources::signal_url),
        )
        .route("/orchestration", get(orchestration::versions))
        .route("/orchestration/", get(orchestration::versions))
        .route("/clustering", get(clustering::versions))
        .route("/clustering/", get(clustering::versions))
        .route("/clustering/v1/", get(clustering::version))
        .merge(identity_routes(&state))
        .nest("/orchestration/v1/{project_id}", orchestration::routes())
        .nest("/compute/v1", compute::routes())
        .nest(clustering::PREFIX, clustering::routes())
        .nest(messaging::PREFIX, messaging::routes())
        // The rule of roles, on every route added above (and only on
        // routes: it needs the matched route's pattern).
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::roles::enforce_rest,
        ))
        // Static files any visitor may load: the pages sign in and then
        // call the routes above like any client.
        .merge(console_routes(&state))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            keep_subject_token,
        ))
        .layer(axum::middleware::map_response_with_state(
            state.clone(),
            count_refusals_and_upstream_failures,
        ))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            http::StatusCode::GATEWAY_TIMEOUT,
            state.request_timeout,
        ))
        .with_state(state)
}

/// The web console, unless it is turned off.
fn console_routes(state: &GatewayState) -> Router<GatewayState> {
    match &state.console {
        Some(console) => console.clone().routes(),
        None => Router::new(),
    }
}

/// The Keystone front door, when this gateway keeps the identity.
fn identity_routes(state: &GatewayState) -> Router<GatewayState> {
    if state.authenticator.directory().is_some() {
        identity::routes()
    } else {
        Router::new()
    }
}

tokio::task_local! {
    /// The caller's Keystone token while its request is handled (see
    /// [`keep_subject_token`]).
    static SUBJECT_TOKEN: ember_runtime::identity::SubjectToken;
}

/// With tokens validated against Keystone, the request's own token goes
/// with every call the gateway makes for it to the internal services
/// ([`GatewayState::internal_request`]): the engine makes the trusts that
/// act for the caller later with it. Ember's own tokens are never sent.
async fn keep_subject_token(
    State(state): State<GatewayState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let token = match &state.authenticator {
        crate::auth::Authenticator::Keystone { .. } => {
            crate::auth::keystone_token_of(request.headers())
                .map(ember_runtime::identity::SubjectToken::new)
        }
        crate::auth::Authenticator::BuiltIn { .. } => None,
    };
    let context = ember_runtime::call_context::CallContext::from_headers(request.headers());
    let handled = context.scope(next.run(request));
    match token {
        Some(token) => SUBJECT_TOKEN.scope(token, handled).await,
        None => handled.await,
    }
}

/// Counts, in one place for every REST route, answers that refused the
/// caller's credentials (401, whichever handler or extractor refused) and
/// answers whose call to an internal service failed on the way.
async fn count_refusals_and_upstream_failures(
    State(state): State<GatewayState>,
    response: Response,
) -> Response {
    if response.status() == http::StatusCode::UNAUTHORIZED {
        state
            .metrics
            .unauthenticated
            .fetch_add(1, Ordering::Relaxed);
    }
    if response
        .extensions()
        .get::<crate::error::UpstreamFailure>()
        .is_some()
    {
        state
            .metrics
            .upstream_errors
            .fetch_add(1, Ordering::Relaxed);
    }
    response
}

/// A protobuf timestamp as RFC 3339 text in UTC to `precision` (each API
/// shows its own: Senlin seconds, the audit trail microseconds), or null.
pub(crate) fn rfc3339(
    timestamp: Option<&prost_types::Timestamp>,
    precision: chrono::SecondsFormat,
) -> serde_json::Value {
    timestamp
        .and_then(|at| {
            chrono::DateTime::from_timestamp(at.seconds, u32::try_from(at.nanos).unwrap_or(0))
        })
        .map_or(serde_json::Value::Null, |at| {
            serde_json::Value::String(at.to_rfc3339_opts(precision, true))
        })
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
        if let Some(crate::roles::CheckedIdentity(identity)) = parts.extensions.get().cloned() {
            return Ok(Authenticated(identity));
        }
        state
            .authenticator
            .authenticate(&parts.headers)
            .await
            .map(Authenticated)
            .map_err(|error| RestError::new(error.kind(), error.to_string()))
    }
}

impl GatewayState {
    /// A request to an internal service on behalf of `identity`.
    pub fn internal_request<T>(&self, identity: &Identity, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        identity.attach(&self.credential, &mut request);
        if let Ok(token) = SUBJECT_TOKEN.try_with(Clone::clone) {
            token.attach(&mut request);
        }
        let context = ember_runtime::call_context::CallContext::current();
        let metadata = request.metadata_mut();
        if let Ok(id) = context.request_id.parse() {
            metadata.insert(ember_runtime::identity::REQUEST_ID_HEADER, id);
        }
        if let Some(Ok(reason)) = context.break_glass.map(|reason| reason.parse()) {
            metadata.insert(ember_runtime::call_context::BREAK_GLASS_HEADER, reason);
        }
        request
    }
}

/// Readiness: 200 when every service behind the gateway answers its health
/// check as SERVING, 503 naming the ones that do not and why — each
/// service's own readiness checks (its database pools, its work queues)
/// decide its health, and their findings are shown.
async fn healthz(State(state): State<GatewayState>) -> Response {
    let results = futures::future::join_all(
        state
            .upstreams
            .named()
            .map(|(name, channel)| upstream_health(&state, name, channel)),
    )
    .await;
    let healthy = results.iter().all(|health| health.status == "SERVING");
    let services: serde_json::Map<String, serde_json::Value> = results
        .iter()
        .map(|health| (health.name.to_owned(), health.status.clone().into()))
        .collect();
    let checks: serde_json::Map<String, serde_json::Value> = results
        .iter()
        .filter_map(|health| {
            let report = health.report.as_ref()?;
            let checks = report
                .checks
                .iter()
                .map(|check| {
                    serde_json::json!({
                        "name": check.name,
                        "healthy": check.healthy,
                        "detail": check.detail,
                    })
                })
                .collect::<Vec<_>>();
            Some((health.name.to_owned(), checks.into()))
        })
        .collect();
    let code = if healthy {
        http::StatusCode::OK
    } else {
        http::StatusCode::SERVICE_UNAVAILABLE
    };
    let body = serde_json::json!({
        "status": if healthy { "ok" } else { "degraded" },
        "services": services,
        "checks": checks,
    });
    (code, Json(body)).into_response()
}

/// What one upstream said of its health, and its readiness report.
struct UpstreamHealth {
    name: &'static str,
    /// `SERVING`, or `NOT_SERVING: <the failing checks>`, or
    /// `UNAVAILABLE: <why it could not be reached>`.
    status: String,
    report: Option<ReadinessReport>,
}

async fn upstream_health(
    state: &GatewayState,
    name: &'static str,
    channel: ember_runtime::in_process::Upstream,
) -> UpstreamHealth {
    // The report first: asking for it runs a round when the last is not
    // fresh, and the service's health follows that round.
    let report = readiness_report(state, channel.clone()).await;
    let mut health = HealthClient::new(channel);
    let mut request = tonic::Request::new(HealthCheckRequest {
        service: String::new(),
    });
    request.set_timeout(HEALTH_CHECK_TIMEOUT);
    let serving = health.check(request).await;
    let status = match serving {
        Ok(response) if response.get_ref().status == ServingStatus::Serving as i32 => {
            "SERVING".to_owned()
        }
        Ok(_) => {
            let failing: Vec<String> = report
                .iter()
                .flat_map(|report| report.checks.iter())
                .filter(|check| !check.healthy)
                .map(|check| format!("{}: {}", check.name, check.detail))
                .collect();
            if failing.is_empty() {
                "NOT_SERVING".to_owned()
            } else {
                format!("NOT_SERVING: {}", failing.join("; "))
            }
        }
        Err(status) => format!("UNAVAILABLE: {}", status.message()),
    };
    UpstreamHealth {
        name,
        status,
        report,
    }
}

const HEALTH_CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// An upstream's readiness report, or `None` when it cannot be read.
async fn readiness_report(
    state: &GatewayState,
    channel: ember_runtime::in_process::Upstream,
) -> Option<ReadinessReport> {
    let mut client = ReadinessServiceClient::new(channel)
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES);
    let mut request = state.internal_request(&gateway_identity(), GetReadinessRequest {});
    request.set_timeout(HEALTH_CHECK_TIMEOUT);
    client
        .get_readiness(request)
        .await
        .ok()
        .map(tonic::Response::into_inner)
}

/// Who the gateway is when it asks on its own behalf (readiness).
fn gateway_identity() -> Identity {
    Identity::new("api-gateway", "ember-internal", vec!["service".to_owned()])
}

/// Prometheus text: the gateway's counters, then the gauges of every
/// service behind it (database pools, work queues), labelled by service.
async fn metrics(State(state): State<GatewayState>) -> Response {
    let reports = futures::future::join_all(
        state
            .upstreams
            .named()
            .map(|(_, channel)| readiness_report(&state, channel)),
    )
    .await;
    let reports: Vec<ReadinessReport> = reports.into_iter().flatten().collect();
    let mut text = state.metrics.render();
    text.push_str(&ember_runtime::readiness::render_gauges(&reports));
    (
        [(http::header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        text,
    )
        .into_response()
}

async fn not_found(uri: http::Uri) -> RestError {
    RestError::new(
        ErrorKind::NotFound,
        format!(
            "no API at {}: see docs/guide/calling.md for the endpoints",
            uri.path()
        ),
    )
}
