//! The runs of the actions that change a cluster's size — create, scale
//! out, scale in, resize — with what they consult first: the scaling
//! policies' cooldown and default step, and the deletion policy's choice
//! of victims.

use serde_json::Value;
use uuid::Uuid;

use crate::clusters::ClusterService;
use crate::clusters::removal::Removal;
use crate::clusters::run::{Ran, Run, RunResult, Stop};
use crate::domain::cluster::policy::{Criteria, ScalingEvent, ScalingPolicy};
use crate::domain::cluster::sizing::{self, AdjustmentType};
use crate::domain::cluster::victims::select_victims;
use crate::domain::cluster::{ActionKind, ActionStatus, Cluster, Node, PolicyKind};
use crate::error::{Error, Result};
use crate::store::clusters::{ClusterChange, ClusterColumns, Settle};

impl ClusterService {
    /// Creates the members a new cluster still lacks.
    pub(super) async fn run_cluster_create(
        &self,
        run: &Run,
        cluster: &Cluster,
        live: i32,
    ) -> RunResult<Ran> {
        let count = cluster.desired_capacity.saturating_sub(live).max(0);
        self.grow(run, cluster, count, ClusterColumns::default())
            .await
    }

    /// Adds `count` nodes (or the scaling policy's step), within max_size.
    pub(super) async fn run_scale_out(
        &self,
        run: &Run,
        cluster: &Cluster,
        live: i32,
    ) -> RunResult<Ran> {
        if crate::clusters::grow::planned_nodes(run).is_some() {
            return self.grow(run, cluster, 0, ClusterColumns::default()).await;
        }
        let desired = self
            .scaling_target(run, cluster, ScalingEvent::ScaleOut, live)
            .await?;
        self.grow(
            run,
            cluster,
            desired - live,
            ClusterColumns {
                desired_capacity: Some(desired),
                ..ClusterColumns::default()
            },
        )
        .await
    }

    /// Removes `count` nodes (or the scaling policy's step), within min_size.
    pub(super) async fn run_scale_in(
        &self,
        run: &Run,
        cluster: &Cluster,
        members: &[Node],
        live: i32,
    ) -> RunResult<Ran> {
        let desired = self
            .scaling_target(run, cluster, ScalingEvent::ScaleIn, live)
            .await?;
        self.shrink(
            run,
            cluster,
            members,
            live - desired,
            desired,
            ClusterColumns::default(),
        )
        .await
    }

    /// The capacity a scale-out or scale-in leaves, once the cooldown
    /// allows it: the action's `count` (else the scaling policy's step)
    /// nodes more or fewer, within the cluster's sizes — a best-effort
    /// policy takes what fits; otherwise a size it breaks fails the action,
    /// naming the policy as Senlin does when one applied.
    async fn scaling_target(
        &self,
        run: &Run,
        cluster: &Cluster,
        event: ScalingEvent,
        live: i32,
    ) -> Result<i32> {
        self.check_cooldown(cluster, event).await?;
        let policy = self.scaling_policy(&cluster.id, event).await?;
        let count = match (run.action.input_u64("count"), &policy) {
            (Some(count), _) => count,
            (None, Some((_, policy))) => policy_step(policy, event, live)?,
            (None, None) => 1,
        };
        let count = match &policy {
            Some((_, policy)) if policy.best_effort => {
                best_effort(count, event, cluster.min_size, cluster.max_size, live)
            }
            _ => count,
        };
        let target = match event {
            ScalingEvent::ScaleOut => sizing::grown_by(live, count, cluster.max_size),
            ScalingEvent::ScaleIn => sizing::shrunk_by(live, count, cluster.min_size),
        };
        target.map_err(|error| match (error, &policy) {
            (Error::Conflict(reason), Some((name, _))) => Error::Conflict(format!(
                "Policy check failure: Failed policy '{name}': {reason}"
            )),
            (error, _) => error,
        })
    }

    /// The enabled scaling policy of `event` bound to the cluster, with
    /// its name, if any.
    async fn scaling_policy(
        &self,
        cluster_id: &Uuid,
        event: ScalingEvent,
    ) -> Result<Option<(String, ScalingPolicy)>> {
        Ok(self
            .store
            .list_bindings(*cluster_id)
            .await?
            .into_iter()
            .find_map(|(binding, policy)| match policy.kind {
                PolicyKind::Scaling(scaling) if binding.enabled && scaling.event == event => {
                    Some((policy.name, scaling))
                }
                _ => None,
            }))
    }

