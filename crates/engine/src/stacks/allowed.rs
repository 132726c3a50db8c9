//! The one place that decides whether an operation may start on a stack
//! now. Every entry point — REST, gRPC, CLI, signals, scaling, cluster
//! actions, mark-unhealthy, nested stacks addressed directly — asks here
//! before it takes the stack lease, so a rule added here holds everywhere.

use crate::domain::{ActionStatus, Stack, StackAction};
use crate::error::{Error, Result};

/// What a caller wants to do to a stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Update,
    Delete,
    Abandon,
    Suspend,
    Resume,
    Check,
    CancelUpdate,
    /// A resource signal (scaling policies, and the like).
    Signal,
    MarkUnhealthy,
    Lock,
    Unlock,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Update => "update",
            Operation::Delete => "delete",
            Operation::Abandon => "abandon",
            Operation::Suspend => "suspend",
            Operation::Resume => "resume",
            Operation::Check => "check",
            Operation::CancelUpdate => "cancel_update",
            Operation::Signal => "signal",
            Operation::MarkUnhealthy => "mark_unhealthy",
            Operation::Lock => "lock",
            Operation::Unlock => "unlock",
        }
    }
}

/// Why `operation` may not start on `stack` now, as a Conflict naming the
/// stack and its state; `Ok` when it may.
pub fn ensure_allowed(stack: &Stack, operation: Operation) -> Result<()> {
    if stack.deleted_at.is_some() {
        return Err(Error::NotFound(format!(
            "stack {:?} not found (it was deleted)",
            stack.name
        )));
    }
    let busy = stack.status == ActionStatus::InProgress;
    // cancel_update exists precisely to act on a running update.
    let allowed_while_busy =
        operation == Operation::CancelUpdate && stack.action == StackAction::Update;
    if busy && !allowed_while_busy {
        return Err(Error::Conflict(format!(
            "stack {:?} is {}: {} must wait until the running operation finishes",
            stack.name,
            stack.stack_status(),
            operation.as_str()
        )));
    }
    Ok(())
}
