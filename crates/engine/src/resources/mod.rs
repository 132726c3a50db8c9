//! Resource types: what each `type:` in a template does when a stack
//! creates, updates, checks, suspends, resumes or deletes it. Each type
//! declares a schema (properties and attributes) that the engine validates
//! resolved properties against, and that the API serves.

mod autoscaling_group;
mod aws_instance;
mod delay;
mod deployed_server;
mod deployment_group;
mod docker_cloud;
mod group_members;
mod instance_group;
pub mod keystone;
mod nested;
mod none;
pub mod openstack;
mod random_string;
mod resource_chain;
mod resource_group;
mod scaling_policy;
mod schema;
mod server;
mod simulated_cloud;
pub mod software;
mod test_resource;
mod value;
pub mod wait_condition;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

pub use autoscaling_group::{
    AUTOSCALING_GROUP_TYPE, GroupSizes, recorded_capacity, resize_autoscaling_group,
};
pub use nested::{
    MAX_NESTED_DEPTH, NESTED_STACK_KIND, NestedDefinition, NestedStackHost, NestedStackHostSlot,
    NestedStackOutcome, NestedTemplate, OUTPUT_ERRORS, is_template_file, makes_nested_stack,
};
pub use scaling_policy::{AdjustmentType, PolicySettings, SCALING_POLICY_TYPE, new_capacity};
pub use schema::{
    AttributeSchema, PropertySchema, PropertyType, ResourceTypeSchema, check_literal_property,
    translate_aliases, validate_properties,
};

use crate::domain::Resource;
use crate::error::Error;
use nested::NestedStackType;

/// The key of the resource in the starter template Heat generates for a
/// type (`GET /resource_types/{type}/template`): Heat's class name for its
/// types, else the type's last segment (`My::Custom::Thing` → `Thing`).
pub fn template_resource_name(type_name: &str) -> &str {
    match type_name {
        "OS::Heat::None" => "NoneResource",
        "OS::Heat::AutoScalingGroup" => "AutoScalingResourceGroup",
        "OS::Heat::ScalingPolicy" => "AutoScalingPolicy",
        "OS::Heat::Stack" => "RemoteStack",
        "OS::Heat::WaitCondition" => "HeatWaitCondition",
        "OS::Heat::WaitConditionHandle" => "HeatWaitConditionHandle",
        "Ember::Compute::Instance" => "Instance",
        "AWS::EC2::Instance" => "Instance",
        other => other.rsplit("::").next().unwrap_or(other),
    }
}

/// What a resource type is asked to act on.
#[derive(Debug, Clone)]
pub struct ResourceRequest {
    pub stack_id: uuid::Uuid,
    pub stack_name: String,
    pub project_id: String,
    pub user_id: String,
    /// Depth of the stack this resource belongs to (0 = a root stack).
    pub nested_depth: u32,
    /// The resource's type as recorded (a template file name for template
    /// resources).
    pub type_name: String,
    pub resource_name: String,
    /// The id of the resource's row: what a type derives the ids of what it
    /// makes from (see [`ResourceRequest::derived_id`]).
    pub resource_id: uuid::Uuid,
    /// Validated against the schema, defaults applied.
    pub properties: Map<String, Value>,
}

impl ResourceRequest {
    /// Heat's physical resource name: `<stack>-<resource>-<suffix>`.
    pub fn physical_resource_name(&self) -> String {
        let suffix: String = uuid::Uuid::new_v4()
            .simple()
            .to_string()
            .chars()
            .take(12)
            .collect();
        format!("{}-{}-{suffix}", self.stack_name, self.resource_name)
    }

    /// The id of the `kind` of thing (an instance, a nested stack, a
    /// deployment) this resource's row makes: see [`derived_id`].
    pub fn derived_id(&self, kind: &str) -> uuid::Uuid {
        derived_id(self.stack_id, self.resource_id, kind)
    }

    /// The physical id an update keeps: `current`'s, or a new
    /// [physical resource name](Self::physical_resource_name) if it has none.
    pub fn kept_physical_id(&self, current: &Resource) -> String {
        current
            .physical_id
            .clone()
            .unwrap_or_else(|| self.physical_resource_name())
    }
}

