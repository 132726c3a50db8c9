//! Glance types: `OS::Glance::WebImage`, an image Glance fills itself from
//! a URL (the `web-download` import). Heat's `OS::Glance::Image` (the v1
//! API's images by location) is hidden in Heat and not offered.

mod image_spec;
mod import;
mod web_image;

use std::sync::Arc;

use super::Cloud;
use crate::resources::{ResourceTypeRegistry, ResourceTypeSchema};

/// The schema of `OS::Glance::WebImage`, with no cloud behind it (the
/// simulated backend's twin shares it).
pub fn schemas() -> Vec<ResourceTypeSchema> {
    vec![image_spec::schema()]
}

pub fn register(registry: &mut ResourceTypeRegistry, cloud: &Cloud) {
    registry.register(Arc::new(web_image::WebImageResource::new(cloud.clone())));
}
