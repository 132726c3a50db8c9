//! The gateway's door: how many connections it holds, from whom, and how
//! long a connection may hold a slot without asking for anything.
//!
//! - At most `max_connections` at once, and at most `max_per_source` from
//!   one address (0: no such limit), so one client cannot take every slot.
//!   Loopback callers (health checks, a service on the same host) have a
//!   reserve of [`LOOPBACK_RESERVE`] slots beyond `max_connections`, so
//!   `/healthz` answers while strangers fill the door.
//! - A connection that sends nothing for `header_timeout` after it opens,
//!   or after its last response (idle keep-alive), or that sends a
//!   request's headers slower than that (slowloris), is closed. A request's
//!   body and its handling are bounded by the request timeout
//!   (`gateway.request_timeout_ms`).
//! - A connection refused is closed at once, counted
//!   (`ember_gateway_connections_refused_total`) and logged, at most once a
//!   second per reason with how many were refused since.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// Slots beyond the limit that only loopback callers may take.
pub const LOOPBACK_RESERVE: usize = 64;

/// How many connections, from whom, for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    /// 0: no limit per source address.
    pub max_per_source: usize,
    pub header_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 10_000,
            max_per_source: 1_000,
            header_timeout: Duration::from_secs(20),
        }
    }
}

/// Why a connection was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Every slot is taken.
    Full,
    /// Its address holds `max_per_source` already.
    SourceFull,
}

impl Refusal {
    fn as_str(self) -> &'static str {
        match self {
            Refusal::Full => "the gateway holds its most connections",
            Refusal::SourceFull => "the address holds its most connections",
        }
    }
}

/// Counts the connections held, in total and per source address.
#[derive(Debug)]
pub struct Door {
    limits: ConnectionLimits,
    held: Mutex<Held>,
    /// Refusals since each reason was last logged, and when it was.
    unlogged: Mutex<HashMap<&'static str, (u64, Option<Instant>)>>,
    metrics: Arc<Metrics>,
}

#[derive(Debug, Default)]
struct Held {
    total: usize,
    by_source: HashMap<IpAddr, usize>,
}

/// A slot held by one connection; given back when dropped.
#[derive(Debug)]
pub struct Slot {
    door: Arc<Door>,
    source: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.door.held();
        held.total = held.total.saturating_sub(1);
        if let Some(count) = held.by_source.get_mut(&self.source) {
            *count -= 1;
            if *count == 0 {
                held.by_source.remove(&self.source);
            }
        }
    }
}

