//! The stack lease: the engine's internal mutex that serialises operations on
//! one stack (Heat's "stack lock"). Taken with one conditional write that
//! moves its generation on (a new stack's in the transaction that records
//! the stack), renewed by a heartbeat while the operation runs,
//! and taken over by another engine only after it expired — so a crashed
//! engine's stacks are not stuck forever.
//!
//! [`StackLease`] is a guard. It moves into the task that runs the
//! operation; dropping it (the run ended, panicked, or the request that
//! took it went away before the run started) stops the heartbeat and
//! releases the lease unless a final write already did. Every state write of
//! the operation carries the lease's [`LeaseFence`]: once the lease was
//! taken over, those writes are refused (`Error::LeaseLost`) and the run
//! stops — a holder that lost its lease cannot overwrite the next holder.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::bounds::Stops;
use super::writer::TransitionWriter;
use crate::domain::{Event, Stack, StackAction};
use crate::error::{Error, Result};
use crate::store::{LeaseFence, LeaseRenewal, LeaseTake, StackStore};

/// How long a lease lives without a heartbeat, by default.
pub const LEASE_TTL: Duration = Duration::from_secs(30);

/// How often the final write of an operation is tried before the lease is
/// left to the sweep (a database that is briefly away).
const FINAL_WRITE_ATTEMPTS: u32 = 5;

pub(crate) fn expiry_after(
    now: chrono::DateTime<chrono::Utc>,
    ttl: Duration,
) -> chrono::DateTime<chrono::Utc> {
    now + chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::seconds(30))
}

/// What an operation holding a stack's lease is (its row's `operation`):
/// a stack action, or one of the operations that are not one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseHolder {
    Action(StackAction),
    /// A signal to one of the stack's resources.
    Signal,
    /// Marking a resource unhealthy (or healthy again).
    MarkUnhealthy,
}

impl LeaseHolder {
    /// The lease row's label.
    pub fn label(self) -> &'static str {
        match self {
            LeaseHolder::Action(action) => action.as_str(),
            LeaseHolder::Signal => "SIGNAL",
            LeaseHolder::MarkUnhealthy => "MARK_UNHEALTHY",
        }
    }
}

/// What the caller learnt of a stack's lease as it read the stack.
pub(crate) enum LeaseSeen {
    /// Nothing: it is read now.
    Unknown,
    /// Free at this generation, read in the same statement as the stack
    /// (see [`crate::store::StackStore::find_stack_with_free_lease`]).
    FreeAt(i64),
    /// Held (or never taken): the operation takes it as any does.
    NotFree,
}

/// A held stack lease. See the module documentation.
pub struct StackLease {
    /// Commits the operation's final write (batched with other writes).
    writer: TransitionWriter,
    fence: LeaseFence,
    /// Cancelled on drop: the heartbeat stops and releases the lease
    /// unless `settled`.
    stop: CancellationToken,
    /// A final write released the lease already (or it was lost).
    settled: Arc<AtomicBool>,
}

/// A take of a stack's lease refused because another operation holds it
/// (Heat's ActionInProgress): typed, so a caller that waits such a lease
/// out (see [`WhenBusy`]) tells it from any other refusal; to anyone else
/// it is the 409 `Error::Conflict` in these words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "stack {stack_name:?} is busy: another operation is in progress on it (try again when it finishes)"
)]
pub struct StackBusy {
    pub stack_name: String,
}

impl From<StackBusy> for Error {
    fn from(busy: StackBusy) -> Self {
        Error::Conflict(busy.to_string())
    }
}

/// What the start of an operation does when another operation holds the
/// stack's lease ([`StackBusy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WhenBusy {
    /// Refuses at once (409): the caller — a user — tries again later.
    Refuse,
    /// Asks again until a lease taken just now would have expired (a TTL):
    /// a parent's step that begins an operation on its nested stack while
    /// the nested stack is not in progress. The lease is one an engine
    /// that went away took and died before it wrote the operation's state,
    /// so no sweep takes it over; it expires within a TTL.
    WaitOutLease,
}

