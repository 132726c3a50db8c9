//! gRPC channels to the other services of a deployment, spread over every
//! replica of the service.
//!
//! A service is named by a URL, or by several separated by commas
//! (`http://engine-a:50052,http://engine-b:50052`: replicas on hosts of
//! their own). With replicas (`docker-compose --scale`, a Kubernetes
//! headless service) one name resolves to one address per replica, but a
//! plain tonic channel connects to one of them and multiplexes every call
//! over that single HTTP/2 connection: one replica does all the work.
//! [`balanced`] keeps one lazily connected HTTP/2 connection per address
//! instead — every address of every name, and every IP address given — and
//! sends each call to the less loaded of two picked at random (tower's
//! power of two choices over pending requests). It looks the names up again
//! every [`RESOLVE_INTERVAL`] and opens a TCP connection to each address
//! found: replicas that start are used, and a replica that refuses
//! connections (killed, or its DNS entry not yet removed) gets no calls
//! until it accepts them again. When no address accepts, all are kept, so
//! calls fail with the real connection error.
//!
//! A single URL whose host is an IP address gets a plain channel: there is
//! nothing to spread over. While a name cannot be resolved (the DNS entry
//! is not there yet at start-up), the channel dials the URL itself, as a
//! plain channel would, so a call fails UNAVAILABLE (once it was tried
//! for [`UNSENT_RETRY_PATIENCE`]) rather than waiting for an address
//! without end; an answer with no address keeps the addresses known.
//!
//! Between a replica's death and the next lookup, a call can still be sent
//! its way and fail to connect. Such a call never left, so it is safe to
//! send again: a [`Balanced`] channel does, on another replica, for up to
//! [`UNSENT_RETRY_PATIENCE`] — and the first such failure has the names
//! looked up and the replicas probed at once, so the dead one is dropped
//! from the balance set then, not at the next interval.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use http_body_util::BodyExt;
use tokio::sync::Notify;
use tokio::sync::mpsc::Sender;
use tonic::body::Body;
use tonic::transport::channel::Change;
use tonic::transport::{Channel, Endpoint};
use tower::{Service, ServiceExt};

/// How often a service's name is looked up again and its replicas probed.
pub const RESOLVE_INTERVAL: Duration = Duration::from_secs(2);

/// How long a replica may take to accept a TCP connection before it counts
/// as unreachable for one interval.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// How long a call that could not connect is tried again: long enough for
/// the follower to notice a dead replica (one interval and its probe) even
/// when the death came just after a lookup.
pub const UNSENT_RETRY_PATIENCE: Duration = Duration::from_millis(
    2 * RESOLVE_INTERVAL.as_millis() as u64 + PROBE_TIMEOUT.as_millis() as u64,
);

/// Settings applied to the connection to each replica (timeouts, keep-alive).
pub type Configure = Arc<dyn Fn(Endpoint) -> Endpoint + Send + Sync>;

/// Resolves `host:port` to the addresses of the replicas serving it.
pub type Resolve = Arc<
    dyn Fn(String) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<SocketAddr>>> + Send>>
        + Send
        + Sync,
>;

/// What a call through a [`Balanced`] channel fails with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The URL of a service could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("{0}")]
    InvalidUrl(String),
    #[error("the URL has no host")]
    NoHost,
    #[error("no URL given")]
    Empty,
    #[error("the URLs mix schemes ({0} and {1}): a service is reached one way")]
    MixedSchemes(String, String),
}

/// A channel to the service at `urls` (one URL, or several separated by
/// commas), spread over every address they resolve to (see the module
/// documentation). `configure` sets what each connection needs (timeouts,
/// keep-alive). Must be called within a Tokio runtime: the lookups run on
/// a task of their own, which ends when the channel and its clones are
/// dropped.
pub fn balanced(
    urls: &str,
    configure: impl Fn(Endpoint) -> Endpoint + Send + Sync + 'static,
) -> Result<Balanced, ChannelError> {
    balanced_with(
        urls,
        Arc::new(configure),
        system_resolver(),
        RESOLVE_INTERVAL,
    )
}

