//! `OS::Nova::Server` (also `Ember::Compute::Instance`): a compute instance
//! created through the same [`InstanceService`] as the Compute API, on
//! behalf of the stack's owner. Create and delete wait for the instance to
//! become ACTIVE or DELETED; suspend and resume power it off and on; name
//! and metadata change in place, anything else replaces it (a new image,
//! flavor, user data, command or environment is a new machine). A check
//! fails unless the instance is ACTIVE, or STOPPED on request: a machine
//! that died or stopped by itself is CHECK_FAILED, so the next update
//! replaces it.
//!
//! The instance's uuid derives from the resource's row
//! ([`ResourceRequest::derived_id`]) and is its primary key, so it is
//! recorded in the same write that makes the instance: every step another
//! engine had in flight when it went away is taken over — the create finds
//! the instance made before (and waits for it to be ACTIVE, or fails if it
//! went into ERROR) instead of making a second, the delete finds it gone
//! (deleted) or being deleted (and waits), and a driver task the engine
//! left unfinished is continued here. Suspend and resume are idempotent at
//! the instance, as Heat's are: an instance already STOPPED (ACTIVE for a
//! resume) is the finished step, one whose power task is under way is
//! waited for (the task continued if its engine went away), and only an
//! instance in the other power state is asked to change — so a power
//! action is never asked twice, and a step redone finds what the first
//! attempt did.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ember_runtime::Identity;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{
    AttributeSchema, LockRequest, PropertySchema, PropertyType, ResourceFailure, ResourceOutcome,
    ResourceRequest, ResourceType, ResourceTypeSchema,
};
use crate::compute::MachineDetails;
use crate::domain::instance::placement::{NetworkRequest, Placement};
use crate::domain::instance::{
    Instance, InstanceChanges, InstanceStatus, NewInstance, PowerAction, Workload,
};
use crate::domain::{LockLevel, Resource, StackAction};
use crate::error::Error;
use crate::instances::InstanceService;

/// Private-data key: the stack's maintenance lock placed the instance lock.
const LOCKED_BY_STACK: &str = "locked_by_stack";

/// How long create and delete wait for the compute driver.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(600);

/// What the instance's uuid is derived for (see
/// [`ResourceRequest::derived_id`]).
const INSTANCE_KIND: &str = "instance";

/// How many times a suspend or resume reads the instance and decides
/// again when its power request is refused because the instance moved
/// meanwhile (see [`ServerResource::power`]).
const POWER_DECISIONS: u32 = 3;

/// Whether a step was taken over from an engine that went away: an
/// instance task that engine left unfinished is continued then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    First,
    TakenOver,
}

pub struct ServerResource {
    schema: ResourceTypeSchema,
    instances: Arc<InstanceService>,
}