/// The id of the `kind` of thing one resource row makes, the same on
/// every attempt: a step another engine takes over after the one that
/// started it went away derives the same id, and finds what the earlier
/// attempt made (the instance, the nested stack, the deployment) instead
/// of making a second one. Ids are recorded with what they name, in the
/// same write that makes it, so nothing is made without being findable.
/// A row is one resource of one stack made once: a replacement is a new
/// row, so it makes new things. Hashed (SHA-256, version-8 UUID), so it
/// never collides with the random ids made elsewhere, and `kind` keeps
/// different things of one row apart.
pub fn derived_id(stack_id: uuid::Uuid, resource_id: uuid::Uuid, kind: &str) -> uuid::Uuid {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(b"ember resource row\0");
    hasher.update(kind.as_bytes());
    hasher.update([0]);
    hasher.update(stack_id.as_bytes());
    hasher.update(resource_id.as_bytes());
    let digest = hasher.finalize();
    let mut bytes = [0_u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// Whether a property `schema` does not let change in place changed
/// between `old` and `new` (the default rule of
/// [`ResourceType::needs_replacement`]).
pub fn fixed_property_changed(
    schema: &ResourceTypeSchema,
    old: &Map<String, Value>,
    new: &Map<String, Value>,
) -> bool {
    schema.properties.iter().any(|property| {
        !property.update_allowed && old.get(property.name) != new.get(property.name)
    })
}

/// A maintenance lock (or unlock) reaching a resource.
#[derive(Debug, Clone)]
pub struct LockRequest {
    pub level: crate::domain::LockLevel,
    /// Who locks: the lock on an instance is placed as this caller.
    pub caller: ember_runtime::Identity,
    pub reason: Option<String>,
    /// When the stack's lock expires (the engine unlocks it then).
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// The types of compute servers (`with_compute` registers them).
pub const COMPUTE_SERVER_TYPES: [&str; 2] = ["OS::Nova::Server", "Ember::Compute::Instance"];

/// Whether a resource of `type_name` is a server a software deployment
/// targets: a compute server, or a deployed (pre-existing) one.
pub fn is_deployment_target(type_name: &str) -> bool {
    COMPUTE_SERVER_TYPES.contains(&type_name) || type_name == deployed_server::DEPLOYED_SERVER_TYPE
}

/// Whether a server's agent reads its deployments from its metadata
/// (user data `SOFTWARE_CONFIG`, a deployed server): its metadata has
/// the list from the start, empty until one is made, as in Heat.
pub fn agent_reads_deployments(type_name: &str, properties: &Value) -> bool {
    type_name == deployed_server::DEPLOYED_SERVER_TYPE
        || (COMPUTE_SERVER_TYPES.contains(&type_name)
            && properties.get("user_data_format").and_then(Value::as_str)
                == Some("SOFTWARE_CONFIG"))
}

/// Which way a maintenance lock moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockChange {
    Lock,
    Unlock,
}

impl LockChange {
    /// The stack action that makes the change.
    pub fn action(self) -> crate::domain::StackAction {
        match self {
            LockChange::Lock => crate::domain::StackAction::Lock,
            LockChange::Unlock => crate::domain::StackAction::Unlock,
        }
    }
}

/// What a create or update produced.
#[derive(Debug, Clone, Default)]
pub struct ResourceOutcome {
    pub physical_id: String,
    pub attributes: Map<String, Value>,
    /// Private data kept with the resource (not shown by the API).
    pub data: Value,
}

/// Why a resource action failed, kept typed up to the stack executor:
/// whether the resource itself failed — its status reason says why — or
/// Ember's own store failed under it, which is no verdict on the resource
/// and stops the operation as the store failure it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceFailure {
    /// The resource failed, in the service's (or Heat's) words: bad
    /// properties, a cloud's refusal, a signal saying FAILURE. The text
    /// becomes the resource's status reason.
    #[error("{0}")]
    Failed(String),
    /// Ember's own store failed while the step ran (see
    /// [`Error::is_store_failure`]): the run stops as `RunFailure::Store`
    /// (or `RunFailure::LeaseLost`),
    /// and the resource's row stays as the step left it, to be resumed —
    /// not marked FAILED as if its properties were bad.
    #[error("{0}")]
    Store(Error),
}

impl ResourceFailure {
    /// The resource failed, for `reason` (its status reason).
    pub fn new(reason: impl Into<String>) -> Self {
        ResourceFailure::Failed(reason.into())
    }

    /// The same failure, its reason (when the resource failed) reworded by
    /// `reword`; a store failure stays as it is.
    pub fn map_reason(self, reword: impl FnOnce(String) -> String) -> Self {
        match self {
            ResourceFailure::Failed(reason) => ResourceFailure::Failed(reword(reason)),
            store @ ResourceFailure::Store(_) => store,
        }
    }
}

/// An engine error met by a resource's step: kept typed when it is Ember's
/// own store failing ([`Error::is_store_failure`]), else the resource's
/// failure in the error's words (as they read before).
impl From<Error> for ResourceFailure {
    fn from(error: Error) -> Self {
        if error.is_store_failure() {
            ResourceFailure::Store(error)
        } else {
            ResourceFailure::Failed(error.to_string())
        }
    }
}

#[async_trait]
pub trait ResourceType: Send + Sync + 'static {
    fn schema(&self) -> &ResourceTypeSchema;

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure>;

    /// Updates in place (only called when every changed property allows it).
    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let _ = current;
        self.create(request).await
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let _ = current;
        Ok(())
    }

    /// What a stack snapshot records of the resource's live state, beyond
    /// its stored data (a server's power state); `None` when its stored
    /// data is all there is.
    async fn snapshot_state(&self, current: &Resource) -> Result<Option<Value>, ResourceFailure> {
        let _ = current;
        Ok(None)
    }

    /// Brings the resource back to the state a snapshot recorded, after a
    /// restore's update kept it (the same physical resource).
    async fn restore_state(
        &self,
        current: &Resource,
        recorded: &Value,
    ) -> Result<(), ResourceFailure> {
        let _ = (current, recorded);
        Ok(())
    }

    async fn check(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let _ = current;
        Ok(())
    }

    /// The action under way on `current` was cut short (the stack's
    /// timeout, a delete stopping the operation): Heat's
    /// `handle_<action>_cancel`. Nothing by default.
    async fn cancel(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let _ = current;
        Ok(())
    }

    /// Takes an existing physical resource into the stack (a template's
    /// `external_id`): `adopted` is the row with the external id as its
    /// physical id. The id must name something **of the stack's project**
    /// (an id of another project's object is as unknown as one nobody
    /// made); returns what the stack records of it. By default the type's
    /// own [`check`](Self::check) reads it (through the project's
    /// credentials on a cloud) and the stack records the id alone; a type
    /// whose check does not read through the project finds it itself. A
    /// nested stack is never adopted: its stack is Ember's own record.
    async fn adopt(
        &self,
        request: &ResourceRequest,
        adopted: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        if self.is_nested_stack() {
            return Err(ResourceFailure::new(format!(
                "{} cannot adopt an existing stack: a nested stack is made by its parent",
                request.type_name
            )));
        }
        self.check(adopted).await?;
        Ok(ResourceOutcome {
            physical_id: adopted.physical_id.clone().unwrap_or_default(),
            attributes: Map::new(),
            data: Value::Null,
        })
    }

    async fn suspend(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let _ = current;
        Ok(())
    }

    async fn resume(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let _ = current;
        Ok(())
    }

    /// Whether a `step` of this type that an engine had in flight when it
    /// went away (its row is still `*_IN_PROGRESS`) can be taken over by
    /// the engine that resumes the operation (see `stacks/orphans.rs`):
    /// `Ok` when running the step again — through
    /// [`ResourceType::resume_create`], [`ResourceType::resume_update`] or
    /// [`ResourceType::resume_delete`], or the action itself for the
    /// others — finds what the earlier attempt made and finishes it instead
    /// of making it twice; `Err(why)` when it cannot, and the operation
    /// then fails, saying why, as before. `step` is the step's kind:
    /// CREATE, UPDATE (an in-place update, a rollback's too), DELETE (a
    /// rollback's too), SUSPEND, RESUME or CHECK.
    ///
    /// By default a type that acts on nothing but its row takes every step
    /// over (doing it again is harmless), and so does a nested stack: every
    /// nested-stack type acts through the engine's [`NestedStackHost`],
    /// which finds the nested stack an earlier attempt made (its id derives
    /// from the row), brings the nested stack's own operation that attempt
    /// left unfinished to its end instead of starting another, and takes a
    /// nested stack suspended (resumed) already as the suspend (resume)
    /// done. Any other type refuses until it opts in.
    fn take_over(&self, step: crate::domain::StackAction) -> Result<(), String> {
        if !self.acts_outside_its_row() || self.is_nested_stack() {
            return Ok(());
        }
        Err(format!(
            "a {} of {} is not taken over by another engine (it cannot find what an earlier attempt made)",
            step.as_str(),
            self.schema().type_name
        ))
    }

    /// Finishes a create another engine had in flight when it went away
    /// (only called when [`ResourceType::take_over`] allows it).
    /// `in_flight` is the row as that engine left it: its `updated_at` is
    /// when the create began. By default the create again — right for a
    /// type whose create finds what an earlier attempt of the same row
    /// made (by [`ResourceRequest::derived_id`]), or that makes nothing
    /// outside its row.
    async fn resume_create(
        &self,
        request: &ResourceRequest,
        in_flight: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let _ = in_flight;
        self.create(request).await
    }

    /// Finishes an in-place update another engine had in flight (see
    /// [`ResourceType::resume_create`]); by default the update again.
    async fn resume_update(
        &self,
        request: &ResourceRequest,
        in_flight: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        self.update(request, in_flight).await
    }

    /// Finishes a delete another engine had in flight — or deletes what a
    /// create it had in flight may have made (the row has no physical id
    /// then); by default the delete again: what is gone is deleted.
    async fn resume_delete(&self, in_flight: &Resource) -> Result<(), ResourceFailure> {
        self.delete(in_flight).await
    }

    /// Whether the type's actions change anything beyond the resource's own
    /// row: a container, a webhook, a nested stack, a signal awaited from
    /// outside. A type that changes nothing else (`OS::Heat::None`,
    /// `TestResource`, `Value`, `RandomString`, `Delay`, `ScalingPolicy`,
    /// `LaunchConfiguration`, `DeployedServer`) does not need its
    /// IN_PROGRESS durable before it acts: after a crash there is nothing
    /// of it to find, and doing it again is harmless. Its transitions are
    /// group-committed with the next ones; whatever outside effect follows
    /// (a resource of a type that answers true here) and the stack's own
    /// end still wait until everything before them is durable.
    fn acts_outside_its_row(&self) -> bool {
        true
    }

    /// Refuses, naming each, what of `properties` — as the template writes
    /// them, before any function is resolved — this type cannot honour on
    /// its backend: the template is refused when it is validated, nothing
    /// is silently ignored. Values a function gives are checked again when
    /// the resource is made. Everything passes by default.
    fn refuse_unhonoured(&self, properties: &Map<String, Value>) -> Result<(), String> {
        let _ = properties;
        Ok(())
    }

    /// Whether [`ResourceType::lock`]/[`ResourceType::unlock`] do anything:
    /// a resource with nothing to lock goes straight to LOCK_COMPLETE, one
    /// transition instead of two.
    fn has_lock_handler(&self) -> bool {
        false
    }

    /// Applies a stack's maintenance lock to what this resource manages.
    /// Returns the resource's private data afterwards (to remember what it
    /// locked). Nothing to lock by default.
    async fn lock(
        &self,
        current: &Resource,
        request: &LockRequest,
    ) -> Result<Value, ResourceFailure> {
        let _ = request;
        Ok(current.data.clone())
    }

    /// Lifts what [`ResourceType::lock`] placed, and only that.
    async fn unlock(
        &self,
        current: &Resource,
        request: &LockRequest,
    ) -> Result<Value, ResourceFailure> {
        let _ = request;
        Ok(current.data.clone())
    }

    /// What `get_resource` returns: the physical id unless the type says
    /// otherwise (RandomString returns its value, as in Heat).
    fn reference(&self, current: &Resource) -> Value {
        current
            .physical_id
            .clone()
            .map_or(Value::Null, Value::String)
    }

    /// Readies `current` to be replaced while it still exists: what the
    /// replacement must take from it is let go first (a server's ports,
    /// Heat's `prepare_for_replace`). Nothing by default.
    async fn prepare_for_replace(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let _ = current;
        Ok(())
    }

    /// Whether a change of these properties can be done in place.
    fn needs_replacement(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> bool {
        fixed_property_changed(self.schema(), old, new)
    }

    /// A nested stack (Heat's StackResource): every stack update reaches it,
    /// so the nested resources decide for themselves (failed members are
    /// replaced), and the whole nested stack is replaced only when it was
    /// marked unhealthy (CHECK_FAILED).
    fn is_nested_stack(&self) -> bool {
        false
    }

    /// For a scaling group: how many members `properties` make it create
    /// and their definition (`{type, properties}`), so plug-points can
    /// count what an operation will bring before it runs.
    fn planned_members(&self, properties: &Map<String, Value>) -> Option<(u64, Value)> {
        let _ = properties;
        None
    }
}

