//! Creating a stack: the request checked and turned into a stack with its
//! parsed definition, the stack recorded under its new lease, and the run
//! that creates (or adopts) its resources — rolling back a failed create
//! unless rollback is disabled.

use std::collections::BTreeSet;
use std::sync::Arc;

use ember_runtime::Identity;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::bounds::within_bounds;
use super::definition::{DefinitionInput, ParsedStack, definition_from_input};
use super::executor::{RunTarget, StackEngine};
use super::failure::RunFailure;
use super::writer::{NewStackRecord, Recorded};
use super::{
    CreateStack, StackOperations, abandon, complete_or_fail, conclude, end, executor, final_state,
    finish, lease, plugins, stack_event, stop_without_final_state,
};
use crate::domain::template::StackIdentity;
use crate::domain::{ActionStatus, Resource, Stack, StackAction, StackDefinition};
use crate::error::{Error, Result};
use crate::store::{LeaseFence, LeaseRequest, NewStack};

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

impl StackOperations {
    /// Validates everything, records the stack CREATE_IN_PROGRESS with its
    /// resources INIT_COMPLETE, and starts creating them.
    pub async fn create_stack(&self, identity: &Identity, request: CreateStack) -> Result<Stack> {
        self.create_stack_delegating(identity, None, request).await
    }

    /// [`Self::create_stack`] for the engine's own work on behalf of
    /// someone whose trust it holds (a cluster node's stack, through its
    /// cluster's delegation): the stack acts through `delegation` and
    /// leaves the trust to its owner when it is deleted.
    pub async fn create_stack_acting_through(
        &self,
        identity: &Identity,
        delegation: &crate::domain::delegation::Delegation,
        request: CreateStack,
    ) -> Result<Stack> {
        crate::domain::admission::admit(crate::domain::admission::Subject::NewStack {
            caller: identity,
        })?;
        let (stack, definition, parsed) = self.prepare(identity, &request)?;
        self.admit_quotas(&stack, self.tree_size(&parsed, &definition), true)
            .await?;
        let owner = crate::domain::delegation::DelegationOwner::Stack(stack.id);
        let cloud = self.engine.cloud.as_ref();
        if let Some(cloud) = cloud {
            cloud.lend(owner, delegation).await?;
        }
        match self.begin_create(stack, &definition, parsed, None).await {
            Ok((stack, _running)) => Ok(stack),
            Err(error) => {
                if let Some(cloud) = cloud
                    && let Err(forgetting) = cloud.revoke(owner, None).await
                {
                    tracing::warn!(%forgetting, "a refused stack's delegation stays recorded");
                }
                Err(error)
            }
        }
    }

    /// [`Self::create_stack`] for a caller who came with their Keystone
    /// token (`subject_token`): on the openstack backend the stack is made
    /// with a trust from the caller, which every later step acts through.
    /// Without a token, a stack needing one is refused before anything is
    /// recorded.
    pub async fn create_stack_delegating(
        &self,
        identity: &Identity,
        subject_token: Option<&ember_runtime::identity::SubjectToken>,
        request: CreateStack,
    ) -> Result<Stack> {
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
        self.admit_quotas(&stack, self.tree_size(&parsed, &definition), true)
            .await?;
        let owner = crate::domain::delegation::DelegationOwner::Stack(stack.id);
        let cloud = self.engine.cloud.as_ref();
        if let Some(cloud) = cloud {
            cloud.delegate(owner, identity, subject_token).await?;
        }
        match self
            .begin_create(stack, &definition, parsed, adopt_data)
            .await
        {
            Ok((stack, _running)) => Ok(stack),
            Err(error) => {
                if let Some(cloud) = cloud
                    && let Err(revoking) = cloud.revoke(owner, subject_token).await
                {
                    tracing::warn!(%revoking, "a refused stack's delegation stays recorded");
                }
                Err(error)
            }
        }
    }

