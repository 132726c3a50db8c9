//! A cluster's maintenance lock: while it holds, nothing changes the
//! cluster's size, members or policies — neither a user nor Ember's own
//! automation (receivers and their webhooks, recover) — until it is
//! lifted by an unlock or by its expiry. The stack lock's semantics
//! (spec heat-lock-stack), on clusters: level `clusters` locks Ember's own
//! operations on the cluster, level `all` also locks each member's
//! instance (the instance's own, Nova-style lock); an admin's lock is
//! changed or lifted only by an admin.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{Error, Result};

/// How far a cluster's lock reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClusterLockLevel {
    /// Ember's operations on the cluster; the members' machines stay
    /// usable.
    Clusters,
    /// Also each member's instance.
    All,
}

impl ClusterLockLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterLockLevel::Clusters => "clusters",
            ClusterLockLevel::All => "all",
        }
    }

    /// The level named (`clusters` when none is).
    pub fn parse(text: &str) -> Result<ClusterLockLevel> {
        match text {
            "" | "clusters" => Ok(ClusterLockLevel::Clusters),
            "all" => Ok(ClusterLockLevel::All),
            other => Err(Error::InvalidInput(format!(
                "level: {other:?} is not a lock level (clusters or all)"
            ))),
        }
    }
}

/// The longest a lock's reason may be.
pub const MAX_REASON_CHARS: usize = 255;

/// The longest a lock may be set to last (a lock is meant to end; one
/// that must last longer is renewed).
pub const MAX_LOCK_SECONDS: i64 = 366 * 24 * 3600;

/// Who locked a cluster, when, how far, why, and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterLock {
    pub level: ClusterLockLevel,
    pub locked_by_user: String,
    /// An admin's lock is changed or lifted only by an admin.
    pub locked_by_admin: bool,
    pub locked_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the engine lifts it, unless it is renewed or lifted before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// The members' instances a level `all` lock locked (and its unlock
    /// or expiry unlocks: no more, no less).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locked_instances: Vec<Uuid>,
}

impl ClusterLock {
    /// Whether it still holds at `now` (an expired lock the sweep has not
    /// lifted yet holds nothing back).
    pub fn holds_at(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_none_or(|expires_at| expires_at > now)
    }

    /// `level all, by admin "ops" at 2026-11-29T05:00:00Z until
    /// 2026-11-29T09:00:00Z: database maintenance`
    pub fn describe(&self) -> String {
        crate::domain::stack::describe_lock(
            self.level.as_str(),
            self.locked_by_admin,
            &self.locked_by_user,
            self.locked_at,
            self.expires_at,
            self.reason.as_deref(),
        )
    }
}

/// When a lock asked for at `now` expires: `expires_in` seconds from now,
/// or at `expires_at`; never both, never in the past, never beyond
/// [`MAX_LOCK_SECONDS`].
pub fn expiry(
    now: DateTime<Utc>,
    expires_in: Option<i64>,
    expires_at: Option<DateTime<Utc>>,
) -> Result<Option<DateTime<Utc>>> {
    let at = match (expires_in, expires_at) {
        (Some(_), Some(_)) => {
            return Err(Error::InvalidInput(
                "give expires_in or expires_at, not both".to_owned(),
            ));
        }
        (Some(seconds), None) => {
            if seconds <= 0 {
                return Err(Error::InvalidInput(format!(
                    "expires_in: {seconds} is not a positive number of seconds"
                )));
            }
            if seconds > MAX_LOCK_SECONDS {
                return Err(Error::InvalidInput(format!(
                    "expires_in: {seconds} seconds is longer than a lock may last ({MAX_LOCK_SECONDS} s): renew it instead"
                )));
            }
            now + chrono::Duration::seconds(seconds)
        }
        (None, Some(at)) => {
            if at <= now {
                return Err(Error::InvalidInput(format!(
                    "expires_at: {} is not in the future",
                    at.format("%Y-%m-%dT%H:%M:%SZ")
                )));
            }
            if at - now > chrono::Duration::seconds(MAX_LOCK_SECONDS) {
                return Err(Error::InvalidInput(format!(
                    "expires_at: {} is further away than a lock may last ({MAX_LOCK_SECONDS} s): renew it instead",
                    at.format("%Y-%m-%dT%H:%M:%SZ")
                )));
            }
            at
        }
        (None, None) => return Ok(None),
    };
    Ok(Some(at))
}

/// A lock's reason: 1 to [`MAX_REASON_CHARS`] characters when given.
pub fn checked_reason(reason: Option<String>) -> Result<Option<String>> {
    match reason {
        Some(reason) if reason.is_empty() || reason.chars().count() > MAX_REASON_CHARS => Err(
            Error::InvalidInput(format!("reason: must be 1-{MAX_REASON_CHARS} characters")),
        ),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expiry_is_in_the_future_and_bounded() {
        let now = Utc::now();
        assert_eq!(expiry(now, None, None).expect("none"), None);
        assert_eq!(
            expiry(now, Some(60), None).expect("a minute"),
            Some(now + chrono::Duration::seconds(60))
        );
        let at = now + chrono::Duration::hours(4);
        assert_eq!(expiry(now, None, Some(at)).expect("at"), Some(at));
        for (expires_in, expires_at, expected) in [
            (Some(0), None, "expires_in: 0 is not a positive"),
            (Some(-5), None, "expires_in: -5 is not a positive"),
            (
                Some(MAX_LOCK_SECONDS + 1),
                None,
                "longer than a lock may last",
            ),
            (None, Some(now), "is not in the future"),
            (Some(60), Some(at), "not both"),
        ] {
            let error = expiry(now, expires_in, expires_at)
                .expect_err("refused")
                .to_string();
            assert!(error.contains(expected), "{error}");
        }
    }

    #[test]
    fn an_expired_lock_holds_nothing_and_a_lock_says_who_and_until_when() {
        let now = Utc::now();
        let lock = ClusterLock {
            level: ClusterLockLevel::All,
            locked_by_user: "ops".to_owned(),
            locked_by_admin: true,
            locked_at: now,
            reason: Some("database maintenance".to_owned()),
            expires_at: Some(now + chrono::Duration::seconds(30)),
            locked_instances: Vec::new(),
        };
        assert!(lock.holds_at(now));
        assert!(!lock.holds_at(now + chrono::Duration::seconds(30)));
        let described = lock.describe();
        assert!(described.starts_with("level all, by admin \"ops\" at "));
        assert!(described.contains(" until "));
        assert!(described.ends_with(": database maintenance"));
        // Stored as JSON and read back the same.
        let stored = serde_json::to_value(&lock).expect("json");
        assert_eq!(stored["level"], "all");
        assert_eq!(
            serde_json::from_value::<ClusterLock>(stored).expect("read"),
            lock
        );
        assert!(ClusterLockLevel::parse("stacks").is_err());
        assert_eq!(
            ClusterLockLevel::parse("").expect("default"),
            ClusterLockLevel::Clusters
        );
    }
}
