//! The command line: `ember dev`, `ember serve`, `ember token`, and the
//! client commands that talk to a running Ember through its gateway.

mod admin;
mod audit;
mod cluster;
mod hook;
mod identity;
mod instance;
mod node;
mod output;
mod plugin;
pub(crate) mod plugin_bench;
mod policy;
mod probe;
mod profile;
mod quota;
mod receiver;
mod resource;
mod resource_type;
mod run;
mod stack;
mod token;
mod wait;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use ember_proto::engine::v1::WhoAmIRequest;
use ember_proto::engine::v1::identity_service_client::IdentityServiceClient;

use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::error::CliError;

/// Ember: an orchestration control plane — stacks from HOT templates,
/// clusters that scale, compute instances, with maintenance locks,
/// lifecycle plug-points and scale-in lifecycle hooks.
#[derive(Debug, Parser)]
#[command(name = "ember", version, propagate_version = true)]
pub struct Cli {
    /// Configuration file (TOML); defaults, then this file, then EMBER_*
    /// environment variables, then flags
    #[arg(
        long,
        env = "EMBER_CONFIG",
        global = true,
        help_heading = "Global options"
    )]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run all four services in one process on SQLite under --data-dir
    Dev(run::DevArgs),
    /// Run one service (one per container)
    Serve(run::ServeArgs),
    /// Mint signed tokens
    #[command(subcommand)]
    Token(token::TokenCommand),
    /// Show the identity your token carries
    Whoami,
    /// Stacks: create, watch, change, inspect and delete
    #[command(subcommand)]
    Stack(stack::StackCommand),
    /// One resource of a stack: mark it unhealthy, signal it
    #[command(subcommand)]
    Resource(resource::ResourceCommand),
    /// The resource types templates may use: list, show (schema)
    #[command(subcommand)]
    ResourceType(resource_type::ResourceTypeCommand),
    /// Compute instances: create, list, show, delete, power, lock, unlock
    #[command(subcommand)]
    Instance(instance::InstanceCommand),
    /// Clusters of nodes: profiles, policies, create, scale, resize
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
    /// Cluster nodes: list, show
    #[command(subcommand)]
    Node(node::NodeCommand),
    /// Cluster profiles: list, show, delete
    #[command(subcommand)]
    Profile(profile::ProfileCommand),
    /// Cluster policies: list, show, delete
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Cluster receivers (webhooks, message queues): list, show, create, update, delete
    #[command(subcommand)]
    Receiver(receiver::ReceiverCommand),
    /// Lifecycle plugins (admin)
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
    /// Scale-in lifecycle hooks
    #[command(subcommand)]
    Hook(hook::HookCommand),
    /// Project quotas: show, set (admin)
    #[command(subcommand)]
    Quota(quota::QuotaCommand),
    /// The built-in identity (admin): projects, users, role assignments
    #[command(subcommand)]
    Identity(identity::IdentityCommand),
    /// The audit trail of maintenance locks: who locked, unlocked, was refused or broke glass
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// Operators' maintenance (admin): purge old records
    #[command(subcommand)]
    Admin(admin::AdminCommand),
    /// Health probes for containers
    #[command(subcommand)]
    Probe(probe::ProbeCommand),
    /// Benchmarks that print figures
    #[command(subcommand)]
    Bench(crate::bench::BenchCommand),
}

pub async fn run(cli: Cli) -> Result<(), CliError> {
    let config_file = cli.config.as_deref();
    let connect = &cli.connect;
    // dev, serve and token take --data-dir as a configuration override.
    let data_dir = cli.connect.data_dir.clone();
    match cli.command {
        Command::Dev(args) => run::dev(config_file, data_dir, args).await,
        Command::Serve(args) => run::serve(config_file, data_dir, args).await,
        Command::Token(command) => token::run(config_file, data_dir, command),
        Command::Whoami => whoami(connect).await,
        Command::Stack(command) => stack::run(command, connect).await,
        Command::Resource(command) => resource::run(command, connect).await,
        Command::ResourceType(command) => resource_type::run(command, connect).await,
        Command::Instance(command) => instance::run(command, connect).await,
        Command::Cluster(command) => cluster::run(command, connect).await,
        Command::Node(command) => node::run(command, connect).await,
        Command::Profile(command) => profile::run(command, connect).await,
        Command::Policy(command) => policy::run(command, connect).await,
        Command::Receiver(command) => receiver::run(command, connect).await,
        Command::Plugin(command) => plugin::run(command, connect).await,
        Command::Hook(command) => hook::run(command, connect).await,
        Command::Quota(command) => quota::run(command, connect).await,
        Command::Audit(command) => audit::run(command, connect).await,
        Command::Identity(command) => identity::run(command, connect).await,
        Command::Admin(command) => admin::run(command, connect).await,
        Command::Probe(command) => probe::run(command).await,
        Command::Bench(command) => Ok(crate::bench::run(command).await?),
    }
}