/// [`balanced`] with the name lookup and its interval chosen by the caller
/// (tests stand in for DNS with it).
pub fn balanced_with(
    urls: &str,
    configure: Configure,
    resolve: Resolve,
    interval: Duration,
) -> Result<Balanced, ChannelError> {
    let sources = urls
        .split(',')
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(Source::parse)
        .collect::<Result<Vec<_>, _>>()?;
    let first = sources.first().ok_or(ChannelError::Empty)?;
    if let Some(other) = sources.iter().find(|source| source.scheme != first.scheme) {
        return Err(ChannelError::MixedSchemes(
            first.scheme.clone(),
            other.scheme.clone(),
        ));
    }
    if let [only] = sources.as_slice()
        && only.address.is_some()
    {
        return Ok(Balanced {
            channel: configure(Endpoint::from(only.url.clone())).connect_lazy(),
            follower: None,
        });
    }
    let (channel, changes) = Channel::balance_channel::<Target>(64);
    let nudge = Arc::new(Notify::new());
    let follower = Follower {
        sources,
        configure,
        resolve,
        changes,
        nudge: nudge.clone(),
        current: BTreeSet::new(),
    };
    tokio::spawn(follower.run(interval));
    Ok(Balanced {
        channel,
        follower: Some(nudge),
    })
}

/// A channel made by [`balanced`]: a tower service that gRPC clients are
/// generic over (`StackServiceClient<Balanced>`). A call that could not
/// connect is sent again, on another replica when there is one, for up to
/// [`UNSENT_RETRY_PATIENCE`]; its request is kept for that (every Ember
/// RPC is unary: one message).
#[derive(Clone, Debug)]
pub struct Balanced {
    channel: Channel,
    /// Wakes the follower to look up and probe at once (`None`: a plain
    /// channel to one address).
    follower: Option<Arc<Notify>>,
}

type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<Body>, BoxError>> + Send + 'static>>;

impl Service<http::Request<Body>> for Balanced {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.channel.poll_ready(context).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<Body>) -> ResponseFuture {
        // The clone made ready by `poll_ready` goes with the first try.
        let spare = self.channel.clone();
        let ready = std::mem::replace(&mut self.channel, spare.clone());
        let follower = self.follower.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let body = body.collect().await.map_err(BoxError::from)?.to_bytes();
            let request = || {
                let mut request =
                    http::Request::new(Body::new(http_body_util::Full::new(body.clone())));
                *request.method_mut() = parts.method.clone();
                *request.uri_mut() = parts.uri.clone();
                *request.version_mut() = parts.version;
                *request.headers_mut() = parts.headers.clone();
                *request.extensions_mut() = parts.extensions.clone();
                request
            };
            let deadline = tokio::time::Instant::now() + UNSENT_RETRY_PATIENCE;
            let mut pause = Duration::from_millis(20);
            let mut channel = ready;
            loop {
                match channel.call(request()).await {
                    Err(error)
                        if chain_has_connect_error(&error)
                            && tokio::time::Instant::now() + pause < deadline =>
                    {
                        tracing::debug!(%error, "call not sent, trying again");
                        if let Some(follower) = &follower {
                            follower.notify_one();
                        }
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_millis(500));
                        channel = spare.clone();
                        channel.ready().await.map_err(BoxError::from)?;
                    }
                    outcome => return outcome.map_err(Into::into),
                }
            }
        })
    }
}

/// One of the URLs a service is named by.
struct Source {
    url: Uri,
    scheme: String,
    /// `host:port`, as looked up.
    name: String,
    /// The host, when it is an IP address (nothing to look up).
    address: Option<SocketAddr>,
    /// The addresses of its last answer with any.
    known: Vec<SocketAddr>,
}

impl Source {
    fn parse(url: &str) -> Result<Source, ChannelError> {
        let uri: Uri = url
            .parse()
            .map_err(|error: http::uri::InvalidUri| ChannelError::InvalidUrl(error.to_string()))?;
        let host = uri.host().ok_or(ChannelError::NoHost)?.to_owned();
        let scheme = uri.scheme_str().unwrap_or("http").to_owned();
        let port = uri
            .port_u16()
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        let address = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .ok()
            .map(|ip| SocketAddr::new(ip, port));
        Ok(Source {
            url: uri,
            scheme,
            name: format!("{host}:{port}"),
            known: address.into_iter().collect(),
            address,
        })
    }
}

