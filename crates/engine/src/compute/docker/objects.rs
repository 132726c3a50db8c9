//! The docker backend's networks, ports and volumes as objects of the
//! container engine, each carrying Ember's labels (its kind, its Ember id,
//! its project and its name), so a create that runs again finds what an
//! earlier try made, and a project's look-up by name or id never finds
//! another project's object.
//!
//! | Ember | container engine |
//! |---|---|
//! | `OS::Neutron::Net` | a bridge network `<prefix>net-<id>` (the engine picks its addresses) |
//! | `OS::Neutron::Subnet` | the net's network made again as `<prefix>subnet-<id>` with the subnet's CIDR and gateway (the bare one then removed) |
//! | `OS::Neutron::Port` | a record (an empty volume `<prefix>port-<id>` labelled with its network, IPv4 address and MAC address), plugged as an endpoint by the server |
//! | `OS::Cinder::Volume` | a named volume `<prefix>vol-<id>` |
//!
//! A container network takes its subnet when it is made, so a subnet makes
//! its net's network again — only while nothing is plugged into it — and
//! both carry the net's id: during the change, a look-up takes the one
//! with the subnet.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;

use bollard::Docker;
use bollard::models::{
    ContainerInspectResponse, Ipam, IpamConfig, Network, NetworkCreateRequest,
    Volume as EngineVolume, VolumeCreateRequest,
};
use bollard::query_parameters::{
    ListContainersOptions, ListNetworksOptions, ListVolumesOptions, RemoveVolumeOptions,
};
use serde_json::{Value, json};

use super::spec::{Endpoint, PROJECT_ID_LABEL};
use super::{DockerEngine, state};
use crate::compute::ComputeError;
use crate::domain::instance::Instance;
use crate::domain::instance::placement::NetworkRequest;

pub const KIND_LABEL: &str = "ember.kind";
pub const OBJECT_ID_LABEL: &str = "ember.object_id";
pub const NAME_LABEL: &str = "ember.name";
pub const SUBNET_ID_LABEL: &str = "ember.subnet_id";
pub const SUBNET_NAME_LABEL: &str = "ember.subnet_name";
pub const NETWORK_ID_LABEL: &str = "ember.network_id";
pub const IP_ADDRESS_LABEL: &str = "ember.ip_address";
pub const MAC_ADDRESS_LABEL: &str = "ember.mac_address";
pub const SIZE_LABEL: &str = "ember.size_gb";
pub const MULTIATTACH_LABEL: &str = "ember.multiattach";
pub const READ_ONLY_LABEL: &str = "ember.read_only";

/// What kind of Ember object an engine object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    Network,
    Port,
    Volume,
}

impl ObjectKind {
    pub fn label(self) -> &'static str {
        match self {
            ObjectKind::Network => "network",
            ObjectKind::Port => "port",
            ObjectKind::Volume => "volume",
        }
    }
}

/// An IPv4 network in CIDR notation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Cidr {
    pub network: Ipv4Addr,
    pub prefix: u8,
}

impl Ipv4Cidr {
    /// `10.0.0.0/24`; host bits are cleared (`10.0.0.7/24` is
    /// `10.0.0.0/24`, as Neutron takes it).
    pub fn parse(text: &str) -> Result<Ipv4Cidr, String> {
        let (address, prefix) = text
            .split_once('/')
            .ok_or_else(|| format!("{text:?} is not an IPv4 CIDR (address/prefix)"))?;
        let address: Ipv4Addr = address.trim().parse().map_err(|_| {
            format!("{text:?} is not an IPv4 CIDR: {address:?} is not an IPv4 address")
        })?;
        let prefix: u8 = prefix
            .trim()
            .parse()
            .ok()
            .filter(|prefix| *prefix <= 32)
            .ok_or_else(|| format!("{text:?} is not an IPv4 CIDR: the prefix must be 0 to 32"))?;
        let mask = Self::mask(prefix);
        Ok(Ipv4Cidr {
            network: Ipv4Addr::from(u32::from(address) & mask),
            prefix,
        })
    }

