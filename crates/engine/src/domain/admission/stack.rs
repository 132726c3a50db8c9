//! May this operation start on this stack now, for this caller? Decided
//! here, once, for every entry point — REST, gRPC, the CLI, the dry run
//! (`…/actions/{action}/allowed`, gRPC `CheckOperation`), signals, scaling,
//! mark-unhealthy, nested stacks addressed directly, and the engine's own
//! operations on nested stacks — so the dry run and the operation can never
//! disagree. The application layer asks before it takes the stack lease and
//! again under it (the state may have moved in between).
//!
//! In order:
//! 1. A deleted stack is not found (404), whatever the operation.
//! 2. A user whose only role is `reader` may look, never change (403).
//! 3. The maintenance-lock table (spec heat-lock-stack): while LOCK_COMPLETE
//!    only lock (to change the level) and unlock; LOCK_FAILED allows unlock,
//!    delete and lock; UNLOCK_FAILED allows delete and unlock; nothing starts
//!    while anything is in progress (but cancel_update, which exists to act
//!    on a running update, and delete, which stops a running create,
//!    update, rollback, suspend, resume, check or restore first, as
//!    Heat's does); lock needs a final state other than
//!    INIT_COMPLETE and DELETE_COMPLETE; unlock needs a locked (or dirty)
//!    stack.
//! 4. What each operation needs of the state (Heat's rules): suspend not
//!    when already suspended, resume only from SUSPEND_COMPLETE or
//!    RESUME_FAILED, suspend/resume/check/update not after a delete began
//!    (DELETE_FAILED), cancel_update only during UPDATE_IN_PROGRESS.
//! 5. An admin's lock is changed or lifted only by an admin (403).
//! 6. For a user, a nested stack is busy or locked with every stack above
//!    it: rule 3 holds for each ancestor too.

use ember_runtime::Identity;

use super::{Blocker, BlockerKind};
use crate::domain::instance::policy::is_read_only;
use crate::domain::{ActionStatus, Stack, StackAction};
use crate::error::{Error, Result};

/// What a caller wants to do to a stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StackOperation {
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
    /// Save the stack's data (Heat's snapshot).
    Snapshot,
    /// Update the stack back to a snapshot.
    Restore,
}

impl StackOperation {
    pub const ALL: [StackOperation; 13] = [
        StackOperation::Update,
        StackOperation::Delete,
        StackOperation::Abandon,
        StackOperation::Suspend,
        StackOperation::Resume,
        StackOperation::Check,
        StackOperation::CancelUpdate,
        StackOperation::Signal,
        StackOperation::MarkUnhealthy,
        StackOperation::Lock,
        StackOperation::Unlock,
        StackOperation::Snapshot,
        StackOperation::Restore,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StackOperation::Update => "update",
            StackOperation::Delete => "delete",
            StackOperation::Abandon => "abandon",
            StackOperation::Suspend => "suspend",
            StackOperation::Resume => "resume",
            StackOperation::Check => "check",
            StackOperation::CancelUpdate => "cancel_update",
            StackOperation::Signal => "signal",
            StackOperation::MarkUnhealthy => "mark_unhealthy",
            StackOperation::Lock => "lock",
            StackOperation::Unlock => "unlock",
            StackOperation::Snapshot => "snapshot",
            StackOperation::Restore => "restore",
        }
    }

    pub fn parse(text: &str) -> Option<StackOperation> {
        StackOperation::ALL
            .into_iter()
            .find(|operation| operation.as_str() == text)
    }
}

