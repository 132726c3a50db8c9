//! Stack update (PUT: a whole new definition; PATCH: changes on top of the
//! current one). Each resource is compared with what it was built from:
//! unchanged ones are left alone, changes their type allows are made in
//! place, anything else — and every resource in a FAILED state — is
//! replaced: the new one is created first, the old one deleted at the end.
//! A failed or cancelled update rolls back to the previous definition unless
//! rollback is disabled (cancel_update always rolls back).
//!
//! `plan` works out the definition an update moves to, `run` runs it,
//! `rollback` moves a failed one back, `resources` brings each resource
//! to the target (in place, replaced, or retired), `cancel` stops a
//! running one, and `resume` continues one an engine handed back or left
//! behind.

mod cancel;
mod plan;
mod resources;
mod resume;
mod rollback;
mod run;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ember_runtime::Identity;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::definition::ParsedStack;
use super::executor::{RunTarget, snapshot};
use super::{
    LeaseHolder, LeaseSeen, StackCaller, StackOperation, StackOperations, lease, stack_event,
};
use crate::domain::template::StackIdentity;
use crate::domain::{ActionStatus, Resource, Stack, StackAction, StackDefinition};
use crate::error::{Error, Result};
use crate::store::{LeaseFence, OperationStart, StartWrites};

pub(super) use plan::updated_definition;
pub(super) use resources::retire_superseded;
pub(super) use resume::{resume_rollback, resume_update};
use run::run_update;

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
    /// A template the engine made itself (a group's nested stack), taken
    /// as it is instead of `template`: the size limit is on users' text,
    /// and a group of thousands of members is larger.
    pub generated_template: Option<Value>,
}

impl StackOperations {
    pub async fn update_stack(&self, identity: &Identity, request: UpdateStack) -> Result<Stack> {
        let (found, lease_seen) = self
            .find_stack_with_free_lease(identity, &request.name_or_id)
            .await?;
        let caller = StackCaller::User(identity);
        self.admit(&found, StackOperation::Update, caller).await?;
        // The operation counts against the concurrent ones here; the size of
        // the new template once it is parsed, below.
        self.admit_quotas(&found, 0, false).await?;
        let (stack, run) = self
            .begin_update_stack_as(found, lease_seen, &request, caller, UpdateKind::Update)
            .await?;
        self.engine.spawn_run(run);
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
        self.begin_update_stack_as(
            found,
            LeaseSeen::Unknown,
            request,
            caller,
            UpdateKind::Update,
        )
        .await
    }

    /// [`Self::begin_update_stack`] for an update or a restore, given what
    /// the caller saw of the lease as it read `found`.
    pub(crate) async fn begin_update_stack_as(
        &self,
        found: Stack,
        lease_seen: LeaseSeen,
        request: &UpdateStack,
        caller: StackCaller<'_>,
        kind: UpdateKind,
    ) -> Result<(Stack, super::Run)> {
        let started = match self
            .start_update_at_once(&found, lease_seen, request, caller, &kind)
            .await?
        {
            Some(started) => started,
            None => self.start_update(found, request, caller, &kind).await?,
        };
        let cancel = CancellationToken::new();
        self.engine
            .stops
            .register_update(started.stack.id, cancel.clone());
        let run: super::Run = Box::pin(run_update(
            self.engine.clone(),
            started.stack.clone(),
            started.target,
            started.previous,
            started.stack_lease,
            cancel,
            kind,
        ));
        Ok((started.stack, run))
    }

    /// The usual case in one commit, as a delete's (see
    /// `start_delete_at_once`): the lease is seen free, the definition and
    /// the resources are read after that, and the lease is taken — the
    /// update's start recorded in the same transaction — only if no
    /// operation took it in between. `None`, nothing written, when the
    /// lease is held or moved on: then [`Self::start_update`].
    async fn start_update_at_once(
        &self,
        found: &Stack,
        lease_seen: LeaseSeen,
        request: &UpdateStack,
        caller: StackCaller<'_>,
        kind: &UpdateKind,
    ) -> Result<Option<StartedUpdate>> {
        let (generation, stack) = match lease_seen {
            LeaseSeen::FreeAt(generation) => (generation, found.clone()),
            LeaseSeen::NotFree => return Ok(None),
            LeaseSeen::Unknown => {
                let seen_at = ember_runtime::time::now();
                let Some(generation) = self
                    .store()
                    .free_lease_generation(found.id, seen_at)
                    .await?
                else {
                    return Ok(None);
                };
                let stack = self.read_stack(found.id).await?;
                self.admit(&stack, kind.operation(), caller).await?;
                (generation, stack)
            }
        };
        let plan = self.plan_update(&stack, request).await?;
        let rows = self.store().list_resources(stack.id).await?;
        let holder = uuid::Uuid::new_v4();
        let fence = LeaseFence::after_take(stack.id, generation, holder);
        let (started, definition, new_resources) =
            StartedUpdate::prepare(stack, plan, rows, fence, request, kind);
        let writes = StartWrites::Update {
            stack: started.stack.clone(),
            definition,
            new_resources,
            event: stack_event(&started.stack, &started.stack.status_reason),
        };
        let start = OperationStart {
            generation,
            holder,
            writes,
        };
        let taken = self
            .engine
            .take_lease_at(started.stack.id, LeaseHolder::Action(kind.action()), start)
            .await?;
        Ok(taken.map(|fence| started.held(self.engine.hold_lease(fence))))
    }

