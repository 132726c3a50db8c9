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
use super::{StackCaller, StackOperation, StackOperations, lease, stack_event};
use crate::domain::template::StackIdentity;
use crate::domain::{ActionStatus, Resource, Stack, StackAction, StackDefinition};
use crate::error::{Error, Result};

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
        self.shared.runs.spawn(run);
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
            // What plugins see as "previous": the root stack before this
            // update (its view is built if a plugin asks for it).
            let before = (stack.nested_depth == 0).then(|| (stack.clone(), rows.clone()));
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
            self.store()
                .begin_stack_update(
                    &stack,
                    &definition,
                    &new_rows,
                    &stack_event(&stack, &stack.status_reason),
                    fence,
                )
                .await?;
            Ok((stack, target, before))
        };
        let ((stack, target, before), stack_lease) = stack_lease.start(prepared).await?;
        let cancel = CancellationToken::new();
        self.shared.register_update(stack.id, cancel.clone());
        let previous = Previous {
            parsed: previous.map(Arc::new),
            definition: previous_definition,
            before,
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
