//! Launch hooks (`ember.policy.launch-1.0`): a node a cluster builds —
//! scale-out, resize up, a cluster's create, a node created into the
//! cluster — waits, built but not in service, until the application
//! answers its lifecycle action (AWS's `Pending:Wait`).
//!
//! The growth builds its planned nodes as always, but a node whose
//! resource is ready stays CREATING (counted in the cluster's size, not
//! ACTIVE). One fenced transaction then records a NODE_CREATE child per
//! held node, WAITING_LIFECYCLE_COMPLETION and handed to lifecycle-hook
//! (message `lifecycle_transition_type: "launching"`), and makes the
//! growth WAIT on them, keeping the cluster's lock. `complete_lifecycle`
//! or the deadline moves a child to READY, and any engine runs it:
//!
//! - CONTINUE: the node goes ACTIVE, into service;
//! - ABANDON: its resource is deleted; with `on_abandon: RETRY` and rounds
//!   left the node is CREATING again, with a new resource id, to be built
//!   again; otherwise (FAIL, or no rounds left) the node row goes.
//!
//! When the last child ends, the growth is READY again (not finished: its
//! outputs say it resumes) and its next run builds the nodes made CREATING
//! again, holds them in a new round, or finishes — failed if a node was
//! abandoned for good.
//!
//! A recover's rebuild (RECREATE or REBUILD of a member, by CLUSTER_RECOVER
//! or NODE_RECOVER, a health policy's included) puts the node on a new
//! resource: with a launch policy the rebuilt node waits the same way, and
//! the recover resumes from the nodes it held (`launch.nodes` in its
//! outputs) instead of checking the cluster again. Every step is durable: a run taken over rebuilds
//! only nodes still CREATING, and a child finds its node as the dead run
//! left it.

use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::hooks::PendingHook;
use super::run::{Ran, Run, RunResult, Stop};
use super::{ClusterService, action_event, node_event};
use crate::domain::cluster::policy::LifecycleResult;
use crate::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, HookTarget, HookTransition, LaunchPolicy,
    LifecycleHooks, LifecycleOutcome, Node, NodeStatus, OnAbandon, PolicyKind, Profile,
};
use crate::error::{Error, Result};
use crate::store::clusters::{ClusterChange, NodeStatusChange, RESUME_AFTER_CHILDREN_OUTPUT};

/// The growth's output recording its launch rounds.
const LAUNCH_OUTPUT: &str = "launch";
/// The child's input: what its ABANDON does.
const LAUNCH_INPUT: &str = "launch";
/// The input of a waiting child describing its hook (both transitions).
pub(super) const HOOK_INPUT: &str = "hook";

/// The `hook` input of a waiting action: enough to hand it over again
/// after a crash, and to know its default result.
pub(super) fn hook_input(hooks: &LifecycleHooks, transition: HookTransition) -> Value {
    let (kind, address) = match &hooks.target {
        HookTarget::Queue(queue) => ("queue", queue.as_str()),
        HookTarget::Webhook(url) => ("webhook", url.as_str()),
    };
    json!({"type": kind, "address": address, "timeout": hooks.timeout_secs,
        "default_result": hooks.default_result.as_str(), "transition": transition.as_str()})
}

/// The hook a waiting action was recorded with, and its transition
/// (terminating for actions recorded before launch hooks).
pub(super) fn hook_of(action: &ClusterAction) -> Option<(LifecycleHooks, HookTransition)> {
    let hook = action.inputs.get(HOOK_INPUT)?;
    let text = |key: &str| hook.get(key).and_then(Value::as_str).unwrap_or("");
    let target = if text("type") == "webhook" {
        HookTarget::Webhook(text("address").to_owned())
    } else {
        HookTarget::Queue(text("address").to_owned())
    };
    let timeout_secs = hook
        .get("timeout")
        .and_then(Value::as_u64)
        .and_then(|t| u32::try_from(t).ok())
        .unwrap_or(crate::domain::cluster::policy::DEFAULT_HOOK_TIMEOUT_SECS);
    let default_result =
        LifecycleResult::parse(text("default_result"), "default_result").unwrap_or_default();
    let transition = match text("transition") {
        "launching" => HookTransition::Launching,
        _ => HookTransition::Terminating,
    };
    Some((
        LifecycleHooks {
            target,
            timeout_secs,
            default_result,
        },
        transition,
    ))
}

/// What a finished lifecycle wait came to: the application's answer, or
/// the hook's default when the deadline passed first; `None` while it
/// waits.
pub(super) fn lifecycle_result(action: &ClusterAction) -> Option<LifecycleResult> {
    match action.lifecycle_outcome? {
        LifecycleOutcome::Completed => Some(LifecycleResult::Continue),
        LifecycleOutcome::Abandoned => Some(LifecycleResult::Abandon),
        LifecycleOutcome::Expired => Some(
            hook_of(action)
                .map(|(hooks, _)| hooks.default_result)
                .unwrap_or_default(),
        ),
    }
}

