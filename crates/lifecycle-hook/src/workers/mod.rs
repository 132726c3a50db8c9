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

/// The longest a loop sleeps without looking at the database: another
/// replica may have recorded work this one was not woken for.
pub const MAX_IDLE: Duration = Duration::from_millis(500);

/// The shortest pause: work due now may be the other loop's (the store's
/// next-due moment covers deliveries and deadlines alike).
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
/// log when it fails); another at once if it claimed a full `batch`, else an
/// idle wait until the store's next due moment or a wake-up.
async fn run_passes<Pass: Future<Output = crate::Result<usize>>>(
    what: &str,
    batch: u64,
    pass: impl Fn() -> Pass,
    store: &dyn PendingActionStore,
    wake: &Notify,
    shutdown: &CancellationToken,
) {
    loop {
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
        let due = store.next_due().await.ok().flatten();
        if !idle(due, wake, shutdown).await {
            return;
        }
    }
}

/// Sleeps until `due` (at most [`MAX_IDLE`]), a wake-up, or shutdown;
/// returns false on shutdown.
async fn idle(due: Option<DateTime<Utc>>, wake: &Notify, shutdown: &CancellationToken) -> bool {
    let pause = due
        .map(|due| {
            (due - ember_runtime::time::now())
                .to_std()
                .unwrap_or_default()
        })
        .unwrap_or(MAX_IDLE)
        .clamp(MIN_IDLE, MAX_IDLE);
    tokio::select! {
        () = shutdown.cancelled() => false,
        () = wake.notified() => true,
        () = tokio::time::sleep(pause) => true,
    }
}
