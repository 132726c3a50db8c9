//! A resource of a stack as the engine records it, and events: the history
//! of every stack and resource transition.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::stack::{ActionStatus, StackAction};

#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    pub id: Uuid,
    pub stack_id: Uuid,
    /// Logical name in the template.
    pub name: String,
    pub type_name: String,
    pub physical_id: Option<String>,
    pub action: StackAction,
    pub status: ActionStatus,
    pub status_reason: String,
    /// Properties as last resolved (JSON object).
    pub properties: Value,
    /// Attribute values the resource type reported (JSON object).
    pub attributes: Value,
    pub metadata: Value,
    /// Private data of the resource type (e.g. a generated secret).
    pub data: Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Resource {
    /// Heat's combined status, e.g. `CREATE_COMPLETE`.
    pub fn resource_status(&self) -> String {
        format!("{}_{}", self.action.as_str(), self.status.as_str())
    }

    /// A resource just defined by a stack: INIT_COMPLETE, nothing created.
    pub fn initial(stack_id: Uuid, name: &str, type_name: &str, now: DateTime<Utc>) -> Resource {
        Resource {
            id: Uuid::now_v7(),
            stack_id,
            name: name.to_owned(),
            type_name: type_name.to_owned(),
            physical_id: None,
            action: StackAction::Init,
            status: ActionStatus::Complete,
            status_reason: String::new(),
            properties: Value::Object(Default::default()),
            attributes: Value::Object(Default::default()),
            metadata: Value::Object(Default::default()),
            data: Value::Object(Default::default()),
            created_at: now,
            updated_at: now,
        }
    }
}

/// One transition of a stack (resource_name = the stack's name) or of one of
/// its resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Time-ordered (UUIDv7), so events list in the order they happened.
    pub id: Uuid,
    pub stack_id: Uuid,
    pub resource_name: String,
    pub physical_resource_id: String,
    pub resource_type: String,
    pub action: StackAction,
    pub status: ActionStatus,
    pub reason: String,
    pub created_at: DateTime<Utc>,
}

impl Event {
    pub fn for_resource(resource: &Resource, now: DateTime<Utc>) -> Event {
        Event {
            id: Uuid::now_v7(),
            stack_id: resource.stack_id,
            resource_name: resource.name.clone(),
            physical_resource_id: resource.physical_id.clone().unwrap_or_default(),
            resource_type: resource.type_name.clone(),
            action: resource.action,
            status: resource.status,
            reason: resource.status_reason.clone(),
            created_at: now,
        }
    }

    /// An event of the stack itself (its resource type is
    /// `OS::Heat::Stack`, as Heat records stack events).
    pub fn for_stack(stack: &crate::domain::Stack, reason: &str, now: DateTime<Utc>) -> Event {
        Event {
            id: Uuid::now_v7(),
            stack_id: stack.id,
            resource_name: stack.name.clone(),
            physical_resource_id: stack.id.to_string(),
            resource_type: "OS::Heat::Stack".to_owned(),
            action: stack.action,
            status: stack.status,
            reason: reason.to_owned(),
            created_at: now,
        }
    }

    pub fn resource_status(&self) -> String {
        format!("{}_{}", self.action.as_str(), self.status.as_str())
    }
}
