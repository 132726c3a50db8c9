//! `ember plugin …`: the lifecycle plugin registry (admin only).

use ember_proto::common::v1::StackOperation;
use ember_proto::pluginregistry::v1 as pb;
use ember_proto::pluginregistry::v1::plugin_registry_service_client::PluginRegistryServiceClient;

use crate::client::{Client, ConnectArgs, DevIdentity, describe, print_table};

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum FailureModeArg {
    Fail,
    Warn,
}

#[derive(Debug, clap::Subcommand)]
pub enum PluginCommand {
    /// Register a plugin (a gRPC server implementing ember.plugin.v1.LifecyclePlugin)
    Register {
        name: String,
        /// gRPC URL, e.g. http://10.0.0.5:7000
        #[arg(long)]
        endpoint: String,
        /// Calling order: lower first, ties by name
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        ordinal: i32,
        /// Operations to be called for (comma separated); default all
        #[arg(long, value_delimiter = ',')]
        operations: Vec<String>,
        /// Only stacks of these projects (comma separated); default all
        #[arg(long = "projects", value_delimiter = ',')]
        project_ids: Vec<String>,
        #[arg(long, value_enum, default_value = "fail")]
        failure_mode: FailureModeArg,
        /// Per-call timeout in milliseconds [default: 5000]
        #[arg(long)]
        timeout_ms: Option<u32>,
        /// Register without enabling
        #[arg(long)]
        disabled: bool,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// List plugins in calling order
    List {
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// Show one plugin
    Show {
        name: String,
        #[command(flatten)]
        connect: ConnectArgs,
    },
}

fn parse_operation(text: &str) -> Result<StackOperation, String> {
    let name = format!("STACK_OPERATION_{}", text.trim().to_ascii_uppercase());
    match StackOperation::from_str_name(&name) {
        Some(StackOperation::Unspecified) | None => Err(format!(
            "unknown operation {text:?}: use create, update, delete, abandon, adopt, check, suspend, resume, rollback, lock, unlock"
        )),
        Some(operation) => Ok(operation),
    }
}

pub async fn run(command: PluginCommand) -> Result<(), String> {
    match command {
        PluginCommand::Register {
            name,
            endpoint,
            ordinal,
            operations,
            project_ids,
            failure_mode,
            timeout_ms,
            disabled,
            connect,
        } => {
            let operations = operations
                .iter()
                .map(|text| parse_operation(text).map(|operation| operation as i32))
                .collect::<Result<Vec<_>, _>>()?;
            let client = Client::connect(&connect, DevIdentity::Admin).await?;
            let plugin = PluginRegistryServiceClient::new(client.channel.clone())
                .register_plugin(client.request(pb::RegisterPluginRequest {
                    name,
                    endpoint,
                    ordinal,
                    operations,
                    project_ids,
                    failure_mode: match failure_mode {
                        FailureModeArg::Fail => pb::FailureMode::Fail,
                        FailureModeArg::Warn => pb::FailureMode::Warn,
                    } as i32,
                    timeout_ms: timeout_ms.unwrap_or(0),
                    disabled,
                })?)
                .await
                .map_err(describe)?
                .into_inner();
            print_plugins(&[plugin]);
            Ok(())
        }
        PluginCommand::List { connect } => {
            let client = Client::connect(&connect, DevIdentity::Admin).await?;
            let response = PluginRegistryServiceClient::new(client.channel.clone())
                .list_plugins(client.request(pb::ListPluginsRequest {})?)
                .await
                .map_err(describe)?
                .into_inner();
            print_plugins(&response.plugins);
            Ok(())
        }
        PluginCommand::Show { name, connect } => {
            let client = Client::connect(&connect, DevIdentity::Admin).await?;
            let plugin = PluginRegistryServiceClient::new(client.channel.clone())
                .get_plugin(client.request(pb::GetPluginRequest { name })?)
                .await
                .map_err(describe)?
                .into_inner();
            print_plugins(&[plugin]);
            Ok(())
        }
    }
}

fn print_plugins(plugins: &[pb::Plugin]) {
    let rows: Vec<Vec<String>> = plugins
        .iter()
        .map(|plugin| {
            let operations = if plugin.operations.is_empty() {
                "all".to_owned()
            } else {
                plugin
                    .operations
                    .iter()
                    .filter_map(|value| StackOperation::try_from(*value).ok())
                    .map(|operation| {
                        operation
                            .as_str_name()
                            .trim_start_matches("STACK_OPERATION_")
                            .to_ascii_lowercase()
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let mode = pb::FailureMode::try_from(plugin.failure_mode)
                .map(|mode| {
                    mode.as_str_name()
                        .trim_start_matches("FAILURE_MODE_")
                        .to_owned()
                })
                .unwrap_or_default();
            vec![
                plugin.ordinal.to_string(),
                plugin.name.clone(),
                plugin.endpoint.clone(),
                operations,
                mode,
                format!("{}ms", plugin.timeout_ms),
                if plugin.enabled { "yes" } else { "no" }.to_owned(),
            ]
        })
        .collect();
    print_table(
        &[
            "ORDINAL",
            "NAME",
            "ENDPOINT",
            "OPERATIONS",
            "MODE",
            "TIMEOUT",
            "ENABLED",
        ],
        &rows,
    );
}
