//! The simulated backend's twins of the openstack types — networks,
//! subnets, ports, routers and their interfaces, security groups and
//! rules, floating IPs and their associations, volumes and attachments,
//! volume types and their encryption, key pairs, server groups, images,
//! and the `AWS::` twins — acting on the
//! simulated cloud ([`SimulatedCloud`]) instead of a real one, so a
//! template written for Heat on OpenStack runs unchanged on `ember dev`.
//!
//! Each twin takes the schema of its openstack type
//! ([`super::openstack::schemas`]): the same properties, defaults, update
//! rules and attributes, checked the same way. What a twin makes has the
//! id the resource row derives for it, so a create run again (a retry, a
//! resume) finds the same object; its attributes are the object's fields,
//! as the service would show them.

mod compute;
mod floating;
mod network;
mod security;
mod storage;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::openstack::cinder::Dialect;
use super::{
    LockRequest, ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType,
    ResourceTypeRegistry, ResourceTypeSchema,
};
use crate::cloud::simulated::{Kind, Object, SimulatedCloud, World};
use crate::domain::Resource;

/// Which type a twin is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Twin {
    Net,
    Subnet,
    Port,
    Router,
    RouterInterface,
    SecurityGroup,
    AwsSecurityGroup,
    SecurityGroupRule,
    FloatingIp,
    ElasticIp,
    FloatingIpAssociation,
    ElasticIpAssociation,
    Volume(Dialect),
    VolumeAttachment(Dialect),
    KeyPair,
    ServerGroup,
    WebImage,
    VolumeType,
    EncryptedVolumeType,
}

impl Twin {
    fn of(type_name: &str) -> Option<Twin> {
        Some(match type_name {
            "OS::Neutron::Net" => Twin::Net,
            "OS::Neutron::Subnet" => Twin::Subnet,
            "OS::Neutron::Port" => Twin::Port,
            "OS::Neutron::Router" => Twin::Router,
            "OS::Neutron::RouterInterface" => Twin::RouterInterface,
            "OS::Neutron::SecurityGroup" => Twin::SecurityGroup,
            "AWS::EC2::SecurityGroup" => Twin::AwsSecurityGroup,
            "OS::Neutron::SecurityGroupRule" => Twin::SecurityGroupRule,
            "OS::Neutron::FloatingIP" => Twin::FloatingIp,
            "AWS::EC2::EIP" => Twin::ElasticIp,
            "OS::Neutron::FloatingIPAssociation" => Twin::FloatingIpAssociation,
            "AWS::EC2::EIPAssociation" => Twin::ElasticIpAssociation,
            "OS::Cinder::Volume" => Twin::Volume(Dialect::OpenStack),
            "AWS::EC2::Volume" => Twin::Volume(Dialect::Aws),
            "OS::Cinder::VolumeAttachment" => Twin::VolumeAttachment(Dialect::OpenStack),
            "AWS::EC2::VolumeAttachment" => Twin::VolumeAttachment(Dialect::Aws),
            "OS::Nova::KeyPair" => Twin::KeyPair,
            "OS::Nova::ServerGroup" => Twin::ServerGroup,
            "OS::Glance::WebImage" => Twin::WebImage,
            "OS::Cinder::VolumeType" => Twin::VolumeType,
            "OS::Cinder::EncryptedVolumeType" => Twin::EncryptedVolumeType,
            _ => return None,
        })
    }
}

/// Registers the twin of every openstack type, acting on `cloud`.
pub fn register(registry: &mut ResourceTypeRegistry, cloud: &Arc<SimulatedCloud>) {
    for schema in super::openstack::schemas() {
        // Every openstack type has a twin (a test holds this).
        let Some(twin) = Twin::of(schema.type_name) else {
            continue;
        };
        registry.register(Arc::new(SimulatedType {
            schema,
            twin,
            cloud: cloud.clone(),
        }));
    }
}

struct SimulatedType {
    schema: ResourceTypeSchema,
    twin: Twin,
    cloud: Arc<SimulatedCloud>,
}