    /// Plans the update from the definition as it is now, then takes the
    /// lease, reads the stack and its resources under it and records the
    /// update as started.
    async fn start_update(
        &self,
        found: Stack,
        request: &UpdateStack,
        caller: StackCaller<'_>,
        kind: &UpdateKind,
    ) -> Result<StartedUpdate> {
        let plan = self.plan_update(&found, request).await?;
        let stack_lease = self
            .engine
            .take_lease(found.id, &found.name, LeaseHolder::Action(kind.action()))
            .await?;
        let fence = stack_lease.fence();
        let prepared = async {
            let stack = self.read_stack(found.id).await?;
            self.admit(&stack, kind.operation(), caller).await?;
            // An update that ended between the plan and the take gave the
            // stack a new definition: plan again from it (a PATCH merges
            // with it).
            let plan = if plan.version == stack.definition_version {
                plan
            } else {
                self.plan_update(&stack, request).await?
            };
            let rows = self.store().list_resources(stack.id).await?;
            let (started, definition, new_rows) =
                StartedUpdate::prepare(stack, plan, rows, fence, request, kind);
            self.store()
                .begin_stack_update(
                    &started.stack,
                    &definition,
                    &new_rows,
                    &stack_event(&started.stack, &started.stack.status_reason),
                    fence,
                )
                .await?;
            Ok(started)
        };
        let (started, stack_lease) = stack_lease.start(prepared).await?;
        Ok(started.held(stack_lease))
    }

    /// The definition `stack` moves to, parsed and checked against the
    /// project's quota, and the one it moves away from.
    async fn plan_update(&self, stack: &Stack, request: &UpdateStack) -> Result<UpdatePlan> {
        let (current_definition, version) =
            self.store().load_versioned_definition(stack.id).await?;
        let definition = updated_definition(&current_definition, request)?;
        let identity_of_stack = StackIdentity {
            stack_name: stack.name.clone(),
            stack_id: stack.id.to_string(),
            project_id: stack.project_id.clone(),
        };
        let parsed = ParsedStack::build(
            &definition,
            identity_of_stack.clone(),
            &self.engine.registry,
        )?;
        crate::stacks::remote::check_remote_stacks(&parsed, &definition, &self.engine.region)?;
        if let Some(quotas) = self.engine.quotas.as_ref() {
            quotas
                .admit_size(
                    &stack.project_id,
                    crate::domain::quota::QuotaKind::ResourcesPerStack,
                    self.tree_size(&parsed, &definition),
                )
                .await?;
        }
        let previous = ParsedStack::build(
            &current_definition,
            identity_of_stack,
            &self.engine.registry,
        )
        .ok();
        Ok(UpdatePlan {
            definition,
            parsed,
            previous,
            current_definition,
            version,
        })
    }

    async fn read_stack(&self, stack_id: uuid::Uuid) -> Result<Stack> {
        self.store()
            .get_stack(stack_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("stack {stack_id} not found")))
    }
}

/// An update worked out before it starts (see
/// [`StackOperations::plan_update`]).
struct UpdatePlan {
    definition: StackDefinition,
    parsed: ParsedStack,
    /// The current definition parsed (`None` if it no longer parses).
    previous: Option<ParsedStack>,
    current_definition: StackDefinition,
    /// The [`Stack::definition_version`] of `current_definition`.
    version: i64,
}

/// An update recorded as started (or about to be), with what its run
/// needs.
struct StartedUpdate<L = lease::StackLease> {
    stack: Stack,
    target: RunTarget,
    previous: Previous,
    stack_lease: L,
}

impl StartedUpdate<()> {
    /// `stack`'s state as the update starts (under `fence`), from its
    /// resources' `rows` and the `plan`; with the definition to record and
    /// rows for the resources the new template introduces.
    fn prepare(
        mut stack: Stack,
        plan: UpdatePlan,
        rows: Vec<Resource>,
        fence: LeaseFence,
        request: &UpdateStack,
        kind: &UpdateKind,
    ) -> (StartedUpdate<()>, StackDefinition, Vec<Resource>) {
        // What plugins see as "previous": the root stack before this
        // update (its view is built if a plugin asks for it).
        let before = (stack.nested_depth == 0).then(|| (stack.clone(), rows.clone()));
        let target = RunTarget::new(&stack, Arc::new(plan.parsed), rows, fence);
        let now = ember_runtime::time::now();
        let existing: BTreeSet<String> = snapshot(&target.resources).keys().cloned().collect();
        let new_rows: Vec<Resource> = target
            .parsed
            .enabled
            .iter()
            .filter(|name| !existing.contains(*name))
            .map(|name| Resource::initial(stack.id, name, &target.parsed.resource_types[name], now))
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
        // A PUT replaces the whole definition, tags included (Heat's): no
        // tags given clears them; a PATCH keeps what it does not name.
        match &request.tags {
            Some(tags) => stack.tags = tags.clone(),
            None if !request.existing => stack.tags.clear(),
            None => {}
        }
        let started = StartedUpdate {
            stack,
            target,
            previous: Previous {
                parsed: plan.previous.map(Arc::new),
                definition: plan.current_definition,
                before,
            },
            stack_lease: (),
        };
        (started, plan.definition, new_rows)
    }

    /// The started update, under `stack_lease`.
    fn held(self, stack_lease: lease::StackLease) -> StartedUpdate {
        StartedUpdate {
            stack: self.stack,
            target: self.target,
            previous: self.previous,
            stack_lease,
        }
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
pub(super) struct Previous {
    pub(super) parsed: Option<Arc<ParsedStack>>,
    pub(super) definition: StackDefinition,
    /// The root stack and its resource rows as the update found them, for
    /// the plugins' "previous" (`None` for a nested stack, and for an
    /// update resumed by another engine, which has only the definition).
    pub(super) before: Option<(Stack, Vec<Resource>)>,
}
