//! Firing a receiver: an action and its params (a webhook's own, merged
//! with the trigger's, or a message's) become the call the REST API's
//! cluster action body would make, as the receiver's creator. Values may
//! be JSON numbers or text (`{"count": "2"}`), as Senlin's clients send
//! both.

use ember_runtime::Identity;
use serde_json::{Map, Value};

use crate::clusters::{ClusterService, HealthAction, ResizeRequest};
use crate::domain::cluster::ClusterAction;
use crate::domain::cluster::sizing::AdjustmentType;
use crate::domain::receiver::{Receiver, merged_params, validate_params};
use crate::error::{Error, Result};

/// Records the action `receiver` stands for with its params overlaid by
/// `overrides`, on its cluster, as its creator.
pub(super) async fn fire(
    clusters: &ClusterService,
    receiver: &Receiver,
    overrides: Map<String, Value>,
) -> Result<ClusterAction> {
    let owner = receiver.owner();
    let (Some(cluster_id), Some(action)) = (receiver.cluster_id, receiver.action.as_deref()) else {
        return Err(Error::InvalidInput(format!(
            "receiver '{}' names no cluster action to run",
            receiver.id
        )));
    };
    let params = merged_params(&receiver.params, overrides);
    validate_params(action, &params)?;
    let cluster = cluster_id.to_string();
    // Looked up first so that a deleted cluster is said plainly, not as a
    // lookup deeper in the action (a node or policy it names).
    match clusters.find_cluster(&owner, &cluster).await {
        Ok(_) => {}
        Err(Error::NotFound(_)) => {
            return Err(Error::NotFound(format!(
                "The referenced cluster '{cluster}' could not be found: receiver '{}' acts on a cluster that was deleted",
                receiver.id
            )));
        }
        Err(other) => return Err(other),
    }
    run(clusters, &owner, &cluster, action, &params).await
}

/// Records `action` with `params` (checked against the action already) on
/// the cluster `cluster` names, as `owner`: the same request path, checks,
/// quotas and queueing as the REST call it stands for.
pub(super) async fn run(
    clusters: &ClusterService,
    owner: &Identity,
    cluster: &str,
    action: &str,
    params: &Map<String, Value>,
) -> Result<ClusterAction> {
    match action {
        "CLUSTER_SCALE_OUT" | "CLUSTER_SCALE_IN" => {
            let count = count(params)?;
            clusters
                .scale(owner, cluster, action == "CLUSTER_SCALE_OUT", count)
                .await
        }
        "CLUSTER_RESIZE" => {
            let adjustment = match text(params, "adjustment_type")? {
                None => None,
                Some(kind) => Some((
                    AdjustmentType::parse(&kind)?,
                    number(params, "number")?.unwrap_or(0.0),
                )),
            };
            let request = ResizeRequest {
                adjustment,
                min_size: int32(params, "min_size")?,
                max_size: int32(params, "max_size")?,
                min_step: int32(params, "min_step")?.unwrap_or(0),
                strict: boolean(params, "strict")?.unwrap_or(true),
            };
            clusters.resize(owner, cluster, request).await
        }
        "CLUSTER_ADD_NODES" | "CLUSTER_DEL_NODES" => {
            let nodes = names(params, "nodes")?;
            clusters
                .change_nodes(owner, cluster, &nodes, action == "CLUSTER_ADD_NODES", None)
                .await
        }
        "CLUSTER_ATTACH_POLICY" => {
            let policy = required_text(params, "policy_id")?;
            let priority = int32(params, "priority")?.unwrap_or(0);
            let enabled = boolean(params, "enabled")?.unwrap_or(true);
            clusters
                .attach_policy(owner, cluster, &policy, priority, enabled)
                .await
        }
        "CLUSTER_DETACH_POLICY" => {
            let policy = required_text(params, "policy_id")?;
            clusters.detach_policy(owner, cluster, &policy).await
        }
        "CLUSTER_CHECK" => {
            clusters
                .check_or_recover(owner, cluster, HealthAction::Check)
                .await
        }
        "CLUSTER_RECOVER" => {
            clusters
                .check_or_recover(owner, cluster, HealthAction::Recover)
                .await
        }
        "CLUSTER_DELETE" => clusters.delete_cluster(owner, cluster).await,
        other => Err(Error::InvalidInput(format!(
            "a receiver cannot run {other} in Ember"
        ))),
    }
}

