//! The lifecycle-hook service: everything about waiting on someone else
//! before a node is deleted (spec senlin-scale-in-lifecycle-hooks). It keeps
//! each pending lifecycle action durable, delivers its notification, and
//! tells the engine to continue when the deadline passes.
#![forbid(unsafe_code)]

pub mod config;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod grpc_internal;
pub mod store;
pub mod workers;

use std::sync::Arc;

use ember_proto::lifecyclehook::v1::lifecycle_hook_internal_service_server::LifecycleHookInternalServiceServer;
use ember_proto::lifecyclehook::v1::lifecycle_hook_service_server::LifecycleHookServiceServer;
use ember_runtime::identity::{InternalAuth, InternalCredential};
use ember_runtime::server::{GrpcService, StartError, serve_grpc};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use config::Config;
pub use error::{Error, Result};

/// The public gRPC services this service serves (the gateway forwards them).
pub const SERVICE_NAMES: &[&str] = &["ember.lifecyclehook.v1.LifecycleHookService"];

/// Served on lifecycle-hook's own port only, for the engine: recording,
/// resolving and extending pending actions is not for users.
pub const INTERNAL_SERVICE_NAMES: &[&str] =
    &["ember.lifecyclehook.v1.LifecycleHookInternalService"];

/// Runs lifecycle-hook until `shutdown` is cancelled: migrates its database,
/// starts the delivery and deadline workers, then serves gRPC on `listener`.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), StartError> {
    let connection = ember_runtime::database::connect_and_migrate::<store::migrations::Migrator>(
        &config.database_url,
    )
    .await?;
    let store: Arc<dyn store::PendingActionStore> =
        Arc::new(store::SqlPendingActionStore::new(connection));
    let wake = workers::Wake::default();
    workers::spawn(
        store.clone(),
        workers::WorkerConfig {
            engine_url: config.engine_url.clone(),
            internal_credential: config.internal_credential.clone(),
            webhook_secret: config.webhook_secret.clone(),
            nats_url: config.nats_url.clone(),
            webhook_ca_file: config.webhook_ca_file.clone(),
        },
        wake.clone(),
        shutdown.clone(),
    )
    .map_err(StartError::Config)?;
    let auth = InternalAuth::new(InternalCredential::new(&config.internal_credential));
    let routes = tonic::service::Routes::new(LifecycleHookServiceServer::with_interceptor(
        grpc::LifecycleHookHandler::new(store.clone()),
        auth.clone(),
    ))
    .add_service(LifecycleHookInternalServiceServer::with_interceptor(
        grpc_internal::LifecycleHookInternalHandler::new(store, wake),
        auth,
    ));
    serve_grpc(
        listener,
        GrpcService {
            routes,
            service_names: SERVICE_NAMES
                .iter()
                .chain(INTERNAL_SERVICE_NAMES)
                .copied()
                .collect(),
            request_timeout: config.request_timeout,
        },
        shutdown,
    )
    .await?;
    Ok(())
}
