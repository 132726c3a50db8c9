//! Persistence of pending lifecycle actions: the [`PendingActionStore`]
//! trait and its sea-orm implementation for SQLite and PostgreSQL.

mod entity;
pub mod migrations;
mod sql;

use async_trait::async_trait;
use uuid::Uuid;

use crate::domain::PendingLifecycleAction;
use crate::error::Result;

pub use sql::SqlPendingActionStore;

pub const MAX_PAGE_SIZE: u32 = 1000;
pub const DEFAULT_PAGE_SIZE: u32 = 100;

/// Which pending actions to list, earliest deadline first.
#[derive(Debug, Clone, Default)]
pub struct PendingListQuery {
    /// `None` = every project (admins).
    pub project_id: Option<String>,
    pub cluster_id: Option<Uuid>,
    /// 0 = the default page size.
    pub limit: u32,
    /// Token of the last action of the previous page.
    pub marker: Option<Uuid>,
}

impl PendingListQuery {
    pub fn page_size(&self) -> u32 {
        match self.limit {
            0 => DEFAULT_PAGE_SIZE,
            limit => limit.min(MAX_PAGE_SIZE),
        }
    }
}

#[async_trait]
pub trait PendingActionStore: Send + Sync + 'static {
    /// Records pending actions in one transaction; a token already recorded
    /// is left as it is (the engine may hand the same batch over twice).
    async fn record_pending_actions(&self, actions: &[PendingLifecycleAction]) -> Result<()>;
    async fn list_pending(&self, query: &PendingListQuery) -> Result<Vec<PendingLifecycleAction>>;
}
