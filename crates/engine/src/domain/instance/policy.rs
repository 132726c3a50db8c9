//! Who may do what to an instance, and what its maintenance lock allows —
//! decided here, once, for every entry point (REST, gRPC, the CLI, stack
//! resources). Rules (spec `mogan-lock-instance-api`, as Mogan and Nova
//! implement it):
//!
//! - A caller of the instance's project is its **owner**; an admin of
//!   another project acts as **admin**; anyone else does not see it (not
//!   found, never forbidden, so projects cannot probe each other's uuids).
//!   A caller whose only role is `reader` may look but not change (403).
//! - Lock: `locked_by` is `owner` for a caller of the project (an admin
//!   scoped to the project included) and `admin` otherwise. An owner locking
//!   a locked instance changes nothing; an admin lock overwrites an owner
//!   lock. An instance being deleted or deleted cannot be locked (409);
//!   a BUILDING one can.
//! - Unlock: 409 when not locked; an admin lock is lifted only by an admin
//!   (an owner gets 403); an owner lock by its owner or an admin.
//! - While locked, every other change (update, delete, power) by a non-admin
//!   is a conflict naming the lock; an admin may act, and the decision says
//!   which lock the admin overrode so the caller can record it.

use chrono::{DateTime, Utc};
use ember_runtime::Identity;
use uuid::Uuid;

use super::{
    Instance, InstanceChanges, InstanceStatus, InstanceTask, LockedBy, MaintenanceLock,
    PowerAction, PowerState, validate_lock_reason, validate_metadata, validate_text,
};
use crate::domain::admission::{Blocker, BlockerKind};
use crate::error::{Error, Result};

/// The role that may read but not change.
pub use ember_runtime::identity::READER_ROLE;

/// How a caller relates to an instance it can see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// The caller's project owns the instance.
    pub is_owner: bool,
    /// The caller holds the admin role.
    pub is_admin: bool,
    /// The caller holds `reader` but neither `member` nor `admin`.
    pub read_only: bool,
}

impl Access {
    /// `None` when the caller may not see the instance at all.
    pub fn of(caller: &Identity, instance: &Instance) -> Option<Access> {
        let is_owner = caller.project_id == instance.project_id;
        let is_admin = caller.is_admin();
        (is_owner || is_admin).then_some(Access {
            is_owner,
            is_admin,
            read_only: is_read_only(caller),
        })
    }

    /// The level a lock placed by this caller gets.
    pub fn lock_level(self) -> LockedBy {
        if self.is_owner {
            LockedBy::Owner
        } else {
            LockedBy::Admin
        }
    }
}

/// Whether the caller may read but not change anything: Ember's one rule
/// ([`Identity::is_read_only`]), also enforced at the gateway's door.
pub fn is_read_only(caller: &Identity) -> bool {
    caller.is_read_only()
}

/// Refuses a read-only caller `verb`ing something.
pub fn refuse_read_only(caller: &Identity, verb: &str) -> Result<()> {
    if is_read_only(caller) {
        return Err(Error::Forbidden(format!(
            "user {:?} has only the {READER_ROLE} role in project {:?}: to {verb} an instance needs the member or admin role",
            caller.user_id, caller.project_id
        )));
    }
    Ok(())
}

/// The error for an instance the caller may not see or that does not exist.
pub fn not_found(uuid: Uuid) -> Error {
    Error::NotFound(format!("instance {uuid} not found"))
}

/// A change a caller asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstanceRequest {
    Update(InstanceChanges),
    Delete,
    Power(PowerAction),
    /// Lock, or renew the lock until `expires_at` (a time checked by
    /// [`crate::domain::cluster::lock::expiry`]).
    Lock {
        reason: Option<String>,
        expires_at: Option<DateTime<Utc>>,
    },
    Unlock,
}

