//! Floating IPs and their associations (and the `AWS::EC2` elastic IP
//! twins) on the simulated cloud: an address from an external network's
//! subnet, forwarded to a port only when a router joins the port's subnet
//! to that network — Neutron's own condition.

use serde_json::{Map, Value, json};

use super::{Made, Make};
use crate::cloud::simulated::{self, FixedIp, Kind, World};
use crate::domain::Resource;
use crate::resources::ResourceFailure;

/// The external network an elastic IP comes from when nothing says.
const DEFAULT_EXTERNAL_NETWORK: &str = "public";

/// `OS::Neutron::FloatingIP`.
pub(super) fn floating_ip(make: &mut Make<'_>) -> Result<Made, ResourceFailure> {
    let network = make
        .text("floating_network")
        .ok_or_else(|| ResourceFailure::new("Property floating_network not assigned".to_owned()))?;
    let mut wanted = FixedIp::default();
    if let Some(subnet) = make.text("floating_subnet") {
        wanted.subnet_id = Some(make.find(Kind::Subnet, &subnet)?);
    }
    wanted.ip_address = make.text("floating_ip_address");
    let port = make.text("port_id");
    let fixed_ip = make.text("fixed_ip_address");
    let fresh = make.existing(&make.id("floatingip")).is_none();
    let id = allocate(make, &network, wanted)?;
    if let Some(port) = port {
        let project = make.project().to_owned();
        let associated = make
            .world
            .find(&project, Kind::Port, &port)
            .and_then(|port_id| {
                associate(make.world, &project, &id, &port_id, fixed_ip.as_deref())
            });
        if let Err(refused) = associated {
            // Nothing is left of a create that failed.
            if fresh {
                let _ = make.world.remove(&id);
            }
            return Err(ResourceFailure::new(refused));
        }
    } else if let Some(fields) = make.world.fields_mut(&id) {
        simulated::disassociate(fields);
    }
    for (key, property) in [("dns_name", "dns_name"), ("dns_domain", "dns_domain")] {
        let value = make.text(property).unwrap_or_default();
        if let Some(fields) = make.world.fields_mut(&id) {
            fields.insert(key.to_owned(), json!(value));
        }
    }
    Ok(Made::object(&id, fields_of(make.world, &id)))
}

/// `AWS::EC2::EIP`: an address of the cloud's external network, forwarded
/// to an instance's port when `InstanceId` says.
pub(super) fn elastic_ip(make: &mut Make<'_>) -> Result<Made, ResourceFailure> {
    let fresh = make.existing(&make.id("floatingip")).is_none();
    let id = allocate(make, DEFAULT_EXTERNAL_NETWORK, FixedIp::default())?;
    let project = make.project().to_owned();
    match make.text("InstanceId") {
        Some(instance) => {
            let associated = instance_port(make.world, &project, &instance).and_then(|port| {
                associate(make.world, &project, &id, &port, None).map_err(ResourceFailure::new)
            });
            if let Err(refused) = associated {
                if fresh {
                    let _ = make.world.remove(&id);
                }
                return Err(refused);
            }
        }
        None => {
            if let Some(fields) = make.world.fields_mut(&id) {
                simulated::disassociate(fields);
            }
        }
    }
    let fields = fields_of(make.world, &id);
    let mut made = Made::object(&id, fields);
    made.attributes.insert("AllocationId".to_owned(), json!(id));
    Ok(made)
}

