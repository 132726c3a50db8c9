//! The openstack compute driver: each instance is a Nova server, made and
//! driven as the instance's owner through its delegation (a Keystone trust,
//! see `crate::cloud`).
//!
//! A server Ember makes carries two tags: `ember` (every server of Ember's,
//! for the resync's one listing across projects) and `ember-<instance
//! uuid>`, by which it is found again — a build tried again, or resumed by
//! another engine after a crash, adopts the server an earlier attempt made
//! instead of making a second; a delete finds it even when no build ever
//! reported back. Ports Ember makes for an interface on a subnet carry the
//! instance's tag too, and go with the server.
//!
//! Nova has no event stream a tenant can follow: the watcher's periodic
//! resync (one listing of every server tagged `ember`, as Ember's service
//! user, who holds the admin role as Heat's does) tells when a server died
//! or was removed behind Ember's back.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use ember_openstack::Session;
use ember_openstack::glance::Glance;
use ember_openstack::neutron::{Kind, Neutron};
use ember_openstack::nova::{
    InterfacePlug, NewServer, Nova, Server, ServerAction, ServerNetwork, ServerNetworks,
};

use super::flavors::Flavor;
use super::interfaces::{self, Interface, Wanted};
use super::{
    BuildAttempt, ComputeDriver, ComputeError, MachineDetails, MachineExit, MachinePower,
    MachineState,
};
use crate::cloud::OpenStackCloud;
use crate::domain::delegation::DelegationOwner;
use crate::domain::instance::placement::NetworkRequest;
use crate::domain::instance::{Instance, LockedBy, MaintenanceLock};

/// The tag every server Ember makes carries.
pub const FLEET_TAG: &str = "ember";

/// The longest a build, power action or delete waits for Nova.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(1800);

/// The tag that finds `instance`'s server (and the ports made for it).
pub fn instance_tag(uuid: Uuid) -> String {
    format!("ember-{uuid}")
}

pub struct NovaDriver {
    cloud: Arc<OpenStackCloud>,
    /// Instance → its server's id, as last found (checked on use).
    servers: Mutex<HashMap<Uuid, String>>,
}

fn failure(error: impl std::fmt::Display) -> ComputeError {
    ComputeError(error.to_string())
}

impl NovaDriver {
    pub fn new(cloud: Arc<OpenStackCloud>) -> NovaDriver {
        NovaDriver {
            cloud,
            servers: Mutex::default(),
        }
    }

    /// The session acting for the instance's owner.
    fn session(&self, instance: &Instance) -> Result<Session, ComputeError> {
        match &instance.delegation {
            Some(delegation) => Ok(self.cloud.session_for(delegation)),
            None => Err(ComputeError(format!(
                "{} has no delegation to act on the cloud through (made without a Keystone token)",
                instance.label()
            ))),
        }
    }

    async fn nova(&self, session: &Session) -> Result<Nova, ComputeError> {
        Nova::connect(session).await.map_err(failure)
    }

    fn remember(&self, uuid: Uuid, server_id: Option<&str>) {
        if let Ok(mut servers) = self.servers.lock() {
            match server_id {
                Some(id) => {
                    servers.insert(uuid, id.to_owned());
                }
                None => {
                    servers.remove(&uuid);
                }
            }
        }
    }

    /// The instance's server, if Nova has one: by the id last found, else
    /// by its tag. Of several (two builds raced before the tag was
    /// visible), the oldest is the one; the others are deleted.
    async fn find(&self, nova: &Nova, instance: &Instance) -> Result<Option<Server>, ComputeError> {
        let known = self
            .servers
            .lock()
            .ok()
            .and_then(|servers| servers.get(&instance.uuid).cloned());
        if let Some(id) = known {
            match nova.server(&id).await.map_err(failure)? {
                Some(server) if server.status != "DELETED" => return Ok(Some(server)),
                _ => self.remember(instance.uuid, None),
            }
        }
        let mut tagged = nova
            .servers_tagged(&instance_tag(instance.uuid), false)
            .await
            .map_err(failure)?;
        tagged.retain(|server| server.status != "DELETED");
        tagged.sort_by(|a, b| {
            a.raw["created"]
                .as_str()
                .unwrap_or_default()
                .cmp(b.raw["created"].as_str().unwrap_or_default())
        });
        let mut servers = tagged.into_iter();
        let found = servers.next();
        for extra in servers {
            tracing::warn!(instance = %instance.uuid, server = %extra.id, "deleting a second server made for one instance");
            nova.delete_server(&extra.id).await.map_err(failure)?;
        }
        self.remember(
            instance.uuid,
            found.as_ref().map(|server| server.id.as_str()),
        );
        Ok(found)
    }