    fn mask(prefix: u8) -> u32 {
        if prefix == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(prefix))
        }
    }

    pub fn contains(&self, address: Ipv4Addr) -> bool {
        u32::from(address) & Self::mask(self.prefix) == u32::from(self.network)
    }

    pub fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) | !Self::mask(self.prefix))
    }

    /// The addresses a machine may have: all but the network's own and
    /// the broadcast address.
    pub fn hosts(&self) -> impl Iterator<Item = Ipv4Addr> + use<> {
        let first = u32::from(self.network).saturating_add(1);
        let last = u32::from(self.broadcast()).saturating_sub(1);
        (first..=last).map(Ipv4Addr::from)
    }

    /// Whether `address` is one a machine may have here.
    pub fn is_host(&self, address: Ipv4Addr) -> bool {
        self.contains(address) && address != self.network && address != self.broadcast()
    }
}

impl std::fmt::Display for Ipv4Cidr {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}/{}", self.network, self.prefix)
    }
}

/// A subnet a container network was made with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubnetRecord {
    pub id: String,
    pub name: String,
}

/// A net's container network, as its labels and IPAM say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkObject {
    /// The container network's name.
    pub container_network: String,
    /// The net's Ember id.
    pub id: String,
    pub name: String,
    pub project_id: String,
    /// The subnet that made this network, if one did.
    pub subnet: Option<SubnetRecord>,
    /// The network's IPv4 subnet and gateway, as the engine shows them.
    pub cidr: Option<Ipv4Cidr>,
    pub gateway: Option<Ipv4Addr>,
}

/// A port's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortObject {
    pub id: String,
    pub name: String,
    pub project_id: String,
    /// The Ember id of its net.
    pub network_id: String,
    pub subnet_id: String,
    pub ip_address: String,
    pub mac_address: String,
}

/// A container volume made for a volume resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeObject {
    /// The container volume's name.
    pub volume_name: String,
    pub id: String,
    pub name: String,
    pub project_id: String,
    pub size_gb: u64,
    pub multiattach: bool,
    pub read_only: bool,
    pub created_at: String,
}

/// Why an object could not be removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoveError {
    /// Containers still use it (named).
    InUse(Vec<String>),
    Failed(ComputeError),
}

fn label(labels: &HashMap<String, String>, key: &str) -> String {
    labels.get(key).cloned().unwrap_or_default()
}

fn network_object(network: &Network) -> Option<NetworkObject> {
    let labels = network.labels.as_ref()?;
    if labels.get(KIND_LABEL).map(String::as_str) != Some(ObjectKind::Network.label()) {
        return None;
    }
    let config = network
        .ipam
        .as_ref()
        .and_then(|ipam| ipam.config.as_ref())
        .and_then(|configs| {
            configs.iter().find(|config| {
                config
                    .subnet
                    .as_deref()
                    .is_some_and(|subnet| Ipv4Cidr::parse(subnet).is_ok())
            })
        });
    let subnet_id = label(labels, SUBNET_ID_LABEL);
    Some(NetworkObject {
        container_network: network.name.clone()?,
        id: label(labels, OBJECT_ID_LABEL),
        name: label(labels, NAME_LABEL),
        project_id: label(labels, PROJECT_ID_LABEL),
        subnet: (!subnet_id.is_empty()).then(|| SubnetRecord {
            id: subnet_id,
            name: label(labels, SUBNET_NAME_LABEL),
        }),
        cidr: config
            .and_then(|config| config.subnet.as_deref())
            .and_then(|subnet| Ipv4Cidr::parse(subnet).ok()),
        gateway: config
            .and_then(|config| config.gateway.as_deref())
            .and_then(|gateway| gateway.parse().ok()),
    })
}

