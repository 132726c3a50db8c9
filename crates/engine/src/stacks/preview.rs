//! `POST /stacks/preview`: what a create would record — the stack and each
//! resource as it would start (INIT COMPLETE), with the properties it
//! would be given as far as they are known before anything exists (Heat's
//! preview shows the same) — without recording or creating anything.
//! A resource that is a nested stack (a template resource,
//! `OS::Heat::Stack`, a group) is previewed as that stack, recursively, as
//! Heat's preview lists it: its resources in place of it.

use std::collections::BTreeMap;
use std::sync::Arc;

use ember_runtime::Identity;
use serde_json::{Map, Value, json};

use super::context::RuntimeContext;
use super::definition::ParsedStack;
use super::executor::{RunTarget, with_states};
use super::{CreateStack, StackOperations};
use crate::domain::template::{
    ResolvedType, StackIdentity, child_environment, parse_document, resolve,
};
use crate::domain::{ActionStatus, Resource, Stack, StackAction, StackDefinition};
use crate::error::Result;
use crate::resources::{MAX_NESTED_DEPTH, ResourceTypeSchema, validate_properties};
use crate::store::LeaseFence;

/// One stack of a preview: its resources, and the previews of those that
/// are nested stacks, by resource name.
pub struct Preview {
    pub stack_name: String,
    pub resources: Vec<Resource>,
    pub parsed: Arc<ParsedStack>,
    pub nested: BTreeMap<String, Preview>,
}

impl StackOperations {
    /// What a create would record, without recording or creating anything.
    pub fn preview_stack(
        &self,
        identity: &Identity,
        request: &CreateStack,
    ) -> Result<(Stack, Preview)> {
        let (mut stack, definition, parsed) = self.prepare(identity, request)?;
        stack.action = StackAction::Init;
        stack.status = ActionStatus::Complete;
        stack.status_reason = String::new();
        let preview = self.preview_of(&stack, Arc::new(parsed), &definition, 0);
        Ok((stack, preview))
    }

    /// The preview of `stack` parsed as `parsed`, its nested stacks
    /// included down to the nesting limit.
    fn preview_of(
        &self,
        stack: &Stack,
        parsed: Arc<ParsedStack>,
        definition: &StackDefinition,
        depth: u32,
    ) -> Preview {
        // Each resource as it would start: a reference to it is its name
        // (Heat's reference of a resource not made yet), its attributes
        // are not known.
        let rows = parsed
            .enabled
            .iter()
            .map(|name| {
                let mut row = Resource::initial(
                    stack.id,
                    name,
                    &parsed.resource_types[name],
                    stack.created_at,
                );
                row.physical_id = Some(name.clone());
                row
            })
            .collect();
        let target = RunTarget::new(stack, parsed.clone(), rows, LeaseFence::at(stack.id, 0));
        let mut nested = BTreeMap::new();
        let resources = parsed
            .enabled
            .iter()
            .map(|name| {
                let type_name = &parsed.resource_types[name];
                let mut resource = Resource::initial(stack.id, name, type_name, stack.created_at);
                let schema = self
                    .engine
                    .registry
                    .get(type_name)
                    .map(|known| known.schema());
                let properties = self.previewed_properties(&target, name, schema);
                if depth + 1 < MAX_NESTED_DEPTH
                    && let Some(child) =
                        self.nested_definition_of(&parsed, definition, name, type_name, &properties)
                    && let Some(preview) = self.nested_preview(stack, name, &child, depth + 1)
                {
                    nested.insert(name.clone(), preview);
                }
                resource.properties = Value::Object(properties);
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
        Preview {
            stack_name: stack.name.clone(),
            resources,
            parsed,
            nested,
        }
    }

    /// The preview of the nested stack resource `name` of `parent` would
    /// make (named `<parent>-<resource>`, as Heat's preview names it);
    /// `None` when it cannot be parsed before anything exists.
    fn nested_preview(
        &self,
        parent: &Stack,
        name: &str,
        definition: &StackDefinition,
        depth: u32,
    ) -> Option<Preview> {
        let stack = Stack {
            name: format!("{}-{name}", parent.name),
            parent_id: Some(parent.id),
            nested_depth: depth,
            parent_resource: Some(name.to_owned()),
            ..parent.clone()
        };
        let parsed = ParsedStack::build(
            definition,
            StackIdentity {
                stack_name: stack.name.clone(),
                stack_id: stack.id.to_string(),
                project_id: stack.project_id.clone(),
            },
            &self.engine.registry,
        )
        .ok()?;
        Some(self.preview_of(&stack, Arc::new(parsed), definition, depth))
    }

    /// What the nested stack of resource `name` is, when it is one: a
    /// template file (its properties the parameters), `OS::Heat::Stack`
    /// (its `template` and `parameters`), or a group (its members `0`,
    /// `1`, …).
    fn nested_definition_of(
        &self,
        parsed: &ParsedStack,
        definition: &StackDefinition,
        name: &str,
        type_name: &str,
        properties: &Map<String, Value>,
    ) -> Option<StackDefinition> {
        let written = &parsed.template.resources.get(name)?.resource_type;
        let nested = |template: Map<String, Value>, parameters: Map<String, Value>| {
            Some(StackDefinition {
                template: Value::Object(template),
                environment: child_environment(&definition.environment, name),
                files: definition.files.clone(),
                parameters,
            })
        };
        if let Ok(ResolvedType::TemplateResource { file }) =
            parsed.environment.resolve_type(name, written)
        {
            let template = parse_document(definition.files.get(&file)?, "template").ok()?;
            return nested(template, properties.clone());
        }
        if type_name == "OS::Heat::Stack" {
            let template = match properties.get("template")? {
                Value::String(text) => parse_document(text, "template").ok()?,
                Value::Object(template) => template.clone(),
                _ => return None,
            };
            let parameters = properties
                .get("parameters")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            return nested(template, parameters);
        }
        let (count, member) = self
            .engine
            .registry
            .get(type_name)?
            .planned_members(properties)?;
        let members: Map<String, Value> = (0..count.min(MAX_PREVIEWED_MEMBERS))
            .map(|index| (index.to_string(), member.clone()))
            .collect();
        nested(
            Map::from_iter([
                (
                    "heat_template_version".to_owned(),
                    json!(parsed.template.version.to_string()),
                ),
                ("resources".to_owned(), Value::Object(members)),
            ]),
            Map::new(),
        )
    }

    /// A resource's properties before anything exists: functions resolved
    /// where they can be (parameters, literals; a reference to another
    /// resource is its name, an attribute null), the type's defaults
    /// filled in; as written where they cannot be.
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
                registry: &self.engine.registry,
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

/// The most members of one group a preview lists (a group of 10,000 is
/// previewed by its first thousand).
const MAX_PREVIEWED_MEMBERS: u64 = 1000;
