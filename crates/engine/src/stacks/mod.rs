//! Stack operations, the engine's application layer: each public method is
//! what one API call does. Changes run as background tasks holding the
//! stack lease; the call returns once the operation is recorded as started.

mod abandon;
mod actions;
mod breakpoints;
mod context;
pub mod definition;
mod executor;
mod failure;
mod lease;
mod maintenance_lock;
mod mark_unhealthy;
mod nested;
mod planning;
mod plugins;
mod preview_update;
mod queries;
mod signal;
mod snapshots;
mod update;
mod writer;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use ember_runtime::Identity;
use serde_json::{Map, Value};
use uuid::Uuid;

pub use crate::domain::admission::{StackCaller, StackOperation};
pub use actions::StackWideAction;
pub use definition::{DefinitionInput, ParsedStack, definition_from_input};
use executor::{RunTarget, Shared};
use failure::{RunFailure, RunResult};
pub use lease::{LEASE_TTL, StackLease};

/// How many orphaned stacks one sweep pass looks at.
const ORPHAN_SWEEP_BATCH: u64 = 500;
pub use maintenance_lock::OperationCheck;
pub use mark_unhealthy::DEFAULT_HEALTH_REASON;
pub use plugins::{PluginGate, RegistryUnavailable};
pub use preview_update::UpdatePreview;
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

/// How stack operations run.
pub struct StackSettings {
    /// The lifecycle plugins called around every root operation.
    pub plugins: PluginGate,
    /// How long a stack lease lives without its heartbeat: after a crash,
    /// the stacks the engine was working on are failed by the sweep once
    /// this has passed.
    pub lease_ttl: Duration,
    /// The engine process these operations run in: it holds the stack
    /// leases it takes under this id. One per process, shared with the
    /// clustering service (see `crate::serve`).
    pub engine_id: Uuid,
}

impl Default for StackSettings {
    /// No plugins, the default lease, and a new engine id (a process of
    /// its own, as tests want).
    fn default() -> Self {
        StackSettings {
            plugins: PluginGate::Disabled,
            lease_ttl: LEASE_TTL,
            engine_id: Uuid::now_v7(),
        }
    }
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
            "stack_name {:?} is invalid: it must start with a letter and contain only letters, digits, '_', '-' and '.' (at most 255)",
            ember_runtime::quote::quoted(name)
        )))
    }
}

