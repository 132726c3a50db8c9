//! Nova (compute): servers and their actions, flavors, key pairs, server
//! groups and volume attachments, at the microversion negotiated once per
//! endpoint — the highest up to [`Nova::WANTED`] the cloud speaks, at least
//! [`Nova::LEAST`] (tags given at create, which is how a server Ember made
//! is found again). A lock's reason needs 2.73: below it the lock is placed
//! without one.

use std::collections::BTreeMap;

use base64::Engine;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result, Service};
use crate::microversion::Microversion;
use crate::session::{Call, Session, segment};

/// A server as Nova shows it (the fields Ember reads; [`Server::raw`] has
/// the rest).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Server {
    pub id: String,
    #[serde(default)]
    pub name: String,
    /// ACTIVE, BUILD, ERROR, SHUTOFF, SUSPENDED, VERIFY_RESIZE, DELETED, …
    #[serde(default)]
    pub status: String,
    #[serde(default, rename = "OS-EXT-STS:task_state")]
    pub task_state: Option<String>,
    #[serde(default, rename = "OS-EXT-STS:vm_state")]
    pub vm_state: Option<String>,
    #[serde(default, rename = "OS-EXT-STS:power_state")]
    pub power_state: Option<i64>,
    /// Network name → addresses on it.
    #[serde(default)]
    pub addresses: BTreeMap<String, Vec<Address>>,
    #[serde(default)]
    pub locked: Option<bool>,
    #[serde(default)]
    pub locked_reason: Option<String>,
    #[serde(default)]
    pub fault: Option<Fault>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub tenant_id: String,
    #[serde(default, rename = "accessIPv4")]
    pub access_ipv4: String,
    #[serde(default, rename = "accessIPv6")]
    pub access_ipv6: String,
    #[serde(default, rename = "OS-EXT-AZ:availability_zone")]
    pub availability_zone: Option<String>,
    #[serde(default, rename = "OS-EXT-SRV-ATTR:instance_name")]
    pub instance_name: Option<String>,
    /// Everything Nova said, for the `show` attribute.
    #[serde(skip)]
    pub raw: Value,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Address {
    pub addr: String,
    #[serde(default)]
    pub version: u8,
    #[serde(default, rename = "OS-EXT-IPS:type")]
    pub kind: Option<String>,
    #[serde(default, rename = "OS-EXT-IPS-MAC:mac_addr")]
    pub mac_address: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Fault {
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub code: u16,
    #[serde(default)]
    pub details: Option<String>,
}

impl Server {
    fn from_value(raw: Value) -> Result<Server> {
        let mut server: Server =
            serde_json::from_value(raw.clone()).map_err(|error| Error::Decode {
                service: Service::Compute,
                message: format!("a server: {error}"),
            })?;
        server.raw = raw;
        Ok(server)
    }

    /// Settled: no task under way.
    pub fn is_settled(&self) -> bool {
        self.task_state.as_deref().is_none_or(str::is_empty)
    }

    /// Why the server is in ERROR, in Nova's words.
    pub fn fault_message(&self) -> String {
        match &self.fault {
            Some(fault) if !fault.message.is_empty() => fault.message.clone(),
            _ => "Unknown".to_owned(),
        }
    }
}

/// Where a new server's network interfaces come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerNetworks {
    /// Nova picks (get-me-a-network): the project's only network.
    Auto,
    None,
    List(Vec<ServerNetwork>),
}

/// One interface of a new server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerNetwork {
    pub network_id: Option<String>,
    pub port_id: Option<String>,
    pub fixed_ip: Option<String>,
    pub tag: Option<String>,
}

/// A server to make.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewServer {
    pub name: String,
    /// An image id; `None` boots from a volume.
    pub image_id: Option<String>,
    pub flavor_id: String,
    pub networks: Option<ServerNetworks>,
    pub security_groups: Vec<String>,
    pub key_name: Option<String>,
    /// As given; encoded here.
    pub user_data: Option<String>,
    pub metadata: BTreeMap<String, String>,
    /// `block_device_mapping_v2` entries, in Nova's form.
    pub block_device_mapping: Vec<Value>,
    pub availability_zone: Option<String>,
    pub config_drive: Option<bool>,
    pub scheduler_hints: Map<String, Value>,
    /// Tags (how Ember finds a server it made).
    pub tags: Vec<String>,
    pub admin_password: Option<String>,
}

