//! The audit trail, as the services write and read it (records in
//! `domain::audit`, rows in `store::audit`).
//!
//! - Locks taken or renewed, unlocks and expiries are recorded by the code
//!   that makes them, once they are accepted — an expiry, and a stack's
//!   lock change, in the very transaction that makes it
//!   ([`AuditTrail::record_of`] builds the record a store writes).
//! - Every refusal by admission of a user's operation is recorded with
//!   what refused it ([`Auditing::admitted`]: the one way the services
//!   ask admission).
//! - A **break-glass**: an admin's call carrying a reason
//!   (`X-Ember-Break-Glass`, checked at the gateway's door) runs an
//!   operation a lock refused, when nothing but the lock stood in its way;
//!   the lock stays. It is recorded *before* the operation runs and the
//!   operation is refused if the record cannot be written: nobody breaks a
//!   lock unseen; one through a lifecycle plug-in, before the run goes
//!   past it. The records not written with what they record (refusals,
//!   cluster and instance lock changes) follow it, and a failure to write
//!   one is logged (and counted) without undoing what happened.
//!
//! Reading: a caller reads their project's records; an admin may ask for
//! every project's. Nothing changes or removes a record but retention.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ember_runtime::Identity;
use ember_runtime::call_context::CallContext;

use crate::domain::admission::{self, Blocker};
use crate::domain::audit::{AuditOutcome, AuditQuery, AuditRecord, AuditSubject};
use crate::error::{Error, Result};
use crate::store::audit::AuditStore;

/// How many of the latest break-glass records are remembered so that an
/// operation admitted twice in one call (before its lease and under it)
/// is recorded once.
const RECENT_BREAKS: usize = 256;

pub struct AuditTrail {
    store: Arc<dyn AuditStore>,
    recent_breaks: Mutex<VecDeque<BreakKey>>,
    /// Records that could not be written (logged each time).
    pub lost: AtomicU64,
}

/// A break-glass, for recording it once: the request, the target, the
/// operation and what was broken through.
type BreakKey = (String, String, String, String);

/// What an operation is, for the records about it.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    pub caller: &'a Identity,
    /// `delete`, `scale out`, …
    pub operation: &'a str,
}

impl AuditTrail {
    pub fn new(store: Arc<dyn AuditStore>) -> Arc<AuditTrail> {
        Arc::new(AuditTrail {
            store,
            recent_breaks: Mutex::new(VecDeque::new()),
            lost: AtomicU64::new(0),
        })
    }

    /// The record of `operation` on `subject` now, for a store to write
    /// together with what it records.
    pub fn record_of(
        user_id: &str,
        subject: &AuditSubject,
        operation: &str,
        outcome: AuditOutcome,
        reason: &str,
        blocker: &str,
    ) -> AuditRecord {
        AuditRecord {
            id: uuid::Uuid::now_v7(),
            at: ember_runtime::time::now(),
            project_id: subject.project_id.clone(),
            user_id: user_id.to_owned(),
            target: subject.target,
            target_id: subject.id.clone(),
            target_name: subject.name.clone(),
            operation: operation.to_owned(),
            outcome,
            reason: reason.to_owned(),
            blocker: blocker.to_owned(),
            request_id: CallContext::current().request_id,
        }
    }

    /// Writes a record after the fact: a failure is logged, not returned.
    pub async fn record(
        &self,
        user_id: &str,
        subject: &AuditSubject,
        operation: &str,
        outcome: AuditOutcome,
        reason: &str,
        blocker: &str,
    ) {
        let record = Self::record_of(user_id, subject, operation, outcome, reason, blocker);
        if let Err(error) = self.store.append_audit(&record).await {
            self.lost.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                %error,
                target = subject.target.as_str(),
                target_id = %subject.id,
                operation,
                outcome = outcome.as_str(),
                user_id,
                "an audit record could not be written"
            );
        }
    }

    /// Records an admin breaking through `blocker` for `reason`, before the
    /// operation runs: `Err` (and the operation refused) when it cannot be
    /// written. Once per call, target, operation and blocker.
    pub(crate) async fn record_break(
        &self,
        asked: Asked<'_>,
        subject: &AuditSubject,
        reason: &str,
        blocker: &str,
    ) -> Result<()> {
        let request_id = CallContext::current().request_id;
        let key = (
            request_id,
            subject.id.clone(),
            asked.operation.to_owned(),
            blocker.to_owned(),
        );
        if !key.0.is_empty() {
            let recent = self
                .recent_breaks
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if recent.contains(&key) {
                return Ok(());
            }
        }
        let record = Self::record_of(
            &asked.caller.user_id,
            subject,
            asked.operation,
            AuditOutcome::BrokeGlass,
            reason,
            blocker,
        );
        self.store.append_audit(&record).await.map_err(|error| {
            Error::Unavailable(format!(
                "the break-glass was not recorded, so the operation was not run: {error}"
            ))
        })?;
        tracing::warn!(
            user_id = %asked.caller.user_id,
            target = subject.target.as_str(),
            target_id = %subject.id,
            operation = asked.operation,
            reason,
            blocker,
            "break-glass: an admin ran an operation through a lock or a lifecycle plug-in"
        );
        if !key.0.is_empty() {
            let mut recent = self
                .recent_breaks
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if recent.len() == RECENT_BREAKS {
                recent.pop_front();
            }
            recent.push_back(key);
        }
        Ok(())
    }

    /// The records `query` selects for `caller`: their project's, or with
    /// `all_projects` (admins only) every project's.
    pub async fn list(
        &self,
        caller: &Identity,
        query: AuditQuery,
        all_projects: bool,
    ) -> Result<Vec<AuditRecord>> {
        let mut query = query.checked()?;
        query.project_id = if all_projects {
            if !caller.is_admin() {
                return Err(Error::Forbidden(format!(
                    "user {:?}: only an admin may read every project's audit records",
                    caller.user_id
                )));
            }
            None
        } else {
            Some(caller.project_id.clone())
        };
        self.store.list_audit(&query).await
    }
}

