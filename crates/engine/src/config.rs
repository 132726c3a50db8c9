//! The engine's configuration: the `[engine]` section of Ember's
//! configuration file (with `[engine.quotas]` and `[engine.compute]`), its
//! defaults and validation, and the [`Config`] the engine runs with,
//! resolved from it. The `ember` binary loads the file and hands the
//! section here.
//!
//! ```toml
//! [engine]
//! listen = "0.0.0.0:50052"
//! database_url = "postgres://ember@db/engine"
//! [engine.quotas]
//! stacks = 100
//! [engine.compute]
//! driver = "docker"
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use ember_runtime::config::{
    Validate, check_database_url, check_more_than_zero, check_service_urls, database_url_or_sqlite,
};
use serde::{Deserialize, Serialize};

use crate::compute::docker::{DockerComputeConfig, PullPolicy};
use crate::compute::flavors::{Flavor, FlavorTable};
use crate::compute::simulated::{SimulatedComputeConfig, validate_failure_pattern};
use crate::compute::{ComputeConfig, DEFAULT_RESYNC_INTERVAL, DriverConfig};
use crate::domain::quota::QuotaLimits;
use crate::stacks::RegistryUnavailable;

/// `[engine]`: where the engine listens and keeps its state, the services
/// it calls, its leases, quotas and compute driver.
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
    /// The gateway whose built-in identity Heat's `OS::Keystone::*` types
    /// manage (its gRPC door, called with the internal credential as the
    /// stack's owner); empty = this configuration's `gateway.listen`.
    /// Unused with the openstack backend (its Keystone is the cloud's).
    pub identity_url: String,
    /// The shortest `hooks.timeout` a new deletion policy may have, in
    /// seconds (30 by default, as AWS Auto Scaling's; 1–7200). Test set-ups
    /// lower it to watch deadlines pass quickly.
    pub lifecycle_hook_min_timeout_s: u64,
    /// How long a stack lease lives without its heartbeat: after an engine
    /// dies, another engine (or this one, restarted) takes its in-progress
    /// stacks over and resumes them when their leases expire, at most this
    /// long later (a sweep wakes at the next expiry).
    pub stack_lease_ttl_ms: u64,
    /// How long a stack operation may run when its stack sets no
    /// `timeout_mins` (Heat's `stack_action_timeout`, an hour): past it
    /// the operation fails (`… timed out`) and the stack can be deleted.
    pub stack_action_timeout_s: u64,
    /// How long a claimed cluster action stays an engine's without renewal:
    /// after an engine dies, another takes its actions over this much later.
    pub cluster_action_lease_ms: u64,
    /// How many actions may run or wait on one cluster: one more is
    /// refused with 409 naming them (Senlin refuses any second one).
    pub cluster_max_queued_actions: u64,
    /// Every project's quotas unless an admin set others for it.
    pub quotas: QuotaSection,
    /// How long deleted stacks and instances and cluster history are kept.
    pub retention: RetentionSection,
    /// The compute driver behind instances.
    pub compute: ComputeSection,
    /// The cloud behind the openstack backend (`compute.driver =
    /// "openstack"`).
    pub openstack: OpenStackSection,
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
            identity_url: String::new(),
            lifecycle_hook_min_timeout_s: u64::from(
                crate::domain::cluster::policy::MIN_HOOK_TIMEOUT_SECS,
            ),
            stack_lease_ttl_ms: 30_000,
            stack_action_timeout_s: 3600,
            cluster_action_lease_ms: 10_000,
            cluster_max_queued_actions: 16,
            quotas: QuotaSection::default(),
            retention: RetentionSection::default(),
            compute: ComputeSection::default(),
            openstack: OpenStackSection::default(),
            public_url: String::new(),
        }
    }
}

