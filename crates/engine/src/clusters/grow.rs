//! Growing a cluster (CLUSTER_CREATE, CLUSTER_SCALE_OUT, a CLUSTER_RESIZE
//! up, NODE_CREATE) in durable steps, so a run taken over after its engine
//! died finishes what the dead one started:
//!
//! 1. **Plan** — one fenced transaction: the new nodes CREATING with their
//!    indexes (allocated atomically), names and, for instances, the uuid
//!    their instance will have; the cluster's new desired capacity and
//!    RESIZING; the planned node ids in the action's outputs
//!    (`planned_nodes`). A run that finds `planned_nodes` skips this step.
//! 2. **Converge** — each planned node still CREATING gets its resource
//!    (created idempotently, see `physical`) and, once it is ready or
//!    failed, ACTIVE or ERROR in a fenced write with its NODE_CREATE event.
//!    Nodes already final are left as they are.
//! 3. **Finish** — the action's final write settles the cluster from its
//!    nodes (ACTIVE / WARNING / ERROR, desired = members) and releases
//!    the lock.

use serde_json::{Value, json};
use uuid::Uuid;

use super::ClusterService;
use super::launch::{Building, Grown};
use super::physical::Built;
use super::run::{Ran, Run, RunResult, Stop};
use crate::domain::cluster::{
    ActionStatus, Cluster, ClusterStatus, Node, NodeStatus, Profile, ProfileKind,
};
use crate::error::Error;
use crate::store::clusters::{ClusterChange, ClusterColumns, NodeStatusChange, Settle};

/// The action output listing the nodes a growth planned.
pub(super) const PLANNED_NODES: &str = "planned_nodes";

/// The planned node ids of a run, if it planned already.
pub(super) fn planned_nodes(run: &Run) -> Option<Vec<Uuid>> {
    run.action
        .outputs
        .get(PLANNED_NODES)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().and_then(|text| Uuid::parse_str(text).ok()))
                .collect()
        })
}

/// A growth's end: SUCCEEDED when every planned node was built (some may
/// be in ERROR, as Senlin's growth says), FAILED when one was abandoned at
/// launch for good or none came up; the cluster settled from its nodes
/// either way.
fn grown_into(kind: &str, grown: &Grown, reason: String) -> Ran {
    let lead = if grown.abandoned > 0 {
        format!("{kind} failed: {reason}")
    } else {
        format!("{kind} completed")
    };
    // A node create's one node is what was asked for.
    let failed = grown.abandoned > 0 || (kind == "NODE_CREATE" && grown.active == 0);
    let status = if failed {
        ActionStatus::Failed
    } else {
        ActionStatus::Succeeded
    };
    Ran::Finished {
        status,
        reason,
        change: ClusterChange::default(),
        settle: Settle::FromNodes {
            keep_desired: false,
            lead,
        },
    }
}

/// A physical id chosen before the resource exists: the uuid an instance
/// will be created with (stacks get theirs when created, found by name).
pub(super) fn planned_physical_id(profile: &Profile) -> Option<String> {
    match profile.spec.kind {
        ProfileKind::Instance { .. } => Some(Uuid::now_v7().to_string()),
        ProfileKind::Stack { .. } => None,
    }
}

impl ClusterService {
    pub(super) async fn cluster_profile(&self, cluster: &Cluster) -> Result<Profile, Error> {
        self.store
            .get_profile(cluster.profile_id)
            .await?
            .ok_or_else(|| {
                Error::NotFound(format!(
                    "the profile {} of cluster {:?} is gone",
                    cluster.profile_id, cluster.name
                ))
            })
    }

