//! Nets, subnets and ports on the docker backend: a net is a container
//! network (the engine picks its addresses until a subnet says them), a
//! subnet makes its net's network again with its CIDR and gateway (only
//! while nothing is plugged in), a port a record of its network, IPv4
//! address and MAC address that a server's container is plugged with.

use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::{Make, PROJECT_KEY, failure, made_id, remove_when_free};
use crate::compute::docker::DockerEngine;
use crate::compute::docker::objects::{Ipv4Cidr, NetworkObject, PortObject, SubnetRecord};
use crate::domain::Resource;
use crate::resources::{ResourceFailure, ResourceOutcome};

fn outcome(
    id: &str,
    mut attributes: serde_json::Map<String, Value>,
    project: &str,
) -> ResourceOutcome {
    attributes.insert("show".to_owned(), Value::Object(attributes.clone()));
    ResourceOutcome {
        physical_id: id.to_owned(),
        attributes,
        data: json!({ PROJECT_KEY: project }),
    }
}

fn net_attributes(network: &NetworkObject) -> serde_json::Map<String, Value> {
    let subnets: Vec<&str> = network
        .subnet
        .iter()
        .map(|subnet| subnet.id.as_str())
        .collect();
    json!({
        "id": network.id, "name": network.name, "status": "ACTIVE",
        "subnets": subnets, "admin_state_up": true,
        "tenant_id": network.project_id, "project_id": network.project_id,
        "port_security_enabled": false, "mtu": 1500, "qos_policy_id": null,
        "l2_adjacency": true, "segments": [], "shared": false,
        "container_network": network.container_network,
    })
    .as_object()
    .cloned()
    .unwrap_or_default()
}

/// `OS::Neutron::Net`.
pub(super) async fn net(make: &Make<'_>) -> Result<ResourceOutcome, ResourceFailure> {
    let id = make.id("network");
    let existing = make
        .engine
        .networks_of(make.project(), &id)
        .await
        .map_err(failure)?;
    let network = match existing.into_iter().next() {
        Some(network) => network,
        None => make
            .engine
            .make_network(make.project(), &id, &make.name("name"), None)
            .await
            .map_err(failure)?,
    };
    let mut attributes = net_attributes(&network);
    attributes.insert(
        "tags".to_owned(),
        make.properties().get("tags").cloned().unwrap_or(json!([])),
    );
    Ok(outcome(&id, attributes, make.project()))
}

pub(super) async fn delete_net(
    engine: &DockerEngine,
    current: &Resource,
) -> Result<(), ResourceFailure> {
    let id = made_id(current, "network");
    for network in engine.networks_with_id(&id).await.map_err(failure)? {
        let name = network.container_network.clone();
        remove_when_free(&format!("network {} ({name})", network.name), || {
            engine.remove_network(&name)
        })
        .await?;
    }
    Ok(())
}

pub(super) async fn net_exists(
    engine: &DockerEngine,
    current: &Resource,
) -> Result<bool, ResourceFailure> {
    let id = made_id(current, "network");
    Ok(!engine
        .networks_with_id(&id)
        .await
        .map_err(failure)?
        .is_empty())
}

/// The gateway `gateway_ip` asks for (else the first host), checked.
fn gateway_of(cidr: Ipv4Cidr, asked: Option<&str>) -> Result<Ipv4Addr, ResourceFailure> {
    match asked {
        None | Some("auto") => cidr.hosts().next().ok_or_else(|| {
            ResourceFailure::new(format!("cidr {cidr} has no address for a gateway"))
        }),
        Some(text) => {
            let gateway: Ipv4Addr = text.parse().map_err(|_| {
                ResourceFailure::new(format!("gateway_ip {text:?} is not an IPv4 address"))
            })?;
            if !cidr.is_host(gateway) {
                return Err(ResourceFailure::new(format!(
                    "Gateway IP {gateway} is not a host address of subnet {cidr}"
                )));
            }
            Ok(gateway)
        }
    }
}

