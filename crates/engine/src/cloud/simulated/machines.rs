//! The simulated machines' interfaces: a machine built with networks gets
//! a port on each (or the port it was given, bound to it), and shows their
//! addresses — and the floating IPs forwarded to them — as Nova shows a
//! server's `addresses`.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{FixedIp, Kind, Object, World, mac_address};
use crate::compute::interfaces::{self, Interface, Wanted};
use crate::domain::instance::placement::NetworkRequest;

/// What binds a port to a machine (Nova's `device_owner`).
const COMPUTE_OWNER: &str = "compute:nova";

impl World {
    /// Gives the machine `instance` of `project` its interfaces; plugging
    /// again (a retried build) changes nothing.
    pub fn plug(
        &mut self,
        project: &str,
        instance: Uuid,
        networks: &[NetworkRequest],
    ) -> Result<(), String> {
        for (index, request) in networks.iter().enumerate() {
            let port_id = interface_id(instance, &index.to_string());
            if request.port.is_none() && self.get_any(&port_id).is_some() {
                continue;
            }
            self.plug_one(project, instance, index, request, port_id)?;
        }
        Ok(())
    }

    /// Plugs the machine into `networks` in place, as Nova's interface
    /// attach and detach would (see `crate::compute::interfaces`): the
    /// interfaces a request matches stay, the others go (a port made for
    /// the machine is deleted, a given one unbound), and each request left
    /// gets a new interface.
    pub fn replug(
        &mut self,
        project: &str,
        instance: Uuid,
        networks: &[NetworkRequest],
    ) -> Result<(), String> {
        let device = instance.to_string();
        let ports: Vec<&Object> = self
            .objects
            .values()
            .filter(|port| port.kind == Kind::Port && bound_to(port, &device))
            .collect();
        let interfaces: Vec<Interface> = ports
            .iter()
            .map(|port| {
                Interface::of_port(
                    &port.id,
                    &port.fields["network_id"],
                    &port.fields["fixed_ips"],
                )
            })
            .collect();
        let mut wanted = Vec::with_capacity(networks.len());
        for request in networks {
            wanted.push(Wanted {
                port: self.resolve(project, Kind::Port, &request.port)?,
                network: self.resolve(project, Kind::Network, &request.network)?,
                subnet: self.resolve(project, Kind::Subnet, &request.subnet)?,
                fixed_ip: request.fixed_ip.clone(),
            });
        }
        let plan = interfaces::plan(&wanted, &interfaces);
        for &at in &plan.detach {
            let port_id = interfaces[at].port.clone();
            self.unplug_port(&port_id);
        }
        for &index in &plan.attach {
            let port_id = (0..)
                .map(|generation| interface_id(instance, &format!("{index}.{generation}")))
                .find(|id| self.get_any(id).is_none())
                .unwrap_or_default();
            self.plug_one(project, instance, index, &networks[index], port_id)?;
        }
        Ok(())
    }

    fn resolve(
        &mut self,
        project: &str,
        kind: Kind,
        name: &Option<String>,
    ) -> Result<Option<String>, String> {
        name.as_ref()
            .map(|name| self.find(project, kind, name))
            .transpose()
    }

