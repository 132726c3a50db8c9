//! The plugin-registry's configuration: the `[plugin_registry]` section of
//! Ember's configuration file, its defaults and validation, and the
//! [`Config`] the service runs with, resolved from it. The `ember` binary
//! loads the file and hands the section here.
//!
//! ```toml
//! [plugin_registry]
//! listen = "0.0.0.0:50054"
//! database_url = "postgres://ember@db/plugin_registry"
//! ```

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use ember_runtime::config::{
    Validate, check_database_url, check_more_than_zero, database_url_or_sqlite,
};
use serde::{Deserialize, Serialize};

/// `[plugin_registry]`: where the service listens and keeps its state.
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

impl Validate for PluginRegistrySection {
    fn validate(&self, problems: &mut Vec<String>) {
        check_database_url("plugin_registry.database_url", &self.database_url, problems);
        check_more_than_zero(
            "plugin_registry.request_timeout_ms",
            self.request_timeout_ms,
            problems,
        );
    }
}

impl PluginRegistrySection {
    /// The service's resolved configuration (validated before): the SQLite
    /// file, when no database URL is set, lives under `data_dir`.
    pub fn resolve(&self, data_dir: &Path, internal_credential: &str) -> Config {
        Config {
            database_url: database_url_or_sqlite(
                &self.database_url,
                data_dir,
                "plugin-registry.db",
            ),
            internal_credential: internal_credential.to_owned(),
            request_timeout: Duration::from_millis(self.request_timeout_ms),
            in_process: None,
        }
    }
}

/// What the plugin-registry runs with, resolved from [`PluginRegistrySection`].
#[derive(Debug, Clone)]
pub struct Config {
    /// `sqlite://…` or `postgres://…`; migrated at start-up.
    pub database_url: String,
    /// The secret other Ember services present (see `ember_runtime::identity`).
    pub internal_credential: String,
    /// Deadline for one call when the client sets none.
    pub request_timeout: Duration,
    /// Calls from services in the same process (`ember dev`), served
    /// beside the TCP listener.
    pub in_process: Option<ember_runtime::in_process::InProcessListener>,
}