fn subnet_attributes(
    network: &NetworkObject,
    record: &SubnetRecord,
    enable_dhcp: bool,
) -> serde_json::Map<String, Value> {
    let cidr = network.cidr;
    let gateway = network.gateway;
    let pool = cidr.map(|cidr| {
        let hosts: Vec<Ipv4Addr> = cidr.hosts().filter(|host| Some(*host) != gateway).collect();
        json!([{"start": hosts.first().map(ToString::to_string),
            "end": hosts.last().map(ToString::to_string)}])
    });
    json!({
        "id": record.id, "name": record.name, "network_id": network.id,
        "tenant_id": network.project_id, "project_id": network.project_id,
        "cidr": cidr.map(|cidr| cidr.to_string()),
        "gateway_ip": gateway.map(|gateway| gateway.to_string()),
        "allocation_pools": pool.unwrap_or(json!([])), "host_routes": [],
        "ip_version": 4, "dns_nameservers": [], "enable_dhcp": enable_dhcp,
        "container_network": network.container_network,
    })
    .as_object()
    .cloned()
    .unwrap_or_default()
}

/// `OS::Neutron::Subnet`: the net's container network made again with the
/// subnet's CIDR and gateway, while nothing is plugged into it.
pub(super) async fn subnet(make: &Make<'_>) -> Result<ResourceOutcome, ResourceFailure> {
    let engine = make.engine;
    let project = make.project();
    let id = make.id("subnet");
    let enable_dhcp = make.flag("enable_dhcp").unwrap_or(true);
    let net_name = make
        .text("network")
        .ok_or_else(|| ResourceFailure::new("Property network not assigned".to_owned()))?;
    let net = engine
        .find_network(project, &net_name)
        .await
        .map_err(failure)?;
    let networks = engine
        .networks_of(project, &net.id)
        .await
        .map_err(failure)?;
    if let Some(done) = networks.iter().find(|network| {
        network
            .subnet
            .as_ref()
            .is_some_and(|subnet| subnet.id == id)
    }) {
        let record = done.subnet.clone().unwrap_or(SubnetRecord {
            id: id.clone(),
            name: String::new(),
        });
        // An earlier try made it: the bare network may be left to remove.
        remove_bare(engine, &networks).await?;
        let mut outcome = outcome(&id, subnet_attributes(done, &record, enable_dhcp), project);
        outcome.data["network_id"] = json!(net.id);
        return Ok(outcome);
    }
    if let Some(other) = networks.iter().find_map(|network| network.subnet.clone()) {
        return Err(ResourceFailure::new(format!(
            "network {} has subnet {} already: a container network has one subnet on the docker backend",
            net.name,
            if other.name.is_empty() {
                other.id
            } else {
                other.name
            }
        )));
    }
    let cidr_text = make.text("cidr").unwrap_or_default();
    let cidr = Ipv4Cidr::parse(&cidr_text)
        .map_err(|error| ResourceFailure::new(format!("cidr: {error}")))?;
    if cidr.prefix > 30 {
        return Err(ResourceFailure::new(format!(
            "cidr {cidr}: a container network needs room for a gateway and containers (a prefix of at most /30)"
        )));
    }
    let gateway = gateway_of(cidr, make.text("gateway_ip").as_deref())?;
    let ports: Vec<PortObject> = engine
        .project_ports(project)
        .await
        .map_err(failure)?
        .into_iter()
        .filter(|port| port.network_id == net.id)
        .collect();
    if let Some(port) = ports.first() {
        return Err(ResourceFailure::new(format!(
            "network {} has ports already (port {}): on the docker backend a subnet makes its network's container network again, so make the subnet before its ports",
            net.name, port.id
        )));
    }
    for network in &networks {
        let users = engine
            .containers_on(&network.container_network)
            .await
            .map_err(failure)?;
        if !users.is_empty() {
            return Err(ResourceFailure::new(format!(
                "network {} is in use by container(s) {}: on the docker backend a subnet makes its network's container network again, so make the subnet before servers are plugged into the network",
                net.name,
                users.join(", ")
            )));
        }
    }
    let record = SubnetRecord {
        id: id.clone(),
        name: make.name("name"),
    };
    let made = engine
        .make_network(project, &net.id, &net.name, Some((&record, cidr, gateway)))
        .await
        .map_err(|error| {
            ResourceFailure::new(format!(
                "cannot make subnet {cidr} on network {}: {}",
                net.name, error.0
            ))
        })?;
    remove_bare(engine, &networks).await?;
    let mut outcome = outcome(&id, subnet_attributes(&made, &record, enable_dhcp), project);
    outcome.data["network_id"] = json!(net.id);
    Ok(outcome)
}

