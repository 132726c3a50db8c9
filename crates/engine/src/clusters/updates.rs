//! Senlin's update, validate, replace, collect and cancel requests: what
//! changes an existing profile, policy, cluster or binding, what checks a
//! spec without storing it, and what stops an action before it runs.
//! Checks and messages follow Senlin's engine (`service.py`), because its
//! clients and conformance suite compare them.

use ember_runtime::Identity;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::requests::json_object;
use super::{ClusterService, action_event};
use crate::domain::admission::cluster::ClusterOperation;
use crate::domain::cluster::{
    ActionKind, Cluster, ClusterAction, ClusterConfig, Node, NodeStatus, PolicyBinding,
    PolicyDefinition, PolicyKind, Profile, ProfileSpec, validate_name,
};
use crate::error::{Error, Result};

/// What `PATCH /clusters/{id}` asks to change.
#[derive(Debug, Default)]
pub struct ClusterUpdate {
    pub name: Option<String>,
    pub metadata: Option<Map<String, Value>>,
    pub timeout: Option<i32>,
    /// Name or id of the new profile.
    pub profile: Option<String>,
    /// Only the cluster's profile changes; members keep theirs.
    pub profile_only: bool,
    /// Replaces the cluster's `config` (checked as on create).
    pub config: Option<Map<String, Value>>,
}

fn nothing_to_update() -> Error {
    Error::InvalidInput("No property needs an update.".into())
}

/// A lookup failure as Senlin words it when the object is named inside a
/// request about another ("The specified profile 'x' could not be
/// found."): not found becomes a 400 about the request.
fn specified(what: &str, name_or_id: &str, error: Error) -> Error {
    match error {
        Error::NotFound(_) => Error::InvalidInput(format!(
            "The specified {what} '{name_or_id}' could not be found."
        )),
        other => other,
    }
}

/// Python's repr of a list of strings, as Senlin's messages print them.
fn python_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| format!("'{item}'")).collect();
    format!("[{}]", quoted.join(", "))
}

impl ClusterService {
    pub async fn update_profile(
        &self,
        caller: &Identity,
        name_or_id: &str,
        name: Option<String>,
        metadata: Option<Map<String, Value>>,
    ) -> Result<Profile> {
        self.admit(ClusterOperation::UpdateProfile, caller).await?;
        let profile = self.find_profile(caller, name_or_id).await?;
        let name = name.filter(|name| *name != profile.name);
        let metadata = metadata.filter(|metadata| *metadata != profile.metadata);
        if name.is_none() && metadata.is_none() {
            return Err(nothing_to_update());
        }
        if let Some(name) = &name {
            validate_name("profile", name)?;
        }
        self.store
            .update_profile(profile.id, name, metadata)
            .await?
            .ok_or_else(|| {
                Error::NotFound(format!("The profile '{name_or_id}' could not be found."))
            })
    }

    /// The profile `spec` makes, checked as a create checks it and not
    /// stored (Senlin names it `validated_profile`).
    pub async fn validate_profile(&self, caller: &Identity, spec: Value) -> Result<Profile> {
        let spec = ProfileSpec::parse(spec)?;
        if let Some(flavor) = spec.flavor() {
            self.instances.check_flavor(flavor)?;
        }
        Ok(Profile {
            id: Uuid::nil(),
            name: "validated_profile".into(),
            spec,
            metadata: Map::new(),
            protected: false,
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            created_at: ember_runtime::time::now(),
            updated_at: None,
        })
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
            .map_err(|error| specified("policy", policy, error))?;
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

    /// CLUSTER_UPDATE, checked as Senlin checks it: a new profile is found
    /// (400 when not), of the cluster's profile type; something changes.
    pub async fn update_cluster(
        &self,
        caller: &Identity,
        name_or_id: &str,
        update: ClusterUpdate,
    ) -> Result<(Cluster, ClusterAction)> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        self.admit(ClusterOperation::UpdateCluster(&cluster), caller)
            .await?;
        let mut inputs = Map::new();
        if let Some(name) = update.name.filter(|name| *name != cluster.name) {
            validate_name("cluster", &name)?;
            inputs.insert("name".into(), Value::String(name));
        }
        if let Some(metadata) = update
            .metadata
            .filter(|metadata| *metadata != cluster.metadata)
        {
            inputs.insert("metadata".into(), Value::Object(metadata));
        }
        if let Some(timeout) = update
            .timeout
            .filter(|timeout| Some(*timeout) != cluster.timeout)
        {
            if timeout < 0 {
                return Err(Error::InvalidInput(format!(
                    "Value must be >= 0 for field 'timeout'. (got {timeout})"
                )));
            }
            inputs.insert("timeout".into(), json!(timeout));
        }
        if let Some(config) = update.config {
            let config = ClusterConfig::parse(config)?;
            if config != cluster.config {
                inputs.insert("config".into(), Value::Object(config.values().clone()));
            }
        }
        if let Some(wanted) = &update.profile {
            let profile = self
                .find_profile(caller, wanted)
                .await
                .map_err(|error| specified("profile", wanted, error))?;
            if profile.id != cluster.profile_id {
                let current = self.cluster_profile(&cluster).await?;
                if current.spec.type_name() != profile.spec.type_name() {
                    return Err(Error::InvalidInput(
                        "Cannot update a cluster to a different profile type, operation aborted."
                            .into(),
                    ));
                }
                inputs.insert("profile_id".into(), Value::String(profile.id.to_string()));
                inputs.insert("profile_only".into(), Value::Bool(update.profile_only));
            }
        }
        if inputs.is_empty() {
            return Err(nothing_to_update());
        }
        let action = self
            .cluster_action(caller, &cluster, ActionKind::ClusterUpdate, inputs)
            .await?;
        Ok((cluster, action))
    }

