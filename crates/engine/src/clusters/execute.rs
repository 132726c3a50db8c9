//! Running one claimed action, under its cluster's lock when it takes one
//! (the claim took it), with every write fenced by the run's token.
//!
//! Each kind runs in durable steps, so that the run that takes an action
//! over after its engine died (every kind is taken over; see the
//! dispatcher) finishes it from where the dead run stopped:
//!
//! | kind | resumes from |
//! |---|---|
//! | CLUSTER_CREATE, CLUSTER_SCALE_OUT, CLUSTER_RESIZE up, NODE_CREATE | the growth plan in the action's outputs (`planned_nodes`): nodes still CREATING are created idempotently and settled (see `grow`); no plan yet = start again |
//! | CLUSTER_SCALE_IN, CLUSTER_RESIZE down, CLUSTER_DEL_NODES, NODE_DELETE of a member | nothing written = start again; once the removal is recorded the parent WAITs and is never run again: its NODE_DELETE children carry on (see `removal`) |
//! | NODE_DELETE (child, or of a node of no cluster) | the node row: gone after a takeover = done; otherwise delete its resource again (a delete of a gone resource succeeds) |
//! | CLUSTER_RECOVER | members left CREATING by the dead run are created with their recorded id; the rest are checked and recovered again (see `maintenance`) |
//! | CLUSTER_CHECK, CLUSTER_ADD_NODES, CLUSTER_ATTACH/DETACH_POLICY | the cluster as it is: one final write each (adoptions are conditional, so a rerun adopts nothing twice) |
//! | CLUSTER_DELETE | the nodes left: each deleted again, idempotently, then the cluster row (see `maintenance`) |
//!
//! Every action that holds the cluster's lock ends with one transaction
//! that makes it final, settles the cluster from its nodes (never left
//! RESIZING; desired capacity = its members) and releases the lock.

use serde_json::Value;
use uuid::Uuid;

use super::ClusterService;
use super::run::{Ran, Run, RunResult, Stop};
use crate::domain::cluster::policy::{Criteria, ScalingEvent};
use crate::domain::cluster::sizing::{self, AdjustmentType};
use crate::domain::cluster::victims::select_victims;
use crate::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterStatus, Node, NodeStatus, PolicyKind,
};
use crate::error::{Error, Result};
use crate::store::clusters::{ClusterChange, ClusterColumns, NodeStatusChange, Settle};

impl ClusterService {
    pub(super) async fn execute(&self, run: &Run) -> RunResult<Ran> {
        match run.action.kind {
            ActionKind::NodeCreate => self.run_node_create(run).await,
            ActionKind::NodeDelete => self.run_node_delete(run).await,
            _ => self.run_cluster_action(run).await,
        }
    }