/// Removes the bare container network of a net that has its subnet's now.
async fn remove_bare(
    engine: &DockerEngine,
    networks: &[NetworkObject],
) -> Result<(), ResourceFailure> {
    for bare in networks.iter().filter(|network| network.subnet.is_none()) {
        let name = bare.container_network.clone();
        remove_when_free(&format!("network {} ({name})", bare.name), || {
            engine.remove_network(&name)
        })
        .await?;
    }
    Ok(())
}

/// Deletes a subnet: its net's network is made bare again (the engine
/// picks its addresses), and the subnet's removed once nothing uses it.
pub(super) async fn delete_subnet(
    engine: &DockerEngine,
    current: &Resource,
) -> Result<(), ResourceFailure> {
    let id = made_id(current, "subnet");
    let container_network = engine.subnet_network_name(&id);
    let Some(network) = engine
        .network_named(&container_network)
        .await
        .map_err(failure)?
    else {
        return Ok(());
    };
    remove_when_free(&format!("subnet {id} ({container_network})"), || {
        engine.remove_network(&container_network)
    })
    .await?;
    // The net lives on: bare again, as before its subnet.
    engine
        .make_network(&network.project_id, &network.id, &network.name, None)
        .await
        .map_err(failure)?;
    Ok(())
}

pub(super) async fn subnet_exists(
    engine: &DockerEngine,
    current: &Resource,
) -> Result<bool, ResourceFailure> {
    let id = made_id(current, "subnet");
    Ok(engine
        .network_named(&engine.subnet_network_name(&id))
        .await
        .map_err(failure)?
        .is_some())
}

/// Neutron's style of MAC address, derived from the port's id.
fn mac_of(id: &str) -> String {
    let bytes = uuid::Uuid::parse_str(id)
        .map(|id| *id.as_bytes())
        .unwrap_or_default();
    format!(
        "fa:16:3e:{:02x}:{:02x}:{:02x}",
        bytes[13], bytes[14], bytes[15]
    )
}

fn port_attributes(port: &PortObject, network: &NetworkObject) -> serde_json::Map<String, Value> {
    json!({
        "id": port.id, "name": port.name, "network_id": port.network_id,
        "fixed_ips": [{"subnet_id": port.subnet_id, "ip_address": port.ip_address}],
        "mac_address": port.mac_address, "status": "DOWN", "admin_state_up": true,
        "device_id": "", "device_owner": "", "tenant_id": port.project_id,
        "project_id": port.project_id, "security_groups": [],
        "allowed_address_pairs": [], "port_security_enabled": false,
        "qos_policy_id": null, "dns_assignment": [], "propagate_uplink_status": false,
        "subnets": network.subnet.iter().map(|subnet| json!({"id": subnet.id, "name": subnet.name,
            "cidr": network.cidr.map(|cidr| cidr.to_string()),
            "gateway_ip": network.gateway.map(|gateway| gateway.to_string())})).collect::<Vec<_>>(),
        "network": net_attributes(network),
    })
    .as_object()
    .cloned()
    .unwrap_or_default()
}

