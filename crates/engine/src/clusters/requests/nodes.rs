//! Nodes: made (standalone or into a cluster, with their NODE_CREATE),
//! listed, shown with their resource's details and profile, updated,
//! deleted.

use ember_runtime::Identity;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{json_object, list_scope};
use crate::clusters::{ClusterService, action_event, specified_not_found};
use crate::domain::admission::cluster::ClusterOperation;
use crate::domain::cluster::{
    ActionKind, ActionStatus, ClusterAction, Node, NodeStatus, Profile, ProfileKind, validate_name,
};
use crate::domain::quota::QuotaKind;
use crate::error::{Error, Result};
use crate::store::clusters::NodeQuery;

pub struct NewNode {
    pub name: String,
    pub profile: String,
    pub cluster: Option<String>,
    pub role: String,
    pub metadata: Map<String, Value>,
}

impl ClusterService {
    /// Records the node INIT (a member of its cluster with the next index,
    /// if it names one) with its NODE_CREATE action; the node counts in the
    /// cluster's size once the action runs, under the cluster's lock.
    pub async fn create_node(
        &self,
        caller: &Identity,
        new: NewNode,
    ) -> Result<(Node, ClusterAction)> {
        self.create_node_delegating(caller, None, new).await
    }

    /// [`Self::create_node`] for a caller who came with their Keystone
    /// token: on a cloud a node made outside any cluster gets a trust of
    /// its own from the caller (a member acts through its cluster's).
    pub async fn create_node_delegating(
        &self,
        caller: &Identity,
        subject_token: Option<&ember_runtime::identity::SubjectToken>,
        new: NewNode,
    ) -> Result<(Node, ClusterAction)> {
        // Senlin's messages for what the request names (400: it is the
        // request that is wrong, not the node that is missing).
        let cluster = match &new.cluster {
            Some(name) => Some(
                self.find_cluster(caller, name)
                    .await
                    .map_err(|error| specified_not_found("cluster", name, error))?,
            ),
            None => None,
        };
        self.admit(
            ClusterOperation::CreateNode {
                cluster: cluster.as_ref(),
            },
            caller,
        )
        .await?;
        validate_name("node", &new.name)?;
        let profile = self
            .find_profile(caller, &new.profile)
            .await
            .map_err(|error| specified_not_found("profile", &new.profile, error))?;
        if let Some(cluster) = &cluster
            && let Some(cluster_profile) = self.store.get_profile(cluster.profile_id).await?
            && cluster_profile.spec.type_name() != profile.spec.type_name()
        {
            return Err(Error::InvalidInput(
                "Node and cluster have different profile type, operation aborted.".into(),
            ));
        }
        match &cluster {
            Some(cluster) => {
                let current = i64::from(cluster.desired_capacity);
                self.admit_growth(cluster, current, current + 1).await?;
            }
            None => {
                self.admit_one(
                    &caller.project_id,
                    QuotaKind::Nodes,
                    crate::store::quotas::Usage::Nodes,
                )
                .await?
            }
        }
        let now = ember_runtime::time::now();
        let node = Node {
            id: Uuid::now_v7(),
            name: new.name,
            cluster_id: cluster.as_ref().map(|cluster| cluster.id),
            profile_id: profile.id,
            index: -1,
            role: new.role,
            status: NodeStatus::Init,
            status_reason: "waiting to be created".into(),
            physical_id: None,
            tainted: false,
            protected: profile.protected,
            metadata: new.metadata,
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            created_at: now,
            updated_at: now,
        };
        let action = ClusterAction::new(
            ActionKind::NodeCreate,
            node.id,
            node.cluster_id,
            ActionStatus::Ready,
            json_object(json!({"node_name": node.name})),
            caller,
            now,
        );
        // A member acts through its cluster's delegation; a node outside any
        // cluster needs its own.
        let owner = crate::domain::delegation::DelegationOwner::Node(node.id);
        if node.cluster_id.is_none() {
            self.delegate(owner, caller, subject_token).await?;
        }
        let node = match self
            .store
            .create_node(&node, &action, &action_event(&action, "READY", "accepted"))
            .await
        {
            Ok(node) => node,
            Err(error) => {
                self.revoke(owner).await;
                return Err(error);
            }
        };
        self.wake_dispatcher();
        Ok((node, action))
    }

    /// A page of the caller's nodes (of `cluster`, when given).
    pub async fn list_nodes(
        &self,
        caller: &Identity,
        cluster: Option<&str>,
        limit: u32,
        marker: Option<Uuid>,
    ) -> Result<Vec<Node>> {
        let query = NodeQuery {
            limit,
            marker,
            ..NodeQuery::default()
        };
        self.list_nodes_matching(caller, cluster, false, query)
            .await
    }

