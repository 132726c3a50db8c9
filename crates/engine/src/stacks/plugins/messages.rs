//! The plugin runner's proto messages, made from the application's types:
//! the operation a stack action counts as, and the stack's view.

use ember_proto::common::v1::StackOperation;
use ember_proto::plugin::v1 as plugin_pb;
use ember_runtime::protobuf_json::map_to_struct;
use serde_json::Value;

use super::view::{PluginResourceView, PluginStackView};
use crate::domain::StackAction;

pub(super) fn operation_of(action: StackAction) -> StackOperation {
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

/// A JSON value as a Struct: objects map directly, anything else is empty.
fn value_to_struct(value: Value) -> prost_types::Struct {
    match value {
        Value::Object(map) => map_to_struct(map),
        _ => prost_types::Struct::default(),
    }
}

pub(super) fn snapshot_message(view: PluginStackView) -> plugin_pb::StackSnapshot {
    plugin_pb::StackSnapshot {
        stack_id: view.stack_id.to_string(),
        stack_name: view.stack_name,
        project_id: view.project_id,
        user_id: view.user_id,
        template: Some(value_to_struct(view.template)),
        parameters: Some(map_to_struct(view.parameters)),
        resources: view.resources.into_iter().map(resource_message).collect(),
        nested_stacks: view
            .nested_stacks
            .into_iter()
            .map(snapshot_message)
            .collect(),
        planned_resources: view.planned_resources,
    }
}

fn resource_message(resource: PluginResourceView) -> plugin_pb::ResourceSnapshot {
    plugin_pb::ResourceSnapshot {
        name: resource.name,
        r#type: resource.type_name,
        properties: Some(value_to_struct(resource.properties)),
        status: resource.status,
        physical_id: resource.physical_id,
    }
}
