//! A cluster's health policy at work: when a member's machine fails (the
//! instance watcher makes the node ERROR, `health`), the engine recovers
//! it as the policy says — within its budget
//! (`domain::cluster::remediation`). What the budget holds back is said
//! once as a `CLUSTER_RECOVER … HELD` event of the cluster, and looked at
//! again when the window frees a recovery (or every `detection.interval`
//! while too many members are unhealthy). A maintenance lock holds the
//! policy back as it holds users back.
//!
//! Each recovery is a NODE_RECOVER action marked `by_health_policy`, so
//! the budget is counted from the actions themselves: every engine
//! replica counts the same ones.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use ember_runtime::Identity;
use serde_json::json;
use uuid::Uuid;

use super::{ClusterService, action_event, event};
use crate::domain::cluster::remediation::{self, HealthPolicy};
use crate::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, ClusterStatus, PolicyKind,
};
use crate::error::Result;
use crate::store::clusters::{ActionQuery, SortKey};

/// The input marking a NODE_RECOVER the health policy started.
pub const BY_HEALTH_POLICY: &str = "by_health_policy";

/// How such a recovery ends when its node is no longer ERROR: it recovered
/// nothing, and the budget does not count it.
pub const NOTHING_TO_RECOVER: &str = "no longer unhealthy, nothing to recover";

/// How often every engine looks at the clusters with a health policy (a
/// held recovery whose engine restarted is started by then).
pub const SWEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);

/// The most recent recoveries looked at when counting the budget.
const RECENT_RECOVERIES: u32 = 1_000;

/// A cluster's health policy and its budget now.
#[derive(Debug, Clone)]
pub struct RemediationStatus {
    pub policy_name: String,
    pub policy: HealthPolicy,
    pub budget: remediation::Budget,
    /// Why recovery waits now; `None` when it does not.
    pub held: Option<String>,
}

/// What this engine said last about each cluster's held recoveries, and
/// which clusters it will look at again: so a hold is one event, not one
/// per failure, and one timer per cluster.
#[derive(Default)]
pub(super) struct RemediationState {
    held: Mutex<HashMap<Uuid, String>>,
    scheduled: Mutex<HashMap<Uuid, chrono::DateTime<chrono::Utc>>>,
}

impl RemediationState {
    /// Drops what this engine said and planned for a cluster that is gone.
    fn forget(&self, cluster_id: Uuid) {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&cluster_id);
        self.scheduled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&cluster_id);
    }
}

impl ClusterService {
    /// The cluster's enabled health policy, by name.
    async fn health_policy(&self, cluster: &Cluster) -> Result<Option<(String, HealthPolicy)>> {
        self.enabled_policy(cluster, |policy| match policy.kind {
            PolicyKind::Health { policy: health, .. } => Some((policy.name, health)),
            _ => None,
        })
        .await
    }

    /// The cluster's health policy and its budget now, with why recovery
    /// waits (what the cluster view and "allowed?" show); `None` without
    /// an enabled health policy.
    pub async fn remediation_status(&self, cluster: &Cluster) -> Result<Option<RemediationStatus>> {
        let Some((policy_name, policy)) = self.health_policy(cluster).await? else {
            return Ok(None);
        };
        let members = self.counted_members(cluster.id).await?;
        let (recovering, recent) = self.recoveries(cluster.id).await?;
        let now = ember_runtime::time::now();
        let decision = remediation::decide(&policy, &members, &recovering, &recent, now);
        let held = held_by_lock(cluster, &decision, now).or(decision.held);
        Ok(Some(RemediationStatus {
            budget: remediation::Budget::of(&policy, &members, &recent, now),
            policy_name,
            policy,
            held,
        }))
    }

