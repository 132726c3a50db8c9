//! A delegation: the Keystone trust through which the engine acts for a
//! user after the request that asked for the work has ended — updates,
//! scaling signals, hook deadlines, health checks, resumes after a crash
//! (Heat's deferred authentication, `deferred_auth_method = trusts`).
//!
//! The user delegates their roles in the project to Ember's service user,
//! with impersonation: what the engine does through the trust is done as
//! the user, in the user's project, and nothing else. A delegation belongs
//! to one owner — a root stack (its nested stacks act through it), an
//! instance made through the instances API, a cluster (its nodes act
//! through it), a node made outside any cluster — made with it and deleted
//! with it.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// What a delegation belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DelegationOwner {
    Stack(Uuid),
    Instance(Uuid),
    Cluster(Uuid),
    /// A node made outside any cluster (its own; a member acts through
    /// its cluster's).
    Node(Uuid),
}

impl DelegationOwner {
    pub fn kind(self) -> &'static str {
        match self {
            DelegationOwner::Stack(_) => "stack",
            DelegationOwner::Instance(_) => "instance",
            DelegationOwner::Cluster(_) => "cluster",
            DelegationOwner::Node(_) => "node",
        }
    }

    pub fn id(self) -> Uuid {
        match self {
            DelegationOwner::Stack(id)
            | DelegationOwner::Instance(id)
            | DelegationOwner::Cluster(id)
            | DelegationOwner::Node(id) => id,
        }
    }
}

/// A trust and who it acts for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delegation {
    pub trust_id: String,
    /// The user whose roles the trust carries (the owner's creator).
    pub trustor_user_id: String,
    /// The project the trust acts in.
    pub project_id: String,
}

/// Whether deleting an owner deletes its trust too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustOwnership {
    /// The owner's trust was made for it: deleted with it.
    Owns,
    /// The owner acts through another's trust (a cluster node's stack
    /// through its cluster's): only the record goes with it.
    Borrows,
}
