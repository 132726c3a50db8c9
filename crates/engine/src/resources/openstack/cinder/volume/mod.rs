//! `OS::Cinder::Volume` and `AWS::EC2::Volume`: a Cinder volume, made as
//! the stack's owner and waited for until `available`.
//!
//! The volume carries the row's marker in its metadata (`ember_resource`),
//! so a create that runs again (a retry, another engine resuming) finds it
//! instead of making a second, and a delete of a row that recorded no
//! volume finds what the create may have made. A volume restored from a
//! backup is named after the marker until it is `available` (a restore
//! takes no metadata), then given its metadata and name.
//!
//! An update changes the volume in place ([`update`]); the properties
//! and what Heat shows of the volume are read in [`spec`].

pub mod spec;
mod update;

use async_trait::async_trait;
use ember_openstack::Session;
use ember_openstack::cinder::{Cinder, RestoreTarget, Volume};
use ember_openstack::glance::Glance;
use serde_json::{Value, json};

use super::super::heat::{check_status, physical_name, unknown_status, went_to_status};
use super::super::{Cloud, failure, physical_id};
use super::{Dialect, cinder_for, volume_not_found};
use crate::domain::{Resource, StackAction};
use crate::resources::{
    ResourceFailure, ResourceOutcome, ResourceRequest, ResourceType, ResourceTypeSchema,
};
use spec::{MARKER_KEY, VolumeSpec, attributes, schema};

/// What the marker and the physical name derive from.
const VOLUME_KIND: &str = "volume";

pub struct VolumeResource {
    dialect: Dialect,
    schema: ResourceTypeSchema,
    cloud: Cloud,
}

impl VolumeResource {
    pub fn new(dialect: Dialect, cloud: Cloud) -> VolumeResource {
        VolumeResource {
            dialect,
            schema: schema(dialect),
            cloud,
        }
    }

    fn outcome(&self, volume: &Volume, data: Value) -> ResourceOutcome {
        ResourceOutcome {
            physical_id: volume.id.clone(),
            attributes: attributes(self.dialect, volume),
            data,
        }
    }

    /// What the row's earlier attempts made: the volume carrying the
    /// marker, or one a restore is making under the marker's name.
    async fn made_before(cinder: &Cinder, marker: &str) -> Result<Vec<Volume>, ResourceFailure> {
        let mut made = cinder
            .volumes_with_metadata(MARKER_KEY, marker)
            .await
            .map_err(failure)?;
        for named in cinder.volumes_named(marker).await.map_err(failure)? {
            if !made.iter().any(|volume| volume.id == named.id) {
                made.push(named);
            }
        }
        Ok(made)
    }

    /// Asks Cinder for the volume (or the restore of the backup).
    async fn make(
        session: &Session,
        cinder: &Cinder,
        spec: &VolumeSpec,
        name: &str,
        marker: &str,
    ) -> Result<Volume, ResourceFailure> {
        if let Some(backup_id) = &spec.backup_id {
            let volume_id = cinder
                .restore_backup(
                    backup_id,
                    &RestoreTarget::NewVolume {
                        name: marker.to_owned(),
                    },
                )
                .await
                .map_err(failure)?;
            return read(cinder, &volume_id).await;
        }
        let image_id = match &spec.image {
            Some(image) => Some(
                Glance::new(session)
                    .find_image(image)
                    .await
                    .map_err(failure)?
                    .id,
            ),
            None => None,
        };
        cinder
            .create_volume(&spec.new_volume(name, image_id, marker))
            .await
            .map_err(failure)
    }
}

/// The volume, or Cinder's not-found.
async fn read(cinder: &Cinder, volume_id: &str) -> Result<Volume, ResourceFailure> {
    cinder
        .volume(volume_id)
        .await
        .map_err(failure)?
        .ok_or_else(|| volume_not_found(volume_id))
}

/// Heat's `check_create_complete`.
async fn wait_created(cinder: &Cinder, volume_id: &str) -> Result<Volume, ResourceFailure> {
    Cloud::wait_for(&format!("volume {volume_id} available"), || async move {
        let volume = read(cinder, volume_id).await?;
        match volume.status.as_str() {
            "available" => Ok(Some(volume)),
            "creating" | "restoring-backup" | "downloading" => Ok(None),
            "error" => Err(went_to_status("error", "Unknown")),
            other => Err(unknown_status("Volume create failed", other)),
        }
    })
    .await
}

/// Waits while the volume is in `busy` (a retype, an extension, a
/// restore); fails (`result`) on a status outside `settled`.
async fn wait_settled(
    cinder: &Cinder,
    volume_id: &str,
    busy: &[&str],
    settled: &[&str],
    result: &str,
) -> Result<Volume, ResourceFailure> {
    Cloud::wait_for(&format!("volume {volume_id} {result}"), || async move {
        let volume = read(cinder, volume_id).await?;
        let status = volume.status.as_str();
        if settled.contains(&status) {
            Ok(Some(volume))
        } else if busy.contains(&status) {
            Ok(None)
        } else {
            Err(unknown_status(result, status))
        }
    })
    .await
}

