//! `AWS::EC2::Instance`: a server described in CloudFormation's words,
//! run as `OS::Nova::Server` (the same instance underneath, on every
//! backend). Its properties are translated as Heat translates them —
//! `ImageId` is the image, `InstanceType` the flavor, `SecurityGroups` and
//! `SecurityGroupIds` the security groups, `NetworkInterfaces` (port ids,
//! in `DeviceIndex` order) or else `SubnetId` the interfaces, `Tags` the
//! metadata, `NovaSchedulerHints` the scheduler hints — and its attributes
//! are Heat's (`AvailabilityZone`, `PrivateIp`, `PublicIp`,
//! `PrivateDnsName`, `PublicDnsName`: the server's first address).
//!
//! What Heat accepts but Ember does not do yet (`Volumes` attached after
//! boot, `BlockDeviceMappings`) is refused, naming it; what Heat itself
//! never implemented is refused as Heat refuses it.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::server::ServerResource;
use super::{
    AttributeSchema, LockRequest, PropertySchema, PropertyType, ResourceFailure, ResourceOutcome,
    ResourceRequest, ResourceType, ResourceTypeSchema,
};
use crate::domain::{Resource, StackAction};

pub const AWS_INSTANCE_TYPE: &str = "AWS::EC2::Instance";

/// Properties Heat declares but never implemented: setting one fails.
const NOT_IMPLEMENTED: [&str; 8] = [
    "DisableApiTermination",
    "KernelId",
    "Monitoring",
    "PlacementGroupName",
    "PrivateIpAddress",
    "RamDiskId",
    "SourceDestCheck",
    "Tenancy",
];

/// Heat's properties Ember refuses until it does them.
const NOT_YET: [(&str, &str); 2] = [
    (
        "Volumes",
        "attach volumes with AWS::EC2::VolumeAttachment resources instead",
    ),
    (
        "BlockDeviceMappings",
        "use OS::Nova::Server's block_device_mapping_v2 instead",
    ),
];

pub struct AwsInstance {
    schema: ResourceTypeSchema,
    server: ServerResource,
}

