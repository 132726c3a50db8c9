//! What the three lock sweeps share (stacks, clusters and instances lift
//! the locks whose expiry passed): the loop every engine runs every
//! [`SWEEP_EVERY`], and the identity a lock is lifted as — its holder's.

use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use ember_runtime::Identity;
use tokio_util::sync::CancellationToken;

use crate::error::Result;

/// How often each engine looks for expired locks.
pub const SWEEP_EVERY: Duration = Duration::from_millis(250);

/// The identity an expired lock is lifted as: its holder, in the locked
/// object's project, an admin if an admin took it (an admin's lock is
/// lifted only by an admin).
pub fn holder(user_id: &str, project_id: &str, by_admin: bool) -> Identity {
    let role = if by_admin { "admin" } else { "member" };
    Identity::new(user_id, project_id, vec![role.to_owned()])
}

/// Runs `sweep` on `owner` every [`SWEEP_EVERY`] until `shutdown`, or
/// until `owner` is dropped; a pass that lifted something is followed by
/// another at once (a sweep lifts a bounded batch: many locks expiring
/// together are all lifted within the second, not one batch a second); a
/// failed pass is logged naming `what`, and the next pass tries again.
pub fn spawn_sweep<T, F, Fut>(
    owner: &Arc<T>,
    shutdown: CancellationToken,
    what: &'static str,
    sweep: F,
) where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<usize>> + Send,
{
    let owner: Weak<T> = Arc::downgrade(owner);
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(SWEEP_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = ticker.tick() => {}
            }
            loop {
                let Some(owner) = owner.upgrade() else {
                    return;
                };
                match sweep(owner).await {
                    Ok(0) => break,
                    Ok(_) if shutdown.is_cancelled() => return,
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(%error, "cannot lift expired {what}");
                        break;
                    }
                }
            }
        }
    });
}
