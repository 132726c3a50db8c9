//! Resolving intrinsic functions against a running stack: parameters,
//! conditions and files from the parsed stack, `get_resource` and
//! `get_attr` from the resources as they stand now.

use std::collections::BTreeMap;

use serde_json::Value;

use super::definition::ParsedStack;
use crate::domain::template::{ResolveContext, TemplateVersion, select_attribute_path};
use crate::domain::{ActionStatus, Resource};
use crate::resources::ResourceTypeRegistry;

/// One stack's parsed definition and resources as they stand, borrowed to
/// resolve its intrinsic functions; not [`StackEngine`](super::executor::StackEngine),
/// the engine's store, leases and settings that every run shares.
pub struct RuntimeContext<'a> {
    pub parsed: &'a ParsedStack,
    pub resources: &'a BTreeMap<String, Resource>,
    pub registry: &'a ResourceTypeRegistry,
}

impl RuntimeContext<'_> {
    fn resource(&self, name: &str) -> Result<&Resource, String> {
        if !self.parsed.enabled.iter().any(|enabled| enabled == name) {
            return Err(format!(
                "the resource {name:?} is not part of this stack (its condition is false or it does not exist)"
            ));
        }
        self.resources
            .get(name)
            .ok_or_else(|| format!("the resource {name:?} has no state yet"))
    }
}

impl ResolveContext for RuntimeContext<'_> {
    fn parameter(&self, name: &str) -> Option<Value> {
        self.parsed.parameters.value(name)
    }

    fn resource_reference(&self, name: &str) -> Result<Value, String> {
        let resource = self.resource(name)?;
        match self.registry.get(&resource.type_name) {
            Some(resource_type) => Ok(resource_type.reference(resource)),
            None => Ok(resource
                .physical_id
                .clone()
                .map_or(Value::Null, Value::String)),
        }
    }

    fn resource_attribute(
        &self,
        name: &str,
        attribute: &str,
        path: &[Value],
    ) -> Result<Value, String> {
        let resource = self.resource(name)?;
        if let Some(resource_type) = self.registry.get(&resource.type_name)
            && !resource_type.schema().has_attribute(attribute)
        {
            return Err(format!(
                "the resource {name:?} ({}) has no attribute {attribute:?}",
                resource.type_name
            ));
        }
        // A nested stack's output that cannot be resolved: Heat's
        // TemplateOutputError.
        if let Some(Value::String(error)) = resource
            .data
            .get(crate::resources::OUTPUT_ERRORS)
            .and_then(|errors| errors.get(attribute))
        {
            return Err(format!("Error in {name} output {attribute}: {error}"));
        }
        let value = if attribute == "show" {
            resource.attributes.clone()
        } else {
            resource
                .attributes
                .get(attribute)
                .cloned()
                .unwrap_or(Value::Null)
        };
        Ok(select_attribute_path(&value, path))
    }

    fn file(&self, name: &str) -> Option<String> {
        self.parsed.files.get(name).cloned()
    }

    fn condition(&self, name: &str) -> Option<bool> {
        self.parsed.conditions.get(name).copied()
    }

    fn template_version(&self) -> TemplateVersion {
        self.parsed.template.version
    }

    fn resource_attributes(&self, name: &str) -> Result<Value, String> {
        Ok(self.resource(name)?.attributes.clone())
    }
}

/// Whether a resource finished an action successfully and can be used by
/// its dependents.
pub fn usable(resource: &Resource) -> bool {
    resource.status == ActionStatus::Complete
}
