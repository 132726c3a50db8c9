//! Completing a lifecycle wait: `complete_lifecycle` from a user and the
//! deadline from lifecycle-hook race to move the waiting action — a
//! NODE_DELETE (terminating) or a launching node's NODE_CREATE —
//! WAITING_LIFECYCLE_COMPLETION → READY in one conditional update. Exactly
//! one wins, so the node is deleted (or put in service) once; the loser
//! gets a clear answer.

use ember_runtime::Identity;
use uuid::Uuid;

use super::ClusterService;
use crate::domain::admission::cluster::{ClusterOperation, admit, lifecycle_not_waiting};
use crate::domain::cluster::policy::LifecycleResult;
use crate::domain::cluster::{ActionKind, ActionStatus, ClusterAction, LifecycleOutcome};
use crate::error::{Error, Result};
use crate::store::clusters::ReadyOutcome;

/// What the deadline did to one token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadlineResult {
    Continued,
    AlreadyCompleted,
    Unknown,
}

impl ClusterService {
    /// The lifecycle action `token` of `cluster` (a NODE_DELETE with a hook,
    /// or a launching node's NODE_CREATE), as `caller` may see it; unknown,
    /// foreign and malformed tokens are all NotFound.
    async fn lifecycle_action(
        &self,
        caller: &Identity,
        cluster: &str,
        token: &str,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, cluster).await?;
        let not_found = || {
            Error::NotFound(format!(
                "lifecycle action token {token:?} is not a lifecycle action of cluster {:?}",
                cluster.name
            ))
        };
        let id = Uuid::parse_str(token).map_err(|_| not_found())?;
        match self.store.get_action(id).await? {
            Some(action)
                if (action.kind == ActionKind::NodeDelete
                    || super::launch::is_launch_wait(&action))
                    && action.cluster_id == Some(cluster.id)
                    && action.project_id == cluster.project_id
                    && (action.lifecycle_outcome.is_some()
                        || action.status == ActionStatus::WaitingLifecycleCompletion
                        || action.hook_recorded) =>
            {
                Ok(action)
            }
            _ => Err(not_found()),
        }
    }

    /// `complete_lifecycle` with the application's `result`: CONTINUE lets
    /// a terminating node go and a launching one into service; ABANDON
    /// keeps a terminating node out of service and deletes a launching
    /// one.
    pub async fn complete_lifecycle(
        &self,
        caller: &Identity,
        cluster: &str,
        token: &str,
        result: LifecycleResult,
    ) -> Result<ClusterAction> {
        let action = self.lifecycle_action(caller, cluster, token).await?;
        admit(&ClusterOperation::CompleteLifecycle(&action), caller)?;
        let detail = format!(
            "completed with {} by {} at {}",
            result.as_str(),
            caller.user_id,
            ember_runtime::time::now().to_rfc3339()
        );
        let outcome = match result {
            LifecycleResult::Continue => LifecycleOutcome::Completed,
            LifecycleResult::Abandon => LifecycleOutcome::Abandoned,
        };
        let answered =
            if super::launch::is_launch_wait(&action) && outcome == LifecycleOutcome::Completed {
                // A launching node's CONTINUE is one write: the node goes into
                // service now, with no run to wait for.
                let name = action
                    .inputs
                    .get("node_name")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default();
                let reason = format!("node {name} in service");
                let node_reason = format!("created; in service (lifecycle {detail})");
                let events = [
                    super::action_event(&action, "SUCCEEDED", format!("lifecycle {detail}")),
                    super::event(
                        "NODE",
                        action.target_id,
                        name,
                        action.cluster_id,
                        "NODE_CREATE",
                        "ACTIVE",
                        node_reason.clone(),
                        &action.caller(),
                    ),
                ];
                self.store
                    .continue_launch(action.id, &detail, &reason, &node_reason, &events)
                    .await?
            } else {
                let event = super::action_event(&action, "READY", format!("lifecycle {detail}"));
                self.store
                    .make_ready(
                        action.id,
                        ActionStatus::WaitingLifecycleCompletion,
                        Some((outcome, &detail)),
                        Some(&event),
                    )
                    .await?
            };
        match answered {
            ReadyOutcome::Moved(action) => {
                if action.status.is_final() {
                    for parent in &action.depended_by {
                        super::dispatcher::finish_parent(self, *parent).await;
                    }
                }
                self.wake_dispatcher();
                tracing::info!(token = %action.id, user_id = %caller.user_id, "lifecycle completed");
                let hooks = self.hooks.clone();
                let project_id = action.project_id.clone();
                let tokens = vec![action.id.to_string()];
                let by = caller.user_id.clone();
                // Best effort: lifecycle-hook also learns it when the
                // deadline fires and the engine answers ALREADY_COMPLETED.
                tokio::spawn(async move {
                    if let Err(error) = hooks.resolve(&project_id, tokens, &by).await {
                        tracing::warn!(%error, "cannot tell lifecycle-hook about a completion");
                    }
                });
                Ok(action)
            }
            ReadyOutcome::NotWaiting(action) => Err(lifecycle_not_waiting(&action)),
            ReadyOutcome::Unknown => Err(Error::NotFound(format!(
                "lifecycle action token {token:?} not found"
            ))),
        }
    }

    pub async fn record_lifecycle_heartbeat(
        &self,
        caller: &Identity,
        cluster: &str,
        token: &str,
    ) -> Result<prost_types::Timestamp> {
        let action = self.lifecycle_action(caller, cluster, token).await?;
        admit(&ClusterOperation::LifecycleHeartbeat(&action), caller)?;
        self.hooks.extend(&action.project_id, token).await
    }

    /// Called by lifecycle-hook when deadlines pass: every waiting action
    /// of `tokens` moves to READY in one conditional update; each token's
    /// answer says whether the deadline or `complete_lifecycle` won.
    pub async fn continue_after_deadline(&self, tokens: &[String]) -> Result<Vec<DeadlineResult>> {
        let ids: Vec<Option<Uuid>> = tokens
            .iter()
            .map(|token| Uuid::parse_str(token).ok())
            .collect();
        let known: Vec<Uuid> = ids.iter().flatten().copied().collect();
        let detail = format!(
            "deadline passed at {}",
            ember_runtime::time::now().to_rfc3339()
        );
        let reason = format!("lifecycle expired: {detail}");
        let event = |action: &ClusterAction| super::action_event(action, "READY", reason.clone());
        let (moved, others) = self.store.expire_waiting(&known, &detail, &event).await?;
        if !moved.is_empty() {
            self.wake_dispatcher();
        }
        let moved: std::collections::HashSet<Uuid> = moved.iter().map(|action| action.id).collect();
        let others: std::collections::HashMap<Uuid, Option<LifecycleOutcome>> = others
            .into_iter()
            .map(|action| (action.id, action.lifecycle_outcome))
            .collect();
        Ok(ids
            .into_iter()
            .map(|id| match id {
                Some(id) if moved.contains(&id) => DeadlineResult::Continued,
                Some(id) => match others.get(&id) {
                    Some(Some(LifecycleOutcome::Completed | LifecycleOutcome::Abandoned)) => {
                        DeadlineResult::AlreadyCompleted
                    }
                    // Fired before (a retried call): the deadline won then.
                    Some(Some(LifecycleOutcome::Expired)) => DeadlineResult::Continued,
                    _ => DeadlineResult::Unknown,
                },
                None => DeadlineResult::Unknown,
            })
            .collect())
    }
}