/// A service's auditing: the trail it writes to, given when the service
/// is made so that it records from its first request and its first sweep,
/// or none — a service made without one (unit tests) records nothing and
/// honours no break-glass.
pub struct Auditing(Option<Arc<AuditTrail>>);

impl Auditing {
    pub fn new(trail: Option<Arc<AuditTrail>>) -> Auditing {
        Auditing(trail)
    }

    pub fn get(&self) -> Option<&Arc<AuditTrail>> {
        self.0.as_ref()
    }

    /// [`AuditTrail::record`], when the service has a trail.
    pub async fn record(
        &self,
        user_id: &str,
        subject: &AuditSubject,
        operation: &str,
        outcome: AuditOutcome,
        reason: &str,
        blocker: &str,
    ) {
        if let Some(trail) = self.get() {
            trail
                .record(user_id, subject, operation, outcome, reason, blocker)
                .await;
        }
    }

    /// Records `refusal` of a user's operation on `subject` (a 409 or 403;
    /// other errors are not refusals).
    pub async fn refused(&self, asked: Asked<'_>, subject: &AuditSubject, refusal: &Error) {
        if matches!(refusal, Error::Conflict(_) | Error::Forbidden(_)) {
            self.record(
                &asked.caller.user_id,
                subject,
                asked.operation,
                AuditOutcome::Refused,
                "",
                &refusal.to_string(),
            )
            .await;
        }
    }

    /// Records an admin acting through `blocker` as the rules allow (Nova
    /// lets an admin act on a locked instance), with the call's
    /// break-glass reason if it gave one: before the operation, which is
    /// refused if the record cannot be written.
    pub async fn broke_through(
        &self,
        asked: Asked<'_>,
        subject: &AuditSubject,
        blocker: &str,
    ) -> Result<()> {
        let Some(trail) = self.get() else {
            return Ok(());
        };
        let reason = CallContext::current().break_glass.unwrap_or_default();
        trail.record_break(asked, subject, &reason, blocker).await
    }

    /// What admission's `blockers` of a user's operation become: `Ok` for
    /// none; the first as the refusal (409, 403) of an operation on a
    /// stack, cluster, node or instance (`subject`), recorded with its
    /// blocker — unless the caller is an admin breaking glass and every
    /// blocker is a maintenance lock the operation may break (`breakable`,
    /// see `admission::through_locks`): then the break-glass is recorded
    /// and the operation goes on. Any other error (not found, bad input)
    /// passes unrecorded.
    pub async fn admitted(
        &self,
        asked: Asked<'_>,
        subject: impl FnOnce() -> Option<AuditSubject>,
        blockers: &[Blocker],
        breakable: bool,
    ) -> Result<()> {
        let refusal = match admission::first(blockers) {
            Ok(()) => return Ok(()),
            Err(error @ (Error::Conflict(_) | Error::Forbidden(_))) => error,
            Err(other) => return Err(other),
        };
        let (Some(trail), Some(subject)) = (self.get(), subject()) else {
            return Err(refusal);
        };
        let context = CallContext::current();
        let refusal = match context.break_glass {
            Some(reason) if asked.caller.is_admin() => {
                match admission::through_locks(blockers, breakable) {
                    Ok(()) => {
                        trail
                            .record_break(asked, &subject, &reason, &refusal.to_string())
                            .await?;
                        return Ok(());
                    }
                    Err(other) => other,
                }
            }
            _ => refusal,
        };
        self.refused(asked, &subject, &refusal).await;
        Err(refusal)
    }
}