    async fn run_cluster_action(&self, run: &Run) -> RunResult<Ran> {
        let action = &run.action;
        let cluster = self
            .store
            .get_cluster(action.target_id)
            .await?
            .ok_or_else(|| {
                Stop::Failed(Error::NotFound(format!(
                    "cluster {} is gone",
                    action.target_id
                )))
            })?;
        let members = self.counted_members(cluster.id).await?;
        let live = i32::try_from(members.len()).unwrap_or(i32::MAX);
        let settle = Settle::FromNodes {
            keep_desired: false,
            lead: format!("{} completed", action.kind.as_str()),
        };
        match action.kind {
            ActionKind::ClusterCreate => {
                let count = cluster.desired_capacity.saturating_sub(live).max(0);
                self.grow(run, &cluster, count, ClusterColumns::default())
                    .await
            }
            ActionKind::ClusterScaleOut => {
                if super::grow::planned_nodes(run).is_some() {
                    return self.grow(run, &cluster, 0, ClusterColumns::default()).await;
                }
                self.check_cooldown(&cluster, ScalingEvent::ScaleOut)
                    .await?;
                let count = match action.input_u64("count") {
                    Some(count) => count,
                    None => {
                        self.policy_step(&cluster.id, ScalingEvent::ScaleOut, live)
                            .await?
                    }
                };
                let desired = sizing::grown_by(live, count, cluster.max_size)?;
                self.grow(
                    run,
                    &cluster,
                    desired - live,
                    ClusterColumns {
                        desired_capacity: Some(desired),
                        ..ClusterColumns::default()
                    },
                )
                .await
            }
            ActionKind::ClusterScaleIn => {
                self.check_cooldown(&cluster, ScalingEvent::ScaleIn).await?;
                let count = match action.input_u64("count") {
                    Some(count) => count,
                    None => {
                        self.policy_step(&cluster.id, ScalingEvent::ScaleIn, live)
                            .await?
                    }
                };
                let desired = sizing::shrunk_by(live, count, cluster.min_size)?;
                self.shrink(
                    run,
                    &cluster,
                    &members,
                    live - desired,
                    desired,
                    ClusterColumns::default(),
                )
                .await
            }
            ActionKind::ClusterResize => {
                if super::grow::planned_nodes(run).is_some() {
                    return self.grow(run, &cluster, 0, ClusterColumns::default()).await;
                }
                let (desired, min_size, max_size) = resize_target(action, &cluster)?;
                let columns = ClusterColumns {
                    desired_capacity: Some(desired),
                    min_size: Some(min_size),
                    max_size: Some(max_size),
                    status: None,
                };
                if desired > live {
                    self.grow(run, &cluster, desired - live, columns).await
                } else if desired < live {
                    self.shrink(run, &cluster, &members, live - desired, desired, columns)
                        .await
                } else {
                    Ok(Ran::Finished {
                        status: ActionStatus::Succeeded,
                        reason: format!("resized to {desired}"),
                        change: ClusterChange {
                            cluster_id: Some(cluster.id),
                            cluster: columns,
                            ..ClusterChange::default()
                        },
                        settle,
                    })
                }
            }
            ActionKind::ClusterDelNodes => {
                let wanted: Vec<Uuid> = id_list(action.inputs.get("nodes"));
                let victims: Vec<Node> = members
                    .into_iter()
                    .filter(|node| wanted.contains(&node.id) && node.status != NodeStatus::Deleting)
                    .collect();
                if victims.is_empty() {
                    return Err(Stop::Failed(Error::Conflict(format!(
                        "none of the {} node(s) to delete is a member of cluster {:?} any more",
                        wanted.len(),
                        cluster.name
                    ))));
                }
                let policy = self.deletion_policy(&cluster).await?;
                let removed = i32::try_from(victims.len()).unwrap_or(i32::MAX);
                let desired = if policy
                    .as_ref()
                    .is_none_or(|policy| policy.reduce_desired_capacity)
                {
                    live.saturating_sub(removed).max(0)
                } else {
                    cluster.desired_capacity
                };
                self.remove_nodes(
                    run,
                    &cluster,
                    victims,
                    desired,
                    ClusterColumns::default(),
                    policy,
                )
                .await
            }
            ActionKind::ClusterAddNodes => self.add_nodes(run, &cluster).await,
            ActionKind::ClusterAttachPolicy | ActionKind::ClusterDetachPolicy => {
                self.change_policy(run, &cluster).await
            }
            ActionKind::ClusterCheck | ActionKind::ClusterRecover => {
                self.check_or_recover_nodes(run, &cluster, members).await
            }
            ActionKind::ClusterDelete => self.delete_cluster_nodes(run, &cluster).await,
            ActionKind::NodeCreate | ActionKind::NodeDelete => Err(Stop::Failed(
                Error::InvalidInput("not a cluster action".into()),
            )),
        }
    }

    /// What a failed run writes with its FAILED status: the node of a node
    /// action ERROR (a member still INIT leaves the cluster: it never
    /// joined), and the cluster settled from its nodes (a failed delete
    /// leaves it ERROR; policy changes leave it as it is).
    pub(super) async fn failure_finish(&self, run: &Run, error: &Error) -> (ClusterChange, Settle) {
        let action = &run.action;
        let lead = format!("{} failed: {error}", action.kind.as_str());
        let mut change = ClusterChange::default();
        match action.kind {
            ActionKind::NodeCreate => {
                let node = self.store.get_node(action.target_id).await.ok().flatten();
                match node {
                    Some(node) if node.status == NodeStatus::Init && node.cluster_id.is_some() => {
                        change.release_nodes.push((
                            node.id,
                            NodeStatus::Error,
                            format!("not created: {error}"),
                        ));
                    }
                    Some(node) => {
                        let mut failed =
                            NodeStatusChange::new(node.id, NodeStatus::Error, error.to_string());
                        failed.only_from = vec![NodeStatus::Init, NodeStatus::Creating];
                        change.node_changes.push(failed);
                    }
                    None => {}
                }
            }
            ActionKind::NodeDelete => {
                let mut failed = NodeStatusChange::new(
                    action.target_id,
                    NodeStatus::Error,
                    format!("not deleted: {error}"),
                );
                failed.only_from = vec![NodeStatus::Deleting];
                change.node_changes.push(failed);
            }
            _ => {}
        }
        let settle = match action.kind {
            ActionKind::ClusterDelete => Settle::Status(ClusterStatus::Error, lead),
            ActionKind::ClusterAttachPolicy | ActionKind::ClusterDetachPolicy => Settle::Unchanged,
            _ => Settle::FromNodes {
                keep_desired: false,
                lead,
            },
        };
        (change, settle)
    }

