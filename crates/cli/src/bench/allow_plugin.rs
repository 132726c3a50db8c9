//! An allow-all lifecycle plugin for the benchmarks (`ember bench plugins`,
//! `ember bench stacks`): a real `ember.plugin.v1.LifecyclePlugin` gRPC
//! server on an ephemeral loopback port that allows every PreOperation and
//! acknowledges every PostOperation, so a benchmark measures what a chain of
//! plugins costs, not a plugin's decisions. (The test plugins that answer as
//! told and journal their calls are `ember_plugin_registry::testing`, behind
//! its `testing` feature.)

use ember_proto::plugin::v1 as plugin_pb;
use ember_proto::plugin::v1::lifecycle_plugin_server::{LifecyclePlugin, LifecyclePluginServer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

/// A running allow-all plugin. Stops when dropped or with [`AllowPlugin::stop`].
pub struct AllowPlugin {
    pub name: String,
    /// `http://127.0.0.1:PORT`, to register.
    pub endpoint: String,
    shutdown: CancellationToken,
    server: tokio::task::JoinHandle<()>,
}

impl AllowPlugin {
    /// Starts a plugin named `name` on an ephemeral loopback port.
    pub async fn start(name: &str) -> std::io::Result<AllowPlugin> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let shutdown = CancellationToken::new();
        let server = tokio::spawn({
            let shutdown = shutdown.clone();
            async move {
                let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
                let served = tonic::transport::Server::builder()
                    .add_service(LifecyclePluginServer::new(AllowAll))
                    .serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned())
                    .await;
                if let Err(error) = served {
                    tracing::error!(%error, "benchmark plugin server failed");
                }
            }
        });
        Ok(AllowPlugin {
            name: name.to_owned(),
            endpoint,
            shutdown,
            server,
        })
    }

    /// Stops the server and waits until it has.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        // The server task only ends; a failure in it was already logged.
        let _ = (&mut self.server).await;
    }
}

impl Drop for AllowPlugin {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

struct AllowAll;

#[tonic::async_trait]
impl LifecyclePlugin for AllowAll {
    async fn pre_operation(
        &self,
        _request: Request<plugin_pb::PreOperationRequest>,
    ) -> Result<Response<plugin_pb::PreOperationResponse>, Status> {
        Ok(Response::new(plugin_pb::PreOperationResponse {
            verdict: plugin_pb::Verdict::Allow as i32,
            message: String::new(),
        }))
    }

    async fn post_operation(
        &self,
        _request: Request<plugin_pb::PostOperationRequest>,
    ) -> Result<Response<plugin_pb::PostOperationResponse>, Status> {
        Ok(Response::new(plugin_pb::PostOperationResponse {}))
    }
}