fn port_object(volume: &EngineVolume) -> Option<PortObject> {
    let labels = &volume.labels;
    if labels.get(KIND_LABEL).map(String::as_str) != Some(ObjectKind::Port.label()) {
        return None;
    }
    Some(PortObject {
        id: label(labels, OBJECT_ID_LABEL),
        name: label(labels, NAME_LABEL),
        project_id: label(labels, PROJECT_ID_LABEL),
        network_id: label(labels, NETWORK_ID_LABEL),
        subnet_id: label(labels, SUBNET_ID_LABEL),
        ip_address: label(labels, IP_ADDRESS_LABEL),
        mac_address: label(labels, MAC_ADDRESS_LABEL),
    })
}

fn volume_object(volume: &EngineVolume) -> Option<VolumeObject> {
    let labels = &volume.labels;
    if labels.get(KIND_LABEL).map(String::as_str) != Some(ObjectKind::Volume.label()) {
        return None;
    }
    Some(VolumeObject {
        volume_name: volume.name.clone(),
        id: label(labels, OBJECT_ID_LABEL),
        name: label(labels, NAME_LABEL),
        project_id: label(labels, PROJECT_ID_LABEL),
        size_gb: label(labels, SIZE_LABEL).parse().unwrap_or(1),
        multiattach: label(labels, MULTIATTACH_LABEL) == "true",
        read_only: label(labels, READ_ONLY_LABEL) == "true",
        created_at: volume
            .created_at
            .as_ref()
            .map(|date| date.to_string())
            .unwrap_or_default(),
    })
}

/// The one object `name_or_id` names among `objects` (by id first, then
/// by name), in Neutron's words when there is none or more than one.
fn pick<T: Clone>(
    objects: &[T],
    noun: &str,
    name_or_id: &str,
    id: impl Fn(&T) -> &str,
    name: impl Fn(&T) -> &str,
) -> Result<T, ComputeError> {
    if let Some(found) = objects.iter().find(|object| id(object) == name_or_id) {
        return Ok(found.clone());
    }
    let named: Vec<&T> = objects
        .iter()
        .filter(|object| name(object) == name_or_id)
        .collect();
    let mut ids: Vec<&str> = named.iter().map(|object| id(object)).collect();
    ids.sort_unstable();
    ids.dedup();
    match (named.first(), ids.len()) {
        (Some(found), 1) => Ok((*found).clone()),
        (None, _) => Err(ComputeError(format!(
            "Unable to find {noun} with name or id '{name_or_id}'"
        ))),
        _ => Err(ComputeError(format!(
            "Multiple {noun} matches found for name '{name_or_id}', use an ID to be more specific."
        ))),
    }
}

fn kind_filter(kind: ObjectKind) -> HashMap<String, Vec<String>> {
    HashMap::from([(
        "label".to_owned(),
        vec![format!("{KIND_LABEL}={}", kind.label())],
    )])
}

impl DockerEngine {
    /// The container network of the net `id` is made as first, without a
    /// subnet.
    pub fn bare_network_name(&self, id: &str) -> String {
        format!("{}net-{id}", self.config.name_prefix)
    }

    /// The container network a subnet makes its net's network again as.
    pub fn subnet_network_name(&self, subnet_id: &str) -> String {
        format!("{}subnet-{subnet_id}", self.config.name_prefix)
    }

    pub fn port_record_name(&self, id: &str) -> String {
        format!("{}port-{id}", self.config.name_prefix)
    }

    pub fn volume_name(&self, id: &str) -> String {
        format!("{}vol-{id}", self.config.name_prefix)
    }

    /// Every container network Ember made for a net (a net being given
    /// its subnet has two: the one with the subnet comes first).
    async fn labelled_networks(&self) -> Result<Vec<NetworkObject>, ComputeError> {
        let docker = self.client().await?;
        let options = ListNetworksOptions {
            filters: Some(kind_filter(ObjectKind::Network)),
        };
        let networks = docker
            .list_networks(Some(options))
            .await
            .map_err(|error| self.failure("cannot list container networks", &error))?;
        let mut found: Vec<NetworkObject> = networks
            .iter()
            .filter_map(network_object)
            .filter(|network| !network.id.is_empty())
            .collect();
        found.sort_by_key(|network| network.subnet.is_none());
        Ok(found)
    }

