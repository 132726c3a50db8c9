//! The docker backend's twins of the openstack network and volume types:
//! `OS::Neutron::Net`, `Subnet` and `Port` become container networks and
//! the endpoints of containers on them, `OS::Cinder::Volume` and
//! `AWS::EC2::Volume` container volumes, and their `VolumeAttachment`s
//! mounts of those volumes into a server's container (see
//! [`crate::compute::docker::objects`] for what each is in the engine).
//!
//! Each twin takes the schema of its openstack type
//! ([`super::openstack::schemas`]): the same properties, defaults and
//! attributes. What the engine cannot honour is refused by name before
//! anything is made ([`refusals`]), never ignored; the types it does not
//! offer at all (routers, floating IPs, security groups, key pairs, …)
//! are not registered on docker. What a twin makes carries the id its row
//! derives, so a retry or a resume finds it; deletes are idempotent and
//! wait until what they remove is gone.
//!
//! Update rules: a container network, a port's record and a mount cannot
//! change in place in the engine, so a change of any property of a net,
//! subnet, port or attachment replaces it; a volume changes in place
//! (its size, name, description and metadata are recorded; its data stay).

mod network;
mod refusals;
mod storage;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::openstack::cinder::Dialect;
use super::{
    ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType, ResourceTypeRegistry,
    ResourceTypeSchema,
};
use crate::compute::ComputeError;
use crate::compute::docker::DockerEngine;
use crate::compute::docker::objects::RemoveError;
use crate::domain::{Resource, StackAction};
use crate::instances::InstanceService;

/// Which type a twin is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Twin {
    Net,
    Subnet,
    Port,
    Volume(Dialect),
    VolumeAttachment(Dialect),
}

impl Twin {
    fn of(type_name: &str) -> Option<Twin> {
        Some(match type_name {
            "OS::Neutron::Net" => Twin::Net,
            "OS::Neutron::Subnet" => Twin::Subnet,
            "OS::Neutron::Port" => Twin::Port,
            "OS::Cinder::Volume" => Twin::Volume(Dialect::OpenStack),
            "AWS::EC2::Volume" => Twin::Volume(Dialect::Aws),
            "OS::Cinder::VolumeAttachment" => Twin::VolumeAttachment(Dialect::OpenStack),
            "AWS::EC2::VolumeAttachment" => Twin::VolumeAttachment(Dialect::Aws),
            _ => return None,
        })
    }
}

/// Why the docker backend does not offer the openstack types it has no
/// twin of.
const NOT_OFFERED: &str = "the docker backend has no routers, floating IPs, security groups, key pairs, server groups, images or volume types (the simulated and openstack backends offer them)";

/// The openstack types the docker backend does not offer (no twin here).
#[cfg(test)]
pub fn not_offered() -> Vec<&'static str> {
    super::openstack::schemas()
        .into_iter()
        .map(|schema| schema.type_name)
        .filter(|type_name| Twin::of(type_name).is_none())
        .collect()
}

/// Registers the docker twins, acting on `engine` (and on `instances`, for
/// the servers volumes are attached to).
pub fn register(
    registry: &mut ResourceTypeRegistry,
    engine: &Arc<DockerEngine>,
    instances: &Arc<InstanceService>,
) {
    for schema in super::openstack::schemas() {
        let Some(twin) = Twin::of(schema.type_name) else {
            registry.not_offered(schema.type_name, NOT_OFFERED);
            continue;
        };
        registry.register(Arc::new(DockerType {
            schema,
            twin,
            engine: engine.clone(),
            instances: instances.clone(),
        }));
    }
}

struct DockerType {
    schema: ResourceTypeSchema,
    twin: Twin,
    engine: Arc<DockerEngine>,
    instances: Arc<InstanceService>,
}

/// The longest a delete waits for containers to let go of what it removes
/// (a server deleted at the same time lets go of its network).
const IN_USE_DEADLINE: Duration = Duration::from_secs(120);

fn failure(error: ComputeError) -> ResourceFailure {
    ResourceFailure::new(error.0)
}

