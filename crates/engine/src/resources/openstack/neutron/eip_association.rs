//! `AWS::EC2::EIPAssociation` (`/work/heat-schemas.md` §19): an elastic
//! IP — named by its address (`EIP`) or its floating IP id
//! (`AllocationId`) — forwarded to an instance's first port or to a given
//! port (`NetworkInterfaceId`). Its id is the address or the allocation;
//! its `get_resource` a physical name, as Heat's.
//!
//! An association is found again by what it does — associating a
//! floating IP with the port it is on already changes nothing — so a
//! create that runs again does it again.

use async_trait::async_trait;
use ember_openstack::neutron::{Kind, Neutron, id_of};
use serde_json::{Map, Value, json};

use super::eip::{first_port, instance_interface};
use super::{fields, neutron_for, physical_name, present};
use crate::domain::{Resource, StackAction};
use crate::resources::openstack::{Cloud, failure, physical_id, text};
use crate::resources::{
    PropertySchema, PropertyType, ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType,
    ResourceTypeSchema,
};

pub struct ElasticIpAssociation {
    cloud: Cloud,
    schema: ResourceTypeSchema,
}

/// What an association associates.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Address {
    /// A floating IP by its address (`EIP`).
    Ip(String),
    /// A floating IP by its id (`AllocationId`).
    Allocation(String),
}

impl ElasticIpAssociation {
    pub fn new(cloud: &Cloud) -> ElasticIpAssociation {
        ElasticIpAssociation {
            cloud: cloud.clone(),
            schema: schema(),
        }
    }

    /// Associates what the properties say; the association's id (the
    /// address or the allocation), empty when there is no port to
    /// associate with (Heat skips then), and the floating IP.
    async fn associate(
        &self,
        neutron: &Neutron,
        properties: &Map<String, Value>,
    ) -> Result<(String, Value), ResourceFailure> {
        let instance = text(properties, "InstanceId");
        match address_of(properties)? {
            Address::Ip(address) => {
                let instance = instance.unwrap_or_default();
                let floating_ip = floating_ip_at(neutron, &address).await?;
                let (port, fixed_address) = instance_interface(neutron, &instance).await?;
                let mut body = Map::new();
                body.insert("port_id".to_owned(), json!(port));
                body.insert("fixed_ip_address".to_owned(), json!(fixed_address));
                let associated = neutron
                    .update(Kind::FloatingIp, &floating_ip, body)
                    .await
                    .map_err(failure)?;
                Ok((address, associated))
            }
            Address::Allocation(allocation) => {
                let port = match text(properties, "NetworkInterfaceId") {
                    Some(interface) => {
                        neutron.get(Kind::Port, &interface).await.map_err(failure)?
                    }
                    None => match &instance {
                        Some(instance) => first_port(neutron, instance).await?,
                        None => None,
                    },
                };
                let Some(port) = port else {
                    tracing::warn!(%allocation, "no port to associate the elastic IP with: skipped");
                    return Ok((String::new(), Value::Null));
                };
                self.add_vpc_gateway(neutron, &allocation, &port).await?;
                let mut body = Map::new();
                body.insert("port_id".to_owned(), port["id"].clone());
                let associated = neutron
                    .update(Kind::FloatingIp, &allocation, body)
                    .await
                    .map_err(failure)?;
                Ok((allocation, associated))
            }
        }
    }

    /// Heat's VPC emulation: a router named like the port's network gets
    /// the floating IP's network as its gateway.
    async fn add_vpc_gateway(
        &self,
        neutron: &Neutron,
        allocation: &str,
        port: &Value,
    ) -> Result<(), ResourceFailure> {
        let Some(network_id) = port["network_id"].as_str() else {
            return Ok(());
        };
        let Some(network) = neutron
            .get(Kind::Network, network_id)
            .await
            .map_err(failure)?
        else {
            return Ok(());
        };
        let Some(name) = network["name"].as_str().filter(|name| !name.is_empty()) else {
            return Ok(());
        };
        let routers = neutron
            .list(Kind::Router, &[("name", name)])
            .await
            .map_err(failure)?;
        let router = match routers.as_slice() {
            [] => return Ok(()),
            [one] => id_of(one).map_err(failure)?,
            _ => {
                return Err(ResourceFailure::new(format!(
                    "Multiple routers found with name {name}"
                )));
            }
        };
        let floating_ip = neutron
            .get(Kind::FloatingIp, allocation)
            .await
            .map_err(failure)?
            .ok_or_else(|| ResourceFailure::new(format!("the floating IP {allocation} is gone")))?;
        let mut body = Map::new();
        body.insert(
            "external_gateway_info".to_owned(),
            json!({"network_id": floating_ip["floating_network_id"]}),
        );
        neutron
            .update(Kind::Router, &router, body)
            .await
            .map_err(failure)?;
        Ok(())
    }