impl Validate for EngineSection {
    fn validate(&self, problems: &mut Vec<String>) {
        if !matches!(self.plugin_registry_unavailable.as_str(), "fail" | "allow") {
            problems.push(format!(
                "engine.plugin_registry_unavailable: {:?} must be fail or allow",
                self.plugin_registry_unavailable
            ));
        }
        check_service_urls(
            "engine.plugin_registry_url",
            &self.plugin_registry_url,
            false,
            problems,
        );
        check_service_urls(
            "engine.lifecycle_hook_url",
            &self.lifecycle_hook_url,
            false,
            problems,
        );
        check_service_urls("engine.identity_url", &self.identity_url, false, problems);
        check_database_url("engine.database_url", &self.database_url, problems);
        let max_hook = u64::from(crate::domain::cluster::policy::MAX_HOOK_TIMEOUT_SECS);
        if !(1..=max_hook).contains(&self.lifecycle_hook_min_timeout_s) {
            problems.push(format!(
                "engine.lifecycle_hook_min_timeout_s: {} must be 1-{max_hook}",
                self.lifecycle_hook_min_timeout_s
            ));
        }
        self.compute.validate(problems);
        if self.compute.driver == "openstack" {
            self.openstack.validate(problems);
        }
        check_more_than_zero(
            "engine.request_timeout_ms",
            self.request_timeout_ms,
            problems,
        );
        check_more_than_zero(
            "engine.stack_lease_ttl_ms",
            self.stack_lease_ttl_ms,
            problems,
        );
        check_more_than_zero(
            "engine.stack_action_timeout_s",
            self.stack_action_timeout_s,
            problems,
        );
        check_more_than_zero(
            "engine.cluster_action_lease_ms",
            self.cluster_action_lease_ms,
            problems,
        );
        check_more_than_zero(
            "engine.cluster_max_queued_actions",
            self.cluster_max_queued_actions,
            problems,
        );
    }
}

/// `address`, with an unspecified IP (`0.0.0.0`, `::`) as loopback: where
/// a service in the same host reaches a listener bound to every address.
fn loopback_if_unspecified(mut address: SocketAddr) -> SocketAddr {
    if address.ip().is_unspecified() {
        address.set_ip(if address.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        });
    }
    address
}

impl EngineSection {
    /// The engine's resolved configuration (validated before): the SQLite
    /// file, when no database URL is set, lives under `data_dir`; an empty
    /// `public_url` becomes `http://` and `gateway_listen`.
    pub fn resolve(
        &self,
        data_dir: &Path,
        internal_credential: &str,
        gateway_listen: SocketAddr,
    ) -> Config {
        Config {
            database_url: database_url_or_sqlite(&self.database_url, data_dir, "engine.db"),
            region: "RegionOne".to_owned(),
            internal_credential: internal_credential.to_owned(),
            request_timeout: Duration::from_millis(self.request_timeout_ms),
            stack_lease_ttl: Duration::from_millis(self.stack_lease_ttl_ms),
            stack_action_timeout: Duration::from_secs(self.stack_action_timeout_s),
            cluster_action_lease: Duration::from_millis(self.cluster_action_lease_ms),
            cluster_max_queued_actions: usize::try_from(self.cluster_max_queued_actions)
                .unwrap_or(usize::MAX),
            quotas: self.quotas.limits(),
            retention: self.retention.settings(),
            plugin_registry_url: self.plugin_registry_url.clone(),
            lifecycle_hook_url: self.lifecycle_hook_url.clone(),
            identity_url: if self.identity_url.is_empty() {
                format!("http://{}", loopback_if_unspecified(gateway_listen))
            } else {
                self.identity_url.clone()
            },
            lifecycle_hook_min_timeout_secs: u32::try_from(self.lifecycle_hook_min_timeout_s)
                .unwrap_or(crate::domain::cluster::policy::MIN_HOOK_TIMEOUT_SECS),
            plugin_registry_unavailable: if self.plugin_registry_unavailable == "allow" {
                RegistryUnavailable::Allow
            } else {
                RegistryUnavailable::Fail
            },
            compute: self.compute.resolve(),
            openstack: (self.compute.driver == "openstack").then(|| self.openstack.resolve()),
            public_url: if self.public_url.is_empty() {
                format!("http://{gateway_listen}")
            } else {
                self.public_url.clone()
            },
            in_process: None,
            peers: ember_runtime::in_process::Peers::default(),
            webhook_targets: ember_runtime::egress::EgressRules::default(),
        }
    }
}