impl AwsInstance {
    pub fn new(server: ServerResource) -> AwsInstance {
        let mut properties = vec![
            PropertySchema::new("ImageId", PropertyType::String, "Glance image ID or name.")
                .required(),
            PropertySchema::new(
                "InstanceType",
                PropertyType::String,
                "Nova instance type (flavor); a change replaces the instance.",
            )
            .required()
            .update_allowed(),
            PropertySchema::new(
                "KeyName",
                PropertyType::String,
                "Optional Nova keypair name.",
            ),
            PropertySchema::new(
                "AvailabilityZone",
                PropertyType::String,
                "Availability zone to launch the instance in.",
            ),
            PropertySchema::new(
                "SecurityGroups",
                PropertyType::List,
                "Security group names to assign.",
            ),
            PropertySchema::new(
                "SecurityGroupIds",
                PropertyType::List,
                "Security group IDs to assign.",
            ),
            PropertySchema::new(
                "NetworkInterfaces",
                PropertyType::List,
                "Network interfaces to associate with instance: port ids, or {NetworkInterfaceId, DeviceIndex}.",
            ),
            PropertySchema::new(
                "SubnetId",
                PropertyType::String,
                "Subnet ID to launch instance in (a port is made on it).",
            ),
            PropertySchema::new(
                "Tags",
                PropertyType::List,
                "Tags to attach to instance ({Key, Value}): the server's metadata.",
            )
            .update_allowed(),
            PropertySchema::new(
                "NovaSchedulerHints",
                PropertyType::List,
                "Scheduler hints to pass to Nova ({Key, Value}).",
            ),
            PropertySchema::new(
                "UserData",
                PropertyType::String,
                "User data to pass to instance.",
            ),
            PropertySchema::new(
                "Volumes",
                PropertyType::List,
                "Volumes to attach to instance.",
            )
            .default(json!([])),
            PropertySchema::new(
                "BlockDeviceMappings",
                PropertyType::List,
                "Block device mappings to attach to instance.",
            ),
        ];
        for name in NOT_IMPLEMENTED {
            properties.push(PropertySchema::new(
                name,
                PropertyType::Any,
                "Not implemented (as in Heat).",
            ));
        }
        AwsInstance {
            schema: ResourceTypeSchema {
                type_name: AWS_INSTANCE_TYPE,
                description: "An EC2 instance, run as a server.",
                properties,
                attributes: vec![
                    AttributeSchema {
                        name: "AvailabilityZone",
                        description: "The Availability Zone where the specified instance is launched.",
                    },
                    AttributeSchema {
                        name: "PrivateDnsName",
                        description: "Private DNS name of the specified instance.",
                    },
                    AttributeSchema {
                        name: "PublicDnsName",
                        description: "Public DNS name of the specified instance.",
                    },
                    AttributeSchema {
                        name: "PrivateIp",
                        description: "Private IP address of the specified instance.",
                    },
                    AttributeSchema {
                        name: "PublicIp",
                        description: "Public IP address of the specified instance.",
                    },
                ],
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
            server,
        }
    }
}

/// `[{Key, Value}]` as a map; a repeated key collects its values in a list
/// (Heat's scheduler hints), or keeps the last (`last_wins`, metadata).
fn key_values(
    properties: &Map<String, Value>,
    name: &str,
    last_wins: bool,
) -> Result<Map<String, Value>, ResourceFailure> {
    let mut map = Map::new();
    let Some(Value::Array(items)) = properties.get(name) else {
        return Ok(map);
    };
    for (index, item) in items.iter().enumerate() {
        let (Some(key), Some(value)) = (item.get("Key").and_then(Value::as_str), item.get("Value"))
        else {
            return Err(ResourceFailure::new(format!(
                "{name}[{index}]: must be {{Key, Value}}, got {item}"
            )));
        };
        let value = match value {
            Value::String(text) => Value::String(text.clone()),
            other => Value::String(other.to_string()),
        };
        match map.get_mut(key) {
            Some(Value::Array(values)) if !last_wins => values.push(value),
            Some(existing) if !last_wins => {
                *existing = Value::Array(vec![existing.clone(), value]);
            }
            _ => {
                map.insert(key.to_owned(), value);
            }
        }
    }
    Ok(map)
}

/// The `OS::Nova::Server` properties the AWS ones stand for.
fn server_properties(aws: &Map<String, Value>) -> Result<Map<String, Value>, ResourceFailure> {
    for name in NOT_IMPLEMENTED {
        if aws.get(name).is_some_and(|value| !value.is_null()) {
            return Err(ResourceFailure::new(format!(
                "Property {name} not implemented yet"
            )));
        }
    }
    for (name, instead) in NOT_YET {
        if aws
            .get(name)
            .is_some_and(|value| !value.is_null() && value != &json!([]))
        {
            return Err(ResourceFailure::new(format!(
                "{name}: not supported by Ember yet ({instead})"
            )));
        }
    }
    let list = |name: &str| match aws.get(name) {
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    };
    let mut server = Map::new();
    let mut put = |key: &str, value: Option<Value>| {
        if let Some(value) = value.filter(|value| !value.is_null()) {
            server.insert(key.to_owned(), value);
        }
    };
    put("image", aws.get("ImageId").cloned());
    put("flavor", aws.get("InstanceType").cloned());
    put("key_name", aws.get("KeyName").cloned());
    put("availability_zone", aws.get("AvailabilityZone").cloned());
    put("user_data", aws.get("UserData").cloned());
    let groups: Vec<Value> = list("SecurityGroups")
        .into_iter()
        .chain(list("SecurityGroupIds"))
        .collect();
    let interfaces = list("NetworkInterfaces");
    if !groups.is_empty() && !interfaces.is_empty() {
        return Err(ResourceFailure::new(
            "Properties SecurityGroups/SecurityGroupIds and NetworkInterfaces conflict: give the ports their security groups"
                .to_owned(),
        ));
    }
    if !groups.is_empty() {
        put("security_groups", Some(Value::Array(groups)));
    }
    if !interfaces.is_empty() {
        let mut ports = Vec::with_capacity(interfaces.len());
        for (index, interface) in interfaces.iter().enumerate() {
            let (port, device) = match interface {
                Value::String(port) => (port.clone(), index as i64),
                Value::Object(entry) => {
                    let port = entry
                        .get("NetworkInterfaceId")
                        .and_then(Value::as_str)
                        .ok_or_else(|| {
                            ResourceFailure::new(format!(
                                "NetworkInterfaces[{index}]: NetworkInterfaceId is required"
                            ))
                        })?;
                    let device = match entry.get("DeviceIndex") {
                        Some(Value::Number(number)) => number.as_i64().unwrap_or(index as i64),
                        Some(Value::String(text)) => text.parse().map_err(|_| {
                            ResourceFailure::new(format!(
                                "NetworkInterfaces[{index}].DeviceIndex: {text:?} is not a number"
                            ))
                        })?,
                        _ => index as i64,
                    };
                    (port.to_owned(), device)
                }
                other => {
                    return Err(ResourceFailure::new(format!(
                        "NetworkInterfaces[{index}]: a port id or {{NetworkInterfaceId, DeviceIndex}}, got {other}"
                    )));
                }
            };
            ports.push((device, port));
        }
        ports.sort_by_key(|(device, _)| *device);
        put(
            "networks",
            Some(Value::Array(
                ports
                    .into_iter()
                    .map(|(_, port)| json!({ "port": port }))
                    .collect(),
            )),
        );
    } else if let Some(subnet) = aws.get("SubnetId").filter(|subnet| !subnet.is_null()) {
        put("networks", Some(json!([{ "subnet": subnet }])));
    }
    put(
        "metadata",
        Some(Value::Object(key_values(aws, "Tags", true)?)),
    );
    let hints = key_values(aws, "NovaSchedulerHints", false)?;
    if !hints.is_empty() {
        put("scheduler_hints", Some(Value::Object(hints)));
    }
    Ok(server)
}

/// `request` with the server's properties in place of the AWS ones.
fn as_server(request: &ResourceRequest) -> Result<ResourceRequest, ResourceFailure> {
    let mut translated = request.clone();
    translated.properties = server_properties(&request.properties)?;
    translated.type_name = "OS::Nova::Server".to_owned();
    Ok(translated)
}

/// Heat's attributes of an EC2 instance, from the server's.
fn with_aws_attributes(mut outcome: ResourceOutcome, zone: Option<&Value>) -> ResourceOutcome {
    let first = outcome
        .attributes
        .get("first_address")
        .cloned()
        .filter(|address| address.as_str().is_some_and(|text| !text.is_empty()))
        .unwrap_or_else(|| json!("0.0.0.0"));
    for name in ["PrivateDnsName", "PublicDnsName", "PrivateIp", "PublicIp"] {
        outcome.attributes.insert(name.to_owned(), first.clone());
    }
    let zone = zone.cloned().or_else(|| {
        outcome
            .attributes
            .get("show")
            .and_then(|show| show.get("OS-EXT-AZ:availability_zone"))
            .cloned()
    });
    outcome
        .attributes
        .insert("AvailabilityZone".to_owned(), zone.unwrap_or(Value::Null));
    outcome
}

#[async_trait]
impl ResourceType for AwsInstance {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let outcome = self.server.create(&as_server(request)?).await?;
        Ok(with_aws_attributes(
            outcome,
            request.properties.get("AvailabilityZone"),
        ))
    }