/// What the balancer holds a connection to: a URL itself until its name
/// resolves, then one address per replica.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Target {
    Url(usize),
    Address(SocketAddr),
}

/// The task that keeps the balancer's connections in step with the names'
/// addresses.
struct Follower {
    sources: Vec<Source>,
    configure: Configure,
    resolve: Resolve,
    changes: Sender<Change<Target, Endpoint>>,
    nudge: Arc<Notify>,
    current: BTreeSet<Target>,
}

impl Follower {
    async fn run(mut self, interval: Duration) {
        for index in 0..self.sources.len() {
            let endpoint = (self.configure)(Endpoint::from(self.sources[index].url.clone()));
            if self
                .send(Change::Insert(Target::Url(index), endpoint))
                .await
                .is_err()
            {
                return;
            }
            self.current.insert(Target::Url(index));
        }
        loop {
            // Each address with the URL it came from (the first, when two
            // name it).
            let mut addresses: BTreeMap<SocketAddr, usize> = BTreeMap::new();
            for index in 0..self.sources.len() {
                let source = &mut self.sources[index];
                if source.address.is_none() {
                    match (self.resolve)(source.name.clone()).await {
                        Ok(found) if !found.is_empty() => source.known = found,
                        Ok(_) => {}
                        Err(error) => {
                            tracing::debug!(name = %source.name, %error, "service name did not resolve");
                        }
                    }
                }
                for address in &source.known {
                    addresses.entry(*address).or_insert(index);
                }
            }
            let all: Vec<SocketAddr> = addresses.keys().copied().collect();
            let reachable = reachable(&all).await;
            let chosen = if reachable.is_empty() { all } else { reachable };
            if !chosen.is_empty() {
                let chosen = chosen
                    .into_iter()
                    .map(|address| (address, addresses[&address]))
                    .collect();
                if self.follow(chosen).await.is_err() {
                    return;
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = self.nudge.notified() => {}
                _ = self.changes.closed() => return,
            }
        }
    }

    /// Connects to new addresses and drops vanished ones (and the URLs
    /// dialled as they are, once addresses are known). Errs when the
    /// channel is gone.
    async fn follow(&mut self, addresses: BTreeMap<SocketAddr, usize>) -> Result<(), ()> {
        let wanted: BTreeSet<Target> = addresses.keys().copied().map(Target::Address).collect();
        for (address, index) in &addresses {
            let target = Target::Address(*address);
            if self.current.contains(&target) {
                continue;
            }
            let source = &self.sources[*index];
            let Ok(endpoint) = Endpoint::from_shared(format!("{}://{address}", source.scheme))
            else {
                continue;
            };
            let endpoint = (self.configure)(endpoint).origin(source.url.clone());
            tracing::debug!(name = %source.name, %address, "replica found");
            self.send(Change::Insert(target.clone(), endpoint)).await?;
            self.current.insert(target);
        }
        for target in self
            .current
            .difference(&wanted)
            .cloned()
            .collect::<Vec<_>>()
        {
            tracing::debug!(?target, "replica gone");
            self.send(Change::Remove(target.clone())).await?;
            self.current.remove(&target);
        }
        Ok(())
    }

    async fn send(&self, change: Change<Target, Endpoint>) -> Result<(), ()> {
        self.changes.send(change).await.map_err(|_| ())
    }
}

/// The addresses that accept a TCP connection within [`PROBE_TIMEOUT`].
async fn reachable(addresses: &[SocketAddr]) -> Vec<SocketAddr> {
    let mut probes = tokio::task::JoinSet::new();
    for &address in addresses {
        probes.spawn(async move {
            let connected =
                tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect(address)).await;
            matches!(connected, Ok(Ok(_))).then_some(address)
        });
    }
    let mut reachable = Vec::new();
    while let Some(probe) = probes.join_next().await {
        if let Ok(Some(address)) = probe {
            reachable.push(address);
        }
    }
    reachable
}

/// Whether a call failed because no connection could be made: its request
/// never reached the service, so sending it again cannot do anything twice.
pub fn never_sent(status: &tonic::Status) -> bool {
    std::error::Error::source(status).is_some_and(chain_has_connect_error)
}

