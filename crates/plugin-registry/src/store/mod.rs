//! Persistence of the registry: the [`PluginStore`] trait the rest of the
//! crate uses, and its sea-orm implementation for SQLite and PostgreSQL.

mod entity;
pub mod migrations;
mod sql;

use async_trait::async_trait;

use crate::domain::Plugin;
use crate::error::Result;

pub use sql::SqlPluginStore;

#[async_trait]
pub trait PluginStore: Send + Sync + 'static {
    /// Adds a plugin; `Error::Conflict` if the name is taken.
    async fn register_plugin(&self, plugin: &Plugin) -> Result<()>;
    async fn get_plugin(&self, name: &str) -> Result<Option<Plugin>>;
    /// Every plugin in calling order: ascending ordinal, ties by name.
    async fn list_plugins(&self) -> Result<Vec<Plugin>>;
}
