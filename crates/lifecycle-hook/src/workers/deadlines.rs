//! Firing deadlines. Expired, unresolved actions are claimed (one
//! conditional update for the batch, so with several replicas each
//! deadline fires once) and handed to the engine in one call. The engine's conditional
//! update WAITING_LIFECYCLE_COMPLETION → READY decides the race with
//! `complete_lifecycle`; its answer says which side won, and that is what
//! gets recorded. If the engine cannot be reached the claim simply runs
//! out and the deadline fires again on a later pass.

use std::sync::Arc;
use std::time::Duration;

use ember_proto::engine::v1 as engine_pb;
use ember_proto::engine::v1::cluster_lifecycle_callback_service_client::ClusterLifecycleCallbackServiceClient;
use ember_runtime::Identity;
use ember_runtime::channel::Balanced;
use ember_runtime::identity::InternalCredential;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::domain::{PendingLifecycleAction, Resolution};
use crate::store::{HookEvent, PendingActionStore};

/// A claimed deadline stays this replica's for this long; if the engine
/// call fails, it fires again after it.
const CLAIM: Duration = Duration::from_secs(5);
/// Deadlines handed to the engine per call.
const BATCH: u64 = 500;
/// Who resolved an action whose deadline passed.
pub const RESOLVED_BY_DEADLINE: &str = "deadline";

pub struct DeadlineFirer {
    store: Arc<dyn PendingActionStore>,
    engine: Option<Balanced>,
    credential: InternalCredential,
}

impl DeadlineFirer {
    /// Fires through `engine` (see [`super::engine_channel`]); `None` =
    /// deadlines wait until an engine is configured.
    pub fn new(
        store: Arc<dyn PendingActionStore>,
        engine: Option<Balanced>,
        credential: InternalCredential,
    ) -> DeadlineFirer {
        DeadlineFirer {
            store,
            engine,
            credential,
        }
    }

    pub async fn run(self, wake: Arc<Notify>, shutdown: CancellationToken) {
        if self.engine.is_none() {
            warn!("no lifecycle_hook.engine_url is configured: deadlines will wait until one is");
            return;
        }
        let pass = || self.pass();
        let due = || self.store.next_deadline_due();
        super::run_passes("deadline", BATCH, pass, due, &wake, &shutdown).await;
    }

    /// Fires what has expired; returns how many deadlines were claimed.
    pub async fn pass(&self) -> crate::Result<usize> {
        let Some(channel) = self.engine.clone() else {
            return Ok(0);
        };
        let now = ember_runtime::time::now();
        let claim_until = now + chrono::Duration::from_std(CLAIM).unwrap_or_default();
        let expired = self.store.claim_expired(now, claim_until, BATCH).await?;
        if expired.is_empty() {
            return Ok(0);
        }
        let mut request = tonic::Request::new(engine_pb::ContinueAfterDeadlineRequest {
            tokens: expired
                .iter()
                .map(|action| action.token.to_string())
                .collect(),
        });
        Identity::new("ember-lifecycle-hook", "ember", vec!["admin".to_owned()])
            .attach(&self.credential, &mut request);
        request.set_timeout(Duration::from_secs(10));
        let outcomes = match ClusterLifecycleCallbackServiceClient::new(channel)
            .continue_after_deadline(request)
            .await
        {
            Ok(response) => response.into_inner().outcomes,
            Err(status) => {
                warn!(count = expired.len(), error = %status.message(), "the engine did not take the expired deadlines; they fire again shortly");
                return Ok(expired.len());
            }
        };
        self.record(&expired, &outcomes).await?;
        Ok(expired.len())
    }

    async fn record(
        &self,
        expired: &[PendingLifecycleAction],
        outcomes: &[i32],
    ) -> crate::Result<()> {
        let mut completed = (Vec::new(), Vec::new());
        let mut continued = (Vec::new(), Vec::new());
        for (action, outcome) in expired.iter().zip(outcomes) {
            match engine_pb::DeadlineOutcome::try_from(*outcome) {
                Ok(engine_pb::DeadlineOutcome::AlreadyCompleted) => {
                    completed.0.push(action.token);
                    completed.1.push(HookEvent::about(
                        action,
                        "COMPLETED",
                        "complete_lifecycle came before the deadline",
                    ));
                }
                Ok(engine_pb::DeadlineOutcome::Continued) => {
                    continued.0.push(action.token);
                    continued.1.push(HookEvent::about(
                        action,
                        "EXPIRED",
                        format!(
                            "deadline {} passed: the engine deletes the node",
                            action.deadline.to_rfc3339()
                        ),
                    ));
                }
                Ok(
                    engine_pb::DeadlineOutcome::Unknown | engine_pb::DeadlineOutcome::Unspecified,
                )
                | Err(_) => {
                    continued.0.push(action.token);
                    continued.1.push(HookEvent::about(
                        action,
                        "EXPIRED",
                        "deadline passed, but the engine has no waiting action for this token",
                    ));
                }
            }
        }
        info!(
            expired = continued.0.len(),
            already_completed = completed.0.len(),
            "lifecycle deadlines fired"
        );
        for (tokens, events, resolution, by) in [
            (
                continued.0,
                continued.1,
                Resolution::Expired,
                RESOLVED_BY_DEADLINE,
            ),
            (
                completed.0,
                completed.1,
                Resolution::Completed,
                "complete_lifecycle",
            ),
        ] {
            if !tokens.is_empty() {
                self.store.resolve(&tokens, resolution, by, &events).await?;
            }
        }
        Ok(())
    }
}
