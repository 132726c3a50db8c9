//! The application layer of `PluginRegistryService`: the registry is admin
//! only ([`Registry::as_admin`] is the one way in), a registration or an
//! update is validated by the domain before the store sees it, and every
//! write drops this replica's runner cache, so the next operation here reads
//! the registry as it now is (other replicas notice by its generation).
//! The handlers (`grpc/registry.rs`) only decode and encode.

use std::sync::Arc;

use ember_runtime::Identity;

use crate::domain::{NewPlugin, Plugin, PluginUpdate};
use crate::error::{Error, Result};
use crate::runner::RegistryCache;
use crate::store::PluginStore;

/// The ordered registry of lifecycle plugins, over the store and the
/// runner's cache of it.
pub struct Registry {
    store: Arc<dyn PluginStore>,
    cache: Arc<RegistryCache>,
}

/// The registry in an admin's hands: only [`Registry::as_admin`] makes one,
/// so no operation on the registry runs for anyone else.
pub struct AdminRegistry<'a> {
    registry: &'a Registry,
}

impl Registry {
    pub fn new(store: Arc<dyn PluginStore>, cache: Arc<RegistryCache>) -> Self {
        Registry { store, cache }
    }

    /// The registry changes what every stack operation does: admins only.
    /// Checked before anything of the request is read, so a caller who may
    /// not use the registry learns nothing else from it.
    pub fn as_admin(&self, caller: &Identity) -> Result<AdminRegistry<'_>> {
        if caller.is_admin() {
            Ok(AdminRegistry { registry: self })
        } else {
            Err(Error::Forbidden(format!(
                "the plugin registry is admin only: user {:?} has roles [{}]",
                caller.user_id,
                caller.roles.join(", ")
            )))
        }
    }
}

impl AdminRegistry<'_> {
    /// Registers `new` (validated into a [`Plugin`] as of now) and returns it.
    pub async fn register(&self, new: NewPlugin) -> Result<Plugin> {
        let plugin = new.into_plugin(ember_runtime::time::now())?;
        let stored = self.registry.store.register_plugin(&plugin).await;
        // Whatever the store answered: a write that failed late may still
        // have changed the registry.
        self.registry.cache.invalidate();
        stored?;
        tracing::info!(plugin = %plugin.name, ordinal = plugin.ordinal, "plugin registered");
        Ok(plugin)
    }

    /// Applies `update` to the plugin `name` and returns it as stored.
    pub async fn update(&self, name: &str, update: &PluginUpdate) -> Result<Plugin> {
        let updated = self
            .registry
            .store
            .update_plugin(name, update, ember_runtime::time::now())
            .await;
        self.registry.cache.invalidate();
        let plugin = updated?;
        tracing::info!(plugin = %plugin.name, ordinal = plugin.ordinal, enabled = plugin.enabled, "plugin updated");
        Ok(plugin)
    }

    /// Removes the plugin `name` and returns it.
    pub async fn deregister(&self, name: &str) -> Result<Plugin> {
        let removed = self.registry.store.deregister_plugin(name).await;
        self.registry.cache.invalidate();
        let plugin = removed?;
        tracing::info!(plugin = %plugin.name, "plugin deregistered");
        Ok(plugin)
    }

    /// The plugin `name`; `Error::NotFound` when none is registered so.
    pub async fn get(&self, name: &str) -> Result<Plugin> {
        self.registry
            .store
            .get_plugin(name)
            .await?
            .ok_or_else(|| Error::NotFound(format!("no plugin named {name:?}")))
    }

    /// Every plugin in calling order.
    pub async fn list(&self) -> Result<Vec<Plugin>> {
        self.registry.store.list_plugins().await
    }
}

#[cfg(test)]
mod tests {
    use ember_runtime::database::connect_and_migrate;
    use ember_runtime::database::testing::TestDatabase;

    use super::*;
    use crate::domain::{FailureMode, Operation};
    use crate::store::SqlPluginStore;
    use crate::store::migrations::Migrator;

