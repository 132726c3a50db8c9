//! What the engine needs to run, fully resolved by the caller (the `ember`
//! binary layers files, environment and flags into it).

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Config {
    /// `sqlite://…` or `postgres://…`; migrated at start-up.
    pub database_url: String,
    /// The secret other Ember services present (see `ember_runtime::identity`).
    pub internal_credential: String,
    /// Deadline for one call when the client sets none.
    pub request_timeout: Duration,
    /// How long a stack lease lives without its heartbeat.
    pub stack_lease_ttl: Duration,
    /// How long a claimed cluster action stays an engine's without renewal.
    pub cluster_action_lease: Duration,
    /// Every project's quotas unless an admin set others for it.
    pub quotas: crate::domain::quota::QuotaLimits,
    /// gRPC URL of the plugin-registry whose runner calls lifecycle plugins
    /// around stack operations; empty = no plugins.
    pub plugin_registry_url: String,
    /// gRPC URL of lifecycle-hook, handed the pending lifecycle actions of
    /// scale-ins under a deletion policy with hooks; empty = such removals
    /// wait until one is configured.
    pub lifecycle_hook_url: String,
    /// What to do when the plugin-registry cannot be reached.
    pub plugin_registry_unavailable: crate::stacks::RegistryUnavailable,
    /// The compute driver behind instances (simulated or docker), the
    /// flavor table, and how often machines are resynced.
    pub compute: crate::compute::ComputeConfig,
    /// The gateway's URL as users reach it, for the URLs the engine hands
    /// out (wait condition signal URLs).
    pub public_url: String,
}
