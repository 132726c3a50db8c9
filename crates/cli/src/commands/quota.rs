//! `ember quota …`: a project's quotas and what it uses; setting them
//! (admins). Under `ember dev`, `show` acts as the dev member and `set` as
//! the dev admin.

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::quota_service_client::QuotaServiceClient;

use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::commands::output::{Cell, OutputArgs, Record};
use crate::error::CliError;

#[derive(Debug, clap::Subcommand)]
pub enum QuotaCommand {
    /// A project's limits and what it uses now (yours; any project for an admin)
    Show {
        /// Another project (admins only)
        #[arg(long, default_value = "")]
        project: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Set limits of a project (admins only): `ember quota set demo --limit stacks=10 --limit nodes=500`
    Set {
        /// The project
        project: String,
        /// NAME=LIMIT, repeatable: stacks, resources_per_stack, nested_depth, clusters, nodes_per_cluster, nodes, instances, concurrent_operations, software_configs, software_deployments, snapshots_per_stack
        #[arg(long = "limit", value_name = "NAME=LIMIT")]
        limits: Vec<String>,
        /// Return a limit to the configured default (repeatable)
        #[arg(long, value_name = "NAME")]
        reset: Vec<String>,
    },
}

fn parse_limit(text: &str) -> Result<(String, i64), String> {
    let (name, limit) = text
        .split_once('=')
        .ok_or_else(|| format!("--limit {text:?}: write NAME=LIMIT, e.g. stacks=10"))?;
    let limit = limit
        .trim()
        .parse::<i64>()
        .map_err(|_| format!("--limit {text:?}: {limit:?} is not a whole number"))?;
    Ok((name.trim().to_owned(), limit))
}

/// One limit as `quota show` lists it; `used` is null (`-`) for limits
/// counted per object.
fn limit_row(limit: &pb::QuotaLimit) -> Record {
    Record::new()
        .field("quota", limit.name.as_str())
        .field("limit", limit.limit)
        .field(
            "used",
            match limit.used {
                Some(used) => Cell::from(used),
                None => Cell::shown_as(serde_json::Value::Null, "-"),
            },
        )
        .field(
            "source",
            if limit.overridden {
                "set for the project"
            } else {
                "default"
            },
        )
}

/// The project's name above the table; `-f`/`-c` print the rows only.
fn print_quota(quota: &pb::ProjectQuota, output: &OutputArgs) -> Result<(), CliError> {
    if output.is_whole_table() {
        println!("project {}", quota.project_id);
    }
    output.print_list(&quota.limits, limit_row)
}

pub async fn run(command: QuotaCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    match command {
        QuotaCommand::Show { project, output } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let quota = QuotaServiceClient::new(client.channel.clone())
                .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
                .get_quota(client.request(pb::GetQuotaRequest {
                    project_id: project,
                })?)
                .await?
                .into_inner();
            print_quota(&quota, &output)
        }
        QuotaCommand::Set {
            project,
            limits,
            reset,
        } => {
            let limits = limits
                .iter()
                .map(|text| parse_limit(text).map_err(CliError::Usage))
                .collect::<Result<_, _>>()?;
            let client = Client::connect(connect, DevIdentity::Admin).await?;
            let quota = QuotaServiceClient::new(client.channel.clone())
                .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
                .set_quota(client.request(pb::SetQuotaRequest {
                    project_id: project,
                    limits,
                    reset,
                })?)
                .await?
                .into_inner();
            print_quota(&quota, &OutputArgs::default())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_name_equals_number() {
        assert_eq!(parse_limit("stacks=10"), Ok(("stacks".into(), 10)));
        assert!(parse_limit("stacks").unwrap_err().contains("NAME=LIMIT"));
        assert!(
            parse_limit("stacks=ten")
                .unwrap_err()
                .contains("not a whole number")
        );
    }
}
