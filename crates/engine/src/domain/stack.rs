//! A stack and its state: Heat's (action, status) pair, e.g. CREATE_COMPLETE.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// What a stack is doing or last did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StackAction {
    Init,
    Create,
    Update,
    Delete,
    Rollback,
    Suspend,
    Resume,
    Check,
    Adopt,
    Abandon,
    Lock,
    Unlock,
    /// Heat's snapshot: the stack's data saved, nothing changed.
    Snapshot,
    /// Heat's restore: an update back to a snapshot.
    Restore,
}

/// An action run on every resource of a stack through its "actions"
/// endpoint (and on a nested stack by its parent's resource).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackWideAction {
    Suspend,
    Resume,
    Check,
}

impl StackWideAction {
    /// The stack action it records.
    pub fn stack_action(self) -> StackAction {
        match self {
            StackWideAction::Suspend => StackAction::Suspend,
            StackWideAction::Resume => StackAction::Resume,
            StackWideAction::Check => StackAction::Check,
        }
    }
}

impl StackAction {
    pub const ALL: [StackAction; 14] = [
        StackAction::Init,
        StackAction::Create,
        StackAction::Update,
        StackAction::Delete,
        StackAction::Rollback,
        StackAction::Suspend,
        StackAction::Resume,
        StackAction::Check,
        StackAction::Adopt,
        StackAction::Abandon,
        StackAction::Lock,
        StackAction::Unlock,
        StackAction::Snapshot,
        StackAction::Restore,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StackAction::Init => "INIT",
            StackAction::Create => "CREATE",
            StackAction::Update => "UPDATE",
            StackAction::Delete => "DELETE",
            StackAction::Rollback => "ROLLBACK",
            StackAction::Suspend => "SUSPEND",
            StackAction::Resume => "RESUME",
            StackAction::Check => "CHECK",
            StackAction::Adopt => "ADOPT",
            StackAction::Abandon => "ABANDON",
            StackAction::Lock => "LOCK",
            StackAction::Unlock => "UNLOCK",
            StackAction::Snapshot => "SNAPSHOT",
            StackAction::Restore => "RESTORE",
        }
    }

    pub fn parse(text: &str) -> Option<StackAction> {
        StackAction::ALL
            .into_iter()
            .find(|action| action.as_str() == text)
    }
}

/// How the action went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActionStatus {
    InProgress,
    Complete,
    Failed,
}

impl ActionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ActionStatus::InProgress => "IN_PROGRESS",
            ActionStatus::Complete => "COMPLETE",
            ActionStatus::Failed => "FAILED",
        }
    }

    pub fn parse(text: &str) -> Option<ActionStatus> {
        match text {
            "IN_PROGRESS" => Some(ActionStatus::InProgress),
            "COMPLETE" => Some(ActionStatus::Complete),
            "FAILED" => Some(ActionStatus::Failed),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack {
    pub id: Uuid,
    pub name: String,
    pub project_id: String,
    pub user_id: String,
    /// The parent of a nested stack.
    pub parent_id: Option<Uuid>,
    pub action: StackAction,
    pub status: ActionStatus,
    pub status_reason: String,
    pub description: String,
    pub tags: Vec<String>,
    /// Minutes an operation may take; `None` = no limit.
    pub timeout_mins: Option<u32>,
    pub disable_rollback: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Depth below the root stack (0 = root).
    pub nested_depth: u32,
    /// For a nested stack, the parent's resource that owns it.
    pub parent_resource: Option<String>,
    /// Set when the stack reached DELETE_COMPLETE: it is then hidden from
    /// lists and its name may be reused.
    pub deleted_at: Option<DateTime<Utc>>,
    /// Moves on each time the stack is given a definition: 1 when it is
    /// created, then +1 with each update, rollback or restore. Parsed
    /// templates are cached by it.
    pub definition_version: i64,
    /// The maintenance lock (spec heat-lock-stack) while the stack is
    /// locked or being locked or unlocked.
    pub maintenance_lock: Option<MaintenanceLock>,
}

/// How much a maintenance lock covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockLevel {
    /// The stack and its nested stacks; physical resources stay usable.
    Stacks,
    /// Also every resource that can be locked (instances).
    All,
}

impl LockLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            LockLevel::Stacks => "stacks",
            LockLevel::All => "all",
        }
    }

    pub fn parse(text: &str) -> Option<LockLevel> {
        match text {
            "stacks" => Some(LockLevel::Stacks),
            "all" => Some(LockLevel::All),
            _ => None,
        }
    }
}

