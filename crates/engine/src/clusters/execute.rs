//! Running one claimed action. A cluster action either finishes here or,
//! when it removes nodes, leaves its NODE_DELETE children to the dispatcher
//! and waits on them (see `removal`).

use futures::future::join_all;
use serde_json::{Value, json};
use uuid::Uuid;

use super::ClusterService;
use super::removal::Removal;
use crate::domain::cluster::policy::ScalingEvent;
use crate::domain::cluster::sizing::{self, AdjustmentType};
use crate::domain::cluster::victims::select_victims;
use crate::domain::cluster::{
    ActionKind, ClusterAction, ClusterStatus, Node, NodeStatus, PolicyBinding, PolicyKind,
    policy::Criteria,
};
use crate::error::{Error, Result};

/// How an action run ended.
pub(super) enum Ran {
    Succeeded(String),
    /// Waiting on child actions (or lost to another engine).
    Waiting,
}

impl ClusterService {
    pub(super) async fn execute(&self, action: &ClusterAction) -> Result<Ran> {
        match action.kind {
            ActionKind::NodeCreate => self.run_node_create(action).await,
            ActionKind::NodeDelete => self.run_node_delete(action).await,
            _ => self.run_cluster_action(action).await,
        }
    }

    async fn run_cluster_action(&self, action: &ClusterAction) -> Result<Ran> {
        let mut cluster = self
            .store
            .get_cluster(action.target_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("cluster {} is gone", action.target_id)))?;
        let nodes = self
            .store
            .list_nodes(&crate::store::clusters::NodeQuery {
                cluster_id: Some(cluster.id),
                limit: 1000,
                ..Default::default()
            })
            .await?;
        let live = nodes
            .iter()
            .filter(|node| node.status != NodeStatus::Deleting)
            .count() as i32;
        let count_input = action
            .input_u64("count")
            .map(|count| i32::try_from(count).unwrap_or(i32::MAX));
        match action.kind {
            ActionKind::ClusterCreate => {
                let created = self
                    .grow(action, &cluster, cluster.desired_capacity)
                    .await?;
                self.settle_cluster(&mut cluster, "CLUSTER_CREATE", created)
                    .await?;
                Ok(Ran::Succeeded(format!(
                    "cluster created with {created} node(s)"
                )))
            }
            ActionKind::ClusterScaleOut => {
                self.check_cooldown(&cluster, ScalingEvent::ScaleOut)
                    .await?;
                let count = match count_input {
                    Some(count) => count,
                    None => {
                        self.policy_step(&cluster.id, ScalingEvent::ScaleOut, live)
                            .await?
                    }
                };
                let desired = live + count;
                if cluster.max_size != -1 && desired > cluster.max_size {
                    return Err(Error::Conflict(format!(
                        "scaling out by {count} would exceed max_size {} (now {live})",
                        cluster.max_size
                    )));
                }
                cluster.desired_capacity = desired;
                cluster.status = ClusterStatus::Resizing;
                self.store.save_cluster(&cluster).await?;
                let created = self.grow(action, &cluster, count).await?;
                self.settle_cluster(&mut cluster, "CLUSTER_SCALE_OUT", created)
                    .await?;
                Ok(Ran::Succeeded(format!(
                    "{created} of {count} node(s) created"
                )))
            }
            ActionKind::ClusterScaleIn => {
                self.check_cooldown(&cluster, ScalingEvent::ScaleIn).await?;
                let count = match count_input {
                    Some(count) => count,
                    None => {
                        self.policy_step(&cluster.id, ScalingEvent::ScaleIn, live)
                            .await?
                    }
                };
                if live - count < cluster.min_size {
                    return Err(Error::Conflict(format!(
                        "scaling in by {count} would go below min_size {} (now {live})",
                        cluster.min_size
                    )));
                }
                self.shrink(action, cluster, &nodes, count, live - count)
                    .await
            }
            ActionKind::ClusterResize => {
                let read = |key: &str| {
                    action
                        .inputs
                        .get(key)
                        .and_then(Value::as_i64)
                        .and_then(|v| i32::try_from(v).ok())
                };
                let desired = read("desired_capacity").unwrap_or(cluster.desired_capacity);
                cluster.min_size = read("min_size").unwrap_or(cluster.min_size);
                cluster.max_size = read("max_size").unwrap_or(cluster.max_size);
                if desired >= live {
                    cluster.desired_capacity = desired;
                    self.store.save_cluster(&cluster).await?;
                    let created = self.grow(action, &cluster, desired - live).await?;
                    self.settle_cluster(&mut cluster, "CLUSTER_RESIZE", created)
                        .await?;
                    Ok(Ran::Succeeded(format!("resized to {desired}")))
                } else {
                    self.store.save_cluster(&cluster).await?;
                    self.shrink(action, cluster, &nodes, live - desired, desired)
                        .await
                }
            }
            ActionKind::ClusterDelNodes => {
                let wanted: Vec<Uuid> = id_list(action.inputs.get("nodes"));
                let victims: Vec<Node> = nodes
                    .into_iter()
                    .filter(|node| wanted.contains(&node.id) && node.status != NodeStatus::Deleting)
                    .collect();
                let policy = self.deletion_policy(&cluster).await?;
                let reduce = policy
                    .as_ref()
                    .is_none_or(|policy| policy.reduce_desired_capacity);
                let desired = if reduce {
                    (cluster.desired_capacity - victims.len() as i32).max(0)
                } else {
                    cluster.desired_capacity
                };
                self.removal(action, cluster, victims, desired, policy)
                    .await
            }
            ActionKind::ClusterAddNodes => {
                let wanted: Vec<Uuid> = id_list(action.inputs.get("nodes"));
                let first = self
                    .store
                    .take_node_indexes(cluster.id, wanted.len() as i32)
                    .await?;
                for (offset, id) in wanted.iter().enumerate() {
                    if let Some(mut node) = self
                        .store
                        .get_node(*id)
                        .await?
                        .filter(|node| node.cluster_id.is_none())
                    {
                        node.cluster_id = Some(cluster.id);
                        node.index = first + offset as i32;
                        self.store.save_node(&node).await?;
                        cluster.desired_capacity += 1;
                    }
                }
                cluster.max_size = if cluster.max_size != -1 {
                    cluster.max_size.max(cluster.desired_capacity)
                } else {
                    -1
                };
                self.store.save_cluster(&cluster).await?;
                Ok(Ran::Succeeded(format!("{} node(s) added", wanted.len())))
            }
            ActionKind::ClusterAttachPolicy | ActionKind::ClusterDetachPolicy => {
                let policy_id = id_list(Some(&json!([action.inputs.get("policy_id")])))
                    .into_iter()
                    .next()
                    .ok_or_else(|| Error::InvalidInput("policy_id missing".into()))?;
                if action.kind == ActionKind::ClusterAttachPolicy {
                    let priority = action
                        .inputs
                        .get("priority")
                        .and_then(Value::as_i64)
                        .and_then(|v| i32::try_from(v).ok())
                        .unwrap_or(0);
                    let enabled = action
                        .inputs
                        .get("enabled")
                        .and_then(Value::as_bool)
                        .unwrap_or(true);
                    self.store
                        .bind_policy(&PolicyBinding {
                            cluster_id: cluster.id,
                            policy_id,
                            priority,
                            enabled,
                        })
                        .await?;
                    Ok(Ran::Succeeded(format!("policy {policy_id} attached")))
                } else if self.store.unbind_policy(cluster.id, policy_id).await? {
                    Ok(Ran::Succeeded(format!("policy {policy_id} detached")))
                } else {
                    Err(Error::NotFound(format!(
                        "policy {policy_id} is not attached to cluster {}",
                        cluster.name
                    )))
                }
            }
            ActionKind::ClusterCheck | ActionKind::ClusterRecover => {
                let profile = self
                    .store
                    .get_profile(cluster.profile_id)
                    .await?
                    .ok_or_else(|| Error::NotFound("the cluster's profile is gone".into()))?;
                let caller = action.caller();
                let mut unhealthy = 0;
                for mut node in nodes
                    .into_iter()
                    .filter(|node| node.status != NodeStatus::Deleting)
                {
                    let (status, reason) = self.check_physical(&caller, &node, &profile).await;
                    node.status = status;
                    node.status_reason = reason;
                    if status == NodeStatus::Error && action.kind == ActionKind::ClusterRecover {
                        let _ = self.delete_physical(&caller, &node, &profile).await;
                        node.physical_id = None;
                        match self.create_physical(&caller, &mut node, &profile).await {
                            Ok(()) => {
                                node.status = NodeStatus::Active;
                                node.status_reason = "recovered".into();
                            }
                            Err(error) => node.status_reason = format!("recovery failed: {error}"),
                        }
                    }
                    if node.status != NodeStatus::Active {
                        unhealthy += 1;
                    }
                    node.updated_at = ember_runtime::time::now();
                    self.store.save_node(&node).await?;
                }
                cluster.status = if unhealthy == 0 {
                    ClusterStatus::Active
                } else {
                    ClusterStatus::Warning
                };
                cluster.status_reason = format!("{unhealthy} node(s) unhealthy");
                self.store.save_cluster(&cluster).await?;
                Ok(Ran::Succeeded(cluster.status_reason.clone()))
            }
            ActionKind::ClusterDelete => {
                cluster.status = ClusterStatus::Deleting;
                self.store.save_cluster(&cluster).await?;
                let profile = self.store.get_profile(cluster.profile_id).await?;
                let caller = action.caller();
                let results = join_all(nodes.iter().map(|node| async {
                    if let Some(profile) = &profile {
                        self.delete_physical(&caller, node, profile).await?;
                    }
                    self.store.delete_node(node.id).await
                }))
                .await;
                if let Some(Err(error)) = results.into_iter().find(Result::is_err) {
                    cluster.status = ClusterStatus::Error;
                    cluster.status_reason = format!("delete failed: {error}");
                    self.store.save_cluster(&cluster).await?;
                    return Err(error);
                }
                self.store.delete_cluster(cluster.id).await?;
                Ok(Ran::Succeeded("cluster deleted".into()))
            }
            ActionKind::NodeCreate | ActionKind::NodeDelete => {
                Err(Error::InvalidInput("not a cluster action".into()))
            }
        }
    }

    /// Refuses a scale while an enabled scaling policy for its event is in
    /// its cooldown after the last such scale that succeeded (Senlin's
    /// scaling policy check; AWS Auto Scaling's cooldown).
    pub(super) async fn check_cooldown(
        &self,
        cluster: &crate::domain::cluster::Cluster,
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
    ) -> Result<i32> {
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
                return Ok((desired - current).abs().max(1));
            }
        }
        Ok(1)
    }

    async fn shrink(
        &self,
        action: &ClusterAction,
        cluster: crate::domain::cluster::Cluster,
        nodes: &[Node],
        count: i32,
        desired: i32,
    ) -> Result<Ran> {
        let policy = self.deletion_policy(&cluster).await?;
        let criteria = policy
            .as_ref()
            .map_or(Criteria::Random, |policy| policy.criteria);
        let profiles: std::collections::HashMap<Uuid, i64> = std::collections::HashMap::new();
        let victims: Vec<Node> = select_victims(
            nodes,
            usize::try_from(count).unwrap_or(0),
            criteria,
            |node| {
                profiles.get(&node.profile_id).copied().unwrap_or_else(|| {
                    node.profile_id
                        .get_timestamp()
                        .map_or(0, |ts| ts.to_unix().0 as i64)
                })
            },
        )
        .into_iter()
        .cloned()
        .collect();
        self.removal(action, cluster, victims, desired, policy)
            .await
    }

    async fn removal(
        &self,
        action: &ClusterAction,
        cluster: crate::domain::cluster::Cluster,
        victims: Vec<Node>,
        desired: i32,
        policy: Option<crate::domain::cluster::DeletionPolicy>,
    ) -> Result<Ran> {
        match self
            .remove_nodes(action, cluster, victims, desired, policy)
            .await?
        {
            Removal::Waiting | Removal::Lost => Ok(Ran::Waiting),
        }
    }

    /// Creates `count` nodes in parallel; returns how many became ACTIVE.
    async fn grow(
        &self,
        action: &ClusterAction,
        cluster: &crate::domain::cluster::Cluster,
        count: i32,
    ) -> Result<i32> {
        if count <= 0 {
            return Ok(0);
        }
        let profile = self
            .store
            .get_profile(cluster.profile_id)
            .await?
            .ok_or_else(|| Error::NotFound("the cluster's profile is gone".into()))?;
        let first = self.store.take_node_indexes(cluster.id, count).await?;
        let caller = action.caller();
        let now = ember_runtime::time::now();
        let results = join_all((0..count).map(|offset| {
            let profile = &profile;
            let caller = &caller;
            async move {
                let index = first + offset;
                let mut node = Node {
                    id: Uuid::now_v7(),
                    name: format!(
                        "node-{}-{:03}",
                        &cluster.id.simple().to_string()[..8],
                        index
                    ),
                    cluster_id: Some(cluster.id),
                    profile_id: profile.id,
                    index,
                    role: String::new(),
                    status: NodeStatus::Creating,
                    status_reason: "creating".into(),
                    physical_id: None,
                    tainted: false,
                    metadata: serde_json::Map::new(),
                    project_id: cluster.project_id.clone(),
                    user_id: caller.user_id.clone(),
                    created_at: now,
                    updated_at: now,
                };
                self.store.save_node(&node).await?;
                let outcome = self.create_physical(caller, &mut node, profile).await;
                (node.status, node.status_reason) = match &outcome {
                    Ok(()) => (NodeStatus::Active, "created".into()),
                    Err(error) => (NodeStatus::Error, error.to_string()),
                };
                node.updated_at = ember_runtime::time::now();
                self.store.save_node(&node).await?;
                self.node_event(&node, "NODE_CREATE", caller).await;
                Ok::<bool, Error>(outcome.is_ok())
            }
        }))
        .await;
        let mut active = 0;
        for result in results {
            if result? {
                active += 1;
            }
        }
        Ok(active)
    }

    async fn settle_cluster(
        &self,
        cluster: &mut crate::domain::cluster::Cluster,
        what: &str,
        _created: i32,
    ) -> Result<()> {
        let nodes = self
            .store
            .list_nodes(&crate::store::clusters::NodeQuery {
                cluster_id: Some(cluster.id),
                limit: 1000,
                ..Default::default()
            })
            .await?;
        let failed = nodes
            .iter()
            .filter(|node| node.status == NodeStatus::Error)
            .count();
        cluster.status = if failed == 0 {
            ClusterStatus::Active
        } else {
            ClusterStatus::Warning
        };
        cluster.status_reason = if failed == 0 {
            format!("{what} completed")
        } else {
            format!("{what}: {failed} node(s) in ERROR")
        };
        cluster.updated_at = ember_runtime::time::now();
        self.store.save_cluster(cluster).await
    }

    async fn run_node_create(&self, action: &ClusterAction) -> Result<Ran> {
        let mut node = self
            .store
            .get_node(action.target_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("node {} is gone", action.target_id)))?;
        let profile = self
            .store
            .get_profile(node.profile_id)
            .await?
            .ok_or_else(|| Error::NotFound("the node's profile is gone".into()))?;
        let outcome = self
            .create_physical(&action.caller(), &mut node, &profile)
            .await;
        (node.status, node.status_reason) = match &outcome {
            Ok(()) => (NodeStatus::Active, "created".into()),
            Err(error) => (NodeStatus::Error, error.to_string()),
        };
        self.store.save_node(&node).await?;
        self.node_event(&node, "NODE_CREATE", &action.caller())
            .await;
        outcome.map(|()| Ran::Succeeded(format!("node {} created", node.name)))
    }

    async fn run_node_delete(&self, action: &ClusterAction) -> Result<Ran> {
        let Some(node) = self.store.get_node(action.target_id).await? else {
            // Deleted by an earlier run of this action (taken over).
            return Ok(Ran::Succeeded("node already deleted".into()));
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
            // A member: through the deletion policy, as del_nodes would.
            let policy = self.deletion_policy(&cluster).await?;
            let reduce = policy
                .as_ref()
                .is_none_or(|policy| policy.reduce_desired_capacity);
            let desired = if reduce {
                (cluster.desired_capacity - 1).max(0)
            } else {
                cluster.desired_capacity
            };
            return self
                .removal(action, cluster, vec![node], desired, policy)
                .await;
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
        if destroy {
            if let Some(profile) = self.store.get_profile(node.profile_id).await? {
                self.delete_physical(&action.caller(), &node, &profile)
                    .await?;
            }
            self.store.delete_node(node.id).await?;
            let mut deleted = node;
            deleted.status_reason = "deleted".into();
            self.node_event_as(&deleted, "NODE_DELETE", "DELETED", &action.caller())
                .await;
            Ok(Ran::Succeeded(format!("node {} deleted", deleted.name)))
        } else {
            let mut node = node;
            node.cluster_id = None;
            node.status = NodeStatus::Active;
            node.status_reason =
                "removed from its cluster, kept (destroy_after_deletion false)".into();
            self.store.save_node(&node).await?;
            self.node_event_as(&node, "NODE_DELETE", "REMOVED", &action.caller())
                .await;
            Ok(Ran::Succeeded(format!(
                "node {} removed from the cluster",
                node.name
            )))
        }
    }
}

impl ClusterService {
    /// Records what happened to a node (Senlin's node events), with its
    /// status; best effort, like every event after the fact.
    async fn node_event(&self, node: &Node, action: &str, caller: &ember_runtime::Identity) {
        self.node_event_as(node, action, node.status.as_str(), caller)
            .await;
    }

    async fn node_event_as(
        &self,
        node: &Node,
        action: &str,
        status: &str,
        caller: &ember_runtime::Identity,
    ) {
        let event = super::event(
            "NODE",
            node.id,
            &node.name,
            node.cluster_id,
            action,
            status,
            node.status_reason.clone(),
            caller,
        );
        if let Err(error) = self.store.record_events(&[event]).await {
            tracing::warn!(node_id = %node.id, %error, "cannot record a node event");
        }
    }
}

fn id_list(value: Option<&Value>) -> Vec<Uuid> {
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
