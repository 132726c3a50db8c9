//! Stack operations, the engine's application layer: each public method is
//! what one API call does. Changes run as background tasks holding the
//! stack lease; the call returns once the operation is recorded as started.

mod abandon;
mod actions;
mod allowed;
mod context;
pub mod definition;
mod executor;
mod lease;
mod lock;
mod mark_unhealthy;
mod nested;
mod plugins;
mod queries;
mod signal;
mod update;
mod writer;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use ember_runtime::Identity;
use serde_json::{Map, Value};
use uuid::Uuid;

pub use actions::StackWideAction;
pub use allowed::{Operation, ensure_allowed};
pub use definition::{DefinitionInput, ParsedStack, definition_from_input};
use executor::{RunTarget, Shared};
pub use lease::LEASE_TTL;
pub use lock::OperationCheck;
pub use mark_unhealthy::DEFAULT_HEALTH_REASON;
pub use plugins::{PluginGate, RegistryUnavailable};
pub use queries::{OutputValue, ResourceView, StackDetails, ValidationReport};
pub use signal::{Scaling, SignalOutcome};
pub use update::UpdateStack;

use crate::domain::template::{StackIdentity, TemplateError};
use crate::domain::{ActionStatus, Event, Resource, Stack, StackAction, StackDefinition};
use crate::error::{Error, Result};
use crate::resources::ResourceTypeRegistry;
use crate::store::StackStore;

/// An operation's background work: spawned for API calls, awaited for
/// nested stacks (their parent's resource waits for them).
pub(crate) type Run = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// A request to create a stack, decoded from REST or gRPC.
#[derive(Debug, Clone, Default)]
pub struct CreateStack {
    pub name: String,
    pub template: String,
    pub environment: String,
    pub environment_files: Vec<String>,
    pub files: BTreeMap<String, String>,
    pub parameters: Map<String, Value>,
    pub timeout_mins: Option<u32>,
    pub disable_rollback: bool,
    pub tags: Vec<String>,
    /// Abandon data (JSON text): adopt those resources instead of creating.
    pub adopt_data: Option<String>,
}

pub struct StackOperations {
    shared: Arc<Shared>,
}

impl From<TemplateError> for Error {
    fn from(error: TemplateError) -> Self {
        Error::InvalidInput(error.to_string())
    }
}

