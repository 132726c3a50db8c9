//! Policies: made (spec parsed once, hook limits and webhook targets
//! checked), validated without being stored, listed, renamed, deleted when
//! detached; attached to, enabled or disabled on and detached from
//! clusters (each a cluster action).

use ember_runtime::Identity;
use serde_json::{Value, json};
use uuid::Uuid;

use super::super::ClusterService;
use super::{json_object, list_scope, nothing_to_update};
use crate::clusters::specified_not_found;
use crate::domain::admission::cluster::ClusterOperation;
use crate::domain::cluster::{
    ActionKind, Cluster, ClusterAction, PolicyBinding, PolicyDefinition, PolicyKind, validate_name,
};
use crate::error::{Error, Result};
use crate::store::clusters::ObjectQuery;

impl ClusterService {
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
            hooks.check_timeout(self.hook_min_timeout_secs)?;
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
            .map_err(|error| specified_not_found("policy", policy, error))?;
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
            .map_err(|error| specified_not_found("policy", identity, error))?;
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

    pub async fn update_policy(
        &self,
        caller: &Identity,
        name_or_id: &str,
        name: String,
    ) -> Result<PolicyDefinition> {
        self.admit(ClusterOperation::UpdatePolicy, caller).await?;
        validate_name("policy", &name)?;
        let policy = self.find_policy(caller, name_or_id).await?;
        if name == policy.name {
            return Err(nothing_to_update());
        }
        self.store
            .update_policy(policy.id, name)
            .await?
            .ok_or_else(|| {
                Error::NotFound(format!("The policy '{name_or_id}' could not be found."))
            })
    }

    pub async fn validate_policy(
        &self,
        caller: &Identity,
        spec: Value,
    ) -> Result<PolicyDefinition> {
        let kind = PolicyKind::parse(&spec)?;
        self.vet_hook_webhook(&kind).await?;
        Ok(PolicyDefinition {
            id: Uuid::nil(),
            name: "validated_policy".into(),
            kind,
            spec,
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            created_at: ember_runtime::time::now(),
            updated_at: None,
        })
    }

    /// The cluster, and the binding of `policy` to it.
    pub async fn cluster_policy(
        &self,
        caller: &Identity,
        cluster: &str,
        policy: &str,
    ) -> Result<(Cluster, PolicyBinding, PolicyDefinition)> {
        let cluster = self.find_cluster(caller, cluster).await?;
        let policy = self.find_policy(caller, policy).await?;
        let bound = self
            .store
            .list_bindings(cluster.id)
            .await?
            .into_iter()
            .find(|(binding, _)| binding.policy_id == policy.id);
        match bound {
            Some((binding, policy)) => Ok((cluster, binding, policy)),
            None => Err(Error::NotFound(format!(
                "The policy '{}' is not found attached to the specified cluster '{}'.",
                policy.id, cluster.id
            ))),
        }
    }

    /// CLUSTER_UPDATE_POLICY: an attached policy enabled or disabled.
    pub async fn update_cluster_policy(
        &self,
        caller: &Identity,
        cluster: &str,
        policy: &str,
        enabled: Option<bool>,
    ) -> Result<ClusterAction> {
        let found = self.find_cluster(caller, cluster).await?;
        self.admit(ClusterOperation::UpdateClusterPolicy(&found), caller)
            .await?;
        let policy = self
            .find_policy(caller, policy)
            .await
            .map_err(|error| specified_not_found("policy", policy, error))?;
        let bound = self
            .store
            .list_bindings(found.id)
            .await?
            .into_iter()
            .any(|(binding, _)| binding.policy_id == policy.id);
        if !bound {
            return Err(Error::InvalidInput(format!(
                "The policy '{}' is not attached to the specified cluster '{}'.",
                policy.id, found.id
            )));
        }
        let mut inputs = json_object(json!({"policy_id": policy.id.to_string()}));
        if let Some(enabled) = enabled {
            inputs.insert("enabled".into(), Value::Bool(enabled));
        }
        self.cluster_action(caller, &found, ActionKind::ClusterUpdatePolicy, inputs)
            .await
    }
}