impl SimulatedType {
    fn make(
        &self,
        request: &ResourceRequest,
        current: Option<&Resource>,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let made = self.cloud.with(|world| {
            let mut make = Make {
                world,
                request,
                current,
                schema: &self.schema,
            };
            match self.twin {
                Twin::Net => network::net(&mut make),
                Twin::Subnet => network::subnet(&mut make),
                Twin::Port => network::port(&mut make),
                Twin::Router => network::router(&mut make),
                Twin::RouterInterface => network::router_interface(&mut make),
                Twin::SecurityGroup => security::group(&mut make),
                Twin::AwsSecurityGroup => security::aws_group(&mut make),
                Twin::SecurityGroupRule => security::rule(&mut make),
                Twin::FloatingIp => floating::floating_ip(&mut make),
                Twin::ElasticIp => floating::elastic_ip(&mut make),
                Twin::FloatingIpAssociation => floating::association(&mut make),
                Twin::ElasticIpAssociation => floating::elastic_association(&mut make),
                Twin::Volume(dialect) => storage::volume(&mut make, dialect),
                Twin::VolumeAttachment(dialect) => storage::attachment(&mut make, dialect),
                Twin::KeyPair => compute::key_pair(&mut make),
                Twin::ServerGroup => compute::server_group(&mut make),
                Twin::WebImage => compute::image(&mut make),
                Twin::VolumeType => storage::volume_type(&mut make),
                Twin::EncryptedVolumeType => storage::encrypted_volume_type(&mut make),
            }
        })?;
        let mut attributes = made.attributes;
        attributes.insert("show".to_owned(), Value::Object(made.fields.clone()));
        Ok(ResourceOutcome {
            physical_id: made.physical_id,
            attributes,
            data: Value::Object(made.data),
        })
    }
}

#[async_trait]
impl ResourceType for SimulatedType {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        self.make(request, None)
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        self.make(request, Some(current))
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        self.cloud.with(|world| match self.twin {
            Twin::RouterInterface => network::remove_router_interface(world, current),
            Twin::SecurityGroupRule => security::remove_rule(world, current),
            Twin::FloatingIpAssociation | Twin::ElasticIpAssociation => {
                floating::remove_association(world, current)
            }
            Twin::VolumeAttachment(_) => storage::remove_attachment(world, current),
            Twin::EncryptedVolumeType => storage::remove_encryption(world, current),
            _ => remove_made(world, current),
        })
    }

    /// Reads the object again: gone is a failed check, as a real service's
    /// 404 would be.
    async fn check(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let Some(id) = made_id(current) else {
            return Ok(());
        };
        self.cloud.with(|world| match world.get_any(&id) {
            Some(_) => Ok(()),
            None => Err(ResourceFailure::new(format!(
                "{} {id} is gone from the cloud",
                self.schema.type_name
            ))),
        })
    }

    /// An object of the stack's project (or one shared with it), as a
    /// project-scoped read of the real service finds it: another
    /// project's is not found.
    async fn adopt(
        &self,
        request: &ResourceRequest,
        adopted: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let id = adopted.physical_id.clone().unwrap_or_default();
        let fields = self.cloud.with(|world| {
            world
                .get_any(&id)
                .filter(|object| object.visible_to(&request.project_id))
                .map(|object| object.fields.clone())
        });
        let Some(fields) = fields else {
            return Err(ResourceFailure::new(format!(
                "no {} {} in this project",
                self.schema.type_name,
                ember_runtime::quote::quoted(&id)
            )));
        };
        // Its fields, as the service shows them (a made one's attributes
        // are read from the same fields).
        let mut attributes = fields.clone();
        attributes.insert("show".to_owned(), Value::Object(fields));
        Ok(ResourceOutcome {
            physical_id: id,
            attributes,
            data: Value::Null,
        })
    }

    /// Nothing is made outside the simulated cloud, and making it again
    /// (same ids) is harmless.
    fn acts_outside_its_row(&self) -> bool {
        false
    }

    fn has_lock_handler(&self) -> bool {
        self.twin == Twin::WebImage
    }

    /// A stack's `level=all` lock protects the images it made, as on a
    /// real cloud.
    async fn lock(
        &self,
        current: &Resource,
        request: &LockRequest,
    ) -> Result<Value, ResourceFailure> {
        let _ = request;
        compute::protect(&self.cloud, current, true)
    }

    async fn unlock(
        &self,
        current: &Resource,
        request: &LockRequest,
    ) -> Result<Value, ResourceFailure> {
        let _ = request;
        compute::protect(&self.cloud, current, false)
    }

    /// A port lets its addresses go before its replacement is made, so
    /// the replacement can take them (Heat's `Port.prepare_for_replace`).
    async fn prepare_for_replace(&self, current: &Resource) -> Result<(), ResourceFailure> {
        if self.twin != Twin::Port {
            return Ok(());
        }
        let Some(id) = made_id(current) else {
            return Ok(());
        };
        self.cloud.with(|world| {
            let fixed_ips = world
                .get_any(&id)
                .map(|port| port.fields["fixed_ips"].clone());
            if let Some(fixed_ips) = fixed_ips {
                world.release_all(&fixed_ips);
                if let Some(fields) = world.fields_mut(&id) {
                    fields.insert("fixed_ips".to_owned(), json!([]));
                }
            }
        });
        Ok(())
    }

    fn reference(&self, current: &Resource) -> Value {
        match self.twin {
            // `Ref` of an elastic IP is its address.
            Twin::ElasticIp => current
                .attributes
                .get("floating_ip_address")
                .cloned()
                .unwrap_or_else(|| json!(current.name)),
            _ => current
                .physical_id
                .clone()
                .map_or(Value::Null, Value::String),
        }
    }
}

