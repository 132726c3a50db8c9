//! The gRPC server bootstrap every internal service uses: a pre-bound
//! listener, health (`grpc.health.v1`) and reflection (v1 and v1alpha, so
//! grpcurl 1.8 works) next to the service's own routes, a trace and timeout
//! stack, and a graceful drain when the shutdown token is cancelled.

use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;
use tonic_reflection::server::{v1, v1alpha};

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
}

/// Serves `service` on `listener` until `shutdown` is cancelled, then reports
/// NOT_SERVING and drains for at most [`DRAIN_GRACE_PERIOD`].
pub async fn serve_grpc(
    listener: TcpListener,
    service: GrpcService,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    for name in service.service_names.iter().copied().chain([""]) {
        health_reporter
            .set_service_status(name, ServingStatus::Serving)
            .await;
    }
    let (reflection_v1, reflection_v1alpha) = reflection(&service.service_names)?;

    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let server = tonic::transport::Server::builder()
        .timeout(service.request_timeout)
        .layer(tower_http::trace::TraceLayer::new_for_grpc())
        .add_routes(service.routes)
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha);

    let drain_started = CancellationToken::new();
    let signal = {
        let shutdown = shutdown.clone();
        let drain_started = drain_started.clone();
        let names = service.service_names.clone();
        async move {
            shutdown.cancelled().await;
            for name in names.into_iter().chain([""]) {
                health_reporter
                    .set_service_status(name, ServingStatus::NotServing)
                    .await;
            }
            drain_started.cancel();
        }
    };
    let serving = server.serve_with_incoming_shutdown(incoming, signal);
    tokio::pin!(serving);
    tokio::select! {
        result = &mut serving => return Ok(result?),
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
