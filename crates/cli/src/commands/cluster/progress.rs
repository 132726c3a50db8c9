//! What `ember cluster … --wait` shows while it waits, on stderr (stdout
//! stays the result, so `-f json` scripts are not disturbed): the action's
//! status as it changes, each node's transitions (created, changing state,
//! deleted), all with the time since the wait began.

use std::collections::BTreeMap;
use std::time::Instant;

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::node_service_client::NodeServiceClient;

use crate::client::Client;
use crate::error::CliError;

/// The most nodes one poll reads (the API's page limit).
const NODE_PAGE: u32 = 1000;

pub struct Progress {
    started: Instant,
    /// The action's status and reason last shown.
    action: Option<(String, String)>,
    /// Each node's name and status at the last poll, by node id; None
    /// until the first poll, which only takes the picture.
    nodes: Option<BTreeMap<String, (String, String)>>,
}

impl Progress {
    pub fn new() -> Progress {
        Progress {
            started: Instant::now(),
            action: None,
            nodes: None,
        }
    }

    fn say(&self, what: &str) {
        eprintln!("[{:>5.1} s] {what}", self.started.elapsed().as_secs_f64());
    }

    /// Shows what changed since the last poll.
    pub async fn report(&mut self, client: &Client, action: &pb::Action) -> Result<(), CliError> {
        let state = (action.status.clone(), action.status_reason.clone());
        if self.action.as_ref() != Some(&state) {
            let reason = if action.status_reason.is_empty() {
                String::new()
            } else {
                format!(": {}", action.status_reason)
            };
            self.say(&format!("{} {}{reason}", action.action, action.status));
            self.action = Some(state);
        }
        if action.cluster_id.is_empty() {
            return Ok(());
        }
        // Progress is what can be seen: once the cluster is gone (its own
        // delete), or its nodes cannot be read, the wait goes on without.
        let Ok(listed) = NodeServiceClient::new(client.channel.clone())
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
            .list_nodes(client.request(pb::ListNodesRequest {
                cluster: action.cluster_id.clone(),
                limit: NODE_PAGE,
                marker: String::new(),
                ..pb::ListNodesRequest::default()
            })?)
            .await
        else {
            return Ok(());
        };
        let now: BTreeMap<String, (String, String)> = listed
            .into_inner()
            .nodes
            .into_iter()
            .map(|node| (node.id, (node.name, node.status)))
            .collect();
        if let Some(before) = &self.nodes {
            for line in node_changes(before, &now) {
                self.say(&line);
            }
        }
        self.nodes = Some(now);
        Ok(())
    }
}

/// One line per node that appeared, changed status or went away.
fn node_changes(
    before: &BTreeMap<String, (String, String)>,
    now: &BTreeMap<String, (String, String)>,
) -> Vec<String> {
    let mut lines = Vec::new();
    for (id, (name, status)) in now {
        match before.get(id) {
            None => lines.push(format!("node {name}: {status}")),
            Some((_, was)) if was != status => {
                lines.push(format!("node {name}: {was} → {status}"));
            }
            Some(_) => {}
        }
    }
    for (id, (name, _)) in before {
        if !now.contains_key(id) {
            lines.push(format!("node {name}: deleted"));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(list: &[(&str, &str, &str)]) -> BTreeMap<String, (String, String)> {
        list.iter()
            .map(|(id, name, status)| {
                ((*id).to_owned(), ((*name).to_owned(), (*status).to_owned()))
            })
            .collect()
    }

    #[test]
    fn new_changed_and_gone_nodes_are_told() {
        let before = nodes(&[("1", "n-001", "ACTIVE"), ("2", "n-002", "ACTIVE")]);
        let now = nodes(&[("2", "n-002", "DELETING"), ("3", "n-003", "CREATING")]);
        assert_eq!(
            node_changes(&before, &now),
            [
                "node n-002: ACTIVE → DELETING",
                "node n-003: CREATING",
                "node n-001: deleted"
            ]
        );
        assert!(node_changes(&now, &now).is_empty());
    }
}
