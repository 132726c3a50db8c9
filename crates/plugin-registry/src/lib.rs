//! The plugin-registry service: the ordered registry of lifecycle plugins
//! (spec heat-stack-lifecycle-plugpoint) that the engine consults before and
//! after every stack operation. Managed over gRPC, admin only.
#![forbid(unsafe_code)]

pub mod config;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod store;

use std::sync::Arc;

use ember_proto::pluginregistry::v1::plugin_registry_service_server::PluginRegistryServiceServer;
use ember_runtime::identity::{InternalAuth, InternalCredential};
use ember_runtime::server::{GrpcService, StartError, serve_grpc};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use config::Config;
pub use error::{Error, Result};

/// The fully qualified gRPC service names this service serves.
pub const SERVICE_NAMES: &[&str] = &["ember.pluginregistry.v1.PluginRegistryService"];

/// Runs the plugin-registry until `shutdown` is cancelled: migrates its
/// database, then serves gRPC on `listener`.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), StartError> {
    let connection = ember_runtime::database::connect_and_migrate::<store::migrations::Migrator>(
        &config.database_url,
    )
    .await?;
    let store = Arc::new(store::SqlPluginStore::new(connection));
    let handler = grpc::PluginRegistryHandler::new(store);
    let auth = InternalAuth::new(InternalCredential::new(&config.internal_credential));
    let routes =
        tonic::service::Routes::new(PluginRegistryServiceServer::with_interceptor(handler, auth));
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
