//! `AWS::EC2::EIP` and `AWS::EC2::EIPAssociation` (`/work/heat-schemas.md`
//! §18–19): an elastic IP is a Neutron floating IP on the cloud's one
//! external network; an instance's "network interface" is its first
//! Neutron port (the port whose `device_id` is the server's id).
//!
//! An EIP given an `InstanceId` is made already forwarded to the
//! instance's port (one create instead of Heat's create then associate:
//! the floating IP is never found half done). Its `get_resource` is its
//! address and its `AllocationId` the floating IP's id, as Heat's.
//!
//! An association is found again by what it does — associating a
//! floating IP with the port it is on already changes nothing — so a
//! create that runs again does it again.

use async_trait::async_trait;
use ember_openstack::neutron::{Kind, Neutron, id_of};
use serde_json::{Map, Value, json};

use super::{Change, Settling, TaggedObject, fields, physical_name, present};
use crate::domain::{Resource, StackAction};
use crate::resources::openstack::{Cloud, failure, physical_id, text};
use crate::resources::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceOutcome,
    ResourceRequest, ResourceType, ResourceTypeSchema,
};

pub struct ElasticIp;

#[async_trait]
impl TaggedObject for ElasticIp {
    fn schema(&self) -> ResourceTypeSchema {
        ResourceTypeSchema {
            type_name: "AWS::EC2::EIP",
            description: "An elastic IP (a Neutron floating IP on the external network).",
            properties: vec![
                PropertySchema::new(
                    "Domain",
                    PropertyType::String,
                    "Set to \"vpc\" to have IP address allocation associated to your VPC. (Deprecated: no effect.)",
                )
                .allowed_values(vec![json!("vpc")]),
                PropertySchema::new(
                    "InstanceId",
                    PropertyType::String,
                    "Instance ID to associate with EIP.",
                )
                .update_allowed(),
            ],
            attributes: vec![AttributeSchema {
                name: "AllocationId",
                description: "ID that AWS assigns to represent the allocation of the address for use with Amazon VPC. Returned only for VPC elastic IP addresses.",
            }],
            accepts_any_properties: false,
            accepts_any_attributes: false,
        }
    }

    fn kind(&self) -> Kind {
        Kind::FloatingIp
    }

    fn create_settling(&self) -> Settling {
        Settling::AsAnswered
    }

    /// A floating IP has no name.
    fn named_by_default(&self) -> bool {
        false
    }

    async fn create_body(
        &self,
        neutron: &Neutron,
        request: &ResourceRequest,
        _name: &str,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        let mut body = Map::new();
        body.insert(
            "floating_network_id".to_owned(),
            json!(external_network(neutron).await?),
        );
        if let Some(instance) = text(&request.properties, "InstanceId") {
            let (port, address) = instance_interface(neutron, &instance).await?;
            body.insert("port_id".to_owned(), json!(port));
            body.insert("fixed_ip_address".to_owned(), json!(address));
        }
        Ok(body)
    }

    /// Forwards to the new instance's port, or (`InstanceId` removed) to
    /// none.
    async fn update_body(
        &self,
        neutron: &Neutron,
        change: &Change<'_>,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        let mut body = Map::new();
        if change.changed("InstanceId").is_none() {
            return Ok(body);
        }
        let (port, address) = match text(change.after(), "InstanceId") {
            Some(instance) => {
                let (port, address) = instance_interface(neutron, &instance).await?;
                (json!(port), json!(address))
            }
            None => (Value::Null, Value::Null),
        };
        body.insert("port_id".to_owned(), port);
        body.insert("fixed_ip_address".to_owned(), address);
        Ok(body)
    }

    /// The floating IP's fields, and its id as `AllocationId`.
    async fn attributes(
        &self,
        _neutron: &Neutron,
        object: Value,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        let mut attributes = fields(object);
        let id = attributes.get("id").cloned().unwrap_or(Value::Null);
        attributes.insert("AllocationId".to_owned(), id);
        Ok(attributes)
    }

    /// The address (Heat's `get_reference_id`), else the resource's name.
    fn reference(&self, current: &Resource) -> Value {
        match current
            .attributes
            .get("floating_ip_address")
            .and_then(Value::as_str)
        {
            Some(address) => json!(address),
            None => json!(current.name),
        }
    }
}

