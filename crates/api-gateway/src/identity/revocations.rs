//! The revocations a replica applies, in memory: tokens by id, and the
//! user/project revocations (few: one per lost role, deleted user or
//! project, changed password). Read from the store at start, then every
//! [`super::REVOCATION_POLL`], and at once after this replica writes one.

use std::collections::HashSet;
use std::sync::RwLock;

use chrono::Utc;
use ember_runtime::auth::TokenDetails;
use tokio_util::sync::CancellationToken;

use super::{IdentityError, IdentityStore, Revocation};

#[derive(Debug, Default)]
pub struct Revocations {
    index: RwLock<Index>,
    /// Serialises refreshes, so two never add the same rows.
    refreshing: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct Index {
    /// The id of the newest revocation applied.
    last_id: i64,
    tokens: HashSet<String>,
    /// Token revocations with their expiry, to forget them later.
    token_expiry: Vec<(chrono::DateTime<Utc>, String)>,
    broad: Vec<Revocation>,
}

impl Revocations {
    pub fn revokes(&self, details: &TokenDetails) -> bool {
        let index = match self.index.read() {
            Ok(index) => index,
            Err(poisoned) => poisoned.into_inner(),
        };
        (!details.token_id.is_empty() && index.tokens.contains(&details.token_id))
            || index
                .broad
                .iter()
                .any(|revocation| revocation.revokes(details))
    }

    /// Applies the revocations written since the last refresh, and forgets
    /// those whose tokens have all expired.
    pub async fn refresh(&self, store: &IdentityStore) -> Result<(), IdentityError> {
        let _serial = self.refreshing.lock().await;
        let after = self.read_last_id();
        let new = store.revocations_after(after).await?;
        let now = Utc::now();
        let mut index = match self.index.write() {
            Ok(index) => index,
            Err(poisoned) => poisoned.into_inner(),
        };
        for revocation in new {
            index.last_id = index.last_id.max(revocation.id);
            if revocation.expires_at < now {
                continue;
            }
            match &revocation.token_id {
                Some(token_id) => {
                    index.tokens.insert(token_id.clone());
                    index
                        .token_expiry
                        .push((revocation.expires_at, token_id.clone()));
                }
                None => index.broad.push(revocation),
            }
        }
        if index
            .token_expiry
            .iter()
            .any(|(expires_at, _)| *expires_at < now)
        {
            let (expired, live): (Vec<_>, Vec<_>) = std::mem::take(&mut index.token_expiry)
                .into_iter()
                .partition(|(expires_at, _)| *expires_at < now);
            for (_, token_id) in expired {
                index.tokens.remove(&token_id);
            }
            index.token_expiry = live;
        }
        index
            .broad
            .retain(|revocation| revocation.expires_at >= now);
        Ok(())
    }

    fn read_last_id(&self) -> i64 {
        match self.index.read() {
            Ok(index) => index.last_id,
            Err(poisoned) => poisoned.into_inner().last_id,
        }
    }
}

/// Follows the store's revocations until `shutdown`; prunes expired ones
/// from the store now and then.
pub async fn follow(
    revocations: std::sync::Arc<Revocations>,
    store: IdentityStore,
    shutdown: CancellationToken,
) {
    let mut ticker = tokio::time::interval(super::REVOCATION_POLL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ticks: u64 = 0;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        if let Err(error) = revocations.refresh(&store).await {
            tracing::warn!(%error, "cannot read token revocations");
        }
        ticks += 1;
        // About every ten minutes.
        if ticks.is_multiple_of(2400)
            && let Err(error) = store.prune_revocations(Utc::now()).await
        {
            tracing::warn!(%error, "cannot prune expired token revocations");
        }
    }
}
