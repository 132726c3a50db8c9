//! `ember dev` and `ember serve`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::{self, FlagOverrides, ListenOverride};
use crate::dev::{self, DevCredentials, RunningEmber, ServiceName};
use crate::error::CliError;

#[derive(Debug, clap::Args)]
pub struct DevArgs {
    /// Gateway address (REST and gRPC) [default: 127.0.0.1:8004]
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// The compute driver: `simulated`, or `docker` (each instance a
    /// container on the engine at `engine.compute.docker_host`, default
    /// $DOCKER_HOST) [default: from configuration, else simulated]
    #[arg(long, value_parser = ["simulated", "docker"])]
    pub compute: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The service to run
    #[arg(value_enum)]
    pub service: ServiceName,
    /// Address to listen on [default: the service's from configuration]
    #[arg(long)]
    pub listen: Option<SocketAddr>,
}

pub async fn dev(
    config_file: Option<&Path>,
    data_dir: Option<PathBuf>,
    args: DevArgs,
) -> Result<(), CliError> {
    let flags = FlagOverrides {
        data_dir,
        gateway: args.listen.map(|listen| ListenOverride { listen }),
        engine: args.compute.map(|driver| config::EngineOverride {
            compute: config::ComputeOverride { driver },
        }),
    };
    let config = config::load(config_file, &flags).map_err(CliError::Usage)?;
    ember_runtime::telemetry::init(&config.log);
    let secrets = dev::dev_secrets(&config)?;
    let data_dir = config.data_dir.clone();
    let token_ttl = Duration::from_secs(config.auth.token_ttl_secs);
    let compute = match &config.engine.compute.resolve().driver {
        ember_engine::compute::DriverConfig::Docker(docker) => format!(
            "docker (containers on {}, network {:?})",
            docker.docker_host, docker.network
        ),
        ember_engine::compute::DriverConfig::Simulated(_) => "simulated".to_owned(),
        ember_engine::compute::DriverConfig::OpenStack => format!(
            "openstack (the cloud at {})",
            config.engine.openstack.auth_url
        ),
    };
    let running = RunningEmber::start(config.clone(), secrets).await?;
    ember_runtime::shutdown::cancel_on_signal(running.shutdown.clone());

    let credentials = DevCredentials::mint(running.gateway_addr, &running.secrets, token_ttl)?;
    credentials.write(&data_dir)?;
    let passwords = dev::seed_dev_identity(&config, &running.secrets, running.gateway_addr).await?;
    print_banner(
        &running,
        &credentials,
        &data_dir,
        &compute,
        config.gateway.console,
    );
    if let Some(passwords) = passwords {
        print_identity(&running, &passwords, &data_dir);
    }
    Ok(running.wait().await?)
}

fn print_banner(
    running: &RunningEmber,
    credentials: &DevCredentials,
    data_dir: &Path,
    compute: &str,
    console: bool,
) {
    let gateway = running.gateway_addr;
    println!(
        "Ember is running (embedded SQLite under {})",
        data_dir.display()
    );
    println!("  compute driver         {compute}");
    println!("  gateway (REST + gRPC)  http://{gateway}");
    if console {
        println!(
            "  web console            http://{gateway}/console/ (sign in with a password below, or a token)"
        );
    }
    println!(
        "  engine                 {} (internal)",
        running.engine_addr
    );
    println!(
        "  lifecycle-hook         {} (internal)",
        running.lifecycle_hook_addr
    );
    println!(
        "  plugin-registry        {} (internal)",
        running.plugin_registry_addr
    );
    println!();
    println!("admin token  (user admin, project demo, roles admin,member):");
    println!("  {}", credentials.admin.token);
    println!("member token (user demo, project demo, role member):");
    println!("  {}", credentials.member.token);
    println!();
    println!(
        "Both are saved in {}.",
        data_dir.join(dev::DEV_CREDENTIALS_FILE).display()
    );
    println!(
        "Try: curl -s -H \"X-Auth-Token: $TOKEN\" http://{gateway}/orchestration/v1/demo/stacks"
    );
    println!("     grpcurl -plaintext {gateway} list");
    println!("Stop with Ctrl-C.");
}

fn print_identity(running: &RunningEmber, passwords: &dev::DevPasswords, data_dir: &Path) {
    let gateway = running.gateway_addr;
    println!();
    println!("Keystone v3 at http://{gateway}/identity (domain Default, project demo):");
    println!("  user admin  password {}", passwords.admin);
    println!("  user demo   password {}", passwords.demo);
    let clouds = data_dir.join(dev::CLOUDS_FILE);
    println!(
        "  OS_CLIENT_CONFIG_FILE={} openstack --os-cloud ember stack list",
        clouds.display()
    );
}

pub async fn serve(
    config_file: Option<&Path>,
    data_dir: Option<PathBuf>,
    args: ServeArgs,
) -> Result<(), CliError> {
    let flags = FlagOverrides {
        data_dir,
        gateway: None,
        engine: None,
    };
    let config = config::load(config_file, &flags).map_err(CliError::Usage)?;
    ember_runtime::telemetry::init(&config.log);
    let secrets = config.required_secrets().map_err(CliError::Usage)?;
    let address = args.listen.unwrap_or(match args.service {
        ServiceName::ApiGateway => config.gateway.listen,
        ServiceName::Engine => config.engine.listen,
        ServiceName::LifecycleHook => config.lifecycle_hook.listen,
        ServiceName::PluginRegistry => config.plugin_registry.listen,
    });
    let listener = dev::bind(args.service.as_str(), address).await?;
    let shutdown = CancellationToken::new();
    ember_runtime::shutdown::cancel_on_signal(shutdown.clone());
    tracing::info!(service = args.service.as_str(), %address, "starting");
    dev::serve_one(args.service, &config, &secrets, listener, shutdown)
        .await
        .map_err(|error| CliError::Failed(format!("{}: {error}", args.service.as_str())))
}
