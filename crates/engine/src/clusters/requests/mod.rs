//! The request side: validate, decide, record (object and/or action) and
//! return at once. Nothing here touches a physical resource. One file per
//! kind of object — profiles, policies, clusters, nodes, and the history
//! (actions, events) — and one for the cluster actions a request records;
//! what each asks of an existing object (show, update, validate, cancel)
//! is in its kind's file. Checks and messages follow Senlin's engine
//! (`service.py`), because its clients and conformance suite compare them.

use ember_runtime::Identity;
use serde_json::{Map, Value};

use crate::error::{Error, Result};

mod cluster_actions;
mod clusters;
mod history;
mod nodes;
mod policies;
mod profiles;

pub use cluster_actions::{HealthAction, ResizeRequest};
pub use clusters::{ClusterDetails, ClusterUpdate, NewCluster};
pub use nodes::NewNode;

/// The project a list is limited to: the caller's own (admins included, as
/// in Senlin), or every project for an admin who asked (`global_project`);
/// anyone else asking is refused with Senlin's message.
fn list_scope(caller: &Identity, global_project: bool) -> Result<Option<String>> {
    match (global_project, caller.is_admin()) {
        (false, _) => Ok(Some(caller.project_id.clone())),
        (true, true) => Ok(None),
        (true, false) => Err(Error::Forbidden(
            "You are not authorized to complete this operation.".to_owned(),
        )),
    }
}

pub(crate) fn json_object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn nothing_to_update() -> Error {
    Error::InvalidInput("No property needs an update.".into())
}