/// The floating IP this row made (found again on an update or a retry),
/// or a new one on `network`.
fn allocate(
    make: &mut Make<'_>,
    network: &str,
    wanted: FixedIp,
) -> Result<String, ResourceFailure> {
    let id = make.id("floatingip");
    let project = make.project().to_owned();
    let network_id = make
        .world
        .find_external_network(&project, network)
        .map_err(ResourceFailure::new)?;
    if make.existing(&id).is_some() {
        return Ok(id);
    }
    let wanted = if wanted == FixedIp::default() {
        Vec::new()
    } else {
        vec![wanted]
    };
    let address = make
        .world
        .allocate(&project, &network_id, &wanted)
        .map_err(ResourceFailure::new)?
        .into_iter()
        .next()
        .and_then(|fixed_ip| fixed_ip.get("ip_address").cloned())
        .ok_or_else(|| {
            ResourceFailure::new(format!(
                "No more IP addresses available on network {network_id}."
            ))
        })?;
    let mut fields = Map::new();
    fields.insert("floating_network_id".to_owned(), json!(network_id));
    fields.insert("floating_ip_address".to_owned(), address);
    fields.insert("tenant_id".to_owned(), json!(project));
    fields.insert("project_id".to_owned(), json!(project));
    fields.insert("description".to_owned(), json!(""));
    fields.insert("tags".to_owned(), json!([]));
    simulated::disassociate(&mut fields);
    make.insert(&id, Kind::FloatingIp, fields);
    Ok(id)
}

/// `OS::Neutron::FloatingIPAssociation`.
pub(super) fn association(make: &mut Make<'_>) -> Result<Made, ResourceFailure> {
    let floating = make
        .text("floatingip_id")
        .ok_or_else(|| ResourceFailure::new("Property floatingip_id not assigned".to_owned()))?;
    let port = make
        .text("port_id")
        .ok_or_else(|| ResourceFailure::new("Property port_id not assigned".to_owned()))?;
    let floating_id = make.find(Kind::FloatingIp, &floating)?;
    let port_id = make.find(Kind::Port, &port)?;
    let fixed_ip = make.text("fixed_ip_address");
    let project = make.project().to_owned();
    release_previous(make, &floating_id);
    associate(
        make.world,
        &project,
        &floating_id,
        &port_id,
        fixed_ip.as_deref(),
    )
    .map_err(ResourceFailure::new)?;
    let fields = fields_of(make.world, &floating_id);
    Ok(Made::object(&make.request.resource_id.to_string(), fields)
        .with_data("floating_ip", json!(floating_id)))
}

/// `AWS::EC2::EIPAssociation`: an elastic IP (by address or allocation id)
/// forwarded to an instance's port or a network interface.
pub(super) fn elastic_association(make: &mut Make<'_>) -> Result<Made, ResourceFailure> {
    let project = make.project().to_owned();
    let floating_id = match (make.text("EIP"), make.text("AllocationId")) {
        (Some(address), None) => {
            let found = make
                .world
                .list(&project, Kind::FloatingIp, |floating| {
                    floating
                        .fields
                        .get("floating_ip_address")
                        .and_then(Value::as_str)
                        == Some(address.as_str())
                })
                .map(|floating| floating.id.clone())
                .next();
            found.ok_or_else(|| {
                ResourceFailure::new(format!("No floating IP with address {address}"))
            })?
        }
        (None, Some(allocation)) => make.find(Kind::FloatingIp, &allocation)?,
        _ => {
            return Err(ResourceFailure::new(
                "Either 'EIP' or 'AllocationId' must be provided.".to_owned(),
            ));
        }
    };
    let port_id = match (make.text("NetworkInterfaceId"), make.text("InstanceId")) {
        (Some(interface), _) => make.find(Kind::Port, &interface)?,
        (None, Some(instance)) => instance_port(make.world, &project, &instance)?,
        (None, None) => {
            return Err(ResourceFailure::new(
                "Must specify at least one of 'InstanceId' or 'NetworkInterfaceId'.".to_owned(),
            ));
        }
    };
    release_previous(make, &floating_id);
    associate(make.world, &project, &floating_id, &port_id, None).map_err(ResourceFailure::new)?;
    let fields = fields_of(make.world, &floating_id);
    Ok(Made::object(&make.request.resource_id.to_string(), fields)
        .with_data("floating_ip", json!(floating_id)))
}

/// An update moving the association to another floating IP lets the one
/// it had go.
fn release_previous(make: &mut Make<'_>, floating_id: &str) {
    let previous = make
        .current
        .and_then(|current| current.data.get("floating_ip").and_then(Value::as_str))
        .filter(|previous| *previous != floating_id)
        .map(str::to_owned);
    if let Some(fields) = previous.and_then(|previous| make.world.fields_mut(&previous)) {
        simulated::disassociate(fields);
    }
}

