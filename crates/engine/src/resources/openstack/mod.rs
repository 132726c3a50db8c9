//! The resource types of the openstack backend: networks, subnets, ports,
//! routers, security groups, floating IPs (Neutron), volumes and their
//! attachments (Cinder, attached through Nova), key pairs and server groups
//! (Nova), images (Glance), and their `AWS::` twins — each acting on the
//! real service as the stack's owner, through the stack's delegation
//! (`crate::cloud`).
//!
//! What every type here shares:
//! - **Found again, never made twice.** What a resource row makes carries
//!   the row's [marker](Cloud::marker) (a Neutron tag, Cinder metadata, a
//!   Glance image id derived from the row); a create that runs again — a
//!   retry, or another engine resuming after a crash — looks for it first
//!   and adopts it. A delete with no physical id looks for it the same way,
//!   so nothing a crash interrupted is left behind.
//! - **Waits on the real state**, polling with a deadline and backing off
//!   ([`Cloud::wait_for`]); a remote `ERROR` is the resource's failure,
//!   in the service's own words ([`failure`]).
//! - **Deletes are idempotent** and wait until the object is really gone.
//! - **Attributes are what the service shows**: the object's fields, so
//!   `get_attr` and `show` read what the service said at the last create,
//!   update or check.

pub(crate) mod cinder;
mod glance;
mod heat;
pub(crate) mod neutron;
mod nova;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ember_openstack::Session;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{ResourceFailure, ResourceRequest, ResourceTypeRegistry, ResourceTypeSchema};
use crate::cloud::OpenStackCloud;
use crate::domain::Resource;

/// The longest a create or delete waits for the service to settle (Heat's
/// default stack timeout is an hour; the stack's own timeout cuts it
/// shorter).
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(1800);

/// How the types reach the cloud.
#[derive(Clone, Debug)]
pub struct Cloud {
    cloud: Arc<OpenStackCloud>,
}

impl Cloud {
    pub fn new(cloud: Arc<OpenStackCloud>) -> Cloud {
        Cloud { cloud }
    }

    pub fn backend(&self) -> &Arc<OpenStackCloud> {
        &self.cloud
    }

    /// The session acting for the owner of `stack_id` (its root's
    /// delegation): everything a resource does is done through it.
    pub async fn session(&self, stack_id: Uuid) -> Result<Session, ResourceFailure> {
        self.cloud
            .stack_session(stack_id)
            .await
            .map_err(ResourceFailure::from)
    }

    /// The tag (or metadata value) marking what `request`'s row makes of
    /// `kind`: `ember-<uuid>`, the same on every attempt of the row (see
    /// [`ResourceRequest::derived_id`]).
    pub fn marker(request: &ResourceRequest, kind: &str) -> String {
        format!("ember-{}", request.derived_id(kind))
    }

    /// The marker of what `current`'s row made of `kind` (as
    /// [`Cloud::marker`] of the request that made it).
    pub fn marker_of(current: &Resource, kind: &str) -> String {
        format!(
            "ember-{}",
            super::derived_id(current.stack_id, current.id, kind)
        )
    }

    /// Polls `probe` until it answers `Some`, backing off from 100 ms to
    /// 2 s, for at most [`SETTLE_TIMEOUT`]; `probe` fails to stop early.
    pub async fn wait_for<T, F, Fut>(what: &str, mut probe: F) -> Result<T, ResourceFailure>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Option<T>, ResourceFailure>>,
    {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        let mut pause = Duration::from_millis(100);
        loop {
            if let Some(found) = probe().await? {
                return Ok(found);
            }
            if Instant::now() > deadline {
                return Err(ResourceFailure::new(format!(
                    "{what}: not within {} s",
                    SETTLE_TIMEOUT.as_secs()
                )));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    }
}

/// A cloud's failure as a resource's status reason: the service's own
/// message, with the call and request id for the operator.
pub fn failure(error: ember_openstack::Error) -> ResourceFailure {
    ResourceFailure::new(error.to_string())
}

/// The physical id `current` recorded, or a failure naming the resource.
pub fn physical_id(current: &Resource) -> Option<&str> {
    current.physical_id.as_deref().filter(|id| !id.is_empty())
}

/// A property as text, if given (numbers become text, as Heat coerces).
pub fn text(properties: &Map<String, Value>, name: &str) -> Option<String> {
    match properties.get(name) {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(other) => Some(other.to_string()),
    }
}

/// The schemas of every type [`register`] registers, with no cloud behind
/// them: the simulated backend's twins (`super::simulated_cloud`) take the
/// same properties and show the same attributes.
pub fn schemas() -> Vec<ResourceTypeSchema> {
    let mut schemas = neutron::schemas();
    schemas.extend(cinder::schemas());
    schemas.extend(nova::schemas());
    schemas.extend(glance::schemas());
    schemas
}

/// Registers every type of the openstack backend.
pub fn register(registry: &mut ResourceTypeRegistry, cloud: &Arc<OpenStackCloud>) {
    let cloud = Cloud::new(cloud.clone());
    neutron::register(registry, &cloud);
    cinder::register(registry, &cloud);
    nova::register(registry, &cloud);
    glance::register(registry, &cloud);
}
