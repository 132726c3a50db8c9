//! Software configuration resources: configs (`OS::Heat::SoftwareConfig`,
//! `StructuredConfig`, `CloudConfig`, `MultipartMime`) are immutable
//! software configs made from the template; deployments
//! (`OS::Heat::SoftwareDeployment`, `StructuredDeployment`) apply one to
//! a server for the actions they name and hold the stack until the
//! server's agent signals the outputs back.
//!
//! For each triggered action a deployment makes a *derived* config — the
//! source config with the input values filled in, plus Heat's `deploy_*`
//! inputs (server, action, stack, resource, and how to signal) — which is
//! what the agent reads from the server's metadata
//! (`GET …/software_deployments/metadata/{server}`), then it waits for the
//! signal (CFN_SIGNAL and HEAT_SIGNAL: an HTTP POST to `deploy_signal_id`,
//! a URL carrying its secret; TEMP_URL_SIGNAL: a PUT there; or a `PUT
//! /software_deployments/{id}` by a user; NO_SIGNAL: no wait). The secret
//! lives in the derived config's inputs, so a signal is checked against
//! the deployment itself while its resource is still being created.
//!
//! A deployment's id derives from its resource's row
//! ([`ResourceRequest::derived_id`]), and its outputs are stored when the
//! agent signals them: every step another engine had in flight when it
//! went away is taken over — the deployment that engine triggered is
//! found and waited for again (its agent keeps the same signal URL and
//! secret), one never triggered is triggered now. A suspend or resume
//! tells its own trigger by when it happened: a deployment moved to the
//! step's action after the step began (its first IN_PROGRESS event) was
//! triggered by it, so the agent never runs one step's config twice.
//!
//! A config resource's config id derives from its row too: a create
//! taken over finds the config the earlier attempt made (configs are
//! immutable, so it is the same one) instead of making a second.
//!
//! `config` and `deployment` are the two kinds of resource type, `inputs`
//! the substitution of input values into structured configs.

use ember_runtime::Identity;

use super::ResourceRequest;
use crate::domain::Resource;

mod config;
mod deployment;
mod inputs;

pub use config::ConfigResource;
pub use deployment::DeploymentResource;
pub(in crate::resources) use deployment::deployment_properties;

pub const SOFTWARE_DEPLOYMENT_TYPE: &str = "OS::Heat::SoftwareDeployment";

/// What a deployment's id is derived for (see
/// [`ResourceRequest::derived_id`]).
const DEPLOYMENT_KIND: &str = "software deployment";
pub const STRUCTURED_DEPLOYMENT_TYPE: &str = "OS::Heat::StructuredDeployment";

/// What a config resource's config id is derived for.
const CONFIG_KIND: &str = "software config";

/// How many of a resource's newest events are read to find when its step
/// began (the step's IN_PROGRESS events, and the signals recorded while it
/// waits, come first).
const STEP_EVENTS_READ: u32 = 50;

/// Whether a resource type is a deployment (signals go to its deployment).
pub fn is_deployment(type_name: &str) -> bool {
    matches!(
        type_name,
        SOFTWARE_DEPLOYMENT_TYPE | STRUCTURED_DEPLOYMENT_TYPE
    )
}

/// The identity the resources act with: the stack's owner in its project.
fn owner(request: &ResourceRequest) -> Identity {
    Identity::new(
        request.user_id.clone(),
        request.project_id.clone(),
        vec!["member".to_owned()],
    )
}

fn owner_of(resource: &Resource, project_id: &str) -> Identity {
    let _ = resource;
    Identity::new("engine", project_id.to_owned(), vec!["member".to_owned()])
}
