//! An in-place update of a volume, in Heat's order: name and description,
//! metadata and type first; then, with the volume detached from its
//! servers when a step needs it, a backup restored over it, its growth
//! (never a shrink, refused before anything changes), its read-only flag;
//! then the volume attached back where it was. Where it was attached is
//! written in the volume's metadata (`ember_reattach`) before the detach
//! and cleared after the reattach, so an update another engine resumes
//! attaches it back too; every other step compares what it asks with what
//! the volume is, so doing it again changes nothing.

use std::collections::BTreeMap;

use ember_openstack::cinder::{MigrationPolicy, RestoreTarget, Volume};
use ember_openstack::microversion::Microversion;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::super::super::heat::{
    changed_properties, not_supported, physical_name, refuse_immutable_changes,
};
use super::super::super::{Cloud, failure, physical_id};
use super::super::attach::{Placement, attach, detach};
use super::super::{Dialect, cinder_for, nova_on};
use super::spec::VolumeSpec;
use super::{VOLUME_KIND, VolumeResource, read, wait_settled};
use crate::domain::Resource;
use crate::resources::{ResourceFailure, ResourceOutcome, ResourceRequest};

/// The metadata key listing where a volume an update detached is to be
/// attached back.
const REATTACH_KEY: &str = "ember_reattach";

/// Cinder grows a volume in use from this microversion on.
const EXTEND_IN_USE: Microversion = Microversion::new(3, 42);

/// One attachment an update undid and will do again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Reattachment {
    server_id: String,
    device: Option<String>,
}

/// Where the volume is to be attached back: what an earlier attempt of
/// the update wrote, and (when `detaching`) where it is attached now.
fn reattachments(volume: &Volume, detaching: bool) -> Vec<Reattachment> {
    let mut pending: Vec<Reattachment> = volume
        .metadata
        .get(REATTACH_KEY)
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default();
    if detaching {
        for attachment in &volume.attachments {
            if !pending
                .iter()
                .any(|known| known.server_id == attachment.server_id)
            {
                pending.push(Reattachment {
                    server_id: attachment.server_id.clone(),
                    device: attachment.device.clone(),
                });
            }
        }
    }
    pending
}

/// The metadata an update writes: the user's, the marker, and the
/// attachments still to be made again.
fn metadata_of(
    spec: &VolumeSpec,
    marker: &str,
    pending: &[Reattachment],
) -> BTreeMap<String, String> {
    let mut metadata = spec.metadata_with(marker);
    if !pending.is_empty() {
        metadata.insert(REATTACH_KEY.to_owned(), json!(pending).to_string());
    }
    metadata
}