impl ServerResource {
    pub fn new(type_name: &'static str, instances: Arc<InstanceService>) -> Self {
        ServerResource {
            schema: ResourceTypeSchema {
                type_name,
                description: "A compute instance.",
                properties: vec![
                    PropertySchema::new(
                        "name",
                        PropertyType::String,
                        "Instance name (default: a generated one).",
                    )
                    .update_allowed(),
                    PropertySchema::new(
                        "flavor",
                        PropertyType::String,
                        "Flavor; a change replaces the instance.",
                    )
                    .required(),
                    PropertySchema::new(
                        "image",
                        PropertyType::String,
                        "Image (name or id); a change replaces the instance. Required unless block_device_mapping_v2 boots from a volume.",
                    ),
                    PropertySchema::new("metadata", PropertyType::Map, "Key/value metadata.")
                        .default(json!({}))
                        .update_allowed(),
                    PropertySchema::new("networks", PropertyType::List, "Networks (recorded).")
                        .update_allowed(),
                    PropertySchema::new(
                        "security_groups",
                        PropertyType::List,
                        "Security groups (recorded).",
                    )
                    .update_allowed(),
                    PropertySchema::new(
                        "key_name",
                        PropertyType::String,
                        "Key pair name (recorded).",
                    ),
                    PropertySchema::new(
                        "user_data",
                        PropertyType::String,
                        "User data; with the docker driver, a script (#!…) is the container's process and the text is in EMBER_USER_DATA.",
                    ),
                    PropertySchema::new(
                        "user_data_format",
                        PropertyType::String,
                        "How user data is given (recorded; only RAW has a meaning here).",
                    ),
                    PropertySchema::new(
                        "command",
                        PropertyType::List,
                        "The command the machine runs (Ember extension; with the docker driver, the container's command).",
                    ),
                    PropertySchema::new(
                        "env",
                        PropertyType::Map,
                        "Environment variables of the machine (Ember extension).",
                    ),
                    PropertySchema::new(
                        "availability_zone",
                        PropertyType::String,
                        "Availability zone.",
                    ),
                    PropertySchema::new(
                        "block_device_mapping_v2",
                        PropertyType::List,
                        "Volumes, images, snapshots or blank disks to attach at boot (Nova's block device mapping v2).",
                    ),
                    PropertySchema::new(
                        "scheduler_hints",
                        PropertyType::Map,
                        "Hints for the cloud's scheduler (a server group: {group: <id>}).",
                    ),
                    PropertySchema::new(
                        "config_drive",
                        PropertyType::Boolean,
                        "Whether the cloud gives the machine a configuration drive.",
                    ),
                    PropertySchema::new(
                        "flavor_update_policy",
                        PropertyType::String,
                        "How a new flavor is applied: Ember replaces the server either way (see docs/openstack.md, its differences from Heat).",
                    )
                    .default(json!("RESIZE"))
                    .update_allowed()
                    .allowed_values(vec![json!("RESIZE"), json!("REPLACE")]),
                    PropertySchema::new(
                        "image_update_policy",
                        PropertyType::String,
                        "How a new image is applied: Ember replaces the server either way (see docs/openstack.md, its differences from Heat).",
                    )
                    .default(json!("REBUILD"))
                    .update_allowed()
                    .allowed_values(vec![
                        json!("REBUILD"),
                        json!("REPLACE"),
                        json!("REBUILD_PRESERVE_EPHEMERAL"),
                    ]),
                    PropertySchema::new(
                        "software_config_transport",
                        PropertyType::String,
                        "How software deployments reach the server (recorded: Ember's deployments are signalled through its API).",
                    )
                    .update_allowed()
                    .allowed_values(vec![
                        json!("POLL_SERVER_CFN"),
                        json!("POLL_SERVER_HEAT"),
                        json!("POLL_TEMP_URL"),
                        json!("ZAQAR_MESSAGE"),
                    ]),
                ],
                attributes: vec![
                    AttributeSchema {
                        name: "id",
                        description: "The instance's UUID.",
                    },
                    AttributeSchema {
                        name: "name",
                        description: "The instance's name.",
                    },
                    AttributeSchema {
                        name: "status",
                        description: "The instance's status.",
                    },
                    AttributeSchema {
                        name: "locked",
                        description: "Whether the instance is locked.",
                    },
                    AttributeSchema {
                        name: "instance_uuid",
                        description: "Ember's instance behind the server (its uuid in the instances API).",
                    },
                    AttributeSchema {
                        name: "addresses",
                        description: "The server's addresses by network, as the cloud shows them.",
                    },
                    AttributeSchema {
                        name: "networks",
                        description: "The server's IP addresses by network name.",
                    },
                    AttributeSchema {
                        name: "first_address",
                        description: "The first address of the server's last network by name (Heat's deprecated attribute).",
                    },
                    AttributeSchema {
                        name: "accessIPv4",
                        description: "The server's public IPv4 address, if the cloud sets one.",
                    },
                    AttributeSchema {
                        name: "accessIPv6",
                        description: "The server's public IPv6 address, if the cloud sets one.",
                    },
                    AttributeSchema {
                        name: "instance_name",
                        description: "The hypervisor's name of the server (admins only).",
                    },
                ],
                accepts_any_properties: false,
                accepts_any_attributes: false,
            },
            instances,
        }
    }
}