/// `OS::Neutron::Port`: a record of the port's network, its one IPv4
/// address (the one asked for, else the first free) and MAC address.
pub(super) async fn port(make: &Make<'_>) -> Result<ResourceOutcome, ResourceFailure> {
    let engine = make.engine;
    let project = make.project();
    let id = make.id("port");
    let network_name = make
        .text("network")
        .ok_or_else(|| ResourceFailure::new("Property network not assigned".to_owned()))?;
    let network = engine
        .find_network(project, &network_name)
        .await
        .map_err(failure)?;
    let ports = engine.project_ports(project).await.map_err(failure)?;
    if let Some(found) = ports.iter().find(|port| port.id == id) {
        return Ok(outcome(&id, port_attributes(found, &network), project));
    }
    let cidr = network.cidr.ok_or_else(|| {
        ResourceFailure::new(format!(
            "network {} has no IPv4 subnet to take an address from",
            network.name
        ))
    })?;
    let fixed_ip = make
        .properties()
        .get("fixed_ips")
        .and_then(Value::as_array)
        .and_then(|entries| entries.first())
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let text = |key: &str| {
        fixed_ip
            .get(key)
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
    };
    if let Some(subnet) = text("subnet").or_else(|| text("subnet_id")) {
        let named = network
            .subnet
            .as_ref()
            .is_some_and(|known| known.id == subnet || known.name == subnet);
        if !named {
            return Err(ResourceFailure::new(format!(
                "fixed_ips: subnet {subnet} is not a subnet of network {}",
                network.name
            )));
        }
    }
    let taken: Vec<Ipv4Addr> = ports
        .iter()
        .filter(|port| port.network_id == network.id)
        .filter_map(|port| port.ip_address.parse().ok())
        .chain(network.gateway)
        .collect();
    let subnet_label = network
        .subnet
        .as_ref()
        .map(|subnet| subnet.id.clone())
        .unwrap_or_default();
    let address = match text("ip_address") {
        Some(asked) => {
            let address: Ipv4Addr = asked.parse().map_err(|_| {
                ResourceFailure::new(format!(
                    "fixed_ips: ip_address {asked:?} is not an IPv4 address"
                ))
            })?;
            if !cidr.is_host(address) {
                return Err(ResourceFailure::new(format!(
                    "fixed_ips: IP address {address} is not a host address of subnet {cidr}"
                )));
            }
            if taken.contains(&address) {
                return Err(ResourceFailure::new(format!(
                    "IP address {address} already allocated in subnet {}",
                    if subnet_label.is_empty() {
                        cidr.to_string()
                    } else {
                        subnet_label.clone()
                    }
                )));
            }
            address
        }
        None => cidr
            .hosts()
            .find(|host| !taken.contains(host))
            .ok_or_else(|| {
                ResourceFailure::new(format!(
                    "No more IP addresses available on network {}",
                    network.name
                ))
            })?,
    };
    let mac_address = match make.text("mac_address") {
        Some(mac) => mac.to_ascii_lowercase(),
        None => mac_of(&id),
    };
    let record = PortObject {
        id: id.clone(),
        name: make.text("name").unwrap_or_default(),
        project_id: project.to_owned(),
        network_id: network.id.clone(),
        subnet_id: subnet_label,
        ip_address: address.to_string(),
        mac_address,
    };
    let recorded = engine.record_port(&record).await.map_err(failure)?;
    Ok(outcome(&id, port_attributes(&recorded, &network), project))
}

pub(super) async fn delete_port(
    engine: &DockerEngine,
    current: &Resource,
) -> Result<(), ResourceFailure> {
    let id = made_id(current, "port");
    let name = engine.port_record_name(&id);
    remove_when_free(&format!("port {id}"), || engine.remove_volume(&name)).await
}

pub(super) async fn port_exists(
    engine: &DockerEngine,
    current: &Resource,
) -> Result<bool, ResourceFailure> {
    let id = made_id(current, "port");
    engine
        .volume_exists(&engine.port_record_name(&id))
        .await
        .map_err(failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateways_default_to_the_first_host_and_must_be_inside() {
        let cidr = Ipv4Cidr::parse("10.0.0.0/24").expect("cidr");
        assert_eq!(
            gateway_of(cidr, None).expect("first"),
            Ipv4Addr::new(10, 0, 0, 1)
        );
        assert_eq!(
            gateway_of(cidr, Some("auto")).expect("first"),
            Ipv4Addr::new(10, 0, 0, 1)
        );
        assert_eq!(
            gateway_of(cidr, Some("10.0.0.254")).expect("given"),
            Ipv4Addr::new(10, 0, 0, 254)
        );
        assert!(gateway_of(cidr, Some("10.0.1.1")).is_err());
        assert!(gateway_of(cidr, Some("gw")).is_err());
        assert_eq!(
            mac_of("00000000-0000-0000-0000-0000000a0b0c"),
            "fa:16:3e:0a:0b:0c"
        );
    }
}
