//! Runs resource actions along the dependency graph: a resource starts as
//! soon as everything it depends on is done (create) or everything that
//! depends on it is gone (delete), so independent resources proceed in
//! parallel. Every transition is recorded (resource row + event) before the
//! run moves on; the first failure stops new starts and lets running ones
//! finish.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};
use tokio::task::JoinSet;
use uuid::Uuid;

use super::context::{RuntimeContext, usable};
use super::definition::ParsedStack;
use super::failure::{RunFailure, RunResult};
use super::writer::TransitionWriter;
use crate::domain::template::{DeletionPolicy, DependencyGraph, resolve};
use crate::domain::{ActionStatus, Event, Resource, StackAction};
use crate::resources::{ResourceRequest, ResourceTypeRegistry, validate_properties};

/// What every run needs.
pub struct Shared {
    pub store: Arc<dyn crate::store::StackStore>,
    pub registry: Arc<ResourceTypeRegistry>,
    pub writer: TransitionWriter,
    pub engine_id: Uuid,
    /// The lifecycle plugins called around root stack operations.
    pub plugins: super::plugins::PluginGate,
    /// How long a stack lease lives without its heartbeat.
    pub lease_ttl: std::time::Duration,
    /// How long an operation runs on a stack without `timeout_mins`.
    pub action_timeout: std::time::Duration,
    /// The operations this engine runs that a delete may stop, and the
    /// updates a cancel may stop.
    pub stops: super::bounds::Stops,
    /// The region of Ember's catalog.
    pub region: String,
    /// The quotas creates and updates are checked against.
    pub quotas: crate::quotas::QuotaSlot,
    /// The audit trail of locks, refusals and break-glass.
    pub audit: crate::audit::AuditSlot,
    /// Recently parsed stored definitions.
    pub parsed_cache: ParsedCache,
    /// Cancelled when the engine shuts down: root operations that can be
    /// resumed (create, delete, update and its rollback, suspend, resume,
    /// check) start no new resource step and hand their operation back unfinished
    /// ([`RunFailure::HandedBack`]) for an engine to resume.
    pub draining: tokio_util::sync::CancellationToken,
    /// Every operation run this engine started, so that shutdown can wait
    /// for the steps in flight.
    pub runs: tokio_util::task::TaskTracker,
    /// The cloud of the openstack backend: root stacks are made with a
    /// delegation to act on it through, and deleted with it.
    pub cloud: std::sync::OnceLock<Arc<crate::cloud::OpenStackCloud>>,
}

impl Shared {
    /// Starts an operation's run, tracked for shutdown, in the context of
    /// the call that asked for it (its request id in the records the run
    /// writes, an admin's break-glass for the lifecycle plug-ins it meets).
    pub(crate) fn spawn_run<F>(&self, run: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runs
            .spawn(ember_runtime::call_context::CallContext::current().scope(run))
    }

    /// How long an operation on `stack` may run (its `timeout_mins`, else
    /// the engine's default).
    pub(crate) fn operation_timeout(&self, stack: &crate::domain::Stack) -> std::time::Duration {
        super::bounds::operation_timeout(stack, self.action_timeout)
    }

    /// Whether a step of `target`'s operation may start: not once the
    /// engine is handing its root operations back (nested stacks run on:
    /// their parent's step waits for them).
    pub(super) fn handing_back(&self, target: &RunTarget) -> bool {
        target.nested_depth == 0 && self.draining.is_cancelled()
    }
}

/// Parsed stored definitions by stack and the
/// [`definition_version`](crate::domain::Stack::definition_version) they
/// were parsed from; at most [`PARSED_CACHE_STACKS`] (then emptied: cheap,
/// and a busy engine refills it with what is read now).
#[derive(Default)]
pub struct ParsedCache(Mutex<std::collections::HashMap<Uuid, ParsedAt>>);

/// A parsed definition and the version it was parsed from.
type ParsedAt = (i64, Arc<ParsedStack>);

/// How many stacks' parsed definitions are kept.
const PARSED_CACHE_STACKS: usize = 256;

impl ParsedCache {
    pub fn get(&self, stack_id: Uuid, version: i64) -> Option<Arc<ParsedStack>> {
        let cache = self.0.lock().ok()?;
        cache
            .get(&stack_id)
            .filter(|(parsed_from, _)| *parsed_from == version)
            .map(|(_, parsed)| parsed.clone())
    }