    /// Polls the server until `done` says so; ERROR with no task under way
    /// fails with Nova's fault (Heat's words: `Went to status ERROR due to
    /// "Message: …"`).
    async fn wait(
        &self,
        nova: &Nova,
        server_id: &str,
        what: &str,
        done: impl Fn(&Server) -> bool,
    ) -> Result<Option<Server>, ComputeError> {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        let mut pause = Duration::from_millis(200);
        loop {
            match nova.server(server_id).await.map_err(failure)? {
                None => return Ok(None),
                Some(server) if done(&server) => return Ok(Some(server)),
                // In ERROR with nothing under way: the task failed (a server
                // being deleted from ERROR keeps its task until it is gone).
                Some(server) if server.status == "ERROR" && server.is_settled() => {
                    let code = server
                        .fault
                        .as_ref()
                        .map(|fault| fault.code.to_string())
                        .unwrap_or_else(|| "Unknown".to_owned());
                    return Err(ComputeError(format!(
                        "Went to status ERROR due to \"Message: {}, Code: {code}\"",
                        server.fault_message().trim()
                    )));
                }
                Some(_) => {}
            }
            if Instant::now() > deadline {
                return Err(ComputeError(format!(
                    "server {server_id} did not become {what} within {} s",
                    SETTLE_TIMEOUT.as_secs()
                )));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    }

    /// The Nova interfaces of `instance`'s networks: names resolved to ids
    /// through the owner's session (another project's are never found), a
    /// port made on each subnet asked for (tagged with the instance).
    async fn networks(
        &self,
        session: &Session,
        instance: &Instance,
    ) -> Result<Option<ServerNetworks>, ComputeError> {
        let requests = &instance.placement.networks;
        if requests.is_empty() {
            return Ok(None);
        }
        let neutron = Neutron::new(session);
        let tag = instance_tag(instance.uuid);
        let mut interfaces = Vec::with_capacity(requests.len());
        for (index, request) in requests.iter().enumerate() {
            interfaces.push(
                self.interface(&neutron, instance, &tag, index, request)
                    .await
                    .map_err(|error| ComputeError(format!("networks[{index}]: {error}")))?,
            );
        }
        Ok(Some(ServerNetworks::List(interfaces)))
    }

    async fn interface(
        &self,
        neutron: &Neutron,
        instance: &Instance,
        tag: &str,
        index: usize,
        request: &NetworkRequest,
    ) -> Result<ServerNetwork, ComputeError> {
        if let Some(port) = &request.port {
            return Ok(ServerNetwork {
                port_id: Some(neutron.find_id(Kind::Port, port).await.map_err(failure)?),
                tag: request.tag.clone(),
                ..ServerNetwork::default()
            });
        }
        let Some(subnet) = &request.subnet else {
            let network = request.network.as_deref().unwrap_or_default();
            return Ok(ServerNetwork {
                network_id: Some(
                    neutron
                        .find_id(Kind::Network, network)
                        .await
                        .map_err(failure)?,
                ),
                fixed_ip: request.fixed_ip.clone(),
                tag: request.tag.clone(),
                ..ServerNetwork::default()
            });
        };
        Ok(ServerNetwork {
            port_id: Some(
                self.subnet_port(neutron, instance, tag, index, subnet, request)
                    .await?,
            ),
            tag: request.tag.clone(),
            ..ServerNetwork::default()
        })
    }

    /// The port made for the `index`th interface, on `subnet` (Nova cannot
    /// be asked for a subnet: a port on it is made, as Heat makes its
    /// "internal ports"), tagged with the instance. One an earlier attempt
    /// made and left unattached is found again by its name and tag.
    async fn subnet_port(
        &self,
        neutron: &Neutron,
        instance: &Instance,
        tag: &str,
        index: usize,
        subnet: &str,
        request: &NetworkRequest,
    ) -> Result<String, ComputeError> {
        let subnet_id = neutron
            .find_id(Kind::Subnet, subnet)
            .await
            .map_err(failure)?;
        let name = format!("{tag}-port-{index}");
        let existing = neutron
            .list(Kind::Port, &[("tags", tag), ("name", &name)])
            .await
            .map_err(failure)?;
        let unattached = existing.into_iter().find(|port| {
            port["device_id"].as_str().unwrap_or_default().is_empty()
                && port["fixed_ips"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|fixed| fixed["subnet_id"].as_str() == Some(&subnet_id))
        });
        if let Some(id) = unattached.as_ref().and_then(|port| port["id"].as_str()) {
            return Ok(id.to_owned());
        }
        let subnet = neutron
            .get(Kind::Subnet, &subnet_id)
            .await
            .map_err(failure)?
            .ok_or_else(|| ComputeError(format!("subnet {subnet_id} is gone")))?;
        let mut fixed_ip = json!({ "subnet_id": subnet_id });
        if let Some(address) = &request.fixed_ip {
            fixed_ip["ip_address"] = json!(address);
        }
        let mut attributes = Map::new();
        attributes.insert("name".to_owned(), json!(name));
        attributes.insert("network_id".to_owned(), subnet["network_id"].clone());
        attributes.insert("fixed_ips".to_owned(), json!([fixed_ip]));
        // Nova puts the server's security groups only on the ports it
        // makes: a port made here gets them from Ember, as Heat gives them
        // to its internal ports.
        if let Some(groups) = self.security_group_ids(neutron, instance).await? {
            attributes.insert("security_groups".to_owned(), groups);
        }
        let port = neutron
            .create(Kind::Port, attributes, &[tag.to_owned()])
            .await
            .map_err(failure)?;
        port["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| ComputeError(format!("Neutron made a port without an id: {port}")))
    }

    /// The ids of the instance's security groups (`None`: it names none).
    async fn security_group_ids(
        &self,
        neutron: &Neutron,
        instance: &Instance,
    ) -> Result<Option<Value>, ComputeError> {
        if instance.placement.security_groups.is_empty() {
            return Ok(None);
        }
        let groups = crate::resources::openstack::neutron::security_group_ids(
            neutron,
            &instance.project_id,
            &instance.placement.security_groups,
        )
        .await
        .map_err(|error| ComputeError(error.to_string()))?;
        Ok(Some(json!(groups)))
    }

    /// Deletes the ports made for the instance (for its subnets, now or
    /// before a replug: looked for whatever its networks say now).
    async fn delete_made_ports(
        &self,
        session: &Session,
        instance: &Instance,
    ) -> Result<(), ComputeError> {
        if instance.placement.networks.is_empty() {
            return Ok(());
        }
        let neutron = Neutron::new(session);
        let ports = neutron
            .list(Kind::Port, &[("tags", &instance_tag(instance.uuid))])
            .await
            .map_err(failure)?;
        for port in ports {
            if let Some(id) = port["id"].as_str() {
                neutron.delete(Kind::Port, id).await.map_err(failure)?;
            }
        }
        Ok(())
    }

    async fn make(
        &self,
        nova: &Nova,
        session: &Session,
        instance: &Instance,
    ) -> Result<Server, ComputeError> {
        let image_id = if instance.image.is_empty() {
            None
        } else {
            Some(
                Glance::new(session)
                    .image_id(&instance.image)
                    .await
                    .map_err(|error| {
                        ComputeError(format!("image {:?}: {error}", instance.image))
                    })?,
            )
        };
        let flavor_id = nova
            .flavor_id(&instance.flavor)
            .await
            .map_err(failure)?
            .ok_or_else(|| {
                ComputeError(format!(
                    "flavor {:?}: the cloud has no flavor of that name or id",
                    instance.flavor
                ))
            })?;
        let placement = &instance.placement;
        let spec = NewServer {
            name: instance.name.clone(),
            image_id,
            flavor_id,
            networks: self.networks(session, instance).await?,
            security_groups: placement.security_groups.clone(),
            key_name: placement.key_name.clone(),
            user_data: (!instance.workload.user_data.is_empty())
                .then(|| instance.workload.user_data.clone()),
            metadata: instance.metadata.clone(),
            block_device_mapping: placement.block_device_mapping.clone(),
            availability_zone: placement.availability_zone.clone(),
            config_drive: placement.config_drive,
            scheduler_hints: placement.scheduler_hints.clone(),
            tags: vec![FLEET_TAG.to_owned(), instance_tag(instance.uuid)],
            admin_password: None,
        };
        let server = nova.create_server(&spec).await.map_err(failure)?;
        self.remember(instance.uuid, Some(&server.id));
        Ok(server)
    }

    /// Asks for a power action and waits for the server to settle in
    /// `status`; a server in `status` already is the action done.
    async fn power(
        &self,
        instance: &Instance,
        action: ServerAction,
        status: &str,
    ) -> Result<(), ComputeError> {
        let session = self.session(instance)?;
        let nova = self.nova(&session).await?;
        let server = self
            .find(&nova, instance)
            .await?
            .ok_or_else(|| ComputeError(format!("{} has no server", instance.label())))?;
        let rebooting = matches!(action, ServerAction::Reboot { .. });
        if server.status == status && server.is_settled() && !rebooting {
            return Ok(());
        }
        if let Err(error) = nova.act(&server.id, &action).await {
            // Already there (a retry): Nova answers 409 for a stop of a
            // stopped server; what the server shows decides.
            if !error.is_conflict() {
                return Err(failure(error));
            }
        }
        self.wait(&nova, &server.id, status, |server| {
            server.status == status && server.is_settled()
        })
        .await?
        .map(|_| ())
        .ok_or_else(|| ComputeError(format!("server {} disappeared", server.id)))
    }
}

impl NovaDriver {
    async fn act_on_lock(
        &self,
        instance: &Instance,
        lock: &MaintenanceLock,
        action: ServerAction,
    ) -> Result<(), ComputeError> {
        let owner = self.nova(&self.session(instance)?).await?;
        let Some(server) = self.find(&owner, instance).await? else {
            return Ok(());
        };
        let acting = match lock.locked_by {
            LockedBy::Owner => owner,
            LockedBy::Admin => self.nova(self.cloud.service_session()).await?,
        };
        acting.act(&server.id, &action).await.map_err(failure)
    }
}

/// What a server's state means for its instance.
fn machine_state(server: &Server) -> MachineState {
    match server.status.as_str() {
        "SHUTOFF" | "SUSPENDED" | "PAUSED" | "SHELVED" | "SHELVED_OFFLOADED" => {
            MachineState::Exited(MachineExit::default())
        }
        "ERROR" => MachineState::Exited(MachineExit {
            exit_code: 1,
            error: format!("Nova: {}", server.fault_message().trim()),
            ..MachineExit::default()
        }),
        "DELETED" | "SOFT_DELETED" => MachineState::Missing,
        _ => MachineState::Running,
    }
}

fn machine_power(server: &Server) -> MachinePower {
    match machine_state(server) {
        MachineState::Running => MachinePower::Running,
        MachineState::Exited(_) => MachinePower::Stopped,
        MachineState::Missing => MachinePower::Missing,
    }
}

/// Heat's server attributes from what Nova shows.
fn details_of(server: &Server) -> MachineDetails {
    let mut addresses: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (network, entries) in &server.addresses {
        addresses.insert(
            network.clone(),
            entries
                .iter()
                .map(|address| {
                    json!({
                        "addr": address.addr,
                        "version": address.version,
                        "OS-EXT-IPS:type": address.kind,
                        "OS-EXT-IPS-MAC:mac_addr": address.mac_address,
                    })
                })
                .collect(),
        );
    }
    MachineDetails {
        machine_id: server.id.clone(),
        addresses,
        access_ipv4: server.access_ipv4.clone(),
        access_ipv6: server.access_ipv6.clone(),
        instance_name: server.instance_name.clone(),
        raw: server.raw.clone(),
    }
}

#[async_trait]
impl ComputeDriver for NovaDriver {
    fn name(&self) -> &'static str {
        "openstack"
    }

    fn machine_noun(&self) -> &'static str {
        "server"
    }

    async fn build(
        &self,
        instance: &Instance,
        _flavor: &Flavor,
        _attempt: BuildAttempt,
    ) -> Result<(), ComputeError> {
        let session = self.session(instance)?;
        let nova = self.nova(&session).await?;
        // Looked for on every attempt: the first attempt of one engine can
        // race a resumed one of another.
        let server = match self.find(&nova, instance).await? {
            Some(server) => server,
            None => self.make(&nova, &session, instance).await?,
        };
        self.wait(&nova, &server.id, "ACTIVE", |server| {
            server.status == "ACTIVE" && server.is_settled()
        })
        .await?
        .map(|_| ())
        .ok_or_else(|| ComputeError(format!("server {} disappeared while building", server.id)))
    }

    async fn power_on(&self, instance: &Instance) -> Result<(), ComputeError> {
        self.power(instance, ServerAction::Start, "ACTIVE").await
    }

    async fn power_off(&self, instance: &Instance) -> Result<(), ComputeError> {
        self.power(instance, ServerAction::Stop, "SHUTOFF").await
    }

    async fn reboot(&self, instance: &Instance) -> Result<(), ComputeError> {
        self.power(instance, ServerAction::Reboot { hard: false }, "ACTIVE")
            .await
    }

    async fn delete(&self, instance: &Instance) -> Result<(), ComputeError> {
        let session = self.session(instance)?;
        let nova = self.nova(&session).await?;
        while let Some(server) = self.find(&nova, instance).await? {
            match nova.delete_server(&server.id).await {
                Ok(()) => {}
                // Nova lets only an admin delete a locked server; Ember's
                // own policy already let this delete through a lock (an
                // admin's), so Ember's service user, an admin, deletes it.
                Err(error) if error.is_conflict() && server.locked == Some(true) => {
                    self.nova(self.cloud.service_session())
                        .await?
                        .delete_server(&server.id)
                        .await
                        .map_err(failure)?;
                }
                Err(error) => return Err(failure(error)),
            }
            self.wait(&nova, &server.id, "deleted", |server| {
                server.status == "DELETED"
            })
            .await?;
            self.remember(instance.uuid, None);
        }
        self.delete_made_ports(&session, instance).await?;
        // An instance made through the instances API has a trust of its
        // own, deleted with it (one of a stack's or cluster's has none).
        self.cloud
            .revoke(DelegationOwner::Instance(instance.uuid), None)
            .await
            .map_err(failure)
    }

    async fn inspect(&self, instance: &Instance) -> Result<MachineState, ComputeError> {
        let session = self.session(instance)?;
        let nova = self.nova(&session).await?;
        Ok(match self.find(&nova, instance).await? {
            Some(server) => machine_state(&server),
            None => MachineState::Missing,
        })
    }

    /// One listing of every server tagged `ember`, in every project (Ember's
    /// service user is an admin); without that right, each instance's
    /// server is read through its own delegation.
    async fn sync(
        &self,
        instances: &[Instance],
    ) -> Result<Vec<(Uuid, MachinePower)>, ComputeError> {
        let service = self.cloud.service_session().clone();
        let nova = self.nova(&service).await?;
        match nova.servers_tagged(FLEET_TAG, true).await {
            Ok(servers) => {
                let mut found: HashMap<String, MachinePower> = HashMap::new();
                for server in &servers {
                    for tag in &server.tags {
                        found.insert(tag.clone(), machine_power(server));
                    }
                }
                Ok(instances
                    .iter()
                    .map(|instance| {
                        let power = found
                            .get(&instance_tag(instance.uuid))
                            .copied()
                            .unwrap_or(MachinePower::Missing);
                        (instance.uuid, power)
                    })
                    .collect())
            }
            Err(error) if matches!(error.status(), Some(401 | 403)) => {
                let mut powers = Vec::with_capacity(instances.len());
                for instance in instances {
                    let power = match self.inspect(instance).await? {
                        MachineState::Running => MachinePower::Running,
                        MachineState::Exited(_) => MachinePower::Stopped,
                        MachineState::Missing => MachinePower::Missing,
                    };
                    powers.push((instance.uuid, power));
                }
                Ok(powers)
            }
            Err(error) => Err(failure(error)),
        }
    }

    /// Nova offers no stream a tenant can follow: the resync tells.
    async fn observe(
        &self,
    ) -> Result<BoxStream<'static, Result<Uuid, ComputeError>>, ComputeError> {
        Ok(futures::stream::pending().boxed())
    }