/// Subcommands that delete, remove or replace things: a typo is never
/// answered with one of them as "a similar subcommand" (`cluster delet`
/// must not lead anyone to `del-nodes`).
const DESTRUCTIVE_SUBCOMMANDS: &[&str] = &[
    "abandon",
    "cancel-update",
    "complete",
    "del-nodes",
    "delete",
    "mark-unhealthy",
    "password",
    "power",
    "remove",
    "resize",
    "scale-in",
];

/// Prints a command-line error as clap does, minus a suggestion of a
/// destructive subcommand, and exits with clap's code.
pub fn exit_on_parse_error(error: clap::Error) -> ! {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let suggests_destructive = error.kind() == ErrorKind::InvalidSubcommand
        && match error.get(ContextKind::SuggestedSubcommand) {
            Some(ContextValue::String(suggested)) => {
                DESTRUCTIVE_SUBCOMMANDS.contains(&suggested.as_str())
            }
            Some(ContextValue::Strings(suggested)) => suggested
                .iter()
                .any(|name| DESTRUCTIVE_SUBCOMMANDS.contains(&name.as_str())),
            _ => false,
        };
    if !suggests_destructive {
        error.exit();
    }
    let rendered = error.render().to_string();
    let kept: Vec<&str> = rendered
        .lines()
        .filter(|line| !(line.contains("tip: ") && line.contains("similar subcommand")))
        .collect();
    eprintln!("{}", kept.join("\n").replace("\n\n\n", "\n\n"));
    std::process::exit(error.exit_code());
}

async fn whoami(connect: &ConnectArgs) -> Result<(), CliError> {
    let client = Client::connect(connect, DevIdentity::Member).await?;
    let identity = IdentityServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .who_am_i(client.request(WhoAmIRequest {})?)
        .await?
        .into_inner();
    println!(
        "user {}  project {}  roles {}",
        identity.user_id,
        identity.project_id,
        identity.roles.join(",")
    );
    Ok(())
}

/// A duration (`90`, `90s`, `30m`, `4h`, `2d`) in whole seconds, as lock
/// expiries take it.
/// Prints a dry run's answer — every blocker, the first being what the
/// operation would answer — and fails when it is not allowed, so scripts
/// can test the exit code (`ember cluster allowed db scale_out && …`).
pub fn print_allowed(
    what: &str,
    operation: &str,
    blockers: &[ember_proto::engine::v1::Blocker],
    break_glass_would_pass: bool,
) -> Result<(), CliError> {
    if blockers.is_empty() {
        println!("{operation}: allowed");
        return Ok(());
    }
    println!("{operation}: not allowed");
    for blocker in blockers {
        println!("  {} ({}): {}", blocker.kind, blocker.code, blocker.message);
    }
    if break_glass_would_pass {
        println!("  an admin's --break-glass REASON would run it (the lock stays)");
    }
    Err(CliError::Conflict(format!(
        "{operation} is not allowed on {what} now"
    )))
}

pub fn parse_seconds(text: &str) -> Result<i64, String> {
    token::parse_duration(text)
        .map(|duration| i64::try_from(duration.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Clap's own consistency checks over every command: a global flag that
    /// a subcommand defines again, a duplicate short flag, … fail here
    /// rather than when a user runs that command.
    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn connection_flags_parse_before_and_after_the_command() {
        for line in [
            &[
                "ember",
                "--url",
                "http://h:1",
                "--as",
                "admin",
                "stack",
                "list",
            ][..],
            &[
                "ember",
                "stack",
                "list",
                "--url",
                "http://h:1",
                "--as",
                "admin",
            ][..],
        ] {
            let cli = Cli::try_parse_from(line).expect("parses");
            assert_eq!(cli.connect.url.as_deref(), Some("http://h:1"), "{line:?}");
            assert_eq!(cli.connect.identity, Some(DevIdentity::Admin), "{line:?}");
        }
    }
}
