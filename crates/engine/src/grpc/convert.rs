//! Conversions between the engine's domain types and protobuf messages
//! (JSON ↔ `Struct` comes from `ember_runtime::protobuf_json`).

use ember_proto::engine::v1 as pb;
use ember_runtime::protobuf_json;
use ember_runtime::time::to_timestamp;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::domain::{ActionStatus, Event, Resource, Stack, StackAction};
use crate::stacks::ResourceView;

pub fn json_to_proto(value: &Value) -> prost_types::Value {
    protobuf_json::json_to_value(value.clone())
}

pub fn map_to_struct(map: &Map<String, Value>) -> prost_types::Struct {
    protobuf_json::map_to_struct(map.clone())
}

/// A JSON value as a Struct: objects map directly, anything else is empty.
pub fn value_to_struct(value: &Value) -> prost_types::Struct {
    match value {
        Value::Object(map) => map_to_struct(map),
        _ => prost_types::Struct::default(),
    }
}

pub fn struct_to_map(fields: &prost_types::Struct) -> Map<String, Value> {
    protobuf_json::struct_to_map(Some(fields))
}

pub fn action_to_proto(action: StackAction) -> pb::StackAction {
    match action {
        StackAction::Init => pb::StackAction::Init,
        StackAction::Create => pb::StackAction::Create,
        StackAction::Update => pb::StackAction::Update,
        StackAction::Delete => pb::StackAction::Delete,
        StackAction::Rollback => pb::StackAction::Rollback,
        StackAction::Suspend => pb::StackAction::Suspend,
        StackAction::Resume => pb::StackAction::Resume,
        StackAction::Check => pb::StackAction::Check,
        StackAction::Adopt => pb::StackAction::Adopt,
        StackAction::Abandon => pb::StackAction::Abandon,
        StackAction::Lock => pb::StackAction::Lock,
        StackAction::Unlock => pb::StackAction::Unlock,
        StackAction::Snapshot => pb::StackAction::Snapshot,
        StackAction::Restore => pb::StackAction::Restore,
    }
}

pub fn status_to_proto(status: ActionStatus) -> pb::ActionStatus {
    match status {
        ActionStatus::InProgress => pb::ActionStatus::InProgress,
        ActionStatus::Complete => pb::ActionStatus::Complete,
        ActionStatus::Failed => pb::ActionStatus::Failed,
    }
}

pub fn stack_to_proto(stack: &Stack) -> pb::Stack {
    stack_into_proto(stack.clone())
}

/// [`stack_to_proto`] for a stack the caller no longer needs (a list's).
pub fn stack_into_proto(stack: Stack) -> pb::Stack {
    let stack_status = stack.stack_status();
    pb::Stack {
        id: uuid_text(stack.id),
        name: stack.name,
        project_id: stack.project_id,
        user_id: stack.user_id,
        action: action_to_proto(stack.action) as i32,
        status: status_to_proto(stack.status) as i32,
        stack_status,
        status_reason: stack.status_reason,
        description: stack.description,
        parent_id: stack.parent_id.map(uuid_text).unwrap_or_default(),
        tags: stack.tags,
        timeout_mins: stack.timeout_mins.unwrap_or(0),
        disable_rollback: stack.disable_rollback,
        created_at: Some(to_timestamp(stack.created_at)),
        updated_at: Some(to_timestamp(stack.updated_at)),
        parameters: None,
        outputs: Vec::new(),
        template_description: String::new(),
        nested_depth: stack.nested_depth,
        parent_resource: stack.parent_resource.unwrap_or_default(),
        stack_lock: stack
            .maintenance_lock
            .as_ref()
            .map(maintenance_lock_to_proto),
        deleted_at: stack.deleted_at.map(to_timestamp),
    }
}

/// `id` as its hyphenated text, written straight into the string (a list
/// of 200 clusters writes 5,000 member ids, a stack list hundreds of ids;
/// `to_string` goes through the formatting machinery for each).
pub fn uuid_text(id: Uuid) -> String {
    id.hyphenated()
        .encode_lower(&mut Uuid::encode_buffer())
        .to_owned()
}

/// The maintenance lock as the API's `StackLock` message: the message keeps
/// its public gRPC name; the engine's own code says maintenance lock, apart
/// from the stack lease.
pub fn maintenance_lock_to_proto(lock: &crate::domain::MaintenanceLock) -> pb::StackLock {
    pb::StackLock {
        level: lock.level.as_str().to_owned(),
        locked_by_user: lock.locked_by_user.clone(),
        locked_by_role: if lock.locked_by_admin {
            "admin"
        } else {
            "owner"
        }
        .to_owned(),
        locked_at: Some(to_timestamp(lock.locked_at)),
        reason: lock.reason.clone().unwrap_or_default(),
        expires_at: lock.expires_at.map(to_timestamp),
    }
}

