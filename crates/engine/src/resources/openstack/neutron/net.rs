//! `OS::Neutron::Net`: a network (`/work/heat-schemas.md` §4). A create
//! and an update wait until Neutron shows it built; the DHCP agents named
//! in `dhcp_agent_ids` (an admin's choice) become exactly the ones hosting
//! it.

use async_trait::async_trait;
use ember_openstack::neutron::{AgentKind, Kind, Neutron};
use serde_json::{Map, Value, json};

use super::{
    Change, Settling, TaggedObject, copy_given, copy_name_and_given, fields,
    merge_given_value_specs, present, resolve_property, strings,
};
use crate::resources::openstack::failure;
use crate::resources::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceRequest,
    ResourceTypeSchema,
};

pub struct Net;

/// Fields sent as the template gives them, on create and on update.
const PLAIN_FIELDS: [&str; 4] = [
    "admin_state_up",
    "shared",
    "port_security_enabled",
    "dns_domain",
];

#[async_trait]
impl TaggedObject for Net {
    const KIND: Kind = Kind::Network;
    const CREATE_SETTLING: Settling = Settling::UntilBuilt;
    const UPDATE_SETTLING: Settling = Settling::UntilBuilt;

    fn schema(&self) -> ResourceTypeSchema {
        ResourceTypeSchema {
            type_name: "OS::Neutron::Net",
            description: "A Neutron network.",
            properties: vec![
                PropertySchema::new(
                    "name",
                    PropertyType::String,
                    "A string specifying a symbolic name for the network, which is not required to be unique.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "value_specs",
                    PropertyType::Map,
                    "Extra parameters to include in the request. Parameters are often specific to installed hardware or extensions.",
                )
                .default(json!({}))
                .update_allowed(),
                PropertySchema::new(
                    "admin_state_up",
                    PropertyType::Boolean,
                    "A boolean value specifying the administrative status of the network.",
                )
                .default(json!(true))
                .update_allowed(),
                PropertySchema::new(
                    "tenant_id",
                    PropertyType::String,
                    "The ID of the tenant which will own the network. Only administrative users can set the tenant identifier; this cannot be changed using authorization policies.",
                ),
                PropertySchema::new(
                    "shared",
                    PropertyType::Boolean,
                    "Whether this network should be shared across all tenants. Note that the default policy setting restricts usage of this attribute to administrative users only.",
                )
                .default(json!(false))
                .update_allowed(),
                PropertySchema::new(
                    "dhcp_agent_ids",
                    PropertyType::List,
                    "The IDs of the DHCP agent to schedule the network. Note that the default policy setting in Neutron restricts usage of this property to administrative users only.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "port_security_enabled",
                    PropertyType::Boolean,
                    "Flag to enable/disable port security on the network. It provides the default value for the attribute of the ports created on this network.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "qos_policy",
                    PropertyType::String,
                    "The name or ID of QoS policy to attach to this network.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "dns_domain",
                    PropertyType::String,
                    "DNS domain associated with this network.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "availability_zone_hints",
                    PropertyType::List,
                    "Availability zone candidates for the network. It requires the availability_zone extension to be available.",
                ),
                PropertySchema::new("tags", PropertyType::List, "The tags to be added to the network.")
                    .update_allowed(),
            ],
            attributes: vec![
                AttributeSchema { name: "status", description: "The status of the network." },
                AttributeSchema { name: "name", description: "The name of the network." },
                AttributeSchema { name: "subnets", description: "Subnets of this network." },
                AttributeSchema {
                    name: "admin_state_up",
                    description: "The administrative status of the network.",
                },
                AttributeSchema { name: "tenant_id", description: "The tenant owning this network." },
                AttributeSchema {
                    name: "port_security_enabled",
                    description: "Port security enabled of the network.",
                },
                AttributeSchema { name: "mtu", description: "The maximum transmission unit size(in bytes) for the network." },
                AttributeSchema { name: "qos_policy_id", description: "The QoS policy ID attached to this network." },
                AttributeSchema {
                    name: "l2_adjacency",
                    description: "A boolean value for L2 adjacency, True means that you can expect L2 connectivity throughout the Network.",
                },
                AttributeSchema {
                    name: "segments",
                    description: "The segments of this network.",
                },
            ],
            accepts_any_properties: false,
            accepts_any_attributes: false,
        }
    }