    /// Locks the server in Nova with the lock's reason: an owner's lock as
    /// the owner (through the delegation), an admin's as Ember's service
    /// user (an admin), so Nova too lets only an admin lift it.
    async fn lock(&self, instance: &Instance, lock: &MaintenanceLock) -> Result<(), ComputeError> {
        self.act_on_lock(
            instance,
            lock,
            ServerAction::Lock {
                reason: lock.reason.clone(),
            },
        )
        .await
    }

    /// Lifts what [`NovaDriver::lock`] placed, as whoever placed it.
    async fn unlock(
        &self,
        instance: &Instance,
        lock: &MaintenanceLock,
    ) -> Result<(), ComputeError> {
        self.act_on_lock(instance, lock, ServerAction::Unlock).await
    }

    async fn release_ports(&self, instance: &Instance) -> Result<(), ComputeError> {
        let given: Vec<&String> = instance
            .placement
            .networks
            .iter()
            .filter_map(|network| network.port.as_ref())
            .collect();
        if given.is_empty() {
            return Ok(());
        }
        let session = self.session(instance)?;
        let nova = self.nova(&session).await?;
        let Some(server) = self.find(&nova, instance).await? else {
            return Ok(());
        };
        let neutron = Neutron::new(&session);
        for port in given {
            let port_id = neutron.find_id(Kind::Port, port).await.map_err(failure)?;
            nova.detach_interface(&server.id, &port_id)
                .await
                .map_err(failure)?;
            wait_port(&neutron, &port_id, &server.id, false).await?;
        }
        Ok(())
    }

