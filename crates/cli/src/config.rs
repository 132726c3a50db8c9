//! Ember's configuration file and environment: one typed tree for all four
//! services, loaded in layers (defaults → TOML file → `EMBER_*` environment →
//! flags) and turned into each service's own resolved `Config`.
//!
//! ```toml
//! data_dir = "./ember-data"
//! [log]
//! format = "json"
//! [auth]
//! signing_key = "…"          # required outside `ember dev`
//! internal_credential = "…"  # required outside `ember dev`
//! [gateway]
//! listen = "0.0.0.0:8004"
//! engine_url = "http://engine:50052"
//! [engine]
//! database_url = "postgres://ember@db/engine"
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ember_runtime::config::{LogConfig, Validate};
use ember_runtime::database::{Backend, sqlite_url};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmberConfig {
    /// Where SQLite databases and dev credentials live.
    pub data_dir: PathBuf,
    pub log: LogConfig,
    pub auth: AuthConfig,
    pub gateway: GatewaySection,
    pub engine: EngineSection,
    pub lifecycle_hook: LifecycleHookSection,
    pub plugin_registry: PluginRegistrySection,
}

impl Default for EmberConfig {
    fn default() -> Self {
        EmberConfig {
            data_dir: PathBuf::from("./ember-data"),
            log: LogConfig::default(),
            auth: AuthConfig::default(),
            gateway: GatewaySection::default(),
            engine: EngineSection::default(),
            lifecycle_hook: LifecycleHookSection::default(),
            plugin_registry: PluginRegistrySection::default(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Signs and verifies bearer tokens (at least 32 characters).
    pub signing_key: Option<String>,
    /// Shared by the services to prove a call comes from inside.
    pub internal_credential: Option<String>,
    /// Default lifetime of `ember token issue` tokens, in seconds.
    pub token_ttl_secs: u64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            signing_key: None,
            internal_credential: None,
            token_ttl_secs: 24 * 3600,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewaySection {
    pub listen: SocketAddr,
    pub engine_url: String,
    pub lifecycle_hook_url: String,
    pub plugin_registry_url: String,
    pub request_timeout_ms: u64,
}

impl Default for GatewaySection {
    fn default() -> Self {
        GatewaySection {
            listen: SocketAddr::from(([127, 0, 0, 1], 8004)),
            engine_url: "http://127.0.0.1:50052".to_owned(),
            lifecycle_hook_url: "http://127.0.0.1:50053".to_owned(),
            plugin_registry_url: "http://127.0.0.1:50054".to_owned(),
            request_timeout_ms: 30_000,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineSection {
    pub listen: SocketAddr,
    /// Empty = SQLite at `<data_dir>/engine.db`.
    pub database_url: String,
    pub request_timeout_ms: u64,
    /// The plugin-registry whose runner calls lifecycle plugins around stack
    /// operations; empty = no plugins.
    pub plugin_registry_url: String,
    /// `fail` (default) or `allow` when the plugin-registry is unreachable.
    pub plugin_registry_unavailable: String,
    /// lifecycle-hook, handed the pending lifecycle actions of scale-ins
    /// under a deletion policy with hooks; empty = such removals wait.
    pub lifecycle_hook_url: String,
    /// The compute driver behind instances.
    pub compute: ComputeSection,
}

impl Default for EngineSection {
    fn default() -> Self {
        EngineSection {
            listen: SocketAddr::from(([127, 0, 0, 1], 50052)),
            database_url: String::new(),
            request_timeout_ms: 30_000,
            plugin_registry_url: "http://127.0.0.1:50054".to_owned(),
            plugin_registry_unavailable: "fail".to_owned(),
            lifecycle_hook_url: "http://127.0.0.1:50053".to_owned(),
            compute: ComputeSection::default(),
        }
    }
}

/// `[engine.compute]`: the simulated compute driver (the only one so far):
/// how long each task takes, and which builds fail.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ComputeSection {
    /// `simulated`.
    pub driver: String,
    pub build_ms: u64,
    pub power_ms: u64,
    pub reboot_ms: u64,
    pub delete_ms: u64,
    /// A regular expression: builds of instances whose name matches fail.
    pub fail_builds_matching: String,
}

impl Default for ComputeSection {
    fn default() -> Self {
        let simulated = ember_engine::compute::simulated::SimulatedComputeConfig::default();
        let millis = |duration: Duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        ComputeSection {
            driver: "simulated".to_owned(),
            build_ms: millis(simulated.build_latency),
            power_ms: millis(simulated.power_latency),
            reboot_ms: millis(simulated.reboot_latency),
            delete_ms: millis(simulated.delete_latency),
            fail_builds_matching: simulated.fail_builds_matching,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LifecycleHookSection {
    pub listen: SocketAddr,
    /// Empty = SQLite at `<data_dir>/lifecycle-hook.db`.
    pub database_url: String,
    /// NATS server for queue targets; empty = the embedded queue.
    pub nats_url: String,
    /// The engine, told when lifecycle deadlines pass.
    pub engine_url: String,
    /// Key of the `X-Ember-Signature` HMAC on webhook deliveries (at least
    /// 32 characters); unset = webhooks are not delivered (`ember dev`
    /// makes one).
    pub webhook_secret: Option<String>,
    /// PEM file of CA certificates trusted for `https://` webhooks besides
    /// the system's; empty = the system's only.
    pub webhook_ca_file: String,
    pub request_timeout_ms: u64,
}

impl Default for LifecycleHookSection {
    fn default() -> Self {
        LifecycleHookSection {
            listen: SocketAddr::from(([127, 0, 0, 1], 50053)),
            database_url: String::new(),
            nats_url: String::new(),
            engine_url: "http://127.0.0.1:50052".to_owned(),
            webhook_secret: None,
            webhook_ca_file: String::new(),
            request_timeout_ms: 30_000,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PluginRegistrySection {
    pub listen: SocketAddr,
    /// Empty = SQLite at `<data_dir>/plugin-registry.db`.
    pub database_url: String,
    pub request_timeout_ms: u64,
}

impl Default for PluginRegistrySection {
    fn default() -> Self {
        PluginRegistrySection {
            listen: SocketAddr::from(([127, 0, 0, 1], 50054)),
            database_url: String::new(),
            request_timeout_ms: 30_000,
        }
    }
}

/// The minimum length of secrets, so a typo'd or toy key is refused.
pub const MIN_SECRET_LENGTH: usize = 32;

impl Validate for EmberConfig {
    fn validate(&self, problems: &mut Vec<String>) {
        self.log.validate(problems);
        for (key, secret) in [
            ("auth.signing_key", &self.auth.signing_key),
            ("auth.internal_credential", &self.auth.internal_credential),
            (
                "lifecycle_hook.webhook_secret",
                &self.lifecycle_hook.webhook_secret,
            ),
        ] {
            if let Some(secret) = secret
                && secret.len() < MIN_SECRET_LENGTH
            {
                problems.push(format!(
                    "{key}: must be at least {MIN_SECRET_LENGTH} characters (got {})",
                    secret.len()
                ));
            }
        }
        if self.auth.token_ttl_secs == 0 {
            problems.push("auth.token_ttl_secs: must be more than 0".to_owned());
        }
        if !matches!(
            self.engine.plugin_registry_unavailable.as_str(),
            "fail" | "allow"
        ) {
            problems.push(format!(
                "engine.plugin_registry_unavailable: {:?} must be fail or allow",
                self.engine.plugin_registry_unavailable
            ));
        }
        for (key, url) in [
            (
                "engine.plugin_registry_url",
                &self.engine.plugin_registry_url,
            ),
            ("engine.lifecycle_hook_url", &self.engine.lifecycle_hook_url),
            ("lifecycle_hook.engine_url", &self.lifecycle_hook.engine_url),
        ] {
            if !(url.is_empty() || url.starts_with("http://") || url.starts_with("https://")) {
                problems.push(format!(
                    "{key}: {url:?} must be an http:// or https:// URL (or empty)"
                ));
            }
        }
        for (key, url) in [
            ("gateway.engine_url", &self.gateway.engine_url),
            (
                "gateway.lifecycle_hook_url",
                &self.gateway.lifecycle_hook_url,
            ),
            (
                "gateway.plugin_registry_url",
                &self.gateway.plugin_registry_url,
            ),
        ] {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                problems.push(format!("{key}: {url:?} must be an http:// or https:// URL"));
            }
        }
        for (key, url) in [
            ("engine.database_url", &self.engine.database_url),
            (
                "lifecycle_hook.database_url",
                &self.lifecycle_hook.database_url,
            ),
            (
                "plugin_registry.database_url",
                &self.plugin_registry.database_url,
            ),
        ] {
            if !url.is_empty() && Backend::of(url).is_none() {
                problems.push(format!(
                    "{key}: {:?} is not a sqlite:// or postgres:// URL",
                    ember_runtime::database::redact(url)
                ));
            }
        }
        if self.engine.compute.driver != "simulated" {
            problems.push(format!(
                "engine.compute.driver: {:?} is not a compute driver: use \"simulated\"",
                self.engine.compute.driver
            ));
        }
        if let Err(problem) = ember_engine::compute::simulated::validate_failure_pattern(
            &self.engine.compute.fail_builds_matching,
        ) {
            problems.push(problem);
        }
        let ca_file = &self.lifecycle_hook.webhook_ca_file;
        if !ca_file.is_empty() && !std::path::Path::new(ca_file).is_file() {
            problems.push(format!(
                "lifecycle_hook.webhook_ca_file: {ca_file:?} is not a readable file"
            ));
        }
        if !self.lifecycle_hook.nats_url.is_empty()
            && !self.lifecycle_hook.nats_url.starts_with("nats://")
        {
            problems.push(format!(
                "lifecycle_hook.nats_url: {:?} must start with nats://",
                self.lifecycle_hook.nats_url
            ));
        }
        for (key, timeout) in [
            (
                "gateway.request_timeout_ms",
                self.gateway.request_timeout_ms,
            ),
            ("engine.request_timeout_ms", self.engine.request_timeout_ms),
            (
                "lifecycle_hook.request_timeout_ms",
                self.lifecycle_hook.request_timeout_ms,
            ),
            (
                "plugin_registry.request_timeout_ms",
                self.plugin_registry.request_timeout_ms,
            ),
        ] {
            if timeout == 0 {
                problems.push(format!("{key}: must be more than 0"));
            }
        }
    }
}

/// The two secrets every deployment needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Secrets {
    pub signing_key: String,
    pub internal_credential: String,
}

impl EmberConfig {
    /// The secrets from configuration, or an error naming what to set.
    pub fn required_secrets(&self) -> Result<Secrets, String> {
        match (&self.auth.signing_key, &self.auth.internal_credential) {
            (Some(signing_key), Some(internal_credential)) => Ok(Secrets {
                signing_key: signing_key.clone(),
                internal_credential: internal_credential.clone(),
            }),
            (signing_key, _) => {
                let missing = if signing_key.is_none() {
                    "auth.signing_key (EMBER_AUTH__SIGNING_KEY)"
                } else {
                    "auth.internal_credential (EMBER_AUTH__INTERNAL_CREDENTIAL)"
                };
                Err(format!(
                    "{missing} is required outside `ember dev`: set it in the config file or the environment (`openssl rand -hex 32` makes one)"
                ))
            }
        }
    }

    fn database_url(&self, configured: &str, file_name: &str) -> String {
        if configured.is_empty() {
            sqlite_url(&self.data_dir.join(file_name))
        } else {
            configured.to_owned()
        }
    }

    pub fn engine(&self, secrets: &Secrets) -> ember_engine::Config {
        ember_engine::Config {
            database_url: self.database_url(&self.engine.database_url, "engine.db"),
            internal_credential: secrets.internal_credential.clone(),
            request_timeout: Duration::from_millis(self.engine.request_timeout_ms),
            plugin_registry_url: self.engine.plugin_registry_url.clone(),
            lifecycle_hook_url: self.engine.lifecycle_hook_url.clone(),
            plugin_registry_unavailable: if self.engine.plugin_registry_unavailable == "allow" {
                ember_engine::stacks::RegistryUnavailable::Allow
            } else {
                ember_engine::stacks::RegistryUnavailable::Fail
            },
            compute: ember_engine::compute::simulated::SimulatedComputeConfig {
                build_latency: Duration::from_millis(self.engine.compute.build_ms),
                power_latency: Duration::from_millis(self.engine.compute.power_ms),
                reboot_latency: Duration::from_millis(self.engine.compute.reboot_ms),
                delete_latency: Duration::from_millis(self.engine.compute.delete_ms),
                fail_builds_matching: self.engine.compute.fail_builds_matching.clone(),
            },
        }
    }

    pub fn lifecycle_hook(&self, secrets: &Secrets) -> ember_lifecycle_hook::Config {
        ember_lifecycle_hook::Config {
            database_url: self.database_url(&self.lifecycle_hook.database_url, "lifecycle-hook.db"),
            internal_credential: secrets.internal_credential.clone(),
            request_timeout: Duration::from_millis(self.lifecycle_hook.request_timeout_ms),
            engine_url: self.lifecycle_hook.engine_url.clone(),
            webhook_secret: self
                .lifecycle_hook
                .webhook_secret
                .clone()
                .unwrap_or_default(),
            nats_url: self.lifecycle_hook.nats_url.clone(),
            webhook_ca_file: self.lifecycle_hook.webhook_ca_file.clone(),
        }
    }

    pub fn plugin_registry(&self, secrets: &Secrets) -> ember_plugin_registry::Config {
        ember_plugin_registry::Config {
            database_url: self
                .database_url(&self.plugin_registry.database_url, "plugin-registry.db"),
            internal_credential: secrets.internal_credential.clone(),
            request_timeout: Duration::from_millis(self.plugin_registry.request_timeout_ms),
        }
    }

    pub fn gateway(&self, secrets: &Secrets) -> ember_api_gateway::Config {
        ember_api_gateway::Config {
            signing_key: secrets.signing_key.clone(),
            internal_credential: secrets.internal_credential.clone(),
            engine_url: self.gateway.engine_url.clone(),
            lifecycle_hook_url: self.gateway.lifecycle_hook_url.clone(),
            plugin_registry_url: self.gateway.plugin_registry_url.clone(),
            request_timeout: Duration::from_millis(self.gateway.request_timeout_ms),
        }
    }
}

/// Flags that override the file and environment (unset ones are skipped).
#[derive(Debug, Default, Serialize)]
pub struct FlagOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<ListenOverride>,
}

#[derive(Debug, Serialize)]
pub struct ListenOverride {
    pub listen: SocketAddr,
}

/// Loads the configuration: `file` (or `$EMBER_CONFIG`), then the
/// environment, then flags.
pub fn load(file: Option<&Path>, flags: &FlagOverrides) -> Result<EmberConfig, String> {
    let from_env = std::env::var_os("EMBER_CONFIG").map(PathBuf::from);
    let file = file.map(Path::to_path_buf).or(from_env);
    ember_runtime::config::load(file.as_deref(), flags).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_use_sqlite_under_the_data_dir() {
        let config = EmberConfig::default();
        let mut problems = Vec::new();
        config.validate(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        let secrets = Secrets {
            signing_key: "k".repeat(32),
            internal_credential: "c".repeat(32),
        };
        assert_eq!(
            config.engine(&secrets).database_url,
            "sqlite://./ember-data/engine.db?mode=rwc"
        );
    }

    #[test]
    fn short_secrets_and_bad_urls_are_each_reported() {
        let mut config = EmberConfig::default();
        config.auth.signing_key = Some("short".into());
        config.gateway.engine_url = "engine:50052".into();
        config.engine.database_url = "mysql://x".into();
        let mut problems = Vec::new();
        config.validate(&mut problems);
        let text = problems.join("\n");
        assert!(
            text.contains("auth.signing_key: must be at least 32"),
            "{text}"
        );
        assert!(text.contains("gateway.engine_url"), "{text}");
        assert!(text.contains("engine.database_url"), "{text}");
    }

    #[test]
    fn lifecycle_hook_keys_are_validated() {
        let mut config = EmberConfig::default();
        config.lifecycle_hook.webhook_secret = Some("short".into());
        config.lifecycle_hook.engine_url = "engine:50052".into();
        config.engine.lifecycle_hook_url = "lifecycle-hook:50053".into();
        config.lifecycle_hook.nats_url = "http://nats:4222".into();
        config.lifecycle_hook.webhook_ca_file = "/nonexistent/ca.pem".into();
        let mut problems = Vec::new();
        config.validate(&mut problems);
        let text = problems.join("\n");
        for key in [
            "lifecycle_hook.webhook_secret: must be at least 32",
            "lifecycle_hook.engine_url",
            "engine.lifecycle_hook_url",
            "lifecycle_hook.nats_url",
            "lifecycle_hook.webhook_ca_file: \"/nonexistent/ca.pem\" is not a readable file",
        ] {
            assert!(text.contains(key), "{key} in {text}");
        }
    }

    #[test]
    fn the_shipped_example_configuration_loads() {
        let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../deploy/ember.example.toml");
        let config: EmberConfig =
            ember_runtime::config::load(Some(&example), &FlagOverrides::default())
                .expect("example loads");
        assert_eq!(config.gateway.listen, EmberConfig::default().gateway.listen);
    }

    #[test]
    fn a_bad_compute_driver_or_failure_pattern_is_reported_by_key() {
        let mut config = EmberConfig::default();
        config.engine.compute.driver = "ironic".into();
        config.engine.compute.fail_builds_matching = "(".into();
        let mut problems = Vec::new();
        config.validate(&mut problems);
        let text = problems.join("\n");
        assert!(text.contains("engine.compute.driver: \"ironic\""), "{text}");
        assert!(
            text.contains("engine.compute.fail_builds_matching"),
            "{text}"
        );
    }

    #[test]
    fn missing_secrets_name_the_variable_to_set() {
        let error = EmberConfig::default()
            .required_secrets()
            .expect_err("missing");
        assert!(error.contains("EMBER_AUTH__SIGNING_KEY"), "{error}");
    }
}