    /// The cluster's NODE_RECOVER actions lately: the members with one
    /// not ended, and when each the health policy started began.
    async fn recoveries(
        &self,
        cluster_id: Uuid,
    ) -> Result<(Vec<Uuid>, Vec<chrono::DateTime<chrono::Utc>>)> {
        let recoveries = self
            .store
            .list_actions(&ActionQuery {
                cluster_id: Some(cluster_id),
                kinds: vec![ActionKind::NodeRecover.as_str().to_owned()],
                sort: vec![SortKey {
                    key: "created_at".to_owned(),
                    descending: true,
                }],
                limit: RECENT_RECOVERIES,
                ..ActionQuery::default()
            })
            .await?;
        let recovering = recoveries
            .iter()
            .filter(|action| {
                !matches!(
                    action.status,
                    ActionStatus::Succeeded | ActionStatus::Failed | ActionStatus::Cancelled
                )
            })
            .map(|action| action.target_id)
            .collect();
        let recent = recoveries
            .iter()
            .filter(|action| {
                action.inputs.contains_key(BY_HEALTH_POLICY)
                    && !action.status_reason.ends_with(NOTHING_TO_RECOVER)
            })
            .map(|action| action.created_at)
            .collect();
        Ok((recovering, recent))
    }

    /// Recovers what the cluster's health policy and its budget allow now,
    /// and says why the rest waits.
    pub(crate) async fn remediate(self: &Arc<Self>, cluster_id: Uuid) -> Result<()> {
        let Some(cluster) = self.store.get_cluster(cluster_id).await? else {
            self.remediation.forget(cluster_id);
            return Ok(());
        };
        let Some((policy_name, policy)) = self.health_policy(&cluster).await? else {
            return Ok(());
        };
        if cluster.status == ClusterStatus::Deleting {
            return Ok(());
        }
        let now = ember_runtime::time::now();
        let owner = Identity::new(
            cluster.user_id.clone(),
            cluster.project_id.clone(),
            vec!["member".to_owned()],
        );
        let members = self.counted_members(cluster.id).await?;
        let (recovering, recent) = self.recoveries(cluster.id).await?;
        let decision = remediation::decide(&policy, &members, &recovering, &recent, now);
        if let Some(why) = held_by_lock(&cluster, &decision, now) {
            self.say_held(&cluster, &owner, Some(why)).await;
            self.look_again(cluster.id, now + seconds(policy.interval_secs));
            return Ok(());
        }
        if !decision.recover.is_empty() {
            let actions: Vec<ClusterAction> = members
                .iter()
                .filter(|node| decision.recover.contains(&node.id))
                .map(|node| {
                    ClusterAction::new(
                        ActionKind::NodeRecover,
                        node.id,
                        Some(cluster.id),
                        ActionStatus::Ready,
                        super::requests::json_object(json!({
                            "operation": policy.recovery.as_str(),
                            "node_name": node.name,
                            BY_HEALTH_POLICY: policy_name,
                        })),
                        &owner,
                        now,
                    )
                })
                .collect();
            let events: Vec<_> = actions
                .iter()
                .map(|action| {
                    action_event(
                        action,
                        "READY",
                        format!(
                            "health policy {policy_name:?}: recovering the node ({})",
                            policy.recovery.as_str()
                        ),
                    )
                })
                .collect();
            self.submit(&actions, &events).await?;
            tracing::info!(cluster = %cluster.name, count = actions.len(), "health policy: recovering failed members");
        }
        self.say_held(&cluster, &owner, decision.held.clone()).await;
        match (decision.held.is_some(), decision.retry_at) {
            (_, Some(at)) => self.look_again(cluster.id, at),
            (true, None) => self.look_again(cluster.id, now + seconds(policy.interval_secs)),
            (false, None) => {}
        }
        Ok(())
    }

    /// Records why recovery waits, when that changed (`None`: it no
    /// longer waits).
    async fn say_held(&self, cluster: &Cluster, owner: &Identity, why: Option<String>) {
        let changed = {
            let mut held = self
                .remediation
                .held
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match &why {
                Some(why) => held.insert(cluster.id, why.clone()).as_ref() != Some(why),
                None => {
                    held.remove(&cluster.id);
                    false
                }
            }
        };
        let Some(why) = why.filter(|_| changed) else {
            return;
        };
        tracing::warn!(cluster = %cluster.name, %why, "health policy held back");
        let held = event(
            "CLUSTER",
            cluster.id,
            &cluster.name,
            Some(cluster.id),
            "CLUSTER_RECOVER",
            "HELD",
            why,
            owner,
        );
        if let Err(error) = self.store.record_events(&[held]).await {
            tracing::warn!(%error, "cannot record a held recovery");
        }
    }