pub(crate) fn stack_event(stack: &Stack, reason: &str) -> Event {
    Event::for_stack(stack, reason, ember_runtime::time::now())
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
        StackOperations::configured(
            store,
            registry,
            StackSettings {
                plugins,
                ..StackSettings::default()
            },
        )
    }

    /// The engine's stack operations with every setting given.
    pub fn configured(
        store: Arc<dyn StackStore>,
        registry: Arc<ResourceTypeRegistry>,
        settings: StackSettings,
    ) -> Arc<StackOperations> {
        let StackSettings {
            plugins,
            lease_ttl,
            engine_id,
        } = settings;
        let writer = writer::TransitionWriter::start(store.clone());
        Arc::new_cyclic(|this: &std::sync::Weak<StackOperations>| {
            let host: std::sync::Weak<dyn crate::resources::NestedStackHost> = this.clone();
            registry.install_nested_stack_host(host);
            StackOperations {
                shared: Arc::new(Shared {
                    store,
                    registry,
                    writer,
                    engine_id,
                    plugins,
                    running_updates: Default::default(),
                    lease_ttl,
                    quotas: Default::default(),
                    parsed_cache: Default::default(),
                }),
            }
        })
    }

    pub fn engine_id(&self) -> Uuid {
        self.shared.engine_id
    }

    /// Resource transitions queued for the next group commit.
    pub fn transitions_waiting(&self) -> usize {
        self.shared.writer.waiting()
    }

    /// Enforces `quotas` on creates and updates from now on (once, at
    /// start-up).
    pub fn enforce_quotas(&self, quotas: Arc<crate::quotas::Quotas>) {
        self.shared.quotas.install(quotas);
    }

    /// The quota checks of a stack about to hold `resources` resources;
    /// a new root stack (`new_root`) also counts against the project's
    /// stacks, and every root operation against its concurrent operations.
    pub(crate) async fn admit_quotas(
        &self,
        stack: &Stack,
        resources: usize,
        new_root: bool,
    ) -> Result<()> {
        use crate::domain::quota::QuotaKind;
        use crate::store::quotas::Usage;
        let Some(quotas) = self.shared.quotas.get() else {
            return Ok(());
        };
        let project = stack.project_id.as_str();
        let resources = u64::try_from(resources).unwrap_or(u64::MAX);
        if new_root && stack.parent_id.is_none() {
            return quotas.admit_stack_create(project, resources).await;
        }
        quotas
            .admit_size(project, QuotaKind::ResourcesPerStack, resources)
            .await?;
        if stack.parent_id.is_none() {
            quotas
                .admit(
                    project,
                    QuotaKind::ConcurrentOperations,
                    Usage::RunningOperations,
                    1,
                )
                .await?;
        }
        Ok(())
    }

    /// The deepest nesting the quotas of `project_id` allow.
    pub(crate) async fn nesting_limit(&self, project_id: &str) -> Result<u32> {
        let limit = match self.shared.quotas.get() {
            Some(quotas) => quotas.limits(project_id).await?.nested_depth,
            None => u64::from(crate::resources::MAX_NESTED_DEPTH),
        };
        Ok(u32::try_from(limit)
            .unwrap_or(u32::MAX)
            .min(crate::resources::MAX_NESTED_DEPTH))
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
        crate::domain::admission::admit(crate::domain::admission::Subject::NewStack {
            caller: identity,
        })?;
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
        self.admit_quotas(&stack, parsed.enabled.len(), true)
            .await?;
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
        let stack_lease = self
            .shared
            .take_lease(stack.id, &stack.name, "CREATE")
            .await?;
        let event = stack_event(&stack, &stack.status_reason);
        let fence = stack_lease.fence();
        let ((), stack_lease) = stack_lease
            .start(
                self.store()
                    .create_stack(&stack, definition, &resources, &event, fence),
            )
            .await?;
        let target = RunTarget::new(&stack, Arc::new(parsed), resources, fence);
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

    /// Whether `operation` may start on `stack` now for `caller`: the
    /// admission rules of `domain::admission`, with the stacks above a
    /// nested stack read for users. Asked before the lease is taken (a
    /// refusal costs no lease) and again under it.
    pub(crate) async fn admit(
        &self,
        stack: &Stack,
        operation: StackOperation,
        caller: StackCaller<'_>,
    ) -> Result<()> {
        let ancestors = match caller {
            StackCaller::User(_) if stack.parent_id.is_some() => self.ancestors(stack).await?,
            _ => Vec::new(),
        };
        crate::domain::admission::admit(crate::domain::admission::Subject::Stack {
            stack,
            ancestors: &ancestors,
            operation,
            caller,
        })
    }

    /// The stacks above `stack`, nearest first.
    async fn ancestors(&self, stack: &Stack) -> Result<Vec<Stack>> {
        let mut ancestors = Vec::new();
        let mut parent = stack.parent_id;
        while let Some(parent_id) = parent {
            if ancestors.len() > crate::resources::MAX_NESTED_DEPTH as usize {
                break;
            }
            let Some(ancestor) = self.store().get_stack(parent_id).await? else {
                break;
            };
            parent = ancestor.parent_id;
            ancestors.push(ancestor);
        }
        Ok(ancestors)
    }

    /// Starts deleting a stack and its resources.
    pub async fn delete_stack(&self, identity: &Identity, name_or_id: &str) -> Result<Stack> {
        let stack = self.find_stack(identity, name_or_id).await?;
        let caller = StackCaller::User(identity);
        self.admit(&stack, StackOperation::Delete, caller).await?;
        let (stack, run) = self.begin_delete(stack, name_or_id, caller).await?;
        tokio::spawn(run);
        Ok(stack)
    }

    /// Takes the lease, records DELETE_IN_PROGRESS and returns the run that
    /// deletes the resources; the caller spawns or awaits it.
    pub(crate) async fn begin_delete(
        &self,
        stack: Stack,
        name_or_id: &str,
        caller: StackCaller<'_>,
    ) -> Result<(Stack, Run)> {
        let stack_lease = self
            .shared
            .take_lease(stack.id, &stack.name, "DELETE")
            .await?;
        let fence = stack_lease.fence();
        let ((stack, target), stack_lease) = stack_lease
            .start(async {
                // Re-read under the lease: the state may have moved since.
                let mut stack =
                    self.store().get_stack(stack.id).await?.ok_or_else(|| {
                        Error::NotFound(format!("stack {name_or_id:?} not found"))
                    })?;
                self.admit(&stack, StackOperation::Delete, caller).await?;
                let target = self.load_target(&stack, fence).await?;
                stack.action = StackAction::Delete;
                stack.status = ActionStatus::InProgress;
                stack.status_reason = "Stack DELETE started".to_owned();
                stack.updated_at = ember_runtime::time::now();
                self.store()
                    .record_stack_transition(
                        &stack,
                        &stack_event(&stack, "Stack DELETE started"),
                        fence,
                    )
                    .await?;
                Ok((stack, target))
            })
            .await?;
        let run = Box::pin(run_delete(
            self.shared.clone(),
            stack.clone(),
            target,
            stack_lease,
        ));
        Ok((stack, run))
    }

    /// The parsed definition and current resources of a recorded stack.
    pub(crate) async fn load_target(
        &self,
        stack: &Stack,
        fence: crate::store::LeaseFence,
    ) -> Result<RunTarget> {
        let parsed = self.parse_recorded(stack).await?;
        let rows = self.store().list_resources(stack.id).await?;
        Ok(RunTarget::new(stack, parsed, rows, fence))
    }

    /// The stack's stored definition, parsed — from memory when the stack
    /// has not changed since it was last parsed (its `updated_at` moves with
    /// every definition it is given), so a `GET` does not read and parse
    /// the template each time.
    async fn parse_recorded(&self, stack: &Stack) -> Result<Arc<ParsedStack>> {
        if let Some(parsed) = self.shared.parsed_cache.get(stack.id, stack.updated_at) {
            return Ok(parsed);
        }
        let definition = self.store().load_definition(stack.id).await?;
        let parsed = ParsedStack::build(
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
        })?;
        let parsed = Arc::new(parsed);
        self.shared
            .parsed_cache
            .put(stack.id, stack.updated_at, parsed.clone());
        Ok(parsed)
    }

    /// Marks stacks whose engine went away (in progress, lease expired or
    /// released) as failed, with their in-progress resources. Each one is a
    /// single decision in the store — take the expired lease over and mark
    /// the stack only while it is still in that operation — so a stack that
    /// finished meanwhile, or that another replica swept, is left alone.
    /// Returns how many this call marked.
    pub async fn recover_orphaned_stacks(&self) -> Result<usize> {
        let now = ember_runtime::time::now();
        let candidates = self
            .store()
            .list_orphan_candidates(now, ORPHAN_SWEEP_BATCH)
            .await?;
        let mut marked = 0;
        for candidate in candidates {
            let engine = candidate.holder.map_or_else(
                || "an unknown engine".to_owned(),
                |id| format!("engine {id}"),
            );
            let reason = format!(
                "{} interrupted: {engine} went away while it ran (its stack lease expired)",
                candidate.stack.action.as_str()
            );
            if let Some(stack) = self
                .store()
                .fail_orphaned_stack(&candidate, self.shared.engine_id, now, &reason)
                .await?
            {
                marked += 1;
                tracing::warn!(stack_id = %stack.id, %reason, "orphaned stack marked failed");
            }
        }
        Ok(marked)
    }

    /// Runs [`Self::recover_orphaned_stacks`] now and then every third of
    /// the lease TTL, until `shutdown`.
    pub fn spawn_orphan_sweeper(self: &Arc<Self>, shutdown: tokio_util::sync::CancellationToken) {
        // A third of the TTL: an orphan waits at most 4/3 of it.
        self.spawn_orphan_sweeper_every(self.shared.lease_ttl / 3, shutdown);
    }

    /// [`Self::spawn_orphan_sweeper`] with another period (tests that run
    /// with short leases).
    pub fn spawn_orphan_sweeper_every(
        self: &Arc<Self>,
        period: Duration,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        let operations = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(error) = operations.recover_orphaned_stacks().await {
                    tracing::warn!(%error, "sweeping orphaned stacks failed");
                }
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(period) => {}
                }
            }
        });
    }
}