    pub fn put(&self, stack_id: Uuid, version: i64, parsed: Arc<ParsedStack>) {
        if let Ok(mut cache) = self.0.lock() {
            if cache.len() >= PARSED_CACHE_STACKS && !cache.contains_key(&stack_id) {
                cache.clear();
            }
            cache.insert(stack_id, (version, parsed));
        }
    }
}

impl Shared {
    /// Takes the stack lease for `operation` as this engine.
    pub async fn take_lease(
        &self,
        stack_id: Uuid,
        stack_name: &str,
        holder: super::LeaseHolder,
    ) -> crate::error::Result<super::StackLease> {
        super::StackLease::take(
            &self.writer,
            &self.stops,
            stack_id,
            stack_name,
            self.engine_id,
            holder,
            self.lease_ttl,
        )
        .await
    }

    /// Takes `stack_id`'s lease for `operation` only while it is free at
    /// `start`'s generation — no operation took it since the caller saw it
    /// free there, so what the caller read after that is the stack's
    /// state — and records `start`'s writes in the same transaction: an
    /// operation's usual start, in one commit. `None`, nothing written, when the lease moved
    /// on or is held (then the caller starts as any operation does).
    pub(crate) async fn take_lease_at(
        &self,
        stack_id: Uuid,
        holder: super::LeaseHolder,
        start: crate::store::OperationStart,
    ) -> crate::error::Result<Option<crate::store::LeaseFence>> {
        self.writer
            .take_lease(self.lease_take_at(stack_id, holder, start))
            .await
    }

    /// The take [`Self::take_lease_at`] makes.
    pub(crate) fn lease_take_at(
        &self,
        stack_id: Uuid,
        holder: super::LeaseHolder,
        start: crate::store::OperationStart,
    ) -> crate::store::LeaseTake {
        let now = ember_runtime::time::now();
        crate::store::LeaseTake::new(
            stack_id,
            self.engine_id,
            holder.label(),
            now,
            super::lease::expiry_after(now, self.lease_ttl),
        )
        .starting(start)
    }

    /// The guard of a lease [`Self::take_lease_at`] took.
    pub(crate) fn hold_lease(&self, fence: crate::store::LeaseFence) -> super::StackLease {
        super::StackLease::held(self.writer.clone(), &self.stops, fence, self.lease_ttl)
    }
}

/// The resources of one stack as a run sees them, by logical name.
pub type ResourceStates = Arc<Mutex<BTreeMap<String, Resource>>>;

/// The stack a run acts on.
#[derive(Clone)]
pub struct RunTarget {
    pub stack_id: Uuid,
    pub stack_name: String,
    pub project_id: String,
    pub user_id: String,
    pub nested_depth: u32,
    pub parsed: Arc<ParsedStack>,
    pub resources: ResourceStates,
    /// Older rows of replaced resources, still to be deleted.
    pub superseded: Arc<Mutex<Vec<Resource>>>,
    /// The lease the run holds: every write it makes is fenced with it.
    pub fence: crate::store::LeaseFence,
    /// Final transitions (COMPLETE, FAILED) queued but not yet known to be
    /// committed; see [`transition`] and [`RunTarget::settle`].
    pending: Arc<Mutex<Vec<tokio::sync::oneshot::Receiver<crate::error::Result<()>>>>>,
}

impl RunTarget {
    /// The current row of each resource is its newest one; older rows of
    /// the same name were replaced and still await deletion.
    pub fn new(
        stack: &crate::domain::Stack,
        parsed: Arc<ParsedStack>,
        rows: Vec<Resource>,
        fence: crate::store::LeaseFence,
    ) -> RunTarget {
        let mut current: BTreeMap<String, Resource> = BTreeMap::new();
        let mut superseded = Vec::new();
        for row in rows {
            match current.get(&row.name) {
                Some(existing)
                    if (existing.created_at, existing.id) >= (row.created_at, row.id) =>
                {
                    superseded.push(row)
                }
                _ => {
                    if let Some(older) = current.insert(row.name.clone(), row) {
                        superseded.push(older);
                    }
                }
            }
        }
        RunTarget {
            stack_id: stack.id,
            stack_name: stack.name.clone(),
            project_id: stack.project_id.clone(),
            user_id: stack.user_id.clone(),
            nested_depth: stack.nested_depth,
            parsed,
            resources: Arc::new(Mutex::new(current)),
            superseded: Arc::new(Mutex::new(superseded)),
            fence,
            pending: Arc::default(),
        }
    }

