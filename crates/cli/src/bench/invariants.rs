//! The invariant checker shared by `ember bench load` and the concurrency
//! and crash suites: once Ember is quiet, it reads everything through the
//! public REST API, as a user would, and lists every anomaly — Jepsen's
//! checker idea, in miniature.
//!
//! What must hold after any mix of concurrent requests and crashes:
//! - stacks: none left `*_IN_PROGRESS`; a stack's own events never go from
//!   a final state to another final state (a finished stack changes only
//!   through a requested operation, which starts `*_IN_PROGRESS`), and
//!   nothing follows DELETE_COMPLETE;
//! - clusters: none left RESIZING, INIT or DELETING; no action left
//!   READY, RUNNING or waiting; desired capacity equals the nodes; node
//!   names and indices unique; every node ACTIVE or ERROR with its
//!   instance present (and ACTIVE for an ACTIVE node); the project's live
//!   node instances (`node-…`) are exactly the nodes' (the clusters' and
//!   those that left them and were kept: none leaked, none missing); no
//!   node
//!   deleted twice (one SUCCEEDED NODE_DELETE doing the delete — a leaf
//!   action — and one NODE_DELETE event at most per node). Clusters of
//!   `ember.instance` profiles: their nodes are instances.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A stack the workload touched (deleted ones included: their history is
/// checked too).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StackRef {
    pub name: String,
    pub id: String,
}

/// Reads Ember's REST API as one project's user.
pub struct Checker {
    http: reqwest::Client,
    gateway: String,
    token: String,
    project: String,
}

impl Checker {
    /// `gateway`: `http://host:port`.
    pub fn new(gateway: &str, token: &str, project: &str) -> Checker {
        Checker {
            http: reqwest::Client::new(),
            gateway: gateway.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            project: project.to_owned(),
        }
    }

    async fn get(&self, path: &str) -> Result<(u16, Value), String> {
        let response = self
            .http
            .get(format!("{}{path}", self.gateway))
            .header("X-Auth-Token", &self.token)
            .header("OpenStack-API-Version", "clustering 1.12")
            .send()
            .await
            .map_err(|error| format!("GET {path}: {error}"))?;
        let status = response.status().as_u16();
        let body = response.json().await.unwrap_or(Value::Null);
        Ok((status, body))
    }

    async fn get_ok(&self, path: &str) -> Result<Value, String> {
        match self.get(path).await? {
            (200, body) => Ok(body),
            (status, body) => Err(format!("GET {path}: {status} {body}")),
        }
    }

    /// Every item of a paged list (`limit`/`marker` on the last id).
    async fn all(&self, path: &str, key: &str) -> Result<Vec<Value>, String> {
        self.all_by(path, key, "id").await
    }