    /// Refuses a scale while an enabled scaling policy for its event is in
    /// its cooldown after the last such scale that succeeded (Senlin's
    /// scaling policy check; AWS Auto Scaling's cooldown).
    pub(super) async fn check_cooldown(
        &self,
        cluster: &Cluster,
        event: ScalingEvent,
    ) -> Result<()> {
        let kind = match event {
            ScalingEvent::ScaleIn => ActionKind::ClusterScaleIn,
            ScalingEvent::ScaleOut => ActionKind::ClusterScaleOut,
        };
        for (binding, policy) in self.store.list_bindings(cluster.id).await? {
            let PolicyKind::Scaling(scaling) = &policy.kind else {
                continue;
            };
            if !binding.enabled || scaling.event != event || scaling.cooldown == 0 {
                continue;
            }
            let Some(last) = self.store.last_success(cluster.id, kind).await? else {
                return Ok(());
            };
            let until = last + chrono::Duration::seconds(i64::from(scaling.cooldown));
            let now = ember_runtime::time::now();
            if now < until {
                return Err(Error::Conflict(format!(
                    "scaling policy {:?} is in its cooldown of {} s: {} s left after the last {} at {}",
                    policy.name,
                    scaling.cooldown,
                    (until - now).num_seconds().max(1),
                    kind.as_str(),
                    last.to_rfc3339()
                )));
            }
        }
        Ok(())
    }

    /// Nodes a scaling policy adds or removes by default (1 without one).
    async fn policy_step(
        &self,
        cluster_id: &Uuid,
        event: ScalingEvent,
        current: i32,
    ) -> Result<u64> {
        for (binding, policy) in self.store.list_bindings(*cluster_id).await? {
            if let (true, PolicyKind::Scaling(scaling)) = (binding.enabled, &policy.kind)
                && scaling.event == event
            {
                let adjustment = AdjustmentType::parse(&scaling.adjustment_type)?;
                let signed = if event == ScalingEvent::ScaleIn
                    && adjustment != AdjustmentType::ExactCapacity
                {
                    -scaling.number
                } else {
                    scaling.number
                };
                let desired = sizing::desired_after(current, adjustment, signed, scaling.min_step)?;
                return Ok(u64::from(desired.abs_diff(current)).max(1));
            }
        }
        Ok(1)
    }

    /// Chooses `count` victims among the members and removes them.
    async fn shrink(
        &self,
        run: &Run,
        cluster: &Cluster,
        members: &[Node],
        count: i32,
        desired: i32,
        columns: ClusterColumns,
    ) -> RunResult<Ran> {
        let policy = self.deletion_policy(cluster).await?;
        let criteria = policy
            .as_ref()
            .map_or(Criteria::Random, |policy| policy.criteria);
        let victims: Vec<Node> = select_victims(
            members,
            usize::try_from(count).unwrap_or(0),
            criteria,
            |node| {
                node.profile_id
                    .get_timestamp()
                    .map_or(0, |ts| i64::try_from(ts.to_unix().0).unwrap_or(i64::MAX))
            },
        )
        .into_iter()
        .cloned()
        .collect();
        self.remove_nodes(run, cluster, victims, desired, columns, policy)
            .await
    }
}

/// The (desired capacity, min_size, max_size) a resize asks for, computed
/// now from the cluster as it is (the request was checked when it was
/// made, but other actions may have run since): an adjustment applies to
/// the current desired capacity; strict refuses what does not fit.
fn resize_target(
    action: &crate::domain::cluster::ClusterAction,
    cluster: &Cluster,
) -> Result<(i32, i32, i32)> {
    let read = |key: &str| {
        action
            .inputs
            .get(key)
            .and_then(Value::as_i64)
            .and_then(|v| i32::try_from(v).ok())
    };
    let min_size = read("min_size").unwrap_or(cluster.min_size);
    let max_size = read("max_size").unwrap_or(cluster.max_size);
    let strict = action
        .inputs
        .get("strict")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let adjustment = action
        .inputs
        .get("adjustment_type")
        .and_then(Value::as_str)
        .map(AdjustmentType::parse)
        .transpose()?;
    let desired = match (
        adjustment,
        action.inputs.get("number").and_then(Value::as_f64),
    ) {
        (Some(adjustment), Some(number)) => sizing::desired_after(
            cluster.desired_capacity,
            adjustment,
            number,
            read("min_step").unwrap_or(1).max(1),
        )?,
        _ => read("desired_capacity").unwrap_or(cluster.desired_capacity),
    };
    let desired = sizing::fit(desired, min_size, max_size, strict)?;
    Ok((desired, min_size, max_size))
}

pub(super) fn id_list(value: Option<&Value>) -> Vec<Uuid> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().and_then(|text| Uuid::parse_str(text).ok()))
                .collect()
        })
        .unwrap_or_default()
}