/// Every resource type the engine knows, by name.
#[derive(Clone)]
pub struct ResourceTypeRegistry {
    types: BTreeMap<String, Arc<dyn ResourceType>>,
    /// Older names still taken but not listed (Heat's hidden types), and
    /// the type each stands for.
    hidden: BTreeMap<&'static str, &'static str>,
    /// Implements every resource whose type is a template file.
    template_resource: Arc<dyn ResourceType>,
    /// Where the engine installs itself for nested stacks.
    nested_stack_host: NestedStackHostSlot,
    /// What the wait condition types share, when they are registered.
    wait_conditions: Option<Arc<wait_condition::WaitConditions>>,
    /// The software configuration service behind the software types.
    software: Option<Arc<crate::software::SoftwareService>>,
    /// Types other backends offer that this one does not, and why (a
    /// template naming one is refused saying so).
    not_offered: BTreeMap<&'static str, &'static str>,
}

impl ResourceTypeRegistry {
    /// The built-in types.
    pub fn builtin() -> ResourceTypeRegistry {
        let nested_stack_host = NestedStackHostSlot::default();
        let mut registry = ResourceTypeRegistry {
            types: BTreeMap::new(),
            hidden: BTreeMap::new(),
            template_resource: Arc::new(NestedStackType(nested::TemplateResource::new(
                nested_stack_host.clone(),
            ))),
            nested_stack_host: nested_stack_host.clone(),
            wait_conditions: None,
            software: None,
            not_offered: BTreeMap::new(),
        };
        registry.register(Arc::new(NestedStackType(nested::StackResource::new(
            nested_stack_host,
        ))));
        registry.register(Arc::new(none::NoneResource::new()));
        registry.register(Arc::new(test_resource::TestResource::new()));
        registry.register(Arc::new(random_string::RandomString::new()));
        registry.register(Arc::new(value::ValueResource::new()));
        registry.register(Arc::new(NestedStackType(
            resource_group::ResourceGroup::new(registry.nested_stack_host.clone()),
        )));
        registry.register(Arc::new(NestedStackType(
            resource_chain::ResourceChain::new(registry.nested_stack_host.clone()),
        )));
        registry.register(Arc::new(NestedStackType(
            autoscaling_group::AutoScalingGroup::new(registry.nested_stack_host.clone()),
        )));
        registry.register(Arc::new(scaling_policy::ScalingPolicy::new()));
        registry.register(Arc::new(delay::Delay::new()));
        registry.register(Arc::new(instance_group::LaunchConfiguration::new()));
        registry
    }

