//! The engine as host of nested stacks: a parent's resource creates,
//! updates, deletes, suspends, resumes or checks its nested stack through
//! the same operations as any stack, and waits for them. A nested stack
//! inherits its parent's files and environment, belongs to the same project
//! and is listed with `nested_depth`.
//!
//! A nested stack's id derives from its parent resource's row
//! ([`ResourceRequest::derived_id`]), so a parent's step resumed after its
//! engine went away finds the nested stack the earlier attempt made, and
//! continues (or waits for) its operation instead of making a second one;
//! an update, delete, suspend, resume or check first brings an operation
//! left unfinished on the nested stack to its end (see `orphans.rs`). A
//! suspend or resume whose nested stack is suspended (resumed) already is
//! done, as Heat does for a stack suspended already: the parent's
//! step taken over after the nested stack finished never does it twice.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::definition::ParsedStack;
use super::lease::WhenBusy;
use super::orphans::TakenOver;
use super::{StackCaller, StackOperation, StackOperations, UpdateStack};
use crate::domain::template::{StackIdentity, child_environment};
use crate::domain::{ActionStatus, Resource, Stack, StackAction, StackDefinition, StackWideAction};
use crate::error::Result as StoreResult;
use crate::resources::{
    LockChange, LockRequest, MAX_NESTED_DEPTH, NESTED_STACK_KIND, NestedDefinition,
    NestedStackHost, NestedStackOutcome, NestedTemplate, ResourceFailure, ResourceRequest,
};

/// How often a parent's step looks again at a nested stack whose lease its
/// engine still holds (or just gave up).
const NESTED_SETTLE_POLL: Duration = Duration::from_millis(100);

/// How often a delete asks again, through the lease, that an operation
/// another engine runs on a nested stack stop.
const NESTED_STOP_ASKED_EVERY: Duration = Duration::from_secs(1);

impl StackOperations {
    /// Brings nested stack `stack_id` to the end of any operation an engine
    /// that went away left unfinished, before its parent's step acts on it:
    /// while its lease is live its engine may still be running it, so this
    /// waits; once expired (or released) it takes the operation over and
    /// resumes it — or marks it failed, saying why — and waits for that
    /// run. A stack not in progress is left as it is. Bounded by the
    /// parent's operation timeout.
    async fn settle_nested_stack(&self, stack_id: Uuid) -> StoreResult<()> {
        self.settle_nested_stack_stopping(stack_id, false).await
    }

    /// [`Self::settle_nested_stack`]; with `stop`, for a delete, the
    /// operation running on it is asked to stop on every look — here, or
    /// through its lease by the engine running it (at most once per
    /// [`NESTED_STOP_ASKED_EVERY`]) — as a delete of the stack itself asks:
    /// a run registers as it starts, after its stack's row is written, so
    /// one ask can come before there is anything to stop.
    async fn settle_nested_stack_stopping(&self, stack_id: Uuid, stop: bool) -> StoreResult<()> {
        let mut last_ask: Option<std::time::Instant> = None;
        loop {
            let now = ember_runtime::time::now();
            match self.store().orphan_candidate(stack_id, now).await? {
                Some(candidate) => match self.take_over_orphan(&candidate).await? {
                    TakenOver::Resumed(run)
                        if stop
                            && crate::domain::admission::stack::stops_running(
                                &candidate.stack,
                                StackOperation::Delete,
                            ) =>
                    {
                        // Resumed here, and stopped here: the delete does
                        // not wait for a create that may never end.
                        tracing::warn!(%stack_id, "a parent's delete resumed its nested stack's operation to stop it");
                        self.stopping(stack_id, run).await;
                    }
                    TakenOver::Resumed(run) => {
                        tracing::warn!(%stack_id, "a parent's resumed step continues its nested stack's operation");
                        run.await;
                    }
                    TakenOver::Failed => return Ok(()),
                    TakenOver::Moved => tokio::time::sleep(NESTED_SETTLE_POLL).await,
                },
                None => {
                    let Some(stack) = self.store().get_stack(stack_id).await? else {
                        return Ok(());
                    };
                    if stack.status != ActionStatus::InProgress {
                        return Ok(());
                    }
                    if stop
                        && crate::domain::admission::stack::stops_running(
                            &stack,
                            StackOperation::Delete,
                        )
                        && !self.engine.stops.stop(stack_id)
                        && last_ask.is_none_or(|at| at.elapsed() >= NESTED_STOP_ASKED_EVERY)
                    {
                        last_ask = Some(std::time::Instant::now());
                        self.store()
                            .request_stack_stop(
                                stack_id,
                                crate::store::StopRequest::Delete,
                                ember_runtime::time::now(),
                            )
                            .await?;
                    }
                    tokio::time::sleep(NESTED_SETTLE_POLL).await;
                }
            }
        }
    }

