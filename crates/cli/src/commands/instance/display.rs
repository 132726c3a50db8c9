//! How `ember instance` describes instances to the shared output module:
//! status and power names as the REST API shows them, the fields of `show`
//! and the columns of `list`.

use ember_proto::engine::v1 as pb;

use serde_json::Value;

use crate::commands::output::{Cell, OutputArgs, Record};
use crate::error::CliError;

pub fn status_name(status: i32) -> String {
    pb::InstanceStatus::try_from(status)
        .ok()
        .and_then(|status| {
            status
                .as_str_name()
                .strip_prefix("INSTANCE_STATUS_")
                .map(str::to_owned)
        })
        .unwrap_or_else(|| status.to_string())
}

pub fn power_state_name(power_state: i32) -> String {
    pb::PowerState::try_from(power_state)
        .ok()
        .and_then(|state| {
            state
                .as_str_name()
                .strip_prefix("POWER_STATE_")
                .map(|name| name.to_ascii_lowercase().replace('_', "-"))
        })
        .unwrap_or_else(|| power_state.to_string())
}

pub fn locked_by_name(instance: &pb::Instance) -> String {
    match pb::LockedBy::try_from(instance.locked_by) {
        Ok(pb::LockedBy::Owner) if instance.locked => "owner".to_owned(),
        Ok(pb::LockedBy::Admin) if instance.locked => "admin".to_owned(),
        _ => "-".to_owned(),
    }
}

/// A `-` in a table for an unlocked instance; null in JSON.
fn locked_cell(instance: &pb::Instance) -> Cell {
    match locked_by_name(instance).as_str() {
        "-" => Cell::shown_as(Value::Null, "-"),
        locked_by => Cell::from(locked_by),
    }
}

/// Sorted `KEY=VALUE` pairs as a JSON object.
fn pairs_cell(pairs: &std::collections::HashMap<String, String>) -> Cell {
    let mut sorted: Vec<_> = pairs.iter().collect();
    sorted.sort();
    let object: serde_json::Map<String, Value> = sorted
        .iter()
        .map(|(key, value)| ((*key).clone(), Value::from(value.as_str())))
        .collect();
    let text: Vec<String> = sorted
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    Cell::shown_as(object, text.join(", "))
}

pub fn instance_record(instance: &pb::Instance) -> Record {
    Record::new()
        .field("uuid", instance.uuid.as_str())
        .field("name", instance.name.as_str())
        .field("status", status_name(instance.status))
        .field("power", power_state_name(instance.power_state))
        .field("reason", instance.status_reason.as_str())
        .field("flavor", instance.flavor.as_str())
        .field("image", instance.image.as_str())
        .field("metadata", pairs_cell(&instance.metadata))
        .field(
            "command",
            Cell::shown_as(instance.command.clone(), instance.command.join(" ")),
        )
        .field("env", pairs_cell(&instance.env))
        .field(
            "user_data",
            Cell::shown_as(
                instance.has_user_data,
                if instance.has_user_data { "given" } else { "" },
            ),
        )
        .field("locked", locked_cell(instance))
        .field("locked_by_user", instance.locked_by_user.as_str())
        .field("locked_at", Cell::time(instance.locked_at.as_ref()))
        .field("lock_reason", instance.locked_reason.as_str())
        .field(
            "lock_expires_at",
            Cell::time(instance.lock_expires_at.as_ref()),
        )
        .field("project", instance.project_id.as_str())
        .field("created", Cell::time(instance.created_at.as_ref()))
        .field("updated", Cell::time(instance.updated_at.as_ref()))
}

pub fn instance_row(instance: &pb::Instance) -> Record {
    Record::new()
        .field("uuid", instance.uuid.as_str())
        .field("name", instance.name.as_str())
        .field("status", status_name(instance.status))
        .field("power", power_state_name(instance.power_state))
        .field("locked", locked_cell(instance))
        .field("created", Cell::time(instance.created_at.as_ref()))
}

/// An instance a command changed or waited for, as a table.
pub fn print_instance(instance: &pb::Instance) -> Result<(), CliError> {
    OutputArgs::default().print_record(&instance_record(instance))
}