    /// Grows or shrinks to the size the resize asks for, computed now.
    pub(super) async fn run_resize(
        &self,
        run: &Run,
        cluster: &Cluster,
        members: &[Node],
        live: i32,
    ) -> RunResult<Ran> {
        let action = &run.action;
        if crate::clusters::grow::planned_nodes(run).is_some() {
            return self.grow(run, cluster, 0, ClusterColumns::default()).await;
        }
        let (desired, min_size, max_size) = resize_target(action, cluster)?;
        let settle = Settle::FromNodes {
            keep_desired: false,
            lead: format!("{} completed", action.kind.as_str()),
        };
        let columns = ClusterColumns {
            desired_capacity: Some(desired),
            min_size: Some(min_size),
            max_size: Some(max_size),
            ..ClusterColumns::default()
        };
        if desired > live {
            self.grow(run, cluster, desired - live, columns).await
        } else if desired < live {
            self.shrink(run, cluster, members, live - desired, desired, columns)
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

    /// Refuses a scale while an enabled scaling policy for its event is in
    /// its cooldown after the last such scale that succeeded (Senlin's
    /// scaling policy check; AWS Auto Scaling's cooldown).
    pub(in crate::clusters) async fn check_cooldown(
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

    /// Chooses `count` victims among the members and removes them — never
    /// one protected from scale-in: with too few others it removes what
    /// it can and says how many it could not (none at all fails).
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
        let asked = usize::try_from(count).unwrap_or(0);
        let kept_protected = asked.saturating_sub(victims.len());
        if victims.is_empty() && asked > 0 {
            let protected = members.iter().filter(|node| node.protected).count();
            return Err(Stop::Failed(Error::Conflict(format!(
                "no member of cluster {:?} can be removed: {protected} of its {} members are protected from scale-in and the others are being deleted",
                cluster.name,
                members.len()
            ))));
        }
        // The members it keeps stay counted.
        let desired = desired.saturating_add(i32::try_from(kept_protected).unwrap_or(0));
        let mut removal = Removal::by(policy);
        removal.kept_protected = kept_protected;
        // A scale-in or resize deletes its victims unless the deletion
        // policy keeps them (Senlin's).
        self.remove_nodes(run, cluster, victims, desired, columns, removal)
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

/// Nodes `policy` adds or removes when the request names no count.
fn policy_step(policy: &ScalingPolicy, event: ScalingEvent, current: i32) -> Result<u64> {
    let adjustment = AdjustmentType::parse(&policy.adjustment_type)?;
    let signed = if event == ScalingEvent::ScaleIn && adjustment != AdjustmentType::ExactCapacity {
        -policy.number
    } else {
        policy.number
    };
    let desired = sizing::desired_after(current, adjustment, signed, policy.min_step)?;
    Ok(u64::from(desired.abs_diff(current)).max(1))
}

/// Senlin's `best_effort`: a scaling policy that allows it takes as many
/// of `count` nodes as the cluster's sizes leave room for, instead of
/// failing the action.
fn best_effort(count: u64, event: ScalingEvent, min_size: i32, max_size: i32, live: i32) -> u64 {
    let room = match event {
        ScalingEvent::ScaleOut if max_size == -1 => return count,
        ScalingEvent::ScaleOut => max_size.saturating_sub(live),
        ScalingEvent::ScaleIn => live.saturating_sub(min_size),
    };
    count.min(u64::try_from(room).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_effort_takes_what_the_sizes_leave_room_for() {
        // 4 of at most 5: a scale-out by 2 adds 1.
        assert_eq!(best_effort(2, ScalingEvent::ScaleOut, 1, 5, 4), 1);
        assert_eq!(best_effort(2, ScalingEvent::ScaleOut, 1, 5, 5), 0);
        assert_eq!(best_effort(7, ScalingEvent::ScaleOut, 1, -1, 4), 7);
        // 3 of at least 2: a scale-in by 2 removes 1.
        assert_eq!(best_effort(2, ScalingEvent::ScaleIn, 2, 5, 3), 1);
        assert_eq!(best_effort(1, ScalingEvent::ScaleIn, 0, 5, 3), 1);
        // Already outside the sizes: nothing to do, never a negative count.
        assert_eq!(best_effort(2, ScalingEvent::ScaleOut, 1, 5, 6), 0);
    }

    #[test]
    fn a_policys_step_is_its_adjustment_and_at_least_one() {
        let policy = |adjustment_type: &str, number: f64, min_step: i32| ScalingPolicy {
            event: ScalingEvent::ScaleOut,
            adjustment_type: adjustment_type.into(),
            number,
            min_step,
            best_effort: false,
            cooldown: 0,
        };
        let step =
            |p: &ScalingPolicy, event, current| policy_step(p, event, current).expect("a step");
        assert_eq!(
            step(
                &policy("CHANGE_IN_CAPACITY", 2.0, 1),
                ScalingEvent::ScaleOut,
                3
            ),
            2
        );
        // 50% of 4 in: 2; min_step 3 makes it 3.
        assert_eq!(
            step(
                &policy("CHANGE_IN_PERCENTAGE", 50.0, 3),
                ScalingEvent::ScaleIn,
                4
            ),
            3
        );
        assert_eq!(
            step(&policy("EXACT_CAPACITY", 3.0, 0), ScalingEvent::ScaleOut, 3),
            1
        );
    }
}