impl InstanceRequest {
    /// The verb messages use: "delete", "power off", "lock".
    pub fn verb(&self) -> &'static str {
        match self {
            InstanceRequest::Update(_) => "update",
            InstanceRequest::Delete => "delete",
            InstanceRequest::Power(PowerAction::On) => "power on",
            InstanceRequest::Power(PowerAction::Off) => "power off",
            InstanceRequest::Power(PowerAction::Reboot) => "reboot",
            InstanceRequest::Lock { .. } => "lock",
            InstanceRequest::Unlock => "unlock",
        }
    }
}

/// What to do about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Accepted, and nothing changes (an owner locking a locked instance).
    Unchanged,
    /// Write `next` (one revision after the instance decided on), then start
    /// `task` on the driver if there is one.
    Change {
        next: Box<Instance>,
        task: Option<InstanceTask>,
        /// The lock an admin acted through, to be recorded.
        overridden_lock: Option<MaintenanceLock>,
    },
}

/// Decides whether `caller` may make `request` of `instance` at `now`, and
/// if so what the instance becomes.
/// The first of [`blockers`], if any, is the refusal.
pub fn decide(
    caller: &Identity,
    instance: &Instance,
    request: &InstanceRequest,
    now: DateTime<Utc>,
) -> Result<Decision> {
    crate::domain::admission::first(&blockers(caller, instance, request, now))?;
    let access = Access::of(caller, instance).ok_or_else(|| not_found(instance.uuid))?;
    match request {
        InstanceRequest::Lock { reason, expires_at } => {
            decide_lock(caller, access, instance, reason, *expires_at, now)
        }
        InstanceRequest::Unlock => decide_unlock(access, instance, now),
        InstanceRequest::Update(_) | InstanceRequest::Delete | InstanceRequest::Power(_) => {
            // An expired lock the sweep has not lifted yet holds nothing.
            let overridden_lock = match &instance.maintenance_lock {
                Some(lock) if !lock.holds_at(now) => None,
                Some(lock) if !access.is_admin => return Err(locked_error(instance, lock)),
                lock => lock.clone(),
            };
            let (next, task) = begin_change(instance, request, now)?;
            Ok(Decision::Change {
                next: Box::new(next),
                task,
                overridden_lock,
            })
        }
    }
}

/// Every rule `request` by `caller` of `instance` breaks at `now`, in the
/// order [`decide`] checks them (its refusal is the first).
pub fn blockers(
    caller: &Identity,
    instance: &Instance,
    request: &InstanceRequest,
    now: DateTime<Utc>,
) -> Vec<Blocker> {
    let Some(access) = Access::of(caller, instance) else {
        return vec![Blocker::new(
            BlockerKind::NotFound,
            not_found(instance.uuid),
        )];
    };
    let mut blockers = Vec::new();
    if let Err(error) = refuse_read_only(caller, request.verb()) {
        blockers.push(Blocker::new(BlockerKind::Role, error));
    }
    let held = instance
        .maintenance_lock
        .as_ref()
        .filter(|lock| lock.holds_at(now));
    let refusal = match request {
        InstanceRequest::Lock { reason, expires_at } => {
            decide_lock(caller, access, instance, reason, *expires_at, now).err()
        }
        InstanceRequest::Unlock => decide_unlock(access, instance, now).err(),
        InstanceRequest::Update(_) | InstanceRequest::Delete | InstanceRequest::Power(_) => {
            if let Some(lock) = held
                && !access.is_admin
            {
                blockers.push(Blocker::new(
                    BlockerKind::MaintenanceLock,
                    locked_error(instance, lock),
                ));
            }
            begin_change(instance, request, now).err()
        }
    };
    if let Some(error) = refusal {
        let kind = match &error {
            Error::InvalidInput(_) => BlockerKind::Request,
            Error::Forbidden(_) => BlockerKind::Role,
            _ if instance.status.is_going_away() => BlockerKind::State,
            _ if held.is_some() => BlockerKind::MaintenanceLock,
            _ => BlockerKind::State,
        };
        blockers.push(Blocker::new(kind, error));
    }
    blockers
}

