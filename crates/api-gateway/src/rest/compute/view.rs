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

fn status_name(status: i32) -> String {
    pb::InstanceStatus::try_from(status)
        .ok()
        .and_then(|status| {
            status
                .as_str_name()
                .strip_prefix("INSTANCE_STATUS_")
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

fn power_state_name(power_state: i32) -> String {
    pb::PowerState::try_from(power_state)
        .ok()
        .and_then(|state| {
            state
                .as_str_name()
                .strip_prefix("POWER_STATE_")
                .map(|name| name.to_ascii_lowercase().replace('_', "-"))
        })
        .unwrap_or_default()
}

/// An instance event as this API shows it.
pub fn event_view(event: &pb::InstanceEvent) -> Value {
    let at = event
        .at
        .as_ref()
        .and_then(|time| chrono::DateTime::from_timestamp(time.seconds, time.nanos.max(0) as u32))
        .map(|time| Value::String(time.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()))
        .unwrap_or(Value::Null);
    json!({
        "id": event.id,
        "instance_uuid": event.instance_uuid,
        "kind": event.kind,
        "status": status_name(event.status),
        "power_state": power_state_name(event.power_state),
        "reason": event.reason,
        "at": at,
    })
}

/// An instance as this API shows it.
pub fn instance_view(instance: &pb::Instance) -> Value {
    let status = status_name(instance.status);
    let power_state = power_state_name(instance.power_state);
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
        "lock_expires_at": time(instance.lock_expires_at.as_ref()),
        "created_at": time(instance.created_at.as_ref()),
        "updated_at": time(instance.updated_at.as_ref()),
        "command": instance.command,
        "env": instance.env.iter().collect::<std::collections::BTreeMap<_, _>>(),
        "networks": instance.networks.iter().map(|network| {
            let mut entry = serde_json::Map::new();
            for (key, value) in [
                ("network", &network.network),
                ("port", &network.port),
                ("subnet", &network.subnet),
                ("fixed_ip", &network.fixed_ip),
            ] {
                if !value.is_empty() {
                    entry.insert(key.to_owned(), json!(value));
                }
            }
            Value::Object(entry)
        }).collect::<Vec<_>>(),
        "security_groups": instance.security_groups,
        "key_name": text_or_null(&instance.key_name),
        "links": [{ "href": self_link(&instance.uuid), "rel": "self" }],
    })
}
