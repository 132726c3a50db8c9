//! A compute instance and its state machine: status, power state and the
//! maintenance lock (spec `mogan-lock-instance-api`). Who may do what to an
//! instance is decided in [`policy`], in one place for every entry point.
//!
//! Driver work (build, power, reboot, delete) runs asynchronously: a request
//! moves the instance into an in-progress state ([`InstanceTask::in_progress`])
//! and the driver's outcome later moves it on, but only if it is still in that
//! state — a delete that arrived meanwhile wins over a build that finishes
//! late.

pub mod observation;
pub mod placement;
pub mod policy;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::{Error, Result};

/// The name of the flavor with no limits (every backend knows it).
pub const UNLIMITED_FLAVOR: &str = "unlimited";

/// The longest name, flavor, image, metadata key or value, and lock reason.
pub const MAX_TEXT_LENGTH: usize = 255;
/// The most metadata items one instance carries (Nova's default quota).
pub const MAX_METADATA_ITEMS: usize = 128;
/// The most bytes of user data (Nova's limit on the encoded field).
pub const MAX_USER_DATA_BYTES: usize = 65_535;
/// The most arguments of a command, and environment variables.
pub const MAX_COMMAND_ARGUMENTS: usize = 256;
pub const MAX_ENV_ITEMS: usize = 256;
/// The longest command argument or environment value.
pub const MAX_ARGUMENT_LENGTH: usize = 4096;

/// Where an instance is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InstanceStatus {
    Building,
    Active,
    Stopped,
    Rebooting,
    Error,
    Deleting,
    Deleted,
}

impl InstanceStatus {
    pub const ALL: [InstanceStatus; 7] = [
        InstanceStatus::Building,
        InstanceStatus::Active,
        InstanceStatus::Stopped,
        InstanceStatus::Rebooting,
        InstanceStatus::Error,
        InstanceStatus::Deleting,
        InstanceStatus::Deleted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InstanceStatus::Building => "BUILDING",
            InstanceStatus::Active => "ACTIVE",
            InstanceStatus::Stopped => "STOPPED",
            InstanceStatus::Rebooting => "REBOOTING",
            InstanceStatus::Error => "ERROR",
            InstanceStatus::Deleting => "DELETING",
            InstanceStatus::Deleted => "DELETED",
        }
    }

    /// Parses a status name, case-insensitively.
    pub fn parse(text: &str) -> Option<InstanceStatus> {
        InstanceStatus::ALL
            .into_iter()
            .find(|status| status.as_str().eq_ignore_ascii_case(text))
    }

    /// Being deleted or gone: nothing but reading is possible any more.
    pub fn is_going_away(self) -> bool {
        matches!(self, InstanceStatus::Deleting | InstanceStatus::Deleted)
    }
}

/// The machine's power as the driver last reported it, or the power action
/// under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PowerState {
    /// Not built yet, failed to build, or deleted.
    NoState,
    On,
    Off,
    PoweringOn,
    PoweringOff,
}

impl PowerState {
    pub const ALL: [PowerState; 5] = [
        PowerState::NoState,
        PowerState::On,
        PowerState::Off,
        PowerState::PoweringOn,
        PowerState::PoweringOff,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PowerState::NoState => "nostate",
            PowerState::On => "on",
            PowerState::Off => "off",
            PowerState::PoweringOn => "powering-on",
            PowerState::PoweringOff => "powering-off",
        }
    }

    pub fn parse(text: &str) -> Option<PowerState> {
        PowerState::ALL
            .into_iter()
            .find(|state| state.as_str() == text)
    }
}

/// Who placed a maintenance lock: the instance's owner (a caller of its
/// project) or an admin of another project. Only an admin lifts an admin
/// lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockedBy {
    Owner,
    Admin,
}

impl LockedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            LockedBy::Owner => "owner",
            LockedBy::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<LockedBy> {
        match text {
            "owner" => Some(LockedBy::Owner),
            "admin" => Some(LockedBy::Admin),
            _ => None,
        }
    }
}

/// A maintenance lock on an instance: while it holds, every operation but
/// unlock is refused to non-admins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaintenanceLock {
    pub locked_by: LockedBy,
    /// The user who placed it.
    pub user_id: String,
    pub locked_at: DateTime<Utc>,
    pub reason: Option<String>,
    /// When the engine lifts it, unless it is renewed or lifted before.
    pub expires_at: Option<DateTime<Utc>>,
}

