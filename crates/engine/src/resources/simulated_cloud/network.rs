//! Networks, subnets, ports, routers and router interfaces on the
//! simulated cloud, as Neutron makes them: subnets checked for overlaps and
//! their gateways, ports given addresses from their subnets (or the ones
//! they ask for, if free), routers given an address on their external
//! network, an interface on a subnet taking the subnet's gateway address.

use std::net::IpAddr;

use serde_json::{Map, Value, json};

use super::{Made, Make, entries, texts};
use crate::cloud::simulated::addresses::{Cidr, Pool, to_number};
use crate::cloud::simulated::{self, FixedIp, Kind};
use crate::domain::Resource;
use crate::resources::ResourceFailure;

/// `OS::Neutron::Net`.
pub(super) fn net(make: &mut Make<'_>) -> Result<Made, ResourceFailure> {
    let id = make.id("network");
    let existing = make.existing(&id);
    let value_specs = value_specs(make)?;
    let external = value_specs.get("router:external") == Some(&json!(true));
    let name = make.name("name", existing.as_ref());
    let mut fields = simulated::network_fields(make.project(), &name, external);
    for (key, property) in [
        ("admin_state_up", "admin_state_up"),
        ("shared", "shared"),
        ("port_security_enabled", "port_security_enabled"),
        ("dns_domain", "dns_domain"),
        ("qos_policy_id", "qos_policy"),
        ("availability_zone_hints", "availability_zone_hints"),
        ("tags", "tags"),
    ] {
        if let Some(value) = given(make.properties(), property) {
            fields.insert(key.to_owned(), value.clone());
        }
    }
    fields.extend(value_specs);
    if let Some(existing) = &existing {
        fields.insert("subnets".to_owned(), existing.fields["subnets"].clone());
    }
    make.insert(&id, Kind::Network, fields.clone());
    Ok(Made::object(&id, fields))
}

/// `OS::Neutron::Subnet`.
pub(super) fn subnet(make: &mut Make<'_>) -> Result<Made, ResourceFailure> {
    let id = make.id("subnet");
    let existing = make.existing(&id);
    let specs = value_specs(make)?;
    let network = make
        .text("network")
        .ok_or_else(|| ResourceFailure::new("Property network not assigned".to_owned()))?;
    let network_id = make.find(Kind::Network, &network)?;
    let version = make
        .properties()
        .get("ip_version")
        .and_then(|version| match version {
            Value::String(text) => text.parse::<u8>().ok(),
            other => other.as_u64().and_then(|number| u8::try_from(number).ok()),
        })
        .unwrap_or(4);
    let cidr = match (make.text("cidr"), make.text("subnetpool")) {
        (Some(_), Some(_)) => {
            return Err(ResourceFailure::new(
                "Cannot define the following properties at the same time: subnetpool, cidr."
                    .to_owned(),
            ));
        }
        (Some(cidr), None) => Cidr::parse(&cidr).map_err(|error| {
            ResourceFailure::new(format!("Invalid input for operation: {error}."))
        })?,
        (None, Some(_)) => pooled_cidr(make, &id, version)?,
        (None, None) => {
            return Err(ResourceFailure::new(
                "At least one of the following properties must be specified: subnetpool, cidr."
                    .to_owned(),
            ));
        }
    };
    if cidr.version() != version {
        return Err(ResourceFailure::new(format!(
            "Invalid input for operation: Requested subnet with cidr: {cidr} does not match ip_version {version}."
        )));
    }
    let gateway = match make.properties().get("gateway_ip") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(Value::String(text)) if text.is_empty() => Some(None),
        Some(Value::String(text)) => Some(Some(text.parse::<IpAddr>().map_err(|_| {
            ResourceFailure::new(format!(
                "Invalid input for operation: '{text}' is not a valid IP address."
            ))
        })?)),
        Some(other) => {
            return Err(ResourceFailure::new(format!(
                "gateway_ip: {other} is not an IP address"
            )));
        }
    };
    let pools = match entries(make.properties(), "allocation_pools").as_slice() {
        [] => None,
        given => Some(
            given
                .iter()
                .map(|pool| pool_of(pool, &cidr))
                .collect::<Result<Vec<Pool>, ResourceFailure>>()?,
        ),
    };
    let mut extra = Map::new();
    for (key, property) in [
        ("dns_nameservers", "dns_nameservers"),
        ("host_routes", "host_routes"),
        ("enable_dhcp", "enable_dhcp"),
        ("ipv6_ra_mode", "ipv6_ra_mode"),
        ("ipv6_address_mode", "ipv6_address_mode"),
        ("segment_id", "segment"),
        ("tags", "tags"),
        ("subnetpool_id", "subnetpool"),
    ] {
        if let Some(value) = given(make.properties(), property) {
            extra.insert(key.to_owned(), value.clone());
        }
    }
    let name = make.name("name", existing.as_ref());
    let project = make.project().to_owned();
    let mut fields = make
        .world
        .insert_subnet(
            &project,
            &id,
            &network_id,
            &name,
            &cidr,
            gateway,
            pools,
            extra,
        )
        .map_err(ResourceFailure::new)?;
    fields.extend(specs);
    if let Some(object) = make.world.fields_mut(&id) {
        *object = fields.clone();
    }
    Ok(Made::object(&id, fields))
}

