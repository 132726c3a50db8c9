//! The Neutron types — `OS::Neutron::{Net, Subnet, Port, Router,
//! RouterInterface, SecurityGroup, SecurityGroupRule, FloatingIP,
//! FloatingIPAssociation}` and the `AWS::EC2::{SecurityGroup, EIP,
//! EIPAssociation}` twins — acting on the real Neutron as the stack's
//! owner, with Heat's property names, defaults and update rules
//! (`/work/heat-schemas.md` §4–12, 17–19).
//!
//! Most of them make one taggable Neutron object (a network, a subnet, a
//! port, a router, a security group, a floating IP) and share one
//! lifecycle ([`lifecycle::Tagged`]): each says how its properties become
//! Neutron's create and update bodies ([`TaggedObject`]); the lifecycle
//! finds what an earlier attempt of the row made (by its marker tag)
//! before making anything, waits as Heat waits, deletes idempotently and
//! keeps the object's fields as the resource's attributes. The others
//! (an interface, a rule, an association) make nothing taggable, and each
//! says in its own module how it stays idempotent.
//!
//! Names of other objects (a network, a subnet, a security group, a
//! router) are resolved through the acting session ([`resolve`]), so
//! another project's objects are never found: Neutron hides them.

pub(crate) mod aws_security_group;
mod eip;
mod eip_association;
mod floating_ip;
mod floating_ip_association;
mod lifecycle;
mod net;
mod port;
mod properties;
mod router;
mod router_interface;
pub(crate) mod rules;
mod security_group;
mod security_group_rule;
mod subnet;

use std::sync::Arc;

use async_trait::async_trait;
use ember_openstack::neutron::{Kind, Neutron};
use serde_json::{Map, Value};

use super::{Cloud, failure, physical_id};
use crate::domain::Resource;
use crate::resources::{
    ResourceFailure, ResourceOutcome, ResourceRequest, ResourceTypeRegistry, ResourceTypeSchema,
};
use lifecycle::Tagged;
pub use properties::{
    check_value_specs, copy_given, copy_name_and_given, fields, maps, merge_given_value_specs,
    merge_value_specs, present, strings,
};

/// The schemas of the Neutron types and their `AWS::` twins, with no cloud
/// behind them (the simulated backend's twins share them).
pub fn schemas() -> Vec<ResourceTypeSchema> {
    vec![
        net::Net.schema(),
        subnet::Subnet.schema(),
        port::Port.schema(),
        router::Router.schema(),
        security_group::SecurityGroup.schema(),
        aws_security_group::AwsSecurityGroup.schema(),
        floating_ip::FloatingIp.schema(),
        eip::ElasticIp.schema(),
        router_interface::schema(),
        security_group_rule::schema(),
        floating_ip_association::schema(),
        eip_association::schema(),
    ]
}

pub fn register(registry: &mut ResourceTypeRegistry, cloud: &Cloud) {
    registry.register(Arc::new(Tagged::new(cloud, net::Net)));
    registry.register(Arc::new(Tagged::new(cloud, subnet::Subnet)));
    registry.register(Arc::new(Tagged::new(cloud, port::Port)));
    registry.register(Arc::new(Tagged::new(cloud, router::Router)));
    registry.register(Arc::new(Tagged::new(cloud, security_group::SecurityGroup)));
    registry.register(Arc::new(Tagged::new(
        cloud,
        aws_security_group::AwsSecurityGroup,
    )));
    registry.register(Arc::new(Tagged::new(cloud, floating_ip::FloatingIp)));
    registry.register(Arc::new(Tagged::new(cloud, eip::ElasticIp)));
    registry.register(Arc::new(router_interface::RouterInterface::new(cloud)));
    registry.register(Arc::new(security_group_rule::SecurityGroupRule::new(cloud)));
    registry.register(Arc::new(
        floating_ip_association::FloatingIpAssociation::new(cloud),
    ));
    registry.register(Arc::new(eip_association::ElasticIpAssociation::new(cloud)));
}

