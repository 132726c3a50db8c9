//! `OS::Neutron::RouterInterface`: a subnet or a port plugged into a
//! router (`/work/heat-schemas.md` §8). Its id is Heat's
//! `<router id>:subnet_id=<subnet id>` (or `:port_id=<port id>`); nothing
//! changes in place.
//!
//! An interface carries no tags, so it is found again by what it is: the
//! router's interface port on the subnet (or the port itself, bound to
//! the router). A create that runs again (a retry, another engine
//! resuming) finds the interface an earlier attempt plugged and adopts it
//! instead of asking Neutron again (which refuses a second interface on
//! one subnet); a delete taken over from a create that recorded no id
//! finds it the same way.

use async_trait::async_trait;
use ember_openstack::neutron::{Kind, Neutron, RouterInterface as Plugged};
use serde_json::{Map, Value, json};

use super::{as_it_is, neutron_for, resolve};
use crate::domain::{Resource, StackAction};
use crate::resources::openstack::{Cloud, failure, physical_id, text};
use crate::resources::{
    PropertySchema, PropertyType, ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType,
    ResourceTypeSchema,
};

pub struct RouterInterface {
    cloud: Cloud,
    schema: ResourceTypeSchema,
}

/// The owners Neutron gives a router's interface ports (legacy, DVR, HA).
const INTERFACE_OWNERS: [&str; 3] = [
    "network:router_interface",
    "network:router_interface_distributed",
    "network:ha_router_replicated_interface",
];

impl RouterInterface {
    pub fn new(cloud: &Cloud) -> RouterInterface {
        RouterInterface {
            cloud: cloud.clone(),
            schema: schema(),
        }
    }

    /// The router's id and what plugs into it, names resolved.
    async fn wanted(
        &self,
        neutron: &Neutron,
        properties: &Map<String, Value>,
    ) -> Result<(String, Plugged), ResourceFailure> {
        let router = text(properties, "router").unwrap_or_default();
        let router_id = resolve(neutron, Kind::Router, &router).await?;
        let plugged = match plugged_property(properties)? {
            Plugged::Subnet(subnet) => {
                Plugged::Subnet(resolve(neutron, Kind::Subnet, &subnet).await?)
            }
            Plugged::Port(port) => Plugged::Port(resolve(neutron, Kind::Port, &port).await?),
        };
        Ok((router_id, plugged))
    }
}

/// The subnet or port the properties name (as given), exactly one of them
/// (Heat's `validate`); the deprecated `subnet_id`/`port_id` count as
/// `subnet`/`port`.
fn plugged_property(properties: &Map<String, Value>) -> Result<Plugged, ResourceFailure> {
    let subnet = text(properties, "subnet").or_else(|| text(properties, "subnet_id"));
    let port = text(properties, "port").or_else(|| text(properties, "port_id"));
    match (subnet, port) {
        (Some(subnet), None) => Ok(Plugged::Subnet(subnet)),
        (None, Some(port)) => Ok(Plugged::Port(port)),
        (Some(_), Some(_)) => Err(ResourceFailure::new(
            "Cannot define the following properties at the same time: subnet, port".to_owned(),
        )),
        (None, None) => Err(ResourceFailure::new(
            "At least one of the following properties must be specified: subnet, port".to_owned(),
        )),
    }
}

/// Heat's id of an interface.
fn interface_id(router_id: &str, plugged: &Plugged) -> String {
    match plugged {
        Plugged::Subnet(subnet) => format!("{router_id}:subnet_id={subnet}"),
        Plugged::Port(port) => format!("{router_id}:port_id={port}"),
    }
}

/// The router and interface an id names; the oldest form,
/// `<router>:<subnet>`, names a subnet.
fn parse_interface_id(id: &str) -> Result<(String, Plugged), ResourceFailure> {
    let (router, plugged) = id
        .split_once(':')
        .ok_or_else(|| ResourceFailure::new(format!("{id:?} is not a router interface's id")))?;
    let plugged = match plugged.split_once('=') {
        Some(("subnet_id", subnet)) => Plugged::Subnet(subnet.to_owned()),
        Some(("port_id", port)) => Plugged::Port(port.to_owned()),
        Some(_) => {
            return Err(ResourceFailure::new(format!(
                "{id:?} is not a router interface's id"
            )));
        }
        None => Plugged::Subnet(plugged.to_owned()),
    };
    Ok((router.to_owned(), plugged))
}

/// The router's interface port for `plugged`, if plugged.
async fn plugged_port(
    neutron: &Neutron,
    router_id: &str,
    plugged: &Plugged,
) -> Result<Option<Value>, ResourceFailure> {
    let ports = neutron
        .list(Kind::Port, &[("device_id", router_id)])
        .await
        .map_err(failure)?;
    Ok(ports.into_iter().find(|port| {
        let owned = port["device_owner"]
            .as_str()
            .is_some_and(|owner| INTERFACE_OWNERS.contains(&owner));
        owned
            && match plugged {
                Plugged::Port(id) => port["id"].as_str() == Some(id),
                Plugged::Subnet(id) => port["fixed_ips"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|fixed_ip| fixed_ip["subnet_id"].as_str() == Some(id)),
            }
    }))
}

