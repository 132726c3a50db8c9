//! Removing nodes from a cluster (scale_in, resize, del_nodes, node delete):
//! one NODE_DELETE child action per victim. With a deletion policy that has
//! `hooks`, a child whose node is ACTIVE with a physical id waits in
//! WAITING_LIFECYCLE_COMPLETION and the whole batch is handed to
//! lifecycle-hook in one call; the others are READY at once. The parent
//! waits on its children, keeping the cluster's lock, and finishes when the
//! last one does — settling the cluster and releasing the lock then.
//!
//! With the cluster's `cluster.stop_node_before_delete` config, a node
//! that is deleted (not one that only leaves) has its instance stopped
//! first — decided when the children are recorded, so a config change
//! does not alter a removal under way. A stop that fails is an event and
//! the delete goes on, as in Senlin.
//!
//! Durable steps: the parent's one fenced transaction records the children,
//! the victims DELETING and the cluster's new size and makes the parent
//! WAITING; a run taken over before it commits starts again from the
//! cluster as it is. After it, nothing runs the parent any more: the
//! children are claimed by any engine and each deletes its node
//! idempotently (a node already gone after a takeover is a success), and
//! the parent is finished by whichever engine sees its last child end (or
//! by the sweeper).

use chrono::Duration;
use ember_runtime::Identity;
use serde_json::{Value, json};

use super::hooks::PendingHook;
use super::launch::{HOOK_INPUT, hook_input, hook_of, lifecycle_result};
use super::requests::json_object;
use super::run::{Ran, Run, RunResult, Stop};
use super::{ClusterService, action_event, event, node_event};
use crate::domain::cluster::operations;
use crate::domain::cluster::policy::LifecycleResult;
use crate::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, ClusterEvent, ClusterStatus, DeletionPolicy,
    HookTransition, LifecycleOutcome, Node, NodeStatus, PolicyKind, Profile,
};
use crate::error::{Error, Result};
use crate::store::clusters::{
    ClusterChange, ClusterColumns, KEEP_DESIRED_OUTPUT, KEPT_PROTECTED_OUTPUT,
    KEPT_PROTECTED_REASON, NodeStatusChange, Settle,
};

/// The NODE_DELETE input saying the node's instance is stopped first.
const STOP_BEFORE_DELETE: &str = "stop_before_delete";

/// How a removal treats its victims: the cluster's deletion policy (hooks,
/// grace period, desired capacity) and whether the nodes are deleted or
/// leave the cluster and stay.
pub(super) struct Removal {
    pub policy: Option<DeletionPolicy>,
    pub destroy: bool,
    /// Nodes a scale-in asked for but could not take: the members left
    /// are protected from scale-in.
    pub kept_protected: usize,
}

impl Removal {
    /// As the policy says (no policy: the nodes are deleted).
    pub fn by(policy: Option<DeletionPolicy>) -> Removal {
        let destroy = policy
            .as_ref()
            .is_none_or(|policy| policy.destroy_after_deletion);
        Removal {
            policy,
            destroy,
            kept_protected: 0,
        }
    }
}

impl ClusterService {
    /// The cluster's deletion policy: the enabled one of highest priority.
    pub(super) async fn deletion_policy(
        &self,
        cluster: &Cluster,
    ) -> Result<Option<DeletionPolicy>> {
        self.enabled_policy(cluster, |policy| match policy.kind {
            PolicyKind::Deletion { policy, .. } => Some(policy),
            PolicyKind::Scaling(_) | PolicyKind::Health { .. } | PolicyKind::Launch(_) => None,
        })
        .await
    }

    /// The first of the cluster's enabled policies (in the store's order:
    /// highest priority first) that `pick` takes.
    pub(super) async fn enabled_policy<T>(
        &self,
        cluster: &Cluster,
        pick: impl Fn(crate::domain::cluster::PolicyDefinition) -> Option<T>,
    ) -> Result<Option<T>> {
        Ok(self
            .store
            .list_bindings(cluster.id)
            .await?
            .into_iter()
            .filter(|(binding, _)| binding.enabled)
            .find_map(|(_, policy)| pick(policy)))
    }