    /// The built-in types plus compute instances (`OS::Nova::Server`,
    /// `Ember::Compute::Instance`) backed by `instances`.
    pub fn with_compute(instances: Arc<crate::instances::InstanceService>) -> ResourceTypeRegistry {
        let mut registry = ResourceTypeRegistry::builtin();
        for type_name in COMPUTE_SERVER_TYPES {
            registry.register(Arc::new(server::ServerResource::new(
                type_name,
                instances.clone(),
            )));
        }
        registry.register(Arc::new(aws_instance::AwsInstance::new(
            server::ServerResource::new("OS::Nova::Server", instances.clone()),
        )));
        registry.register(Arc::new(NestedStackType(
            instance_group::InstanceGroup::new(registry.nested_stack_host.clone()),
        )));
        // On the simulated backend, networks, volumes, key pairs and
        // images are simulated too, on the cloud its machines are on (the
        // openstack backend's types replace these: `with_cloud`).
        if let Some(cloud) = instances.simulated_cloud() {
            simulated_cloud::register(&mut registry, &cloud);
        }
        // On the docker backend, networks, ports and volumes are the
        // container engine's (see `docker_cloud`).
        if let Some(engine) = instances.docker_engine() {
            docker_cloud::register(&mut registry, &engine, &instances);
        }
        registry
    }

