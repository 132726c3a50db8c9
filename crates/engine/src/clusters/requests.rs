//! The request side: validate, decide, record (object and/or action) and
//! return at once. Nothing here touches a physical resource.

use ember_runtime::Identity;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{ClusterService, action_event, event};
use crate::domain::cluster::policy::ScalingEvent;
use crate::domain::cluster::sizing::{self, AdjustmentType};
use crate::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, ClusterEvent, ClusterStatus, Node,
    NodeStatus, PolicyBinding, PolicyDefinition, PolicyKind, Profile, ProfileSpec, validate_name,
};
use crate::error::{Error, Result};
use crate::store::clusters::{ActionQuery, EventQuery, NodeQuery, ObjectQuery};

pub struct NewCluster {
    pub name: String,
    pub profile: String,
    pub min_size: i32,
    pub max_size: i32,
    pub desired_capacity: i32,
    pub metadata: Map<String, Value>,
}

pub struct NewNode {
    pub name: String,
    pub profile: String,
    pub cluster: Option<String>,
    pub role: String,
    pub metadata: Map<String, Value>,
}

pub struct ResizeRequest {
    pub adjustment: Option<(AdjustmentType, f64)>,
    pub min_size: Option<i32>,
    pub max_size: Option<i32>,
    pub min_step: i32,
    pub strict: bool,
}

fn refuse_read_only(caller: &Identity) -> Result<()> {
    if caller.roles.iter().any(|role| role == "reader")
        && !caller
            .roles
            .iter()
            .any(|role| role == "member" || role == "admin")
    {
        return Err(Error::Forbidden("a reader may not change clusters".into()));
    }
    Ok(())
}

impl ClusterService {
    pub async fn create_profile(
        &self,
        caller: &Identity,
        name: &str,
        spec: Value,
        metadata: Map<String, Value>,
    ) -> Result<Profile> {
        refuse_read_only(caller)?;
        validate_name("profile", name)?;
        let profile = Profile {
            id: Uuid::now_v7(),
            name: name.to_owned(),
            spec: ProfileSpec::parse(spec)?,
            metadata,
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            created_at: ember_runtime::time::now(),
        };
        self.store.insert_profile(&profile).await?;
        Ok(profile)
    }

    pub async fn list_profiles(
        &self,
        caller: &Identity,
        mut query: ObjectQuery,
    ) -> Result<Vec<Profile>> {
        query.project_id = Self::scope(caller).map(str::to_owned);
        self.store.list_profiles(&query).await
    }

    pub async fn delete_profile(&self, caller: &Identity, name_or_id: &str) -> Result<()> {
        refuse_read_only(caller)?;
        let profile = self.find_profile(caller, name_or_id).await?;
        self.store.delete_profile(profile.id).await
    }

    pub async fn create_policy(
        &self,
        caller: &Identity,
        name: &str,
        spec: Value,
    ) -> Result<PolicyDefinition> {
        refuse_read_only(caller)?;
        validate_name("policy", name)?;
        let policy = PolicyDefinition {
            id: Uuid::now_v7(),
            name: name.to_owned(),
            kind: PolicyKind::parse(&spec)?,
            spec,
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            created_at: ember_runtime::time::now(),
        };
        self.store.insert_policy(&policy).await?;
        Ok(policy)
    }

    pub async fn list_policies(
        &self,
        caller: &Identity,
        mut query: ObjectQuery,
    ) -> Result<Vec<PolicyDefinition>> {
        query.project_id = Self::scope(caller).map(str::to_owned);
        self.store.list_policies(&query).await
    }

    pub async fn delete_policy(&self, caller: &Identity, name_or_id: &str) -> Result<()> {
        refuse_read_only(caller)?;
        let policy = self.find_policy(caller, name_or_id).await?;
        self.store.delete_policy(policy.id).await
    }

