//! Nova types besides servers: key pairs (`OS::Nova::KeyPair`) and server
//! groups (`OS::Nova::ServerGroup`). Neither carries tags or metadata, so
//! each finds what an earlier attempt made its own way (see each module).

mod key_pair;
mod server_group;

use std::sync::Arc;

use ember_openstack::nova::Nova;

use super::{Cloud, failure};
use crate::resources::{ResourceFailure, ResourceTypeRegistry, ResourceTypeSchema};

/// The schemas of the key pair and server group types, with no cloud
/// behind them (the simulated backend's twins share them).
pub fn schemas() -> Vec<ResourceTypeSchema> {
    vec![key_pair::schema(), server_group::schema()]
}

pub fn register(registry: &mut ResourceTypeRegistry, cloud: &Cloud) {
    registry.register(Arc::new(key_pair::KeyPairResource::new(cloud.clone())));
    registry.register(Arc::new(server_group::ServerGroupResource::new(
        cloud.clone(),
    )));
}

/// Nova as the owner of `stack_id`.
async fn nova_for(cloud: &Cloud, stack_id: uuid::Uuid) -> Result<Nova, ResourceFailure> {
    let session = cloud.session(stack_id).await?;
    Nova::connect(&session).await.map_err(failure)
}
