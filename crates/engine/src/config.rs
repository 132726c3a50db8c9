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
    /// gRPC URL of the plugin-registry whose runner calls lifecycle plugins
    /// around stack operations; empty = no plugins.
    pub plugin_registry_url: String,
    /// gRPC URL of lifecycle-hook, handed the pending lifecycle actions of
    /// scale-ins under a deletion policy with hooks; empty = such removals
    /// wait until one is configured.
    pub lifecycle_hook_url: String,
    /// What to do when the plugin-registry cannot be reached.
    pub plugin_registry_unavailable: crate::stacks::RegistryUnavailable,
    /// How the simulated compute driver behaves (latencies, failure
    /// injection).
    pub compute: crate::compute::simulated::SimulatedComputeConfig,
}
