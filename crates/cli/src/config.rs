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

use std::collections::BTreeMap;
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
    pub keystone: KeystoneSection,
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

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            signing_key: None,
            internal_credential: None,
            token_ttl_secs: 24 * 3600,
            clock_skew_secs: 60,
            mode: "builtin".to_owned(),
            identity_token_ttl_secs: 3600,
            keystone: KeystoneSection::default(),
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
    /// The built-in identity's store. Empty = SQLite at
    /// `<data_dir>/gateway.db`.
    pub database_url: String,
    /// The URL users reach the gateway at (behind a proxy: the proxy's),
    /// for the service catalog; empty = `http://` and the request's Host.
    pub public_url: String,
    /// The region of every catalog endpoint.
    pub region: String,
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
    /// How long a stack lease lives without its heartbeat: after an engine
    /// dies, its in-progress stacks are failed this long (plus a third) later.
    pub stack_lease_ttl_ms: u64,
    /// How long a claimed cluster action stays an engine's without renewal:
    /// after an engine dies, another takes its actions over this much later.
    pub cluster_action_lease_ms: u64,
    /// Every project's quotas unless an admin set others for it.
    pub quotas: QuotaSection,
    /// The compute driver behind instances.
    pub compute: ComputeSection,
    /// The gateway's URL as users reach it (behind a proxy: the proxy's),
    /// for the URLs the engine hands out — wait condition signal URLs.
    /// Empty = `http://` and the gateway's listen address (`ember dev`
    /// fills in the address it bound).
    pub public_url: String,
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
            stack_lease_ttl_ms: 30_000,
            cluster_action_lease_ms: 10_000,
            quotas: QuotaSection::default(),
            compute: ComputeSection::default(),
            public_url: String::new(),
        }
    }
}

/// `[engine.quotas]`: each project's limits unless an admin set others
/// (`ember quota set`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QuotaSection {
    pub stacks: u64,
    pub resources_per_stack: u64,
    pub nested_depth: u64,
    pub clusters: u64,
    pub nodes_per_cluster: u64,
    pub nodes: u64,
    pub instances: u64,
    pub concurrent_operations: u64,
}

impl Default for QuotaSection {
    fn default() -> Self {
        let limits = ember_engine::domain::quota::QuotaLimits::default();
        QuotaSection {
            stacks: limits.stacks,
            resources_per_stack: limits.resources_per_stack,
            nested_depth: limits.nested_depth,
            clusters: limits.clusters,
            nodes_per_cluster: limits.nodes_per_cluster,
            nodes: limits.nodes,
            instances: limits.instances,
            concurrent_operations: limits.concurrent_operations,
        }
    }
}

impl QuotaSection {
    fn limits(&self) -> ember_engine::domain::quota::QuotaLimits {
        ember_engine::domain::quota::QuotaLimits {
            stacks: self.stacks,
            resources_per_stack: self.resources_per_stack,
            nested_depth: self.nested_depth,
            clusters: self.clusters,
            nodes_per_cluster: self.nodes_per_cluster,
            nodes: self.nodes,
            instances: self.instances,
            concurrent_operations: self.concurrent_operations,
        }
    }
}

/// `[engine.compute]`: the compute driver behind instances, and the flavor
/// table.
///
/// ```toml
/// [engine.compute]
/// driver = "docker"                 # or "simulated" (the default)
/// docker_host = "unix:///run/podman/podman.sock"   # default: $DOCKER_HOST, else /var/run/docker.sock
/// network = "ember"                 # created if missing; "" = the engine's default
/// name_prefix = "ember-"
/// pull = "never"                    # or "missing"
/// [engine.compute.flavors.small]
/// vcpus = 1
/// memory_mb = 256
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ComputeSection {
    /// `simulated` or `docker`.
    pub driver: String,
    /// Simulated driver: how long each task takes, and which builds fail.
    pub build_ms: u64,
    pub power_ms: u64,
    pub reboot_ms: u64,
    pub delete_ms: u64,
    /// A regular expression: builds of instances whose name matches fail.
    pub fail_builds_matching: String,
    /// Docker driver: the engine's API (`unix://…`, `tcp://…`); empty =
    /// `$DOCKER_HOST`, else `unix:///var/run/docker.sock`.
    pub docker_host: String,
    /// The network containers join (created if missing); empty = the
    /// engine's default network.
    pub network: String,
    /// Containers are named `<name_prefix><instance uuid>`.
    pub name_prefix: String,
    /// `never` (a missing image fails the build, naming it) or `missing`.
    pub pull: String,
    /// Seconds a stop (power off, delete) waits after SIGTERM before SIGKILL.
    pub stop_grace_secs: u64,
    /// Run an init process as each container's PID 1 (forwards signals).
    pub init: bool,
    /// Seconds one container engine call may take to answer.
    pub api_timeout_secs: u64,
    /// How often every settled instance is compared with its machine, in
    /// milliseconds (besides the engine's event stream).
    pub resync_ms: u64,
    /// `[engine.compute.flavors.<name>] vcpus, memory_mb`. Empty: the
    /// docker driver uses Nova's m1.tiny … m1.xlarge, the simulated driver
    /// accepts any name. `unlimited` (no limits) always exists.
    pub flavors: BTreeMap<String, FlavorSection>,
}

