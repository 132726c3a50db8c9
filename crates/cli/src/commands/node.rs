//! `ember node …`: cluster nodes (and orphan nodes) through the gateway's
//! NodeService: list and show with `-f`/`-c`; create, update (name, role,
//! taint) and delete. Deleting a member of a cluster applies the cluster's
//! deletion policy and its hooks, as `ember cluster del-nodes` does.

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::node_service_client::NodeServiceClient;

use super::cluster::{WaitArgs, wait_for_action};
use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::commands::output::{Cell, OutputArgs, Record};
use crate::error::CliError;

#[derive(Debug, clap::Subcommand)]
pub enum NodeCommand {
    /// Your project's nodes, or one cluster's
    List {
        /// Only this cluster's nodes (name or id)
        #[arg(long, default_value = "")]
        cluster: String,
        /// At most this many (0: the server's default, 100)
        #[arg(long, default_value_t = 0)]
        limit: u32,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Would OPERATION (update, delete, check, recover, operation) be
    /// accepted on a node now? Every blocker at once; exits non-zero when not
    Allowed { node: String, operation: String },
    /// One node by name or id
    Show {
        node: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Create a node of a profile, in a cluster or (without --cluster) an orphan
    Create {
        name: String,
        /// Profile name or id
        #[arg(long)]
        profile: String,
        /// The cluster it joins (name or id)
        #[arg(long, default_value = "")]
        cluster: String,
        #[arg(long, default_value = "")]
        role: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Rename a node, change its role, taint it (a tainted node is
    /// removed first on scale-in) or protect it (a protected node never is)
    Update {
        node: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        role: Option<String>,
        #[arg(long, value_name = "true|false")]
        tainted: Option<bool>,
        /// Protect the node from scale-in: never chosen for removal, and not
        /// deleted until unprotected
        #[arg(long, conflicts_with = "unprotect")]
        protect: bool,
        /// Clear the node's scale-in protection
        #[arg(long)]
        unprotect: bool,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Mark an ACTIVE node unhealthy (ERROR): its cluster's health policy
    /// recovers it as its budget allows
    MarkUnhealthy {
        node: String,
        /// Why
        #[arg(long, default_value = "")]
        reason: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete a node (a cluster member waits for the deletion policy's hooks)
    Delete {
        node: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

fn tainted_cell(tainted: bool) -> Cell {
    Cell::shown_as(tainted, if tainted { "yes" } else { "-" })
}

fn protected_cell(protected: bool) -> Cell {
    Cell::shown_as(protected, if protected { "yes" } else { "-" })
}

fn node_row(node: &pb::Node) -> Record {
    Record::new()
        .field("id", node.id.as_str())
        .field("name", node.name.as_str())
        .field("cluster", node.cluster_id.as_str())
        .field("index", node.index)
        .field("status", node.status.as_str())
        .field("physical_id", node.physical_id.as_str())
        .field("tainted", tainted_cell(node.tainted))
        .field("protected", protected_cell(node.protected))
}

fn node_record(node: &pb::Node) -> Record {
    Record::new()
        .field("id", node.id.as_str())
        .field("name", node.name.as_str())
        .field("cluster", node.cluster_id.as_str())
        .field("profile", node.profile_id.as_str())
        .field("index", node.index)
        .field("role", node.role.as_str())
        .field("status", node.status.as_str())
        .field("reason", node.status_reason.as_str())
        .field("physical_id", node.physical_id.as_str())
        .field("tainted", tainted_cell(node.tainted))
        .field("protected", protected_cell(node.protected))
        .field("project", node.project_id.as_str())
        .field("user", node.user_id.as_str())
        .field("created", Cell::time(node.created_at.as_ref()))
        .field("updated", Cell::time(node.updated_at.as_ref()))
}

pub async fn run(command: NodeCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    let client = Client::connect(connect, DevIdentity::Member).await?;
    let mut nodes = NodeServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES);
    match command {
        NodeCommand::List {
            cluster,
            limit,
            output,
        } => {
            let listed = nodes
                .list_nodes(client.request(pb::ListNodesRequest {
                    cluster,
                    limit,
                    marker: String::new(),
                    ..pb::ListNodesRequest::default()
                })?)
                .await?
                .into_inner();
            output.print_list(&listed.nodes, node_row)
        }
        NodeCommand::Allowed { node, operation } => {
            let answer = nodes
                .check_node_operation(client.request(pb::CheckNodeOperationRequest {
                    node: node.clone(),
                    operation: operation.clone(),
                })?)
                .await?
                .into_inner();
            crate::commands::print_allowed(
                &format!("node {node}"),
                &operation,
                &answer.blockers,
                answer.break_glass_would_pass,
            )
        }
        NodeCommand::Show { node, output } => {
            let found = nodes
                .get_node(client.request(pb::GetObjectRequest { id: node })?)
                .await?
                .into_inner();
            output.print_record(&node_record(&found))
        }
        NodeCommand::Create {
            name,
            profile,
            cluster,
            role,
            wait,
        } => {
            let response = nodes
                .create_node(client.request(pb::CreateNodeRequest {
                    name,
                    profile,
                    cluster,
                    role,
                    metadata: String::new(),
                })?)
                .await?
                .into_inner();
            follow(&client, response, &wait, "created", "").await
        }
        NodeCommand::Update {
            node,
            name,
            role,
            tainted,
            protect,
            unprotect,
            output,
        } => {
            let updated = nodes
                .update_node(client.request(pb::UpdateNodeRequest {
                    id: node,
                    name,
                    role,
                    tainted,
                    protected: match (protect, unprotect) {
                        (true, _) => Some(true),
                        (_, true) => Some(false),
                        _ => None,
                    },
                    ..Default::default()
                })?)
                .await?
                .into_inner();
            output.print_record(&node_record(&updated))
        }
        NodeCommand::MarkUnhealthy {
            node,
            reason,
            output,
        } => {
            let marked = nodes
                .mark_node_unhealthy(client.request(pb::MarkNodeUnhealthyRequest { node, reason })?)
                .await?
                .into_inner();
            output.print_record(&node_record(&marked))
        }
        NodeCommand::Delete { node, wait } => {
            let response = nodes
                .delete_node(client.request(pb::GetObjectRequest { id: node.clone() })?)
                .await?
                .into_inner();
            follow(&client, response, &wait, "deleted", &node).await
        }
    }
}

/// Without --wait, the accepted action and how to follow it; with it, the
/// action followed to its end (non-zero exit unless it SUCCEEDED).
async fn follow(
    client: &Client,
    response: pb::NodeActionResponse,
    wait: &WaitArgs,
    done: &str,
    named: &str,
) -> Result<(), CliError> {
    // The name the node has, else the one it was given as.
    let name = response
        .node
        .as_ref()
        .map(|node| node.name.as_str())
        .filter(|name| !name.is_empty())
        .unwrap_or(named);
    if !wait.wait {
        println!("node {name}: action {} accepted", response.action_id);
        println!(
            "follow it with `ember cluster action show {}` (or run the command with --wait)",
            response.action_id
        );
        return Ok(());
    }
    wait_for_action(client, &response.action_id, wait).await?;
    println!("node {name} {done}");
    Ok(())
}
