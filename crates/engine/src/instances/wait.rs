//! Waiting for an instance to get somewhere (built, deleted, powered off,
//! …): the one loop every waiter uses — a server resource, a cluster node's
//! create, delete and operations. The instance is read again as soon as
//! this engine hears of it (its task ended here, or the watcher saw its
//! machine change); only a task another engine runs (one that took the
//! work over after a crash) needs the pauses between reads, which start at
//! [`FIRST_PAUSE`] and double up to [`FALLBACK`]. Polling instead, every
//! waiter re-read its instance every few milliseconds: ten reads a node
//! in a cluster's growth.

use std::time::Duration;

use ember_runtime::Identity;
use tokio::time::Instant;
use uuid::Uuid;

use super::InstanceService;
use crate::domain::instance::Instance;
use crate::error::Result;

/// How long a wait first goes without reading the instance when nothing
/// in this engine says it changed.
pub const FIRST_PAUSE: Duration = Duration::from_millis(250);

/// The longest a wait goes without reading the instance when nothing in
/// this engine says it changed.
pub const FALLBACK: Duration = Duration::from_secs(5);

impl InstanceService {
    /// Reads instance `uuid` as `caller` and hands each read to `decide`
    /// until it answers `Some`, which is returned; `None` when `timeout`
    /// passes first. Reads again when this engine hears of the instance,
    /// else after a pause (see the module's doc).
    pub async fn wait<T>(
        &self,
        caller: &Identity,
        uuid: Uuid,
        timeout: Duration,
        mut decide: impl FnMut(Result<Instance>) -> Option<T>,
    ) -> Option<T> {
        let deadline = Instant::now() + timeout;
        let mut pause = FIRST_PAUSE;
        // Subscribed before the first read: a task that ends after it is
        // heard of; one that ended before, read.
        let mut settled = self.subscribe_settled();
        let mut observed = self.subscribe_observations();
        loop {
            if let Some(decided) = decide(self.get(caller, uuid).await) {
                return Some(decided);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            tokio::select! {
                () = tokio::time::sleep(pause.min(deadline - now)) => {}
                () = heard_of(&mut settled, uuid, |settled| *settled) => {}
                () = heard_of(&mut observed, uuid, |observation| observation.next.uuid) => {}
            }
            pause = (pause * 2).min(FALLBACK);
        }
    }
}

/// Returns once `receiver` carries news of `uuid` (read by `uuid_of`), or
/// once it fell behind (the news may have been missed: read again); never
/// when the sender is gone (the caller's pause ends the wait).
async fn heard_of<T: Clone>(
    receiver: &mut tokio::sync::broadcast::Receiver<T>,
    uuid: Uuid,
    uuid_of: impl Fn(&T) -> Uuid,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match receiver.recv().await {
            Ok(news) if uuid_of(&news) == uuid => return,
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => return,
            Err(RecvError::Closed) => std::future::pending::<()>().await,
        }
    }
}
