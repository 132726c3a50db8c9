//! The simulated backend's cloud: the networks, subnets, ports, routers,
//! security groups, floating IPs, volumes, key pairs, server groups and
//! images that the simulated twins of the openstack types make
//! (`crate::resources::simulated_cloud`), kept in memory as the services
//! would keep them — per project, addresses handed out from subnets,
//! ports bound to the simulated machines that use them — so a template
//! written for a real cloud runs unchanged on `ember dev` and its
//! `get_attr`s answer as a cloud would.
//!
//! What it simulates, and how far:
//! - **Projects see their own objects** and the cloud's shared ones
//!   (shared and external networks); another project's object is "not
//!   found", by name or by id, as Neutron, Cinder and Nova hide them.
//! - **A cloud is never empty.** A network, router, security group,
//!   image, key pair, server group or volume a template names that
//!   nothing made is taken to be one the cloud already had (as `public`,
//!   `private`, `default` and `cirros` are on a fresh DevStack): it is
//!   made on first mention, in the caller's project (with a /24 subnet,
//!   for a network), or shared by every project for an external network.
//!   Subnets, ports and floating IPs are never assumed: one nobody made is
//!   not found.
//! - **The services' refusals**: an address outside its subnet or taken,
//!   a subnet out of addresses, a network or subnet with ports still
//!   using it, a router with interfaces, a volume still attached — each
//!   refused in the service's own words.
//! - **It lives in memory**, like the simulated fleet: after a restart
//!   what was made before is forgotten, and a name or id naming it is
//!   taken as one the cloud had (made again, on first mention).

pub mod addresses;
mod machines;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Mutex;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use addresses::{Cidr, Pool};

/// The project owning the cloud's shared objects (external networks).
pub const CLOUD_PROJECT: &str = "";

/// What kind of object: each kind is its own namespace of names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Network,
    Subnet,
    Port,
    Router,
    SecurityGroup,
    FloatingIp,
    Volume,
    KeyPair,
    ServerGroup,
    Image,
    VolumeType,
}

impl Kind {
    /// The word the services use in their messages.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Network => "network",
            Kind::Subnet => "subnet",
            Kind::Port => "port",
            Kind::Router => "router",
            Kind::SecurityGroup => "security_group",
            Kind::FloatingIp => "floatingip",
            Kind::Volume => "volume",
            Kind::KeyPair => "key pair",
            Kind::ServerGroup => "server group",
            Kind::Image => "image",
            Kind::VolumeType => "volume type",
        }
    }

    /// Whether one nobody made is taken to be the cloud's own.
    fn assumed_when_named(self) -> bool {
        !matches!(self, Kind::Subnet | Kind::Port | Kind::FloatingIp)
    }
}

/// One object of the cloud: its fields are what the service would show.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub id: String,
    pub project: String,
    pub kind: Kind,
    pub fields: Map<String, Value>,
}

impl Object {
    pub fn name(&self) -> &str {
        self.fields
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    fn shared(&self) -> bool {
        self.project == CLOUD_PROJECT
            || self.fields.get("shared") == Some(&Value::Bool(true))
            || self.fields.get("visibility").and_then(Value::as_str) == Some("public")
            || self.fields.get("os-volume-type-access:is_public") == Some(&Value::Bool(true))
    }

    pub fn visible_to(&self, project: &str) -> bool {
        self.project == project || self.shared() || self.granted_to(project)
    }

    /// A private volume type is shared with the projects it names.
    fn granted_to(&self, project: &str) -> bool {
        self.kind == Kind::VolumeType
            && self
                .fields
                .get("access_projects")
                .and_then(Value::as_array)
                .is_some_and(|projects| projects.iter().any(|granted| granted == project))
    }
}

/// An address a port asks for: on a subnet, a given address, or both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FixedIp {
    pub subnet_id: Option<String>,
    pub ip_address: Option<String>,
}

/// The cloud itself.
#[derive(Debug, Default)]
pub struct SimulatedCloud {
    world: Mutex<World>,
}

impl SimulatedCloud {
    pub fn new() -> SimulatedCloud {
        SimulatedCloud::default()
    }