    /// [`Self::all`] with the marker read from `id_key` of the last item.
    async fn all_by(&self, path: &str, key: &str, id_key: &str) -> Result<Vec<Value>, String> {
        let separator = if path.contains('?') { '&' } else { '?' };
        let mut items: Vec<Value> = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let page_path = match &marker {
                Some(marker) => format!("{path}{separator}limit=1000&marker={marker}"),
                None => format!("{path}{separator}limit=1000"),
            };
            let page = self.get_ok(&page_path).await?;
            let page = page[key].as_array().cloned().unwrap_or_default();
            let full = page.len() == 1000;
            marker = page
                .last()
                .and_then(|item| item[id_key].as_str())
                .map(str::to_owned);
            items.extend(page);
            if !full || marker.is_none() {
                return Ok(items);
            }
        }
    }

    fn stack_path(&self, stack: &StackRef) -> String {
        format!(
            "/orchestration/v1/{}/stacks/{}/{}",
            self.project, stack.name, stack.id
        )
    }

    /// Waits until no stack of `stacks` is in progress and no action of
    /// `clusters` is unfinished; `Err` naming what still moves at the
    /// deadline.
    pub async fn wait_for_quiescence(
        &self,
        stacks: &[StackRef],
        clusters: &[String],
        timeout: Duration,
    ) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let moving = self.still_moving(stacks, clusters).await?;
            if moving.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "not quiet after {timeout:?}: {}",
                    moving.join("; ")
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn still_moving(
        &self,
        stacks: &[StackRef],
        clusters: &[String],
    ) -> Result<Vec<String>, String> {
        let mut moving = Vec::new();
        for stack in stacks {
            let (status, body) = self.get(&self.stack_path(stack)).await?;
            let state = body["stack"]["stack_status"].as_str().unwrap_or_default();
            if status == 200 && state.ends_with("_IN_PROGRESS") {
                moving.push(format!("stack {} {state}", stack.name));
            }
        }
        for cluster in clusters {
            let actions = self
                .all(
                    &format!("/clustering/v1/actions?cluster_id={cluster}"),
                    "actions",
                )
                .await?;
            let unfinished = actions
                .iter()
                .filter(|action| !is_final_action(action))
                .count();
            if unfinished > 0 {
                moving.push(format!(
                    "cluster {cluster}: {unfinished} action(s) unfinished"
                ));
            }
        }
        Ok(moving)
    }

    /// Every anomaly found among `stacks` and `clusters` (ids).
    pub async fn check(
        &self,
        stacks: &[StackRef],
        clusters: &[String],
    ) -> Result<Vec<String>, String> {
        let mut anomalies = Vec::new();
        for stack in stacks {
            self.check_stack(stack, &mut anomalies).await?;
        }
        let mut physical = BTreeSet::new();
        for cluster in clusters {
            self.check_cluster(cluster, &mut physical, &mut anomalies)
                .await?;
        }
        if !clusters.is_empty() {
            // Nodes that left the clusters and were kept (del_nodes without
            // destroy_after_deletion) keep their instances.
            for node in self.all("/clustering/v1/nodes", "nodes").await? {
                if node["cluster_id"].as_str().is_none_or(str::is_empty)
                    && let Some(physical_id) = node["physical_id"].as_str()
                {
                    physical.insert(physical_id.to_owned());
                }
            }
            // Node instances are named after their node (`node-…`): every
            // live one must be some node's.
            let leaked: Vec<Value> = self
                .all_by("/compute/v1/instances", "instances", "uuid")
                .await?
                .into_iter()
                .filter(|instance| {
                    instance["name"]
                        .as_str()
                        .is_some_and(|name| name.starts_with("node-"))
                })
                .filter(|instance| {
                    instance["uuid"]
                        .as_str()
                        .is_some_and(|uuid| !physical.contains(uuid))
                })
                .collect();
            if let Some(first) = leaked.first() {
                anomalies.push(format!(
                    "{} node instance(s) belong to no node (one is {} {}, {}, created {})",
                    leaked.len(),
                    first["uuid"].as_str().unwrap_or_default(),
                    first["name"].as_str().unwrap_or_default(),
                    first["status"].as_str().unwrap_or_default(),
                    first["created_at"].as_str().unwrap_or_default(),
                ));
            }
        }
        Ok(anomalies)
    }

    async fn check_stack(
        &self,
        stack: &StackRef,
        anomalies: &mut Vec<String>,
    ) -> Result<(), String> {
        let path = self.stack_path(stack);
        let (status, body) = self.get(&path).await?;
        if status == 404 {
            // Never created (a refused create), or gone: nothing to hold.
            return Ok(());
        }
        if status != 200 {
            return Err(format!("GET {path}: {status} {body}"));
        }
        let state = body["stack"]["stack_status"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if state.ends_with("_IN_PROGRESS") {
            anomalies.push(format!("stack {}: left {state}", stack.name));
        }
        let events = self
            .all(&format!("{path}/events?sort_dir=asc"), "events")
            .await?;
        let own: Vec<String> = events
            .iter()
            .filter(|event| event["physical_resource_id"].as_str() == Some(stack.id.as_str()))
            .filter_map(|event| event["resource_status"].as_str().map(str::to_owned))
            .collect();
        let found = stack_history_anomalies(&stack.name, &own);
        if !found.is_empty() {
            // The history, for whoever reads the anomaly.
            let history: Vec<String> = events
                .iter()
                .filter(|event| event["physical_resource_id"].as_str() == Some(stack.id.as_str()))
                .map(|event| {
                    format!(
                        "{} {} ({})",
                        event["event_time"].as_str().unwrap_or_default(),
                        event["resource_status"].as_str().unwrap_or_default(),
                        event["resource_status_reason"].as_str().unwrap_or_default()
                    )
                })
                .collect();
            anomalies.extend(
                found
                    .into_iter()
                    .map(|anomaly| format!("{anomaly}; history: {}", history.join(" → "))),
            );
        }
        Ok(())
    }

    async fn check_cluster(
        &self,
        cluster_id: &str,
        physical: &mut BTreeSet<String>,
        anomalies: &mut Vec<String>,
    ) -> Result<(), String> {
        let (status, body) = self
            .get(&format!("/clustering/v1/clusters/{cluster_id}"))
            .await?;
        let label = format!("cluster {cluster_id}");
        let actions = self
            .all(
                &format!("/clustering/v1/actions?cluster_id={cluster_id}"),
                "actions",
            )
            .await?;
        let events = self
            .all(
                &format!("/clustering/v1/events?cluster_id={cluster_id}"),
                "events",
            )
            .await?;
        anomalies.extend(action_anomalies(&label, &actions, &events));
        if status == 404 {
            return Ok(());
        }
        let cluster = &body["cluster"];
        let state = cluster["status"].as_str().unwrap_or_default();
        if !matches!(state, "ACTIVE" | "WARNING" | "ERROR") {
            anomalies.push(format!(
                "{label}: left {state} ({})",
                cluster["status_reason"].as_str().unwrap_or_default()
            ));
        }
        let nodes = self
            .all(
                &format!("/clustering/v1/nodes?cluster_id={cluster_id}"),
                "nodes",
            )
            .await?;
        let desired = cluster["desired_capacity"].as_i64().unwrap_or(-1);
        if desired != nodes.len() as i64 {
            anomalies.push(format!(
                "{label}: desired_capacity {desired} but {} node(s)",
                nodes.len()
            ));
        }
        let mut names = BTreeSet::new();
        let mut indices = BTreeSet::new();
        for node in &nodes {
            let name = node["name"].as_str().unwrap_or_default();
            if !names.insert(name.to_owned()) {
                anomalies.push(format!("{label}: node name {name} repeats"));
            }
            let index = node["index"].as_i64().unwrap_or(-1);
            if !indices.insert(index) {
                anomalies.push(format!("{label}: node index {index} repeats"));
            }
            let node_status = node["status"].as_str().unwrap_or_default();
            if !matches!(node_status, "ACTIVE" | "ERROR") {
                anomalies.push(format!("{label}: node {name} left {node_status}"));
            }
            if let Some(physical_id) = node["physical_id"].as_str() {
                physical.insert(physical_id.to_owned());
                let (found, instance) = self
                    .get(&format!("/compute/v1/instances/{physical_id}"))
                    .await?;
                if found != 200 {
                    anomalies.push(format!(
                        "{label}: node {name}'s instance {physical_id} is missing ({found})"
                    ));
                } else if node_status == "ACTIVE"
                    && instance["instance"]["status"].as_str() != Some("ACTIVE")
                {
                    anomalies.push(format!(
                        "{label}: node {name} is ACTIVE but its instance is {}",
                        instance["instance"]["status"]
                    ));
                }
            } else if node_status == "ACTIVE" {
                anomalies.push(format!(
                    "{label}: node {name} is ACTIVE without an instance"
                ));
            }
        }
        Ok(())
    }
}

