//! `OS::Cinder::VolumeAttachment` and `AWS::EC2::VolumeAttachment`: a
//! volume attached to a server, through Nova (as Heat does), waited for
//! until Cinder shows it `in-use`. The physical id is Nova's attachment
//! id, which is the volume's id (Heat's too).
//!
//! Attaching adopts an attachment of that volume to that server that is
//! already there — what an earlier attempt of the create made, so a
//! create that runs again does not fail on it. A delete detaches and waits
//! until the volume is `available` again (a volume already detached, or a
//! server gone, is done). An update of the OpenStack type detaches the old
//! attachment and makes the new one, as Heat; the AWS type's properties
//! are immutable, so a change fails its update.

use async_trait::async_trait;
use ember_openstack::nova::VolumeAttachment;
use regex::Regex;
use serde_json::{Map, Value, json};

use super::super::heat::{does_not_match, refuse_immutable_changes};
use super::super::{Cloud, failure, physical_id, text};
use super::attach::{Placement, attach, detach};
use super::{Dialect, cinder_for, nova_on};
use crate::domain::{Resource, StackAction};
use crate::resources::{
    PropertySchema, PropertyType, ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType,
    ResourceTypeSchema,
};

/// Heat's `AllowedPattern` for an AWS attachment's device.
const AWS_DEVICE_PATTERN: &str = "/dev/vd[b-z]";

pub struct AttachmentResource {
    dialect: Dialect,
    schema: ResourceTypeSchema,
    cloud: Cloud,
}

/// The property names of each dialect: server, volume, device.
fn names(dialect: Dialect) -> (&'static str, &'static str, &'static str) {
    match dialect {
        Dialect::OpenStack => ("instance_uuid", "volume_id", "mountpoint"),
        Dialect::Aws => ("InstanceId", "VolumeId", "Device"),
    }
}

pub fn schema(dialect: Dialect) -> ResourceTypeSchema {
    match dialect {
        Dialect::OpenStack => ResourceTypeSchema {
            type_name: "OS::Cinder::VolumeAttachment",
            description: "A volume attached to a server.",
            properties: vec![
                PropertySchema::new(
                    "instance_uuid",
                    PropertyType::String,
                    "The ID of the server to which the volume attaches.",
                )
                .required()
                .update_allowed(),
                PropertySchema::new(
                    "volume_id",
                    PropertyType::String,
                    "The ID of the volume to be attached.",
                )
                .required()
                .update_allowed(),
                PropertySchema::new(
                    "mountpoint",
                    PropertyType::String,
                    "The location where the volume is exposed on the instance. This assignment may not be honored and it is advised that the path /dev/disk/by-id/virtio-<VolumeId> be used instead.",
                )
                .update_allowed(),
            ],
            attributes: Vec::new(),
            accepts_any_properties: false,
            accepts_any_attributes: false,
        },
        Dialect::Aws => ResourceTypeSchema {
            type_name: "AWS::EC2::VolumeAttachment",
            description: "A volume attached to an instance, in CloudFormation's words.",
            properties: vec![
                PropertySchema::new(
                    "InstanceId",
                    PropertyType::String,
                    "The ID of the instance to which the volume attaches.",
                )
                .required(),
                PropertySchema::new(
                    "VolumeId",
                    PropertyType::String,
                    "The ID of the volume to be attached.",
                )
                .required(),
                PropertySchema::new(
                    "Device",
                    PropertyType::String,
                    "The device where the volume is exposed on the instance (/dev/vdb to /dev/vdz). This assignment may not be honored and it is advised that the path /dev/disk/by-id/virtio-<VolumeId> be used instead.",
                )
                .required(),
            ],
            attributes: Vec::new(),
            accepts_any_properties: false,
            accepts_any_attributes: false,
        },
    }
}

/// Where `properties` say to attach what.
fn placement(
    dialect: Dialect,
    properties: &Map<String, Value>,
) -> Result<Placement, ResourceFailure> {
    let (server, volume, device) = names(dialect);
    let required = |name: &str| {
        text(properties, name)
            .filter(|value| !value.is_empty())
            .ok_or_else(|| ResourceFailure::new(format!("{name}: Property {name} not assigned")))
    };
    let placement = Placement {
        server_id: required(server)?,
        volume_id: required(volume)?,
        // Heat sends no device for an empty one.
        device: text(properties, device).filter(|device| !device.is_empty()),
    };
    if dialect == Dialect::Aws {
        let device = placement.device.clone().unwrap_or_default();
        let whole = Regex::new(&format!("^(?:{AWS_DEVICE_PATTERN})$"))
            .map_err(|error| ResourceFailure::new(format!("{AWS_DEVICE_PATTERN}: {error}")))?;
        if !whole.is_match(&device) {
            return Err(does_not_match("Device", &device, AWS_DEVICE_PATTERN));
        }
    }
    Ok(placement)
}

