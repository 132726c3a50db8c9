//! `ember hook …`: pending scale-in lifecycle actions.

use ember_proto::lifecyclehook::v1 as pb;
use ember_proto::lifecyclehook::v1::lifecycle_hook_service_client::LifecycleHookServiceClient;

use super::stack::format_time;
use crate::client::{Client, ConnectArgs, DevIdentity, describe, print_table};

#[derive(Debug, clap::Subcommand)]
pub enum HookCommand {
    /// Pending lifecycle actions with their delivery state
    List {
        /// Only this cluster's
        #[arg(long)]
        cluster: Option<String>,
        #[command(flatten)]
        connect: ConnectArgs,
    },
}

pub async fn run(command: HookCommand) -> Result<(), String> {
    match command {
        HookCommand::List { cluster, connect } => {
            let client = Client::connect(&connect, DevIdentity::Member).await?;
            let response = LifecycleHookServiceClient::new(client.channel.clone())
                .list_pending(client.request(pb::ListPendingRequest {
                    cluster_id: cluster.unwrap_or_default(),
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
    }
}
