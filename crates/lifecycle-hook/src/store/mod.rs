//! Persistence of pending lifecycle actions: the [`PendingActionStore`]
//! trait and its sea-orm implementation for SQLite and PostgreSQL. The list
//! query and the records it reads and writes (hook events, queue messages)
//! are domain types, re-exported here.

mod entity;
pub mod migrations;
mod sql;
mod sql_work;

use async_trait::async_trait;
use uuid::Uuid;

use chrono::{DateTime, Utc};

use crate::domain::{DeliveryState, PendingLifecycleAction, Resolution};
use crate::error::Result;

pub use crate::domain::{
    DEFAULT_PAGE_SIZE, HookEvent, MAX_PAGE_SIZE, PendingListQuery, QueueMessage,
};
pub use sql::SqlPendingActionStore;

/// The outcome of one delivery attempt.
#[derive(Debug, Clone)]
pub struct DeliveryResult {
    pub token: Uuid,
    pub state: DeliveryState,
    pub error: Option<String>,
    /// When to try again (RETRYING).
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub event: HookEvent,
}

/// How much work is overdue, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OverdueWork {
    pub deliveries: u64,
    pub deadlines: u64,
}

#[async_trait]
pub trait PendingActionStore: Send + Sync + 'static {
    /// Records pending actions in one transaction; a token already recorded
    /// is left as it is (the engine may hand the same batch over twice).
    async fn record_pending_actions(&self, actions: &[PendingLifecycleAction]) -> Result<()>;
    async fn list_pending(&self, query: &PendingListQuery) -> Result<Vec<PendingLifecycleAction>>;
    async fn get_pending(&self, token: Uuid) -> Result<Option<PendingLifecycleAction>>;
    /// Claims up to `limit` unresolved actions whose delivery is due, in
    /// one conditional update that pushes their next attempt to
    /// `claim_until`, so two replicas never deliver the same attempt.
    async fn claim_due_deliveries(
        &self,
        now: DateTime<Utc>,
        claim_until: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<PendingLifecycleAction>>;
    /// Records delivery outcomes (attempts + 1) and their events.
    async fn record_deliveries(&self, results: &[DeliveryResult]) -> Result<()>;
    /// Appends messages to the embedded queue and marks them delivered, in
    /// one transaction (a token is queued once).
    async fn enqueue_messages(&self, messages: &[(PendingLifecycleAction, String)]) -> Result<()>;
    /// Messages of `project_id`'s queue `queue` (queues of the same name in
    /// other projects are other queues).
    async fn list_queue_messages(
        &self,
        project_id: &str,
        queue: &str,
        after_id: i64,
        limit: u64,
    ) -> Result<Vec<QueueMessage>>;
    /// Claims up to `limit` unresolved actions whose deadline passed, in
    /// one conditional update (claim free or expired → `claim_until`): with
    /// several replicas each deadline fires once.
    async fn claim_expired(
        &self,
        now: DateTime<Utc>,
        claim_until: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<PendingLifecycleAction>>;
    /// Marks actions resolved (only those still unresolved) and records the
    /// events about those; returns how many this call resolved.
    async fn resolve(
        &self,
        tokens: &[Uuid],
        resolution: Resolution,
        resolved_by: &str,
        events: &[HookEvent],
    ) -> Result<u64>;
    /// Moves an unresolved action's deadline; returns the action after.
    async fn extend_deadline(
        &self,
        token: Uuid,
        now: DateTime<Utc>,
    ) -> Result<PendingLifecycleAction>;
    /// The earliest moment a delivery is due (as [`Self::claim_due_deliveries`]
    /// would claim it then).
    async fn next_delivery_due(&self) -> Result<Option<DateTime<Utc>>>;
    /// The earliest moment a deadline is due to fire (its claim, if one
    /// holds it, run out).
    async fn next_deadline_due(&self) -> Result<Option<DateTime<Utc>>>;
    /// Work that fell behind: deliveries due and deadlines passed before
    /// `due_before` and still not done (readiness reports them).
    async fn count_overdue(&self, due_before: DateTime<Utc>) -> Result<OverdueWork>;
    async fn record_events(&self, events: &[HookEvent]) -> Result<()>;
    async fn list_events(
        &self,
        project_id: Option<&str>,
        cluster_id: Option<Uuid>,
        token: Option<Uuid>,
        limit: u64,
    ) -> Result<Vec<HookEvent>>;
}