/// Whether `action` is the lifecycle action of a launching node.
pub(super) fn is_launch_wait(action: &ClusterAction) -> bool {
    action.kind == ActionKind::NodeCreate && action.inputs.contains_key(LAUNCH_INPUT)
}

/// Where an action's launch hooks stand, kept in its outputs.
#[derive(Debug, Clone, Default)]
struct Rounds {
    /// How many rounds of waits it recorded.
    held: u32,
    /// Every node it held, in any round.
    nodes: Vec<Uuid>,
}

impl Rounds {
    fn of(action: &ClusterAction) -> Rounds {
        let launch = action.outputs.get(LAUNCH_OUTPUT);
        let held = launch
            .and_then(|launch| launch.get("rounds"))
            .and_then(Value::as_u64)
            .and_then(|rounds| u32::try_from(rounds).ok())
            .unwrap_or(0);
        let nodes = launch
            .and_then(|launch| launch.get("nodes"))
            .and_then(Value::as_array)
            .map(|ids| {
                ids.iter()
                    .filter_map(|id| id.as_str().and_then(|id| Uuid::parse_str(id).ok()))
                    .collect()
            })
            .unwrap_or_default();
        Rounds { held, nodes }
    }
}

/// Every node `action` held on a launch hook, in any round.
pub(super) fn held_nodes(action: &ClusterAction) -> Vec<Uuid> {
    Rounds::of(action).nodes
}

/// How many times `action` was made READY again after its launch waits:
/// runs that are not take-overs (an engine that died), so they do not
/// count against its take-over attempts.
pub(crate) fn resumed_runs(action: &ClusterAction) -> i32 {
    i32::try_from(Rounds::of(action).held).unwrap_or(i32::MAX)
}

/// How a growth's planned nodes ended.
pub(super) struct Grown {
    pub active: usize,
    /// In ERROR (their resource failed).
    pub failed: usize,
    /// Abandoned at launch for good: their rows are gone.
    pub abandoned: usize,
    pub planned: usize,
}

impl Grown {
    /// "3 node(s) created", with what did not go well.
    pub fn summary(&self) -> String {
        let mut text = if self.failed == 0 && self.abandoned == 0 {
            format!("{} node(s) created", self.active)
        } else {
            format!("{} of {} node(s) created", self.active, self.planned)
        };
        if self.failed > 0 {
            text.push_str(&format!(", {} in ERROR", self.failed));
        }
        if self.abandoned > 0 {
            text.push_str(&format!(
                ", {} abandoned by the launch lifecycle hook and deleted",
                self.abandoned
            ));
        }
        text
    }
}

/// A growth's build step: everything built and in service (or failed), or
/// handed to launch hooks (the run ends; it resumes when they are
/// answered).
pub(super) enum Building {
    Done(Grown),
    Held,
}

impl ClusterService {
    /// The cluster's enabled launch policy, if any.
    pub(super) async fn launch_policy(&self, cluster: &Cluster) -> Result<Option<LaunchPolicy>> {
        self.enabled_policy(cluster, |policy| match policy.kind {
            PolicyKind::Launch(launch) => Some(launch),
            _ => None,
        })
        .await
    }

    /// Builds the `planned` nodes still CREATING; with a launch policy,
    /// those built wait for their lifecycle actions.
    pub(super) async fn build_planned(
        &self,
        run: &Run,
        cluster: &Cluster,
        profile: &Profile,
        planned: &[Uuid],
    ) -> RunResult<Building> {
        let launch = self.launch_policy(cluster).await?;
        self.converge_nodes(run, profile, planned, launch.is_some())
            .await?;
        let nodes = self.store.get_nodes(planned).await?;
        let mut nodes = nodes;
        if let Some(launch) = launch {
            let built: Vec<&Node> = nodes
                .iter()
                .filter(|node| node.status == NodeStatus::Creating)
                .collect();
            // Rounds beyond the retries only come from answers whose run
            // failed (the node left CREATING): those nodes fail, rather
            // than wait again and again.
            if !built.is_empty() && Rounds::of(&run.action).held <= launch.retries {
                self.hold_for_launch(run, cluster, &built, &launch).await?;
                return Ok(Building::Held);
            }
            if !built.is_empty() {
                let reason = "its launch lifecycle action ended without putting it in service";
                let changes = built
                    .iter()
                    .map(|node| {
                        let mut failed = NodeStatusChange::new(node.id, NodeStatus::Error, reason);
                        failed.only_from = vec![NodeStatus::Creating];
                        failed
                    })
                    .collect();
                run.apply(
                    self,
                    &ClusterChange {
                        node_changes: changes,
                        ..ClusterChange::default()
                    },
                )
                .await?;
                nodes = self.store.get_nodes(planned).await?;
            }
        }
        let count = |status: NodeStatus| nodes.iter().filter(|node| node.status == status).count();
        Ok(Building::Done(Grown {
            active: count(NodeStatus::Active),
            failed: nodes.len() - count(NodeStatus::Active),
            abandoned: planned.len() - nodes.len(),
            planned: planned.len(),
        }))
    }

