//! Lifecycle plug-points (spec heat-stack-lifecycle-plugpoint): before a
//! root stack operation touches any resource, the plugin-registry's runner
//! calls the operator's plugins in order; a deny (or a failure of a plugin
//! in FAIL mode) ends the operation `<ACTION>_FAILED` with the plugin's
//! reason. After the operation, the plugins whose pre-operation ran get
//! their post-operation with the right `failed` flag. Every plugin call
//! becomes an event of the stack. Nested stacks are covered by their root's
//! call: the snapshot includes them. An admin's break-glass on the call
//! that started the operation runs it past the plugins that would stop it,
//! each recorded in the audit trail first ([`break_through`]).
//!
//! This module is the engine's client of the plugin-registry's runner: it
//! sends proto messages, so they are made here (`messages`) from the
//! application's own [`view::PluginStackView`] (gathered in `view`).

mod messages;
mod view;

use std::time::Duration;

use ember_proto::pluginregistry::v1 as runner_pb;
use ember_proto::pluginregistry::v1::plugin_runner_service_client::PluginRunnerServiceClient;
use ember_runtime::Identity;
use ember_runtime::channel::failure;
use ember_runtime::identity::InternalCredential;
use ember_runtime::in_process::{InProcessConnector, Upstream};
use uuid::Uuid;

use super::executor::StackEngine;
use super::writer::Recorded;
use crate::domain::{ActionStatus, Event, Stack, StackAction};
use messages::{operation_of, snapshot_message};
pub(crate) use view::{PreviousStack, gather};

/// What the engine does when the plugin-registry cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RegistryUnavailable {
    /// Fail the operation (the whole chain counts as a FAIL-mode failure).
    #[default]
    Fail,
    /// Let the operation go ahead, recording an event.
    Allow,
}

/// How stack operations reach the plugin runner.
#[derive(Clone)]
pub enum PluginGate {
    /// No registry configured: operations run without plugins.
    Disabled,
    Remote {
        client: PluginRunnerServiceClient<Upstream>,
        credential: InternalCredential,
        unavailable: RegistryUnavailable,
    },
}

/// The plugins owed a post-operation once the operation ends.
#[derive(Debug, Clone, Default)]
pub struct PassedPlugins(Vec<String>);

impl PluginGate {
    /// A gate calling the runner at `url` (connected on first use, spread
    /// over every replica the name resolves to; a call that cannot connect
    /// to one is sent again, so one stopped replica fails no operation), or
    /// through `in_process` when the registry runs in this process. Within
    /// a Tokio runtime.
    pub fn connect(
        url: &str,
        in_process: Option<&InProcessConnector>,
        credential: &str,
        unavailable: RegistryUnavailable,
    ) -> Result<PluginGate, String> {
        let upstream = Upstream::to(url, in_process, crate::peer_endpoint)
            .map_err(|error| format!("plugin_registry_url {url:?}: {error}"))?;
        Ok(PluginGate::Remote {
            client: PluginRunnerServiceClient::new(upstream),
            credential: InternalCredential::new(credential),
            unavailable,
        })
    }
}

fn request_as_owner<T>(
    stack: &Stack,
    credential: &InternalCredential,
    message: T,
) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    Identity::new(
        stack.user_id.clone(),
        stack.project_id.clone(),
        vec!["member".to_owned()],
    )
    .attach(credential, &mut request);
    request.set_timeout(Duration::from_secs(120));
    request
}

/// Runs the pre-operations for `stack`'s current action (`previous`: for
/// an update, the stack before it). `Err` carries the reason the operation
/// must fail with.
pub async fn before(
    engine: &StackEngine,
    stack: &Stack,
    previous: Option<PreviousStack<'_>>,
) -> Result<PassedPlugins, String> {
    before_recorded(engine, stack, previous, &Recorded::already())
        .await
        .unwrap_or_else(|| Err("the stack was not recorded".to_owned()))
}