/// Heat's delete: refused while in use, asked unless already deleting,
/// then waited for until Cinder no longer has it.
async fn delete_volume(cinder: &Cinder, volume_id: &str) -> Result<(), ResourceFailure> {
    let Some(volume) = cinder.volume(volume_id).await.map_err(failure)? else {
        return Ok(());
    };
    if volume.status == "in-use" {
        return Err(ResourceFailure::new("Volume in use".to_owned()));
    }
    if volume.status != "deleting" {
        cinder.delete_volume(volume_id).await.map_err(failure)?;
    }
    Cloud::wait_for(&format!("volume {volume_id} deleted"), || async move {
        match cinder.volume(volume_id).await.map_err(failure)? {
            None => Ok(Some(())),
            Some(volume) if volume.status.eq_ignore_ascii_case("error_deleting") => {
                Err(went_to_status(&volume.status, "delete"))
            }
            Some(_) => Ok(None),
        }
    })
    .await
}

#[async_trait]
impl ResourceType for VolumeResource {
    fn schema(&self) -> &ResourceTypeSchema {
        &self.schema
    }

    async fn create(&self, request: &ResourceRequest) -> Result<ResourceOutcome, ResourceFailure> {
        let spec = VolumeSpec::read(self.dialect, &request.properties)?;
        let (session, cinder) = cinder_for(&self.cloud, request.stack_id).await?;
        let marker = Cloud::marker(request, VOLUME_KIND);
        let name = physical_name(request, VOLUME_KIND);
        let made = Self::made_before(&cinder, &marker).await?;
        if made.len() > 1 {
            tracing::warn!(
                marker = %marker,
                volumes = made.len(),
                "several volumes carry one row's marker: the first is kept"
            );
        }
        let volume = match made.into_iter().next() {
            Some(volume) => volume,
            None => Self::make(&session, &cinder, &spec, &name, &marker).await?,
        };
        let volume = wait_created(&cinder, &volume.id).await?;
        if spec.backup_id.is_some() {
            // A restored volume takes its metadata and names now (Heat
            // renames it after the restore too).
            cinder
                .set_volume_metadata(&volume.id, &spec.metadata_with(&marker))
                .await
                .map_err(failure)?;
            cinder
                .update_volume(
                    &volume.id,
                    Some(&spec.name_or(&name)),
                    spec.description_or(&name).as_deref(),
                )
                .await
                .map_err(failure)?;
        }
        if let Some(read_only) = spec.read_only {
            cinder
                .set_volume_read_only(&volume.id, read_only)
                .await
                .map_err(failure)?;
        }
        let volume = read(&cinder, &volume.id).await?;
        Ok(self.outcome(&volume, json!({})))
    }

    async fn update(
        &self,
        request: &ResourceRequest,
        current: &Resource,
    ) -> Result<ResourceOutcome, ResourceFailure> {
        update::update(self, request, current).await
    }

    async fn delete(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let (_, cinder) = cinder_for(&self.cloud, current.stack_id).await?;
        let volume_ids = match physical_id(current) {
            Some(volume_id) => vec![volume_id.to_owned()],
            None => {
                let marker = Cloud::marker_of(current, VOLUME_KIND);
                Self::made_before(&cinder, &marker)
                    .await?
                    .into_iter()
                    .map(|volume| volume.id)
                    .collect()
            }
        };
        for volume_id in volume_ids {
            delete_volume(&cinder, &volume_id).await?;
        }
        Ok(())
    }

    async fn check(&self, current: &Resource) -> Result<(), ResourceFailure> {
        let volume_id = physical_id(current)
            .ok_or_else(|| ResourceFailure::new("the volume was never made".to_owned()))?;
        let (_, cinder) = cinder_for(&self.cloud, current.stack_id).await?;
        let volume = read(&cinder, volume_id).await?;
        check_status(&["available", "in-use"], &volume.status)
    }

    /// Every step finds what an earlier attempt did: the create by the
    /// marker, the update by comparing what it asks with what the volume
    /// is (and the attachments it wrote down), the delete by the id or
    /// the marker.
    fn take_over(&self, step: StackAction) -> Result<(), String> {
        let _ = step;
        Ok(())
    }

    /// Heat's AWS volume has every property immutable: a change fails the
    /// update (in [`ResourceType::update`]) instead of replacing it.
    fn needs_replacement(
        &self,
        old: &serde_json::Map<String, Value>,
        new: &serde_json::Map<String, Value>,
    ) -> bool {
        match self.dialect {
            Dialect::Aws => false,
            Dialect::OpenStack => self.schema.properties.iter().any(|property| {
                !property.update_allowed && old.get(property.name) != new.get(property.name)
            }),
        }
    }
}
