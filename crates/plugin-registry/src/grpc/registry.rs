//! Thin handlers of `PluginRegistryService`: check the caller is an admin,
//! convert, call the store, and drop the runner's cache after a write.

use std::sync::Arc;

use ember_proto::pluginregistry::v1 as pb;
use ember_runtime::Identity;
use tonic::{Request, Response, Status};

use super::convert::{new_plugin_from_proto, plugin_to_proto, plugin_update_from_proto};
use crate::error::Error;
use crate::runner::RegistryCache;
use crate::store::PluginStore;

pub struct PluginRegistryHandler {
    store: Arc<dyn PluginStore>,
    cache: Arc<RegistryCache>,
}

impl PluginRegistryHandler {
    pub fn new(store: Arc<dyn PluginStore>, cache: Arc<RegistryCache>) -> Self {
        PluginRegistryHandler { store, cache }
    }
}

/// The registry changes what every stack operation does: admins only.
fn require_admin<T>(request: &Request<T>) -> Result<(), Status> {
    let identity = Identity::of(request)?;
    if identity.is_admin() {
        Ok(())
    } else {
        Err(Error::Forbidden(format!(
            "the plugin registry is admin only: user {:?} has roles [{}]",
            identity.user_id,
            identity.roles.join(", ")
        ))
        .into())
    }
}

#[tonic::async_trait]
impl pb::plugin_registry_service_server::PluginRegistryService for PluginRegistryHandler {
    async fn register_plugin(
        &self,
        request: Request<pb::RegisterPluginRequest>,
    ) -> Result<Response<pb::Plugin>, Status> {
        require_admin(&request)?;
        let plugin =
            new_plugin_from_proto(request.into_inner())?.into_plugin(ember_runtime::time::now())?;
        let stored = self.store.register_plugin(&plugin).await;
        self.cache.invalidate();
        stored?;
        tracing::info!(plugin = %plugin.name, ordinal = plugin.ordinal, "plugin registered");
        Ok(Response::new(plugin_to_proto(&plugin)))
    }

    async fn update_plugin(
        &self,
        request: Request<pb::UpdatePluginRequest>,
    ) -> Result<Response<pb::Plugin>, Status> {
        require_admin(&request)?;
        let request = request.into_inner();
        let name = request.name.clone();
        let update = plugin_update_from_proto(request)?;
        let updated = self
            .store
            .update_plugin(&name, &update, ember_runtime::time::now())
            .await;
        self.cache.invalidate();
        let plugin = updated?;
        tracing::info!(plugin = %plugin.name, ordinal = plugin.ordinal, enabled = plugin.enabled, "plugin updated");
        Ok(Response::new(plugin_to_proto(&plugin)))
    }

    async fn deregister_plugin(
        &self,
        request: Request<pb::DeregisterPluginRequest>,
    ) -> Result<Response<pb::DeregisterPluginResponse>, Status> {
        require_admin(&request)?;
        let name = request.into_inner().name;
        let removed = self.store.deregister_plugin(&name).await;
        self.cache.invalidate();
        let plugin = removed?;
        tracing::info!(plugin = %plugin.name, "plugin deregistered");
        Ok(Response::new(pb::DeregisterPluginResponse {
            plugin: Some(plugin_to_proto(&plugin)),
        }))
    }

    async fn get_plugin(
        &self,
        request: Request<pb::GetPluginRequest>,
    ) -> Result<Response<pb::Plugin>, Status> {
        require_admin(&request)?;
        let name = request.into_inner().name;
        let plugin = self
            .store
            .get_plugin(&name)
            .await?
            .ok_or_else(|| Error::NotFound(format!("no plugin named {name:?}")))?;
        Ok(Response::new(plugin_to_proto(&plugin)))
    }

    async fn list_plugins(
        &self,
        request: Request<pb::ListPluginsRequest>,
    ) -> Result<Response<pb::ListPluginsResponse>, Status> {
        require_admin(&request)?;
        let plugins = self.store.list_plugins().await?;
        Ok(Response::new(pb::ListPluginsResponse {
            plugins: plugins.iter().map(plugin_to_proto).collect(),
        }))
    }
}
