//! `ember cluster list|show|delete`: the clusters themselves, read and
//! deleted through the gateway's `ClusterService` (a deletion waits its own
//! way: at its end there is no cluster left to show).

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::cluster_service_client::ClusterServiceClient;
use ember_proto::engine::v1::node_service_client::NodeServiceClient;
use tonic::transport::Channel;

use super::actions::wait_for_action;
use super::changes::{print_accepted, print_changed};
use super::display::{cluster_row, print_cluster};
use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::commands::output::OutputArgs;
use crate::commands::wait::WaitArgs;
use crate::error::CliError;

pub fn service(client: &Client) -> ClusterServiceClient<Channel> {
    ClusterServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

pub async fn get(client: &Client, name_or_id: &str) -> Result<pb::Cluster, CliError> {
    Ok(service(client)
        .get_cluster(client.request(pb::GetObjectRequest {
            id: name_or_id.to_owned(),
        })?)
        .await?
        .into_inner())
}

pub async fn list(
    name: Option<String>,
    limit: u32,
    output: &OutputArgs,
    connect: &ConnectArgs,
) -> Result<(), CliError> {
    let client = Client::connect(connect, DevIdentity::Member).await?;
    let response = service(&client)
        .list_clusters(client.request(pb::ListObjectsRequest {
            limit,
            marker: String::new(),
            name: name.unwrap_or_default(),
            ..pb::ListObjectsRequest::default()
        })?)
        .await?
        .into_inner();
    output.print_list(&response.clusters, cluster_row)
}

/// Locks the cluster (or changes or renews its lock) and says how it is
/// locked now.
pub async fn lock(request: pb::LockClusterRequest, connect: &ConnectArgs) -> Result<(), CliError> {
    let client = Client::connect(connect, DevIdentity::Member).await?;
    let cluster = service(&client)
        .lock_cluster(client.request(request)?)
        .await?
        .into_inner();
    println!(
        "cluster {} locked ({})",
        cluster.name,
        super::display::lock_text(cluster.maintenance_lock.as_ref())
    );
    Ok(())
}

pub async fn unlock(cluster: &str, connect: &ConnectArgs) -> Result<(), CliError> {
    let client = Client::connect(connect, DevIdentity::Member).await?;
    let cluster = service(&client)
        .unlock_cluster(client.request(pb::GetObjectRequest {
            id: cluster.to_owned(),
        })?)
        .await?
        .into_inner();
    println!("cluster {} unlocked", cluster.name);
    Ok(())
}

/// One cluster with its nodes and the policies attached to it.
pub async fn show(
    cluster: &str,
    output: &OutputArgs,
    connect: &ConnectArgs,
) -> Result<(), CliError> {
    let client = Client::connect(connect, DevIdentity::Member).await?;
    let cluster = get(&client, cluster).await?;
    let nodes = NodeServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .list_nodes(client.request(pb::ListNodesRequest {
            cluster: cluster.id.clone(),
            limit: 1000,
            marker: String::new(),
            ..pb::ListNodesRequest::default()
        })?)
        .await?
        .into_inner()
        .nodes;
    let policies = service(&client)
        .list_cluster_policies(client.request(pb::GetObjectRequest {
            id: cluster.id.clone(),
        })?)
        .await?
        .into_inner()
        .policies;
    print_cluster(output, &cluster, &nodes, &policies)
}

pub async fn delete(cluster: &str, wait: &WaitArgs, connect: &ConnectArgs) -> Result<(), CliError> {
    let client = Client::connect(connect, DevIdentity::Member).await?;
    let response = service(&client)
        .delete_cluster(client.request(pb::GetObjectRequest {
            id: cluster.to_owned(),
        })?)
        .await?
        .into_inner();
    if !wait.wait {
        print_accepted(cluster, &response.action_id);
        return Ok(());
    }
    match wait_for_action(&client, &response.action_id, wait).await {
        Ok(_) => {
            println!("cluster {cluster} deleted");
            Ok(())
        }
        Err(failed) => {
            // Show what is left of it, then say how the action ended.
            if let Ok(current) = get(&client, cluster).await {
                print_changed(&current, &response.action_id)?;
            }
            Err(failed)
        }
    }
}