/// Heat's rule for stack names.
fn validate_stack_name(name: &str) -> Result<()> {
    let valid = name.len() <= 255
        && name
            .chars()
            .next()
            .is_some_and(|first| first.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if valid {
        Ok(())
    } else {
        Err(Error::InvalidInput(format!(
            "stack_name {name:?} is invalid: it must start with a letter and contain only letters, digits, '_', '-' and '.' (at most 255)"
        )))
    }
}

pub(crate) fn stack_event(stack: &Stack, reason: &str) -> Event {
    Event {
        id: Uuid::now_v7(),
        stack_id: stack.id,
        resource_name: stack.name.clone(),
        physical_resource_id: stack.id.to_string(),
        resource_type: "OS::Heat::Stack".to_owned(),
        action: stack.action,
        status: stack.status,
        reason: reason.to_owned(),
        created_at: ember_runtime::time::now(),
    }
}

impl StackOperations {
    /// The engine's stack operations. They also host nested stacks, so the
    /// registry's nested stack types are bound to the returned instance.
    pub fn new(
        store: Arc<dyn StackStore>,
        registry: Arc<ResourceTypeRegistry>,
    ) -> Arc<StackOperations> {
        StackOperations::with_plugins(store, registry, PluginGate::Disabled)
    }

    /// The same, calling lifecycle plugins around every root operation.
    pub fn with_plugins(
        store: Arc<dyn StackStore>,
        registry: Arc<ResourceTypeRegistry>,
        plugins: PluginGate,
    ) -> Arc<StackOperations> {
        let writer = writer::TransitionWriter::start(store.clone());
        Arc::new_cyclic(|this: &std::sync::Weak<StackOperations>| {
            let host: std::sync::Weak<dyn crate::resources::NestedStackHost> = this.clone();
            registry.install_nested_stack_host(host);
            StackOperations {
                shared: Arc::new(Shared {
                    store,
                    registry,
                    writer,
                    engine_id: Uuid::now_v7(),
                    plugins,
                    running_updates: Default::default(),
                }),
            }
        })
    }

    pub fn engine_id(&self) -> Uuid {
        self.shared.engine_id
    }

    pub fn registry(&self) -> &ResourceTypeRegistry {
        &self.shared.registry
    }

    fn store(&self) -> &Arc<dyn StackStore> {
        &self.shared.store
    }

    /// Validates everything, records the stack CREATE_IN_PROGRESS with its
    /// resources INIT_COMPLETE, and starts creating them.
    pub async fn create_stack(&self, identity: &Identity, request: CreateStack) -> Result<Stack> {
        let (mut stack, definition, parsed) = self.prepare(identity, &request)?;
        let adopt_data = request
            .adopt_data
            .as_deref()
            .map(abandon::parse_adopt_data)
            .transpose()?
            .map(Arc::new);
        if adopt_data.is_some() {
            abandon::mark_adopting(&mut stack);
        }
        let (stack, run) = self
            .begin_create(stack, &definition, parsed, adopt_data)
            .await?;
        tokio::spawn(run);
        Ok(stack)
    }

    /// Records a new stack (root or nested) and returns the run that
    /// creates (or adopts) its resources; the caller spawns or awaits it.
    pub(crate) async fn begin_create(
        &self,
        stack: Stack,
        definition: &StackDefinition,
        parsed: ParsedStack,
        adopt_data: Option<Arc<Map<String, Value>>>,
    ) -> Result<(Stack, Run)> {
        let now = stack.created_at;
        let resources: Vec<Resource> = parsed
            .enabled
            .iter()
            .map(|name| Resource::initial(stack.id, name, &parsed.resource_types[name], now))
            .collect();
        // The lease is taken before the stack exists, so no sweeper can see
        // it in progress without an owner.
        let stack_lease = lease::StackLease::take(
            self.store().clone(),
            stack.id,
            &stack.name,
            self.shared.engine_id,
            "CREATE",
        )
        .await?;
        let event = stack_event(&stack, &stack.status_reason);
        if let Err(error) = self
            .store()
            .create_stack(&stack, definition, &resources, &event)
            .await
        {
            stack_lease.release().await;
            return Err(error);
        }
        let target = RunTarget::new(&stack, Arc::new(parsed), resources);
        let run = Box::pin(run_create(
            self.shared.clone(),
            stack.clone(),
            target,
            stack_lease,
            adopt_data,
        ));
        Ok((stack, run))
    }

    /// What a create would record, without recording or creating anything.
    pub fn preview_stack(
        &self,
        identity: &Identity,
        request: &CreateStack,
    ) -> Result<(Stack, Vec<Resource>, ParsedStack)> {
        let (mut stack, _definition, parsed) = self.prepare(identity, request)?;
        stack.action = StackAction::Init;
        stack.status = ActionStatus::Complete;
        stack.status_reason = String::new();
        let resources = parsed
            .enabled
            .iter()
            .map(|name| {
                Resource::initial(
                    stack.id,
                    name,
                    &parsed.resource_types[name],
                    stack.created_at,
                )
            })
            .collect();
        Ok((stack, resources, parsed))
    }

    fn prepare(
        &self,
        identity: &Identity,
        request: &CreateStack,
    ) -> Result<(Stack, StackDefinition, ParsedStack)> {
        validate_stack_name(&request.name)?;
        let definition = definition_from_input(DefinitionInput {
            template: &request.template,
            environment: &request.environment,
            environment_files: &request.environment_files,
            files: request.files.clone(),
            parameters: request.parameters.clone(),
        })?;
        let id = Uuid::new_v4();
        let parsed = ParsedStack::build(
            &definition,
            StackIdentity {
                stack_name: request.name.clone(),
                stack_id: id.to_string(),
                project_id: identity.project_id.clone(),
            },
            &self.shared.registry,
        )?;
        let now = ember_runtime::time::now();
        let stack = Stack {
            id,
            name: request.name.clone(),
            project_id: identity.project_id.clone(),
            user_id: identity.user_id.clone(),
            parent_id: None,
            action: StackAction::Create,
            status: ActionStatus::InProgress,
            status_reason: "Stack CREATE started".to_owned(),
            description: parsed.template.description.clone().unwrap_or_default(),
            tags: request.tags.clone(),
            timeout_mins: request.timeout_mins.filter(|minutes| *minutes > 0),
            disable_rollback: request.disable_rollback,
            created_at: now,
            updated_at: now,
            nested_depth: 0,
            parent_resource: None,
            deleted_at: None,
            maintenance_lock: None,
        };
        Ok((stack, definition, parsed))
    }

    /// A stack of the caller's project by name or id, or NotFound.
    pub async fn find_stack(&self, identity: &Identity, name_or_id: &str) -> Result<Stack> {
        if name_or_id.is_empty() {
            return Err(Error::InvalidInput(
                "stack: give a stack name or id".to_owned(),
            ));
        }
        self.store()
            .find_stack(&identity.project_id, name_or_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("stack {name_or_id:?} not found")))
    }

    /// Starts deleting a stack and its resources.
    pub async fn delete_stack(&self, identity: &Identity, name_or_id: &str) -> Result<Stack> {
        let stack = self.find_stack(identity, name_or_id).await?;
        if stack.deleted_at.is_some() {
            return Err(Error::NotFound(format!(
                "stack {name_or_id:?} not found (already deleted)"
            )));
        }
        let (stack, run) = self.begin_delete(stack, name_or_id).await?;
        tokio::spawn(run);
        Ok(stack)
    }

    /// Takes the lease, records DELETE_IN_PROGRESS and returns the run that
    /// deletes the resources; the caller spawns or awaits it.
    pub(crate) async fn begin_delete(
        &self,
        mut stack: Stack,
        name_or_id: &str,
    ) -> Result<(Stack, Run)> {
        let stack_lease = lease::StackLease::take(
            self.store().clone(),
            stack.id,
            &stack.name,
            self.shared.engine_id,
            "DELETE",
        )
        .await?;
        // Re-read under the lease: the state may have moved since.
        stack = match self.store().get_stack(stack.id).await {
            Ok(Some(current)) => current,
            Ok(None) => {
                stack_lease.release().await;
                return Err(Error::NotFound(format!("stack {name_or_id:?} not found")));
            }
            Err(error) => {
                stack_lease.release().await;
                return Err(error);
            }
        };
        if let Err(error) = ensure_allowed(&stack, Operation::Delete) {
            stack_lease.release().await;
            return Err(error);
        }
        let target = match self.load_target(&stack).await {
            Ok(target) => target,
            Err(error) => {
                stack_lease.release().await;
                return Err(error);
            }
        };
        stack.action = StackAction::Delete;
        stack.status = ActionStatus::InProgress;
        stack.status_reason = "Stack DELETE started".to_owned();
        stack.updated_at = ember_runtime::time::now();
        if let Err(error) = self
            .store()
            .record_stack_transition(&stack, &stack_event(&stack, "Stack DELETE started"))
            .await
        {
            stack_lease.release().await;
            return Err(error);
        }
        let run = Box::pin(run_delete(
            self.shared.clone(),
            stack.clone(),
            target,
            stack_lease,
        ));
        Ok((stack, run))
    }

    /// The parsed definition and current resources of a recorded stack.
    pub(crate) async fn load_target(&self, stack: &Stack) -> Result<RunTarget> {
        let parsed = self.parse_recorded(stack).await?;
        let rows = self.store().list_resources(stack.id).await?;
        Ok(RunTarget::new(stack, Arc::new(parsed), rows))
    }

    async fn parse_recorded(&self, stack: &Stack) -> Result<ParsedStack> {
        let definition = self.store().load_definition(stack.id).await?;
        ParsedStack::build(
            &definition,
            StackIdentity {
                stack_name: stack.name.clone(),
                stack_id: stack.id.to_string(),
                project_id: stack.project_id.clone(),
            },
            &self.shared.registry,
        )
        .map_err(|error| {
            Error::Database(format!(
                "stack {}: its stored template no longer parses: {error}",
                stack.id
            ))
        })
    }

    /// Marks stacks whose engine went away (in progress, lease expired) as
    /// failed, with their in-progress resources. Returns how many.
    pub async fn recover_orphaned_stacks(&self) -> Result<usize> {
        let orphaned = self
            .store()
            .find_orphaned_stacks(ember_runtime::time::now())
            .await?;
        let count = orphaned.len();
        for (mut stack, engine) in orphaned {
            let engine = engine.map_or_else(
                || "an unknown engine".to_owned(),
                |id| format!("engine {id}"),
            );
            let reason = format!(
                "{} interrupted: {engine} went away while it ran (its stack lease expired)",
                stack.action.as_str()
            );
            let resources = self.store().list_resources(stack.id).await?;
            let now = ember_runtime::time::now();
            let interrupted: Vec<(Resource, Event)> = resources
                .into_iter()
                .filter(|resource| resource.status == ActionStatus::InProgress)
                .map(|mut resource| {
                    resource.status = ActionStatus::Failed;
                    resource.status_reason = reason.clone();
                    resource.updated_at = now;
                    let event = Event::for_resource(&resource, now);
                    (resource, event)
                })
                .collect();
            self.store()
                .record_resource_transitions(&interrupted)
                .await?;
            stack.status = ActionStatus::Failed;
            stack.status_reason = reason.clone();
            stack.updated_at = now;
            self.store()
                .record_stack_transition(&stack, &stack_event(&stack, &reason))
                .await?;
            tracing::warn!(stack_id = %stack.id, %reason, "orphaned stack marked failed");
        }
        Ok(count)
    }

    /// Runs [`Self::recover_orphaned_stacks`] now and then every
    /// `LEASE_TTL`, until `shutdown`.
    pub fn spawn_orphan_sweeper(self: &Arc<Self>, shutdown: tokio_util::sync::CancellationToken) {
        let operations = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(error) = operations.recover_orphaned_stacks().await {
                    tracing::warn!(%error, "sweeping orphaned stacks failed");
                }
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(LEASE_TTL) => {}
                }
            }
        });
    }
}