impl MaintenanceLock {
    /// Whether it still holds at `now` (an expired lock the sweep has not
    /// lifted yet holds nothing back).
    pub fn holds_at(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_none_or(|expires_at| expires_at > now)
    }

    /// How error messages name the lock: `by admin "ops" at … until …:
    /// maintenance`.
    pub fn describe(&self) -> String {
        let when = self.locked_at.format("%Y-%m-%dT%H:%M:%SZ");
        let until = self
            .expires_at
            .map(|at| format!(" until {}", at.format("%Y-%m-%dT%H:%M:%SZ")))
            .unwrap_or_default();
        match &self.reason {
            Some(reason) => format!(
                "by {} {:?} at {when}{until}: {reason}",
                self.locked_by.as_str(),
                self.user_id
            ),
            None => format!(
                "by {} {:?} at {when}{until}",
                self.locked_by.as_str(),
                self.user_id
            ),
        }
    }
}

/// Power actions a caller can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PowerAction {
    On,
    Off,
    Reboot,
}

impl PowerAction {
    /// The driver task that carries the action out.
    pub fn task(self) -> InstanceTask {
        match self {
            PowerAction::On => InstanceTask::PowerOn,
            PowerAction::Off => InstanceTask::PowerOff,
            PowerAction::Reboot => InstanceTask::Reboot,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PowerAction::On => "on",
            PowerAction::Off => "off",
            PowerAction::Reboot => "reboot",
        }
    }

    pub fn parse(text: &str) -> Option<PowerAction> {
        match text {
            "on" => Some(PowerAction::On),
            "off" => Some(PowerAction::Off),
            "reboot" => Some(PowerAction::Reboot),
            _ => None,
        }
    }
}

/// Driver work on an instance, started by a request and finished by the
/// driver's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InstanceTask {
    Build,
    PowerOn,
    PowerOff,
    Reboot,
    Delete,
}

impl InstanceTask {
    pub const ALL: [InstanceTask; 5] = [
        InstanceTask::Build,
        InstanceTask::PowerOn,
        InstanceTask::PowerOff,
        InstanceTask::Reboot,
        InstanceTask::Delete,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InstanceTask::Build => "build",
            InstanceTask::PowerOn => "power_on",
            InstanceTask::PowerOff => "power_off",
            InstanceTask::Reboot => "reboot",
            InstanceTask::Delete => "delete",
        }
    }

    /// The (status, power state) an instance is in while this task runs.
    /// Each task has its own pair, so the pair alone says which task is
    /// unfinished (see [`Instance::unfinished_task`]).
    pub fn in_progress(self) -> (InstanceStatus, Option<PowerState>) {
        match self {
            InstanceTask::Build => (InstanceStatus::Building, None),
            InstanceTask::PowerOn => (InstanceStatus::Stopped, Some(PowerState::PoweringOn)),
            InstanceTask::PowerOff => (InstanceStatus::Active, Some(PowerState::PoweringOff)),
            InstanceTask::Reboot => (InstanceStatus::Rebooting, None),
            InstanceTask::Delete => (InstanceStatus::Deleting, None),
        }
    }

    /// Where the instance goes when the driver succeeds.
    pub fn succeeded(self) -> (InstanceStatus, PowerState) {
        match self {
            InstanceTask::Build | InstanceTask::PowerOn | InstanceTask::Reboot => {
                (InstanceStatus::Active, PowerState::On)
            }
            InstanceTask::PowerOff => (InstanceStatus::Stopped, PowerState::Off),
            InstanceTask::Delete => (InstanceStatus::Deleted, PowerState::NoState),
        }
    }

    /// Where the instance goes when the driver fails: ERROR, with the power
    /// state the machine is most likely left in.
    pub fn failed(self) -> (InstanceStatus, PowerState) {
        let power_state = match self {
            InstanceTask::Build | InstanceTask::Delete => PowerState::NoState,
            InstanceTask::PowerOn => PowerState::Off,
            InstanceTask::PowerOff | InstanceTask::Reboot => PowerState::On,
        };
        (InstanceStatus::Error, power_state)
    }
}

/// What runs on the machine. The docker driver makes it the container's
/// command and environment: `command` when given, else `user_data` run by
/// `/bin/sh -c` (a container's life is its first boot), else the image's
/// own command. The simulated driver only records it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Workload {
    /// Cloud-init style user data, as text.
    pub user_data: String,
    /// The command and its arguments (empty = not given).
    pub command: Vec<String>,
    /// Environment variables.
    pub env: BTreeMap<String, String>,
}

