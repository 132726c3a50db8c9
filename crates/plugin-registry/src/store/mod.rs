//! Persistence of the registry: the [`PluginStore`] trait the rest of the
//! crate uses, and its sea-orm implementation for SQLite and PostgreSQL.

mod entity;
mod generation_entity;
pub mod migrations;
mod sql;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::{Plugin, PluginUpdate};
use crate::error::Result;

pub use sql::SqlPluginStore;

/// Every write also advances the registry generation in the same
/// transaction, which is how replicas notice each other's changes.
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
}
