//! The gateway's configuration: the `[auth]` (with `[auth.keystone]`) and
//! `[gateway]` sections of Ember's configuration file, with their defaults
//! and validation, and the [`Config`] the gateway runs with, resolved from
//! them. The `ember` binary loads the file and hands the sections here.
//!
//! ```toml
//! [auth]
//! signing_key = "…"          # required outside `ember dev`
//! internal_credential = "…"  # required outside `ember dev`
//! mode = "builtin"           # or "keystone", with [auth.keystone]
//! [gateway]
//! listen = "0.0.0.0:8004"
//! engine_url = "http://engine:50052"
//! ```

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use ember_runtime::config::{
    Validate, check_database_url, check_more_than_zero, check_optional_http_url,
    check_secret_length, check_service_urls, database_url_or_sqlite,
};
use serde::{Deserialize, Serialize};

use crate::connections::ConnectionLimits;
use crate::console::ConsoleSource;
use crate::identity::keystone::KeystoneConfig;

/// `[auth]`: the secrets every service shares, token lifetimes, and who
/// stands behind tokens.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthSection {
    /// Signs and verifies bearer tokens (at least 32 characters).
    pub signing_key: Option<String>,
    /// Shared by the services to prove a call comes from inside.
    pub internal_credential: Option<String>,
    /// Default lifetime of `ember token issue` tokens, in seconds.
    pub token_ttl_secs: u64,
    /// How far ahead of the gateway's clock a token's `iat` or `nbf` may
    /// be, in seconds (clocks of machines drift a little).
    pub clock_skew_secs: u64,
    /// `builtin` (the gateway keeps users, projects and roles and serves
    /// the Keystone v3 front door at `/identity`) or `keystone` (tokens
    /// are an existing Keystone's: see `[auth.keystone]`).
    pub mode: String,
    /// Lifetime of tokens from `POST /identity/v3/auth/tokens`, in seconds
    /// (Keystone's default: an hour).
    pub identity_token_ttl_secs: u64,
    /// Keystone's `lockout_failure_attempts`: this many wrong passwords in
    /// a row lock a built-in user's password logins; 0 = never.
    pub lockout_failure_attempts: u32,
    /// Keystone's `lockout_duration`, in seconds: how long a lockout
    /// lasts; 0 = until an admin unlocks the user.
    pub lockout_duration_secs: u64,
    /// Token requests (`POST /identity/v3/auth/tokens`) one address may
    /// make per second on average (beyond: 429); 0 = no limit (behind a
    /// proxy every request is the proxy's: rate-limit there instead).
    pub login_rate_per_source: u32,
    /// How many of them it may make at once.
    pub login_burst_per_source: u32,
    /// Whether loopback addresses are rate-limited too (by default not:
    /// this host's tools, and a reverse proxy beside the gateway through
    /// which every client would share one limit).
    pub login_rate_limits_loopback: bool,
    pub keystone: KeystoneSection,
}

impl Default for AuthSection {
    fn default() -> Self {
        AuthSection {
            signing_key: None,
            internal_credential: None,
            token_ttl_secs: 24 * 3600,
            clock_skew_secs: 60,
            mode: "builtin".to_owned(),
            identity_token_ttl_secs: 3600,
            lockout_failure_attempts: 10,
            lockout_duration_secs: 1800,
            login_rate_per_source: 10,
            login_burst_per_source: 30,
            login_rate_limits_loopback: false,
            keystone: KeystoneSection::default(),
        }
    }
}

impl Validate for AuthSection {
    fn validate(&self, problems: &mut Vec<String>) {
        check_secret_length("auth.signing_key", self.signing_key.as_deref(), problems);
        check_secret_length(
            "auth.internal_credential",
            self.internal_credential.as_deref(),
            problems,
        );
        check_more_than_zero("auth.token_ttl_secs", self.token_ttl_secs, problems);
        check_more_than_zero(
            "auth.identity_token_ttl_secs",
            self.identity_token_ttl_secs,
            problems,
        );
        if self.login_rate_per_source > 0 && self.login_burst_per_source == 0 {
            problems.push(
                "auth.login_burst_per_source: must be more than 0 when auth.login_rate_per_source is set"
                    .to_owned(),
            );
        }
        match self.mode.as_str() {
            "builtin" => {}
            "keystone" => self.keystone.validate(problems),
            other => problems.push(format!("auth.mode: {other:?} must be builtin or keystone")),
        }
    }
}

