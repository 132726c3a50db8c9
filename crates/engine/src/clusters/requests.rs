//! The request side: validate, decide, record (object and/or action) and
//! return at once. Nothing here touches a physical resource.

use ember_runtime::Identity;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{ClusterService, action_event, event};
use crate::domain::admission::cluster::ClusterOperation;
use crate::domain::cluster::sizing::{self, AdjustmentType};
use crate::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, ClusterConfig, ClusterEvent, ClusterStatus,
    Node, NodeStatus, PolicyBinding, PolicyDefinition, PolicyKind, Profile, ProfileSpec,
    validate_name,
};
use crate::domain::quota::QuotaKind;
use crate::error::{Error, Result};
use crate::store::clusters::{ActionQuery, EventQuery, NodeQuery, ObjectQuery};

pub struct NewCluster {
    pub name: String,
    pub profile: String,
    pub min_size: i32,
    pub max_size: i32,
    pub desired_capacity: i32,
    pub metadata: Map<String, Value>,
    /// Seconds an action on the cluster may take; None = the default.
    pub timeout: Option<i32>,
    /// Senlin's `config`, as the caller gave it (checked here).
    pub config: Map<String, Value>,
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

/// A cluster's or node's check, or its recover (Senlin's CLUSTER_CHECK /
/// CLUSTER_RECOVER, NODE_CHECK / NODE_RECOVER).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthAction {
    Check,
    Recover,
}

impl ClusterService {
    pub async fn create_profile(
        &self,
        caller: &Identity,
        name: &str,
        spec: Value,
        metadata: Map<String, Value>,
        protected: bool,
    ) -> Result<Profile> {
        self.admit(ClusterOperation::CreateProfile, caller).await?;
        validate_name("profile", name)?;
        // Senlin reports what the type's schema refuses as a failed
        // create (an unknown type, a 404, and a spec without a type or
        // version are said as they are).
        crate::domain::cluster::policy::spec_type_and_version(&spec)?;
        let spec = ProfileSpec::parse(spec).map_err(|error| match error {
            Error::InvalidInput(message) => {
                Error::InvalidInput(format!("Failed in creating profile {name}: {message}"))
            }
            other => other,
        })?;
        // Senlin validates a profile's flavor when it is made: an unknown
        // one is a 400 now, not a cluster of failed nodes later.
        if let Some(flavor) = spec.flavor() {
            self.instances.check_flavor(flavor)?;
        }
        let profile = Profile {
            id: Uuid::now_v7(),
            name: name.to_owned(),
            spec,
            metadata,
            protected,
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            created_at: ember_runtime::time::now(),
            updated_at: None,
        };
        self.store.insert_profile(&profile).await?;
        Ok(profile)
    }

    pub async fn list_profiles(
        &self,
        caller: &Identity,
        global_project: bool,
        mut query: ObjectQuery,
    ) -> Result<Vec<Profile>> {
        query.project_id = list_scope(caller, global_project)?;
        self.store.list_profiles(&query).await
    }

    pub async fn delete_profile(&self, caller: &Identity, name_or_id: &str) -> Result<()> {
        self.admit(ClusterOperation::DeleteProfile, caller).await?;
        let profile = self.find_profile(caller, name_or_id).await?;
        // The store refuses while a cluster or node uses it: said in
        // Senlin's words, naming the profile by id as Senlin does.
        self.store
            .delete_profile(profile.id)
            .await
            .map_err(|error| match error {
                Error::Conflict(_) => Error::Conflict(format!(
                    "The profile '{}' cannot be deleted: still referenced by some clusters and/or nodes.",
                    profile.id
                )),
                other => other,
            })
    }