fn is_final_action(action: &Value) -> bool {
    matches!(
        action["status"].as_str(),
        Some("SUCCEEDED" | "FAILED" | "CANCELLED")
    )
}

/// A stack's own states, oldest first: a final state is followed only by
/// the start of a requested operation (or the same state again, as events
/// that change nothing record it), and DELETE_COMPLETE by nothing.
pub fn stack_history_anomalies(name: &str, states: &[String]) -> Vec<String> {
    let mut anomalies = Vec::new();
    for pair in states.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        let final_before = before.ends_with("_COMPLETE") || before.ends_with("_FAILED");
        if before == "DELETE_COMPLETE" {
            anomalies.push(format!(
                "stack {name}: {after} recorded after DELETE_COMPLETE"
            ));
        } else if final_before && !after.ends_with("_IN_PROGRESS") && after != before {
            anomalies.push(format!(
                "stack {name}: went from {before} to {after} without an operation"
            ));
        }
    }
    anomalies
}

/// Unfinished actions, and nodes deleted more than once.
pub fn action_anomalies(label: &str, actions: &[Value], events: &[Value]) -> Vec<String> {
    let mut anomalies = Vec::new();
    let mut deletes: BTreeMap<&str, usize> = BTreeMap::new();
    for action in actions {
        if !is_final_action(action) {
            anomalies.push(format!(
                "{label}: action {} {} left {}",
                action["name"].as_str().unwrap_or_default(),
                action["action"].as_str().unwrap_or_default(),
                action["status"].as_str().unwrap_or_default()
            ));
        }
        // The NODE_DELETE that deleted: a leaf (a member's standalone
        // delete is a parent waiting on one child doing it).
        let leaf = action["depends_on"]
            .as_array()
            .is_none_or(|children| children.is_empty());
        if action["action"].as_str() == Some("NODE_DELETE")
            && action["status"].as_str() == Some("SUCCEEDED")
            && leaf
            && let Some(target) = action["target"].as_str()
        {
            *deletes.entry(target).or_default() += 1;
        }
    }
    for (node, count) in deletes {
        if count > 1 {
            anomalies.push(format!(
                "{label}: node {node} deleted by {count} NODE_DELETE actions"
            ));
        }
    }
    let mut deleted_events: BTreeMap<&str, usize> = BTreeMap::new();
    for event in events {
        if event["action"].as_str() == Some("NODE_DELETE")
            && event["obj_type"].as_str() == Some("NODE")
            && matches!(event["status"].as_str(), Some("DELETED" | "REMOVED"))
            && let Some(node) = event["obj_id"].as_str()
        {
            *deleted_events.entry(node).or_default() += 1;
        }
    }
    for (node, count) in deleted_events {
        if count > 1 {
            anomalies.push(format!(
                "{label}: node {node} has {count} NODE_DELETE events"
            ));
        }
    }
    anomalies
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn states(list: &[&str]) -> Vec<String> {
        list.iter().map(|state| (*state).to_owned()).collect()
    }

    #[test]
    fn a_finished_stack_overwritten_without_an_operation_is_an_anomaly() {
        // What the orphan sweep did before its decision was fenced.
        let found = stack_history_anomalies(
            "web",
            &states(&["DELETE_IN_PROGRESS", "DELETE_COMPLETE", "DELETE_FAILED"]),
        );
        assert_eq!(
            found,
            ["stack web: DELETE_FAILED recorded after DELETE_COMPLETE"]
        );
        let found = stack_history_anomalies(
            "web",
            &states(&["CREATE_IN_PROGRESS", "CREATE_COMPLETE", "CREATE_FAILED"]),
        );
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            stack_history_anomalies(
                "web",
                &states(&[
                    "CREATE_IN_PROGRESS",
                    "ROLLBACK_IN_PROGRESS",
                    "ROLLBACK_COMPLETE",
                    "ROLLBACK_COMPLETE",
                    "UPDATE_IN_PROGRESS",
                    "UPDATE_FAILED",
                    "DELETE_IN_PROGRESS",
                    "DELETE_COMPLETE",
                ]),
            )
            .is_empty()
        );
    }

    #[test]
    fn a_node_deleted_twice_is_an_anomaly() {
        let delete = |target: &str| json!({"name": "d", "action": "NODE_DELETE", "status": "SUCCEEDED", "target": target});
        let actions = [delete("n1"), delete("n1"), delete("n2")];
        let deleted = json!({"action": "NODE_DELETE", "obj_type": "NODE", "status": "DELETED", "obj_id": "n2"});
        let events = [deleted.clone(), deleted];
        let found = action_anomalies("cluster c", &actions, &events);
        assert_eq!(
            found,
            [
                "cluster c: node n1 deleted by 2 NODE_DELETE actions",
                "cluster c: node n2 has 2 NODE_DELETE events"
            ]
        );
        let running = [json!({"name": "s", "action": "CLUSTER_SCALE_IN", "status": "RUNNING"})];
        assert_eq!(
            action_anomalies("cluster c", &running, &[]),
            ["cluster c: action s CLUSTER_SCALE_IN left RUNNING"]
        );
    }
}
