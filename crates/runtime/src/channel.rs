//! gRPC channels to the other services of a deployment, spread over every
//! replica of the service.
//!
//! A service URL names a host. With replicas (`docker-compose --scale`, a
//! Kubernetes headless service) that name resolves to one address per
//! replica, but a plain tonic channel connects to one of them and multiplexes
//! every call over that single HTTP/2 connection: one replica does all the
//! work. [`balanced`] keeps one lazily connected HTTP/2 connection per
//! resolved address instead and sends each call to the less loaded of two
//! picked at random (tower's power of two choices over pending requests). It
//! looks the name up again every [`RESOLVE_INTERVAL`] and opens a TCP
//! connection to each address found: replicas that start are used, and a
//! replica that refuses connections (killed, or its DNS entry not yet
//! removed) gets no calls until it accepts them again. When no address
//! accepts, all are kept, so calls fail with the real connection error.
//!
//! A URL whose host is an IP address gets a plain channel: there is nothing
//! to spread over. While the name cannot be resolved (the DNS entry is not
//! there yet at start-up), the channel dials the name itself, as a plain
//! channel would, so a call fails UNAVAILABLE quickly rather than waiting
//! for an address; an answer with no address keeps the addresses known.
//!
//! Between a replica's death and the next lookup, a call can still be sent
//! its way and fail to connect. Such a call never left, so it is safe to
//! send again: [`retry_unsent`] does, until the dead replica is dropped or
//! the service comes back.

use std::collections::BTreeSet;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http::Uri;
use tokio::sync::mpsc::Sender;
use tonic::transport::channel::Change;
use tonic::transport::{Channel, Endpoint};

/// How often a service's name is looked up again and its replicas probed.
pub const RESOLVE_INTERVAL: Duration = Duration::from_secs(2);

/// How long a replica may take to accept a TCP connection before it counts
/// as unreachable for one interval.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// How long [`retry_unsent`] keeps trying a call that could not connect:
/// long enough for the follower to notice a dead replica (one interval and
/// its probe) even when the death came just after a lookup.
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

/// The URL of a service could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("{0}")]
    InvalidUrl(String),
    #[error("the URL has no host")]
    NoHost,
}

/// A channel to the service at `url`, spread over every address its host
/// resolves to (see the module documentation). `configure` sets what each
/// connection needs (timeouts, keep-alive). Must be called within a Tokio
/// runtime: the lookups run on a task of their own, which ends when the
/// channel and its clones are dropped.
pub fn balanced(
    url: &str,
    configure: impl Fn(Endpoint) -> Endpoint + Send + Sync + 'static,
) -> Result<Channel, ChannelError> {
    balanced_with(
        url,
        Arc::new(configure),
        system_resolver(),
        RESOLVE_INTERVAL,
    )
}

/// [`balanced`] with the name lookup and its interval chosen by the caller
/// (tests stand in for DNS with it).
pub fn balanced_with(
    url: &str,
    configure: Configure,
    resolve: Resolve,
    interval: Duration,
) -> Result<Channel, ChannelError> {
    let uri: Uri = url
        .parse()
        .map_err(|error: http::uri::InvalidUri| ChannelError::InvalidUrl(error.to_string()))?;
    let host = uri.host().ok_or(ChannelError::NoHost)?.to_owned();
    let named = configure(Endpoint::from(uri.clone()));
    if host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .is_ok()
    {
        return Ok(named.connect_lazy());
    }
    let scheme = uri.scheme_str().unwrap_or("http").to_owned();
    let port = uri
        .port_u16()
        .unwrap_or(if scheme == "https" { 443 } else { 80 });
    let (channel, changes) = Channel::balance_channel::<Target>(64);
    let follower = Follower {
        name: format!("{host}:{port}"),
        scheme,
        origin: uri,
        configure,
        resolve,
        changes,
        current: BTreeSet::new(),
    };
    tokio::spawn(follower.run(named, interval));
    Ok(channel)
}

/// What the balancer holds a connection to: the name itself until it
/// resolves, then one address per replica.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Target {
    Name,
    Address(SocketAddr),
}

/// The task that keeps the balancer's connections in step with the name's
/// addresses.
struct Follower {
    name: String,
    scheme: String,
    origin: Uri,
    configure: Configure,
    resolve: Resolve,
    changes: Sender<Change<Target, Endpoint>>,
    current: BTreeSet<Target>,
}

