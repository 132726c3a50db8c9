//! `ember cluster action list|show`, and the wait every `--wait` of a
//! cluster or node change goes through: poll the action the engine runs
//! until it ends, showing its progress, and fail unless it succeeded.

use std::time::{Duration, Instant};

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::action_service_client::ActionServiceClient;

use super::display::{action_record, action_row};
use super::progress::Progress;
use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::commands::output::OutputArgs;
use crate::commands::wait::WaitArgs;
use crate::error::CliError;

const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Action statuses after which nothing more happens.
const FINAL_ACTION_STATUSES: [&str; 3] = ["SUCCEEDED", "FAILED", "CANCELLED"];

#[derive(Debug, clap::Subcommand)]
pub enum ActionCommand {
    /// Your project's cluster actions, newest first
    List {
        /// Only this cluster's (name or id)
        #[arg(long)]
        cluster: Option<String>,
        /// Only actions in this status (READY, RUNNING, WAITING, SUCCEEDED, FAILED, …)
        #[arg(long)]
        status: Option<String>,
        /// At most this many
        #[arg(long, default_value_t = 100)]
        limit: u32,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// One action: what it does, its status and why
    Show {
        action: String,
        #[command(flatten)]
        output: OutputArgs,
    },
}

pub async fn run(command: ActionCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    let client = Client::connect(connect, DevIdentity::Member).await?;
    let mut actions = ActionServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES);
    match command {
        ActionCommand::List {
            cluster,
            status,
            limit,
            output,
        } => {
            let listed = actions
                .list_actions(client.request(pb::ListActionsRequest {
                    cluster: cluster.unwrap_or_default(),
                    status: status.unwrap_or_default().to_ascii_uppercase(),
                    limit,
                    marker: String::new(),
                    ..pb::ListActionsRequest::default()
                })?)
                .await?
                .into_inner()
                .actions;
            output.print_list(&listed, action_row)
        }
        ActionCommand::Show { action, output } => {
            let action = actions
                .get_action(client.request(pb::GetObjectRequest { id: action })?)
                .await?
                .into_inner();
            output.print_record(&action_record(&action))
        }
    }
}

/// Polls an action until it reaches a final status; an error unless it
/// SUCCEEDED.
pub async fn wait_for_action(
    client: &Client,
    action_id: &str,
    wait: &WaitArgs,
) -> Result<pb::Action, CliError> {
    let deadline = Instant::now() + wait.timeout();
    let mut actions = ActionServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES);
    let mut told_about_hooks = false;
    let mut progress = Progress::new();
    loop {
        let action = actions
            .get_action(client.request(pb::GetObjectRequest {
                id: action_id.to_owned(),
            })?)
            .await?
            .into_inner();
        progress.report(client, &action).await?;
        if FINAL_ACTION_STATUSES.contains(&action.status.as_str()) {
            if action.status == "SUCCEEDED" {
                return Ok(action);
            }
            return Err(CliError::Failed(format!(
                "action {} ({}) is {}: {}",
                action.id, action.action, action.status, action.status_reason
            )));
        }
        if !told_about_hooks && action.status == "WAITING" {
            told_about_hooks = tell_about_hooks(&action);
        }
        if Instant::now() >= deadline {
            return Err(CliError::TimedOut(format!(
                "action {} ({}) still {} after {} s: stopped waiting (it goes on)",
                action.id, action.action, action.status, wait.wait_timeout
            )));
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Tells the user (on stderr) which lifecycle hooks a waiting removal
/// waits for and how to complete them; true once told.
fn tell_about_hooks(action: &pb::Action) -> bool {
    let outputs: serde_json::Value = serde_json::from_str(&action.outputs).unwrap_or_default();
    let tokens: Vec<&str> = outputs["lifecycle_action_tokens"]
        .as_array()
        .map(|tokens| {
            tokens
                .iter()
                .filter_map(serde_json::Value::as_str)
                .collect()
        })
        .unwrap_or_default();
    if tokens.is_empty() {
        return false;
    }
    eprintln!(
        "waiting for the lifecycle hooks of {} node(s); the application completes each with \
         `ember hook complete {} TOKEN` (or its deadline passes):",
        tokens.len(),
        action.cluster_id
    );
    for token in tokens {
        eprintln!("  {token}");
    }
    true
}
