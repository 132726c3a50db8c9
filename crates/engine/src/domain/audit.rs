//! The audit trail: who locked, unlocked, was refused by, or broke through
//! a maintenance lock, and when a lock expired. Append-only — nothing
//! edits a record through the API; only retention removes the old ones —
//! and per project: a record is read only within its project (admins
//! read every project's).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::{Error, Result};

/// What kind of object a record is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuditTarget {
    Stack,
    Cluster,
    Node,
    Instance,
}

impl AuditTarget {
    pub const ALL: [AuditTarget; 4] = [
        AuditTarget::Stack,
        AuditTarget::Cluster,
        AuditTarget::Node,
        AuditTarget::Instance,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AuditTarget::Stack => "stack",
            AuditTarget::Cluster => "cluster",
            AuditTarget::Node => "node",
            AuditTarget::Instance => "instance",
        }
    }

    pub fn parse(text: &str) -> Result<AuditTarget> {
        AuditTarget::ALL
            .into_iter()
            .find(|target| target.as_str() == text)
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "target_type {text:?} is not one of stack, cluster, node, instance"
                ))
            })
    }
}

/// How the operation a record is about ended at the door.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuditOutcome {
    /// It was accepted (a lock taken or renewed, an unlock begun).
    Accepted,
    /// It was refused: the record's `blocker` says by what.
    Refused,
    /// The engine lifted a lock whose expiry passed.
    Expired,
    /// An admin ran it through what would have refused it (the record's
    /// `blocker`), for the record's `reason`.
    BrokeGlass,
    /// A lifecycle plug-in in observe mode would have refused it (the
    /// record's `blocker`); it was not enforced.
    Observed,
}

impl AuditOutcome {
    pub const ALL: [AuditOutcome; 5] = [
        AuditOutcome::Accepted,
        AuditOutcome::Refused,
        AuditOutcome::Expired,
        AuditOutcome::BrokeGlass,
        AuditOutcome::Observed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AuditOutcome::Accepted => "accepted",
            AuditOutcome::Refused => "refused",
            AuditOutcome::Expired => "expired",
            AuditOutcome::BrokeGlass => "broke_glass",
            AuditOutcome::Observed => "observed",
        }
    }

    pub fn parse(text: &str) -> Result<AuditOutcome> {
        AuditOutcome::ALL
            .into_iter()
            .find(|outcome| outcome.as_str() == text)
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "outcome {text:?} is not one of accepted, refused, expired, broke_glass, observed"
                ))
            })
    }
}

/// One entry of the trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    pub id: Uuid,
    pub at: DateTime<Utc>,
    /// The project of the target (not of the caller: an admin acting on
    /// another project's stack is recorded in that project).
    pub project_id: String,
    /// Who asked; the engine's own work (an expiry) names the lock's
    /// holder, on whose behalf it acted.
    pub user_id: String,
    pub target: AuditTarget,
    pub target_id: String,
    pub target_name: String,
    /// `lock`, `unlock`, `delete`, `scale out`, …
    pub operation: String,
    pub outcome: AuditOutcome,
    /// Why: the lock's reason for a lock, the admin's for a break-glass.
    pub reason: String,
    /// What refused the operation, or what a break-glass broke through.
    pub blocker: String,
    /// The gateway's `x-request-id` of the call (empty for the engine's
    /// own work).
    pub request_id: String,
}

/// What a record is about, as the code that writes it knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditSubject {
    pub target: AuditTarget,
    pub id: String,
    pub name: String,
    pub project_id: String,
}

/// Which records a reader asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// `None`: every project's (admins only; decided by the caller).
    pub project_id: Option<String>,
    pub target: Option<AuditTarget>,
    /// An id, or a name (records name both).
    pub target_id: Option<String>,
    pub outcome: Option<AuditOutcome>,
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    /// Records after this one (by time, then id), newest first.
    pub marker: Option<Uuid>,
    pub limit: u64,
}

/// The most records one page holds.
pub const MAX_PAGE: u64 = 1000;
/// A page's size when none is asked.
pub const DEFAULT_PAGE: u64 = 100;

impl AuditQuery {
    /// Checks what a reader asked: a limit in 1..=[`MAX_PAGE`] (0 is the
    /// default), a window that is not upside down.
    pub fn checked(mut self) -> Result<AuditQuery> {
        if self.limit == 0 {
            self.limit = DEFAULT_PAGE;
        }
        if self.limit > MAX_PAGE {
            return Err(Error::InvalidInput(format!(
                "limit {} is more than {MAX_PAGE}",
                self.limit
            )));
        }
        if let (Some(since), Some(until)) = (self.since, self.until)
            && since > until
        {
            return Err(Error::InvalidInput(format!(
                "since ({}) is after until ({})",
                since.to_rfc3339(),
                until.to_rfc3339()
            )));
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_named() {
        for target in AuditTarget::ALL {
            assert_eq!(AuditTarget::parse(target.as_str()).ok(), Some(target));
        }
        for outcome in AuditOutcome::ALL {
            assert_eq!(AuditOutcome::parse(outcome.as_str()).ok(), Some(outcome));
        }
        let error = AuditTarget::parse("volume").expect_err("not a target");
        assert!(error.to_string().contains("\"volume\""), "{error}");
    }

    #[test]
    fn a_query_is_checked() {
        let query = AuditQuery::default().checked().expect("defaults");
        assert_eq!(query.limit, DEFAULT_PAGE);
        let too_many = AuditQuery {
            limit: MAX_PAGE + 1,
            ..AuditQuery::default()
        };
        assert!(too_many.checked().is_err());
        let now = Utc::now();
        let upside_down = AuditQuery {
            since: Some(now),
            until: Some(now - chrono::Duration::seconds(1)),
            ..AuditQuery::default()
        };
        assert!(upside_down.checked().is_err());
    }
}
