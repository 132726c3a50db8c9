//! What ends an operation that would not end by itself: the stack's
//! timeout (its `timeout_mins`, else the engine's `stack_action_timeout`,
//! Heat's hour), and a delete of the stack, which stops the operation
//! running on it — as Heat's delete of a stack in progress does — instead
//! of waiting for it (a stack that cannot finish is never stuck).
//!
//! With several engines, the delete — or an update's cancel — may be on
//! another engine than the operation: it then asks through the stack's
//! lease row, and the holder's heartbeat acts on it (within a third of the
//! lease's TTL).
//!
//! A stopped operation fails (`<ACTION> stopped: the stack is being
//! deleted`) without rolling back — the delete that stopped it removes
//! what it made — and releases the lease for the delete to take. Either
//! way an operation is cut short, the resources whose action was under
//! way are told (`ResourceType::cancel`), and the operation of a nested
//! stack under way beneath one of them is stopped too (`Stack <ACTION>
//! cancelled`, without rolling back: Heat's `handle_<action>_cancel` of a
//! nested-stack resource), so nothing under a timed-out stack keeps
//! running.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::executor::{RunTarget, StackEngine};
use super::failure::{RunFailure, RunResult};
use crate::domain::{ActionStatus, Resource, Stack};
use crate::resources::{NESTED_STACK_KIND, derived_id};
use crate::store::StopRequest;

/// How long an operation runs on a stack without `timeout_mins`
/// (Heat's `stack_action_timeout`).
pub const DEFAULT_ACTION_TIMEOUT: Duration = Duration::from_secs(3600);

/// How long a delete waits for the operation it stopped to let go of the
/// stack.
pub const STOP_WAIT: Duration = Duration::from_secs(30);

/// The operations this engine runs that a delete may stop, and the
/// updates a cancel may stop (they roll back), by stack: a request on
/// this engine stops them here; one on another engine asks through the
/// stack's lease, and the lease's heartbeat stops them (see
/// [`crate::store::StackStore::request_stack_stop`]).
#[derive(Clone, Default)]
pub struct Stops {
    running: Arc<Mutex<BTreeMap<Uuid, Running>>>,
    next: Arc<AtomicU64>,
    updates: Arc<Mutex<BTreeMap<Uuid, CancellationToken>>>,
}

/// Why a run was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// A delete of the stack stopped it.
    Delete,
    /// The operation of the stack's parent was cut short (its timeout, a
    /// delete) while it made or changed this nested stack.
    ParentCut,
}

/// One run's registration: its serial (a later run of the same stack
/// replaces it), its token, and why it was stopped (the first reason).
#[derive(Clone)]
struct Running {
    serial: u64,
    token: CancellationToken,
    reason: Arc<OnceLock<StopReason>>,
}

impl Stops {
    /// Registers the run of an operation on `stack_id`; the signal
    /// forgets it when dropped.
    pub fn register(&self, stack_id: Uuid) -> StopSignal {
        let run = Running {
            serial: self.next.fetch_add(1, Ordering::Relaxed),
            token: CancellationToken::new(),
            reason: Arc::new(OnceLock::new()),
        };
        if let Ok(mut running) = self.running.lock() {
            running.insert(stack_id, run.clone());
        }
        StopSignal {
            running: self.running.clone(),
            stack_id,
            run,
        }
    }

    /// Stops the operation this engine runs on `stack_id` for a delete;
    /// false when it runs none there (another engine's, or none at all).
    pub fn stop(&self, stack_id: Uuid) -> bool {
        self.stop_for(stack_id, StopReason::Delete)
    }

    /// Stops the operation this engine runs on `stack_id`, saying why.
    pub fn stop_for(&self, stack_id: Uuid, reason: StopReason) -> bool {
        let run = self
            .running
            .lock()
            .ok()
            .and_then(|running| running.get(&stack_id).cloned());
        let Some(run) = run else {
            return false;
        };
        let _ = run.reason.set(reason);
        run.token.cancel();
        true
    }

    /// Registers the update running on `stack_id`, for a cancel to stop.
    pub fn register_update(&self, stack_id: Uuid, cancel: CancellationToken) {
        if let Ok(mut updates) = self.updates.lock() {
            updates.insert(stack_id, cancel);
        }
    }

    pub fn forget_update(&self, stack_id: Uuid) {
        if let Ok(mut updates) = self.updates.lock() {
            updates.remove(&stack_id);
        }
    }

    /// Cancels the update of `stack_id` if this engine runs it.
    pub fn cancel_update(&self, stack_id: Uuid) -> bool {
        self.updates
            .lock()
            .ok()
            .and_then(|updates| updates.get(&stack_id).cloned())
            .map(|cancel| cancel.cancel())
            .is_some()
    }

    /// Acts on a request another engine made through the lease.
    pub fn act_on(&self, stack_id: Uuid, request: StopRequest) -> bool {
        match request {
            StopRequest::Delete => self.stop(stack_id),
            StopRequest::CancelUpdate => self.cancel_update(stack_id),
        }
    }
}

/// One run's stop: cancelled when a delete, or its parent's cut, stops
/// the operation.
pub struct StopSignal {
    running: Arc<Mutex<BTreeMap<Uuid, Running>>>,
    stack_id: Uuid,
    run: Running,
}

impl StopSignal {
    /// Whether the operation was stopped (it then does not roll back).
    pub fn stopped(&self) -> bool {
        self.run.token.is_cancelled()
    }