    /// Adds the openstack backend's types (networks, volumes, key pairs,
    /// images, …: see [`openstack`]), acting on `cloud`.
    pub fn with_cloud(mut self, cloud: &Arc<crate::cloud::OpenStackCloud>) -> ResourceTypeRegistry {
        openstack::register(&mut self, cloud);
        keystone::register(
            &mut self,
            Arc::new(keystone::cloud::CloudIdentity::new(cloud.clone())),
        );
        self
    }

    /// Adds the `OS::Keystone::*` types, acting on `identity` (the
    /// gateway's built-in one; the openstack backend's come with
    /// [`ResourceTypeRegistry::with_cloud`]).
    pub fn with_identity(
        mut self,
        identity: Arc<dyn keystone::IdentityBackend>,
    ) -> ResourceTypeRegistry {
        keystone::register(&mut self, identity);
        self
    }

    /// Adds the wait condition types and their handles, backed by
    /// `conditions`.
    pub fn with_wait_conditions(
        mut self,
        conditions: Arc<wait_condition::WaitConditions>,
    ) -> ResourceTypeRegistry {
        self.register(Arc::new(wait_condition::WaitConditionHandle::heat(
            conditions.clone(),
        )));
        self.register(Arc::new(
            wait_condition::WaitConditionHandle::replaced_on_every_update(conditions.clone()),
        ));
        self.register(Arc::new(wait_condition::WaitConditionHandle::aws(
            conditions.clone(),
        )));
        self.register(Arc::new(wait_condition::WaitCondition::heat(
            conditions.clone(),
        )));
        self.register(Arc::new(wait_condition::WaitCondition::aws(
            conditions.clone(),
        )));
        self.wait_conditions = Some(conditions);
        self
    }