    pub async fn create_cluster(
        &self,
        caller: &Identity,
        new: NewCluster,
    ) -> Result<(Cluster, ClusterAction)> {
        refuse_read_only(caller)?;
        validate_name("cluster", &new.name)?;
        Cluster::validate_sizes(new.min_size, new.max_size, new.desired_capacity)?;
        let profile = self.find_profile(caller, &new.profile).await?;
        if self
            .store
            .find_cluster(Some(&caller.project_id), &new.name)
            .await?
            .is_some()
        {
            return Err(Error::Conflict(format!(
                "a cluster named {:?} already exists",
                new.name
            )));
        }
        let now = ember_runtime::time::now();
        let cluster = Cluster {
            id: Uuid::now_v7(),
            name: new.name,
            profile_id: profile.id,
            min_size: new.min_size,
            max_size: new.max_size,
            desired_capacity: new.desired_capacity,
            status: ClusterStatus::Init,
            status_reason: "creating".into(),
            metadata: new.metadata,
            next_index: 1,
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            created_at: now,
            updated_at: now,
        };
        let action = ClusterAction::new(
            ActionKind::ClusterCreate,
            cluster.id,
            Some(cluster.id),
            ActionStatus::Ready,
            Map::new(),
            caller,
            now,
        );
        let created = event(
            "CLUSTER",
            cluster.id,
            &cluster.name,
            Some(cluster.id),
            "CLUSTER_CREATE",
            "INIT",
            "cluster recorded",
            caller,
        );
        self.store
            .create_cluster(&cluster, &action, &created)
            .await?;
        self.wake_dispatcher();
        Ok((cluster, action))
    }

    pub async fn list_clusters(
        &self,
        caller: &Identity,
        mut query: ObjectQuery,
    ) -> Result<Vec<Cluster>> {
        query.project_id = Self::scope(caller).map(str::to_owned);
        self.store.list_clusters(&query).await
    }

    /// Records a cluster action READY; the cluster must exist and not be
    /// going away.
    async fn cluster_action(
        &self,
        caller: &Identity,
        cluster: &Cluster,
        kind: ActionKind,
        inputs: Map<String, Value>,
    ) -> Result<ClusterAction> {
        refuse_read_only(caller)?;
        if cluster.status == ClusterStatus::Deleting {
            return Err(Error::Conflict(format!(
                "cluster {:?} is being deleted",
                cluster.name
            )));
        }
        let action = ClusterAction::new(
            kind,
            cluster.id,
            Some(cluster.id),
            ActionStatus::Ready,
            inputs,
            caller,
            ember_runtime::time::now(),
        );
        let accepted = action_event(&action, "READY", "accepted");
        self.submit(std::slice::from_ref(&action), &[accepted])
            .await?;
        Ok(action)
    }

    pub async fn delete_cluster(
        &self,
        caller: &Identity,
        name_or_id: &str,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        self.cluster_action(caller, &cluster, ActionKind::ClusterDelete, Map::new())
            .await
    }

    pub async fn scale(
        &self,
        caller: &Identity,
        name_or_id: &str,
        out: bool,
        count: u32,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        let kind = if out {
            ActionKind::ClusterScaleOut
        } else {
            ActionKind::ClusterScaleIn
        };
        // Said now rather than as a FAILED action later (the dispatcher
        // checks again when the action runs).
        self.check_cooldown(
            &cluster,
            if out {
                ScalingEvent::ScaleOut
            } else {
                ScalingEvent::ScaleIn
            },
        )
        .await?;
        let inputs = if count == 0 {
            Map::new()
        } else {
            json_object(json!({"count": count}))
        };
        self.cluster_action(caller, &cluster, kind, inputs).await
    }

    pub async fn resize(
        &self,
        caller: &Identity,
        name_or_id: &str,
        request: ResizeRequest,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        let min_size = request.min_size.unwrap_or(cluster.min_size);
        let max_size = request.max_size.unwrap_or(cluster.max_size);
        if min_size < 0 || (max_size != -1 && max_size < min_size) {
            return Err(Error::InvalidInput(format!(
                "min_size {min_size} and max_size {max_size} do not fit: need 0 <= min_size <= max_size (or max_size -1)"
            )));
        }
        let desired = match request.adjustment {
            Some((adjustment, number)) => sizing::desired_after(
                cluster.desired_capacity,
                adjustment,
                number,
                request.min_step.max(1),
            )?,
            None => cluster.desired_capacity,
        };
        let desired = sizing::fit(desired, min_size, max_size, request.strict)?;
        let inputs = json_object(
            json!({"desired_capacity": desired, "min_size": min_size, "max_size": max_size}),
        );
        self.cluster_action(caller, &cluster, ActionKind::ClusterResize, inputs)
            .await
    }

