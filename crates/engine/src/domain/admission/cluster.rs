//! Whether a clustering operation may be asked for now, by this caller, on
//! this cluster or node — decided here, once, for every entry point (gRPC,
//! the REST gateway through it, the CLI, lifecycle callbacks). Pure: the
//! caller looks the objects up (a cluster or node of another project is
//! not found before it gets here) and passes them in.
//!
//! The rules:
//! - Reading is always admitted.
//! - A caller whose roles hold `reader` but neither `member` nor `admin`
//!   may change nothing (403).
//! - A cluster being deleted (DELETING) admits no further action, member
//!   node create or delete (409); its nodes may still be renamed or
//!   tainted.
//! - Scale counts must fit in a cluster (`i32`, 400), and a count that
//!   would cross `max_size` (out) or `min_size` (in) from the current
//!   desired capacity is refused at once (409) rather than as a FAILED
//!   action, as is a member node for a cluster at its `max_size`; the
//!   action checks again when it runs under the cluster lock.
//! - del_nodes names members of the cluster (400); add_nodes names nodes
//!   of no cluster that are not being deleted (409).
//! - A node being deleted cannot be deleted again, and one whose
//!   NODE_CREATE has not finished (INIT, CREATING) cannot be deleted
//!   before it does (409): node actions are serialised by the cluster lock
//!   only for members, so this keeps a create and a delete of one orphan
//!   from running at once.
//! - A node protected from scale-in is not deleted — by del_nodes, a node
//!   delete or replace_nodes — until its protection is cleared (409
//!   naming it). A scale-in or resize never chooses one (the action's).
//! - Lifecycle completion and heartbeats are for tokens still
//!   WAITING_LIFECYCLE_COMPLETION (409 naming how the token ended).
//! - A cluster under a maintenance lock (one not expired) admits only
//!   reads, a check, lock (to change or renew it) and unlock, and what
//!   finishes work already under way (lifecycle completion and
//!   heartbeats, cancelling an action): everything else that acts on it —
//!   scaling from users, receivers and their webhooks alike, resize, node
//!   changes, policies, recover, update, delete — is 409 naming the lock.
//!   An admin's lock is changed or lifted only by an admin (403), anyone
//!   else's by its holder or an admin (409); unlock of a cluster not
//!   locked is 409.
//!
//! Everything else (queueing behind a running action, sizes at run time)
//! is the dispatcher's: requests are never refused because the cluster is
//! busy — Senlin queues them too.

use ember_runtime::Identity;

use super::{Blocker, BlockerKind};
use crate::domain::cluster::sizing;
use crate::domain::cluster::{
    ActionStatus, Cluster, ClusterAction, ClusterStatus, LifecycleOutcome, Node, NodeStatus,
};
use crate::error::{Error, Result};

