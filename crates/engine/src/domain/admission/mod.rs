//! Admission: may this operation run on this stack, cluster or instance
//! now, for this caller? One function, [`blockers`], answers for every kind
//! of object with every rule the operation breaks; the operation refuses
//! with the first ([`admit`]) and the dry runs ("allowed?") show them all.
//! Every entry point (REST and gRPC handlers through the application
//! layer, the CLI, the dry runs, signals, cluster actions, nested stacks)
//! asks it, so no two places can disagree about a rule. An admin's
//! break-glass sets the maintenance locks aside ([`through_locks`]). The
//! rules of each kind live in its module; a refusal is the error the caller
//! gets — NotFound, Forbidden or Conflict — naming the object and why.

pub mod cluster;
pub mod stack;

use chrono::{DateTime, Utc};
use ember_runtime::Identity;

pub use cluster::ClusterOperation;
pub use stack::{StackCaller, StackOperation};

use crate::domain::Stack;
use crate::domain::instance::Instance;
use crate::domain::instance::policy::InstanceRequest;
use crate::error::{Error, Result};

/// What is asked, of what.
#[derive(Debug, Clone, Copy)]
pub enum Subject<'a> {
    Stack {
        stack: &'a Stack,
        /// The stacks above a nested stack, nearest first (empty for a
        /// root stack, and unread for the engine's own nested operations).
        ancestors: &'a [Stack],
        operation: StackOperation,
        caller: StackCaller<'a>,
    },
    /// Anything done to clusters, nodes, profiles, policies and actions.
    Cluster {
        operation: &'a ClusterOperation<'a>,
        caller: &'a Identity,
    },
    /// A stack to be created (or adopted) in the caller's project.
    NewStack { caller: &'a Identity },
    Instance {
        instance: &'a Instance,
        request: &'a InstanceRequest,
        caller: &'a Identity,
        now: DateTime<Utc>,
    },
}

/// What kind of thing stands in an operation's way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockerKind {
    /// The object is gone (or another project's): nothing else is said.
    NotFound,
    /// The caller's roles do not allow it (a reader; an admin's lock).
    Role,
    /// A maintenance lock (the object's, or a stack's above it).
    MaintenanceLock,
    /// Another operation runs on the object now.
    InProgress,
    /// The object's state does not allow it (not suspended, being deleted,
    /// not locked, …).
    State,
    /// What the request names is wrong for the object (a count no cluster
    /// holds, a node of another cluster, …).
    Request,
    /// The project's quota has no room for it.
    Quota,
    /// A scaling policy's cooldown after the last scale.
    Cooldown,
    /// A lifecycle plug-in would stop the operation (asked in a dry run;
    /// the operation itself is accepted and then fails with its reason).
    Plugin,
    /// A node it would delete is protected from scale-in.
    Protection,
}

impl BlockerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BlockerKind::NotFound => "not_found",
            BlockerKind::Role => "role",
            BlockerKind::MaintenanceLock => "maintenance_lock",
            BlockerKind::InProgress => "in_progress",
            BlockerKind::State => "state",
            BlockerKind::Request => "request",
            BlockerKind::Quota => "quota",
            BlockerKind::Cooldown => "cooldown",
            BlockerKind::Plugin => "plugin",
            BlockerKind::Protection => "protection",
        }
    }
}

/// One thing that stands in an operation's way, as the error the caller
/// gets if it is the first.
#[derive(Debug, Clone)]
pub struct Blocker {
    pub kind: BlockerKind,
    pub error: Error,
}

impl Blocker {
    pub fn new(kind: BlockerKind, error: Error) -> Blocker {
        Blocker { kind, error }
    }
}

/// Every rule `subject` breaks, in the order they are checked: empty when
/// the operation may start now. The first is what the operation itself
/// answers ([`admit`]); the dry runs ("allowed?") show them all.
pub fn blockers(subject: Subject<'_>) -> Vec<Blocker> {
    match subject {
        Subject::Stack {
            stack,
            ancestors,
            operation,
            caller,
        } => stack::stack_blockers(stack, ancestors, operation, caller),
        Subject::NewStack { caller } => stack::admit_new_stack(caller)
            .err()
            .map(|error| Blocker::new(BlockerKind::Role, error))
            .into_iter()
            .collect(),
        Subject::Cluster { operation, caller } => cluster::blockers(operation, caller),
        Subject::Instance {
            instance,
            request,
            caller,
            now,
        } => crate::domain::instance::policy::blockers(caller, instance, request, now),
    }
}

/// `Ok` when the operation may start now; otherwise why not, as the
/// caller's error: the first of [`blockers`].
pub fn admit(subject: Subject<'_>) -> Result<()> {
    first(&blockers(subject))
}

/// `Ok` for no blockers, else the first one's error.
pub fn first(blockers: &[Blocker]) -> Result<()> {
    match blockers.first() {
        Some(blocker) => Err(blocker.error.clone()),
        None => Ok(()),
    }
}

/// What an admin's break-glass makes of `blockers`: `Ok` when every one is
/// a maintenance lock and `breakable` (the operation leaves the lock in
/// place); otherwise the first blocker that still stands.
pub fn through_locks(blockers: &[Blocker], breakable: bool) -> Result<()> {
    match blockers
        .iter()
        .find(|blocker| !(breakable && blocker.kind == BlockerKind::MaintenanceLock))
    {
        Some(blocker) => Err(blocker.error.clone()),
        None => Ok(()),
    }
}

/// Whether an admin's break-glass would run an operation that `blockers`
/// refuse (a dry run's `break_glass_would_pass`): each is a maintenance
/// lock the operation may break (`breakable`) or a lifecycle plug-in
/// (asked after admission, and broken through where it stops the run).
pub fn break_glass_would_pass(blockers: &[Blocker], breakable: bool) -> bool {
    !blockers.is_empty()
        && blockers.iter().all(|blocker| {
            blocker.kind == BlockerKind::Plugin
                || (breakable && blocker.kind == BlockerKind::MaintenanceLock)
        })
}
