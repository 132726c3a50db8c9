//! Checking, recovering and deleting a cluster's nodes.
//!
//! - CLUSTER_CHECK reads each member's resource and records what it found
//!   in its final write: a rerun just looks again.
//! - CLUSTER_RECOVER recovers each member found unhealthy in two durable
//!   steps: its old resource is deleted (if that fails the node stays
//!   ERROR with the reason, and nothing new is created — nothing leaks),
//!   then one fenced write makes it CREATING with the id of its new
//!   resource; the create follows. A rerun first finishes the members left
//!   CREATING, then checks and recovers the rest again.
//! - CLUSTER_DELETE makes the cluster DELETING, deletes every node's
//!   resource (each node row goes in a fenced write once its resource is
//!   gone; deletes of gone resources succeed, so a rerun just carries on)
//!   and ends with one transaction that deletes the cluster and fails the
//!   actions queued on it. A node whose resource cannot be deleted stays,
//!   ERROR, and the cluster is left ERROR saying so.

use uuid::Uuid;

use super::ClusterService;
use super::run::{Ran, Run, RunResult, Stop};
use crate::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterStatus, Node, NodeStatus, Profile,
};
use crate::error::Error;
use crate::store::clusters::{ClusterChange, ClusterColumns, NodeStatusChange, Settle};

impl ClusterService {
    pub(super) async fn check_or_recover_nodes(
        &self,
        run: &Run,
        cluster: &Cluster,
        members: Vec<Node>,
    ) -> RunResult<Ran> {
        let action = &run.action;
        let recover = action.kind == ActionKind::ClusterRecover;
        let profile = self.cluster_profile(cluster).await?;
        let caller = action.caller();
        if recover && super::launch::resumed_runs(action) > 0 {
            return self.finish_held_recover(run, cluster, &profile).await;
        }
        let launch = if recover {
            self.launch_policy(cluster).await?
        } else {
            None
        };
        // Members a dead run of this recover left CREATING: finish them
        // with the resource id it recorded.
        let left_creating: Vec<Uuid> = members
            .iter()
            .filter(|node| node.status == NodeStatus::Creating)
            .map(|node| node.id)
            .collect();
        if recover && !left_creating.is_empty() {
            self.converge_nodes(run, &profile, &left_creating, launch.is_some())
                .await?;
        }
        let mut checked = Vec::new();
        let mut events = Vec::new();
        for node in members
            .iter()
            .filter(|node| !matches!(node.status, NodeStatus::Deleting | NodeStatus::Creating))
        {
            let (status, reason) = self.check_physical(&caller, node, &profile).await;
            if status != node.status || reason != node.status_reason {
                events.push(super::event(
                    "NODE",
                    node.id,
                    &node.name,
                    Some(cluster.id),
                    "NODE_CHECK",
                    status.as_str(),
                    reason.clone(),
                    &caller,
                ));
            }
            checked.push((node, status, reason));
        }
        if !recover {
            let unhealthy = checked
                .iter()
                .filter(|(_, status, _)| *status != NodeStatus::Active)
                .count();
            let mut change = ClusterChange {
                events,
                ..ClusterChange::default()
            };
            for (node, status, reason) in &checked {
                let mut found = NodeStatusChange::new(node.id, *status, reason.clone());
                found.only_from = vec![node.status];
                change.node_changes.push(found);
            }
            return Ok(Ran::Finished {
                status: ActionStatus::Succeeded,
                reason: format!("{unhealthy} node(s) unhealthy"),
                change,
                settle: Settle::FromNodes {
                    keep_desired: false,
                    lead: "CLUSTER_CHECK completed".into(),
                },
            });
        }
        run.apply(
            self,
            &ClusterChange {
                events,
                ..ClusterChange::default()
            },
        )
        .await?;
        let unhealthy: Vec<&Node> = checked
            .iter()
            .filter(|(_, status, _)| *status != NodeStatus::Active)
            .map(|(node, _, _)| *node)
            .collect();
        let hold = launch.is_some();
        let results = super::for_each_node(
            unhealthy
                .iter()
                .map(|node| self.recover_node(run, &caller, &profile, node, hold)),
        )
        .await;
        let mut recovered = 0;
        for result in results {
            if result? {
                recovered += 1;
            }
        }
        if let Some(launch) = launch {
            // The rebuilt nodes wait on their launch hooks before they are
            // back in service.
            let ids: Vec<Uuid> = unhealthy
                .iter()
                .map(|node| node.id)
                .chain(left_creating.iter().copied())
                .collect();
            let nodes = self.store.get_nodes(&ids).await?;
            let built: Vec<&Node> = nodes
                .iter()
                .filter(|node| node.status == NodeStatus::Creating)
                .collect();
            if !built.is_empty() {
                self.hold_for_launch(run, cluster, &built, &launch).await?;
                return Ok(Ran::Handed);
            }
        }
        Ok(Ran::succeeded(
            format!(
                "{recovered} of {} unhealthy node(s) recovered",
                unhealthy.len()
            ),
            Settle::FromNodes {
                keep_desired: false,
                lead: "CLUSTER_RECOVER completed".into(),
            },
        ))
    }

