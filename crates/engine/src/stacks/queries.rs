//! Read-side operations: a stack with its outputs and parameters, its
//! resources with who requires them (a nested stack's id shown from the
//! moment it exists, a server's deployments in its metadata), its events,
//! its template and resource type schemas.

use std::collections::BTreeMap;

use ember_runtime::Identity;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::StackOperations;
use super::context::RuntimeContext;
use super::definition::ParsedStack;
use crate::domain::template::{PSEUDO_PARAMETERS, resolve};
use crate::domain::{Event, Resource, Stack, StackDefinition};
use crate::error::{Error, Result};
use crate::resources::ResourceTypeSchema;
use crate::store::{EventListQuery, ResourceFilter, StackListQuery};

/// The description of an output whose template gives none (Heat's).
pub const NO_DESCRIPTION: &str = "No description given";

#[derive(Debug, Clone, PartialEq)]
pub struct OutputValue {
    pub key: String,
    pub description: String,
    /// `Err` holds why the value cannot be resolved now.
    pub value: std::result::Result<Value, String>,
}

#[derive(Debug, Clone)]
pub struct StackDetails {
    pub stack: Stack,
    /// Parameter values for display (hidden ones masked), pseudo included.
    pub parameters: Map<String, Value>,
    pub outputs: Vec<OutputValue>,
    pub template_description: String,
}

#[derive(Debug, Clone)]
pub struct ResourceView {
    pub resource: Resource,
    pub stack_name: String,
    pub required_by: Vec<String>,
    /// For a nested stack resource, its nested stack's name, read with the
    /// stack's other children (empty when there is none).
    pub nested_stack_name: String,
    /// For a resource of a nested stack listed below its parent, the
    /// parent's resource that owns the nested stack.
    pub parent_resource: Option<String>,
}

impl StackOperations {
    pub async fn list_stacks(
        &self,
        identity: &Identity,
        query: &StackListQuery,
    ) -> Result<Vec<Stack>> {
        self.store().list_stacks(&identity.project_id, query).await
    }

    /// The stack with outputs resolved now and parameters for display.
    pub async fn stack_details(&self, stack: Stack) -> Result<StackDetails> {
        if stack.deleted_at.is_some() {
            return Ok(StackDetails {
                stack,
                parameters: Map::new(),
                outputs: Vec::new(),
                template_description: String::new(),
            });
        }
        let parsed = self.parse_recorded(&stack).await?;
        let outputs = self.outputs_of(&stack, &parsed).await?;
        // Heat shows the pseudo parameters with the stack's own.
        let mut parameters = parsed.parameters.display_values();
        for name in PSEUDO_PARAMETERS {
            if let Some(value) = parsed.parameters.value(name) {
                parameters.insert((*name).to_owned(), value);
            }
        }
        Ok(StackDetails {
            template_description: parsed.template.description.clone().unwrap_or_default(),
            parameters,
            outputs,
            stack,
        })
    }

    async fn resource_map(&self, stack_id: Uuid) -> Result<BTreeMap<String, Resource>> {
        Ok(self
            .store()
            .list_resources(stack_id)
            .await?
            .into_iter()
            .map(|resource| (resource.name.clone(), resource))
            .collect())
    }

    fn resolve_outputs(
        &self,
        parsed: &ParsedStack,
        resources: &BTreeMap<String, Resource>,
    ) -> Vec<OutputValue> {
        let context = RuntimeContext {
            parsed,
            resources,
            registry: self.registry(),
        };
        let enabled = parsed
            .template
            .enabled_outputs(&context)
            .unwrap_or_default();
        parsed
            .template
            .outputs
            .iter()
            .filter(|(name, _)| enabled.contains(name))
            .map(|(name, output)| OutputValue {
                key: name.clone(),
                // Heat's words for an output the template does not describe.
                description: output
                    .description
                    .clone()
                    .unwrap_or_else(|| NO_DESCRIPTION.to_owned()),
                // Heat's output_error: the message, not where in the
                // value it arose.
                value: resolve(&output.value, &context, &format!("outputs.{name}.value"))
                    .map_err(|error| error.message),
            })
            .collect()
    }

    pub async fn outputs(&self, stack: &Stack) -> Result<Vec<OutputValue>> {
        let parsed = self.parse_recorded(stack).await?;
        self.outputs_of(stack, &parsed).await
    }

