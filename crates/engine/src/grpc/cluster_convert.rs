//! Clustering domain values → protobuf messages, and request parsing
//! helpers shared by the clustering handlers (`profiles`, `policies`,
//! `clusters`, `nodes`, `cluster_actions`).

use ember_proto::engine::v1 as pb;
use ember_runtime::ids::parse_optional_uuid;
use ember_runtime::time::to_timestamp;
use serde_json::Value;
use uuid::Uuid;

use super::convert::uuid_text;
use crate::clusters::ClusterDetails;
use crate::domain::cluster::query::{ObjectQuery, SortKey};
use crate::domain::cluster::{
    ClusterAction, ClusterEvent, Node, PolicyBinding, PolicyDefinition, Profile,
};
use crate::error::{Error, Result};

pub fn profile(profile: &Profile) -> pb::Profile {
    pb::Profile {
        id: profile.id.to_string(),
        name: profile.name.clone(),
        r#type: profile.spec.type_name().to_owned(),
        spec: profile.spec.spec.to_string(),
        metadata: Value::Object(profile.metadata.clone()).to_string(),
        project_id: profile.project_id.clone(),
        user_id: profile.user_id.clone(),
        created_at: Some(to_timestamp(profile.created_at)),
        updated_at: profile.updated_at.map(to_timestamp),
        protected: profile.protected,
    }
}

pub fn policy(policy: &PolicyDefinition) -> pb::Policy {
    pb::Policy {
        id: policy.id.to_string(),
        name: policy.name.clone(),
        r#type: policy.kind.type_name(),
        spec: policy.spec.to_string(),
        project_id: policy.project_id.clone(),
        user_id: policy.user_id.clone(),
        created_at: Some(to_timestamp(policy.created_at)),
        updated_at: policy.updated_at.map(to_timestamp),
    }
}

/// [`cluster`] with its member ids packed (`packed_node_ids`, 16 bytes
/// each) rather than as strings.
pub fn cluster_packed(details: &ClusterDetails) -> pb::Cluster {
    let mut packed = Vec::with_capacity(details.node_ids.len() * 16);
    for id in &details.node_ids {
        packed.extend_from_slice(id.as_bytes());
    }
    pb::Cluster {
        packed_node_ids: packed,
        ..cluster_without_members(details)
    }
}

pub fn cluster(details: &ClusterDetails) -> pb::Cluster {
    pb::Cluster {
        node_ids: details.node_ids.iter().copied().map(uuid_text).collect(),
        ..cluster_without_members(details)
    }
}

fn cluster_without_members(details: &ClusterDetails) -> pb::Cluster {
    let ClusterDetails {
        cluster,
        profile_name,
        node_ids: _,
        policy_ids,
        remediation,
    } = details;
    pb::Cluster {
        id: cluster.id.to_string(),
        name: cluster.name.clone(),
        profile_id: cluster.profile_id.to_string(),
        profile_name: profile_name.clone(),
        min_size: cluster.min_size,
        max_size: cluster.max_size,
        desired_capacity: cluster.desired_capacity,
        status: cluster.status.as_str().to_owned(),
        status_reason: cluster.status_reason.clone(),
        metadata: Value::Object(cluster.metadata.clone()).to_string(),
        node_ids: Vec::new(),
        packed_node_ids: Vec::new(),
        policy_ids: policy_ids.iter().map(Uuid::to_string).collect(),
        project_id: cluster.project_id.clone(),
        user_id: cluster.user_id.clone(),
        created_at: Some(to_timestamp(cluster.created_at)),
        updated_at: Some(to_timestamp(cluster.updated_at)),
        timeout: cluster.timeout,
        config: Value::Object(cluster.config.values().clone()).to_string(),
        maintenance_lock: cluster.maintenance_lock.as_ref().map(cluster_lock),
        remediation: remediation.as_ref().map(remediation_status),
    }
}

pub fn remediation_status(
    status: &crate::clusters::remediation::RemediationStatus,
) -> pb::Remediation {
    let count = |value: usize| u32::try_from(value).unwrap_or(u32::MAX);
    pb::Remediation {
        policy: status.policy_name.clone(),
        max_unhealthy: status.policy.max_unhealthy.describe(),
        max_unhealthy_count: count(status.budget.max_unhealthy),
        unhealthy: count(status.budget.unhealthy),
        members: count(status.budget.members),
        max_recoveries: status.policy.max_recoveries,
        window: status.policy.window_secs,
        recoveries_in_window: count(status.budget.recoveries_in_window),
        remaining: status.budget.remaining.map(count),
        held: status.held.clone().unwrap_or_default(),
    }
}

pub fn cluster_lock(lock: &crate::domain::cluster::ClusterLock) -> pb::ClusterLock {
    pb::ClusterLock {
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
        locked_instances: lock.locked_instances.iter().map(Uuid::to_string).collect(),
    }
}

/// A lock request's fields (a timestamp out of range is refused, naming
/// it).
pub fn lock_request(
    request: &pb::LockClusterRequest,
) -> Result<crate::clusters::ClusterLockRequest> {
    Ok(crate::clusters::ClusterLockRequest {
        level: crate::domain::cluster::ClusterLockLevel::parse(&request.level)?,
        reason: (!request.reason.is_empty()).then(|| request.reason.clone()),
        expires_in: request.expires_in,
        expires_at: request
            .expires_at
            .as_ref()
            .map(super::convert::expiry_time)
            .transpose()?,
    })
}

