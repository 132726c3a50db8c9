//! `OS::Neutron::FloatingIPAssociation`: a floating IP forwarded to a port
//! (`/work/heat-schemas.md` §12). Its id is the resource row's own id, as
//! Heat's is; everything changes in place.
//!
//! Associating is idempotent at Neutron (a floating IP set to the port it
//! is on already stays so), so a create that runs again does it again.
//! Letting go is conditional: the floating IP is taken off the port only
//! while it is still on this association's port — one that someone moved
//! since (another association) is left where it is.

use async_trait::async_trait;
use ember_openstack::neutron::{Kind, Neutron};
use serde_json::{Map, Value, json};

use super::{fields, neutron_for, present, resolve};
use crate::domain::{Resource, StackAction};
use crate::resources::openstack::{Cloud, failure, physical_id, text};
use crate::resources::{
    PropertySchema, PropertyType, ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType,
    ResourceTypeSchema,
};

pub struct FloatingIpAssociation {
    cloud: Cloud,
    schema: ResourceTypeSchema,
}

impl FloatingIpAssociation {
    pub fn new(cloud: &Cloud) -> FloatingIpAssociation {
        FloatingIpAssociation {
            cloud: cloud.clone(),
            schema: schema(),
        }
    }

    /// Sets the floating IP `floating_ip` on the port the properties name.
    async fn associate(
        &self,
        neutron: &Neutron,
        floating_ip: &str,
        properties: &Map<String, Value>,
    ) -> Result<Value, ResourceFailure> {
        let port = text(properties, "port_id").unwrap_or_default();
        let mut body = Map::new();
        body.insert(
            "port_id".to_owned(),
            json!(resolve(neutron, Kind::Port, &port).await?),
        );
        if let Some(address) = present(properties, "fixed_ip_address") {
            body.insert("fixed_ip_address".to_owned(), address.clone());
        }
        neutron
            .update(Kind::FloatingIp, floating_ip, body)
            .await
            .map_err(failure)
    }

    async fn outcome(
        &self,
        request: &ResourceRequest,
        neutron: &Neutron,
        properties: &Map<String, Value>,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let floating_ip = text(properties, "floatingip_id").unwrap_or_default();
        let associated = self.associate(neutron, &floating_ip, properties).await?;
        Ok(ResourceOutcome {
            physical_id: request.resource_id.to_string(),
            attributes: fields(associated),
            data: Value::Object(Map::new()),
        })
    }
}

/// Takes the floating IP `floating_ip` off `port_id` (a name or id), if it
/// is still there; a floating IP or port gone is let go of.
async fn dissociate(
    neutron: &Neutron,
    floating_ip: &str,
    port: &str,
) -> Result<(), ResourceFailure> {
    let Some(current) = neutron
        .get(Kind::FloatingIp, floating_ip)
        .await
        .map_err(failure)?
    else {
        return Ok(());
    };
    let Some(on_port) = current["port_id"].as_str() else {
        return Ok(());
    };
    let port_id = match neutron.find_id(Kind::Port, port).await {
        Ok(port_id) => port_id,
        Err(error) if error.is_not_found() => return Ok(()),
        Err(error) => return Err(failure(error)),
    };
    if on_port != port_id {
        return Ok(());
    }
    let mut body = Map::new();
    body.insert("port_id".to_owned(), Value::Null);
    match neutron.update(Kind::FloatingIp, floating_ip, body).await {
        Ok(_) => Ok(()),
        Err(error) if error.is_not_found() => Ok(()),
        Err(error) => Err(failure(error)),
    }
}

/// The type's schema (shared with the simulated backend's twin).
pub fn schema() -> ResourceTypeSchema {
    ResourceTypeSchema {
        type_name: "OS::Neutron::FloatingIPAssociation",
        description: "A Neutron floating IP forwarded to a port.",
        properties: vec![
            PropertySchema::new("floatingip_id", PropertyType::String, "ID of the floating IP to associate.")
                .required()
                .update_allowed(),
            PropertySchema::new(
                "port_id",
                PropertyType::String,
                "ID of an existing port with at least one IP address to associate with this floating IP.",
            )
            .required()
            .update_allowed(),
            PropertySchema::new(
                "fixed_ip_address",
                PropertyType::String,
                "IP address to use if the port has multiple addresses.",
            )
            .update_allowed(),
        ],
        // Only `show` (every type's), as Heat.
        attributes: Vec::new(),
        accepts_any_properties: false,
        accepts_any_attributes: false,
    }
}

#[async_trait]
impl ResourceType for FloatingIpAssociation {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let neutron = neutron_for(&self.cloud, request.stack_id).await?;
        self.outcome(request, &neutron, &request.properties).await
    }

    /// Moves the association: a new floating IP lets the old one go first
    /// (Heat's `handle_update`); a fixed address removed from the template
    /// keeps the one in use, as Heat's `or` fallback does.
    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let neutron = neutron_for(&self.cloud, request.stack_id).await?;
        let before = current.properties.as_object().cloned().unwrap_or_default();
        let old_floating_ip = text(&before, "floatingip_id").unwrap_or_default();
        let new_floating_ip = text(&request.properties, "floatingip_id").unwrap_or_default();
        if old_floating_ip != new_floating_ip {
            let old_port = text(&before, "port_id").unwrap_or_default();
            dissociate(&neutron, &old_floating_ip, &old_port).await?;
        }
        let mut properties = request.properties.clone();
        if present(&properties, "fixed_ip_address").is_none()
            && let Some(address) = present(&before, "fixed_ip_address")
        {
            properties.insert("fixed_ip_address".to_owned(), address.clone());
        }
        self.outcome(request, &neutron, &properties).await
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        if physical_id(current).is_none() {
            // Nothing recorded: the create failed before associating.
            return Ok(());
        }
        self.let_go(current).await
    }

    /// A create in flight when its engine went away may have associated
    /// without recording it: let go by the properties, as a delete does.
    async fn resume_delete(&self, in_flight: &Resource) -> Result<(), ResourceFailure> {
        self.let_go(in_flight).await
    }

    async fn check(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let neutron = neutron_for(&self.cloud, current.stack_id).await?;
        let properties = current.properties.as_object().cloned().unwrap_or_default();
        let floating_ip = text(&properties, "floatingip_id").unwrap_or_default();
        let port = text(&properties, "port_id").unwrap_or_default();
        let port_id = resolve(&neutron, Kind::Port, &port).await?;
        let shown = neutron
            .get(Kind::FloatingIp, &floating_ip)
            .await
            .map_err(failure)?
            .ok_or_else(|| {
                ResourceFailure::new(format!("the floating IP {floating_ip} is gone"))
            })?;
        if shown["port_id"].as_str() == Some(&port_id) {
            Ok(())
        } else {
            Err(ResourceFailure::new(format!(
                "the floating IP {floating_ip} is not on the port {port_id} (on {})",
                shown["port_id"]
            )))
        }
    }

    /// Every step is taken over: associating again is a no-op at Neutron,
    /// and letting go again finds it let go.
    fn take_over(&self, _step: StackAction) -> Result<(), String> {
        Ok(())
    }
}

impl FloatingIpAssociation {
    /// Lets the floating IP go of the port the row's properties name.
    async fn let_go(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let neutron = neutron_for(&self.cloud, current.stack_id).await?;
        let properties = current.properties.as_object().cloned().unwrap_or_default();
        let floating_ip = text(&properties, "floatingip_id").unwrap_or_default();
        let port = text(&properties, "port_id").unwrap_or_default();
        dissociate(&neutron, &floating_ip, &port).await
    }
}