/// [`before`] for an operation that may start before its stack's record
/// commits (a create run pipelined behind it): `recorded` says whether it
/// did. Whether a plugin applies is asked first, which calls none and
/// needs nothing recorded; `recorded` is awaited only before anything
/// else — a plugin sees, the snapshot gathers and an event names only a
/// stack that exists. `None` when the stack was never recorded (nothing
/// was called or written).
pub(in crate::stacks) async fn before_recorded(
    engine: &StackEngine,
    stack: &Stack,
    previous: Option<PreviousStack<'_>>,
    recorded: &Recorded,
) -> Option<Result<PassedPlugins, String>> {
    let PluginGate::Remote {
        client,
        credential,
        unavailable,
    } = &engine.plugins
    else {
        return Some(Ok(PassedPlugins::default()));
    };
    if stack.nested_depth > 0 {
        return Some(Ok(PassedPlugins::default()));
    }
    let operation = operation_of(stack.action);
    // The call that started the operation (the run keeps its context):
    // an admin's break-glass runs it through the plugins, when it can be
    // recorded.
    let context = ember_runtime::call_context::CallContext::current();
    let glass = context
        .admin_break_glass()
        .zip(engine.audit.get())
        .map(|((admin, why), trail)| BreakGlass { trail, admin, why });
    // Asked first without the snapshot: gathering it reads the whole tree,
    // and most operations meet no plugin.
    let mut request = runner_pb::RunPreOperationsRequest {
        operation: operation as i32,
        project_id: stack.project_id.clone(),
        stack: None,
        previous: None,
        snapshot_on_demand: true,
        dry_run: false,
        break_glass: glass.is_some(),
    };
    let mut called = call_pre_operations(client, credential, stack, &request).await;
    if matches!(&called, Ok(response) if response.snapshot_needed) {
        if !recorded.wait().await {
            return None;
        }
        request.stack = Some(snapshot_message(gather(engine, stack).await));
        request.previous = match previous {
            Some(previous_stack) => Some(snapshot_message(
                view::gather_previous(engine, previous_stack).await,
            )),
            None => None,
        };
        request.snapshot_on_demand = false;
        called = call_pre_operations(client, credential, stack, &request).await;
    }
    Some(match called {
        Ok(response) => {
            // Answered without the snapshot (each plugin's circuit open):
            // its calls are events of a stack that must exist first.
            if !response.calls.is_empty() && !recorded.wait().await {
                return None;
            }
            record_calls(engine, stack, &response.calls).await;
            let passed = PassedPlugins(response.post_operation_plugins);
            match &glass {
                _ if response.allowed => Ok(passed),
                Some(glass) => {
                    let stops: Vec<&runner_pb::PluginCallOutcome> = response
                        .calls
                        .iter()
                        .filter(|call| call.stopped_chain)
                        .collect();
                    match break_through(engine, stack, glass, &stops).await {
                        Ok(()) => Ok(passed),
                        Err(error) => {
                            let reason = format!("{} ({error})", response.reason);
                            unwind(engine, stack, passed, &reason).await;
                            Err(reason)
                        }
                    }
                }
                None => Err(response.reason),
            }
        }
        Err(status) => {
            if !recorded.wait().await {
                return None;
            }
            let reason = format!("the plugin registry is unavailable: {}", failure(&status));
            record_registry_failure(engine, stack, &reason).await;
            match (unavailable, &glass) {
                (RegistryUnavailable::Allow, _) => Ok(PassedPlugins::default()),
                (RegistryUnavailable::Fail, None) => Err(reason),
                (RegistryUnavailable::Fail, Some(glass)) => {
                    let registry = runner_pb::PluginCallOutcome {
                        plugin: "plugin-registry".to_owned(),
                        message: reason.clone(),
                        ..Default::default()
                    };
                    break_through(engine, stack, glass, &[&registry])
                        .await
                        .map(|()| PassedPlugins::default())
                        .map_err(|error| format!("{reason} ({error})"))
                }
            }
        }
    })
}

/// The break-glass of the call that started an operation: an admin's
/// reason, and the audit trail that records it (without one, nothing is
/// broken through).
#[derive(Clone, Copy)]
struct BreakGlass<'a> {
    trail: &'a crate::audit::AuditTrail,
    admin: &'a Identity,
    why: &'a str,
}