    /// A CLUSTER_RECOVER resumed after the launch waits of the nodes it
    /// rebuilt: those built again are held again; otherwise it ends with
    /// how they came out.
    async fn finish_held_recover(
        &self,
        run: &Run,
        cluster: &Cluster,
        profile: &crate::domain::cluster::Profile,
    ) -> RunResult<Ran> {
        let grown = match self.resume_held(run, cluster, profile).await? {
            super::launch::Building::Held => return Ok(Ran::Handed),
            super::launch::Building::Done(grown) => grown,
        };
        let mut reason = format!(
            "{} of {} rebuilt node(s) in service",
            grown.active, grown.planned
        );
        if grown.abandoned > 0 {
            reason.push_str(&format!(
                ", {} abandoned by the launch lifecycle hook and deleted",
                grown.abandoned
            ));
        }
        let lead = if grown.abandoned > 0 {
            format!("CLUSTER_RECOVER failed: {reason}")
        } else {
            "CLUSTER_RECOVER completed".to_owned()
        };
        Ok(Ran::Finished {
            status: if grown.abandoned > 0 {
                ActionStatus::Failed
            } else {
                ActionStatus::Succeeded
            },
            reason,
            change: ClusterChange::default(),
            settle: Settle::FromNodes {
                keep_desired: false,
                lead,
            },
        })
    }

    /// Replaces one unhealthy node's resource; true when it is ACTIVE
    /// again (with `hold`, a node built stays CREATING for its launch
    /// hook).
    async fn recover_node(
        &self,
        run: &Run,
        caller: &ember_runtime::Identity,
        profile: &crate::domain::cluster::Profile,
        node: &Node,
        hold: bool,
    ) -> RunResult<bool> {
        self.replace_or_mark(run, caller, node, profile, profile, "NODE_RECOVER", hold)
            .await
    }

