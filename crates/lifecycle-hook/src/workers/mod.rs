//! lifecycle-hook's two background loops. Both work from rows, not from
//! sleeping tasks: whatever is due in the database (a delivery attempt, a
//! passed deadline) is claimed with one conditional update and handled, so
//! work survives restarts (an expired deadline fires at start-up) and each
//! piece of work goes to exactly one replica.
//!
//! - [`delivery`]: sends each pending action's message to its target
//!   (signed webhook, NATS JetStream, or the embedded queue), retrying with
//!   backoff until the deadline; [`webhook`] is its HTTP(S) client.
//! - [`deadlines`]: tells the engine when deadlines pass; the engine's
//!   conditional update decides whether the deadline or `complete_lifecycle`
//!   won.
//!
//! With NATS configured, a third loop, [`receivers`], posts what is
//! published for Senlin message receivers to their queues in the engine.

pub mod deadlines;
pub mod delivery;
pub mod receivers;
pub mod webhook;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ember_runtime::channel::Balanced;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::store::PendingActionStore;

/// The longest a loop sleeps without looking at the database. Work this
/// process records wakes its loops at once, and work already in the store
/// is slept until exactly; this only bounds how late a loop sees work that
/// another replica recorded and then died before doing.
pub const MAX_IDLE: Duration = Duration::from_secs(2);

/// The shortest pause between passes over work that is due: a claim that
/// found nothing due (another replica took it) is not retried at once.
const MIN_IDLE: Duration = Duration::from_millis(20);

/// Wakes both loops when new work was recorded or a deadline moved.
#[derive(Clone, Default)]
pub struct Wake {
    delivery: Arc<Notify>,
    deadlines: Arc<Notify>,
}

impl Wake {
    pub fn notify(&self) {
        self.delivery.notify_one();
        self.deadlines.notify_one();
    }
}

/// What the loops need besides the store.
pub struct WorkerConfig {
    pub engine_url: String,
    pub internal_credential: String,
    pub webhook_secret: String,
    pub nats_url: String,
    pub webhook_ca_file: String,
    pub webhook_targets: ember_runtime::egress::EgressRules,
    pub receivers: crate::config::ReceiverStreamConfig,
}

/// The engine's channel; `None` when no URL is configured.
fn engine_channel(engine_url: &str) -> Result<Option<Balanced>, String> {
    if engine_url.is_empty() {
        return Ok(None);
    }
    ember_runtime::channel::balanced(engine_url, |endpoint| {
        endpoint
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true)
    })
    .map(Some)
    .map_err(|error| format!("lifecycle_hook.engine_url {engine_url:?} is invalid: {error}"))
}

/// Starts the loops; they stop with `shutdown`.
pub fn spawn(
    store: Arc<dyn PendingActionStore>,
    config: WorkerConfig,
    wake: Wake,
    shutdown: CancellationToken,
) -> Result<(), String> {
    let engine = engine_channel(&config.engine_url)?;
    let credential = ember_runtime::identity::InternalCredential::new(&config.internal_credential);
    // Without NATS there is no consumer: receivers are fed by REST only.
    let feed = receivers::ReceiverFeed::new(
        &config.nats_url,
        config.receivers,
        engine.clone(),
        credential.clone(),
    );
    let deliverer = delivery::Deliverer::new(
        store.clone(),
        config.webhook_secret.into_bytes(),
        config.nats_url,
        &config.webhook_ca_file,
        config.webhook_targets,
    )?;
    let firer = deadlines::DeadlineFirer::new(store, engine, credential);
    tokio::spawn(deliverer.run(wake.delivery.clone(), shutdown.clone()));
    if let Some(feed) = feed {
        tokio::spawn(feed.run(shutdown.clone()));
    }
    tokio::spawn(firer.run(wake.deadlines, shutdown));
    Ok(())
}

