//! `ember plugin …`: the lifecycle plugin registry (admin only).

use ember_proto::common::v1::StackOperation;
use ember_proto::pluginregistry::v1 as pb;
use ember_proto::pluginregistry::v1::plugin_registry_service_client::PluginRegistryServiceClient;

use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::commands::output::{Cell, OutputArgs, Record};
use crate::error::CliError;

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
        /// Observe mode: call the plugin and record its verdicts, never
        /// enforce them
        #[arg(long)]
        observe: bool,
        #[command(flatten)]
        breaker: BreakerArgs,
    },
    /// List plugins in calling order
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show one plugin: every setting, its filters included
    Show {
        name: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Change some of a plugin's settings; the others are kept
    Update {
        name: String,
        /// New gRPC URL
        #[arg(long)]
        endpoint: Option<String>,
        /// New calling order
        #[arg(long, allow_negative_numbers = true)]
        ordinal: Option<i32>,
        /// New operation filter (comma separated); "all" clears it
        #[arg(long, value_delimiter = ',')]
        operations: Option<Vec<String>>,
        /// New project filter (comma separated); "all" clears it
        #[arg(long = "projects", value_delimiter = ',')]
        project_ids: Option<Vec<String>>,
        #[arg(long, value_enum)]
        failure_mode: Option<FailureModeArg>,
        /// New per-call timeout in milliseconds
        #[arg(long)]
        timeout_ms: Option<u32>,
        /// Enable the plugin
        #[arg(long, conflicts_with = "disable")]
        enable: bool,
        /// Disable the plugin (it stays registered but is not called)
        #[arg(long)]
        disable: bool,
        /// Only observe: record the plugin's verdicts, never enforce them
        #[arg(long, conflicts_with = "enforce")]
        observe: bool,
        /// Enforce the plugin's verdicts again
        #[arg(long)]
        enforce: bool,
        #[command(flatten)]
        breaker: BreakerArgs,
        /// Close the plugin's circuit now and forget its failures
        #[arg(long)]
        close_circuit: bool,
    },
    /// Deregister a plugin: it is not called for any later operation
    Remove { name: String },
}

/// A plugin's circuit breaker.
#[derive(Debug, clap::Args)]
pub struct BreakerArgs {
    /// Consecutive failures (errors, timeouts) that open the plugin's
    /// circuit; 0 = no breaker [default: 5]
    #[arg(long)]
    breaker_failures: Option<u32>,
    /// How long an open circuit stays open before one call probes it, in
    /// milliseconds [default: 30000]
    #[arg(long)]
    breaker_cooldown_ms: Option<u32>,
}

/// `["all"]` (or nothing) clears a filter.
fn is_all(values: &[String]) -> bool {
    values.iter().all(|value| value.trim().is_empty())
        || (values.len() == 1 && values[0].trim().eq_ignore_ascii_case("all"))
}

