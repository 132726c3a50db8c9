//! `ember hook …`: pending scale-in lifecycle actions, the embedded queue's
//! messages, and completing or extending a lifecycle action by its token.

use ember_proto::engine::v1::cluster_service_client::ClusterServiceClient;
use ember_proto::engine::v1::{GetObjectRequest, LifecycleTokenRequest};
use ember_proto::lifecyclehook::v1 as pb;
use ember_proto::lifecyclehook::v1::lifecycle_hook_service_client::LifecycleHookServiceClient;

use super::cluster::{WaitArgs, wait_for_action};
use super::stack::format_time;
use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::commands::output::{Cell, OutputArgs, Record};
use crate::error::CliError;

#[derive(Debug, clap::Subcommand)]
pub enum HookCommand {
    /// Pending lifecycle actions with their delivery state
    List {
        /// Only this cluster's (name or id)
        #[arg(long)]
        cluster: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
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
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Complete a lifecycle action: its node is deleted now (or, with
    /// --result abandon, kept out of service)
    Complete {
        /// The cluster the token belongs to (name or id)
        cluster: String,
        /// The lifecycle_action_token of the message (not named `token`:
        /// that is the global --token flag)
        #[arg(value_name = "TOKEN")]
        lifecycle_action_token: String,
        /// continue: the node goes; abandon: it is kept, out of its cluster
        /// and out of service
        #[arg(long, value_parser = ["continue", "abandon"], default_value = "continue")]
        result: String,
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

/// A pending lifecycle action as `hook list` shows it.
fn pending_row(action: &pb::PendingLifecycleAction) -> Record {
    let delivery = pb::DeliveryState::try_from(action.delivery_state)
        .map(|state| {
            state
                .as_str_name()
                .trim_start_matches("DELIVERY_STATE_")
                .to_owned()
        })
        .unwrap_or_default();
    Record::new()
        .field("token", action.token.as_str())
        .field("node", action.node_id.as_str())
        .field("transition", action.lifecycle_transition_type.as_str())
        .field("cluster", action.cluster_id.as_str())
        .field("deadline", Cell::time(action.deadline.as_ref()))
        .field("delivery", delivery)
        .field("attempts", action.delivery_attempts)
        .field("last_error", action.last_error.as_str())
}

/// A queued message; its body (JSON text) is a JSON value in `-f json`.
fn message_row(message: &pb::QueueMessage) -> Record {
    let body = match serde_json::from_str::<serde_json::Value>(&message.body) {
        Ok(value) => Cell::shown_as(value, message.body.as_str()),
        Err(_) => Cell::from(message.body.as_str()),
    };
    Record::new()
        .field("id", message.id)
        .field("token", message.token.as_str())
        .field("created", Cell::time(message.created_at.as_ref()))
        .field("body", body)
}

pub async fn run(command: HookCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    match command {
        HookCommand::List { cluster, output } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            // lifecycle-hook knows clusters by id only; the engine resolves names.
            let cluster_id = match cluster {
                Some(cluster) => {
                    ClusterServiceClient::new(client.channel.clone())
                        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
                        .get_cluster(client.request(GetObjectRequest { id: cluster })?)
                        .await?
                        .into_inner()
                        .id
                }
                None => String::new(),
            };
            let response = LifecycleHookServiceClient::new(client.channel.clone())
                .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
                .list_pending(client.request(pb::ListPendingRequest {
                    cluster_id,
                    limit: 0,
                    marker: String::new(),
                    include_resolved: false,
                })?)
                .await?
                .into_inner();
            output.print_list(&response.actions, pending_row)
        }
        HookCommand::Messages {
            queue,
            project,
            after,
            limit,
            output,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let response = LifecycleHookServiceClient::new(client.channel.clone())
                .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
                .list_queue_messages(client.request(pb::ListQueueMessagesRequest {
                    queue,
                    after_id: after,
                    limit,
                    project_id: project,
                })?)
                .await?
                .into_inner();
            output.print_list(&response.messages, message_row)
        }
        HookCommand::Complete {
            cluster,
            lifecycle_action_token: token,
            result,
            wait,
        } => {
            let abandon = result == "abandon";
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let response = ClusterServiceClient::new(client.channel.clone())
                .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
                .complete_lifecycle(client.request(LifecycleTokenRequest {
                    cluster,
                    lifecycle_action_token: token.clone(),
                    lifecycle_action_result: result.to_ascii_uppercase(),
                })?)
                .await?
                .into_inner();
            match (wait.wait, abandon) {
                (true, false) => {
                    wait_for_action(&client, &response.action_id, &wait).await?;
                    println!("lifecycle action {token} completed: node deleted");
                }
                (true, true) => {
                    wait_for_action(&client, &response.action_id, &wait).await?;
                    println!(
                        "lifecycle action {token} abandoned: the node left its cluster and is kept out of service"
                    );
                }
                (false, _) => println!(
                    "lifecycle action {token} completed with {}: action {}",
                    result.to_ascii_uppercase(),
                    response.action_id
                ),
            }
            Ok(())
        }
        HookCommand::Heartbeat {
            cluster,
            lifecycle_action_token: token,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let response = ClusterServiceClient::new(client.channel.clone())
                .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
                .record_lifecycle_heartbeat(client.request(LifecycleTokenRequest {
                    cluster,
                    lifecycle_action_token: token.clone(),
                    ..LifecycleTokenRequest::default()
                })?)
                .await?
                .into_inner();
            println!(
                "lifecycle action {token}: deadline now {}",
                format_time(response.deadline.as_ref())
            );
            Ok(())
        }
    }
}
