//! The action dispatcher: claims READY actions (one conditional update
//! each, so replicas sharing a database never run the same action), runs
//! them under a lease it keeps renewing, and sweeps up after engines that
//! died: their RUNNING actions, once the lease has expired, are taken over
//! (idempotent node deletes) or failed with a reason that says so.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::execute::Ran;
use super::{ClusterService, action_event};
use crate::domain::cluster::{ActionStatus, ClusterAction};

/// How long a claimed action stays this engine's without renewal.
pub const ACTION_LEASE: Duration = Duration::from_secs(10);
/// How many actions one engine runs at once.
pub const MAX_RUNNING_ACTIONS: usize = 64;
/// How often leases are renewed and dead engines' work is swept.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

fn lease_until() -> chrono::DateTime<chrono::Utc> {
    ember_runtime::time::now()
        + chrono::Duration::from_std(ACTION_LEASE).unwrap_or(chrono::Duration::seconds(10))
}

/// Starts the dispatcher and the sweeper; they stop with `shutdown`.
pub fn spawn(service: Arc<ClusterService>, shutdown: CancellationToken) {
    tokio::spawn(dispatch_loop(service.clone(), shutdown.clone()));
    tokio::spawn(sweep_loop(service, shutdown));
}

async fn dispatch_loop(service: Arc<ClusterService>, shutdown: CancellationToken) {
    let permits = Arc::new(Semaphore::new(MAX_RUNNING_ACTIONS));
    loop {
        let free = permits.available_permits() as u64;
        let claimed = if free == 0 {
            Vec::new()
        } else {
            match service
                .store
                .claim_ready_actions(service.engine_id, lease_until(), free)
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
            tokio::spawn(async move {
                run_one(&service, action).await;
                drop(permit);
            });
        }
        if idle {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = service.wake.notified() => {}
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        } else if shutdown.is_cancelled() {
            return;
        }
    }
}

async fn run_one(service: &ClusterService, action: ClusterAction) {
    info!(action_id = %action.id, kind = action.kind.as_str(), "running cluster action");
    let outcome = service.execute(&action).await;
    let (status, reason) = match outcome {
        Ok(Ran::Waiting) => return,
        Ok(Ran::Succeeded(reason)) => (ActionStatus::Succeeded, reason),
        Err(error) => (ActionStatus::Failed, error.to_string()),
    };
    let event = action_event(&action, status.as_str(), reason.clone());
    match service
        .store
        .finish_action(&action, service.engine_id, status, &reason, &[event])
        .await
    {
        Ok(true) => {}
        Ok(false) => {
            warn!(action_id = %action.id, "action was taken from this engine before it finished")
        }
        Err(error) => {
            warn!(action_id = %action.id, %error, "cannot record the end of an action; its lease will expire")
        }
    }
    for parent in &action.depended_by {
        finish_parent(service, *parent).await;
    }
}

async fn finish_parent(service: &ClusterService, parent: uuid::Uuid) {
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
        }
        Ok(None) => {}
        Err(error) => {
            warn!(action_id = %parent, %error, "cannot finish a parent action; the sweeper will")
        }
    }
}

async fn sweep_loop(service: Arc<ClusterService>, shutdown: CancellationToken) {
    loop {
        if let Err(error) = service
            .store
            .renew_action_leases(service.engine_id, lease_until())
            .await
        {
            warn!(%error, "cannot renew action leases");
        }
        if let Err(error) = sweep(&service).await {
            warn!(%error, "cluster action sweep failed");
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(SWEEP_INTERVAL) => {}
        }
    }
}

/// One pass over work other engines (or this one, before a restart) left.
pub async fn sweep(service: &ClusterService) -> crate::error::Result<()> {
    let now = ember_runtime::time::now();
    let mut requeued = false;
    for action in service.store.list_expired_leases(now, 100).await? {
        let requeue = action.kind.can_be_taken_over();
        let reason = if requeue {
            "taken over: its engine went away"
        } else {
            "failed: its engine went away while running it"
        };
        let event = action_event(&action, if requeue { "READY" } else { "FAILED" }, reason);
        if service
            .store
            .recover_expired_action(&action, now, requeue, &event)
            .await?
        {
            warn!(action_id = %action.id, kind = action.kind.as_str(), requeue, "recovered an action of a dead engine");
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