/// Who locked a stack, when, how far and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaintenanceLock {
    pub level: LockLevel,
    pub locked_by_user: String,
    /// An admin's lock can only be lifted by an admin.
    pub locked_by_admin: bool,
    pub locked_at: DateTime<Utc>,
    pub reason: Option<String>,
    /// When the engine unlocks the stack, unless it is locked again (a
    /// renewal) or unlocked before.
    pub expires_at: Option<DateTime<Utc>>,
}

impl MaintenanceLock {
    /// `level all, by admin "root" at 2026-11-22T05:00:00Z: maintenance`
    pub fn describe(&self) -> String {
        describe_lock(
            self.level.as_str(),
            self.locked_by_admin,
            &self.locked_by_user,
            self.locked_at,
            self.expires_at,
            self.reason.as_deref(),
        )
    }
}

/// How messages name a stack's or a cluster's lock: `level all, by admin
/// "root" at 2026-11-22T05:00:00Z until 2026-11-22T09:00:00Z: maintenance`.
pub fn describe_lock(
    level: &str,
    by_admin: bool,
    user: &str,
    locked_at: DateTime<Utc>,
    expires_at: Option<DateTime<Utc>>,
    reason: Option<&str>,
) -> String {
    let role = if by_admin { "admin" } else { "owner" };
    let mut text = format!(
        "level {level}, by {role} {user:?} at {}",
        locked_at.format("%Y-%m-%dT%H:%M:%SZ")
    );
    if let Some(expires_at) = expires_at {
        text.push_str(&format!(
            " until {}",
            expires_at.format("%Y-%m-%dT%H:%M:%SZ")
        ));
    }
    if let Some(reason) = reason {
        text.push_str(": ");
        text.push_str(reason);
    }
    text
}

/// What a stack was created or last updated from, kept so it can be
/// re-resolved (outputs, update PATCH, abandon).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StackDefinition {
    /// The template as a JSON object.
    pub template: serde_json::Value,
    /// The merged environment as a JSON object.
    pub environment: serde_json::Value,
    pub files: std::collections::BTreeMap<String, String>,
    /// Parameter values the user gave (before defaults).
    pub parameters: serde_json::Map<String, serde_json::Value>,
}

impl Stack {
    /// A root stack as its create begins, at `now`: CREATE_IN_PROGRESS
    /// ("Stack CREATE started") with its first definition, no description,
    /// tags or timeout, rollback disabled. The create (or a nested stack's
    /// parent) sets what its request gives.
    pub fn starting_create(
        id: Uuid,
        name: &str,
        project_id: &str,
        user_id: &str,
        now: DateTime<Utc>,
    ) -> Stack {
        Stack {
            id,
            name: name.to_owned(),
            project_id: project_id.to_owned(),
            user_id: user_id.to_owned(),
            parent_id: None,
            action: StackAction::Create,
            status: ActionStatus::InProgress,
            status_reason: "Stack CREATE started".to_owned(),
            description: String::new(),
            tags: Vec::new(),
            timeout_mins: None,
            disable_rollback: true,
            created_at: now,
            updated_at: now,
            nested_depth: 0,
            parent_resource: None,
            deleted_at: None,
            definition_version: 1,
            maintenance_lock: None,
        }
    }