    /// Why the operation failed when it was stopped.
    fn stopped_because(&self, operation: &str) -> String {
        match self.run.reason.get() {
            Some(StopReason::ParentCut) => format!("Stack {operation} cancelled"),
            Some(StopReason::Delete) | None => {
                format!("{operation} stopped: the stack is being deleted")
            }
        }
    }
}

impl Drop for StopSignal {
    fn drop(&mut self) {
        if let Ok(mut running) = self.running.lock()
            && running
                .get(&self.stack_id)
                .is_some_and(|run| run.serial == self.run.serial)
        {
            running.remove(&self.stack_id);
        }
    }
}

/// How long an operation on `stack` may run: its `timeout_mins`, else
/// `default`.
pub(crate) fn operation_timeout(stack: &Stack, default: Duration) -> Duration {
    stack.timeout_mins.map_or(default, |minutes| {
        Duration::from_secs(u64::from(minutes) * 60)
    })
}

/// Runs `running` until it ends, the stack's timeout passes (failed with
/// `timed_out`), or a delete stops it (failed, saying so). When it is cut
/// short, the resources of `in_flight` whose action was under way are
/// told ([`cancel_in_flight`]).
pub(crate) async fn within_bounds(
    in_flight: (&StackEngine, &RunTarget),
    running: impl Future<Output = RunResult>,
    timeout: Duration,
    stop: &StopSignal,
    timed_out: &str,
    operation: &str,
) -> RunResult {
    match until_cut(running, timeout, stop, timed_out, operation).await {
        Ok(outcome) => outcome,
        Err(cut) => {
            cancel_in_flight(in_flight.0, in_flight.1).await;
            Err(RunFailure::Failed(cut))
        }
    }
}

/// `running`'s outcome, or why it was cut short.
async fn until_cut(
    running: impl Future<Output = RunResult>,
    timeout: Duration,
    stop: &StopSignal,
    timed_out: &str,
    operation: &str,
) -> Result<RunResult, String> {
    tokio::select! {
        outcome = tokio::time::timeout(timeout, running) => {
            outcome.map_err(|_| timed_out.to_owned())
        }
        () = stop.run.token.cancelled() => Err(stop.stopped_because(operation)),
    }
}

/// Tells each resource whose action was under way when its run was cut
/// short (Heat's `handle_<action>_cancel`): a software deployment still
/// waiting for its server fails, `Deployment cancelled.`; the operation of
/// a nested stack this engine runs beneath one is stopped (and cuts its
/// own resources the same way).
async fn cancel_in_flight(engine: &StackEngine, target: &RunTarget) {
    let in_flight: Vec<Resource> = target
        .resources
        .lock()
        .map(|resources| {
            resources
                .values()
                .filter(|resource| resource.status == ActionStatus::InProgress)
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    for resource in in_flight {
        let Some(resource_type) = engine.registry.get(&resource.type_name) else {
            continue;
        };
        if resource_type.is_nested_stack() {
            let nested = derived_id(resource.stack_id, resource.id, NESTED_STACK_KIND);
            engine.stops.stop_for(nested, StopReason::ParentCut);
        }
        if let Err(error) = resource_type.cancel(&resource).await {
            tracing::warn!(stack_id = %resource.stack_id, resource = %resource.name, %error, "cannot cancel a resource's action cut short");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_reaches_the_run_registered_last_and_is_forgotten_with_it() {
        let stops = Stops::default();
        let stack = Uuid::new_v4();
        assert!(!stops.stop(stack), "nothing runs yet");
        let first = stops.register(stack);
        let second = stops.register(stack);
        // The first run's end does not forget the second.
        drop(first);
        assert!(stops.stop(stack));
        assert!(second.stopped());
        drop(second);
        assert!(!stops.stop(stack), "forgotten with its run");
    }

    #[tokio::test]
    async fn a_stopped_or_timed_out_run_fails_saying_which() {
        let stops = Stops::default();
        let signal = stops.register(Uuid::new_v4());
        let endless = std::future::pending::<RunResult>();
        let timed_out = until_cut(
            endless,
            Duration::from_millis(10),
            &signal,
            "CREATE timed out",
            "CREATE",
        )
        .await;
        assert_eq!(timed_out.unwrap_err(), "CREATE timed out");
        let quick = until_cut(
            async { Ok(()) },
            Duration::from_secs(60),
            &signal,
            "CREATE timed out",
            "CREATE",
        )
        .await;
        assert!(matches!(quick, Ok(Ok(()))));
        signal.run.token.cancel();
        let stopped = until_cut(
            std::future::pending::<RunResult>(),
            Duration::from_secs(60),
            &signal,
            "CREATE timed out",
            "CREATE",
        )
        .await;
        assert_eq!(
            stopped.unwrap_err(),
            "CREATE stopped: the stack is being deleted"
        );
        // A nested stack stopped because its parent's run was cut.
        let nested = Uuid::new_v4();
        let signal = stops.register(nested);
        assert!(stops.stop_for(nested, StopReason::ParentCut));
        // A later reason does not replace the first.
        assert!(stops.stop(nested));
        let cancelled = until_cut(
            std::future::pending::<RunResult>(),
            Duration::from_secs(60),
            &signal,
            "UPDATE timed out",
            "UPDATE",
        )
        .await;
        assert_eq!(cancelled.unwrap_err(), "Stack UPDATE cancelled");
    }
}