/// `[auth.keystone]`: the existing Keystone tokens are validated against
/// (`auth.mode = "keystone"`), and the service user the gateway asks as.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeystoneSection {
    /// Keystone's URL, with or without `/v3`.
    pub url: String,
    pub user: String,
    pub password: Option<String>,
    pub project: String,
    pub user_domain: String,
    pub project_domain: String,
    /// How long a validation is trusted, in seconds (0 = ask every time).
    pub cache_ttl_secs: u64,
    /// At most this many validations are cached.
    pub cache_size: usize,
    /// Extra CA certificates (PEM) for an https:// Keystone.
    pub ca_file: String,
    pub timeout_ms: u64,
}

impl Default for KeystoneSection {
    fn default() -> Self {
        KeystoneSection {
            url: String::new(),
            user: "ember".to_owned(),
            password: None,
            project: "service".to_owned(),
            user_domain: "Default".to_owned(),
            project_domain: "Default".to_owned(),
            cache_ttl_secs: 60,
            cache_size: 10_000,
            ca_file: String::new(),
            timeout_ms: 5_000,
        }
    }
}

/// Checked only when `auth.mode` is `keystone`.
impl Validate for KeystoneSection {
    fn validate(&self, problems: &mut Vec<String>) {
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            problems.push(format!(
                "auth.keystone.url: {:?} must be Keystone's http:// or https:// URL (auth.mode is keystone)",
                self.url
            ));
        }
        if self.password.as_deref().unwrap_or_default().is_empty() {
            problems.push(
                "auth.keystone.password: the service user's password is required (auth.mode is keystone; EMBER_AUTH__KEYSTONE__PASSWORD)"
                    .to_owned(),
            );
        }
        for (key, value) in [
            ("auth.keystone.user", &self.user),
            ("auth.keystone.project", &self.project),
        ] {
            if value.is_empty() {
                problems.push(format!("{key}: must not be empty (auth.mode is keystone)"));
            }
        }
        check_more_than_zero("auth.keystone.timeout_ms", self.timeout_ms, problems);
        if !self.ca_file.is_empty() && !Path::new(&self.ca_file).is_file() {
            problems.push(format!(
                "auth.keystone.ca_file: {:?} is not a readable file",
                self.ca_file
            ));
        }
    }
}

impl KeystoneSection {
    fn resolve(&self) -> KeystoneConfig {
        KeystoneConfig {
            url: self.url.clone(),
            user: self.user.clone(),
            password: self.password.clone().unwrap_or_default(),
            project: self.project.clone(),
            user_domain: self.user_domain.clone(),
            project_domain: self.project_domain.clone(),
            cache_ttl: Duration::from_secs(self.cache_ttl_secs),
            cache_size: self.cache_size,
            ca_file: self.ca_file.clone(),
            timeout: Duration::from_millis(self.timeout_ms),
        }
    }
}

/// `[gateway]`: where the gateway listens, the services behind it, and how
/// its catalog describes the cloud.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewaySection {
    pub listen: SocketAddr,
    pub engine_url: String,
    pub lifecycle_hook_url: String,
    pub plugin_registry_url: String,
    pub request_timeout_ms: u64,
    /// The built-in identity's store. Empty = SQLite at
    /// `<data_dir>/gateway.db`.
    pub database_url: String,
    /// The URL users reach the gateway at (behind a proxy: the proxy's),
    /// for the service catalog; empty = `http://` and the request's Host.
    pub public_url: String,
    /// The region of every catalog endpoint.
    pub region: String,
    /// The most connections held at once (loopback callers have a small
    /// reserve beyond it: see `crate::connections`).
    pub max_connections: usize,
    /// The most connections from one address (0: no limit; behind a
    /// proxy every connection comes from the proxy's).
    pub max_connections_per_source: usize,
    /// How long a connection may wait before sending a request's headers,
    /// whole: after it opens, or between its requests (slowloris, idle).
    pub header_timeout_ms: u64,
    /// Serve the web console at `/console/`.
    pub console: bool,
    /// Serve the console's files from this directory, read at each
    /// request, instead of those built in (for working on the console);
    /// empty = built in.
    pub console_dir: String,
}