    /// Every container network of `project`'s nets.
    pub async fn project_networks(
        &self,
        project_id: &str,
    ) -> Result<Vec<NetworkObject>, ComputeError> {
        Ok(self
            .labelled_networks()
            .await?
            .into_iter()
            .filter(|network| network.project_id == project_id)
            .collect())
    }

    /// The container networks of the net `id`, whatever its project (ids
    /// are Ember's own, derived per resource row: for deleting).
    pub async fn networks_with_id(&self, id: &str) -> Result<Vec<NetworkObject>, ComputeError> {
        Ok(self
            .labelled_networks()
            .await?
            .into_iter()
            .filter(|network| network.id == id)
            .collect())
    }

    /// The container network named `container_network`, if Ember made it
    /// for a net.
    pub async fn network_named(
        &self,
        container_network: &str,
    ) -> Result<Option<NetworkObject>, ComputeError> {
        let docker = self.client().await?;
        self.inspect_network_object(docker, container_network).await
    }

    /// The container networks of `project`'s net `id` (the one with a
    /// subnet first).
    pub async fn networks_of(
        &self,
        project_id: &str,
        id: &str,
    ) -> Result<Vec<NetworkObject>, ComputeError> {
        Ok(self
            .project_networks(project_id)
            .await?
            .into_iter()
            .filter(|network| network.id == id)
            .collect())
    }

    /// `project`'s net named (or with the id) `name_or_id`.
    pub async fn find_network(
        &self,
        project_id: &str,
        name_or_id: &str,
    ) -> Result<NetworkObject, ComputeError> {
        let networks = self.project_networks(project_id).await?;
        pick(
            &networks,
            "network",
            name_or_id,
            |network| &network.id,
            |network| &network.name,
        )
    }

    /// `project`'s net whose subnet is named (or has the id) `name_or_id`.
    pub async fn find_subnet(
        &self,
        project_id: &str,
        name_or_id: &str,
    ) -> Result<NetworkObject, ComputeError> {
        let networks: Vec<NetworkObject> = self
            .project_networks(project_id)
            .await?
            .into_iter()
            .filter(|network| network.subnet.is_some())
            .collect();
        let subnet_id = |network: &NetworkObject| -> String {
            network
                .subnet
                .as_ref()
                .map(|subnet| subnet.id.clone())
                .unwrap_or_default()
        };
        let subnet_name = |network: &NetworkObject| -> String {
            network
                .subnet
                .as_ref()
                .map(|subnet| subnet.name.clone())
                .unwrap_or_default()
        };
        let ids: Vec<(String, String, NetworkObject)> = networks
            .into_iter()
            .map(|network| (subnet_id(&network), subnet_name(&network), network))
            .collect();
        pick(
            &ids,
            "subnet",
            name_or_id,
            |entry| &entry.0,
            |entry| &entry.1,
        )
        .map(|entry| entry.2)
    }

