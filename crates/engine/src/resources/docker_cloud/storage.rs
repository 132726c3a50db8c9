//! Volumes and their attachments on the docker backend: a volume is a
//! named container volume (its size recorded, not enforced: the engine's
//! local volumes have no size), an attachment mounts it into the server's
//! container at the path its device names — `/dev/vdb` → `/mnt/vdb`,
//! `/dev/sdf` → `/mnt/sdf` — made again with the mount (see
//! `compute::docker::remount`); detaching makes it again without.

use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{Make, PROJECT_KEY, USER_KEY, data_text, failure, made_id, remove_when_free};
use crate::compute::docker::DockerEngine;
use crate::compute::docker::objects::VolumeObject;
use crate::compute::docker::remount::MountChange;
use crate::compute::docker::spec::VolumeMount;
use crate::domain::Resource;
use crate::error::Error;
use crate::instances::InstanceService;
use crate::resources::openstack::cinder::Dialect;
use crate::resources::openstack::cinder::volume::spec::{VolumeSpec, attributes};
use crate::resources::{ResourceFailure, ResourceOutcome};

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

async fn volume_outcome(
    make: &Make<'_>,
    dialect: Dialect,
    spec: &VolumeSpec,
    volume: &VolumeObject,
) -> Result<ResourceOutcome, ResourceFailure> {
    let users = make
        .engine
        .containers_using(&volume.volume_name)
        .await
        .map_err(failure)?;
    let name = spec.name.clone().unwrap_or_else(|| volume.name.clone());
    let description = match dialect {
        Dialect::Aws => Some(name.clone()),
        Dialect::OpenStack => spec.description.clone(),
    };
    let attachments: Vec<Value> = users
        .iter()
        .map(|container| json!({"volume_id": volume.id, "server_id": container, "id": volume.id}))
        .collect();
    let mut fields = Map::new();
    for (key, value) in [
        ("id", json!(volume.id)),
        ("name", json!(name)),
        ("description", json!(description)),
        ("size", json!(spec.size.unwrap_or(volume.size_gb))),
        (
            "status",
            json!(if users.is_empty() {
                "available"
            } else {
                "in-use"
            }),
        ),
        ("attachments", json!(attachments)),
        ("availability_zone", json!("nova")),
        ("volume_type", json!("container-volume")),
        ("metadata", json!(spec.metadata)),
        ("bootable", json!("false")),
        ("encrypted", json!(false)),
        ("multiattach", json!(volume.multiattach)),
        ("snapshot_id", Value::Null),
        ("source_volid", Value::Null),
        ("user_id", json!(make.request.user_id)),
        ("os-vol-tenant-attr:tenant_id", json!(volume.project_id)),
        ("created_at", json!(volume.created_at)),
        ("container_volume", json!(volume.volume_name)),
    ] {
        fields.insert(key.to_owned(), value);
    }
    let mut attributes = shown_as(dialect, &fields);
    attributes.insert("show".to_owned(), Value::Object(fields));
    Ok(ResourceOutcome {
        physical_id: volume.id.clone(),
        attributes,
        data: json!({ PROJECT_KEY: volume.project_id }),
    })
}

/// `OS::Cinder::Volume`, `AWS::EC2::Volume`: a named container volume.
pub(super) async fn volume(
    make: &Make<'_>,
    dialect: Dialect,
) -> Result<ResourceOutcome, ResourceFailure> {
    let spec = VolumeSpec::read(dialect, make.properties())?;
    let id = make.id("volume");
    let wanted = VolumeObject {
        volume_name: make.engine.volume_name(&id),
        id: id.clone(),
        name: spec
            .name
            .clone()
            .unwrap_or_else(|| make.request.physical_resource_name()),
        project_id: make.project().to_owned(),
        size_gb: spec.size.unwrap_or(1),
        multiattach: make.flag("multiattach").unwrap_or(false),
        read_only: spec.read_only.unwrap_or(false),
        created_at: String::new(),
    };
    let made = make.engine.make_volume(&wanted).await.map_err(failure)?;
    volume_outcome(make, dialect, &spec, &made).await
}