/// Whether `error` or one of its causes is a `tonic::ConnectError`.
fn chain_has_connect_error(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if error.is::<tonic::ConnectError>() {
            return true;
        }
        next = error.source();
    }
    false
}

/// What a failed call says, with the causes a transport failure keeps
/// behind its own text ("dns error: failed to lookup address information:
/// Name or service not known" rather than "dns error").
pub fn failure(status: &tonic::Status) -> String {
    crate::error::with_causes(status.message(), std::error::Error::source(status))
}

fn system_resolver() -> Resolve {
    Arc::new(|name| {
        Box::pin(async move {
            tokio::net::lookup_host(name)
                .await
                .map(|addresses| addresses.collect())
        })
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;

    use super::*;

    /// A health server that answers SERVING for `service` only, on a
    /// loopback port of its own.
    async fn replica(service: &'static str) -> SocketAddr {
        let (reporter, health) = tonic_health::server::health_reporter();
        reporter
            .set_service_status(service, tonic_health::ServingStatus::Serving)
            .await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            // The reporter must live as long as the server answers.
            let _reporter = reporter;
            tonic::transport::Server::builder()
                .add_service(health)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await
                .unwrap();
        });
        address
    }

    /// One health check of `service` through `channel`.
    fn check(
        channel: &Balanced,
        service: &str,
    ) -> impl Future<
        Output = Result<tonic::Response<tonic_health::pb::HealthCheckResponse>, tonic::Status>,
    > + use<> {
        let mut client = HealthClient::new(channel.clone());
        let request = HealthCheckRequest {
            service: service.to_owned(),
        };
        async move { client.check(request).await }
    }

    /// Which of `names` answered each of `calls` calls.
    async fn who_answers(channel: &Balanced, names: &[&str], calls: usize) -> Vec<usize> {
        let mut counts = vec![0; names.len()];
        for _ in 0..calls {
            for (index, name) in names.iter().enumerate() {
                let answer = HealthClient::new(channel.clone())
                    .check(HealthCheckRequest {
                        service: (*name).to_owned(),
                    })
                    .await;
                if answer.is_ok() {
                    counts[index] += 1;
                    break;
                }
            }
        }
        counts
    }

    /// A stand-in for DNS: answers the addresses it is set to, and counts
    /// the lookups so that a test can wait until an answer took effect.
    #[derive(Clone, Default)]
    struct Dns {
        addresses: Arc<Mutex<Vec<SocketAddr>>>,
        lookups: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Dns {
        fn answering(addresses: Vec<SocketAddr>) -> Dns {
            let dns = Dns::default();
            dns.set(addresses);
            dns
        }

        fn set(&self, addresses: Vec<SocketAddr>) {
            *self.addresses.lock().unwrap() = addresses;
        }

        fn resolver(&self) -> Resolve {
            let dns = self.clone();
            Arc::new(move |_| {
                let answer = dns.addresses.lock().unwrap().clone();
                dns.lookups
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Box::pin(async move { Ok(answer) })
            })
        }

        /// Waits (at most 5 s) for two more lookups: the follower applies
        /// each answer before it looks up again, so the current answer has
        /// taken effect by then.
        async fn settled(&self) {
            let seen = self.lookups.load(std::sync::atomic::Ordering::SeqCst);
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while self.lookups.load(std::sync::atomic::Ordering::SeqCst) < seen + 2 {
                assert!(std::time::Instant::now() < deadline, "no lookups for 5 s");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    #[tokio::test]
    async fn calls_spread_over_every_address_and_follow_changes() {
        let (a, b, c) = (replica("a").await, replica("b").await, replica("c").await);
        let dns = Dns::answering(vec![a, b]);
        let channel = balanced_with(
            "http://replicas.test:1",
            Arc::new(|endpoint| endpoint.connect_timeout(Duration::from_secs(1))),
            dns.resolver(),
            Duration::from_millis(50),
        )
        .unwrap();
        dns.settled().await;

        let counts = who_answers(&channel, &["a", "b", "c"], 40).await;
        assert!(
            counts[0] > 0 && counts[1] > 0,
            "both replicas answer: {counts:?}"
        );
        assert_eq!(counts[2], 0, "c is not resolved yet: {counts:?}");

        // c starts, a goes away.
        dns.set(vec![b, c]);
        dns.settled().await;
        let counts = who_answers(&channel, &["a", "b", "c"], 40).await;
        assert_eq!(counts[0], 0, "a was dropped: {counts:?}");
        assert!(counts[1] > 0 && counts[2] > 0, "b and c answer: {counts:?}");
    }

    #[tokio::test]
    async fn an_address_that_refuses_connections_gets_no_calls() {
        let a = replica("a").await;
        // A port that was just free: nothing listens there.
        let dead = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap()
        };
        let dns = Dns::answering(vec![a, dead]);
        let channel = balanced_with(
            "http://replicas.test:1",
            Arc::new(|endpoint| endpoint.connect_timeout(Duration::from_secs(1))),
            dns.resolver(),
            Duration::from_millis(50),
        )
        .unwrap();
        dns.settled().await;
        for _ in 0..20 {
            HealthClient::new(channel.clone())
                .check(HealthCheckRequest {
                    service: "a".to_owned(),
                })
                .await
                .expect("every call reaches the live replica");
        }
    }

    #[tokio::test]
    async fn an_empty_answer_keeps_the_known_addresses() {
        let a = replica("a").await;
        let dns = Dns::answering(vec![a]);
        let channel = balanced_with(
            "http://replicas.test:1",
            Arc::new(|endpoint| endpoint),
            dns.resolver(),
            Duration::from_millis(50),
        )
        .unwrap();
        dns.settled().await;
        dns.set(Vec::new());
        dns.settled().await;
        assert_eq!(who_answers(&channel, &["a"], 5).await, vec![5]);
    }

    #[tokio::test]
    async fn a_name_that_does_not_resolve_fails_calls_within_the_patience() {
        let channel = balanced_with(
            "http://nowhere.invalid:1",
            Arc::new(|endpoint| endpoint.connect_timeout(Duration::from_secs(1))),
            Arc::new(|_| Box::pin(async { Err(std::io::Error::other("no such name")) })),
            Duration::from_millis(50),
        )
        .unwrap();
        let started = std::time::Instant::now();
        let status = HealthClient::new(channel)
            .check(HealthCheckRequest::default())
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        assert!(started.elapsed() < UNSENT_RETRY_PATIENCE * 2);
        // Nothing left: a retry is safe. And the text says why, not only
        // "dns error".
        assert!(never_sent(&status), "{status:?}");
        let text = failure(&status);
        assert!(text.starts_with("dns error: "), "{text}");
        assert!(text.len() > "dns error: ".len() + 10, "{text}");
    }

    #[tokio::test]
    async fn a_call_that_cannot_connect_is_sent_again_to_a_live_replica() {
        let a = replica("a").await;
        // A replica that accepts connections while the follower probes it,
        // then dies before any call connected to it.
        let dying = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dns = Dns::answering(vec![a, dying.local_addr().unwrap()]);
        // After its first answer the lookup never returns: the follower
        // keeps the dead replica, as it does until its next lookup.
        let first = dns.resolver();
        let lookups = dns.lookups.clone();
        let resolve: Resolve = Arc::new(move |name| {
            if lookups.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                first(name)
            } else {
                lookups.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Box::pin(std::future::pending())
            }
        });
        let channel = balanced_with(
            "http://replicas.test:1",
            Arc::new(|endpoint| endpoint.connect_timeout(Duration::from_secs(1))),
            resolve,
            Duration::from_millis(10),
        )
        .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while dns.lookups.load(std::sync::atomic::Ordering::SeqCst) < 2 {
            assert!(std::time::Instant::now() < deadline, "no second lookup");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(dying);
        // Calls that pick the dead replica are sent again until they reach
        // the live one.
        for _ in 0..20 {
            check(&channel, "a")
                .await
                .expect("every call reaches the live replica");
        }
    }

    #[tokio::test]
    async fn the_first_call_that_cannot_connect_drops_the_dead_replica_at_once() {
        let a = replica("a").await;
        let dying = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dns = Dns::answering(vec![a, dying.local_addr().unwrap()]);
        // An interval far longer than the test: only a nudge looks again.
        let channel = balanced_with(
            "http://replicas.test:1",
            Arc::new(|endpoint| endpoint.connect_timeout(Duration::from_secs(1))),
            dns.resolver(),
            Duration::from_secs(600),
        )
        .unwrap();
        // Found and probed (`dying` accepts connections but never answers
        // a call: no call may go its way before it is closed).
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while dns.lookups.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            assert!(std::time::Instant::now() < deadline, "no lookup");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let looked_up = dns.lookups.load(std::sync::atomic::Ordering::SeqCst);
        drop(dying);
        // Until one call happens on the dead replica, nothing looks again.
        let mut calls = 0;
        while dns.lookups.load(std::sync::atomic::Ordering::SeqCst) == looked_up {
            check(&channel, "a")
                .await
                .expect("sent again to the live replica");
            calls += 1;
            assert!(calls < 200, "no call ever picked the dead replica");
        }
        // The probe that followed dropped it: every later call goes to the
        // live replica on its first try (no lookup is needed again).
        tokio::time::sleep(Duration::from_millis(200)).await;
        let settled = dns.lookups.load(std::sync::atomic::Ordering::SeqCst);
        for _ in 0..40 {
            check(&channel, "a")
                .await
                .expect("the live replica answers");
        }
        assert_eq!(
            dns.lookups.load(std::sync::atomic::Ordering::SeqCst),
            settled,
            "no call met the dead replica after it was dropped"
        );
    }

    #[tokio::test]
    async fn only_calls_that_never_left_are_sent_again_and_only_for_a_while() {
        let a = replica("a").await;
        let channel = balanced_with(
            "http://replicas.test:1",
            Arc::new(|endpoint| endpoint.connect_timeout(Duration::from_secs(1))),
            Dns::answering(vec![a]).resolver(),
            Duration::from_millis(50),
        )
        .unwrap();
        // The service answered (NOT_FOUND): that is the outcome.
        let status = check(&channel, "unknown").await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
        assert!(!never_sent(&status));

        // Nothing listens: tried for the patience, then Unavailable.
        let dead = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap()
        };
        let channel = balanced(&format!("http://{dead}"), |endpoint| endpoint).unwrap();
        let started = std::time::Instant::now();
        let status = check(&channel, "").await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        assert!(never_sent(&status));
        let waited = started.elapsed();
        assert!(
            waited >= UNSENT_RETRY_PATIENCE / 2 && waited < UNSENT_RETRY_PATIENCE * 2,
            "sent again for about {UNSENT_RETRY_PATIENCE:?}: {waited:?}"
        );
    }

    #[tokio::test]
    async fn several_urls_are_one_balance_set() {
        let (a, b) = (replica("a").await, replica("b").await);
        // One by IP address, one by a name the resolver answers.
        let dns = Dns::answering(vec![b]);
        let channel = balanced_with(
            &format!("http://{a}, http://replicas.test:{}", b.port()),
            Arc::new(|endpoint| endpoint.connect_timeout(Duration::from_secs(1))),
            dns.resolver(),
            Duration::from_millis(50),
        )
        .unwrap();
        dns.settled().await;
        let counts = who_answers(&channel, &["a", "b"], 40).await;
        assert!(counts[0] > 0 && counts[1] > 0, "both answer: {counts:?}");
    }

    #[tokio::test]
    async fn the_system_resolver_reaches_localhost() {
        let a = replica("a").await;
        let channel = balanced(&format!("http://localhost:{}", a.port()), |endpoint| {
            endpoint.connect_timeout(Duration::from_secs(1))
        })
        .unwrap();
        assert_eq!(who_answers(&channel, &["a"], 3).await, vec![3]);
    }

    #[test]
    fn bad_urls_are_named() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let _guard = runtime.enter();
        assert!(matches!(
            balanced("not a url", |endpoint| endpoint),
            Err(ChannelError::InvalidUrl(_))
        ));
        assert!(matches!(
            balanced("/only/a/path", |endpoint| endpoint),
            Err(ChannelError::NoHost)
        ));
        assert!(balanced("http://127.0.0.1:1", |endpoint| endpoint).is_ok());
        assert!(matches!(
            balanced(" , ", |endpoint| endpoint),
            Err(ChannelError::Empty)
        ));
        assert!(matches!(
            balanced("http://a:1,https://b:1", |endpoint| endpoint),
            Err(ChannelError::MixedSchemes(..))
        ));
    }
}
