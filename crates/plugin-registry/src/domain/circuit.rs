//! A plug-in's circuit breaker: after `failures` consecutive errors or
//! timeouts its circuit opens for `cooldown`, and the runner does not call
//! it (the plug-in's failure mode decides at once: no timeout is waited out
//! per operation). Once the cool-down has passed the circuit is half-open:
//! one caller, on any replica, claims the probe and calls the plug-in; an
//! answer closes the circuit, another failure opens it for a new cool-down.
//!
//! The state lives in the registry's database, shared by every replica;
//! these are the rules for moving it, pure.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};

/// Consecutive failures that open a circuit, unless the plug-in says.
pub const DEFAULT_BREAKER_FAILURES: u32 = 5;
/// At most this many (0 turns the breaker off).
pub const MAX_BREAKER_FAILURES: u32 = 1_000;
/// How long an open circuit stays open before a probe, unless the plug-in
/// says.
pub const DEFAULT_BREAKER_COOLDOWN_MS: u32 = 30_000;
pub const MIN_BREAKER_COOLDOWN_MS: u32 = 100;
pub const MAX_BREAKER_COOLDOWN_MS: u32 = 3_600_000;
/// A claimed probe that never reported (its replica died) may be claimed
/// again this long after the plug-in's own timeout.
pub const PROBE_GRACE: Duration = Duration::from_secs(5);
/// The last failure's message is kept up to this many characters.
const MAX_FAILURE_MESSAGE: usize = 500;

/// A plug-in's breaker settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerSettings {
    /// Consecutive failures that open the circuit; 0 = never.
    pub failures: u32,
    pub cooldown_ms: u32,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        BreakerSettings {
            failures: DEFAULT_BREAKER_FAILURES,
            cooldown_ms: DEFAULT_BREAKER_COOLDOWN_MS,
        }
    }
}

impl BreakerSettings {
    pub fn validate(self) -> Result<BreakerSettings> {
        if self.failures > MAX_BREAKER_FAILURES {
            return Err(Error::InvalidInput(format!(
                "breaker_failures must be between 0 (no breaker) and {MAX_BREAKER_FAILURES}, got {}",
                self.failures
            )));
        }
        if !(MIN_BREAKER_COOLDOWN_MS..=MAX_BREAKER_COOLDOWN_MS).contains(&self.cooldown_ms) {
            return Err(Error::InvalidInput(format!(
                "breaker_cooldown_ms must be between {MIN_BREAKER_COOLDOWN_MS} and {MAX_BREAKER_COOLDOWN_MS}, got {}",
                self.cooldown_ms
            )));
        }
        Ok(self)
    }

    pub fn enabled(self) -> bool {
        self.failures > 0
    }

    fn cooldown(self) -> chrono::Duration {
        chrono::Duration::milliseconds(i64::from(self.cooldown_ms))
    }
}

/// What the registry keeps of a plug-in's recent failures: nothing while
/// every call answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CircuitRecord {
    pub consecutive_failures: u32,
    /// When the circuit opened; `None` while closed.
    pub opened_at: Option<DateTime<Utc>>,
    /// Until when it stays open; after it, half-open.
    pub open_until: Option<DateTime<Utc>>,
    /// The last failure's message.
    pub last_failure: String,
}

/// The circuit as a caller meets it at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Circuit {
    /// Calls go through.
    Closed,
    /// No call until `until`.
    Open {
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    },
    /// The cool-down has passed: the next caller to claim it probes.
    HalfOpen { since: DateTime<Utc> },
}

impl Circuit {
    pub fn as_str(self) -> &'static str {
        match self {
            Circuit::Closed => "closed",
            Circuit::Open { .. } => "open",
            Circuit::HalfOpen { .. } => "half-open",
        }
    }
}

impl CircuitRecord {
    pub fn is_clear(&self) -> bool {
        self == &CircuitRecord::default()
    }

    pub fn circuit(&self, now: DateTime<Utc>) -> Circuit {
        match (self.opened_at, self.open_until) {
            (Some(since), Some(until)) if now < until => Circuit::Open { since, until },
            (Some(since), Some(_)) => Circuit::HalfOpen { since },
            _ => Circuit::Closed,
        }
    }

