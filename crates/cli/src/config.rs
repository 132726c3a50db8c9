//! Ember's configuration file and environment: one typed tree for all four
//! services, loaded in layers (defaults → TOML file → `EMBER_*` environment →
//! flags) and turned into each service's own resolved `Config`. Each
//! section's schema, defaults and validation live in its service's crate
//! (`ember_api_gateway::config`, `ember_engine::config`, …); this module
//! assembles them, loads them, and holds the secrets they share.
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

use ember_api_gateway::config::{AuthSection, GatewaySection};
use ember_engine::config::EngineSection;
use ember_lifecycle_hook::config::LifecycleHookSection;
use ember_plugin_registry::config::PluginRegistrySection;
use ember_runtime::config::{LogConfig, Validate};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmberConfig {
    /// Where SQLite databases and dev credentials live.
    pub data_dir: PathBuf,
    pub log: LogConfig,
    pub auth: AuthSection,
    pub gateway: GatewaySection,
    pub engine: EngineSection,
    pub lifecycle_hook: LifecycleHookSection,
    pub plugin_registry: PluginRegistrySection,
    /// Where tenant webhooks may point: read by the engine (when a hook's
    /// policy is made) and the lifecycle-hook (at every delivery).
    pub webhook_targets: ember_runtime::egress::WebhookTargetsSection,
}

impl Default for EmberConfig {
    fn default() -> Self {
        EmberConfig {
            data_dir: PathBuf::from("./ember-data"),
            log: LogConfig::default(),
            auth: AuthSection::default(),
            gateway: GatewaySection::default(),
            engine: EngineSection::default(),
            lifecycle_hook: LifecycleHookSection::default(),
            plugin_registry: PluginRegistrySection::default(),
            webhook_targets: ember_runtime::egress::WebhookTargetsSection::default(),
        }
    }
}

impl Validate for EmberConfig {
    fn validate(&self, problems: &mut Vec<String>) {
        self.log.validate(problems);
        self.auth.validate(problems);
        self.gateway.validate(problems);
        self.engine.validate(problems);
        self.lifecycle_hook.validate(problems);
        self.plugin_registry.validate(problems);
        self.webhook_targets.validate(problems);
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

    pub fn engine(&self, secrets: &Secrets) -> ember_engine::Config {
        ember_engine::Config {
            webhook_targets: self.webhook_targets.rules(),
            region: self.gateway.region.clone(),
            ..self.engine.resolve(
                &self.data_dir,
                &secrets.internal_credential,
                self.gateway.listen,
            )
        }
    }

    pub fn lifecycle_hook(&self, secrets: &Secrets) -> ember_lifecycle_hook::Config {
        ember_lifecycle_hook::Config {
            webhook_targets: self.webhook_targets.rules(),
            ..self
                .lifecycle_hook
                .resolve(&self.data_dir, &secrets.internal_credential)
        }
    }

    pub fn plugin_registry(&self, secrets: &Secrets) -> ember_plugin_registry::Config {
        self.plugin_registry
            .resolve(&self.data_dir, &secrets.internal_credential)
    }

    pub fn gateway(&self, secrets: &Secrets) -> ember_api_gateway::Config {
        self.gateway.resolve(
            &self.auth,
            &self.data_dir,
            &secrets.signing_key,
            &secrets.internal_credential,
        )
    }
}

/// Flags that override the file and environment (unset ones are skipped).
#[derive(Debug, Default, Serialize)]
pub struct FlagOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<ListenOverride>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineOverride>,
}

/// `ember dev --compute docker`.
#[derive(Debug, Serialize)]
pub struct EngineOverride {
    pub compute: ComputeOverride,
}

#[derive(Debug, Serialize)]
pub struct ComputeOverride {
    pub driver: String,
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
        // Replicas on two hosts, the second written without its scheme.
        config.gateway.lifecycle_hook_url = "http://hooks-a:50053, hooks-b:50053".into();
        config.gateway.plugin_registry_url = "http://plugins-a:50054,http://plugins-b:50054".into();
        config.engine.database_url = "mysql://x".into();
        let mut problems = Vec::new();
        config.validate(&mut problems);
        let text = problems.join("\n");
        assert!(
            text.contains("auth.signing_key: must be at least 32"),
            "{text}"
        );
        assert!(text.contains("gateway.engine_url"), "{text}");
        assert!(
            text.contains("gateway.lifecycle_hook_url: \"hooks-b:50053\" must be"),
            "{text}"
        );
        assert!(!text.contains("gateway.plugin_registry_url"), "{text}");
        assert!(text.contains("engine.database_url"), "{text}");
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
    fn webhook_targets_load_and_bad_entries_are_named() {
        let directory = tempfile::tempdir().expect("dir");
        let file = directory.path().join("ember.toml");
        let write = |allow: &str| {
            std::fs::write(
                &file,
                format!("[webhook_targets]\nallow_private_addresses = true\nallow = [{allow}]\n"),
            )
            .expect("write");
        };
        write("\"10.0.0.0/40\"");
        let refused =
            ember_runtime::config::load::<EmberConfig>(Some(&file), &FlagOverrides::default())
                .expect_err("a bad entry");
        assert!(
            format!("{refused:?}")
                .contains("webhook_targets.allow: \\\"10.0.0.0/40\\\": the prefix must be 0-32"),
            "{refused:?}"
        );
        write("\"10.20.0.0/16\", \"127.0.0.1:9000\"");
        let config: EmberConfig =
            ember_runtime::config::load(Some(&file), &FlagOverrides::default()).expect("loads");
        let secrets = Secrets {
            signing_key: "s".repeat(32),
            internal_credential: "c".repeat(32),
        };
        let rules = config.lifecycle_hook(&secrets).webhook_targets;
        assert!(rules.allow_private_addresses);
        assert_eq!(rules.allow.len(), 2, "{rules:?}");
        assert_eq!(config.engine(&secrets).webhook_targets, rules);
        // The default: strict.
        assert_eq!(
            EmberConfig::default()
                .lifecycle_hook(&secrets)
                .webhook_targets,
            ember_runtime::egress::EgressRules::default()
        );
    }

    #[test]
    fn the_docker_driver_and_flavors_load_from_toml() {
        let directory = tempfile::tempdir().expect("dir");
        let file = directory.path().join("ember.toml");
        std::fs::write(
            &file,
            "[engine.compute]\ndriver = \"docker\"\ndocker_host = \"unix:///run/podman/podman.sock\"\n\
             network = \"workers\"\npull = \"missing\"\n\
             [engine.compute.flavors.small]\nvcpus = 1\nmemory_mb = 256\n\
             [engine.compute.flavors.half]\nvcpus = 0.5\nmemory_mb = 64\n",
        )
        .expect("write");
        let config: EmberConfig =
            ember_runtime::config::load(Some(&file), &FlagOverrides::default()).expect("loads");
        let mut problems = Vec::new();
        config.validate(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        let compute = config.engine.compute.resolve();
        let ember_engine::compute::DriverConfig::Docker(docker) = &compute.driver else {
            panic!("docker");
        };
        assert_eq!(docker.docker_host, "unix:///run/podman/podman.sock");
        assert_eq!(docker.network, "workers");
        assert_eq!(
            docker.pull,
            ember_engine::compute::docker::PullPolicy::Missing
        );
        assert_eq!(
            compute.flavors.resolve("small").expect("small").memory_mb,
            256
        );
        assert_eq!(compute.flavors.resolve("half").expect("half").vcpus, 0.5);
        assert!(
            compute.flavors.resolve("m1.small").is_err(),
            "a table replaces the defaults"
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
