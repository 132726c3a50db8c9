//! Stack update (PUT: a whole new definition; PATCH: changes on top of the
//! current one). Each resource is compared with what it was built from:
//! unchanged ones are left alone, changes their type allows are made in
//! place, anything else — and every resource in a FAILED state — is
//! replaced: the new one is created first, the old one deleted at the end.
//! A failed or cancelled update rolls back to the previous definition unless
//! rollback is disabled (cancel_update always rolls back).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ember_runtime::Identity;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::definition::{ParsedStack, merge_environment_documents};
use super::executor::{
    Direction, RunTarget, Shared, create_row, current, request_for, resolve_properties, snapshot,
    transition, walk,
};
use super::failure::{RunFailure, RunResult};
use super::{
    StackCaller, StackOperation, StackOperations, conclude, lease, operation_timeout, stack_event,
};
use crate::domain::template::{DeletionPolicy, DependencyGraph, StackIdentity, parse_document};
use crate::domain::{ActionStatus, Event, Resource, Stack, StackAction, StackDefinition};
use crate::error::{Error, Result};

/// A request to update a stack, decoded from REST or gRPC.
#[derive(Debug, Clone, Default)]
pub struct UpdateStack {
    pub name_or_id: String,
    /// Empty with `existing` keeps the current template.
    pub template: String,
    pub environment: String,
    pub environment_files: Vec<String>,
    pub files: BTreeMap<String, String>,
    pub parameters: Map<String, Value>,
    pub timeout_mins: Option<u32>,
    pub disable_rollback: Option<bool>,
    /// PATCH: start from the current definition.
    pub existing: bool,
    pub clear_parameters: Vec<String>,
    pub tags: Option<Vec<String>>,
}

/// The definition the update moves the stack to.
pub(super) fn updated_definition(
    current: &StackDefinition,
    request: &UpdateStack,
) -> Result<StackDefinition> {
    let mut files = if request.existing {
        current.files.clone()
    } else {
        BTreeMap::new()
    };
    files.extend(request.files.clone());
    let template = if request.template.trim().is_empty() {
        if !request.existing {
            return Err(Error::InvalidInput(
                "template: a full update (PUT) needs a template; use PATCH to keep the current one"
                    .to_owned(),
            ));
        }
        current.template.clone()
    } else {
        Value::Object(parse_document(&request.template, "template")?)
    };
    let mut environments = Vec::new();
    if request.existing {
        environments.push(current.environment.clone());
    }
    if !request.environment.trim().is_empty() {
        environments.push(Value::Object(parse_document(
            &request.environment,
            "environment",
        )?));
    }
    for name in &request.environment_files {
        let text = files.get(name).ok_or_else(|| {
            Error::InvalidInput(format!(
                "environment_files: {name:?} is not among the files sent with the request"
            ))
        })?;
        environments.push(Value::Object(parse_document(text, "environment")?));
    }
    let mut parameters = if request.existing {
        current.parameters.clone()
    } else {
        Map::new()
    };
    for name in &request.clear_parameters {
        parameters.remove(name);
    }
    parameters.extend(request.parameters.clone());
    Ok(StackDefinition {
        template,
        environment: merge_environment_documents(environments),
        files,
        parameters,
    })
}

impl StackOperations {
    pub async fn update_stack(&self, identity: &Identity, request: UpdateStack) -> Result<Stack> {
        let found = self.find_stack(identity, &request.name_or_id).await?;
        let caller = StackCaller::User(identity);
        self.admit(&found, StackOperation::Update, caller).await?;
        // The operation counts against the concurrent ones here; the size of
        // the new template once it is parsed, below.
        self.admit_quotas(&found, 0, false).await?;
        let (stack, run) = self.begin_update_stack(found, &request, caller).await?;
        tokio::spawn(run);
        Ok(stack)
    }

