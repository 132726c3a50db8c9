//! Senlin's JSON shapes for the engine's clustering messages.

use ember_proto::engine::v1 as pb;
use serde::Serialize;
use serde_json::{Value, json};

/// A prost timestamp as Senlin's ISO 8601 text, or null.
pub(super) fn time(timestamp: Option<&prost_types::Timestamp>) -> Value {
    crate::rest::rfc3339(timestamp, chrono::SecondsFormat::Secs)
}

/// A prost timestamp as seconds since the epoch with a fraction (Senlin's
/// actions show `start_time` and `end_time` so), or null.
fn epoch(timestamp: Option<&prost_types::Timestamp>) -> Value {
    timestamp.map_or(Value::Null, |t| {
        json!(t.seconds as f64 + f64::from(t.nanos) / 1e9)
    })
}

/// JSON text as a value; empty = `{}`; not JSON = the text.
pub(super) fn document(text: &str) -> Value {
    if text.is_empty() {
        return json!({});
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// Text, or null when empty.
pub(super) fn optional(text: &str) -> Value {
    if text.is_empty() {
        Value::Null
    } else {
        Value::String(text.to_owned())
    }
}

pub fn profile(profile: &pb::Profile) -> Value {
    json!({
        "id": profile.id,
        "name": profile.name,
        "type": profile.r#type,
        "spec": document(&profile.spec),
        "metadata": document(&profile.metadata),
        "protected": profile.protected,
        "project": profile.project_id,
        "user": profile.user_id,
        "domain": null,
        "created_at": time(profile.created_at.as_ref()),
        "updated_at": time(profile.updated_at.as_ref()),
    })
}

pub fn policy(policy: &pb::Policy) -> Value {
    json!({
        "id": policy.id,
        "name": policy.name,
        "type": policy.r#type,
        "spec": document(&policy.spec),
        "data": {},
        "project": policy.project_id,
        "user": policy.user_id,
        "domain": null,
        "created_at": time(policy.created_at.as_ref()),
        "updated_at": time(policy.updated_at.as_ref()),
    })
}

/// Senlin's cluster view, serialized straight from the engine's message:
/// a list of 200 clusters names 5,000 member ids, which are written out
/// as they are rather than copied into a JSON tree first.
#[derive(Serialize)]
pub struct ClusterView<'a> {
    id: &'a str,
    name: &'a str,
    profile_id: &'a str,
    profile_name: &'a str,
    min_size: i32,
    max_size: i32,
    desired_capacity: i32,
    status: &'a str,
    status_reason: &'a str,
    metadata: Value,
    nodes: Members<'a>,
    policies: &'a [String],
    project: &'a str,
    user: &'a str,
    domain: Option<&'a str>,
    timeout: Option<i32>,
    config: Value,
    data: Empty,
    dependents: Empty,
    init_at: Value,
    created_at: Value,
    updated_at: Value,
    /// Ember's: the maintenance lock, `null` when the cluster is not
    /// locked.
    maintenance_lock: Value,
    /// Ember's: the health policy's recovery budget (a cluster shown
    /// alone, with an enabled health policy).
    #[serde(skip_serializing_if = "Value::is_null")]
    remediation: Value,
}

/// `{}`.
#[derive(Serialize)]
pub struct Empty {}

/// A cluster's member ids as the engine sent them: as strings, or packed
/// 16 bytes each (lists ask for that: see `ListObjectsRequest`), written
/// out as hyphenated ids either way.
pub enum Members<'a> {
    Text(&'a [String]),
    Packed(&'a [u8]),
}

impl Serialize for Members<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeSeq};
        match self {
            Members::Text(ids) => ids.serialize(serializer),
            Members::Packed(bytes) => {
                let ids = bytes.chunks_exact(16);
                if !ids.remainder().is_empty() {
                    return Err(S::Error::custom(format!(
                        "the engine sent {} bytes of packed member ids, not 16 per id",
                        bytes.len()
                    )));
                }
                let mut seq = serializer.serialize_seq(Some(ids.len()))?;
                let mut text = uuid::Uuid::encode_buffer();
                for id in ids {
                    let id = uuid::Uuid::from_slice(id).map_err(S::Error::custom)?;
                    seq.serialize_element(id.hyphenated().encode_lower(&mut text))?;
                }
                seq.end()
            }
        }
    }
}

pub fn cluster(cluster: &pb::Cluster) -> ClusterView<'_> {
    ClusterView {
        id: &cluster.id,
        name: &cluster.name,
        profile_id: &cluster.profile_id,
        profile_name: &cluster.profile_name,
        min_size: cluster.min_size,
        max_size: cluster.max_size,
        desired_capacity: cluster.desired_capacity,
        status: &cluster.status,
        status_reason: &cluster.status_reason,
        metadata: document(&cluster.metadata),
        nodes: if cluster.packed_node_ids.is_empty() {
            Members::Text(&cluster.node_ids)
        } else {
            Members::Packed(&cluster.packed_node_ids)
        },
        policies: &cluster.policy_ids,
        project: &cluster.project_id,
        user: &cluster.user_id,
        domain: None,
        timeout: cluster.timeout,
        config: document(&cluster.config),
        data: Empty {},
        dependents: Empty {},
        init_at: time(cluster.created_at.as_ref()),
        created_at: time(cluster.created_at.as_ref()),
        updated_at: time(cluster.updated_at.as_ref()),
        maintenance_lock: cluster
            .maintenance_lock
            .as_ref()
            .map_or(Value::Null, cluster_lock),
        remediation: cluster
            .remediation
            .as_ref()
            .map_or(Value::Null, remediation),
    }
}

