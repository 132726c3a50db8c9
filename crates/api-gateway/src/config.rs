//! What the gateway needs to run, fully resolved by the caller.

use std::time::Duration;

use crate::identity::keystone::KeystoneConfig;

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
    /// Who stands behind tokens.
    pub auth: AuthMode,
    /// How the Keystone front door describes this cloud.
    pub identity: IdentitySettings,
}

/// Where identities come from.
#[derive(Debug, Clone)]
pub enum AuthMode {
    /// The gateway keeps users, projects and roles in its own store (this
    /// database URL) and serves the Keystone v3 front door at `/identity`.
    BuiltIn { database_url: String },
    /// An existing Keystone issues the tokens; the gateway validates them.
    Keystone(KeystoneConfig),
}

#[derive(Debug, Clone)]
pub struct IdentitySettings {
    /// The URL users reach the gateway at (behind a proxy: the proxy's),
    /// for the catalog and discovery links; empty = `http://` and the
    /// request's `Host`.
    pub public_url: String,
    /// The region every catalog endpoint is in.
    pub region: String,
    /// How long tokens from `POST /identity/v3/auth/tokens` live.
    pub token_ttl: Duration,
}

impl Default for IdentitySettings {
    fn default() -> Self {
        IdentitySettings {
            public_url: String::new(),
            region: "RegionOne".to_owned(),
            token_ttl: Duration::from_secs(3600),
        }
    }
}