    /// Runs `change` on the cloud, alone: every call is one step a
    /// service would take atomically.
    pub fn with<R>(&self, change: impl FnOnce(&mut World) -> R) -> R {
        let mut world = self
            .world
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        change(&mut world)
    }
}

/// The objects, and which addresses of each subnet are taken.
#[derive(Debug, Default)]
pub struct World {
    objects: HashMap<String, Object>,
    /// Subnet id → the addresses given out of it.
    leases: HashMap<String, BTreeSet<u128>>,
    /// The objects taken to be the cloud's own (see the module's doc), and
    /// their subnets.
    assumed: BTreeSet<String>,
    /// The ports made for machines (deleted with their interface; the
    /// ports a machine was given stay).
    made_ports: HashSet<String>,
}

impl World {
    /// `project`'s view of the object `id` of `kind`.
    pub fn get(&self, project: &str, kind: Kind, id: &str) -> Option<&Object> {
        self.objects
            .get(id)
            .filter(|object| object.kind == kind && object.visible_to(project))
    }

    /// The object `id`, whoever owns it (for the rows that made it).
    pub fn get_any(&self, id: &str) -> Option<&Object> {
        self.objects.get(id)
    }

    /// The objects of `kind` named `name`, whoever owns them (for names a
    /// service keeps unique across the cloud).
    pub fn named_anywhere<'a>(
        &'a self,
        kind: Kind,
        name: &'a str,
    ) -> impl Iterator<Item = &'a Object> + 'a {
        self.objects
            .values()
            .filter(move |object| object.kind == kind && object.name() == name)
    }

    pub fn fields_mut(&mut self, id: &str) -> Option<&mut Map<String, Value>> {
        self.objects.get_mut(id).map(|object| &mut object.fields)
    }

    /// The objects of `kind` that `project` sees, matching `filter`.
    pub fn list<'a>(
        &'a self,
        project: &'a str,
        kind: Kind,
        filter: impl Fn(&Object) -> bool + 'a,
    ) -> impl Iterator<Item = &'a Object> + 'a {
        self.objects
            .values()
            .filter(move |object| object.kind == kind && object.visible_to(project))
            .filter(move |object| filter(object))
    }

    /// The id of the `kind` `project` names by `name_or_id`, as Heat's
    /// finders resolve it: an id first, then a unique name. One nobody
    /// made is taken to be the cloud's own (see the module's doc), unless
    /// it is another project's.
    pub fn find(&mut self, project: &str, kind: Kind, name_or_id: &str) -> Result<String, String> {
        self.find_as(project, kind, name_or_id, false)
    }

    /// [`World::find`] for a network that must be external (a floating
    /// IP's, a router's gateway): one assumed is the cloud's, shared.
    pub fn find_external_network(
        &mut self,
        project: &str,
        name_or_id: &str,
    ) -> Result<String, String> {
        let id = self.find_as(project, Kind::Network, name_or_id, true)?;
        let external = self.objects[&id].fields.get("router:external") == Some(&json!(true));
        if !external {
            return Err(format!("Network {id} is not a valid external network"));
        }
        Ok(id)
    }

    fn find_as(
        &mut self,
        project: &str,
        kind: Kind,
        name_or_id: &str,
        external: bool,
    ) -> Result<String, String> {
        let not_found = || {
            format!(
                "Unable to find {} with name or id '{name_or_id}'",
                kind.noun()
            )
        };
        if name_or_id.trim().is_empty() {
            return Err(not_found());
        }
        if let Some(object) = self
            .objects
            .get(name_or_id)
            .filter(|object| object.kind == kind)
        {
            return if object.visible_to(project) {
                Ok(object.id.clone())
            } else {
                Err(not_found())
            };
        }
        let named: Vec<&Object> = self
            .list(project, kind, |object| object.name() == name_or_id)
            .collect();
        match named.as_slice() {
            [one] => return Ok(one.id.clone()),
            [] => {}
            _ => {
                return Err(format!(
                    "Multiple {} matches found for name '{name_or_id}', use an ID to be more specific.",
                    kind.noun()
                ));
            }
        }
        if !kind.assumed_when_named() {
            return Err(not_found());
        }
        self.assume(project, kind, name_or_id, external)
    }

    /// Makes the object the cloud is taken to have had.
    fn assume(
        &mut self,
        project: &str,
        kind: Kind,
        name_or_id: &str,
        external: bool,
    ) -> Result<String, String> {
        let owner = if external { CLOUD_PROJECT } else { project };
        let given_id = Uuid::parse_str(name_or_id).is_ok();
        let id = if given_id {
            name_or_id.to_owned()
        } else {
            named_id(owner, kind, name_or_id).to_string()
        };
        let name = if given_id { "" } else { name_or_id };
        self.assumed.insert(id.clone());
        let mut fields = Map::new();
        fields.insert("name".to_owned(), json!(name));
        match kind {
            Kind::Network => {
                fields.extend(network_fields(owner, name, external));
                self.insert(Object {
                    id: id.clone(),
                    project: owner.to_owned(),
                    kind,
                    fields,
                });
                let cidr = if external {
                    "172.24.4.0/24".to_owned()
                } else {
                    let hash = named_id(owner, Kind::Subnet, &id);
                    let bytes = hash.as_bytes();
                    format!("10.{}.{}.0/24", bytes[0], bytes[1])
                };
                let subnet_id = named_id(owner, Kind::Subnet, &id).to_string();
                let subnet_name = format!("{}-subnet", if name.is_empty() { &id } else { name });
                let made = Cidr::parse(&cidr).and_then(|cidr| {
                    self.insert_subnet(
                        owner,
                        &subnet_id,
                        &id,
                        &subnet_name,
                        &cidr,
                        None,
                        None,
                        Map::new(),
                    )
                });
                if let Err(refused) = made {
                    // Nothing half made stays.
                    self.objects.remove(&id);
                    self.assumed.remove(&id);
                    return Err(refused);
                }
                self.assumed.insert(subnet_id);
            }
            Kind::SecurityGroup => {
                fields.insert("description".to_owned(), json!("Default security group"));
                fields.insert("tenant_id".to_owned(), json!(owner));
                fields.insert("project_id".to_owned(), json!(owner));
                fields.insert("stateful".to_owned(), json!(true));
                fields.insert("tags".to_owned(), json!([]));
                let rules = ["IPv4", "IPv6"]
                    .iter()
                    .map(|ethertype| {
                        json!({"id": Uuid::new_v4().to_string(), "direction": "egress",
                        "ethertype": ethertype, "protocol": null, "port_range_min": null,
                        "port_range_max": null, "remote_ip_prefix": null,
                        "remote_group_id": null, "security_group_id": id})
                    })
                    .collect::<Vec<_>>();
                fields.insert("security_group_rules".to_owned(), json!(rules));
                self.insert(Object {
                    id: id.clone(),
                    project: owner.to_owned(),
                    kind,
                    fields,
                });
            }
            Kind::Router => {
                fields.extend(router_fields(owner, Value::Null));
                self.insert(Object {
                    id: id.clone(),
                    project: owner.to_owned(),
                    kind,
                    fields,
                });
            }
            Kind::Image => {
                fields.insert("status".to_owned(), json!("active"));
                fields.insert("visibility".to_owned(), json!("private"));
                fields.insert("owner".to_owned(), json!(owner));
                fields.insert("disk_format".to_owned(), json!("qcow2"));
                fields.insert("container_format".to_owned(), json!("bare"));
                fields.insert("protected".to_owned(), json!(false));
                self.insert(Object {
                    id: id.clone(),
                    project: owner.to_owned(),
                    kind,
                    fields,
                });
            }
            Kind::Volume => {
                fields.insert("status".to_owned(), json!("available"));
                fields.insert("size".to_owned(), json!(1));
                fields.insert("attachments".to_owned(), json!([]));
                self.insert(Object {
                    id: id.clone(),
                    project: owner.to_owned(),
                    kind,
                    fields,
                });
            }
            Kind::VolumeType => {
                // The cloud's own types are public.
                fields.insert("is_public".to_owned(), json!(true));
                fields.insert("os-volume-type-access:is_public".to_owned(), json!(true));
                fields.insert("extra_specs".to_owned(), json!({}));
                self.insert(Object {
                    id: id.clone(),
                    project: owner.to_owned(),
                    kind,
                    fields,
                });
            }
            Kind::KeyPair | Kind::ServerGroup | Kind::Subnet | Kind::Port | Kind::FloatingIp => {
                self.insert(Object {
                    id: id.clone(),
                    project: owner.to_owned(),
                    kind,
                    fields,
                });
            }
        }
        Ok(id)
    }

    /// Whether `id` is one the cloud was taken to have had: its networks
    /// are routed to every external network, as DevStack's `private` is
    /// to `public`.
    pub fn is_assumed(&self, id: &str) -> bool {
        self.assumed.contains(id)
    }

    /// Puts `object` in the cloud, replacing one of its id (a create run
    /// again makes the same object).
    pub fn insert(&mut self, object: Object) {
        self.objects.insert(object.id.clone(), object);
    }

    /// Makes a subnet of `network_id`, checking its range as Neutron does.
    #[allow(clippy::too_many_arguments)]
    pub fn insert_subnet(
        &mut self,
        project: &str,
        id: &str,
        network_id: &str,
        name: &str,
        cidr: &Cidr,
        gateway: Option<Option<IpAddr>>,
        pools: Option<Vec<Pool>>,
        extra: Map<String, Value>,
    ) -> Result<Map<String, Value>, String> {
        if let Some(clash) = self
            .list(project, Kind::Subnet, |subnet| {
                subnet.fields.get("network_id").and_then(Value::as_str) == Some(network_id)
                    && subnet.id != id
            })
            .find_map(|subnet| {
                let other = Cidr::parse(subnet.fields.get("cidr")?.as_str()?).ok()?;
                (other.contains(cidr.network) || cidr.contains(other.network))
                    .then(|| (subnet.id.clone(), other))
            })
        {
            return Err(format!(
                "Invalid input for operation: Requested subnet with cidr: {cidr} for network: {network_id} overlaps with another subnet: {} ({}).",
                clash.1, clash.0
            ));
        }
        let gateway = gateway.unwrap_or_else(|| Some(cidr.default_gateway()));
        if let Some(gateway) = gateway
            && !cidr.contains(gateway)
        {
            return Err(format!(
                "Invalid input for operation: Gateway IP {gateway} conflicts with subnet {cidr}."
            ));
        }
        let pools = pools.unwrap_or_else(|| addresses::default_pools(cidr, gateway));
        for pool in &pools {
            if !cidr.contains(cidr.address(pool.start))
                || !cidr.contains(cidr.address(pool.end))
                || pool.start > pool.end
            {
                return Err(format!(
                    "Invalid input for operation: The allocation pool {}-{} spans beyond the subnet cidr {cidr}.",
                    cidr.address(pool.start),
                    cidr.address(pool.end)
                ));
            }
        }
        let mut fields = Map::new();
        fields.insert("name".to_owned(), json!(name));
        fields.insert("network_id".to_owned(), json!(network_id));
        fields.insert("tenant_id".to_owned(), json!(project));
        fields.insert("project_id".to_owned(), json!(project));
        fields.insert("cidr".to_owned(), json!(cidr.to_string()));
        fields.insert("ip_version".to_owned(), json!(cidr.version()));
        fields.insert(
            "gateway_ip".to_owned(),
            json!(gateway.map(|gateway| gateway.to_string())),
        );
        fields.insert(
            "allocation_pools".to_owned(),
            json!(
                pools
                    .iter()
                    .map(|pool| json!({
                "start": cidr.address(pool.start).to_string(),
                "end": cidr.address(pool.end).to_string()}))
                    .collect::<Vec<_>>()
            ),
        );
        for (key, default) in [
            ("dns_nameservers", json!([])),
            ("host_routes", json!([])),
            ("enable_dhcp", json!(true)),
            ("ipv6_ra_mode", Value::Null),
            ("ipv6_address_mode", Value::Null),
            ("subnetpool_id", Value::Null),
            ("segment_id", Value::Null),
            ("tags", json!([])),
            ("description", json!("")),
        ] {
            fields.insert(key.to_owned(), extra.get(key).cloned().unwrap_or(default));
        }
        self.insert(Object {
            id: id.to_owned(),
            project: project.to_owned(),
            kind: Kind::Subnet,
            fields: fields.clone(),
        });
        self.leases.entry(id.to_owned()).or_default();
        self.refresh_network(network_id);
        Ok(fields)
    }

    /// Gives a port its addresses on `network_id`: those asked for, or one
    /// from the network's first IPv4 and first IPv6 subnet.
    pub fn allocate(
        &mut self,
        project: &str,
        network_id: &str,
        wanted: &[FixedIp],
    ) -> Result<Vec<Value>, String> {
        let subnets: Vec<(String, Cidr, Vec<Pool>)> = self
            .list(project, Kind::Subnet, |subnet| {
                subnet.fields.get("network_id").and_then(Value::as_str) == Some(network_id)
            })
            .filter_map(|subnet| Some((subnet.id.clone(), subnet_range(subnet)?)))
            .map(|(id, (cidr, pools))| (id, cidr, pools))
            .collect();
        let mut chosen: Vec<(String, Cidr, Option<IpAddr>, Vec<Pool>)> = Vec::new();
        if wanted.is_empty() {
            for version in [4, 6] {
                if let Some((id, cidr, pools)) = subnets
                    .iter()
                    .filter(|(_, cidr, _)| cidr.version() == version)
                    .min_by(|a, b| a.0.cmp(&b.0))
                {
                    chosen.push((id.clone(), *cidr, None, pools.clone()));
                }
            }
        }
        for request in wanted {
            let address = match &request.ip_address {
                Some(text) => Some(text.parse::<IpAddr>().map_err(|_| {
                    format!("Invalid input for operation: '{text}' is not a valid IP address.")
                })?),
                None => None,
            };
            let subnet = subnets
                .iter()
                .find(|(id, cidr, _)| match (&request.subnet_id, address) {
                    (Some(subnet), _) => id == subnet,
                    (None, Some(address)) => cidr.contains(address),
                    (None, None) => true,
                });
            let Some((id, cidr, pools)) = subnet else {
                return Err(match (&request.subnet_id, address) {
                    (Some(subnet), _) => format!(
                        "Invalid input for operation: Failed to create port on network {network_id}, because fixed_ips included invalid subnet {subnet}."
                    ),
                    (None, Some(address)) => format!(
                        "Invalid input for operation: IP address {address} is not a valid IP for any of the subnets on the specified network."
                    ),
                    (None, None) => {
                        format!("No subnet on network {network_id} to give an address from.")
                    }
                });
            };
            if let Some(address) = address
                && !cidr.contains(address)
            {
                return Err(format!(
                    "Invalid input for operation: IP address {address} is not a valid IP for the specified subnet."
                ));
            }
            chosen.push((id.clone(), *cidr, address, pools.clone()));
        }
        let mut given: Vec<(String, u128)> = Vec::new();
        let mut result = Vec::new();
        for (subnet, cidr, address, pools) in chosen {
            let taken = self.leases.entry(subnet.clone()).or_default();
            let number = match address {
                Some(address) => {
                    let number = addresses::to_number(address);
                    if taken.contains(&number) {
                        for (subnet, number) in given {
                            self.release(&subnet, number);
                        }
                        return Err(format!(
                            "IP address {address} already allocated in subnet {subnet}"
                        ));
                    }
                    number
                }
                None => match addresses::next_free(&pools, taken) {
                    Some(number) => number,
                    None => {
                        for (subnet, number) in given {
                            self.release(&subnet, number);
                        }
                        return Err(format!(
                            "No more IP addresses available on network {network_id}."
                        ));
                    }
                },
            };
            taken.insert(number);
            given.push((subnet.clone(), number));
            result
                .push(json!({"subnet_id": subnet, "ip_address": cidr.address(number).to_string()}));
        }
        Ok(result)
    }

    /// Gives back the addresses `fixed_ips` (a port's) took.
    pub fn release_all(&mut self, fixed_ips: &Value) {
        for fixed_ip in fixed_ips.as_array().into_iter().flatten() {
            let (Some(subnet), Some(address)) = (
                fixed_ip.get("subnet_id").and_then(Value::as_str),
                fixed_ip
                    .get("ip_address")
                    .and_then(Value::as_str)
                    .and_then(|address| address.parse::<IpAddr>().ok()),
            ) else {
                continue;
            };
            self.release(subnet, addresses::to_number(address));
        }
    }

    fn release(&mut self, subnet: &str, number: u128) {
        if let Some(taken) = self.leases.get_mut(subnet) {
            taken.remove(&number);
        }
    }

    /// Takes the object `id` away, as its service's delete would: refused
    /// while something still uses it.
    pub fn remove(&mut self, id: &str) -> Result<Option<Object>, String> {
        let Some(object) = self.objects.get(id).cloned() else {
            return Ok(None);
        };
        match object.kind {
            Kind::Network => {
                let in_use = self.objects.values().any(|port| {
                    port.kind == Kind::Port
                        && port.fields.get("network_id").and_then(Value::as_str) == Some(id)
                });
                if in_use {
                    return Err(format!(
                        "Unable to complete operation on network {id}. There are one or more ports still in use on the network."
                    ));
                }
                let subnets: Vec<String> = self
                    .objects
                    .values()
                    .filter(|subnet| {
                        subnet.kind == Kind::Subnet
                            && subnet.fields.get("network_id").and_then(Value::as_str) == Some(id)
                    })
                    .map(|subnet| subnet.id.clone())
                    .collect();
                for subnet in subnets {
                    self.objects.remove(&subnet);
                    self.leases.remove(&subnet);
                }
            }
            Kind::Subnet => {
                if self.leases.get(id).is_some_and(|taken| !taken.is_empty()) {
                    return Err(format!(
                        "Unable to complete operation on subnet {id}: One or more ports have an IP allocation from this subnet."
                    ));
                }
                self.leases.remove(id);
            }
            Kind::Port => {
                if let Some(fixed_ips) = object.fields.get("fixed_ips") {
                    self.release_all(fixed_ips);
                }
                for floating in self.objects.values_mut() {
                    if floating.kind == Kind::FloatingIp
                        && floating.fields.get("port_id").and_then(Value::as_str) == Some(id)
                    {
                        disassociate(&mut floating.fields);
                    }
                }
            }
            Kind::Router => {
                let interfaces = self.objects.values().any(|port| {
                    port.kind == Kind::Port
                        && port.fields.get("device_id").and_then(Value::as_str) == Some(id)
                        && port.fields.get("device_owner").and_then(Value::as_str)
                            == Some("network:router_interface")
                });
                if interfaces {
                    return Err(format!("Router {id} still has ports"));
                }
                if let Some(gateway) = object.fields.get("external_gateway_info") {
                    self.release_all(&gateway["external_fixed_ips"]);
                }
            }
            Kind::FloatingIp => {
                let network = object
                    .fields
                    .get("floating_network_id")
                    .and_then(Value::as_str);
                let address = object
                    .fields
                    .get("floating_ip_address")
                    .and_then(Value::as_str)
                    .and_then(|address| address.parse::<IpAddr>().ok());
                if let (Some(network), Some(address)) = (network, address) {
                    let subnet = self
                        .objects
                        .values()
                        .filter(|subnet| {
                            subnet.kind == Kind::Subnet
                                && subnet.fields.get("network_id").and_then(Value::as_str)
                                    == Some(network)
                        })
                        .find(|subnet| {
                            subnet_range(subnet).is_some_and(|(cidr, _)| cidr.contains(address))
                        })
                        .map(|subnet| subnet.id.clone());
                    if let Some(subnet) = subnet {
                        self.release(&subnet, addresses::to_number(address));
                    }
                }
            }
            Kind::Volume => {
                let attached = object
                    .fields
                    .get("attachments")
                    .and_then(Value::as_array)
                    .is_some_and(|attachments| !attachments.is_empty());
                if attached {
                    return Err(format!(
                        "Invalid volume: Volume {id} status must be available or error or error_restoring or error_extending or error_managing and must not be migrating, attached, belong to a group, have snapshots, awaiting a transfer, or be disassociated from snapshots after volume transfer."
                    ));
                }
            }
            Kind::Image => {
                if object.fields.get("protected") == Some(&json!(true)) {
                    return Err(format!("Image {id} is protected and cannot be deleted."));
                }
            }
            Kind::VolumeType => {
                let in_use = self.objects.values().any(|volume| {
                    volume.kind == Kind::Volume
                        && volume
                            .fields
                            .get("volume_type")
                            .and_then(Value::as_str)
                            .is_some_and(|volume_type| {
                                volume_type == id || volume_type == object.name()
                            })
                });
                if in_use {
                    return Err("Target volume type is still in use.".to_owned());
                }
            }
            Kind::SecurityGroup | Kind::KeyPair | Kind::ServerGroup => {}
        }
        let removed = self.objects.remove(id);
        if object.kind == Kind::Subnet
            && let Some(network) = object.fields.get("network_id").and_then(Value::as_str)
        {
            self.refresh_network(network);
        }
        Ok(removed)
    }

    /// Keeps a network's `subnets` what its subnets are.
    fn refresh_network(&mut self, network_id: &str) {
        let mut subnets: Vec<String> = self
            .objects
            .values()
            .filter(|subnet| {
                subnet.kind == Kind::Subnet
                    && subnet.fields.get("network_id").and_then(Value::as_str) == Some(network_id)
            })
            .map(|subnet| subnet.id.clone())
            .collect();
        subnets.sort();
        if let Some(network) = self.objects.get_mut(network_id) {
            network.fields.insert("subnets".to_owned(), json!(subnets));
        }
    }

    /// The name of the network `id` (`project`'s view), for addresses.
    pub fn network_name(&self, project: &str, id: &str) -> String {
        self.get(project, Kind::Network, id)
            .map(|network| network.name().to_owned())
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| id.to_owned())
    }
}