/// Removes with `remove` until it is gone, waiting (up to
/// [`IN_USE_DEADLINE`]) while containers still use it.
async fn remove_when_free<F, Fut>(what: &str, mut remove: F) -> Result<(), ResourceFailure>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), RemoveError>>,
{
    let deadline = Instant::now() + IN_USE_DEADLINE;
    let mut pause = Duration::from_millis(200);
    loop {
        match remove().await {
            Ok(()) => return Ok(()),
            Err(RemoveError::Failed(error)) => return Err(failure(error)),
            Err(RemoveError::InUse(users)) if Instant::now() > deadline => {
                return Err(ResourceFailure::new(format!(
                    "{what} is still in use by container(s) {} after {} s: delete what uses it first",
                    users.join(", "),
                    IN_USE_DEADLINE.as_secs()
                )));
            }
            Err(RemoveError::InUse(_)) => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// What a create or update asks of a twin.
struct Make<'a> {
    engine: &'a DockerEngine,
    instances: &'a InstanceService,
    request: &'a ResourceRequest,
    type_name: &'static str,
}

impl Make<'_> {
    fn properties(&self) -> &Map<String, Value> {
        &self.request.properties
    }

    fn project(&self) -> &str {
        &self.request.project_id
    }

    fn text(&self, name: &str) -> Option<String> {
        super::openstack::text(self.properties(), name).filter(|text| !text.is_empty())
    }

    fn flag(&self, name: &str) -> Option<bool> {
        self.properties().get(name).and_then(Value::as_bool)
    }

    fn id(&self, kind: &str) -> String {
        self.request.derived_id(kind).to_string()
    }

    /// The name the object gets: the property, else Heat's physical name.
    fn name(&self, property: &str) -> String {
        self.text(property)
            .unwrap_or_else(|| self.request.physical_resource_name())
    }
}

impl DockerType {
    fn make_context<'a>(&'a self, request: &'a ResourceRequest) -> Make<'a> {
        Make {
            engine: &self.engine,
            instances: &self.instances,
            request,
            type_name: self.schema.type_name,
        }
    }

    async fn make(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        refusals::check(self.twin, self.schema.type_name, &request.properties)?;
        let make = self.make_context(request);
        match self.twin {
            Twin::Net => network::net(&make).await,
            Twin::Subnet => network::subnet(&make).await,
            Twin::Port => network::port(&make).await,
            Twin::Volume(dialect) => storage::volume(&make, dialect).await,
            Twin::VolumeAttachment(dialect) => storage::attachment(&make, dialect).await,
        }
    }
}

#[async_trait]
impl ResourceType for DockerType {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    /// What the container engine cannot honour is refused when the
    /// template is validated (and again at create, for values functions
    /// gave).
    fn refuse_unhonoured(&self, properties: &Map<String, Value>) -> Result<(), String> {
        refusals::check(self.twin, self.schema.type_name, properties)
            .map_err(|failure| failure.to_string())
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        self.make(request).await
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        if let Twin::Volume(dialect) = self.twin {
            refusals::check(self.twin, self.schema.type_name, &request.properties)?;
            let make = self.make_context(request);
            return storage::update_volume(&make, dialect, current).await;
        }
        self.make(request).await
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        match self.twin {
            Twin::Net => network::delete_net(&self.engine, current).await,
            Twin::Subnet => network::delete_subnet(&self.engine, current).await,
            Twin::Port => network::delete_port(&self.engine, current).await,
            Twin::Volume(_) => storage::delete_volume(&self.engine, current).await,
            Twin::VolumeAttachment(_) => {
                storage::delete_attachment(&self.engine, &self.instances, current).await
            }
        }
    }

    /// Looks for what the row made: gone is a failed check.
    async fn check(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let there = match self.twin {
            Twin::Net => network::net_exists(&self.engine, current).await,
            Twin::Subnet => network::subnet_exists(&self.engine, current).await,
            Twin::Port => network::port_exists(&self.engine, current).await,
            Twin::Volume(_) => storage::volume_exists(&self.engine, current).await,
            Twin::VolumeAttachment(_) => {
                storage::attachment_exists(&self.engine, &self.instances, current).await
            }
        }?;
        if there {
            Ok(())
        } else {
            Err(ResourceFailure::new(format!(
                "{} {} is gone from the container engine",
                self.schema.type_name,
                current.physical_id.as_deref().unwrap_or_default()
            )))
        }
    }

    /// Every step is taken over: what a row makes is named by the id it
    /// derives, so doing it again finds it.
    fn take_over(&self, _step: StackAction) -> Result<(), String> {
        Ok(())
    }

    /// A container network, a port's record and a mount do not change in
    /// place: any change replaces them. A volume follows its schema.
    fn needs_replacement(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> bool {
        match self.twin {
            Twin::Volume(_) => super::fixed_property_changed(&self.schema, old, new),
            _ => old != new,
        }
    }
}

/// Private-data keys.
const PROJECT_KEY: &str = "project_id";
const USER_KEY: &str = "user_id";

fn data_text(current: &Resource, key: &str) -> Option<String> {
    current
        .data
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .filter(|text| !text.is_empty())
}

/// The id of the `kind` of object `current`'s row made (the same as its
/// create derived).
fn made_id(current: &Resource, kind: &str) -> String {
    super::derived_id(current.stack_id, current.id, kind).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_twins_take_their_openstack_schemas_and_the_rest_is_not_offered() {
        let schemas = super::super::openstack::schemas();
        let twins: Vec<&str> = schemas
            .iter()
            .map(|schema| schema.type_name)
            .filter(|name| Twin::of(name).is_some())
            .collect();
        assert_eq!(
            twins.len(),
            7,
            "net, subnet, port, two volumes, two attachments: {twins:?}"
        );
        let refused = not_offered();
        for type_name in [
            "OS::Neutron::Router",
            "OS::Neutron::RouterInterface",
            "OS::Neutron::FloatingIP",
            "OS::Neutron::SecurityGroup",
            "OS::Neutron::SecurityGroupRule",
            "OS::Nova::KeyPair",
        ] {
            assert!(refused.contains(&type_name), "{type_name}");
        }
        assert!(!refused.contains(&"OS::Neutron::Port"));
    }
}