/// A node without its profile's name (see [`named_node`]).
pub fn node(node: &Node) -> pb::Node {
    pb::Node {
        id: node.id.to_string(),
        name: node.name.clone(),
        cluster_id: node.cluster_id.map(|id| id.to_string()).unwrap_or_default(),
        profile_id: node.profile_id.to_string(),
        index: node.index,
        role: node.role.clone(),
        status: node.status.as_str().to_owned(),
        status_reason: node.status_reason.clone(),
        physical_id: node.physical_id.clone().unwrap_or_default(),
        tainted: node.tainted,
        protected: node.protected,
        project_id: node.project_id.clone(),
        user_id: node.user_id.clone(),
        created_at: Some(to_timestamp(node.created_at)),
        updated_at: Some(to_timestamp(node.updated_at)),
        profile_name: String::new(),
        metadata: serde_json::Value::Object(node.metadata.clone()).to_string(),
        details: String::new(),
    }
}

/// A node with the name of its profile (Senlin's node view shows it).
pub fn named_node(node: &Node, profile_name: &str) -> pb::Node {
    pb::Node {
        profile_name: profile_name.to_owned(),
        ..self::node(node)
    }
}

pub fn action(action: &ClusterAction) -> pb::Action {
    pb::Action {
        id: action.id.to_string(),
        name: action.name.clone(),
        action: action.kind.as_str().to_owned(),
        target_id: action.target_id.to_string(),
        cluster_id: action
            .cluster_id
            .map(|id| id.to_string())
            .unwrap_or_default(),
        status: action.status.as_str().to_owned(),
        status_reason: action.status_reason.clone(),
        inputs: Value::Object(action.inputs.clone()).to_string(),
        outputs: Value::Object(action.outputs.clone()).to_string(),
        depends_on: action.depends_on.iter().map(Uuid::to_string).collect(),
        depended_by: action.depended_by.iter().map(Uuid::to_string).collect(),
        owner: action.owner.map(|id| id.to_string()).unwrap_or_default(),
        lifecycle_outcome: action
            .lifecycle_outcome
            .map(|outcome| outcome.as_str().to_owned())
            .unwrap_or_default(),
        project_id: action.project_id.clone(),
        user_id: action.user_id.clone(),
        created_at: Some(to_timestamp(action.created_at)),
        updated_at: Some(to_timestamp(action.updated_at)),
        started_at: action.started_at.map(to_timestamp),
        // Nothing updates a finished action: its last update is its end.
        ended_at: action
            .status
            .is_final()
            .then(|| to_timestamp(action.updated_at)),
    }
}

pub fn event(event: &ClusterEvent) -> pb::ClusterEvent {
    pb::ClusterEvent {
        id: event.id.to_string(),
        generated_at: Some(to_timestamp(event.generated_at)),
        obj_id: event.obj_id.clone(),
        obj_type: event.obj_type.clone(),
        obj_name: event.obj_name.clone(),
        cluster_id: event
            .cluster_id
            .map(|id| id.to_string())
            .unwrap_or_default(),
        action: event.action.clone(),
        status: event.status.clone(),
        status_reason: event.status_reason.clone(),
        level: event.level.clone(),
        project_id: event.project_id.clone(),
        user_id: event.user_id.clone(),
    }
}

pub fn binding(
    binding: &PolicyBinding,
    policy: &PolicyDefinition,
    cluster_name: &str,
) -> pb::ClusterPolicy {
    pb::ClusterPolicy {
        cluster_id: binding.cluster_id.to_string(),
        cluster_name: cluster_name.to_owned(),
        policy_id: policy.id.to_string(),
        policy_name: policy.name.clone(),
        policy_type: policy.kind.type_name(),
        priority: binding.priority,
        enabled: binding.enabled,
    }
}

/// A JSON document from a request field.
pub fn json(field: &str, text: &str) -> Result<Value> {
    serde_json::from_str(text)
        .map_err(|error| Error::InvalidInput(format!("{field} is not valid JSON: {error}")))
}

/// An optional marker.
pub fn marker(text: &str) -> Result<Option<Uuid>> {
    Ok(parse_optional_uuid("marker", text)?)
}

pub fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

/// The filters, order and page of a profile, policy or cluster list
/// (sorted by `sort_keys` only), and whether it asks for every project.
pub fn object_query(
    request: pb::ListObjectsRequest,
    sort_keys: &[&str],
) -> Result<(bool, ObjectQuery)> {
    let names = non_empty(request.name)
        .into_iter()
        .chain(request.names)
        .collect();
    let query = ObjectQuery {
        project_id: None,
        names,
        types: request.types,
        statuses: request.statuses,
        sort: SortKey::parse_list(&request.sort, sort_keys)?,
        limit: request.limit,
        marker: marker(&request.marker)?,
    };
    Ok((request.global_project, query))
}

/// The answer to a request that recorded a cluster action, with the
/// cluster as it is now when there is one to show.
pub fn accepted(action: &ClusterAction, cluster: Option<pb::Cluster>) -> pb::ClusterActionResponse {
    pb::ClusterActionResponse {
        action_id: action.id.to_string(),
        cluster,
    }
}
