//! How `ember cluster` prints clusters, their nodes and policies: the
//! FIELD/VALUE table of `show` and the node table under it.

use ember_proto::engine::v1 as pb;

use super::super::stack::format_time;
use crate::client::print_table;

/// `-1` (unlimited) reads as `unlimited`.
fn max_size_name(max_size: i32) -> String {
    if max_size < 0 {
        "unlimited".to_owned()
    } else {
        max_size.to_string()
    }
}

/// The cluster as a FIELD/VALUE table; `action_id` is the action an
/// operation started, when there is one.
pub fn print_cluster(cluster: &pb::Cluster, action_id: Option<&str>) {
    let mut rows = vec![
        vec!["id".to_owned(), cluster.id.clone()],
        vec!["name".to_owned(), cluster.name.clone()],
        vec!["status".to_owned(), cluster.status.clone()],
        vec!["reason".to_owned(), cluster.status_reason.clone()],
        vec!["profile".to_owned(), cluster.profile_name.clone()],
        vec![
            "desired capacity".to_owned(),
            cluster.desired_capacity.to_string(),
        ],
        vec!["min size".to_owned(), cluster.min_size.to_string()],
        vec!["max size".to_owned(), max_size_name(cluster.max_size)],
        vec!["nodes".to_owned(), cluster.node_ids.len().to_string()],
        vec!["policies".to_owned(), cluster.policy_ids.join(", ")],
        vec!["metadata".to_owned(), cluster.metadata.clone()],
        vec!["project".to_owned(), cluster.project_id.clone()],
        vec![
            "created".to_owned(),
            format_time(cluster.created_at.as_ref()),
        ],
        vec![
            "updated".to_owned(),
            format_time(cluster.updated_at.as_ref()),
        ],
    ];
    if let Some(action_id) = action_id {
        rows.push(vec!["action".to_owned(), action_id.to_owned()]);
    }
    print_table(&["FIELD", "VALUE"], &rows);
}

pub fn print_clusters(clusters: &[pb::Cluster]) {
    let rows: Vec<Vec<String>> = clusters
        .iter()
        .map(|cluster| {
            vec![
                cluster.id.clone(),
                cluster.name.clone(),
                cluster.status.clone(),
                cluster.profile_name.clone(),
                cluster.desired_capacity.to_string(),
                cluster.node_ids.len().to_string(),
                cluster.min_size.to_string(),
                max_size_name(cluster.max_size),
                format_time(cluster.created_at.as_ref()),
            ]
        })
        .collect();
    print_table(
        &[
            "ID", "NAME", "STATUS", "PROFILE", "DESIRED", "NODES", "MIN", "MAX", "CREATED",
        ],
        &rows,
    );
}

pub fn print_nodes(nodes: &[pb::Node]) {
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|node| {
            vec![
                node.id.clone(),
                node.name.clone(),
                node.index.to_string(),
                node.status.clone(),
                node.physical_id.clone(),
                if node.tainted { "yes" } else { "-" }.to_owned(),
                node.status_reason.clone(),
            ]
        })
        .collect();
    print_table(
        &[
            "NODE",
            "NAME",
            "INDEX",
            "STATUS",
            "PHYSICAL ID",
            "TAINTED",
            "REASON",
        ],
        &rows,
    );
}

pub fn print_cluster_policies(policies: &[pb::ClusterPolicy]) {
    let rows: Vec<Vec<String>> = policies
        .iter()
        .map(|policy| {
            vec![
                policy.policy_name.clone(),
                policy.policy_type.clone(),
                policy.priority.to_string(),
                if policy.enabled { "yes" } else { "no" }.to_owned(),
            ]
        })
        .collect();
    print_table(&["POLICY", "TYPE", "PRIORITY", "ENABLED"], &rows);
}