/// The cloud's one external network (Heat's
/// `InternetGateway.get_external_network_id`).
async fn external_network(neutron: &Neutron) -> Result<String, ResourceFailure> {
    let external = neutron
        .list(Kind::Network, &[("router:external", "true")])
        .await
        .map_err(failure)?;
    match external.as_slice() {
        [one] => id_of(one).map_err(failure),
        others => Err(ResourceFailure(format!(
            "Expected 1 external network, found {}",
            others.len()
        ))),
    }
}

/// The first port of an instance (its `device_id`), if it has one.
async fn first_port(neutron: &Neutron, instance: &str) -> Result<Option<Value>, ResourceFailure> {
    let ports = neutron
        .list(Kind::Port, &[("device_id", instance)])
        .await
        .map_err(failure)?;
    if ports.len() > 1 {
        tracing::warn!(%instance, "several network interfaces found for the server: using the first");
    }
    Ok(ports.into_iter().next())
}

/// The instance's first port and that port's first IPv4 address (Heat's
/// `associate_floatingip`).
async fn instance_interface(
    neutron: &Neutron,
    instance: &str,
) -> Result<(String, String), ResourceFailure> {
    let port = first_port(neutron, instance).await?.ok_or_else(|| {
        ResourceFailure(format!("No network interface found for server {instance}."))
    })?;
    let address = first_ipv4(&port).ok_or_else(|| {
        ResourceFailure(format!(
            "the network interface {} of server {instance} has no IPv4 address",
            port["id"]
        ))
    })?;
    Ok((id_of(&port).map_err(failure)?, address))
}

fn first_ipv4(port: &Value) -> Option<String> {
    port["fixed_ips"]
        .as_array()?
        .iter()
        .filter_map(|fixed_ip| fixed_ip["ip_address"].as_str())
        .find(|address| address.parse::<std::net::Ipv4Addr>().is_ok())
        .map(str::to_owned)
}

/// `AWS::EC2::EIPAssociation`.
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
            schema: ResourceTypeSchema {
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
            },
        }
    }

    async fn neutron(&self, stack_id: uuid::Uuid) -> Result<Neutron, ResourceFailure> {
        Ok(Neutron::new(&self.cloud.session(stack_id).await?))
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
                return Err(ResourceFailure(format!(
                    "Multiple routers found with name {name}"
                )));
            }
        };
        let floating_ip = neutron
            .get(Kind::FloatingIp, allocation)
            .await
            .map_err(failure)?
            .ok_or_else(|| ResourceFailure(format!("the floating IP {allocation} is gone")))?;
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
            return Err(ResourceFailure(
                "Either 'EIP' or 'AllocationId' must be provided.".to_owned(),
            ));
        }
    };
    if matches!(chosen, Address::Ip(_)) && !instance {
        return Err(ResourceFailure(
            "Must specify 'InstanceId' if you specify 'EIP'.".to_owned(),
        ));
    }
    if !instance && !interface {
        return Err(ResourceFailure(
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
        None => Err(ResourceFailure(format!(
            "No floatingip matching {{'ip_address': '{address}'}}."
        ))),
    }
}

#[async_trait]
impl ResourceType for ElasticIpAssociation {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let neutron = self.neutron(request.stack_id).await?;
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
        let neutron = self.neutron(request.stack_id).await?;
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
        let neutron = self.neutron(in_flight.stack_id).await?;
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
        let changed = |name: &str| present(old, name) != present(new, name);
        let changed_to_something = |name: &str| changed(name) && present(new, name).is_some();
        (changed("EIP") || changed("AllocationId"))
            && (changed_to_something("InstanceId") || changed_to_something("NetworkInterfaceId"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_association_names_one_floating_ip_and_a_target() {
        let message = |value| address_of(&fields(value)).expect_err("invalid").0;
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
    fn the_first_ipv4_address_is_associated() {
        let port = json!({"fixed_ips": [
            {"subnet_id": "s6", "ip_address": "fd00::5"},
            {"subnet_id": "s4", "ip_address": "10.0.0.7"},
        ]});
        assert_eq!(first_ipv4(&port).as_deref(), Some("10.0.0.7"));
        assert_eq!(first_ipv4(&json!({"fixed_ips": []})), None);
    }
}
