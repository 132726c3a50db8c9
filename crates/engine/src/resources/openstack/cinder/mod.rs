//! Cinder types and their AWS twins: volumes (`OS::Cinder::Volume`,
//! `AWS::EC2::Volume`) and their attachments to servers
//! (`OS::Cinder::VolumeAttachment`, `AWS::EC2::VolumeAttachment`), which
//! are asked of Nova as Heat does — and volume types and their encryption
//! (`OS::Cinder::VolumeType`, `OS::Cinder::EncryptedVolumeType`).
//!
//! Each twin shares its OpenStack type's implementation and differs only
//! where Heat's does ([`Dialect`]): property names, defaults, attributes,
//! and updates — every AWS property is immutable in Heat, so a change
//! fails the update instead of replacing the resource.

mod attach;
mod attachment;
pub(crate) mod volume;
pub(crate) mod volume_type;

use std::sync::Arc;

use ember_openstack::Session;
use ember_openstack::cinder::Cinder;
use ember_openstack::nova::Nova;

use super::{Cloud, failure};
use crate::resources::{ResourceFailure, ResourceTypeRegistry, ResourceTypeSchema};

/// Which of Heat's twins a type is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Dialect {
    /// `OS::Cinder::*`.
    #[default]
    OpenStack,
    /// `AWS::EC2::*`: CloudFormation's names, every property immutable.
    Aws,
}

/// The schemas of the Cinder types and their `AWS::` twins, with no cloud
/// behind them (the simulated backend's twins share them).
pub fn schemas() -> Vec<ResourceTypeSchema> {
    let mut schemas: Vec<ResourceTypeSchema> = [Dialect::OpenStack, Dialect::Aws]
        .into_iter()
        .flat_map(|dialect| [volume::spec::schema(dialect), attachment::schema(dialect)])
        .collect();
    schemas.push(volume_type::schema());
    schemas.push(volume_type::encrypted_schema());
    schemas
}

pub fn register(registry: &mut ResourceTypeRegistry, cloud: &Cloud) {
    for dialect in [Dialect::OpenStack, Dialect::Aws] {
        registry.register(Arc::new(volume::VolumeResource::new(
            dialect,
            cloud.clone(),
        )));
        registry.register(Arc::new(attachment::AttachmentResource::new(
            dialect,
            cloud.clone(),
        )));
    }
    registry.register(Arc::new(volume_type::VolumeTypeResource::new(
        cloud.clone(),
    )));
    registry.register(Arc::new(volume_type::EncryptedVolumeTypeResource::new(
        cloud.clone(),
    )));
}

/// Cinder (and the session it came from) as the owner of `stack_id`.
async fn cinder_for(
    cloud: &Cloud,
    stack_id: uuid::Uuid,
) -> Result<(Session, Cinder), ResourceFailure> {
    let session = cloud.session(stack_id).await?;
    let cinder = Cinder::connect(&session).await.map_err(failure)?;
    Ok((session, cinder))
}

/// Nova through `session`.
async fn nova_on(session: &Session) -> Result<Nova, ResourceFailure> {
    Nova::connect(session).await.map_err(failure)
}

/// Cinder's own words for a volume it does not have.
fn volume_not_found(volume_id: &str) -> ResourceFailure {
    ResourceFailure::new(format!("Volume {volume_id} could not be found."))
}