/// The fields of a network as Neutron shows a new one.
pub fn network_fields(project: &str, name: &str, external: bool) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("name".to_owned(), json!(name));
    fields.insert("status".to_owned(), json!("ACTIVE"));
    fields.insert("admin_state_up".to_owned(), json!(true));
    fields.insert("shared".to_owned(), json!(external));
    fields.insert("router:external".to_owned(), json!(external));
    fields.insert("tenant_id".to_owned(), json!(project));
    fields.insert("project_id".to_owned(), json!(project));
    fields.insert("subnets".to_owned(), json!([]));
    fields.insert("mtu".to_owned(), json!(1450));
    fields.insert("port_security_enabled".to_owned(), json!(true));
    fields.insert("qos_policy_id".to_owned(), Value::Null);
    fields.insert("l2_adjacency".to_owned(), json!(true));
    fields.insert("segments".to_owned(), json!([]));
    fields.insert("availability_zone_hints".to_owned(), json!([]));
    fields.insert("availability_zones".to_owned(), json!(["nova"]));
    fields.insert("dns_domain".to_owned(), json!(""));
    fields.insert("tags".to_owned(), json!([]));
    fields.insert("description".to_owned(), json!(""));
    fields
}

/// The fields of a router as Neutron shows a new one.
pub fn router_fields(project: &str, gateway: Value) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("status".to_owned(), json!("ACTIVE"));
    fields.insert("admin_state_up".to_owned(), json!(true));
    fields.insert("external_gateway_info".to_owned(), gateway);
    fields.insert("tenant_id".to_owned(), json!(project));
    fields.insert("project_id".to_owned(), json!(project));
    fields.insert("distributed".to_owned(), json!(false));
    fields.insert("ha".to_owned(), json!(false));
    fields.insert("routes".to_owned(), json!([]));
    fields.insert("availability_zone_hints".to_owned(), json!([]));
    fields.insert("availability_zones".to_owned(), json!(["nova"]));
    fields.insert("tags".to_owned(), json!([]));
    fields.insert("description".to_owned(), json!(""));
    fields
}

