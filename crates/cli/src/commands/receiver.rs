//! `ember receiver list|show|create|update|delete`: Senlin's
//! receivers through the gateway's ReceiverService, with `-f`/`-c`. A
//! `webhook` receiver runs one cluster action when its URL is POSTed (no
//! token); a `message` receiver runs the actions posted to its queue.

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::receiver_service_client::ReceiverServiceClient;

use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::commands::output::{Cell, OutputArgs, Record};
use crate::error::CliError;

#[derive(Debug, clap::Subcommand)]
pub enum ReceiverCommand {
    /// Your project's receivers
    List {
        /// At most this many (0: the server's default, 100)
        #[arg(long, default_value_t = 0)]
        limit: u32,
        /// Only receivers of this type (webhook, message)
        #[arg(long = "type", default_value = "")]
        kind: String,
        /// Only receivers of this cluster (its id)
        #[arg(long, default_value = "")]
        cluster_id: String,
        /// Only receivers running this action (e.g. CLUSTER_SCALE_OUT)
        #[arg(long, default_value = "")]
        action: String,
        /// Senlin's sort: `key[:asc|desc],…` (name, type, action, cluster_id, created_at, user)
        #[arg(long, default_value = "")]
        sort: String,
        /// Every project's receivers (admins)
        #[arg(long)]
        global_project: bool,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// One receiver by id, name or short id, with its channel (a webhook's URL)
    Show {
        receiver: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Create a receiver: `ember receiver create grow --cluster web --action CLUSTER_SCALE_OUT`
    Create {
        name: String,
        /// webhook (needs --cluster and --action) or message
        #[arg(long = "type", default_value = "webhook")]
        kind: String,
        /// The cluster's name, id or short id
        #[arg(long, default_value = "")]
        cluster: String,
        /// The cluster action to run (CLUSTER_SCALE_OUT, CLUSTER_SCALE_IN, CLUSTER_RESIZE, …)
        #[arg(long, default_value = "")]
        action: String,
        /// The action's inputs, `KEY=VALUE` (repeat; values that read as JSON are JSON)
        #[arg(long = "param", value_name = "KEY=VALUE")]
        params: Vec<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Change a receiver's name, action or inputs
    Update {
        receiver: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        action: Option<String>,
        /// The action's inputs, replacing the old ones (repeat)
        #[arg(long = "param", value_name = "KEY=VALUE")]
        params: Vec<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete a receiver: its webhook URL stops working
    Delete { receiver: String },
}

fn receiver_row(receiver: &pb::Receiver) -> Record {
    Record::new()
        .field("id", receiver.id.as_str())
        .field("name", receiver.name.as_str())
        .field("type", receiver.r#type.as_str())
        .field("cluster_id", receiver.cluster_id.as_str())
        .field("action", receiver.action.as_str())
        .field("created", Cell::time(receiver.created_at.as_ref()))
}

fn receiver_record(receiver: &pb::Receiver) -> Record {
    Record::new()
        .field("id", receiver.id.as_str())
        .field("name", receiver.name.as_str())
        .field("type", receiver.r#type.as_str())
        .field("cluster_id", receiver.cluster_id.as_str())
        .field("action", receiver.action.as_str())
        .field("params", Cell::json_text(&receiver.params))
        .field("channel", Cell::json_text(&receiver.channel))
        .field("actor", Cell::json_text(&receiver.actor))
        .field("project", receiver.project_id.as_str())
        .field("user", receiver.user_id.as_str())
        .field("created", Cell::time(receiver.created_at.as_ref()))
        .field("updated", Cell::time(receiver.updated_at.as_ref()))
}

/// `KEY=VALUE` pairs as the JSON object text the service takes; a value
/// that reads as JSON (`2`, `true`, `[1]`) is that value, else a string.
fn params_json(pairs: &[String]) -> Result<String, CliError> {
    let mut params = serde_json::Map::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(CliError::Usage(format!(
                "--param {pair:?}: expected KEY=VALUE"
            )));
        };
        if key.trim().is_empty() {
            return Err(CliError::Usage(format!(
                "--param {pair:?}: the key is empty"
            )));
        }
        let value = serde_json::from_str(value)
            .unwrap_or_else(|_| serde_json::Value::String(value.to_owned()));
        params.insert(key.trim().to_owned(), value);
    }
    Ok(serde_json::Value::Object(params).to_string())
}

pub async fn run(command: ReceiverCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    let client = Client::connect(connect, DevIdentity::Member).await?;
    let mut receivers = ReceiverServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES);
    match command {
        ReceiverCommand::List {
            limit,
            kind,
            cluster_id,
            action,
            sort,
            global_project,
            output,
        } => {
            let listed = receivers
                .list_receivers(client.request(pb::ListReceiversRequest {
                    limit,
                    sort,
                    global_project,
                    r#type: kind,
                    cluster_id,
                    action,
                    ..pb::ListReceiversRequest::default()
                })?)
                .await?
                .into_inner();
            output.print_list(&listed.receivers, receiver_row)
        }
        ReceiverCommand::Show { receiver, output } => {
            let found = receivers
                .get_receiver(client.request(pb::GetReceiverRequest { id: receiver })?)
                .await?
                .into_inner();
            output.print_record(&receiver_record(&found))
        }
        ReceiverCommand::Create {
            name,
            kind,
            cluster,
            action,
            params,
            output,
        } => {
            let params = params_json(&params)?;
            let made = receivers
                .create_receiver(client.request(pb::CreateReceiverRequest {
                    name,
                    r#type: kind,
                    cluster,
                    action,
                    params,
                })?)
                .await?
                .into_inner();
            output.print_record(&receiver_record(&made))
        }
        ReceiverCommand::Update {
            receiver,
            name,
            action,
            params,
            output,
        } => {
            let params = if params.is_empty() {
                None
            } else {
                Some(params_json(&params)?)
            };
            let updated = receivers
                .update_receiver(client.request(pb::UpdateReceiverRequest {
                    id: receiver,
                    name,
                    action,
                    params,
                })?)
                .await?
                .into_inner();
            output.print_record(&receiver_record(&updated))
        }
        ReceiverCommand::Delete { receiver } => {
            receivers
                .delete_receiver(client.request(pb::GetReceiverRequest {
                    id: receiver.clone(),
                })?)
                .await?;
            println!("receiver {receiver} deleted: its URL no longer works");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_json_where_they_read_as_json_and_text_otherwise() {
        let text = params_json(&[
            "count=2".into(),
            "best_effort=true".into(),
            "note=hi".into(),
        ])
        .expect("params");
        let params: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(
            params,
            serde_json::json!({"count": 2, "best_effort": true, "note": "hi"})
        );
        assert!(params_json(&["no-equals".into()]).is_err());
        assert!(params_json(&["=1".into()]).is_err());
        assert_eq!(params_json(&[]).expect("empty"), "{}");
    }
}
