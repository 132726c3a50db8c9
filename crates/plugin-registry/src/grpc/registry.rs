//! Thin handlers of `PluginRegistryService`: enter the [`Registry`] as the
//! caller (admins only), decode the request, call it, encode the plugin.

use std::sync::Arc;

use ember_proto::pluginregistry::v1 as pb;
use ember_runtime::Identity;
use tonic::{Request, Response, Status};

use super::convert::{new_plugin_from_proto, plugin_to_proto, plugin_update_from_proto};
use crate::registry::Registry;

pub struct PluginRegistryHandler {
    registry: Arc<Registry>,
}

impl PluginRegistryHandler {
    pub fn new(registry: Arc<Registry>) -> Self {
        PluginRegistryHandler { registry }
    }
}

#[tonic::async_trait]
impl pb::plugin_registry_service_server::PluginRegistryService for PluginRegistryHandler {
    async fn register_plugin(
        &self,
        request: Request<pb::RegisterPluginRequest>,
    ) -> Result<Response<pb::Plugin>, Status> {
        let registry = self.registry.as_admin(Identity::of(&request)?)?;
        let new_plugin = new_plugin_from_proto(request.into_inner())?;
        let plugin = registry.register(new_plugin).await?;
        Ok(Response::new(plugin_to_proto(&plugin)))
    }

    async fn update_plugin(
        &self,
        request: Request<pb::UpdatePluginRequest>,
    ) -> Result<Response<pb::Plugin>, Status> {
        let registry = self.registry.as_admin(Identity::of(&request)?)?;
        let request = request.into_inner();
        let name = request.name.clone();
        let update = plugin_update_from_proto(request)?;
        let plugin = registry.update(&name, &update).await?;
        Ok(Response::new(plugin_to_proto(&plugin)))
    }

    async fn deregister_plugin(
        &self,
        request: Request<pb::DeregisterPluginRequest>,
    ) -> Result<Response<pb::DeregisterPluginResponse>, Status> {
        let registry = self.registry.as_admin(Identity::of(&request)?)?;
        let plugin = registry.deregister(&request.into_inner().name).await?;
        Ok(Response::new(pb::DeregisterPluginResponse {
            plugin: Some(plugin_to_proto(&plugin)),
        }))
    }

    async fn get_plugin(
        &self,
        request: Request<pb::GetPluginRequest>,
    ) -> Result<Response<pb::Plugin>, Status> {
        let registry = self.registry.as_admin(Identity::of(&request)?)?;
        let plugin = registry.get(&request.into_inner().name).await?;
        Ok(Response::new(plugin_to_proto(&plugin)))
    }

    async fn list_plugins(
        &self,
        request: Request<pb::ListPluginsRequest>,
    ) -> Result<Response<pb::ListPluginsResponse>, Status> {
        let registry = self.registry.as_admin(Identity::of(&request)?)?;
        let plugins = registry.list().await?;
        Ok(Response::new(pb::ListPluginsResponse {
            plugins: plugins.iter().map(plugin_to_proto).collect(),
        }))
    }
}
