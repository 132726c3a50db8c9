//! How `ember instance` prints instances: status and power names as the
//! REST API shows them, and the FIELD/VALUE table of `show`.

use ember_proto::engine::v1 as pb;

use crate::client::print_table;

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

pub fn print_instance(instance: &pb::Instance) {
    let metadata: Vec<String> = {
        let mut items: Vec<_> = instance.metadata.iter().collect();
        items.sort();
        items
            .into_iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect()
    };
    let rows = vec![
        vec!["uuid".to_owned(), instance.uuid.clone()],
        vec!["name".to_owned(), instance.name.clone()],
        vec!["status".to_owned(), status_name(instance.status)],
        vec!["power".to_owned(), power_state_name(instance.power_state)],
        vec!["reason".to_owned(), instance.status_reason.clone()],
        vec!["flavor".to_owned(), instance.flavor.clone()],
        vec!["image".to_owned(), instance.image.clone()],
        vec!["metadata".to_owned(), metadata.join(", ")],
        vec!["command".to_owned(), instance.command.join(" ")],
        vec!["env".to_owned(), {
            let mut env: Vec<String> = instance
                .env
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect();
            env.sort();
            env.join(", ")
        }],
        vec![
            "user data".to_owned(),
            if instance.has_user_data { "given" } else { "" }.to_owned(),
        ],
        vec!["locked".to_owned(), locked_by_name(instance)],
        vec!["locked by user".to_owned(), instance.locked_by_user.clone()],
        vec![
            "locked at".to_owned(),
            super::super::stack::format_time(instance.locked_at.as_ref()),
        ],
        vec!["lock reason".to_owned(), instance.locked_reason.clone()],
        vec!["project".to_owned(), instance.project_id.clone()],
        vec![
            "created".to_owned(),
            super::super::stack::format_time(instance.created_at.as_ref()),
        ],
        vec![
            "updated".to_owned(),
            super::super::stack::format_time(instance.updated_at.as_ref()),
        ],
    ];
    print_table(&["FIELD", "VALUE"], &rows);
}
