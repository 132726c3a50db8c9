//! Clusters, nodes, profiles and policies (OpenStack Senlin's model): pure
//! types and rules, no I/O. What runs them lives in `crate::clusters`.

pub mod action;
pub mod config;
pub mod lock;
pub mod operations;
pub mod policy;
pub mod profile;
pub mod query;
pub mod remediation;
pub mod settle;
pub mod sizing;
pub mod types;
pub mod victims;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::error::{Error, Result};

pub use action::{
    ActionKind, ActionStatus, ClusterAction, Fence, LifecycleOutcome, MAX_RUN_ATTEMPTS,
};
pub use config::ClusterConfig;
pub use lock::{ClusterLock, ClusterLockLevel};
pub use policy::{
    DeletionPolicy, HookTarget, HookTransition, LaunchPolicy, LifecycleHooks, OnAbandon,
    PolicyKind, ScalingPolicy,
};
pub use profile::{ProfileKind, ProfileSpec};

/// Where a cluster is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterStatus {
    Init,
    Active,
    Error,
    Warning,
    Resizing,
    Deleting,
}

impl ClusterStatus {
    pub const ALL: [ClusterStatus; 6] = [
        ClusterStatus::Init,
        ClusterStatus::Active,
        ClusterStatus::Error,
        ClusterStatus::Warning,
        ClusterStatus::Resizing,
        ClusterStatus::Deleting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ClusterStatus::Init => "INIT",
            ClusterStatus::Active => "ACTIVE",
            ClusterStatus::Error => "ERROR",
            ClusterStatus::Warning => "WARNING",
            ClusterStatus::Resizing => "RESIZING",
            ClusterStatus::Deleting => "DELETING",
        }
    }

    pub fn parse(text: &str) -> Option<ClusterStatus> {
        ClusterStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// Where a node is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeStatus {
    /// Recorded by a node create request whose NODE_CREATE has not run yet
    /// (Senlin's INIT): not yet counted as a member of its cluster.
    Init,
    Creating,
    Active,
    Error,
    Warning,
    Deleting,
}

