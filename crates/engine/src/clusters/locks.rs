//! Maintenance locks of clusters (see [`crate::domain::cluster::lock`]):
//! taken, changed or renewed, and lifted — by an unlock, or by the engine
//! when the lock's expiry passes.
//!
//! - **Lock** records who, when, how far, why and until when in one
//!   conditional write (where the lock is still what was read), with a
//!   `CLUSTER_LOCK` event. At level `all` each member's instance is locked
//!   as the caller first; an instance someone else had locked already is
//!   left to them (its lock is not this one's to lift), and only those
//!   this lock locked are recorded. Locking again changes the level, the
//!   reason or the expiry (a renewal): the holder may, or an admin.
//! - **Unlock** unlocks the instances this lock locked, then lifts it
//!   (`CLUSTER_UNLOCK`).
//! - **Expiry**: a sweep on every engine finds the locks whose time has
//!   come (an indexed column) and lifts each as its unlock would, the
//!   instances as the lock's holder, then a batch of locks in one
//!   transaction, each by a conditional write with its event
//!   (`CLUSTER_UNLOCK`, "lock expired") and its audit record: exactly one
//!   engine records each expiry, after a restart too. Until the sweep gets to it, an expired lock holds
//!   nothing back (admission reads the expiry).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use ember_runtime::Identity;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};
use uuid::Uuid;

use super::{ClusterService, event};
use crate::domain::admission::cluster::ClusterOperation;
use crate::domain::audit::{AuditOutcome, AuditSubject, AuditTarget};
use crate::domain::cluster::lock::{checked_reason, expiry};
use crate::domain::cluster::{Cluster, ClusterLock, ClusterLockLevel};
use crate::error::{Error, Result};
use crate::store::clusters::ExpiredLift;

/// The most expired locks one sweep lifts (the next takes the rest).
const EXPIRED_PER_SWEEP: u64 = 500;

/// What a lock asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterLockRequest {
    pub level: ClusterLockLevel,
    pub reason: Option<String>,
    /// Seconds from now, or a time; neither = until unlocked.
    pub expires_in: Option<i64>,
    pub expires_at: Option<DateTime<Utc>>,
}

impl ClusterService {
    /// Takes the cluster's maintenance lock, or changes or renews it.
    pub async fn lock_cluster(
        &self,
        caller: &Identity,
        identity: &str,
        request: ClusterLockRequest,
    ) -> Result<Cluster> {
        let reason = checked_reason(request.reason)?;
        let cluster = self.find_cluster(caller, identity).await?;
        self.admit(ClusterOperation::Lock(&cluster), caller).await?;
        let now = ember_runtime::time::now();
        let expires_at = expiry(now, request.expires_in, request.expires_at)?;
        let held = cluster
            .maintenance_lock
            .clone()
            .filter(|lock| lock.holds_at(now));
        // What the instances get: this lock's instances stay, the members
        // are locked at level all, and let go below it.
        let mut kept = held
            .as_ref()
            .map(|lock| lock.locked_instances.clone())
            .unwrap_or_default();
        let mut newly_locked = Vec::new();
        if request.level == ClusterLockLevel::All {
            for uuid in self.member_instances(&cluster).await? {
                if kept.contains(&uuid) {
                    continue;
                }
                match self.instances.lock(caller, uuid, reason.clone()).await {
                    Ok(outcome) if outcome.previous_lock.is_none() => newly_locked.push(uuid),
                    Ok(_) | Err(Error::NotFound(_)) => {}
                    Err(error) => {
                        self.let_go(caller, &newly_locked).await;
                        return Err(Error::Conflict(format!(
                            "cluster {:?} cannot be locked at level all: its member instance {uuid} cannot be locked: {error}",
                            cluster.name
                        )));
                    }
                }
            }
        } else {
            self.let_go(caller, &kept).await;
            kept.clear();
        }
        kept.extend(newly_locked.iter().copied());
        let lock = ClusterLock {
            level: request.level,
            locked_by_user: held.as_ref().map_or_else(
                || caller.user_id.clone(),
                |held| held.locked_by_user.clone(),
            ),
            locked_by_admin: held.as_ref().map_or(caller.is_admin(), |held| {
                held.locked_by_admin || caller.is_admin()
            }),
            locked_at: held.as_ref().map_or(now, |held| held.locked_at),
            reason,
            expires_at,
            locked_instances: kept,
        };
        let verb = if held.is_some() {
            "lock changed"
        } else {
            "locked"
        };
        let recorded = event(
            "CLUSTER",
            cluster.id,
            &cluster.name,
            Some(cluster.id),
            "CLUSTER_LOCK",
            "SUCCEEDED",
            format!("{verb}: {}", lock.describe()),
            caller,
        );
        let written = self
            .store
            .change_cluster_lock(
                cluster.id,
                cluster.maintenance_lock.as_ref(),
                Some(&lock),
                &[recorded],
            )
            .await?;
        if !written {
            self.let_go(caller, &newly_locked).await;
            return Err(Error::Conflict(format!(
                "cluster {:?}'s lock changed while it was being locked: try again",
                cluster.name
            )));
        }
        info!(cluster_id = %cluster.id, lock = %lock.describe(), "cluster locked");
        self.audit
            .record(
                &caller.user_id,
                &audit_subject(&cluster),
                "lock",
                AuditOutcome::Accepted,
                lock.reason.as_deref().unwrap_or_default(),
                "",
            )
            .await;
        Ok(Cluster {
            maintenance_lock: Some(lock),
            ..cluster
        })
    }

