//! Rows ↔ domain values. A stored value that does not parse is reported as
//! a database error naming the row, never a panic.

use sea_orm::ActiveValue::Set;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::entity::{action, binding, cluster, event, node, policy, profile};
use crate::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, ClusterConfig, ClusterEvent, ClusterStatus,
    LifecycleOutcome, Node, NodeStatus, PolicyBinding, PolicyDefinition, PolicyKind, Profile,
    ProfileSpec,
};
use crate::error::{Error, Result};

fn corrupt(what: &str, id: impl std::fmt::Display) -> Error {
    Error::Database(format!("{what} {id}: stored value is invalid"))
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn uuids(value: &Value) -> Vec<Uuid> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().and_then(|text| Uuid::parse_str(text).ok()))
                .collect()
        })
        .unwrap_or_default()
}

pub fn uuids_json(ids: &[Uuid]) -> Value {
    Value::Array(ids.iter().map(|id| Value::String(id.to_string())).collect())
}

pub fn profile_row(profile: &Profile) -> profile::ActiveModel {
    profile::ActiveModel {
        id: Set(profile.id),
        name: Set(profile.name.clone()),
        type_name: Set(profile.spec.type_name().to_owned()),
        spec: Set(profile.spec.spec.clone()),
        metadata: Set(Value::Object(profile.metadata.clone())),
        protected: Set(profile.protected),
        project_id: Set(profile.project_id.clone()),
        user_id: Set(profile.user_id.clone()),
        created_at: Set(profile.created_at),
        updated_at: Set(profile.updated_at),
    }
}