impl Follower {
    async fn run(mut self, named: Endpoint, interval: Duration) {
        if self
            .send(Change::Insert(Target::Name, named))
            .await
            .is_err()
        {
            return;
        }
        self.current.insert(Target::Name);
        loop {
            let addresses = match (self.resolve)(self.name.clone()).await {
                Ok(addresses) => addresses,
                Err(error) => {
                    tracing::debug!(name = %self.name, %error, "service name did not resolve");
                    Vec::new()
                }
            };
            let reachable = reachable(&addresses).await;
            let chosen = if reachable.is_empty() {
                addresses
            } else {
                reachable
            };
            if !chosen.is_empty() && self.follow(chosen).await.is_err() {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = self.changes.closed() => return,
            }
        }
    }

    /// Connects to new addresses and drops vanished ones (and the name, once
    /// addresses are known). Errs when the channel is gone.
    async fn follow(&mut self, addresses: Vec<SocketAddr>) -> Result<(), ()> {
        let wanted: BTreeSet<Target> = addresses.into_iter().map(Target::Address).collect();
        for target in wanted
            .difference(&self.current)
            .cloned()
            .collect::<Vec<_>>()
        {
            let Target::Address(address) = target else {
                continue;
            };
            let Ok(endpoint) = Endpoint::from_shared(format!("{}://{address}", self.scheme)) else {
                continue;
            };
            let endpoint = (self.configure)(endpoint).origin(self.origin.clone());
            tracing::debug!(name = %self.name, %address, "replica found");
            self.send(Change::Insert(target.clone(), endpoint)).await?;
            self.current.insert(target);
        }
        for target in self
            .current
            .difference(&wanted)
            .cloned()
            .collect::<Vec<_>>()
        {
            tracing::debug!(name = %self.name, ?target, "replica gone");
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
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        if error.is::<tonic::ConnectError>() {
            return true;
        }
        source = error.source();
    }
    false
}

/// What a failed call says, with the causes a transport failure keeps
/// behind its own text ("dns error: failed to lookup address information:
/// Name or service not known" rather than "dns error").
pub fn failure(status: &tonic::Status) -> String {
    crate::error::with_causes(status.message(), std::error::Error::source(status))
}

/// Makes `call` again, backing off, while it fails [`never_sent`] and
/// `patience` has not run out; any other outcome is returned as it is.
/// `call` builds its request anew each time (requests are consumed).
pub async fn retry_unsent<T, F, Fut>(patience: Duration, mut call: F) -> Result<T, tonic::Status>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, tonic::Status>>,
{
    let deadline = tokio::time::Instant::now() + patience;
    let mut pause = Duration::from_millis(20);
    loop {
        match call().await {
            Err(status)
                if never_sent(&status) && tokio::time::Instant::now() + pause < deadline =>
            {
                tracing::debug!(%status, "call not sent, trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
            outcome => return outcome,
        }
    }
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
        channel: &Channel,
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
    async fn who_answers(channel: &Channel, names: &[&str], calls: usize) -> Vec<usize> {
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
    async fn a_name_that_does_not_resolve_fails_calls_quickly() {
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
        assert!(started.elapsed() < Duration::from_secs(3));
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

        let check = || check(&channel, "a");
        let mut unsent = 0;
        for _ in 0..20 {
            if let Err(status) = check().await {
                assert!(never_sent(&status), "{status:?}");
                unsent += 1;
            }
        }
        assert!(unsent > 0, "some plain calls picked the dead replica");
        for _ in 0..20 {
            retry_unsent(UNSENT_RETRY_PATIENCE, check)
                .await
                .expect("a call retried reaches the live replica");
        }
    }

    #[tokio::test]
    async fn only_calls_that_never_left_are_retried_and_only_for_a_while() {
        let a = replica("a").await;
        let channel = balanced_with(
            "http://replicas.test:1",
            Arc::new(|endpoint| endpoint.connect_timeout(Duration::from_secs(1))),
            Dns::answering(vec![a]).resolver(),
            Duration::from_millis(50),
        )
        .unwrap();
        // The service answered (NOT_FOUND): that is the outcome, once.
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let status = retry_unsent(UNSENT_RETRY_PATIENCE, || {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            check(&channel, "unknown")
        })
        .await
        .unwrap_err();
        assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
        assert!(!never_sent(&status));
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);

        // Nothing listens: tried for the patience given, then Unavailable.
        let dead = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap()
        };
        let channel = Endpoint::from_shared(format!("http://{dead}"))
            .unwrap()
            .connect_lazy();
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let started = std::time::Instant::now();
        let status = retry_unsent(Duration::from_millis(300), || {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            check(&channel, "")
        })
        .await
        .unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        assert!(never_sent(&status));
        assert!(calls.load(std::sync::atomic::Ordering::SeqCst) > 1);
        assert!(started.elapsed() < Duration::from_secs(2));
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
    }
}
