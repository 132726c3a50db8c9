//! `ember stack …`: stacks through the gateway.

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::stack_service_client::StackServiceClient;

use crate::client::{Client, ConnectArgs, DevIdentity, describe, print_table};

#[derive(Debug, clap::Subcommand)]
pub enum StackCommand {
    /// List your project's stacks, newest first
    List {
        /// Include nested stacks
        #[arg(long)]
        nested: bool,
        /// At most this many
        #[arg(long, default_value_t = 100)]
        limit: u32,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// Show one stack by name or id
    Show {
        stack: String,
        #[command(flatten)]
        connect: ConnectArgs,
    },
}

pub async fn run(command: StackCommand) -> Result<(), String> {
    match command {
        StackCommand::List {
            nested,
            limit,
            connect,
        } => {
            let client = Client::connect(&connect, DevIdentity::Member).await?;
            let response = StackServiceClient::new(client.channel.clone())
                .list_stacks(client.request(pb::ListStacksRequest {
                    limit,
                    marker: String::new(),
                    name: String::new(),
                    show_nested: nested,
                })?)
                .await
                .map_err(describe)?
                .into_inner();
            let rows: Vec<Vec<String>> = response
                .stacks
                .iter()
                .map(|stack| {
                    vec![
                        stack.id.clone(),
                        stack.name.clone(),
                        stack.stack_status.clone(),
                        format_time(stack.created_at.as_ref()),
                    ]
                })
                .collect();
            print_table(&["ID", "NAME", "STATUS", "CREATED"], &rows);
            Ok(())
        }
        StackCommand::Show { stack, connect } => {
            let client = Client::connect(&connect, DevIdentity::Member).await?;
            let stack = StackServiceClient::new(client.channel.clone())
                .get_stack(client.request(pb::GetStackRequest { stack })?)
                .await
                .map_err(describe)?
                .into_inner();
            let rows = vec![
                vec!["id".to_owned(), stack.id.clone()],
                vec!["name".to_owned(), stack.name.clone()],
                vec!["status".to_owned(), stack.stack_status.clone()],
                vec!["reason".to_owned(), stack.status_reason.clone()],
                vec!["description".to_owned(), stack.description.clone()],
                vec!["parent".to_owned(), stack.parent_id.clone()],
                vec!["created".to_owned(), format_time(stack.created_at.as_ref())],
                vec!["updated".to_owned(), format_time(stack.updated_at.as_ref())],
            ];
            print_table(&["FIELD", "VALUE"], &rows);
            Ok(())
        }
    }
}

pub fn format_time(timestamp: Option<&prost_types::Timestamp>) -> String {
    timestamp
        .and_then(|time| chrono::DateTime::from_timestamp(time.seconds, 0))
        .map(|time| time.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}
