//! `ember audit list`: the audit trail of maintenance locks — who locked,
//! unlocked, was refused, or broke glass, and which locks expired — on
//! stacks, clusters, nodes and instances; newest first. Under `ember dev`
//! it reads as the dev member (`--as admin --all-projects` for every
//! project's).

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::audit_service_client::AuditServiceClient;

use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::commands::output::{OutputArgs, Record};
use crate::error::CliError;

#[derive(Debug, clap::Subcommand)]
pub enum AuditCommand {
    /// Records, newest first: `ember audit list --target web --since 1h`
    List {
        /// A stack, cluster, node or instance: its name or id
        #[arg(long)]
        target: Option<String>,
        /// Only records about stacks, clusters, nodes or instances
        #[arg(long = "type", value_name = "TYPE", value_parser = ["stack", "cluster", "node", "instance"])]
        target_type: Option<String>,
        /// Only accepted, refused, expired, broke_glass or observed records
        #[arg(long, value_parser = ["accepted", "refused", "expired", "broke_glass", "observed"])]
        outcome: Option<String>,
        /// Records of the last DURATION (`90s`, `15m`, `2h`, `7d`) or since an RFC 3339 time
        #[arg(long)]
        since: Option<String>,
        /// Records up to an RFC 3339 time
        #[arg(long)]
        until: Option<String>,
        /// The most records to show (1-1000)
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// The records after this one (the last id of the previous page)
        #[arg(long)]
        marker: Option<String>,
        /// Every project's records (admins)
        #[arg(long)]
        all_projects: bool,
        #[command(flatten)]
        output: OutputArgs,
    },
}

/// `--since`: a duration back from now, or a time.
fn since(text: &str) -> Result<prost_types::Timestamp, CliError> {
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(ember_runtime::time::to_timestamp(at.to_utc()));
    }
    let seconds = super::parse_seconds(text)
        .map_err(|error| CliError::Usage(format!("--since {text:?}: {error}")))?;
    let back = chrono::Duration::try_seconds(seconds)
        .ok_or_else(|| CliError::Usage(format!("--since {text:?}: too long ago")))?;
    Ok(ember_runtime::time::to_timestamp(chrono::Utc::now() - back))
}

fn until(text: &str) -> Result<prost_types::Timestamp, CliError> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|at| ember_runtime::time::to_timestamp(at.to_utc()))
        .map_err(|error| {
            CliError::Usage(format!("--until {text:?}: not an RFC 3339 time ({error})"))
        })
}

fn record_row(record: &pb::AuditRecord) -> Record {
    let at = record
        .at
        .as_ref()
        .and_then(|at| chrono::DateTime::from_timestamp(at.seconds, 0))
        .map(|at| at.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    Record::new()
        .field("at", at)
        .field("user", record.user_id.as_str())
        .field(
            "target",
            format!("{} {}", record.target_type, record.target_name),
        )
        .field("operation", record.operation.as_str())
        .field("outcome", record.outcome.as_str())
        .field("reason", record.reason.as_str())
        .field("blocker", record.blocker.as_str())
        .field("project", record.project_id.as_str())
        .field("request_id", record.request_id.as_str())
        .field("id", record.id.as_str())
}

pub async fn run(command: AuditCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    match command {
        AuditCommand::List {
            target,
            target_type,
            outcome,
            since: since_text,
            until: until_text,
            limit,
            marker,
            all_projects,
            output,
        } => {
            let request = pb::ListAuditRecordsRequest {
                target_type: target_type.unwrap_or_default(),
                target: target.unwrap_or_default(),
                outcome: outcome.unwrap_or_default(),
                since: since_text.as_deref().map(since).transpose()?,
                until: until_text.as_deref().map(until).transpose()?,
                marker: marker.unwrap_or_default(),
                limit,
                all_projects,
            };
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let records = AuditServiceClient::new(client.channel.clone())
                .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
                .list_audit_records(client.request(request)?)
                .await?
                .into_inner()
                .records;
            output.print_list(&records, record_row)
        }
    }
}
