//! Admission: may this operation run on this stack, cluster or instance
//! now, for this caller? One function, [`admit`], answers for every kind of
//! object; every entry point (REST and gRPC handlers through the
//! application layer, the CLI, the dry runs, signals, cluster actions,
//! nested stacks) asks it, so no two places can disagree about a rule. The
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
use crate::error::Result;

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

/// `Ok` when the operation may start now; otherwise why not, as the
/// caller's error.
pub fn admit(subject: Subject<'_>) -> Result<()> {
    match subject {
        Subject::Stack {
            stack,
            ancestors,
            operation,
            caller,
        } => stack::admit_stack(stack, ancestors, operation, caller),
        Subject::NewStack { caller } => stack::admit_new_stack(caller),
        Subject::Cluster { operation, caller } => cluster::admit(operation, caller),
        Subject::Instance {
            instance,
            request,
            caller,
            now,
        } => crate::domain::instance::policy::decide(caller, instance, request, now).map(|_| ()),
    }
}