    /// The outputs resolved against the stack's resources as they are now;
    /// a template without outputs reads no resources (a client polling a
    /// stack of 10,000 resources for its status must not load them all).
    async fn outputs_of(&self, stack: &Stack, parsed: &ParsedStack) -> Result<Vec<OutputValue>> {
        if parsed.template.outputs.is_empty() {
            return Ok(Vec::new());
        }
        let resources = self.resource_map(stack.id).await?;
        Ok(self.resolve_outputs(parsed, &resources))
    }

    pub async fn output(&self, stack: &Stack, key: &str) -> Result<OutputValue> {
        self.outputs(stack)
            .await?
            .into_iter()
            .find(|output| output.key == key)
            .ok_or_else(|| Error::NotFound(format!("stack {:?} has no output {key:?}", stack.name)))
    }

    /// Resources of the stack (and of nested stacks down to
    /// `nested_depth`): [`Self::filtered_resources`] unfiltered.
    pub async fn resources(&self, stack: &Stack, nested_depth: u32) -> Result<Vec<ResourceView>> {
        self.filtered_resources(stack, nested_depth, &ResourceFilter::default())
            .await
    }

    /// Resources of the stack (and of nested stacks down to
    /// `nested_depth`), with the names of the resources that require each
    /// and of the nested stacks they own. A stack's children are read once
    /// for all its resources, and only when one of them makes a nested
    /// stack or the list goes deeper. `filter` (Heat's) is applied by the
    /// store; nested stacks are reached whether their owners pass it or not.
    pub async fn filtered_resources(
        &self,
        stack: &Stack,
        nested_depth: u32,
        filter: &ResourceFilter,
    ) -> Result<Vec<ResourceView>> {
        let mut views = Vec::new();
        let mut level = vec![stack.clone()];
        for depth in 0..=nested_depth {
            let mut next = Vec::new();
            for current in &level {
                let graph = self
                    .parse_recorded(current)
                    .await
                    .ok()
                    .map(|parsed| parsed.graph.clone());
                let mut resources = self
                    .store()
                    .list_filtered_resources(current.id, filter)
                    .await?;
                let owns_nested_stacks = resources
                    .iter()
                    .any(|resource| crate::resources::makes_nested_stack(&resource.type_name));
                let children = if owns_nested_stacks || depth < nested_depth {
                    self.store().list_child_stacks(current.id).await?
                } else {
                    Vec::new()
                };
                for resource in &mut resources {
                    // A nested stack's id is its resource's physical id once
                    // the resource is made; while it is being made (or if its
                    // create failed) it is found by its parent, as Heat shows
                    // it from the start.
                    if resource.physical_id.is_none()
                        && crate::resources::makes_nested_stack(&resource.type_name)
                    {
                        resource.physical_id = children
                            .iter()
                            .find(|child| child.parent_resource.as_deref() == Some(&resource.name))
                            .map(|child| child.id.to_string());
                    }
                }
                for resource in resources {
                    let required_by = graph
                        .as_ref()
                        .map(|graph| graph.dependents_of(&resource.name).into_iter().collect())
                        .unwrap_or_default();
                    let nested_stack_name = nested_stack_name(&resource, &children);
                    views.push(ResourceView {
                        resource,
                        stack_name: current.name.clone(),
                        required_by,
                        nested_stack_name,
                        parent_resource: (depth > 0)
                            .then(|| current.parent_resource.clone())
                            .flatten(),
                    });
                }
                if depth < nested_depth {
                    next.extend(children);
                }
            }
            level = next;
        }
        Ok(views)
    }

