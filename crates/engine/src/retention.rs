//! Retention: what is kept of the past, and for how long. Heat keeps a
//! deleted stack's rows until an operator runs `purge_deleted`; Senlin its
//! events and actions until `event_purge` / `action_purge`; Ember purges
//! them itself, by age, in the background — and on demand
//! (`ember admin purge --older-than`, gRPC `MaintenanceService/Purge`).
//!
//! - stacks deleted more than `deleted_stacks` ago, with every row of
//!   theirs (resources, events, snapshots, signals, hooks, leases);
//! - cluster actions that ended, and cluster events, more than
//!   `cluster_history` ago;
//! - instances deleted more than `deleted_instances` ago, with their events;
//! - audit records older than `audit` (only ever by this setting: an
//!   on-demand purge leaves the audit trail alone, so nobody can erase
//!   what they did through the API);
//! - a live stack's events beyond its newest `events_per_stack` (Heat's
//!   `max_events_per_stack`, 1,000).
//!
//! Each kind goes in batches of [`BATCH`] rows, one short transaction each,
//! with a pause between them, so a purge never holds the database long
//! enough to slow a request. Every engine replica runs it; their deletes
//! are idempotent.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ember_runtime::Identity;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::store::retention::RetentionStore;

/// Rows removed per transaction.
pub const BATCH: u64 = 200;

/// The pause between two batches.
const BETWEEN_BATCHES: Duration = Duration::from_millis(20);

/// How long each kind of record is kept; `None` = forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionSettings {
    pub deleted_stacks: Option<Duration>,
    pub cluster_history: Option<Duration>,
    pub deleted_instances: Option<Duration>,
    pub audit: Option<Duration>,
    /// The most events a live stack keeps (its oldest go beyond it: Heat's
    /// `max_events_per_stack`); `None` = every one.
    pub events_per_stack: Option<u64>,
    /// How often the engine purges.
    pub interval: Duration,
}

const DAY: Duration = Duration::from_secs(24 * 3600);

impl Default for RetentionSettings {
    /// A deleted stack or instance is kept a week (`show_deleted` shows it
    /// meanwhile), cluster history a month, the audit trail a year, a
    /// stack's newest 1,000 events
    /// (Heat's default); the engine looks every 5 minutes.
    fn default() -> Self {
        RetentionSettings {
            deleted_stacks: Some(7 * DAY),
            cluster_history: Some(30 * DAY),
            deleted_instances: Some(7 * DAY),
            audit: Some(365 * DAY),
            events_per_stack: Some(1000),
            interval: Duration::from_secs(300),
        }
    }
}

/// How many records a purge removed, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    pub stacks: u64,
    /// Events of live stacks beyond their cap.
    pub events: u64,
    pub cluster_actions: u64,
    pub cluster_events: u64,
    pub instances: u64,
    pub audit_records: u64,
}

impl Purged {
    fn total(&self) -> u64 {
        self.stacks
            + self.events
            + self.cluster_actions
            + self.cluster_events
            + self.instances
            + self.audit_records
    }
}

/// Purges what is older than each kind's retention.
pub struct Retention {
    store: RetentionStore,
    settings: RetentionSettings,
}

