//! The command line: `ember dev`, `ember serve`, `ember token`, and the
//! client commands that talk to a running Ember through its gateway.

mod cluster;
mod hook;
mod identity;
mod instance;
mod plugin;
pub(crate) mod plugin_bench;
mod probe;
mod quota;
mod resource;
mod run;
mod stack;
mod token;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use ember_proto::engine::v1::WhoAmIRequest;
use ember_proto::engine::v1::identity_service_client::IdentityServiceClient;

use crate::client::{Client, ConnectArgs, DevIdentity, describe};

/// Ember: an orchestration control plane — stacks from HOT templates,
/// clusters that scale, compute instances, with maintenance locks,
/// lifecycle plug-points and scale-in lifecycle hooks.
#[derive(Debug, Parser)]
#[command(name = "ember", version, propagate_version = true)]
pub struct Cli {
    /// Configuration file (TOML); defaults, then this file, then EMBER_*
    /// environment variables, then flags
    #[arg(long, env = "EMBER_CONFIG", global = true)]
    pub config: Option<PathBuf>,
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
    Whoami {
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// Stacks: create, watch, change, inspect and delete
    #[command(subcommand)]
    Stack(stack::StackCommand),
    /// One resource of a stack: mark it unhealthy, signal it
    #[command(subcommand)]
    Resource(resource::ResourceCommand),
    /// Compute instances: create, list, show, delete, power, lock, unlock
    #[command(subcommand)]
    Instance(instance::InstanceCommand),
    /// Clusters of nodes: profiles, policies, create, scale, resize
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
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
    /// Health probes for containers
    #[command(subcommand)]
    Probe(probe::ProbeCommand),
    /// Benchmarks that print figures
    #[command(subcommand)]
    Bench(crate::bench::BenchCommand),
}

pub async fn run(cli: Cli) -> Result<(), String> {
    let config_file = cli.config.as_deref();
    match cli.command {
        Command::Dev(args) => run::dev(config_file, args).await,
        Command::Serve(args) => run::serve(config_file, args).await,
        Command::Token(command) => token::run(config_file, command),
        Command::Whoami { connect } => whoami(&connect).await,
        Command::Stack(command) => stack::run(command).await,
        Command::Resource(command) => resource::run(command).await,
        Command::Instance(command) => instance::run(command).await,
        Command::Cluster(command) => cluster::run(command).await,
        Command::Plugin(command) => plugin::run(command).await,
        Command::Hook(command) => hook::run(command).await,
        Command::Quota(command) => quota::run(command).await,
        Command::Identity(command) => identity::run(command).await,
        Command::Probe(command) => probe::run(command).await,
        Command::Bench(command) => crate::bench::run(command).await,
    }
}

async fn whoami(connect: &ConnectArgs) -> Result<(), String> {
    let client = Client::connect(connect, DevIdentity::Member).await?;
    let identity = IdentityServiceClient::new(client.channel.clone())
        .who_am_i(client.request(WhoAmIRequest {})?)
        .await
        .map_err(describe)?
        .into_inner();
    println!(
        "user {}  project {}  roles {}",
        identity.user_id,
        identity.project_id,
        identity.roles.join(",")
    );
    Ok(())
}