/// Something to ask of a server (`POST /servers/{id}/action`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerAction {
    Lock {
        reason: Option<String>,
    },
    Unlock,
    Start,
    Stop,
    Suspend,
    Resume,
    Reboot {
        hard: bool,
    },
    Resize {
        flavor_id: String,
    },
    ConfirmResize,
    RevertResize,
    Rebuild {
        image_id: String,
        name: Option<String>,
    },
    /// An admin's: sets the server's state (`error`, `active`) as Nova
    /// records it, whatever the hypervisor says.
    ResetState {
        state: String,
    },
}

impl ServerAction {
    pub fn name(&self) -> &'static str {
        match self {
            ServerAction::Lock { .. } => "lock",
            ServerAction::Unlock => "unlock",
            ServerAction::Start => "os-start",
            ServerAction::Stop => "os-stop",
            ServerAction::Suspend => "suspend",
            ServerAction::Resume => "resume",
            ServerAction::Reboot { .. } => "reboot",
            ServerAction::Resize { .. } => "resize",
            ServerAction::ConfirmResize => "confirmResize",
            ServerAction::RevertResize => "revertResize",
            ServerAction::Rebuild { .. } => "rebuild",
            ServerAction::ResetState { .. } => "os-resetState",
        }
    }

    fn body(&self, version: Microversion) -> Value {
        match self {
            ServerAction::Lock { reason } => match reason {
                Some(reason) if version >= Microversion::new(2, 73) => {
                    json!({"lock": {"locked_reason": reason}})
                }
                _ => json!({"lock": null}),
            },
            ServerAction::Reboot { hard } => {
                json!({"reboot": {"type": if *hard { "HARD" } else { "SOFT" }}})
            }
            ServerAction::Resize { flavor_id } => json!({"resize": {"flavorRef": flavor_id}}),
            ServerAction::Rebuild { image_id, name } => {
                let mut rebuild = json!({"imageRef": image_id});
                if let Some(name) = name {
                    rebuild["name"] = json!(name);
                }
                json!({ "rebuild": rebuild })
            }
            ServerAction::ResetState { state } => json!({"os-resetState": {"state": state}}),
            other => json!({ other.name(): null }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Flavor {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub vcpus: u64,
    #[serde(default)]
    pub ram: u64,
    #[serde(default)]
    pub disk: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KeyPair {
    pub name: String,
    #[serde(default)]
    pub public_key: String,
    /// Only when Nova generated the key, in the create's answer.
    #[serde(default)]
    pub private_key: Option<String>,
    #[serde(default)]
    pub fingerprint: String,
    #[serde(default, rename = "type")]
    pub key_type: Option<String>,
    /// Nova's own number for this key pair: a key pair deleted and made
    /// again under the same name has a new one (only shown by a read).
    #[serde(default)]
    pub id: Option<i64>,
    /// When Nova made it (only shown by a read), `2026-01-01T00:00:00.000000`.
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub user_id: Option<String>,
    /// Everything Nova said, for the `show` attribute.
    #[serde(skip)]
    pub raw: Value,
}

/// A key pair to make: Nova generates the key when `public_key` is
/// `None`; `user_id` makes it for another user (admin, 2.10).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewKeyPair {
    pub name: String,
    pub public_key: Option<String>,
    /// `ssh` or `x509`.
    pub key_type: Option<String>,
    pub user_id: Option<String>,
}

impl NewKeyPair {
    fn body(&self) -> Value {
        let mut keypair = json!({ "name": self.name });
        if let Some(public_key) = &self.public_key {
            keypair["public_key"] = json!(public_key);
        }
        if let Some(key_type) = &self.key_type {
            keypair["type"] = json!(key_type);
        }
        if let Some(user_id) = &self.user_id {
            keypair["user_id"] = json!(user_id);
        }
        json!({ "keypair": keypair })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServerGroup {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub policy: Option<String>,
    #[serde(default)]
    pub policies: Vec<String>,
    #[serde(default)]
    pub members: Vec<String>,
    /// Everything Nova said, for the `show` attribute.
    #[serde(skip)]
    pub raw: Value,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct VolumeAttachment {
    #[serde(default)]
    pub id: String,
    #[serde(rename = "volumeId")]
    pub volume_id: String,
    #[serde(rename = "serverId")]
    pub server_id: String,
    #[serde(default)]
    pub device: Option<String>,
}

/// Nova, through one session.
#[derive(Debug, Clone)]
pub struct Nova {
    session: Session,
    version: Microversion,
}

/// The most servers one listing page asks for.
const PAGE: usize = 500;

impl Nova {
    /// Tags at create (2.52) are how a server Ember made is found again.
    pub const LEAST: Microversion = Microversion::new(2, 52);
    /// What Ember was written against: lock reasons (2.73), attachments'
    /// `delete_on_termination` (2.79).
    pub const WANTED: Microversion = Microversion::new(2, 79);

    /// Negotiates the microversion (once per endpoint and process).
    pub async fn connect(session: &Session) -> Result<Nova> {
        let spoken = session.microversions(Service::Compute).await?;
        let version = Microversion::negotiate(Service::Compute, spoken, Nova::LEAST, Nova::WANTED)?;
        Ok(Nova {
            session: session.clone(),
            version,
        })
    }

    pub fn version(&self) -> Microversion {
        self.version
    }

    fn call(&self, call: Call) -> Call {
        call.microversion(self.version)
    }

    pub async fn create_server(&self, server: &NewServer) -> Result<Server> {
        let mut body = Map::new();
        body.insert("name".to_owned(), json!(server.name));
        body.insert(
            "imageRef".to_owned(),
            json!(server.image_id.clone().unwrap_or_default()),
        );
        body.insert("flavorRef".to_owned(), json!(server.flavor_id));
        let networks = match &server.networks {
            None | Some(ServerNetworks::Auto) => json!("auto"),
            Some(ServerNetworks::None) => json!("none"),
            Some(ServerNetworks::List(list)) => Value::Array(
                list.iter()
                    .map(|network| {
                        let mut entry = Map::new();
                        if let Some(port) = &network.port_id {
                            entry.insert("port".to_owned(), json!(port));
                        }
                        if let Some(uuid) = &network.network_id {
                            entry.insert("uuid".to_owned(), json!(uuid));
                        }
                        if let Some(fixed_ip) = &network.fixed_ip {
                            entry.insert("fixed_ip".to_owned(), json!(fixed_ip));
                        }
                        if let Some(tag) = &network.tag {
                            entry.insert("tag".to_owned(), json!(tag));
                        }
                        Value::Object(entry)
                    })
                    .collect(),
            ),
        };
        body.insert("networks".to_owned(), networks);
        if !server.security_groups.is_empty() {
            body.insert(
                "security_groups".to_owned(),
                Value::Array(
                    server
                        .security_groups
                        .iter()
                        .map(|name| json!({ "name": name }))
                        .collect(),
                ),
            );
        }
        if let Some(key_name) = &server.key_name {
            body.insert("key_name".to_owned(), json!(key_name));
        }
        if let Some(user_data) = &server.user_data {
            body.insert(
                "user_data".to_owned(),
                json!(base64::engine::general_purpose::STANDARD.encode(user_data)),
            );
        }
        if !server.metadata.is_empty() {
            body.insert("metadata".to_owned(), json!(server.metadata));
        }
        if !server.block_device_mapping.is_empty() {
            body.insert(
                "block_device_mapping_v2".to_owned(),
                Value::Array(server.block_device_mapping.clone()),
            );
        }
        if let Some(zone) = &server.availability_zone {
            body.insert("availability_zone".to_owned(), json!(zone));
        }
        if let Some(config_drive) = server.config_drive {
            body.insert("config_drive".to_owned(), json!(config_drive));
        }
        if !server.tags.is_empty() {
            body.insert("tags".to_owned(), json!(server.tags));
        }
        if let Some(password) = &server.admin_password {
            body.insert("adminPass".to_owned(), json!(password));
        }
        let mut request = json!({ "server": body });
        if !server.scheduler_hints.is_empty() {
            request["os:scheduler_hints"] = Value::Object(server.scheduler_hints.clone());
        }
        let answer = self
            .session
            .call(self.call(Call::post(Service::Compute, "/servers", request)))
            .await?;
        let created: Value = answer.json()?;
        let id = created["server"]["id"]
            .as_str()
            .ok_or_else(|| Error::Decode {
                service: Service::Compute,
                message: "the created server has no id".to_owned(),
            })?
            .to_owned();
        Ok(Server {
            id,
            name: server.name.clone(),
            status: "BUILD".to_owned(),
            tags: server.tags.clone(),
            raw: created["server"].clone(),
            ..Server::default()
        })
    }

    /// The server, or `None` when Nova no longer has it.
    pub async fn server(&self, id: &str) -> Result<Option<Server>> {
        match self
            .session
            .call_found(self.call(Call::get(
                Service::Compute,
                format!("/servers/{}", segment(id)),
            )))
            .await?
        {
            Some(answer) => {
                let value: Value = answer.json()?;
                Ok(Some(Server::from_value(value["server"].clone())?))
            }
            None => Ok(None),
        }
    }

    /// The servers carrying `tag` (in every project when `all_projects`,
    /// which needs an admin).
    pub async fn servers_tagged(&self, tag: &str, all_projects: bool) -> Result<Vec<Server>> {
        let mut servers = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let mut call = Call::get(Service::Compute, "/servers/detail")
                .query("tags", tag)
                .query("limit", PAGE.to_string());
            if all_projects {
                call = call.query("all_tenants", "1");
            }
            if let Some(marker) = &marker {
                call = call.query("marker", marker.clone());
            }
            let page: Value = self.session.call(self.call(call)).await?.json()?;
            let items = page["servers"].as_array().cloned().unwrap_or_default();
            let full = items.len() >= PAGE;
            for item in items {
                servers.push(Server::from_value(item)?);
            }
            match servers.last() {
                Some(last) if full => marker = Some(last.id.clone()),
                _ => return Ok(servers),
            }
        }
    }

    pub async fn rename_server(&self, id: &str, name: &str) -> Result<()> {
        self.session
            .call(self.call(Call::put(
                Service::Compute,
                format!("/servers/{}", segment(id)),
                json!({"server": {"name": name}}),
            )))
            .await?;
        Ok(())
    }

    /// Replaces the server's metadata with `metadata`.
    pub async fn set_server_metadata(
        &self,
        id: &str,
        metadata: &BTreeMap<String, String>,
    ) -> Result<()> {
        self.session
            .call(self.call(Call::put(
                Service::Compute,
                format!("/servers/{}/metadata", segment(id)),
                json!({ "metadata": metadata }),
            )))
            .await?;
        Ok(())
    }

    /// Asks for the server's deletion; one already gone is deleted.
    pub async fn delete_server(&self, id: &str) -> Result<()> {
        self.session
            .call_removing(self.call(Call::delete(
                Service::Compute,
                format!("/servers/{}", segment(id)),
            )))
            .await
    }

    pub async fn act(&self, id: &str, action: &ServerAction) -> Result<()> {
        let mut call = Call::post(
            Service::Compute,
            format!("/servers/{}/action", segment(id)),
            action.body(self.version),
        );
        // Asking again for a lock, an unlock or a state the server reached
        // changes nothing (Nova answers 409 for the last, which the caller
        // reads the server to judge).
        if matches!(action, ServerAction::Lock { .. } | ServerAction::Unlock) {
            call = call.idempotent();
        }
        self.session.call(self.call(call)).await?;
        Ok(())
    }

    /// The id of the flavor `id_or_name` names, or `None` when the cloud
    /// has none of that name or id; a flavor found is remembered for a
    /// minute (see [`Session::remembered_id`]).
    pub async fn flavor_id(&self, id_or_name: &str) -> Result<Option<String>> {
        match self
            .session
            .remembered_id("flavors", id_or_name, || async {
                match self.flavor(id_or_name).await? {
                    Some(flavor) => Ok(flavor.id),
                    None => Err(Error::Api(crate::error::ApiError {
                        service: Service::Compute,
                        method: "GET".to_owned(),
                        path: "/flavors/detail".to_owned(),
                        status: 404,
                        message: format!("Flavor {id_or_name} could not be found."),
                        request_id: None,
                    })),
                }
            })
            .await
        {
            Ok(id) => Ok(Some(id)),
            Err(error) if error.is_not_found() => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// A flavor by id, or else by name.
    pub async fn flavor(&self, id_or_name: &str) -> Result<Option<Flavor>> {
        if let Some(answer) = self
            .session
            .call_found(self.call(Call::get(
                Service::Compute,
                format!("/flavors/{}", segment(id_or_name)),
            )))
            .await?
        {
            let value: Value = answer.json()?;
            return Ok(Some(decode(value["flavor"].clone(), "a flavor")?));
        }
        let listed: Value =
            self.session
                .call(self.call(
                    Call::get(Service::Compute, "/flavors/detail").query("is_public", "None"),
                ))
                .await?
                .json()?;
        let flavors: Vec<Flavor> = decode(listed["flavors"].clone(), "flavors")?;
        Ok(flavors.into_iter().find(|flavor| flavor.name == id_or_name))
    }

    pub async fn create_key_pair(&self, key_pair: &NewKeyPair) -> Result<KeyPair> {
        let answer = self
            .session
            .call(self.call(Call::post(
                Service::Compute,
                "/os-keypairs",
                key_pair.body(),
            )))
            .await?;
        let value: Value = answer.json()?;
        with_raw(value["keypair"].clone(), "a key pair")
    }

    /// The key pair named `name` of `user_id` (another user's: admin), or
    /// of the caller; `None` when there is none.
    pub async fn key_pair(&self, name: &str, user_id: Option<&str>) -> Result<Option<KeyPair>> {
        let mut call = Call::get(Service::Compute, format!("/os-keypairs/{}", segment(name)));
        if let Some(user_id) = user_id {
            call = call.query("user_id", user_id);
        }
        match self.session.call_found(self.call(call)).await? {
            Some(answer) => {
                let value: Value = answer.json()?;
                Ok(Some(with_raw(value["keypair"].clone(), "a key pair")?))
            }
            None => Ok(None),
        }
    }

    /// Deletes the key pair (of `user_id`, or of the caller); one already
    /// gone is deleted.
    pub async fn delete_key_pair(&self, name: &str, user_id: Option<&str>) -> Result<()> {
        let mut call = Call::delete(Service::Compute, format!("/os-keypairs/{}", segment(name)));
        if let Some(user_id) = user_id {
            call = call.query("user_id", user_id);
        }
        self.session.call_removing(self.call(call)).await
    }

    pub async fn create_server_group(
        &self,
        name: &str,
        policy: &str,
        rules: Option<&Value>,
    ) -> Result<ServerGroup> {
        let mut group = json!({ "name": name });
        if self.version >= Microversion::new(2, 64) {
            group["policy"] = json!(policy);
            if let Some(rules) = rules {
                group["rules"] = rules.clone();
            }
        } else {
            group["policies"] = json!([policy]);
        }
        let answer = self
            .session
            .call(self.call(Call::post(
                Service::Compute,
                "/os-server-groups",
                json!({ "server_group": group }),
            )))
            .await?;
        let value: Value = answer.json()?;
        with_raw(value["server_group"].clone(), "a server group")
    }

    pub async fn server_group(&self, id: &str) -> Result<Option<ServerGroup>> {
        match self
            .session
            .call_found(self.call(Call::get(
                Service::Compute,
                format!("/os-server-groups/{}", segment(id)),
            )))
            .await?
        {
            Some(answer) => {
                let value: Value = answer.json()?;
                Ok(Some(with_raw(
                    value["server_group"].clone(),
                    "a server group",
                )?))
            }
            None => Ok(None),
        }
    }

    /// The project's server groups (to find one Ember made by its name).
    pub async fn server_groups(&self) -> Result<Vec<ServerGroup>> {
        let value: Value = self
            .session
            .call(self.call(Call::get(Service::Compute, "/os-server-groups")))
            .await?
            .json()?;
        value["server_groups"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|group| with_raw(group, "a server group"))
            .collect()
    }

    pub async fn delete_server_group(&self, id: &str) -> Result<()> {
        self.delete_ignoring_gone(format!("/os-server-groups/{}", segment(id)))
            .await
    }

    /// Attaches `volume_id` to the server (`device`: where, or Nova picks).
    pub async fn attach_volume(
        &self,
        server_id: &str,
        volume_id: &str,
        device: Option<&str>,
    ) -> Result<VolumeAttachment> {
        let mut attachment = json!({ "volumeId": volume_id });
        if let Some(device) = device {
            attachment["device"] = json!(device);
        }
        let answer = self
            .session
            .call(self.call(Call::post(
                Service::Compute,
                format!("/servers/{}/os-volume_attachments", segment(server_id)),
                json!({ "volumeAttachment": attachment }),
            )))
            .await?;
        let value: Value = answer.json()?;
        decode(value["volumeAttachment"].clone(), "a volume attachment")
    }

    pub async fn volume_attachments(&self, server_id: &str) -> Result<Vec<VolumeAttachment>> {
        let value: Value = self
            .session
            .call(self.call(Call::get(
                Service::Compute,
                format!("/servers/{}/os-volume_attachments", segment(server_id)),
            )))
            .await?
            .json()?;
        decode(value["volumeAttachments"].clone(), "volume attachments")
    }

    /// Detaches the volume; one not attached (or a server gone) is detached.
    pub async fn detach_volume(&self, server_id: &str, volume_id: &str) -> Result<()> {
        self.delete_ignoring_gone(format!(
            "/servers/{}/os-volume_attachments/{}",
            segment(server_id),
            segment(volume_id)
        ))
        .await
    }

    /// Plugs an interface into the server: an existing port, or a new port
    /// Nova makes on a network (with `fixed_ip` when given); returns the
    /// port's id.
    pub async fn attach_interface(&self, server_id: &str, plug: &InterfacePlug) -> Result<String> {
        let attachment = match plug {
            InterfacePlug::Port(port_id) => json!({ "port_id": port_id }),
            InterfacePlug::Network { id, fixed_ip } => {
                let mut attachment = json!({ "net_id": id });
                if let Some(address) = fixed_ip {
                    attachment["fixed_ips"] = json!([{ "ip_address": address }]);
                }
                attachment
            }
        };
        let answer: Value = self
            .session
            .call(self.call(Call::post(
                Service::Compute,
                format!("/servers/{}/os-interface", segment(server_id)),
                json!({ "interfaceAttachment": attachment }),
            )))
            .await?
            .json()?;
        answer["interfaceAttachment"]["port_id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| Error::Decode {
                service: Service::Compute,
                message: format!("an interface attachment without a port_id: {answer}"),
            })
    }

    /// Takes a port off the server (the port stays); one not attached, or
    /// a server gone, is detached.
    pub async fn detach_interface(&self, server_id: &str, port_id: &str) -> Result<()> {
        self.delete_ignoring_gone(format!(
            "/servers/{}/os-interface/{}",
            segment(server_id),
            segment(port_id)
        ))
        .await
    }

    async fn delete_ignoring_gone(&self, path: String) -> Result<()> {
        self.session
            .call_removing(self.call(Call::delete(Service::Compute, path)))
            .await
    }
}

/// What [`Nova::attach_interface`] plugs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterfacePlug {
    /// An existing port, by id.
    Port(String),
    /// A new port on the network `id`.
    Network {
        id: String,
        fixed_ip: Option<String>,
    },
}

/// What keeps Nova's whole answer beside the fields Ember reads.
trait KeepsRaw {
    fn keep_raw(&mut self, raw: Value);
}

impl KeepsRaw for KeyPair {
    fn keep_raw(&mut self, raw: Value) {
        self.raw = raw;
    }
}

impl KeepsRaw for ServerGroup {
    fn keep_raw(&mut self, raw: Value) {
        self.raw = raw;
    }
}

fn with_raw<T: serde::de::DeserializeOwned + KeepsRaw>(value: Value, what: &str) -> Result<T> {
    let mut decoded: T = decode(value.clone(), what)?;
    decoded.keep_raw(value);
    Ok(decoded)
}

fn decode<T: serde::de::DeserializeOwned>(value: Value, what: &str) -> Result<T> {
    serde_json::from_value(value).map_err(|error| Error::Decode {
        service: Service::Compute,
        message: format!("{what}: {error}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_written_as_nova_reads_them() {
        let lock = ServerAction::Lock {
            reason: Some("db maintenance".to_owned()),
        };
        assert_eq!(
            lock.body(Microversion::new(2, 79)),
            json!({"lock": {"locked_reason": "db maintenance"}})
        );
        // Before 2.73 Nova refuses a body for lock: the reason is left out.
        assert_eq!(lock.body(Microversion::new(2, 60)), json!({"lock": null}));
        assert_eq!(
            ServerAction::Stop.body(Microversion::new(2, 79)),
            json!({"os-stop": null})
        );
        assert_eq!(
            ServerAction::Resize {
                flavor_id: "2".to_owned()
            }
            .body(Microversion::new(2, 79)),
            json!({"resize": {"flavorRef": "2"}})
        );
    }

    #[test]
    fn a_key_pair_is_asked_for_with_only_what_is_given() {
        assert_eq!(
            NewKeyPair {
                name: "deploy".to_owned(),
                ..NewKeyPair::default()
            }
            .body(),
            json!({"keypair": {"name": "deploy"}})
        );
        assert_eq!(
            NewKeyPair {
                name: "deploy".to_owned(),
                public_key: Some("ssh-ed25519 AAAA".to_owned()),
                key_type: Some("ssh".to_owned()),
                user_id: Some("u1".to_owned()),
            }
            .body(),
            json!({"keypair": {"name": "deploy", "public_key": "ssh-ed25519 AAAA", "type": "ssh", "user_id": "u1"}})
        );
        let read: KeyPair = with_raw(
            json!({"name": "deploy", "public_key": "ssh-ed25519 AAAA", "fingerprint": "f", "id": 7, "created_at": "2026-01-01T00:00:00.000000", "deleted": false}),
            "a key pair",
        )
        .expect("a key pair");
        assert_eq!(read.id, Some(7));
        assert_eq!(read.raw["deleted"], json!(false));
    }

    #[test]
    fn a_server_keeps_what_nova_said() {
        let raw = json!({
            "id": "s1", "name": "web", "status": "ERROR",
            "OS-EXT-STS:task_state": null,
            "addresses": {"private": [{"addr": "10.0.0.5", "version": 4, "OS-EXT-IPS:type": "fixed", "OS-EXT-IPS-MAC:mac_addr": "fa:16:3e:00:00:01"}]},
            "fault": {"code": 500, "message": "No valid host was found. "},
            "locked": true, "locked_reason": "maintenance",
            "tags": ["ember-1"], "metadata": {"a": "b"}
        });
        let server = Server::from_value(raw.clone()).expect("a server");
        assert_eq!(server.addresses["private"][0].addr, "10.0.0.5");
        assert_eq!(server.fault_message(), "No valid host was found. ");
        assert!(server.is_settled());
        assert_eq!(server.locked_reason.as_deref(), Some("maintenance"));
        assert_eq!(server.raw, raw);
    }
}
