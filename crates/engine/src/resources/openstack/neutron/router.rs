//! `OS::Neutron::Router`: a router (`/work/heat-schemas.md` §7), with its
//! gateway to an external network (`external_gateway_info`, changed or
//! removed in place) and, for an admin, the L3 agents hosting it. Its
//! interfaces are `OS::Neutron::RouterInterface` resources of their own.

use async_trait::async_trait;
use ember_openstack::neutron::{AgentKind, Kind, Neutron, id_of};
use serde_json::{Map, Value, json};

use super::net::replace_agents;
use super::{
    Change, Settling, TaggedObject, copy_given, copy_name_and_given, maps, merge_given_value_specs,
    present, resolve, strings,
};
use crate::resources::openstack::{failure, text};
use crate::resources::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceRequest,
    ResourceTypeSchema,
};

pub struct Router;

#[async_trait]
impl TaggedObject for Router {
    const KIND: Kind = Kind::Router;
    const CREATE_SETTLING: Settling = Settling::UntilBuilt;

    fn schema(&self) -> ResourceTypeSchema {
        let attribute = |name, description| AttributeSchema { name, description };
        ResourceTypeSchema {
            type_name: "OS::Neutron::Router",
            description: "A Neutron router.",
            properties: vec![
                PropertySchema::new("name", PropertyType::String, "The name of the router.")
                    .update_allowed(),
                PropertySchema::new(
                    "external_gateway_info",
                    PropertyType::Map,
                    "External network gateway configuration for a router: {network, enable_snat, external_fixed_ips: [{ip_address, subnet}]}.",
                )
                .update_allowed(),
                PropertySchema::new("value_specs", PropertyType::Map, "Extra parameters to include in the creation request.")
                    .default(json!({}))
                    .update_allowed(),
                PropertySchema::new("admin_state_up", PropertyType::Boolean, "The administrative state of the router.")
                    .default(json!(true))
                    .update_allowed(),
                PropertySchema::new(
                    "l3_agent_id",
                    PropertyType::String,
                    "ID of the L3 agent. NOTE: The default policy setting in Neutron restricts usage of this property to administrative users only. (Deprecated: use l3_agent_ids.)",
                )
                .update_allowed(),
                PropertySchema::new(
                    "l3_agent_ids",
                    PropertyType::List,
                    "ID list of the L3 agent. User can specify multi-agents for highly available router. NOTE: The default policy setting in Neutron restricts usage of this property to administrative users only.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "distributed",
                    PropertyType::Boolean,
                    "Indicates whether or not to create a distributed router. NOTE: The default policy setting in Neutron restricts usage of this property to administrative users only. This property can not be used in conjunction with the L3 agent ID.",
                ),
                PropertySchema::new(
                    "ha",
                    PropertyType::Boolean,
                    "Indicates whether or not to create a highly available router. NOTE: The default policy setting in Neutron restricts usage of this property to administrative users only. And now neutron do not support distributed and ha at the same time.",
                ),
                PropertySchema::new(
                    "availability_zone_hints",
                    PropertyType::List,
                    "Availability zone candidates for the router. It requires the availability_zone extension to be available.",
                )
                .update_allowed(),
                PropertySchema::new("tags", PropertyType::List, "The tags to be added to the router.")
                    .update_allowed(),
                PropertySchema::new(
                    "tenant_id",
                    PropertyType::String,
                    "The ID of the tenant which will own the router. Only administrative users can set the tenant identifier; this cannot be changed using authorization policies.",
                ),
            ],
            attributes: vec![
                attribute("status", "The status of the router."),
                attribute("external_gateway_info", "Gateway network for the router."),
                attribute("name", "Friendly name of the router."),
                attribute("admin_state_up", "Administrative state of the router."),
                attribute("tenant_id", "Tenant owning the router."),
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
        validate(properties)?;
        let mut body = Map::new();
        copy_name_and_given(
            &mut body,
            properties,
            name,
            &[
                "admin_state_up",
                "distributed",
                "ha",
                "availability_zone_hints",
                "tenant_id",
            ],
        );
        if let Some(gateway) = gateway(neutron, properties).await? {
            body.insert("external_gateway_info".to_owned(), gateway);
        }
        merge_given_value_specs(&mut body, properties);
        Ok(body)
    }

    async fn update_body(
        &self,
        neutron: &Neutron,
        change: &Change<'_>,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        validate(change.after())?;
        let mut body = Map::new();
        change.changed_name(&mut body, Self::KIND);
        change.copy_changed(&mut body, &["admin_state_up", "availability_zone_hints"]);
        if change.changed("external_gateway_info").is_some() {
            // Removed from the template: null, which takes the gateway off.
            let gateway = gateway(neutron, change.after()).await?;
            body.insert(
                "external_gateway_info".to_owned(),
                gateway.unwrap_or(Value::Null),
            );
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
        let Some(wanted) = l3_agents(&request.properties)? else {
            return Ok(());
        };
        let id = id_of(object).map_err(failure)?;
        replace_agents(neutron, AgentKind::L3, &id, &wanted).await
    }

    async fn after_update(
        &self,
        neutron: &Neutron,
        change: &Change<'_>,
    ) -> Result<(), ResourceFailure> {
        if change.changed("l3_agent_ids").is_none() && change.changed("l3_agent_id").is_none() {
            return Ok(());
        }
        let wanted = l3_agents(change.after())?.unwrap_or_default();
        replace_agents(neutron, AgentKind::L3, change.id, &wanted).await
    }
}

/// The L3 agents asked for (`l3_agent_ids`, or the older `l3_agent_id`).
fn l3_agents(properties: &Map<String, Value>) -> Result<Option<Vec<String>>, ResourceFailure> {
    let listed = strings(properties, "l3_agent_ids")?;
    if !listed.is_empty() {
        return Ok(Some(listed));
    }
    Ok(text(properties, "l3_agent_id").map(|agent| vec![agent]))
}

/// Heat's `validate`: the agent properties one at a time, no agents for a
/// distributed router, not distributed and HA at once, one agent unless
/// HA.
fn validate(properties: &Map<String, Value>) -> Result<(), ResourceFailure> {
    let conflict = |first: &str, second: &str| {
        Err(ResourceFailure::new(format!(
            "Cannot define the following properties at the same time: {first}, {second}"
        )))
    };
    let single = present(properties, "l3_agent_id").is_some();
    let listed = strings(properties, "l3_agent_ids")?;
    let distributed = present(properties, "distributed") == Some(&json!(true));
    let ha = present(properties, "ha") == Some(&json!(true));
    if single && !listed.is_empty() {
        return conflict("l3_agent_id", "l3_agent_ids");
    }
    if distributed && (single || !listed.is_empty()) {
        return conflict("distributed", "l3_agent_id/l3_agent_ids");
    }
    if ha && distributed {
        return conflict("distributed", "ha");
    }
    if !ha && listed.len() > 1 {
        return Err(ResourceFailure::new(
            "Non HA routers can only have one L3 agent.".to_owned(),
        ));
    }
    Ok(())
}

/// The gateway as Neutron takes it: `network` (a name or id) as
/// `network_id`, `enable_snat` only when given, each external fixed IP's
/// `subnet` as `subnet_id`.
async fn gateway(
    neutron: &Neutron,
    properties: &Map<String, Value>,
) -> Result<Option<Value>, ResourceFailure> {
    let Some(given) = present(properties, "external_gateway_info") else {
        return Ok(None);
    };
    let given = given.as_object().ok_or_else(|| {
        ResourceFailure::new(format!(
            "external_gateway_info: expected a map, got {given}"
        ))
    })?;
    if let Some(unknown) = given.keys().find(|key| {
        !matches!(
            key.as_str(),
            "network" | "enable_snat" | "external_fixed_ips"
        )
    }) {
        return Err(ResourceFailure::new(format!(
            "external_gateway_info: unknown key {unknown:?} (known: network, enable_snat, external_fixed_ips)"
        )));
    }
    let network = text(given, "network").ok_or_else(|| {
        ResourceFailure::new("external_gateway_info.network: property is required".to_owned())
    })?;
    let mut gateway = Map::new();
    gateway.insert(
        "network_id".to_owned(),
        json!(resolve(neutron, Kind::Network, &network).await?),
    );
    copy_given(&mut gateway, given, &["enable_snat"]);
    if present(given, "external_fixed_ips").is_some() {
        let mut fixed_ips = Vec::new();
        for (index, entry) in maps(given, "external_fixed_ips")?.into_iter().enumerate() {
            let mut fixed_ip = Map::new();
            for (key, value) in entry.iter().filter(|(_, value)| !value.is_null()) {
                match key.as_str() {
                    "ip_address" => {
                        fixed_ip.insert(key.clone(), value.clone());
                    }
                    "subnet" => {
                        let subnet = text(entry, key).unwrap_or_default();
                        fixed_ip.insert(
                            "subnet_id".to_owned(),
                            json!(resolve(neutron, Kind::Subnet, &subnet).await?),
                        );
                    }
                    other => {
                        return Err(ResourceFailure::new(format!(
                            "external_gateway_info.external_fixed_ips[{index}]: unknown key {other:?} (known: ip_address, subnet)"
                        )));
                    }
                }
            }
            fixed_ips.push(Value::Object(fixed_ip));
        }
        gateway.insert("external_fixed_ips".to_owned(), Value::Array(fixed_ips));
    }
    Ok(Some(Value::Object(gateway)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::openstack::neutron::fields;

    #[test]
    fn agents_and_router_kinds_are_checked_as_heat_does() {
        let message = |value| validate(&fields(value)).expect_err("invalid").to_string();
        assert_eq!(
            message(json!({"l3_agent_id": "a", "l3_agent_ids": ["b"]})),
            "Cannot define the following properties at the same time: l3_agent_id, l3_agent_ids"
        );
        assert_eq!(
            message(json!({"distributed": true, "l3_agent_ids": ["b"]})),
            "Cannot define the following properties at the same time: distributed, l3_agent_id/l3_agent_ids"
        );
        assert_eq!(
            message(json!({"distributed": true, "ha": true})),
            "Cannot define the following properties at the same time: distributed, ha"
        );
        assert_eq!(
            message(json!({"l3_agent_ids": ["a", "b"]})),
            "Non HA routers can only have one L3 agent."
        );
        assert!(validate(&fields(json!({"ha": true, "l3_agent_ids": ["a", "b"]}))).is_ok());
    }

    #[test]
    fn the_older_single_agent_is_a_list_of_one() {
        assert_eq!(
            l3_agents(&fields(json!({"l3_agent_id": "a"}))).expect("agents"),
            Some(vec!["a".to_owned()])
        );
        assert_eq!(l3_agents(&fields(json!({}))).expect("agents"), None);
    }
}
