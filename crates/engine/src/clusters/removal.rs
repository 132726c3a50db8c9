//! Removing nodes from a cluster (scale_in, resize, del_nodes, node delete):
//! one NODE_DELETE child action per victim. With a deletion policy that has
//! `hooks`, a child whose node is ACTIVE with a physical id waits in
//! WAITING_LIFECYCLE_COMPLETION and the whole batch is handed to
//! lifecycle-hook in one call; the others are READY at once. The parent
//! waits on its children and finishes when the last one does.

use chrono::Duration;
use serde_json::json;

use super::hooks::PendingHook;
use super::requests::json_object;
use super::{ClusterService, action_event, event};
use crate::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, ClusterStatus, DeletionPolicy, HookTarget,
    LifecycleHooks, Node, NodeStatus, PolicyKind,
};
use crate::error::Result;

/// What became of the parent.
pub(super) enum Removal {
    /// The parent now waits on its children.
    Waiting,
    /// Another engine took the parent: nothing was written.
    Lost,
}

impl ClusterService {
    /// The cluster's deletion policy: the enabled one of highest priority.
    pub(super) async fn deletion_policy(
        &self,
        cluster: &Cluster,
    ) -> Result<Option<DeletionPolicy>> {
        Ok(self
            .store
            .list_bindings(cluster.id)
            .await?
            .into_iter()
            .filter(|(binding, _)| binding.enabled)
            .find_map(|(_, policy)| match policy.kind {
                PolicyKind::Deletion { policy, .. } => Some(policy),
                PolicyKind::Scaling(_) => None,
            }))
    }

    /// Records the children and makes `parent` wait on them, with the
    /// cluster's new desired capacity.
    pub(super) async fn remove_nodes(
        &self,
        parent: &ClusterAction,
        mut cluster: Cluster,
        victims: Vec<Node>,
        desired_capacity: i32,
        policy: Option<DeletionPolicy>,
    ) -> Result<Removal> {
        let now = ember_runtime::time::now();
        let caller = parent.caller();
        let hooks = policy.as_ref().and_then(|policy| policy.hooks.clone());
        let destroy = policy
            .as_ref()
            .is_none_or(|policy| policy.destroy_after_deletion);
        // Senlin's grace period: time for the node to finish what it does
        // before it goes. A lifecycle hook replaces it (the application
        // says when it is done), as in Senlin.
        let grace_period = match (&policy, &hooks) {
            (Some(policy), None) => policy.grace_period,
            _ => 0,
        };
        let mut children = Vec::with_capacity(victims.len());
        let mut nodes = Vec::with_capacity(victims.len());
        let mut events = Vec::with_capacity(victims.len() + 1);
        for mut node in victims {
            let waits =
                hooks.is_some() && node.status == NodeStatus::Active && node.physical_id.is_some();
            let status = if waits {
                ActionStatus::WaitingLifecycleCompletion
            } else {
                ActionStatus::Ready
            };
            let mut child = ClusterAction::new(
                ActionKind::NodeDelete,
                node.id,
                Some(cluster.id),
                status,
                json_object(json!({
                    "destroy": destroy,
                    "node_name": node.name,
                    "grace_period": grace_period,
                })),
                &caller,
                now,
            );
            child.depended_by = vec![parent.id];
            if let (true, Some(hooks)) = (waits, &hooks) {
                // Enough to hand the hook over again after a crash.
                let (kind, address) = match &hooks.target {
                    HookTarget::Queue(queue) => ("queue", queue.as_str()),
                    HookTarget::Webhook(url) => ("webhook", url.as_str()),
                };
                child.inputs.insert(
                    "hook".into(),
                    json!({"type": kind, "address": address, "timeout": hooks.timeout_secs}),
                );
            }
            events.push(action_event(
                &child,
                status.as_str(),
                format!("node {} chosen for removal", node.name),
            ));
            node.status = NodeStatus::Deleting;
            node.status_reason = if waits {
                "waiting for lifecycle completion".into()
            } else {
                "being deleted".into()
            };
            node.updated_at = now;
            nodes.push(node);
            children.push(child);
        }
        cluster.desired_capacity = desired_capacity;
        cluster.status = ClusterStatus::Resizing;
        cluster.status_reason = format!(
            "{}: removing {} node(s)",
            parent.kind.as_str(),
            children.len()
        );
        cluster.updated_at = now;
        events.push(event(
            "CLUSTER",
            cluster.id,
            &cluster.name,
            Some(cluster.id),
            parent.kind.as_str(),
            "RESIZING",
            cluster.status_reason.clone(),
            &caller,
        ));
        let mut parent = parent.clone();
        parent.outputs.insert(
            "nodes_removed".into(),
            json!(
                nodes
                    .iter()
                    .map(|node| node.id.to_string())
                    .collect::<Vec<_>>()
            ),
        );
        parent.outputs.insert(
            "lifecycle_action_tokens".into(),
            json!(
                children
                    .iter()
                    .filter(|child| child.status == ActionStatus::WaitingLifecycleCompletion)
                    .map(|child| child.id.to_string())
                    .collect::<Vec<_>>()
            ),
        );
        if !self
            .store
            .start_waiting_on_children(
                &parent,
                self.engine_id,
                &children,
                Some(&cluster),
                &nodes,
                &events,
            )
            .await?
        {
            return Ok(Removal::Lost);
        }
        if let Some(hooks) = &hooks {
            let pending: Vec<PendingHook<'_>> = children
                .iter()
                .zip(&nodes)
                .filter(|(child, _)| child.status == ActionStatus::WaitingLifecycleCompletion)
                .map(|(child, node)| PendingHook {
                    action: child,
                    resource_id: node.physical_id.clone().unwrap_or_default(),
                    hooks,
                    deadline: now + Duration::seconds(i64::from(hooks.timeout_secs)),
                })
                .collect();
            self.hand_over(&pending).await;
        }
        if self.store.finish_parent_if_done(parent.id).await?.is_some() {
            tracing::info!(action_id = %parent.id, "removal finished with nothing to wait for");
        }
        self.wake_dispatcher();
        Ok(Removal::Waiting)
    }