/// Records a new state of a running operation (e.g. ROLLBACK_IN_PROGRESS).
pub(crate) async fn finish(
    shared: &Shared,
    stack: &mut Stack,
    status: ActionStatus,
    reason: String,
) {
    set_state(stack, status, &reason);
    if let Err(error) = shared
        .store
        .record_stack_transition(stack, &stack_event(stack, &reason))
        .await
    {
        // The lease then expires and the sweeper marks the stack failed.
        tracing::error!(stack_id = %stack.id, %error, "cannot record a stack transition");
    }
}

/// Records the final state of an operation and releases its lease in the
/// same transaction.
pub(crate) async fn conclude(
    stack: &mut Stack,
    status: ActionStatus,
    reason: String,
    stack_lease: lease::StackLease,
) {
    set_state(stack, status, &reason);
    stack_lease
        .finish(stack, &stack_event(stack, &reason))
        .await;
}

fn set_state(stack: &mut Stack, status: ActionStatus, reason: &str) {
    stack.status = status;
    stack.status_reason = reason.to_owned();
    stack.updated_at = ember_runtime::time::now();
    if matches!(stack.action, StackAction::Delete | StackAction::Abandon)
        && status == ActionStatus::Complete
    {
        stack.deleted_at = Some(stack.updated_at);
    }
}

