//! Nested stacks as resources: `OS::Heat::Stack` (a template given as a
//! property) and template resources (a resource whose type is a template
//! file, or an environment alias of one; its properties are the nested
//! template's parameters and its attributes the nested stack's outputs).
//! Both are real stacks with a parent; the engine runs them through the
//! [`NestedStackHost`] it installs when it starts. A nested output that
//! cannot be resolved is kept in the resource's data, and a `get_attr` of
//! it is that error (Heat's TemplateOutputError).
//!
//! Every resource whose work is one nested stack — these two and every
//! group (`group_members.rs`) — is a [`NestedStackWork`] registered as a
//! [`NestedStackType`], which deletes, checks, suspends, resumes and locks
//! that stack the same way for all of them.

use std::sync::{Arc, OnceLock, Weak};

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::group_members::{act, delete, host, lock, nested_id};
use super::{
    AttributeSchema, LockChange, LockRequest, PropertySchema, PropertyType, ResourceFailure,
    ResourceOutcome, ResourceRequest, ResourceType, ResourceTypeSchema,
};
use crate::domain::template::parse_document;
use crate::domain::{Resource, StackWideAction};

/// How deep stacks may nest (Heat's max_nested_stack_depth).
pub const MAX_NESTED_DEPTH: u32 = 5;

/// What a nested stack's id is derived for: the nested stack of a
/// resource row has the id [`ResourceRequest::derived_id`] gives for it,
/// so a step taken over after its engine went away finds it.
pub const NESTED_STACK_KIND: &str = "nested stack";

/// What a nested stack is built from.
#[derive(Debug, Clone)]
pub enum NestedTemplate {
    /// A template given inline (OS::Heat::Stack).
    Inline(Value),
    /// A template file among the parent's files (template resources).
    File(String),
}

#[derive(Debug, Clone)]
pub struct NestedDefinition {
    pub template: NestedTemplate,
    pub parameters: Map<String, Value>,
}

#[derive(Debug, Clone)]
pub struct NestedStackOutcome {
    pub stack_id: Uuid,
    pub stack_name: String,
    pub outputs: Map<String, Value>,
    /// Why each output that cannot be resolved cannot (Heat's
    /// `output_error`), by key: a `get_attr` of it is that error.
    pub output_errors: Map<String, Value>,
}

/// Where a nested-stack resource keeps its nested stack's output errors,
/// in its private data.
pub const OUTPUT_ERRORS: &str = "output_errors";

/// The data of a resource whose nested stack has `output_errors`.
fn output_error_data(output_errors: Map<String, Value>) -> Value {
    if output_errors.is_empty() {
        Value::Null
    } else {
        Value::Object(Map::from_iter([(
            OUTPUT_ERRORS.to_owned(),
            Value::Object(output_errors),
        )]))
    }
}

/// Stack operations for nested stacks; each call returns once the nested
/// stack's operation has finished. The host finds what an earlier attempt
/// of the same resource row made: a create whose nested stack exists
/// (its id is [`NESTED_STACK_KIND`]'s derived id) continues that one's
/// operation instead of making another, and an update, delete, suspend,
/// resume or check first ends an operation an engine that went away left
/// on it.
#[async_trait]
pub trait NestedStackHost: Send + Sync {
    async fn create_nested_stack(
        &self,
        owner: &ResourceRequest,
        definition: NestedDefinition,
    ) -> Result<NestedStackOutcome, ResourceFailure>;
    async fn update_nested_stack(
        &self,
        owner: &ResourceRequest,
        stack_id: Uuid,
        definition: NestedDefinition,
    ) -> Result<NestedStackOutcome, ResourceFailure>;
    async fn delete_nested_stack(&self, stack_id: Uuid) -> Result<(), ResourceFailure>;
    /// Locks or unlocks the nested stack with its parent (same level, same
    /// caller); returns once done.
    async fn lock_nested_stack(
        &self,
        stack_id: Uuid,
        request: &super::LockRequest,
        change: super::LockChange,
    ) -> Result<(), ResourceFailure>;
    /// Suspend, resume or check. Safe to
    /// run again for a step another engine had in flight: the nested
    /// stack's operation that engine began is continued, not started a
    /// second time, and a nested stack suspended (resumed) already is the
    /// suspend (resume) done.
    async fn act_on_nested_stack(
        &self,
        stack_id: Uuid,
        action: StackWideAction,
    ) -> Result<(), ResourceFailure>;
    /// The current resources of a nested stack (one row per name), for
    /// scaling groups that choose members by state and age.
    async fn nested_resources(&self, stack_id: Uuid) -> Result<Vec<Resource>, ResourceFailure> {
        let _ = stack_id;
        Err(ResourceFailure::new(
            "this engine cannot list nested stack resources".to_owned(),
        ))
    }
}

/// Where the engine installs itself once it exists (it owns the registry
/// that owns these types, hence a weak, late-bound reference).
pub type NestedStackHostSlot = Arc<OnceLock<Weak<dyn NestedStackHost>>>;

