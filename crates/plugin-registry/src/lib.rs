//! The plugin-registry service: the ordered registry of lifecycle plugins
//! (spec heat-stack-lifecycle-plugpoint) that the engine consults before and
//! after every stack operation, and the runner that calls those plugins in
//! order with compensation. The registry is managed over gRPC, admin only;
//! the runner is the engine's internal door.
#![forbid(unsafe_code)]

pub mod config;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod registry;
pub mod runner;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;

use std::sync::Arc;

use ember_proto::pluginregistry::v1::plugin_registry_service_server::PluginRegistryServiceServer;
use ember_proto::pluginregistry::v1::plugin_runner_service_server::PluginRunnerServiceServer;
use ember_runtime::identity::{InternalAuth, InternalCredential};
use ember_runtime::server::{GrpcService, StartError, serve_grpc};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use config::Config;
pub use error::{Error, Result};

/// The public gRPC services this service serves (the gateway forwards them).
pub const SERVICE_NAMES: &[&str] = &["ember.pluginregistry.v1.PluginRegistryService"];

/// Services served on the plugin-registry's own port only, for the engine.
/// The gateway does not forward them: a user could otherwise run the plugin
/// chain, or post-operations, for stacks that are not theirs.
pub const INTERNAL_SERVICE_NAMES: &[&str] = &["ember.pluginregistry.v1.PluginRunnerService"];

/// Runs the plugin-registry until `shutdown` is cancelled: migrates its
/// database, then serves gRPC on `listener`.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), StartError> {
    let connection = ember_runtime::database::connect_and_migrate_patiently::<
        store::migrations::Migrator,
    >(&config.database_url, &shutdown)
    .await?;
    // SQLite: reads (every operation's generation check) get connections
    // of their own beside the one writer.
    let reader = ember_runtime::database::connect_reader(&config.database_url, &connection).await?;
    let mut readiness = ember_runtime::readiness::Readiness::new("plugin-registry").with(
        ember_runtime::readiness::Check::database(
            "writer",
            connection.clone(),
            ember_runtime::readiness::DATABASE_STARVED_AFTER,
        ),
    );
    if reader.has_own_connections() {
        readiness = readiness.with(ember_runtime::readiness::Check::database(
            "reader",
            reader.clone(),
            ember_runtime::readiness::DATABASE_STARVED_AFTER,
        ));
    }
    let store: Arc<dyn store::PluginStore> =
        Arc::new(store::SqlPluginStore::with_reader(connection, reader));
    let cache = Arc::new(runner::RegistryCache::new(Arc::clone(&store)));
    let readiness = readiness.with(runner::circuit_check(Arc::clone(&cache)));
    let registry = grpc::PluginRegistryHandler::new(Arc::new(registry::Registry::new(
        store,
        Arc::clone(&cache),
    )));
    let runner = grpc::PluginRunnerHandler::new(Arc::new(runner::PluginRunner::new(cache)));
    let auth = InternalAuth::new(InternalCredential::new(&config.internal_credential));
    let routes = tonic::service::Routes::new(PluginRegistryServiceServer::with_interceptor(
        registry,
        auth.clone(),
    ))
    .add_service(PluginRunnerServiceServer::with_interceptor(runner, auth));
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
            reflection_auth: Some(ember_runtime::identity::InternalAuth::new(
                ember_runtime::identity::InternalCredential::new(&config.internal_credential),
            )),
            readiness: Some(readiness),
            in_process: config.in_process.clone(),
        },
        shutdown,
    )
    .await?;
    Ok(())
}
