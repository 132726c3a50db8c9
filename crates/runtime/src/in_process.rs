//! gRPC between two services of one process over in-memory pipes.
//!
//! `ember dev` runs all four services in one process; the gateway calls the
//! engine on every request. Over loopback TCP each call crossed the kernel
//! twice and woke the other side through epoll: on `GET` of one stack,
//! about a third of the CPU. Through a [`pipe`] the same HTTP/2 and
//! protobuf go through memory — the engine's interceptors, deadlines and
//! health checks unchanged. The engine keeps its TCP port for everyone else
//! (lifecycle-hook, `grpcurl`); separate processes (`ember serve`, compose)
//! use TCP as before.

use std::sync::{Arc, Mutex};

use tokio::io::DuplexStream;
use tokio::sync::mpsc;
use tonic::transport::{Channel, Endpoint};

/// How much one direction of a pipe buffers before the writer waits (an
/// HTTP/2 frame is at most 16 KiB; a large answer flows in several).
const PIPE_BYTES: usize = 256 * 1024;

/// Both ends of a pipe: the client side opens connections, the server side
/// accepts them.
pub fn pipe() -> (InProcessConnector, InProcessListener) {
    let (sender, receiver) = mpsc::unbounded_channel();
    (
        InProcessConnector { sender },
        InProcessListener(Arc::new(Mutex::new(Some(receiver)))),
    )
}

/// Opens connections to the server holding the matching
/// [`InProcessListener`].
#[derive(Debug, Clone)]
pub struct InProcessConnector {
    sender: mpsc::UnboundedSender<DuplexStream>,
}

impl InProcessConnector {
    /// A channel whose connections are pipes; `configure` sets the same
    /// HTTP/2 options a TCP endpoint would get. Connects when first used,
    /// and again after the server dropped a connection.
    pub fn channel(&self, configure: impl FnOnce(Endpoint) -> Endpoint) -> Channel {
        let sender = self.sender.clone();
        let connect = tower::service_fn(move |_: http::Uri| {
            let sender = sender.clone();
            async move {
                let (client, server) = tokio::io::duplex(PIPE_BYTES);
                sender.send(server).map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::ConnectionRefused,
                        "the in-process server has stopped accepting connections",
                    )
                })?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(client))
            }
        });
        configure(Endpoint::from_static("http://in-process.ember.invalid"))
            .connect_with_connector_lazy(connect)
    }
}

/// The server side of a [`pipe`]: taken once, by the server that serves it.
#[derive(Debug, Clone)]
pub struct InProcessListener(Arc<Mutex<Option<mpsc::UnboundedReceiver<DuplexStream>>>>);

impl InProcessListener {
    /// The accepted connections; `None` once taken.
    pub fn take(&self) -> Option<mpsc::UnboundedReceiver<DuplexStream>> {
        self.0.lock().ok()?.take()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio_util::sync::CancellationToken;
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;

    use super::pipe;
    use crate::server::{GrpcService, serve_grpc};

    fn health_only(in_process: Option<super::InProcessListener>) -> GrpcService {
        GrpcService {
            routes: tonic::service::Routes::default(),
            service_names: Vec::new(),
            request_timeout: Duration::from_secs(5),
            reflection_auth: None,
            readiness: None,
            in_process,
        }
    }

    #[tokio::test]
    async fn a_service_answers_over_its_pipe_and_its_port_and_refuses_once_stopped() {
        let (connector, listener) = pipe();
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let address = tcp.local_addr().expect("its address");
        let shutdown = CancellationToken::new();
        let serving = tokio::spawn(serve_grpc(
            tcp,
            health_only(Some(listener.clone())),
            shutdown.clone(),
        ));
        // Connections opened before the server takes the pipe wait for it,
        // as on a TCP backlog.
        let mut piped = HealthClient::new(connector.channel(|endpoint| endpoint));
        let answer = piped
            .check(HealthCheckRequest::default())
            .await
            .expect("health over the pipe");
        assert_eq!(answer.into_inner().status, ServingStatus::Serving as i32);
        let mut over_tcp = HealthClient::new(
            tonic::transport::Endpoint::from_shared(format!("http://{address}"))
                .expect("a URL")
                .connect()
                .await
                .expect("the port still serves"),
        );
        over_tcp
            .check(HealthCheckRequest::default())
            .await
            .expect("health over TCP");
        assert!(listener.take().is_none(), "the pipe is taken once");

        shutdown.cancel();
        serving.await.expect("joined").expect("stopped cleanly");
        let mut after = HealthClient::new(connector.channel(|endpoint| endpoint));
        let refused = tokio::time::timeout(
            Duration::from_secs(5),
            after.check(HealthCheckRequest::default()),
        )
        .await
        .expect("a stopped server refuses at once, it does not hang");
        assert_eq!(
            refused.expect_err("no server").code(),
            tonic::Code::Unavailable
        );
    }
}