    fn replugs_in_place(&self) -> bool {
        true
    }

    async fn replug(&self, instance: &Instance) -> Result<(), ComputeError> {
        let session = self.session(instance)?;
        let nova = self.nova(&session).await?;
        let server = self
            .find(&nova, instance)
            .await?
            .ok_or_else(|| ComputeError(format!("{} has no server to replug", instance.label())))?;
        let neutron = Neutron::new(&session);
        let tag = instance_tag(instance.uuid);
        let ports = neutron
            .list(Kind::Port, &[("device_id", server.id.as_str())])
            .await
            .map_err(failure)?;
        let interfaces: Vec<Interface> = ports
            .iter()
            .map(|port| {
                let id = port["id"].as_str().unwrap_or_default();
                Interface::of_port(id, &port["network_id"], &port["fixed_ips"])
            })
            .collect();
        let mut wanted = Vec::with_capacity(instance.placement.networks.len());
        for (index, request) in instance.placement.networks.iter().enumerate() {
            wanted.push(
                resolve(&neutron, request)
                    .await
                    .map_err(|error| ComputeError(format!("networks[{index}]: {error}")))?,
            );
        }
        let plan = interfaces::plan(&wanted, &interfaces);
        for &at in &plan.detach {
            let port_id = &interfaces[at].port;
            nova.detach_interface(&server.id, port_id)
                .await
                .map_err(failure)?;
            wait_port(&neutron, port_id, &server.id, false).await?;
            // A port made for the instance goes with its interface (Nova
            // deletes the ones it made itself; a given port stays).
            let made = ports[at]["tags"]
                .as_array()
                .is_some_and(|tags| tags.iter().any(|each| each.as_str() == Some(&tag)));
            if made {
                neutron.delete(Kind::Port, port_id).await.map_err(failure)?;
            }
        }
        // The server's groups, resolved at most once for the ports Nova makes.
        let mut groups: Option<Option<Value>> = None;
        for &index in &plan.attach {
            let request = &instance.placement.networks[index];
            let resolved = &wanted[index];
            let plug = match (&resolved.port, &request.subnet) {
                (Some(port), _) => InterfacePlug::Port(port.clone()),
                (None, Some(subnet)) => InterfacePlug::Port(
                    self.subnet_port(&neutron, instance, &tag, index, subnet, request)
                        .await?,
                ),
                (None, None) => InterfacePlug::Network {
                    id: resolved.network.clone().unwrap_or_default(),
                    fixed_ip: request.fixed_ip.clone(),
                },
            };
            let port_id = nova
                .attach_interface(&server.id, &plug)
                .await
                .map_err(|error| ComputeError(format!("networks[{index}]: {error}")))?;
            // Nova gives the port it makes the project's default group:
            // the server's own groups are put on it, as Heat does.
            if matches!(plug, InterfacePlug::Network { .. }) {
                if groups.is_none() {
                    groups = Some(self.security_group_ids(&neutron, instance).await?);
                }
                if let Some(Some(ids)) = &groups {
                    let mut attributes = Map::new();
                    attributes.insert("security_groups".to_owned(), ids.clone());
                    neutron
                        .update(Kind::Port, &port_id, attributes)
                        .await
                        .map_err(failure)?;
                }
            }
            wait_port(&neutron, &port_id, &server.id, true).await?;
        }
        Ok(())
    }

