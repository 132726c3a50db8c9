//! How a cluster comes out of an action: its status and desired capacity
//! recomputed from its member nodes (Senlin's `Cluster.eval_status`), in
//! the same transaction that makes the action final and releases the
//! cluster's lock — so a cluster is never left RESIZING, and its desired
//! capacity is the number of nodes it has.
//!
//! Nodes still CREATING or DELETING when an action ends were left so by a
//! run that failed or went away; the store turns them ERROR (with a reason
//! saying so) before settling, so they count as unhealthy members.

use super::{Cluster, ClusterStatus, NodeStatus};

/// What the cluster becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settlement {
    pub status: ClusterStatus,
    pub status_reason: String,
    pub desired_capacity: i32,
}

/// Settles `cluster` whose counted members (INIT nodes excluded) are in
/// `members`. `keep_desired` keeps the desired capacity as it is (a
/// deletion policy with `reduce_desired_capacity: false`); otherwise it
/// becomes the number of members. `lead` opens the reason
/// (`CLUSTER_SCALE_OUT completed`).
pub fn settle(
    cluster: &Cluster,
    members: &[NodeStatus],
    keep_desired: bool,
    lead: &str,
) -> Settlement {
    let live = i32::try_from(members.len()).unwrap_or(i32::MAX);
    let active = i32::try_from(
        members
            .iter()
            .filter(|status| **status == NodeStatus::Active)
            .count(),
    )
    .unwrap_or(i32::MAX);
    let desired_capacity = if keep_desired {
        cluster.desired_capacity
    } else {
        live
    };
    let (status, status_reason) = if active < cluster.min_size {
        (
            ClusterStatus::Error,
            format!(
                "{lead}: {active} ACTIVE node(s) of {live}, fewer than min_size {}",
                cluster.min_size
            ),
        )
    } else if active < desired_capacity {
        (
            ClusterStatus::Warning,
            format!("{lead}: {active} of {desired_capacity} node(s) ACTIVE"),
        )
    } else if cluster.max_size != -1 && live > cluster.max_size {
        (
            ClusterStatus::Warning,
            format!(
                "{lead}: {live} node(s), more than max_size {}",
                cluster.max_size
            ),
        )
    } else {
        (
            ClusterStatus::Active,
            format!("{lead}: {live} node(s) ACTIVE"),
        )
    };
    Settlement {
        status,
        status_reason,
        desired_capacity,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;
    use uuid::Uuid;

    fn cluster(min_size: i32, max_size: i32, desired_capacity: i32) -> Cluster {
        let now = chrono::Utc::now();
        Cluster {
            id: Uuid::now_v7(),
            name: "web".into(),
            profile_id: Uuid::now_v7(),
            min_size,
            max_size,
            desired_capacity,
            status: ClusterStatus::Resizing,
            status_reason: "resizing".into(),
            metadata: Map::new(),
            next_index: 1,
            timeout: None,
            config: crate::domain::cluster::ClusterConfig::default(),
            project_id: "p".into(),
            user_id: "u".into(),
            created_at: now,
            updated_at: now,
            maintenance_lock: None,
        }
    }

    use NodeStatus::{Active, Error};

    #[test]
    fn all_active_members_make_an_active_cluster_of_that_size() {
        let settled = settle(&cluster(0, 10, 7), &[Active, Active, Active], false, "done");
        assert_eq!(settled.status, ClusterStatus::Active);
        assert_eq!(settled.desired_capacity, 3);
        assert_eq!(settled.status_reason, "done: 3 node(s) ACTIVE");
    }

    #[test]
    fn unhealthy_members_warn_and_below_min_size_is_an_error() {
        let warned = settle(&cluster(1, -1, 3), &[Active, Error, Active], false, "x");
        assert_eq!(warned.status, ClusterStatus::Warning);
        assert_eq!(warned.desired_capacity, 3);
        assert!(warned.status_reason.contains("2 of 3"), "{warned:?}");
        let failed = settle(&cluster(2, -1, 3), &[Active, Error, Error], false, "x");
        assert_eq!(failed.status, ClusterStatus::Error);
        assert!(failed.status_reason.contains("min_size 2"), "{failed:?}");
    }

    #[test]
    fn a_kept_desired_capacity_short_of_nodes_warns() {
        let settled = settle(&cluster(0, -1, 4), &[Active, Active], true, "x");
        assert_eq!(settled.desired_capacity, 4);
        assert_eq!(settled.status, ClusterStatus::Warning);
    }

    #[test]
    fn an_empty_cluster_with_min_size_zero_is_active() {
        let settled = settle(&cluster(0, -1, 2), &[], false, "x");
        assert_eq!(settled.status, ClusterStatus::Active);
        assert_eq!(settled.desired_capacity, 0);
    }
}