    /// For an action resumed after its launch waits (a recover's rebuild):
    /// the nodes it held are built again, held again, or done.
    pub(super) async fn resume_held(
        &self,
        run: &Run,
        cluster: &Cluster,
        profile: &Profile,
    ) -> RunResult<Building> {
        let held = Rounds::of(&run.action).nodes;
        self.build_planned(run, cluster, profile, &held).await
    }

    /// Records a waiting NODE_CREATE child per built node and makes the
    /// run's action wait on them (one fenced transaction), then hands them
    /// to lifecycle-hook.
    pub(super) async fn hold_for_launch(
        &self,
        run: &Run,
        cluster: &Cluster,
        built: &[&Node],
        launch: &LaunchPolicy,
    ) -> RunResult<()> {
        let parent = &run.action;
        let caller = parent.caller();
        let now = ember_runtime::time::now();
        let round = Rounds::of(parent).held + 1;
        let hooks = &launch.hooks;
        let deadline = now + chrono::Duration::seconds(i64::from(hooks.timeout_secs));
        let mut children = Vec::with_capacity(built.len());
        let mut node_changes = Vec::with_capacity(built.len());
        let mut events = Vec::with_capacity(built.len());
        for node in built {
            let mut inputs = Map::new();
            inputs.insert(
                HOOK_INPUT.into(),
                hook_input(hooks, HookTransition::Launching),
            );
            inputs.insert(
                LAUNCH_INPUT.into(),
                json!({"round": round, "retries": launch.retries,
                    "on_abandon": launch.on_abandon.as_str()}),
            );
            inputs.insert("node_name".into(), json!(node.name));
            let mut child = ClusterAction::new(
                ActionKind::NodeCreate,
                node.id,
                Some(cluster.id),
                ActionStatus::WaitingLifecycleCompletion,
                inputs,
                &caller,
                now,
            );
            child.depended_by = vec![parent.id];
            events.push(action_event(
                &child,
                ActionStatus::WaitingLifecycleCompletion.as_str(),
                format!(
                    "node {} built, waiting for its launch lifecycle action",
                    node.name
                ),
            ));
            let mut waiting = NodeStatusChange::new(
                node.id,
                NodeStatus::Creating,
                format!(
                    "built, waiting for lifecycle completion (launching) until {}",
                    deadline.to_rfc3339()
                ),
            );
            waiting.only_from = vec![NodeStatus::Creating];
            node_changes.push(waiting);
            children.push(child);
        }
        // As this run left them (its plan is written after the claim).
        let mut outputs = self
            .store
            .get_action(parent.id)
            .await?
            .map(|action| action.outputs)
            .unwrap_or_else(|| parent.outputs.clone());
        outputs.insert(RESUME_AFTER_CHILDREN_OUTPUT.into(), Value::Bool(true));
        let mut held = Rounds::of(parent).nodes;
        for node in built {
            if !held.contains(&node.id) {
                held.push(node.id);
            }
        }
        outputs.insert(
            LAUNCH_OUTPUT.into(),
            json!({"rounds": round, "nodes": held.iter().map(Uuid::to_string).collect::<Vec<_>>()}),
        );
        outputs.insert(
            "lifecycle_action_tokens".into(),
            json!(
                children
                    .iter()
                    .map(|child| child.id.to_string())
                    .collect::<Vec<_>>()
            ),
        );
        let change = ClusterChange {
            cluster_id: Some(cluster.id),
            cluster: crate::store::clusters::ClusterColumns {
                status: Some((
                    crate::domain::cluster::ClusterStatus::Resizing,
                    format!(
                        "{}: {} node(s) built, waiting for their launch lifecycle actions",
                        parent.kind.as_str(),
                        built.len()
                    ),
                )),
                ..Default::default()
            },
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
        let pending: Vec<PendingHook<'_>> = children
            .iter()
            .zip(built)
            .map(|(child, node)| PendingHook {
                action: child,
                resource_id: node.physical_id.clone().unwrap_or_default(),
                hooks,
                transition: HookTransition::Launching,
                deadline,
            })
            .collect();
        self.hand_over(&pending).await;
        self.wake_dispatcher();
        Ok(())
    }

    /// A launching node's NODE_CREATE, once its lifecycle action was
    /// answered (or its deadline passed): the node goes into service, or
    /// its resource is deleted and the node built again or removed.
    pub(super) async fn run_launch_answer(&self, run: &Run) -> RunResult<Ran> {
        let action = &run.action;
        let caller = action.caller();
        let Some(node) = self.store.get_node(action.target_id).await? else {
            return Ok(Ran::succeeded(
                "the node is gone",
                crate::store::clusters::Settle::Unchanged,
            ));
        };
        if node.status != NodeStatus::Creating {
            // Answered by an earlier run of this action (taken over).
            return Ok(Ran::succeeded(
                format!("node {} is {} already", node.name, node.status.as_str()),
                crate::store::clusters::Settle::Unchanged,
            ));
        }
        let result = lifecycle_result(action).ok_or_else(|| {
            Stop::Failed(Error::Conflict(format!(
                "the lifecycle action of node {} has not been answered",
                node.name
            )))
        })?;
        let why = match action.lifecycle_outcome {
            Some(LifecycleOutcome::Expired) => format!(
                "lifecycle deadline passed, the hook's default result is {} ({})",
                result.as_str(),
                action.lifecycle_detail
            ),
            _ => format!("lifecycle {}", action.lifecycle_detail),
        };
        if result == LifecycleResult::Continue {
            let reason = format!("created; in service ({why})");
            let mut active = NodeStatusChange::new(node.id, NodeStatus::Active, reason.clone());
            active.only_from = vec![NodeStatus::Creating];
            return Ok(Ran::Finished {
                status: ActionStatus::Succeeded,
                reason: format!("node {} in service", node.name),
                change: ClusterChange {
                    node_changes: vec![active],
                    events: vec![node_event(&node, "NODE_CREATE", "ACTIVE", reason, &caller)],
                    ..ClusterChange::default()
                },
                settle: crate::store::clusters::Settle::Unchanged,
            });
        }
        self.abandon_launch(run, &node, &why).await
    }

    /// ABANDON: the node's resource is deleted, then the node is made to be
    /// built again (RETRY with rounds left) or removed.
    async fn abandon_launch(&self, run: &Run, node: &Node, why: &str) -> RunResult<Ran> {
        let action = &run.action;
        let caller = action.caller();
        let launch = action.inputs.get(LAUNCH_INPUT);
        let number = |key: &str| {
            launch
                .and_then(|launch| launch.get(key))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let (round, retries) = (number("round"), number("retries"));
        let retry = launch
            .and_then(|launch| launch.get("on_abandon"))
            .and_then(Value::as_str)
            == Some(OnAbandon::Retry.as_str())
            && round <= retries;
        let profile = self.node_profile(node).await?;
        run.check_still_owned(self).await?;
        // One final write: the node's change (or its row gone) and its
        // event, the child action ending `status` with `summary`.
        let ended =
            |status, summary: String, change: ClusterChange, event: &str, reason: String| {
                let mut change = change;
                change
                    .events
                    .push(node_event(node, "NODE_CREATE", event, reason, &caller));
                Ran::Finished {
                    status,
                    reason: summary,
                    change,
                    settle: crate::store::clusters::Settle::Unchanged,
                }
            };
        let changed = |change: NodeStatusChange| ClusterChange {
            node_changes: vec![NodeStatusChange {
                only_from: vec![NodeStatus::Creating],
                ..change
            }],
            ..ClusterChange::default()
        };
        if let Err(error) = self.delete_physical(&caller, node, &profile).await {
            let reason =
                format!("abandoned at launch ({why}), but its resource was not deleted: {error}");
            let failed = NodeStatusChange::new(node.id, NodeStatus::Error, reason.clone());
            return Ok(ended(
                ActionStatus::Failed,
                format!("node {} {reason}", node.name),
                changed(failed),
                "ERROR",
                reason,
            ));
        }
        if retry {
            let reason = format!(
                "abandoned at launch ({why}): its resource was deleted, another is built (retry {round} of {retries})"
            );
            let mut again = NodeStatusChange::new(node.id, NodeStatus::Creating, reason.clone());
            again.physical_id = Some(super::grow::planned_physical_id(&profile));
            return Ok(ended(
                ActionStatus::Succeeded,
                format!("node {} abandoned at launch: built again", node.name),
                changed(again),
                "ABANDONED",
                reason,
            ));
        }
        let after = if round > retries {
            format!("no retries left ({retries})")
        } else {
            "on_abandon FAIL".to_owned()
        };
        Ok(ended(
            ActionStatus::Succeeded,
            format!("node {} abandoned at launch and deleted", node.name),
            ClusterChange {
                delete_nodes: vec![node.id],
                ..ClusterChange::default()
            },
            "ABANDONED",
            format!("abandoned at launch ({why}): deleted, {after}"),
        ))
    }
}