    /// Records a new stack (root or nested) and starts the run that
    /// creates (or adopts) its resources; returns once the stack is
    /// recorded, with the run's handle. Where the writer batches new
    /// stacks, the run starts as soon as the stack is queued, under its
    /// first lease: its first steps — every one that changes nothing but
    /// its own rows — commit with the stack's record or just after it, so
    /// that a stack of such resources is often complete as the create is
    /// answered. Nothing outside its rows is touched before the record
    /// commits: a resource that acts outside them waits for its
    /// IN_PROGRESS to commit, which the record precedes, and the plugins
    /// are only asked whether any applies ([`plugins::before_recorded`]).
    /// A refused stack (its name taken) fails the call; its run's writes
    /// are refused with it and the run stops without a trace.
    pub(crate) async fn begin_create(
        &self,
        stack: Stack,
        definition: &StackDefinition,
        parsed: ParsedStack,
        adopt_data: Option<Arc<Map<String, Value>>>,
    ) -> Result<(Stack, RunHandle)> {
        let now = stack.created_at;
        let resources: Vec<Resource> = parsed
            .enabled
            .iter()
            .map(|name| Resource::initial(stack.id, name, &parsed.resource_types[name], now))
            .collect();
        // The lease is taken in the transaction that records the stack, so
        // no sweeper can see it in progress without an owner.
        let event = stack_event(&stack, &stack.status_reason);
        let taken_at = ember_runtime::time::now();
        let record = self
            .engine
            .writer
            .queue_create_stack(NewStack {
                stack: stack.clone(),
                definition: definition.clone(),
                resources: resources.clone(),
                event,
                lease: LeaseRequest::new(
                    self.engine.engine_id,
                    lease::LeaseHolder::Action(StackAction::Create).label(),
                    taken_at,
                    lease::expiry_after(taken_at, self.engine.lease_ttl),
                ),
            })
            .await?;
        let parsed = Arc::new(parsed);
        let start = |fence: LeaseFence, recorded: Recorded| {
            let stack_lease = lease::StackLease::held(
                self.engine.writer.clone(),
                &self.engine.stops,
                fence,
                self.engine.lease_ttl,
            );
            let target = RunTarget::new(&stack, parsed.clone(), resources, fence);
            self.engine.spawn_run(run_create(
                self.engine.clone(),
                stack.clone(),
                target,
                stack_lease,
                adopt_data,
                recorded,
            ))
        };
        let run = match record {
            NewStackRecord::Recorded(fence) => start(fence, Recorded::already()),
            NewStackRecord::Queued(committed) => {
                let recorded = Recorded::pending(committed);
                let run = start(LeaseFence::first(stack.id), recorded.clone());
                recorded.outcome().await?;
                run
            }
        };
        // What the first status read would parse again.
        self.engine
            .parsed_cache
            .put(stack.id, stack.definition_version, parsed);
        Ok((stack, run))
    }

    pub(super) fn prepare(
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
            &self.engine.registry,
        )?;
        super::remote::check_remote_stacks(&parsed, &definition, &self.engine.region)?;
        let now = ember_runtime::time::now();
        let stack = Stack {
            description: parsed.template.description.clone().unwrap_or_default(),
            tags: request.tags.clone(),
            timeout_mins: request.timeout_mins.filter(|minutes| *minutes > 0),
            disable_rollback: request.disable_rollback,
            ..Stack::starting_create(
                id,
                &request.name,
                &identity.project_id,
                &identity.user_id,
                now,
            )
        };
        Ok((stack, definition, parsed))
    }
}

/// A create's run, once its stack was handed to the writer.
pub(crate) type RunHandle = tokio::task::JoinHandle<()>;