    /// Waits until every final transition the run queued is committed;
    /// the first that failed fails the run. A run settles before any write
    /// of its own outside the transition writer (the stack's state, its
    /// end), so those never get ahead of the resources'.
    pub async fn settle(&self) -> RunResult {
        let pending = match self.pending.lock() {
            Ok(mut guard) => std::mem::take(&mut *guard),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        let mut first_failure = None;
        for committed in pending {
            if let Err(error) = super::writer::answer(committed).await {
                let failure = RunFailure::from(error);
                RunFailure::keep_worst(&mut first_failure, failure);
            }
        }
        first_failure.map_or(Ok(()), Err)
    }
}

/// A copy of every resource's state: O(n) — for a whole-stack view at the
/// start of a run, never per resource (that made a run O(n²)).
pub(super) fn snapshot(resources: &ResourceStates) -> BTreeMap<String, Resource> {
    with_states(resources, BTreeMap::clone)
}

/// Runs `read` on the states under their lock (it must not wait on
/// anything): resolving one resource's properties reads a few others,
/// without copying them all.
pub(super) fn with_states<R>(
    resources: &ResourceStates,
    read: impl FnOnce(&BTreeMap<String, Resource>) -> R,
) -> R {
    match resources.lock() {
        Ok(guard) => read(&guard),
        Err(poisoned) => read(&poisoned.into_inner()),
    }
}

/// One resource's current state.
/// Whether `name` is created already (CREATE_COMPLETE): a resumed create
/// leaves it as it is.
pub(super) fn created(target: &RunTarget, name: &str) -> bool {
    current(&target.resources, name).is_some_and(|row| {
        row.action == StackAction::Create && row.status == ActionStatus::Complete
    })
}

pub(super) fn current(resources: &ResourceStates, name: &str) -> Option<Resource> {
    with_states(resources, |states| states.get(name).cloned())
}

pub(super) fn store_state(resources: &ResourceStates, resource: Resource) {
    let mut guard = match resources.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    guard.insert(resource.name.clone(), resource);
}

pub(super) async fn transition(
    shared: &Shared,
    target: &RunTarget,
    mut resource: Resource,
    action: StackAction,
    status: ActionStatus,
    reason: &str,
) -> RunResult<Resource> {
    let now = ember_runtime::time::now();
    resource.action = action;
    resource.status = status;
    resource.status_reason = reason.to_owned();
    resource.updated_at = now;
    let event = Event::for_resource(&resource, now);
    if status == ActionStatus::InProgress && acts_outside_its_row(shared, &resource) {
        // Durable before the resource is acted on: a crash then knows it
        // was in progress. It also proves every transition queued before it
        // committed (the writer commits in order), the predecessors' ends
        // included — so no outside effect ever rests on state that is not
        // yet durable.
        shared
            .writer
            .record(target.fence, resource.clone(), event)
            .await?;
    } else {
        // An end, or the start of a resource that changes nothing outside
        // its row: the run goes on at once (the next outside effect's
        // IN_PROGRESS is committed with it or after it); the run settles
        // before writing anything else. A chain of n dependent steps costs
        // n + 1 commits, not 2n — and a chain of `OS::Heat::None`s as few
        // as the writer's batches take.
        let committed = shared
            .writer
            .enqueue(target.fence, resource.clone(), event)?;
        match target.pending.lock() {
            Ok(mut pending) => pending.push(committed),
            Err(poisoned) => poisoned.into_inner().push(committed),
        }
    }
    store_state(&target.resources, resource.clone());
    Ok(resource)
}

/// Whether acting on `resource` can change anything beyond its row (an
/// unknown type is assumed to).
fn acts_outside_its_row(shared: &Shared, resource: &Resource) -> bool {
    shared
        .registry
        .get(&resource.type_name)
        .is_none_or(|resource_type| resource_type.acts_outside_its_row())
}

/// `outcome`, once every end the run queued is committed (a commit that
/// failed fails the run; the worse failure wins).
pub async fn settled(target: &RunTarget, outcome: RunResult) -> RunResult {
    let settled = target.settle().await;
    match (outcome, settled) {
        (Ok(()), settled) => settled,
        (Err(failure), Ok(())) => Err(failure),
        (Err(failure), Err(other)) => Err(failure.worse(other)),
    }
}

/// Which way a walk follows the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A resource runs after everything it depends on (create, update, resume, check).
    DependenciesFirst,
    /// A resource runs after everything that depends on it (delete, suspend).
    DependentsFirst,
}