/// The moment `age` before `now`.
/// (An age beyond any date is the earliest date: nothing is that old.)
fn before(now: DateTime<Utc>, age: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(age)
        .ok()
        .and_then(|age| now.checked_sub_signed(age))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

impl Retention {
    pub fn new(store: RetentionStore, settings: RetentionSettings) -> Arc<Retention> {
        Arc::new(Retention { store, settings })
    }

    /// Removes, batch after batch, every record of each kind older than
    /// its cutoff (`None`: that kind is kept).
    async fn purge_until(
        &self,
        stacks: Option<DateTime<Utc>>,
        cluster_history: Option<DateTime<Utc>>,
        instances: Option<DateTime<Utc>>,
    ) -> Result<Purged> {
        let mut purged = Purged::default();
        if let Some(cutoff) = stacks {
            purged.stacks = drain(|| self.store.purge_deleted_stacks(cutoff, BATCH)).await?;
        }
        if let Some(cutoff) = cluster_history {
            purged.cluster_actions =
                drain(|| self.store.purge_ended_actions(cutoff, BATCH)).await?;
            purged.cluster_events =
                drain(|| self.store.purge_cluster_events(cutoff, BATCH)).await?;
        }
        if let Some(cutoff) = instances {
            purged.instances = drain(|| self.store.purge_deleted_instances(cutoff, BATCH)).await?;
        }
        Ok(purged)
    }

    /// One pass of the configured retention.
    pub async fn purge_expired(&self) -> Result<Purged> {
        let now = ember_runtime::time::now();
        let cutoff = |age: Option<Duration>| age.map(|age| before(now, age));
        let mut purged = self
            .purge_until(
                cutoff(self.settings.deleted_stacks),
                cutoff(self.settings.cluster_history),
                cutoff(self.settings.deleted_instances),
            )
            .await?;
        if let Some(keep) = self.settings.events_per_stack {
            purged.events = self.trim_events(keep).await?;
        }
        if let Some(cutoff) = cutoff(self.settings.audit) {
            purged.audit_records = drain(|| self.store.purge_audit_records(cutoff, BATCH)).await?;
        }
        Ok(purged)
    }

    /// Trims every stack's events to its newest `keep`, a batch of stacks
    /// at a time.
    async fn trim_events(&self, keep: u64) -> Result<u64> {
        let mut trimmed = 0;
        loop {
            let stacks = self.store.stacks_with_events_over(keep, BATCH).await?;
            for stack_id in &stacks {
                trimmed += self.store.trim_events(*stack_id, keep).await?;
                tokio::time::sleep(BETWEEN_BATCHES).await;
            }
            if u64::try_from(stacks.len()).unwrap_or(u64::MAX) < BATCH {
                return Ok(trimmed);
            }
        }
    }

    /// An admin's purge of everything older than `older_than` (every
    /// kind, whatever the configured retention).
    pub async fn purge_now(&self, caller: &Identity, older_than: Duration) -> Result<Purged> {
        if !caller.is_admin() {
            return Err(Error::Forbidden(format!(
                "user {:?}: only an admin may purge",
                caller.user_id
            )));
        }
        let cutoff = before(ember_runtime::time::now(), older_than);
        let purged = self
            .purge_until(Some(cutoff), Some(cutoff), Some(cutoff))
            .await?;
        tracing::warn!(
            user_id = %caller.user_id,
            older_than_s = older_than.as_secs(),
            stacks = purged.stacks,
            cluster_actions = purged.cluster_actions,
            cluster_events = purged.cluster_events,
            instances = purged.instances,
            "purged on request"
        );
        Ok(purged)
    }

    /// Purges every `interval` until `shutdown`.
    pub fn spawn(self: Arc<Self>, shutdown: CancellationToken) {
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(self.settings.interval) => {}
                }
                match self.purge_expired().await {
                    Ok(purged) if purged.total() > 0 => tracing::info!(
                        stacks = purged.stacks,
                        events = purged.events,
                        cluster_actions = purged.cluster_actions,
                        cluster_events = purged.cluster_events,
                        instances = purged.instances,
                        audit_records = purged.audit_records,
                        "retention purged old records"
                    ),
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(%error, "retention could not purge: it tries again later")
                    }
                }
            }
        });
    }
}

/// Runs `batch` until it removes fewer than a batch; the total removed.
async fn drain<F, Fut>(batch: F) -> Result<u64>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<u64>>,
{
    let mut total = 0;
    loop {
        let removed = batch().await?;
        total += removed;
        if removed < BATCH {
            return Ok(total);
        }
        tokio::time::sleep(BETWEEN_BATCHES).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_age_beyond_any_date_purges_nothing_and_never_panics() {
        let now = ember_runtime::time::now();
        assert_eq!(
            before(now, Duration::from_secs(u64::MAX)),
            DateTime::<Utc>::MIN_UTC
        );
        assert_eq!(
            before(now, Duration::from_secs(60)),
            now - chrono::Duration::seconds(60)
        );
    }
}
