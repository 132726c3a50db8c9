//! The engine: Ember's domain. Templates, stacks, resources and events;
//! clusters, nodes and actions; instances; maintenance locks and stack
//! leases. Everything that changes state goes through here.
#![forbid(unsafe_code)]

pub mod clusters;
pub mod compute;
pub mod config;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod instances;
pub mod resources;
pub mod stacks;
pub mod store;

use std::sync::Arc;

use ember_proto::engine::v1::event_service_server::EventServiceServer;
use ember_proto::engine::v1::identity_service_server::IdentityServiceServer;
use ember_proto::engine::v1::instance_service_server::InstanceServiceServer;
use ember_proto::engine::v1::resource_service_server::ResourceServiceServer;
use ember_proto::engine::v1::stack_service_server::StackServiceServer;
use ember_runtime::identity::{InternalAuth, InternalCredential};
use ember_runtime::server::{GrpcService, StartError, serve_grpc};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use config::Config;
pub use error::{Error, Result};

/// The fully qualified gRPC service names the engine serves. All of them are
/// public: the gateway forwards them.
pub const SERVICE_NAMES: &[&str] = &[
    "ember.engine.v1.StackService",
    "ember.engine.v1.ResourceService",
    "ember.engine.v1.EventService",
    "ember.engine.v1.IdentityService",
    "ember.engine.v1.InstanceService",
];

/// Runs the engine until `shutdown` is cancelled: migrates its database,
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
    let instance_service = instances::InstanceService::start(
        Arc::new(store::instances::SqlInstanceStore::new(connection.clone())),
        &config.compute,
        shutdown.clone(),
    )
    .await
    .map_err(StartError::Config)?;
    let stack_store: Arc<dyn store::StackStore> = Arc::new(store::SqlStackStore::new(connection));
    let plugin_gate = if config.plugin_registry_url.is_empty() {
        stacks::PluginGate::Disabled
    } else {
        stacks::PluginGate::connect(
            &config.plugin_registry_url,
            &config.internal_credential,
            config.plugin_registry_unavailable,
        )
        .map_err(StartError::Config)?
    };
    let stack_operations = stacks::StackOperations::with_plugins(
        stack_store,
        Arc::new(resources::ResourceTypeRegistry::with_compute(
            instance_service.clone(),
        )),
        plugin_gate,
    );
    stack_operations.spawn_orphan_sweeper(shutdown.clone());
    let auth = InternalAuth::new(InternalCredential::new(&config.internal_credential));
    let routes = tonic::service::Routes::new(StackServiceServer::with_interceptor(
        grpc::stacks::StackHandler::new(stack_operations.clone()),
        auth.clone(),
    ))
    .add_service(ResourceServiceServer::with_interceptor(
        grpc::resources::ResourceHandler::new(stack_operations.clone()),
        auth.clone(),
    ))
    .add_service(EventServiceServer::with_interceptor(
        grpc::events::EventHandler::new(stack_operations),
        auth.clone(),
    ))
    .add_service(InstanceServiceServer::with_interceptor(
        grpc::instances::InstanceHandler::new(instance_service.clone()),
        auth.clone(),
    ))
    .add_service(IdentityServiceServer::with_interceptor(
        grpc::identity::IdentityHandler,
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
    instance_service.drain().await;
    Ok(())
}
