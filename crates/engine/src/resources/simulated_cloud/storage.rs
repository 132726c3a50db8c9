//! Volumes and their attachments (and the `AWS::EC2` twins) on the
//! simulated cloud: a volume read and checked by the openstack type's own
//! spec, shown as Cinder shows it; an attachment makes the volume
//! `in-use` on a device of the server, and a volume still attached cannot
//! be deleted. Volume types and their encryption too (Cinder's policy
//! keeps those to admins; the simulated cloud does not check roles).

use serde_json::{Map, Value, json};

use super::{Made, Make};
use crate::cloud::simulated::{Kind, World};
use crate::domain::Resource;
use crate::resources::ResourceFailure;
use crate::resources::openstack::cinder::Dialect;
use crate::resources::openstack::cinder::volume::spec::{VolumeSpec, attributes};
use crate::resources::openstack::cinder::volume_type::TypeSpec;

/// `OS::Cinder::Volume`, `AWS::EC2::Volume`.
pub(super) fn volume(make: &mut Make<'_>, dialect: Dialect) -> Result<Made, ResourceFailure> {
    let spec = VolumeSpec::read(dialect, make.properties())?;
    let id = make.id("volume");
    let existing = make.existing(&id);
    let image = match spec.image.as_deref().or(spec.image_id.as_deref()) {
        Some(image) if !image.is_empty() => Some(make.find(Kind::Image, image)?),
        _ => None,
    };
    let source = match spec.source_volume_id.as_deref() {
        Some(source) if !source.is_empty() => Some(make.find(Kind::Volume, source)?),
        _ => None,
    };
    let previous_size = existing
        .as_ref()
        .and_then(|existing| existing.fields.get("size").and_then(Value::as_u64));
    let source_size = source
        .as_ref()
        .and_then(|source| make.world.get_any(source))
        .and_then(|source| source.fields.get("size").and_then(Value::as_u64));
    let size = spec.size.or(source_size).or(previous_size).unwrap_or(1);
    if let Some(previous) = previous_size
        && size < previous
    {
        return Err(ResourceFailure::new(format!(
            "The size of the volume cannot be reduced (from {previous} GB to {size} GB)."
        )));
    }
    let name = spec.name.clone().unwrap_or_else(|| match &existing {
        Some(existing) if !existing.name().is_empty() => existing.name().to_owned(),
        _ => make.request.physical_resource_name(),
    });
    let description = match dialect {
        Dialect::Aws => Some(name.clone()),
        Dialect::OpenStack => spec.description.clone(),
    };
    let mut fields = Map::new();
    fields.insert("id".to_owned(), json!(id));
    fields.insert("name".to_owned(), json!(name));
    fields.insert("description".to_owned(), json!(description));
    fields.insert("size".to_owned(), json!(size));
    fields.insert("status".to_owned(), json!("available"));
    fields.insert("attachments".to_owned(), json!([]));
    fields.insert(
        "availability_zone".to_owned(),
        json!(
            spec.availability_zone
                .clone()
                .unwrap_or_else(|| "nova".to_owned())
        ),
    );
    fields.insert(
        "volume_type".to_owned(),
        json!(
            spec.volume_type
                .clone()
                .unwrap_or_else(|| "__DEFAULT__".to_owned())
        ),
    );
    fields.insert("metadata".to_owned(), json!(spec.metadata));
    fields.insert(
        "bootable".to_owned(),
        json!(if image.is_some() { "true" } else { "false" }),
    );
    fields.insert("encrypted".to_owned(), json!(false));
    fields.insert(
        "multiattach".to_owned(),
        json!(make.flag("multiattach").unwrap_or(false)),
    );
    fields.insert("snapshot_id".to_owned(), json!(spec.snapshot_id));
    fields.insert("source_volid".to_owned(), json!(source));
    fields.insert("user_id".to_owned(), json!(make.request.user_id));
    fields.insert(
        "os-vol-tenant-attr:tenant_id".to_owned(),
        json!(make.project()),
    );
    if let Some(image) = &image {
        fields.insert(
            "volume_image_metadata".to_owned(),
            json!({"image_id": image}),
        );
    }
    let created_at = existing
        .as_ref()
        .and_then(|existing| existing.fields.get("created_at").cloned())
        .unwrap_or_else(|| {
            json!(
                chrono::Utc::now()
                    .format("%Y-%m-%dT%H:%M:%S%.6f")
                    .to_string()
            )
        });
    fields.insert("created_at".to_owned(), created_at);
    // Attached stays attached.
    if let Some(existing) = &existing {
        for key in ["status", "attachments"] {
            fields.insert(key.to_owned(), existing.fields[key].clone());
        }
    }
    make.insert(&id, Kind::Volume, fields.clone());
    Ok(Made {
        attributes: shown_as(dialect, &fields),
        ..Made::object(&id, fields)
    })
}

