//! Adopting an existing instance as a node (Senlin's `node adopt`, API
//! 1.7): the instance, found by id in the caller's project, is described as
//! a profile spec of the asked type (`os.nova.server-1.0` or
//! `ember.instance-1.0`: flavor, image, name and metadata, with the
//! caller's overrides on top); the preview answers that spec, the adoption
//! records it as a new profile `prof-<node name>` and the node, ACTIVE, of
//! no cluster, managing the instance from now on (deleting the node
//! deletes the instance, as Senlin's would delete the server). No action
//! runs and nothing about the instance changes.

use ember_runtime::Identity;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::ClusterService;
use crate::domain::admission::cluster::ClusterOperation;
use crate::domain::cluster::profile::InstanceProfileType;
use crate::domain::cluster::{Node, NodeStatus, Profile, ProfileSpec, validate_name};
use crate::domain::quota::QuotaKind;
use crate::error::{Error, Result};

/// What an adoption names.
#[derive(Debug, Default)]
pub struct Adoption {
    /// The instance id.
    pub identity: String,
    /// The profile type, e.g. `os.nova.server-1.0`.
    pub type_name: String,
    /// Empty: `node-` and eight random characters.
    pub name: String,
    pub role: String,
    pub metadata: Map<String, Value>,
    /// Properties laid over what the instance says.
    pub overrides: Map<String, Value>,
    pub snapshot: bool,
}

/// The instance profile types an instance can be adopted as, by their
/// spec's `type` (without the version).
fn adoptable(type_name: &str) -> Result<&'static str> {
    [InstanceProfileType::NovaServer, InstanceProfileType::Ember]
        .into_iter()
        .find(|candidate| candidate.type_name() == type_name)
        .and_then(|found| found.type_name().strip_suffix("-1.0"))
        .ok_or_else(|| {
            Error::InvalidInput(format!(
                "The profile_type '{type_name}' could not be found (an instance is adopted as os.nova.server-1.0 or ember.instance-1.0)."
            ))
        })
}

impl ClusterService {
    /// The spec an adoption would record, checked as a profile spec.
    pub async fn preview_adoption(&self, caller: &Identity, adoption: &Adoption) -> Result<Value> {
        crate::domain::admission::admit(crate::domain::admission::Subject::Cluster {
            operation: &ClusterOperation::CreateNode { cluster: None },
            caller,
        })?;
        let spec_type = adoptable(&adoption.type_name)?;
        let not_found = || {
            Error::InvalidInput(format!(
                "The specified server '{}' could not be found.",
                adoption.identity
            ))
        };
        let uuid = Uuid::parse_str(&adoption.identity).map_err(|_| not_found())?;
        let instance = match self.instances.get(caller, uuid).await {
            Ok(instance) => instance,
            Err(Error::NotFound(_)) => return Err(not_found()),
            Err(error) => return Err(error),
        };
        let mut properties = Map::new();
        properties.insert("flavor".into(), json!(instance.flavor));
        properties.insert("image".into(), json!(instance.image));
        if spec_type == "os.nova.server" {
            properties.insert("name".into(), json!(instance.name));
        }
        properties.insert("metadata".into(), json!(instance.metadata));
        properties.extend(adoption.overrides.clone());
        let spec = json!({"type": spec_type, "version": "1.0", "properties": properties});
        ProfileSpec::parse(spec.clone())?;
        Ok(spec)
    }

    /// Adopts the instance: its new profile and node, recorded together.
    pub async fn adopt_node(&self, caller: &Identity, adoption: Adoption) -> Result<Node> {
        let spec = ProfileSpec::parse(self.preview_adoption(caller, &adoption).await?)?;
        let name = if adoption.name.is_empty() {
            format!("node-{}", &Uuid::new_v4().simple().to_string()[..8])
        } else {
            adoption.name.clone()
        };
        validate_name("node", &name)?;
        self.admit_one(
            &caller.project_id,
            QuotaKind::Nodes,
            crate::store::quotas::Usage::Nodes,
        )
        .await?;
        let now = ember_runtime::time::now();
        let profile = Profile {
            id: Uuid::now_v7(),
            name: format!("prof-{name}"),
            spec,
            metadata: Map::new(),
            protected: false,
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            created_at: now,
            updated_at: None,
        };
        let node = Node {
            id: Uuid::now_v7(),
            name,
            cluster_id: None,
            profile_id: profile.id,
            index: -1,
            role: adoption.role,
            status: NodeStatus::Active,
            status_reason: "Node adopted successfully".into(),
            physical_id: Some(uuid_text(&adoption.identity)),
            tainted: false,
            protected: false,
            metadata: adoption.metadata,
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            created_at: now,
            updated_at: now,
        };
        let event = super::node_event(
            &node,
            "NODE_ADOPT",
            "ACTIVE",
            format!("instance {} adopted", adoption.identity),
            caller,
        );
        self.store.adopt_node(&profile, &node, &event).await
    }
}

/// The instance id as the node records it (the canonical hyphenated form,
/// as nodes created by Ember carry it).
fn uuid_text(identity: &str) -> String {
    Uuid::parse_str(identity).map_or_else(|_| identity.to_owned(), |uuid| uuid.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_instance_types_are_adopted() {
        assert_eq!(adoptable("os.nova.server-1.0").ok(), Some("os.nova.server"));
        assert_eq!(adoptable("ember.instance-1.0").ok(), Some("ember.instance"));
        assert!(matches!(
            adoptable("os.heat.stack-1.0"),
            Err(Error::InvalidInput(message)) if message.contains("os.heat.stack-1.0")
        ));
    }
}
