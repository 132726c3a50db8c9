//! `OS::Neutron::Subnet`: a subnet of a network (`/work/heat-schemas.md`
//! §5), from a CIDR or a subnet pool. Neutron answers a subnet's create
//! with the subnet made, so nothing is waited for (as Heat).

use std::net::IpAddr;

use async_trait::async_trait;
use ember_openstack::neutron::{Kind, Neutron};
use serde_json::{Map, Value, json};

use super::{
    Change, Settling, TaggedObject, copy_given, copy_name_and_given, maps, merge_given_value_specs,
    present, resolve, resolve_property,
};
use crate::resources::openstack::text;
use crate::resources::{
    AttributeSchema, PropertySchema, PropertyType, ResourceFailure, ResourceRequest,
    ResourceTypeSchema,
};

pub struct Subnet;

/// The IPv6 address modes Neutron knows.
const IPV6_MODES: [&str; 3] = ["dhcpv6-stateful", "dhcpv6-stateless", "slaac"];

/// Fields sent as the template gives them, on create and on update.
const PLAIN_FIELDS: [&str; 3] = ["dns_nameservers", "enable_dhcp", "host_routes"];

#[async_trait]
impl TaggedObject for Subnet {
    const KIND: Kind = Kind::Subnet;
    const CREATE_SETTLING: Settling = Settling::AsAnswered;