    /// A page of the nodes `query` selects, of `cluster` when given (a
    /// cluster the caller cannot see is a bad request, as in Senlin).
    pub async fn list_nodes_matching(
        &self,
        caller: &Identity,
        cluster: Option<&str>,
        global_project: bool,
        mut query: NodeQuery,
    ) -> Result<Vec<Node>> {
        query.project_id = list_scope(caller, global_project)?;
        query.cluster_id = match cluster {
            Some(name) => match self.find_cluster(caller, name).await {
                Ok(cluster) => Some(cluster.id),
                Err(Error::NotFound(_)) => {
                    return Err(Error::InvalidInput(format!(
                        "Cannot find the given cluster: {name}."
                    )));
                }
                Err(other) => return Err(other),
            },
            None => None,
        };
        self.store.list_nodes(&query).await
    }

    /// Renames, re-roles or taints a node: only those columns are written,
    /// so a running action's writes to the node are never undone.
    pub async fn update_node(
        &self,
        caller: &Identity,
        name_or_id: &str,
        name: Option<String>,
        role: Option<String>,
        tainted: Option<bool>,
        protected: Option<bool>,
    ) -> Result<Node> {
        let node = self.find_node(caller, name_or_id).await?;
        self.admit(ClusterOperation::UpdateNode(&node), caller)
            .await?;
        if let Some(name) = &name {
            validate_name("node", name)?;
        }
        self.store
            .update_node_details(
                node.id,
                crate::store::clusters::NodeDetails {
                    name,
                    role,
                    tainted,
                    protected,
                    metadata: None,
                },
            )
            .await?
            .ok_or_else(|| crate::clusters::not_found("node", name_or_id))
    }

    /// NODE_DELETE for one node: through the cluster's deletion policy
    /// (hooks included) when it is a member, under the cluster's lock.
    pub async fn delete_node(&self, caller: &Identity, name_or_id: &str) -> Result<ClusterAction> {
        let node = self.find_node(caller, name_or_id).await?;
        let cluster = match node.cluster_id {
            Some(cluster_id) => self.store.get_cluster(cluster_id).await?,
            None => None,
        };
        self.admit(
            ClusterOperation::DeleteNode {
                node: &node,
                cluster: cluster.as_ref(),
            },
            caller,
        )
        .await?;
        let now = ember_runtime::time::now();
        let action = ClusterAction::new(
            ActionKind::NodeDelete,
            node.id,
            node.cluster_id,
            ActionStatus::Ready,
            json_object(json!({"standalone": true, "node_name": node.name})),
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

    /// The names of the profiles of `nodes`, by profile id (one read per
    /// profile, however many nodes share it).
    pub async fn profile_names(
        &self,
        nodes: &[Node],
    ) -> Result<std::collections::HashMap<Uuid, String>> {
        let mut ids: Vec<Uuid> = nodes.iter().map(|node| node.profile_id).collect();
        ids.sort_unstable();
        ids.dedup();
        // One query for the page, not one per profile.
        self.store.profile_names(&ids).await
    }

    /// The profile a node was made from.
    pub async fn node_profile(&self, node: &Node) -> Result<Profile> {
        self.store
            .get_profile(node.profile_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("the profile of node {:?} is gone", node.name)))
    }

    /// The node's resource as it is now (Senlin's `show_details`): an
    /// instance's or a stack's facts, `{}` when it has none yet, and
    /// `{"Error": {code, message}}` when it cannot be read.
    pub async fn node_details(&self, caller: &Identity, node: &Node) -> Result<Value> {
        let Some(physical_id) = node.physical_id.clone() else {
            return Ok(json!({}));
        };
        let profile = self.node_profile(node).await?;
        let unreadable = |error: Error| {
            let code = match error {
                Error::NotFound(_) => 404,
                _ => 500,
            };
            json!({"Error": {"code": code, "message": error.to_string()}})
        };
        Ok(match profile.spec.kind {
            ProfileKind::Instance { .. } => {
                let read = match Uuid::parse_str(&physical_id) {
                    Ok(uuid) => self.instances.get(caller, uuid).await,
                    Err(_) => Err(Error::NotFound(format!(
                        "physical id {physical_id:?} is not an instance id"
                    ))),
                };
                match read {
                    Ok(instance) => json!({
                        "id": instance.uuid.to_string(),
                        "name": instance.name,
                        "status": instance.status.as_str(),
                        "power_state": instance.power_state.as_str(),
                        "flavor": instance.flavor,
                        "image": instance.image,
                        "metadata": instance.metadata,
                        "locked": instance.maintenance_lock.is_some(),
                        "created": instance.created_at.to_rfc3339(),
                        "updated": instance.updated_at.to_rfc3339(),
                    }),
                    Err(error) => unreadable(error),
                }
            }
            ProfileKind::Stack { .. } => match self.stacks.find_stack(caller, &physical_id).await {
                Ok(stack) => json!({
                    "id": stack.id.to_string(),
                    "stack_name": stack.name,
                    "stack_status": format!("{}_{}", stack.action.as_str(), stack.status.as_str()),
                    "stack_status_reason": stack.status_reason,
                    "creation_time": stack.created_at.to_rfc3339(),
                    "updated_time": stack.updated_at.to_rfc3339(),
                }),
                Err(error) => unreadable(error),
            },
        })
    }
}