/// What differs between the kinds of nested-stack resources: the schema,
/// how a request becomes the nested stack's definition, and which
/// attributes the nested stack's outcome gives. Everything else — every
/// action is the nested stack's own — is [`NestedStackResource`]'s and
/// [`NestedStackType`]'s.
pub trait NestedStackKind: Send + Sync + 'static {
    fn schema(&self) -> &ResourceTypeSchema;
    fn definition(&self, request: &ResourceRequest) -> Result<NestedDefinition, ResourceFailure>;
    fn outcome(&self, nested: NestedStackOutcome) -> ResourceOutcome;
}

/// A resource that is a nested stack, of kind `K`.
pub struct NestedStackResource<K> {
    kind: K,
    host: NestedStackHostSlot,
}

/// `OS::Heat::Stack`: the template is a property.
pub type StackResource = NestedStackResource<InlineTemplate>;
/// A template resource: the type is a template file.
pub type TemplateResource = NestedStackResource<TemplateFile>;

pub struct InlineTemplate {
    schema: ResourceTypeSchema,
}

pub struct TemplateFile {
    schema: ResourceTypeSchema,
}

impl StackResource {
    pub fn new(host: NestedStackHostSlot) -> Self {
        NestedStackResource {
            kind: InlineTemplate {
                schema: ResourceTypeSchema {
                    type_name: "OS::Heat::Stack",
                    description: "A nested stack from a template given as a property.",
                    properties: vec![
                        PropertySchema::new(
                            "template",
                            PropertyType::Any,
                            "The nested template: YAML or JSON text, or a map.",
                        )
                        .required()
                        .update_allowed(),
                        PropertySchema::new(
                            "parameters",
                            PropertyType::Map,
                            "Parameter values for the nested stack.",
                        )
                        .default(json!({}))
                        .update_allowed(),
                        PropertySchema::new(
                            "timeout",
                            PropertyType::Number,
                            "Minutes (accepted for compatibility).",
                        ),
                        PropertySchema::new(
                            "context",
                            PropertyType::Map,
                            "Heat's remote context: `region_name` may name only Ember's own region (the stack is then made here); credential_secret_id, ca_cert and insecure are accepted and unused.",
                        ),
                    ],
                    attributes: vec![
                        AttributeSchema {
                            name: "outputs",
                            description: "The nested stack's outputs as a map.",
                        },
                        AttributeSchema {
                            name: "stack_name",
                            description: "The nested stack's name.",
                        },
                    ],
                    accepts_any_properties: false,
                    accepts_any_attributes: false,
                },
            },
            host,
        }
    }
}

impl TemplateResource {
    pub fn new(host: NestedStackHostSlot) -> Self {
        NestedStackResource {
            kind: TemplateFile {
                schema: ResourceTypeSchema {
                    type_name: "Ember::TemplateResource",
                    description: "A nested stack from a template file; properties are its parameters, attributes its outputs.",
                    properties: vec![],
                    attributes: vec![],
                    accepts_any_properties: true,
                    accepts_any_attributes: true,
                },
            },
            host,
        }
    }
}

impl NestedStackKind for InlineTemplate {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    /// A `context` was checked when the stack was (it names Ember's own
    /// region: see `stacks/remote.rs`): the stack is made here.
    fn definition(&self, request: &ResourceRequest) -> Result<NestedDefinition, ResourceFailure> {
        // The template as text (YAML or JSON), or — Ember accepts it too —
        // written inline as a map.
        let template = match request.properties.get("template") {
            Some(Value::String(text)) => parse_document(text, "template")
                .map_err(|error| ResourceFailure::new(format!("template: {error}")))?,
            Some(Value::Object(map)) => map.clone(),
            _ => {
                return Err(ResourceFailure::new(
                    "template: a template is required".to_owned(),
                ));
            }
        };
        Ok(NestedDefinition {
            template: NestedTemplate::Inline(Value::Object(template)),
            parameters: request
                .properties
                .get("parameters")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        })
    }

    fn outcome(&self, nested: NestedStackOutcome) -> ResourceOutcome {
        let mut attributes = Map::new();
        attributes.insert("outputs".to_owned(), Value::Object(nested.outputs));
        attributes.insert("stack_name".to_owned(), Value::String(nested.stack_name));
        ResourceOutcome {
            physical_id: nested.stack_id.to_string(),
            attributes,
            data: Value::Null,
        }
    }
}

impl NestedStackKind for TemplateFile {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    fn definition(&self, request: &ResourceRequest) -> Result<NestedDefinition, ResourceFailure> {
        Ok(NestedDefinition {
            template: NestedTemplate::File(request.type_name.clone()),
            parameters: request.properties.clone(),
        })
    }

    fn outcome(&self, nested: NestedStackOutcome) -> ResourceOutcome {
        let mut attributes = nested.outputs;
        attributes.insert(
            "OS::stack_id".to_owned(),
            Value::String(nested.stack_id.to_string()),
        );
        ResourceOutcome {
            physical_id: nested.stack_id.to_string(),
            data: output_error_data(nested.output_errors),
            attributes,
        }
    }
}