/// Whether a create or update waits for the object to be built (Heat's
/// `check_create_complete` with `is_built`) or takes it as Neutron
/// answered (Heat's types without one: subnets, security groups, floating
/// IPs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settling {
    UntilBuilt,
    AsAnswered,
}

/// What one type making a taggable Neutron object decides; the lifecycle
/// ([`lifecycle::Tagged`]) does the rest.
#[async_trait]
pub trait TaggedObject: Send + Sync + 'static {
    /// The kind of Neutron object the type makes.
    const KIND: Kind;

    /// Whether a create waits for the object to be built.
    const CREATE_SETTLING: Settling;

    /// Whether an in-place update waits for it (Heat waits after updating
    /// a network or a port, not a router).
    const UPDATE_SETTLING: Settling = Settling::AsAnswered;

    /// Whether the object is named after the resource when the template
    /// names it not (Heat's `prepare_properties` when the schema has
    /// `name`; the AWS security group always is).
    const NAMED_BY_DEFAULT: bool = true;

    fn schema(&self) -> ResourceTypeSchema;

    /// The tags the template asks for (Heat's `tags` property).
    fn user_tags(&self, properties: &Map<String, Value>) -> Result<Vec<String>, ResourceFailure> {
        strings(properties, "tags")
    }

    /// Neutron's create body (the member's fields) from the request's
    /// properties, names resolved through `neutron`. `name` is the name to
    /// give the object when the template gives none.
    async fn create_body(
        &self,
        neutron: &Neutron,
        request: &ResourceRequest,
        name: &str,
    ) -> Result<Map<String, Value>, ResourceFailure>;

    /// Neutron's update body for what changed (nothing to send: empty).
    async fn update_body(
        &self,
        neutron: &Neutron,
        change: &Change<'_>,
    ) -> Result<Map<String, Value>, ResourceFailure>;

    /// What a create does once the object exists (made now or found from
    /// an earlier attempt): a security group's rules. Must be idempotent.
    async fn after_create(
        &self,
        neutron: &Neutron,
        request: &ResourceRequest,
        object: &Value,
    ) -> Result<(), ResourceFailure> {
        let _ = (neutron, request, object);
        Ok(())
    }

    /// What an update does after the object's own fields changed.
    async fn after_update(
        &self,
        neutron: &Neutron,
        change: &Change<'_>,
    ) -> Result<(), ResourceFailure> {
        let _ = (neutron, change);
        Ok(())
    }

    /// The resource's attributes from the object as Neutron shows it: its
    /// fields, plus what a type computes (a port's `subnets`).
    async fn attributes(
        &self,
        neutron: &Neutron,
        object: Value,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        let _ = neutron;
        Ok(fields(object))
    }

    /// What `get_resource` returns: the Neutron id, as Heat's Neutron
    /// types do.
    fn reference(&self, current: &Resource) -> Value {
        current
            .physical_id
            .clone()
            .map_or(Value::Null, Value::String)
    }

    /// What the object gives up before its replacement is made (Heat's
    /// `prepare_for_replace`): a port its addresses. Nothing by default.
    async fn prepare_for_replace(
        &self,
        neutron: &Neutron,
        id: &str,
    ) -> Result<(), ResourceFailure> {
        let _ = (neutron, id);
        Ok(())
    }

    /// Whether a change of properties replaces the object; `None` leaves
    /// it to the schema (a change of a property not `update_allowed`).
    fn needs_replacement(
        &self,
        old: &Map<String, Value>,
        new: &Map<String, Value>,
    ) -> Option<bool> {
        let _ = (old, new);
        None
    }
}

/// An in-place update: the properties before and after, and the object.
pub struct Change<'a> {
    pub request: &'a ResourceRequest,
    pub before: &'a Map<String, Value>,
    pub id: &'a str,
}