/// The identity the resource acts as: the stack's owner, recorded in the
/// resource's private data at create so delete and the rest can use it.
fn owner_of(current: &Resource) -> Result<Identity, ResourceFailure> {
    let read = |key: &str| {
        current
            .data
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    match (read("user_id"), read("project_id")) {
        (Some(user_id), Some(project_id)) => Ok(Identity::new(
            user_id,
            project_id,
            vec!["member".to_owned()],
        )),
        _ => Err(ResourceFailure::new(
            "the instance's owner was not recorded".to_owned(),
        )),
    }
}

/// The Ember instance behind the resource: recorded in its private data
/// when the cloud knows the server by another id (its physical id then),
/// else its physical id.
fn instance_id(current: &Resource) -> Option<Uuid> {
    current
        .data
        .get(INSTANCE_UUID)
        .and_then(Value::as_str)
        .or(current.physical_id.as_deref())
        .and_then(|id| Uuid::parse_str(id).ok())
}

/// Private-data key of the instance's uuid, when the physical id is the
/// cloud's id of the server.
const INSTANCE_UUID: &str = "instance_uuid";

/// Where the cloud places the machine, from the template's properties.
fn placement_of(properties: &Map<String, Value>) -> Result<Placement, ResourceFailure> {
    let strings = |name: &str| -> Result<Vec<String>, ResourceFailure> {
        match properties.get(name) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| match item {
                    Value::String(text) => Ok(text.clone()),
                    other => Err(ResourceFailure::new(format!(
                        "{name}: must be a list of strings, got {other}"
                    ))),
                })
                .collect(),
            Some(other) => Err(ResourceFailure::new(format!(
                "{name}: must be a list, got {other}"
            ))),
        }
    };
    let text = |map: &Map<String, Value>, key: &str| match map.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(other) => Some(other.to_string()),
    };
    let mut networks = Vec::new();
    if let Some(Value::Array(entries)) = properties.get("networks") {
        for (index, entry) in entries.iter().enumerate() {
            let Value::Object(entry) = entry else {
                return Err(ResourceFailure::new(format!(
                    "networks[{index}]: must be a map, got {entry}"
                )));
            };
            let known = ["network", "uuid", "port", "subnet", "fixed_ip", "tag"];
            if let Some(unsupported) = entry.keys().find(|key| !known.contains(&key.as_str())) {
                return Err(ResourceFailure::new(format!(
                    "networks[{index}].{unsupported}: not supported by Ember (it takes {})",
                    known.join(", ")
                )));
            }
            networks.push(NetworkRequest {
                network: text(entry, "network").or_else(|| text(entry, "uuid")),
                port: text(entry, "port"),
                subnet: text(entry, "subnet"),
                fixed_ip: text(entry, "fixed_ip"),
                tag: text(entry, "tag"),
            });
        }
    }
    let placement = Placement {
        networks,
        security_groups: strings("security_groups")?,
        key_name: properties
            .get("key_name")
            .and_then(Value::as_str)
            .map(str::to_owned),
        availability_zone: properties
            .get("availability_zone")
            .and_then(Value::as_str)
            .map(str::to_owned),
        block_device_mapping: match properties.get("block_device_mapping_v2") {
            Some(Value::Array(entries)) => entries.clone(),
            _ => Vec::new(),
        },
        scheduler_hints: match properties.get("scheduler_hints") {
            Some(Value::Object(hints)) => hints.clone(),
            _ => Map::new(),
        },
        config_drive: properties.get("config_drive").and_then(Value::as_bool),
    };
    placement.validate()?;
    Ok(placement)
}

/// Heat's server attributes from what the cloud shows of the machine:
/// `addresses` as Nova shows them, `networks` (each network's IPs),
/// `first_address` (the first IP of the last network by name, as Heat
/// picks it), access IPs, the hypervisor's name, and the whole server for
/// `show`.
fn machine_attributes(attributes: &mut Map<String, Value>, details: &MachineDetails) {
    let networks: Map<String, Value> = details
        .addresses
        .iter()
        .map(|(network, entries)| {
            let ips: Vec<Value> = entries
                .iter()
                .filter_map(|entry| entry.get("addr").cloned())
                .collect();
            (network.clone(), Value::Array(ips))
        })
        .collect();
    let first_address = networks
        .iter()
        .rev()
        .find_map(|(_, ips)| ips.as_array().and_then(|ips| ips.first()).cloned())
        .unwrap_or_else(|| json!(""));
    attributes.insert("id".to_owned(), json!(details.machine_id));
    attributes.insert("addresses".to_owned(), json!(details.addresses));
    attributes.insert("networks".to_owned(), Value::Object(networks));
    attributes.insert("first_address".to_owned(), first_address);
    attributes.insert("accessIPv4".to_owned(), json!(details.access_ipv4));
    attributes.insert("accessIPv6".to_owned(), json!(details.access_ipv6));
    attributes.insert("instance_name".to_owned(), json!(details.instance_name));
    attributes.insert("show".to_owned(), details.raw.clone());
}

