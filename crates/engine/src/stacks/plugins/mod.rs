//! Lifecycle plug-points (spec heat-stack-lifecycle-plugpoint): before a
//! root stack operation touches any resource, the plugin-registry's runner
//! calls the operator's plugins in order; a deny (or a failure of a plugin
//! in FAIL mode) ends the operation `<ACTION>_FAILED` with the plugin's
//! reason. After the operation, the plugins whose pre-operation ran get
//! their post-operation with the right `failed` flag. Every plugin call
//! becomes an event of the stack. Nested stacks are covered by their root's
//! call: the snapshot includes them.

use std::time::Duration;

use ember_proto::common::v1::StackOperation;
use ember_proto::plugin::v1 as plugin_pb;
use ember_proto::pluginregistry::v1 as runner_pb;
use ember_proto::pluginregistry::v1::plugin_runner_service_client::PluginRunnerServiceClient;
use ember_runtime::Identity;
use ember_runtime::identity::InternalCredential;
use serde_json::Value;
use tonic::transport::{Channel, Endpoint};
use uuid::Uuid;

use super::executor::Shared;
use crate::domain::{ActionStatus, Event, Stack, StackAction};
use crate::grpc::convert::value_to_struct;

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
        client: PluginRunnerServiceClient<Channel>,
        credential: InternalCredential,
        unavailable: RegistryUnavailable,
    },
}

/// The plugins owed a post-operation once the operation ends.
#[derive(Debug, Clone, Default)]
pub struct PassedPlugins(Vec<String>);

impl PluginGate {
    /// A gate calling the runner at `url` (connected on first use).
    pub fn connect(
        url: &str,
        credential: &str,
        unavailable: RegistryUnavailable,
    ) -> Result<PluginGate, String> {
        let channel = Endpoint::from_shared(url.to_owned())
            .map_err(|error| format!("plugin_registry_url {url:?}: {error}"))?
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true)
            .connect_lazy();
        Ok(PluginGate::Remote {
            client: PluginRunnerServiceClient::new(channel),
            credential: InternalCredential::new(credential),
            unavailable,
        })
    }
}