/// Records a new state of a running operation (e.g. ROLLBACK_IN_PROGRESS),
/// fenced with the run's lease.
pub(crate) async fn finish(
    shared: &Shared,
    stack: &mut Stack,
    status: ActionStatus,
    reason: String,
    fence: crate::store::LeaseFence,
) -> RunResult {
    set_state(stack, status, &reason);
    shared
        .store
        .record_stack_transition(stack, &stack_event(stack, &reason), fence)
        .await
        .map_err(RunFailure::from)
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

/// How a run's outcome ends the operation: its final status and reason,
/// or `None` when the lease was lost (another engine owns the stack now:
/// write nothing, the dropped lease guard stops the heartbeat).
pub(crate) fn final_state(outcome: RunResult, operation: &str) -> Option<(ActionStatus, String)> {
    match outcome {
        Ok(()) => Some((
            ActionStatus::Complete,
            format!("Stack {operation} completed successfully"),
        )),
        Err(RunFailure::LeaseLost) => None,
        Err(failure) => Some((ActionStatus::Failed, failure.reason())),
    }
}

/// Logs a run that stops because its lease was taken over.
pub(crate) fn stopped_by_takeover(stack: &Stack) {
    tracing::error!(stack_id = %stack.id, action = stack.action.as_str(), "stack lease taken over by another engine: this run stops without writing");
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
        .unwrap_or_else(|_| Err(RunFailure::Failed(format!("{operation} timed out"))));
    let outcome = executor::settled(&target, outcome).await;
    let outcome = match outcome {
        Err(RunFailure::LeaseLost) => Err(RunFailure::LeaseLost),
        Err(failure) if !stack.disable_rollback => {
            // Straight from CREATE_IN_PROGRESS to ROLLBACK_IN_PROGRESS: a
            // client polling for a final state must not stop at a FAILED
            // that is about to be rolled back.
            stack.action = StackAction::Rollback;
            async {
                finish(
                    &shared,
                    &mut stack,
                    ActionStatus::InProgress,
                    format!("Stack ROLLBACK started: {}", failure.reason()),
                    target.fence,
                )
                .await?;
                let rollback_passed = plugins::before(&shared, &stack, None).await?;
                // The rollback's own post-operations come with the create's, below.
                rollback_plugins = Some(rollback_passed);
                let rolled_back = executor::delete_resources(
                    shared.clone(),
                    target.clone(),
                    StackAction::Rollback,
                )
                .await;
                executor::settled(&target, rolled_back).await
            }
            .await
        }
        other => other,
    };
    let Some((status, reason)) = final_state(outcome, stack.action.as_str()) else {
        stopped_by_takeover(&stack);
        return;
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
        .unwrap_or_else(|_| Err(RunFailure::Failed("Delete timed out".to_owned())));
    let outcome = executor::settled(&target, outcome).await;
    let Some((status, reason)) = final_state(outcome, "DELETE") else {
        stopped_by_takeover(&stack);
        return;
    };
    conclude(&mut stack, status, reason, stack_lease).await;
    plugins::after(&shared, &stack, StackAction::Delete, passed).await;
}
