//! The action dispatcher: claims READY actions (one transaction that also
//! takes each cluster's lock, so replicas sharing a database never run the
//! same action, nor two actions of one cluster), runs them under a lease it
//! keeps renewing while their task lives, and sweeps up after engines that
//! died: their RUNNING actions, once the lease has expired, are queued
//! again — keeping their cluster's lock — and taken over by the next claim,
//! which runs them from their durable steps (see `execute`), up to
//! [`MAX_RUN_ATTEMPTS`] runs; then they are failed, the cluster settled
//! and its lock released.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};
use uuid::Uuid;

use super::run::{Ran, Run, Stop};
use super::{ClusterService, action_event};
use crate::domain::cluster::{ActionStatus, ClusterAction, MAX_RUN_ATTEMPTS};

/// How long a claimed action stays this engine's without renewal.
pub const ACTION_LEASE: Duration = Duration::from_secs(10);
/// How many actions one engine runs at once.
pub const MAX_RUNNING_ACTIONS: usize = 64;
/// How often leases are renewed and dead engines' work is swept.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);
/// How long an idle dispatcher waits before looking for work nobody told
/// it of: an action another engine queued and left READY (the engine that
/// queues an action wakes its own dispatcher, so this bounds only how late
/// work is picked up from an engine that queued it and died at once).
const IDLE_POLL: Duration = Duration::from_secs(2);

/// The dispatcher's timings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatcherSettings {
    /// How long a claim holds without renewal.
    pub action_lease: Duration,
    /// How often leases are renewed and expired ones swept; well under the
    /// lease.
    pub sweep_interval: Duration,
    /// How many actions one engine runs at once.
    pub max_running: usize,
    /// How long an idle dispatcher waits for work it was not woken for:
    /// actions queued by another engine (this engine's own requests, ends
    /// and freed run slots wake it at once).
    pub idle_poll: Duration,
    /// How many actions may run or wait on one cluster: one more is
    /// refused (409, naming them) instead of queueing without bound.
    pub max_queued_per_cluster: usize,
}

/// The default of [`DispatcherSettings::max_queued_per_cluster`].
pub const MAX_QUEUED_PER_CLUSTER: usize = 16;

impl Default for DispatcherSettings {
    fn default() -> Self {
        DispatcherSettings {
            action_lease: ACTION_LEASE,
            sweep_interval: SWEEP_INTERVAL,
            max_running: MAX_RUNNING_ACTIONS,
            idle_poll: IDLE_POLL,
            max_queued_per_cluster: MAX_QUEUED_PER_CLUSTER,
        }
    }
}

impl ClusterService {
    fn lease_until(&self) -> chrono::DateTime<chrono::Utc> {
        ember_runtime::time::now()
            + chrono::Duration::from_std(self.dispatcher.action_lease)
                .unwrap_or(chrono::Duration::seconds(10))
    }
}

/// The actions this engine's tasks are running: only their leases are
/// renewed, so an action whose task ended without finishing it (a database
/// error on the last write) expires and is taken over.
#[derive(Clone, Default)]
struct Running(Arc<Mutex<HashSet<Uuid>>>);

/// Held by a run's task: the action's lease is renewed while it lives.
struct RunningGuard {
    running: Running,
    action_id: Uuid,
}

impl Running {
    fn hold(&self, action_id: Uuid) -> RunningGuard {
        if let Ok(mut ids) = self.0.lock() {
            ids.insert(action_id);
        }
        RunningGuard {
            running: self.clone(),
            action_id,
        }
    }

    fn ids(&self) -> Vec<Uuid> {
        self.0
            .lock()
            .map(|ids| ids.iter().copied().collect())
            .unwrap_or_default()
    }
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        if let Ok(mut ids) = self.running.0.lock() {
            ids.remove(&self.action_id);
        }
    }
}