/// On whose behalf an operation would run.
#[derive(Debug, Clone, Copy)]
pub enum StackCaller<'a> {
    /// A user's request: their roles count, and so do the stacks above a
    /// nested stack.
    User(&'a Identity),
    /// The engine, as part of the operation of the stack above (a parent's
    /// resource creating, updating, locking or deleting its nested stack):
    /// only the stack's own state counts — the parent is in progress by
    /// definition. `Some` carries the user the parent's operation acts for
    /// when rule 5 must hold through nesting (lock and unlock).
    ParentOperation(Option<&'a Identity>),
}

/// `Ok` when `caller` may start `operation` on `stack` now; otherwise the
/// error the caller gets (NotFound, Forbidden or Conflict), naming the
/// stack, its state and any lock. `ancestors` are the stacks above `stack`
/// (nearest first), read only for users.
pub fn admit_stack(
    stack: &Stack,
    ancestors: &[Stack],
    operation: StackOperation,
    caller: StackCaller<'_>,
) -> Result<()> {
    super::first(&stack_blockers(stack, ancestors, operation, caller))
}

/// Every rule `operation` on `stack` breaks for `caller`, in the order
/// above (the first is [`admit_stack`]'s answer).
pub fn stack_blockers(
    stack: &Stack,
    ancestors: &[Stack],
    operation: StackOperation,
    caller: StackCaller<'_>,
) -> Vec<Blocker> {
    if stack.deleted_at.is_some() {
        return vec![Blocker::new(
            BlockerKind::NotFound,
            Error::NotFound(format!("stack {:?} not found (it was deleted)", stack.name)),
        )];
    }
    let mut blockers = Vec::new();
    if let StackCaller::User(user) = caller
        && is_read_only(user)
    {
        blockers.push(Blocker::new(
            BlockerKind::Role,
            Error::Forbidden(format!(
                "user {:?} has only the reader role in project {:?}: to {} a stack needs the member or admin role",
                user.user_id,
                user.project_id,
                operation.as_str()
            )),
        ));
    }
    if !stops_running(stack, operation)
        && let Err(error) = lock_table(stack, operation)
    {
        blockers.push(Blocker::new(lock_table_kind(stack), error));
    }
    if let Err(error) = operation_needs(stack, operation) {
        blockers.push(Blocker::new(BlockerKind::State, error));
    }
    let lifting_user = match caller {
        StackCaller::User(user) | StackCaller::ParentOperation(Some(user)) => Some(user),
        StackCaller::ParentOperation(None) => None,
    };
    if let Some(user) = lifting_user
        && let Err(error) = admin_lock_rule(stack, user, operation)
    {
        blockers.push(Blocker::new(BlockerKind::Role, error));
    }
    if let StackCaller::User(_) = caller {
        for ancestor in ancestors {
            if let Err(error) = lock_table(ancestor, operation) {
                let error = match error {
                    Error::Conflict(message) => {
                        Error::Conflict(format!("stack {:?} is nested in {message}", stack.name))
                    }
                    other => other,
                };
                blockers.push(Blocker::new(lock_table_kind(ancestor), error));
            }
        }
    }
    blockers
}

/// What kind of blocker the lock table's refusal on `stack` is: an
/// operation running, a maintenance lock (locked, or a lock or unlock that
/// failed), or another state.
fn lock_table_kind(stack: &Stack) -> BlockerKind {
    match (stack.action, stack.status) {
        (_, ActionStatus::InProgress) => BlockerKind::InProgress,
        (StackAction::Lock, _) | (StackAction::Unlock, ActionStatus::Failed) => {
            BlockerKind::MaintenanceLock
        }
        _ => BlockerKind::State,
    }
}

/// What an admin's break-glass may run through a stack's maintenance lock
/// (see `admission::through_locks`):
/// the operations that leave the lock in place — a delete (the lock goes
/// with the stack) and marking a resource unhealthy. Any other would take
/// the stack out of LOCK_COMPLETE, lifting the lock for everyone: those
/// stay refused (unlock, act, lock again).
pub const BREAKABLE_BY_GLASS: [StackOperation; 2] =
    [StackOperation::Delete, StackOperation::MarkUnhealthy];

/// May `caller` create (or adopt) a stack? Rule 2 is the only one that
/// applies to a stack that does not exist yet.
pub fn admit_new_stack(caller: &Identity) -> Result<()> {
    if is_read_only(caller) {
        return Err(Error::Forbidden(format!(
            "user {:?} has only the reader role in project {:?}: to create a stack needs the member or admin role",
            caller.user_id, caller.project_id
        )));
    }
    Ok(())
}

/// A delete of a stack whose own operation is running stops that
/// operation and then deletes (Heat's delete of a stack in progress), so
/// a stack that cannot finish is never stuck: not while it locks, unlocks
/// (the lock spec allows nothing then) or is being deleted already, nor a
/// snapshot (it changes nothing and ends by itself).
pub fn stops_running(stack: &Stack, operation: StackOperation) -> bool {
    operation == StackOperation::Delete
        && stack.status == ActionStatus::InProgress
        && matches!(
            stack.action,
            StackAction::Create
                | StackAction::Update
                | StackAction::Rollback
                | StackAction::Suspend
                | StackAction::Resume
                | StackAction::Check
                | StackAction::Adopt
                | StackAction::Restore
        )
}

/// Rule 3: the maintenance-lock table.
fn lock_table(stack: &Stack, operation: StackOperation) -> Result<()> {
    let refuse = |why: String| Err(Error::Conflict(why));
    if stack.status == ActionStatus::InProgress {
        // cancel_update exists precisely to act on a running update.
        if operation == StackOperation::CancelUpdate && stack.action == StackAction::Update {
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
            StackOperation::Lock | StackOperation::Unlock => Ok(()),
            _ => refuse(format!(
                "stack {:?} is locked{lock}: {} is not allowed; unlock it first",
                stack.name,
                operation.as_str()
            )),
        },
        (StackAction::Lock, ActionStatus::Failed) => match operation {
            StackOperation::Lock | StackOperation::Unlock | StackOperation::Delete => Ok(()),
            _ => refuse(format!(
                "stack {:?} is LOCK_FAILED{lock}: only unlock, delete or lock are allowed",
                stack.name
            )),
        },
        (StackAction::Unlock, ActionStatus::Failed) => match operation {
            StackOperation::Unlock | StackOperation::Delete => Ok(()),
            _ => refuse(format!(
                "stack {:?} is UNLOCK_FAILED{lock}: only unlock or delete are allowed",
                stack.name
            )),
        },
        (action, status) => match operation {
            StackOperation::Unlock => refuse(format!(
                "stack {:?} is not locked ({}): there is nothing to unlock",
                stack.name,
                stack.stack_status()
            )),
            StackOperation::Lock
                if matches!(
                    (action, status),
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

/// Rule 4: what each operation needs of a stack in a final state.
fn operation_needs(stack: &Stack, operation: StackOperation) -> Result<()> {
    let state = (stack.action, stack.status);
    let suspended = state == (StackAction::Suspend, ActionStatus::Complete);
    let why = match operation {
        StackOperation::Suspend if suspended => Some("it is already suspended"),
        StackOperation::Resume
            if !(suspended || state == (StackAction::Resume, ActionStatus::Failed)) =>
        {
            Some("only a suspended stack can be resumed")
        }
        StackOperation::Suspend
        | StackOperation::Resume
        | StackOperation::Check
        | StackOperation::Update
        | StackOperation::Snapshot
        | StackOperation::Restore
            if stack.action == StackAction::Delete =>
        {
            Some("its delete began; only delete can finish it")
        }
        StackOperation::CancelUpdate
            if state != (StackAction::Update, ActionStatus::InProgress) =>
        {
            Some("only an UPDATE_IN_PROGRESS can be cancelled")
        }
        _ => None,
    };
    match why {
        Some(why) => Err(Error::Conflict(format!(
            "stack {:?} is {}: cannot {}: {why}",
            stack.name,
            stack.stack_status(),
            operation.as_str()
        ))),
        None => Ok(()),
    }
}

/// Rule 5: an admin's lock is changed or lifted only by an admin.
fn admin_lock_rule(stack: &Stack, caller: &Identity, operation: StackOperation) -> Result<()> {
    match (&stack.maintenance_lock, operation) {
        (Some(lock), StackOperation::Lock | StackOperation::Unlock)
            if lock.locked_by_admin && !caller.is_admin() =>
        {
            Err(Error::Forbidden(format!(
                "stack {:?} was locked by admin {:?}: only an admin can {} it",
                stack.name,
                lock.locked_by_user,
                operation.as_str()
            )))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{LockLevel, MaintenanceLock};
    use proptest::prelude::*;

    const STATUSES: [ActionStatus; 3] = [
        ActionStatus::InProgress,
        ActionStatus::Complete,
        ActionStatus::Failed,
    ];

    fn stack(action: StackAction, status: ActionStatus, locked_by_admin: bool) -> Stack {
        let now = chrono::Utc::now();
        Stack {
            action,
            status,
            status_reason: String::new(),
            maintenance_lock: matches!(action, StackAction::Lock | StackAction::Unlock).then(
                || MaintenanceLock {
                    level: LockLevel::All,
                    locked_by_user: "root".into(),
                    locked_by_admin,
                    locked_at: now,
                    reason: Some("maintenance".into()),
                    expires_at: None,
                },
            ),
            ..Stack::starting_create(uuid::Uuid::nil(), "web", "demo", "demo", now)
        }
    }

    fn member() -> Identity {
        Identity::new("demo", "demo", vec!["member".into()])
    }

    fn admin() -> Identity {
        Identity::new("root", "demo", vec!["admin".into()])
    }

    fn reader() -> Identity {
        Identity::new("rita", "demo", vec!["reader".into()])
    }

    /// The rules, written out independently of the implementation: the
    /// verdict for every state × operation × caller.
    fn expected(
        action: StackAction,
        status: ActionStatus,
        locked_by_admin: bool,
        operation: StackOperation,
        caller: &str,
    ) -> bool {
        use ActionStatus::*;
        use StackOperation::*;
        if caller == "reader" {
            return false;
        }
        let table = match (action, status) {
            (StackAction::Update, InProgress) => matches!(operation, CancelUpdate | Delete),
            (
                StackAction::Create
                | StackAction::Rollback
                | StackAction::Suspend
                | StackAction::Resume
                | StackAction::Check
                | StackAction::Adopt
                | StackAction::Restore,
                InProgress,
            ) => operation == Delete,
            (_, InProgress) => false,
            (StackAction::Lock, Complete) => matches!(operation, Lock | Unlock),
            (StackAction::Lock, Failed) => matches!(operation, Lock | Unlock | Delete),
            (StackAction::Unlock, Failed) => matches!(operation, Unlock | Delete),
            (StackAction::Init | StackAction::Delete, Complete) => {
                !matches!(operation, Lock | Unlock)
            }
            _ => operation != Unlock,
        };
        let needs = match operation {
            Suspend => {
                (action, status) != (StackAction::Suspend, Complete)
                    && action != StackAction::Delete
            }
            Resume => matches!(
                (action, status),
                (StackAction::Suspend, Complete) | (StackAction::Resume, Failed)
            ),
            Check | Update | Snapshot | Restore => action != StackAction::Delete,
            CancelUpdate => (action, status) == (StackAction::Update, InProgress),
            _ => true,
        };
        let lock_owner = !(locked_by_admin
            && matches!(action, StackAction::Lock | StackAction::Unlock)
            && matches!(operation, Lock | Unlock)
            && caller == "member");
        table && needs && lock_owner
    }

    #[test]
    fn every_cell_of_the_admission_table() {
        let mut cells = 0;
        for action in StackAction::ALL {
            for status in STATUSES {
                for locked_by_admin in [false, true] {
                    let stack = stack(action, status, locked_by_admin);
                    for operation in StackOperation::ALL {
                        for (name, user) in [
                            ("member", member()),
                            ("admin", admin()),
                            ("reader", reader()),
                        ] {
                            let verdict =
                                admit_stack(&stack, &[], operation, StackCaller::User(&user));
                            assert_eq!(
                                verdict.is_ok(),
                                expected(action, status, locked_by_admin, operation, name),
                                "{}_{} (admin lock {locked_by_admin}) × {} by {name}: {verdict:?}",
                                action.as_str(),
                                status.as_str(),
                                operation.as_str()
                            );
                            if let Err(error) = &verdict {
                                assert!(
                                    matches!(error, Error::Conflict(_) | Error::Forbidden(_)),
                                    "{error:?}"
                                );
                                assert!(
                                    error.to_string().contains("\"web\"") || name == "reader",
                                    "names the stack: {error}"
                                );
                            }
                            cells += 1;
                        }
                        // The engine acting for a parent: no roles, the same state rules.
                        let parent =
                            admit_stack(&stack, &[], operation, StackCaller::ParentOperation(None));
                        assert_eq!(
                            parent.is_ok(),
                            expected(action, status, false, operation, "admin"),
                            "{}_{} × {} for a parent: {parent:?}",
                            action.as_str(),
                            status.as_str(),
                            operation.as_str()
                        );
                    }
                }
            }
        }
        assert_eq!(cells, 14 * 3 * 2 * 13 * 3);
    }

    #[test]
    fn resume_is_refused_on_a_complete_stack_as_the_operation_refuses_it() {
        let error = admit_stack(
            &stack(StackAction::Create, ActionStatus::Complete, false),
            &[],
            StackOperation::Resume,
            StackCaller::User(&member()),
        )
        .expect_err("not suspended");
        assert_eq!(
            error.to_string(),
            "stack \"web\" is CREATE_COMPLETE: cannot resume: only a suspended stack can be resumed"
        );
    }

    #[test]
    fn a_deleted_stack_is_not_found_for_every_operation_and_caller() {
        let mut deleted = stack(StackAction::Delete, ActionStatus::Complete, false);
        deleted.deleted_at = Some(chrono::Utc::now());
        for operation in StackOperation::ALL {
            for caller in [
                StackCaller::User(&member()),
                StackCaller::User(&reader()),
                StackCaller::ParentOperation(None),
            ] {
                assert!(matches!(
                    admit_stack(&deleted, &[], operation, caller),
                    Err(Error::NotFound(_))
                ));
            }
        }
    }

    #[test]
    fn a_refusal_names_the_lock() {
        let error = admit_stack(
            &stack(StackAction::Lock, ActionStatus::Complete, true),
            &[],
            StackOperation::Delete,
            StackCaller::User(&member()),
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

    #[test]
    fn an_admin_lock_holds_through_a_parent_operation_for_its_user() {
        let locked = stack(StackAction::Lock, ActionStatus::Complete, true);
        let error = admit_stack(
            &locked,
            &[],
            StackOperation::Unlock,
            StackCaller::ParentOperation(Some(&member())),
        )
        .expect_err("a member cannot lift an admin lock through nesting");
        assert!(matches!(error, Error::Forbidden(_)), "{error:?}");
        admit_stack(
            &locked,
            &[],
            StackOperation::Unlock,
            StackCaller::ParentOperation(Some(&admin())),
        )
        .expect("an admin can");
    }

    #[test]
    fn every_blocker_comes_back_and_the_first_is_the_refusal() {
        // A reader asks to update a locked nested stack whose root is
        // being updated and whose parent is locked too.
        let nested = stack(StackAction::Lock, ActionStatus::Complete, true);
        let busy_root = stack(StackAction::Update, ActionStatus::InProgress, false);
        let locked_parent = stack(StackAction::Lock, ActionStatus::Complete, false);
        let ancestors = [locked_parent, busy_root];
        let blockers = stack_blockers(
            &nested,
            &ancestors,
            StackOperation::Update,
            StackCaller::User(&reader()),
        );
        let kinds: Vec<BlockerKind> = blockers.iter().map(|blocker| blocker.kind).collect();
        assert_eq!(
            kinds,
            [
                BlockerKind::Role,
                BlockerKind::MaintenanceLock,
                BlockerKind::MaintenanceLock,
                BlockerKind::InProgress
            ],
            "{blockers:?}"
        );
        let refusal = admit_stack(
            &nested,
            &ancestors,
            StackOperation::Update,
            StackCaller::User(&reader()),
        )
        .expect_err("refused");
        assert_eq!(refusal.to_string(), blockers[0].error.to_string());
        // An admin's break-glass gets a delete through the locks, never
        // through a running operation, and never an update.
        let through = |operation, ancestors: &[Stack]| {
            crate::domain::admission::through_locks(
                &stack_blockers(&nested, ancestors, operation, StackCaller::User(&admin())),
                BREAKABLE_BY_GLASS.contains(&operation),
            )
        };
        assert!(through(StackOperation::Delete, &ancestors[..1]).is_ok());
        assert!(through(StackOperation::Delete, &ancestors).is_err());
        assert!(through(StackOperation::Update, &ancestors[..1]).is_err());
    }

    #[test]
    fn a_nested_stack_is_busy_and_locked_with_its_ancestors_for_users_only() {
        let mut nested = stack(StackAction::Create, ActionStatus::Complete, false);
        nested.name = "web-inner".into();
        let busy_root = stack(StackAction::Update, ActionStatus::InProgress, false);
        let locked_root = stack(StackAction::Lock, ActionStatus::Complete, false);
        for root in [&busy_root, &locked_root] {
            let error = admit_stack(
                &nested,
                std::slice::from_ref(root),
                StackOperation::MarkUnhealthy,
                StackCaller::User(&member()),
            )
            .expect_err("the root decides");
            let message = error.to_string();
            assert!(
                message.starts_with("stack \"web-inner\" is nested in stack \"web\" is"),
                "{message}"
            );
            admit_stack(
                &nested,
                std::slice::from_ref(root),
                StackOperation::Update,
                StackCaller::ParentOperation(None),
            )
            .expect("the parent's own operation goes on");
        }
    }

    fn any_action() -> impl Strategy<Value = StackAction> {
        proptest::sample::select(StackAction::ALL.to_vec())
    }

    fn any_status() -> impl Strategy<Value = ActionStatus> {
        proptest::sample::select(STATUSES.to_vec())
    }

    fn any_operation() -> impl Strategy<Value = StackOperation> {
        proptest::sample::select(StackOperation::ALL.to_vec())
    }

    proptest! {
        /// Whatever the stacks above, nothing starts on a stack in progress
        /// but cancel_update of its update and a delete that stops it, and
        /// an ancestor can only take
        /// permissions away, never add them.
        #[test]
        fn ancestors_only_ever_refuse(
            action in any_action(),
            status in any_status(),
            operation in any_operation(),
            above in proptest::collection::vec((any_action(), any_status(), any::<bool>()), 0..4),
        ) {
            let subject = stack(action, status, false);
            let ancestors: Vec<Stack> = above
                .into_iter()
                .map(|(action, status, admin)| stack(action, status, admin))
                .collect();
            let alone = admit_stack(&subject, &[], operation, StackCaller::User(&member()));
            let nested = admit_stack(&subject, &ancestors, operation, StackCaller::User(&member()));
            prop_assert!(alone.is_ok() || nested.is_err());
            if status == ActionStatus::InProgress {
                prop_assert_eq!(
                    nested.is_ok(),
                    ((operation == StackOperation::CancelUpdate && action == StackAction::Update)
                        || stops_running(&subject, operation))
                        && ancestors.iter().all(|ancestor| lock_table(ancestor, operation).is_ok())
                );
            }
            if ancestors.iter().any(|ancestor| ancestor.status == ActionStatus::InProgress
                && !(operation == StackOperation::CancelUpdate && ancestor.action == StackAction::Update))
            {
                prop_assert!(nested.is_err());
            }
        }

        /// The dry run and the operation are one function: the same inputs
        /// give the same verdict, and a reader is refused whatever the state.
        #[test]
        fn readers_never_change_anything(
            action in any_action(),
            status in any_status(),
            operation in any_operation(),
            admin_lock in any::<bool>(),
        ) {
            let subject = stack(action, status, admin_lock);
            prop_assert!(admit_stack(&subject, &[], operation, StackCaller::User(&reader())).is_err());
        }
    }
}