    /// Step 1 for `count` new members of `cluster` (capacity `desired`
    /// after it, sizes `columns`), unless the run planned already. Returns
    /// the planned node ids.
    pub(super) async fn plan_growth(
        &self,
        run: &Run,
        cluster: &Cluster,
        count: i32,
        mut columns: ClusterColumns,
    ) -> RunResult<Vec<Uuid>> {
        if let Some(planned) = planned_nodes(run) {
            return Ok(planned);
        }
        let profile = self.cluster_profile(cluster).await?;
        let caller = run.action.caller();
        let now = ember_runtime::time::now();
        let new_members: Vec<Node> = (0..count.max(0))
            .map(|_| Node {
                id: Uuid::now_v7(),
                // Named after its index by the store, which allocates it.
                name: String::new(),
                cluster_id: Some(cluster.id),
                profile_id: profile.id,
                index: -1,
                role: String::new(),
                status: NodeStatus::Creating,
                status_reason: format!("being created by {}", run.action.name),
                physical_id: planned_physical_id(&profile),
                tainted: false,
                protected: profile.protected,
                metadata: serde_json::Map::new(),
                project_id: cluster.project_id.clone(),
                user_id: caller.user_id.clone(),
                created_at: now,
                updated_at: now,
            })
            .collect();
        let reason = format!(
            "{}: creating {} node(s)",
            run.action.kind.as_str(),
            new_members.len()
        );
        columns.status = Some((ClusterStatus::Resizing, reason.clone()));
        let mut outputs = run.action.outputs.clone();
        outputs.insert(
            PLANNED_NODES.into(),
            json!(
                new_members
                    .iter()
                    .map(|node| node.id.to_string())
                    .collect::<Vec<_>>()
            ),
        );
        let change = ClusterChange {
            cluster_id: Some(cluster.id),
            cluster: columns,
            new_members,
            outputs: Some(outputs),
            events: vec![super::event(
                "CLUSTER",
                cluster.id,
                &cluster.name,
                Some(cluster.id),
                run.action.kind.as_str(),
                "RESIZING",
                reason,
                &caller,
            )],
            ..ClusterChange::default()
        };
        let outcome = run.apply(self, &change).await?;
        Ok(outcome.new_members.iter().map(|node| node.id).collect())
    }

    /// Step 2: brings every planned node still CREATING to ACTIVE or
    /// ERROR — or, with `hold` (a launch hook waits for them), leaves those
    /// built CREATING. Returns how many of `node_ids` are ACTIVE and how
    /// many not.
    pub(super) async fn converge_nodes(
        &self,
        run: &Run,
        profile: &Profile,
        node_ids: &[Uuid],
        hold: bool,
    ) -> RunResult<(usize, usize)> {
        let caller = run.action.caller();
        let nodes = self.store.get_nodes(node_ids).await?;
        let results = super::for_each_node(
            nodes
                .iter()
                .filter(|node| node.status == NodeStatus::Creating)
                .map(|node| self.converge_node(run, &caller, profile, node, hold)),
        )
        .await;
        for result in results {
            result?;
        }
        let nodes = self.store.get_nodes(node_ids).await?;
        let active = nodes
            .iter()
            .filter(|node| node.status == NodeStatus::Active)
            .count();
        Ok((active, nodes.len() - active))
    }

    async fn converge_node(
        &self,
        run: &Run,
        caller: &ember_runtime::Identity,
        profile: &Profile,
        node: &Node,
        hold: bool,
    ) -> RunResult<()> {
        let built = self.ensure_physical(run, caller, node, profile).await?;
        let (status, reason) = match built {
            // Its launch hook's wait, recorded next, says so.
            Built::Ready if hold => return Ok(()),
            Built::Ready => (NodeStatus::Active, "created".to_owned()),
            Built::Failed(reason) => (NodeStatus::Error, reason),
        };
        let mut change = NodeStatusChange::new(node.id, status, reason.clone());
        change.only_from = vec![NodeStatus::Creating];
        run.apply(
            self,
            &ClusterChange {
                node_changes: vec![change],
                events: vec![super::node_event(
                    node,
                    "NODE_CREATE",
                    status.as_str(),
                    reason,
                    caller,
                )],
                ..ClusterChange::default()
            },
        )
        .await?;
        Ok(())
    }

    /// Steps 1 to 3 for `count` new members.
    pub(super) async fn grow(
        &self,
        run: &Run,
        cluster: &Cluster,
        count: i32,
        columns: ClusterColumns,
    ) -> RunResult<Ran> {
        let planned = self.plan_growth(run, cluster, count, columns).await?;
        let profile = self.cluster_profile(cluster).await?;
        let grown = match self.build_planned(run, cluster, &profile, &planned).await? {
            Building::Held => return Ok(Ran::Handed),
            Building::Done(grown) => grown,
        };
        let kind = run.action.kind.as_str();
        Ok(grown_into(kind, &grown, grown.summary()))
    }

