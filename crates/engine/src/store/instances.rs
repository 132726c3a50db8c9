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

mod entity;
mod sql;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use crate::domain::instance::{Instance, InstanceStatus, InstanceTask, PowerState};
use crate::error::Result;

pub use sql::SqlInstanceStore;

/// Which instances to list, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceListQuery {
    /// The project to list; `None` lists every project (admins only: the
    /// caller checks).
    pub project_id: Option<String>,
    /// Only this status; `None` = every status but DELETED.
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

#[async_trait]
pub trait InstanceStore: Send + Sync + 'static {
    /// Records a new instance.
    async fn insert_instance(&self, instance: &Instance) -> Result<()>;
    /// Records many instances in one transaction (imports, benchmarks).
    async fn insert_instances(&self, instances: &[Instance]) -> Result<()>;
    /// Any instance by uuid, DELETED ones included.
    async fn get_instance(&self, uuid: Uuid) -> Result<Option<Instance>>;
    /// A page of instances, newest first; `Error::InvalidInput` if the
    /// marker names no instance of the listed project(s).
    async fn list_instances(&self, query: &InstanceListQuery) -> Result<Vec<Instance>>;
    /// Places (or replaces) `next`'s maintenance lock. Each of these
    /// writes `next` only if the stored revision is `next.revision - 1`,
    /// and returns whether it did.
    async fn lock_instance(&self, next: &Instance) -> Result<bool>;
    /// Lifts the maintenance lock.
    async fn unlock_instance(&self, next: &Instance) -> Result<bool>;
    /// Writes `next`'s name and metadata.
    async fn update_instance_details(&self, next: &Instance) -> Result<bool>;
    /// Moves the instance into a task's in-progress status and power state.
    async fn start_instance_task(&self, next: &Instance) -> Result<bool>;
    /// Records a driver's outcome if `uuid` is still in the task's
    /// in-progress state; returns whether it was.
    async fn finish_instance_task(&self, uuid: Uuid, outcome: &TaskOutcome) -> Result<bool>;
    /// Every instance waiting for a driver task (after a restart, nobody is
    /// running those tasks any more).
    async fn list_unfinished_instances(&self) -> Result<Vec<Instance>>;
}