/// Runs `action` on each of `names` as soon as its predecessors (within
/// `names`) succeeded, in parallel otherwise. After the first failure no new
/// resource starts; running ones finish. Returns the first failure.
pub async fn walk<F, Fut>(
    graph: &DependencyGraph,
    names: &BTreeSet<String>,
    direction: Direction,
    action: F,
) -> RunResult
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = RunResult> + Send + 'static,
{
    let predecessors = |name: &str| -> BTreeSet<String> {
        match direction {
            Direction::DependenciesFirst => {
                graph.dependencies_of(name).cloned().unwrap_or_default()
            }
            Direction::DependentsFirst => graph.dependents_of(name),
        }
    };
    let successors = |name: &str| -> BTreeSet<String> {
        match direction {
            Direction::DependenciesFirst => graph.dependents_of(name),
            Direction::DependentsFirst => graph.dependencies_of(name).cloned().unwrap_or_default(),
        }
    };
    let mut waiting_on: BTreeMap<String, usize> = names
        .iter()
        .map(|name| {
            (
                name.clone(),
                predecessors(name)
                    .iter()
                    .filter(|other| names.contains(*other))
                    .count(),
            )
        })
        .collect();
    let mut ready: Vec<String> = waiting_on
        .iter()
        .filter(|(_, count)| **count == 0)
        .map(|(name, _)| name.clone())
        .collect();
    let mut running = JoinSet::new();
    let mut first_failure: Option<RunFailure> = None;
    loop {
        if first_failure.is_none() {
            for name in ready.drain(..) {
                // Boxed: the task is then a pointer, where Tokio otherwise
                // copied the whole action future (kilobytes) into the task,
                // into its await and over it as it finished — a few
                // percent of the CPU of creating stacks of small resources.
                let task = Box::pin(action(name.clone()));
                running.spawn(async move { (name, task.await) });
            }
        }
        let Some(joined) = running.join_next().await else {
            break;
        };
        match joined {
            Ok((name, Ok(()))) => {
                for next in successors(&name) {
                    if let Some(count) = waiting_on.get_mut(&next) {
                        *count = count.saturating_sub(1);
                        if *count == 0 {
                            ready.push(next);
                        }
                    }
                }
            }
            Ok((_, Err(failure))) => RunFailure::keep_worst(&mut first_failure, failure),
            Err(error) => RunFailure::keep_worst(
                &mut first_failure,
                RunFailure::Failed(format!("a resource task failed: {error}")),
            ),
        }
    }
    first_failure.map_or(Ok(()), Err)
}

/// Creates `names` (a subset of the enabled resources) in dependency order.
/// Returns the first failure as Heat words it.
pub async fn create_resources(
    shared: Arc<Shared>,
    target: RunTarget,
    names: BTreeSet<String>,
) -> RunResult {
    let graph = target.parsed.graph.clone();
    walk(&graph, &names, Direction::DependenciesFirst, |name| {
        let shared = shared.clone();
        let target = target.clone();
        async move {
            if shared.handing_back(&target) {
                return Err(RunFailure::HandedBack);
            }
            create_one(&shared, &target, &name).await
        }
    })
    .await
}

/// A resource of a stack create: breakpoint hooks (pre-create, post-create)
/// around its create.
async fn create_one(shared: &Shared, target: &RunTarget, name: &str) -> RunResult {
    let current = current(&target.resources, name)
        .ok_or_else(|| format!("resources.{name}: no state recorded"))?;
    // A create another engine had in flight passed its pre-create hook.
    if in_flight(&current).is_none() {
        super::breakpoints::break_if_required(
            shared,
            target,
            name,
            StackAction::Create,
            "pre-create",
        )
        .await?;
    }
    create_row(shared, target, current, "state changed").await?;
    super::breakpoints::break_if_required(shared, target, name, StackAction::Create, "post-create")
        .await
}