/// A floating IP no longer forwarded to a port.
pub fn disassociate(fields: &mut Map<String, Value>) {
    fields.insert("port_id".to_owned(), Value::Null);
    fields.insert("fixed_ip_address".to_owned(), Value::Null);
    fields.insert("router_id".to_owned(), Value::Null);
    fields.insert("status".to_owned(), json!("DOWN"));
}

/// A subnet's range and pools, as recorded.
pub fn subnet_range(subnet: &Object) -> Option<(Cidr, Vec<Pool>)> {
    let cidr = Cidr::parse(subnet.fields.get("cidr")?.as_str()?).ok()?;
    let pools = subnet
        .fields
        .get("allocation_pools")?
        .as_array()?
        .iter()
        .filter_map(|pool| {
            let start: IpAddr = pool.get("start")?.as_str()?.parse().ok()?;
            let end: IpAddr = pool.get("end")?.as_str()?.parse().ok()?;
            Some(Pool {
                start: addresses::to_number(start),
                end: addresses::to_number(end),
            })
        })
        .collect();
    Some((cidr, pools))
}

/// A MAC address in Neutron's default range (`fa:16:3e`), from an id.
pub fn mac_address(id: &str) -> String {
    let digest = Sha256::digest(id.as_bytes());
    format!(
        "fa:16:3e:{:02x}:{:02x}:{:02x}",
        digest[0], digest[1], digest[2]
    )
}