/// How often a take [`WhenBusy::WaitOutLease`] asks again.
pub(crate) const BUSY_POLL: Duration = Duration::from_millis(100);

impl StackLease {
    /// Takes the lease for `operation`, or `Error::Conflict` naming the stack
    /// when another operation holds it (Heat's ActionInProgress; see
    /// [`StackLease::try_take`]).
    pub async fn take(
        writer: &TransitionWriter,
        stops: &Stops,
        stack_id: Uuid,
        stack_name: &str,
        engine_id: Uuid,
        holder: LeaseHolder,
        ttl: Duration,
    ) -> Result<StackLease> {
        let taken =
            StackLease::try_take(writer, stops, stack_id, stack_name, engine_id, holder, ttl)
                .await?;
        Ok(taken?)
    }

    /// Takes the lease for `operation`: `Ok(Err(StackBusy))` when another
    /// operation holds it, `Err` when the store could not answer. It lives
    /// `ttl` without a heartbeat; the heartbeat renews it every third of it,
    /// and stops the run `stops` knows on the stack when a delete on
    /// another engine asks.
    pub async fn try_take(
        writer: &TransitionWriter,
        stops: &Stops,
        stack_id: Uuid,
        stack_name: &str,
        engine_id: Uuid,
        holder: LeaseHolder,
        ttl: Duration,
    ) -> Result<Result<StackLease, StackBusy>> {
        let now = ember_runtime::time::now();
        let take = LeaseTake::new(
            stack_id,
            engine_id,
            holder.label(),
            now,
            expiry_after(now, ttl),
        );
        let Some(fence) = writer.take_lease(take).await? else {
            return Ok(Err(StackBusy {
                stack_name: stack_name.to_owned(),
            }));
        };
        Ok(Ok(StackLease::held(writer.clone(), stops, fence, ttl)))
    }

    /// The guard of a lease this engine took over from one that went away
    /// (the sweep's `take_over_orphaned_stack`), to resume its operation:
    /// renewed and released like a lease it took itself.
    pub fn taken_over(
        writer: TransitionWriter,
        stops: &Stops,
        fence: LeaseFence,
        ttl: Duration,
    ) -> StackLease {
        StackLease::held(writer, stops, fence, ttl)
    }

    /// The guard of a lease taken with a write of its own (a new stack's,
    /// taken in the transaction that records it).
    pub(crate) fn held(
        writer: TransitionWriter,
        stops: &Stops,
        fence: LeaseFence,
        ttl: Duration,
    ) -> StackLease {
        let stop = CancellationToken::new();
        let settled = Arc::new(AtomicBool::new(false));
        tokio::spawn(keep_alive(
            writer.store().clone(),
            stops.clone(),
            fence,
            ttl,
            stop.clone(),
            settled.clone(),
        ));
        StackLease {
            writer,
            fence,
            stop,
            settled,
        }
    }

    /// What every state write of the operation is fenced with.
    pub fn fence(&self) -> LeaseFence {
        self.fence
    }

    /// Runs the start of an operation (reading, checking, recording that it
    /// started) under the lease: on success the lease comes back with the
    /// result, for the run; on failure it is released before the error is
    /// returned, so the caller's next attempt finds the stack free.
    pub async fn start<T>(
        self,
        work: impl std::future::Future<Output = Result<T>>,
    ) -> Result<(T, StackLease)> {
        match work.await {
            Ok(started) => Ok((started, self)),
            Err(error) => {
                self.release().await;
                Err(error)
            }
        }
    }

