//! The lifecycle-hook service: everything about waiting on someone else
//! before a node is deleted (spec senlin-scale-in-lifecycle-hooks). It keeps
//! each pending lifecycle action durable, delivers its notification, and
//! tells the engine to continue when the deadline passes.
#![forbid(unsafe_code)]

pub mod config;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod store;

use std::sync::Arc;

use ember_proto::lifecyclehook::v1::lifecycle_hook_service_server::LifecycleHookServiceServer;
use ember_runtime::identity::{InternalAuth, InternalCredential};
use ember_runtime::server::{GrpcService, StartError, serve_grpc};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use config::Config;
pub use error::{Error, Result};

/// The fully qualified gRPC service names this service serves.
pub const SERVICE_NAMES: &[&str] = &["ember.lifecyclehook.v1.LifecycleHookService"];

/// Runs lifecycle-hook until `shutdown` is cancelled: migrates its database,
/// then serves gRPC on `listener`.
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
    let auth = InternalAuth::new(InternalCredential::new(&config.internal_credential));
    let routes = tonic::service::Routes::new(LifecycleHookServiceServer::with_interceptor(
        grpc::LifecycleHookHandler::new(store),
        auth,
    ));
    serve_grpc(
        listener,
        GrpcService {
            routes,
            service_names: SERVICE_NAMES.to_vec(),
            request_timeout: config.request_timeout,
        },
        shutdown,
    )
    .await?;
    Ok(())
}