    /// The record after a call failed at `now` with `message`: counted,
    /// and the circuit opened when the count reaches the threshold — or
    /// opened again, for a new cool-down, when the call was the probe of a
    /// half-open circuit.
    pub fn after_failure(
        &self,
        settings: BreakerSettings,
        now: DateTime<Utc>,
        message: &str,
        probe: bool,
    ) -> CircuitRecord {
        let mut next = self.clone();
        next.consecutive_failures = self.consecutive_failures.saturating_add(1);
        next.last_failure = message.chars().take(MAX_FAILURE_MESSAGE).collect();
        let reopen = probe && self.opened_at.is_some();
        let opens = self.opened_at.is_none()
            && settings.enabled()
            && next.consecutive_failures >= settings.failures;
        if opens || reopen {
            next.opened_at = Some(self.opened_at.unwrap_or(now));
            next.open_until = Some(now + settings.cooldown());
        }
        next
    }

    /// What a caller that finds the circuit open at `now` is told (the
    /// call's message, and the operation's reason when it stops the chain).
    pub fn unavailable(&self, since: DateTime<Utc>, now: DateTime<Utc>) -> String {
        let mut message = format!(
            "unavailable: circuit open since {} after {} consecutive failures",
            since.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            self.consecutive_failures
        );
        if !self.last_failure.is_empty() {
            message.push_str(" (last: ");
            message.push_str(&self.last_failure);
            message.push(')');
        }
        match self.open_until {
            Some(until) if until > now => {
                message.push_str("; next probe after ");
                message.push_str(&until.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
            }
            _ => message.push_str("; a probe is under way"),
        }
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> BreakerSettings {
        BreakerSettings {
            failures: 3,
            cooldown_ms: 1_000,
        }
    }

    #[test]
    fn the_circuit_opens_at_the_threshold_and_not_before() {
        let now = Utc::now();
        let mut record = CircuitRecord::default();
        for failure in 1..=2 {
            record = record.after_failure(settings(), now, "timed out after 250 ms", false);
            assert_eq!(record.consecutive_failures, failure);
            assert_eq!(record.circuit(now), Circuit::Closed);
        }
        record = record.after_failure(settings(), now, "timed out after 250 ms", false);
        let until = now + chrono::Duration::seconds(1);
        assert_eq!(record.circuit(now), Circuit::Open { since: now, until });
        assert_eq!(record.circuit(until), Circuit::HalfOpen { since: now });
        let message = record.unavailable(now, now);
        assert!(
            message.starts_with("unavailable: circuit open since ")
                && message.contains("after 3 consecutive failures (last: timed out after 250 ms)")
                && message.contains("next probe after"),
            "{message}"
        );
        assert!(
            record
                .unavailable(now, until)
                .ends_with("a probe is under way"),
            "{}",
            record.unavailable(now, until)
        );
    }

    #[test]
    fn a_failed_probe_opens_the_circuit_again_and_keeps_its_start() {
        let opened = Utc::now();
        let record = CircuitRecord {
            consecutive_failures: 3,
            opened_at: Some(opened),
            open_until: Some(opened + chrono::Duration::seconds(1)),
            last_failure: "x".into(),
        };
        let probed = opened + chrono::Duration::seconds(2);
        let after = record.after_failure(settings(), probed, "refused", true);
        assert_eq!(
            after.circuit(probed),
            Circuit::Open {
                since: opened,
                until: probed + chrono::Duration::seconds(1)
            }
        );
        // A failure of a call made before the circuit opened only counts.
        let late = record.after_failure(settings(), probed, "refused", false);
        assert_eq!(late.open_until, record.open_until);
        assert_eq!(late.consecutive_failures, 4);
    }

    #[test]
    fn no_breaker_never_opens_and_settings_are_bounded() {
        let off = BreakerSettings {
            failures: 0,
            cooldown_ms: 1_000,
        };
        let mut record = CircuitRecord::default();
        for _ in 0..10 {
            record = record.after_failure(off, Utc::now(), "x", false);
        }
        assert_eq!(record.circuit(Utc::now()), Circuit::Closed);
        for (bad, key) in [
            (
                BreakerSettings {
                    failures: MAX_BREAKER_FAILURES + 1,
                    cooldown_ms: 1_000,
                },
                "breaker_failures",
            ),
            (
                BreakerSettings {
                    failures: 3,
                    cooldown_ms: 99,
                },
                "breaker_cooldown_ms",
            ),
        ] {
            let error = bad.validate().expect_err("refused");
            assert!(error.to_string().starts_with(key), "{error}");
        }
    }
}