    pub async fn create_policy(
        &self,
        caller: &Identity,
        name: &str,
        spec: Value,
    ) -> Result<PolicyDefinition> {
        self.admit(ClusterOperation::CreatePolicy, caller).await?;
        validate_name("policy", name)?;
        let kind = PolicyKind::parse(&spec)?;
        if let Some(hooks) = kind.hooks() {
            hooks.check_timeout(self.hook_min_timeout_secs())?;
        }
        self.vet_hook_webhook(&kind).await?;
        let policy = PolicyDefinition {
            id: Uuid::now_v7(),
            name: name.to_owned(),
            kind,
            spec,
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            created_at: ember_runtime::time::now(),
            updated_at: None,
        };
        self.store.insert_policy(&policy).await?;
        Ok(policy)
    }

    pub async fn list_policies(
        &self,
        caller: &Identity,
        global_project: bool,
        mut query: ObjectQuery,
    ) -> Result<Vec<PolicyDefinition>> {
        query.project_id = list_scope(caller, global_project)?;
        self.store.list_policies(&query).await
    }

    pub async fn delete_policy(&self, caller: &Identity, name_or_id: &str) -> Result<()> {
        self.admit(ClusterOperation::DeletePolicy, caller).await?;
        let policy = self.find_policy(caller, name_or_id).await?;
        // Refused while attached: in Senlin's words, naming the policy as
        // the caller did.
        self.store
            .delete_policy(policy.id)
            .await
            .map_err(|error| match error {
                Error::Conflict(_) => Error::Conflict(format!(
                    "The policy '{name_or_id}' cannot be deleted: still attached to some clusters."
                )),
                other => other,
            })
    }

    pub async fn create_cluster(
        &self,
        caller: &Identity,
        new: NewCluster,
    ) -> Result<(Cluster, ClusterAction)> {
        self.create_cluster_delegating(caller, None, new).await
    }

    /// [`Self::create_cluster`] for a caller who came with their Keystone
    /// token: on a cloud the cluster is made with a trust from the caller,
    /// which its nodes act through (deleted with the cluster).
    pub async fn create_cluster_delegating(
        &self,
        caller: &Identity,
        subject_token: Option<&ember_runtime::identity::SubjectToken>,
        new: NewCluster,
    ) -> Result<(Cluster, ClusterAction)> {
        self.admit(ClusterOperation::CreateCluster, caller).await?;
        validate_name("cluster", &new.name)?;
        // Names need not be unique (Senlin's default): a name two
        // clusters share finds neither, and callers use the id.
        let profile = self
            .find_profile(caller, &new.profile)
            .await
            .map_err(|error| super::specified_not_found("profile", &new.profile, error))?;
        Cluster::validate_sizes(new.min_size, new.max_size, new.desired_capacity)?;
        let config = ClusterConfig::parse(new.config)?;
        self.admit_one(
            &caller.project_id,
            QuotaKind::Clusters,
            crate::store::quotas::Usage::Clusters,
        )
        .await?;
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
            timeout: new.timeout,
            config,
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            created_at: now,
            updated_at: now,
            maintenance_lock: None,
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
        self.admit_growth(&cluster, 0, i64::from(cluster.desired_capacity))
            .await?;
        let owner = crate::domain::delegation::DelegationOwner::Cluster(cluster.id);
        self.delegate(owner, caller, subject_token).await?;
        if let Err(error) = self.store.create_cluster(&cluster, &action, &created).await {
            self.revoke(owner).await;
            return Err(error);
        }
        self.wake_dispatcher();
        Ok((cluster, action))
    }

    pub async fn list_clusters(
        &self,
        caller: &Identity,
        global_project: bool,
        mut query: ObjectQuery,
    ) -> Result<Vec<Cluster>> {
        query.project_id = list_scope(caller, global_project)?;
        self.store.list_clusters(&query).await
    }

    /// [`ClusterService::list_clusters`] with each cluster's member ids.
    pub(super) async fn list_clusters_with_members(
        &self,
        caller: &Identity,
        global_project: bool,
        mut query: ObjectQuery,
    ) -> Result<Vec<(Cluster, Vec<Uuid>)>> {
        query.project_id = list_scope(caller, global_project)?;
        self.store.list_clusters_with_members(&query).await
    }