/// A subnet from a pool: the next /`prefixlen` of Ember's pool range.
fn pooled_cidr(make: &Make<'_>, id: &str, version: u8) -> Result<Cidr, ResourceFailure> {
    let prefix = make
        .properties()
        .get("prefixlen")
        .and_then(Value::as_u64)
        .unwrap_or(if version == 4 { 26 } else { 64 });
    let bytes = uuid::Uuid::parse_str(id)
        .map(|id| *id.as_bytes())
        .unwrap_or_default();
    let text = if version == 4 {
        format!("10.{}.{}.0/{prefix}", bytes[2], bytes[3])
    } else {
        format!(
            "fd{:02x}:{:02x}{:02x}::/{prefix}",
            bytes[2], bytes[3], bytes[4]
        )
    };
    Cidr::parse(&text).map_err(|error| ResourceFailure::new(format!("prefixlen: {error}")))
}

fn pool_of(pool: &Map<String, Value>, cidr: &Cidr) -> Result<Pool, ResourceFailure> {
    let address = |key: &str| -> Result<u128, ResourceFailure> {
        let text = pool.get(key).and_then(Value::as_str).ok_or_else(|| {
            ResourceFailure::new(format!("allocation_pools: each pool needs a {key}"))
        })?;
        let address: IpAddr = text.parse().map_err(|_| {
            ResourceFailure::new(format!(
                "Invalid input for operation: '{text}' is not a valid IP address."
            ))
        })?;
        if address.is_ipv4() != cidr.network.is_ipv4() {
            return Err(ResourceFailure::new(format!(
                "Invalid input for operation: The allocation pool {text} is not of the subnet's IP version."
            )));
        }
        Ok(to_number(address))
    };
    Ok(Pool {
        start: address("start")?,
        end: address("end")?,
    })
}

