//! Nova types besides servers: key pairs and server groups: not written yet.

use super::Cloud;
use crate::resources::ResourceTypeRegistry;

pub fn register(registry: &mut ResourceTypeRegistry, cloud: &Cloud) {
    let _ = (registry, cloud);
}