/// The type's schema (shared with the simulated backend's twin).
pub fn schema() -> ResourceTypeSchema {
    ResourceTypeSchema {
        type_name: "OS::Neutron::RouterInterface",
        description: "A subnet or port plugged into a Neutron router.",
        properties: vec![
            PropertySchema::new("router", PropertyType::String, "The router.").required(),
            PropertySchema::new(
                "subnet",
                PropertyType::String,
                "The subnet, either subnet or port should be specified.",
            ),
            PropertySchema::new(
                "subnet_id",
                PropertyType::String,
                "The subnet (deprecated: use subnet).",
            ),
            PropertySchema::new(
                "port",
                PropertyType::String,
                "The port, either subnet or port should be specified.",
            ),
            PropertySchema::new(
                "port_id",
                PropertyType::String,
                "The port (deprecated: use port).",
            ),
        ],
        // Only `show` (every type's), as Heat.
        attributes: Vec::new(),
        accepts_any_properties: false,
        accepts_any_attributes: false,
    }
}

#[async_trait]
impl ResourceType for RouterInterface {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    /// Plugs the subnet or port in, unless an earlier attempt did (see the
    /// module's doc).
    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let neutron = neutron_for(&self.cloud, request.stack_id).await?;
        let (router_id, plugged) = self.wanted(&neutron, &request.properties).await?;
        let port = match plugged_port(&neutron, &router_id, &plugged).await? {
            Some(port) => port,
            None => {
                neutron
                    .add_router_interface(&router_id, &plugged)
                    .await
                    .map_err(failure)?;
                plugged_port(&neutron, &router_id, &plugged)
                    .await?
                    .unwrap_or(Value::Null)
            }
        };
        let mut attributes = Map::new();
        attributes.insert("router_id".to_owned(), json!(router_id));
        attributes.insert("port_id".to_owned(), port["id"].clone());
        attributes.insert("port".to_owned(), port);
        Ok(ResourceOutcome {
            physical_id: interface_id(&router_id, &plugged),
            attributes,
            data: Value::Object(Map::new()),
        })
    }

    /// Every change replaces the interface; an update only runs without
    /// one (nothing changed): the interface as it is.
    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        match as_it_is(current) {
            Some(outcome) => Ok(outcome),
            None => self.create(request).await,
        }
    }

    /// Unplugs it; unplugged already (or the router gone) is unplugged.
    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let Some(id) = physical_id(current) else {
            // Nothing recorded: the create failed before plugging it (it
            // records the id as soon as the interface exists).
            return Ok(());
        };
        let (router_id, plugged) = parse_interface_id(id)?;
        let neutron = neutron_for(&self.cloud, current.stack_id).await?;
        neutron
            .remove_router_interface(&router_id, &plugged)
            .await
            .map_err(failure)
    }

    /// A create in flight when its engine went away may have plugged the
    /// interface without recording its id: found by what it plugs.
    async fn resume_delete(&self, in_flight: &Resource) -> Result<(), ResourceFailure> {
        if physical_id(in_flight).is_some() {
            return self.delete(in_flight).await;
        }
        let neutron = neutron_for(&self.cloud, in_flight.stack_id).await?;
        let properties = in_flight
            .properties
            .as_object()
            .cloned()
            .unwrap_or_default();
        let Ok((router_id, plugged)) = self.wanted(&neutron, &properties).await else {
            // The router, subnet or port is gone, and the interface with it.
            return Ok(());
        };
        if plugged_port(&neutron, &router_id, &plugged)
            .await?
            .is_some()
        {
            neutron
                .remove_router_interface(&router_id, &plugged)
                .await
                .map_err(failure)?;
        }
        Ok(())
    }

    async fn check(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let Some(id) = physical_id(current) else {
            return Err(ResourceFailure::new(
                "no router interface was created".to_owned(),
            ));
        };
        let (router_id, plugged) = parse_interface_id(id)?;
        let neutron = neutron_for(&self.cloud, current.stack_id).await?;
        match plugged_port(&neutron, &router_id, &plugged).await? {
            Some(_) => Ok(()),
            None => Err(ResourceFailure::new(format!(
                "the router interface {id} is gone"
            ))),
        }
    }

    /// Every step is taken over: a create finds the interface an earlier
    /// attempt plugged, a delete finds it unplugged or unplugs it.
    fn take_over(&self, _step: StackAction) -> Result<(), String> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::openstack::neutron::fields;

    #[test]
    fn ids_are_heats_and_read_back() {
        let subnet = Plugged::Subnet("s1".to_owned());
        let id = interface_id("r1", &subnet);
        assert_eq!(id, "r1:subnet_id=s1");
        assert_eq!(
            parse_interface_id(&id).expect("parsed"),
            ("r1".to_owned(), subnet)
        );
        let port = Plugged::Port("p1".to_owned());
        assert_eq!(
            parse_interface_id(&interface_id("r1", &port)).expect("parsed"),
            ("r1".to_owned(), port)
        );
        assert_eq!(
            parse_interface_id("r1:s2").expect("the oldest form"),
            ("r1".to_owned(), Plugged::Subnet("s2".to_owned()))
        );
        assert!(parse_interface_id("r1").is_err());
        assert!(parse_interface_id("r1:network_id=n").is_err());
    }

    #[test]
    fn exactly_one_of_subnet_and_port() {
        assert_eq!(
            plugged_property(&fields(json!({"router": "r", "subnet": "s", "port": "p"})))
                .expect_err("both")
                .to_string(),
            "Cannot define the following properties at the same time: subnet, port"
        );
        assert_eq!(
            plugged_property(&fields(json!({"router": "r"})))
                .expect_err("none")
                .to_string(),
            "At least one of the following properties must be specified: subnet, port"
        );
        assert_eq!(
            plugged_property(&fields(json!({"router": "r", "subnet_id": "s"}))).expect("a subnet"),
            Plugged::Subnet("s".to_owned())
        );
    }
}