impl Workload {
    /// Checks sizes and characters, naming the field at fault.
    pub fn validate(&self) -> Result<()> {
        if self.user_data.len() > MAX_USER_DATA_BYTES {
            return Err(Error::InvalidInput(format!(
                "user_data: must be at most {MAX_USER_DATA_BYTES} bytes (got {})",
                self.user_data.len()
            )));
        }
        if self.user_data.contains('\0') {
            return Err(Error::InvalidInput(
                "user_data: must not contain NUL characters".to_owned(),
            ));
        }
        if self.command.len() > MAX_COMMAND_ARGUMENTS {
            return Err(Error::InvalidInput(format!(
                "command: at most {MAX_COMMAND_ARGUMENTS} arguments (got {})",
                self.command.len()
            )));
        }
        if self
            .command
            .first()
            .is_some_and(|program| program.trim().is_empty())
        {
            return Err(Error::InvalidInput(
                "command: the first argument (the program) must not be empty".to_owned(),
            ));
        }
        for (index, argument) in self.command.iter().enumerate() {
            check_argument(&format!("command[{index}]"), argument)?;
        }
        if self.env.len() > MAX_ENV_ITEMS {
            return Err(Error::InvalidInput(format!(
                "env: at most {MAX_ENV_ITEMS} variables (got {})",
                self.env.len()
            )));
        }
        for (name, value) in &self.env {
            let valid_name = !name.is_empty()
                && name.len() <= MAX_TEXT_LENGTH
                && !name.contains('=')
                && !name.chars().any(char::is_control)
                && !name.chars().any(char::is_whitespace);
            if !valid_name {
                return Err(Error::InvalidInput(format!(
                    "env: {name:?} is not a variable name (1-{MAX_TEXT_LENGTH} characters, no '=', spaces or control characters)"
                )));
            }
            check_argument(&format!("env {name:?}"), value)?;
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.user_data.is_empty() && self.command.is_empty() && self.env.is_empty()
    }
}

fn check_argument(what: &str, value: &str) -> Result<()> {
    let length = value.chars().count();
    if length > MAX_ARGUMENT_LENGTH {
        return Err(Error::InvalidInput(format!(
            "{what}: must be at most {MAX_ARGUMENT_LENGTH} characters (got {length})"
        )));
    }
    if value.contains('\0') {
        return Err(Error::InvalidInput(format!(
            "{what}: must not contain NUL characters"
        )));
    }
    Ok(())
}

/// A compute instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub uuid: Uuid,
    pub name: String,
    pub project_id: String,
    pub user_id: String,
    pub flavor: String,
    pub image: String,
    pub metadata: BTreeMap<String, String>,
    /// What runs on the machine (fixed at create).
    pub workload: Workload,
    /// Where a cloud places the machine (fixed at create).
    pub placement: placement::Placement,
    /// The trust the driver acts on the cloud through (openstack backend):
    /// the instance's own, or its stack's or cluster's.
    pub delegation: Option<super::delegation::Delegation>,
    pub status: InstanceStatus,
    pub power_state: PowerState,
    /// The maintenance lock, when locked.
    pub maintenance_lock: Option<MaintenanceLock>,
    /// Why the instance is in its status: the fault of an ERROR, empty
    /// otherwise.
    pub status_reason: String,
    /// Counts the writes to this instance; every change a caller asks for
    /// is written only if the revision it was decided on is still current.
    pub revision: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What a caller gives to create an instance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewInstance {
    pub name: String,
    pub flavor: String,
    pub image: String,
    pub metadata: BTreeMap<String, String>,
    pub workload: Workload,
    pub placement: placement::Placement,
    pub delegation: Option<super::delegation::Delegation>,
}

/// What a caller may change on an existing instance. `metadata` replaces
/// the whole map; `networks` replaces the placement's interfaces (the
/// machine is replugged in place, where its driver can).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InstanceChanges {
    pub name: Option<String>,
    pub metadata: Option<BTreeMap<String, String>>,
    pub networks: Option<Vec<placement::NetworkRequest>>,
}

