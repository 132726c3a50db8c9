//! Persistence of the engine: store traits named after domain operations,
//! each one transaction, and their sea-orm implementation for SQLite and
//! PostgreSQL. sea-orm never leaks out of this module.

mod entity;
pub mod migrations;
mod sql;

use async_trait::async_trait;
use uuid::Uuid;

use crate::domain::Stack;
use crate::error::Result;

pub use sql::SqlStackStore;

/// The most items one list call returns.
pub const MAX_PAGE_SIZE: u32 = 1000;
pub const DEFAULT_PAGE_SIZE: u32 = 100;

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
}

impl StackListQuery {
    pub fn page_size(&self) -> u32 {
        match self.limit {
            0 => DEFAULT_PAGE_SIZE,
            limit => limit.min(MAX_PAGE_SIZE),
        }
    }
}

#[async_trait]
pub trait StackStore: Send + Sync + 'static {
    /// Records a new stack; `Error::Conflict` if the project already has a
    /// stack of that name.
    async fn insert_stack(&self, stack: &Stack) -> Result<()>;
    /// A stack of `project_id` by name or id.
    async fn find_stack(&self, project_id: &str, name_or_id: &str) -> Result<Option<Stack>>;
    /// A page of `project_id`'s stacks, newest first; `Error::NotFound` if
    /// the marker names no stack of the project.
    async fn list_stacks(&self, project_id: &str, query: &StackListQuery) -> Result<Vec<Stack>>;
}
