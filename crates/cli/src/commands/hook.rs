//! `ember hook …`: pending scale-in lifecycle actions, the embedded queue's
//! messages, and completing or extending a lifecycle action by its token.

use ember_proto::engine::v1::cluster_service_client::ClusterServiceClient;
use ember_proto::engine::v1::{GetObjectRequest, LifecycleTokenRequest};
use ember_proto::lifecyclehook::v1 as pb;
use ember_proto::lifecyclehook::v1::lifecycle_hook_service_client::LifecycleHookServiceClient;

use super::cluster::{WaitArgs, wait_for_action};
use super::stack::format_time;
use crate::client::{Client, ConnectArgs, DevIdentity, describe, print_table};

#[derive(Debug, clap::Subcommand)]
pub enum HookCommand {
    /// Pending lifecycle actions with their delivery state
    List {
        /// Only this cluster's (name or id)
        #[arg(long)]
        cluster: Option<String>,
    },
    /// Messages of one of your project's queues on the embedded queue (no NATS configured), oldest first
    Messages {
        queue: String,
        /// Another project's queue (admins only)
        #[arg(long, default_value = "")]
        project: String,
        /// Only messages after this id
        #[arg(long, default_value_t = 0)]
        after: u64,
        /// At most this many
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// Complete a lifecycle action: its node is deleted now
    Complete {
        /// The cluster the token belongs to (name or id)
        cluster: String,
        /// The lifecycle_action_token of the message (not named `token`:
        /// that is the global --token flag)
        #[arg(value_name = "TOKEN")]
        lifecycle_action_token: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Extend a waiting lifecycle action's deadline by the hook timeout
    Heartbeat {
        /// The cluster the token belongs to (name or id)
        cluster: String,
        /// The lifecycle_action_token of the message (not named `token`:
        /// that is the global --token flag)
        #[arg(value_name = "TOKEN")]
        lifecycle_action_token: String,
    },
}

pub async fn run(command: HookCommand, connect: &ConnectArgs) -> Result<(), String> {
    match command {
        HookCommand::List { cluster } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            // lifecycle-hook knows clusters by id only; the engine resolves names.
            let cluster_id = match cluster {
                Some(cluster) => {
                    ClusterServiceClient::new(client.channel.clone())
                        .get_cluster(client.request(GetObjectRequest { id: cluster })?)
                        .await
                        .map_err(describe)?
                        .into_inner()
                        .id
                }
                None => String::new(),
            };
            let response = LifecycleHookServiceClient::new(client.channel.clone())
                .list_pending(client.request(pb::ListPendingRequest {
                    cluster_id,
                    limit: 0,
                    marker: String::new(),
                    include_resolved: false,
                })?)
                .await
                .map_err(describe)?
                .into_inner();
            let rows: Vec<Vec<String>> = response
                .actions
                .iter()
                .map(|action| {
                    let state = pb::DeliveryState::try_from(action.delivery_state)
                        .map(|state| {
                            state
                                .as_str_name()
                                .trim_start_matches("DELIVERY_STATE_")
                                .to_owned()
                        })
                        .unwrap_or_default();
                    vec![
                        action.token.clone(),
                        action.node_id.clone(),
                        action.cluster_id.clone(),
                        format_time(action.deadline.as_ref()),
                        state,
                        action.delivery_attempts.to_string(),
                        action.last_error.clone(),
                    ]
                })
                .collect();
            print_table(
                &[
                    "TOKEN",
                    "NODE",
                    "CLUSTER",
                    "DEADLINE",
                    "DELIVERY",
                    "ATTEMPTS",
                    "LAST ERROR",
                ],
                &rows,
            );
            Ok(())
        }
        HookCommand::Messages {
            queue,
            project,
            after,
            limit,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let response = LifecycleHookServiceClient::new(client.channel.clone())
                .list_queue_messages(client.request(pb::ListQueueMessagesRequest {
                    queue,
                    after_id: after,
                    limit,
                    project_id: project,
                })?)
                .await
                .map_err(describe)?
                .into_inner();
            let rows: Vec<Vec<String>> = response
                .messages
                .iter()
                .map(|message| {
                    vec![
                        message.id.to_string(),
                        message.token.clone(),
                        format_time(message.created_at.as_ref()),
                        message.body.clone(),
                    ]
                })
                .collect();
            print_table(&["ID", "TOKEN", "CREATED", "BODY"], &rows);
            Ok(())
        }
        HookCommand::Complete {
            cluster,
            lifecycle_action_token: token,
            wait,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let response = ClusterServiceClient::new(client.channel.clone())
                .complete_lifecycle(client.request(LifecycleTokenRequest {
                    cluster,
                    lifecycle_action_token: token.clone(),
                })?)
                .await
                .map_err(describe)?
                .into_inner();
            if wait.wait {
                wait_for_action(&client, &response.action_id, &wait).await?;
                println!("lifecycle action {token} completed: node deleted");
            } else {
                println!(
                    "lifecycle action {token} completed: deleting the node (action {})",
                    response.action_id
                );
            }
            Ok(())
        }
        HookCommand::Heartbeat {
            cluster,
            lifecycle_action_token: token,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let response = ClusterServiceClient::new(client.channel.clone())
                .record_lifecycle_heartbeat(client.request(LifecycleTokenRequest {
                    cluster,
                    lifecycle_action_token: token.clone(),
                })?)
                .await
                .map_err(describe)?
                .into_inner();
            println!(
                "lifecycle action {token}: deadline now {}",
                format_time(response.deadline.as_ref())
            );
            Ok(())
        }
    }
}