    pub async fn change_nodes(
        &self,
        caller: &Identity,
        name_or_id: &str,
        nodes: &[String],
        add: bool,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        if nodes.is_empty() {
            return Err(Error::InvalidInput(
                "nodes must name at least one node".into(),
            ));
        }
        let mut ids = Vec::with_capacity(nodes.len());
        for name in nodes {
            let node = self.find_node(caller, name).await?;
            match (add, node.cluster_id) {
                (false, Some(id)) if id == cluster.id => {}
                (false, _) => {
                    return Err(Error::InvalidInput(format!(
                        "node {name:?} is not a member of cluster {:?}",
                        cluster.name
                    )));
                }
                (true, None) => {}
                (true, Some(_)) => {
                    return Err(Error::Conflict(format!(
                        "node {name:?} already belongs to a cluster"
                    )));
                }
            }
            ids.push(Value::String(node.id.to_string()));
        }
        let kind = if add {
            ActionKind::ClusterAddNodes
        } else {
            ActionKind::ClusterDelNodes
        };
        self.cluster_action(caller, &cluster, kind, json_object(json!({"nodes": ids})))
            .await
    }

    pub async fn attach_policy(
        &self,
        caller: &Identity,
        name_or_id: &str,
        policy: &str,
        priority: i32,
        enabled: bool,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        let policy = self.find_policy(caller, policy).await?;
        let inputs = json_object(
            json!({"policy_id": policy.id.to_string(), "priority": priority, "enabled": enabled}),
        );
        self.cluster_action(caller, &cluster, ActionKind::ClusterAttachPolicy, inputs)
            .await
    }

    pub async fn detach_policy(
        &self,
        caller: &Identity,
        name_or_id: &str,
        policy: &str,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        let policy = self.find_policy(caller, policy).await?;
        let inputs = json_object(json!({"policy_id": policy.id.to_string()}));
        self.cluster_action(caller, &cluster, ActionKind::ClusterDetachPolicy, inputs)
            .await
    }

