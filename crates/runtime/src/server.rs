//! The gRPC server bootstrap every internal service uses: a pre-bound
//! listener (and, in `ember dev`, an in-process link beside it), health
//! (`grpc.health.v1`) and reflection (v1 and v1alpha, so grpcurl 1.8 works)
//! next to the service's own routes, a trace and timeout stack, a
//! graceful drain when the shutdown token is cancelled, and the transport's
//! limits (headers, windows, the largest reply).

use std::time::Duration;

use ember_proto::readiness::v1::readiness_service_server::ReadinessServiceServer;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;
use tonic_reflection::server::{v1, v1alpha};
use tower::ServiceExt;

use crate::readiness::{CHECK_INTERVAL, Readiness, ReadinessHandler};

/// How long in-flight calls may take to finish once shutdown starts.
pub const DRAIN_GRACE_PERIOD: Duration = Duration::from_secs(4);

/// The default deadline for one unary call when the client sets none.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("gRPC reflection could not be built: {0}")]
    Reflection(String),
    #[error("gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Why a service could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Database(#[from] crate::database::DatabaseError),
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error("{0}")]
    Config(String),
}

/// A gRPC service ready to be served: its routes and the fully qualified
/// names of the services in them (for health and reflection).
pub struct GrpcService {
    pub routes: Routes,
    pub service_names: Vec<&'static str>,
    pub request_timeout: Duration,
    /// Internal services: reflection and readiness answer only callers
    /// presenting the internal credential (reflection would list the
    /// internal services to anyone who reaches the port); health stays
    /// open for probes.
    pub reflection_auth: Option<crate::identity::InternalAuth>,
    /// The checks that decide whether the service is ready; health says
    /// NOT_SERVING while one fails. `None`: ready while it runs.
    pub readiness: Option<Readiness>,
    /// Calls from a client in this process, served beside the TCP
    /// listener's connections (see [`crate::in_process`]).
    pub in_process: Option<crate::in_process::InProcessListener>,
}

/// The largest header block a peer may send (gRPC metadata, status
/// messages). Set on both sides deliberately: status messages are capped
/// far below it (see `ember_runtime::error`), so no answer on one stream
/// can break the connection that other streams share.
pub const MAX_HEADER_LIST_BYTES: u32 = 64 * 1024;

/// HTTP/2 flow-control windows, set on both sides: with h2's default of
/// 64 KiB, an answer of a few hundred kilobytes (a cluster list of 200
/// clusters) waits for the reader's window updates several times over.
pub const STREAM_WINDOW_BYTES: u32 = 1024 * 1024;
pub const CONNECTION_WINDOW_BYTES: u32 = 4 * 1024 * 1024;

/// The largest reply a service builds and its callers read (tonic reads
/// at most 4 MiB by default: a stack of 10,000 resources lists more).
/// A service refuses, naming it, to answer more than this rather than
/// build a message the transport would drop; Ember's clients are set to
/// read this much (grpcurl users pass `-max-msg-sz`).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// `Err` naming the reply when `reply` is larger than
/// [`MAX_MESSAGE_BYTES`]: the caller asked for more than a reply carries.
pub fn bounded_reply<M: prost::Message>(reply: M, what: &str) -> Result<M, tonic::Status> {
    let size = reply.encoded_len();
    if size > MAX_MESSAGE_BYTES {
        return Err(crate::ErrorKind::InvalidInput.status(format!(
            "{what} is {} MiB, more than the {} MiB a reply carries: ask for less (filters, a smaller nested depth, or a page at a time)",
            size.div_ceil(1024 * 1024),
            MAX_MESSAGE_BYTES / (1024 * 1024)
        )));
    }
    Ok(reply)
}

