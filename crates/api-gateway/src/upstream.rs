//! The internal services behind the gateway and the gRPC services each one
//! serves publicly. A gRPC path `/package.Service/Method` is forwarded to the
//! upstream that serves `package.Service`.

use std::time::Duration;

use ember_runtime::in_process::{Peers, Upstream};
use tonic::transport::Endpoint;

/// The public gRPC services, by upstream. Reflection on the gateway lists
/// exactly these (plus health and reflection).
pub const ENGINE_SERVICES: &[&str] = &[
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
    "ember.engine.v1.MaintenanceService",
    "ember.engine.v1.AuditService",
    "ember.engine.v1.SoftwareConfigService",
    "ember.engine.v1.SoftwareDeploymentService",
    "ember.engine.v1.ReceiverService",
];
pub const LIFECYCLE_HOOK_SERVICES: &[&str] = &["ember.lifecyclehook.v1.LifecycleHookService"];
pub const PLUGIN_REGISTRY_SERVICES: &[&str] = &["ember.pluginregistry.v1.PluginRegistryService"];

/// Every public service name.
pub fn public_service_names() -> Vec<&'static str> {
    ENGINE_SERVICES
        .iter()
        .chain(LIFECYCLE_HOOK_SERVICES)
        .chain(PLUGIN_REGISTRY_SERVICES)
        .copied()
        .collect()
}

/// The internal services: lazily connected channels, each spread over
/// every replica its host name resolves to (`ember_runtime::channel`), or
/// the service itself when it runs in this process.
#[derive(Clone, Debug)]
pub struct Upstreams {
    pub engine: Upstream,
    pub lifecycle_hook: Upstream,
    pub plugin_registry: Upstream,
}

#[derive(Debug, thiserror::Error)]
#[error("{name} URL {url:?} is invalid: {reason}")]
pub struct UpstreamUrlError {
    name: &'static str,
    url: String,
    reason: String,
}

impl Upstreams {
    /// Channels connect on first use, so the gateway can start before the
    /// services behind it; a call made while one is down fails UNAVAILABLE.
    /// Must be called within a Tokio runtime (the replicas are followed on a
    /// task of their own).
    pub fn connect_lazy(
        engine_url: &str,
        lifecycle_hook_url: &str,
        plugin_registry_url: &str,
    ) -> Result<Upstreams, UpstreamUrlError> {
        Ok(Upstreams {
            engine: channel("engine_url", engine_url)?,
            lifecycle_hook: channel("lifecycle_hook_url", lifecycle_hook_url)?,
            plugin_registry: channel("plugin_registry_url", plugin_registry_url)?,
        })
    }

    /// The services in this process called directly instead of at their
    /// URLs.
    pub fn with_peers(mut self, peers: &Peers) -> Upstreams {
        for (upstream, peer) in [
            (&mut self.engine, &peers.engine),
            (&mut self.lifecycle_hook, &peers.lifecycle_hook),
            (&mut self.plugin_registry, &peers.plugin_registry),
        ] {
            if let Some(connector) = peer {
                *upstream = connector.upstream();
            }
        }
        self
    }

    /// Every upstream with its service name.
    pub fn named(&self) -> impl Iterator<Item = (&'static str, Upstream)> {
        [
            ("engine", self.engine.clone()),
            ("lifecycle-hook", self.lifecycle_hook.clone()),
            ("plugin-registry", self.plugin_registry.clone()),
        ]
        .into_iter()
    }

    /// The channel serving a gRPC path, if the service is public.
    pub fn for_path(&self, path: &str) -> Option<&Upstream> {
        let service = path.strip_prefix('/')?.split('/').next()?;
        if ENGINE_SERVICES.contains(&service) {
            Some(&self.engine)
        } else if LIFECYCLE_HOOK_SERVICES.contains(&service) {
            Some(&self.lifecycle_hook)
        } else if PLUGIN_REGISTRY_SERVICES.contains(&service) {
            Some(&self.plugin_registry)
        } else {
            None
        }
    }
}

/// How the gateway connects to a service.
fn configure_endpoint(endpoint: Endpoint) -> Endpoint {
    endpoint
        .connect_timeout(Duration::from_secs(5))
        // What the gateway accepts from a service in one header block;
        // services cap their status messages far below it.
        .http2_max_header_list_size(ember_runtime::server::MAX_HEADER_LIST_BYTES)
        .initial_stream_window_size(ember_runtime::server::STREAM_WINDOW_BYTES)
        .initial_connection_window_size(ember_runtime::server::CONNECTION_WINDOW_BYTES)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_while_idle(true)
}

fn channel(name: &'static str, url: &str) -> Result<Upstream, UpstreamUrlError> {
    ember_runtime::channel::balanced(url, configure_endpoint)
        .map(Upstream::from)
        .map_err(|error| UpstreamUrlError {
            name,
            url: url.to_owned(),
            reason: error.to_string(),
        })
}