    /// Every cluster with an enabled health policy, remediated: what a
    /// restarted engine held is started, whichever engine sweeps first
    /// (a second engine's recovery of the same node does nothing: see
    /// [`NOTHING_TO_RECOVER`]).
    pub async fn sweep_remediation(self: &Arc<Self>) -> Result<()> {
        for cluster_id in self.store.clusters_with_health_policies().await? {
            if let Err(error) = self.remediate(cluster_id).await {
                tracing::warn!(%cluster_id, %error, "cannot remediate a cluster");
            }
        }
        Ok(())
    }

    /// Marks the caller's ACTIVE node unhealthy (ERROR, with `reason` and a
    /// NODE_CHECK event, in one conditional write); its cluster's health
    /// policy then recovers it as the budget allows.
    pub async fn mark_node_unhealthy(
        self: &Arc<Self>,
        caller: &Identity,
        name_or_id: &str,
        reason: &str,
    ) -> Result<crate::domain::cluster::Node> {
        let node = self.find_node(caller, name_or_id).await?;
        self.admit(
            crate::domain::admission::cluster::ClusterOperation::UpdateNode(&node),
            caller,
        )
        .await?;
        if reason.chars().count() > 255 {
            return Err(crate::error::Error::InvalidInput(format!(
                "reason is {} characters: at most 255",
                reason.chars().count()
            )));
        }
        let not_active = || {
            crate::error::Error::Conflict(format!(
                "node {:?} is {}: only an ACTIVE node is marked unhealthy",
                node.name,
                node.status.as_str()
            ))
        };
        let Some(physical_id) = node
            .physical_id
            .clone()
            .filter(|_| node.status == crate::domain::cluster::NodeStatus::Active)
        else {
            return Err(not_active());
        };
        let reason = if reason.is_empty() {
            format!("marked unhealthy by {}", caller.user_id)
        } else {
            format!("marked unhealthy by {}: {reason}", caller.user_id)
        };
        self.store
            .mark_node_machine_failed(&physical_id, &reason, ember_runtime::time::now())
            .await?
            .ok_or_else(not_active)?;
        if let Some(cluster_id) = node.cluster_id
            && let Err(error) = self.remediate(cluster_id).await
        {
            tracing::warn!(%cluster_id, %error, "cannot start the health policy's recovery");
        }
        self.store
            .get_node(node.id)
            .await?
            .ok_or_else(|| super::not_found("node", name_or_id))
    }

    /// Looks at the cluster again at `at` (once per cluster: an earlier
    /// look already planned stands).
    fn look_again(self: &Arc<Self>, cluster_id: Uuid, at: chrono::DateTime<chrono::Utc>) {
        {
            let mut scheduled = self
                .remediation
                .scheduled
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if scheduled
                .get(&cluster_id)
                .is_some_and(|planned| *planned <= at)
            {
                return;
            }
            scheduled.insert(cluster_id, at);
        }
        let service = Arc::clone(self);
        tokio::spawn(async move {
            let wait = (at - ember_runtime::time::now())
                .to_std()
                .unwrap_or_default();
            tokio::time::sleep(wait).await;
            service
                .remediation
                .scheduled
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&cluster_id);
            if let Err(error) = service.remediate(cluster_id).await {
                tracing::warn!(%cluster_id, %error, "cannot look at a cluster's held recoveries again");
            }
        });
    }
}

/// Why a maintenance lock holds recovery back, when the cluster has
/// something to recover (a locked, healthy cluster waits for nothing).
fn held_by_lock(
    cluster: &Cluster,
    decision: &remediation::Decision,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<String> {
    let lock = cluster
        .maintenance_lock
        .as_ref()
        .filter(|lock| lock.holds_at(now))?;
    if decision.recover.is_empty() && decision.held.is_none() {
        return None;
    }
    Some(format!(
        "automatic recovery held: the cluster is locked by {:?}{}",
        lock.locked_by_user,
        lock.reason
            .as_deref()
            .map_or_else(String::new, |reason| format!(" ({reason})"))
    ))
}

fn seconds(secs: u32) -> chrono::Duration {
    chrono::Duration::seconds(i64::from(secs))
}