    /// NODE_CREATE: the node recorded INIT by the request, created in the
    /// same steps (the plan moves it INIT → CREATING and, for a member,
    /// grows the cluster's desired capacity by one).
    pub(super) async fn run_node_create(&self, run: &Run) -> RunResult<Ran> {
        let node = self
            .store
            .get_node(run.action.target_id)
            .await?
            .ok_or_else(|| {
                Stop::Failed(Error::NotFound(format!(
                    "node {} is gone",
                    run.action.target_id
                )))
            })?;
        let profile = self
            .store
            .get_profile(node.profile_id)
            .await?
            .ok_or_else(|| Stop::Failed(Error::NotFound("the node's profile is gone".into())))?;
        if node.status == NodeStatus::Init {
            let mut change = ClusterChange::default();
            if let Some(cluster_id) = node.cluster_id {
                let cluster = self.store.get_cluster(cluster_id).await?.ok_or_else(|| {
                    Stop::Failed(Error::NotFound(format!("cluster {cluster_id} is gone")))
                })?;
                let members = self.counted_members(cluster.id).await?;
                let live = i32::try_from(members.len()).unwrap_or(i32::MAX);
                let desired = crate::domain::cluster::sizing::grown_by(live, 1, cluster.max_size)?;
                change.cluster_id = Some(cluster.id);
                change.cluster = ClusterColumns {
                    desired_capacity: Some(desired),
                    status: Some((
                        ClusterStatus::Resizing,
                        format!("NODE_CREATE: creating node {}", node.name),
                    )),
                    ..ClusterColumns::default()
                };
            }
            let mut creating =
                NodeStatusChange::new(node.id, NodeStatus::Creating, "creating".to_owned());
            creating.only_from = vec![NodeStatus::Init];
            creating.physical_id = Some(planned_physical_id(&profile));
            change.node_changes = vec![creating];
            let mut outputs = run.action.outputs.clone();
            outputs.insert(PLANNED_NODES.into(), json!([node.id.to_string()]));
            change.outputs = Some(outputs);
            let outcome = run.apply(self, &change).await?;
            if outcome.changed_nodes.is_empty() {
                return Err(Stop::Failed(Error::Conflict(format!(
                    "node {} is no longer waiting to be created",
                    node.name
                ))));
            }
        }
        let grown = match node.cluster_id {
            Some(cluster_id) => {
                let cluster = self.store.get_cluster(cluster_id).await?.ok_or_else(|| {
                    Stop::Failed(Error::NotFound(format!("cluster {cluster_id} is gone")))
                })?;
                match self
                    .build_planned(run, &cluster, &profile, &[node.id])
                    .await?
                {
                    Building::Held => return Ok(Ran::Handed),
                    Building::Done(grown) => grown,
                }
            }
            None => {
                let (active, failed) = self
                    .converge_nodes(run, &profile, &[node.id], false)
                    .await?;
                Grown {
                    active,
                    failed,
                    abandoned: 0,
                    planned: 1,
                }
            }
        };
        let reason = if grown.active == 1 {
            format!("node {} created", node.name)
        } else if grown.abandoned == 1 {
            format!(
                "node {} abandoned by its launch lifecycle hook and deleted",
                node.name
            )
        } else {
            let now = self.store.get_node(node.id).await?;
            format!(
                "node {} failed: {}",
                node.name,
                now.map(|node| node.status_reason).unwrap_or_default()
            )
        };
        Ok(grown_into("NODE_CREATE", &grown, reason))
    }

    /// The cluster's members that count in its size (INIT nodes left out),
    /// however many there are.
    pub(super) async fn counted_members(&self, cluster_id: Uuid) -> Result<Vec<Node>, Error> {
        Ok(self
            .store
            .list_cluster_nodes(cluster_id)
            .await?
            .into_iter()
            .filter(Node::is_counted_member)
            .collect())
    }
}