/// An admin's break-glass through each plugin in `stops` (the calls that
/// would have stopped the operation): recorded in the audit trail, before
/// the run goes past them, and as events of the stack. `Err` when a record
/// cannot be written: the operation must not go on unseen.
async fn break_through(
    engine: &StackEngine,
    stack: &Stack,
    glass: &BreakGlass<'_>,
    stops: &[&runner_pb::PluginCallOutcome],
) -> crate::error::Result<()> {
    let BreakGlass { trail, admin, why } = *glass;
    let operation = stack.action.as_str().to_lowercase();
    let subject = super::stack_audit_subject(stack);
    let mut events = Vec::new();
    for stop in stops {
        let blocker = format!(
            "lifecycle plugin {:?} would have stopped it: {}",
            stop.plugin, stop.message
        );
        let asked = crate::audit::Asked {
            caller: admin,
            operation: &operation,
        };
        trail.record_break(asked, &subject, why, &blocker).await?;
        events.push(plugin_event(
            stack,
            &stop.plugin,
            ActionStatus::Complete,
            format!(
                "plugin {}: broken through by admin {:?} ({why}): {}",
                stop.plugin, admin.user_id, stop.message
            ),
        ));
    }
    if let Err(error) = engine.store.record_events(&events).await {
        tracing::warn!(stack_id = %stack.id, %error, "cannot record break-glass events");
    }
    Ok(())
}

/// Tells the plugins that allowed an operation that it will not run after
/// all (their post-operation with `failed` and `reason`).
async fn unwind(engine: &StackEngine, stack: &Stack, passed: PassedPlugins, reason: &str) {
    let mut failed = stack.clone();
    failed.status = ActionStatus::Failed;
    reason.clone_into(&mut failed.status_reason);
    after(engine, &failed, stack.action, passed).await;
}

/// The dry run of `operation` on `stack` ("allowed?"): each plugin that
/// would stop it, and why — asked with `dry_run` set, every plugin whatever
/// the others say, no post-operation, nothing recorded. Empty without
/// plugins, for a nested stack (its root's operation asks them), and for
/// the operations plugins do not guard (a signal, mark-unhealthy).
pub(crate) async fn ask(
    engine: &StackEngine,
    stack: &Stack,
    operation: crate::domain::admission::StackOperation,
) -> Vec<(String, String)> {
    use crate::domain::admission::StackOperation as Asked;
    let PluginGate::Remote {
        client,
        credential,
        unavailable,
    } = &engine.plugins
    else {
        return Vec::new();
    };
    let action = match operation {
        Asked::Update | Asked::Restore => StackAction::Update,
        Asked::Delete => StackAction::Delete,
        Asked::Abandon => StackAction::Abandon,
        Asked::Suspend => StackAction::Suspend,
        Asked::Resume => StackAction::Resume,
        Asked::Check | Asked::Snapshot => StackAction::Check,
        Asked::CancelUpdate => StackAction::Rollback,
        Asked::Lock => StackAction::Lock,
        Asked::Unlock => StackAction::Unlock,
        Asked::Signal | Asked::MarkUnhealthy => return Vec::new(),
    };
    if stack.nested_depth > 0 {
        return Vec::new();
    }
    let mut request = runner_pb::RunPreOperationsRequest {
        operation: operation_of(action) as i32,
        project_id: stack.project_id.clone(),
        stack: None,
        previous: None,
        snapshot_on_demand: true,
        dry_run: true,
        break_glass: false,
    };
    let mut called = call_pre_operations(client, credential, stack, &request).await;
    if matches!(&called, Ok(response) if response.snapshot_needed) {
        request.stack = Some(snapshot_message(gather(engine, stack).await));
        request.snapshot_on_demand = false;
        called = call_pre_operations(client, credential, stack, &request).await;
    }
    match called {
        Ok(response) => response
            .calls
            .into_iter()
            .filter(|call| call.stopped_chain)
            .map(|call| (call.plugin, call.message))
            .collect(),
        Err(status) => match unavailable {
            RegistryUnavailable::Fail => vec![(
                "plugin registry".to_owned(),
                format!("the plugin registry is unavailable: {}", failure(&status)),
            )],
            RegistryUnavailable::Allow => Vec::new(),
        },
    }
}

async fn call_pre_operations(
    client: &PluginRunnerServiceClient<Upstream>,
    credential: &InternalCredential,
    stack: &Stack,
    request: &runner_pb::RunPreOperationsRequest,
) -> Result<runner_pb::RunPreOperationsResponse, tonic::Status> {
    client
        .clone()
        .run_pre_operations(request_as_owner(stack, credential, request.clone()))
        .await
        .map(tonic::Response::into_inner)
}