impl Default for GatewaySection {
    fn default() -> Self {
        GatewaySection {
            listen: SocketAddr::from(([127, 0, 0, 1], 8004)),
            engine_url: "http://127.0.0.1:50052".to_owned(),
            lifecycle_hook_url: "http://127.0.0.1:50053".to_owned(),
            plugin_registry_url: "http://127.0.0.1:50054".to_owned(),
            request_timeout_ms: 30_000,
            database_url: String::new(),
            public_url: String::new(),
            region: "RegionOne".to_owned(),
            max_connections: ConnectionLimits::default().max_connections,
            max_connections_per_source: ConnectionLimits::default().max_per_source,
            header_timeout_ms: ConnectionLimits::default().header_timeout.as_millis() as u64,
            console: true,
            console_dir: String::new(),
        }
    }
}

impl Validate for GatewaySection {
    fn validate(&self, problems: &mut Vec<String>) {
        check_optional_http_url("gateway.public_url", &self.public_url, problems);
        if self.region.is_empty() {
            problems.push("gateway.region: must not be empty".to_owned());
        }
        check_service_urls("gateway.engine_url", &self.engine_url, true, problems);
        check_service_urls(
            "gateway.lifecycle_hook_url",
            &self.lifecycle_hook_url,
            true,
            problems,
        );
        check_service_urls(
            "gateway.plugin_registry_url",
            &self.plugin_registry_url,
            true,
            problems,
        );
        check_database_url("gateway.database_url", &self.database_url, problems);
        check_more_than_zero(
            "gateway.request_timeout_ms",
            self.request_timeout_ms,
            problems,
        );
        check_more_than_zero(
            "gateway.max_connections",
            self.max_connections as u64,
            problems,
        );
        check_more_than_zero(
            "gateway.header_timeout_ms",
            self.header_timeout_ms,
            problems,
        );
        if !self.console_dir.is_empty() && !Path::new(&self.console_dir).is_dir() {
            problems.push(format!(
                "gateway.console_dir: {:?} is not a directory",
                self.console_dir
            ));
        }
    }
}

impl GatewaySection {
    /// The gateway's resolved configuration (both sections validated
    /// before): the built-in identity's SQLite file, when no database URL
    /// is set, lives under `data_dir`.
    pub fn resolve(
        &self,
        auth: &AuthSection,
        data_dir: &Path,
        signing_key: &str,
        internal_credential: &str,
    ) -> Config {
        Config {
            signing_key: signing_key.to_owned(),
            internal_credential: internal_credential.to_owned(),
            engine_url: self.engine_url.clone(),
            lifecycle_hook_url: self.lifecycle_hook_url.clone(),
            plugin_registry_url: self.plugin_registry_url.clone(),
            request_timeout: Duration::from_millis(self.request_timeout_ms),
            clock_skew: Duration::from_secs(auth.clock_skew_secs),
            auth: if auth.mode == "keystone" {
                AuthMode::Keystone(auth.keystone.resolve())
            } else {
                AuthMode::BuiltIn {
                    database_url: database_url_or_sqlite(
                        &self.database_url,
                        data_dir,
                        "gateway.db",
                    ),
                }
            },
            identity: IdentitySettings {
                public_url: self.public_url.clone(),
                region: self.region.clone(),
                token_ttl: Duration::from_secs(auth.identity_token_ttl_secs),
                lockout: crate::identity::Lockout {
                    attempts: auth.lockout_failure_attempts,
                    duration: (auth.lockout_duration_secs > 0)
                        .then(|| Duration::from_secs(auth.lockout_duration_secs)),
                },
                login_rate: crate::identity::throttle::LoginRate {
                    per_second: f64::from(auth.login_rate_per_source),
                    burst: f64::from(auth.login_burst_per_source),
                    loopback: auth.login_rate_limits_loopback,
                },
            },
            peers: ember_runtime::in_process::Peers::default(),
            console: match (self.console, self.console_dir.as_str()) {
                (false, _) => ConsoleSource::Off,
                (true, "") => ConsoleSource::Embedded,
                (true, dir) => ConsoleSource::Directory(dir.into()),
            },
            connections: ConnectionLimits {
                max_connections: self.max_connections,
                max_per_source: self.max_connections_per_source,
                header_timeout: Duration::from_millis(self.header_timeout_ms),
            },
        }
    }
}