    fn admin() -> Identity {
        Identity::new("root", "admin-project", vec!["admin".to_owned()])
    }

    fn new_plugin(name: &str, ordinal: i32) -> NewPlugin {
        NewPlugin {
            name: name.to_owned(),
            endpoint: "http://127.0.0.1:9".to_owned(),
            ordinal,
            operations: vec![Operation::Create],
            project_ids: Vec::new(),
            failure_mode: FailureMode::Fail,
            timeout_ms: None,
            enabled: true,
            enforce: true,
            breaker_failures: None,
            breaker_cooldown_ms: None,
        }
    }

    async fn registry(database: &TestDatabase) -> (Registry, Arc<RegistryCache>) {
        let connection = connect_and_migrate::<Migrator>(&database.url)
            .await
            .expect("migrated");
        let store: Arc<dyn PluginStore> = Arc::new(SqlPluginStore::new(connection));
        let cache = Arc::new(RegistryCache::new(Arc::clone(&store)));
        (Registry::new(store, Arc::clone(&cache)), cache)
    }

    #[tokio::test]
    async fn only_admins_use_the_registry() {
        let database = TestDatabase::sqlite().await;
        let (registry, _) = registry(&database).await;
        let member = Identity::new(
            "alice",
            "project-a",
            vec!["member".to_owned(), "reader".to_owned()],
        );
        match registry.as_admin(&member) {
            Err(Error::Forbidden(message)) => assert_eq!(
                message,
                "the plugin registry is admin only: user \"alice\" has roles [member, reader]"
            ),
            Err(other) => panic!("a member was refused as {other:?}"),
            Ok(_) => panic!("a member was let into the registry"),
        }
        assert!(registry.as_admin(&admin()).is_ok());
    }

    #[tokio::test]
    async fn every_write_drops_the_runners_cached_registry() {
        let database = TestDatabase::sqlite().await;
        let (registry, cache) = registry(&database).await;
        let registry = registry.as_admin(&admin()).expect("an admin");
        let names_and_ordinals = |plugins: &[Plugin]| {
            plugins
                .iter()
                .map(|plugin| (plugin.name.clone(), plugin.ordinal))
                .collect::<Vec<_>>()
        };
        assert!(cache.current().await.expect("read").plugins.is_empty());

        let registered = registry
            .register(new_plugin("audit", 10))
            .await
            .expect("registered");
        assert_eq!(
            (registered.name.as_str(), registered.ordinal),
            ("audit", 10)
        );
        let snapshot = cache.current().await.expect("read");
        assert!(snapshot.reloaded);
        assert_eq!(
            names_and_ordinals(&snapshot.plugins),
            vec![("audit".to_owned(), 10)]
        );

        let update = PluginUpdate {
            ordinal: Some(20),
            ..PluginUpdate::default()
        };
        let updated = registry.update("audit", &update).await.expect("updated");
        assert_eq!(updated.ordinal, 20);
        assert_eq!(
            names_and_ordinals(&cache.current().await.expect("read").plugins),
            vec![("audit".to_owned(), 20)]
        );
        assert_eq!(registry.get("audit").await.expect("found").ordinal, 20);

        // A refused write advances no generation: only the invalidation
        // makes the next read go to the store again.
        assert!(!cache.current().await.expect("read").reloaded);
        assert!(matches!(
            registry.register(new_plugin("audit", 30)).await,
            Err(Error::Conflict(_))
        ));
        assert!(cache.current().await.expect("read").reloaded);

        let removed = registry.deregister("audit").await.expect("deregistered");
        assert_eq!(removed.name, "audit");
        assert!(cache.current().await.expect("read").plugins.is_empty());
        assert!(registry.list().await.expect("listed").is_empty());
        match registry.get("audit").await {
            Err(Error::NotFound(message)) => assert_eq!(message, "no plugin named \"audit\""),
            other => panic!("a deregistered plugin was found: {other:?}"),
        }
    }
}