    /// Waits for `run`, an operation on `stack_id` this engine runs,
    /// asking it to stop for a delete on every look until it ends (it
    /// registers as it starts).
    async fn stopping(&self, stack_id: Uuid, run: super::Run) {
        tokio::pin!(run);
        loop {
            self.engine.stops.stop(stack_id);
            tokio::select! {
                () = &mut run => return,
                () = tokio::time::sleep(NESTED_SETTLE_POLL) => {}
            }
        }
    }

    /// The nested stack's definition: its template, its parameters, the
    /// parent's files, and the parent's environment as the nested stack of
    /// resource `owner` gets it ([`child_environment`]).
    async fn nested_definition(
        &self,
        parent_id: Uuid,
        owner: &str,
        nested: &NestedDefinition,
    ) -> Result<StackDefinition, ResourceFailure> {
        let parent = self.store().load_definition(parent_id).await?;
        let template = match &nested.template {
            NestedTemplate::Inline(template) => template.clone(),
            NestedTemplate::File(file) => {
                let text = parent.files.get(file).ok_or_else(|| {
                    ResourceFailure::new(format!(
                        "template file {file:?} is not among the stack's files"
                    ))
                })?;
                Value::Object(
                    crate::domain::template::parse_document(text, "template")
                        .map_err(|error| ResourceFailure::new(error.to_string()))?,
                )
            }
        };
        Ok(StackDefinition {
            template,
            environment: child_environment(&parent.environment, owner),
            files: parent.files,
            parameters: nested.parameters.clone(),
        })
    }

    /// Reads a nested stack after its operation and turns its state into the
    /// parent resource's outcome.
    async fn nested_outcome(
        &self,
        stack_id: Uuid,
        expected: StackAction,
    ) -> Result<NestedStackOutcome, ResourceFailure> {
        let stack =
            self.store().get_stack(stack_id).await?.ok_or_else(|| {
                ResourceFailure::new(format!("nested stack {stack_id} disappeared"))
            })?;
        if stack.action != expected || stack.status != ActionStatus::Complete {
            return Err(ResourceFailure::new(stack.status_reason));
        }
        let mut outputs = Map::new();
        let mut output_errors = Map::new();
        for output in self.outputs(&stack).await? {
            let value = output.value.unwrap_or_else(|error| {
                output_errors.insert(output.key.clone(), Value::String(error));
                Value::Null
            });
            outputs.insert(output.key, value);
        }
        Ok(NestedStackOutcome {
            stack_id,
            stack_name: stack.name,
            outputs,
            output_errors,
        })
    }

    async fn nested_stack(&self, stack_id: Uuid) -> Result<Option<Stack>, ResourceFailure> {
        self.store()
            .get_stack(stack_id)
            .await
            .map_err(ResourceFailure::from)
    }

    /// The create of nested stack `made`, which an earlier attempt of its
    /// parent's step made: its operation continued to its end (see
    /// [`StackOperations::settle_nested_stack`]), then its outcome — a
    /// create that failed fails the step.
    async fn resume_nested_create(
        &self,
        made: Stack,
    ) -> Result<NestedStackOutcome, ResourceFailure> {
        tracing::info!(stack_id = %made.id, "found the nested stack an earlier attempt made");
        self.settle_nested_stack(made.id).await?;
        self.nested_outcome(made.id, StackAction::Create).await
    }
}