    async fn resume_create(
        &self,
        request: &ResourceRequest,
        in_flight: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let outcome = self
            .server
            .resume_create(&as_server(request)?, in_flight)
            .await?;
        Ok(with_aws_attributes(
            outcome,
            request.properties.get("AvailabilityZone"),
        ))
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let outcome = self.server.update(&as_server(request)?, current).await?;
        Ok(with_aws_attributes(
            outcome,
            request.properties.get("AvailabilityZone"),
        ))
    }

    /// A new instance type replaces the instance, as every change but
    /// `Tags` does (see `OS::Nova::Server`).
    fn needs_replacement(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> bool {
        self.schema
            .properties
            .iter()
            .filter(|property| property.name != "Tags")
            .any(|property| old.get(property.name) != new.get(property.name))
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        self.server.delete(current).await
    }

    async fn resume_delete(&self, in_flight: &Resource) -> Result<(), ResourceFailure> {
        self.server.resume_delete(in_flight).await
    }

    async fn prepare_for_replace(&self, current: &Resource) -> Result<(), ResourceFailure> {
        self.server.prepare_for_replace(current).await
    }

    fn take_over(&self, step: StackAction) -> Result<(), String> {
        self.server.take_over(step)
    }

    async fn check(&self, current: &Resource) -> Result<(), ResourceFailure> {
        self.server.check(current).await
    }

    async fn adopt(
        &self,
        request: &ResourceRequest,
        adopted: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let outcome = self.server.adopt(request, adopted).await?;
        Ok(with_aws_attributes(outcome, None))
    }

    async fn suspend(&self, current: &Resource) -> Result<(), ResourceFailure> {
        self.server.suspend(current).await
    }

    async fn resume(&self, current: &Resource) -> Result<(), ResourceFailure> {
        self.server.resume(current).await
    }

    fn has_lock_handler(&self) -> bool {
        true
    }

    async fn lock(
        &self,
        current: &Resource,
        request: &LockRequest,
    ) -> Result<Value, ResourceFailure> {
        self.server.lock(current, request).await
    }

    async fn unlock(
        &self,
        current: &Resource,
        request: &LockRequest,
    ) -> Result<Value, ResourceFailure> {
        self.server.unlock(current, request).await
    }

    async fn snapshot_state(&self, current: &Resource) -> Result<Option<Value>, ResourceFailure> {
        self.server.snapshot_state(current).await
    }

    async fn restore_state(
        &self,
        current: &Resource,
        recorded: &Value,
    ) -> Result<(), ResourceFailure> {
        self.server.restore_state(current, recorded).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn properties(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("{other}"),
        }
    }

    #[test]
    fn aws_properties_become_the_servers_as_heat_translates_them() {
        let server = server_properties(&properties(json!({
            "ImageId": "cirros", "InstanceType": "m1.small", "KeyName": "ops",
            "SecurityGroups": ["web"], "SecurityGroupIds": ["sg-1"],
            "SubnetId": "subnet-1",
            "Tags": [{"Key": "role", "Value": "web"}, {"Key": "tier", "Value": 2}],
            "NovaSchedulerHints": [{"Key": "group", "Value": "g1"}, {"Key": "group", "Value": "g2"}],
            "UserData": "#!/bin/sh", "Volumes": []
        })))
        .expect("translated");
        assert_eq!(
            Value::Object(server),
            json!({
                "image": "cirros", "flavor": "m1.small", "key_name": "ops",
                "user_data": "#!/bin/sh", "security_groups": ["web", "sg-1"],
                "networks": [{"subnet": "subnet-1"}],
                "metadata": {"role": "web", "tier": "2"},
                "scheduler_hints": {"group": ["g1", "g2"]}
            })
        );
    }

    #[test]
    fn network_interfaces_go_in_device_order_and_win_over_the_subnet() {
        let server = server_properties(&properties(json!({
            "ImageId": "cirros", "InstanceType": "m1.small", "SubnetId": "ignored",
            "NetworkInterfaces": [
                {"NetworkInterfaceId": "p2", "DeviceIndex": "1"},
                {"NetworkInterfaceId": "p1", "DeviceIndex": 0}
            ]
        })))
        .expect("translated");
        assert_eq!(server["networks"], json!([{"port": "p1"}, {"port": "p2"}]));
    }

    #[test]
    fn what_heat_never_did_and_what_ember_does_not_yet_are_refused_by_name() {
        let refused = server_properties(&properties(json!({
            "ImageId": "cirros", "InstanceType": "m1.small", "Tenancy": "dedicated"
        })))
        .expect_err("not implemented");
        assert_eq!(refused.to_string(), "Property Tenancy not implemented yet");
        let refused = server_properties(&properties(json!({
            "ImageId": "cirros", "InstanceType": "m1.small",
            "Volumes": [{"Device": "/dev/vdb", "VolumeId": "v1"}]
        })))
        .expect_err("not yet");
        assert!(
            refused
                .to_string()
                .starts_with("Volumes: not supported by Ember yet"),
            "{}",
            refused.to_string()
        );
        let conflict = server_properties(&properties(json!({
            "ImageId": "cirros", "InstanceType": "m1.small",
            "SecurityGroups": ["web"], "NetworkInterfaces": ["p1"]
        })))
        .expect_err("conflict");
        assert!(
            conflict.to_string().contains("conflict"),
            "{}",
            conflict.to_string()
        );
    }

    #[test]
    fn its_ip_attributes_are_the_servers_first_address() {
        let outcome = ResourceOutcome {
            physical_id: "s1".to_owned(),
            attributes: properties(json!({"first_address": "10.0.0.5"})),
            data: Value::Null,
        };
        let aws = with_aws_attributes(outcome, Some(&json!("nova")));
        for name in ["PrivateDnsName", "PublicDnsName", "PrivateIp", "PublicIp"] {
            assert_eq!(aws.attributes[name], "10.0.0.5");
        }
        assert_eq!(aws.attributes["AvailabilityZone"], "nova");
        let none = with_aws_attributes(ResourceOutcome::default(), None);
        assert_eq!(none.attributes["PrivateIp"], "0.0.0.0");
    }
}
