//! `ember-policy-plugin`: a lifecycle plugin (spec
//! heat-stack-lifecycle-plugpoint) that checks every stack create, update
//! and adopt against rules from a TOML file — resource limits per type,
//! properties every resource of a type must set, and an allow-list of
//! types — and answers ALLOW, WARN or DENY. Register it in the
//! plugin-registry like any other plugin.
//!
//! It is called by the plugin-registry without Ember's internal credential
//! (plugins are outside Ember's trust boundary), so it has no
//! authentication of its own: listen on a private address.
#![forbid(unsafe_code)]

pub mod error;
pub mod evaluate;
pub mod grpc;
pub mod rules;
pub mod snapshot;

use std::sync::Arc;
use std::time::Duration;

use ember_proto::plugin::v1::lifecycle_plugin_server::LifecyclePluginServer;
use ember_runtime::server::{GrpcService, serve_grpc};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use error::{Error, Result};
pub use rules::Policy;

/// The gRPC service the plugin serves (with health and reflection).
pub const SERVICE_NAMES: &[&str] = &["ember.plugin.v1.LifecyclePlugin"];

/// Where the plugin listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7070";

/// A deadline for one call; the plugin-registry's own timeout is shorter.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Serves the policy on `listener` until `shutdown` is cancelled.
pub async fn serve(
    policy: Policy,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<()> {
    let plugin = grpc::PolicyPlugin::new(Arc::new(policy));
    let routes = tonic::service::Routes::new(LifecyclePluginServer::new(plugin));
    serve_grpc(
        listener,
        GrpcService {
            routes,
            service_names: SERVICE_NAMES.to_vec(),
            request_timeout: REQUEST_TIMEOUT,
            // A plugin: called by the registry, which presents no Ember
            // credential; nothing internal to hide.
            reflection_auth: None,
            // No database, no queue: ready while it runs.
            readiness: None,
            in_process: None,
        },
        shutdown,
    )
    .await?;
    Ok(())
}