/// The attributes Heat shows of a volume with these fields.
fn shown_as(dialect: Dialect, fields: &Map<String, Value>) -> Map<String, Value> {
    let raw = Value::Object(fields.clone());
    match serde_json::from_value::<ember_openstack::cinder::Volume>(raw.clone()) {
        Ok(mut volume) => {
            volume.raw = raw;
            attributes(dialect, &volume)
        }
        Err(_) => fields.clone(),
    }
}

/// `OS::Cinder::VolumeAttachment`, `AWS::EC2::VolumeAttachment`.
pub(super) fn attachment(make: &mut Make<'_>, dialect: Dialect) -> Result<Made, ResourceFailure> {
    let (server_key, volume_key, device_key) = match dialect {
        Dialect::OpenStack => ("instance_uuid", "volume_id", "mountpoint"),
        Dialect::Aws => ("InstanceId", "VolumeId", "Device"),
    };
    let server = make
        .text(server_key)
        .ok_or_else(|| ResourceFailure::new(format!("Property {server_key} not assigned")))?;
    let volume = make
        .text(volume_key)
        .ok_or_else(|| ResourceFailure::new(format!("Property {volume_key} not assigned")))?;
    let volume_id = make.find(Kind::Volume, &volume)?;
    let id = make.id("attachment");
    // An update to another server or volume detaches from the old first.
    if let Some(current) = make.current {
        remove_attachment(make.world, current)?;
    }
    let project = make.project().to_owned();
    let used_devices: Vec<String> = make
        .world
        .list(&project, Kind::Volume, |_| true)
        .flat_map(|volume| {
            volume.fields["attachments"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|attachment| {
            attachment.get("server_id").and_then(Value::as_str) == Some(server.as_str())
        })
        .filter(|attachment| {
            attachment.get("attachment_id").and_then(Value::as_str) != Some(id.as_str())
        })
        .filter_map(|attachment| {
            attachment
                .get("device")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    let device = match make.text(device_key) {
        Some(device) => device,
        None => ('b'..='z')
            .map(|letter| format!("/dev/vd{letter}"))
            .find(|device| !used_devices.contains(device))
            .ok_or_else(|| ResourceFailure::new(format!("No free device on server {server}")))?,
    };
    let fields = make
        .world
        .fields_mut(&volume_id)
        .ok_or_else(|| ResourceFailure::new(format!("Volume {volume_id} could not be found.")))?;
    let attachments = fields
        .get("attachments")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ours = attachments.iter().any(|attachment| {
        attachment.get("attachment_id").and_then(Value::as_str) == Some(id.as_str())
    });
    let multiattach = fields.get("multiattach") == Some(&json!(true));
    if !ours && !attachments.is_empty() && !multiattach {
        let status = fields
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return Err(ResourceFailure::new(format!(
            "Invalid volume: Volume status must be available or downloading to reserve, but the current status is {status}."
        )));
    }
    let attachment = json!({"id": volume_id, "attachment_id": id, "volume_id": volume_id,
        "server_id": server, "device": device, "host_name": null,
        "attached_at": chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6f").to_string()});
    if !ours {
        let mut attachments = attachments;
        attachments.push(attachment);
        fields.insert("attachments".to_owned(), json!(attachments));
    }
    fields.insert("status".to_owned(), json!("in-use"));
    let shown = json!({"id": id, "serverId": server, "volumeId": volume_id, "device": device});
    Ok(
        Made::object(&id, shown.as_object().cloned().unwrap_or_default())
            .with_data("volume", json!(volume_id)),
    )
}

/// Detaches: the volume is `available` again once nothing holds it.
pub(super) fn remove_attachment(
    world: &mut World,
    current: &Resource,
) -> Result<(), ResourceFailure> {
    let (Some(volume), Some(id)) = (
        current.data.get("volume").and_then(Value::as_str),
        current.physical_id.as_deref(),
    ) else {
        return Ok(());
    };
    if let Some(fields) = world.fields_mut(volume) {
        if let Some(attachments) = fields.get_mut("attachments").and_then(Value::as_array_mut) {
            attachments.retain(|attachment| {
                attachment.get("attachment_id").and_then(Value::as_str) != Some(id)
            });
        }
        let detached = fields
            .get("attachments")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if detached {
            fields.insert("status".to_owned(), json!("available"));
        }
    }
    Ok(())
}

/// `OS::Cinder::VolumeType`: a type whose name no other type in the cloud
/// has (Cinder keeps them unique), public or shared with the projects
/// named, its extra specs as given.
pub(super) fn volume_type(make: &mut Make<'_>) -> Result<Made, ResourceFailure> {
    let spec = TypeSpec::read(make.properties())?;
    let id = make.id("volume type");
    if make
        .world
        .named_anywhere(Kind::VolumeType, &spec.name)
        .any(|other| other.id != id)
    {
        return Err(ResourceFailure::new(format!(
            "Volume Type {} already exists.",
            spec.name
        )));
    }
    let encryption = make
        .existing(&id)
        .and_then(|existing| existing.fields.get("encryption").cloned());
    let mut fields = Map::new();
    fields.insert("id".to_owned(), json!(id));
    fields.insert("name".to_owned(), json!(spec.name));
    fields.insert("description".to_owned(), json!(spec.description));
    fields.insert("is_public".to_owned(), json!(spec.is_public));
    fields.insert(
        "os-volume-type-access:is_public".to_owned(),
        json!(spec.is_public),
    );
    fields.insert("extra_specs".to_owned(), json!(spec.extra_specs));
    // Heat names projects by name or id; the simulated cloud has no
    // Keystone, so they are taken as given.
    let access: Vec<&String> = if spec.is_public {
        Vec::new()
    } else {
        spec.projects.iter().collect()
    };
    fields.insert("access_projects".to_owned(), json!(access));
    if let Some(encryption) = encryption {
        fields.insert("encryption".to_owned(), encryption);
    }
    make.insert(&id, Kind::VolumeType, fields.clone());
    Ok(Made::object(&id, shown_type(&fields)))
}

/// What Cinder shows of a type (Ember's own bookkeeping left out).
fn shown_type(fields: &Map<String, Value>) -> Map<String, Value> {
    let mut shown = fields.clone();
    shown.remove("access_projects");
    shown.remove("encryption");
    shown
}

/// `OS::Cinder::EncryptedVolumeType`: the encryption of the type named,
/// kept on the type (one per type, as Cinder keeps it).
pub(super) fn encrypted_volume_type(make: &mut Make<'_>) -> Result<Made, ResourceFailure> {
    let name_or_id = make
        .text("volume_type")
        .ok_or_else(|| ResourceFailure::new("Property volume_type not assigned".to_owned()))?;
    let type_id = make.find(Kind::VolumeType, &name_or_id).map_err(|_| {
        ResourceFailure::new(format!("The VolumeType ({name_or_id}) could not be found."))
    })?;
    let row = make.request.resource_id.to_string();
    let owner = make
        .world
        .get_any(&type_id)
        .and_then(|volume_type| volume_type.fields.get("encryption"))
        .and_then(|encryption| encryption.get("ember_row"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    if owner.is_some_and(|owner| owner != row) {
        return Err(ResourceFailure::new(format!(
            "Volume type encryption for type {type_id} already exists."
        )));
    }
    let properties = make.properties();
    let field = |name: &str| properties.get(name).cloned().unwrap_or(Value::Null);
    let encryption = json!({
        "volume_type_id": type_id,
        "encryption_id": make.request.derived_id("encryption").to_string(),
        "provider": field("provider"),
        "control_location": field("control_location"),
        "cipher": field("cipher"),
        "key_size": field("key_size"),
        "deleted": false,
        "ember_row": row,
    });
    make.world
        .fields_mut(&type_id)
        .ok_or_else(|| {
            ResourceFailure::new(format!("The VolumeType ({name_or_id}) could not be found."))
        })?
        .insert("encryption".to_owned(), encryption.clone());
    let mut shown = encryption.as_object().cloned().unwrap_or_default();
    shown.remove("ember_row");
    Ok(Made::object(&type_id, shown))
}

/// Takes the type's encryption away (the row's only: the type is not).
pub(super) fn remove_encryption(
    world: &mut World,
    current: &Resource,
) -> Result<(), ResourceFailure> {
    let Some(type_id) = current.physical_id.as_deref() else {
        return Ok(());
    };
    let row = current.id.to_string();
    if let Some(fields) = world.fields_mut(type_id) {
        let ours = fields
            .get("encryption")
            .and_then(|encryption| encryption.get("ember_row"))
            .and_then(Value::as_str)
            == Some(row.as_str());
        if ours {
            fields.remove("encryption");
        }
    }
    Ok(())
}