impl Change<'_> {
    pub fn after(&self) -> &Map<String, Value> {
        &self.request.properties
    }

    /// The property's new value (`Null` when removed) if it changed.
    pub fn changed(&self, name: &str) -> Option<Value> {
        let before = present(self.before, name);
        let after = present(self.after(), name);
        (before != after).then(|| after.cloned().unwrap_or(Value::Null))
    }

    /// Copies each of `names` that changed into `body` as it is now
    /// (`null` when removed, which Neutron takes as "unset").
    pub fn copy_changed(&self, body: &mut Map<String, Value>, names: &[&str]) {
        for name in names {
            if let Some(value) = self.changed(name) {
                body.insert((*name).to_owned(), value);
            }
        }
    }

    /// `name` when it changed: the template's, or — removed from the
    /// template — the name Heat gives an unnamed object.
    pub fn changed_name(&self, body: &mut Map<String, Value>, kind: Kind) {
        if let Some(name) = self.changed("name") {
            let name = match name {
                Value::Null => Value::String(physical_name(self.request, kind)),
                given => given,
            };
            body.insert("name".to_owned(), name);
        }
    }

    /// The `value_specs` entries that changed, merged into `body` (Heat's
    /// `prepare_update_properties`: an entry removed is left as it is).
    pub fn changed_value_specs(&self, body: &mut Map<String, Value>) {
        if self.changed("value_specs").is_none() {
            return;
        }
        let before = self.before.get("value_specs").and_then(Value::as_object);
        if let Some(after) = self.after().get("value_specs").and_then(Value::as_object) {
            merge_value_specs(body, after, before);
        }
    }
}

/// Neutron as the owner of `stack_id` (through its session), as `nova_for`
/// and `cinder_for` give their services.
async fn neutron_for(cloud: &Cloud, stack_id: uuid::Uuid) -> Result<Neutron, ResourceFailure> {
    Ok(Neutron::new(&cloud.session(stack_id).await?))
}

/// What an update of a type that every change replaces returns (it runs
/// only when nothing changed): the resource as it is, or `None` when its
/// create never recorded an id, which is to be made again.
fn as_it_is(current: &Resource) -> Option<ResourceOutcome> {
    physical_id(current).map(|id| ResourceOutcome {
        physical_id: id.to_owned(),
        attributes: current.attributes.as_object().cloned().unwrap_or_default(),
        data: current.data.clone(),
    })
}

/// The name Heat gives an object the template does not name:
/// `<stack>-<resource>-<suffix>`. The suffix derives from the row (as the
/// marker does), not from chance as [`ResourceRequest::physical_resource_name`]'s:
/// an attempt made again names it alike, so an object made just before a
/// crash, before its tag was set, is still found (by this name).
pub fn physical_name(request: &ResourceRequest, kind: Kind) -> String {
    let derived = request.derived_id(kind.member()).simple().to_string();
    format!(
        "{}-{}-{}",
        request.stack_name,
        request.resource_name,
        &derived[..12]
    )
}

/// The id of the `kind` of object `name_or_id` names, through the acting
/// session (another project's objects are not found). The failure keeps
/// Neutron's words: `Unable to find network with name or id '…'`.
pub async fn resolve(
    neutron: &Neutron,
    kind: Kind,
    name_or_id: &str,
) -> Result<String, ResourceFailure> {
    neutron.find_id(kind, name_or_id).await.map_err(failure)
}

/// The property resolved to an id, if given.
pub async fn resolve_property(
    neutron: &Neutron,
    properties: &Map<String, Value>,
    name: &str,
    kind: Kind,
) -> Result<Option<String>, ResourceFailure> {
    match super::text(properties, name) {
        Some(given) if !given.is_empty() => Ok(Some(resolve(neutron, kind, &given).await?)),
        _ => Ok(None),
    }
}

