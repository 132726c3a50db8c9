//! `OS::Neutron::FloatingIP`: an address on an external network, and the
//! port it forwards to (`/work/heat-schemas.md` §11). Neutron answers the
//! create with the address allocated, so nothing is waited for (a floating
//! IP stays `DOWN` without an L3 agent, which Heat never waits out).
//!
//! The port is changed in place (`port_id`, `fixed_ip_address`); as in
//! Heat, `dns_name` and `dns_domain` changes are accepted in place but not
//! sent — Neutron sets them only when it allocates the address.

use async_trait::async_trait;
use ember_openstack::neutron::{Kind, Neutron};
use serde_json::{Map, Value, json};

use super::{
    Change, Settling, TaggedObject, copy_given, merge_given_value_specs, present, resolve_property,
};
use crate::resources::openstack::text;
use crate::resources::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceRequest,
    ResourceTypeSchema,
};

pub struct FloatingIp;

#[async_trait]
impl TaggedObject for FloatingIp {
    const KIND: Kind = Kind::FloatingIp;
    const CREATE_SETTLING: Settling = Settling::AsAnswered;
    /// A floating IP has no name.
    const NAMED_BY_DEFAULT: bool = false;

    fn schema(&self) -> ResourceTypeSchema {
        let attribute = |name, description| AttributeSchema { name, description };
        ResourceTypeSchema {
            type_name: "OS::Neutron::FloatingIP",
            description: "A Neutron floating IP.",
            properties: vec![
                PropertySchema::new(
                    "floating_network",
                    PropertyType::String,
                    "Network to allocate floating IP from.",
                )
                .required()
                .aliases(&["floating_network_id"]),
                PropertySchema::new(
                    "floating_subnet",
                    PropertyType::String,
                    "Subnet to allocate floating IP from.",
                ),
                PropertySchema::new(
                    "value_specs",
                    PropertyType::Map,
                    "Extra parameters to include in the \"floatingip\" object in the creation request. Parameters are often specific to installed hardware or extensions.",
                )
                .default(json!({})),
                PropertySchema::new(
                    "port_id",
                    PropertyType::String,
                    "ID of an existing port with at least one IP address to associate with this floating IP.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "fixed_ip_address",
                    PropertyType::String,
                    "IP address to use if the port has multiple addresses.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "floating_ip_address",
                    PropertyType::String,
                    "IP address of the floating IP. NOTE: The default policy setting in Neutron restricts usage of this property to administrative users only.",
                ),
                PropertySchema::new(
                    "dns_name",
                    PropertyType::String,
                    "DNS name associated with floating ip.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "dns_domain",
                    PropertyType::String,
                    "DNS domain associated with floating ip.",
                )
                .update_allowed(),
            ],
            attributes: vec![
                attribute("router_id", "ID of the router used as gateway, set when associated with a port."),
                attribute("tenant_id", "The tenant owning this floating IP."),
                attribute("floating_network_id", "ID of the network in which this IP is allocated."),
                attribute("fixed_ip_address", "IP address of the associated port, if specified."),
                attribute("floating_ip_address", "The allocated address of this IP."),
                attribute("port_id", "ID of the port associated with this IP."),
            ],
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
        let properties = &request.properties;
        check_fixed_ip(properties)?;
        let mut body = Map::new();
        let network =
            resolve_property(neutron, properties, "floating_network", Kind::Network).await?;
        body.insert("floating_network_id".to_owned(), json!(network));
        if let Some(subnet) =
            resolve_property(neutron, properties, "floating_subnet", Kind::Subnet).await?
        {
            body.insert("subnet_id".to_owned(), json!(subnet));
        }
        if let Some(port) = resolve_property(neutron, properties, "port_id", Kind::Port).await? {
            body.insert("port_id".to_owned(), json!(port));
        }
        copy_given(
            &mut body,
            properties,
            &[
                "fixed_ip_address",
                "floating_ip_address",
                "dns_name",
                "dns_domain",
            ],
        );
        merge_given_value_specs(&mut body, properties);
        Ok(body)
    }

    /// The port and address as the template now says (none: the floating
    /// IP is let go of its port).
    async fn update_body(
        &self,
        neutron: &Neutron,
        change: &Change<'_>,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        let after = change.after();
        let mut body = Map::new();
        if change.changed("port_id").is_none() && change.changed("fixed_ip_address").is_none() {
            return Ok(body);
        }
        check_fixed_ip(after)?;
        let port = resolve_property(neutron, after, "port_id", Kind::Port).await?;
        body.insert("port_id".to_owned(), json!(port));
        body.insert(
            "fixed_ip_address".to_owned(),
            json!(text(after, "fixed_ip_address")),
        );
        Ok(body)
    }
}

fn check_fixed_ip(properties: &Map<String, Value>) -> Result<(), ResourceFailure> {
    if present(properties, "fixed_ip_address").is_some() && present(properties, "port_id").is_none()
    {
        return Err(ResourceFailure::new(
            "fixed_ip_address cannot be specified without port_id.".to_owned(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::openstack::neutron::fields;

    #[test]
    fn a_fixed_address_needs_a_port() {
        assert_eq!(
            check_fixed_ip(&fields(json!({"fixed_ip_address": "10.0.0.5"})))
                .expect_err("refused")
                .to_string(),
            "fixed_ip_address cannot be specified without port_id."
        );
        assert!(
            check_fixed_ip(&fields(
                json!({"fixed_ip_address": "10.0.0.5", "port_id": "p"})
            ))
            .is_ok()
        );
    }
}