fn failure_mode_to_proto(failure_mode: FailureModeArg) -> pb::FailureMode {
    match failure_mode {
        FailureModeArg::Fail => pb::FailureMode::Fail,
        FailureModeArg::Warn => pb::FailureMode::Warn,
    }
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

pub async fn run(command: PluginCommand, connect: &ConnectArgs) -> Result<(), CliError> {
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
            observe,
            breaker,
        } => {
            let operations = operations
                .iter()
                .map(|text| {
                    parse_operation(text)
                        .map(|operation| operation as i32)
                        .map_err(CliError::Usage)
                })
                .collect::<Result<Vec<_>, _>>()?;
            let client = Client::connect(connect, DevIdentity::Admin).await?;
            let plugin = PluginRegistryServiceClient::new(client.channel.clone())
                .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
                .register_plugin(client.request(pb::RegisterPluginRequest {
                    name,
                    endpoint,
                    ordinal,
                    operations,
                    project_ids,
                    failure_mode: failure_mode_to_proto(failure_mode) as i32,
                    timeout_ms: timeout_ms.unwrap_or(0),
                    disabled,
                    enforce: observe.then_some(false),
                    breaker_failures: breaker.breaker_failures,
                    breaker_cooldown_ms: breaker.breaker_cooldown_ms,
                })?)
                .await?
                .into_inner();
            OutputArgs::default().print_record(&plugin_record(&plugin))
        }
        PluginCommand::List { output } => {
            let client = Client::connect(connect, DevIdentity::Admin).await?;
            let response = PluginRegistryServiceClient::new(client.channel.clone())
                .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
                .list_plugins(client.request(pb::ListPluginsRequest {})?)
                .await?
                .into_inner();
            output.print_list(&response.plugins, plugin_record)
        }
        PluginCommand::Show { name, output } => {
            let client = Client::connect(connect, DevIdentity::Admin).await?;
            let plugin = PluginRegistryServiceClient::new(client.channel.clone())
                .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
                .get_plugin(client.request(pb::GetPluginRequest { name })?)
                .await?
                .into_inner();
            output.print_record(&plugin_record(&plugin))
        }
        PluginCommand::Update {
            name,
            endpoint,
            ordinal,
            operations,
            project_ids,
            failure_mode,
            timeout_ms,
            enable,
            disable,
            observe,
            enforce,
            breaker,
            close_circuit,
        } => {
            let operations = match operations {
                None => None,
                Some(values) if is_all(&values) => Some(pb::OperationFilter { values: vec![] }),
                Some(values) => Some(pb::OperationFilter {
                    values: values
                        .iter()
                        .map(|text| {
                            parse_operation(text)
                                .map(|operation| operation as i32)
                                .map_err(CliError::Usage)
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                }),
            };
            let project_ids = project_ids.map(|values| pb::ProjectFilter {
                values: if is_all(&values) { vec![] } else { values },
            });
            let nothing_to_change = endpoint.is_none()
                && ordinal.is_none()
                && operations.is_none()
                && project_ids.is_none()
                && failure_mode.is_none()
                && timeout_ms.is_none()
                && !enable
                && !disable
                && !observe
                && !enforce
                && breaker.breaker_failures.is_none()
                && breaker.breaker_cooldown_ms.is_none()
                && !close_circuit;
            if nothing_to_change {
                return Err(CliError::Usage(format!(
                    "nothing to update for plugin {name:?}: pass at least one of --endpoint, --ordinal, --operations, --projects, --failure-mode, --timeout-ms, --enable, --disable, --observe, --enforce, --breaker-failures, --breaker-cooldown-ms, --close-circuit"
                )));
            }
            let request = pb::UpdatePluginRequest {
                name,
                endpoint,
                ordinal,
                operations,
                project_ids,
                failure_mode: failure_mode.map(|mode| failure_mode_to_proto(mode) as i32),
                timeout_ms,
                enabled: match (enable, disable) {
                    (true, _) => Some(true),
                    (_, true) => Some(false),
                    _ => None,
                },
                enforce: match (enforce, observe) {
                    (true, _) => Some(true),
                    (_, true) => Some(false),
                    _ => None,
                },
                breaker_failures: breaker.breaker_failures,
                breaker_cooldown_ms: breaker.breaker_cooldown_ms,
                close_circuit,
            };
            let client = Client::connect(connect, DevIdentity::Admin).await?;
            let plugin = PluginRegistryServiceClient::new(client.channel.clone())
                .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
                .update_plugin(client.request(request)?)
                .await?
                .into_inner();
            OutputArgs::default().print_record(&plugin_record(&plugin))
        }
        PluginCommand::Remove { name } => {
            let client = Client::connect(connect, DevIdentity::Admin).await?;
            PluginRegistryServiceClient::new(client.channel.clone())
                .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
                .deregister_plugin(
                    client.request(pb::DeregisterPluginRequest { name: name.clone() })?,
                )
                .await?;
            println!("plugin {name:?} removed");
            Ok(())
        }
    }
}

/// A plugin's every field, the filters included (empty = all).
fn plugin_record(plugin: &pb::Plugin) -> Record {
    let operations: Vec<String> = plugin
        .operations
        .iter()
        .filter_map(|value| StackOperation::try_from(*value).ok())
        .map(|operation| {
            operation
                .as_str_name()
                .trim_start_matches("STACK_OPERATION_")
                .to_ascii_lowercase()
        })
        .collect();
    let all_if_empty = |values: &[String]| {
        if values.is_empty() {
            "all".to_owned()
        } else {
            values.join(",")
        }
    };
    let mode = pb::FailureMode::try_from(plugin.failure_mode)
        .map(|mode| {
            mode.as_str_name()
                .trim_start_matches("FAILURE_MODE_")
                .to_owned()
        })
        .unwrap_or_default();
    Record::new()
        .field("ordinal", plugin.ordinal)
        .field("name", plugin.name.as_str())
        .field("endpoint", plugin.endpoint.as_str())
        .field(
            "operations",
            Cell::shown_as(operations.clone(), all_if_empty(&operations)),
        )
        .field(
            "projects",
            Cell::shown_as(
                plugin.project_ids.clone(),
                all_if_empty(&plugin.project_ids),
            ),
        )
        .field("failure_mode", mode)
        .field(
            "timeout_ms",
            Cell::shown_as(plugin.timeout_ms, format!("{}ms", plugin.timeout_ms)),
        )
        .field(
            "enabled",
            Cell::shown_as(plugin.enabled, if plugin.enabled { "yes" } else { "no" }),
        )
        .field(
            "enforce",
            Cell::shown_as(
                plugin.enforce,
                if plugin.enforce {
                    "yes"
                } else {
                    "no (observe)"
                },
            ),
        )
        .field(
            "breaker",
            Cell::shown_as(
                serde_json::json!({
                    "failures": plugin.breaker_failures,
                    "cooldown_ms": plugin.breaker_cooldown_ms,
                }),
                if plugin.breaker_failures == 0 {
                    "off".to_owned()
                } else {
                    format!(
                        "{} failures, {}ms",
                        plugin.breaker_failures, plugin.breaker_cooldown_ms
                    )
                },
            ),
        )
        .field("circuit", circuit_cell(plugin.circuit.as_ref()))
        .field("created", Cell::time(plugin.created_at.as_ref()))
        .field("updated", Cell::time(plugin.updated_at.as_ref()))
}

/// The circuit as a word (`closed`, `open`, `half-open`) with the failures
/// and times behind it; in JSON, the whole record.
fn circuit_cell(circuit: Option<&pb::Circuit>) -> Cell {
    let Some(circuit) = circuit else {
        return Cell::shown_as(serde_json::Value::Null, "");
    };
    let state = pb::CircuitState::try_from(circuit.state)
        .unwrap_or_default()
        .as_str_name()
        .trim_start_matches("CIRCUIT_STATE_")
        .to_ascii_lowercase()
        .replace('_', "-");
    let time = |timestamp: Option<&prost_types::Timestamp>| super::stack::format_time(timestamp);
    let json_time = |timestamp: Option<&prost_types::Timestamp>| {
        Some(time(timestamp)).filter(|text| !text.is_empty())
    };
    let mut text = state.clone();
    if circuit.opened_at.is_some() {
        text.push_str(&format!(
            " since {} until {} ({} failures, last: {})",
            time(circuit.opened_at.as_ref()),
            time(circuit.open_until.as_ref()),
            circuit.consecutive_failures,
            circuit.last_failure
        ));
    } else if circuit.consecutive_failures > 0 {
        text.push_str(&format!(
            " ({} failures, last: {})",
            circuit.consecutive_failures, circuit.last_failure
        ));
    }
    Cell::shown_as(
        serde_json::json!({
            "state": state,
            "consecutive_failures": circuit.consecutive_failures,
            "opened_at": json_time(circuit.opened_at.as_ref()),
            "open_until": json_time(circuit.open_until.as_ref()),
            "last_failure": circuit.last_failure,
        }),
        text,
    )
}