/// Checks the kind of each parameter given, so that a receiver made (or
/// updated) with `{"count": "lots"}` is refused then, not each time it
/// fires. Parameters a trigger may still add (a policy, nodes) are not
/// required here.
pub(super) fn check_values(params: &Map<String, Value>) -> Result<()> {
    for key in params.keys() {
        match key.as_str() {
            "count" => {
                count(params)?;
            }
            "adjustment_type" => {
                if let Some(kind) = text(params, key)? {
                    AdjustmentType::parse(&kind)?;
                }
            }
            "number" => {
                number(params, key)?;
            }
            "min_size" | "max_size" | "min_step" | "priority" => {
                int32(params, key)?;
            }
            "strict" | "enabled" => {
                boolean(params, key)?;
            }
            "nodes" => {
                names(params, key)?;
            }
            "policy_id" => {
                text(params, key)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// A scale's `count`: 0 (the scaling policy's step, else 1) when absent.
fn count(params: &Map<String, Value>) -> Result<u32> {
    match integer(params, "count")? {
        None => Ok(0),
        Some(count) => u32::try_from(count).map_err(|_| invalid("count", "a positive integer")),
    }
}

fn invalid(key: &str, what: &str) -> Error {
    Error::InvalidInput(format!("params: {key} must be {what}"))
}

fn text(params: &Map<String, Value>, key: &str) -> Result<Option<String>> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(invalid(key, "a string")),
    }
}

fn required_text(params: &Map<String, Value>, key: &str) -> Result<String> {
    text(params, key)?
        .filter(|text| !text.is_empty())
        .ok_or_else(|| Error::InvalidInput(format!("params: {key} is required")))
}

fn integer(params: &Map<String, Value>, key: &str) -> Result<Option<i64>> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) => number
            .as_i64()
            .map(Some)
            .ok_or_else(|| invalid(key, "an integer")),
        Some(Value::String(text)) => text
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| invalid(key, "an integer")),
        Some(_) => Err(invalid(key, "an integer")),
    }
}

fn int32(params: &Map<String, Value>, key: &str) -> Result<Option<i32>> {
    integer(params, key)?
        .map(|value| i32::try_from(value).map_err(|_| invalid(key, "a 32-bit integer")))
        .transpose()
}

fn number(params: &Map<String, Value>, key: &str) -> Result<Option<f64>> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) => Ok(number.as_f64()),
        Some(Value::String(text)) => text
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| invalid(key, "a number")),
        Some(_) => Err(invalid(key, "a number")),
    }
}

fn boolean(params: &Map<String, Value>, key: &str) -> Result<Option<bool>> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(*flag)),
        Some(Value::String(text)) => match text.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Ok(Some(true)),
            "false" | "0" | "no" => Ok(Some(false)),
            _ => Err(invalid(key, "a boolean")),
        },
        Some(_) => Err(invalid(key, "a boolean")),
    }
}

fn names(params: &Map<String, Value>, key: &str) -> Result<Vec<String>> {
    match params.get(key) {
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| invalid(key, "a list of node names or ids"))
            })
            .collect(),
        _ => Err(invalid(key, "a non-empty list of node names or ids")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn numbers_may_be_text() {
        let given = params(json!({"count": "2", "number": "1.5", "strict": "false"}));
        assert_eq!(integer(&given, "count").unwrap(), Some(2));
        assert_eq!(number(&given, "number").unwrap(), Some(1.5));
        assert_eq!(boolean(&given, "strict").unwrap(), Some(false));
        assert_eq!(integer(&given, "missing").unwrap(), None);
    }

    #[test]
    fn wrong_types_say_which_parameter() {
        let given = params(json!({"count": "many", "nodes": [], "max_size": 1e12}));
        assert_eq!(
            integer(&given, "count").unwrap_err().to_string(),
            "params: count must be an integer"
        );
        assert!(
            names(&given, "nodes")
                .unwrap_err()
                .to_string()
                .contains("nodes")
        );
        assert!(int32(&given, "max_size").is_err());
    }

    #[test]
    fn values_are_checked_before_any_trigger() {
        assert!(check_values(&params(json!({"count": "2", "strict": true}))).is_ok());
        assert!(check_values(&params(json!({"policy_id": "p"}))).is_ok());
        for bad in [
            json!({"count": -1}),
            json!({"adjustment_type": "SIDEWAYS"}),
            json!({"number": [1]}),
            json!({"nodes": "n1"}),
            json!({"enabled": "maybe"}),
        ] {
            assert!(check_values(&params(bad.clone())).is_err(), "{bad}");
        }
    }
}
