//! Attaching a volume to a server and detaching it, as Heat's Nova and
//! Cinder client plugins do, shared by the attachment types and by a
//! volume update that must detach the volume and attach it back (a change
//! of `read_only` or `backup_id`, or a growth Cinder cannot do in use).
//!
//! Both are idempotent: an attach finds the volume already attached to
//! the server (an earlier attempt's, or one made by hand) and adopts it;
//! a detach of a volume not attached, or of a server gone, is done. Both
//! wait until Cinder and Nova agree.

use ember_openstack::cinder::{Cinder, Volume};
use ember_openstack::nova::{Nova, VolumeAttachment};

use super::super::heat::unknown_status;
use super::super::{Cloud, failure};
use super::volume_not_found;
use crate::resources::ResourceFailure;

/// What to attach where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub server_id: String,
    pub volume_id: String,
    /// The device asked for (`/dev/vdb`); `None` lets Nova choose.
    pub device: Option<String>,
}

/// Whether Cinder lists `server_id` among the volume's attachments.
pub fn attached_to(volume: &Volume, server_id: &str) -> bool {
    volume
        .attachments
        .iter()
        .any(|attachment| attachment.server_id == server_id)
}

/// Attaches the volume (or adopts its attachment to that server) and waits
/// until Cinder shows it `in-use` by the server. Returns Nova's attachment
/// (its id is the volume's id). An attachment this call made is detached
/// again when the wait fails, so a failed attach leaves nothing behind.
pub async fn attach(
    nova: &Nova,
    cinder: &Cinder,
    placement: &Placement,
) -> Result<VolumeAttachment, ResourceFailure> {
    let refused = |error: ember_openstack::Error| match error.status() {
        // Heat's words for a request Nova refused (its client exceptions).
        Some(400..=499) => ResourceFailure::new(format!(
            "Failed to attach volume {} to server {} - {error}",
            placement.volume_id, placement.server_id
        )),
        _ => failure(error),
    };
    if let Some(existing) = nova_attachment(nova, placement).await.map_err(refused)? {
        wait_attached(cinder, placement).await?;
        return Ok(existing);
    }
    let attachment = match nova
        .attach_volume(
            &placement.server_id,
            &placement.volume_id,
            placement.device.as_deref(),
        )
        .await
    {
        Ok(attachment) => attachment,
        // Nova refuses a volume already attached, or being attached: to
        // this server it is what an earlier attempt started (adopted);
        // to another, the failure stands.
        Err(error) if error.is_conflict() => {
            match nova_attachment(nova, placement).await.map_err(refused)? {
                Some(existing) => existing,
                None => return Err(refused(error)),
            }
        }
        Err(error) => return Err(refused(error)),
    };
    if let Err(failed) = wait_attached(cinder, placement).await {
        if let Err(undone) = detach(nova, cinder, placement).await {
            tracing::warn!(
                volume_id = %placement.volume_id,
                server_id = %placement.server_id,
                error = %undone,
                "a failed attachment could not be detached"
            );
        }
        return Err(failed);
    }
    Ok(attachment)
}

/// Nova's attachment of the volume to the server, if there is one.
async fn nova_attachment(
    nova: &Nova,
    placement: &Placement,
) -> Result<Option<VolumeAttachment>, ember_openstack::Error> {
    Ok(nova
        .volume_attachments(&placement.server_id)
        .await?
        .into_iter()
        .find(|attachment| attachment.volume_id == placement.volume_id))
}

/// Heat's `check_attach_volume_complete`: `available`, `attaching` and
/// `reserved` are on the way, `in-use` (by this server) is done, anything
/// else failed.
async fn wait_attached(cinder: &Cinder, placement: &Placement) -> Result<Volume, ResourceFailure> {
    let volume_id = placement.volume_id.as_str();
    let server_id = placement.server_id.as_str();
    Cloud::wait_for(
        &format!("volume {volume_id} attached to server {server_id}"),
        || async move {
            let volume = cinder
                .volume(volume_id)
                .await
                .map_err(failure)?
                .ok_or_else(|| volume_not_found(volume_id))?;
            match volume.status.as_str() {
                "in-use" if attached_to(&volume, server_id) => Ok(Some(volume)),
                // In use by another server (a multi-attach volume): ours
                // is still on its way.
                "in-use" | "available" | "attaching" | "reserved" => Ok(None),
                other => Err(unknown_status("Volume attachment failed", other)),
            }
        },
    )
    .await
}

/// Detaches the volume from the server and waits until Cinder no longer
/// lists the server and Nova no longer shows the attachment (Heat's
/// `detach_volume` and both `check_detach_volume_complete`s). Nova's
/// "busy" (409) is asked again; a volume not attached, or a server gone,
/// is detached.
pub async fn detach(
    nova: &Nova,
    cinder: &Cinder,
    placement: &Placement,
) -> Result<(), ResourceFailure> {
    let volume_id = placement.volume_id.as_str();
    let server_id = placement.server_id.as_str();
    Cloud::wait_for(
        &format!("Nova to detach volume {volume_id} from server {server_id}"),
        || async move {
            match nova.detach_volume(server_id, volume_id).await {
                Ok(()) => Ok(Some(())),
                Err(error) if error.is_conflict() => Ok(None),
                Err(error) if error.status() == Some(400) => Ok(Some(())),
                Err(error) => Err(ResourceFailure::new(format!(
                    "Could not detach attachment {volume_id} from server {server_id}: {error}"
                ))),
            }
        },
    )
    .await?;
    Cloud::wait_for(
        &format!("volume {volume_id} detached from server {server_id}"),
        || async move {
            let Some(volume) = cinder.volume(volume_id).await.map_err(failure)? else {
                return Ok(Some(()));
            };
            if !attached_to(&volume, server_id) {
                return Ok(Some(()));
            }
            match volume.status.as_str() {
                "in-use" | "detaching" | "reserved" => Ok(None),
                "available" | "deleting" => Ok(Some(())),
                other => Err(unknown_status("Volume detachment failed", other)),
            }
        },
    )
    .await?;
    Cloud::wait_for(
        &format!("server {server_id} to lose volume {volume_id}"),
        || async move {
            match nova.volume_attachments(server_id).await {
                Ok(attachments) => Ok((!attachments
                    .iter()
                    .any(|attachment| attachment.volume_id == volume_id))
                .then_some(())),
                Err(error) if error.is_not_found() => Ok(Some(())),
                Err(error) => Err(failure(error)),
            }
        },
    )
    .await
}
