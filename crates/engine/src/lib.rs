//! The engine: Ember's domain. Templates, stacks, resources and events;
//! clusters, nodes and actions; instances; maintenance locks and stack
//! leases. Everything that changes state goes through here.
#![forbid(unsafe_code)]

pub mod audit;
pub mod cloud;
pub mod clusters;
pub mod compute;
pub mod config;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod instances;
pub mod lock_expiry;
pub mod quotas;
pub mod receivers;
pub mod resources;
pub mod retention;
pub mod software;
pub mod stacks;
pub mod store;

use std::sync::Arc;

use ember_proto::engine::v1::action_service_server::ActionServiceServer;
use ember_proto::engine::v1::audit_service_server::AuditServiceServer;
use ember_proto::engine::v1::cluster_lifecycle_callback_service_server::ClusterLifecycleCallbackServiceServer;
use ember_proto::engine::v1::cluster_service_server::ClusterServiceServer;
use ember_proto::engine::v1::event_service_server::EventServiceServer;
use ember_proto::engine::v1::identity_service_server::IdentityServiceServer;
use ember_proto::engine::v1::instance_service_server::InstanceServiceServer;
use ember_proto::engine::v1::maintenance_service_server::MaintenanceServiceServer;
use ember_proto::engine::v1::node_service_server::NodeServiceServer;
use ember_proto::engine::v1::policy_service_server::PolicyServiceServer;
use ember_proto::engine::v1::profile_service_server::ProfileServiceServer;
use ember_proto::engine::v1::quota_service_server::QuotaServiceServer;
use ember_proto::engine::v1::receiver_queue_service_server::ReceiverQueueServiceServer;
use ember_proto::engine::v1::receiver_service_server::ReceiverServiceServer;
use ember_proto::engine::v1::resource_service_server::ResourceServiceServer;
use ember_proto::engine::v1::software_config_service_server::SoftwareConfigServiceServer;
use ember_proto::engine::v1::software_deployment_service_server::SoftwareDeploymentServiceServer;
use ember_proto::engine::v1::stack_service_server::StackServiceServer;
use ember_runtime::identity::{InternalAuth, InternalCredential};
use ember_runtime::readiness::{Check, DATABASE_STARVED_AFTER, Readiness};
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
    "ember.engine.v1.ProfileService",
    "ember.engine.v1.PolicyService",
    "ember.engine.v1.ClusterService",
    "ember.engine.v1.NodeService",
    "ember.engine.v1.ActionService",
    "ember.engine.v1.QuotaService",
    "ember.engine.v1.SoftwareConfigService",
    "ember.engine.v1.SoftwareDeploymentService",
    "ember.engine.v1.ReceiverService",
    "ember.engine.v1.MaintenanceService",
    "ember.engine.v1.AuditService",
];

/// Served on the engine's own port only, for lifecycle-hook: telling the
/// engine a lifecycle deadline passed, and posting to a project's receiver
/// queue what the message bus carried, are not for users.
pub const INTERNAL_SERVICE_NAMES: &[&str] = &[
    "ember.engine.v1.ClusterLifecycleCallbackService",
    "ember.engine.v1.ReceiverQueueService",
];

/// Resource transitions waiting for a commit from which the engine is not
/// ready: its database is far behind the work it runs.
const TRANSITIONS_SATURATED_AT: u64 = 50_000;