impl Door {
    pub fn new(limits: ConnectionLimits, metrics: Arc<Metrics>) -> Arc<Door> {
        Arc::new(Door {
            limits,
            held: Mutex::default(),
            unlogged: Mutex::default(),
            metrics,
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// A slot for a connection from `source`, or why there is none.
    pub fn admit(self: &Arc<Self>, source: IpAddr) -> Result<Slot, Refusal> {
        let loopback = source.is_loopback();
        let mut held = self.held();
        let limit = if loopback {
            self.limits.max_connections + LOOPBACK_RESERVE
        } else {
            self.limits.max_connections
        };
        if held.total >= limit {
            return Err(Refusal::Full);
        }
        let from_source = held.by_source.get(&source).copied().unwrap_or(0);
        if self.limits.max_per_source > 0 && from_source >= self.limits.max_per_source {
            return Err(Refusal::SourceFull);
        }
        held.total += 1;
        held.by_source.insert(source, from_source + 1);
        Ok(Slot {
            door: self.clone(),
            source,
        })
    }

    /// How many connections are held now.
    pub fn held_now(&self) -> usize {
        self.held().total
    }

    /// Counts a refusal, and logs it unless one of its kind was logged in
    /// the last second (then the next log says how many there were).
    fn refused(&self, source: SocketAddr, refusal: Refusal) {
        self.metrics
            .connections_refused
            .fetch_add(1, Ordering::Relaxed);
        let mut unlogged = self
            .unlogged
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let (count, logged_at) = unlogged.entry(refusal.as_str()).or_default();
        *count += 1;
        if logged_at.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
            tracing::warn!(
                %source,
                refused = *count,
                max_connections = self.limits.max_connections,
                max_per_source = self.limits.max_per_source,
                "connection refused: {}",
                refusal.as_str()
            );
            *count = 0;
            *logged_at = Some(Instant::now());
        }
    }
}

/// Serves `app` on `listener` through the door until `shutdown` is
/// cancelled; then stops accepting and lets the connections finish their
/// requests, for at most `grace`.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    door: Arc<Door>,
    shutdown: CancellationToken,
    grace: Duration,
) {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(door.limits.header_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(door.limits.header_timeout)
        .keep_alive_timeout(door.limits.header_timeout);
    let builder = Arc::new(builder);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let (stream, source) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors, or a connection reset before it
                    // was taken: wait a moment rather than spin.
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let slot = match door.admit(source.ip()) {
            Ok(slot) => slot,
            Err(refusal) => {
                door.refused(source, refusal);
                drop(stream);
                continue;
            }
        };
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        let app = app.clone();
        let builder = builder.clone();
        let header_timeout = door.limits.header_timeout;
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _slot = slot;
            // A connection that never sends a byte never starts a request
            // (and HTTP/2's preface is read before its own timers run).
            if !first_bytes_within(&stream, header_timeout).await {
                return;
            }
            // Handlers that limit by address (the token front door) read it.
            let app = tower::ServiceExt::map_request(app, move |mut request: http::Request<_>| {
                request
                    .extensions_mut()
                    .insert(axum::extract::ConnectInfo(source));
                request
            });
            let service = TowerToHyperService::new(app);
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            if let Err(error) = watcher.watch(connection.into_owned()).await {
                tracing::debug!(%source, error = %error, "connection ended");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the grace period were dropped");
    }
}

/// Whether the peer sent something within `deadline` (without taking it).
async fn first_bytes_within(stream: &TcpStream, deadline: Duration) -> bool {
    let mut byte = [0_u8; 1];
    matches!(
        tokio::time::timeout(deadline, stream.peek(&mut byte)).await,
        Ok(Ok(read)) if read > 0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn door(max_connections: usize, max_per_source: usize) -> Arc<Door> {
        Door::new(
            ConnectionLimits {
                max_connections,
                max_per_source,
                header_timeout: Duration::from_secs(1),
            },
            Arc::default(),
        )
    }

    #[test]
    fn one_source_cannot_take_every_slot_and_slots_come_back() {
        let door = door(3, 2);
        let stranger: IpAddr = "203.0.113.7".parse().unwrap();
        let other: IpAddr = "203.0.113.8".parse().unwrap();
        let first = door.admit(stranger).unwrap();
        let _second = door.admit(stranger).unwrap();
        assert_eq!(door.admit(stranger).unwrap_err(), Refusal::SourceFull);
        let _third = door.admit(other).unwrap();
        assert_eq!(door.admit(other).unwrap_err(), Refusal::Full);
        drop(first);
        assert_eq!(door.held_now(), 2);
        assert!(door.admit(stranger).is_ok());
    }

    #[test]
    fn loopback_keeps_a_reserve_when_the_door_is_full() {
        let door = door(1, 0);
        let stranger: IpAddr = "198.51.100.1".parse().unwrap();
        let _taken = door.admit(stranger).unwrap();
        assert_eq!(door.admit(stranger).unwrap_err(), Refusal::Full);
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        let reserve: Vec<Slot> = (0..LOOPBACK_RESERVE)
            .map(|_| door.admit(local).expect("the loopback reserve"))
            .collect();
        assert_eq!(door.admit(local).unwrap_err(), Refusal::Full);
        assert_eq!(reserve.len(), LOOPBACK_RESERVE);
    }
}