/// One flavor: CPUs (fractions allowed; 0 = no limit) and MiB of memory
/// (0 = no limit).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlavorSection {
    #[serde(default)]
    pub vcpus: f64,
    #[serde(default)]
    pub memory_mb: u64,
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
            docker_host: String::new(),
            network: "ember".to_owned(),
            name_prefix: "ember-".to_owned(),
            pull: "never".to_owned(),
            stop_grace_secs: 10,
            init: true,
            api_timeout_secs: 120,
            resync_ms: millis(ember_engine::compute::DEFAULT_RESYNC_INTERVAL),
            flavors: BTreeMap::new(),
        }
    }
}

impl ComputeSection {
    fn flavor_table(&self) -> BTreeMap<String, ember_engine::compute::flavors::Flavor> {
        self.flavors
            .iter()
            .map(|(name, flavor)| {
                (
                    name.clone(),
                    ember_engine::compute::flavors::Flavor {
                        vcpus: flavor.vcpus,
                        memory_mb: flavor.memory_mb,
                    },
                )
            })
            .collect()
    }

    fn docker(&self) -> ember_engine::compute::docker::DockerComputeConfig {
        use ember_engine::compute::docker::{DockerComputeConfig, PullPolicy};
        DockerComputeConfig {
            docker_host: if self.docker_host.is_empty() {
                DockerComputeConfig::default_host()
            } else {
                self.docker_host.clone()
            },
            network: self.network.clone(),
            name_prefix: self.name_prefix.clone(),
            pull: PullPolicy::parse(&self.pull).unwrap_or(PullPolicy::Never),
            stop_grace: Duration::from_secs(self.stop_grace_secs),
            init: self.init,
            api_timeout: Duration::from_secs(self.api_timeout_secs),
        }
    }

    /// The engine's compute configuration (validated before).
    pub fn resolve(&self) -> ember_engine::compute::ComputeConfig {
        use ember_engine::compute::flavors::FlavorTable;
        use ember_engine::compute::{ComputeConfig, DriverConfig};
        let docker = self.driver == "docker";
        let flavors = match (self.flavors.is_empty(), docker) {
            (false, _) => FlavorTable::new(self.flavor_table()),
            (true, true) => FlavorTable::nova_defaults(),
            (true, false) => FlavorTable::accepting_any(),
        };
        ComputeConfig {
            driver: if docker {
                DriverConfig::Docker(self.docker())
            } else {
                DriverConfig::Simulated(ember_engine::compute::simulated::SimulatedComputeConfig {
                    build_latency: Duration::from_millis(self.build_ms),
                    power_latency: Duration::from_millis(self.power_ms),
                    reboot_latency: Duration::from_millis(self.reboot_ms),
                    delete_latency: Duration::from_millis(self.delete_ms),
                    fail_builds_matching: self.fail_builds_matching.clone(),
                })
            },
            flavors,
            resync_interval: Duration::from_millis(self.resync_ms),
        }
    }

