//! `ember node list|show`: cluster nodes (and orphan nodes) through the
//! gateway's NodeService, each with `-f`/`-c`. Nodes are changed through
//! their cluster (`ember cluster scale-in|del-nodes`), whose deletion
//! policy and hooks apply.

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::node_service_client::NodeServiceClient;

use crate::client::{Client, ConnectArgs, DevIdentity, describe};
use crate::commands::output::{Cell, OutputArgs, Record};

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
    /// One node by name or id
    Show {
        node: String,
        #[command(flatten)]
        output: OutputArgs,
    },
}

fn tainted_cell(tainted: bool) -> Cell {
    Cell::shown_as(tainted, if tainted { "yes" } else { "-" })
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
        .field("project", node.project_id.as_str())
        .field("user", node.user_id.as_str())
        .field("created", Cell::time(node.created_at.as_ref()))
        .field("updated", Cell::time(node.updated_at.as_ref()))
}

pub async fn run(command: NodeCommand, connect: &ConnectArgs) -> Result<(), String> {
    let client = Client::connect(connect, DevIdentity::Member).await?;
    let mut nodes = NodeServiceClient::new(client.channel.clone());
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
                })?)
                .await
                .map_err(describe)?
                .into_inner();
            output.print_list(&listed.nodes, node_row)
        }
        NodeCommand::Show { node, output } => {
            let found = nodes
                .get_node(client.request(pb::GetObjectRequest { id: node })?)
                .await
                .map_err(describe)?
                .into_inner();
            output.print_record(&node_record(&found))
        }
    }
}