/// A lock request's expiry: `expires_in` seconds from now or `expires_at`
/// (checked: in the future, bounded, not both).
pub fn lock_expiry(
    expires_in: Option<i64>,
    expires_at: Option<&prost_types::Timestamp>,
) -> crate::error::Result<Option<chrono::DateTime<chrono::Utc>>> {
    let expires_at = expires_at.map(expiry_time).transpose()?;
    crate::domain::cluster::lock::expiry(ember_runtime::time::now(), expires_in, expires_at)
}

/// A lock's `expires_at` as a time (one out of range is refused, naming
/// it).
pub fn expiry_time(
    at: &prost_types::Timestamp,
) -> crate::error::Result<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp(at.seconds, u32::try_from(at.nanos).unwrap_or(0)).ok_or_else(
        || crate::error::Error::InvalidInput("expires_at: not a time Ember can keep".to_owned()),
    )
}

pub fn resource_to_proto(
    resource: &Resource,
    stack_name: &str,
    required_by: Vec<String>,
    detailed: bool,
) -> pb::Resource {
    pb::Resource {
        resource_name: resource.name.clone(),
        physical_resource_id: resource.physical_id.clone().unwrap_or_default(),
        resource_type: resource.type_name.clone(),
        action: action_to_proto(resource.action) as i32,
        status: status_to_proto(resource.status) as i32,
        resource_status: resource.resource_status(),
        resource_status_reason: resource.status_reason.clone(),
        stack_id: resource.stack_id.to_string(),
        stack_name: stack_name.to_owned(),
        required_by,
        nested_stack_id: if crate::resources::makes_nested_stack(&resource.type_name) {
            resource.physical_id.clone().unwrap_or_default()
        } else {
            String::new()
        },
        properties: detailed.then(|| value_to_struct(&resource.properties)),
        attributes: detailed.then(|| value_to_struct(&resource.attributes)),
        metadata: Some(value_to_struct(&resource.metadata)),
        created_at: Some(to_timestamp(resource.created_at)),
        updated_at: Some(to_timestamp(resource.updated_at)),
        parent_resource: String::new(),
        nested_stack_name: String::new(),
    }
}

/// A listed or shown resource, with the nested stack's name it carries
/// and, below its parent, the parent's resource that owns its stack.
pub fn resource_view_to_proto(view: ResourceView, detailed: bool) -> pb::Resource {
    pb::Resource {
        nested_stack_name: view.nested_stack_name,
        parent_resource: view.parent_resource.unwrap_or_default(),
        ..resource_to_proto(&view.resource, &view.stack_name, view.required_by, detailed)
    }
}

pub fn event_to_proto(event: &Event, stack_name: &str) -> pb::Event {
    pb::Event {
        id: event.id.to_string(),
        stack_id: event.stack_id.to_string(),
        stack_name: stack_name.to_owned(),
        resource_name: event.resource_name.clone(),
        physical_resource_id: event.physical_resource_id.clone(),
        resource_type: event.resource_type.clone(),
        action: action_to_proto(event.action) as i32,
        status: status_to_proto(event.status) as i32,
        resource_status: event.resource_status(),
        resource_status_reason: event.reason.clone(),
        created_at: Some(to_timestamp(event.created_at)),
    }
}

/// A dry run's verdict as the API shows it: allowed, the first blocker's
/// message (what the call would answer; empty when allowed) and every
/// blocker.
pub fn dry_run_verdict(
    blockers: &[crate::domain::admission::Blocker],
) -> (bool, String, Vec<pb::Blocker>) {
    (
        blockers.is_empty(),
        blockers
            .first()
            .map(|blocker| blocker.error.to_string())
            .unwrap_or_default(),
        blockers.iter().map(blocker_to_proto).collect(),
    )
}

/// One blocker of a dry run as the API shows it.
pub fn blocker_to_proto(blocker: &crate::domain::admission::Blocker) -> pb::Blocker {
    use ember_runtime::ErrorKind;
    use ember_runtime::error::ServiceError;
    let code = match blocker.error.kind() {
        ErrorKind::InvalidInput => "invalid_input",
        ErrorKind::Forbidden => "forbidden",
        ErrorKind::NotFound => "not_found",
        ErrorKind::Conflict => "conflict",
        ErrorKind::Unauthenticated => "unauthenticated",
        ErrorKind::Unavailable => "unavailable",
        ErrorKind::Timeout => "timeout",
        ErrorKind::Internal => "internal",
    };
    pb::Blocker {
        kind: blocker.kind.as_str().to_owned(),
        message: blocker.error.to_string(),
        code: code.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_survives_a_round_trip_through_struct() {
        let value = json!({"a": 1, "b": [true, null, "x", 2.5], "c": {"d": "e"}});
        let back = Value::Object(struct_to_map(&value_to_struct(&value)));
        assert_eq!(back, value);
    }
}
