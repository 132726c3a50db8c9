//! The one place that decides whether an operation may start on a stack
//! now. Every entry point — REST, gRPC, CLI, signals, scaling, cluster
//! actions, mark-unhealthy, nested stacks addressed directly — asks here
//! before it takes the stack lease, so a rule added here holds everywhere.
//!
//! The maintenance-lock table (spec heat-lock-stack): while LOCK_COMPLETE
//! only lock (to change the level) and unlock; LOCK_FAILED allows unlock,
//! delete and lock; UNLOCK_FAILED allows delete and unlock; nothing starts
//! while anything is in progress; lock needs a final state that is neither
//! INIT_COMPLETE nor DELETE_COMPLETE; unlock needs a locked (or dirty) stack.

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
    pub const ALL: [Operation; 11] = [
        Operation::Update,
        Operation::Delete,
        Operation::Abandon,
        Operation::Suspend,
        Operation::Resume,
        Operation::Check,
        Operation::CancelUpdate,
        Operation::Signal,
        Operation::MarkUnhealthy,
        Operation::Lock,
        Operation::Unlock,
    ];

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

    pub fn parse(text: &str) -> Option<Operation> {
        Operation::ALL
            .into_iter()
            .find(|operation| operation.as_str() == text)
    }
}

/// Why `operation` may not start on `stack` now, as a Conflict naming the
/// stack, its state and any lock; `Ok` when it may.
pub fn ensure_allowed(stack: &Stack, operation: Operation) -> Result<()> {
    if stack.deleted_at.is_some() {
        return Err(Error::NotFound(format!(
            "stack {:?} not found (it was deleted)",
            stack.name
        )));
    }
    let refuse = |why: String| Err(Error::Conflict(why));
    if stack.status == ActionStatus::InProgress {
        // cancel_update exists precisely to act on a running update.
        if operation == Operation::CancelUpdate && stack.action == StackAction::Update {
            return Ok(());
        }
        return refuse(format!(
            "stack {:?} is {}: {} must wait until the running operation finishes",
            stack.name,
            stack.stack_status(),
            operation.as_str()
        ));
    }
    let lock = stack
        .maintenance_lock
        .as_ref()
        .map(|lock| format!(" ({})", lock.describe()))
        .unwrap_or_default();
    match (stack.action, stack.status) {
        (StackAction::Lock, ActionStatus::Complete) => match operation {
            Operation::Lock | Operation::Unlock => Ok(()),
            _ => refuse(format!(
                "stack {:?} is locked{lock}: {} is not allowed; unlock it first",
                stack.name,
                operation.as_str()
            )),
        },
        (StackAction::Lock, ActionStatus::Failed) => match operation {
            Operation::Lock | Operation::Unlock | Operation::Delete => Ok(()),
            _ => refuse(format!(
                "stack {:?} is LOCK_FAILED{lock}: only unlock, delete or lock are allowed",
                stack.name
            )),
        },
        (StackAction::Unlock, ActionStatus::Failed) => match operation {
            Operation::Unlock | Operation::Delete => Ok(()),
            _ => refuse(format!(
                "stack {:?} is UNLOCK_FAILED{lock}: only unlock or delete are allowed",
                stack.name
            )),
        },
        (action, _) => match operation {
            Operation::Unlock => refuse(format!(
                "stack {:?} is not locked ({}): there is nothing to unlock",
                stack.name,
                stack.stack_status()
            )),
            Operation::Lock
                if matches!(
                    (action, stack.status),
                    (
                        StackAction::Init | StackAction::Delete,
                        ActionStatus::Complete
                    )
                ) =>
            {
                refuse(format!(
                    "stack {:?} is {}: only a stack in a final state other than INIT_COMPLETE and DELETE_COMPLETE can be locked",
                    stack.name,
                    stack.stack_status()
                ))
            }
            _ => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{LockLevel, MaintenanceLock};

    fn stack(action: StackAction, status: ActionStatus) -> Stack {
        let now = chrono::Utc::now();
        Stack {
            id: uuid::Uuid::nil(),
            name: "web".into(),
            project_id: "demo".into(),
            user_id: "demo".into(),
            parent_id: None,
            action,
            status,
            status_reason: String::new(),
            description: String::new(),
            tags: vec![],
            timeout_mins: None,
            disable_rollback: true,
            created_at: now,
            updated_at: now,
            nested_depth: 0,
            parent_resource: None,
            deleted_at: None,
            maintenance_lock: matches!(action, StackAction::Lock | StackAction::Unlock).then(
                || MaintenanceLock {
                    level: LockLevel::All,
                    locked_by_user: "root".into(),
                    locked_by_admin: true,
                    locked_at: now,
                    reason: Some("maintenance".into()),
                },
            ),
        }
    }

    fn allowed(action: StackAction, status: ActionStatus) -> Vec<&'static str> {
        let stack = stack(action, status);
        Operation::ALL
            .into_iter()
            .filter(|operation| ensure_allowed(&stack, *operation).is_ok())
            .map(Operation::as_str)
            .collect()
    }

    #[test]
    fn the_spec_table_holds() {
        use ActionStatus::*;
        use StackAction::*;
        assert_eq!(allowed(Lock, Complete), ["lock", "unlock"]);
        assert_eq!(allowed(Lock, Failed), ["delete", "lock", "unlock"]);
        assert_eq!(allowed(Unlock, Failed), ["delete", "unlock"]);
        assert!(allowed(Lock, InProgress).is_empty());
        assert!(allowed(Unlock, InProgress).is_empty());
        let unlocked = allowed(Unlock, Complete);
        assert!(
            !unlocked.contains(&"unlock")
                && unlocked.contains(&"lock")
                && unlocked.contains(&"update")
        );
        assert!(!allowed(Create, Complete).contains(&"unlock"));
        assert!(
            !allowed(Init, Complete).contains(&"lock"),
            "INIT_COMPLETE cannot be locked"
        );
        assert!(allowed(Update, InProgress).contains(&"cancel_update"));
        assert_eq!(allowed(Update, InProgress), ["cancel_update"]);
        assert!(
            allowed(Create, Failed).contains(&"lock"),
            "a FAILED state is final"
        );
    }

    /// The spec's table, written out independently of the implementation:
    /// every state × every operation.
    fn expected(action: StackAction, status: ActionStatus, operation: Operation) -> bool {
        use ActionStatus::*;
        use Operation::*;
        match (action, status) {
            (StackAction::Update, InProgress) => operation == CancelUpdate,
            (_, InProgress) => false,
            (StackAction::Lock, Complete) => matches!(operation, Lock | Unlock),
            (StackAction::Lock, Failed) => matches!(operation, Lock | Unlock | Delete),
            (StackAction::Unlock, Failed) => matches!(operation, Unlock | Delete),
            (StackAction::Init | StackAction::Delete, Complete) => {
                !matches!(operation, Lock | Unlock)
            }
            _ => operation != Unlock,
        }
    }

    #[test]
    fn every_cell_of_the_allowed_action_table() {
        let statuses = [
            ActionStatus::InProgress,
            ActionStatus::Complete,
            ActionStatus::Failed,
        ];
        let mut cells = 0;
        for action in StackAction::ALL {
            for status in statuses {
                let stack = stack(action, status);
                for operation in Operation::ALL {
                    let verdict = ensure_allowed(&stack, operation);
                    assert_eq!(
                        verdict.is_ok(),
                        expected(action, status, operation),
                        "{}_{} × {}: {verdict:?}",
                        action.as_str(),
                        status.as_str(),
                        operation.as_str()
                    );
                    if let Err(error) = verdict {
                        assert!(matches!(error, Error::Conflict(_)), "{error:?}");
                        assert!(
                            error.to_string().contains("\"web\""),
                            "names the stack: {error}"
                        );
                    }
                    cells += 1;
                }
            }
        }
        assert_eq!(cells, 12 * 3 * 11);
    }

    #[test]
    fn a_deleted_stack_is_not_found_for_every_operation() {
        let mut deleted = stack(StackAction::Delete, ActionStatus::Complete);
        deleted.deleted_at = Some(chrono::Utc::now());
        for operation in Operation::ALL {
            assert!(matches!(
                ensure_allowed(&deleted, operation),
                Err(Error::NotFound(_))
            ));
        }
    }

    #[test]
    fn a_refusal_names_the_lock() {
        let error = ensure_allowed(
            &stack(StackAction::Lock, ActionStatus::Complete),
            Operation::Delete,
        )
        .expect_err("locked");
        let message = error.to_string();
        assert!(
            message.contains("stack \"web\" is locked (level all, by admin \"root\" at"),
            "{message}"
        );
        assert!(
            message.contains(": maintenance): delete is not allowed; unlock it first"),
            "{message}"
        );
    }
}
