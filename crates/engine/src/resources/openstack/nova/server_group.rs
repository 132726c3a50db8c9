//! `OS::Nova::ServerGroup`: a Nova server group with one scheduling
//! policy (and, from Nova 2.64, its rules). Every change replaces it, as
//! in Heat; the reference is the group's id.
//!
//! Server groups carry no tags or metadata and cannot be renamed, so the
//! only place a row's marker can live is the name:
//! - **No name given**: the group is named `<stack>-<resource>-ember-<uuid>`
//!   (Heat's physical name, with the row's marker as its suffix). A create
//!   that runs again adopts the group of that exact name, and a delete of
//!   a row that recorded no group deletes it: no one else makes a name
//!   ending with that UUID.
//! - **A name given**: the name is the user's, and other groups may share
//!   it (Nova does not keep names unique), so a group of that name is never
//!   taken as the row's — adopting, and later deleting, someone else's
//!   group would be worse than failing. A create resumed after a crash
//!   makes the group if none has the name, and otherwise fails, saying why
//!   (the user decides which group is the stack's); a delete of a row that
//!   recorded no group leaves groups of that name alone, and says so.

use async_trait::async_trait;
use ember_openstack::microversion::Microversion;
use ember_openstack::nova::{Nova, ServerGroup};
use serde_json::{Map, Value, json};

use super::super::heat::{carries_marker, marked_name};
use super::super::{Cloud, failure, physical_id, text};
use super::nova_for;
use crate::domain::{Resource, StackAction};
use crate::resources::{
    PropertySchema, PropertyType, ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType,
    ResourceTypeSchema,
};

/// What the marker derives from.
const GROUP_KIND: &str = "server group";

/// Nova takes a policy's rules from this microversion on.
const RULES: Microversion = Microversion::new(2, 64);

/// The only rule Nova knows.
const MAX_SERVER_PER_HOST: &str = "max_server_per_host";

pub struct ServerGroupResource {
    schema: ResourceTypeSchema,
    cloud: Cloud,
}

/// Whether a create runs for the first time or resumes a crashed one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    First,
    Resumed,
}

/// The policy (Heat takes the first of `policies`) and the rules.
fn policy_and_rules(
    properties: &Map<String, Value>,
) -> Result<(String, Option<Value>), ResourceFailure> {
    let policy = properties
        .get("policies")
        .and_then(Value::as_array)
        .and_then(|policies| policies.first())
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            ResourceFailure::new("policies: a list of exactly one policy is required".to_owned())
        })?;
    let rules = match properties.get("rules") {
        None | Some(Value::Null) => None,
        Some(Value::Object(rules)) if rules.is_empty() => None,
        Some(Value::Object(rules)) => {
            if let Some(unknown) = rules.keys().find(|key| *key != MAX_SERVER_PER_HOST) {
                return Err(ResourceFailure::new(format!(
                    "rules: Unknown Property {unknown}"
                )));
            }
            if rules
                .get(MAX_SERVER_PER_HOST)
                .is_some_and(|value| !value.is_number())
            {
                return Err(ResourceFailure::new(format!(
                    "rules.{MAX_SERVER_PER_HOST}: Value must be a number"
                )));
            }
            Some(Value::Object(rules.clone()))
        }
        Some(_) => {
            return Err(ResourceFailure::new(
                "rules: Value must be a map".to_owned(),
            ));
        }
    };
    Ok((policy, rules))
}

impl ServerGroupResource {
    pub fn new(cloud: Cloud) -> ServerGroupResource {
        ServerGroupResource {
            schema: schema(),
            cloud,
        }
    }

    async fn make(
        &self,
        request: &ResourceRequest,
        attempt: Attempt,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let (policy, rules) = policy_and_rules(&request.properties)?;
        let nova = nova_for(&self.cloud, request.stack_id).await?;
        if rules.is_some() && nova.version() < RULES {
            return Err(ResourceFailure::new(
                "Required microversion for rules not supported.".to_owned(),
            ));
        }
        let given_name = text(&request.properties, "name").filter(|name| !name.is_empty());
        let name = given_name
            .clone()
            .unwrap_or_else(|| marked_name(request, GROUP_KIND));
        let existing = match (&given_name, attempt) {
            (Some(_), Attempt::First) => Vec::new(),
            _ => named(&nova, &name).await?,
        };
        let group = match (&given_name, existing.into_iter().next()) {
            (None, Some(found)) => found,
            (Some(given), Some(_)) => {
                return Err(ResourceFailure::new(format!(
                    "a server group named {given:?} exists, and the create that was interrupted may or may not have made it (Nova's server groups carry no tags to tell): delete it if it is not wanted elsewhere, then update the stack"
                )));
            }
            (_, None) => nova
                .create_server_group(&name, &policy, rules.as_ref())
                .await
                .map_err(failure)?,
        };
        Ok(ResourceOutcome {
            physical_id: group.id.clone(),
            attributes: group.raw.as_object().cloned().unwrap_or_default(),
            data: json!({}),
        })
    }
}