    /// Makes (or finds, made by an earlier try) a container network for
    /// the net `id`: bare, or with `subnet`'s CIDR and gateway.
    pub async fn make_network(
        &self,
        project_id: &str,
        id: &str,
        name: &str,
        subnet: Option<(&SubnetRecord, Ipv4Cidr, Ipv4Addr)>,
    ) -> Result<NetworkObject, ComputeError> {
        let docker = self.client().await?;
        let container_network = match subnet {
            Some((record, _, _)) => self.subnet_network_name(&record.id),
            None => self.bare_network_name(id),
        };
        if let Some(found) = self
            .inspect_network_object(docker, &container_network)
            .await?
        {
            return Ok(found);
        }
        let mut labels = HashMap::from([
            (
                KIND_LABEL.to_owned(),
                ObjectKind::Network.label().to_owned(),
            ),
            (OBJECT_ID_LABEL.to_owned(), id.to_owned()),
            (PROJECT_ID_LABEL.to_owned(), project_id.to_owned()),
            (NAME_LABEL.to_owned(), name.to_owned()),
        ]);
        let ipam = subnet.map(|(record, cidr, gateway)| {
            labels.insert(SUBNET_ID_LABEL.to_owned(), record.id.clone());
            labels.insert(SUBNET_NAME_LABEL.to_owned(), record.name.clone());
            Ipam {
                config: Some(vec![IpamConfig {
                    subnet: Some(cidr.to_string()),
                    gateway: Some(gateway.to_string()),
                    ..IpamConfig::default()
                }]),
                ..Ipam::default()
            }
        });
        let request = NetworkCreateRequest {
            name: container_network.clone(),
            driver: Some("bridge".to_owned()),
            labels: Some(labels),
            ipam,
            ..NetworkCreateRequest::default()
        };
        if let Err(error) = docker.create_network(request).await {
            // Made meanwhile by another try: there now is all that counts.
            return match self
                .inspect_network_object(docker, &container_network)
                .await?
            {
                Some(found) => Ok(found),
                None => Err(self.failure(
                    &format!("cannot make container network {container_network}"),
                    &error,
                )),
            };
        }
        self.inspect_network_object(docker, &container_network)
            .await?
            .ok_or_else(|| {
                ComputeError(format!(
                    "container network {container_network} vanished as it was made"
                ))
            })
    }

    async fn inspect_network_object(
        &self,
        docker: &Docker,
        container_network: &str,
    ) -> Result<Option<NetworkObject>, ComputeError> {
        match docker.inspect_network(container_network, None).await {
            Ok(inspected) => Ok(network_object(&Network {
                name: inspected.name,
                labels: inspected.labels,
                ipam: inspected.ipam,
                ..Network::default()
            })),
            Err(error) if state::status_code(&error) == Some(404) => Ok(None),
            Err(error) => Err(self.failure(
                &format!("cannot inspect container network {container_network}"),
                &error,
            )),
        }
    }

    /// The names of the containers (running or not) on a container network.
    pub async fn containers_on(
        &self,
        container_network: &str,
    ) -> Result<Vec<String>, ComputeError> {
        self.containers_filtered("network", container_network).await
    }

    /// The names of the containers (running or not) mounting a volume.
    pub async fn containers_using(&self, volume_name: &str) -> Result<Vec<String>, ComputeError> {
        self.containers_filtered("volume", volume_name).await
    }