/// Serves `service` on `listener` until `shutdown` is cancelled, then reports
/// NOT_SERVING and drains for at most [`DRAIN_GRACE_PERIOD`].
pub async fn serve_grpc(
    listener: TcpListener,
    service: GrpcService,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    // Logged here, once migrations and start-up are behind the service.
    match listener.local_addr() {
        Ok(address) => tracing::info!(%address, services = ?service.service_names, "serving"),
        Err(_) => tracing::info!(services = ?service.service_names, "serving"),
    }
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    let names: Vec<&'static str> = service.service_names.iter().copied().chain([""]).collect();
    set_health(&health_reporter, &names, ServingStatus::Serving).await;
    let (reflection_v1, reflection_v1alpha) = reflection(&service.service_names)?;

    let mut routes = service.routes.add_service(health_service);
    let readiness_server = service
        .readiness
        .clone()
        .map(|readiness| ReadinessServiceServer::new(ReadinessHandler(readiness)));
    routes = match service.reflection_auth {
        Some(auth) => {
            if let Some(server) = readiness_server {
                routes = routes.add_service(InterceptedService::new(server, auth.clone()));
            }
            routes
                .add_service(InterceptedService::new(reflection_v1, auth.clone()))
                .add_service(InterceptedService::new(reflection_v1alpha, auth))
        }
        None => {
            if let Some(server) = readiness_server {
                routes = routes.add_service(server);
            }
            routes
                .add_service(reflection_v1)
                .add_service(reflection_v1alpha)
        }
    };
    if let Some(link) = &service.in_process {
        serve_in_process(link, routes.clone(), service.request_timeout);
    }
    let server = tonic::transport::Server::builder()
        .timeout(service.request_timeout)
        .http2_max_header_list_size(MAX_HEADER_LIST_BYTES)
        .initial_stream_window_size(STREAM_WINDOW_BYTES)
        .initial_connection_window_size(CONNECTION_WINDOW_BYTES)
        .layer(tower_http::trace::TraceLayer::new_for_grpc())
        .layer(crate::call_context::CallContextLayer)
        .add_routes(routes);

    // One task owns the health status: readiness moves it while serving,
    // shutdown sets NOT_SERVING for good — no update can come after that.
    let drain_started = CancellationToken::new();
    let signal = {
        let shutdown = shutdown.clone();
        let drain_started = drain_started.clone();
        let readiness = service.readiness;
        let in_process = service.in_process.clone();
        async move {
            // Rounds run every CHECK_INTERVAL here, and whenever a report
            // is asked for that is not fresh; the health follows the last
            // round's finding, whoever ran it.
            let mut serving = true;
            let mut ticks = tokio::time::interval(CHECK_INTERVAL);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut findings = readiness.as_ref().map(Readiness::watch_ready);
            loop {
                let round = async {
                    ticks.tick().await;
                    match &readiness {
                        Some(readiness) => readiness.refresh().await,
                        None => std::future::pending().await,
                    }
                };
                let found = async {
                    let Some(findings) = &mut findings else {
                        return std::future::pending().await;
                    };
                    match findings.changed().await {
                        Ok(()) => *findings.borrow_and_update(),
                        Err(_) => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    _ = round => {}
                    Some(ready) = found => {
                        if ready != serving {
                            serving = ready;
                            let status = if ready { ServingStatus::Serving } else { ServingStatus::NotServing };
                            set_health(&health_reporter, &names, status).await;
                        }
                    }
                }
            }
            set_health(&health_reporter, &names, ServingStatus::NotServing).await;
            if let Some(link) = &in_process {
                link.stop();
            }
            drain_started.cancel();
        }
    };
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let serving = server.serve_with_incoming_shutdown(incoming, signal);
    tokio::pin!(serving);
    tokio::select! {
        result = &mut serving => {
            if let Some(link) = &service.in_process {
                link.stop();
            }
            return Ok(result?);
        }
        () = drain_started.cancelled() => {}
    }
    match tokio::time::timeout(DRAIN_GRACE_PERIOD, serving).await {
        Ok(result) => Ok(result?),
        Err(_) => {
            tracing::warn!("calls still running after the grace period were dropped");
            Ok(())
        }
    }
}

/// Serves `link`'s calls with `routes` behind the layers a connection's
/// calls go through: the trace layer, the call's context and the deadline.
fn serve_in_process(link: &crate::in_process::InProcessListener, routes: Routes, limit: Duration) {
    let traced = tower::ServiceBuilder::new()
        .layer(tower_http::trace::TraceLayer::new_for_grpc())
        .layer(crate::call_context::CallContextLayer)
        .service(routes.prepare());
    let traced = ServiceExt::<http::Request<tonic::body::Body>>::map_response(traced, |response| {
        response.map(tonic::body::Body::new)
    });
    let service = crate::in_process::Deadline::new(traced, limit);
    if !link.serve(tower::util::BoxCloneSyncService::new(service)) {
        tracing::warn!("the in-process link was served already: calls through it go elsewhere");
    }
}

async fn set_health(
    reporter: &tonic_health::server::HealthReporter,
    names: &[&'static str],
    status: ServingStatus,
) {
    for name in names {
        reporter.set_service_status(*name, status).await;
    }
}

/// Reflection v1 and v1alpha listing exactly `service_names`, health and
/// reflection itself. Each build consumes its builder, hence two.
pub fn reflection(
    service_names: &[&str],
) -> Result<
    (
        v1::ServerReflectionServer<impl v1::ServerReflection>,
        v1alpha::ServerReflectionServer<impl v1alpha::ServerReflection>,
    ),
    ServeError,
> {
    let builder = || {
        let mut builder = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(ember_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .with_service_name("grpc.health.v1.Health");
        for name in service_names {
            builder = builder.with_service_name(*name);
        }
        builder
    };
    let v1 = builder()
        .build_v1()
        .map_err(|error| ServeError::Reflection(error.to_string()))?;
    let v1alpha = builder()
        .build_v1alpha()
        .map_err(|error| ServeError::Reflection(error.to_string()))?;
    Ok((v1, v1alpha))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_past_the_bound_is_refused_naming_its_size() {
        let text = |bytes: usize| prost_types::Value {
            kind: Some(prost_types::value::Kind::StringValue("x".repeat(bytes))),
        };
        assert!(bounded_reply(text(MAX_MESSAGE_BYTES - 16), "Value").is_ok());
        let refused = bounded_reply(text(MAX_MESSAGE_BYTES + 1), "ListResourcesResponse")
            .expect_err("one byte too many");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
        assert!(
            refused
                .message()
                .starts_with("ListResourcesResponse is 65 MiB, more than the 64 MiB"),
            "{}",
            refused.message()
        );
    }
}