    /// Validates the new definition, takes the lease, records the update as
    /// started and returns its run; the caller spawns or awaits it.
    pub(crate) async fn begin_update_stack(
        &self,
        found: Stack,
        request: &UpdateStack,
        caller: StackCaller<'_>,
    ) -> Result<(Stack, super::Run)> {
        self.begin_update_stack_as(found, request, caller, UpdateKind::Update)
            .await
    }

    /// [`Self::begin_update_stack`] for an update or a restore.
    pub(crate) async fn begin_update_stack_as(
        &self,
        found: Stack,
        request: &UpdateStack,
        caller: StackCaller<'_>,
        kind: UpdateKind,
    ) -> Result<(Stack, super::Run)> {
        let current_definition = self.store().load_definition(found.id).await?;
        let definition = updated_definition(&current_definition, request)?;
        let identity_of_stack = StackIdentity {
            stack_name: found.name.clone(),
            stack_id: found.id.to_string(),
            project_id: found.project_id.clone(),
        };
        let parsed = ParsedStack::build(
            &definition,
            identity_of_stack.clone(),
            &self.shared.registry,
        )?;
        if let Some(quotas) = self.shared.quotas.get() {
            quotas
                .admit_size(
                    &found.project_id,
                    crate::domain::quota::QuotaKind::ResourcesPerStack,
                    u64::try_from(parsed.enabled.len()).unwrap_or(u64::MAX),
                )
                .await?;
        }
        let previous = ParsedStack::build(
            &current_definition,
            identity_of_stack,
            &self.shared.registry,
        )
        .ok();

        let stack_lease = self
            .shared
            .take_lease(found.id, &found.name, kind.action().as_str())
            .await?;
        let (stack, run) = self
            .begin_update(
                found.id,
                request,
                definition,
                parsed,
                previous,
                current_definition,
                stack_lease,
                caller,
                kind,
            )
            .await?;
        Ok((stack, run))
    }

    #[allow(clippy::too_many_arguments)] // one call site; the pieces are all distinct
    async fn begin_update(
        &self,
        stack_id: uuid::Uuid,
        request: &UpdateStack,
        definition: StackDefinition,
        parsed: ParsedStack,
        previous: Option<ParsedStack>,
        previous_definition: StackDefinition,
        stack_lease: lease::StackLease,
        caller: StackCaller<'_>,
        kind: UpdateKind,
    ) -> Result<(Stack, super::Run)> {
        let fence = stack_lease.fence();
        let prepared = async {
            let mut stack = self
                .store()
                .get_stack(stack_id)
                .await?
                .ok_or_else(|| Error::NotFound(format!("stack {stack_id} not found")))?;
            self.admit(&stack, kind.operation(), caller).await?;
            let rows = self.store().list_resources(stack.id).await?;
            let target = RunTarget::new(&stack, Arc::new(parsed), rows, fence);
            let now = ember_runtime::time::now();
            let existing: BTreeSet<String> = snapshot(&target.resources).keys().cloned().collect();
            let new_rows: Vec<Resource> = target
                .parsed
                .enabled
                .iter()
                .filter(|name| !existing.contains(*name))
                .map(|name| {
                    Resource::initial(stack.id, name, &target.parsed.resource_types[name], now)
                })
                .collect();
            for row in &new_rows {
                super::executor::store_state(&target.resources, row.clone());
            }
            stack.action = kind.action();
            stack.status = ActionStatus::InProgress;
            stack.status_reason = format!("Stack {} started", kind.action().as_str());
            stack.updated_at = now;
            stack.description = target
                .parsed
                .template
                .description
                .clone()
                .unwrap_or_default();
            if let Some(minutes) = request.timeout_mins {
                stack.timeout_mins = (minutes > 0).then_some(minutes);
            }
            if let Some(disable_rollback) = request.disable_rollback {
                stack.disable_rollback = disable_rollback;
            }
            if let Some(tags) = &request.tags {
                stack.tags = tags.clone();
            }
            // What plugins see as "previous": the stack before this update.
            let previous_snapshot = if stack.nested_depth == 0 {
                Some(super::plugins::gather(&self.shared, &stack).await)
            } else {
                None
            };
            self.store()
                .begin_stack_update(
                    &stack,
                    &definition,
                    &new_rows,
                    &stack_event(&stack, &stack.status_reason),
                    fence,
                )
                .await?;
            Ok((stack, target, previous_snapshot))
        };
        let ((stack, target, previous_snapshot), stack_lease) = stack_lease.start(prepared).await?;
        let cancel = CancellationToken::new();
        self.shared.register_update(stack.id, cancel.clone());
        let previous = Previous {
            parsed: previous.map(Arc::new),
            definition: previous_definition,
            snapshot: previous_snapshot,
        };
        let run: super::Run = Box::pin(run_update(
            self.shared.clone(),
            stack.clone(),
            target,
            previous,
            stack_lease,
            cancel,
            kind,
        ));
        Ok((stack, run))
    }