impl Instance {
    /// A new instance of the caller's project, BUILDING.
    pub fn new_building(
        project_id: &str,
        user_id: &str,
        new: NewInstance,
        now: DateTime<Utc>,
    ) -> Result<Instance> {
        validate_text("name", &new.name)?;
        validate_text("flavor", &new.flavor)?;
        // A machine that boots from a volume names no image.
        if !new.image.is_empty() || new.placement.block_device_mapping.is_empty() {
            validate_text("image", &new.image)?;
        }
        validate_metadata(&new.metadata)?;
        new.workload.validate()?;
        new.placement.validate()?;
        Ok(Instance {
            uuid: Uuid::now_v7(),
            name: new.name,
            project_id: project_id.to_owned(),
            user_id: user_id.to_owned(),
            flavor: new.flavor,
            image: new.image,
            metadata: new.metadata,
            workload: new.workload,
            placement: new.placement,
            delegation: new.delegation,
            status: InstanceStatus::Building,
            power_state: PowerState::NoState,
            maintenance_lock: None,
            status_reason: String::new(),
            revision: 0,
            created_at: now,
            updated_at: now,
        })
    }

    pub fn is_locked(&self) -> bool {
        self.maintenance_lock.is_some()
    }

    /// The driver task this instance is waiting for, if any.
    pub fn unfinished_task(&self) -> Option<InstanceTask> {
        InstanceTask::ALL.into_iter().find(|task| {
            let (status, power_state) = task.in_progress();
            self.status == status && power_state.is_none_or(|power| self.power_state == power)
        })
    }

    /// How messages name the instance: `instance "web-1"`.
    pub fn label(&self) -> String {
        format!("instance {:?}", self.name)
    }

    /// The same instance after one more write at `now`.
    pub(crate) fn next_revision(&self, now: DateTime<Utc>) -> Instance {
        let mut next = self.clone();
        next.revision += 1;
        next.updated_at = now;
        next
    }
}