/// Undoes an association: the floating IP stays, forwarded nowhere.
pub(super) fn remove_association(
    world: &mut World,
    current: &Resource,
) -> Result<(), ResourceFailure> {
    if let Some(fields) = current
        .data
        .get("floating_ip")
        .and_then(Value::as_str)
        .and_then(|floating| world.fields_mut(floating))
    {
        simulated::disassociate(fields);
    }
    Ok(())
}

/// Forwards the floating IP `floating_id` to `port_id` (at `fixed_ip`, or
/// its first IPv4 address), if a router reaches the port's subnet.
fn associate(
    world: &mut World,
    project: &str,
    floating_id: &str,
    port_id: &str,
    fixed_ip: Option<&str>,
) -> Result<(), String> {
    let port = world
        .get(project, Kind::Port, port_id)
        .cloned()
        .ok_or_else(|| format!("Port {port_id} could not be found."))?;
    let addresses: Vec<(String, String)> = port.fields["fixed_ips"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|fixed_ip| {
            Some((
                fixed_ip.get("subnet_id")?.as_str()?.to_owned(),
                fixed_ip.get("ip_address")?.as_str()?.to_owned(),
            ))
        })
        .collect();
    let chosen = match fixed_ip {
        Some(wanted) => addresses
            .iter()
            .find(|(_, address)| address == wanted)
            .ok_or_else(|| format!("Port {port_id} does not have fixed ip {wanted}."))?,
        None => addresses
            .iter()
            .find(|(_, address)| !address.contains(':'))
            .ok_or_else(|| {
                format!("Bad floatingip request: Port {port_id} does not have any IPv4 address.")
            })?,
    };
    let network = world
        .get_any(floating_id)
        .and_then(|floating| floating.fields.get("floating_network_id"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let router = router_between(world, project, &network, &chosen.0).ok_or_else(|| {
        format!(
            "External network {network} is not reachable from subnet {}.  Therefore, cannot associate Port {port_id} with a Floating IP.",
            chosen.0
        )
    })?;
    let fields = world
        .fields_mut(floating_id)
        .ok_or_else(|| format!("Floating IP {floating_id} could not be found."))?;
    fields.insert("port_id".to_owned(), json!(port_id));
    fields.insert("fixed_ip_address".to_owned(), json!(chosen.1));
    fields.insert("router_id".to_owned(), router);
    fields.insert("status".to_owned(), json!("ACTIVE"));
    Ok(())
}

/// The router joining `subnet` to the external `network` (`null` for a
/// subnet of a network the cloud had: its own router does).
fn router_between(world: &World, project: &str, network: &str, subnet: &str) -> Option<Value> {
    if world.is_assumed(subnet) {
        return Some(Value::Null);
    }
    world
        .list(project, Kind::Router, |router| {
            router.fields["external_gateway_info"]
                .get("network_id")
                .and_then(Value::as_str)
                == Some(network)
        })
        .find(|router| {
            world
                .list(project, Kind::Port, |port| {
                    port.fields.get("device_id").and_then(Value::as_str) == Some(router.id.as_str())
                })
                .any(|port| {
                    port.fields["fixed_ips"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|fixed_ip| {
                            fixed_ip.get("subnet_id").and_then(Value::as_str) == Some(subnet)
                        })
                })
        })
        .map(|router| json!(router.id))
}

/// The first port bound to `instance` (a simulated server's).
fn instance_port(world: &World, project: &str, instance: &str) -> Result<String, ResourceFailure> {
    let mut ports: Vec<(String, String)> = world
        .list(project, Kind::Port, |port| {
            port.fields.get("device_id").and_then(Value::as_str) == Some(instance)
        })
        .map(|port| (port.name().to_owned(), port.id.clone()))
        .collect();
    ports.sort();
    ports
        .into_iter()
        .next()
        .map(|(_, id)| id)
        .ok_or_else(|| ResourceFailure::new(format!("No port is bound to instance {instance}")))
}

fn fields_of(world: &World, id: &str) -> Map<String, Value> {
    world
        .get_any(id)
        .map(|object| object.fields.clone())
        .unwrap_or_default()
}