    /// Records a cluster action READY (admitted by the caller): it runs
    /// when the cluster's earlier actions have.
    pub(super) async fn cluster_action(
        &self,
        caller: &Identity,
        cluster: &Cluster,
        kind: ActionKind,
        inputs: Map<String, Value>,
    ) -> Result<ClusterAction> {
        if kind != ActionKind::ClusterDelete {
            self.refuse_a_full_queue(cluster, kind).await?;
        }
        self.admit_one(
            &caller.project_id,
            QuotaKind::ConcurrentOperations,
            crate::store::quotas::Usage::RunningOperations,
        )
        .await?;
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

    /// Refuses one more action on `cluster` when as many as it queues
    /// already run or wait there: Senlin's `ActionConflict` (a 409 naming
    /// them; Senlin refuses any second action), so requests never pile up
    /// minutes behind the cluster's lock. A delete is never refused here.
    async fn refuse_a_full_queue(&self, cluster: &Cluster, kind: ActionKind) -> Result<()> {
        let most = self.settings.max_queued_per_cluster;
        let active = self
            .store
            .list_actions(&ActionQuery {
                targets: vec![cluster.id],
                statuses: vec![
                    ActionStatus::Init,
                    ActionStatus::Ready,
                    ActionStatus::Running,
                    ActionStatus::Waiting,
                    ActionStatus::WaitingLifecycleCompletion,
                    ActionStatus::Suspended,
                ],
                limit: u32::try_from(most).unwrap_or(u32::MAX),
                ..ActionQuery::default()
            })
            .await?;
        if active.len() < most {
            return Ok(());
        }
        let ids: Vec<String> = active.iter().map(|action| action.id.to_string()).collect();
        Err(Error::Conflict(format!(
            "The {} action for target {} conflicts with the following action(s): {} (a cluster runs or queues at most {most} actions: try again when one has ended)",
            kind.as_str(),
            cluster.id,
            ids.join(",")
        )))
    }

    pub async fn delete_cluster(
        &self,
        caller: &Identity,
        name_or_id: &str,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        self.admit(ClusterOperation::DeleteCluster(&cluster), caller)
            .await?;
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
        let count = u64::from(count);
        let (kind, operation) = if out {
            (
                ActionKind::ClusterScaleOut,
                ClusterOperation::ScaleOut {
                    cluster: &cluster,
                    count,
                },
            )
        } else {
            (
                ActionKind::ClusterScaleIn,
                ClusterOperation::ScaleIn {
                    cluster: &cluster,
                    count,
                },
            )
        };
        // With the quota and the cooldown: said now rather than as a
        // FAILED action later (the dispatcher checks again when the action
        // runs).
        self.admit(operation, caller).await?;
        let inputs = if count == 0 {
            Map::new()
        } else {
            json_object(json!({"count": count}))
        };
        self.cluster_action(caller, &cluster, kind, inputs).await
    }

    /// Checks the resize against the cluster now (a strict resize that does
    /// not fit is refused at once) and records it with its adjustment: the
    /// action computes the capacity again from the cluster as it is when it
    /// runs.
    pub async fn resize(
        &self,
        caller: &Identity,
        name_or_id: &str,
        request: ResizeRequest,
    ) -> Result<ClusterAction> {
        check_resize_request(&request)?;
        let cluster = self.find_cluster(caller, name_or_id).await?;
        self.admit(ClusterOperation::Resize(&cluster), caller)
            .await?;
        let min_step = request.min_step.max(1);
        let requested = match request.adjustment {
            Some((adjustment, number)) => Some(sizing::desired_after(
                cluster.desired_capacity,
                adjustment,
                number,
                min_step,
            )?),
            None => None,
        };
        sizing::check_size_params(
            Some(&cluster),
            requested,
            request.min_size,
            request.max_size,
            request.strict,
        )?;
        let min_size = request.min_size.unwrap_or(cluster.min_size);
        let max_size = request.max_size.unwrap_or(cluster.max_size);
        let desired = sizing::fit(
            requested.unwrap_or(cluster.desired_capacity),
            min_size,
            max_size,
            request.strict,
        )?;
        self.admit_growth(
            &cluster,
            i64::from(cluster.desired_capacity),
            i64::from(desired),
        )
        .await?;
        let mut inputs = json_object(json!({
            "requested_capacity": desired,
            "min_size": min_size,
            "max_size": max_size,
            "strict": request.strict,
            "min_step": min_step,
        }));
        if let Some((adjustment, number)) = request.adjustment {
            inputs.insert("adjustment_type".into(), json!(adjustment.as_str()));
            inputs.insert("number".into(), json!(number));
        }
        self.cluster_action(caller, &cluster, ActionKind::ClusterResize, inputs)
            .await
    }

    /// add_nodes (`add`) or del_nodes; a del_nodes's
    /// `destroy_after_deletion` (Senlin's: given, else the deletion
    /// policy's, else false — the nodes leave the cluster and stay).
    pub async fn change_nodes(
        &self,
        caller: &Identity,
        name_or_id: &str,
        nodes: &[String],
        add: bool,
        destroy_after_deletion: Option<bool>,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        let found = self.nodes_to_change(caller, &cluster, nodes, add).await?;
        let (kind, operation) = if add {
            (
                ActionKind::ClusterAddNodes,
                ClusterOperation::AddNodes {
                    cluster: &cluster,
                    nodes: &found,
                },
            )
        } else {
            (
                ActionKind::ClusterDelNodes,
                ClusterOperation::DelNodes {
                    cluster: &cluster,
                    nodes: &found,
                },
            )
        };
        self.admit(operation, caller).await?;
        if add {
            // Adopted nodes already count in the project's nodes; the
            // cluster's size grows.
            let current = i64::from(cluster.desired_capacity);
            let size = current.saturating_add(i64::try_from(found.len()).unwrap_or(i64::MAX));
            if let Some(quotas) = self.quotas() {
                quotas
                    .admit_size(
                        &cluster.project_id,
                        QuotaKind::NodesPerCluster,
                        u64::try_from(size).unwrap_or(u64::MAX),
                    )
                    .await?;
            }
        }
        let ids: Vec<Value> = found
            .iter()
            .map(|node| Value::String(node.id.to_string()))
            .collect();
        let mut inputs = json_object(json!({ "nodes": ids }));
        if let (false, Some(destroy)) = (add, destroy_after_deletion) {
            inputs.insert("destroy_after_deletion".into(), Value::Bool(destroy));
        }
        self.cluster_action(caller, &cluster, kind, inputs).await
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
        self.admit(ClusterOperation::AttachPolicy(&cluster), caller)
            .await?;
        let policy = self
            .find_policy(caller, policy)
            .await
            .map_err(|error| super::specified_not_found("policy", policy, error))?;
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
        self.admit(ClusterOperation::DetachPolicy(&cluster), caller)
            .await?;
        let identity = policy;
        let policy = self
            .find_policy(caller, identity)
            .await
            .map_err(|error| super::specified_not_found("policy", identity, error))?;
        // Refused now, as Senlin refuses it, rather than as a FAILED
        // action (the action checks again when it runs).
        let bindings = self.store.list_bindings(cluster.id).await?;
        if !bindings
            .iter()
            .any(|(binding, _)| binding.policy_id == policy.id)
        {
            return Err(Error::InvalidInput(format!(
                "The policy '{identity}' is not attached to the specified cluster '{name_or_id}'."
            )));
        }
        let inputs = json_object(json!({"policy_id": policy.id.to_string()}));
        self.cluster_action(caller, &cluster, ActionKind::ClusterDetachPolicy, inputs)
            .await
    }

    /// The cluster and its bindings with their policies.
    pub async fn list_cluster_policies(
        &self,
        caller: &Identity,
        name_or_id: &str,
    ) -> Result<(Cluster, Vec<(PolicyBinding, PolicyDefinition)>)> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        let bindings = self.store.list_bindings(cluster.id).await?;
        Ok((cluster, bindings))
    }