    /// Records the children and makes the run's action wait on them, with
    /// the cluster's new desired capacity and `columns`.
    pub(super) async fn remove_nodes(
        &self,
        run: &Run,
        cluster: &Cluster,
        victims: Vec<Node>,
        desired_capacity: i32,
        mut columns: ClusterColumns,
        Removal {
            policy,
            destroy,
            kept_protected,
        }: Removal,
    ) -> RunResult<Ran> {
        let parent = &run.action;
        let now = ember_runtime::time::now();
        let caller = parent.caller();
        let hooks = policy.as_ref().and_then(|policy| policy.hooks.clone());
        let keep_desired = policy
            .as_ref()
            .is_some_and(|policy| !policy.reduce_desired_capacity);
        // Senlin's grace period: time for the node to finish what it does
        // before it goes. A lifecycle hook replaces it (the application
        // says when it is done), as in Senlin.
        let grace_period = match (&policy, &hooks) {
            (Some(policy), None) => policy.grace_period,
            _ => 0,
        };
        let mut children = Vec::with_capacity(victims.len());
        let mut node_changes = Vec::with_capacity(victims.len());
        let mut events = Vec::with_capacity(victims.len() + 1);
        for node in &victims {
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
                    STOP_BEFORE_DELETE: destroy && cluster.config.stop_node_before_delete(),
                })),
                &caller,
                now,
            );
            child.depended_by = vec![parent.id];
            if let (true, Some(hooks)) = (waits, &hooks) {
                child.inputs.insert(
                    HOOK_INPUT.into(),
                    hook_input(hooks, HookTransition::Terminating),
                );
            }
            events.push(action_event(
                &child,
                status.as_str(),
                format!("node {} chosen for removal", node.name),
            ));
            let mut deleting = NodeStatusChange::new(
                node.id,
                NodeStatus::Deleting,
                if waits {
                    "waiting for lifecycle completion"
                } else {
                    "being deleted"
                },
            );
            deleting.only_in_cluster = Some(Some(cluster.id));
            node_changes.push(deleting);
            children.push(child);
        }
        let mut reason = format!(
            "{}: removing {} node(s)",
            parent.kind.as_str(),
            children.len()
        );
        if kept_protected > 0 {
            reason.push_str(&format!(
                " ({kept_protected} fewer than asked: {})",
                KEPT_PROTECTED_REASON
            ));
        }
        columns.desired_capacity = Some(desired_capacity);
        columns.status = Some((ClusterStatus::Resizing, reason.clone()));
        events.push(event(
            "CLUSTER",
            cluster.id,
            &cluster.name,
            Some(cluster.id),
            parent.kind.as_str(),
            "RESIZING",
            reason,
            &caller,
        ));
        let mut outputs = parent.outputs.clone();
        outputs.insert(
            "nodes_removed".into(),
            json!(
                victims
                    .iter()
                    .map(|node| node.id.to_string())
                    .collect::<Vec<_>>()
            ),
        );
        outputs.insert(
            "lifecycle_action_tokens".into(),
            json!(
                children
                    .iter()
                    .filter(|child| child.status == ActionStatus::WaitingLifecycleCompletion)
                    .map(|child| child.id.to_string())
                    .collect::<Vec<_>>()
            ),
        );
        if keep_desired {
            outputs.insert(KEEP_DESIRED_OUTPUT.into(), Value::Bool(true));
        }
        if kept_protected > 0 {
            outputs.insert(KEPT_PROTECTED_OUTPUT.into(), json!(kept_protected));
        }
        let change = ClusterChange {
            cluster_id: Some(cluster.id),
            cluster: columns,
            node_changes,
            outputs: Some(outputs),
            events,
            ..ClusterChange::default()
        };
        if !self
            .store
            .start_waiting_on_children(parent, &children, &change)
            .await?
        {
            return Err(Stop::Lost);
        }
        if let Some(hooks) = &hooks {
            let pending: Vec<PendingHook<'_>> = children
                .iter()
                .zip(&victims)
                .filter(|(child, _)| child.status == ActionStatus::WaitingLifecycleCompletion)
                .map(|(child, node)| PendingHook {
                    action: child,
                    resource_id: node.physical_id.clone().unwrap_or_default(),
                    hooks,
                    transition: HookTransition::Terminating,
                    deadline: now + Duration::seconds(i64::from(hooks.timeout_secs)),
                })
                .collect();
            self.hand_over(&pending).await;
        }
        if self.store.finish_parent_if_done(parent.id).await?.is_some() {
            tracing::info!(action_id = %parent.id, "removal finished with nothing to wait for");
        }
        self.wake_dispatcher();
        Ok(Ran::Handed)
    }

    /// NODE_DELETE: a child of a removal deletes its node; a standalone
    /// delete of a member goes through the removal (deletion policy and
    /// hooks included) with itself as the parent; a standalone delete of a
    /// node of no cluster marks it DELETING (once: the mark is in the
    /// outputs) and deletes it.
    pub(super) async fn run_node_delete(&self, run: &Run) -> RunResult<Ran> {
        let action = &run.action;
        let Some(node) = self.store.get_node(action.target_id).await? else {
            let name = action
                .inputs
                .get("node_name")
                .and_then(Value::as_str)
                .unwrap_or("");
            return if run.is_rerun() {
                // Deleted by an earlier run of this action (taken over).
                Ok(Ran::succeeded(
                    format!("node {name} already deleted"),
                    Settle::Unchanged,
                ))
            } else {
                Err(Stop::Failed(Error::NotFound(format!(
                    "node {} {name} no longer exists: another action deleted it first",
                    action.target_id
                ))))
            };
        };
        let standalone = action
            .inputs
            .get("standalone")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if standalone
            && let Some(cluster_id) = node.cluster_id
            && let Some(cluster) = self.store.get_cluster(cluster_id).await?
        {
            if action.cluster_id != Some(cluster_id) {
                return Err(Stop::Failed(Error::Conflict(format!(
                    "node {} moved to cluster {cluster_id} after the delete was asked for: ask again",
                    node.name
                ))));
            }
            if node.status == NodeStatus::Deleting {
                return Err(Stop::Failed(Error::Conflict(format!(
                    "node {} is already being deleted",
                    node.name
                ))));
            }
            // A member: through the deletion policy, as del_nodes would.
            let policy = self.deletion_policy(&cluster).await?;
            let members = self.counted_members(cluster.id).await?;
            let live = i32::try_from(members.len()).unwrap_or(i32::MAX);
            let desired = if policy
                .as_ref()
                .is_none_or(|policy| policy.reduce_desired_capacity)
            {
                live.saturating_sub(1).max(0)
            } else {
                cluster.desired_capacity
            };
            return self
                .remove_nodes(
                    run,
                    &cluster,
                    vec![node],
                    desired,
                    ClusterColumns::default(),
                    Removal::by(policy),
                )
                .await;
        }
        if standalone && !run.action.outputs.contains_key("marked") {
            let mut deleting =
                NodeStatusChange::new(node.id, NodeStatus::Deleting, "being deleted");
            deleting.only_from = vec![NodeStatus::Active, NodeStatus::Error, NodeStatus::Warning];
            deleting.only_in_cluster = Some(None);
            let mut outputs = run.action.outputs.clone();
            outputs.insert("marked".into(), Value::Bool(true));
            let outcome = run
                .apply(
                    self,
                    &ClusterChange {
                        node_changes: vec![deleting],
                        outputs: Some(outputs),
                        ..ClusterChange::default()
                    },
                )
                .await?;
            if outcome.changed_nodes.is_empty() {
                return Err(Stop::Failed(Error::Conflict(format!(
                    "node {} is being deleted, created or added to a cluster by another action",
                    node.name
                ))));
            }
        }
        self.delete_one_node(run, node).await
    }

    async fn delete_one_node(&self, run: &Run, node: Node) -> RunResult<Ran> {
        let action = &run.action;
        let caller = action.caller();
        if let Some(why) = abandoned(action) {
            // AWS's Retain: the node leaves the cluster, kept and out of
            // service, and the operator is told.
            let reason = format!(
                "kept out of service: {why}; the node left its cluster: delete it, or add it back"
            );
            tracing::warn!(node = %node.name, %why, "lifecycle ABANDON: node kept out of service");
            return Ok(Ran::Finished {
                status: ActionStatus::Succeeded,
                reason: format!("node {} kept: {why}", node.name),
                change: ClusterChange {
                    release_nodes: vec![(node.id, NodeStatus::Active, reason.clone())],
                    events: vec![node_event(
                        &node,
                        "NODE_DELETE",
                        "RETAINED",
                        &reason,
                        &caller,
                    )],
                    ..ClusterChange::default()
                },
                settle: Settle::Unchanged,
            });
        }
        let destroy = action
            .inputs
            .get("destroy")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let grace_period = action.input_u64("grace_period").unwrap_or(0);
        if grace_period > 0 {
            // The lease is renewed meanwhile; if this engine dies, the
            // engine taking the action over waits again (never less).
            tokio::time::sleep(std::time::Duration::from_secs(grace_period)).await;
        }
        if !destroy {
            let reason = "removed from its cluster, kept (destroy_after_deletion false)";
            return Ok(Ran::Finished {
                status: ActionStatus::Succeeded,
                reason: format!("node {} removed from the cluster", node.name),
                change: ClusterChange {
                    release_nodes: vec![(node.id, NodeStatus::Active, reason.to_owned())],
                    events: vec![node_event(&node, "NODE_DELETE", "REMOVED", reason, &caller)],
                    ..ClusterChange::default()
                },
                settle: Settle::Unchanged,
            });
        }
        let profile = self
            .store
            .get_profile(node.profile_id)
            .await?
            .ok_or_else(|| {
                Stop::Failed(Error::NotFound(format!(
                    "the profile of node {} is gone",
                    node.name
                )))
            })?;
        run.check_still_owned(self).await?;
        let mut events = Vec::with_capacity(2);
        if action
            .inputs
            .get(STOP_BEFORE_DELETE)
            .and_then(Value::as_bool)
            == Some(true)
        {
            events.extend(self.stop_before_delete(&caller, &node, &profile).await);
        }
        match self.delete_physical(&caller, &node, &profile).await {
            Ok(()) => {
                // A node made outside a cluster had a trust of its own.
                self.revoke(crate::domain::delegation::DelegationOwner::Node(node.id))
                    .await;
                Ok(Ran::Finished {
                    status: ActionStatus::Succeeded,
                    reason: format!("node {} deleted", node.name),
                    change: ClusterChange {
                        delete_nodes: vec![node.id],
                        events: {
                            events.push(node_event(
                                &node,
                                "NODE_DELETE",
                                "DELETED",
                                "deleted",
                                &caller,
                            ));
                            events
                        },
                        ..ClusterChange::default()
                    },
                    settle: Settle::Unchanged,
                })
            }
            Err(error) => {
                let reason = format!("not deleted: {error}");
                let mut failed = NodeStatusChange::new(node.id, NodeStatus::Error, reason.clone());
                failed.only_from = vec![NodeStatus::Deleting];
                Ok(Ran::Finished {
                    status: ActionStatus::Failed,
                    reason: format!("node {} {reason}", node.name),
                    change: ClusterChange {
                        node_changes: vec![failed],
                        events: {
                            events.push(node_event(&node, "NODE_DELETE", "ERROR", reason, &caller));
                            events
                        },
                        ..ClusterChange::default()
                    },
                    settle: Settle::Unchanged,
                })
            }
        }
    }

    /// Senlin's `cluster.stop_node_before_delete`: runs the profile's
    /// `stop` operation on the node's instance and waits until it is
    /// stopped. A failed stop does not prevent the delete (as in Senlin):
    /// the node's event says what failed. Nothing for a node whose profile
    /// has no `stop` (a stack) or that has no resource.
    pub(super) async fn stop_before_delete(
        &self,
        caller: &Identity,
        node: &Node,
        profile: &Profile,
    ) -> Option<ClusterEvent> {
        let stop = operations::operations(profile.spec.type_name())
            .iter()
            .find(|operation| operation.name == "stop")?;
        node.physical_id.as_ref()?;
        let (status, reason) = match self.run_instance_operation(caller, node, stop.effect).await {
            Ok(()) => (
                node.status.as_str().to_owned(),
                "stopped before delete".to_owned(),
            ),
            Err(error) => {
                tracing::warn!(node_id = %node.id, %error, "stop before delete failed; deleting anyway");
                (
                    "WARNING".to_owned(),
                    format!("stop before delete failed, deleting anyway: {error}"),
                )
            }
        };
        Some(node_event(node, "NODE_OPERATION", &status, reason, caller))
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
            let Some((hooks, transition)) = hook_of(action) else {
                continue;
            };
            let resource_id = match self.store.get_node(action.target_id).await? {
                Some(node) => node.physical_id.unwrap_or_default(),
                None => String::new(),
            };
            parsed.push((action, hooks, transition, resource_id));
        }
        let pending: Vec<PendingHook<'_>> = parsed
            .iter()
            .map(|(action, hooks, transition, resource_id)| PendingHook {
                action,
                resource_id: resource_id.clone(),
                hooks,
                transition: *transition,
                deadline: action.created_at + Duration::seconds(i64::from(hooks.timeout_secs)),
            })
            .collect();
        self.hand_over(&pending).await;
        Ok(())
    }
}

/// Why a NODE_DELETE keeps its node instead: its lifecycle wait came to
/// ABANDON — the application's answer, or the hook's default when the
/// deadline passed first. `None`: the node goes.
fn abandoned(action: &ClusterAction) -> Option<String> {
    match (lifecycle_result(action)?, action.lifecycle_outcome?) {
        (LifecycleResult::Continue, _) => None,
        (LifecycleResult::Abandon, LifecycleOutcome::Expired) => Some(format!(
            "lifecycle deadline passed, the hook's default result is ABANDON ({})",
            action.lifecycle_detail
        )),
        (LifecycleResult::Abandon, _) => {
            Some(format!("lifecycle ABANDON ({})", action.lifecycle_detail))
        }
    }
}