    /// Adds the software configuration types (configs and deployments).
    pub fn with_software(
        mut self,
        software: Arc<crate::software::SoftwareService>,
        conditions: Arc<wait_condition::WaitConditions>,
    ) -> ResourceTypeRegistry {
        self.register(Arc::new(software::ConfigResource::software(
            software.clone(),
        )));
        self.register(Arc::new(software::ConfigResource::structured(
            software.clone(),
        )));
        self.register(Arc::new(software::ConfigResource::cloud(software.clone())));
        self.register(Arc::new(software::ConfigResource::multipart(
            software.clone(),
        )));
        self.register(Arc::new(software::DeploymentResource::software(
            software.clone(),
            conditions.clone(),
        )));
        self.register(Arc::new(software::DeploymentResource::structured(
            software.clone(),
            conditions.clone(),
        )));
        self.register(Arc::new(deployed_server::DeployedServer::new(conditions)));
        self.register(Arc::new(NestedStackType(
            deployment_group::DeploymentGroup::software(self.nested_stack_host.clone()),
        )));
        self.register(Arc::new(NestedStackType(
            deployment_group::DeploymentGroup::structured(self.nested_stack_host.clone()),
        )));
        self.hidden.insert(
            deployment_group::SOFTWARE_DEPLOYMENTS_TYPE,
            deployment_group::SOFTWARE_DEPLOYMENT_GROUP_TYPE,
        );
        self.hidden.insert(
            deployment_group::STRUCTURED_DEPLOYMENTS_TYPE,
            deployment_group::STRUCTURED_DEPLOYMENT_GROUP_TYPE,
        );
        self.software = Some(software);
        self
    }

    /// The software configuration service, when the software types are
    /// registered.
    pub fn software(&self) -> Option<&Arc<crate::software::SoftwareService>> {
        self.software.as_ref()
    }

    /// What the wait condition types share (signals are recorded there).
    pub fn wait_conditions(&self) -> Option<&Arc<wait_condition::WaitConditions>> {
        self.wait_conditions.as_ref()
    }

    pub fn register(&mut self, resource_type: Arc<dyn ResourceType>) {
        self.types
            .insert(resource_type.schema().type_name.to_owned(), resource_type);
    }

    /// The type implementing `type_name`: a registered one, or the template
    /// resource type for a template file name.
    pub fn get(&self, type_name: &str) -> Option<&Arc<dyn ResourceType>> {
        self.types
            .get(type_name)
            .or_else(|| {
                self.hidden
                    .get(type_name)
                    .and_then(|current| self.types.get(*current))
            })
            .or_else(|| is_template_file(type_name).then_some(&self.template_resource))
    }