/// `[engine.retention]`: how many days deleted stacks (with their
/// resources, events, snapshots …), deleted instances (with their events)
/// cluster history (actions that ended, events) and the audit trail (lock,
/// unlock, refusal, expiry, break-glass records) are kept before the
/// engine purges them; 0 = forever. `interval_s`: how often it looks.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionSection {
    pub deleted_stacks_days: u64,
    pub deleted_instances_days: u64,
    pub cluster_history_days: u64,
    pub audit_days: u64,
    /// A live stack's newest events kept (Heat's `max_events_per_stack`);
    /// 0 = every one.
    pub events_per_stack: u64,
    pub interval_s: u64,
}

impl Default for RetentionSection {
    fn default() -> Self {
        let days = |age: Option<Duration>| age.map_or(0, |age| age.as_secs() / (24 * 3600));
        let settings = crate::retention::RetentionSettings::default();
        RetentionSection {
            deleted_stacks_days: days(settings.deleted_stacks),
            deleted_instances_days: days(settings.deleted_instances),
            cluster_history_days: days(settings.cluster_history),
            audit_days: days(settings.audit),
            events_per_stack: settings.events_per_stack.unwrap_or(0),
            interval_s: settings.interval.as_secs(),
        }
    }
}

impl RetentionSection {
    fn settings(&self) -> crate::retention::RetentionSettings {
        let kept =
            |days: u64| (days > 0).then(|| Duration::from_secs(days.saturating_mul(24 * 3600)));
        crate::retention::RetentionSettings {
            deleted_stacks: kept(self.deleted_stacks_days),
            deleted_instances: kept(self.deleted_instances_days),
            cluster_history: kept(self.cluster_history_days),
            audit: kept(self.audit_days),
            events_per_stack: (self.events_per_stack > 0).then_some(self.events_per_stack),
            interval: Duration::from_secs(self.interval_s.max(1)),
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
    pub software_configs: u64,
    pub software_deployments: u64,
    pub snapshots_per_stack: u64,
}

impl Default for QuotaSection {
    fn default() -> Self {
        let limits = QuotaLimits::default();
        QuotaSection {
            stacks: limits.stacks,
            resources_per_stack: limits.resources_per_stack,
            nested_depth: limits.nested_depth,
            clusters: limits.clusters,
            nodes_per_cluster: limits.nodes_per_cluster,
            nodes: limits.nodes,
            instances: limits.instances,
            concurrent_operations: limits.concurrent_operations,
            software_configs: limits.software_configs,
            software_deployments: limits.software_deployments,
            snapshots_per_stack: limits.snapshots_per_stack,
        }
    }
}

impl QuotaSection {
    fn limits(&self) -> QuotaLimits {
        QuotaLimits {
            stacks: self.stacks,
            resources_per_stack: self.resources_per_stack,
            nested_depth: self.nested_depth,
            clusters: self.clusters,
            nodes_per_cluster: self.nodes_per_cluster,
            nodes: self.nodes,
            instances: self.instances,
            concurrent_operations: self.concurrent_operations,
            software_configs: self.software_configs,
            software_deployments: self.software_deployments,
            snapshots_per_stack: self.snapshots_per_stack,
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
        let simulated = SimulatedComputeConfig::default();
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
            resync_ms: millis(DEFAULT_RESYNC_INTERVAL),
            flavors: BTreeMap::new(),
        }
    }
}

impl Validate for ComputeSection {
    fn validate(&self, problems: &mut Vec<String>) {
        match self.driver.as_str() {
            "simulated" | "openstack" => {}
            "docker" => {
                if let Err(problem) = self.docker().validate() {
                    problems.push(problem);
                }
            }
            other => problems.push(format!(
                "engine.compute.driver: {other:?} is not a compute driver: use \"simulated\", \"docker\" or \"openstack\""
            )),
        }
        if PullPolicy::parse(&self.pull).is_none() {
            problems.push(format!(
                "engine.compute.pull: {:?} must be \"never\" or \"missing\"",
                self.pull
            ));
        }
        if let Err(problem) = validate_failure_pattern(&self.fail_builds_matching) {
            problems.push(problem);
        }
        if let Err(problem) = FlavorTable::validate(&self.flavor_table()) {
            problems.push(problem);
        }
        check_more_than_zero("engine.compute.resync_ms", self.resync_ms, problems);
        check_more_than_zero(
            "engine.compute.api_timeout_secs",
            self.api_timeout_secs,
            problems,
        );
    }
}

impl ComputeSection {
    /// The engine's compute configuration (validated before).
    pub fn resolve(&self) -> ComputeConfig {
        let docker = self.driver == "docker";
        let flavors = match (self.flavors.is_empty(), docker) {
            (false, _) => FlavorTable::new(self.flavor_table()),
            (true, true) => FlavorTable::nova_defaults(),
            (true, false) => FlavorTable::accepting_any(),
        };
        ComputeConfig {
            driver: if self.driver == "openstack" {
                DriverConfig::OpenStack
            } else if docker {
                DriverConfig::Docker(self.docker())
            } else {
                DriverConfig::Simulated(SimulatedComputeConfig {
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

    fn flavor_table(&self) -> BTreeMap<String, Flavor> {
        self.flavors
            .iter()
            .map(|(name, flavor)| {
                (
                    name.clone(),
                    Flavor {
                        vcpus: flavor.vcpus,
                        memory_mb: flavor.memory_mb,
                    },
                )
            })
            .collect()
    }

    fn docker(&self) -> DockerComputeConfig {
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
}

/// `[engine.openstack]`: the cloud the openstack backend drives
/// (`engine.compute.driver = "openstack"`), reached through its Keystone
/// catalog, and Ember's service user there — the trustee of the trusts
/// Ember acts for users through (give it the `admin` and `service` roles in
/// its project, as Heat's service user has).
///
/// ```toml
/// [engine.openstack]
/// auth_url = "https://keystone.example.com:5000/v3"
/// user = "ember"
/// password = "…"                    # EMBER_ENGINE__OPENSTACK__PASSWORD
/// project = "service"
/// region = "RegionOne"
/// interface = "internal"
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OpenStackSection {
    /// Keystone's URL, with or without `/v3`.
    pub auth_url: String,
    pub user: String,
    pub password: String,
    pub user_domain: String,
    pub project: String,
    pub project_domain: String,
    /// The region whose endpoints are used; empty = the first offered.
    pub region: String,
    /// `public` (default), `internal` or `admin`.
    pub interface: String,
    /// Extra CA certificates (PEM) for https:// endpoints.
    pub ca_file: String,
    /// The longest one call to a service may take.
    pub timeout_ms: u64,
}

impl Default for OpenStackSection {
    fn default() -> Self {
        OpenStackSection {
            auth_url: String::new(),
            user: "ember".to_owned(),
            password: String::new(),
            user_domain: "Default".to_owned(),
            project: "service".to_owned(),
            project_domain: "Default".to_owned(),
            region: String::new(),
            interface: "public".to_owned(),
            ca_file: String::new(),
            timeout_ms: 60_000,
        }
    }
}

/// Checked only when the backend is openstack.
impl Validate for OpenStackSection {
    fn validate(&self, problems: &mut Vec<String>) {
        if !(self.auth_url.starts_with("http://") || self.auth_url.starts_with("https://")) {
            problems.push(format!(
                "engine.openstack.auth_url: {:?} must be Keystone's http:// or https:// URL (engine.compute.driver is openstack)",
                self.auth_url
            ));
        }
        if self.password.is_empty() {
            problems.push(
                "engine.openstack.password: Ember's service user's password is required (engine.compute.driver is openstack; EMBER_ENGINE__OPENSTACK__PASSWORD)"
                    .to_owned(),
            );
        }
        for (key, value) in [
            ("engine.openstack.user", &self.user),
            ("engine.openstack.user_domain", &self.user_domain),
            ("engine.openstack.project", &self.project),
            ("engine.openstack.project_domain", &self.project_domain),
        ] {
            if value.is_empty() {
                problems.push(format!(
                    "{key}: must not be empty (engine.compute.driver is openstack)"
                ));
            }
        }
        if ember_openstack::Interface::parse(&self.interface).is_none() {
            problems.push(format!(
                "engine.openstack.interface: {:?} must be public, internal or admin",
                self.interface
            ));
        }
        if !self.ca_file.is_empty() && std::fs::metadata(&self.ca_file).is_err() {
            problems.push(format!(
                "engine.openstack.ca_file: {:?} is not a readable file",
                self.ca_file
            ));
        }
        check_more_than_zero("engine.openstack.timeout_ms", self.timeout_ms, problems);
    }
}

impl OpenStackSection {
    fn resolve(&self) -> crate::cloud::OpenStackConfig {
        crate::cloud::OpenStackConfig {
            cloud: ember_openstack::CloudConfig {
                auth_url: self.auth_url.clone(),
                region: (!self.region.is_empty()).then(|| self.region.clone()),
                interface: ember_openstack::Interface::parse(&self.interface).unwrap_or_default(),
                ca_file: self.ca_file.clone(),
                timeout: Duration::from_millis(self.timeout_ms),
            },
            account: crate::cloud::ServiceAccount {
                user: self.user.clone(),
                password: self.password.clone(),
                user_domain: self.user_domain.clone(),
                project: self.project.clone(),
                project_domain: self.project_domain.clone(),
            },
        }
    }
}

/// What the engine runs with, resolved from [`EngineSection`].
#[derive(Debug, Clone)]
pub struct Config {
    /// `sqlite://…` or `postgres://…`; migrated at start-up.
    pub database_url: String,
    /// The region Ember's Keystone catalog puts its endpoints in (the
    /// gateway's `region`): an `OS::Heat::Stack` whose `context` names it
    /// is a stack of this Ember's.
    pub region: String,
    /// The secret other Ember services present (see `ember_runtime::identity`).
    pub internal_credential: String,
    /// Deadline for one call when the client sets none.
    pub request_timeout: Duration,
    /// How long a stack lease lives without its heartbeat.
    pub stack_lease_ttl: Duration,
    /// How long an operation runs on a stack without `timeout_mins`.
    pub stack_action_timeout: Duration,
    /// How long a claimed cluster action stays an engine's without renewal.
    pub cluster_action_lease: Duration,
    /// How many actions may run or wait on one cluster.
    pub cluster_max_queued_actions: usize,
    /// Every project's quotas unless an admin set others for it.
    pub quotas: QuotaLimits,
    /// What retention keeps.
    pub retention: crate::retention::RetentionSettings,
    /// gRPC URL of the plugin-registry whose runner calls lifecycle plugins
    /// around stack operations; empty = no plugins.
    pub plugin_registry_url: String,
    /// gRPC URL of lifecycle-hook, handed the pending lifecycle actions of
    /// scale-ins under a deletion policy with hooks; empty = such removals
    /// wait until one is configured.
    pub lifecycle_hook_url: String,
    /// gRPC URL of the gateway whose built-in identity the `OS::Keystone::*`
    /// types manage (without the openstack backend).
    pub identity_url: String,
    /// The shortest hook timeout a new deletion policy may have.
    pub lifecycle_hook_min_timeout_secs: u32,
    /// What to do when the plugin-registry cannot be reached.
    pub plugin_registry_unavailable: RegistryUnavailable,
    /// The compute driver behind instances (simulated, docker or
    /// openstack), the flavor table, and how often machines are resynced.
    pub compute: ComputeConfig,
    /// The cloud, when the backend is openstack.
    pub openstack: Option<crate::cloud::OpenStackConfig>,
    /// The gateway's URL as users reach it, for the URLs the engine hands
    /// out (wait condition signal URLs).
    pub public_url: String,
    /// Calls from services in the same process (`ember dev`), served
    /// beside the TCP listener.
    pub in_process: Option<ember_runtime::in_process::InProcessListener>,
    /// The plugin registry and lifecycle-hook when they run in the same
    /// process: called directly instead of at their URLs.
    pub peers: ember_runtime::in_process::Peers,
    /// Where a lifecycle hook's webhook may point, checked when its policy
    /// is made (the `[webhook_targets]` section; the strict default
    /// refuses internal and private addresses).
    pub webhook_targets: ember_runtime::egress::EgressRules,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems_of(section: &EngineSection) -> String {
        let mut problems = Vec::new();
        section.validate(&mut problems);
        problems.join("\n")
    }

    #[test]
    fn defaults_are_valid() {
        assert_eq!(problems_of(&EngineSection::default()), "");
    }

    #[test]
    fn bad_urls_and_timeouts_are_reported_by_key() {
        let section = EngineSection {
            lifecycle_hook_url: "lifecycle-hook:50053".into(),
            database_url: "mysql://x".into(),
            stack_lease_ttl_ms: 0,
            ..EngineSection::default()
        };
        let text = problems_of(&section);
        for key in [
            "engine.lifecycle_hook_url: \"lifecycle-hook:50053\" must be an http:// or https:// URL (several are separated by commas)",
            "engine.database_url: \"mysql://x\" is not a sqlite:// or postgres:// URL",
            "engine.stack_lease_ttl_ms: must be more than 0",
        ] {
            assert!(text.contains(key), "{key} in {text}");
        }
    }

    #[test]
    fn a_bad_compute_driver_or_failure_pattern_is_reported_by_key() {
        let mut section = EngineSection::default();
        section.compute.driver = "ironic".into();
        section.compute.fail_builds_matching = "(".into();
        let text = problems_of(&section);
        assert!(text.contains("engine.compute.driver: \"ironic\""), "{text}");
        assert!(
            text.contains("use \"simulated\", \"docker\" or \"openstack\""),
            "{text}"
        );
        assert!(
            text.contains("engine.compute.fail_builds_matching"),
            "{text}"
        );
    }

    #[test]
    fn the_openstack_backend_needs_its_cloud_and_service_user() {
        let mut section = EngineSection::default();
        section.compute.driver = "openstack".into();
        section.openstack.interface = "private".into();
        let text = problems_of(&section);
        for key in [
            "engine.openstack.auth_url: \"\" must be Keystone's http:// or https:// URL",
            "engine.openstack.password: Ember's service user's password is required",
            "engine.openstack.interface: \"private\" must be public, internal or admin",
        ] {
            assert!(text.contains(key), "{key} in {text}");
        }
        section.openstack.auth_url = "http://keystone:5000/v3".into();
        section.openstack.password = "pw".into();
        section.openstack.interface = "internal".into();
        section.openstack.region = "RegionTwo".into();
        assert_eq!(problems_of(&section), "");
        let resolved = section
            .resolve(
                Path::new("/data"),
                "c",
                SocketAddr::from(([127, 0, 0, 1], 8004)),
            )
            .openstack
            .expect("the cloud is configured");
        assert_eq!(resolved.cloud.region.as_deref(), Some("RegionTwo"));
        assert_eq!(
            resolved.cloud.interface,
            ember_openstack::Interface::Internal
        );
        assert_eq!(resolved.account.user, "ember");
        // Another backend ignores the section.
        assert!(
            EngineSection::default()
                .resolve(
                    Path::new("/data"),
                    "c",
                    SocketAddr::from(([127, 0, 0, 1], 8004))
                )
                .openstack
                .is_none()
        );
    }

    #[test]
    fn bad_docker_settings_are_reported_by_key() {
        let mut section = EngineSection::default();
        section.compute.driver = "docker".into();
        section.compute.docker_host = "ftp://engine".into();
        section.compute.pull = "always".into();
        section.compute.flavors.insert(
            "tiny".into(),
            FlavorSection {
                vcpus: -1.0,
                memory_mb: 0,
            },
        );
        let text = problems_of(&section);
        for key in [
            "engine.compute.docker_host",
            "engine.compute.pull",
            "engine.compute.flavors.tiny.vcpus",
        ] {
            assert!(text.contains(key), "{key} in {text}");
        }
    }

    #[test]
    fn an_empty_public_url_is_the_gateways_listen_address() {
        let gateway_listen = SocketAddr::from(([127, 0, 0, 1], 8004));
        let config = EngineSection::default().resolve(Path::new("/data"), "c", gateway_listen);
        assert_eq!(config.public_url, "http://127.0.0.1:8004");
        assert_eq!(config.database_url, "sqlite:///data/engine.db?mode=rwc");
    }
}