/// Checks a name, flavor or image: 1-255 characters, not only spaces.
pub fn validate_text(what: &str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(Error::InvalidInput(format!("{what}: must not be empty")));
    }
    let length = value.chars().count();
    if length > MAX_TEXT_LENGTH {
        return Err(Error::InvalidInput(format!(
            "{what}: must be at most {MAX_TEXT_LENGTH} characters (got {length})"
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(Error::InvalidInput(format!(
            "{what}: {value:?} contains control characters"
        )));
    }
    Ok(())
}

/// Checks metadata: at most 128 items, keys 1-255 characters, values at
/// most 255.
pub fn validate_metadata(metadata: &BTreeMap<String, String>) -> Result<()> {
    if metadata.len() > MAX_METADATA_ITEMS {
        return Err(Error::InvalidInput(format!(
            "metadata: at most {MAX_METADATA_ITEMS} items (got {})",
            metadata.len()
        )));
    }
    for (key, value) in metadata {
        validate_text("metadata key", key)?;
        let length = value.chars().count();
        if length > MAX_TEXT_LENGTH {
            return Err(Error::InvalidInput(format!(
                "metadata {key:?}: the value must be at most {MAX_TEXT_LENGTH} characters (got {length})"
            )));
        }
    }
    Ok(())
}

/// Checks a lock reason: 1-255 characters.
pub fn validate_lock_reason(reason: &str) -> Result<()> {
    let length = reason.chars().count();
    if length == 0 || length > MAX_TEXT_LENGTH {
        return Err(Error::InvalidInput(format!(
            "reason: must be 1-{MAX_TEXT_LENGTH} characters (got {length})"
        )));
    }
    Ok(())
}

/// Something that happened to an instance's machine: a driver task's
/// outcome (`kind` is the task: build, power_on, …) or an observation of
/// the machine (`observed`), with the state the instance went into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceEvent {
    pub id: Uuid,
    pub instance_uuid: Uuid,
    pub project_id: String,
    pub kind: String,
    pub status: InstanceStatus,
    pub power_state: PowerState,
    pub reason: String,
    pub at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_instance() -> NewInstance {
        NewInstance {
            name: "web-1".into(),
            flavor: "m1.small".into(),
            image: "debian-12".into(),
            metadata: BTreeMap::from([("role".into(), "web".into())]),
            workload: Default::default(),
            placement: Default::default(),
            delegation: None,
        }
    }

    #[test]
    fn a_new_instance_is_building_unlocked_and_unpowered() {
        let instance =
            Instance::new_building("demo", "alice", new_instance(), Utc::now()).expect("valid");
        assert_eq!(instance.status, InstanceStatus::Building);
        assert_eq!(instance.power_state, PowerState::NoState);
        assert!(!instance.is_locked());
        assert_eq!(instance.unfinished_task(), Some(InstanceTask::Build));
    }

    #[test]
    fn bad_input_is_refused_naming_the_field() {
        let cases = [
            (
                NewInstance {
                    name: " ".into(),
                    ..new_instance()
                },
                "name",
            ),
            (
                NewInstance {
                    flavor: "f".repeat(256),
                    ..new_instance()
                },
                "flavor",
            ),
            (
                NewInstance {
                    image: String::new(),
                    ..new_instance()
                },
                "image",
            ),
            (
                NewInstance {
                    metadata: BTreeMap::from([("k".into(), "v".repeat(256))]),
                    ..new_instance()
                },
                "metadata \"k\"",
            ),
        ];
        for (new, field) in cases {
            let error =
                Instance::new_building("demo", "alice", new, Utc::now()).expect_err("invalid");
            assert!(
                matches!(&error, Error::InvalidInput(message) if message.starts_with(field)),
                "{field}: {error:?}"
            );
        }
    }

    #[test]
    fn every_task_has_its_own_in_progress_state() {
        for task in InstanceTask::ALL {
            let (status, power_state) = task.in_progress();
            let instance = Instance {
                status,
                power_state: power_state.unwrap_or(PowerState::On),
                ..Instance::new_building("demo", "alice", new_instance(), Utc::now())
                    .expect("valid")
            };
            assert_eq!(instance.unfinished_task(), Some(task), "{task:?}");
        }
    }

    #[test]
    fn settled_states_have_no_unfinished_task() {
        let base =
            Instance::new_building("demo", "alice", new_instance(), Utc::now()).expect("valid");
        for (status, power_state) in [
            (InstanceStatus::Active, PowerState::On),
            (InstanceStatus::Stopped, PowerState::Off),
            (InstanceStatus::Error, PowerState::NoState),
            (InstanceStatus::Deleted, PowerState::NoState),
        ] {
            let instance = Instance {
                status,
                power_state,
                ..base.clone()
            };
            assert_eq!(instance.unfinished_task(), None, "{status:?}");
        }
    }

    #[test]
    fn names_round_trip() {
        for status in InstanceStatus::ALL {
            assert_eq!(InstanceStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(
            InstanceStatus::parse("active"),
            Some(InstanceStatus::Active)
        );
        for state in PowerState::ALL {
            assert_eq!(PowerState::parse(state.as_str()), Some(state));
        }
        for action in [PowerAction::On, PowerAction::Off, PowerAction::Reboot] {
            assert_eq!(PowerAction::parse(action.as_str()), Some(action));
        }
        assert_eq!(LockedBy::parse("admin"), Some(LockedBy::Admin));
        assert_eq!(LockedBy::parse("root"), None);
    }

    #[test]
    fn workloads_are_checked_naming_the_field() {
        let cases = [
            (
                Workload {
                    user_data: "x".repeat(MAX_USER_DATA_BYTES + 1),
                    ..Workload::default()
                },
                "user_data",
            ),
            (
                Workload {
                    command: vec![String::new()],
                    ..Workload::default()
                },
                "command",
            ),
            (
                Workload {
                    command: vec!["sh".into(), "a\0b".into()],
                    ..Workload::default()
                },
                "command[1]",
            ),
            (
                Workload {
                    env: BTreeMap::from([("A=B".into(), "c".into())]),
                    ..Workload::default()
                },
                "env",
            ),
        ];
        for (workload, field) in cases {
            let new = NewInstance {
                workload,
                ..new_instance()
            };
            let error =
                Instance::new_building("demo", "alice", new, Utc::now()).expect_err("invalid");
            assert!(
                matches!(&error, Error::InvalidInput(message) if message.starts_with(field)),
                "{field}: {error:?}"
            );
        }
        let fine = Workload {
            user_data: "#!/bin/sh\necho hi\n".into(),
            command: vec!["/bin/sleep".into(), "60".into()],
            env: BTreeMap::from([("MODE".into(), "work".into())]),
        };
        assert!(fine.validate().is_ok());
    }

    #[test]
    fn lock_reasons_are_one_to_255_characters() {
        assert!(validate_lock_reason("maintenance").is_ok());
        assert!(validate_lock_reason(&"r".repeat(255)).is_ok());
        assert!(validate_lock_reason("").is_err());
        assert!(validate_lock_reason(&"r".repeat(256)).is_err());
    }
}