/// Starts the dispatcher and the sweeper; they stop with `shutdown`, and
/// the runs under way are abandoned then (their leases expire and another
/// engine, or this one after a restart, takes them over).
pub fn spawn(service: Arc<ClusterService>, shutdown: CancellationToken) {
    super::health::spawn(service.clone(), shutdown.clone());
    super::locks::spawn_expiry(service.clone(), shutdown.clone());
    let running = Running::default();
    tokio::spawn(dispatch_loop(
        service.clone(),
        running.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(sweep_loop(service, running, shutdown));
}

async fn dispatch_loop(
    service: Arc<ClusterService>,
    running: Running,
    shutdown: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(service.dispatcher.max_running));
    let mut tasks = JoinSet::new();
    loop {
        while tasks.try_join_next().is_some() {}
        let free = permits.available_permits() as u64;
        let claimed = if free == 0 || shutdown.is_cancelled() {
            Vec::new()
        } else {
            match service
                .store
                .claim_ready_actions(service.engine_id, service.lease_until(), free)
                .await
            {
                Ok(claimed) => claimed,
                Err(error) => {
                    warn!(%error, "cannot claim cluster actions");
                    Vec::new()
                }
            }
        };
        let idle = claimed.is_empty();
        for action in claimed {
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            let service = service.clone();
            let guard = running.hold(action.id);
            tasks.spawn(async move {
                run_one(&service, action).await;
                drop(guard);
                drop(permit);
                // Woken only once the slot is free: a wake before it (at
                // the action's end) found no slot, and the READY work
                // behind it waited for the idle poll.
                service.wake_dispatcher();
            });
        }
        if idle {
            tokio::select! {
                () = shutdown.cancelled() => {
                    tasks.abort_all();
                    return;
                }
                () = service.wake.notified() => {}
                () = tokio::time::sleep(service.dispatcher.idle_poll) => {}
            }
        } else if shutdown.is_cancelled() {
            tasks.abort_all();
            return;
        }
    }
}

async fn run_one(service: &ClusterService, action: ClusterAction) {
    info!(action_id = %action.id, kind = action.kind.as_str(), attempt = action.attempt, "running cluster action");
    let depended_by = action.depended_by.clone();
    let Some(run) = Run::new(action) else {
        warn!("a claimed action has no owner");
        return;
    };
    let (status, reason, change, settle) = match service.execute(&run).await {
        Ok(Ran::Handed) => return,
        Ok(Ran::Finished {
            status,
            reason,
            change,
            settle,
        }) => (status, reason, change, settle),
        Err(Stop::Lost) => {
            warn!(action_id = %run.action.id, attempt = run.fence.attempt, "action was taken from this run: it stops without writing");
            return;
        }
        Err(Stop::Failed(error)) => {
            let (change, settle) = service.failure_finish(&run, &error).await;
            (ActionStatus::Failed, error.to_string(), change, settle)
        }
    };
    let mut change = change;
    change
        .events
        .push(action_event(&run.action, status.as_str(), reason.clone()));
    // Once it ends, the cluster's lock may be free: the dispatcher is woken
    // when the run's slot is (see `dispatch_loop`).
    match service
        .store
        .finish_action(&run.action, status, &reason, &change, &settle)
        .await
    {
        Ok(true) => {}
        Ok(false) => {
            warn!(action_id = %run.action.id, "action was taken from this run before it finished")
        }
        Err(error) => {
            warn!(action_id = %run.action.id, %error, "cannot record the end of an action; its lease will expire and it is taken over")
        }
    }
    for parent in &depended_by {
        finish_parent(service, *parent).await;
    }
}

pub(super) async fn finish_parent(service: &ClusterService, parent: Uuid) {
    match service.store.finish_parent_if_done(parent).await {
        Ok(Some(parent)) => {
            let event = action_event(
                &parent,
                parent.status.as_str(),
                parent.status_reason.clone(),
            );
            if let Err(error) = service.store.record_events(&[event]).await {
                warn!(%error, "cannot record an action event");
            }
            service.wake_dispatcher();
        }
        Ok(None) => {}
        Err(error) => {
            warn!(action_id = %parent, %error, "cannot finish a parent action; the sweeper will")
        }
    }
}

async fn sweep_loop(service: Arc<ClusterService>, running: Running, shutdown: CancellationToken) {
    loop {
        let ids = running.ids();
        if !ids.is_empty()
            && let Err(error) = service
                .store
                .renew_action_leases(service.engine_id, &ids, service.lease_until())
                .await
        {
            warn!(%error, "cannot renew action leases");
        }
        if let Err(error) = sweep(&service).await {
            warn!(%error, "cluster action sweep failed");
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(service.dispatcher.sweep_interval) => {}
        }
    }
}

/// One pass over work other engines (or this one, before a restart) left.
pub async fn sweep(service: &ClusterService) -> crate::error::Result<()> {
    let now = ember_runtime::time::now();
    let mut requeued = false;
    for action in service.store.list_expired_leases(now, 100).await? {
        let requeue =
            action.attempt < MAX_RUN_ATTEMPTS.saturating_add(super::launch::resumed_runs(&action));
        let reason = if requeue {
            "taken over: its engine went away"
        } else {
            "failed: its engine went away while running it, too many times"
        };
        let event = action_event(&action, if requeue { "READY" } else { "FAILED" }, reason);
        if service
            .store
            .recover_expired_action(&action, now, requeue, &event)
            .await?
        {
            warn!(action_id = %action.id, kind = action.kind.as_str(), attempt = action.attempt, requeue, "recovered an action of a dead engine");
            requeued |= requeue;
            if !requeue {
                for parent in &action.depended_by {
                    finish_parent(service, *parent).await;
                }
            }
        }
    }
    for parent in service.store.list_waiting_parents(100).await? {
        finish_parent(service, parent.id).await;
    }
    service.hand_over_unrecorded().await?;
    if requeued {
        service.wake_dispatcher();
    }
    Ok(())
}