/// The resource's `external_id`, resolved: an existing physical resource
/// the stack takes as it is (Heat: not created, not updated, not deleted).
pub(super) fn external_id_of(
    shared: &Shared,
    target: &RunTarget,
    name: &str,
) -> Result<Option<String>, String> {
    let Some(expression) = target
        .parsed
        .template
        .resources
        .get(name)
        .and_then(|definition| definition.external_id.clone())
    else {
        return Ok(None);
    };
    let path = format!("resources.{name}.external_id");
    let value = with_states(&target.resources, |states| {
        let context = RuntimeContext {
            parsed: &target.parsed,
            resources: states,
            registry: &shared.registry,
        };
        resolve(&expression, &context, &path).map_err(|error| error.to_string())
    })?;
    match value {
        Value::Null => Ok(None),
        Value::String(id) if !id.trim().is_empty() && id.len() <= 255 => Ok(Some(id)),
        other => Err(format!(
            "{path}: must be the id of the existing resource (a string of 1 to 255 characters), got {}",
            ember_runtime::quote::quoted(&other.to_string())
        )),
    }
}

/// Takes an external resource into the stack: ADOPT_IN_PROGRESS, then
/// ADOPT_COMPLETE with the external id as its physical id (Heat's create
/// of a resource with `external_id`).
async fn adopt_external(
    shared: &Shared,
    target: &RunTarget,
    row: Resource,
    external_id: String,
) -> RunResult {
    let in_progress = transition(
        shared,
        target,
        row,
        StackAction::Adopt,
        ActionStatus::InProgress,
        "state changed",
    )
    .await?;
    let mut adopted = in_progress;
    adopted.physical_id = Some(external_id);
    adopted.attributes = Value::Object(Map::new());
    adopted.data = Value::Null;
    let name = adopted.name.clone();
    let found = match shared.registry.get(&adopted.type_name) {
        Some(resource_type) => {
            let request = request_for(target, &name, Map::new());
            resource_type
                .adopt(&request, &adopted)
                .await
                .map_err(|failure| failure.0)
        }
        None => Err(format!("unknown resource type {:?}", adopted.type_name)),
    };
    match found {
        Ok(outcome) => {
            adopted.attributes = Value::Object(outcome.attributes);
            adopted.data = outcome.data;
            transition(
                shared,
                target,
                adopted,
                StackAction::Adopt,
                ActionStatus::Complete,
                "external resource: not managed by the stack",
            )
            .await?;
            Ok(())
        }
        Err(reason) => {
            let reason = format!("resources.{name}.external_id: {reason}");
            transition(
                shared,
                target,
                adopted,
                StackAction::Adopt,
                ActionStatus::Failed,
                &reason,
            )
            .await?;
            Err(format!("Resource ADOPT failed: {reason}").into())
        }
    }
}

/// The reason of the IN_PROGRESS a resumed step records again.
pub(super) const RESUMED_STEP: &str =
    "state changed (resumed: the engine that started this step went away)";

/// The row as an engine that went away left it, when `row` is a step that
/// engine had in flight: still `*_IN_PROGRESS` as a run starts on it (a
/// step of this run records its IN_PROGRESS only as it starts).
pub(super) fn in_flight(row: &Resource) -> Option<Resource> {
    (row.status == ActionStatus::InProgress).then(|| row.clone())
}

/// Creates the resource `row` stands for (a new row when replacing), or
/// finishes its create when another engine had it in flight.
pub(super) async fn create_row(
    shared: &Shared,
    target: &RunTarget,
    row: Resource,
    reason: &str,
) -> RunResult {
    let name = row.name.clone();
    let name = name.as_str();
    let in_flight = in_flight(&row).filter(|row| row.action == StackAction::Create);
    let reason = if in_flight.is_some() {
        RESUMED_STEP
    } else {
        reason
    };
    match external_id_of(shared, target, name) {
        Ok(Some(external_id)) => return adopt_external(shared, target, row, external_id).await,
        Ok(None) => {}
        Err(failure) => {
            transition(
                shared,
                target,
                row,
                StackAction::Create,
                ActionStatus::Failed,
                &failure,
            )
            .await?;
            return Err(format!("Resource CREATE failed: {failure}").into());
        }
    }
    let in_progress = transition(
        shared,
        target,
        row,
        StackAction::Create,
        ActionStatus::InProgress,
        reason,
    )
    .await?;
    match create_action(shared, target, name, &in_progress, in_flight.as_ref()).await {
        Ok((properties, outcome)) => {
            let mut created = in_progress;
            created.physical_id = Some(outcome.physical_id);
            created.attributes = Value::Object(outcome.attributes);
            created.data = outcome.data;
            created.properties = Value::Object(properties);
            transition(
                shared,
                target,
                created,
                StackAction::Create,
                ActionStatus::Complete,
                "state changed",
            )
            .await?;
            Ok(())
        }
        Err(reason) => {
            transition(
                shared,
                target,
                in_progress,
                StackAction::Create,
                ActionStatus::Failed,
                &reason,
            )
            .await?;
            Err(format!("Resource CREATE failed: {reason}").into())
        }
    }
}

