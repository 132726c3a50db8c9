//! gRPC between two services of one process, without a connection.
//!
//! `ember dev` runs all four services in one process: the gateway calls the
//! engine on every request, and the engine calls the plugin registry on
//! every stack operation. Over loopback TCP each call crossed the kernel
//! twice and woke the other side through epoll (about a third of the CPU of
//! a `GET` of one stack); over an in-memory pipe it still went through
//! HTTP/2 — header compression, framing, flow control and a connection task
//! on each side (about a sixth of the CPU of creating stacks). Here the
//! caller's request is handed to the serving side's routes as it is: the
//! same protobuf, interceptors, trace layer and deadlines as over TCP, no
//! transport in between. A service keeps its TCP port for everyone else
//! (`grpcurl`, other processes); separate processes (`ember serve`,
//! compose) use TCP as before.
//!
//! A call made before the server is up waits for it (as a connection waits
//! in a TCP backlog); one made after it began to drain fails UNAVAILABLE as
//! never sent (a `tonic::ConnectError`: nothing was done, and the caller may
//! send it again).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::watch;
use tonic::body::Body;
use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt};

/// What a call returns when it fails to reach a service at all.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A served gRPC service as its callers in the process reach it.
pub type LocalService =
    BoxCloneSyncService<http::Request<Body>, http::Response<Body>, std::convert::Infallible>;

type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<Body>, BoxError>> + Send + 'static>>;

/// Both ends of an in-process link: the client side calls, the server side
/// serves.
pub fn link() -> (InProcessConnector, InProcessListener) {
    let (sender, receiver) = watch::channel(Serving::Waiting);
    (
        InProcessConnector { receiver },
        InProcessListener(Arc::new(sender)),
    )
}

/// Where the server side of a link stands.
#[derive(Clone)]
enum Serving {
    /// Not up yet: calls wait.
    Waiting,
    Up(LocalService),
    /// Draining or gone: calls fail as never sent.
    Stopped,
}

/// Calls the service served by the matching [`InProcessListener`].
#[derive(Clone)]
pub struct InProcessConnector {
    receiver: watch::Receiver<Serving>,
}

impl std::fmt::Debug for InProcessConnector {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("InProcessConnector")
    }
}

impl InProcessConnector {
    /// An upstream reaching the service through this link.
    pub fn upstream(&self) -> Upstream {
        Upstream::Local(self.clone())
    }

    fn call(&self, request: http::Request<Body>) -> ResponseFuture {
        let serving = self.receiver.borrow().clone();
        let mut receiver = self.receiver.clone();
        Box::pin(async move {
            let serving = match serving {
                Serving::Waiting => receiver
                    .wait_for(|serving| !matches!(serving, Serving::Waiting))
                    .await
                    .map(|serving| (*serving).clone())
                    .unwrap_or(Serving::Stopped),
                other => other,
            };
            match serving {
                Serving::Up(service) => match service.oneshot(request).await {
                    Ok(response) => Ok(response),
                    Err(never) => match never {},
                },
                Serving::Waiting | Serving::Stopped => Err(stopped()),
            }
        })
    }
}

fn stopped() -> BoxError {
    Box::new(tonic::ConnectError(Box::new(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        "the in-process server has stopped accepting calls",
    ))))
}

/// The server side of a [`link`]: served once, by the server that owns it.
#[derive(Debug, Clone)]
pub struct InProcessListener(Arc<watch::Sender<Serving>>);

impl std::fmt::Debug for Serving {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            Serving::Waiting => "Waiting",
            Serving::Up(_) => "Up",
            Serving::Stopped => "Stopped",
        })
    }
}

impl InProcessListener {
    /// Serves the link's calls with `service` (until [`stop`]). False when
    /// the link was served before: it is served once.
    ///
    /// [`stop`]: InProcessListener::stop
    pub fn serve(&self, service: LocalService) -> bool {
        self.0.send_if_modified(|serving| {
            if matches!(serving, Serving::Waiting) {
                *serving = Serving::Up(service);
                true
            } else {
                false
            }
        })
    }

    /// Refuses calls from now on (calls already made run to their end).
    pub fn stop(&self) {
        self.0.send_replace(Serving::Stopped);
    }
}

/// Both ends of one service's [`link`].
#[derive(Debug, Clone)]
pub struct Link {
    /// What callers in the process call the service through.
    pub connector: InProcessConnector,
    /// What the service serves.
    pub listener: InProcessListener,
}

impl Default for Link {
    fn default() -> Link {
        let (connector, listener) = link();
        Link {
            connector,
            listener,
        }
    }
}

/// The links of one process's services (`ember dev`): each service serves
/// its listener beside its port, and its callers in the process call
/// through its connector instead of its URL.
#[derive(Debug, Clone, Default)]
pub struct Links {
    pub engine: Link,
    pub lifecycle_hook: Link,
    pub plugin_registry: Link,
}