/// A volume's update in place: its size (never smaller), name,
/// description and metadata are recorded; its data stay. Read-only access
/// is how it is mounted, set when it is made.
pub(super) async fn update_volume(
    make: &Make<'_>,
    dialect: Dialect,
    current: &Resource,
) -> Result<ResourceOutcome, ResourceFailure> {
    let spec = VolumeSpec::read(dialect, make.properties())?;
    let id = made_id(current, "volume");
    let volume = make
        .engine
        .find_volume(make.project(), &id)
        .await
        .map_err(failure)?;
    let previous = current
        .attributes
        .get("size")
        .and_then(|size| size.as_u64().or_else(|| size.as_str()?.parse().ok()))
        .unwrap_or(volume.size_gb);
    if let Some(size) = spec.size
        && size < previous
    {
        return Err(ResourceFailure::new(format!(
            "The size of the volume cannot be reduced (from {previous} GB to {size} GB)."
        )));
    }
    if spec
        .read_only
        .is_some_and(|read_only| read_only != volume.read_only)
    {
        return Err(ResourceFailure::new(format!(
            "{} on the docker backend cannot change read_only in place: a container volume is mounted read-only or not as it was made",
            make.type_name
        )));
    }
    volume_outcome(make, dialect, &spec, &volume).await
}

pub(super) async fn delete_volume(
    engine: &DockerEngine,
    current: &Resource,
) -> Result<(), ResourceFailure> {
    let name = engine.volume_name(&made_id(current, "volume"));
    remove_when_free(&format!("volume {name}"), || engine.remove_volume(&name)).await
}

pub(super) async fn volume_exists(
    engine: &DockerEngine,
    current: &Resource,
) -> Result<bool, ResourceFailure> {
    engine
        .volume_exists(&engine.volume_name(&made_id(current, "volume")))
        .await
        .map_err(failure)
}

/// The path in the container a device names: `/dev/vdb` → `/mnt/vdb`.
pub fn mount_path(device: &str) -> Result<String, String> {
    let name = device.strip_prefix("/dev/").unwrap_or_default();
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|character| character.is_ascii_lowercase() || character.is_ascii_digit());
    if !valid {
        return Err(format!(
            "{device:?} is not a device path like /dev/vdb (the docker backend mounts it at /mnt/<device name>)"
        ));
    }
    Ok(format!("/mnt/{name}"))
}

fn owner(user: &str, project: &str) -> ember_runtime::Identity {
    ember_runtime::Identity::new(
        user.to_owned(),
        project.to_owned(),
        vec!["member".to_owned()],
    )
}

/// `OS::Cinder::VolumeAttachment`, `AWS::EC2::VolumeAttachment`: the
/// volume mounted into the server's container.
pub(super) async fn attachment(
    make: &Make<'_>,
    dialect: Dialect,
) -> Result<ResourceOutcome, ResourceFailure> {
    let (server_key, volume_key, device_key) = match dialect {
        Dialect::OpenStack => ("instance_uuid", "volume_id", "mountpoint"),
        Dialect::Aws => ("InstanceId", "VolumeId", "Device"),
    };
    let server = make
        .text(server_key)
        .ok_or_else(|| ResourceFailure::new(format!("Property {server_key} not assigned")))?;
    let volume_ref = make
        .text(volume_key)
        .ok_or_else(|| ResourceFailure::new(format!("Property {volume_key} not assigned")))?;
    let not_found =
        || ResourceFailure::new(format!("No server with a name or ID of '{server}' exists."));
    let uuid = Uuid::parse_str(&server).map_err(|_| not_found())?;
    let caller = owner(&make.request.user_id, make.project());
    let instance = match make.instances.get(&caller, uuid).await {
        Ok(instance) => instance,
        Err(Error::NotFound(_)) => return Err(not_found()),
        Err(error) => return Err(error.into()),
    };
    let volume = make
        .engine
        .find_volume(make.project(), &volume_ref)
        .await
        .map_err(failure)?;
    let mounts = make
        .engine
        .mounts(&instance)
        .await
        .map_err(failure)?
        .ok_or_else(|| ResourceFailure::new(format!("server {server} has no container")))?;
    let target = match make.text(device_key) {
        Some(device) => mount_path(&device)
            .map_err(|error| ResourceFailure::new(format!("{device_key}: {error}")))?,
        None => mounts
            .iter()
            .find(|mount| mount.volume == volume.volume_name)
            .map(|mount| mount.target.clone())
            .or_else(|| {
                ('b'..='z')
                    .map(|letter| format!("/mnt/vd{letter}"))
                    .find(|path| mounts.iter().all(|mount| &mount.target != path))
            })
            .ok_or_else(|| ResourceFailure::new(format!("No free device on server {server}")))?,
    };
    let container = crate::compute::docker::container_name(make.engine.config(), &instance);
    let others: Vec<String> = make
        .engine
        .containers_using(&volume.volume_name)
        .await
        .map_err(failure)?
        .into_iter()
        .filter(|user| !user.starts_with(&container))
        .collect();
    if !others.is_empty() && !volume.multiattach {
        return Err(ResourceFailure::new(
            "Invalid volume: Volume status must be available or downloading to reserve, but the current status is in-use.".to_owned(),
        ));
    }
    let change = MountChange::Attach(VolumeMount {
        volume: volume.volume_name.clone(),
        target: target.clone(),
        read_only: volume.read_only,
    });
    let remounted = make
        .engine
        .remount(&instance, &change)
        .await
        .map_err(|error| {
            ResourceFailure::new(format!(
                "cannot attach volume {} to server {server}: {}",
                volume.id, error.0
            ))
        })?;
    if !remounted {
        return Err(ResourceFailure::new(format!(
            "server {server} has no container"
        )));
    }
    let id = make.id("attachment");
    let device = make
        .text(device_key)
        .unwrap_or_else(|| target.replacen("/mnt/", "/dev/", 1));
    let shown = json!({"id": id, "serverId": server, "volumeId": volume.id,
        "device": device, "mount_path": target, "read_only": volume.read_only});
    let mut attributes = shown.as_object().cloned().unwrap_or_default();
    attributes.insert("show".to_owned(), shown);
    Ok(ResourceOutcome {
        physical_id: id,
        attributes,
        data: json!({ PROJECT_KEY: make.project(), USER_KEY: make.request.user_id,
            "instance": uuid.to_string(), "volume": volume.volume_name, "target": target }),
    })
}