    pub async fn list_cluster_policies(
        &self,
        caller: &Identity,
        name_or_id: &str,
    ) -> Result<Vec<(PolicyBinding, PolicyDefinition)>> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        self.store.list_bindings(cluster.id).await
    }

    pub async fn check_or_recover(
        &self,
        caller: &Identity,
        name_or_id: &str,
        recover: bool,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        let kind = if recover {
            ActionKind::ClusterRecover
        } else {
            ActionKind::ClusterCheck
        };
        self.cluster_action(caller, &cluster, kind, Map::new())
            .await
    }

    pub async fn create_node(
        &self,
        caller: &Identity,
        new: NewNode,
    ) -> Result<(Node, ClusterAction)> {
        refuse_read_only(caller)?;
        validate_name("node", &new.name)?;
        let profile = self.find_profile(caller, &new.profile).await?;
        let cluster = match &new.cluster {
            Some(name) => Some(self.find_cluster(caller, name).await?),
            None => None,
        };
        let index = match &cluster {
            Some(cluster) => self.store.take_node_indexes(cluster.id, 1).await?,
            None => -1,
        };
        let now = ember_runtime::time::now();
        let node = Node {
            id: Uuid::now_v7(),
            name: new.name,
            cluster_id: cluster.as_ref().map(|cluster| cluster.id),
            profile_id: profile.id,
            index,
            role: new.role,
            status: NodeStatus::Creating,
            status_reason: "creating".into(),
            physical_id: None,
            tainted: false,
            metadata: new.metadata,
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            created_at: now,
            updated_at: now,
        };
        self.store.save_node(&node).await?;
        let action = ClusterAction::new(
            ActionKind::NodeCreate,
            node.id,
            node.cluster_id,
            ActionStatus::Ready,
            Map::new(),
            caller,
            now,
        );
        self.submit(
            std::slice::from_ref(&action),
            &[action_event(&action, "READY", "accepted")],
        )
        .await?;
        Ok((node, action))
    }

    pub async fn list_nodes(
        &self,
        caller: &Identity,
        cluster: Option<&str>,
        limit: u32,
        marker: Option<Uuid>,
    ) -> Result<Vec<Node>> {
        let cluster_id = match cluster {
            Some(name) => Some(self.find_cluster(caller, name).await?.id),
            None => None,
        };
        let query = NodeQuery {
            project_id: Self::scope(caller).map(str::to_owned),
            cluster_id,
            limit,
            marker,
        };
        self.store.list_nodes(&query).await
    }

    pub async fn update_node(
        &self,
        caller: &Identity,
        name_or_id: &str,
        name: Option<String>,
        role: Option<String>,
        tainted: Option<bool>,
    ) -> Result<Node> {
        refuse_read_only(caller)?;
        let mut node = self.find_node(caller, name_or_id).await?;
        if let Some(name) = name {
            validate_name("node", &name)?;
            node.name = name;
        }
        if let Some(role) = role {
            node.role = role;
        }
        if let Some(tainted) = tainted {
            node.tainted = tainted;
        }
        node.updated_at = ember_runtime::time::now();
        self.store.save_node(&node).await?;
        Ok(node)
    }

    /// NODE_DELETE for one node: through the cluster's deletion policy
    /// (hooks included) when it is a member.
    pub async fn delete_node(&self, caller: &Identity, name_or_id: &str) -> Result<ClusterAction> {
        refuse_read_only(caller)?;
        let node = self.find_node(caller, name_or_id).await?;
        if node.status == NodeStatus::Deleting {
            return Err(Error::Conflict(format!(
                "node {:?} is already being deleted",
                node.name
            )));
        }
        let now = ember_runtime::time::now();
        let action = ClusterAction::new(
            ActionKind::NodeDelete,
            node.id,
            node.cluster_id,
            ActionStatus::Ready,
            json_object(json!({"standalone": true})),
            caller,
            now,
        );
        self.submit(
            std::slice::from_ref(&action),
            &[action_event(&action, "READY", "accepted")],
        )
        .await?;
        Ok(action)
    }

    /// The cluster whose actions or events are asked for: a live one by
    /// name or id, or, by id, one already deleted (its history stays
    /// listable, still only within the caller's project).
    async fn history_cluster_id(&self, caller: &Identity, name_or_id: &str) -> Result<Uuid> {
        match self.find_cluster(caller, name_or_id).await {
            Err(Error::NotFound(message)) => {
                Uuid::parse_str(name_or_id).map_err(|_| Error::NotFound(message))
            }
            other => other.map(|cluster| cluster.id),
        }
    }

    pub async fn list_actions(
        &self,
        caller: &Identity,
        cluster: Option<&str>,
        status: Option<ActionStatus>,
        limit: u32,
        marker: Option<Uuid>,
    ) -> Result<Vec<ClusterAction>> {
        let cluster_id = match cluster {
            Some(name) => Some(self.history_cluster_id(caller, name).await?),
            None => None,
        };
        let query = ActionQuery {
            project_id: Self::scope(caller).map(str::to_owned),
            cluster_id,
            status,
            limit,
            marker,
        };
        self.store.list_actions(&query).await
    }

    pub async fn list_events(
        &self,
        caller: &Identity,
        cluster: Option<&str>,
        obj_id: Option<String>,
        limit: u32,
        marker: Option<Uuid>,
    ) -> Result<Vec<ClusterEvent>> {
        let cluster_id = match cluster {
            Some(name) => Some(self.history_cluster_id(caller, name).await?),
            None => None,
        };
        let query = EventQuery {
            project_id: Self::scope(caller).map(str::to_owned),
            cluster_id,
            obj_id,
            limit,
            marker,
        };
        self.store.list_events(&query).await
    }
}

pub(crate) fn json_object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}
