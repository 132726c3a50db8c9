//! Persistence of instances: the [`InstanceStore`] trait, named after what
//! happens to an instance, and its sea-orm implementation for SQLite and
//! PostgreSQL.
//!
//! Two kinds of conditional write keep concurrent requests and late driver
//! outcomes from overwriting each other, each one `UPDATE … WHERE` whose
//! affected row count says whether it won:
//! - a change a caller asked for is written only if the instance's
//!   `revision` is still the one the change was decided on (so a lock placed
//!   in between is never missed);
//! - a driver outcome is written only if the instance is still in that
//!   task's in-progress status (so a late build result cannot resurrect an
//!   instance being deleted).
//!
//! An instance whose delete completed stays as a DELETED row (its history)
//! that no read returns: getting it is `None` (404), lists leave it out.

mod entity;
mod sql;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
pub use crate::domain::instance::InstanceEvent;
use crate::domain::instance::observation::Observation;
use crate::domain::instance::{Instance, InstanceStatus, InstanceTask, PowerState};
use crate::error::Result;

pub use sql::SqlInstanceStore;

/// Which instances to list, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceListQuery {
    /// The project to list; `None` lists every project (admins only: the
    /// caller checks).
    pub project_id: Option<String>,
    /// Only this status (DELETED instances are never listed).
    pub status: Option<InstanceStatus>,
    /// Only locked (`true`) or unlocked (`false`) instances.
    pub locked: Option<bool>,
    /// Only instances with exactly this name.
    pub name: Option<String>,
    /// 0 = the default page size.
    pub limit: u32,
    /// Uuid of the last instance of the previous page.
    pub marker: Option<Uuid>,
}

impl InstanceListQuery {
    pub fn page_size(&self) -> u32 {
        match self.limit {
            0 => DEFAULT_PAGE_SIZE,
            limit => limit.min(MAX_PAGE_SIZE),
        }
    }
}

/// A driver's outcome for a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskOutcome {
    pub task: InstanceTask,
    pub status: InstanceStatus,
    pub power_state: PowerState,
    /// The fault when the task failed, empty otherwise.
    pub status_reason: String,
    pub at: DateTime<Utc>,
}

/// The kind of an observation event.
pub const OBSERVED_EVENT: &str = "observed";

/// The kind of the event of a lock the engine lifted at its expiry.
pub const LOCK_EXPIRED_EVENT: &str = "lock_expired";

/// The most events one instance keeps listable (the newest).
pub const MAX_EVENTS_LISTED: u64 = 1000;

/// An expired instance lock the sweep lifts (see
/// [`InstanceStore::expire_instance_locks`]).
#[derive(Debug, Clone)]
pub struct ExpiredInstanceLock {
    /// The instance one revision on, without its lock.
    pub next: Instance,
    /// The event's reason: which lock expired.
    pub reason: String,
    pub audit: Option<crate::domain::audit::AuditRecord>,
}

#[async_trait]
pub trait InstanceStore: Send + Sync + 'static {
    /// Records a new instance.
    async fn insert_instance(&self, instance: &Instance) -> Result<()>;
    /// Records a new instance unless one with its uuid exists (deleted ones
    /// included); returns whether it did.
    async fn insert_instance_if_absent(&self, instance: &Instance) -> Result<bool>;
    /// Records many instances in one transaction (imports, benchmarks).
    async fn insert_instances(&self, instances: &[Instance]) -> Result<()>;
    /// The instance with this uuid, unless its delete has completed: a
    /// DELETED instance is kept for its history but no read returns it
    /// (its uuid answers 404, as in Nova).
    async fn get_instance(&self, uuid: Uuid) -> Result<Option<Instance>>;
    /// A page of instances, newest first, DELETED ones never among them;
    /// `Error::InvalidInput` if the marker names no instance of the listed
    /// project(s).
    async fn list_instances(&self, query: &InstanceListQuery) -> Result<Vec<Instance>>;
    /// Places (or replaces) `next`'s maintenance lock. Each of these
    /// writes `next` only if the stored revision is `next.revision - 1`,
    /// and returns whether it did.
    async fn lock_instance(&self, next: &Instance) -> Result<bool>;
    /// Lifts the maintenance lock.
    async fn unlock_instance(&self, next: &Instance) -> Result<bool>;
    /// Lifts the expired maintenance locks `lifts` name, all in one
    /// transaction: each instance's `next` (without its lock) only if the
    /// stored revision is `next.revision - 1` (an unlock, a renewal or
    /// another engine's sweep won otherwise), with a `lock_expired` event
    /// and the expiry's audit record. Returns the instances lifted.
    async fn expire_instance_locks(&self, lifts: &[ExpiredInstanceLock]) -> Result<Vec<Uuid>>;
    /// Instances whose maintenance lock expired by `now`, soonest first,
    /// at most `limit`.
    async fn expired_instance_locks(&self, now: DateTime<Utc>, limit: u64)
    -> Result<Vec<Instance>>;
    /// When the soonest instance lock expires; `None` when none has an
    /// expiry.
    async fn next_instance_lock_expiry(&self) -> Result<Option<DateTime<Utc>>>;
    /// Writes `next`'s name and metadata.
    async fn update_instance_details(&self, next: &Instance) -> Result<bool>;
    /// Moves the instance into a task's in-progress status and power state.
    async fn start_instance_task(&self, next: &Instance) -> Result<bool>;
    /// Records a driver's outcome if `instance` is still in the task's
    /// in-progress state, with its event; returns whether it was.
    async fn finish_instance_task(
        &self,
        instance: &Instance,
        outcome: &TaskOutcome,
    ) -> Result<bool>;
    /// Records what the machine was found doing (`observation.next`, if
    /// the stored revision is still the one before it) and its event, in
    /// one transaction; returns whether it was written.
    async fn record_observation(&self, observation: &Observation) -> Result<bool>;
    /// The instance's newest events (at most `limit`), oldest first.
    async fn list_instance_events(&self, uuid: Uuid, limit: u64) -> Result<Vec<InstanceEvent>>;
    /// Settled instances whose machine can contradict them (ACTIVE on,
    /// STOPPED off, ERROR off), by uuid after `after`, at most `limit`:
    /// what the periodic resync compares with the driver.
    async fn list_watched_instances(
        &self,
        after: Option<Uuid>,
        limit: u64,
    ) -> Result<Vec<Instance>>;
    /// Every instance waiting for a driver task (after a restart, nobody is
    /// running those tasks any more).
    async fn list_unfinished_instances(&self) -> Result<Vec<Instance>>;
}