/// Runs the engine until `shutdown` is cancelled: migrates its database,
/// then serves gRPC on `listener`.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), StartError> {
    let connection = ember_runtime::database::connect_and_migrate_patiently::<
        store::migrations::Migrator,
    >(&config.database_url, &shutdown)
    .await?;
    // SQLite: reads get a pool of their own beside the one writer.
    let reader = ember_runtime::database::connect_reader(&config.database_url, &connection).await?;
    let mut readiness = Readiness::new("engine").with(Check::database(
        "writer",
        connection.clone(),
        DATABASE_STARVED_AFTER,
    ));
    if reader.has_own_connections() {
        readiness = readiness.with(Check::database(
            "reader",
            reader.clone(),
            DATABASE_STARVED_AFTER,
        ));
    }
    let cloud = match &config.openstack {
        Some(openstack) => Some(
            cloud::OpenStackCloud::new(
                openstack,
                Arc::new(store::delegations::SqlDelegationStore::new(
                    connection.clone(),
                    reader.clone(),
                )),
            )
            .map_err(StartError::Config)?,
        ),
        None => None,
    };
    let driver: Arc<dyn compute::ComputeDriver> = match &cloud {
        Some(cloud) => Arc::new(compute::openstack::NovaDriver::new(cloud.clone())),
        None => config.compute.driver().map_err(StartError::Config)?,
    };
    // The quotas and the audit trail come before the services: each
    // service is given them when it is made, and some start work at once
    // (the instances' lock-expiry sweep) that must already record.
    let audit_trail = audit::AuditTrail::new(Arc::new(store::audit::SqlAuditStore::new(
        connection.clone(),
        reader.clone(),
    )));
    let quotas = quotas::Quotas::new(
        Arc::new(store::quotas::SqlQuotaStore::new(
            connection.clone(),
            reader.clone(),
        )),
        config.quotas,
    );
    let instance_service = instances::InstanceService::start_with_driver(
        Arc::new(store::instances::SqlInstanceStore::with_reader(
            connection.clone(),
            reader.clone(),
        )),
        driver,
        &config.compute,
        instances::InstanceSettings {
            quotas: Some(quotas.clone()),
            audit: Some(audit_trail.clone()),
            cloud: cloud.clone(),
        },
        shutdown.clone(),
    )
    .await
    .map_err(StartError::Config)?;
    let cluster_store: Arc<dyn store::clusters::ClusterStore> = Arc::new(
        store::clusters::SqlClusterStore::with_reader(connection.clone(), reader.clone()),
    );
    let wait_signals: Arc<dyn store::signals::WaitSignalStore> = Arc::new(
        store::signals::SqlWaitSignalStore::new(connection.clone(), reader.clone()),
    );
    let stack_store: Arc<dyn store::StackStore> = Arc::new(store::SqlStackStore::with_reader(
        connection.clone(),
        reader.clone(),
    ));
    let wait_conditions = resources::wait_condition::WaitConditions::new(
        wait_signals,
        stack_store.clone(),
        &config.public_url,
    );
    let software = software::SoftwareService::new(
        Arc::new(store::software::SqlSoftwareStore::new(
            connection.clone(),
            reader.clone(),
        )),
        wait_conditions.clone(),
        Some(quotas.clone()),
    );
    let retention = retention::Retention::new(
        store::retention::RetentionStore::new(connection.clone()),
        config.retention,
    );
    retention.clone().spawn(shutdown.clone());
    let plugin_gate = if config.plugin_registry_url.is_empty() {
        stacks::PluginGate::Disabled
    } else {
        stacks::PluginGate::connect(
            &config.plugin_registry_url,
            config.peers.plugin_registry.as_ref(),
            &config.internal_credential,
            config.plugin_registry_unavailable,
        )
        .map_err(StartError::Config)?
    };
    // One id for this engine process: the owner of the stack leases and
    // of the cluster actions it runs.
    let engine_id = uuid::Uuid::now_v7();
    // Named in the log so an operator can tell which replica holds a lease
    // (`stack_leases.engine_id`, `cluster_actions.owner`).
    tracing::info!(%engine_id, "engine id");
    let mut registry = resources::ResourceTypeRegistry::with_compute(instance_service.clone())
        .with_wait_conditions(wait_conditions.clone())
        .with_software(software.clone(), wait_conditions);
    registry = match &cloud {
        Some(cloud) => registry.with_cloud(cloud),
        None => registry.with_identity(Arc::new(
            resources::keystone::builtin::BuiltInIdentity::connect_lazy(
                &config.identity_url,
                InternalCredential::new(&config.internal_credential),
            )
            .map_err(StartError::Config)?,
        )),
    };
    let stack_operations = stacks::StackOperations::configured(
        stack_store,
        Arc::new(registry),
        stacks::StackSettings {
            plugins: plugin_gate,
            lease_ttl: config.stack_lease_ttl,
            action_timeout: config.stack_action_timeout,
            region: config.region.clone(),
            engine_id,
            quotas: Some(quotas.clone()),
            audit: Some(audit_trail.clone()),
            cloud: cloud.clone(),
        },
    );
    stack_operations.spawn_orphan_sweeper(shutdown.clone());
    stack_operations.spawn_lock_expiry(shutdown.clone());
    // From the moment shutdown begins, root creates and deletes start no new
    // step: they are handed back once their steps in flight finish.
    let handing_back = stack_operations.clone();
    {
        let stacks = stack_operations.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            shutdown.cancelled().await;
            stacks.begin_hand_back();
        });
    }
    let readiness = {
        let stacks = stack_operations.clone();
        readiness.with(Check::queue(
            "stack transitions",
            TRANSITIONS_SATURATED_AT,
            move || {
                let waiting = stacks.transitions_waiting() as u64;
                async move { Ok(waiting) }
            },
        ))
    };
    let hook_client = clusters::hooks::HookClient::connect_lazy(
        &config.lifecycle_hook_url,
        config.peers.lifecycle_hook.as_ref(),
        InternalCredential::new(&config.internal_credential),
    )
    .map_err(StartError::Config)?;
    let cluster_service = clusters::ClusterService::with_settings(
        cluster_store,
        instance_service.clone(),
        stack_operations.clone(),
        hook_client,
        clusters::ClusterSettings {
            dispatcher: clusters::dispatcher::DispatcherSettings {
                action_lease: config.cluster_action_lease,
                // Renewals and sweeps several times per lease.
                sweep_interval: (config.cluster_action_lease / 5).clamp(
                    std::time::Duration::from_millis(50),
                    std::time::Duration::from_secs(1),
                ),
                max_queued_per_cluster: config.cluster_max_queued_actions,
                ..clusters::dispatcher::DispatcherSettings::default()
            },
            quotas: Some(quotas.clone()),
            audit: Some(audit_trail.clone()),
            cloud: cloud.clone(),
            webhook_targets: config.webhook_targets.clone(),
            hook_min_timeout_secs: config.lifecycle_hook_min_timeout_secs,
        },
        engine_id,
    );
    clusters::dispatcher::spawn(cluster_service.clone(), shutdown.clone());
    let receiver_service = receivers::ReceiverService::new(
        Arc::new(store::receivers::SqlReceiverStore::new(
            connection.clone(),
            reader.clone(),
        )),
        cluster_service.clone(),
        &config.public_url,
    );
    receivers::spawn_message_worker(receiver_service.clone(), shutdown.clone());
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
    .add_service(ProfileServiceServer::with_interceptor(
        grpc::profiles::ProfileHandler::new(cluster_service.clone()),
        auth.clone(),
    ))
    .add_service(PolicyServiceServer::with_interceptor(
        grpc::policies::PolicyHandler::new(cluster_service.clone()),
        auth.clone(),
    ))
    .add_service(ClusterServiceServer::with_interceptor(
        grpc::clusters::ClusterHandler::new(cluster_service.clone()),
        auth.clone(),
    ))
    .add_service(NodeServiceServer::with_interceptor(
        grpc::nodes::NodeHandler::new(cluster_service.clone()),
        auth.clone(),
    ))
    .add_service(ActionServiceServer::with_interceptor(
        grpc::cluster_actions::ClusterActionHandler::new(cluster_service.clone()),
        auth.clone(),
    ))
    .add_service(ReceiverServiceServer::with_interceptor(
        grpc::receivers::ReceiverHandler::new(receiver_service.clone()),
        auth.clone(),
    ))
    .add_service(ReceiverQueueServiceServer::with_interceptor(
        grpc::receiver_queue::ReceiverQueueHandler::new(receiver_service),
        auth.clone(),
    ))
    .add_service(ClusterLifecycleCallbackServiceServer::with_interceptor(
        grpc::cluster_lifecycle_callback::ClusterLifecycleCallbackHandler::new(cluster_service),
        auth.clone(),
    ))
    .add_service(MaintenanceServiceServer::with_interceptor(
        grpc::maintenance::MaintenanceHandler::new(retention),
        auth.clone(),
    ))
    .add_service(AuditServiceServer::with_interceptor(
        grpc::audit::AuditHandler::new(audit_trail),
        auth.clone(),
    ))
    .add_service(QuotaServiceServer::with_interceptor(
        grpc::quotas::QuotaHandler::new(quotas),
        auth.clone(),
    ))
    .add_service(SoftwareConfigServiceServer::with_interceptor(
        grpc::software::SoftwareHandler::new(software.clone()),
        auth.clone(),
    ))
    .add_service(SoftwareDeploymentServiceServer::with_interceptor(
        grpc::software::SoftwareHandler::new(software),
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
    handing_back.hand_back(STACK_HAND_BACK_GRACE).await;
    instance_service.drain().await;
    Ok(())
}

/// How the engine connects to the services it calls (the plugin registry,
/// lifecycle-hook): a replica that does not accept within 2 s counts as
/// unreachable, and calls are not held back by Nagle's algorithm.
pub(crate) fn peer_endpoint(endpoint: tonic::transport::Endpoint) -> tonic::transport::Endpoint {
    endpoint
        .connect_timeout(std::time::Duration::from_secs(2))
        .tcp_nodelay(true)
}

/// How long a stopping engine waits for the resource steps in flight before
/// it exits: within docker-compose's default 10 s stop timeout, after the
/// gRPC drain. Operations still running then are taken over by another
/// engine's sweep when their leases expire.
const STACK_HAND_BACK_GRACE: std::time::Duration = std::time::Duration::from_secs(5);