#[async_trait]
impl NestedStackHost for StackOperations {
    async fn create_nested_stack(
        &self,
        owner: &ResourceRequest,
        nested: NestedDefinition,
    ) -> Result<NestedStackOutcome, ResourceFailure> {
        let depth = owner.nested_depth + 1;
        let limit = self.nesting_limit(&owner.project_id).await?;
        if depth > limit {
            let why = if limit < MAX_NESTED_DEPTH {
                format!("the project's nested_depth quota is {limit}")
            } else {
                "does a template include itself?".to_owned()
            };
            return Err(ResourceFailure::new(format!(
                "nested stack depth {depth} exceeds the maximum of {limit} ({why})"
            )));
        }
        let mut id = owner.derived_id(NESTED_STACK_KIND);
        if let Some(made) = self.nested_stack(id).await? {
            if made.deleted_at.is_none() {
                return self.resume_nested_create(made).await;
            }
            // The row's nested stack was made and deleted since: this
            // create makes another.
            id = Uuid::new_v4();
        }
        let definition = self
            .nested_definition(owner.stack_id, &owner.resource_name, &nested)
            .await?;
        let suffix: String = id.simple().to_string().chars().take(12).collect();
        let name = format!("{}-{}-{suffix}", owner.stack_name, owner.resource_name);
        let parsed = ParsedStack::build(
            &definition,
            StackIdentity {
                stack_name: name.clone(),
                stack_id: id.to_string(),
                project_id: owner.project_id.clone(),
            },
            self.registry(),
        )
        .map_err(|error| ResourceFailure::new(error.to_string()))?;
        super::remote::check_remote_stacks(&parsed, &definition, &self.engine.region)?;
        // A nested stack runs within its parent's timeout, as in Heat
        // (its own run is also stopped when the parent's is cut short).
        let timeout_mins = self
            .nested_stack(owner.stack_id)
            .await?
            .and_then(|parent| parent.timeout_mins);
        let now = ember_runtime::time::now();
        // Rollback stays disabled: the parent decides about it.
        let stack = Stack {
            parent_id: Some(owner.stack_id),
            description: parsed.template.description.clone().unwrap_or_default(),
            timeout_mins,
            nested_depth: depth,
            parent_resource: Some(owner.resource_name.clone()),
            ..Stack::starting_create(id, &name, &owner.project_id, &owner.user_id, now)
        };
        self.admit_quotas(&stack, self.tree_size(&parsed, &definition), false)
            .await?;
        let (stack, run) = self.begin_create(stack, &definition, parsed, None).await?;
        // Its outcome is read from its record below (a run that panicked
        // left the stack in progress, as one that was cut short would).
        let _ = run.await;
        self.nested_outcome(stack.id, StackAction::Create).await
    }

    async fn update_nested_stack(
        &self,
        owner: &ResourceRequest,
        stack_id: Uuid,
        nested: NestedDefinition,
    ) -> Result<NestedStackOutcome, ResourceFailure> {
        if self.nested_stack(stack_id).await?.is_none() {
            return self.create_nested_stack(owner, nested).await;
        }
        // An operation an engine that went away left on it ends first.
        self.settle_nested_stack(stack_id).await?;
        let Some(stack) = self.nested_stack(stack_id).await? else {
            return self.create_nested_stack(owner, nested).await;
        };
        let definition = self
            .nested_definition(owner.stack_id, &owner.resource_name, &nested)
            .await?;
        let request = UpdateStack {
            name_or_id: stack_id.to_string(),
            template: String::new(),
            generated_template: Some(definition.template),
            environment: definition.environment.to_string(),
            environment_files: Vec::new(),
            files: definition.files,
            parameters: definition.parameters,
            timeout_mins: None,
            disable_rollback: Some(true),
            existing: false,
            clear_parameters: Vec::new(),
            tags: None,
        };
        let (_, run) = self
            .begin_update_stack(stack, &request, StackCaller::ParentOperation(None))
            .await?;
        run.await;
        self.nested_outcome(stack_id, StackAction::Update).await
    }