pub(super) async fn run_create(
    engine: Arc<StackEngine>,
    mut stack: Stack,
    target: RunTarget,
    stack_lease: lease::StackLease,
    adopt_data: Option<Arc<Map<String, Value>>>,
    recorded: Recorded,
) {
    let stop = engine.stops.register(stack.id);
    let passed = match plugins::before_recorded(&engine, &stack, None, &recorded).await {
        Some(Ok(passed)) => passed,
        Some(Err(reason)) => {
            // Nothing was created: the plugin stopped the operation first.
            conclude(&mut stack, ActionStatus::Failed, reason, stack_lease).await;
            return;
        }
        // The stack was refused (its name taken): nothing to do or undo.
        None => return,
    };
    // A breakpoint hook is an effect outside the run's fenced writes:
    // hooks wait until the stack is recorded.
    if target.parsed.environment.has_hooks() && !recorded.wait().await {
        return;
    }
    let operation_action = stack.action;
    let mut rollback_plugins = None;
    // A resumed create (orphans.rs) skips what the engine before it made.
    let names: BTreeSet<String> = target
        .parsed
        .enabled
        .iter()
        .filter(|name| !executor::created(&target, name))
        .cloned()
        .collect();
    let operation = stack.action.as_str();
    let running = async {
        match adopt_data {
            Some(adopt_data) => {
                abandon::adopt_resources(engine.clone(), target.clone(), adopt_data).await
            }
            None => executor::create_resources(engine.clone(), target.clone(), names).await,
        }
    };
    let outcome = within_bounds(
        (&engine, &target),
        running,
        engine.operation_timeout(&stack),
        &stop,
        &format!("{operation} timed out"),
        operation,
    )
    .await;
    let (failure, stack_lease) =
        match complete_or_fail(&mut stack, &target, outcome, operation, stack_lease).await {
            Ok(()) => {
                plugins::after(&engine, &stack, operation_action, passed).await;
                return;
            }
            Err(failed) => failed,
        };
    let outcome = match failure {
        stop @ (RunFailure::LeaseLost | RunFailure::HandedBack) => Err(stop),
        // A delete stopped it: the delete removes what it made.
        failure if !stack.disable_rollback && !stop.stopped() => {
            // Straight from CREATE_IN_PROGRESS to ROLLBACK_IN_PROGRESS: a
            // client polling for a final state must not stop at a FAILED
            // that is about to be rolled back.
            stack.action = StackAction::Rollback;
            async {
                finish(
                    &engine,
                    &mut stack,
                    ActionStatus::InProgress,
                    format!("Stack ROLLBACK started: {}", failure.reason()),
                    target.fence,
                )
                .await?;
                let rollback_passed = plugins::before(&engine, &stack, None).await?;
                // The rollback's own post-operations come with the create's, below.
                rollback_plugins = Some(rollback_passed);
                let rolled_back = within_bounds(
                    (&engine, &target),
                    executor::delete_resources(
                        engine.clone(),
                        target.clone(),
                        StackAction::Rollback,
                    ),
                    engine.operation_timeout(&stack),
                    &stop,
                    "Rollback timed out",
                    StackAction::Rollback.as_str(),
                )
                .await;
                executor::settled(&target, rolled_back).await
            }
            .await
        }
        failure => Err(failure),
    };
    let (status, reason) = match final_state(outcome, stack.action.as_str()) {
        Ok(end) => end,
        // A refused stack's writes were refused with it: no trace to leave.
        Err(_) if !recorded.wait().await => return,
        Err(stop) => return stop_without_final_state(&stack, stop, stack_lease).await,
    };
    conclude(&mut stack, status, reason, stack_lease).await;
    plugins::after(&engine, &stack, operation_action, passed).await;
    if let Some(rollback_passed) = rollback_plugins {
        plugins::after(&engine, &stack, StackAction::Rollback, rollback_passed).await;
    }
}

/// Continues the rollback of a failed create that an engine left behind
/// (see `orphans.rs`): every resource not yet deleted is deleted,
/// dependents first, and the stack ends ROLLBACK_COMPLETE (or _FAILED).
pub(super) async fn run_create_rollback(
    engine: Arc<StackEngine>,
    mut stack: Stack,
    target: RunTarget,
    stack_lease: lease::StackLease,
) {
    let passed = match plugins::before(&engine, &stack, None).await {
        Ok(passed) => passed,
        Err(reason) => {
            conclude(&mut stack, ActionStatus::Failed, reason, stack_lease).await;
            return;
        }
    };
    let rolling_back =
        executor::delete_resources(engine.clone(), target.clone(), StackAction::Rollback);
    let stop = engine.stops.register(stack.id);
    let operation = StackAction::Rollback.as_str();
    let outcome = within_bounds(
        (&engine, &target),
        rolling_back,
        engine.operation_timeout(&stack),
        &stop,
        "Rollback timed out",
        operation,
    )
    .await;
    if end(&mut stack, &target, outcome, operation, stack_lease).await {
        plugins::after(&engine, &stack, StackAction::Rollback, passed).await;
    }
}