/// The ids of the security groups `names_or_ids` names (Heat's
/// `get_secgroup_uuids`): a UUID as it is, a name looked up among the
/// acting project's own groups only — an admin sees every project's
/// `default`, and means their own.
pub async fn security_group_ids(
    neutron: &Neutron,
    project_id: &str,
    names_or_ids: &[String],
) -> Result<Vec<String>, ResourceFailure> {
    let mut ids = Vec::with_capacity(names_or_ids.len());
    for name_or_id in names_or_ids {
        if uuid::Uuid::parse_str(name_or_id).is_ok() {
            ids.push(name_or_id.clone());
            continue;
        }
        let named = neutron
            .list(
                Kind::SecurityGroup,
                &[("name", name_or_id), ("project_id", project_id)],
            )
            .await
            .map_err(failure)?;
        match named.as_slice() {
            [one] => ids.push(ember_openstack::neutron::id_of(one).map_err(failure)?),
            [] => {
                return Err(ResourceFailure::new(format!(
                    "The Resource ({name_or_id}) could not be found."
                )));
            }
            _ => {
                return Err(ResourceFailure::new(format!(
                    "Multiple physical resources were found with name ({name_or_id})."
                )));
            }
        }
    }
    Ok(ids)
}

/// Heat's `is_built`: whether an object is there yet (`BUILD` is not;
/// `ACTIVE` and `DOWN` are), failing on `ERROR` or `DEGRADED` and on a
/// status Heat does not know. An object without a status (a subnet, a
/// security group) is built when it exists.
pub fn is_built(object: &Value) -> Result<bool, ResourceFailure> {
    match object.get("status").and_then(Value::as_str) {
        None => Ok(true),
        Some("BUILD") => Ok(false),
        Some("ACTIVE" | "DOWN") => Ok(true),
        Some(status @ ("ERROR" | "DEGRADED")) => Err(ResourceFailure::new(format!(
            "Went to status {status} due to \"Unknown\""
        ))),
        Some(other) => Err(ResourceFailure::new(format!(
            "Resource is not built - Unknown status {other} due to \"Unknown\""
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_unnamed_object_is_named_after_its_row_the_same_each_time() {
        let request = ResourceRequest {
            stack_id: uuid::Uuid::now_v7(),
            stack_name: "web".to_owned(),
            project_id: "p".to_owned(),
            user_id: "u".to_owned(),
            nested_depth: 0,
            type_name: "OS::Neutron::Net".to_owned(),
            resource_name: "net".to_owned(),
            resource_id: uuid::Uuid::now_v7(),
            properties: Map::new(),
        };
        let name = physical_name(&request, Kind::Network);
        assert_eq!(
            name,
            physical_name(&request, Kind::Network),
            "the same on every attempt"
        );
        assert!(name.starts_with("web-net-"), "{name}");
        assert_eq!(name.len(), "web-net-".len() + 12);
        assert_ne!(
            name,
            physical_name(&request, Kind::Port),
            "each kind its own"
        );
        let suffix = &request.derived_id("network").simple().to_string()[..12];
        assert!(name.ends_with(suffix), "derived from the row: {name}");
    }

    #[test]
    fn built_is_active_or_down_and_error_fails_as_heat_says() {
        assert!(!is_built(&json!({"status": "BUILD"})).expect("waits"));
        assert!(is_built(&json!({"status": "ACTIVE"})).expect("built"));
        assert!(is_built(&json!({"status": "DOWN"})).expect("built"));
        assert!(is_built(&json!({"id": "subnet"})).expect("no status: built"));
        assert_eq!(
            is_built(&json!({"status": "ERROR"}))
                .expect_err("failed")
                .to_string(),
            "Went to status ERROR due to \"Unknown\""
        );
        assert_eq!(
            is_built(&json!({"status": "PENDING_CREATE"}))
                .expect_err("unknown")
                .to_string(),
            "Resource is not built - Unknown status PENDING_CREATE due to \"Unknown\""
        );
    }
}
