//! How the Compute API shows an instance: Mogan-style JSON with lowercase
//! power states, `locked_by` owner|admin (or null) and a self link.

use ember_proto::engine::v1 as pb;
use serde_json::{Value, json};

pub fn self_link(uuid: &str) -> String {
    format!("/compute/v1/instances/{uuid}")
}

fn time(timestamp: Option<&prost_types::Timestamp>) -> Value {
    timestamp
        .and_then(|time| chrono::DateTime::from_timestamp(time.seconds, 0))
        .map(|time| Value::String(time.format("%Y-%m-%dT%H:%M:%SZ").to_string()))
        .unwrap_or(Value::Null)
}

fn text_or_null(text: &str) -> Value {
    if text.is_empty() {
        Value::Null
    } else {
        Value::String(text.to_owned())
    }
}

/// An instance as this API shows it.
pub fn instance_view(instance: &pb::Instance) -> Value {
    let status = pb::InstanceStatus::try_from(instance.status)
        .ok()
        .and_then(|status| {
            status
                .as_str_name()
                .strip_prefix("INSTANCE_STATUS_")
                .map(str::to_owned)
        })
        .unwrap_or_default();
    let power_state = pb::PowerState::try_from(instance.power_state)
        .ok()
        .and_then(|state| {
            state
                .as_str_name()
                .strip_prefix("POWER_STATE_")
                .map(|name| name.to_ascii_lowercase().replace('_', "-"))
        })
        .unwrap_or_default();
    let locked_by = match pb::LockedBy::try_from(instance.locked_by) {
        Ok(pb::LockedBy::Owner) => json!("owner"),
        Ok(pb::LockedBy::Admin) => json!("admin"),
        _ => Value::Null,
    };
    json!({
        "uuid": instance.uuid,
        "name": instance.name,
        "project_id": instance.project_id,
        "user_id": instance.user_id,
        "flavor": instance.flavor,
        "image": instance.image,
        "metadata": instance.metadata.iter().collect::<std::collections::BTreeMap<_, _>>(),
        "status": status,
        "power_state": power_state,
        "status_reason": text_or_null(&instance.status_reason),
        "locked": instance.locked,
        "locked_by": locked_by,
        "locked_by_user": text_or_null(&instance.locked_by_user),
        "locked_at": time(instance.locked_at.as_ref()),
        "locked_reason": text_or_null(&instance.locked_reason),
        "created_at": time(instance.created_at.as_ref()),
        "updated_at": time(instance.updated_at.as_ref()),
        "links": [{ "href": self_link(&instance.uuid), "rel": "self" }],
    })
}