    fn validate(&self, problems: &mut Vec<String>) {
        match self.driver.as_str() {
            "simulated" => {}
            "docker" => {
                if let Err(problem) = self.docker().validate() {
                    problems.push(problem);
                }
            }
            other => problems.push(format!(
                "engine.compute.driver: {other:?} is not a compute driver: use \"simulated\" or \"docker\""
            )),
        }
        if ember_engine::compute::docker::PullPolicy::parse(&self.pull).is_none() {
            problems.push(format!(
                "engine.compute.pull: {:?} must be \"never\" or \"missing\"",
                self.pull
            ));
        }
        if let Err(problem) =
            ember_engine::compute::simulated::validate_failure_pattern(&self.fail_builds_matching)
        {
            problems.push(problem);
        }
        if let Err(problem) =
            ember_engine::compute::flavors::FlavorTable::validate(&self.flavor_table())
        {
            problems.push(problem);
        }
        if self.resync_ms == 0 {
            problems.push("engine.compute.resync_ms: must be more than 0".to_owned());
        }
        if self.api_timeout_secs == 0 {
            problems.push("engine.compute.api_timeout_secs: must be more than 0".to_owned());
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
        if self.auth.identity_token_ttl_secs == 0 {
            problems.push("auth.identity_token_ttl_secs: must be more than 0".to_owned());
        }
        match self.auth.mode.as_str() {
            "builtin" => {}
            "keystone" => {
                let keystone = &self.auth.keystone;
                if !(keystone.url.starts_with("http://") || keystone.url.starts_with("https://")) {
                    problems.push(format!(
                        "auth.keystone.url: {:?} must be Keystone's http:// or https:// URL (auth.mode is keystone)",
                        keystone.url
                    ));
                }
                if keystone.password.as_deref().unwrap_or_default().is_empty() {
                    problems.push(
                        "auth.keystone.password: the service user's password is required (auth.mode is keystone; EMBER_AUTH__KEYSTONE__PASSWORD)"
                            .to_owned(),
                    );
                }
                for (key, value) in [
                    ("auth.keystone.user", &keystone.user),
                    ("auth.keystone.project", &keystone.project),
                ] {
                    if value.is_empty() {
                        problems.push(format!("{key}: must not be empty (auth.mode is keystone)"));
                    }
                }
                if keystone.timeout_ms == 0 {
                    problems.push("auth.keystone.timeout_ms: must be more than 0".to_owned());
                }
                if !keystone.ca_file.is_empty() && !Path::new(&keystone.ca_file).is_file() {
                    problems.push(format!(
                        "auth.keystone.ca_file: {:?} is not a readable file",
                        keystone.ca_file
                    ));
                }
            }
            other => problems.push(format!("auth.mode: {other:?} must be builtin or keystone")),
        }
        if !(self.gateway.public_url.is_empty()
            || self.gateway.public_url.starts_with("http://")
            || self.gateway.public_url.starts_with("https://"))
        {
            problems.push(format!(
                "gateway.public_url: {:?} must be an http:// or https:// URL (or empty)",
                self.gateway.public_url
            ));
        }
        if self.gateway.region.is_empty() {
            problems.push("gateway.region: must not be empty".to_owned());
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
            ("gateway.database_url", &self.gateway.database_url),
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
        self.engine.compute.validate(problems);
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
            ("engine.stack_lease_ttl_ms", self.engine.stack_lease_ttl_ms),
            (
                "engine.cluster_action_lease_ms",
                self.engine.cluster_action_lease_ms,
            ),
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
            stack_lease_ttl: Duration::from_millis(self.engine.stack_lease_ttl_ms),
            cluster_action_lease: Duration::from_millis(self.engine.cluster_action_lease_ms),
            quotas: self.engine.quotas.limits(),
            plugin_registry_url: self.engine.plugin_registry_url.clone(),
            lifecycle_hook_url: self.engine.lifecycle_hook_url.clone(),
            plugin_registry_unavailable: if self.engine.plugin_registry_unavailable == "allow" {
                ember_engine::stacks::RegistryUnavailable::Allow
            } else {
                ember_engine::stacks::RegistryUnavailable::Fail
            },
            compute: self.engine.compute.resolve(),
            public_url: if self.engine.public_url.is_empty() {
                format!("http://{}", self.gateway.listen)
            } else {
                self.engine.public_url.clone()
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
            clock_skew: Duration::from_secs(self.auth.clock_skew_secs),
            auth: if self.auth.mode == "keystone" {
                let keystone = &self.auth.keystone;
                ember_api_gateway::AuthMode::Keystone(
                    ember_api_gateway::identity::keystone::KeystoneConfig {
                        url: keystone.url.clone(),
                        user: keystone.user.clone(),
                        password: keystone.password.clone().unwrap_or_default(),
                        project: keystone.project.clone(),
                        user_domain: keystone.user_domain.clone(),
                        project_domain: keystone.project_domain.clone(),
                        cache_ttl: Duration::from_secs(keystone.cache_ttl_secs),
                        cache_size: keystone.cache_size,
                        ca_file: keystone.ca_file.clone(),
                        timeout: Duration::from_millis(keystone.timeout_ms),
                    },
                )
            } else {
                ember_api_gateway::AuthMode::BuiltIn {
                    database_url: self.database_url(&self.gateway.database_url, "gateway.db"),
                }
            },
            identity: ember_api_gateway::IdentitySettings {
                public_url: self.gateway.public_url.clone(),
                region: self.gateway.region.clone(),
                token_ttl: Duration::from_secs(self.auth.identity_token_ttl_secs),
            },
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
        assert!(text.contains("use \"simulated\" or \"docker\""), "{text}");
        assert!(
            text.contains("engine.compute.fail_builds_matching"),
            "{text}"
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
    fn bad_docker_settings_are_reported_by_key() {
        let mut config = EmberConfig::default();
        config.engine.compute.driver = "docker".into();
        config.engine.compute.docker_host = "ftp://engine".into();
        config.engine.compute.pull = "always".into();
        config.engine.compute.flavors.insert(
            "tiny".into(),
            FlavorSection {
                vcpus: -1.0,
                memory_mb: 0,
            },
        );
        let mut problems = Vec::new();
        config.validate(&mut problems);
        let text = problems.join("\n");
        for key in [
            "engine.compute.docker_host",
            "engine.compute.pull",
            "engine.compute.flavors.tiny.vcpus",
        ] {
            assert!(text.contains(key), "{key} in {text}");
        }
    }

    #[test]
    fn missing_secrets_name_the_variable_to_set() {
        let error = EmberConfig::default()
            .required_secrets()
            .expect_err("missing");
        assert!(error.contains("EMBER_AUTH__SIGNING_KEY"), "{error}");
    }
}