    /// Ends the operation: the stack's final state, its event and the
    /// release of this lease in one transaction. A transient failure is
    /// retried; if the lease was lost meanwhile nothing is written (the
    /// engine that took the stack over decides its state).
    pub async fn finish(self, stack: &Stack, event: &Event) {
        let mut pause = Duration::from_millis(50);
        for attempt in 1..=FINAL_WRITE_ATTEMPTS {
            match self.writer.finish(self.fence, stack, event.clone()).await {
                Ok(()) => {
                    self.settled.store(true, Ordering::SeqCst);
                    return;
                }
                Err(Error::LeaseLost(message)) => {
                    self.settled.store(true, Ordering::SeqCst);
                    tracing::error!(stack_id = %stack.id, %message, "operation ended after its stack lease was taken over; its final state is not recorded");
                    return;
                }
                Err(error) if attempt < FINAL_WRITE_ATTEMPTS => {
                    tracing::warn!(stack_id = %stack.id, %error, attempt, "cannot record the end of an operation; retrying");
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
                Err(error) => {
                    // Released on drop: the sweep then fails the stack.
                    tracing::error!(stack_id = %stack.id, %error, "cannot record the end of an operation");
                }
            }
        }
    }

    /// Queues the operation's end (as [`Self::finish`] writes it) behind the
    /// run's writes in flight, to be written only if they all commit (see
    /// [`TransitionWriter::finish_after_earlier`]); [`Self::settle`] once
    /// it is.
    pub(crate) fn queue_finish(
        &self,
        stack: &Stack,
        event: Event,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<()>>> {
        self.writer.finish_after_earlier(self.fence, stack, event)
    }

    /// For operations whose own final transaction released the lease (it
    /// was fenced with [`Self::fence`]): nothing is left to release.
    pub fn settle(self) {
        self.settled.store(true, Ordering::SeqCst);
    }

    /// Releases the lease now and waits for it (error paths that want the
    /// stack free before they answer). Dropping the guard releases too, in
    /// the background.
    pub async fn release(self) {
        self.settled.store(true, Ordering::SeqCst);
        if let Err(error) = self.writer.store().release_stack_lease(self.fence).await {
            // It expires on its own after its TTL.
            tracing::warn!(stack_id = %self.fence.stack_id, %error, "cannot release the stack lease");
        }
    }
}

impl Drop for StackLease {
    fn drop(&mut self) {
        self.stop.cancel();
        // The run holding it queues nothing more.
        self.writer.forget(self.fence);
    }
}

/// Renews the lease every third of its lifetime until the guard is
/// dropped, then releases it unless a final write settled it; stops the
/// run when a delete on another engine asked. Stops renewing once the
/// lease is lost: from then on the run's fenced writes fail.
async fn keep_alive(
    store: Arc<dyn StackStore>,
    stops: Stops,
    fence: LeaseFence,
    ttl: Duration,
    stop: CancellationToken,
    settled: Arc<AtomicBool>,
) {
    let period = ttl / 3;
    let mut lost = false;
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(period), if !lost => {}
        }
        let expires_at = expiry_after(ember_runtime::time::now(), ttl);
        match store.renew_stack_lease(fence, expires_at).await {
            Ok(LeaseRenewal::Renewed) => {}
            Ok(LeaseRenewal::StopRequested(request)) => {
                if stops.act_on(fence.stack_id, request) {
                    tracing::info!(stack_id = %fence.stack_id, request = request.label(), "operation stopped: another engine asked");
                }
            }
            // The operation ended (and released it) while this renewal
            // was on its way: nothing was lost.
            Ok(LeaseRenewal::Lost) if settled.load(Ordering::SeqCst) || stop.is_cancelled() => {
                break;
            }
            Ok(LeaseRenewal::Lost) => {
                tracing::error!(stack_id = %fence.stack_id, generation = fence.generation, "stack lease lost: another engine took the stack over; this operation's writes are refused from now on");
                lost = true;
            }
            Err(error) => {
                tracing::warn!(stack_id = %fence.stack_id, %error, "stack lease renewal failed; retrying")
            }
        }
    }
    if lost || settled.load(Ordering::SeqCst) {
        return;
    }
    let mut pause = Duration::from_millis(20);
    for _ in 0..FINAL_WRITE_ATTEMPTS {
        match store.release_stack_lease(fence).await {
            Ok(()) => return,
            Err(error) => {
                tracing::warn!(stack_id = %fence.stack_id, %error, "cannot release a dropped stack lease; retrying");
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
        }
    }
}
