//! `AWS::AutoScaling::LaunchConfiguration` and `OS::Heat::InstanceGroup`,
//! as Heat has them: a launch configuration is a definition of servers
//! (image, instance type, key, user data, security groups) that creates
//! nothing; an instance group makes `Size` servers from the launch
//! configuration it names, as members of a nested stack, and resizes or
//! updates them when `Size` or the configuration changes.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::group_members::{MemberValues, host, member_template, nested_id};
use super::nested::NestedStackWork;
use super::{
    AttributeSchema, NestedDefinition, NestedStackHostSlot, NestedTemplate, PropertySchema,
    PropertyType, ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType,
    ResourceTypeSchema,
};
use crate::domain::Resource;

pub const LAUNCH_CONFIGURATION_TYPE: &str = "AWS::AutoScaling::LaunchConfiguration";
pub const INSTANCE_GROUP_TYPE: &str = "OS::Heat::InstanceGroup";

/// The most servers one group makes (the nodes quota bounds it further).
const MAX_SIZE: u64 = 1000;

pub struct LaunchConfiguration {
    schema: ResourceTypeSchema,
}

impl LaunchConfiguration {
    pub fn new() -> Self {
        LaunchConfiguration {
            schema: ResourceTypeSchema {
                type_name: LAUNCH_CONFIGURATION_TYPE,
                description: "The definition of the servers an instance group launches; creates nothing itself.",
                properties: vec![
                    PropertySchema::new(
                        "ImageId",
                        PropertyType::String,
                        "Glance image ID or name.",
                    )
                    .required(),
                    PropertySchema::new(
                        "InstanceType",
                        PropertyType::String,
                        "Nova instance type (flavor).",
                    )
                    .required(),
                    PropertySchema::new(
                        "KeyName",
                        PropertyType::String,
                        "Optional Nova keypair name.",
                    ),
                    PropertySchema::new(
                        "UserData",
                        PropertyType::String,
                        "User data to pass to instance.",
                    ),
                    PropertySchema::new(
                        "SecurityGroups",
                        PropertyType::List,
                        "Security group names to assign.",
                    ),
                ],
                attributes: vec![],
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
        }
    }
}

#[async_trait]
impl ResourceType for LaunchConfiguration {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        Ok(ResourceOutcome {
            physical_id: request.physical_resource_name(),
            ..ResourceOutcome::default()
        })
    }

    /// A launch configuration makes nothing: a step redone after a
    /// take-over names at most a physical id no one saw (it is recorded
    /// only when the step completes).
    fn acts_outside_its_row(&self) -> bool {
        false
    }
}

pub struct InstanceGroup {
    schema: ResourceTypeSchema,
    host: NestedStackHostSlot,
}

impl InstanceGroup {
    pub fn new(host: NestedStackHostSlot) -> Self {
        InstanceGroup {
            schema: ResourceTypeSchema {
                type_name: INSTANCE_GROUP_TYPE,
                description: "A group of servers made from one launch configuration.",
                properties: vec![
                    PropertySchema::new(
                        "AvailabilityZones",
                        PropertyType::List,
                        "Not Implemented.",
                    )
                    .required(),
                    PropertySchema::new(
                        "LaunchConfigurationName",
                        PropertyType::String,
                        "The reference to a LaunchConfiguration resource.",
                    )
                    .required()
                    .update_allowed(),
                    PropertySchema::new(
                        "Size",
                        PropertyType::Integer,
                        "Desired number of instances.",
                    )
                    .required()
                    .update_allowed(),
                    PropertySchema::new(
                        "LoadBalancerNames",
                        PropertyType::List,
                        "List of LoadBalancer resources (recorded; Ember has no load balancers).",
                    ),
                    PropertySchema::new(
                        "Tags",
                        PropertyType::List,
                        "Tags to attach to this group: {Key, Value} maps, given to each server as metadata.",
                    ),
                ],
                attributes: vec![AttributeSchema {
                    name: "InstanceList",
                    description: "A comma-delimited list of server ids.",
                }],
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
            host,
        }
    }

    async fn apply(
        &self,
        request: &ResourceRequest,
        stack_id: Option<uuid::Uuid>,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let size = size(&request.properties)?;
        let host = host(&self.host)?;
        let launch = launch_configuration(
            &host.nested_resources(request.stack_id).await?,
            &request.properties,
        )?;
        let server = server_definition(&launch, &request.properties)?;
        let members: Vec<(String, Value)> = (0..size)
            .map(|index| (index.to_string(), server.clone()))
            .collect();
        let names: Vec<String> = members.iter().map(|(name, _)| name.clone()).collect();
        let nested = NestedDefinition {
            template: NestedTemplate::Inline(member_template(
                &format!("servers of InstanceGroup {}", request.resource_name),
                &members,
            )),
            parameters: Map::new(),
        };
        let outcome = match stack_id {
            None => host.create_nested_stack(request, nested).await?,
            Some(stack_id) => host.update_nested_stack(request, stack_id, nested).await?,
        };
        let values = MemberValues::read(&outcome.outputs, &names);
        let list: Vec<String> = values
            .refs
            .iter()
            .filter_map(|reference| reference.as_str().map(str::to_owned))
            .collect();
        let mut attributes = Map::new();
        attributes.insert("InstanceList".to_owned(), json!(list.join(",")));
        Ok(ResourceOutcome {
            physical_id: outcome.stack_id.to_string(),
            attributes,
            data: Value::Null,
        })
    }
}

fn size(properties: &Map<String, Value>) -> Result<u64, ResourceFailure> {
    match properties.get("Size").and_then(Value::as_u64) {
        Some(size) if size <= MAX_SIZE => Ok(size),
        Some(size) => Err(ResourceFailure::new(format!(
            "Size: {size} is more than {MAX_SIZE} servers"
        ))),
        None => Err(ResourceFailure::new(
            "Size: a whole number of servers (0 or more) is required".to_owned(),
        )),
    }
}

/// The properties of the launch configuration `LaunchConfigurationName`
/// names (by its reference or its name) among the stack's resources.
fn launch_configuration(
    siblings: &[Resource],
    properties: &Map<String, Value>,
) -> Result<Map<String, Value>, ResourceFailure> {
    let name = properties
        .get("LaunchConfigurationName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let found = siblings.iter().find(|resource| {
        resource.type_name == LAUNCH_CONFIGURATION_TYPE
            && (resource.physical_id.as_deref() == Some(name) || resource.name == name)
    });
    match found {
        Some(resource) => Ok(resource.properties.as_object().cloned().unwrap_or_default()),
        None => Err(ResourceFailure::new(format!(
            "LaunchConfigurationName: {} is not an {LAUNCH_CONFIGURATION_TYPE} of this stack (refer to it with get_resource or Ref)",
            ember_runtime::quote::quoted(name)
        ))),
    }
}