pub(crate) fn operation_timeout(stack: &Stack) -> Duration {
    stack
        .timeout_mins
        .map_or(Duration::from_secs(24 * 3600), |minutes| {
            Duration::from_secs(u64::from(minutes) * 60)
        })
}

async fn run_create(
    shared: Arc<Shared>,
    mut stack: Stack,
    target: RunTarget,
    stack_lease: lease::StackLease,
    adopt_data: Option<Arc<Map<String, Value>>>,
) {
    let passed = match plugins::before(&shared, &stack, None).await {
        Ok(passed) => passed,
        Err(reason) => {
            // Nothing was created: the plugin stopped the operation first.
            conclude(&mut stack, ActionStatus::Failed, reason, stack_lease).await;
            return;
        }
    };
    let operation_action = stack.action;
    let mut rollback_plugins = None;
    let names: BTreeSet<String> = target.parsed.enabled.iter().cloned().collect();
    let operation = stack.action.as_str();
    let running = async {
        match adopt_data {
            Some(adopt_data) => {
                abandon::adopt_resources(shared.clone(), target.clone(), adopt_data).await
            }
            None => executor::create_resources(shared.clone(), target.clone(), names).await,
        }
    };
    let outcome = tokio::time::timeout(operation_timeout(&stack), running)
        .await
        .unwrap_or_else(|_| Err(format!("{} timed out", operation)));
    let (status, reason) = match outcome {
        Ok(()) => (
            ActionStatus::Complete,
            format!("Stack {operation} completed successfully"),
        ),
        Err(reason) if stack.disable_rollback => (ActionStatus::Failed, reason),
        Err(reason) => {
            // Straight from CREATE_IN_PROGRESS to ROLLBACK_IN_PROGRESS: a
            // client polling for a final state must not stop at a FAILED
            // that is about to be rolled back.
            stack.action = StackAction::Rollback;
            finish(
                &shared,
                &mut stack,
                ActionStatus::InProgress,
                format!("Stack ROLLBACK started: {reason}"),
            )
            .await;
            match plugins::before(&shared, &stack, None).await {
                Err(reason) => (ActionStatus::Failed, reason),
                Ok(rollback_passed) => {
                    let result =
                        executor::delete_resources(shared.clone(), target, StackAction::Rollback)
                            .await;
                    let outcome = match result {
                        Ok(()) => (
                            ActionStatus::Complete,
                            "Stack ROLLBACK completed successfully".to_owned(),
                        ),
                        Err(reason) => (ActionStatus::Failed, reason),
                    };
                    // The rollback's own post-operations come with the create's, below.
                    rollback_plugins = Some(rollback_passed);
                    outcome
                }
            }
        }
    };
    conclude(&mut stack, status, reason, stack_lease).await;
    plugins::after(&shared, &stack, operation_action, passed).await;
    if let Some(rollback_passed) = rollback_plugins {
        plugins::after(&shared, &stack, StackAction::Rollback, rollback_passed).await;
    }
}

async fn run_delete(
    shared: Arc<Shared>,
    mut stack: Stack,
    target: RunTarget,
    stack_lease: lease::StackLease,
) {
    let passed = match plugins::before(&shared, &stack, None).await {
        Ok(passed) => passed,
        Err(reason) => {
            conclude(&mut stack, ActionStatus::Failed, reason, stack_lease).await;
            return;
        }
    };
    let deleting = async {
        executor::delete_resources(shared.clone(), target.clone(), StackAction::Delete).await?;
        update::retire_superseded(&shared, &target).await
    };
    let outcome = tokio::time::timeout(operation_timeout(&stack), deleting)
        .await
        .unwrap_or_else(|_| Err("Delete timed out".to_owned()));
    let (status, reason) = match outcome {
        Ok(()) => (
            ActionStatus::Complete,
            "Stack DELETE completed successfully".to_owned(),
        ),
        Err(reason) => (ActionStatus::Failed, reason),
    };
    conclude(&mut stack, status, reason, stack_lease).await;
    plugins::after(&shared, &stack, StackAction::Delete, passed).await;
}