/// What a create or update asks of a twin.
struct Make<'a> {
    world: &'a mut World,
    request: &'a ResourceRequest,
    /// The resource as it stands, for an update.
    current: Option<&'a Resource>,
    schema: &'a ResourceTypeSchema,
}

impl<'a> Make<'a> {
    fn project(&self) -> &'a str {
        &self.request.project_id
    }

    fn properties(&self) -> &'a Map<String, Value> {
        &self.request.properties
    }

    fn text(&self, name: &str) -> Option<String> {
        super::openstack::text(self.properties(), name).filter(|text| !text.is_empty())
    }

    fn flag(&self, name: &str) -> Option<bool> {
        self.properties().get(name).and_then(Value::as_bool)
    }

    /// The id of what this row makes of `kind`.
    fn id(&self, kind: &str) -> String {
        self.request.derived_id(kind).to_string()
    }

    /// The object the row made already (an update, or a create run again).
    fn existing(&self, id: &str) -> Option<Object> {
        self.world.get_any(id).cloned()
    }

    /// The name the object gets: the property, else the name it has, else
    /// Heat's physical resource name.
    fn name(&self, property: &str, existing: Option<&Object>) -> String {
        self.text(property).unwrap_or_else(|| match existing {
            Some(object) if !object.name().is_empty() => object.name().to_owned(),
            _ => self.request.physical_resource_name(),
        })
    }

    /// `name_or_id` of `kind`, in the caller's project.
    fn find(&mut self, kind: Kind, name_or_id: &str) -> Result<String, ResourceFailure> {
        let project = self.request.project_id.clone();
        self.world
            .find(&project, kind, name_or_id)
            .map_err(ResourceFailure::new)
    }

    fn insert(&mut self, id: &str, kind: Kind, fields: Map<String, Value>) {
        self.world.insert(Object {
            id: id.to_owned(),
            project: self.request.project_id.clone(),
            kind,
            fields,
        });
    }
}

/// What a twin made: its physical id, what the service shows of it, and
/// the attributes (the fields, unless the type names them otherwise).
struct Made {
    physical_id: String,
    fields: Map<String, Value>,
    attributes: Map<String, Value>,
    data: Map<String, Value>,
}

impl Made {
    fn object(id: &str, fields: Map<String, Value>) -> Made {
        Made {
            physical_id: id.to_owned(),
            attributes: fields.clone(),
            fields,
            data: Map::new(),
        }
    }

    fn with_data(mut self, key: &str, value: Value) -> Made {
        self.data.insert(key.to_owned(), value);
        self
    }
}

/// The id of the object a resource made (its physical id, unless the type
/// recorded another in its data).
fn made_id(current: &Resource) -> Option<String> {
    current
        .data
        .get("object_id")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| current.physical_id.clone())
        .filter(|id| !id.is_empty())
}

/// Deletes what the row made; gone already is fine.
fn remove_made(world: &mut World, current: &Resource) -> Result<(), ResourceFailure> {
    let Some(id) = made_id(current) else {
        return Ok(());
    };
    world.remove(&id).map(|_| ()).map_err(ResourceFailure::new)
}

/// A list property's entries that are maps (`fixed_ips`, `rules`, …).
fn entries<'a>(properties: &'a Map<String, Value>, name: &str) -> Vec<&'a Map<String, Value>> {
    properties
        .get(name)
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default()
}

/// A list property's entries as text.
fn texts(properties: &Map<String, Value>, name: &str) -> Vec<String> {
    properties
        .get(name)
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|item| match item {
                    Value::String(text) => Some(text.clone()),
                    Value::Null => None,
                    other => Some(other.to_string()),
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_openstack_type_has_a_simulated_twin_with_its_schema() {
        let cloud = Arc::new(SimulatedCloud::new());
        let mut registry = ResourceTypeRegistry::builtin();
        register(&mut registry, &cloud);
        for schema in crate::resources::openstack::schemas() {
            let twin = registry
                .get(schema.type_name)
                .unwrap_or_else(|| panic!("{} has no twin", schema.type_name));
            let names = |schema: &ResourceTypeSchema| {
                schema
                    .properties
                    .iter()
                    .map(|property| property.name)
                    .collect::<Vec<_>>()
            };
            assert_eq!(names(twin.schema()), names(&schema), "{}", schema.type_name);
        }
    }
}