impl NodeStatus {
    pub const ALL: [NodeStatus; 6] = [
        NodeStatus::Init,
        NodeStatus::Creating,
        NodeStatus::Active,
        NodeStatus::Error,
        NodeStatus::Warning,
        NodeStatus::Deleting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Init => "INIT",
            NodeStatus::Creating => "CREATING",
            NodeStatus::Active => "ACTIVE",
            NodeStatus::Error => "ERROR",
            NodeStatus::Warning => "WARNING",
            NodeStatus::Deleting => "DELETING",
        }
    }

    pub fn parse(text: &str) -> Option<NodeStatus> {
        NodeStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub id: Uuid,
    pub name: String,
    pub spec: ProfileSpec,
    pub metadata: Map<String, Value>,
    /// The nodes made from it start protected from scale-in.
    pub protected: bool,
    pub project_id: String,
    pub user_id: String,
    pub created_at: DateTime<Utc>,
    /// When its name or metadata last changed.
    pub updated_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PolicyDefinition {
    pub id: Uuid,
    pub name: String,
    pub kind: PolicyKind,
    /// The spec as given (Senlin shows it back).
    pub spec: Value,
    pub project_id: String,
    pub user_id: String,
    pub created_at: DateTime<Utc>,
    /// When its name last changed.
    pub updated_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    pub id: Uuid,
    pub name: String,
    pub profile_id: Uuid,
    pub min_size: i32,
    /// -1 = unlimited.
    pub max_size: i32,
    pub desired_capacity: i32,
    pub status: ClusterStatus,
    pub status_reason: String,
    pub metadata: Map<String, Value>,
    /// The index the next node gets.
    pub next_index: i32,
    /// Seconds an action on the cluster may take (Senlin's cluster timeout);
    /// None = the engine's default.
    pub timeout: Option<i32>,
    /// Senlin's `config` (node names, stop before delete, …).
    pub config: ClusterConfig,
    pub project_id: String,
    pub user_id: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The maintenance lock, if one was taken and not lifted yet.
    pub maintenance_lock: Option<ClusterLock>,
}

impl Cluster {
    /// Checks a new cluster's sizes as Senlin does, in its words: each
    /// capacity at least 0 (max_size -1 = unlimited), then
    /// min <= desired <= max ([`sizing::check_size_params`], strict).
    pub fn validate_sizes(min_size: i32, max_size: i32, desired: i32) -> Result<()> {
        sizing::check_capacity_field("min_size", min_size, 0)?;
        sizing::check_capacity_field("max_size", max_size, -1)?;
        sizing::check_capacity_field("desired_capacity", desired, 0)?;
        sizing::check_size_params(None, Some(desired), Some(min_size), Some(max_size), true)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub id: Uuid,
    pub name: String,
    /// `None` for an orphan node.
    pub cluster_id: Option<Uuid>,
    pub profile_id: Uuid,
    pub index: i32,
    pub role: String,
    pub status: NodeStatus,
    pub status_reason: String,
    /// The instance or stack id, once created.
    pub physical_id: Option<String>,
    /// Chosen first for removal (Senlin's node tainting).
    pub tainted: bool,
    /// Protected from scale-in: never chosen for removal, and not deleted
    /// (409) until cleared.
    pub protected: bool,
    pub metadata: Map<String, Value>,
    pub project_id: String,
    pub user_id: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Node {
    /// Whether the node counts in its cluster's size: a member that is not
    /// still waiting for its NODE_CREATE (INIT).
    pub fn is_counted_member(&self) -> bool {
        self.cluster_id.is_some() && self.status != NodeStatus::Init
    }
}

/// The name a cluster gives the member with `index` (Senlin's
/// `node-<cluster>-<index>`): unique within the cluster because the index
/// is (indexes are allocated atomically and never reused).
pub fn member_node_name(cluster_id: Uuid, index: i32) -> String {
    format!("node-{}-{index:03}", &cluster_id.simple().to_string()[..8])
}

/// A policy attached to a cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyBinding {
    pub cluster_id: Uuid,
    pub policy_id: Uuid,
    pub priority: i32,
    pub enabled: bool,
}

/// Something that happened to a cluster, node or action (Senlin's events).
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterEvent {
    pub id: Uuid,
    pub generated_at: DateTime<Utc>,
    pub obj_id: String,
    pub obj_type: String,
    pub obj_name: String,
    pub cluster_id: Option<Uuid>,
    pub action: String,
    pub status: String,
    pub status_reason: String,
    pub level: String,
    pub project_id: String,
    pub user_id: String,
}

impl ClusterEvent {
    /// An event about an object, by the caller `project_id`/`user_id`
    /// (ERROR level for FAILED and ERROR statuses).
    #[allow(clippy::too_many_arguments)] // Senlin's event fields, in Senlin's order
    pub fn new(
        obj_type: &str,
        obj_id: impl ToString,
        obj_name: &str,
        cluster_id: Option<Uuid>,
        action: &str,
        status: &str,
        status_reason: String,
        project_id: &str,
        user_id: &str,
    ) -> ClusterEvent {
        let level = if status == "FAILED" || status == "ERROR" {
            "ERROR"
        } else {
            "INFO"
        };
        ClusterEvent {
            id: Uuid::now_v7(),
            generated_at: ember_runtime::time::now(),
            obj_id: obj_id.to_string(),
            obj_type: obj_type.to_owned(),
            obj_name: obj_name.to_owned(),
            cluster_id,
            action: action.to_owned(),
            status: status.to_owned(),
            status_reason,
            level: level.to_owned(),
            project_id: project_id.to_owned(),
            user_id: user_id.to_owned(),
        }
    }
}

/// Senlin's rule for names: 1-255 characters, starting with a letter or
/// digit, then letters, digits and `_-.~`.
pub fn validate_name(what: &str, name: &str) -> Result<()> {
    let valid = !name.is_empty()
        && name.len() <= 255
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '~'));
    if valid {
        Ok(())
    } else {
        Err(Error::InvalidInput(format!(
            "{what} name {:?} is invalid: use 1-255 letters, digits and _-.~, starting with a letter or digit",
            ember_runtime::quote::quoted(name)
        )))
    }
}

/// A JSON object from text; empty text is an empty object.
pub fn parse_object(what: &str, text: &str) -> Result<Map<String, Value>> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(Error::InvalidInput(format!("{what} must be a JSON object"))),
        Err(error) => Err(Error::InvalidInput(format!(
            "{what} is not valid JSON: {error}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_senlin() {
        assert!(Cluster::validate_sizes(0, -1, 5).is_ok());
        assert!(Cluster::validate_sizes(1, 3, 3).is_ok());
        let refused = |min, max, desired| match Cluster::validate_sizes(min, max, desired) {
            Err(Error::InvalidInput(message)) => message,
            other => panic!("{min} {max} {desired}: {other:?}"),
        };
        assert_eq!(
            refused(5, 3, 2),
            "The target capacity (2) is less than the specified min_size (5)."
        );
        assert_eq!(
            refused(2, 1, 2),
            "The target capacity (2) is greater than the specified max_size (1)."
        );
        assert_eq!(
            refused(0, 2, 3),
            "The target capacity (3) is greater than the specified max_size (2)."
        );
        assert_eq!(
            refused(-1, 2, 0),
            "The value for the min_size field must be greater than or equal to 0."
        );
        assert_eq!(
            refused(0, -2, 0),
            "The value for the max_size field must be greater than or equal to -1."
        );
    }

    #[test]
    fn names_and_statuses() {
        assert!(validate_name("cluster", "web-1").is_ok());
        assert!(validate_name("cluster", "-x").is_err());
        for status in NodeStatus::ALL {
            assert_eq!(NodeStatus::parse(status.as_str()), Some(status));
        }
        for status in ClusterStatus::ALL {
            assert_eq!(ClusterStatus::parse(status.as_str()), Some(status));
        }
    }
}