/// A cluster's recovery budget.
pub fn remediation(budget: &pb::Remediation) -> Value {
    json!({
        "policy": budget.policy,
        "max_unhealthy": budget.max_unhealthy,
        "max_unhealthy_count": budget.max_unhealthy_count,
        "unhealthy": budget.unhealthy,
        "members": budget.members,
        "max_recoveries": budget.max_recoveries,
        "window": budget.window,
        "recoveries_in_window": budget.recoveries_in_window,
        "remaining": budget.remaining,
        "held": optional(&budget.held),
    })
}

/// A cluster's maintenance lock.
pub fn cluster_lock(lock: &pb::ClusterLock) -> Value {
    json!({
        "level": lock.level,
        "locked_by_user": lock.locked_by_user,
        "locked_by_role": lock.locked_by_role,
        "locked_at": time(lock.locked_at.as_ref()),
        "reason": optional(&lock.reason),
        "expires_at": time(lock.expires_at.as_ref()),
        "locked_instances": lock.locked_instances,
    })
}

/// Senlin's node view at the newest microversion.
pub fn node(node: &pb::Node) -> Value {
    json!({
        "id": node.id,
        "name": node.name,
        "cluster_id": node.cluster_id,
        "profile_id": node.profile_id,
        "profile_name": node.profile_name,
        "index": node.index,
        "role": node.role,
        "status": node.status,
        "status_reason": node.status_reason,
        "physical_id": optional(&node.physical_id),
        "tainted": node.tainted,
        "protected": node.protected,
        "project": node.project_id,
        "user": node.user_id,
        "domain": null,
        "metadata": document(&node.metadata),
        "data": {},
        "dependents": {},
        "init_at": time(node.created_at.as_ref()),
        "created_at": time(node.created_at.as_ref()),
        "updated_at": time(node.updated_at.as_ref()),
    })
}

/// Senlin's node view at `version`: `tainted` is shown from 1.13 on.
pub fn node_at(node: &pb::Node, version: super::version::ApiVersion) -> Value {
    let mut view = self::node(node);
    if version < super::version::ApiVersion::new(1, 13)
        && let Some(fields) = view.as_object_mut()
    {
        fields.remove("tainted");
    }
    view
}

pub fn action(action: &pb::Action) -> Value {
    json!({
        "id": action.id,
        "name": action.name,
        "action": action.action,
        "target": action.target_id,
        "cluster_id": action.cluster_id,
        "status": action.status,
        "status_reason": action.status_reason,
        "inputs": document(&action.inputs),
        "outputs": document(&action.outputs),
        "depends_on": action.depends_on,
        "depended_by": action.depended_by,
        "owner": optional(&action.owner),
        "lifecycle_outcome": optional(&action.lifecycle_outcome),
        "project": action.project_id,
        "user": action.user_id,
        // Senlin's two causes: asked for by a user, or made by another
        // action (the children of a removal).
        "cause": if action.depended_by.is_empty() { "RPC Request" } else { "Derived Action" },
        "data": {},
        "interval": -1,
        "timeout": null,
        "start_time": epoch(action.started_at.as_ref()),
        "end_time": epoch(action.ended_at.as_ref()),
        "created_at": time(action.created_at.as_ref()),
        "updated_at": time(action.updated_at.as_ref()),
    })
}

pub fn event(event: &pb::ClusterEvent) -> Value {
    json!({
        "id": event.id,
        "generated_at": time(event.generated_at.as_ref()),
        "timestamp": time(event.generated_at.as_ref()),
        "obj_id": event.obj_id,
        "oid": event.obj_id,
        "obj_type": event.obj_type,
        "otype": event.obj_type,
        "obj_name": event.obj_name,
        "oname": event.obj_name,
        "cluster_id": event.cluster_id,
        "action": event.action,
        "status": event.status,
        "status_reason": event.status_reason,
        "level": event.level,
        "project": event.project_id,
        "user": event.user_id,
    })
}

pub fn cluster_policy(binding: &pb::ClusterPolicy) -> Value {
    json!({
        "id": format!("{}:{}", binding.cluster_id, binding.policy_id),
        "cluster_id": binding.cluster_id,
        "cluster_name": binding.cluster_name,
        "policy_id": binding.policy_id,
        "data": {},
        "last_op": null,
        "policy_name": binding.policy_name,
        "policy_type": binding.policy_type,
        "priority": binding.priority,
        "enabled": binding.enabled,
    })
}

/// A deadline for heartbeat answers.
pub fn deadline(deadline: Option<&prost_types::Timestamp>) -> Value {
    time(deadline)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_member_ids_are_written_as_the_ids_they_pack() {
        let ids = [uuid::Uuid::now_v7(), uuid::Uuid::now_v7()];
        let packed: Vec<u8> = ids.iter().flat_map(|id| *id.as_bytes()).collect();
        let text: Vec<String> = ids.iter().map(ToString::to_string).collect();
        assert_eq!(
            serde_json::to_value(Members::Packed(&packed)).unwrap(),
            serde_json::to_value(Members::Text(&text)).unwrap()
        );
        assert_eq!(
            serde_json::to_value(Members::Packed(&[])).unwrap(),
            json!([])
        );
    }

    #[test]
    fn packed_member_ids_of_a_wrong_length_are_an_error_not_a_guess() {
        let error = serde_json::to_string(&Members::Packed(&[0; 20])).unwrap_err();
        assert!(
            error.to_string().contains("20 bytes of packed member ids"),
            "{error}"
        );
    }
}