    async fn apply_details(&self, instance: &Instance) -> Result<(), ComputeError> {
        let session = self.session(instance)?;
        let nova = self.nova(&session).await?;
        let Some(server) = self.find(&nova, instance).await? else {
            return Ok(());
        };
        if server.name != instance.name {
            nova.rename_server(&server.id, &instance.name)
                .await
                .map_err(failure)?;
        }
        if server.metadata != instance.metadata {
            nova.set_server_metadata(&server.id, &instance.metadata)
                .await
                .map_err(failure)?;
        }
        Ok(())
    }

    async fn details(&self, instance: &Instance) -> Result<Option<MachineDetails>, ComputeError> {
        let session = self.session(instance)?;
        let nova = self.nova(&session).await?;
        let Some(mut details) = self.find(&nova, instance).await?.as_ref().map(details_of) else {
            return Ok(None);
        };
        // Heat's `addresses` name each address's port.
        if details
            .addresses
            .values()
            .any(|entries| !entries.is_empty())
        {
            let ports = Neutron::new(&session)
                .list(Kind::Port, &[("device_id", details.machine_id.as_str())])
                .await
                .map_err(failure)?;
            name_ports(&mut details, &ports);
        }
        Ok(Some(details))
    }
}

/// Waits until the port is on the server (`attached`) or off it.
async fn wait_port(
    neutron: &Neutron,
    port_id: &str,
    server_id: &str,
    attached: bool,
) -> Result<(), ComputeError> {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    let mut pause = Duration::from_millis(200);
    loop {
        let device = neutron
            .get(Kind::Port, port_id)
            .await
            .map_err(failure)?
            .and_then(|port| port["device_id"].as_str().map(str::to_owned))
            .unwrap_or_default();
        if (device == server_id) == attached {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(ComputeError(format!(
                "port {port_id} is still {} server {server_id} after {} s",
                if attached { "not on" } else { "on" },
                SETTLE_TIMEOUT.as_secs()
            )));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

/// A network request with its names resolved to ids (the owner's view).
async fn resolve(neutron: &Neutron, request: &NetworkRequest) -> Result<Wanted, ComputeError> {
    let id = |kind: Kind, name: &Option<String>| {
        let name = name.clone();
        async move {
            match name {
                Some(name) => neutron
                    .find_id(kind, &name)
                    .await
                    .map(Some)
                    .map_err(failure),
                None => Ok(None),
            }
        }
    };
    Ok(Wanted {
        port: id(Kind::Port, &request.port).await?,
        network: id(Kind::Network, &request.network).await?,
        subnet: id(Kind::Subnet, &request.subnet).await?,
        fixed_ip: request.fixed_ip.clone(),
    })
}

/// Gives each of the server's addresses the id of its port (the port
/// with its MAC address), as Heat's server `addresses` attribute has it.
fn name_ports(details: &mut MachineDetails, ports: &[Value]) {
    for entry in details.addresses.values_mut().flatten() {
        let mac = entry.get("OS-EXT-IPS-MAC:mac_addr").cloned();
        let port = ports
            .iter()
            .find(|port| mac.is_some() && port.get("mac_address") == mac.as_ref())
            .and_then(|port| port.get("id").cloned());
        if let (Some(port), Some(entry)) = (port, entry.as_object_mut()) {
            entry.insert("port".to_owned(), port);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(raw: Value) -> Server {
        let mut server: Server = serde_json::from_value(raw.clone()).expect("a server");
        server.raw = raw;
        server
    }

    #[test]
    fn nova_statuses_become_machine_states() {
        let active = server(json!({"id": "s", "status": "ACTIVE"}));
        assert_eq!(machine_state(&active), MachineState::Running);
        let off = server(json!({"id": "s", "status": "SHUTOFF"}));
        assert!(matches!(machine_state(&off), MachineState::Exited(exit) if exit.is_clean()));
        let error = server(
            json!({"id": "s", "status": "ERROR", "fault": {"code": 500, "message": "No valid host was found. "}}),
        );
        match machine_state(&error) {
            MachineState::Exited(exit) => {
                assert!(!exit.is_clean());
                assert_eq!(exit.error, "Nova: No valid host was found.");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            machine_power(&server(json!({"id": "s", "status": "DELETED"}))),
            MachinePower::Missing
        );
    }

    #[test]
    fn each_address_names_its_port_by_mac() {
        let mut details = details_of(&server(json!({
            "id": "s1", "status": "ACTIVE",
            "addresses": {"private": [
                {"addr": "10.0.0.5", "OS-EXT-IPS-MAC:mac_addr": "fa:16:3e:00:00:01"},
                {"addr": "10.0.0.6", "OS-EXT-IPS-MAC:mac_addr": "fa:16:3e:00:00:09"}]}
        })));
        name_ports(
            &mut details,
            &[json!({"id": "p1", "mac_address": "fa:16:3e:00:00:01"})],
        );
        assert_eq!(details.addresses["private"][0]["port"], json!("p1"));
        assert!(details.addresses["private"][1].get("port").is_none());
    }

    #[test]
    fn details_keep_nova_addresses_by_network() {
        let details = details_of(&server(json!({
            "id": "s1", "status": "ACTIVE", "accessIPv4": "",
            "addresses": {"private": [{"addr": "10.0.0.5", "version": 4, "OS-EXT-IPS:type": "fixed", "OS-EXT-IPS-MAC:mac_addr": "fa:16:3e:00:00:01"}]}
        })));
        assert_eq!(details.machine_id, "s1");
        assert_eq!(details.addresses["private"][0]["addr"], "10.0.0.5");
        assert_eq!(details.addresses["private"][0]["OS-EXT-IPS:type"], "fixed");
    }
}