    /// Stops a running update and rolls it back.
    pub async fn cancel_update(&self, identity: &Identity, name_or_id: &str) -> Result<Stack> {
        let stack = self.find_stack(identity, name_or_id).await?;
        self.admit(
            &stack,
            StackOperation::CancelUpdate,
            StackCaller::User(identity),
        )
        .await?;
        if !self.shared.cancel_update(stack.id) {
            return Err(Error::Conflict(format!(
                "the update of stack {:?} is run by another engine or just finished: try again",
                stack.name
            )));
        }
        Ok(stack)
    }
}

/// What an update is for: a new definition, or a snapshot's (a restore,
/// which also puts back the data of resources whose state is Ember's own).
#[derive(Debug, Clone)]
pub(crate) enum UpdateKind {
    Update,
    /// The snapshot's `resources` (name → its recorded state).
    Restore(Arc<Map<String, Value>>),
}

impl UpdateKind {
    fn action(&self) -> StackAction {
        match self {
            UpdateKind::Update => StackAction::Update,
            UpdateKind::Restore(_) => StackAction::Restore,
        }
    }

    fn operation(&self) -> StackOperation {
        match self {
            UpdateKind::Update => StackOperation::Update,
            UpdateKind::Restore(_) => StackOperation::Restore,
        }
    }
}

/// The stack as it was before an update: what rollback returns to and what
/// plugins see as "previous".
struct Previous {
    parsed: Option<Arc<ParsedStack>>,
    definition: StackDefinition,
    snapshot: Option<super::plugins::PluginStackView>,
}

async fn run_update(
    shared: Arc<Shared>,
    mut stack: Stack,
    target: RunTarget,
    previous: Previous,
    stack_lease: lease::StackLease,
    cancel: CancellationToken,
    kind: UpdateKind,
) {
    let Previous {
        parsed: previous,
        definition: previous_definition,
        snapshot: previous_snapshot,
    } = previous;
    let passed = match super::plugins::before(&shared, &stack, previous_snapshot).await {
        Ok(passed) => passed,
        Err(reason) => {
            shared.forget_update(stack.id);
            conclude(&mut stack, ActionStatus::Failed, reason, stack_lease).await;
            return;
        }
    };
    let old_graph = previous.as_ref().map_or_else(
        || target.parsed.graph.clone(),
        |parsed| parsed.graph.clone(),
    );
    let outcome = tokio::time::timeout(
        operation_timeout(&stack),
        update_resources(
            shared.clone(),
            target.clone(),
            old_graph,
            StackAction::Update,
            cancel.clone(),
        ),
    )
    .await
    .unwrap_or_else(|_| Err(RunFailure::Failed("Update timed out".to_owned())));
    let outcome = match (outcome, &kind) {
        (Ok(()), UpdateKind::Restore(recorded)) => {
            super::snapshots::restore_data(&shared, &target, recorded).await
        }
        (outcome, _) => outcome,
    };
    let outcome = super::executor::settled(&target, outcome).await;
    let outcome = match (outcome, previous) {
        (Err(RunFailure::LeaseLost), _) => Err(RunFailure::LeaseLost),
        // No FAILED in between: pollers must not stop before the rollback.
        (Err(failure), Some(previous)) if cancel.is_cancelled() || !stack.disable_rollback => {
            rollback(
                &shared,
                &mut stack,
                previous,
                previous_definition,
                &target,
                &failure.reason(),
            )
            .await
        }
        (outcome, _) => outcome,
    };
    shared.forget_update(stack.id);
    let Some((status, reason)) = super::final_state(outcome, stack.action.as_str()) else {
        super::stopped_by_takeover(&stack);
        return;
    };
    conclude(&mut stack, status, reason, stack_lease).await;
    super::plugins::after(&shared, &stack, kind.action(), passed).await;
}

