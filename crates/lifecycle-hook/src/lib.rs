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
pub mod pending_actions;
pub mod store;
pub mod workers;

use std::sync::Arc;

use ember_proto::lifecyclehook::v1::lifecycle_hook_internal_service_server::LifecycleHookInternalServiceServer;
use ember_proto::lifecyclehook::v1::lifecycle_hook_service_server::LifecycleHookServiceServer;
use ember_runtime::identity::{InternalAuth, InternalCredential};
use ember_runtime::readiness::{Check, DATABASE_STARVED_AFTER, Readiness};
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

/// Work more than this late counts as overdue.
const OVERDUE_AFTER: chrono::TimeDelta = chrono::TimeDelta::seconds(5);
/// Overdue deliveries or deadlines from which the workers are saturated.
const OVERDUE_SATURATED_AT: u64 = 10_000;

fn readiness(connection: &sea_orm::DatabaseConnection) -> Readiness {
    Readiness::new("lifecycle-hook").with(Check::database(
        "writer",
        connection.clone(),
        DATABASE_STARVED_AFTER,
    ))
}

/// Deliveries and deadlines overdue by more than [`OVERDUE_AFTER`]: the
/// workers are behind.
fn with_overdue_work(readiness: Readiness, store: Arc<dyn store::PendingActionStore>) -> Readiness {
    let overdue = move || {
        let store = store.clone();
        async move {
            store
                .count_overdue(ember_runtime::time::now() - OVERDUE_AFTER)
                .await
                .map_err(|error| error.to_string())
        }
    };
    let deadlines = overdue.clone();
    readiness
        .with(Check::queue(
            "overdue deliveries",
            OVERDUE_SATURATED_AT,
            move || {
                let overdue = overdue();
                async move { overdue.await.map(|work| work.deliveries) }
            },
        ))
        .with(Check::queue(
            "overdue deadlines",
            OVERDUE_SATURATED_AT,
            move || {
                let overdue = deadlines();
                async move { overdue.await.map(|work| work.deadlines) }
            },
        ))
}

/// Runs lifecycle-hook until `shutdown` is cancelled: migrates its database,
/// starts the delivery and deadline workers, then serves gRPC on `listener`.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), StartError> {
    let connection = ember_runtime::database::connect_and_migrate_patiently::<
        store::migrations::Migrator,
    >(&config.database_url, &shutdown)
    .await?;
    let readiness = readiness(&connection);
    let store: Arc<dyn store::PendingActionStore> =
        Arc::new(store::SqlPendingActionStore::new(connection));
    let readiness = with_overdue_work(readiness, store.clone());
    let wake = workers::Wake::default();
    workers::spawn(
        store.clone(),
        workers::WorkerConfig {
            engine_url: config.engine_url.clone(),
            internal_credential: config.internal_credential.clone(),
            webhook_secret: config.webhook_secret.clone(),
            nats_url: config.nats_url.clone(),
            webhook_ca_file: config.webhook_ca_file.clone(),
            webhook_targets: config.webhook_targets.clone(),
            receivers: config.receivers.clone(),
        },
        wake.clone(),
        shutdown.clone(),
    )
    .map_err(StartError::Config)?;
    let pending_actions = Arc::new(pending_actions::PendingActions::new(store, wake));
    let auth = InternalAuth::new(InternalCredential::new(&config.internal_credential));
    let routes = tonic::service::Routes::new(LifecycleHookServiceServer::with_interceptor(
        grpc::LifecycleHookHandler::new(Arc::clone(&pending_actions)),
        auth.clone(),
    ))
    .add_service(LifecycleHookInternalServiceServer::with_interceptor(
        grpc_internal::LifecycleHookInternalHandler::new(pending_actions),
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