    /// [`Self::replace_node_resource`], and when the old resource could not
    /// be deleted, the node ERROR with why (an event `what` says so); true
    /// when the node is ACTIVE on `new`.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn replace_or_mark(
        &self,
        run: &Run,
        caller: &ember_runtime::Identity,
        node: &Node,
        old: &Profile,
        new: &Profile,
        what: &str,
        hold: bool,
    ) -> RunResult<bool> {
        match self
            .replace_node_resource(run, caller, node, old, new, hold)
            .await?
        {
            Ok(active) => Ok(active),
            Err(reason) => {
                let reason = format!("{what} failed: {reason}");
                let failed = NodeStatusChange::new(node.id, NodeStatus::Error, reason.clone());
                run.apply(
                    self,
                    &ClusterChange {
                        node_changes: vec![failed],
                        events: vec![super::node_event(node, what, "ERROR", reason, caller)],
                        ..ClusterChange::default()
                    },
                )
                .await?;
                Ok(false)
            }
        }
    }

    /// Replaces a node's resource by one made from `new` (`old` itself for
    /// a recover) in two durable steps: its old resource is deleted — if
    /// that fails, `Ok(Err(why))` and nothing new is made (nothing leaks) —
    /// then one fenced write makes the node CREATING on `new` with the id
    /// of its new resource, and the create follows. `Ok(Ok(active))`: the
    /// create ran, the node is ACTIVE or not (with `hold`, a node built
    /// stays CREATING: a launch hook waits for it).
    pub(super) async fn replace_node_resource(
        &self,
        run: &Run,
        caller: &ember_runtime::Identity,
        node: &Node,
        old: &Profile,
        new: &Profile,
        hold: bool,
    ) -> RunResult<Result<bool, String>> {
        run.check_still_owned(self).await?;
        if let Err(error) = self.delete_physical(caller, node, old).await {
            return Ok(Err(format!(
                "its resource {} could not be deleted: {error}",
                node.physical_id.as_deref().unwrap_or("(none)")
            )));
        }
        let mut recreating = NodeStatusChange::new(node.id, NodeStatus::Creating, "recreating");
        recreating.physical_id = Some(super::grow::planned_physical_id(new));
        if new.id != node.profile_id {
            recreating.profile_id = Some(new.id);
        }
        run.apply(
            self,
            &ClusterChange {
                node_changes: vec![recreating],
                ..ClusterChange::default()
            },
        )
        .await?;
        let (active, _) = self.converge_nodes(run, new, &[node.id], hold).await?;
        Ok(Ok(active == 1))
    }

    pub(super) async fn delete_cluster_nodes(
        &self,
        run: &Run,
        cluster: &Cluster,
    ) -> RunResult<Ran> {
        let caller = run.action.caller();
        if cluster.status != ClusterStatus::Deleting {
            run.apply(
                self,
                &ClusterChange {
                    cluster_id: Some(cluster.id),
                    cluster: ClusterColumns {
                        status: Some((ClusterStatus::Deleting, "deleting".into())),
                        ..ClusterColumns::default()
                    },
                    events: vec![super::event(
                        "CLUSTER",
                        cluster.id,
                        &cluster.name,
                        Some(cluster.id),
                        "CLUSTER_DELETE",
                        "DELETING",
                        "deleting",
                        &caller,
                    )],
                    ..ClusterChange::default()
                },
            )
            .await?;
        }
        let profile = self.cluster_profile(cluster).await?;
        let nodes: Vec<Node> = self
            .store
            .list_cluster_nodes(cluster.id)
            .await?
            .into_iter()
            // INIT nodes have no resource: they go with the cluster row.
            .filter(|node| node.status != NodeStatus::Init)
            .collect();
        run.check_still_owned(self).await?;
        let stop_first = cluster.config.stop_node_before_delete();
        let results = super::for_each_node(nodes.iter().map(|node| async {
            // `cluster.stop_node_before_delete`: stopped first, a failed
            // stop recorded and the delete done anyway.
            let mut events = Vec::with_capacity(2);
            if stop_first {
                events.extend(self.stop_before_delete(&caller, node, &profile).await);
            }
            let outcome = self.delete_physical(&caller, node, &profile).await;
            let change = match &outcome {
                Ok(()) => ClusterChange {
                    delete_nodes: vec![node.id],
                    events: {
                        events.push(super::event(
                            "NODE",
                            node.id,
                            &node.name,
                            Some(cluster.id),
                            "NODE_DELETE",
                            "DELETED",
                            "deleted with its cluster",
                            &caller,
                        ));
                        events
                    },
                    ..ClusterChange::default()
                },
                Err(error) => ClusterChange {
                    node_changes: vec![NodeStatusChange::new(
                        node.id,
                        NodeStatus::Error,
                        format!("not deleted: {error}"),
                    )],
                    events,
                    ..ClusterChange::default()
                },
            };
            run.apply(self, &change).await?;
            Ok::<_, Stop>(outcome.err().map(|error| (node.name.clone(), error)))
        }))
        .await;
        let mut failures = Vec::new();
        for result in results {
            if let Some(failure) = result? {
                failures.push(failure);
            }
        }
        if let Some((name, error)) = failures.first() {
            return Err(Stop::Failed(Error::Conflict(format!(
                "{} node(s) could not be deleted (node {name}: {error}): the cluster stays",
                failures.len()
            ))));
        }
        let reason = "cluster deleted";
        let event = super::event(
            "CLUSTER",
            cluster.id,
            &cluster.name,
            Some(cluster.id),
            "CLUSTER_DELETE",
            "DELETED",
            reason,
            &caller,
        );
        // The trust goes before the action ends, so a caller that sees
        // the delete SUCCEEDED finds it gone (the nodes that acted
        // through it are gone already; an engine taking the action over
        // needs none to finish it).
        self.revoke(crate::domain::delegation::DelegationOwner::Cluster(
            cluster.id,
        ))
        .await;
        let finished = self
            .store
            .finish_cluster_delete(
                &run.action,
                reason,
                &[event, super::action_event(&run.action, "SUCCEEDED", reason)],
            )
            .await?;
        if finished {
            Ok(Ran::Handed)
        } else {
            Err(Stop::Lost)
        }
    }
}