    pub async fn resource(&self, stack: &Stack, name: &str) -> Result<ResourceView> {
        let by_name = ResourceFilter {
            names: vec![name.to_owned()],
            ..ResourceFilter::default()
        };
        let mut view = self
            .filtered_resources(stack, 0, &by_name)
            .await?
            .into_iter()
            .find(|view| view.resource.name == name)
            .ok_or_else(|| {
                Error::NotFound(format!(
                    "resource {name:?} not found in stack {:?}",
                    stack.name
                ))
            })?;
        // A server's metadata carries its deployments' configs, as Heat
        // keeps them there for the agent's `heat` collector.
        if crate::resources::is_deployment_target(&view.resource.type_name)
            && let (Some(software), Some(server_id)) = (
                self.engine.registry.software(),
                view.resource.physical_id.as_deref(),
            )
        {
            let configs = software
                .project_server_configs(&stack.project_id, server_id)
                .await?;
            let agent_reads_it = crate::resources::agent_reads_deployments(
                &view.resource.type_name,
                &view.resource.properties,
            );
            if !configs.is_empty() || agent_reads_it {
                let deployments: Vec<Value> = configs
                    .into_iter()
                    .map(|config| {
                        serde_json::json!({
                            "id": config.id.to_string(),
                            "name": config.name,
                            "group": config.group,
                            "config": config.config,
                            "inputs": config.inputs,
                            "outputs": config.outputs,
                            "options": config.options,
                            "creation_time": config.created_at.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
                        })
                    })
                    .collect();
                if !view.resource.metadata.is_object() {
                    view.resource.metadata = Value::Object(Map::new());
                }
                if let Some(metadata) = view.resource.metadata.as_object_mut() {
                    metadata.insert("deployments".to_owned(), Value::Array(deployments));
                }
            }
        }
        // A wait condition handle's metadata is the signals it received,
        // by id, as Heat shows it.
        if let (Some(style), Some(conditions), Some(handle_id)) = (
            crate::resources::wait_condition::handle_style(&view.resource.type_name),
            self.engine.registry.wait_conditions(),
            view.resource.physical_id.as_deref(),
        ) {
            let signals = conditions
                .signals()
                .list_wait_signals(view.resource.stack_id, handle_id)
                .await?;
            let (status, reason, data) = match style {
                crate::domain::wait_condition::HandleStyle::Heat => ("status", "reason", "data"),
                crate::domain::wait_condition::HandleStyle::CloudFormation => {
                    ("Status", "Reason", "Data")
                }
            };
            view.resource.metadata = Value::Object(
                signals
                    .into_iter()
                    .map(|signal| {
                        (
                            signal.unique_id,
                            serde_json::json!({
                                status: signal.status.as_str(),
                                reason: signal.reason,
                                data: signal.data,
                            }),
                        )
                    })
                    .collect(),
            );
        }
        Ok(view)
    }

    /// Events of the stack (and nested stacks down to `nested_depth`):
    /// [`Self::filtered_events`] unfiltered.
    pub async fn events(
        &self,
        stack: &Stack,
        resource_name: Option<String>,
        nested_depth: u32,
        page: (u32, Option<Uuid>, bool),
    ) -> Result<(Vec<Event>, BTreeMap<Uuid, String>)> {
        self.filtered_events(
            stack,
            resource_name,
            nested_depth,
            page,
            ResourceFilter::default(),
        )
        .await
    }

    /// Events of the stack (and nested stacks down to `nested_depth`) that
    /// `filter` (Heat's) takes, one page of them.
    pub async fn filtered_events(
        &self,
        stack: &Stack,
        resource_name: Option<String>,
        nested_depth: u32,
        page: (u32, Option<Uuid>, bool),
        filter: ResourceFilter,
    ) -> Result<(Vec<Event>, BTreeMap<Uuid, String>)> {
        let mut stack_names = BTreeMap::from([(stack.id, stack.name.clone())]);
        let mut level = vec![stack.id];
        for _ in 0..nested_depth {
            let mut next = Vec::new();
            for id in &level {
                for child in self.store().list_child_stacks(*id).await? {
                    stack_names.insert(child.id, child.name.clone());
                    next.push(child.id);
                }
            }
            level = next;
        }
        let (limit, marker, descending) = page;
        let query = EventListQuery {
            stack_ids: stack_names.keys().copied().collect(),
            resource_name,
            filter,
            limit,
            marker,
            descending,
        };
        Ok((self.store().list_events(&query).await?, stack_names))
    }

    pub async fn event(&self, stack: &Stack, event_id: Uuid) -> Result<Event> {
        self.store()
            .get_event(stack.id, event_id)
            .await?
            .ok_or_else(|| {
                Error::NotFound(format!(
                    "event {event_id} not found in stack {:?}",
                    stack.name
                ))
            })
    }

    pub async fn definition(&self, stack: &Stack) -> Result<StackDefinition> {
        self.store().load_definition(stack.id).await
    }

    pub fn resource_type_schema(&self, type_name: &str) -> Result<&ResourceTypeSchema> {
        self.registry()
            .get(type_name)
            .map(|resource_type| resource_type.schema())
            .ok_or_else(|| Error::NotFound(format!("resource type {type_name:?} not found")))
    }
}

/// The name of the nested stack `resource` owns, among its stack's
/// `children`; empty for any other resource.
fn nested_stack_name(resource: &Resource, children: &[Stack]) -> String {
    if !crate::resources::makes_nested_stack(&resource.type_name) {
        return String::new();
    }
    resource
        .physical_id
        .as_deref()
        .and_then(|id| children.iter().find(|child| child.id.to_string() == id))
        .map(|child| child.name.clone())
        .unwrap_or_default()
}