/// The loop both workers run until shutdown: a `pass` (named `what` in the
/// log when it fails); another at once if it claimed a full `batch`. Else
/// it asks `due` (the loop's own kind of work in the store) when the next
/// is due and sleeps until then, a wake-up, or [`MAX_IDLE`] — reading,
/// not claiming, while nothing is due: at rest a loop costs one read per
/// [`MAX_IDLE`].
async fn run_passes<Pass, Due>(
    what: &str,
    batch: u64,
    pass: impl Fn() -> Pass,
    due: impl Fn() -> Due,
    wake: &Notify,
    shutdown: &CancellationToken,
) where
    Pass: Future<Output = crate::Result<usize>>,
    Due: Future<Output = crate::Result<Option<DateTime<Utc>>>>,
{
    let mut pass_now = true;
    loop {
        if pass_now {
            let full = match pass().await {
                Ok(claimed) => claimed == batch as usize,
                Err(error) => {
                    warn!(%error, "lifecycle {what} pass failed");
                    false
                }
            };
            if full && !shutdown.is_cancelled() {
                continue;
            }
        }
        let due = match due().await {
            Ok(due) => due,
            Err(error) => {
                warn!(%error, "cannot read when lifecycle {what} work is next due");
                // Passes go on as if something were due.
                Some(ember_runtime::time::now())
            }
        };
        match idle(due, wake, shutdown).await {
            Idle::Shutdown => return,
            Idle::Woken => pass_now = true,
            Idle::Slept => {
                pass_now = due.is_some_and(|due| due <= ember_runtime::time::now());
            }
        }
    }
}

/// How an idle wait ended.
#[derive(Debug, PartialEq)]
enum Idle {
    Shutdown,
    Woken,
    Slept,
}

/// How long to sleep when the next work is `due` at `now`.
fn pause_until(due: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Duration {
    due.map(|due| (due - now).to_std().unwrap_or_default())
        .unwrap_or(MAX_IDLE)
        .clamp(MIN_IDLE, MAX_IDLE)
}

/// Sleeps until `due` (at most [`MAX_IDLE`]), a wake-up, or shutdown.
async fn idle(due: Option<DateTime<Utc>>, wake: &Notify, shutdown: &CancellationToken) -> Idle {
    let pause = pause_until(due, ember_runtime::time::now());
    tokio::select! {
        () = shutdown.cancelled() => Idle::Shutdown,
        () = wake.notified() => Idle::Woken,
        () = tokio::time::sleep(pause) => Idle::Slept,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_sleeps_until_its_work_is_due_and_looks_again_within_max_idle() {
        let now = ember_runtime::time::now();
        let later = |millis| now + chrono::Duration::milliseconds(millis);
        assert_eq!(pause_until(None, now), MAX_IDLE);
        assert_eq!(
            pause_until(Some(later(300)), now),
            Duration::from_millis(300)
        );
        assert_eq!(pause_until(Some(later(3_600_000)), now), MAX_IDLE);
        // Due already (another replica's claim just ran out): soon, not
        // at once.
        assert_eq!(pause_until(Some(now), now), MIN_IDLE);
        assert_eq!(pause_until(Some(later(-5_000)), now), MIN_IDLE);
    }

    /// At rest a loop reads when work is due and claims nothing; a wake-up
    /// or work coming due makes it pass.
    #[tokio::test(start_paused = true)]
    async fn a_loop_at_rest_reads_and_passes_only_when_woken_or_due() {
        use std::sync::Mutex;
        let passes = Mutex::new(0_usize);
        let reads = Mutex::new(0_usize);
        let due_at = Mutex::new(None::<DateTime<Utc>>);
        let wake = Notify::new();
        let shutdown = CancellationToken::new();
        let count = |counter: &Mutex<usize>| *counter.lock().expect("counter") += 1;
        let pass = || {
            count(&passes);
            async { Ok(0) }
        };
        let due = || {
            count(&reads);
            let due = *due_at.lock().expect("due");
            async move { Ok(due) }
        };
        let counts = || (*passes.lock().expect("p"), *reads.lock().expect("r"));
        let script = async {
            // Start-up: one pass, then reads only.
            tokio::time::sleep(MAX_IDLE * 3 + MAX_IDLE / 2).await;
            assert_eq!(counts(), (1, 4));
            wake.notify_one();
            tokio::time::sleep(MIN_IDLE).await;
            assert_eq!(counts(), (2, 5));
            // Work comes due (recorded by another replica: no wake-up).
            *due_at.lock().expect("due") =
                Some(ember_runtime::time::now() - chrono::Duration::seconds(1));
            tokio::time::sleep(MAX_IDLE - Duration::from_millis(100)).await;
            assert_eq!(counts().0, 2, "not seen before the next read");
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert!(counts().0 >= 3, "passed once seen: {:?}", counts());
            shutdown.cancel();
        };
        tokio::join!(run_passes("test", 10, pass, due, &wake, &shutdown), script);
    }
}