/// Moves the stack back to `previous`: an update towards the old definition.
async fn rollback(
    shared: &Arc<Shared>,
    stack: &mut Stack,
    previous: Arc<ParsedStack>,
    previous_definition: StackDefinition,
    failed: &RunTarget,
    failure: &str,
) -> RunResult {
    stack.action = StackAction::Rollback;
    stack.status = ActionStatus::InProgress;
    stack.status_reason = format!("Stack ROLLBACK started: {failure}");
    stack.updated_at = ember_runtime::time::now();
    let rows = shared.store.list_resources(stack.id).await?;
    let target = RunTarget::new(stack, previous.clone(), rows, failed.fence);
    let existing: BTreeSet<String> = snapshot(&target.resources).keys().cloned().collect();
    let now = ember_runtime::time::now();
    let new_rows: Vec<Resource> = previous
        .enabled
        .iter()
        .filter(|name| !existing.contains(*name))
        .map(|name| Resource::initial(stack.id, name, &previous.resource_types[name], now))
        .collect();
    for row in &new_rows {
        super::executor::store_state(&target.resources, row.clone());
    }
    shared
        .store
        .begin_stack_update(
            stack,
            &previous_definition,
            &new_rows,
            &stack_event(stack, &stack.status_reason),
            target.fence,
        )
        .await?;
    let rolled_back = update_resources(
        shared.clone(),
        target.clone(),
        failed.parsed.graph.clone(),
        StackAction::Rollback,
        CancellationToken::new(),
    )
    .await;
    super::executor::settled(&target, rolled_back).await
}

/// Brings every enabled resource to the target definition, then deletes
/// resources no longer in it (dependents first, by `old_graph`) and the old
/// rows of replaced ones.
pub async fn update_resources(
    shared: Arc<Shared>,
    target: RunTarget,
    old_graph: DependencyGraph,
    action: StackAction,
    cancel: CancellationToken,
) -> RunResult {
    let names: BTreeSet<String> = target.parsed.enabled.iter().cloned().collect();
    let graph = target.parsed.graph.clone();
    walk(&graph, &names, Direction::DependenciesFirst, |name| {
        let shared = shared.clone();
        let target = target.clone();
        let cancel = cancel.clone();
        async move {
            // Breakpoint hooks stop an update of an existing resource (a
            // new one is just created), not a rollback.
            let hooked = action == StackAction::Update
                && current(&target.resources, &name)
                    .is_some_and(|row| row.action != StackAction::Init);
            if hooked {
                super::breakpoints::break_if_required(
                    &shared,
                    &target,
                    &name,
                    action,
                    "pre-update",
                )
                .await?;
            }
            update_one(&shared, &target, &name, action, &cancel).await?;
            if hooked {
                super::breakpoints::break_if_required(
                    &shared,
                    &target,
                    &name,
                    action,
                    "post-update",
                )
                .await?;
            }
            Ok(())
        }
    })
    .await?;

    let removed: BTreeSet<String> = snapshot(&target.resources)
        .keys()
        .filter(|name| !names.contains(*name))
        .cloned()
        .collect();
    walk(&old_graph, &removed, Direction::DependentsFirst, |name| {
        let shared = shared.clone();
        let target = target.clone();
        async move {
            let row = current(&target.resources, &name).ok_or_else(|| {
                RunFailure::Failed(format!("resources.{name}: no state recorded"))
            })?;
            retire(&shared, &target, row, DeletionPolicy::Delete).await
        }
    })
    .await?;
    retire_superseded(&shared, &target).await
}

