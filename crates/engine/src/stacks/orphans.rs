//! The orphan sweep: stacks left in progress by an engine that went away
//! (their lease expired or was released) are marked failed, one store
//! decision each, now and then while the engine runs.

use std::sync::Arc;
use std::time::Duration;

use super::StackOperations;
use crate::error::Result;

/// How many orphaned stacks one sweep pass looks at.
const ORPHAN_SWEEP_BATCH: u64 = 500;

impl StackOperations {
    /// Marks stacks whose engine went away (in progress, lease expired or
    /// released) as failed, with their in-progress resources. Each one is a
    /// single decision in the store — take the expired lease over and mark
    /// the stack only while it is still in that operation — so a stack that
    /// finished meanwhile, or that another replica swept, is left alone.
    /// Returns how many this call marked.
    pub async fn recover_orphaned_stacks(&self) -> Result<usize> {
        let now = ember_runtime::time::now();
        let candidates = self
            .store()
            .list_orphan_candidates(now, ORPHAN_SWEEP_BATCH)
            .await?;
        let mut marked = 0;
        for candidate in candidates {
            let engine = candidate.holder.map_or_else(
                || "an unknown engine".to_owned(),
                |id| format!("engine {id}"),
            );
            let reason = format!(
                "{} interrupted: {engine} went away while it ran (its stack lease expired)",
                candidate.stack.action.as_str()
            );
            if let Some(stack) = self
                .store()
                .fail_orphaned_stack(&candidate, self.shared.engine_id, now, &reason)
                .await?
            {
                marked += 1;
                tracing::warn!(stack_id = %stack.id, %reason, "orphaned stack marked failed");
            }
        }
        Ok(marked)
    }

    /// Runs [`Self::recover_orphaned_stacks`] now and then every third of
    /// the lease TTL, until `shutdown`.
    pub fn spawn_orphan_sweeper(self: &Arc<Self>, shutdown: tokio_util::sync::CancellationToken) {
        // A third of the TTL: an orphan waits at most 4/3 of it.
        self.spawn_orphan_sweeper_every(self.shared.lease_ttl / 3, shutdown);
    }

    /// [`Self::spawn_orphan_sweeper`] with another period (tests that run
    /// with short leases).
    pub fn spawn_orphan_sweeper_every(
        self: &Arc<Self>,
        period: Duration,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        let operations = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(error) = operations.recover_orphaned_stacks().await {
                    tracing::warn!(%error, "sweeping orphaned stacks failed");
                }
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(period) => {}
                }
            }
        });
    }
}