/// Resolves a resource's properties against the stack as it is now and
/// validates them against its type's schema.
pub(super) fn resolve_properties(
    shared: &Shared,
    target: &RunTarget,
    name: &str,
    type_name: &str,
) -> Result<Map<String, Value>, String> {
    let resource_type = shared
        .registry
        .get(type_name)
        .ok_or_else(|| format!("resources.{name}: unknown resource type {type_name:?}"))?;
    let definition = target
        .parsed
        .template
        .resources
        .get(name)
        .ok_or_else(|| format!("resources.{name}: not in the template"))?;
    let path = format!("resources.{name}.properties");
    let resolved = with_states(&target.resources, |states| {
        for dependency in target
            .parsed
            .graph
            .dependencies_of(name)
            .into_iter()
            .flatten()
        {
            if states.get(dependency).is_some_and(|state| !usable(state)) {
                return Err(format!(
                    "resources.{name}: dependency {dependency:?} is not ready"
                ));
            }
        }
        let context = RuntimeContext {
            parsed: &target.parsed,
            resources: states,
            registry: &shared.registry,
        };
        resolve(&definition.properties, &context, &path).map_err(|error| error.to_string())
    })?;
    validate_properties(resource_type.schema(), &resolved, &path)
}

pub(super) fn request_for(
    target: &RunTarget,
    name: &str,
    properties: Map<String, Value>,
) -> ResourceRequest {
    ResourceRequest {
        stack_id: target.stack_id,
        stack_name: target.stack_name.clone(),
        project_id: target.project_id.clone(),
        user_id: target.user_id.clone(),
        nested_depth: target.nested_depth,
        type_name: with_states(&target.resources, |states| {
            states
                .get(name)
                .map(|resource| resource.type_name.clone())
                .unwrap_or_default()
        }),
        resource_name: name.to_owned(),
        resource_id: with_states(&target.resources, |states| {
            states
                .get(name)
                .map(|resource| resource.id)
                .unwrap_or_default()
        }),
        properties,
    }
}

/// Resolves, validates and calls the type's create — its resumed create
/// when another engine had it `in_flight`.
async fn create_action(
    shared: &Shared,
    target: &RunTarget,
    name: &str,
    resource: &Resource,
    in_flight: Option<&Resource>,
) -> Result<(Map<String, Value>, crate::resources::ResourceOutcome), String> {
    let properties = resolve_properties(shared, target, name, &resource.type_name)?;
    let resource_type = shared.registry.get(&resource.type_name).ok_or_else(|| {
        format!(
            "resources.{name}: unknown resource type {:?}",
            resource.type_name
        )
    })?;
    let request = request_for(target, name, properties.clone());
    let outcome = match in_flight {
        Some(in_flight) => resource_type.resume_create(&request, in_flight).await,
        None => resource_type.create(&request).await,
    }
    .map_err(|failure| format!("resources.{name}: {failure}"))?;
    Ok((properties, outcome))
}