/// Deletes the old rows of replaced resources and forgets them.
pub async fn retire_superseded(shared: &Arc<Shared>, target: &RunTarget) -> RunResult {
    let superseded = match target.superseded.lock() {
        Ok(mut guard) => std::mem::take(&mut *guard),
        Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
    };
    // Old rows have no dependents left: they go in parallel (bounded), so
    // their transitions share group commits instead of one commit each.
    use futures::StreamExt;
    let results: Vec<(Resource, RunResult)> = futures::stream::iter(superseded)
        .map(|row| async move {
            let result = retire(shared, target, row.clone(), DeletionPolicy::Delete).await;
            (row, result)
        })
        .buffer_unordered(PARALLEL_RETIREMENTS)
        .collect()
        .await;
    let mut first_failure = None;
    for (row, result) in results {
        if let Err(failure) = result {
            RunFailure::keep_worst(&mut first_failure, failure);
            if let Ok(mut guard) = target.superseded.lock() {
                guard.push(row);
            }
        }
    }
    first_failure.map_or(Ok(()), Err)
}

/// How many replaced rows are deleted at once.
const PARALLEL_RETIREMENTS: usize = 64;

/// Deletes one resource for good: DELETE_IN_PROGRESS, the type's delete,
/// then the row goes (its events stay).
async fn retire(
    shared: &Shared,
    target: &RunTarget,
    row: Resource,
    policy: DeletionPolicy,
) -> RunResult {
    let name = row.name.clone();
    let never_created = row.action == StackAction::Init || row.physical_id.is_none();
    let now = ember_runtime::time::now();
    let mut deleting = row.clone();
    deleting.action = StackAction::Delete;
    deleting.status = ActionStatus::InProgress;
    deleting.status_reason = "state changed".to_owned();
    deleting.updated_at = now;
    shared
        .writer
        .record(
            target.fence,
            deleting.clone(),
            Event::for_resource(&deleting, now),
        )
        .await?;
    if !never_created && policy == DeletionPolicy::Delete {
        let result = match shared.registry.get(&deleting.type_name) {
            Some(resource_type) => resource_type
                .delete(&deleting)
                .await
                .map_err(|failure| failure.0),
            None => Err(format!("unknown resource type {:?}", deleting.type_name)),
        };
        if let Err(reason) = result {
            let reason = format!("resources.{name}: {reason}");
            let mut failed = deleting;
            failed.status = ActionStatus::Failed;
            failed.status_reason = reason.clone();
            failed.updated_at = ember_runtime::time::now();
            shared
                .writer
                .record(
                    target.fence,
                    failed.clone(),
                    Event::for_resource(&failed, failed.updated_at),
                )
                .await?;
            return Err(RunFailure::Failed(format!(
                "Resource DELETE failed: {reason}"
            )));
        }
    }
    let mut deleted = deleting;
    deleted.status = ActionStatus::Complete;
    deleted.updated_at = ember_runtime::time::now();
    let event = Event::for_resource(&deleted, deleted.updated_at);
    shared
        .store
        .retire_resources(&[(deleted, event)], target.fence)
        .await?;
    // Forget it unless a newer row of the same name is the current one.
    if let Ok(mut guard) = target.resources.lock()
        && guard.get(&name).is_some_and(|current| current.id == row.id)
    {
        guard.remove(&name);
    }
    Ok(())
}