    /// CLUSTER_REPLACE_NODES: `pairs` of (member, orphan replacement), by
    /// name or id, checked all at once with every problem in the message.
    pub async fn replace_nodes(
        &self,
        caller: &Identity,
        name_or_id: &str,
        pairs: Vec<(String, String)>,
    ) -> Result<ClusterAction> {
        let cluster = self.find_cluster(caller, name_or_id).await?;
        self.admit(ClusterOperation::ReplaceNodes(&cluster), caller)
            .await?;
        if pairs.is_empty() {
            return Err(Error::InvalidInput(
                "Value for 'nodes' must have at least 1 item(s).".into(),
            ));
        }
        let cluster_type = self.cluster_profile(&cluster).await?.spec.type_name();
        let mut found = Map::new();
        let mut replaced = Vec::new();
        let (mut not_member, mut owned, mut inactive, mut unmatched) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut old_missing, mut new_missing) = (Vec::new(), Vec::new());
        for (old, new) in pairs {
            let Ok(old_node) = self.find_node(caller, &old).await else {
                old_missing.push(old);
                continue;
            };
            let Ok(new_node) = self.find_node(caller, &new).await else {
                new_missing.push(new);
                continue;
            };
            if old_node.cluster_id != Some(cluster.id) {
                not_member.push(old);
            }
            if new_node.cluster_id.is_some() {
                owned.push(new.clone());
            }
            if new_node.status != NodeStatus::Active {
                inactive.push(new.clone());
            }
            if self.node_profile_type(&new_node).await? != cluster_type {
                unmatched.push(new);
            }
            found.insert(
                old_node.id.to_string(),
                Value::String(new_node.id.to_string()),
            );
            replaced.push(old_node);
        }
        let mut problems = Vec::new();
        if !not_member.is_empty() {
            problems.push(format!(
                "The specified nodes {} to be replaced are not members of the cluster {}.",
                python_list(&not_member),
                cluster.id
            ));
        }
        if !owned.is_empty() {
            problems.push(format!(
                "Nodes {} already member of a cluster.",
                python_list(&owned)
            ));
        }
        if !inactive.is_empty() {
            problems.push(format!("Nodes are not ACTIVE: {}.", python_list(&inactive)));
        }
        if !unmatched.is_empty() {
            problems.push(format!(
                "Profile type of nodes {} do not match that of the cluster.",
                python_list(&unmatched)
            ));
        }
        if !old_missing.is_empty() {
            problems.push(format!(
                "Original nodes not found: {}.",
                python_list(&old_missing)
            ));
        }
        if !new_missing.is_empty() {
            problems.push(format!(
                "Replacement nodes not found: {}.",
                python_list(&new_missing)
            ));
        }
        if !problems.is_empty() {
            return Err(Error::InvalidInput(problems.join("\n")));
        }
        // A replaced node is deleted: not one protected from scale-in.
        if let Some(refusal) = crate::domain::admission::cluster::protected_from_deletion(&replaced)
        {
            return Err(refusal);
        }
        let inputs = json_object(json!({ "candidates": found }));
        self.cluster_action(caller, &cluster, ActionKind::ClusterReplaceNodes, inputs)
            .await
    }

    async fn node_profile_type(&self, node: &Node) -> Result<&'static str> {
        let profile = self
            .store
            .get_profile(node.profile_id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("the profile of node {} is gone", node.id)))?;
        Ok(profile.spec.type_name())
    }

    /// Senlin's collect: the value at `path` of every member, for those that
    /// have it. The path starts with a node field (`name`, `status`,
    /// `role`, `index`, `physical_id`, `details` …), then keys into
    /// objects (`details.status`, `metadata.key`).
    pub async fn collect(
        &self,
        caller: &Identity,
        name_or_id: &str,
        path: &str,
    ) -> Result<Vec<(Uuid, Value)>> {
        let path = path.trim();
        if path.is_empty() || path == "None" {
            return Err(Error::InvalidInput(
                "Required path attribute is missing.".into(),
            ));
        }
        let cluster = self.find_cluster(caller, name_or_id).await?;
        let nodes = self.store.list_cluster_nodes(cluster.id).await?;
        let mut values = Vec::with_capacity(nodes.len());
        for node in &nodes {
            let document = self.node_document(node).await?;
            if let Some(value) = lookup(&document, path) {
                values.push((node.id, value.clone()));
            }
        }
        Ok(values)
    }

    /// A node as collect walks it: its fields and `details` (the physical
    /// resource as the profile sees it).
    async fn node_document(&self, node: &Node) -> Result<Value> {
        let details = match &node.physical_id {
            Some(physical_id) => json!({
                "id": physical_id,
                "status": node.status.as_str(),
                "name": node.name,
            }),
            None => json!({}),
        };
        Ok(json!({
            "id": node.id.to_string(),
            "name": node.name,
            "cluster_id": node.cluster_id.map(|id| id.to_string()),
            "profile_id": node.profile_id.to_string(),
            "index": node.index,
            "role": node.role,
            "status": node.status.as_str(),
            "status_reason": node.status_reason,
            "physical_id": node.physical_id,
            "metadata": node.metadata,
            "details": details,
        }))
    }

    /// Cancels an action that has not started running (INIT, READY) or
    /// waits for a lifecycle completion: Senlin's `PATCH /actions/{id}`
    /// with status CANCELLED. A running action is not interrupted mid-step
    /// (409): Ember leaves nothing half-done.
    pub async fn cancel_action(&self, caller: &Identity, id: &str) -> Result<ClusterAction> {
        self.admit(ClusterOperation::CancelAction, caller).await?;
        let action = self.get_action(caller, id).await?;
        if super::launch::is_launch_wait(&action) {
            // Cancelled, its node would stay built and never in service.
            return Err(Error::Conflict(format!(
                "Action ({}) is the lifecycle action of a launching node: complete it with CONTINUE to put the node in service or ABANDON to delete it.",
                &action.id.to_string()[..8]
            )));
        }
        let outcome = self
            .store
            .cancel_action(action.id, &|cancelled| {
                action_event(cancelled, "CANCELLED", "Action execution cancelled")
            })
            .await?
            .ok_or_else(|| Error::NotFound(format!("The action '{id}' could not be found.")))?;
        let cancelled = match outcome {
            Ok(cancelled) => cancelled,
            Err(current) => {
                return Err(Error::Conflict(format!(
                    "Action ({}) is in status ({}) while expected status must be one of (INIT, READY, WAITING_LIFECYCLE_COMPLETION).",
                    &current.id.to_string()[..8],
                    current.status.as_str()
                )));
            }
        };
        for parent in &cancelled.depended_by {
            self.store.finish_parent_if_done(*parent).await?;
        }
        Ok(cancelled)
    }
}

/// The value at a dotted `path` in `document`.
fn lookup<'a>(document: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(document, |value, key| value.as_object()?.get(key))
        .filter(|value| !value.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collect_paths_walk_objects() {
        let document = json!({"name": "n1", "details": {"status": "ACTIVE"}, "physical_id": null});
        assert_eq!(lookup(&document, "name"), Some(&json!("n1")));
        assert_eq!(lookup(&document, "details.status"), Some(&json!("ACTIVE")));
        assert_eq!(lookup(&document, "details.missing"), None);
        assert_eq!(lookup(&document, "physical_id"), None);
    }

    #[test]
    fn lists_print_as_python_does() {
        assert_eq!(python_list(&["a".into(), "b".into()]), "['a', 'b']");
    }
}