/// What a resource whose work is one nested stack decides: its schema,
/// how it makes and changes that stack, when it is replaced, and how many
/// members its properties plan. [`NestedStackType`] does the rest.
#[async_trait]
pub trait NestedStackWork: Send + Sync + 'static {
    fn schema(&self) -> &ResourceTypeSchema;
    /// The engine's nested stacks, where the work is done.
    fn host(&self) -> &NestedStackHostSlot;
    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure>;
    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure>;
    fn needs_replacement(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> bool;
    /// The members a group's properties plan (see
    /// [`ResourceType::planned_members`]); none for a plain nested stack.
    fn planned_members(&self, properties: &Map<String, Value>) -> Option<(u64, Value)> {
        let _ = properties;
        None
    }
}

/// The resource type of a [`NestedStackWork`] — a nested stack, a template
/// resource, every group: its nested stack is deleted, checked, suspended,
/// resumed and locked with it here, the same way for all of them.
pub struct NestedStackType<W>(pub W);

#[async_trait]
impl<W: NestedStackWork> ResourceType for NestedStackType<W> {
    fn schema(&self) -> &ResourceTypeSchema {
        self.0.schema()
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        self.0.create(request).await
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        self.0.update(request, current).await
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        delete(self.0.host(), current).await
    }

    async fn check(&self, current: &Resource) -> Result<(), ResourceFailure> {
        act(self.0.host(), current, StackWideAction::Check).await
    }

    async fn suspend(&self, current: &Resource) -> Result<(), ResourceFailure> {
        act(self.0.host(), current, StackWideAction::Suspend).await
    }

    async fn resume(&self, current: &Resource) -> Result<(), ResourceFailure> {
        act(self.0.host(), current, StackWideAction::Resume).await
    }

    /// The nested stack locks with its parent.
    fn has_lock_handler(&self) -> bool {
        true
    }

    async fn lock(
        &self,
        current: &Resource,
        request: &LockRequest,
    ) -> Result<Value, ResourceFailure> {
        lock(self.0.host(), current, request, LockChange::Lock).await
    }

    async fn unlock(
        &self,
        current: &Resource,
        request: &LockRequest,
    ) -> Result<Value, ResourceFailure> {
        lock(self.0.host(), current, request, LockChange::Unlock).await
    }

    fn needs_replacement(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> bool {
        self.0.needs_replacement(old, new)
    }

    fn is_nested_stack(&self) -> bool {
        true
    }

    fn planned_members(&self, properties: &Map<String, Value>) -> Option<(u64, Value)> {
        self.0.planned_members(properties)
    }
}

#[async_trait]
impl<K: NestedStackKind> NestedStackWork for NestedStackResource<K> {
    fn schema(&self) -> &ResourceTypeSchema {
        self.kind.schema()
    }

    fn host(&self) -> &NestedStackHostSlot {
        &self.host
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let nested = host(&self.host)?
            .create_nested_stack(request, self.kind.definition(request)?)
            .await?;
        Ok(self.kind.outcome(nested))
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let Some(stack_id) = nested_id(current) else {
            return self.create(request).await;
        };
        let nested = host(&self.host)?
            .update_nested_stack(request, stack_id, self.kind.definition(request)?)
            .await?;
        Ok(self.kind.outcome(nested))
    }

    /// A nested stack is updated in place; only a failed one is replaced.
    fn needs_replacement(&self, _old: &Map<String, Value>, _new: &Map<String, Value>) -> bool {
        false
    }
}

/// Whether a resource of `type_name` makes a nested stack (its physical
/// id is that stack's id): a template file, or one of
/// [`NESTED_STACK_TYPES`].
pub fn makes_nested_stack(type_name: &str) -> bool {
    is_template_file(type_name) || NESTED_STACK_TYPES.contains(&type_name)
}

/// The types that make a nested stack (a registry test keeps it whole:
/// every type whose `is_nested_stack` is true is here), hidden aliases
/// included.
pub const NESTED_STACK_TYPES: [&str; 9] = [
    "OS::Heat::Stack",
    "OS::Heat::ResourceGroup",
    "OS::Heat::ResourceChain",
    super::AUTOSCALING_GROUP_TYPE,
    super::instance_group::INSTANCE_GROUP_TYPE,
    super::deployment_group::SOFTWARE_DEPLOYMENT_GROUP_TYPE,
    super::deployment_group::STRUCTURED_DEPLOYMENT_GROUP_TYPE,
    super::deployment_group::SOFTWARE_DEPLOYMENTS_TYPE,
    super::deployment_group::STRUCTURED_DEPLOYMENTS_TYPE,
];

/// Whether a type name names a template file (Heat's rule: by extension).
pub fn is_template_file(type_name: &str) -> bool {
    [".yaml", ".yml", ".template", ".json"]
        .iter()
        .any(|extension| type_name.ends_with(extension))
}