async fn update_one(
    shared: &Shared,
    target: &RunTarget,
    name: &str,
    action: StackAction,
    cancel: &CancellationToken,
) -> RunResult {
    if cancel.is_cancelled() {
        return Err(RunFailure::Failed("Stack UPDATE cancelled".to_owned()));
    }
    let current = current(&target.resources, name)
        .ok_or_else(|| format!("resources.{name}: no state recorded"))?;
    let new_type = target
        .parsed
        .resource_types
        .get(name)
        .cloned()
        .ok_or_else(|| format!("resources.{name}: no type"))?;
    if current.action == StackAction::Init {
        return create_row(shared, target, current, "state changed").await;
    }
    // An external resource is not the stack's to change: its id cannot
    // change (Heat refuses it), and its properties are not applied.
    match super::executor::external_id_of(shared, target, name) {
        Ok(None) => {}
        Ok(Some(external_id)) if current.physical_id.as_deref() == Some(external_id.as_str()) => {
            return Ok(());
        }
        outcome => {
            let reason = match outcome {
                Err(reason) => reason,
                _ => format!(
                    "resources.{name}.external_id: an external resource's id cannot be updated (it is {:?})",
                    current.physical_id.as_deref().unwrap_or_default()
                ),
            };
            transition(
                shared,
                target,
                current,
                action,
                ActionStatus::Failed,
                &reason,
            )
            .await?;
            return Err(RunFailure::Failed(format!(
                "Resource {} failed: {reason}",
                action.as_str()
            )));
        }
    }
    let properties = match resolve_properties(shared, target, name, &new_type) {
        Ok(properties) => properties,
        Err(reason) => {
            transition(
                shared,
                target,
                current,
                action,
                ActionStatus::Failed,
                &reason,
            )
            .await?;
            return Err(RunFailure::Failed(format!(
                "Resource {} failed: {reason}",
                action.as_str()
            )));
        }
    };
    let resource_type = shared
        .registry
        .get(&new_type)
        .ok_or_else(|| format!("resources.{name}: unknown resource type {new_type:?}"))?;
    let old_properties = current.properties.as_object().cloned().unwrap_or_default();
    // A nested stack is replaced only when marked unhealthy; any other
    // failure is repaired by updating it, which replaces its failed members.
    let nested = resource_type.is_nested_stack();
    let failed = if nested {
        (current.action, current.status) == (StackAction::Check, ActionStatus::Failed)
    } else {
        current.status == ActionStatus::Failed
    };
    let replace = current.type_name != new_type
        || failed
        || current.physical_id.is_none()
        || resource_type.needs_replacement(&old_properties, &properties);
    if !replace {
        if old_properties == properties && !nested {
            return Ok(());
        }
        let in_progress = transition(
            shared,
            target,
            current,
            action,
            ActionStatus::InProgress,
            "state changed",
        )
        .await?;
        return match resource_type
            .update(&request_for(target, name, properties.clone()), &in_progress)
            .await
        {
            Ok(outcome) => {
                let mut updated = in_progress;
                updated.physical_id = Some(outcome.physical_id);
                updated.attributes = Value::Object(outcome.attributes);
                updated.data = outcome.data;
                updated.properties = Value::Object(properties);
                transition(
                    shared,
                    target,
                    updated,
                    action,
                    ActionStatus::Complete,
                    "state changed",
                )
                .await?;
                Ok(())
            }
            Err(failure) => {
                let reason = format!("resources.{name}: {failure}");
                transition(
                    shared,
                    target,
                    in_progress,
                    action,
                    ActionStatus::Failed,
                    &reason,
                )
                .await?;
                Err(RunFailure::Failed(format!(
                    "Resource {} failed: {reason}",
                    action.as_str()
                )))
            }
        };
    }
    // Replacement: the new resource first; the old row is deleted at the end.
    let replaced = current
        .physical_id
        .clone()
        .unwrap_or_else(|| "a failed resource".to_owned());
    if let Ok(mut guard) = target.superseded.lock() {
        guard.push(current);
    }
    let now = ember_runtime::time::now();
    let fresh = Resource::initial(target.stack_id, name, &new_type, now);
    create_row(shared, target, fresh, &format!("replacing {replaced}"))
        .await
        .map_err(|failure| match failure {
            RunFailure::Failed(reason) => RunFailure::Failed(reason.replacen(
                "Resource CREATE failed",
                &format!("Resource {} failed", action.as_str()),
                1,
            )),
            other => other,
        })
}