/// `OS::Neutron::Port`.
pub(super) fn port(make: &mut Make<'_>) -> Result<Made, ResourceFailure> {
    let id = make.id("port");
    let existing = make.existing(&id);
    let specs = value_specs(make)?;
    let mut wanted = Vec::new();
    for (index, entry) in entries(make.properties(), "fixed_ips")
        .into_iter()
        .enumerate()
    {
        let subnet = ["subnet", "subnet_id"]
            .iter()
            .find_map(|key| entry.get(*key).and_then(Value::as_str))
            .filter(|subnet| !subnet.is_empty())
            .map(str::to_owned);
        let subnet_id = match subnet {
            Some(subnet) => Some(make.find(Kind::Subnet, &subnet)?),
            None => None,
        };
        let ip_address = entry
            .get("ip_address")
            .and_then(Value::as_str)
            .filter(|address| !address.is_empty())
            .map(str::to_owned);
        if subnet_id.is_none() && ip_address.is_none() {
            return Err(ResourceFailure::new(format!(
                "fixed_ips[{index}]: give a subnet, an ip_address, or both"
            )));
        }
        wanted.push(FixedIp {
            subnet_id,
            ip_address,
        });
    }
    let network_id = match make.text("network") {
        Some(network) => make.find(Kind::Network, &network)?,
        None => {
            let subnet = wanted
                .iter()
                .find_map(|fixed_ip| fixed_ip.subnet_id.clone())
                .ok_or_else(|| ResourceFailure::new("Property network not assigned".to_owned()))?;
            make.world
                .get_any(&subnet)
                .and_then(|subnet| {
                    subnet
                        .fields
                        .get("network_id")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .unwrap_or_default()
        }
    };
    let no_fixed_ips = make.flag("no_fixed_ips") == Some(true);
    if no_fixed_ips && !wanted.is_empty() {
        return Err(ResourceFailure::new(
            "Cannot define the following properties at the same time: fixed_ips, no_fixed_ips."
                .to_owned(),
        ));
    }
    let mut security_groups = Vec::new();
    let names = if make.properties().contains_key("security_groups") {
        texts(make.properties(), "security_groups")
    } else {
        vec!["default".to_owned()]
    };
    for group in names {
        security_groups.push(make.find(Kind::SecurityGroup, &group)?);
    }
    let project = make.project().to_owned();
    // Addresses change only when what was asked for does: an update
    // keeps the port's, a create run again finds them taken already.
    let kept = existing.as_ref().filter(|existing| {
        existing.fields.get("network_id").and_then(Value::as_str) == Some(network_id.as_str())
            && make.current.is_none_or(|current| {
                current.properties.get("fixed_ips") == make.properties().get("fixed_ips")
            })
    });
    let fixed_ips = match kept {
        Some(existing) => existing.fields["fixed_ips"].clone(),
        None => {
            if let Some(existing) = &existing {
                make.world.release_all(&existing.fields["fixed_ips"]);
            }
            if no_fixed_ips {
                json!([])
            } else {
                json!(
                    make.world
                        .allocate(&project, &network_id, &wanted)
                        .map_err(ResourceFailure::new)?
                )
            }
        }
    };
    let name = make.name("name", existing.as_ref());
    let device_id = make.text("device_id").unwrap_or_default();
    let mut fields = Map::new();
    fields.insert("name".to_owned(), json!(name));
    fields.insert("network_id".to_owned(), json!(network_id));
    fields.insert("tenant_id".to_owned(), json!(project));
    fields.insert("project_id".to_owned(), json!(project));
    fields.insert(
        "mac_address".to_owned(),
        json!(
            make.text("mac_address")
                .unwrap_or_else(|| simulated::mac_address(&id))
        ),
    );
    fields.insert("fixed_ips".to_owned(), fixed_ips);
    fields.insert(
        "status".to_owned(),
        json!(if device_id.is_empty() {
            "DOWN"
        } else {
            "ACTIVE"
        }),
    );
    fields.insert("device_id".to_owned(), json!(device_id));
    fields.insert(
        "device_owner".to_owned(),
        json!(make.text("device_owner").unwrap_or_default()),
    );
    fields.insert("security_groups".to_owned(), json!(security_groups));
    for (key, property, default) in [
        ("admin_state_up", "admin_state_up", json!(true)),
        ("allowed_address_pairs", "allowed_address_pairs", json!([])),
        ("binding:vnic_type", "binding:vnic_type", json!("normal")),
        (
            "port_security_enabled",
            "port_security_enabled",
            json!(true),
        ),
        ("qos_policy_id", "qos_policy", Value::Null),
        ("dns_name", "dns_name", json!("")),
        (
            "propagate_uplink_status",
            "propagate_uplink_status",
            json!(false),
        ),
        ("tags", "tags", json!([])),
    ] {
        fields.insert(
            key.to_owned(),
            given(make.properties(), property)
                .cloned()
                .unwrap_or(default),
        );
    }
    fields.insert("description".to_owned(), json!(""));
    fields.extend(specs);
    // A device bound it (a simulated server): it stays bound.
    if let Some(existing) = &existing
        && make.text("device_id").is_none()
    {
        for key in ["device_id", "device_owner", "status"] {
            fields.insert(key.to_owned(), existing.fields[key].clone());
        }
    }
    make.insert(&id, Kind::Port, fields.clone());
    let mut attributes = fields.clone();
    attributes.insert("subnets".to_owned(), subnets_of(make, &fields["fixed_ips"]));
    attributes.insert(
        "network".to_owned(),
        make.world
            .get_any(&network_id)
            .map(|network| Value::Object(network.fields.clone()))
            .unwrap_or(Value::Null),
    );
    Ok(Made {
        attributes,
        ..Made::object(&id, fields)
    })
}

/// The subnets a port's addresses are on, as Neutron shows them.
fn subnets_of(make: &Make<'_>, fixed_ips: &Value) -> Value {
    let mut subnets = Vec::new();
    for fixed_ip in fixed_ips.as_array().into_iter().flatten() {
        if let Some(subnet) = fixed_ip
            .get("subnet_id")
            .and_then(Value::as_str)
            .and_then(|id| make.world.get_any(id))
        {
            let mut fields = subnet.fields.clone();
            fields.insert("id".to_owned(), json!(subnet.id));
            subnets.push(Value::Object(fields));
        }
    }
    Value::Array(subnets)
}

/// `OS::Neutron::Router`.
pub(super) fn router(make: &mut Make<'_>) -> Result<Made, ResourceFailure> {
    let id = make.id("router");
    let existing = make.existing(&id);
    let specs = value_specs(make)?;
    let project = make.project().to_owned();
    let wanted_gateway = make
        .properties()
        .get("external_gateway_info")
        .and_then(Value::as_object)
        .cloned();
    let unchanged = existing.is_some()
        && make.current.is_none_or(|current| {
            current.properties.get("external_gateway_info")
                == make.properties().get("external_gateway_info")
        });
    let gateway = match (&existing, unchanged) {
        (Some(existing), true) => existing.fields["external_gateway_info"].clone(),
        _ => {
            if let Some(existing) = &existing {
                make.world
                    .release_all(&existing.fields["external_gateway_info"]["external_fixed_ips"]);
            }
            match wanted_gateway {
                None => Value::Null,
                Some(info) => {
                    let network = info.get("network").and_then(Value::as_str).ok_or_else(|| {
                        ResourceFailure::new(
                            "external_gateway_info: Property network not assigned".to_owned(),
                        )
                    })?;
                    let network_id = make
                        .world
                        .find_external_network(&project, network)
                        .map_err(ResourceFailure::new)?;
                    let mut wanted = Vec::new();
                    for entry in entries(&info, "external_fixed_ips") {
                        let subnet_id = match entry.get("subnet").and_then(Value::as_str) {
                            Some(subnet) => Some(make.find(Kind::Subnet, subnet)?),
                            None => None,
                        };
                        wanted.push(FixedIp {
                            subnet_id,
                            ip_address: entry
                                .get("ip_address")
                                .and_then(Value::as_str)
                                .map(str::to_owned),
                        });
                    }
                    let fixed_ips = make
                        .world
                        .allocate(&project, &network_id, &wanted)
                        .map_err(ResourceFailure::new)?;
                    json!({"network_id": network_id,
                        "enable_snat": info.get("enable_snat").cloned().unwrap_or(json!(true)),
                        "external_fixed_ips": fixed_ips})
                }
            }
        }
    };
    let mut fields = simulated::router_fields(&project, gateway);
    fields.insert(
        "name".to_owned(),
        json!(make.name("name", existing.as_ref())),
    );
    for (key, property) in [
        ("admin_state_up", "admin_state_up"),
        ("distributed", "distributed"),
        ("ha", "ha"),
        ("availability_zone_hints", "availability_zone_hints"),
        ("tags", "tags"),
    ] {
        if let Some(value) = given(make.properties(), property) {
            fields.insert(key.to_owned(), value.clone());
        }
    }
    fields.extend(specs);
    make.insert(&id, Kind::Router, fields.clone());
    Ok(Made::object(&id, fields))
}

/// `OS::Neutron::RouterInterface`: a subnet plugged in takes a port with
/// the subnet's gateway address; a port plugged in is the router's.
pub(super) fn router_interface(make: &mut Make<'_>) -> Result<Made, ResourceFailure> {
    let router = make
        .text("router")
        .ok_or_else(|| ResourceFailure::new("Property router not assigned".to_owned()))?;
    let router_id = make.find(Kind::Router, &router)?;
    let subnet = make.text("subnet").or_else(|| make.text("subnet_id"));
    let port = make.text("port").or_else(|| make.text("port_id"));
    let project = make.project().to_owned();
    match (subnet, port) {
        (Some(_), Some(_)) => Err(ResourceFailure::new(
            "Cannot define the following properties at the same time: subnet, port.".to_owned(),
        )),
        (None, None) => Err(ResourceFailure::new(
            "At least one of the following properties must be specified: subnet, port.".to_owned(),
        )),
        (Some(subnet), None) => {
            let subnet_id = make.find(Kind::Subnet, &subnet)?;
            let port_id = make.id("interface");
            if make.existing(&port_id).is_none() {
                let subnet = make.world.get_any(&subnet_id).cloned().ok_or_else(|| {
                    ResourceFailure::new(format!(
                        "Unable to find subnet with name or id '{subnet}'"
                    ))
                })?;
                let network_id = subnet.fields["network_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let gateway = subnet.fields["gateway_ip"]
                    .as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        ResourceFailure::new(format!(
                            "Bad router request: Subnet {subnet_id} does not have a gateway IP."
                        ))
                    })?;
                let fixed_ips = make
                    .world
                    .allocate(
                        &project,
                        &network_id,
                        &[FixedIp {
                            subnet_id: Some(subnet_id.clone()),
                            ip_address: Some(gateway),
                        }],
                    )
                    .map_err(ResourceFailure::new)?;
                let mut fields = Map::new();
                fields.insert("name".to_owned(), json!(""));
                fields.insert("network_id".to_owned(), json!(network_id));
                fields.insert("tenant_id".to_owned(), json!(project));
                fields.insert("project_id".to_owned(), json!(project));
                fields.insert(
                    "mac_address".to_owned(),
                    json!(simulated::mac_address(&port_id)),
                );
                fields.insert("fixed_ips".to_owned(), json!(fixed_ips));
                fields.insert("status".to_owned(), json!("ACTIVE"));
                fields.insert("device_id".to_owned(), json!(router_id));
                fields.insert("device_owner".to_owned(), json!("network:router_interface"));
                fields.insert("admin_state_up".to_owned(), json!(true));
                fields.insert("security_groups".to_owned(), json!([]));
                make.insert(&port_id, Kind::Port, fields);
            }
            Ok(
                Made::object(&format!("{router_id}:subnet_id={subnet_id}"), Map::new())
                    .with_data("interface_port", json!(port_id)),
            )
        }
        (None, Some(port)) => {
            let port_id = make.find(Kind::Port, &port)?;
            if let Some(fields) = make.world.fields_mut(&port_id) {
                let bound = fields
                    .get("device_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if !bound.is_empty() && bound != router_id {
                    return Err(ResourceFailure::new(format!(
                        "Port {port_id} has owner {bound} and therefore cannot be deleted directly via the port API."
                    )));
                }
                fields.insert("device_id".to_owned(), json!(router_id));
                fields.insert("device_owner".to_owned(), json!("network:router_interface"));
                fields.insert("status".to_owned(), json!("ACTIVE"));
            }
            Ok(
                Made::object(&format!("{router_id}:port_id={port_id}"), Map::new())
                    .with_data("interface_port", json!(port_id)),
            )
        }
    }
}

/// Unplugs an interface: Neutron deletes the interface's port.
pub(super) fn remove_router_interface(
    world: &mut simulated::World,
    current: &Resource,
) -> Result<(), ResourceFailure> {
    let Some(port) = current.data.get("interface_port").and_then(Value::as_str) else {
        return Ok(());
    };
    world.remove(port).map(|_| ()).map_err(ResourceFailure::new)
}

/// A property the template gave (a `null` is not given).
fn given<'a>(properties: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    properties.get(name).filter(|value| !value.is_null())
}

/// `value_specs`, checked as the openstack types check them.
fn value_specs(make: &Make<'_>) -> Result<Map<String, Value>, ResourceFailure> {
    let specs = make
        .properties()
        .get("value_specs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    crate::resources::openstack::neutron::check_value_specs(make.schema, make.properties())?;
    Ok(specs)
}