/// Deletes every resource of the run that is not yet deleted, dependents
/// first. `action` is DELETE, or ROLLBACK when undoing a failed create.
pub async fn delete_resources(
    shared: Arc<Shared>,
    target: RunTarget,
    action: StackAction,
) -> RunResult {
    // Deleted already: by this operation before it was resumed, too.
    let names: BTreeSet<String> = snapshot(&target.resources)
        .values()
        .filter(|resource| {
            let deleted = resource.status == ActionStatus::Complete
                && (resource.action == StackAction::Delete
                    || (action == StackAction::Rollback && resource.action == action));
            !deleted
        })
        .map(|resource| resource.name.clone())
        .collect();
    let graph = target.parsed.graph.clone();
    walk(&graph, &names, Direction::DependentsFirst, |name| {
        let shared = shared.clone();
        let target = target.clone();
        async move {
            // Handed back at shutdown, to be resumed (see `orphans.rs`).
            if shared.handing_back(&target) {
                return Err(RunFailure::HandedBack);
            }
            // Breakpoint hooks stop a stack delete, not a rollback.
            if action == StackAction::Delete {
                super::breakpoints::break_if_required(
                    &shared,
                    &target,
                    &name,
                    action,
                    "pre-delete",
                )
                .await?;
            }
            delete_one(&shared, &target, &name, action).await?;
            if action == StackAction::Delete {
                super::breakpoints::break_if_required(
                    &shared,
                    &target,
                    &name,
                    action,
                    "post-delete",
                )
                .await?;
            }
            Ok(())
        }
    })
    .await
}

async fn delete_one(
    shared: &Shared,
    target: &RunTarget,
    name: &str,
    action: StackAction,
) -> RunResult {
    let current = current(&target.resources, name)
        .ok_or_else(|| format!("resources.{name}: no state recorded"))?;
    // A step an engine that went away had in flight may have made
    // something even without a physical id (a create): its type looks.
    let in_flight = in_flight(&current);
    // A create that failed may have made something before it failed (a
    // server Nova put in ERROR, a volume that went to error): a type that
    // acts outside its row is asked to delete it, finding it as it finds
    // what a create in flight made.
    let failed_create = current.action == StackAction::Create
        && current.status == ActionStatus::Failed
        && shared
            .registry
            .get(&current.type_name)
            .is_some_and(|resource_type| resource_type.acts_outside_its_row());
    let never_created = current.action == StackAction::Init
        || (current.physical_id.is_none() && in_flight.is_none() && !failed_create);
    let external = target
        .parsed
        .template
        .resources
        .get(name)
        .is_some_and(|definition| definition.external_id.is_some());
    let retained = match target.parsed.template.resources.get(name) {
        Some(definition) => with_states(&target.resources, |states| {
            let context = RuntimeContext {
                parsed: &target.parsed,
                resources: states,
                registry: &shared.registry,
            };
            definition
                .resolve_deletion_policy(&context)
                .is_ok_and(|policy| policy == DeletionPolicy::Retain)
        }),
        None => false,
    };
    let in_progress = transition(
        shared,
        target,
        current,
        action,
        ActionStatus::InProgress,
        if in_flight.is_some() {
            RESUMED_STEP
        } else {
            "state changed"
        },
    )
    .await?;
    if never_created || retained || external {
        let reason = if external {
            "external resource: left in place"
        } else if retained {
            "resource retained (deletion_policy Retain)"
        } else {
            "state changed"
        };
        transition(
            shared,
            target,
            in_progress,
            action,
            ActionStatus::Complete,
            reason,
        )
        .await?;
        return Ok(());
    }
    let result = delete_action(shared, &in_progress, in_flight.as_ref()).await;
    match result {
        Ok(()) => {
            transition(
                shared,
                target,
                in_progress,
                action,
                ActionStatus::Complete,
                "state changed",
            )
            .await?;
            Ok(())
        }
        Err(reason) => {
            let reason = format!("resources.{name}: {reason}");
            transition(
                shared,
                target,
                in_progress,
                action,
                ActionStatus::Failed,
                &reason,
            )
            .await?;
            Err(format!("Resource {} failed: {reason}", action.as_str()).into())
        }
    }
}

/// Calls the type's delete of `row` — its resumed delete when another
/// engine had a step of the row `in_flight` (the row as it left it).
pub(super) async fn delete_action(
    shared: &Shared,
    row: &Resource,
    in_flight: Option<&Resource>,
) -> Result<(), String> {
    let Some(resource_type) = shared.registry.get(&row.type_name) else {
        return Err(format!("unknown resource type {:?}", row.type_name));
    };
    match in_flight {
        Some(in_flight) => resource_type.resume_delete(in_flight).await,
        None => resource_type.delete(row).await,
    }
    .map_err(|failure| failure.0)
}
