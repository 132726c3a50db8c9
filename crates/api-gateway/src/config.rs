//! What the gateway needs to run, fully resolved by the caller.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Config {
    /// The secret that signs and verifies bearer tokens.
    pub signing_key: String,
    /// The secret presented to internal services with each forwarded call.
    pub internal_credential: String,
    /// gRPC URLs of the internal services, e.g. `http://127.0.0.1:50052`.
    pub engine_url: String,
    pub lifecycle_hook_url: String,
    pub plugin_registry_url: String,
    /// Deadline for a REST request, and for a gRPC call that sets none.
    pub request_timeout: Duration,
    /// How far ahead of this clock a token's `iat` or `nbf` may be.
    pub clock_skew: Duration,
}