impl Links {
    /// What a caller in the process reaches the services through.
    pub fn peers(&self) -> Peers {
        Peers {
            engine: Some(self.engine.connector.clone()),
            lifecycle_hook: Some(self.lifecycle_hook.connector.clone()),
            plugin_registry: Some(self.plugin_registry.connector.clone()),
        }
    }
}

/// The services a caller reaches in its own process (the rest by URL).
#[derive(Debug, Clone, Default)]
pub struct Peers {
    pub engine: Option<InProcessConnector>,
    pub lifecycle_hook: Option<InProcessConnector>,
    pub plugin_registry: Option<InProcessConnector>,
}

/// A way to a gRPC service: a channel over the network, or the service
/// itself in this process. Clients are generic over it
/// (`StackServiceClient<Upstream>`), so a caller does not care which.
#[derive(Clone, Debug)]
pub enum Upstream {
    Remote(crate::channel::Balanced),
    Local(InProcessConnector),
}

impl From<crate::channel::Balanced> for Upstream {
    fn from(channel: crate::channel::Balanced) -> Upstream {
        Upstream::Remote(channel)
    }
}

impl Upstream {
    /// Through `in_process` when the service runs in this process, else a
    /// channel to `url` spread over its replicas
    /// ([`crate::channel::balanced`], with `configure`'s settings).
    pub fn to(
        url: &str,
        in_process: Option<&InProcessConnector>,
        configure: impl Fn(tonic::transport::Endpoint) -> tonic::transport::Endpoint
        + Send
        + Sync
        + 'static,
    ) -> Result<Upstream, crate::channel::ChannelError> {
        match in_process {
            Some(connector) => Ok(connector.upstream()),
            None => crate::channel::balanced(url, configure).map(Upstream::Remote),
        }
    }
}

impl Service<http::Request<Body>> for Upstream {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match self {
            Upstream::Remote(channel) => channel.poll_ready(context),
            Upstream::Local(_) => Poll::Ready(Ok(())),
        }
    }

    fn call(&mut self, request: http::Request<Body>) -> ResponseFuture {
        match self {
            Upstream::Remote(channel) => channel.call(request),
            Upstream::Local(connector) => connector.call(request),
        }
    }
}

/// The deadline of one in-process call: the caller's `grpc-timeout`, at
/// most `limit` — what tonic's server applies to calls over a connection.
/// A call past it ends CANCELLED "Timeout expired", as there.
#[derive(Clone)]
pub struct Deadline<S> {
    inner: S,
    limit: Duration,
}

impl<S> Deadline<S> {
    pub fn new(inner: S, limit: Duration) -> Deadline<S> {
        Deadline { inner, limit }
    }
}

impl<S> Service<http::Request<Body>> for Deadline<S>
where
    S: Service<
            http::Request<Body>,
            Response = http::Response<Body>,
            Error = std::convert::Infallible,
        >,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = std::convert::Infallible;
    type Future = Pin<
        Box<
            dyn Future<Output = Result<http::Response<Body>, std::convert::Infallible>>
                + Send
                + 'static,
        >,
    >;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let deadline =
            grpc_timeout(request.headers()).map_or(self.limit, |asked| asked.min(self.limit));
        let response = self.inner.call(request);
        Box::pin(async move {
            match tokio::time::timeout(deadline, response).await {
                Ok(answered) => answered,
                Err(_) => {
                    Ok(tonic::Status::cancelled(tonic::TimeoutExpired(()).to_string()).into_http())
                }
            }
        })
    }
}

