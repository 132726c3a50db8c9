//! The `ember-policy-plugin` binary: read the rules, listen, serve until
//! SIGINT/SIGTERM.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use ember_policy_plugin::{DEFAULT_LISTEN, Policy};
use ember_runtime::config::{LogConfig, LogFormat};
use tokio_util::sync::CancellationToken;

/// A lifecycle plugin for Ember that checks stack creates, updates and
/// adopts against rules from a TOML file (max_resources, required_properties,
/// allowed_types) and answers ALLOW, WARN or DENY.
#[derive(Debug, Parser)]
#[command(name = "ember-policy-plugin", version)]
struct Args {
    /// The rules file (TOML)
    #[arg(long, env = "EMBER_POLICY_RULES")]
    rules: PathBuf,
    /// Address to listen on [default: the file's `listen`, else 127.0.0.1:7070]
    #[arg(long, env = "EMBER_POLICY_LISTEN")]
    listen: Option<SocketAddr>,
    /// Log lines as JSON instead of text
    #[arg(long)]
    json_logs: bool,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    ember_runtime::telemetry::init(&LogConfig {
        format: if args.json_logs {
            LogFormat::Json
        } else {
            LogFormat::Text
        },
        ..LogConfig::default()
    });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let policy = Policy::load(&args.rules).map_err(|error| error.to_string())?;
    let listen = match (args.listen, policy.listen) {
        (Some(address), _) | (None, Some(address)) => address,
        (None, None) => DEFAULT_LISTEN
            .parse()
            .map_err(|_| format!("the default address {DEFAULT_LISTEN} does not parse"))?,
    };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|error| format!("cannot listen on {listen}: {error}"))?;
    tracing::info!(
        %listen,
        rules = %args.rules.display(),
        max_resources = policy.max_resources.len(),
        required_properties = policy.required_properties.len(),
        allowed_types = policy.allowed_types.as_ref().map_or(0, |types| types.len()),
        "ember-policy-plugin serving ember.plugin.v1.LifecyclePlugin"
    );
    let shutdown = CancellationToken::new();
    ember_runtime::shutdown::cancel_on_signal(shutdown.clone());
    ember_policy_plugin::serve(policy, listener, shutdown)
        .await
        .map_err(|error| error.to_string())
}