    async fn delete_nested_stack(&self, stack_id: Uuid) -> Result<(), ResourceFailure> {
        if self.nested_stack(stack_id).await?.is_none() {
            return Ok(());
        }
        // An operation running on it (a create the parent's stopped
        // create left running) is stopped, as a delete of the stack itself
        // stops it; one an engine that went away left on it (this delete,
        // resumed, included) ends first.
        self.settle_nested_stack_stopping(stack_id, true).await?;
        let Some(stack) = self.nested_stack(stack_id).await? else {
            return Ok(());
        };
        if stack.deleted_at.is_some() {
            return Ok(());
        }
        let (_, run) = self
            .begin_delete(
                stack,
                super::LeaseSeen::Unknown,
                &stack_id.to_string(),
                StackCaller::ParentOperation(None),
            )
            .await?;
        run.await;
        match self.nested_stack(stack_id).await? {
            Some(stack) if stack.deleted_at.is_none() => {
                Err(ResourceFailure::new(stack.status_reason))
            }
            _ => Ok(()),
        }
    }

    async fn lock_nested_stack(
        &self,
        stack_id: Uuid,
        request: &LockRequest,
        change: LockChange,
    ) -> Result<(), ResourceFailure> {
        let not_found = || ResourceFailure::new(format!("nested stack {stack_id} not found"));
        let found = self.nested_stack(stack_id).await?.ok_or_else(not_found)?;
        if found.status == ActionStatus::InProgress {
            // A lock or unlock an engine that went away left on it (this
            // change, when the parent's step is taken over) ends first.
            self.settle_nested_stack(stack_id).await?;
            if found.action == change.action() {
                return self
                    .nested_outcome(stack_id, change.action())
                    .await
                    .map(|_| ());
            }
        }
        let stack = self.nested_stack(stack_id).await?.ok_or_else(not_found)?;
        // A lease held though the stack is not in progress is waited out.
        let (_, run) = self
            .begin_maintenance_lock(
                stack,
                request.clone(),
                change,
                super::maintenance_lock::LockedFor::ParentStack,
                WhenBusy::WaitOutLease,
            )
            .await?;
        run.await;
        self.nested_outcome(stack_id, change.action())
            .await
            .map(|_| ())
    }

    /// A suspend or resume another engine had in flight finds the nested
    /// stack's operation that engine began: left in progress, it is
    /// continued to its end here (see
    /// [`StackOperations::settle_nested_stack`]) and its outcome is the
    /// step's; finished, the nested stack is suspended (resumed) already
    /// and the step is done. A check is run again unless the one left in
    /// progress was continued here (a continued check checks every
    /// resource again). Any other state starts the action afresh.
    async fn act_on_nested_stack(
        &self,
        stack_id: Uuid,
        wide_action: StackWideAction,
    ) -> Result<(), ResourceFailure> {
        let not_found = || ResourceFailure::new(format!("nested stack {stack_id} not found"));
        let expected = wide_action.stack_action();
        let found = self.nested_stack(stack_id).await?.ok_or_else(not_found)?;
        if found.status == ActionStatus::InProgress {
            // An operation an engine that went away left on it (this
            // action, when the parent's step is taken over) ends first.
            self.settle_nested_stack(stack_id).await?;
            if found.action == expected {
                return self.nested_outcome(stack_id, expected).await.map(|_| ());
            }
        }
        let stack = self.nested_stack(stack_id).await?.ok_or_else(not_found)?;
        if expected != StackAction::Check
            && (stack.action, stack.status) == (expected, ActionStatus::Complete)
        {
            tracing::info!(%stack_id, action = expected.as_str(), "the nested stack finished this action already");
            return Ok(());
        }
        // A lease held though the stack is not in progress is waited out.
        let (_, run) = self
            .begin_stack_wide_action(
                stack,
                &stack_id.to_string(),
                wide_action,
                StackCaller::ParentOperation(None),
                WhenBusy::WaitOutLease,
            )
            .await?;
        run.await;
        self.nested_outcome(stack_id, expected).await.map(|_| ())
    }

    async fn nested_resources(&self, stack_id: Uuid) -> Result<Vec<Resource>, ResourceFailure> {
        let rows = self.store().list_resources(stack_id).await?;
        Ok(super::mark_unhealthy::current_rows(rows)
            .into_values()
            .collect())
    }
}