    /// Heat's combined status, e.g. `CREATE_COMPLETE`.
    pub fn stack_status(&self) -> String {
        let (action, status) = (self.action.as_str(), self.status.as_str());
        let mut text = String::with_capacity(action.len() + 1 + status.len());
        text.push_str(action);
        text.push('_');
        text.push_str(status);
        text
    }

    /// Whether an operation is running on it (any `*_IN_PROGRESS`).
    pub fn in_progress(&self) -> bool {
        self.status == ActionStatus::InProgress
    }
}

/// Which stacks to list, newest first.
#[derive(Debug, Clone, Default)]
pub struct StackListQuery {
    /// 0 = the default page size.
    pub limit: u32,
    /// Id of the last stack of the previous page.
    pub marker: Option<Uuid>,
    pub name: Option<String>,
    /// Include nested stacks.
    pub show_nested: bool,
    /// Only locked (true) or only unlocked (false) stacks.
    pub locked: Option<bool>,
}

impl StackListQuery {
    pub fn page_size(&self) -> u32 {
        match self.limit {
            0 => super::DEFAULT_PAGE_SIZE,
            limit => limit.min(super::MAX_PAGE_SIZE),
        }
    }
}

/// Heat's filters of a resource list, and of an event list by the
/// resource each event is about. The values of one filter are
/// alternatives, every filter given applies (`name=a&name=b&status=FAILED`
/// is "a or b, and failed"); an empty filter takes everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceFilter {
    /// Logical names.
    pub names: Vec<String>,
    pub types: Vec<String>,
    /// Actions alone: `CREATE`.
    pub actions: Vec<String>,
    /// A status alone (`FAILED`: of any action) or with its action
    /// (`CREATE_FAILED`), as Heat takes both.
    pub statuses: Vec<String>,
    pub physical_ids: Vec<String>,
}

impl ResourceFilter {
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
            && self.types.is_empty()
            && self.actions.is_empty()
            && self.statuses.is_empty()
            && self.physical_ids.is_empty()
    }
}

/// Which events to list.
#[derive(Debug, Clone, Default)]
pub struct EventListQuery {
    pub stack_ids: Vec<Uuid>,
    pub resource_name: Option<String>,
    /// Heat's filters (`resource_name`, `resource_type`,
    /// `resource_action`, `resource_status`), applied with the page: a
    /// page holds `limit` matching events, and the marker pages on among
    /// them.
    pub filter: ResourceFilter,
    /// 0 = the default page size.
    pub limit: u32,
    /// Id of the last event of the previous page.
    pub marker: Option<Uuid>,
    /// Newest first.
    pub descending: bool,
}

impl EventListQuery {
    pub fn page_size(&self) -> u32 {
        match self.limit {
            0 => super::DEFAULT_PAGE_SIZE,
            limit => limit.min(super::MAX_PAGE_SIZE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_round_trip_through_their_names() {
        for action in StackAction::ALL {
            assert_eq!(StackAction::parse(action.as_str()), Some(action));
        }
        assert_eq!(StackAction::parse("create"), None);
    }

    #[test]
    fn statuses_round_trip_through_their_names() {
        for status in [
            ActionStatus::InProgress,
            ActionStatus::Complete,
            ActionStatus::Failed,
        ] {
            assert_eq!(ActionStatus::parse(status.as_str()), Some(status));
        }
    }
}

/// A stack's data at one moment (Heat's snapshot): what restore brings the
/// stack back to.
#[derive(Debug, Clone, PartialEq)]
pub struct StackSnapshot {
    pub id: Uuid,
    pub stack_id: Uuid,
    pub project_id: String,
    pub name: String,
    /// `COMPLETE`, or `FAILED` with the reason.
    pub status: String,
    pub status_reason: String,
    /// The stack's definition and its resources' state, as export gives
    /// them.
    pub data: serde_json::Value,
    pub created_at: DateTime<Utc>,
}
