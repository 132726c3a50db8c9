//! The api-gateway: Ember's only public door. It authenticates every request,
//! serves the OpenStack-compatible REST APIs by calling the engine over gRPC,
//! and forwards the public gRPC services (with reflection for grpcurl) — all
//! on one port, telling gRPC apart by its content type. It holds no domain
//! state; its one store is the built-in identity (`identity`).
#![forbid(unsafe_code)]

pub mod auth;
pub mod config;
pub mod connections;
pub mod console;
pub mod error;
pub mod grpc_proxy;
pub mod identity;
pub mod metrics;
pub mod rest;
pub mod roles;
pub mod upstream;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use ember_proto::identity::v1::identity_admin_service_server::IdentityAdminServiceServer;
use ember_runtime::auth::TokenSigner;
use ember_runtime::identity::InternalCredential;
use ember_runtime::server::{DRAIN_GRACE_PERIOD, StartError};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};

pub use config::{AuthMode, Config, IdentitySettings};

/// What every request handler shares: one allocation behind an `Arc`, so
/// the clone axum makes for every extractor and middleware of every
/// request is a reference count (cloning the fields each time — token
/// signer, routers, channels — was ~10% of the gateway's CPU under load).
#[derive(Clone)]
pub struct GatewayState(Arc<GatewayShared>);

impl std::ops::Deref for GatewayState {
    type Target = GatewayShared;

    fn deref(&self) -> &GatewayShared {
        &self.0
    }
}

impl GatewayState {
    /// The shared contents to change, before the state is handed to the
    /// router (`None` once clones of it exist).
    pub fn shared_mut(&mut self) -> Option<&mut GatewayShared> {
        Arc::get_mut(&mut self.0)
    }
}

/// The contents of [`GatewayState`].
pub struct GatewayShared {
    pub authenticator: auth::Authenticator,
    pub credential: InternalCredential,
    pub upstreams: upstream::Upstreams,
    /// Health and reflection, answered by the gateway itself.
    pub local_grpc: axum::Router,
    /// The identity admin service (built-in identity only), behind the
    /// gRPC door's admin check.
    pub identity_grpc: Option<axum::Router>,
    pub identity: Arc<IdentitySettings>,
    /// How fast each address may ask the front door for tokens.
    pub login_throttle: Arc<identity::throttle::LoginThrottle>,
    pub metrics: Arc<metrics::Metrics>,
    pub request_timeout: std::time::Duration,
    /// The web console's files (`None`: no console).
    pub console: Option<Arc<console::Console>>,
}

impl GatewayState {
    /// Connects what the gateway needs; the built-in identity's store is
    /// opened (and migrated) and followed for revocations until `shutdown`.
    pub async fn new(
        config: &Config,
        shutdown: CancellationToken,
    ) -> Result<GatewayState, StartError> {
        let upstreams = upstream::Upstreams::connect_lazy(
            &config.engine_url,
            &config.lifecycle_hook_url,
            &config.plugin_registry_url,
        )
        .map_err(|error| StartError::Config(error.to_string()))?
        .with_peers(&config.peers);
        let signer = TokenSigner::new(&config.signing_key).with_clock_skew(config.clock_skew);
        let (authenticator, identity_grpc) = match &config.auth {
            AuthMode::BuiltIn { database_url } => {
                let directory = identity::Directory::open(database_url, shutdown)
                    .await
                    .map_err(|error| StartError::Config(format!("identity store: {error}")))?
                    .with_lockout(config.identity.lockout);
                let admin = IdentityAdminServiceServer::new(identity::admin::AdminHandler::new(
                    directory.clone(),
                ));
                (
                    auth::Authenticator::BuiltIn { signer, directory },
                    Some(tonic::service::Routes::new(admin).into_axum_router()),
                )
            }
            AuthMode::Keystone(keystone) => {
                let validator = identity::keystone::KeystoneValidator::new(keystone.clone())
                    .map_err(StartError::Config)?;
                (
                    auth::Authenticator::Keystone {
                        signer,
                        validator: Arc::new(validator),
                    },
                    None,
                )
            }
        };
        let mut public = upstream::public_service_names();
        if identity_grpc.is_some() {
            public.push(identity::admin::SERVICE_NAME);
        }
        let (reflection_v1, reflection_v1alpha) = ember_runtime::server::reflection(&public)?;
        let (health_reporter, health_service) = tonic_health::server::health_reporter();
        // The gateway reports itself as serving; `/healthz` checks the
        // services behind it.
        drop(health_reporter);
        let local_grpc = tonic::service::Routes::new(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .into_axum_router();
        Ok(GatewayState(Arc::new(GatewayShared {
            authenticator,
            credential: InternalCredential::new(&config.internal_credential),
            upstreams,
            local_grpc,
            identity_grpc,
            identity: Arc::new(config.identity.clone()),
            login_throttle: Arc::new(identity::throttle::LoginThrottle::new(
                config.identity.login_rate,
            )),
            metrics: Arc::default(),
            request_timeout: config.request_timeout,
            console: console::Console::new(&config.console),
        })))
    }
}

/// The whole gateway as one axum router: gRPC by content type, REST by path.
pub fn router(state: GatewayState) -> axum::Router {
    rest::router(state.clone())
        .layer(middleware::from_fn_with_state(state, dispatch_grpc))
        // Each request gets an `x-request-id` (the caller's is kept) that is
        // forwarded upstream and echoed in the response.
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(tower_http::trace::TraceLayer::new_for_http())
}

async fn dispatch_grpc(
    State(state): State<GatewayState>,
    request: Request,
    next: Next,
) -> Response {
    if grpc_proxy::is_grpc(&request) {
        grpc_proxy::handle(state, request).await
    } else {
        next.run(request).await
    }
}

/// Runs the gateway until `shutdown` is cancelled, then drains for at most
/// the grace period.
pub async fn serve(
    config: Config,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), StartError> {
    let state = GatewayState::new(&config, shutdown.clone()).await?;
    // Logged once the identity store is migrated and the state is ready.
    match listener.local_addr() {
        Ok(address) => tracing::info!(%address, service = "api-gateway", "serving"),
        Err(_) => tracing::info!(service = "api-gateway", "serving"),
    }
    let door = connections::Door::new(config.connections, state.metrics.clone());
    connections::serve(listener, router(state), door, shutdown, DRAIN_GRACE_PERIOD).await;
    Ok(())
}
