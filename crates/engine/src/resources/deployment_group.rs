//! `OS::Heat::SoftwareDeploymentGroup` and `OS::Heat::StructuredDeploymentGroup`:
//! one deployment of the same config per server of `servers` (a map of
//! names to server ids), members of a nested stack named by those names.
//! Attributes are maps by name: `deploy_stdouts`, `deploy_stderrs`,
//! `deploy_status_codes`, plus `refs`, `refs_map` and `resource.{name}`.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::group_members::{MemberValues, host, member_template, nested_id};
use super::nested::NestedStackWork;
use super::software::{
    SOFTWARE_DEPLOYMENT_TYPE, STRUCTURED_DEPLOYMENT_TYPE, deployment_properties,
};
use super::{
    AttributeSchema, NestedDefinition, NestedStackHostSlot, NestedTemplate, PropertySchema,
    PropertyType, ResourceFailure, ResourceOutcome, ResourceRequest, ResourceTypeSchema,
};
use crate::domain::Resource;

pub const SOFTWARE_DEPLOYMENT_GROUP_TYPE: &str = "OS::Heat::SoftwareDeploymentGroup";
pub const STRUCTURED_DEPLOYMENT_GROUP_TYPE: &str = "OS::Heat::StructuredDeploymentGroup";
/// Heat's older names of the groups, hidden (not listed) but still taken
/// (Heat's `SoftwareDeployments` / `StructuredDeployments`).
pub const SOFTWARE_DEPLOYMENTS_TYPE: &str = "OS::Heat::SoftwareDeployments";
pub const STRUCTURED_DEPLOYMENTS_TYPE: &str = "OS::Heat::StructuredDeployments";

/// The member attributes gathered into maps by server name.
const GATHERED: [(&str, &str); 3] = [
    ("deploy_stdouts", "deploy_stdout"),
    ("deploy_stderrs", "deploy_stderr"),
    ("deploy_status_codes", "deploy_status_code"),
];

pub struct DeploymentGroup {
    schema: ResourceTypeSchema,
    member_type: &'static str,
    host: NestedStackHostSlot,
}

impl DeploymentGroup {
    fn with(
        type_name: &'static str,
        member_type: &'static str,
        structured: bool,
        host: NestedStackHostSlot,
    ) -> Self {
        let mut properties: Vec<PropertySchema> = deployment_properties(structured)
            .into_iter()
            .filter(|property| property.name != "server")
            .collect();
        properties.insert(
            0,
            PropertySchema::new(
                "servers",
                PropertyType::Map,
                "A map of names and server IDs to apply configuration to. The name is arbitrary and is used as the Heat resource name for the corresponding deployment.",
            )
            .required()
            .update_allowed(),
        );
        let attribute = |name, description| AttributeSchema { name, description };
        DeploymentGroup {
            schema: ResourceTypeSchema {
                type_name,
                description: "Applies the same software config to each server of a map, one deployment per server, and waits for every server's agent.",
                properties,
                attributes: vec![
                    attribute(
                        "deploy_stdouts",
                        "A map of Nova names and captured stdouts from the configuration execution to each server.",
                    ),
                    attribute(
                        "deploy_stderrs",
                        "A map of Nova names and captured stderrs from the configuration execution to each server.",
                    ),
                    attribute(
                        "deploy_status_codes",
                        "A map of Nova names and returned status code from the configuration execution.",
                    ),
                    attribute("refs", "A list of the deployments' ids."),
                    attribute(
                        "refs_map",
                        "A map of server names to their deployments' ids.",
                    ),
                    attribute(
                        "resource.{name}",
                        "One deployment's attributes (resource.NAME.A for one).",
                    ),
                ],
                accepts_any_properties: false,
                accepts_any_attributes: true,
            },
            member_type,
            host,
        }
    }

    pub fn software(host: NestedStackHostSlot) -> Self {
        DeploymentGroup::with(
            SOFTWARE_DEPLOYMENT_GROUP_TYPE,
            SOFTWARE_DEPLOYMENT_TYPE,
            false,
            host,
        )
    }

    pub fn structured(host: NestedStackHostSlot) -> Self {
        DeploymentGroup::with(
            STRUCTURED_DEPLOYMENT_GROUP_TYPE,
            STRUCTURED_DEPLOYMENT_TYPE,
            true,
            host,
        )
    }

    async fn apply(
        &self,
        request: &ResourceRequest,
        stack_id: Option<uuid::Uuid>,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let members = members(self.member_type, &request.properties)?;
        let names: Vec<String> = members.iter().map(|(name, _)| name.clone()).collect();
        let nested = NestedDefinition {
            template: NestedTemplate::Inline(member_template(
                &format!("deployments of {}", request.resource_name),
                &members,
            )),
            parameters: Map::new(),
        };
        let host = host(&self.host)?;
        let outcome = match stack_id {
            None => host.create_nested_stack(request, nested).await?,
            Some(stack_id) => host.update_nested_stack(request, stack_id, nested).await?,
        };
        let values = MemberValues::read(&outcome.outputs, &names);
        Ok(ResourceOutcome {
            physical_id: outcome.stack_id.to_string(),
            attributes: attributes(&values),
            data: Value::Null,
        })
    }
}