/// One member: an `OS::Nova::Server` from the launch configuration, with
/// the group's tags as its metadata.
fn server_definition(
    launch: &Map<String, Value>,
    group: &Map<String, Value>,
) -> Result<Value, ResourceFailure> {
    let mut properties = Map::new();
    for (from, to) in [
        ("ImageId", "image"),
        ("InstanceType", "flavor"),
        ("KeyName", "key_name"),
        ("UserData", "user_data"),
        ("SecurityGroups", "security_groups"),
    ] {
        if let Some(value) = launch.get(from).filter(|value| !value.is_null()) {
            properties.insert(to.to_owned(), value.clone());
        }
    }
    if let Some(tags) = group.get("Tags").and_then(Value::as_array) {
        let mut metadata = Map::new();
        for tag in tags {
            match (tag.get("Key").and_then(Value::as_str), tag.get("Value")) {
                (Some(key), Some(value)) => {
                    let value = value
                        .as_str()
                        .map_or_else(|| value.to_string(), str::to_owned);
                    metadata.insert(key.to_owned(), json!(value));
                }
                _ => {
                    return Err(ResourceFailure::new(format!(
                        "Tags: each tag is a map with Key and Value, got {}",
                        ember_runtime::quote::quoted(&tag.to_string())
                    )));
                }
            }
        }
        properties.insert("metadata".to_owned(), Value::Object(metadata));
    }
    Ok(json!({"type": "OS::Nova::Server", "properties": properties}))
}

#[async_trait]
impl NestedStackWork for InstanceGroup {
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

    /// Size and launch configuration change in place (the members' nested
    /// stack is updated); the rest is not update_allowed.
    fn needs_replacement(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> bool {
        ["AvailabilityZones", "LoadBalancerNames", "Tags"]
            .iter()
            .any(|key| old.get(*key) != new.get(*key))
    }

    fn planned_members(&self, properties: &Map<String, Value>) -> Option<(u64, Value)> {
        let size = properties.get("Size")?.as_u64()?;
        Some((size, json!({"type": "OS::Nova::Server"})))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch_row(name: &str, physical: &str) -> Resource {
        let mut row = Resource::initial(
            uuid::Uuid::nil(),
            name,
            LAUNCH_CONFIGURATION_TYPE,
            chrono::Utc::now(),
        );
        row.physical_id = Some(physical.to_owned());
        row.properties = json!({"ImageId": "debian-12", "InstanceType": "m1.small",
                                "UserData": "#!/bin/sh", "KeyName": null});
        row
    }

    #[test]
    fn members_are_servers_from_the_launch_configuration_with_the_tags() {
        let siblings = vec![launch_row("lc", "stack-lc-abc")];
        let group = json!({"LaunchConfigurationName": "stack-lc-abc", "Size": 2,
                           "Tags": [{"Key": "team", "Value": "web"}, {"Key": "n", "Value": 3}]});
        let group = group.as_object().expect("map");
        let launch = launch_configuration(&siblings, group).expect("found by reference");
        let server = server_definition(&launch, group).expect("a server");
        assert_eq!(
            server,
            json!({"type": "OS::Nova::Server", "properties": {"image": "debian-12", "flavor": "m1.small",
                   "user_data": "#!/bin/sh", "metadata": {"team": "web", "n": "3"}}})
        );
        let by_name = json!({"LaunchConfigurationName": "lc"});
        assert!(launch_configuration(&siblings, by_name.as_object().expect("map")).is_ok());
        let missing = json!({"LaunchConfigurationName": "nope"});
        assert!(
            launch_configuration(&siblings, missing.as_object().expect("map"))
                .expect_err("missing")
                .to_string()
                .contains("is not an AWS::AutoScaling::LaunchConfiguration")
        );
        let bad_tags = json!({"Tags": ["x"]});
        assert!(server_definition(&launch, bad_tags.as_object().expect("map")).is_err());
        assert!(size(json!({"Size": 5000}).as_object().expect("map")).is_err());
        assert_eq!(
            size(json!({"Size": 0}).as_object().expect("map")).expect("zero"),
            0
        );
    }
}