/// The project's groups named exactly `name`.
async fn named(nova: &Nova, name: &str) -> Result<Vec<ServerGroup>, ResourceFailure> {
    Ok(nova
        .server_groups()
        .await
        .map_err(failure)?
        .into_iter()
        .filter(|group| group.name == name)
        .collect())
}

/// The type's schema (shared with the simulated backend's twin).
pub fn schema() -> ResourceTypeSchema {
    ResourceTypeSchema {
        type_name: "OS::Nova::ServerGroup",
        description: "A server group: servers scheduled together or apart.",
        properties: vec![
            PropertySchema::new("name", PropertyType::String, "Server Group name."),
            PropertySchema::new(
                "policies",
                PropertyType::List,
                "A list of exactly one policy to apply. Defaults to anti-affinity.",
            )
            .default(json!(["anti-affinity"]))
            .allowed_values(vec![
                json!("anti-affinity"),
                json!("affinity"),
                json!("soft-anti-affinity"),
                json!("soft-affinity"),
            ]),
            PropertySchema::new(
                "rules",
                PropertyType::Map,
                "Rules for a policy (max_server_per_host: maximum servers in a group on a given host, for anti-affinity).",
            ),
        ],
        attributes: Vec::new(),
        accepts_any_properties: false,
        accepts_any_attributes: false,
    }
}

#[async_trait]
impl ResourceType for ServerGroupResource {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        self.make(request, Attempt::First).await
    }

    async fn resume_create(
        &self,
        request: &ResourceRequest,
        in_flight: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let _ = in_flight;
        self.make(request, Attempt::Resumed).await
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let nova = nova_for(&self.cloud, current.stack_id).await?;
        if let Some(group_id) = physical_id(current) {
            return nova.delete_server_group(group_id).await.map_err(failure);
        }
        let given_name = current
            .properties
            .as_object()
            .and_then(|properties| text(properties, "name"))
            .filter(|name| !name.is_empty());
        if let Some(given) = given_name {
            tracing::warn!(
                resource = %current.name,
                name = %given,
                "a server group row without a group is deleted without looking for one: groups named by the template cannot be told apart"
            );
            return Ok(());
        }
        let marker = Cloud::marker_of(current, GROUP_KIND);
        for group in nova.server_groups().await.map_err(failure)? {
            if carries_marker(&group.name, &marker) {
                nova.delete_server_group(&group.id).await.map_err(failure)?;
            }
        }
        Ok(())
    }

    /// Heat has no check; Ember checks the group is still there.
    async fn check(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let group_id = physical_id(current)
            .ok_or_else(|| ResourceFailure::new("the server group was never made".to_owned()))?;
        let nova = nova_for(&self.cloud, current.stack_id).await?;
        match nova.server_group(group_id).await.map_err(failure)? {
            Some(_) => Ok(()),
            None => Err(ResourceFailure::new(format!(
                "Server group {group_id} could not be found."
            ))),
        }
    }

    /// A resumed create adopts a group named with the marker, and fails
    /// rather than guess for a name given (see the module's header).
    fn take_over(&self, step: StackAction) -> Result<(), String> {
        let _ = step;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(properties: Value) -> Result<(String, Option<Value>), ResourceFailure> {
        policy_and_rules(properties.as_object().expect("a map"))
    }

    #[test]
    fn the_first_policy_and_known_rules_are_taken() {
        assert_eq!(
            read(json!({"policies": ["affinity"]})).expect("valid"),
            ("affinity".to_owned(), None)
        );
        assert_eq!(
            read(json!({"policies": ["anti-affinity"], "rules": {"max_server_per_host": 2}}))
                .expect("valid"),
            (
                "anti-affinity".to_owned(),
                Some(json!({"max_server_per_host": 2}))
            )
        );
        assert_eq!(
            read(json!({"policies": []}))
                .expect_err("no policy")
                .to_string(),
            "policies: a list of exactly one policy is required"
        );
        assert_eq!(
            read(json!({"policies": ["affinity"], "rules": {"max_servers": 2}}))
                .expect_err("unknown rule")
                .to_string(),
            "rules: Unknown Property max_servers"
        );
    }
}