    pub async fn check_or_recover(
        &self,
        caller: &Identity,
        name_or_id: &str,
        health: HealthAction,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        let (kind, operation) = match health {
            HealthAction::Recover => (
                ActionKind::ClusterRecover,
                ClusterOperation::Recover(&cluster),
            ),
            HealthAction::Check => (ActionKind::ClusterCheck, ClusterOperation::Check(&cluster)),
        };
        self.admit(operation, caller).await?;
        self.cluster_action(caller, &cluster, kind, Map::new())
            .await
    }

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
                    .map_err(|error| super::specified_not_found("cluster", name, error))?,
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
            .map_err(|error| super::specified_not_found("profile", &new.profile, error))?;
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
            .ok_or_else(|| super::not_found("node", name_or_id))
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

    /// A page of the actions `query` selects, of `cluster` when given.
    pub async fn list_actions(
        &self,
        caller: &Identity,
        cluster: Option<&str>,
        global_project: bool,
        mut query: ActionQuery,
    ) -> Result<Vec<ClusterAction>> {
        query.project_id = list_scope(caller, global_project)?;
        query.cluster_id = match cluster {
            Some(name) => Some(self.history_cluster_id(caller, name).await?),
            None => None,
        };
        self.store.list_actions(&query).await
    }

    /// A page of the events `query` selects, of `cluster` when given.
    pub async fn list_events(
        &self,
        caller: &Identity,
        cluster: Option<&str>,
        global_project: bool,
        mut query: EventQuery,
    ) -> Result<Vec<ClusterEvent>> {
        query.project_id = list_scope(caller, global_project)?;
        query.cluster_id = match cluster {
            Some(name) => Some(self.history_cluster_id(caller, name).await?),
            None => None,
        };
        self.store.list_events(&query).await
    }
}

