//! The cluster changes the engine runs as actions (create, scale in and
//! out, resize, remove nodes, check, recover, attach and detach a policy):
//! each is one request to the gateway's `ClusterService`, answered with the
//! cluster and the action it started, and then printed the same way —
//! the accepted action and how to follow it, or with `--wait` the cluster as
//! the action left it.

use ember_proto::engine::v1 as pb;

use super::actions::wait_for_action;
use super::clusters::{get, service};
use super::display::cluster_record;
use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::commands::output::OutputArgs;
use crate::commands::wait::WaitArgs;
use crate::error::CliError;

/// One change to a cluster, as the request that starts it.
pub enum ClusterChange {
    Create(pb::CreateClusterRequest),
    ScaleIn(pb::ScaleRequest),
    ScaleOut(pb::ScaleRequest),
    Resize(pb::ResizeRequest),
    DelNodes(pb::NodesRequest),
    AttachPolicy(pb::AttachPolicyRequest),
    DetachPolicy(pb::DetachPolicyRequest),
    Check(pb::GetObjectRequest),
    Recover(pb::GetObjectRequest),
}

impl ClusterChange {
    async fn send(self, client: &Client) -> Result<pb::ClusterActionResponse, CliError> {
        let mut clusters = service(client);
        let response = match self {
            ClusterChange::Create(request) => {
                clusters.create_cluster(client.request(request)?).await
            }
            ClusterChange::ScaleIn(request) => clusters.scale_in(client.request(request)?).await,
            ClusterChange::ScaleOut(request) => clusters.scale_out(client.request(request)?).await,
            ClusterChange::Resize(request) => clusters.resize(client.request(request)?).await,
            ClusterChange::DelNodes(request) => clusters.del_nodes(client.request(request)?).await,
            ClusterChange::AttachPolicy(request) => {
                clusters.attach_policy(client.request(request)?).await
            }
            ClusterChange::DetachPolicy(request) => {
                clusters.detach_policy(client.request(request)?).await
            }
            ClusterChange::Check(request) => clusters.check(client.request(request)?).await,
            ClusterChange::Recover(request) => clusters.recover(client.request(request)?).await,
        };
        Ok(response?.into_inner())
    }
}

/// Starts the change and prints what it started (waiting for the action to
/// end if asked).
pub async fn start(
    change: ClusterChange,
    wait: &WaitArgs,
    connect: &ConnectArgs,
) -> Result<(), CliError> {
    let client = Client::connect(connect, DevIdentity::Member).await?;
    let response = change.send(&client).await?;
    let cluster = response
        .cluster
        .ok_or_else(|| CliError::Failed("the engine answered without the cluster".to_owned()))?;
    if !wait.wait {
        // The cluster as it was when the action was accepted would be
        // stale: say what runs and how to follow it instead.
        print_accepted(&cluster.name, &response.action_id);
        return Ok(());
    }
    let action = wait_for_action(&client, &response.action_id, wait).await;
    // Show the cluster as the action left it, then say how the action ended.
    let current = get(&client, &cluster.id).await.unwrap_or(cluster);
    print_changed(&current, &response.action_id)?;
    action.map(|_| ())
}

/// What a change without `--wait` prints: the action the engine accepted
/// and how to follow it.
pub fn print_accepted(cluster: &str, action_id: &str) {
    println!("cluster {cluster}: action {action_id} accepted");
    println!(
        "follow it with `ember cluster action show {action_id}` (or run the command with --wait)"
    );
}

/// A cluster a command changed, with the action it started.
pub fn print_changed(cluster: &pb::Cluster, action_id: &str) -> Result<(), CliError> {
    OutputArgs::default()
        .print_record(&cluster_record(cluster, &[], &[]).field("action", action_id))
}