/// One deployment per server, each given the group's other properties.
fn members(
    member_type: &str,
    properties: &Map<String, Value>,
) -> Result<Vec<(String, Value)>, ResourceFailure> {
    let servers = match properties.get("servers") {
        Some(Value::Object(servers)) => servers,
        _ => {
            return Err(ResourceFailure::new(
                "servers: a map of names to server ids is required".to_owned(),
            ));
        }
    };
    let mut common: Map<String, Value> = properties
        .iter()
        .filter(|(key, value)| key.as_str() != "servers" && !value.is_null())
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    common.remove("server");
    servers
        .iter()
        .map(|(name, server)| {
            let server = server
                .as_str()
                .filter(|id| !id.trim().is_empty())
                .ok_or_else(|| {
                    ResourceFailure::new(format!(
                        "servers.{name}: must be a server id, got {}",
                        ember_runtime::quote::quoted(&server.to_string())
                    ))
                })?;
            if name.is_empty() || name.len() > 255 {
                return Err(ResourceFailure::new(
                    "servers: each name must have 1 to 255 characters".to_owned(),
                ));
            }
            let mut member_properties = common.clone();
            member_properties.insert("server".to_owned(), json!(server));
            Ok((
                name.clone(),
                json!({"type": member_type, "properties": member_properties}),
            ))
        })
        .collect()
}

fn attributes(values: &MemberValues) -> Map<String, Value> {
    let mut attributes = Map::new();
    for (gathered, member_attribute) in GATHERED {
        let by_name: Map<String, Value> = values
            .names
            .iter()
            .zip(&values.attributes)
            .map(|(name, member)| {
                (
                    name.clone(),
                    member.get(member_attribute).cloned().unwrap_or(Value::Null),
                )
            })
            .collect();
        attributes.insert(gathered.to_owned(), Value::Object(by_name));
    }
    for (name, member) in values.names.iter().zip(&values.attributes) {
        if let Some(member_attributes) = member.as_object() {
            for (attribute, value) in member_attributes {
                attributes.insert(format!("resource.{name}.{attribute}"), value.clone());
            }
        }
        attributes.insert(format!("resource.{name}"), member.clone());
    }
    attributes.insert("refs".to_owned(), Value::Array(values.refs.clone()));
    attributes.insert("refs_map".to_owned(), values.refs_map());
    attributes
}

#[async_trait]
impl NestedStackWork for DeploymentGroup {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    fn host(&self) -> &NestedStackHostSlot {
        &self.host
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        self.apply(request, None).await
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        self.apply(request, nested_id(current)).await
    }

    /// Every property change is an update of the deployments' nested stack.
    fn needs_replacement(&self, _old: &Map<String, Value>, _new: &Map<String, Value>) -> bool {
        false
    }

    fn planned_members(&self, properties: &Map<String, Value>) -> Option<(u64, Value)> {
        let servers = properties.get("servers")?.as_object()?;
        Some((servers.len() as u64, json!({"type": self.member_type})))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_deployment_per_server_with_the_groups_properties() {
        let properties = json!({"servers": {"web": "s-1", "db": "s-2"}, "config": "c-1",
            "input_values": {"port": 80}, "signal_transport": "NO_SIGNAL"});
        let members = members(
            SOFTWARE_DEPLOYMENT_TYPE,
            properties.as_object().expect("map"),
        )
        .expect("members");
        assert_eq!(members.len(), 2);
        let (name, web) = members.iter().find(|(name, _)| name == "web").expect("web");
        assert_eq!(name, "web");
        assert_eq!(web["type"], SOFTWARE_DEPLOYMENT_TYPE);
        assert_eq!(web["properties"]["server"], "s-1");
        assert_eq!(web["properties"]["config"], "c-1");
        assert_eq!(web["properties"]["input_values"], json!({"port": 80}));
        assert!(web["properties"].get("servers").is_none());
        let bad = json!({"servers": {"web": 3}});
        assert!(
            super::members(SOFTWARE_DEPLOYMENT_TYPE, bad.as_object().expect("map"))
                .expect_err("a number")
                .to_string()
                .contains("servers.web")
        );
        let missing = json!({"config": "c"});
        assert!(
            super::members(SOFTWARE_DEPLOYMENT_TYPE, missing.as_object().expect("map")).is_err()
        );
    }

    #[test]
    fn the_groups_attributes_are_maps_by_server_name() {
        let values = MemberValues {
            names: vec!["web".into(), "db".into()],
            refs: vec![json!("d-1"), json!("d-2")],
            attributes: vec![
                json!({"deploy_stdout": "ok", "deploy_stderr": "", "deploy_status_code": 0}),
                json!({"deploy_stdout": "done", "deploy_stderr": "warn", "deploy_status_code": 1}),
            ],
        };
        let attributes = attributes(&values);
        assert_eq!(
            attributes["deploy_stdouts"],
            json!({"web": "ok", "db": "done"})
        );
        assert_eq!(
            attributes["deploy_status_codes"],
            json!({"web": 0, "db": 1})
        );
        assert_eq!(attributes["resource.db.deploy_stderr"], "warn");
        assert_eq!(attributes["refs"], json!(["d-1", "d-2"]));
    }
}
