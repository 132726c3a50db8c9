//! How `ember cluster` describes clusters, their nodes and policies to the
//! shared output module: the fields of `show` (with its nodes and policies)
//! and the columns of `list`.

use ember_proto::engine::v1 as pb;
use serde_json::Value;

use crate::commands::output::{Cell, OutputArgs, Record};
use crate::error::CliError;

/// `-1` (unlimited) reads as `unlimited` in a table.
fn max_size_cell(max_size: i32) -> Cell {
    if max_size < 0 {
        Cell::shown_as(max_size, "unlimited")
    } else {
        Cell::from(max_size)
    }
}

/// The cluster's metadata (JSON text in the API) as a JSON value.
fn metadata_cell(metadata: &str) -> Cell {
    match serde_json::from_str::<Value>(metadata) {
        Ok(value) => Cell::shown_as(value, metadata),
        Err(_) => Cell::from(metadata),
    }
}

/// The cluster's fields; `nodes` and `policies` are the lists JSON and YAML
/// carry (a table shows how many and which, and the tables under it).
pub fn cluster_record(
    cluster: &pb::Cluster,
    nodes: &[pb::Node],
    policies: &[pb::ClusterPolicy],
) -> Record {
    let node_list: Vec<Value> = nodes.iter().map(|node| node_row(node).to_json()).collect();
    let policy_list: Vec<Value> = policies
        .iter()
        .map(|policy| policy_row(policy).to_json())
        .collect();
    let policy_names: Vec<&str> = policies
        .iter()
        .map(|policy| policy.policy_name.as_str())
        .collect();
    Record::new()
        .field("id", cluster.id.as_str())
        .field("name", cluster.name.as_str())
        .field("status", cluster.status.as_str())
        .field("reason", cluster.status_reason.as_str())
        .field("profile", cluster.profile_name.as_str())
        .field("desired_capacity", cluster.desired_capacity)
        .field("min_size", cluster.min_size)
        .field("max_size", max_size_cell(cluster.max_size))
        .field(
            "nodes",
            Cell::shown_as(node_list, cluster.node_ids.len().to_string()),
        )
        .field(
            "policies",
            Cell::shown_as(policy_list, policy_names.join(", ")),
        )
        .field("metadata", metadata_cell(&cluster.metadata))
        .field("lock", lock_cell(cluster.maintenance_lock.as_ref()))
        .field(
            "remediation",
            remediation_cell(cluster.remediation.as_ref()),
        )
        .field("project", cluster.project_id.as_str())
        .field("created", Cell::time(cluster.created_at.as_ref()))
        .field("updated", Cell::time(cluster.updated_at.as_ref()))
}

/// The health policy's budget: a record in JSON and YAML (`null` without
/// a health policy), and in a table `3 of 5 unhealthy (max 40%), 1 of 3
/// recoveries left per 600 s` and why recovery waits.
fn remediation_cell(budget: Option<&pb::Remediation>) -> Cell {
    let Some(budget) = budget else {
        return Cell::shown_as(serde_json::Value::Null, "-");
    };
    let mut text = format!(
        "{}: {} of {} unhealthy (max {})",
        budget.policy, budget.unhealthy, budget.members, budget.max_unhealthy
    );
    match budget.remaining {
        Some(remaining) => text.push_str(&format!(
            ", {remaining} of {} recoveries left per {} s",
            budget.max_recoveries, budget.window
        )),
        None => text.push_str(", recoveries unlimited"),
    }
    if !budget.held.is_empty() {
        text.push_str("; ");
        text.push_str(&budget.held);
    }
    Cell::shown_as(
        serde_json::json!({
            "policy": budget.policy,
            "max_unhealthy": budget.max_unhealthy,
            "unhealthy": budget.unhealthy,
            "members": budget.members,
            "max_recoveries": budget.max_recoveries,
            "window": budget.window,
            "recoveries_in_window": budget.recoveries_in_window,
            "remaining": budget.remaining,
            "held": budget.held,
        }),
        text,
    )
}

/// The lock as a record in JSON and YAML (`null` when unlocked), and as
/// [`lock_text`] in a table.
fn lock_cell(lock: Option<&pb::ClusterLock>) -> Cell {
    let Some(lock) = lock else {
        return Cell::shown_as(serde_json::Value::Null, "-");
    };
    let at = |time: Option<&prost_types::Timestamp>| {
        let text = crate::commands::stack::format_time(time);
        (!text.is_empty()).then_some(text)
    };
    Cell::shown_as(
        serde_json::json!({
            "level": lock.level,
            "locked_by_user": lock.locked_by_user,
            "locked_by_role": lock.locked_by_role,
            "locked_at": at(lock.locked_at.as_ref()),
            "reason": lock.reason,
            "expires_at": at(lock.expires_at.as_ref()),
        }),
        lock_text(Some(lock)),
    )
}