/// What the attachment shows: Nova's attachment.
fn attributes(attachment: &VolumeAttachment) -> Map<String, Value> {
    let shown = json!({
        "id": attachment.id,
        "serverId": attachment.server_id,
        "volumeId": attachment.volume_id,
        "device": attachment.device,
    });
    shown.as_object().cloned().unwrap_or_default()
}

impl AttachmentResource {
    pub fn new(dialect: Dialect, cloud: Cloud) -> AttachmentResource {
        AttachmentResource {
            dialect,
            schema: schema(dialect),
            cloud,
        }
    }

    async fn attach(
        &self,
        stack_id: uuid::Uuid,
        placement: &Placement,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        let (session, cinder) = cinder_for(&self.cloud, stack_id).await?;
        let nova = nova_on(&session).await?;
        let attachment = attach(&nova, &cinder, placement).await?;
        let physical_id = if attachment.id.is_empty() {
            placement.volume_id.clone()
        } else {
            attachment.id.clone()
        };
        Ok(ResourceOutcome {
            physical_id,
            attributes: attributes(&attachment),
            data: json!({}),
        })
    }

    async fn detach(
        &self,
        stack_id: uuid::Uuid,
        placement: &Placement,
    ) -> Result<(), ResourceFailure> {
        let (session, cinder) = cinder_for(&self.cloud, stack_id).await?;
        let nova = nova_on(&session).await?;
        detach(&nova, &cinder, placement).await
    }

    /// Where the row's attachment is (its recorded properties).
    fn recorded(&self, current: &Resource) -> Result<Placement, ResourceFailure> {
        let properties = current.properties.as_object().cloned().unwrap_or_default();
        placement(self.dialect, &properties)
    }
}

#[async_trait]
impl ResourceType for AttachmentResource {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let placement = placement(self.dialect, &request.properties)?;
        self.attach(request.stack_id, &placement).await
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        if self.dialect == Dialect::Aws {
            refuse_immutable_changes(&self.schema, current, request)?;
        }
        let wanted = placement(self.dialect, &request.properties)?;
        let recorded = self.recorded(current)?;
        if recorded != wanted {
            // As Heat: the old attachment goes first, whatever changed.
            self.detach(request.stack_id, &recorded).await?;
        }
        self.attach(request.stack_id, &wanted).await
    }

    /// Heat detaches only what the row recorded: a row without a physical
    /// id attached nothing (a failed attach detaches what it made).
    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        if physical_id(current).is_none() {
            return Ok(());
        }
        let placement = self.recorded(current)?;
        self.detach(current.stack_id, &placement).await
    }

    /// A create another engine had in flight may have attached the volume
    /// without recording it: the volume attached to that server is what
    /// it made (a create adopts such an attachment too), and is detached.
    async fn resume_delete(&self, in_flight: &Resource) -> Result<(), ResourceFailure> {
        let Ok(placement) = self.recorded(in_flight) else {
            return Ok(());
        };
        if physical_id(in_flight).is_some() {
            return self.detach(in_flight.stack_id, &placement).await;
        }
        let session = self.cloud.session(in_flight.stack_id).await?;
        let nova = nova_on(&session).await?;
        let attached = match nova.volume_attachments(&placement.server_id).await {
            Ok(attachments) => attachments
                .iter()
                .any(|attachment| attachment.volume_id == placement.volume_id),
            Err(error) if error.is_not_found() => false,
            Err(error) => return Err(failure(error)),
        };
        if attached {
            self.detach(in_flight.stack_id, &placement).await?;
        }
        Ok(())
    }

    /// Every step is idempotent: an attach adopts the attachment already
    /// there, a detach of what is detached is done.
    fn take_over(&self, step: StackAction) -> Result<(), String> {
        let _ = step;
        Ok(())
    }

    fn needs_replacement(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> bool {
        let _ = (old, new);
        // OpenStack: every property is update_allowed (detach + attach);
        // AWS: immutable, the update fails instead.
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(dialect: Dialect, properties: Value) -> Result<Placement, ResourceFailure> {
        placement(dialect, properties.as_object().expect("a map"))
    }

    #[test]
    fn placements_are_read_in_each_dialect() {
        assert_eq!(
            read(
                Dialect::OpenStack,
                json!({"instance_uuid": "s1", "volume_id": "v1", "mountpoint": ""})
            )
            .expect("valid"),
            Placement {
                server_id: "s1".to_owned(),
                volume_id: "v1".to_owned(),
                device: None
            }
        );
        assert_eq!(
            read(
                Dialect::Aws,
                json!({"InstanceId": "s1", "VolumeId": "v1", "Device": "/dev/vdc"})
            )
            .expect("valid")
            .device
            .as_deref(),
            Some("/dev/vdc")
        );
        for refused in ["/dev/sdb", "/dev/vdb1", "/dev/vda", "x/dev/vdb"] {
            assert_eq!(
                read(
                    Dialect::Aws,
                    json!({"InstanceId": "s1", "VolumeId": "v1", "Device": refused})
                )
                .expect_err("outside the pattern")
                .to_string(),
                format!("Device: \"{refused}\" does not match pattern \"/dev/vd[b-z]\"")
            );
        }
    }
}
