//! What the three lock sweeps share (stacks, clusters and instances lift
//! the locks whose expiry passed): the loop every engine runs — asleep
//! until the soonest expiry it knows of, and looking again at least every
//! [`LOOK_AT_LEAST_EVERY`] (a read; a pass only when a lock is due) — and
//! the identity a lock is lifted as: its holder's.

use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use chrono::{DateTime, Utc};
use ember_runtime::Identity;
use tokio_util::sync::CancellationToken;

use crate::error::Result;

/// The longest a sweep sleeps before it asks its store for the soonest
/// expiry again: a lock made since (by this engine or another) with an
/// earlier expiry than the one awaited is lifted at most this late.
pub const LOOK_AT_LEAST_EVERY: Duration = Duration::from_secs(1);

/// How soon a sweep tries again when a lock is due but could not be lifted
/// yet (its stack busy with another operation).
pub const RETRY_DUE_AFTER: Duration = Duration::from_millis(250);

/// How long to sleep when the soonest expiry is `next` at `now`.
fn pause_until(next: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Duration {
    match next {
        None => LOOK_AT_LEAST_EVERY,
        Some(at) if at <= now => RETRY_DUE_AFTER,
        Some(at) => (at - now)
            .to_std()
            .map_or(LOOK_AT_LEAST_EVERY, |until| until.min(LOOK_AT_LEAST_EVERY)),
    }
}

/// The identity an expired lock is lifted as: its holder, in the locked
/// object's project, an admin if an admin took it (an admin's lock is
/// lifted only by an admin).
pub fn holder(user_id: &str, project_id: &str, by_admin: bool) -> Identity {
    let role = if by_admin { "admin" } else { "member" };
    Identity::new(user_id, project_id, vec![role.to_owned()])
}

/// Runs `sweep` on `owner` until `shutdown`, or until `owner` is dropped:
/// whenever `next_expiry` (the soonest expiry in the store) comes, which it
/// reads at least every [`LOOK_AT_LEAST_EVERY`] — reading only, while
/// nothing is due, so a sweep at rest costs one read a second. A pass that
/// lifted something is followed by another at once (a sweep lifts a
/// bounded batch: many locks expiring together are all lifted within the
/// second, not one batch a second); a failed pass is logged naming
/// `what`, and tried again after [`RETRY_DUE_AFTER`].
pub fn spawn_sweep<T, F, Fut, N, NFut>(
    owner: &Arc<T>,
    shutdown: CancellationToken,
    what: &'static str,
    sweep: F,
    next_expiry: N,
) where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<usize>> + Send,
    N: Fn(Arc<T>) -> NFut + Send + 'static,
    NFut: Future<Output = Result<Option<DateTime<Utc>>>> + Send,
{
    let owner: Weak<T> = Arc::downgrade(owner);
    tokio::spawn(async move {
        // At start-up: locks may have expired while no engine ran.
        let mut sweep_now = true;
        loop {
            if sweep_now {
                match lift_all(&owner, &sweep, &shutdown, what).await {
                    Lifted::Clear => {}
                    Lifted::Stop => return,
                    Lifted::Failed => {
                        // Tried again after the pause (sweep_now stays).
                        if !rest(RETRY_DUE_AFTER, &shutdown).await {
                            return;
                        }
                        continue;
                    }
                }
            }
            let Some(strong) = owner.upgrade() else {
                return;
            };
            let next = match next_expiry(strong).await {
                Ok(next) => next,
                Err(error) => {
                    tracing::warn!(%error, "cannot read when the next {what} expire");
                    sweep_now = true;
                    if rest(RETRY_DUE_AFTER, &shutdown).await {
                        continue;
                    }
                    return;
                }
            };
            let now = ember_runtime::time::now();
            if !sweep_now && next.is_some_and(|at| at <= now) {
                // Found due without a pass just now: one at once.
                sweep_now = true;
                continue;
            }
            if !rest(pause_until(next, now), &shutdown).await {
                return;
            }
            sweep_now = next.is_some_and(|at| at <= ember_runtime::time::now());
        }
    });
}

/// How a sweep's passes over what is due ended.
enum Lifted {
    /// Nothing more was due.
    Clear,
    /// A pass failed (logged).
    Failed,
    /// The owner is gone, or shutdown came.
    Stop,
}

/// Runs `sweep` until a pass lifts nothing.
async fn lift_all<T, F, Fut>(
    owner: &Weak<T>,
    sweep: &F,
    shutdown: &CancellationToken,
    what: &str,
) -> Lifted
where
    F: Fn(Arc<T>) -> Fut,
    Fut: Future<Output = Result<usize>>,
{
    loop {
        let Some(strong) = owner.upgrade() else {
            return Lifted::Stop;
        };
        match sweep(strong).await {
            Ok(0) => return Lifted::Clear,
            Ok(_) if shutdown.is_cancelled() => return Lifted::Stop,
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "cannot lift expired {what}");
                return Lifted::Failed;
            }
        }
    }
}

/// Sleeps `pause`; false when shutdown came first.
async fn rest(pause: Duration, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        () = shutdown.cancelled() => false,
        () = tokio::time::sleep(pause) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_sleeps_until_the_soonest_expiry_and_looks_again_within_a_second() {
        let now = ember_runtime::time::now();
        let later = |millis| now + chrono::Duration::milliseconds(millis);
        assert_eq!(pause_until(None, now), LOOK_AT_LEAST_EVERY);
        assert_eq!(
            pause_until(Some(later(300)), now),
            Duration::from_millis(300)
        );
        assert_eq!(pause_until(Some(later(60_000)), now), LOOK_AT_LEAST_EVERY);
        // Due already but not lifted (busy): soon again, never at once.
        assert_eq!(pause_until(Some(now), now), RETRY_DUE_AFTER);
        assert_eq!(pause_until(Some(later(-5_000)), now), RETRY_DUE_AFTER);
    }
}
