//! Persistence of the engine: store traits named after domain operations,
//! each one transaction, and their sea-orm implementation for SQLite and
//! PostgreSQL. sea-orm never leaks out of this module.

pub mod clusters;
mod entity;
pub mod instances;
pub mod migrations;
mod sql;

use async_trait::async_trait;
use uuid::Uuid;

use chrono::{DateTime, Utc};

use crate::domain::{Event, Resource, Stack, StackDefinition};
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
    /// Only locked (true) or only unlocked (false) stacks.
    pub locked: Option<bool>,
}

impl StackListQuery {
    pub fn page_size(&self) -> u32 {
        match self.limit {
            0 => DEFAULT_PAGE_SIZE,
            limit => limit.min(MAX_PAGE_SIZE),
        }
    }
}

/// Which events to list.
#[derive(Debug, Clone, Default)]
pub struct EventListQuery {
    pub stack_ids: Vec<Uuid>,
    pub resource_name: Option<String>,
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
            0 => DEFAULT_PAGE_SIZE,
            limit => limit.min(MAX_PAGE_SIZE),
        }
    }
}

#[async_trait]
pub trait StackStore: Send + Sync + 'static {
    /// Records a bare stack row; `Error::Conflict` if the project already has
    /// a live stack of that name.
    async fn insert_stack(&self, stack: &Stack) -> Result<()>;
    /// Records a new stack with what it is built from, its resources (all
    /// INIT_COMPLETE) and its first event, in one transaction.
    async fn create_stack(
        &self,
        stack: &Stack,
        definition: &StackDefinition,
        resources: &[Resource],
        event: &Event,
    ) -> Result<()>;
    /// A stack of `project_id` by name (live stacks only) or id (deleted
    /// ones too, as Heat shows DELETE_COMPLETE stacks by id).
    async fn find_stack(&self, project_id: &str, name_or_id: &str) -> Result<Option<Stack>>;
    /// Any stack by id.
    async fn get_stack(&self, stack_id: Uuid) -> Result<Option<Stack>>;
    /// The stacks whose parent is `stack_id`.
    async fn list_child_stacks(&self, stack_id: Uuid) -> Result<Vec<Stack>>;
    async fn load_definition(&self, stack_id: Uuid) -> Result<StackDefinition>;
    /// Starts an update: writes the stack's new state, settings and
    /// definition, adds rows for resources the new template introduces, and
    /// records the event, in one transaction.
    async fn begin_stack_update(
        &self,
        stack: &Stack,
        definition: &StackDefinition,
        new_resources: &[Resource],
        event: &Event,
    ) -> Result<()>;
    /// Records the last transitions of resources that are gone for good
    /// (removed from the template, or replaced) and removes their rows, in
    /// one transaction. Their events stay.
    async fn retire_resources(&self, transitions: &[(Resource, Event)]) -> Result<()>;
    /// Ends an operation: writes the stack's final state and event and
    /// releases `engine_id`'s lease, in one transaction — so whoever sees the
    /// final state can start the next operation at once.
    async fn finish_stack_operation(
        &self,
        stack: &Stack,
        event: &Event,
        engine_id: Uuid,
    ) -> Result<()>;
    /// Records events that change no state (plugin calls, refused signals).
    async fn record_events(&self, events: &[Event]) -> Result<()>;
    /// Writes the stack's new state and its event in one transaction.
    async fn record_stack_transition(&self, stack: &Stack, event: &Event) -> Result<()>;
    /// Writes resources' new states and their events in one transaction.
    async fn record_resource_transitions(&self, transitions: &[(Resource, Event)]) -> Result<()>;
    async fn list_resources(&self, stack_id: Uuid) -> Result<Vec<Resource>>;
    async fn list_events(&self, query: &EventListQuery) -> Result<Vec<Event>>;
    async fn get_event(&self, stack_id: Uuid, event_id: Uuid) -> Result<Option<Event>>;
    /// Takes the stack's lease for `engine_id` unless another engine holds
    /// an unexpired one: one conditional write. Returns whether it was taken.
    async fn take_stack_lease(
        &self,
        stack_id: Uuid,
        engine_id: Uuid,
        operation: &str,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> Result<bool>;
    /// Extends a lease this engine holds; false if it no longer holds it.
    async fn renew_stack_lease(
        &self,
        stack_id: Uuid,
        engine_id: Uuid,
        expires_at: DateTime<Utc>,
    ) -> Result<bool>;
    async fn release_stack_lease(&self, stack_id: Uuid, engine_id: Uuid) -> Result<()>;
    /// Stacks left `*_IN_PROGRESS` with no unexpired lease: their engine went
    /// away. Returns them with the engine that last held the lease, if known.
    async fn find_orphaned_stacks(&self, now: DateTime<Utc>) -> Result<Vec<(Stack, Option<Uuid>)>>;
    /// A page of `project_id`'s stacks, newest first; `Error::NotFound` if
    /// the marker names no stack of the project.
    async fn list_stacks(&self, project_id: &str, query: &StackListQuery) -> Result<Vec<Stack>>;
    /// Records a resource's new health state (mark unhealthy, or its reset)
    /// with its event, and releases `engine_id`'s lease on `stack_id`, in
    /// one transaction. `Error::NotFound` if the row is gone (then only the
    /// lease is released).
    async fn mark_resource_health(
        &self,
        resource: &Resource,
        event: &Event,
        stack_id: Uuid,
        engine_id: Uuid,
    ) -> Result<()>;
    /// Ends a scaling signal: writes the group's final row and its event
    /// and releases `engine_id`'s lease on `stack_id`, in one transaction —
    /// whoever sees the group settled can start the next operation at once.
    async fn finish_scaling(
        &self,
        group: &Resource,
        event: &Event,
        stack_id: Uuid,
        engine_id: Uuid,
    ) -> Result<()>;
}
