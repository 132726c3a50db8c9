//! Counters the gateway exposes at `/metrics` in Prometheus' text format.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Metrics {
    pub grpc_requests: AtomicU64,
    pub rest_requests: AtomicU64,
    pub unauthenticated: AtomicU64,
    pub upstream_errors: AtomicU64,
    pub connections_refused: AtomicU64,
    pub logins_throttled: AtomicU64,
    pub logins_locked: AtomicU64,
}

impl Metrics {
    pub fn render(&self) -> String {
        let mut text = String::new();
        let counters = [
            (
                "ember_gateway_grpc_requests_total",
                "gRPC calls received",
                &self.grpc_requests,
            ),
            (
                "ember_gateway_rest_requests_total",
                "REST requests received",
                &self.rest_requests,
            ),
            (
                "ember_gateway_unauthenticated_total",
                "requests refused for a missing or invalid token",
                &self.unauthenticated,
            ),
            (
                "ember_gateway_upstream_errors_total",
                "calls that failed to reach an internal service",
                &self.upstream_errors,
            ),
            (
                "ember_gateway_connections_refused_total",
                "connections closed unserved: every slot, or every slot of their address, taken",
                &self.connections_refused,
            ),
            (
                "ember_gateway_logins_throttled_total",
                "token requests refused with 429: their address asked too fast",
                &self.logins_throttled,
            ),
            (
                "ember_gateway_logins_locked_total",
                "password logins refused because the user is locked out",
                &self.logins_locked,
            ),
        ];
        for (name, help, counter) in counters {
            // Writing to a String cannot fail.
            let _ = writeln!(
                text,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                counter.load(Ordering::Relaxed)
            );
        }
        text
    }
}
