//! The revocations a replica applies, in memory: tokens by id, and the
//! user/project revocations (few: one per lost role, deleted user or
//! project, changed password). Read from the store at start, then every
//! [`super::REVOCATION_POLL`], and at once after this replica writes one.

use std::collections::{HashMap, HashSet};
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
    /// Revocations of a user's tokens (on one project or all), by user:
    /// a request looks at its own user's only, however many there are.
    by_user: HashMap<String, Vec<Revocation>>,
    /// Revocations of every token of a project, by project.
    by_project: HashMap<String, Vec<Revocation>>,
}

impl Revocations {
    pub fn revokes(&self, details: &TokenDetails) -> bool {
        let index = match self.index.read() {
            Ok(index) => index,
            Err(poisoned) => poisoned.into_inner(),
        };
        let identity = &details.identity;
        (!details.token_id.is_empty() && index.tokens.contains(&details.token_id))
            || [
                index.by_user.get(&identity.user_id),
                index.by_project.get(&identity.project_id),
            ]
            .into_iter()
            .flatten()
            .flatten()
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
                None => match (&revocation.user_id, &revocation.project_id) {
                    (Some(user), _) => index
                        .by_user
                        .entry(user.clone())
                        .or_default()
                        .push(revocation),
                    (None, Some(project)) => index
                        .by_project
                        .entry(project.clone())
                        .or_default()
                        .push(revocation),
                    (None, None) => {}
                },
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
        let index = &mut *index;
        for revocations in [&mut index.by_user, &mut index.by_project] {
            revocations.retain(|_, list| {
                list.retain(|revocation| revocation.expires_at >= now);
                !list.is_empty()
            });
        }
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
