//! The stack a run acts on, the resources as the run sees them, and the
//! one way a resource's transition is recorded.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use uuid::Uuid;

use crate::domain::{ActionStatus, Event, Resource, StackAction};
use crate::resources::ResourceFailure;
use crate::stacks::definition::ParsedStack;
use crate::stacks::failure::{RunFailure, RunResult, resource_reason};

use super::stack_engine::StackEngine;

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
            if let Err(error) = crate::stacks::writer::answer(committed).await {
                let failure = RunFailure::from(error);
                RunFailure::keep_worst(&mut first_failure, failure);
            }
        }
        first_failure.map_or(Ok(()), Err)
    }
}

/// A copy of every resource's state: O(n) — for a whole-stack view at the
/// start of a run, never per resource (that made a run O(n²)).
pub(in crate::stacks) fn snapshot(resources: &ResourceStates) -> BTreeMap<String, Resource> {
    with_states(resources, BTreeMap::clone)
}

/// Runs `read` on the states under their lock (it must not wait on
/// anything): resolving one resource's properties reads a few others,
/// without copying them all.
pub(in crate::stacks) fn with_states<R>(
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
pub(in crate::stacks) fn created(target: &RunTarget, name: &str) -> bool {
    current(&target.resources, name).is_some_and(|row| {
        row.action == StackAction::Create && row.status == ActionStatus::Complete
    })
}

pub(in crate::stacks) fn current(resources: &ResourceStates, name: &str) -> Option<Resource> {
    with_states(resources, |states| states.get(name).cloned())
}

pub(in crate::stacks) fn store_state(resources: &ResourceStates, resource: Resource) {
    let mut guard = match resources.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    guard.insert(resource.name.clone(), resource);
}

pub(in crate::stacks) async fn transition(
    engine: &StackEngine,
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
    if status == ActionStatus::InProgress && acts_outside_its_row(engine, &resource) {
        // Durable before the resource is acted on: a crash then knows it
        // was in progress. It also proves every transition queued before it
        // committed (the writer commits in order), the predecessors' ends
        // included — so no outside effect ever rests on state that is not
        // yet durable.
        engine
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
        let committed = engine
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

/// Records `resource` FAILED for `reason` and fails the run in Heat's
/// words: `Resource UPDATE failed: resources.web: …`.
pub(in crate::stacks) async fn fail_step(
    engine: &StackEngine,
    target: &RunTarget,
    resource: Resource,
    action: StackAction,
    reason: String,
) -> RunResult {
    transition(
        engine,
        target,
        resource,
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

/// Ends the step `in_progress` began: COMPLETE as `done` makes it of what
/// the resource type answered, or FAILED with the type's reason (named
/// after the resource; a store failure stops the run as it is).
pub(in crate::stacks) async fn end_step<T>(
    engine: &StackEngine,
    target: &RunTarget,
    in_progress: Resource,
    action: StackAction,
    answered: Result<T, ResourceFailure>,
    done: impl FnOnce(Resource, T) -> Resource,
) -> RunResult {
    match answered {
        Ok(answer) => {
            let done = done(in_progress, answer);
            transition(
                engine,
                target,
                done,
                action,
                ActionStatus::Complete,
                "state changed",
            )
            .await?;
            Ok(())
        }
        Err(failure) => {
            let reason = format!(
                "resources.{}: {}",
                in_progress.name,
                resource_reason(failure)?
            );
            fail_step(engine, target, in_progress, action, reason).await
        }
    }
}

/// Whether acting on `resource` can change anything beyond its row (an
/// unknown type is assumed to).
fn acts_outside_its_row(engine: &StackEngine, resource: &Resource) -> bool {
    engine
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