/// `level all, by admin "ops" at 2026-11-29T05:00:00Z until …: why`, or
/// `-` when the cluster is not locked.
pub fn lock_text(lock: Option<&pb::ClusterLock>) -> String {
    let Some(lock) = lock else {
        return "-".to_owned();
    };
    let at = |time: Option<&prost_types::Timestamp>| {
        time.and_then(|time| {
            chrono::DateTime::from_timestamp(time.seconds, u32::try_from(time.nanos).unwrap_or(0))
        })
        .map(|time| time.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
    };
    let mut text = format!(
        "level {}, by {} {:?} at {}",
        lock.level,
        lock.locked_by_role,
        lock.locked_by_user,
        at(lock.locked_at.as_ref())
    );
    if lock.expires_at.is_some() {
        text.push_str(&format!(" until {}", at(lock.expires_at.as_ref())));
    }
    if !lock.reason.is_empty() {
        text.push_str(": ");
        text.push_str(&lock.reason);
    }
    text
}

/// `cluster show`: the cluster, then (as a table, without `-c`) its nodes
/// and policies.
pub fn print_cluster(
    output: &OutputArgs,
    cluster: &pb::Cluster,
    nodes: &[pb::Node],
    policies: &[pb::ClusterPolicy],
) -> Result<(), CliError> {
    output.print_record(&cluster_record(cluster, nodes, policies))?;
    if output.is_whole_table() {
        println!();
        output.print_list(nodes, node_row)?;
        if !policies.is_empty() {
            println!();
            output.print_list(policies, policy_row)?;
        }
    }
    Ok(())
}

pub fn cluster_row(cluster: &pb::Cluster) -> Record {
    Record::new()
        .field("id", cluster.id.as_str())
        .field("name", cluster.name.as_str())
        .field("status", cluster.status.as_str())
        .field("profile", cluster.profile_name.as_str())
        .field("desired", cluster.desired_capacity)
        .field("nodes", cluster.node_ids.len())
        .field("min", cluster.min_size)
        .field("max", max_size_cell(cluster.max_size))
        .field("created", Cell::time(cluster.created_at.as_ref()))
}

pub fn node_row(node: &pb::Node) -> Record {
    Record::new()
        .field("node", node.id.as_str())
        .field("name", node.name.as_str())
        .field("index", node.index)
        .field("status", node.status.as_str())
        .field("physical_id", node.physical_id.as_str())
        .field(
            "tainted",
            Cell::shown_as(node.tainted, if node.tainted { "yes" } else { "-" }),
        )
        .field("reason", node.status_reason.as_str())
}

pub fn policy_row(policy: &pb::ClusterPolicy) -> Record {
    Record::new()
        .field("policy", policy.policy_name.as_str())
        .field("type", policy.policy_type.as_str())
        .field("priority", policy.priority)
        .field(
            "enabled",
            Cell::shown_as(policy.enabled, if policy.enabled { "yes" } else { "no" }),
        )
}

/// An action's inputs or outputs (JSON text in the API) as JSON.
fn json_text_cell(text: &str) -> Cell {
    match serde_json::from_str::<Value>(text) {
        Ok(value) => Cell::from(value),
        Err(_) => Cell::from(text),
    }
}

pub fn action_row(action: &pb::Action) -> Record {
    Record::new()
        .field("id", action.id.as_str())
        .field("action", action.action.as_str())
        .field("status", action.status.as_str())
        .field("cluster", action.cluster_id.as_str())
        .field("created", Cell::time(action.created_at.as_ref()))
        .field("reason", action.status_reason.as_str())
}

pub fn action_record(action: &pb::Action) -> Record {
    Record::new()
        .field("id", action.id.as_str())
        .field("name", action.name.as_str())
        .field("action", action.action.as_str())
        .field("status", action.status.as_str())
        .field("reason", action.status_reason.as_str())
        .field("cluster", action.cluster_id.as_str())
        .field("target", action.target_id.as_str())
        .field("lifecycle_outcome", action.lifecycle_outcome.as_str())
        .field("inputs", json_text_cell(&action.inputs))
        .field("outputs", json_text_cell(&action.outputs))
        .field("depends_on", action.depends_on.clone())
        .field("depended_by", action.depended_by.clone())
        .field("owner", action.owner.as_str())
        .field("project", action.project_id.as_str())
        .field("user", action.user_id.as_str())
        .field("created", Cell::time(action.created_at.as_ref()))
        .field("updated", Cell::time(action.updated_at.as_ref()))
}
