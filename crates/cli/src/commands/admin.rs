//! `ember admin purge --older-than AGE`: removes now what retention would
//! remove later (deleted stacks and instances, cluster history older than
//! AGE). Admins only; under `ember dev` it acts as the dev admin.
//! `ember admin backup --to DIR` and `ember admin restore --from DIR`: the
//! embedded deployment's databases and secrets (see `crate::backup`).

use std::time::Duration;

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::maintenance_service_client::MaintenanceServiceClient;

use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::commands::output::{OutputArgs, Record};
use crate::error::CliError;

#[derive(Debug, clap::Subcommand)]
pub enum AdminCommand {
    /// Purge what was deleted or ended more than AGE ago: stacks (with their resources, events, snapshots), instances, cluster actions and events
    Purge {
        /// How old: a number with s, m, h or d (`30d`, `12h`)
        #[arg(long, value_parser = parse_age)]
        older_than: Duration,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Copy the embedded deployment's databases and secrets (of --data-dir) into DIR, while it runs
    Backup {
        /// A new or empty directory
        #[arg(long, value_name = "DIR")]
        to: std::path::PathBuf,
    },
    /// Put a backup into --data-dir, which must hold no deployment yet; then start Ember on it
    Restore {
        /// A directory `ember admin backup` made
        #[arg(long, value_name = "DIR")]
        from: std::path::PathBuf,
    },
}

/// `30d`, `12h`, `15m`, `90s` (or a bare number of seconds).
fn parse_age(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().last() {
        Some((at, unit)) if unit.is_ascii_alphabetic() => (&text[..at], unit),
        _ => (text, 's'),
    };
    let seconds_per = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 24 * 3600,
        other => return Err(format!("unit {other:?}: use s, m, h or d (e.g. 30d)")),
    };
    let count: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: give a whole number with s, m, h or d (e.g. 30d)"))?;
    if count == 0 {
        return Err("the age must be more than 0".to_owned());
    }
    count
        .checked_mul(seconds_per)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is too long"))
}

pub async fn run(command: AdminCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    match command {
        AdminCommand::Backup { to } => {
            let data_dir = connect.dev_data_dir();
            let copied = crate::backup::backup(&data_dir, &to).await?;
            println!(
                "backed up {} into {}: {}; {} (they hold the deployment's secrets: keep them private)",
                data_dir.display(),
                to.display(),
                copied.databases.join(", "),
                copied.files.join(", ")
            );
            Ok(())
        }
        AdminCommand::Restore { from } => {
            let data_dir = connect.dev_data_dir();
            let copied = crate::backup::restore(&from, &data_dir)?;
            println!(
                "restored {} into {}: {}; {} — start Ember on it (ember dev --data-dir {})",
                from.display(),
                data_dir.display(),
                copied.databases.join(", "),
                copied.files.join(", "),
                data_dir.display()
            );
            Ok(())
        }
        AdminCommand::Purge { older_than, output } => {
            let client = Client::connect(connect, DevIdentity::Admin).await?;
            let mut maintenance = MaintenanceServiceClient::new(client.channel.clone())
                .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES);
            let purged = maintenance
                .purge(client.request(pb::PurgeRequest {
                    older_than_seconds: older_than.as_secs(),
                })?)
                .await?
                .into_inner();
            output.print_record(
                &Record::new()
                    .field("stacks", purged.stacks)
                    .field("instances", purged.instances)
                    .field("cluster_actions", purged.cluster_actions)
                    .field("cluster_events", purged.cluster_events),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_with_their_units_and_bad_ones_say_why() {
        assert_eq!(parse_age("30d"), Ok(Duration::from_secs(30 * 24 * 3600)));
        assert_eq!(parse_age("12h"), Ok(Duration::from_secs(12 * 3600)));
        assert_eq!(parse_age("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_age("90"), Ok(Duration::from_secs(90)));
        assert!(parse_age("0d").unwrap_err().contains("more than 0"));
        assert!(parse_age("3w").unwrap_err().contains("use s, m, h or d"));
        assert!(parse_age("d").unwrap_err().contains("whole number"));
        assert!(parse_age("-3d").unwrap_err().contains("whole number"));
    }
}