    async fn containers_filtered(
        &self,
        filter: &str,
        value: &str,
    ) -> Result<Vec<String>, ComputeError> {
        let docker = self.client().await?;
        let options = ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([(filter.to_owned(), vec![value.to_owned()])])),
            ..ListContainersOptions::default()
        };
        let containers = self
            .list(docker, options)
            .await
            .map_err(|error| self.failure("cannot list containers", &error))?;
        Ok(containers
            .into_iter()
            .filter_map(|summary| {
                summary
                    .names
                    .and_then(|names| names.first().cloned())
                    .map(|name| name.trim_start_matches('/').to_owned())
            })
            .collect())
    }

    /// Removes a container network; gone already is removed. One still
    /// used by containers is not removed (they are named).
    pub async fn remove_network(&self, container_network: &str) -> Result<(), RemoveError> {
        let docker = self.client().await.map_err(RemoveError::Failed)?;
        let users = self
            .containers_on(container_network)
            .await
            .map_err(RemoveError::Failed)?;
        if !users.is_empty() {
            return Err(RemoveError::InUse(users));
        }
        match docker.remove_network(container_network).await {
            Ok(()) => Ok(()),
            Err(error) if state::status_code(&error) == Some(404) => Ok(()),
            Err(error) => {
                let users = self
                    .containers_on(container_network)
                    .await
                    .map_err(RemoveError::Failed)?;
                if users.is_empty() {
                    Err(RemoveError::Failed(self.failure(
                        &format!("cannot remove container network {container_network}"),
                        &error,
                    )))
                } else {
                    Err(RemoveError::InUse(users))
                }
            }
        }
    }

    async fn labelled_volumes(&self, kind: ObjectKind) -> Result<Vec<EngineVolume>, ComputeError> {
        let docker = self.client().await?;
        let options = ListVolumesOptions {
            filters: Some(kind_filter(kind)),
        };
        let listed = docker
            .list_volumes(Some(options))
            .await
            .map_err(|error| self.failure("cannot list container volumes", &error))?;
        Ok(listed.volumes.unwrap_or_default())
    }

    /// `project`'s port records.
    pub async fn project_ports(&self, project_id: &str) -> Result<Vec<PortObject>, ComputeError> {
        Ok(self
            .labelled_volumes(ObjectKind::Port)
            .await?
            .iter()
            .filter_map(port_object)
            .filter(|port| port.project_id == project_id && !port.id.is_empty())
            .collect())
    }

    pub async fn find_port(
        &self,
        project_id: &str,
        name_or_id: &str,
    ) -> Result<PortObject, ComputeError> {
        let ports = self.project_ports(project_id).await?;
        pick(
            &ports,
            "port",
            name_or_id,
            |port| &port.id,
            |port| &port.name,
        )
    }

    /// Records a port (or finds the record an earlier try made).
    pub async fn record_port(&self, port: &PortObject) -> Result<PortObject, ComputeError> {
        let name = self.port_record_name(&port.id);
        let labels = HashMap::from([
            (KIND_LABEL.to_owned(), ObjectKind::Port.label().to_owned()),
            (OBJECT_ID_LABEL.to_owned(), port.id.clone()),
            (PROJECT_ID_LABEL.to_owned(), port.project_id.clone()),
            (NAME_LABEL.to_owned(), port.name.clone()),
            (NETWORK_ID_LABEL.to_owned(), port.network_id.clone()),
            (SUBNET_ID_LABEL.to_owned(), port.subnet_id.clone()),
            (IP_ADDRESS_LABEL.to_owned(), port.ip_address.clone()),
            (MAC_ADDRESS_LABEL.to_owned(), port.mac_address.clone()),
        ]);
        self.labelled_volume(
            &name,
            labels,
            &format!("the record of port {}", port.id),
            port_object,
        )
        .await
    }

    /// The labelled volume `name` an earlier try made, read by `read`, or
    /// one made now with `labels`; `what` names it in failures.
    async fn labelled_volume<T>(
        &self,
        name: &str,
        labels: HashMap<String, String>,
        what: &str,
        read: fn(&EngineVolume) -> Option<T>,
    ) -> Result<T, ComputeError> {
        let docker = self.client().await?;
        if let Ok(found) = docker.inspect_volume(name).await
            && let Some(found) = read(&found)
        {
            return Ok(found);
        }
        let made = docker
            .create_volume(VolumeCreateRequest {
                name: Some(name.to_owned()),
                labels: Some(labels),
                ..VolumeCreateRequest::default()
            })
            .await
            .map_err(|error| self.failure(&format!("cannot make {what}"), &error))?;
        read(&made).ok_or_else(|| ComputeError(format!("{what} lost its labels")))
    }

    /// `project`'s volumes.
    pub async fn project_volumes(
        &self,
        project_id: &str,
    ) -> Result<Vec<VolumeObject>, ComputeError> {
        Ok(self
            .labelled_volumes(ObjectKind::Volume)
            .await?
            .iter()
            .filter_map(volume_object)
            .filter(|volume| volume.project_id == project_id && !volume.id.is_empty())
            .collect())
    }

    pub async fn find_volume(
        &self,
        project_id: &str,
        name_or_id: &str,
    ) -> Result<VolumeObject, ComputeError> {
        let volumes = self.project_volumes(project_id).await?;
        pick(
            &volumes,
            "volume",
            name_or_id,
            |volume| &volume.id,
            |volume| &volume.name,
        )
    }

    /// Makes a container volume (or finds the one an earlier try made).
    pub async fn make_volume(&self, volume: &VolumeObject) -> Result<VolumeObject, ComputeError> {
        let name = self.volume_name(&volume.id);
        let labels = HashMap::from([
            (KIND_LABEL.to_owned(), ObjectKind::Volume.label().to_owned()),
            (OBJECT_ID_LABEL.to_owned(), volume.id.clone()),
            (PROJECT_ID_LABEL.to_owned(), volume.project_id.clone()),
            (NAME_LABEL.to_owned(), volume.name.clone()),
            (SIZE_LABEL.to_owned(), volume.size_gb.to_string()),
            (MULTIATTACH_LABEL.to_owned(), volume.multiattach.to_string()),
            (READ_ONLY_LABEL.to_owned(), volume.read_only.to_string()),
        ]);
        self.labelled_volume(
            &name,
            labels,
            &format!("container volume {name}"),
            volume_object,
        )
        .await
    }

    /// Removes a container volume (a volume's or a port's record); gone
    /// already is removed, one mounted by containers is not.
    pub async fn remove_volume(&self, volume_name: &str) -> Result<(), RemoveError> {
        let docker = self.client().await.map_err(RemoveError::Failed)?;
        let users = self
            .containers_using(volume_name)
            .await
            .map_err(RemoveError::Failed)?;
        if !users.is_empty() {
            return Err(RemoveError::InUse(users));
        }
        match docker
            .remove_volume(volume_name, Some(RemoveVolumeOptions { force: false }))
            .await
        {
            Ok(()) => Ok(()),
            Err(error) if state::status_code(&error) == Some(404) => Ok(()),
            Err(error) if state::status_code(&error) == Some(409) => Err(RemoveError::InUse(
                self.containers_using(volume_name)
                    .await
                    .map_err(RemoveError::Failed)?,
            )),
            Err(error) => Err(RemoveError::Failed(self.failure(
                &format!("cannot remove container volume {volume_name}"),
                &error,
            ))),
        }
    }

    /// Whether a container volume exists.
    pub async fn volume_exists(&self, volume_name: &str) -> Result<bool, ComputeError> {
        let docker = self.client().await?;
        match docker.inspect_volume(volume_name).await {
            Ok(_) => Ok(true),
            Err(error) if state::status_code(&error) == Some(404) => Ok(false),
            Err(error) => Err(self.failure(
                &format!("cannot inspect container volume {volume_name}"),
                &error,
            )),
        }
    }

    /// The endpoints a container of `instance` is plugged into: one per
    /// entry of its `networks` (a port's network, address and MAC; a
    /// network's or a subnet's, with the `fixed_ip` asked for), all of the
    /// instance's project. None asked for: the engine's network.
    pub(super) async fn endpoints_of(
        &self,
        instance: &Instance,
    ) -> Result<Vec<Endpoint>, ComputeError> {
        let project = &instance.project_id;
        let mut endpoints: Vec<Endpoint> = Vec::new();
        for (index, request) in instance.placement.networks.iter().enumerate() {
            let at = |error: ComputeError| ComputeError(format!("networks[{index}]: {error}"));
            let endpoint = self.endpoint(project, request).await.map_err(at)?;
            if endpoints
                .iter()
                .any(|known| known.network == endpoint.network)
            {
                return Err(ComputeError(format!(
                    "networks[{index}]: the container is on that network already (a container has one address per container network on the docker backend)"
                )));
            }
            endpoints.push(endpoint);
        }
        Ok(endpoints)
    }

    async fn endpoint(
        &self,
        project: &str,
        request: &NetworkRequest,
    ) -> Result<Endpoint, ComputeError> {
        if let Some(port) = &request.port {
            let port = self.find_port(project, port).await?;
            let network = self.networks_of(project, &port.network_id).await?;
            let network = network.first().ok_or_else(|| {
                ComputeError(format!(
                    "the network {} of port {} is gone",
                    port.network_id, port.id
                ))
            })?;
            return Ok(Endpoint {
                network: network.container_network.clone(),
                ipv4_address: (!port.ip_address.is_empty()).then(|| port.ip_address.clone()),
                mac_address: (!port.mac_address.is_empty()).then(|| port.mac_address.clone()),
            });
        }
        let network = match (&request.network, &request.subnet) {
            (Some(network), _) => self.find_network(project, network).await?,
            (None, Some(subnet)) => self.find_subnet(project, subnet).await?,
            (None, None) => {
                return Err(ComputeError(
                    "one of network, port or subnet must be given".to_owned(),
                ));
            }
        };
        if let Some(fixed_ip) = &request.fixed_ip {
            let address: Ipv4Addr = fixed_ip.parse().map_err(|_| {
                ComputeError(format!(
                    "fixed_ip {fixed_ip:?} is not an IPv4 address (the docker backend gives containers IPv4 addresses)"
                ))
            })?;
            if let Some(cidr) = network.cidr
                && !cidr.is_host(address)
            {
                return Err(ComputeError(format!(
                    "fixed_ip {fixed_ip} is not a host address of network {} ({cidr})",
                    network.name
                )));
            }
        }
        Ok(Endpoint {
            network: network.container_network,
            ipv4_address: request.fixed_ip.clone(),
            mac_address: None,
        })
    }

    /// The container's addresses as Nova shows a server's: by network name
    /// (the net's name, or the container network's own for a network
    /// Ember did not make), each `{addr, version, OS-EXT-IPS:type,
    /// OS-EXT-IPS-MAC:mac_addr}`.
    pub(super) async fn addresses_of(
        &self,
        inspected: &ContainerInspectResponse,
    ) -> Result<BTreeMap<String, Vec<Value>>, ComputeError> {
        let docker = self.client().await?;
        let mut addresses: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        let networks = inspected
            .network_settings
            .as_ref()
            .and_then(|settings| settings.networks.clone())
            .unwrap_or_default();
        for (container_network, endpoint) in networks {
            let Some(address) = endpoint.ip_address.filter(|address| !address.is_empty()) else {
                continue;
            };
            let name = match self
                .inspect_network_object(docker, &container_network)
                .await?
            {
                Some(network) if !network.name.is_empty() => network.name,
                Some(network) => network.id,
                None => container_network.clone(),
            };
            addresses.entry(name).or_default().push(json!({
                "addr": address,
                "version": 4,
                "OS-EXT-IPS:type": "fixed",
                "OS-EXT-IPS-MAC:mac_addr": endpoint.mac_address.unwrap_or_default(),
            }));
        }
        Ok(addresses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_parse_normalise_and_list_their_hosts() {
        let cidr = Ipv4Cidr::parse("10.0.0.7/24").expect("a cidr");
        assert_eq!(cidr.to_string(), "10.0.0.0/24");
        assert!(cidr.is_host("10.0.0.1".parse().expect("ip")));
        assert!(!cidr.is_host("10.0.0.0".parse().expect("ip")));
        assert!(!cidr.is_host("10.0.0.255".parse().expect("ip")));
        assert!(!cidr.is_host("10.0.1.1".parse().expect("ip")));
        assert_eq!(cidr.hosts().count(), 254);
        assert_eq!(cidr.hosts().next(), Some("10.0.0.1".parse().expect("ip")));
        for bad in ["10.0.0.0", "10.0.0.0/33", "10.0.0/24", "fd00::/64", "x/8"] {
            assert!(Ipv4Cidr::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_name_names_one_object_or_says_why_not() {
        let objects = vec![("a1", "web"), ("a2", "db"), ("a3", "db")];
        let found = pick(&objects, "network", "web", |o| o.0, |o| o.1).expect("by name");
        assert_eq!(found.0, "a1");
        let found = pick(&objects, "network", "a3", |o| o.0, |o| o.1).expect("by id");
        assert_eq!(found.0, "a3");
        assert_eq!(
            pick(&objects, "network", "db", |o| o.0, |o| o.1)
                .expect_err("two")
                .0,
            "Multiple network matches found for name 'db', use an ID to be more specific."
        );
        assert_eq!(
            pick(&objects, "network", "cache", |o| o.0, |o| o.1)
                .expect_err("none")
                .0,
            "Unable to find network with name or id 'cache'"
        );
    }
}
