//! The stack lease: the engine's internal mutex that serialises operations on
//! one stack (Heat's "stack lock"). Taken with one conditional write, renewed
//! by a heartbeat while the operation runs, and stolen by another engine only
//! after it expired — so a crashed engine's stacks are not stuck forever.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::store::StackStore;

/// How long a lease lives without a heartbeat.
pub const LEASE_TTL: Duration = Duration::from_secs(30);

pub struct StackLease {
    store: Arc<dyn StackStore>,
    stack_id: Uuid,
    engine_id: Uuid,
    heartbeat: CancellationToken,
}

impl StackLease {
    /// Takes the lease for `operation`, or `Error::Conflict` naming the stack
    /// when another operation holds it (Heat's ActionInProgress).
    pub async fn take(
        store: Arc<dyn StackStore>,
        stack_id: Uuid,
        stack_name: &str,
        engine_id: Uuid,
        operation: &str,
    ) -> Result<StackLease> {
        let now = ember_runtime::time::now();
        let expires_at =
            now + chrono::Duration::from_std(LEASE_TTL).unwrap_or(chrono::Duration::seconds(30));
        if !store
            .take_stack_lease(stack_id, engine_id, operation, now, expires_at)
            .await?
        {
            return Err(Error::Conflict(format!(
                "stack {stack_name:?} is busy: another operation is in progress on it (try again when it finishes)"
            )));
        }
        let heartbeat = CancellationToken::new();
        tokio::spawn(renew_until_released(
            store.clone(),
            stack_id,
            engine_id,
            heartbeat.clone(),
        ));
        Ok(StackLease {
            store,
            stack_id,
            engine_id,
            heartbeat,
        })
    }

    /// Ends the operation: the stack's final state, its event and the
    /// release of this lease in one transaction.
    pub async fn finish(self, stack: &crate::domain::Stack, event: &crate::domain::Event) {
        self.heartbeat.cancel();
        if let Err(error) = self
            .store
            .finish_stack_operation(stack, event, self.engine_id)
            .await
        {
            // The lease then expires and the sweeper marks the stack failed.
            tracing::error!(stack_id = %self.stack_id, %error, "cannot record the end of an operation");
        }
    }

    /// Stops the heartbeat for an operation whose final transaction
    /// releases the lease itself; returns the engine id it was taken for.
    pub fn hand_over(self) -> Uuid {
        self.heartbeat.cancel();
        self.engine_id
    }

    /// Stops the heartbeat and deletes the lease row.
    pub async fn release(self) {
        self.heartbeat.cancel();
        if let Err(error) = self
            .store
            .release_stack_lease(self.stack_id, self.engine_id)
            .await
        {
            // It expires on its own after LEASE_TTL.
            tracing::warn!(stack_id = %self.stack_id, %error, "cannot release the stack lease");
        }
    }
}

async fn renew_until_released(
    store: Arc<dyn StackStore>,
    stack_id: Uuid,
    engine_id: Uuid,
    stop: CancellationToken,
) {
    let period = LEASE_TTL / 3;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(period) => {}
        }
        let expires_at = ember_runtime::time::now()
            + chrono::Duration::from_std(LEASE_TTL).unwrap_or(chrono::Duration::seconds(30));
        match store
            .renew_stack_lease(stack_id, engine_id, expires_at)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                tracing::error!(%stack_id, "stack lease lost: another engine took it over");
                return;
            }
            Err(error) => tracing::warn!(%stack_id, %error, "stack lease renewal failed; retrying"),
        }
    }
}