/// What a caller asks for, with the objects it is asked of.
#[derive(Debug, Clone, Copy)]
pub enum ClusterOperation<'a> {
    /// Show or list anything of a cluster, node, profile, policy, action
    /// or event.
    Read,
    CreateProfile,
    /// Rename a profile or change its metadata.
    UpdateProfile,
    DeleteProfile,
    CreatePolicy,
    /// Rename a policy.
    UpdatePolicy,
    DeletePolicy,
    CreateCluster,
    /// Name, metadata, timeout or profile.
    UpdateCluster(&'a Cluster),
    DeleteCluster(&'a Cluster),
    /// `count` 0 = the scaling policy's step (or 1).
    ScaleOut {
        cluster: &'a Cluster,
        count: u64,
    },
    ScaleIn {
        cluster: &'a Cluster,
        count: u64,
    },
    Resize(&'a Cluster),
    AddNodes {
        cluster: &'a Cluster,
        nodes: &'a [Node],
    },
    DelNodes {
        cluster: &'a Cluster,
        nodes: &'a [Node],
    },
    AttachPolicy(&'a Cluster),
    DetachPolicy(&'a Cluster),
    /// Enable or disable an attached policy.
    UpdateClusterPolicy(&'a Cluster),
    /// Swap members for orphan nodes.
    ReplaceNodes(&'a Cluster),
    /// Cancel an action not yet running (or waiting for a lifecycle).
    CancelAction,
    Check(&'a Cluster),
    Recover(&'a Cluster),
    /// Run a profile-type operation on members (Senlin's cluster ops).
    Operate(&'a Cluster),
    /// A node, as a member of `cluster` when given.
    CreateNode {
        cluster: Option<&'a Cluster>,
    },
    /// Rename, re-role or taint a node.
    UpdateNode(&'a Node),
    DeleteNode {
        node: &'a Node,
        cluster: Option<&'a Cluster>,
    },
    CompleteLifecycle(&'a ClusterAction),
    LifecycleHeartbeat(&'a ClusterAction),
    /// Take, change or renew the cluster's maintenance lock.
    Lock(&'a Cluster),
    /// Lift it.
    Unlock(&'a Cluster),
}

impl ClusterOperation<'_> {
    /// How messages name the operation.
    pub fn verb(&self) -> &'static str {
        match self {
            ClusterOperation::Read => "read",
            ClusterOperation::CreateProfile => "create a profile",
            ClusterOperation::UpdateProfile => "update a profile",
            ClusterOperation::UpdatePolicy => "update a policy",
            ClusterOperation::UpdateCluster(_) => "update a cluster",
            ClusterOperation::UpdateClusterPolicy(_) => "update a cluster policy",
            ClusterOperation::ReplaceNodes(_) => "replace nodes",
            ClusterOperation::CancelAction => "cancel an action",
            ClusterOperation::DeleteProfile => "delete a profile",
            ClusterOperation::CreatePolicy => "create a policy",
            ClusterOperation::DeletePolicy => "delete a policy",
            ClusterOperation::CreateCluster => "create a cluster",
            ClusterOperation::DeleteCluster(_) => "delete a cluster",
            ClusterOperation::ScaleOut { .. } => "scale out",
            ClusterOperation::ScaleIn { .. } => "scale in",
            ClusterOperation::Resize(_) => "resize",
            ClusterOperation::AddNodes { .. } => "add nodes",
            ClusterOperation::DelNodes { .. } => "delete nodes",
            ClusterOperation::AttachPolicy(_) => "attach a policy",
            ClusterOperation::DetachPolicy(_) => "detach a policy",
            ClusterOperation::Check(_) => "check",
            ClusterOperation::Recover(_) => "recover",
            ClusterOperation::Operate(_) => "operation",
            ClusterOperation::CreateNode { .. } => "create a node",
            ClusterOperation::UpdateNode(_) => "update a node",
            ClusterOperation::DeleteNode { .. } => "delete a node",
            ClusterOperation::CompleteLifecycle(_) => "complete a lifecycle action",
            ClusterOperation::LifecycleHeartbeat(_) => "extend a lifecycle action",
            ClusterOperation::Lock(_) => "lock",
            ClusterOperation::Unlock(_) => "unlock",
        }
    }

    /// The cluster whose DELETING status refuses the operation.
    fn cluster_acted_on(&self) -> Option<&Cluster> {
        match *self {
            ClusterOperation::DeleteCluster(cluster)
            | ClusterOperation::ScaleOut { cluster, .. }
            | ClusterOperation::ScaleIn { cluster, .. }
            | ClusterOperation::Resize(cluster)
            | ClusterOperation::AddNodes { cluster, .. }
            | ClusterOperation::DelNodes { cluster, .. }
            | ClusterOperation::AttachPolicy(cluster)
            | ClusterOperation::DetachPolicy(cluster)
            | ClusterOperation::UpdateCluster(cluster)
            | ClusterOperation::UpdateClusterPolicy(cluster)
            | ClusterOperation::ReplaceNodes(cluster)
            | ClusterOperation::Check(cluster)
            | ClusterOperation::Recover(cluster)
            | ClusterOperation::Operate(cluster)
            | ClusterOperation::Lock(cluster)
            | ClusterOperation::Unlock(cluster) => Some(cluster),
            ClusterOperation::CreateNode { cluster }
            | ClusterOperation::DeleteNode { cluster, .. } => cluster,
            ClusterOperation::Read
            | ClusterOperation::CreateProfile
            | ClusterOperation::UpdateProfile
            | ClusterOperation::UpdatePolicy
            | ClusterOperation::CancelAction
            | ClusterOperation::DeleteProfile
            | ClusterOperation::CreatePolicy
            | ClusterOperation::DeletePolicy
            | ClusterOperation::CreateCluster
            | ClusterOperation::UpdateNode(_)
            | ClusterOperation::CompleteLifecycle(_)
            | ClusterOperation::LifecycleHeartbeat(_) => None,
        }
    }
}

/// The role that may read but not change.
pub use ember_runtime::identity::READER_ROLE;

/// Whether the caller may read but not change anything: Ember's one rule
/// ([`Identity::is_read_only`]), also enforced at the gateway's door.
pub fn is_read_only(caller: &Identity) -> bool {
    caller.is_read_only()
}

/// Admits `operation` by `caller` now, or says why not: the first of
/// [`blockers`].
pub fn admit(operation: &ClusterOperation<'_>, caller: &Identity) -> Result<()> {
    super::first(&blockers(operation, caller))
}

impl ClusterOperation<'_> {
    /// What an audit record of this operation is about: the cluster it
    /// acts on, or the node; `None` for profiles, policies and actions.
    pub fn audit_subject(&self) -> Option<crate::domain::audit::AuditSubject> {
        use crate::domain::audit::{AuditSubject, AuditTarget};
        let node = |node: &Node| AuditSubject {
            target: AuditTarget::Node,
            id: node.id.to_string(),
            name: node.name.clone(),
            project_id: node.project_id.clone(),
        };
        match *self {
            ClusterOperation::UpdateNode(found) => Some(node(found)),
            ClusterOperation::DeleteNode {
                node: found,
                cluster: None,
            } => Some(node(found)),
            _ => self.cluster_acted_on().map(|cluster| AuditSubject {
                target: AuditTarget::Cluster,
                id: cluster.id.to_string(),
                name: cluster.name.clone(),
                project_id: cluster.project_id.clone(),
            }),
        }
    }
}

/// Every rule `operation` by `caller` breaks, in the order of the module's
/// header (the first is [`admit`]'s answer).
pub fn blockers(operation: &ClusterOperation<'_>, caller: &Identity) -> Vec<Blocker> {
    let mut blockers = Vec::new();
    if matches!(operation, ClusterOperation::Read) {
        return blockers;
    }
    if is_read_only(caller) {
        blockers.push(Blocker::new(
            BlockerKind::Role,
            Error::Forbidden(format!(
                "user {:?} has only the {READER_ROLE} role in project {:?}: a reader may not change clusters ({})",
                caller.user_id,
                caller.project_id,
                operation.verb()
            )),
        ));
    }
    if let Some(cluster) = operation.cluster_acted_on() {
        if cluster.status == ClusterStatus::Deleting {
            blockers.push(Blocker::new(
                BlockerKind::State,
                Error::Conflict(format!(
                    "cluster {:?} is being deleted: it accepts no {}",
                    cluster.name,
                    operation.verb()
                )),
            ));
        }
        if let Err(error) = lock_rule(cluster, operation, caller) {
            let held = cluster
                .maintenance_lock
                .as_ref()
                .is_some_and(|lock| lock.holds_at(ember_runtime::time::now()));
            let kind = match &error {
                Error::Forbidden(_) => BlockerKind::Role,
                _ if held => BlockerKind::MaintenanceLock,
                _ => BlockerKind::State,
            };
            blockers.push(Blocker::new(kind, error));
        }
    }
    if let Err(error) = what_the_operation_needs(operation) {
        let kind = match error {
            Error::InvalidInput(_) => BlockerKind::Request,
            _ => BlockerKind::State,
        };
        blockers.push(Blocker::new(kind, error));
    }
    let deleted: &[Node] = match operation {
        ClusterOperation::DelNodes { nodes, .. } => nodes,
        ClusterOperation::DeleteNode { node, .. } => std::slice::from_ref(*node),
        _ => &[],
    };
    if let Some(error) = protected_from_deletion(deleted) {
        blockers.push(Blocker::new(BlockerKind::Protection, error));
    }
    blockers
}

/// The refusal of a delete of `nodes` when some are protected from
/// scale-in, naming them.
pub fn protected_from_deletion(nodes: &[Node]) -> Option<Error> {
    let protected: Vec<&str> = nodes
        .iter()
        .filter(|node| node.protected)
        .map(|node| node.name.as_str())
        .collect();
    match protected.as_slice() {
        [] => None,
        [name] => Some(Error::Conflict(format!(
            "node {name:?} is protected from scale-in: clear its protection first (ember node update {name} --unprotect)"
        ))),
        names => Some(Error::Conflict(format!(
            "nodes {} are protected from scale-in: clear their protection first",
            names
                .iter()
                .map(|name| format!("{name:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The rules of each operation (sizes, members, node and lifecycle
/// states).
fn what_the_operation_needs(operation: &ClusterOperation<'_>) -> Result<()> {
    match *operation {
        // Senlin takes a scale beyond the cluster's sizes and fails the
        // action with why (the sizes may change before it runs); only a
        // count no cluster could hold is refused here.
        ClusterOperation::ScaleOut { cluster, count } if count > 0 => {
            sizing::grown_by(cluster.desired_capacity, count, -1).map(|_| ())
        }
        ClusterOperation::ScaleIn { count, .. } if count > 0 => sizing::counted(count).map(|_| ()),
        ClusterOperation::CreateNode {
            cluster: Some(cluster),
        } => sizing::grown_by(cluster.desired_capacity, 1, cluster.max_size)
            .map(|_| ())
            .map_err(|_| {
                Error::Conflict(format!(
                    "cluster {:?} is at its max_size {}: it takes no more nodes",
                    cluster.name, cluster.max_size
                ))
            }),
        ClusterOperation::DelNodes { cluster, nodes } => {
            if nodes.is_empty() {
                return Err(Error::InvalidInput(
                    "nodes must name at least one node".into(),
                ));
            }
            match nodes
                .iter()
                .find(|node| node.cluster_id != Some(cluster.id))
            {
                Some(node) => Err(Error::InvalidInput(format!(
                    "node {:?} is not a member of cluster {:?}",
                    node.name, cluster.name
                ))),
                None => Ok(()),
            }
        }
        ClusterOperation::AddNodes { nodes, .. } => {
            if nodes.is_empty() {
                return Err(Error::InvalidInput(
                    "nodes must name at least one node".into(),
                ));
            }
            if let Some(node) = nodes.iter().find(|node| node.cluster_id.is_some()) {
                return Err(Error::Conflict(format!(
                    "node {:?} already belongs to a cluster",
                    node.name
                )));
            }
            match nodes
                .iter()
                .find(|node| node.status == NodeStatus::Deleting)
            {
                Some(node) => Err(Error::Conflict(format!(
                    "node {:?} is being deleted",
                    node.name
                ))),
                None => Ok(()),
            }
        }
        ClusterOperation::DeleteNode { node, .. } => match node.status {
            NodeStatus::Deleting => Err(Error::Conflict(format!(
                "node {:?} is already being deleted",
                node.name
            ))),
            NodeStatus::Init | NodeStatus::Creating => Err(Error::Conflict(format!(
                "node {:?} is {}: delete it once its creation has finished",
                node.name,
                node.status.as_str()
            ))),
            NodeStatus::Active | NodeStatus::Error | NodeStatus::Warning => Ok(()),
        },
        ClusterOperation::CompleteLifecycle(action)
        | ClusterOperation::LifecycleHeartbeat(action) => {
            if action.status == ActionStatus::WaitingLifecycleCompletion {
                Ok(())
            } else {
                Err(lifecycle_not_waiting(action))
            }
        }
        ClusterOperation::Read
        | ClusterOperation::CreateProfile
        | ClusterOperation::DeleteProfile
        | ClusterOperation::CreatePolicy
        | ClusterOperation::DeletePolicy
        | ClusterOperation::CreateCluster
        | ClusterOperation::DeleteCluster(_)
        | ClusterOperation::ScaleOut { .. }
        | ClusterOperation::ScaleIn { .. }
        | ClusterOperation::Resize(_)
        | ClusterOperation::AttachPolicy(_)
        | ClusterOperation::DetachPolicy(_)
        | ClusterOperation::Check(_)
        | ClusterOperation::Recover(_)
        | ClusterOperation::Operate(_)
        | ClusterOperation::CreateNode { cluster: None }
        | ClusterOperation::UpdateProfile
        | ClusterOperation::UpdatePolicy
        | ClusterOperation::UpdateCluster(_)
        | ClusterOperation::UpdateClusterPolicy(_)
        | ClusterOperation::ReplaceNodes(_)
        | ClusterOperation::CancelAction
        | ClusterOperation::UpdateNode(_)
        | ClusterOperation::Lock(_)
        | ClusterOperation::Unlock(_) => Ok(()),
    }
}

/// The maintenance lock's rules (see the module's header).
fn lock_rule(cluster: &Cluster, operation: &ClusterOperation<'_>, caller: &Identity) -> Result<()> {
    let lock = cluster
        .maintenance_lock
        .as_ref()
        .filter(|lock| lock.holds_at(ember_runtime::time::now()));
    let Some(lock) = lock else {
        return match operation {
            ClusterOperation::Unlock(_) => Err(Error::Conflict(format!(
                "cluster {:?} is not locked: there is nothing to unlock",
                cluster.name
            ))),
            _ => Ok(()),
        };
    };
    match operation {
        ClusterOperation::Lock(_) | ClusterOperation::Unlock(_)
            if lock.locked_by_admin && !caller.is_admin() =>
        {
            Err(Error::Forbidden(format!(
                "cluster {:?} was locked by admin {:?}: only an admin can {} it",
                cluster.name,
                lock.locked_by_user,
                operation.verb()
            )))
        }
        ClusterOperation::Lock(_)
            if lock.locked_by_user != caller.user_id && !caller.is_admin() =>
        {
            Err(Error::Conflict(format!(
                "cluster {:?} is locked ({}): only its holder or an admin can change the lock",
                cluster.name,
                lock.describe()
            )))
        }
        ClusterOperation::Lock(_)
        | ClusterOperation::Unlock(_)
        | ClusterOperation::Check(_)
        | ClusterOperation::Read
        | ClusterOperation::CompleteLifecycle(_)
        | ClusterOperation::LifecycleHeartbeat(_)
        | ClusterOperation::CancelAction => Ok(()),
        _ => Err(Error::Conflict(format!(
            "cluster {:?} is locked ({}): {} is not allowed; unlock it first",
            cluster.name,
            lock.describe(),
            operation.verb()
        ))),
    }
}

/// The conflict for a lifecycle token that no longer waits, naming how it
/// ended.
pub fn lifecycle_not_waiting(action: &ClusterAction) -> Error {
    match action.lifecycle_outcome {
        Some(LifecycleOutcome::Completed) => Error::Conflict(format!(
            "lifecycle action {} was already completed ({}): the node is deleted or being deleted",
            action.id, action.lifecycle_detail
        )),
        Some(LifecycleOutcome::Abandoned) => Error::Conflict(format!(
            "lifecycle action {} was already completed with ABANDON ({}): the node is kept out of service",
            action.id, action.lifecycle_detail
        )),
        Some(LifecycleOutcome::Expired) => Error::Conflict(format!(
            "lifecycle action {} already expired ({}): the node is deleted or being deleted",
            action.id, action.lifecycle_detail
        )),
        None => Error::Conflict(format!(
            "lifecycle action {} is not waiting for completion (status {})",
            action.id,
            action.status.as_str()
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Map;
    use uuid::Uuid;

    use super::*;
    use crate::domain::cluster::ActionKind;

    fn caller(roles: &[&str]) -> Identity {
        Identity::new(
            "alice",
            "project-a",
            roles.iter().map(|role| (*role).to_owned()).collect(),
        )
    }

    fn cluster(status: ClusterStatus) -> Cluster {
        let now = chrono::Utc::now();
        Cluster {
            id: Uuid::now_v7(),
            name: "web".into(),
            profile_id: Uuid::now_v7(),
            min_size: 1,
            max_size: 5,
            desired_capacity: 3,
            status,
            status_reason: String::new(),
            metadata: Map::new(),
            next_index: 4,
            timeout: None,
            config: crate::domain::cluster::ClusterConfig::default(),
            project_id: "project-a".into(),
            user_id: "alice".into(),
            created_at: now,
            updated_at: now,
            maintenance_lock: None,
        }
    }

    fn node(cluster_id: Option<Uuid>, status: NodeStatus) -> Node {
        let now = chrono::Utc::now();
        Node {
            id: Uuid::now_v7(),
            name: "node-1".into(),
            cluster_id,
            profile_id: Uuid::now_v7(),
            index: 1,
            role: String::new(),
            status,
            status_reason: String::new(),
            physical_id: None,
            tainted: false,
            protected: false,
            metadata: Map::new(),
            project_id: "project-a".into(),
            user_id: "alice".into(),
            created_at: now,
            updated_at: now,
        }
    }

    fn token(status: ActionStatus) -> ClusterAction {
        ClusterAction::new(
            ActionKind::NodeDelete,
            Uuid::now_v7(),
            Some(Uuid::now_v7()),
            status,
            Map::new(),
            &caller(&["member"]),
            chrono::Utc::now(),
        )
    }

    /// The expected answer for an operation that passes the role and
    /// DELETING checks.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Answer {
        Ok,
        Forbidden,
        Conflict,
        InvalidInput,
    }

    fn answer(result: Result<()>) -> Answer {
        match result {
            Ok(()) => Answer::Ok,
            Err(Error::Forbidden(_)) => Answer::Forbidden,
            Err(Error::Conflict(_)) => Answer::Conflict,
            Err(Error::InvalidInput(_)) => Answer::InvalidInput,
            Err(other) => panic!("unexpected error kind {other:?}"),
        }
    }

    /// Every operation on `cluster`, with whether it is refused while the
    /// cluster is DELETING and whether it passes a maintenance lock.
    fn table<'a>(
        cluster: &'a Cluster,
        member: &'a Node,
        orphan: &'a Node,
        waiting: &'a ClusterAction,
        members: &'a [Node],
        orphans: &'a [Node],
    ) -> Vec<(ClusterOperation<'a>, bool, bool)> {
        let operations: Vec<(ClusterOperation<'a>, bool)> = vec![
            (ClusterOperation::Read, false),
            (ClusterOperation::CreateProfile, false),
            (ClusterOperation::DeleteProfile, false),
            (ClusterOperation::CreatePolicy, false),
            (ClusterOperation::DeletePolicy, false),
            (ClusterOperation::CreateCluster, false),
            (ClusterOperation::DeleteCluster(cluster), true),
            (ClusterOperation::ScaleOut { cluster, count: 2 }, true),
            (ClusterOperation::ScaleOut { cluster, count: 0 }, true),
            (ClusterOperation::ScaleIn { cluster, count: 2 }, true),
            (ClusterOperation::Resize(cluster), true),
            (
                ClusterOperation::AddNodes {
                    cluster,
                    nodes: orphans,
                },
                true,
            ),
            (
                ClusterOperation::DelNodes {
                    cluster,
                    nodes: members,
                },
                true,
            ),
            (ClusterOperation::AttachPolicy(cluster), true),
            (ClusterOperation::DetachPolicy(cluster), true),
            (ClusterOperation::Check(cluster), true),
            (ClusterOperation::Recover(cluster), true),
            (ClusterOperation::Operate(cluster), true),
            (
                ClusterOperation::CreateNode {
                    cluster: Some(cluster),
                },
                true,
            ),
            (ClusterOperation::CreateNode { cluster: None }, false),
            (ClusterOperation::UpdateNode(member), false),
            (
                ClusterOperation::DeleteNode {
                    node: member,
                    cluster: Some(cluster),
                },
                true,
            ),
            (
                ClusterOperation::DeleteNode {
                    node: orphan,
                    cluster: None,
                },
                false,
            ),
            (ClusterOperation::CompleteLifecycle(waiting), false),
            (ClusterOperation::LifecycleHeartbeat(waiting), false),
            (ClusterOperation::Lock(cluster), true),
        ];
        operations
            .into_iter()
            .map(|(operation, refused_while_deleting)| {
                let passes_a_lock = matches!(
                    operation,
                    ClusterOperation::Read
                        | ClusterOperation::CreateProfile
                        | ClusterOperation::DeleteProfile
                        | ClusterOperation::CreatePolicy
                        | ClusterOperation::DeletePolicy
                        | ClusterOperation::CreateCluster
                        | ClusterOperation::Check(_)
                        | ClusterOperation::Lock(_)
                        | ClusterOperation::CreateNode { cluster: None }
                        | ClusterOperation::UpdateNode(_)
                        | ClusterOperation::DeleteNode { cluster: None, .. }
                        | ClusterOperation::CompleteLifecycle(_)
                        | ClusterOperation::LifecycleHeartbeat(_)
                );
                (operation, refused_while_deleting, passes_a_lock)
            })
            .collect()
    }

    /// Every operation × every cluster status × reader/member/admin.
    #[test]
    fn every_operation_every_status_every_role() {
        let roles: [(&[&str], bool); 4] = [
            (&["reader"], true),
            (&["member"], false),
            (&["admin"], false),
            (&["reader", "member"], false),
        ];
        for status in ClusterStatus::ALL {
            let cluster = cluster(status);
            let member = node(Some(cluster.id), NodeStatus::Active);
            let orphan = node(None, NodeStatus::Active);
            let waiting = token(ActionStatus::WaitingLifecycleCompletion);
            let members = [member.clone()];
            let orphans = [orphan.clone()];
            let deleting = status == ClusterStatus::Deleting;
            let operations = table(&cluster, &member, &orphan, &waiting, &members, &orphans);
            for (operation, refused_while_deleting, _) in operations {
                for (roles, read_only) in roles {
                    let got = answer(admit(&operation, &caller(roles)));
                    let expected = if matches!(operation, ClusterOperation::Read) {
                        Answer::Ok
                    } else if read_only {
                        Answer::Forbidden
                    } else if deleting && refused_while_deleting {
                        Answer::Conflict
                    } else {
                        Answer::Ok
                    };
                    assert_eq!(
                        got,
                        expected,
                        "{} on a {} cluster by {roles:?}",
                        operation.verb(),
                        status.as_str()
                    );
                }
            }
        }
    }

    fn locked(mut cluster: Cluster, by_admin: bool, expires_in: i64) -> Cluster {
        let now = chrono::Utc::now();
        cluster.maintenance_lock = Some(crate::domain::cluster::ClusterLock {
            level: crate::domain::cluster::ClusterLockLevel::Clusters,
            locked_by_user: "ops".into(),
            locked_by_admin: by_admin,
            locked_at: now,
            reason: Some("database maintenance".into()),
            expires_at: Some(now + chrono::Duration::seconds(expires_in)),
            locked_instances: Vec::new(),
        });
        cluster
    }

    /// Every operation × a member's lock, an admin's lock and an expired
    /// lock × member and admin: only reads, check, lock, unlock and the
    /// completion of work under way pass a lock, and an admin's lock is
    /// changed only by an admin.
    #[test]
    fn a_lock_refuses_everything_that_acts_on_the_cluster_naming_itself() {
        for (by_admin, expires_in) in [(false, 3600), (true, 3600), (false, -1)] {
            let cluster = locked(cluster(ClusterStatus::Active), by_admin, expires_in);
            let member = node(Some(cluster.id), NodeStatus::Active);
            let orphan = node(None, NodeStatus::Active);
            let waiting = token(ActionStatus::WaitingLifecycleCompletion);
            let members = [member.clone()];
            let orphans = [orphan.clone()];
            let mut operations = table(&cluster, &member, &orphan, &waiting, &members, &orphans);
            operations.push((ClusterOperation::Unlock(&cluster), true, true));
            let holds = expires_in > 0;
            for (operation, _, passes_a_lock) in operations {
                for roles in [&["member"][..], &["admin"][..]] {
                    let caller = caller(roles);
                    let result = admit(&operation, &caller);
                    let changes_the_lock = matches!(
                        operation,
                        ClusterOperation::Lock(_) | ClusterOperation::Unlock(_)
                    );
                    let expected = if !holds {
                        // Expired: as if unlocked (unlock finds nothing).
                        if matches!(operation, ClusterOperation::Unlock(_)) {
                            Answer::Conflict
                        } else {
                            Answer::Ok
                        }
                    } else if changes_the_lock && by_admin && !caller.is_admin() {
                        Answer::Forbidden
                    } else if matches!(operation, ClusterOperation::Lock(_)) && !caller.is_admin() {
                        // The lock is "ops"'s: another member may not change it.
                        Answer::Conflict
                    } else if passes_a_lock {
                        Answer::Ok
                    } else {
                        Answer::Conflict
                    };
                    if expected == Answer::Conflict
                        && holds
                        && matches!(operation, ClusterOperation::Lock(_))
                    {
                        let message = result.as_ref().expect_err("refused").to_string();
                        assert!(
                            message.contains("only its holder or an admin can change the lock"),
                            "{message}"
                        );
                    } else if expected == Answer::Conflict && holds {
                        let message = result.as_ref().expect_err("refused").to_string();
                        assert!(
                            message.contains("is locked (level clusters, by ")
                                && message.contains("database maintenance")
                                && message.ends_with("unlock it first"),
                            "{message}"
                        );
                    }
                    assert_eq!(
                        answer(result),
                        expected,
                        "{} on a cluster locked by {} (expires in {expires_in} s) by {roles:?}",
                        operation.verb(),
                        if by_admin { "an admin" } else { "a member" }
                    );
                }
            }
        }
        // Unlock of a cluster never locked.
        let unlocked = cluster(ClusterStatus::Active);
        let refused = admit(&ClusterOperation::Unlock(&unlocked), &caller(&["member"]))
            .expect_err("nothing to unlock")
            .to_string();
        assert!(refused.contains("is not locked"), "{refused}");
    }

    #[test]
    fn scale_counts_beyond_the_sizes_are_taken_and_only_impossible_counts_refused() {
        let cluster = cluster(ClusterStatus::Active);
        let member = caller(&["member"]);
        let scale_out = |count| ClusterOperation::ScaleOut {
            cluster: &cluster,
            count,
        };
        let scale_in = |count| ClusterOperation::ScaleIn {
            cluster: &cluster,
            count,
        };
        assert_eq!(answer(admit(&scale_out(2), &member)), Answer::Ok);
        // Beyond max_size or below min_size: taken, as Senlin does; the
        // action fails when it runs (see sizing).
        assert_eq!(answer(admit(&scale_out(3), &member)), Answer::Ok);
        assert_eq!(
            answer(admit(&scale_out(u64::from(u32::MAX)), &member)),
            Answer::InvalidInput
        );
        assert_eq!(answer(admit(&scale_in(2), &member)), Answer::Ok);
        assert_eq!(answer(admit(&scale_in(3), &member)), Answer::Ok);
        assert_eq!(
            answer(admit(&scale_in(u64::MAX), &member)),
            Answer::InvalidInput
        );
    }

    #[test]
    fn node_lists_and_node_states_are_checked() {
        let cluster = cluster(ClusterStatus::Active);
        let member = caller(&["member"]);
        let other_member = node(Some(Uuid::now_v7()), NodeStatus::Active);
        let orphan_deleting = node(None, NodeStatus::Deleting);
        let ours = node(Some(cluster.id), NodeStatus::Active);
        let check = |operation: ClusterOperation<'_>| answer(admit(&operation, &member));
        assert_eq!(
            check(ClusterOperation::DelNodes {
                cluster: &cluster,
                nodes: &[]
            }),
            Answer::InvalidInput
        );
        assert_eq!(
            check(ClusterOperation::DelNodes {
                cluster: &cluster,
                nodes: std::slice::from_ref(&other_member)
            }),
            Answer::InvalidInput
        );
        assert_eq!(
            check(ClusterOperation::AddNodes {
                cluster: &cluster,
                nodes: std::slice::from_ref(&ours)
            }),
            Answer::Conflict
        );
        assert_eq!(
            check(ClusterOperation::AddNodes {
                cluster: &cluster,
                nodes: std::slice::from_ref(&orphan_deleting)
            }),
            Answer::Conflict
        );
        for status in NodeStatus::ALL {
            let target = node(None, status);
            let expected = match status {
                NodeStatus::Active | NodeStatus::Error | NodeStatus::Warning => Answer::Ok,
                NodeStatus::Init | NodeStatus::Creating | NodeStatus::Deleting => Answer::Conflict,
            };
            assert_eq!(
                check(ClusterOperation::DeleteNode {
                    node: &target,
                    cluster: None
                }),
                expected,
                "{status:?}"
            );
            assert_eq!(check(ClusterOperation::UpdateNode(&target)), Answer::Ok);
        }
    }

    #[test]
    fn only_waiting_tokens_complete_or_beat() {
        let member = caller(&["member"]);
        for status in ActionStatus::ALL {
            let action = token(status);
            let expected = if status == ActionStatus::WaitingLifecycleCompletion {
                Answer::Ok
            } else {
                Answer::Conflict
            };
            assert_eq!(
                answer(admit(
                    &ClusterOperation::CompleteLifecycle(&action),
                    &member
                )),
                expected
            );
            assert_eq!(
                answer(admit(
                    &ClusterOperation::LifecycleHeartbeat(&action),
                    &member
                )),
                expected
            );
        }
        let mut completed = token(ActionStatus::Ready);
        completed.lifecycle_outcome = Some(LifecycleOutcome::Completed);
        let error = admit(&ClusterOperation::CompleteLifecycle(&completed), &member)
            .expect_err("completed");
        assert!(error.to_string().contains("already completed"), "{error}");
    }
}