    fn schema(&self) -> ResourceTypeSchema {
        let ipv6_modes = IPV6_MODES
            .iter()
            .map(|mode| json!(mode))
            .collect::<Vec<_>>();
        ResourceTypeSchema {
            type_name: "OS::Neutron::Subnet",
            description: "A Neutron subnet.",
            properties: vec![
                PropertySchema::new("network", PropertyType::String, "The ID of the attached network.")
                    .aliases(&["network_id"])
                    .required(),
                PropertySchema::new(
                    "subnetpool",
                    PropertyType::String,
                    "The name or ID of the subnet pool.",
                ),
                PropertySchema::new(
                    "prefixlen",
                    PropertyType::Integer,
                    "Prefix length for subnet allocation from subnet pool.",
                )
                .range(0.0, f64::from(i32::MAX)),
                PropertySchema::new(
                    "cidr",
                    PropertyType::String,
                    "The CIDR.",
                ),
                PropertySchema::new(
                    "value_specs",
                    PropertyType::Map,
                    "Extra parameters to include in the request.",
                )
                .default(json!({}))
                .update_allowed(),
                PropertySchema::new("name", PropertyType::String, "The name of the subnet.").update_allowed(),
                PropertySchema::new("ip_version", PropertyType::Integer, "The IP version, which is 4 or 6.")
                    .default(json!(4))
                    .allowed_values(vec![json!(4), json!(6)]),
                PropertySchema::new(
                    "dns_nameservers",
                    PropertyType::List,
                    "A specified set of DNS name servers to be used.",
                )
                .default(json!([]))
                .update_allowed(),
                PropertySchema::new(
                    "gateway_ip",
                    PropertyType::String,
                    "The gateway IP address. Set to any of [ null | ~ | \"\" ] to create/update a subnet without a gateway. Set to \"auto\" to let Neutron choose (create only). When omitted on create Neutron picks the first free IP of the subnet.",
                )
                .update_allowed(),
                PropertySchema::new("enable_dhcp", PropertyType::Boolean, "Set to true if DHCP is enabled and false if DHCP is disabled.")
                    .default(json!(true))
                    .update_allowed(),
                PropertySchema::new(
                    "allocation_pools",
                    PropertyType::List,
                    "The start and end addresses for the allocation pools: a list of maps {start, end}.",
                )
                .update_allowed(),
                PropertySchema::new(
                    "tenant_id",
                    PropertyType::String,
                    "The ID of the tenant who owns the network. Only administrative users can specify a tenant ID other than their own.",
                ),
                PropertySchema::new(
                    "host_routes",
                    PropertyType::List,
                    "A list of host route dictionaries for the subnet: maps {destination, nexthop}.",
                )
                .update_allowed(),
                PropertySchema::new("ipv6_ra_mode", PropertyType::String, "IPv6 RA (Router Advertisement) mode.")
                    .allowed_values(ipv6_modes.clone()),
                PropertySchema::new("ipv6_address_mode", PropertyType::String, "IPv6 address mode.")
                    .allowed_values(ipv6_modes),
                PropertySchema::new(
                    "segment",
                    PropertyType::String,
                    "The name/ID of the segment to associate.",
                )
                .update_allowed(),
                PropertySchema::new("tags", PropertyType::List, "The tags to be added to the subnet.")
                    .update_allowed(),
            ],
            attributes: vec![
                AttributeSchema { name: "name", description: "Friendly name of the subnet." },
                AttributeSchema { name: "network_id", description: "Parent network of the subnet." },
                AttributeSchema { name: "tenant_id", description: "Tenant owning the subnet." },
                AttributeSchema { name: "allocation_pools", description: "Ip allocation pools and their ranges." },
                AttributeSchema { name: "gateway_ip", description: "Ip of the subnet's gateway." },
                AttributeSchema { name: "host_routes", description: "Additional routes for this subnet." },
                AttributeSchema { name: "ip_version", description: "Ip version for the subnet." },
                AttributeSchema { name: "cidr", description: "CIDR block notation for this subnet." },
                AttributeSchema { name: "dns_nameservers", description: "List of dns nameservers." },
                AttributeSchema { name: "enable_dhcp", description: "'true' if DHCP is enabled for this subnet; 'false' otherwise." },
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
        let network = text(properties, "network").unwrap_or_default();
        let mut body = Map::new();
        body.insert(
            "network_id".to_owned(),
            json!(resolve(neutron, Kind::Network, &network).await?),
        );
        copy_name_and_given(&mut body, properties, name, &PLAIN_FIELDS);
        copy_given(
            &mut body,
            properties,
            &[
                "ip_version",
                "cidr",
                "prefixlen",
                "tenant_id",
                "ipv6_ra_mode",
                "ipv6_address_mode",
            ],
        );
        if let Some(pools) = allocation_pools(properties)? {
            body.insert("allocation_pools".to_owned(), pools);
        }
        checked_host_routes(properties)?;
        if let Some(pool) =
            resolve_property(neutron, properties, "subnetpool", Kind::SubnetPool).await?
        {
            body.insert("subnetpool_id".to_owned(), json!(pool));
        }
        if let Some(segment) =
            resolve_property(neutron, properties, "segment", Kind::Segment).await?
        {
            body.insert("segment_id".to_owned(), json!(segment));
        }
        match gateway(properties) {
            Gateway::Unset | Gateway::Auto => {}
            Gateway::Disabled => {
                body.insert("gateway_ip".to_owned(), Value::Null);
            }
            Gateway::Address(address) => {
                body.insert("gateway_ip".to_owned(), json!(address));
            }
        }
        merge_given_value_specs(&mut body, properties);
        Ok(body)
    }

    async fn update_body(
        &self,
        neutron: &Neutron,
        change: &Change<'_>,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        let after = change.after();
        let mut body = Map::new();
        change.changed_name(&mut body, Self::KIND);
        change.copy_changed(&mut body, &PLAIN_FIELDS);
        if change.changed("host_routes").is_some() {
            checked_host_routes(after)?;
        }
        if change.changed("allocation_pools").is_some() {
            // Removed from the template: Neutron's default pool again.
            let pools = allocation_pools(after)?.unwrap_or_else(|| json!([]));
            body.insert("allocation_pools".to_owned(), pools);
        }
        if change.changed("gateway_ip").is_some() {
            let address = match gateway(after) {
                Gateway::Auto => {
                    return Err(ResourceFailure::new(
                        "The value \"auto\" for gateway_ip cannot be used to update an existing subnet. It is only supported during subnet creation.".to_owned(),
                    ));
                }
                // Removed from the template: the gateway is detached.
                Gateway::Unset | Gateway::Disabled => Value::Null,
                Gateway::Address(address) => json!(address),
            };
            body.insert("gateway_ip".to_owned(), address);
        }
        if let Some(segment) = change.changed("segment")
            && !segment.is_null()
        {
            if present(change.before, "segment").is_some() {
                return Err(ResourceFailure::new(
                    "Updating the subnet segment assciation only allowed when the current segment_id is None. The subnet is currently associated with segment. In this state update".to_owned(),
                ));
            }
            let segment = resolve_property(neutron, after, "segment", Kind::Segment).await?;
            body.insert("segment_id".to_owned(), json!(segment));
        }
        change.changed_value_specs(&mut body);
        Ok(body)
    }
}

/// What the template says of the gateway.
#[derive(Debug, PartialEq, Eq)]
enum Gateway {
    /// Not given: Neutron picks the subnet's first address (on create).
    Unset,
    /// `auto`: the same, said explicitly (create only).
    Auto,
    /// `''`, `~` or null: no gateway.
    Disabled,
    Address(String),
}

fn gateway(properties: &Map<String, Value>) -> Gateway {
    match properties.get("gateway_ip") {
        None => Gateway::Unset,
        Some(Value::Null) => Gateway::Disabled,
        Some(_) => match text(properties, "gateway_ip").as_deref() {
            Some("" | "~") => Gateway::Disabled,
            Some("auto") => Gateway::Auto,
            Some(address) => Gateway::Address(address.to_owned()),
            None => Gateway::Unset,
        },
    }
}

/// Heat's `validate`: a CIDR or a pool (not both), no prefix length with
/// a CIDR, IPv6 modes only for IPv6 and equal when both are given, a
/// gateway that is an address.
fn validate(properties: &Map<String, Value>) -> Result<(), ResourceFailure> {
    let cidr = text(properties, "cidr").filter(|cidr| !cidr.is_empty());
    let pool = present(properties, "subnetpool");
    match (&cidr, pool) {
        (Some(_), Some(_)) => {
            return Err(ResourceFailure::new(
                "Cannot define the following properties at the same time: subnetpool, cidr"
                    .to_owned(),
            ));
        }
        (None, None) => {
            return Err(ResourceFailure::new(
                "At least one of the following properties must be specified: subnetpool, cidr"
                    .to_owned(),
            ));
        }
        _ => {}
    }
    let prefixlen = present(properties, "prefixlen")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if prefixlen != 0 && cidr.is_some() {
        return Err(ResourceFailure::new(
            "Cannot define the following properties at the same time: prefixlen, cidr".to_owned(),
        ));
    }
    let ra_mode = text(properties, "ipv6_ra_mode");
    let address_mode = text(properties, "ipv6_address_mode");
    let ip_version = present(properties, "ip_version")
        .and_then(Value::as_i64)
        .unwrap_or(4);
    if ip_version == 4 && (ra_mode.is_some() || address_mode.is_some()) {
        return Err(ResourceFailure::new(
            "ipv6_ra_mode and ipv6_address_mode are not supported for ipv4.".to_owned(),
        ));
    }
    if let (Some(ra_mode), Some(address_mode)) = (&ra_mode, &address_mode)
        && ra_mode != address_mode
    {
        return Err(ResourceFailure::new(
            "When both ipv6_ra_mode and ipv6_address_mode are set, they must be equal.".to_owned(),
        ));
    }
    if let Gateway::Address(address) = gateway(properties)
        && address.parse::<IpAddr>().is_err()
    {
        return Err(ResourceFailure::new(format!(
            "Gateway IP address \"{address}\" is in invalid format."
        )));
    }
    Ok(())
}

/// The allocation pools as Neutron takes them, each a `{start, end}`.
fn allocation_pools(properties: &Map<String, Value>) -> Result<Option<Value>, ResourceFailure> {
    if present(properties, "allocation_pools").is_none() {
        return Ok(None);
    }
    let pools = maps(properties, "allocation_pools")?;
    for (index, pool) in pools.iter().enumerate() {
        require_keys(pool, "allocation_pools", index, &["start", "end"])?;
    }
    Ok(Some(Value::Array(
        pools.into_iter().cloned().map(Value::Object).collect(),
    )))
}

/// Checks the host routes are `{destination, nexthop}` maps.
fn checked_host_routes(properties: &Map<String, Value>) -> Result<(), ResourceFailure> {
    for (index, route) in maps(properties, "host_routes")?.iter().enumerate() {
        require_keys(route, "host_routes", index, &["destination", "nexthop"])?;
    }
    Ok(())
}

fn require_keys(
    entry: &Map<String, Value>,
    property: &str,
    index: usize,
    keys: &[&str],
) -> Result<(), ResourceFailure> {
    if let Some(unknown) = entry.keys().find(|key| !keys.contains(&key.as_str())) {
        return Err(ResourceFailure::new(format!(
            "{property}[{index}]: unknown key {unknown:?} (known: {})",
            keys.join(", ")
        )));
    }
    match keys.iter().find(|key| present(entry, key).is_none()) {
        Some(missing) => Err(ResourceFailure::new(format!(
            "{property}[{index}].{missing}: property is required"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn properties(value: Value) -> Map<String, Value> {
        super::super::fields(value)
    }

    #[test]
    fn a_subnet_needs_a_cidr_or_a_pool_and_not_both() {
        let message = |value| {
            validate(&properties(value))
                .expect_err("invalid")
                .to_string()
        };
        assert_eq!(
            message(json!({"network": "n"})),
            "At least one of the following properties must be specified: subnetpool, cidr"
        );
        assert_eq!(
            message(json!({"cidr": "10.0.0.0/24", "subnetpool": "p"})),
            "Cannot define the following properties at the same time: subnetpool, cidr"
        );
        assert_eq!(
            message(json!({"cidr": "10.0.0.0/24", "prefixlen": 26})),
            "Cannot define the following properties at the same time: prefixlen, cidr"
        );
        assert_eq!(
            message(json!({"cidr": "10.0.0.0/24", "ip_version": 4, "ipv6_ra_mode": "slaac"})),
            "ipv6_ra_mode and ipv6_address_mode are not supported for ipv4."
        );
        assert_eq!(
            message(json!({"cidr": "10.0.0.0/24", "gateway_ip": "10.0.0"})),
            "Gateway IP address \"10.0.0\" is in invalid format."
        );
        assert!(
            validate(&properties(
                json!({"cidr": "10.0.0.0/24", "gateway_ip": "10.0.0.1"})
            ))
            .is_ok()
        );
        assert!(validate(&properties(json!({"subnetpool": "p", "prefixlen": 26}))).is_ok());
    }

    #[test]
    fn the_gateway_is_unset_auto_disabled_or_an_address() {
        let of = |value| gateway(&properties(value));
        assert_eq!(of(json!({})), Gateway::Unset);
        assert_eq!(of(json!({"gateway_ip": null})), Gateway::Disabled);
        assert_eq!(of(json!({"gateway_ip": ""})), Gateway::Disabled);
        assert_eq!(of(json!({"gateway_ip": "~"})), Gateway::Disabled);
        assert_eq!(of(json!({"gateway_ip": "auto"})), Gateway::Auto);
        assert_eq!(
            of(json!({"gateway_ip": "10.0.0.1"})),
            Gateway::Address("10.0.0.1".to_owned())
        );
    }

    #[test]
    fn pools_and_routes_name_their_bad_entries() {
        assert_eq!(
            allocation_pools(&properties(
                json!({"allocation_pools": [{"start": "10.0.0.5"}]})
            ))
            .expect_err("no end")
            .to_string(),
            "allocation_pools[0].end: property is required"
        );
        assert_eq!(
            checked_host_routes(&properties(json!({"host_routes": [{"destination": "0.0.0.0/0", "nexthop": "10.0.0.1", "via": 1}]})))
                .expect_err("unknown key")
                .to_string(),
            "host_routes[0]: unknown key \"via\" (known: destination, nexthop)"
        );
        assert_eq!(
            allocation_pools(&properties(json!({}))).expect("none"),
            None
        );
    }
}