/// A `grpc-timeout` header's duration: at most 8 digits and a unit (gRPC
/// over HTTP/2, "Timeout"). `None` when absent or malformed (as tonic's
/// server, which then applies its own limit alone).
fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    let digits = value.get(..value.len().checked_sub(1)?)?;
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let amount: u64 = digits.parse().ok()?;
    Some(match value.as_bytes()[value.len() - 1] {
        b'H' => Duration::from_secs(amount * 60 * 60),
        b'M' => Duration::from_secs(amount * 60),
        b'S' => Duration::from_secs(amount),
        b'm' => Duration::from_millis(amount),
        b'u' => Duration::from_micros(amount),
        b'n' => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::time::{Duration, Instant};

    use tokio_util::sync::CancellationToken;
    use tonic::body::Body;
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    use tower::ServiceExt;

    use super::{Upstream, grpc_timeout, link};
    use crate::server::{GrpcService, serve_grpc};

    /// A service whose one method answers after a second.
    #[derive(Clone)]
    struct Slow;

    impl tonic::server::NamedService for Slow {
        const NAME: &'static str = "test.Slow";
    }

    impl tower::Service<http::Request<Body>> for Slow {
        type Response = http::Response<Body>;
        type Error = Infallible;
        type Future = std::pin::Pin<
            Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>,
        >;

        fn poll_ready(
            &mut self,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Infallible>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<Body>) -> Self::Future {
            Box::pin(async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Ok(tonic::Status::ok("answered").into_http())
            })
        }
    }

    fn service(
        routes: tonic::service::Routes,
        request_timeout: Duration,
        in_process: Option<super::InProcessListener>,
    ) -> GrpcService {
        GrpcService {
            routes,
            service_names: Vec::new(),
            request_timeout,
            reflection_auth: None,
            readiness: None,
            in_process,
        }
    }

    async fn serve(
        service: GrpcService,
    ) -> (
        std::net::SocketAddr,
        CancellationToken,
        tokio::task::JoinHandle<Result<(), crate::server::ServeError>>,
    ) {
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let address = tcp.local_addr().expect("its address");
        let shutdown = CancellationToken::new();
        let serving = tokio::spawn(serve_grpc(tcp, service, shutdown.clone()));
        (address, shutdown, serving)
    }

    #[tokio::test]
    async fn a_service_answers_over_its_link_and_its_port_and_refuses_once_stopped() {
        let (connector, listener) = link();
        // A call made before the server is up waits for it, as on a TCP
        // backlog.
        let mut early = HealthClient::new(connector.upstream());
        let waiting = tokio::spawn(async move { early.check(HealthCheckRequest::default()).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "no server yet: the call waits");
        let (address, shutdown, serving) = serve(service(
            tonic::service::Routes::default(),
            Duration::from_secs(5),
            Some(listener.clone()),
        ))
        .await;
        let answer = waiting
            .await
            .expect("joined")
            .expect("health over the link");
        assert_eq!(answer.into_inner().status, ServingStatus::Serving as i32);
        let mut over_tcp = HealthClient::new(Upstream::from(
            crate::channel::balanced(&format!("http://{address}"), |endpoint| endpoint)
                .expect("a URL"),
        ));
        over_tcp
            .check(HealthCheckRequest::default())
            .await
            .expect("health over TCP");
        assert!(
            !listener.serve(tower::util::BoxCloneSyncService::new(
                tonic::service::Routes::default().prepare()
            )),
            "a link is served once"
        );

        shutdown.cancel();
        serving.await.expect("joined").expect("stopped cleanly");
        let mut after = HealthClient::new(connector.upstream());
        let refused = tokio::time::timeout(
            Duration::from_secs(5),
            after.check(HealthCheckRequest::default()),
        )
        .await
        .expect("a stopped server refuses at once, it does not hang")
        .expect_err("no server");
        assert_eq!(refused.code(), tonic::Code::Unavailable);
        assert!(
            crate::channel::never_sent(&refused),
            "a refused call counts as never sent: {refused:?}"
        );
    }

    #[tokio::test]
    async fn an_in_process_call_ends_at_its_deadline_or_the_services_limit() {
        let (connector, listener) = link();
        let (_, shutdown, serving) = serve(service(
            tonic::service::Routes::new(Slow),
            Duration::from_millis(300),
            Some(listener),
        ))
        .await;
        let call = |timeout: Option<&'static str>| {
            let mut request = http::Request::post("/test.Slow/Wait")
                .header("content-type", "application/grpc")
                .body(Body::empty())
                .expect("a request");
            if let Some(timeout) = timeout {
                request
                    .headers_mut()
                    .insert("grpc-timeout", http::HeaderValue::from_static(timeout));
            }
            connector.upstream().oneshot(request)
        };
        for (asked, within) in [
            (Some("50m"), Duration::from_millis(250)),
            (None, Duration::from_millis(900)),
            (Some("10S"), Duration::from_millis(900)),
        ] {
            let started = Instant::now();
            let response = call(asked).await.expect("an answer");
            let took = started.elapsed();
            assert_eq!(
                response
                    .headers()
                    .get("grpc-status")
                    .map(|code| code.as_bytes()),
                Some(&b"1"[..]),
                "CANCELLED after {asked:?}"
            );
            assert_eq!(
                response
                    .headers()
                    .get("grpc-message")
                    .map(|message| message.as_bytes()),
                Some(&b"Timeout%20expired"[..])
            );
            assert!(
                took < within,
                "{asked:?}: took {took:?}, expected under {within:?}"
            );
        }
        shutdown.cancel();
        serving.await.expect("joined").expect("stopped cleanly");
    }

    #[test]
    fn grpc_timeouts_are_read_as_grpc_over_http2_writes_them() {
        let parse = |value: &'static str| {
            let mut headers = http::HeaderMap::new();
            headers.insert("grpc-timeout", http::HeaderValue::from_static(value));
            grpc_timeout(&headers)
        };
        assert_eq!(parse("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse("3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse("30S"), Some(Duration::from_secs(30)));
        assert_eq!(parse("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse("99999999u"), Some(Duration::from_micros(99_999_999)));
        assert_eq!(parse("7n"), Some(Duration::from_nanos(7)));
        for malformed in ["", "S", "123456789S", "12x", "-1S", "1.5S", "1 S"] {
            assert_eq!(parse(malformed), None, "{malformed:?}");
        }
        assert_eq!(grpc_timeout(&http::HeaderMap::new()), None);
    }
}