    /// Hands waiting actions to lifecycle-hook; on failure they stay
    /// unrecorded and the sweeper hands them over again.
    pub(super) async fn hand_over(&self, pending: &[PendingHook<'_>]) {
        if pending.is_empty() {
            return;
        }
        match self.hooks.record(pending).await {
            Ok(()) => {
                let ids: Vec<_> = pending.iter().map(|hook| hook.action.id).collect();
                let events: Vec<_> = pending
                    .iter()
                    .map(|hook| {
                        action_event(
                            hook.action,
                            "WAITING_LIFECYCLE_COMPLETION",
                            format!(
                                "handed to lifecycle-hook, deadline {}",
                                hook.deadline.to_rfc3339()
                            ),
                        )
                    })
                    .collect();
                if let Err(error) = self.store.mark_hooks_recorded(&ids).await {
                    tracing::warn!(%error, "cannot mark lifecycle hooks recorded; they are handed over again");
                }
                if let Err(error) = self.store.record_events(&events).await {
                    tracing::warn!(%error, "cannot record lifecycle hook events");
                }
            }
            Err(error) => {
                tracing::warn!(%error, count = pending.len(), "cannot hand lifecycle hooks over yet; retrying later")
            }
        }
    }

    /// Hands over waiting actions that were never recorded (lifecycle-hook
    /// was down, or the engine died in between).
    pub(super) async fn hand_over_unrecorded(&self) -> Result<()> {
        let actions = self.store.list_unrecorded_hooks(500).await?;
        let mut parsed = Vec::with_capacity(actions.len());
        for action in &actions {
            let Some(hook) = action.inputs.get("hook") else {
                continue;
            };
            let text = |key: &str| {
                hook.get(key)
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            };
            let target = if text("type") == "webhook" {
                HookTarget::Webhook(text("address"))
            } else {
                HookTarget::Queue(text("address"))
            };
            let timeout_secs = hook
                .get("timeout")
                .and_then(serde_json::Value::as_u64)
                .and_then(|t| u32::try_from(t).ok())
                .unwrap_or(crate::domain::cluster::policy::DEFAULT_HOOK_TIMEOUT_SECS);
            let resource_id = match self.store.get_node(action.target_id).await? {
                Some(node) => node.physical_id.unwrap_or_default(),
                None => String::new(),
            };
            parsed.push((
                action,
                LifecycleHooks {
                    target,
                    timeout_secs,
                },
                resource_id,
            ));
        }
        let pending: Vec<PendingHook<'_>> = parsed
            .iter()
            .map(|(action, hooks, resource_id)| PendingHook {
                action,
                resource_id: resource_id.clone(),
                hooks,
                deadline: action.created_at + Duration::seconds(i64::from(hooks.timeout_secs)),
            })
            .collect();
        self.hand_over(&pending).await;
        Ok(())
    }
}