    /// Lets go of what the properties associate (gone or not found is let
    /// go of).
    async fn dissociate(
        &self,
        neutron: &Neutron,
        properties: &Map<String, Value>,
    ) -> Result<(), ResourceFailure> {
        let (floating_ip, body) = match address_of(properties)? {
            Address::Ip(address) => {
                let floating_ip = match floating_ip_at(neutron, &address).await {
                    Ok(floating_ip) => floating_ip,
                    Err(_) => return Ok(()),
                };
                (
                    floating_ip,
                    json!({"port_id": null, "fixed_ip_address": null}),
                )
            }
            Address::Allocation(allocation) => (allocation, json!({"port_id": null})),
        };
        match neutron
            .update(Kind::FloatingIp, &floating_ip, fields(body))
            .await
        {
            Ok(_) => Ok(()),
            Err(error) if error.is_not_found() => Ok(()),
            Err(error) => Err(failure(error)),
        }
    }

    fn outcome(&self, request: &ResourceRequest, id: String, associated: Value) -> ResourceOutcome {
        ResourceOutcome {
            physical_id: id,
            attributes: fields(associated),
            data: json!({ "physical_name": physical_name(request, Kind::FloatingIp) }),
        }
    }
}

/// Whether changing `old` to `new` makes a new association: a new EIP or
/// allocation together with a new instance or interface.
fn replaced_by(old: &Map<String, Value>, new: &Map<String, Value>) -> bool {
    let changed = |name: &str| present(old, name) != present(new, name);
    let changed_to_something = |name: &str| changed(name) && present(new, name).is_some();
    (changed("EIP") || changed("AllocationId"))
        && (changed_to_something("InstanceId") || changed_to_something("NetworkInterfaceId"))
}

/// The floating IP an association names, checked as Heat's `validate`
/// checks it.
fn address_of(properties: &Map<String, Value>) -> Result<Address, ResourceFailure> {
    let address = text(properties, "EIP").filter(|address| !address.is_empty());
    let allocation = text(properties, "AllocationId").filter(|allocation| !allocation.is_empty());
    let instance = present(properties, "InstanceId").is_some();
    let interface = present(properties, "NetworkInterfaceId").is_some();
    let chosen = match (address, allocation) {
        (Some(address), None) => Address::Ip(address),
        (None, Some(allocation)) => Address::Allocation(allocation),
        _ => {
            return Err(ResourceFailure::new(
                "Either 'EIP' or 'AllocationId' must be provided.".to_owned(),
            ));
        }
    };
    if matches!(chosen, Address::Ip(_)) && !instance {
        return Err(ResourceFailure::new(
            "Must specify 'InstanceId' if you specify 'EIP'.".to_owned(),
        ));
    }
    if !instance && !interface {
        return Err(ResourceFailure::new(
            "At least one of the following properties must be specified: InstanceId, NetworkInterfaceId".to_owned(),
        ));
    }
    Ok(chosen)
}

/// The id of the floating IP with `address`.
async fn floating_ip_at(neutron: &Neutron, address: &str) -> Result<String, ResourceFailure> {
    let found = neutron
        .list(Kind::FloatingIp, &[("floating_ip_address", address)])
        .await
        .map_err(failure)?;
    match found.first() {
        Some(floating_ip) => id_of(floating_ip).map_err(failure),
        None => Err(ResourceFailure::new(format!(
            "No floatingip matching {{'ip_address': '{address}'}}."
        ))),
    }
}

/// The type's schema (shared with the simulated backend's twin).
pub fn schema() -> ResourceTypeSchema {
    ResourceTypeSchema {
        type_name: "AWS::EC2::EIPAssociation",
        description: "An elastic IP forwarded to an instance or a network interface.",
        properties: vec![
            PropertySchema::new(
                "InstanceId",
                PropertyType::String,
                "Instance ID to associate with EIP specified by EIP property.",
            )
            .update_allowed(),
            PropertySchema::new(
                "EIP",
                PropertyType::String,
                "EIP address to associate with instance.",
            )
            .update_allowed(),
            PropertySchema::new(
                "AllocationId",
                PropertyType::String,
                "Allocation ID for VPC EIP address.",
            )
            .update_allowed(),
            PropertySchema::new(
                "NetworkInterfaceId",
                PropertyType::String,
                "Network interface ID to associate with EIP.",
            )
            .update_allowed(),
        ],
        // Only `show` (every type's), as Heat.
        attributes: Vec::new(),
        accepts_any_properties: false,
        accepts_any_attributes: false,
    }
}