/// What an attachment recorded: its server's instance (as its owner sees
/// it), the container volume and the path.
async fn attached(
    instances: &InstanceService,
    current: &Resource,
) -> Result<Option<(crate::domain::instance::Instance, String, String)>, ResourceFailure> {
    let (Some(project), Some(user), Some(instance), Some(volume), Some(target)) = (
        data_text(current, PROJECT_KEY),
        data_text(current, USER_KEY),
        data_text(current, "instance").and_then(|text| Uuid::parse_str(&text).ok()),
        data_text(current, "volume"),
        data_text(current, "target"),
    ) else {
        return Ok(None);
    };
    match instances.get(&owner(&user, &project), instance).await {
        Ok(instance) => Ok(Some((instance, volume, target))),
        Err(Error::NotFound(_)) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// Detaches: the server's container made again without the mount (a
/// server or container gone already is detached).
pub(super) async fn delete_attachment(
    engine: &DockerEngine,
    instances: &InstanceService,
    current: &Resource,
) -> Result<(), ResourceFailure> {
    let Some((instance, volume, target)) = attached(instances, current).await? else {
        return Ok(());
    };
    let Some(mounts) = engine.mounts(&instance).await.map_err(failure)? else {
        return Ok(());
    };
    if !mounts
        .iter()
        .any(|mount| mount.volume == volume && mount.target == target)
    {
        return Ok(());
    }
    engine
        .remount(&instance, &MountChange::Detach { target })
        .await
        .map_err(|error| {
            ResourceFailure::new(format!("cannot detach volume {volume}: {}", error.0))
        })?;
    Ok(())
}

pub(super) async fn attachment_exists(
    engine: &DockerEngine,
    instances: &InstanceService,
    current: &Resource,
) -> Result<bool, ResourceFailure> {
    let Some((instance, volume, target)) = attached(instances, current).await? else {
        return Ok(false);
    };
    Ok(engine
        .mounts(&instance)
        .await
        .map_err(failure)?
        .is_some_and(|mounts| {
            mounts
                .iter()
                .any(|mount| mount.volume == volume && mount.target == target)
        }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_map_to_paths_under_mnt() {
        assert_eq!(mount_path("/dev/vdb").as_deref(), Ok("/mnt/vdb"));
        assert_eq!(mount_path("/dev/sdf").as_deref(), Ok("/mnt/sdf"));
        assert_eq!(mount_path("/dev/xvdh1").as_deref(), Ok("/mnt/xvdh1"));
        for bad in ["vdb", "/dev/", "/dev/../etc", "/mnt/data", "/dev/VDB"] {
            assert!(mount_path(bad).is_err(), "{bad}");
        }
    }
}
