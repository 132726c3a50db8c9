//! The registry as the runner sees it, cached between operations.
//!
//! Every run costs one primary-key read of `registry_generation`, a counter
//! that each registry write advances in its own transaction; the plugin list
//! is re-read only when that counter moved. So a change made on any replica
//! sharing the database applies to the very next operation everywhere, and
//! writes on this replica also drop the cache at once. The generation is
//! read before the list, so a cached list is never older than its tag.

use std::sync::{Arc, RwLock};

use crate::domain::Plugin;
use crate::error::Result;
use crate::store::PluginStore;

struct CachedRegistry {
    generation: i64,
    plugins: Arc<Vec<Plugin>>,
}

pub struct RegistryCache {
    store: Arc<dyn PluginStore>,
    cached: RwLock<Option<CachedRegistry>>,
}

/// The registry at one generation, and whether it was just re-read.
pub struct RegistrySnapshot {
    pub plugins: Arc<Vec<Plugin>>,
    pub reloaded: bool,
}

impl RegistryCache {
    pub fn new(store: Arc<dyn PluginStore>) -> Self {
        RegistryCache {
            store,
            cached: RwLock::new(None),
        }
    }

    /// Every plugin in calling order, as of now.
    pub async fn current(&self) -> Result<RegistrySnapshot> {
        let generation = self.store.registry_generation().await?;
        if let Some(plugins) = self.cached_at(generation) {
            return Ok(RegistrySnapshot {
                plugins,
                reloaded: false,
            });
        }
        let plugins = Arc::new(self.store.list_plugins().await?);
        let mut cached = self
            .cached
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A concurrent reload may have stored a newer generation meanwhile.
        if cached
            .as_ref()
            .is_none_or(|current| current.generation <= generation)
        {
            *cached = Some(CachedRegistry {
                generation,
                plugins: Arc::clone(&plugins),
            });
        }
        Ok(RegistrySnapshot {
            plugins,
            reloaded: true,
        })
    }

    /// The registry's store (the runner records plug-ins' failures there).
    pub fn store(&self) -> &Arc<dyn PluginStore> {
        &self.store
    }

    /// Forgets the cached registry: called after every write on this replica.
    pub fn invalidate(&self) {
        *self
            .cached
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    fn cached_at(&self, generation: i64) -> Option<Arc<Vec<Plugin>>> {
        let cached = self
            .cached
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cached
            .as_ref()
            .filter(|current| current.generation == generation)
            .map(|current| Arc::clone(&current.plugins))
    }
}