/// What the gateway runs with, resolved from the sections above.
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
    /// Services in the same process (`ember dev`): called directly instead
    /// of at their URLs.
    pub peers: ember_runtime::in_process::Peers,
    /// How many connections, from whom, for how long.
    pub connections: ConnectionLimits,
    /// Where the web console's files come from.
    pub console: ConsoleSource,
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
    /// When wrong passwords lock a user out.
    pub lockout: crate::identity::Lockout,
    /// How fast one address may ask for tokens.
    pub login_rate: crate::identity::throttle::LoginRate,
}

impl Default for IdentitySettings {
    fn default() -> Self {
        IdentitySettings {
            public_url: String::new(),
            region: "RegionOne".to_owned(),
            token_ttl: Duration::from_secs(3600),
            lockout: crate::identity::Lockout::default(),
            login_rate: crate::identity::throttle::LoginRate::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keystone_mode_asks_for_keystones_url_and_password() {
        let mut problems = Vec::new();
        AuthSection::default().validate(&mut problems);
        GatewaySection::default().validate(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        let auth = AuthSection {
            mode: "keystone".into(),
            ..AuthSection::default()
        };
        auth.validate(&mut problems);
        let text = problems.join("\n");
        for key in [
            "auth.keystone.url: \"\" must be Keystone's http:// or https:// URL",
            "auth.keystone.password: the service user's password is required",
        ] {
            assert!(text.contains(key), "{key} in {text}");
        }
    }

    #[test]
    fn the_builtin_identity_keeps_its_store_under_the_data_dir() {
        let config = GatewaySection::default().resolve(
            &AuthSection::default(),
            Path::new("/data"),
            "key",
            "credential",
        );
        let AuthMode::BuiltIn { database_url } = config.auth else {
            panic!("builtin");
        };
        assert_eq!(database_url, "sqlite:///data/gateway.db?mode=rwc");
    }

    #[test]
    fn the_console_is_built_in_unless_turned_off_or_given_a_directory() {
        let resolve = |section: GatewaySection| {
            section
                .resolve(
                    &AuthSection::default(),
                    Path::new("/data"),
                    "key",
                    "credential",
                )
                .console
        };
        assert_eq!(resolve(GatewaySection::default()), ConsoleSource::Embedded);
        let off = GatewaySection {
            console: false,
            console_dir: "/srv/console".into(),
            ..GatewaySection::default()
        };
        assert_eq!(resolve(off), ConsoleSource::Off);
        let here = env!("CARGO_MANIFEST_DIR");
        let from_disk = GatewaySection {
            console_dir: here.into(),
            ..GatewaySection::default()
        };
        let mut problems = Vec::new();
        from_disk.validate(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(resolve(from_disk), ConsoleSource::Directory(here.into()));

        let missing = GatewaySection {
            console_dir: "/no/such/console".into(),
            ..GatewaySection::default()
        };
        missing.validate(&mut problems);
        assert_eq!(
            problems,
            ["gateway.console_dir: \"/no/such/console\" is not a directory"]
        );
    }
}