pub fn profile_from(row: profile::Model) -> Result<Profile> {
    let spec = ProfileSpec::parse(row.spec).map_err(|_| corrupt("profile", row.id))?;
    Ok(Profile {
        id: row.id,
        name: row.name,
        spec,
        metadata: object(row.metadata),
        protected: row.protected,
        project_id: row.project_id,
        user_id: row.user_id,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

pub fn policy_row(policy: &PolicyDefinition) -> policy::ActiveModel {
    policy::ActiveModel {
        id: Set(policy.id),
        name: Set(policy.name.clone()),
        type_name: Set(policy.kind.type_name()),
        spec: Set(policy.spec.clone()),
        project_id: Set(policy.project_id.clone()),
        user_id: Set(policy.user_id.clone()),
        created_at: Set(policy.created_at),
        updated_at: Set(policy.updated_at),
    }
}

pub fn policy_from(row: policy::Model) -> Result<PolicyDefinition> {
    let kind = PolicyKind::parse_stored(&row.spec).map_err(|_| corrupt("policy", row.id))?;
    Ok(PolicyDefinition {
        id: row.id,
        name: row.name,
        kind,
        spec: row.spec,
        project_id: row.project_id,
        user_id: row.user_id,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

pub fn binding_from(row: binding::Model) -> PolicyBinding {
    PolicyBinding {
        cluster_id: row.cluster_id,
        policy_id: row.policy_id,
        priority: row.priority,
        enabled: row.enabled,
    }
}

pub fn binding_row(binding: &PolicyBinding) -> binding::ActiveModel {
    binding::ActiveModel {
        cluster_id: Set(binding.cluster_id),
        policy_id: Set(binding.policy_id),
        priority: Set(binding.priority),
        enabled: Set(binding.enabled),
    }
}

pub fn cluster_row(cluster: &Cluster) -> cluster::ActiveModel {
    cluster::ActiveModel {
        id: Set(cluster.id),
        name: Set(cluster.name.clone()),
        profile_id: Set(cluster.profile_id),
        min_size: Set(cluster.min_size),
        max_size: Set(cluster.max_size),
        desired_capacity: Set(cluster.desired_capacity),
        status: Set(cluster.status.as_str().to_owned()),
        status_reason: Set(cluster.status_reason.clone()),
        metadata: Set(Value::Object(cluster.metadata.clone())),
        next_index: Set(cluster.next_index),
        timeout: Set(cluster.timeout),
        config: Set(Value::Object(cluster.config.values().clone())),
        project_id: Set(cluster.project_id.clone()),
        user_id: Set(cluster.user_id.clone()),
        created_at: Set(cluster.created_at),
        updated_at: Set(cluster.updated_at),
        lock_action_id: Set(None),
        maintenance_lock: Set(None),
        lock_expires_at: Set(None),
    }
}

pub fn cluster_from(row: cluster::Model) -> Result<Cluster> {
    Ok(Cluster {
        status: ClusterStatus::parse(&row.status).ok_or_else(|| corrupt("cluster", row.id))?,
        id: row.id,
        name: row.name,
        profile_id: row.profile_id,
        min_size: row.min_size,
        max_size: row.max_size,
        desired_capacity: row.desired_capacity,
        status_reason: row.status_reason,
        metadata: object(row.metadata),
        next_index: row.next_index,
        timeout: row.timeout,
        config: ClusterConfig::stored(object(row.config)),
        project_id: row.project_id,
        user_id: row.user_id,
        created_at: row.created_at,
        updated_at: row.updated_at,
        maintenance_lock: match row.maintenance_lock {
            None => None,
            Some(stored) => {
                Some(serde_json::from_str(&stored).map_err(|_| corrupt("cluster", row.id))?)
            }
        },
    })
}

pub fn node_row(node: &Node) -> node::ActiveModel {
    node::ActiveModel {
        id: Set(node.id),
        name: Set(node.name.clone()),
        cluster_id: Set(node.cluster_id),
        profile_id: Set(node.profile_id),
        node_index: Set(node.index),
        role: Set(node.role.clone()),
        status: Set(node.status.as_str().to_owned()),
        status_reason: Set(node.status_reason.clone()),
        physical_id: Set(node.physical_id.clone()),
        tainted: Set(node.tainted),
        protected: Set(node.protected),
        metadata: Set(Value::Object(node.metadata.clone())),
        project_id: Set(node.project_id.clone()),
        user_id: Set(node.user_id.clone()),
        created_at: Set(node.created_at),
        updated_at: Set(node.updated_at),
    }
}

pub fn node_from(row: node::Model) -> Result<Node> {
    Ok(Node {
        status: NodeStatus::parse(&row.status).ok_or_else(|| corrupt("node", row.id))?,
        id: row.id,
        name: row.name,
        cluster_id: row.cluster_id,
        profile_id: row.profile_id,
        index: row.node_index,
        role: row.role,
        status_reason: row.status_reason,
        physical_id: row.physical_id,
        tainted: row.tainted,
        protected: row.protected,
        metadata: object(row.metadata),
        project_id: row.project_id,
        user_id: row.user_id,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

pub fn action_row(action: &ClusterAction) -> action::ActiveModel {
    action::ActiveModel {
        id: Set(action.id),
        name: Set(action.name.clone()),
        kind: Set(action.kind.as_str().to_owned()),
        target_id: Set(action.target_id),
        cluster_id: Set(action.cluster_id),
        status: Set(action.status.as_str().to_owned()),
        status_reason: Set(action.status_reason.clone()),
        inputs: Set(Value::Object(action.inputs.clone())),
        outputs: Set(Value::Object(action.outputs.clone())),
        depends_on: Set(uuids_json(&action.depends_on)),
        depended_by: Set(uuids_json(&action.depended_by)),
        owner: Set(action.owner),
        lease_expires_at: Set(action.lease_expires_at),
        lifecycle_outcome: Set(action
            .lifecycle_outcome
            .map(|outcome| outcome.as_str().to_owned())),
        lifecycle_detail: Set(action.lifecycle_detail.clone()),
        hook_recorded: Set(action.hook_recorded),
        project_id: Set(action.project_id.clone()),
        user_id: Set(action.user_id.clone()),
        roles: Set(action.roles.join(",")),
        attempt: Set(action.attempt),
        takes_cluster_lock: Set(action.takes_cluster_lock()),
        created_at: Set(action.created_at),
        updated_at: Set(action.updated_at),
        started_at: Set(action.started_at),
    }
}

pub fn action_from(row: action::Model) -> Result<ClusterAction> {
    let kind = ActionKind::parse(&row.kind).ok_or_else(|| corrupt("action", row.id))?;
    let status = ActionStatus::parse(&row.status).ok_or_else(|| corrupt("action", row.id))?;
    let lifecycle_outcome = match &row.lifecycle_outcome {
        None => None,
        Some(text) => Some(LifecycleOutcome::parse(text).ok_or_else(|| corrupt("action", row.id))?),
    };
    Ok(ClusterAction {
        id: row.id,
        name: row.name,
        kind,
        target_id: row.target_id,
        cluster_id: row.cluster_id,
        status,
        status_reason: row.status_reason,
        inputs: object(row.inputs),
        outputs: object(row.outputs),
        depends_on: uuids(&row.depends_on),
        depended_by: uuids(&row.depended_by),
        owner: row.owner,
        lease_expires_at: row.lease_expires_at,
        lifecycle_outcome,
        lifecycle_detail: row.lifecycle_detail,
        hook_recorded: row.hook_recorded,
        attempt: row.attempt,
        project_id: row.project_id,
        user_id: row.user_id,
        roles: row
            .roles
            .split(',')
            .filter(|role| !role.is_empty())
            .map(str::to_owned)
            .collect(),
        created_at: row.created_at,
        updated_at: row.updated_at,
        started_at: row.started_at,
    })
}

pub fn event_row(event: &ClusterEvent) -> event::ActiveModel {
    event::ActiveModel {
        id: Set(event.id),
        generated_at: Set(event.generated_at),
        obj_id: Set(event.obj_id.clone()),
        obj_type: Set(event.obj_type.clone()),
        obj_name: Set(event.obj_name.clone()),
        cluster_id: Set(event.cluster_id),
        action: Set(event.action.clone()),
        status: Set(event.status.clone()),
        status_reason: Set(event.status_reason.clone()),
        level: Set(event.level.clone()),
        project_id: Set(event.project_id.clone()),
        user_id: Set(event.user_id.clone()),
    }
}

pub fn event_from(row: event::Model) -> ClusterEvent {
    ClusterEvent {
        id: row.id,
        generated_at: row.generated_at,
        obj_id: row.obj_id,
        obj_type: row.obj_type,
        obj_name: row.obj_name,
        cluster_id: row.cluster_id,
        action: row.action,
        status: row.status,
        status_reason: row.status_reason,
        level: row.level,
        project_id: row.project_id,
        user_id: row.user_id,
    }
}
