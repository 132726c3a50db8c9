//! `POST /stacks/preview`: what a create would record — the stack and each
//! resource as it would start (INIT COMPLETE), with the properties it
//! would be given as far as they are known before anything exists (Heat's
//! preview shows the same) — without recording or creating anything.

use std::sync::Arc;

use ember_runtime::Identity;
use serde_json::{Map, Value};

use super::context::RuntimeContext;
use super::definition::ParsedStack;
use super::executor::{RunTarget, with_states};
use super::{CreateStack, StackOperations};
use crate::domain::template::resolve;
use crate::domain::{ActionStatus, Resource, Stack, StackAction};
use crate::error::Result;
use crate::resources::{ResourceTypeSchema, validate_properties};
use crate::store::LeaseFence;

impl StackOperations {
    /// What a create would record, without recording or creating anything.
    pub fn preview_stack(
        &self,
        identity: &Identity,
        request: &CreateStack,
    ) -> Result<(Stack, Vec<Resource>, Arc<ParsedStack>)> {
        let (mut stack, _definition, parsed) = self.prepare(identity, request)?;
        stack.action = StackAction::Init;
        stack.status = ActionStatus::Complete;
        stack.status_reason = String::new();
        let parsed = Arc::new(parsed);
        let target = RunTarget::new(
            &stack,
            parsed.clone(),
            Vec::new(),
            LeaseFence::at(stack.id, 0),
        );
        let resources = parsed
            .enabled
            .iter()
            .map(|name| {
                let type_name = &parsed.resource_types[name];
                let mut resource = Resource::initial(stack.id, name, type_name, stack.created_at);
                let schema = self
                    .shared
                    .registry
                    .get(type_name)
                    .map(|known| known.schema());
                resource.properties =
                    Value::Object(self.previewed_properties(&target, name, schema));
                // Heat's preview names each attribute, none known yet.
                if let Some(schema) = schema {
                    resource.attributes = Value::Object(
                        schema
                            .attributes
                            .iter()
                            .map(|attribute| (attribute.name.to_owned(), Value::Null))
                            .collect(),
                    );
                }
                resource
            })
            .collect();
        Ok((stack, resources, parsed))
    }

    /// A resource's properties before anything exists: functions resolved
    /// where they can be (parameters, literals; a reference to another
    /// resource is null), the type's defaults filled in; as written where
    /// they cannot be.
    fn previewed_properties(
        &self,
        target: &RunTarget,
        name: &str,
        schema: Option<&ResourceTypeSchema>,
    ) -> Map<String, Value> {
        let Some(definition) = target.parsed.template.resources.get(name) else {
            return Map::new();
        };
        let path = format!("resources.{name}.properties");
        let resolved = with_states(&target.resources, |states| {
            let context = RuntimeContext {
                parsed: &target.parsed,
                resources: states,
                registry: &self.shared.registry,
            };
            resolve(&definition.properties, &context, &path)
        });
        let properties = match resolved {
            Ok(Value::Object(properties)) => properties,
            _ => definition
                .properties
                .as_object()
                .cloned()
                .unwrap_or_default(),
        };
        match schema {
            Some(schema) => validate_properties(schema, &Value::Object(properties.clone()), &path)
                .unwrap_or(properties),
            None => properties,
        }
    }
}