    /// Lifts the cluster's maintenance lock (and the instance locks it
    /// took).
    pub async fn unlock_cluster(&self, caller: &Identity, identity: &str) -> Result<Cluster> {
        let cluster = self.find_cluster(caller, identity).await?;
        self.admit(ClusterOperation::Unlock(&cluster), caller)
            .await?;
        let Some(lock) = cluster.maintenance_lock.clone() else {
            return Err(Error::Conflict(format!(
                "cluster {:?} is not locked: there is nothing to unlock",
                cluster.name
            )));
        };
        self.let_go(caller, &lock.locked_instances).await;
        let recorded = event(
            "CLUSTER",
            cluster.id,
            &cluster.name,
            Some(cluster.id),
            "CLUSTER_UNLOCK",
            "SUCCEEDED",
            format!("unlocked (was {})", lock.describe()),
            caller,
        );
        if !self
            .store
            .change_cluster_lock(cluster.id, Some(&lock), None, &[recorded])
            .await?
        {
            return Err(Error::Conflict(format!(
                "cluster {:?}'s lock changed while it was being unlocked: try again",
                cluster.name
            )));
        }
        info!(cluster_id = %cluster.id, "cluster unlocked");
        self.audit
            .record(
                &caller.user_id,
                &audit_subject(&cluster),
                "unlock",
                AuditOutcome::Accepted,
                lock.reason.as_deref().unwrap_or_default(),
                "",
            )
            .await;
        Ok(Cluster {
            maintenance_lock: None,
            ..cluster
        })
    }

    /// Lifts every lock whose expiry has passed; returns how many this
    /// engine lifted (a lock another engine lifted first is not counted).
    /// The instances a level `all` lock locked are unlocked first, as the
    /// lock's holder; then the batch is lifted in one transaction, each
    /// lock with its event and audit record (exactly once, whoever races).
    pub async fn lift_expired_locks(&self) -> Result<usize> {
        let now = ember_runtime::time::now();
        let mut lifts = Vec::new();
        for cluster in self
            .store
            .expired_cluster_locks(now, EXPIRED_PER_SWEEP)
            .await?
        {
            let Some(lock) = cluster.maintenance_lock.clone() else {
                continue;
            };
            // The lock's own holder lifts what it took.
            let holder = crate::lock_expiry::holder(
                &lock.locked_by_user,
                &cluster.project_id,
                lock.locked_by_admin,
            );
            self.let_go(&holder, &lock.locked_instances).await;
            let event = event(
                "CLUSTER",
                cluster.id,
                &cluster.name,
                Some(cluster.id),
                "CLUSTER_UNLOCK",
                "SUCCEEDED",
                format!("lock expired (was {})", lock.describe()),
                &holder,
            );
            let audit = self.audit.get().map(|_| {
                crate::audit::AuditTrail::record_of(
                    &holder.user_id,
                    &audit_subject(&cluster),
                    "unlock",
                    AuditOutcome::Expired,
                    &lock.describe(),
                    "",
                )
            });
            lifts.push(ExpiredLift {
                cluster_id: cluster.id,
                lock,
                event,
                audit,
            });
        }
        let lifted = self.store.lift_expired_cluster_locks(&lifts).await?;
        for cluster_id in &lifted {
            info!(%cluster_id, "cluster lock expired and lifted");
        }
        Ok(lifted.len())
    }

    /// The instances behind the cluster's member nodes.
    async fn member_instances(&self, cluster: &Cluster) -> Result<Vec<Uuid>> {
        Ok(self
            .store
            .list_cluster_nodes(cluster.id)
            .await?
            .into_iter()
            .filter_map(|node| node.physical_id)
            .filter_map(|physical| Uuid::parse_str(&physical).ok())
            .collect())
    }

    /// Unlocks `instances` as `caller`; one gone or unlocked already is
    /// let go (it is no longer this lock's), any other failure is logged.
    async fn let_go(&self, caller: &Identity, instances: &[Uuid]) {
        for uuid in instances {
            match self.instances.unlock(caller, *uuid).await {
                // Gone, or unlocked by someone since: no longer this lock's.
                Ok(_) | Err(Error::NotFound(_) | Error::Conflict(_)) => {}
                Err(error) => {
                    warn!(instance_uuid = %uuid, %error, "cannot unlock an instance a cluster lock had locked");
                }
            }
        }
    }
}

/// Lifts expired locks until `shutdown` (see `lock_expiry::spawn_sweep`).
pub(super) fn spawn_expiry(service: Arc<ClusterService>, shutdown: CancellationToken) {
    crate::lock_expiry::spawn_sweep(
        &service,
        shutdown,
        "cluster locks",
        |service| async move { service.lift_expired_locks().await },
        |service| async move { service.store.next_cluster_lock_expiry().await },
    );
}

/// What the audit trail says a record about `cluster` is about.
fn audit_subject(cluster: &Cluster) -> AuditSubject {
    AuditSubject {
        target: AuditTarget::Cluster,
        id: cluster.id.to_string(),
        name: cluster.name.clone(),
        project_id: cluster.project_id.clone(),
    }
}
