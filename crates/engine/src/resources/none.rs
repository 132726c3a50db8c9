//! `OS::Heat::None`: a placeholder that accepts any properties and creates
//! nothing (Heat uses it to disable resources through the environment).

use async_trait::async_trait;

use super::{ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType, ResourceTypeSchema};

pub struct NoneResource {
    schema: ResourceTypeSchema,
}

impl NoneResource {
    pub fn new() -> Self {
        NoneResource {
            schema: ResourceTypeSchema {
                type_name: "OS::Heat::None",
                description: "A resource that does nothing; it accepts any properties.",
                properties: vec![],
                attributes: vec![],
                accepts_any_properties: true,
                accepts_any_attributes: false,
            },
        }
    }
}

#[async_trait]
impl ResourceType for NoneResource {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    fn acts_outside_its_row(&self) -> bool {
        false
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        Ok(ResourceOutcome {
            physical_id: request.physical_resource_name(),
            ..ResourceOutcome::default()
        })
    }

    /// Property changes never force a replacement: there is nothing to replace.
    fn needs_replacement(
        &self,
        _old: &serde_json::Map<String, serde_json::Value>,
        _new: &serde_json::Map<String, serde_json::Value>,
    ) -> bool {
        false
    }
}