    async fn create_body(
        &self,
        neutron: &Neutron,
        request: &ResourceRequest,
        name: &str,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        let properties = &request.properties;
        let mut body = Map::new();
        copy_name_and_given(&mut body, properties, name, &PLAIN_FIELDS);
        copy_given(
            &mut body,
            properties,
            &["tenant_id", "availability_zone_hints"],
        );
        if let Some(policy) =
            resolve_property(neutron, properties, "qos_policy", Kind::QosPolicy).await?
        {
            body.insert("qos_policy_id".to_owned(), json!(policy));
        }
        merge_given_value_specs(&mut body, properties);
        Ok(body)
    }

    async fn update_body(
        &self,
        neutron: &Neutron,
        change: &Change<'_>,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        let mut body = Map::new();
        change.changed_name(&mut body, Self::KIND);
        change.copy_changed(&mut body, &PLAIN_FIELDS);
        if change.changed("qos_policy").is_some() {
            let policy =
                resolve_property(neutron, change.after(), "qos_policy", Kind::QosPolicy).await?;
            body.insert("qos_policy_id".to_owned(), json!(policy));
        }
        change.changed_value_specs(&mut body);
        Ok(body)
    }

    async fn after_create(
        &self,
        neutron: &Neutron,
        request: &ResourceRequest,
        object: &Value,
    ) -> Result<(), ResourceFailure> {
        if present(&request.properties, "dhcp_agent_ids").is_none() {
            return Ok(());
        }
        let id = ember_openstack::neutron::id_of(object).map_err(failure)?;
        let wanted = strings(&request.properties, "dhcp_agent_ids")?;
        replace_agents(neutron, AgentKind::Dhcp, &id, &wanted).await
    }

    async fn after_update(
        &self,
        neutron: &Neutron,
        change: &Change<'_>,
    ) -> Result<(), ResourceFailure> {
        if change.changed("dhcp_agent_ids").is_none() {
            return Ok(());
        }
        let wanted = strings(change.after(), "dhcp_agent_ids")?;
        replace_agents(neutron, AgentKind::Dhcp, change.id, &wanted).await
    }

    /// The network's fields, and its `segments` (read where the caller
    /// may list them: listing segments is an admin's call by default, and
    /// a project's own network then shows none).
    async fn attributes(
        &self,
        neutron: &Neutron,
        object: Value,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        let mut attributes = fields(object);
        let id = attributes
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let segments = match neutron.list(Kind::Segment, &[("network_id", &id)]).await {
            Ok(mut segments) => {
                // As Heat: the segments without a name first.
                segments.sort_by_key(|segment| !segment["name"].is_null());
                Value::Array(segments)
            }
            Err(error) => {
                tracing::debug!(%id, %error, "the network's segments cannot be listed");
                Value::Null
            }
        };
        attributes.insert("segments".to_owned(), segments);
        Ok(attributes)
    }
}

/// Makes `wanted` exactly the agents hosting `id` (Heat's
/// `_replace_dhcp_agents` and `_replace_agent`): an agent hosting it
/// already (409) is fine, and so is one gone (404) or no longer hosting it
/// (409) when taken off.
pub async fn replace_agents(
    neutron: &Neutron,
    agents: AgentKind,
    id: &str,
    wanted: &[String],
) -> Result<(), ResourceFailure> {
    let hosting = neutron.hosting_agents(agents, id).await.map_err(failure)?;
    for agent in wanted.iter().filter(|agent| !hosting.contains(agent)) {
        match neutron.add_to_agent(agents, agent, id).await {
            Ok(()) => {}
            Err(error) if error.is_conflict() => {}
            Err(error) => return Err(failure(error)),
        }
    }
    for agent in hosting.iter().filter(|agent| !wanted.contains(agent)) {
        match neutron.remove_from_agent(agents, agent, id).await {
            Ok(()) => {}
            Err(error) if error.is_conflict() => {}
            Err(error) => return Err(failure(error)),
        }
    }
    Ok(())
}
