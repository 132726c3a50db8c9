//! `AWS::EC2::EIP` (`/work/heat-schemas.md` §18): an elastic IP is a
//! Neutron floating IP on the cloud's one external network; an instance's
//! "network interface" is its first Neutron port (the port whose
//! `device_id` is the server's id) — also how `AWS::EC2::EIPAssociation`
//! finds it.
//!
//! An EIP given an `InstanceId` is made already forwarded to the
//! instance's port (one create instead of Heat's create then associate:
//! the floating IP is never found half done). Its `get_resource` is its
//! address and its `AllocationId` the floating IP's id, as Heat's.

use async_trait::async_trait;
use ember_openstack::neutron::{Kind, Neutron, id_of};
use serde_json::{Map, Value, json};

use super::{Change, Settling, TaggedObject, fields};
use crate::domain::Resource;
use crate::resources::openstack::{failure, text};
use crate::resources::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceRequest,
    ResourceTypeSchema,
};

pub struct ElasticIp;

#[async_trait]
impl TaggedObject for ElasticIp {
    const KIND: Kind = Kind::FloatingIp;
    const CREATE_SETTLING: Settling = Settling::AsAnswered;
    /// A floating IP has no name.
    const NAMED_BY_DEFAULT: bool = false;

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
        others => Err(ResourceFailure::new(format!(
            "Expected 1 external network, found {}",
            others.len()
        ))),
    }
}

/// The first port of an instance (its `device_id`), if it has one.
pub async fn first_port(
    neutron: &Neutron,
    instance: &str,
) -> Result<Option<Value>, ResourceFailure> {
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
pub async fn instance_interface(
    neutron: &Neutron,
    instance: &str,
) -> Result<(String, String), ResourceFailure> {
    let port = first_port(neutron, instance).await?.ok_or_else(|| {
        ResourceFailure::new(format!("No network interface found for server {instance}."))
    })?;
    let address = first_ipv4(&port).ok_or_else(|| {
        ResourceFailure::new(format!(
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

#[cfg(test)]
mod tests {
    use super::*;

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