    /// Binds the given port to the machine, or makes it the port `port_id`
    /// on the requested network or subnet.
    fn plug_one(
        &mut self,
        project: &str,
        instance: Uuid,
        index: usize,
        request: &NetworkRequest,
        port_id: String,
    ) -> Result<(), String> {
        let device = instance.to_string();
        if let Some(port) = &request.port {
            let port_id = self.find(project, Kind::Port, port)?;
            let fields = self
                .fields_mut(&port_id)
                .ok_or_else(|| format!("Port {port_id} could not be found."))?;
            let bound = fields
                .get("device_id")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !bound.is_empty() && bound != device {
                return Err(format!("Port {port_id} is still in use."));
            }
            fields.insert("device_id".to_owned(), json!(device));
            fields.insert("device_owner".to_owned(), json!(COMPUTE_OWNER));
            fields.insert("status".to_owned(), json!("ACTIVE"));
            return Ok(());
        }
        let subnet_id = match &request.subnet {
            Some(subnet) => Some(self.find(project, Kind::Subnet, subnet)?),
            None => None,
        };
        let network_id = match (&request.network, &subnet_id) {
            (Some(network), _) => self.find(project, Kind::Network, network)?,
            (None, Some(subnet)) => self
                .get_any(subnet)
                .and_then(|subnet| subnet.fields.get("network_id"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            (None, None) => return Ok(()),
        };
        let wanted = if subnet_id.is_some() || request.fixed_ip.is_some() {
            vec![FixedIp {
                subnet_id,
                ip_address: request.fixed_ip.clone(),
            }]
        } else {
            Vec::new()
        };
        let fixed_ips = self.allocate(project, &network_id, &wanted)?;
        let mut fields = Map::new();
        fields.insert("name".to_owned(), json!(format!("eth{index}")));
        fields.insert("network_id".to_owned(), json!(network_id));
        fields.insert("tenant_id".to_owned(), json!(project));
        fields.insert("project_id".to_owned(), json!(project));
        fields.insert("mac_address".to_owned(), json!(mac_address(&port_id)));
        fields.insert("fixed_ips".to_owned(), json!(fixed_ips));
        fields.insert("status".to_owned(), json!("ACTIVE"));
        fields.insert("device_id".to_owned(), json!(device));
        fields.insert("device_owner".to_owned(), json!(COMPUTE_OWNER));
        fields.insert("admin_state_up".to_owned(), json!(true));
        fields.insert("security_groups".to_owned(), json!([]));
        self.made_ports.insert(port_id.clone());
        self.insert(Object {
            id: port_id,
            project: project.to_owned(),
            kind: Kind::Port,
            fields,
        });
        Ok(())
    }

    /// Takes the machine's interfaces away: the ports made for it go, the
    /// ports it was given stay, unbound (`given_only`: only those).
    pub fn unplug(&mut self, instance: Uuid, given_only: bool) {
        let device = instance.to_string();
        let bound: Vec<String> = self
            .objects
            .values()
            .filter(|port| port.kind == Kind::Port && bound_to(port, &device))
            .map(|port| port.id.clone())
            .filter(|port| !given_only || !self.made_ports.contains(port))
            .collect();
        for port in bound {
            self.unplug_port(&port);
        }
    }

    /// Takes one interface off its machine: a port made for it is deleted,
    /// a given one unbound.
    fn unplug_port(&mut self, port: &str) {
        if self.made_ports.remove(port) {
            // Nothing but its machine holds it.
            let _ = self.remove(port);
        } else if let Some(fields) = self.fields_mut(port) {
            fields.insert("device_id".to_owned(), json!(""));
            fields.insert("device_owner".to_owned(), json!(""));
            fields.insert("status".to_owned(), json!("DOWN"));
        }
    }

    /// The machine's addresses by network name, as Nova shows them: its
    /// ports' fixed addresses, then the floating IPs forwarded to them.
    pub fn addresses(&self, project: &str, instance: Uuid) -> BTreeMap<String, Vec<Value>> {
        let device = instance.to_string();
        let mut ports: Vec<&Object> = self
            .list(project, Kind::Port, |port| {
                port.fields.get("device_id").and_then(Value::as_str) == Some(device.as_str())
            })
            .collect();
        ports.sort_by(|a, b| a.name().cmp(b.name()).then(a.id.cmp(&b.id)));
        let mut addresses: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for port in ports {
            let network = port.fields["network_id"].as_str().unwrap_or_default();
            let mac = port.fields["mac_address"].clone();
            let entries = addresses
                .entry(self.network_name(project, network))
                .or_default();
            for fixed_ip in port.fields["fixed_ips"].as_array().into_iter().flatten() {
                let Some(address) = fixed_ip.get("ip_address").and_then(Value::as_str) else {
                    continue;
                };
                entries.push(json!({"version": if address.contains(':') { 6 } else { 4 },
                    "addr": address, "OS-EXT-IPS:type": "fixed",
                    "OS-EXT-IPS-MAC:mac_addr": mac, "port": port.id}));
            }
            for floating in self.list(project, Kind::FloatingIp, |floating| {
                floating.fields.get("port_id").and_then(Value::as_str) == Some(port.id.as_str())
            }) {
                entries.push(json!({"version": 4,
                    "addr": floating.fields["floating_ip_address"],
                    "OS-EXT-IPS:type": "floating", "OS-EXT-IPS-MAC:mac_addr": mac,
                    "port": port.id}));
            }
        }
        addresses
    }
}

/// The id of the port made for the machine's interface `which` (its
/// index at build; with a generation after a replug).
fn interface_id(instance: Uuid, which: &str) -> String {
    super::named_id(&instance.to_string(), Kind::Port, which).to_string()
}

/// Whether the port is one of the machine `device`'s interfaces.
fn bound_to(port: &Object, device: &str) -> bool {
    port.fields.get("device_id").and_then(Value::as_str) == Some(device)
        && port.fields.get("device_owner").and_then(Value::as_str) == Some(COMPUTE_OWNER)
}