/// The id of what the cloud is taken to have had, named `name`: the same
/// for every mention in one project, different between projects.
fn named_id(project: &str, kind: Kind, name: &str) -> Uuid {
    let mut hasher = Sha256::new();
    hasher.update(b"ember simulated cloud\0");
    hasher.update(kind.noun().as_bytes());
    hasher.update([0]);
    hasher.update(project.as_bytes());
    hasher.update([0]);
    hasher.update(name.as_bytes());
    let digest = hasher.finalize();
    let mut bytes = [0_u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_network_is_assumed_once_per_project_and_another_projects_id_is_not_found() {
        let mut world = World::default();
        let ours = world.find("p1", Kind::Network, "private").expect("assumed");
        assert_eq!(world.find("p1", Kind::Network, "private"), Ok(ours.clone()));
        let theirs = world.find("p2", Kind::Network, "private").expect("assumed");
        assert_ne!(ours, theirs);
        assert_eq!(
            world.find("p2", Kind::Network, &ours),
            Err(format!("Unable to find network with name or id '{ours}'"))
        );
        let subnets =
            world.get("p1", Kind::Network, &ours).expect("seen").fields["subnets"].clone();
        assert_eq!(subnets.as_array().map(Vec::len), Some(1));
        assert!(world.find("p1", Kind::Subnet, "nothing").is_err());
    }

    #[test]
    fn an_external_network_is_the_clouds_and_every_project_sees_it() {
        let mut world = World::default();
        let public = world
            .find_external_network("p1", "public")
            .expect("assumed");
        assert_eq!(
            world.find_external_network("p2", "public"),
            Ok(public.clone())
        );
        let private = world.find("p1", Kind::Network, "private").expect("assumed");
        assert!(world.find_external_network("p1", &private).is_err());
    }

    #[test]
    fn addresses_are_unique_and_given_back_and_a_used_subnet_stays() {
        let mut world = World::default();
        let network = world.find("p", Kind::Network, "n").expect("assumed");
        let first = world.allocate("p", &network, &[]).expect("one");
        let second = world.allocate("p", &network, &[]).expect("two");
        assert_ne!(first, second);
        let taken = first[0]["ip_address"].as_str().expect("ip").to_owned();
        let again = world.allocate(
            "p",
            &network,
            &[FixedIp {
                subnet_id: None,
                ip_address: Some(taken.clone()),
            }],
        );
        assert!(again.expect_err("taken").contains("already allocated"));
        world.release_all(&json!(first));
        let reused = world
            .allocate(
                "p",
                &network,
                &[FixedIp {
                    subnet_id: None,
                    ip_address: Some(taken),
                }],
            )
            .expect("free again");
        assert_eq!(json!(reused), json!(first));
        let subnet = first[0]["subnet_id"].as_str().expect("subnet").to_owned();
        assert!(
            world
                .remove(&subnet)
                .expect_err("in use")
                .contains("IP allocation")
        );
    }
}
