//! Persistence of the registry: the [`PluginStore`] trait the rest of the
//! crate uses, and its sea-orm implementation for SQLite and PostgreSQL.

mod circuit_entity;
mod entity;
mod generation_entity;
pub mod migrations;
mod sql;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::{BreakerSettings, CircuitRecord, Plugin, PluginUpdate};
use crate::error::Result;

pub use sql::SqlPluginStore;

/// Every write also advances the registry generation in the same
/// transaction, which is how replicas notice each other's changes — a
/// circuit's too, so every replica's next operation sees it open or
/// closed (but not a probe's claim).
#[async_trait]
pub trait PluginStore: Send + Sync + 'static {
    /// Adds a plugin; `Error::Conflict` if the name is taken.
    async fn register_plugin(&self, plugin: &Plugin) -> Result<()>;
    /// Applies `update` (validated by [`Plugin::with_update`]) and returns the
    /// plugin as stored; `Error::NotFound` for an unknown name.
    async fn update_plugin(
        &self,
        name: &str,
        update: &PluginUpdate,
        now: DateTime<Utc>,
    ) -> Result<Plugin>;
    /// Removes a plugin and returns it; `Error::NotFound` for an unknown name.
    async fn deregister_plugin(&self, name: &str) -> Result<Plugin>;
    async fn get_plugin(&self, name: &str) -> Result<Option<Plugin>>;
    /// Every plugin in calling order: ascending ordinal, ties by name.
    async fn list_plugins(&self) -> Result<Vec<Plugin>>;
    /// A counter that changes with every write to the registry, on any
    /// replica: one cheap read to tell whether a cached registry is stale.
    async fn registry_generation(&self) -> Result<i64>;

    /// Counts a call of `name` that failed at `now` with `message` (`probe`:
    /// it was the probe of the half-open circuit) and opens the circuit as
    /// `settings` say ([`CircuitRecord::after_failure`]). Returns the record
    /// as stored; `None` when the plug-in is no longer registered.
    async fn record_failure(
        &self,
        name: &str,
        settings: BreakerSettings,
        now: DateTime<Utc>,
        message: &str,
        probe: bool,
    ) -> Result<Option<CircuitRecord>>;
    /// A call of `name` answered: its failures are forgotten and its
    /// circuit closes.
    async fn record_success(&self, name: &str) -> Result<()>;
    /// Claims the probe of `name`'s half-open circuit until `until`: `true`
    /// for the one caller, on any replica, that gets it. Advances no
    /// generation: the others learn of the probe by failing to claim it.
    async fn claim_probe(
        &self,
        name: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<bool>;
}