/// What Senlin checks of a resize before it looks the cluster up (its API
/// layer), in its words: each size field in range, an exact capacity not
/// below 0, a min_size not above the max_size given with it.
fn check_resize_request(request: &ResizeRequest) -> Result<()> {
    if let Some(min_size) = request.min_size {
        sizing::check_capacity_field("min_size", min_size, 0)?;
    }
    if let Some(max_size) = request.max_size {
        sizing::check_capacity_field("max_size", max_size, -1)?;
    }
    if let Some((AdjustmentType::ExactCapacity, number)) = request.adjustment
        && number < 0.0
    {
        return Err(Error::InvalidInput(
            "The 'number' must be non-negative integer for adjustment type 'EXACT_CAPACITY'."
                .into(),
        ));
    }
    if let (Some(min_size), Some(max_size)) = (request.min_size, request.max_size)
        && max_size > 0
        && min_size > max_size
    {
        return Err(Error::InvalidInput(format!(
            "The specified min_size ({min_size}) is greater than the specified max_size ({max_size})."
        )));
    }
    Ok(())
}

/// The project a list is limited to: the caller's own (admins included, as
/// in Senlin), or every project for an admin who asked (`global_project`);
/// anyone else asking is refused with Senlin's message.
fn list_scope(caller: &Identity, global_project: bool) -> Result<Option<String>> {
    match (global_project, caller.is_admin()) {
        (false, _) => Ok(Some(caller.project_id.clone())),
        (true, true) => Ok(None),
        (true, false) => Err(Error::Forbidden(
            "You are not authorized to complete this operation.".to_owned(),
        )),
    }
}

pub(crate) fn json_object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}