/// Runs the post-operations owed after the operation ended. Failures are
/// events; they never change the stack.
pub async fn after(
    engine: &StackEngine,
    stack: &Stack,
    operation: StackAction,
    passed: PassedPlugins,
) {
    let PluginGate::Remote {
        client, credential, ..
    } = &engine.plugins
    else {
        return;
    };
    if passed.0.is_empty() {
        return;
    }
    let failed = stack.status == ActionStatus::Failed;
    let request = runner_pb::RunPostOperationsRequest {
        operation: operation_of(operation) as i32,
        project_id: stack.project_id.clone(),
        stack: Some(snapshot_message(gather(engine, stack).await)),
        failed,
        reason: if failed {
            stack.status_reason.clone()
        } else {
            String::new()
        },
        plugins: passed.0,
    };
    let called = client
        .clone()
        .run_post_operations(request_as_owner(stack, credential, request))
        .await;
    match called {
        Ok(response) => record_calls(engine, stack, &response.into_inner().calls).await,
        Err(status) => {
            let reason = format!(
                "post-operations not delivered: the plugin registry is unavailable: {}",
                failure(&status)
            );
            record_registry_failure(engine, stack, &reason).await;
        }
    }
}

fn plugin_event(stack: &Stack, plugin: &str, status: ActionStatus, reason: String) -> Event {
    Event {
        id: Uuid::now_v7(),
        stack_id: stack.id,
        resource_name: plugin.to_owned(),
        physical_resource_id: String::new(),
        resource_type: "Ember::LifecyclePlugin".to_owned(),
        action: stack.action,
        status,
        reason,
        created_at: ember_runtime::time::now(),
    }
}

async fn record_calls(engine: &StackEngine, stack: &Stack, calls: &[runner_pb::PluginCallOutcome]) {
    let events: Vec<Event> = calls
        .iter()
        .map(|call| {
            let phase = match runner_pb::PluginPhase::try_from(call.phase) {
                Ok(runner_pb::PluginPhase::Post) => "post-operation",
                _ => "pre-operation",
            };
            let outcome = runner_pb::PluginCallResult::try_from(call.outcome)
                .map(|outcome| {
                    outcome
                        .as_str_name()
                        .trim_start_matches("PLUGIN_CALL_RESULT_")
                        .to_owned()
                })
                .unwrap_or_else(|_| "UNKNOWN".to_owned());
            let status = if call.failed {
                ActionStatus::Failed
            } else {
                ActionStatus::Complete
            };
            let mut reason = format!(
                "plugin {}: {phase} {outcome} in {} ms",
                call.plugin, call.duration_ms
            );
            if !call.message.is_empty() {
                reason.push_str(": ");
                reason.push_str(&call.message);
            }
            if call.observed {
                reason.push_str(" (observe mode: not enforced)");
            }
            plugin_event(stack, &call.plugin, status, reason)
        })
        .collect();
    if let Err(error) = engine.store.record_events(&events).await {
        tracing::warn!(stack_id = %stack.id, %error, "cannot record plugin call events");
    }
    record_observed(engine, stack, calls).await;
}

/// What plug-ins in observe mode would have stopped, in the audit trail:
/// one record each, in the stack's owner's name.
async fn record_observed(
    engine: &StackEngine,
    stack: &Stack,
    calls: &[runner_pb::PluginCallOutcome],
) {
    let observed: Vec<&runner_pb::PluginCallOutcome> =
        calls.iter().filter(|call| call.observed).collect();
    if observed.is_empty() {
        return;
    }
    let subject = super::stack_audit_subject(stack);
    let operation = stack.action.as_str().to_lowercase();
    for call in observed {
        let blocker = format!(
            "lifecycle plugin {:?} would have stopped it: {}",
            call.plugin, call.message
        );
        engine
            .audit
            .record(
                &stack.user_id,
                &subject,
                &operation,
                crate::domain::audit::AuditOutcome::Observed,
                "observe mode: not enforced",
                &blocker,
            )
            .await;
    }
}

async fn record_registry_failure(engine: &StackEngine, stack: &Stack, reason: &str) {
    let event = plugin_event(
        stack,
        "plugin-registry",
        ActionStatus::Failed,
        reason.to_owned(),
    );
    if let Err(error) = engine.store.record_events(&[event]).await {
        tracing::warn!(stack_id = %stack.id, %error, "cannot record a plugin registry event");
    }
}