fn string_metadata(properties: &Map<String, Value>) -> BTreeMap<String, String> {
    properties
        .get("metadata")
        .and_then(Value::as_object)
        .map(|metadata| {
            metadata
                .iter()
                .map(|(key, value)| {
                    let text = match value {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    };
                    (key.clone(), text)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The machine's workload from the properties: `command` as a list of
/// strings (numbers become text), `env` as a map of strings.
fn workload_of(properties: &Map<String, Value>) -> Result<Workload, ResourceFailure> {
    let text = |value: &Value| match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let command = match properties.get("command") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.iter().map(text).collect(),
        Some(other) => {
            return Err(ResourceFailure::new(format!(
                "command: must be a list of strings, got {other}"
            )));
        }
    };
    let env = properties
        .get("env")
        .and_then(Value::as_object)
        .map(|env| {
            env.iter()
                .map(|(name, value)| (name.clone(), text(value)))
                .collect()
        })
        .unwrap_or_default();
    let user_data = properties
        .get("user_data")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Ok(Workload {
        user_data,
        command,
        env,
    })
}

fn attributes_of(instance: &Instance) -> Map<String, Value> {
    let mut attributes = Map::new();
    attributes.insert("id".to_owned(), json!(instance.uuid.to_string()));
    attributes.insert("name".to_owned(), json!(instance.name));
    attributes.insert("status".to_owned(), json!(instance.status.as_str()));
    attributes.insert("locked".to_owned(), json!(instance.is_locked()));
    attributes
}

impl ServerResource {
    /// Waits until `done` says so of the instance (see
    /// [`InstanceService::wait`]), failing on ERROR; `None` when it is gone.
    async fn wait_for(
        &self,
        caller: &Identity,
        uuid: Uuid,
        done: impl Fn(&Instance) -> bool,
    ) -> Result<Option<Instance>, ResourceFailure> {
        self.instances
            .wait(caller, uuid, SETTLE_TIMEOUT, |read| match read {
                Ok(instance) if done(&instance) => Some(Ok(Some(instance))),
                Ok(instance) if instance.status == InstanceStatus::Error => {
                    Some(Err(ResourceFailure::new(format!(
                        "instance {} went into ERROR: {}",
                        instance.uuid, instance.status_reason
                    ))))
                }
                Ok(_) => None,
                Err(Error::NotFound(_)) => Some(Ok(None)),
                Err(error) => Some(Err(ResourceFailure::from(error))),
            })
            .await
            .unwrap_or_else(|| {
                Err(ResourceFailure::new(format!(
                    "instance {uuid} did not settle within {SETTLE_TIMEOUT:?}"
                )))
            })
    }

    /// Makes the row's instance — or finds the one an earlier attempt
    /// made (same derived uuid) — and waits until it is ACTIVE.
    async fn make(
        &self,
        request: &ResourceRequest,
        attempt: Attempt,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let caller = Identity::new(
            request.user_id.clone(),
            request.project_id.clone(),
            vec!["member".to_owned()],
        );
        let name = request
            .properties
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| request.physical_resource_name());
        let placement = placement_of(&request.properties)?;
        let delegation = self.instances.stack_delegation(request.stack_id).await?;
        let new = NewInstance {
            name,
            flavor: request
                .properties
                .get("flavor")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            image: request
                .properties
                .get("image")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            metadata: string_metadata(&request.properties),
            workload: workload_of(&request.properties)?,
            placement,
            delegation,
        };
        let uuid = request.derived_id(INSTANCE_KIND);
        let instance = self.instances.create_with_uuid(&caller, uuid, new).await?;
        if attempt == Attempt::TakenOver {
            self.continue_unfinished_task(&caller, uuid).await?;
        }
        let active = self
            .wait_for(&caller, instance.uuid, |instance| {
                instance.status == InstanceStatus::Active
            })
            .await?
            .ok_or_else(|| {
                ResourceFailure::new(format!(
                    "instance {} disappeared while building",
                    instance.uuid
                ))
            })?;
        self.outcome(
            &caller,
            &active,
            json!({ "user_id": request.user_id, "project_id": request.project_id }),
        )
        .await
    }

    /// The create's (or update's) outcome: the instance's uuid as the
    /// physical id and its attributes — or, where the cloud knows the
    /// server by an id of its own (Nova's), that id (what Heat's templates
    /// hand to volume attachments and floating IPs) and Heat's server
    /// attributes, the instance's uuid kept in the private data.
    async fn outcome(
        &self,
        caller: &Identity,
        instance: &Instance,
        mut data: Value,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let mut attributes = attributes_of(instance);
        let details = self
            .instances
            .machine_details(caller, instance.uuid)
            .await?;
        let physical_id = match details {
            Some(details) => {
                machine_attributes(&mut attributes, &details);
                if let Value::Object(map) = &mut data {
                    map.insert(INSTANCE_UUID.to_owned(), json!(instance.uuid.to_string()));
                }
                details.machine_id
            }
            None => instance.uuid.to_string(),
        };
        attributes.insert(INSTANCE_UUID.to_owned(), json!(instance.uuid.to_string()));
        Ok(ResourceOutcome {
            physical_id,
            attributes,
            data,
        })
    }

    /// Continues the driver task the instance was left in by the engine
    /// that went away, if any (gone is not an error here: the wait that
    /// follows tells).
    async fn continue_unfinished_task(
        &self,
        caller: &Identity,
        uuid: Uuid,
    ) -> Result<(), ResourceFailure> {
        match self.instances.continue_unfinished_task(caller, uuid).await {
            Ok(_) | Err(Error::NotFound(_)) => Ok(()),
            Err(error) => Err(ResourceFailure::from(error)),
        }
    }

    /// Deletes the row's instance and waits until it is gone: gone already
    /// is deleted, and one being deleted is waited for. A row without a
    /// physical id — its create failed with the instance made (in ERROR),
    /// or was in flight on an engine that went away — finds its instance
    /// by the uuid derived from the row; a step taken over continues a
    /// delete the engine that went away left unfinished.
    async fn remove(&self, current: &Resource, attempt: Attempt) -> Result<(), ResourceFailure> {
        let (uuid, caller) = match instance_id(current) {
            Some(uuid) => (uuid, owner_of(current)?),
            // No physical id: a create that failed (the instance made, and
            // in ERROR) or one taken over before it recorded one — the
            // instance is found by the uuid derived from the row.
            None => {
                let uuid = super::derived_id(current.stack_id, current.id, INSTANCE_KIND);
                match self.instances.owner_of(uuid).await? {
                    Some(owner) => (uuid, owner),
                    // Never made: nothing to delete.
                    None => return Ok(()),
                }
            }
        };
        let instance = match self.instances.get(&caller, uuid).await {
            Ok(instance) => instance,
            Err(Error::NotFound(_)) => return Ok(()),
            Err(error) => return Err(ResourceFailure::from(error)),
        };
        if instance.status == InstanceStatus::Deleting {
            if attempt == Attempt::TakenOver {
                self.continue_unfinished_task(&caller, uuid).await?;
            }
        } else {
            match self.instances.delete(&caller, uuid).await {
                Ok(_) => {}
                Err(Error::NotFound(_)) => return Ok(()),
                Err(error) => return Err(ResourceFailure::from(error)),
            }
        }
        self.wait_for(&caller, uuid, |instance| {
            instance.status == InstanceStatus::Deleted
        })
        .await
        .map(|_| ())
    }

    /// Brings the instance to `expected` (STOPPED for a power off, ACTIVE
    /// for a power on), whatever an earlier attempt of the step did: at
    /// `expected` with no task under way it is there already; with this
    /// action's task under way (the power state says so) it is waited for,
    /// and continued here if the engine that started it went away —
    /// another engine taking a suspend or resume over finds it so; else
    /// the power action is asked for and waited for. A request refused
    /// because the instance moved meanwhile (a concurrent request of the
    /// same action) is decided again on its new state.
    async fn power(
        &self,
        current: &Resource,
        action: PowerAction,
        expected: InstanceStatus,
    ) -> Result<(), ResourceFailure> {
        let Some(uuid) = instance_id(current) else {
            return Ok(());
        };
        let caller = owner_of(current)?;
        let task = action.task();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let instance = self.instances.get(&caller, uuid).await?;
            let under_way = instance.unfinished_task();
            if under_way == Some(task) {
                self.continue_unfinished_task(&caller, uuid).await?;
                break;
            }
            if instance.status == expected && under_way.is_none() {
                return Ok(());
            }
            match self.instances.power(&caller, uuid, action).await {
                Ok(_) => break,
                Err(Error::Conflict(_)) if attempts < POWER_DECISIONS => continue,
                Err(error) => return Err(ResourceFailure::from(error)),
            }
        }
        self.wait_for(&caller, uuid, |instance| instance.status == expected)
            .await?
            .ok_or_else(|| {
                ResourceFailure::new(format!(
                    "instance {uuid} disappeared while its power {} ran",
                    action.as_str()
                ))
            })?;
        Ok(())
    }
}

#[async_trait]
impl ResourceType for ServerResource {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        self.make(request, Attempt::First).await
    }

    /// The create found the instance made before, if there is one.
    async fn resume_create(
        &self,
        request: &ResourceRequest,
        _in_flight: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        self.make(request, Attempt::TakenOver).await
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let Some(uuid) = instance_id(current) else {
            return self.create(request).await;
        };
        let caller = owner_of(current)?;
        let changes = InstanceChanges {
            name: request
                .properties
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_owned),
            metadata: Some(string_metadata(&request.properties)),
            // Replugged in place when they changed (needs_replacement let
            // this update through only where the driver can).
            networks: Some(placement_of(&request.properties)?.networks),
        };
        let instance = self.instances.update(&caller, uuid, changes).await?;
        self.outcome(&caller, &instance, current.data.clone()).await
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        self.remove(current, Attempt::First).await
    }

    /// A change of `networks` replugs the machine in place, as Heat
    /// attaches and detaches interfaces, where the driver can (Nova, the
    /// simulated cloud); from or to no networks at all, or on a driver
    /// that cannot, it replaces the server. A change of `security_groups`
    /// replaces it (Heat changes the ports' groups in place). The schema
    /// keeps Heat's `update_allowed`, so the difference is here, not in
    /// what the API shows.
    fn needs_replacement(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> bool {
        let given = |properties: &Map<String, Value>| matches!(properties.get("networks"), Some(Value::Array(list)) if !list.is_empty());
        let networks_replace = old.get("networks") != new.get("networks")
            && !(self.instances.replugs_in_place() && given(old) && given(new));
        networks_replace
            || old.get("security_groups") != new.get("security_groups")
            || super::fixed_property_changed(&self.schema, old, new)
    }

    /// The ports the template gave the server go to its replacement: they
    /// are taken off this one first (Heat does the same).
    async fn prepare_for_replace(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let Some(uuid) = instance_id(current) else {
            return Ok(());
        };
        match self
            .instances
            .release_ports(&owner_of(current)?, uuid)
            .await
        {
            Ok(()) | Err(Error::NotFound(_)) => Ok(()),
            Err(error) => Err(ResourceFailure::from(error)),
        }
    }

    async fn resume_delete(&self, in_flight: &Resource) -> Result<(), ResourceFailure> {
        self.remove(in_flight, Attempt::TakenOver).await
    }

    /// Every step is taken over (see the module's doc): creates and
    /// deletes find what an earlier attempt made, an in-place update
    /// (name, metadata) and a check are harmless to redo, and a suspend or
    /// resume finds the instance at its power state already, or its power
    /// task under way and continues it, instead of asking for it twice.
    fn take_over(&self, _step: StackAction) -> Result<(), String> {
        Ok(())
    }

    /// An instance of the stack's project, named by its uuid: another
    /// project's is not found, as one nobody made. The stack then acts on
    /// it as its owner (check, suspend, resume, lock) and never deletes it.
    async fn adopt(
        &self,
        request: &ResourceRequest,
        adopted: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let external_id = adopted.physical_id.as_deref().unwrap_or_default();
        let not_found = || {
            ResourceFailure::new(format!(
                "no instance {} in this project",
                ember_runtime::quote::quoted(external_id)
            ))
        };
        let uuid = Uuid::parse_str(external_id).map_err(|_| not_found())?;
        let caller = Identity::new(
            request.user_id.clone(),
            request.project_id.clone(),
            vec!["member".to_owned()],
        );
        let instance = match self.instances.get(&caller, uuid).await {
            Ok(instance) => instance,
            Err(Error::NotFound(_)) => return Err(not_found()),
            Err(other) => return Err(ResourceFailure::from(other)),
        };
        self.outcome(
            &caller,
            &instance,
            json!({ "user_id": request.user_id, "project_id": request.project_id }),
        )
        .await
    }

    async fn check(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let Some(uuid) = instance_id(current) else {
            return Err(ResourceFailure::new("no instance was created".to_owned()));
        };
        // The machine as it is now (Nova's state on the openstack backend).
        let instance = self.instances.refresh(&owner_of(current)?, uuid).await?;
        match instance.status {
            InstanceStatus::Active => Ok(()),
            // Stopped on request (a suspended stack) is healthy; a machine
            // that stopped by itself carries the reason and is not.
            InstanceStatus::Stopped if instance.status_reason.is_empty() => Ok(()),
            other if instance.status_reason.is_empty() => Err(ResourceFailure::new(format!(
                "instance {uuid} is {}",
                other.as_str()
            ))),
            other => Err(ResourceFailure::new(format!(
                "instance {uuid} is {}: {}",
                other.as_str(),
                instance.status_reason
            ))),
        }
    }

    async fn suspend(&self, current: &Resource) -> Result<(), ResourceFailure> {
        self.power(current, PowerAction::Off, InstanceStatus::Stopped)
            .await
    }

    /// Level `all` locks the instance as the stack's locker; the resource
    /// remembers that it placed the lock so unlock lifts only that one.
    fn has_lock_handler(&self) -> bool {
        true
    }

    async fn lock(
        &self,
        current: &Resource,
        request: &LockRequest,
    ) -> Result<Value, ResourceFailure> {
        let (Some(uuid), LockLevel::All) = (instance_id(current), request.level) else {
            return Ok(current.data.clone());
        };
        let outcome = self
            .instances
            .lock(&request.caller, uuid, request.reason.clone())
            .await?;
        let mut data = current.data.clone();
        if outcome.previous_lock.is_none()
            && let Value::Object(map) = &mut data
        {
            map.insert(LOCKED_BY_STACK.to_owned(), Value::Bool(true));
        }
        Ok(data)
    }

    async fn unlock(
        &self,
        current: &Resource,
        request: &LockRequest,
    ) -> Result<Value, ResourceFailure> {
        let Some(uuid) = instance_id(current) else {
            return Ok(current.data.clone());
        };
        if current.data.get(LOCKED_BY_STACK) != Some(&Value::Bool(true)) {
            return Ok(current.data.clone());
        }
        match self.instances.unlock(&request.caller, uuid).await {
            // Already lifted by someone else: nothing left to undo.
            Ok(_) | Err(Error::Conflict(_)) | Err(Error::NotFound(_)) => {}
            Err(error) => return Err(ResourceFailure::from(error)),
        }
        let mut data = current.data.clone();
        if let Value::Object(map) = &mut data {
            map.remove(LOCKED_BY_STACK);
        }
        Ok(data)
    }

    async fn resume(&self, current: &Resource) -> Result<(), ResourceFailure> {
        self.power(current, PowerAction::On, InstanceStatus::Active)
            .await
    }

    /// The instance's status now: a restore powers it back to it.
    async fn snapshot_state(&self, current: &Resource) -> Result<Option<Value>, ResourceFailure> {
        let Some(uuid) = instance_id(current) else {
            return Ok(None);
        };
        match self.instances.get(&owner_of(current)?, uuid).await {
            Ok(instance) => Ok(Some(json!({
                "status": instance.status.as_str(),
                "power_state": instance.power_state.as_str(),
            }))),
            Err(Error::NotFound(_)) => Ok(None),
            Err(error) => Err(ResourceFailure::from(error)),
        }
    }

    /// Powers the instance on or off as the snapshot found it.
    async fn restore_state(
        &self,
        current: &Resource,
        recorded: &Value,
    ) -> Result<(), ResourceFailure> {
        let Some(uuid) = instance_id(current) else {
            return Ok(());
        };
        let live = self.instances.get(&owner_of(current)?, uuid).await?;
        match (recorded["status"].as_str(), live.status) {
            (Some("STOPPED"), InstanceStatus::Active) => {
                self.power(current, PowerAction::Off, InstanceStatus::Stopped)
                    .await
            }
            (Some("ACTIVE"), InstanceStatus::Stopped) => {
                self.power(current, PowerAction::On, InstanceStatus::Active)
                    .await
            }
            _ => Ok(()),
        }
    }
}