#[async_trait]
impl ResourceType for ElasticIpAssociation {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let neutron = neutron_for(&self.cloud, request.stack_id).await?;
        let (id, associated) = self.associate(&neutron, &request.properties).await?;
        Ok(self.outcome(request, id, associated))
    }

    /// A new EIP or allocation lets the old one go first; a new instance
    /// or interface alone is associated without letting the old one go
    /// (Heat's `handle_update`).
    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let neutron = neutron_for(&self.cloud, request.stack_id).await?;
        let before = current.properties.as_object().cloned().unwrap_or_default();
        if address_of(&before).ok() != address_of(&request.properties).ok() {
            self.dissociate(&neutron, &before).await?;
        }
        let (id, associated) = self.associate(&neutron, &request.properties).await?;
        Ok(self.outcome(request, id, associated))
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        if physical_id(current).is_none() {
            // Nothing recorded: nothing was associated.
            return Ok(());
        }
        self.resume_delete(current).await
    }

    /// A create in flight when its engine went away may have associated
    /// without recording it: let go by the properties.
    async fn resume_delete(&self, in_flight: &Resource) -> Result<(), ResourceFailure> {
        let neutron = neutron_for(&self.cloud, in_flight.stack_id).await?;
        let properties = in_flight
            .properties
            .as_object()
            .cloned()
            .unwrap_or_default();
        self.dissociate(&neutron, &properties).await
    }

    /// Every step is taken over: associating again changes nothing, and
    /// letting go again finds it let go.
    fn take_over(&self, _step: StackAction) -> Result<(), String> {
        Ok(())
    }

    /// Heat's `physical_resource_name_or_FnGetRefId`.
    fn reference(&self, current: &Resource) -> Value {
        match current.data.get("physical_name").and_then(Value::as_str) {
            Some(name) => json!(name),
            None => json!(
                current
                    .physical_id
                    .clone()
                    .unwrap_or_else(|| current.name.clone())
            ),
        }
    }

    /// Heat's `needs_replace_with_prop_diff`: a new EIP or allocation
    /// together with a new instance or interface is a new association.
    fn needs_replacement(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> bool {
        replaced_by(old, new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_association_names_one_floating_ip_and_a_target() {
        let message = |value| address_of(&fields(value)).expect_err("invalid").to_string();
        assert_eq!(
            message(json!({"EIP": "1.2.3.4", "AllocationId": "a", "InstanceId": "i"})),
            "Either 'EIP' or 'AllocationId' must be provided."
        );
        assert_eq!(
            message(json!({"InstanceId": "i"})),
            "Either 'EIP' or 'AllocationId' must be provided."
        );
        assert_eq!(
            message(json!({"EIP": "1.2.3.4", "NetworkInterfaceId": "p"})),
            "Must specify 'InstanceId' if you specify 'EIP'."
        );
        assert_eq!(
            message(json!({"AllocationId": "a"})),
            "At least one of the following properties must be specified: InstanceId, NetworkInterfaceId"
        );
        assert_eq!(
            address_of(&fields(
                json!({"AllocationId": "a", "NetworkInterfaceId": "p"})
            ))
            .expect("valid"),
            Address::Allocation("a".to_owned())
        );
    }

    #[test]
    fn a_new_address_with_a_new_target_is_a_new_association() {
        let old = fields(json!({"AllocationId": "a", "InstanceId": "i"}));
        let moved = fields(json!({"AllocationId": "b", "InstanceId": "j"}));
        assert!(replaced_by(&old, &moved));
        let readdressed = fields(json!({"AllocationId": "b", "InstanceId": "i"}));
        assert!(
            !replaced_by(&old, &readdressed),
            "a new address alone moves in place"
        );
        let retargeted = fields(json!({"AllocationId": "a", "InstanceId": "j"}));
        assert!(
            !replaced_by(&old, &retargeted),
            "a new target alone moves in place"
        );
        let untargeted = fields(json!({"AllocationId": "b", "NetworkInterfaceId": "p"}));
        assert!(
            replaced_by(&old, &untargeted),
            "a new address and a new interface"
        );
    }
}