    /// Records that this backend does not offer `type_name`, and why.
    pub fn not_offered(&mut self, type_name: &'static str, why: &'static str) {
        self.not_offered.insert(type_name, why);
    }

    /// Why `type_name` is not offered here, if another backend offers it.
    pub fn why_not_offered(&self, type_name: &str) -> Option<&'static str> {
        self.not_offered.get(type_name).copied()
    }

    /// Installs the engine that runs nested stacks (once).
    pub fn install_nested_stack_host(&self, host: std::sync::Weak<dyn NestedStackHost>) {
        if self.nested_stack_host.set(host).is_err() {
            tracing::warn!("a nested stack host was already installed in this registry");
        }
    }

    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.types.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::StackAction;

    #[test]
    fn every_type_that_makes_a_nested_stack_is_known_as_one() {
        let registry = ResourceTypeRegistry::builtin();
        for name in registry.names() {
            let nested = registry.get(name).expect("registered").is_nested_stack();
            assert_eq!(makes_nested_stack(name), nested, "{name}");
        }
        assert!(makes_nested_stack("members.yaml"));
    }

    #[test]
    fn derived_ids_are_stable_per_row_and_kind_and_differ_otherwise() {
        let (stack, row, other) = (
            uuid::Uuid::new_v4(),
            uuid::Uuid::new_v4(),
            uuid::Uuid::new_v4(),
        );
        let id = derived_id(stack, row, "instance");
        assert_eq!(
            id,
            derived_id(stack, row, "instance"),
            "the same on every attempt"
        );
        assert_eq!(id.get_version_num(), 8);
        for different in [
            derived_id(stack, row, "nested stack"),
            derived_id(stack, other, "instance"),
            derived_id(other, row, "instance"),
        ] {
            assert_ne!(id, different);
        }
    }

    /// A type that acts outside its row and has not opted in.
    struct Outside {
        schema: ResourceTypeSchema,
    }

    #[async_trait]
    impl ResourceType for Outside {
        fn schema(&self) -> &ResourceTypeSchema {
            &self.schema
        }

        async fn create(
            &self,
            request: &ResourceRequest,
        ) -> Result<ResourceOutcome, ResourceFailure> {
            Ok(ResourceOutcome {
                physical_id: request.physical_resource_name(),
                ..ResourceOutcome::default()
            })
        }
    }

    const EVERY_STEP: [StackAction; 6] = [
        StackAction::Create,
        StackAction::Update,
        StackAction::Delete,
        StackAction::Suspend,
        StackAction::Resume,
        StackAction::Check,
    ];

    #[test]
    fn only_types_that_opted_in_take_steps_in_flight_over() {
        let registry = ResourceTypeRegistry::builtin();
        let verdict = |type_name: &str, step: StackAction| {
            registry
                .get(type_name)
                .expect("a built-in type")
                .take_over(step)
        };
        // Acting on nothing but its row, or on Ember's own rows only (a
        // create again finds, or harmlessly redoes, what the earlier
        // attempt made), or on a nested stack (its operation left behind
        // is continued, and one finished already is the step done): every
        // step is taken over.
        for type_name in [
            "OS::Heat::None",
            "OS::Heat::ScalingPolicy",
            "AWS::AutoScaling::LaunchConfiguration",
            "OS::Heat::Stack",
            "OS::Heat::ResourceGroup",
            "OS::Heat::AutoScalingGroup",
        ] {
            for step in EVERY_STEP {
                assert!(verdict(type_name, step).is_ok(), "{type_name} {step:?}");
            }
        }
        // A type that acts outside its row refuses until it opts in,
        // saying which step of which type and why.
        let outside = Outside {
            schema: ResourceTypeSchema {
                type_name: "Ember::Test::Outside",
                description: "Makes something outside the engine.",
                properties: Vec::new(),
                attributes: Vec::new(),
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
        };
        for step in EVERY_STEP {
            let refused = outside.take_over(step).expect_err("refused");
            assert_eq!(
                refused,
                format!(
                    "a {} of Ember::Test::Outside is not taken over by another engine (it cannot find what an earlier attempt made)",
                    step.as_str()
                )
            );
        }
    }
}