/// The conflict a non-admin gets while the instance is locked.
pub fn locked_error(instance: &Instance, lock: &MaintenanceLock) -> Error {
    let remedy = match lock.locked_by {
        LockedBy::Admin => "an admin must unlock it first",
        LockedBy::Owner => "unlock it first",
    };
    Error::Conflict(format!(
        "{} is locked ({}): {remedy}",
        instance.label(),
        lock.describe()
    ))
}

fn decide_lock(
    caller: &Identity,
    access: Access,
    instance: &Instance,
    reason: &Option<String>,
    expires_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<Decision> {
    if let Some(reason) = reason {
        validate_lock_reason(reason)?;
    }
    if instance.status.is_going_away() {
        return Err(Error::Conflict(format!(
            "{} is {}: it cannot be locked",
            instance.label(),
            instance.status.as_str()
        )));
    }
    let held = instance
        .maintenance_lock
        .as_ref()
        .filter(|lock| lock.holds_at(now));
    if let Some(held) = held
        && access.is_owner
    {
        // Locking a locked instance changes nothing (Nova's), unless it
        // renews the lock until a new time: its holder may, or an admin.
        let Some(expires_at) = expires_at else {
            return Ok(Decision::Unchanged);
        };
        if held.locked_by == LockedBy::Admin && !access.is_admin {
            return Err(Error::Forbidden(format!(
                "{} is locked ({}): only an admin can renew it",
                instance.label(),
                held.describe()
            )));
        }
        if held.user_id != caller.user_id && !access.is_admin {
            return Err(Error::Conflict(format!(
                "{} is locked ({}): only its holder or an admin can renew it",
                instance.label(),
                held.describe()
            )));
        }
        let mut next = instance.next_revision(now);
        next.maintenance_lock = Some(MaintenanceLock {
            expires_at: Some(expires_at),
            reason: reason.clone().or_else(|| held.reason.clone()),
            ..held.clone()
        });
        return Ok(Decision::Change {
            next: Box::new(next),
            task: None,
            overridden_lock: None,
        });
    }
    let mut next = instance.next_revision(now);
    next.maintenance_lock = Some(MaintenanceLock {
        locked_by: access.lock_level(),
        user_id: caller.user_id.clone(),
        locked_at: now,
        reason: reason.clone(),
        expires_at,
    });
    Ok(Decision::Change {
        next: Box::new(next),
        task: None,
        overridden_lock: None,
    })
}

fn decide_unlock(access: Access, instance: &Instance, now: DateTime<Utc>) -> Result<Decision> {
    if instance.status.is_going_away() {
        return Err(Error::Conflict(format!(
            "{} is {}: it cannot be unlocked",
            instance.label(),
            instance.status.as_str()
        )));
    }
    let Some(lock) = &instance.maintenance_lock else {
        return Err(Error::Conflict(format!(
            "{} is not locked",
            instance.label()
        )));
    };
    if lock.locked_by == LockedBy::Admin && !access.is_admin {
        return Err(Error::Forbidden(format!(
            "{} is locked ({}): only an admin can unlock it",
            instance.label(),
            lock.describe()
        )));
    }
    let mut next = instance.next_revision(now);
    next.maintenance_lock = None;
    Ok(Decision::Change {
        next: Box::new(next),
        task: None,
        overridden_lock: None,
    })
}

/// The state machine of update, delete and power requests.
fn begin_change(
    instance: &Instance,
    request: &InstanceRequest,
    now: DateTime<Utc>,
) -> Result<(Instance, Option<InstanceTask>)> {
    let going_away = || {
        Error::Conflict(format!(
            "{} is {}: it cannot be {}",
            instance.label(),
            instance.status.as_str(),
            match request {
                InstanceRequest::Delete => "deleted again",
                InstanceRequest::Update(_) => "updated",
                _ => "powered",
            }
        ))
    };
    if instance.status.is_going_away() {
        return Err(going_away());
    }
    let mut next = instance.next_revision(now);
    let task = match request {
        InstanceRequest::Update(changes) => {
            apply_changes(&mut next, changes)?;
            None
        }
        InstanceRequest::Delete => Some(InstanceTask::Delete),
        InstanceRequest::Power(action) => Some(power_task(instance, *action)?),
        InstanceRequest::Lock { .. } | InstanceRequest::Unlock => None,
    };
    if let Some(task) = task {
        let (status, power_state) = task.in_progress();
        next.status = status;
        next.power_state = power_state.unwrap_or(instance.power_state);
        next.status_reason = String::new();
    }
    Ok((next, task))
}

fn apply_changes(next: &mut Instance, changes: &InstanceChanges) -> Result<()> {
    if changes.name.is_none() && changes.metadata.is_none() && changes.networks.is_none() {
        return Err(Error::InvalidInput(
            "nothing to update: give a name, metadata or networks".to_owned(),
        ));
    }
    if let Some(name) = &changes.name {
        validate_text("name", name)?;
        next.name = name.clone();
    }
    if let Some(metadata) = &changes.metadata {
        validate_metadata(metadata)?;
        next.metadata = metadata.clone();
    }
    if let Some(networks) = &changes.networks {
        next.placement.networks = networks.clone();
        next.placement.validate()?;
    }
    Ok(())
}

/// Which task a power action starts from the instance's current state.
fn power_task(instance: &Instance, action: PowerAction) -> Result<InstanceTask> {
    use InstanceStatus::{Active, Stopped};
    use PowerState::{Off, On};
    let state = (instance.status, instance.power_state);
    let refuse = |needs: &str| {
        Error::Conflict(format!(
            "{} is {} (power {}): {} needs {needs}",
            instance.label(),
            instance.status.as_str(),
            instance.power_state.as_str(),
            action_noun(action)
        ))
    };
    match (action, state) {
        // An ERROR instance whose machine is off (it died, or a power on
        // failed) may be started again, as a container can.
        (PowerAction::On, (Stopped | InstanceStatus::Error, Off)) => Ok(InstanceTask::PowerOn),
        (PowerAction::On, (Active, On)) => Err(Error::Conflict(format!(
            "{} is already on",
            instance.label()
        ))),
        (PowerAction::On, _) => Err(refuse(
            "a STOPPED instance (or an ERROR one whose power is off)",
        )),
        (PowerAction::Off, (Active, On)) => Ok(InstanceTask::PowerOff),
        (PowerAction::Off, (Stopped, Off)) => Err(Error::Conflict(format!(
            "{} is already off",
            instance.label()
        ))),
        (PowerAction::Off, _) => Err(refuse("an ACTIVE instance")),
        (PowerAction::Reboot, (Active, On)) => Ok(InstanceTask::Reboot),
        (PowerAction::Reboot, _) => Err(refuse("an ACTIVE instance")),
    }
}

fn action_noun(action: PowerAction) -> &'static str {
    match action {
        PowerAction::On => "power on",
        PowerAction::Off => "power off",
        PowerAction::Reboot => "a reboot",
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::NewInstance;
    use super::*;

    fn member() -> Identity {
        Identity::new("demo", "demo", vec!["member".into()])
    }
    fn project_admin() -> Identity {
        Identity::new("admin", "demo", vec!["admin".into(), "member".into()])
    }
    fn other_admin() -> Identity {
        Identity::new("ops", "operations", vec!["admin".into()])
    }
    fn stranger() -> Identity {
        Identity::new("eve", "other", vec!["member".into()])
    }
    fn reader() -> Identity {
        Identity::new("rita", "demo", vec!["reader".into()])
    }

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).expect("time")
    }

    fn instance(status: InstanceStatus, power_state: PowerState) -> Instance {
        let new = NewInstance {
            name: "web-1".into(),
            flavor: "m1.small".into(),
            image: "debian-12".into(),
            metadata: BTreeMap::new(),
            workload: Default::default(),
            placement: Default::default(),
            delegation: None,
        };
        Instance {
            status,
            power_state,
            ..Instance::new_building("demo", "demo", new, at(0)).expect("valid")
        }
    }

    fn active() -> Instance {
        instance(InstanceStatus::Active, PowerState::On)
    }

    fn lock(reason: Option<&str>) -> InstanceRequest {
        InstanceRequest::Lock {
            reason: reason.map(str::to_owned),
            expires_at: None,
        }
    }

    /// Applies a decision, panicking if it was refused.
    fn after(caller: &Identity, instance: &Instance, request: &InstanceRequest) -> Instance {
        match decide(caller, instance, request, at(60)).expect("accepted") {
            Decision::Unchanged => instance.clone(),
            Decision::Change { next, .. } => *next,
        }
    }

    fn refusal(caller: &Identity, instance: &Instance, request: &InstanceRequest) -> Error {
        decide(caller, instance, request, at(60)).expect_err("refused")
    }

    fn locked_by(caller: &Identity, reason: Option<&str>) -> Instance {
        after(caller, &active(), &lock(reason))
    }

    fn mutations() -> Vec<InstanceRequest> {
        vec![
            InstanceRequest::Update(InstanceChanges {
                name: Some("web-2".into()),
                ..InstanceChanges::default()
            }),
            InstanceRequest::Delete,
            InstanceRequest::Power(PowerAction::Off),
            InstanceRequest::Power(PowerAction::Reboot),
        ]
    }

    #[test]
    fn a_caller_of_the_project_locks_as_owner_and_another_projects_admin_as_admin() {
        for (caller, level) in [
            (member(), LockedBy::Owner),
            (project_admin(), LockedBy::Owner),
            (other_admin(), LockedBy::Admin),
        ] {
            let locked = locked_by(&caller, Some("maintenance"));
            let lock = locked.maintenance_lock.expect("locked");
            assert_eq!(lock.locked_by, level, "{caller:?}");
            assert_eq!(lock.user_id, caller.user_id);
            assert_eq!(lock.locked_at, at(60));
            assert_eq!(lock.reason.as_deref(), Some("maintenance"));
            assert_eq!(locked.revision, 1);
        }
    }

    #[test]
    fn an_owner_locking_a_locked_instance_changes_nothing() {
        for holder in [member(), other_admin()] {
            let locked = locked_by(&holder, Some("first"));
            let decision = decide(&member(), &locked, &lock(Some("second")), at(90));
            assert_eq!(decision.expect("accepted"), Decision::Unchanged);
        }
    }

    #[test]
    fn an_admin_lock_overwrites_an_owner_lock() {
        let owner_locked = locked_by(&member(), Some("mine"));
        let admin_locked = after(&other_admin(), &owner_locked, &lock(Some("maintenance")));
        let lock = admin_locked.maintenance_lock.expect("locked");
        assert_eq!(lock.locked_by, LockedBy::Admin);
        assert_eq!(lock.user_id, "ops");
        assert_eq!(lock.reason.as_deref(), Some("maintenance"));
    }

    #[test]
    fn only_an_admin_lifts_an_admin_lock() {
        let admin_locked = locked_by(&other_admin(), Some("maintenance"));
        let error = refusal(&member(), &admin_locked, &InstanceRequest::Unlock);
        assert!(
            matches!(&error, Error::Forbidden(message) if message.contains("only an admin can unlock it") && message.contains("maintenance")),
            "{error:?}"
        );
        for admin in [project_admin(), other_admin()] {
            let unlocked = after(&admin, &admin_locked, &InstanceRequest::Unlock);
            assert!(!unlocked.is_locked());
        }
    }

    #[test]
    fn an_owner_lock_is_lifted_by_the_owner_or_an_admin() {
        let owner_locked = locked_by(&member(), None);
        for caller in [member(), project_admin(), other_admin()] {
            let unlocked = after(&caller, &owner_locked, &InstanceRequest::Unlock);
            assert!(!unlocked.is_locked(), "{caller:?}");
            assert_eq!(unlocked.revision, owner_locked.revision + 1);
        }
    }

    #[test]
    fn unlocking_an_unlocked_instance_is_a_conflict() {
        let error = refusal(&member(), &active(), &InstanceRequest::Unlock);
        assert!(
            matches!(&error, Error::Conflict(message) if message == "instance \"web-1\" is not locked"),
            "{error:?}"
        );
    }

    #[test]
    fn instances_being_deleted_or_deleted_cannot_be_locked_but_building_ones_can() {
        for status in [InstanceStatus::Deleting, InstanceStatus::Deleted] {
            let error = refusal(
                &member(),
                &instance(status, PowerState::NoState),
                &lock(None),
            );
            assert!(
                matches!(&error, Error::Conflict(message) if message.contains(status.as_str())),
                "{error:?}"
            );
        }
        for status in [
            InstanceStatus::Building,
            InstanceStatus::Error,
            InstanceStatus::Stopped,
            InstanceStatus::Rebooting,
        ] {
            let locked = after(
                &member(),
                &instance(status, PowerState::NoState),
                &lock(None),
            );
            assert!(locked.is_locked(), "{status:?}");
            assert_eq!(locked.status, status, "locking leaves the status alone");
        }
    }

    #[test]
    fn another_projects_caller_sees_nothing_but_not_found() {
        let locked = locked_by(&member(), None);
        let mut requests = mutations();
        requests.extend([lock(None), InstanceRequest::Unlock]);
        for request in requests {
            for target in [&active(), &locked] {
                let error = refusal(&stranger(), target, &request);
                assert!(
                    matches!(error, Error::NotFound(_)),
                    "{request:?}: {error:?}"
                );
            }
        }
    }

    #[test]
    fn a_reader_may_change_nothing() {
        let mut requests = mutations();
        requests.extend([lock(None), InstanceRequest::Unlock]);
        for request in requests {
            let error = refusal(&reader(), &active(), &request);
            assert!(
                matches!(&error, Error::Forbidden(message) if message.contains("reader")),
                "{request:?}: {error:?}"
            );
        }
    }

    #[test]
    fn a_lock_blocks_every_change_by_non_admins_naming_who_when_and_why() {
        for (holder, remedy) in [
            (member(), "unlock it first"),
            (other_admin(), "an admin must unlock it first"),
        ] {
            let locked = locked_by(&holder, Some("maintenance"));
            for request in mutations() {
                let error = refusal(&member(), &locked, &request);
                let Error::Conflict(message) = &error else {
                    panic!("{request:?}: {error:?}");
                };
                let expected = format!(
                    "instance \"web-1\" is locked (by {} {:?} at 2027-01-15T08:01:00Z: maintenance): {remedy}",
                    if holder.is_admin() { "admin" } else { "owner" },
                    holder.user_id
                );
                assert_eq!(message, &expected);
            }
        }
    }

    #[test]
    fn admins_act_through_a_lock_and_the_decision_names_it() {
        let locked = locked_by(&other_admin(), Some("maintenance"));
        for admin in [project_admin(), other_admin()] {
            for request in mutations() {
                let Decision::Change {
                    next,
                    overridden_lock,
                    ..
                } = decide(&admin, &locked, &request, at(90)).expect("accepted")
                else {
                    panic!("{request:?} changes the instance");
                };
                assert_eq!(overridden_lock, locked.maintenance_lock, "{request:?}");
                assert!(next.is_locked(), "acting through a lock keeps it");
            }
        }
    }

    #[test]
    fn unlock_is_the_one_change_a_locked_owner_may_make() {
        let locked = locked_by(&member(), None);
        assert!(!after(&member(), &locked, &InstanceRequest::Unlock).is_locked());
    }

    #[test]
    fn lock_reasons_longer_than_255_characters_are_invalid() {
        let error = refusal(&member(), &active(), &lock(Some(&"r".repeat(256))));
        assert!(
            matches!(&error, Error::InvalidInput(message) if message.starts_with("reason")),
            "{error:?}"
        );
    }

    #[test]
    fn power_requests_follow_the_state_machine() {
        use InstanceStatus::*;
        use PowerState::*;
        let accepted = [
            (Active, On, PowerAction::Off, Active, PoweringOff),
            (Active, On, PowerAction::Reboot, Rebooting, On),
            (Stopped, Off, PowerAction::On, Stopped, PoweringOn),
            // A machine that died (ERROR, power off) can be started again.
            (Error, Off, PowerAction::On, Stopped, PoweringOn),
        ];
        for (status, power, action, next_status, next_power) in accepted {
            let Decision::Change { next, task, .. } = decide(
                &member(),
                &instance(status, power),
                &InstanceRequest::Power(action),
                at(60),
            )
            .expect("accepted") else {
                panic!("changes");
            };
            assert_eq!((next.status, next.power_state), (next_status, next_power));
            assert_eq!(next.unfinished_task(), task);
        }
        let refused = [
            (Active, On, PowerAction::On, "is already on"),
            (Stopped, Off, PowerAction::Off, "is already off"),
            (
                Building,
                NoState,
                PowerAction::On,
                "needs a STOPPED instance",
            ),
            (
                Building,
                NoState,
                PowerAction::Reboot,
                "needs an ACTIVE instance",
            ),
            (
                Stopped,
                Off,
                PowerAction::Reboot,
                "needs an ACTIVE instance",
            ),
            (
                Active,
                PoweringOff,
                PowerAction::Off,
                "needs an ACTIVE instance",
            ),
            (Error, NoState, PowerAction::Off, "needs an ACTIVE instance"),
            (Error, NoState, PowerAction::On, "needs a STOPPED instance"),
            (Deleting, NoState, PowerAction::On, "cannot be powered"),
        ];
        for (status, power, action, expected) in refused {
            let error = refusal(
                &member(),
                &instance(status, power),
                &InstanceRequest::Power(action),
            );
            assert!(
                matches!(&error, crate::error::Error::Conflict(message) if message.contains(expected)),
                "{status:?}/{power:?} {action:?}: {error:?}"
            );
        }
    }

    #[test]
    fn delete_is_accepted_until_the_instance_is_going_away() {
        for status in [
            InstanceStatus::Building,
            InstanceStatus::Active,
            InstanceStatus::Error,
            InstanceStatus::Rebooting,
        ] {
            let next = after(
                &member(),
                &instance(status, PowerState::On),
                &InstanceRequest::Delete,
            );
            assert_eq!(next.status, InstanceStatus::Deleting);
        }
        for status in [InstanceStatus::Deleting, InstanceStatus::Deleted] {
            let error = refusal(
                &member(),
                &instance(status, PowerState::NoState),
                &InstanceRequest::Delete,
            );
            assert!(matches!(error, Error::Conflict(_)), "{error:?}");
        }
    }

    #[test]
    fn update_changes_name_and_replaces_metadata() {
        let changes = InstanceChanges {
            name: Some("web-2".into()),
            metadata: Some(BTreeMap::from([("tier".into(), "front".into())])),
            networks: None,
        };
        let next = after(&member(), &active(), &InstanceRequest::Update(changes));
        assert_eq!(next.name, "web-2");
        assert_eq!(next.metadata.get("tier").map(String::as_str), Some("front"));
        let error = refusal(
            &member(),
            &active(),
            &InstanceRequest::Update(InstanceChanges::default()),
        );
        assert!(matches!(error, Error::InvalidInput(_)), "{error:?}");
    }
}