pub fn operation_of(action: StackAction) -> StackOperation {
    match action {
        StackAction::Init | StackAction::Create => StackOperation::Create,
        StackAction::Update => StackOperation::Update,
        StackAction::Delete => StackOperation::Delete,
        StackAction::Rollback => StackOperation::Rollback,
        StackAction::Suspend => StackOperation::Suspend,
        StackAction::Resume => StackOperation::Resume,
        StackAction::Check => StackOperation::Check,
        StackAction::Adopt => StackOperation::Adopt,
        StackAction::Abandon => StackOperation::Abandon,
        StackAction::Lock => StackOperation::Lock,
        StackAction::Unlock => StackOperation::Unlock,
        // A snapshot changes nothing plugins guard; a restore is an update.
        StackAction::Snapshot => StackOperation::Check,
        StackAction::Restore => StackOperation::Update,
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

/// A read-only copy of the stack for plugins: its template and parameters,
/// its resources (created ones with their resolved properties, the others
/// with the template's), and its nested stacks, recursively.
pub async fn snapshot(shared: &Shared, stack: &Stack) -> plugin_pb::StackSnapshot {
    let mut root = stack_snapshot(shared, stack).await;
    root.planned_resources = planned(shared, stack).await;
    let mut pending: Vec<(Uuid, Vec<usize>)> = vec![(stack.id, Vec::new())];
    // Breadth-first over children; `path` locates each snapshot in the tree.
    while let Some((stack_id, path)) = pending.pop() {
        let Ok(children) = shared.store.list_child_stacks(stack_id).await else {
            continue;
        };
        for child in children {
            let child_snapshot = stack_snapshot(shared, &child).await;
            let parent = path
                .iter()
                .fold(&mut root, |node, index| &mut node.nested_stacks[*index]);
            parent.nested_stacks.push(child_snapshot);
            let mut child_path = path.clone();
            child_path.push(parent.nested_stacks.len() - 1);
            pending.push((child.id, child_path));
        }
    }
    root
}

/// What the stack's tree will hold once its definition is in place (see
/// `planning`); empty when the stored definition no longer parses.
async fn planned(shared: &Shared, stack: &Stack) -> std::collections::HashMap<String, u64> {
    let Ok(definition) = shared.store.load_definition(stack.id).await else {
        return Default::default();
    };
    let identity = crate::domain::template::StackIdentity {
        stack_name: stack.name.clone(),
        stack_id: stack.id.to_string(),
        project_id: stack.project_id.clone(),
    };
    match super::definition::ParsedStack::build(&definition, identity, &shared.registry) {
        Ok(parsed) => super::planning::planned_resources(&parsed, &definition, &shared.registry)
            .into_iter()
            .collect(),
        Err(_) => Default::default(),
    }
}

async fn stack_snapshot(shared: &Shared, stack: &Stack) -> plugin_pb::StackSnapshot {
    let definition = shared
        .store
        .load_definition(stack.id)
        .await
        .unwrap_or_default();
    let rows = shared
        .store
        .list_resources(stack.id)
        .await
        .unwrap_or_default();
    let template_resources = definition
        .template
        .get("resources")
        .cloned()
        .unwrap_or(Value::Null);
    let mut resources: Vec<plugin_pb::ResourceSnapshot> = Vec::new();
    for row in rows
        .iter()
        .filter(|row| !(row.action == StackAction::Delete && row.status == ActionStatus::Complete))
    {
        let properties = match &row.properties {
            Value::Object(map) if !map.is_empty() => row.properties.clone(),
            _ => template_resources
                .get(&row.name)
                .and_then(|resource| resource.get("properties"))
                .cloned()
                .unwrap_or(Value::Null),
        };
        resources.retain(|existing| existing.name != row.name);
        resources.push(plugin_pb::ResourceSnapshot {
            name: row.name.clone(),
            r#type: row.type_name.clone(),
            properties: Some(value_to_struct(&properties)),
            status: row.resource_status(),
            physical_id: row.physical_id.clone().unwrap_or_default(),
        });
    }
    plugin_pb::StackSnapshot {
        stack_id: stack.id.to_string(),
        stack_name: stack.name.clone(),
        project_id: stack.project_id.clone(),
        user_id: stack.user_id.clone(),
        template: Some(value_to_struct(&definition.template)),
        parameters: Some(value_to_struct(&Value::Object(definition.parameters))),
        resources,
        nested_stacks: Vec::new(),
        planned_resources: Default::default(),
    }
}

/// Runs the pre-operations for `stack`'s current action. `Err` carries the
/// reason the operation must fail with.
pub async fn before(
    shared: &Shared,
    stack: &Stack,
    previous: Option<plugin_pb::StackSnapshot>,
) -> Result<PassedPlugins, String> {
    let PluginGate::Remote {
        client,
        credential,
        unavailable,
    } = &shared.plugins
    else {
        return Ok(PassedPlugins::default());
    };
    if stack.nested_depth > 0 {
        return Ok(PassedPlugins::default());
    }
    let operation = operation_of(stack.action);
    let request = runner_pb::RunPreOperationsRequest {
        operation: operation as i32,
        project_id: stack.project_id.clone(),
        stack: Some(snapshot(shared, stack).await),
        previous,
    };
    match client
        .clone()
        .run_pre_operations(request_as_owner(stack, credential, request))
        .await
    {
        Ok(response) => {
            let response = response.into_inner();
            record_calls(shared, stack, &response.calls).await;
            if response.allowed {
                Ok(PassedPlugins(response.post_operation_plugins))
            } else {
                Err(response.reason)
            }
        }
        Err(status) => {
            let reason = format!("the plugin registry is unavailable: {}", status.message());
            record_registry_failure(shared, stack, &reason).await;
            match unavailable {
                RegistryUnavailable::Fail => Err(reason),
                RegistryUnavailable::Allow => Ok(PassedPlugins::default()),
            }
        }
    }
}

/// Runs the post-operations owed after the operation ended. Failures are
/// events; they never change the stack.
pub async fn after(shared: &Shared, stack: &Stack, operation: StackAction, passed: PassedPlugins) {
    let PluginGate::Remote {
        client, credential, ..
    } = &shared.plugins
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
        stack: Some(snapshot(shared, stack).await),
        failed,
        reason: if failed {
            stack.status_reason.clone()
        } else {
            String::new()
        },
        plugins: passed.0,
    };
    match client
        .clone()
        .run_post_operations(request_as_owner(stack, credential, request))
        .await
    {
        Ok(response) => record_calls(shared, stack, &response.into_inner().calls).await,
        Err(status) => {
            let reason = format!(
                "post-operations not delivered: the plugin registry is unavailable: {}",
                status.message()
            );
            record_registry_failure(shared, stack, &reason).await;
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

async fn record_calls(shared: &Shared, stack: &Stack, calls: &[runner_pb::PluginCallOutcome]) {
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
            plugin_event(stack, &call.plugin, status, reason)
        })
        .collect();
    if let Err(error) = shared.store.record_events(&events).await {
        tracing::warn!(stack_id = %stack.id, %error, "cannot record plugin call events");
    }
}

async fn record_registry_failure(shared: &Shared, stack: &Stack, reason: &str) {
    let event = plugin_event(
        stack,
        "plugin-registry",
        ActionStatus::Failed,
        reason.to_owned(),
    );
    if let Err(error) = shared.store.record_events(&[event]).await {
        tracing::warn!(stack_id = %stack.id, %error, "cannot record a plugin registry event");
    }
}