pub(super) async fn update(
    resource: &VolumeResource,
    request: &ResourceRequest,
    current: &Resource,
) -> Result<ResourceOutcome, ResourceFailure> {
    if resource.dialect == Dialect::Aws {
        refuse_immutable_changes(&resource.schema, current, request)?;
    }
    let volume_id = physical_id(current)
        .ok_or_else(|| ResourceFailure::new("the volume was never made".to_owned()))?
        .to_owned();
    let spec = VolumeSpec::read(resource.dialect, &request.properties)?;
    let old_properties = current.properties.as_object().cloned().unwrap_or_default();
    let old = VolumeSpec::read(resource.dialect, &old_properties).unwrap_or_default();
    let changed = changed_properties(&resource.schema, current, request);
    let (session, cinder) = cinder_for(&resource.cloud, request.stack_id).await?;
    let marker = Cloud::marker_of(current, VOLUME_KIND);
    let volume = read(&cinder, &volume_id).await?;

    // Refused before anything changes (Heat refuses after renaming).
    let grow_to = match spec.size {
        Some(size) if changed.contains(&"size") && size < volume.size => {
            return Err(not_supported("Shrinking volume"));
        }
        Some(size) if changed.contains(&"size") && size > volume.size => Some(size),
        _ => None,
    };
    if changed.contains(&"name") || changed.contains(&"description") {
        let name = physical_name(request, VOLUME_KIND);
        let description = spec.description.clone().or(old.description.clone());
        cinder
            .update_volume(
                &volume_id,
                Some(
                    spec.name
                        .as_deref()
                        .or(old.name.as_deref())
                        .unwrap_or(&name),
                ),
                description.as_deref(),
            )
            .await
            .map_err(failure)?;
    }
    let restore_from = spec
        .backup_id
        .clone()
        .filter(|_| changed.contains(&"backup_id"));
    let read_only = spec.read_only.filter(|_| changed.contains(&"read_only"));
    let detaching = restore_from.is_some()
        || read_only.is_some()
        || (grow_to.is_some() && cinder.version() < EXTEND_IN_USE);
    let pending = reattachments(&volume, detaching);
    if changed.contains(&"metadata") || !pending.is_empty() {
        cinder
            .set_volume_metadata(&volume_id, &metadata_of(&spec, &marker, &pending))
            .await
            .map_err(failure)?;
    }
    if let Some(volume_type) = spec
        .volume_type
        .as_deref()
        .filter(|_| changed.contains(&"volume_type"))
        && volume.volume_type.as_deref() != Some(volume_type)
    {
        cinder
            .retype_volume(&volume_id, volume_type, MigrationPolicy::Never)
            .await
            .map_err(failure)?;
        let retyped = wait_settled(
            &cinder,
            &volume_id,
            &["retyping"],
            &["available", "in-use"],
            "Volume retype failed",
        )
        .await?;
        // Cinder gives up on a retype it cannot do without a migration by
        // putting the volume back as it was (its log says why): a type
        // named in the template that the volume does not have is that.
        // (Cinder shows the type's name: a type given by id is not
        // compared.)
        let current_type = retyped.volume_type.unwrap_or_default();
        if uuid::Uuid::parse_str(volume_type).is_err() && current_type != volume_type {
            return Err(ResourceFailure::new(format!(
                "Volume retype failed - the volume {volume_id} is still of type {current_type} (Cinder could not retype it to {volume_type} without migrating it)"
            )));
        }
    }
    let nova = if pending.is_empty() {
        None
    } else {
        Some(nova_on(&session).await?)
    };
    if let Some(nova) = &nova {
        for reattachment in &pending {
            let placement = Placement {
                server_id: reattachment.server_id.clone(),
                volume_id: volume_id.clone(),
                device: reattachment.device.clone(),
            };
            detach(nova, &cinder, &placement).await?;
        }
    }
    if let Some(backup_id) = &restore_from {
        cinder
            .restore_backup(
                backup_id,
                &RestoreTarget::Volume {
                    volume_id: volume_id.clone(),
                },
            )
            .await
            .map_err(|error| {
                ResourceFailure::new(format!(
                    "Failed to restore volume {volume_id} from backup {backup_id} - {error}"
                ))
            })?;
        wait_settled(
            &cinder,
            &volume_id,
            &["restoring-backup"],
            &["available"],
            "Volume backup restore failed",
        )
        .await?;
        // A restore brings the backup's metadata back: the marker and
        // the pending attachments are written again.
        cinder
            .set_volume_metadata(&volume_id, &metadata_of(&spec, &marker, &pending))
            .await
            .map_err(failure)?;
    }
    if let Some(size) = grow_to {
        let ready: &[&str] = if cinder.version() >= EXTEND_IN_USE {
            &["available", "in-use"]
        } else {
            &["available"]
        };
        let volume = wait_settled(
            &cinder,
            &volume_id,
            &[
                "attaching",
                "detaching",
                "reserved",
                "extending",
                "retyping",
            ],
            ready,
            "Volume resize failed",
        )
        .await?;
        // A resumed update finds the volume grown already.
        if volume.size < size {
            cinder
                .extend_volume(&volume_id, size)
                .await
                .map_err(|error| {
                    ResourceFailure::new(format!("Failed to extend volume {volume_id} - {error}"))
                })?;
        }
        wait_settled(
            &cinder,
            &volume_id,
            &["extending"],
            ready,
            "Volume resize failed",
        )
        .await?;
    }
    if let Some(read_only) = read_only {
        cinder
            .set_volume_read_only(&volume_id, read_only)
            .await
            .map_err(failure)?;
    }
    if let Some(nova) = &nova {
        for reattachment in &pending {
            let placement = Placement {
                server_id: reattachment.server_id.clone(),
                volume_id: volume_id.clone(),
                device: reattachment.device.clone(),
            };
            attach(nova, &cinder, &placement).await?;
        }
        cinder
            .set_volume_metadata(&volume_id, &metadata_of(&spec, &marker, &[]))
            .await
            .map_err(failure)?;
    }
    let volume = read(&cinder, &volume_id).await?;
    Ok(resource.outcome(&volume, current.data.clone()))
}

#[cfg(test)]
mod tests {
    use ember_openstack::cinder::VolumeAttachment;

    use super::super::spec::MARKER_KEY;
    use super::*;

    #[test]
    fn attachments_to_restore_are_remembered_and_never_doubled() {
        let mut volume = Volume {
            id: "v1".to_owned(),
            attachments: vec![VolumeAttachment {
                server_id: "s1".to_owned(),
                attachment_id: Some("a1".to_owned()),
                device: Some("/dev/vdb".to_owned()),
            }],
            ..Volume::default()
        };
        assert!(reattachments(&volume, false).is_empty());
        let pending = reattachments(&volume, true);
        assert_eq!(
            pending,
            [Reattachment {
                server_id: "s1".to_owned(),
                device: Some("/dev/vdb".to_owned())
            }]
        );
        let spec = VolumeSpec {
            metadata: BTreeMap::from([("role".to_owned(), "db".to_owned())]),
            ..VolumeSpec::default()
        };
        let written = metadata_of(&spec, "ember-1", &pending);
        assert_eq!(written["role"], "db");
        assert_eq!(written[MARKER_KEY], "ember-1");
        // A resumed update: the volume is detached, the metadata says
        // where it was.
        volume.attachments.clear();
        volume.metadata = written;
        assert_eq!(reattachments(&volume, true), pending);
        assert!(!metadata_of(&spec, "ember-1", &[]).contains_key(REATTACH_KEY));
    }
}
