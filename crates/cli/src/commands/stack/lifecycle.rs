//! The commands that change stacks: create, update, delete, the actions
//! (suspend, resume, check, cancel-update), abandon and adopt, plus
//! validate. Each starts the operation and returns, or with `--wait` shows
//! its progress until it ends.

use std::path::PathBuf;

use ember_api_gateway::rest::orchestration::protobuf_json::{map_to_struct, struct_to_json};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::stack_service_client::StackServiceClient;
use serde_json::Value;

use super::template_files::{self, TemplateBundle};
use super::{WaitArgs, watch};
use crate::client::Client;
use crate::error::CliError;

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// Name of the new stack
    name: String,
    /// The HOT template, YAML or JSON
    #[arg(short = 't', long = "template", value_name = "FILE")]
    template: PathBuf,
    #[command(flatten)]
    inputs: InputArgs,
    /// Minutes the create may take before it fails
    #[arg(long, value_name = "MINUTES")]
    timeout: Option<u32>,
    /// Roll back (delete what was made) when the create fails
    #[arg(long)]
    enable_rollback: bool,
    /// A tag; repeat for several
    #[arg(long = "tag", value_name = "TAG")]
    tags: Vec<String>,
    #[command(flatten)]
    wait: WaitArgs,
}

/// Environments and parameters, as heat takes them.
#[derive(Debug, clap::Args)]
struct InputArgs {
    /// An environment file; repeat to merge several in order
    #[arg(short = 'e', long = "environment", value_name = "FILE")]
    environments: Vec<PathBuf>,
    /// A parameter value; repeat for several
    #[arg(short = 'P', long = "parameter", value_name = "KEY=VALUE")]
    parameters: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct UpdateArgs {
    /// Stack name or id
    stack: String,
    /// The new template (with --existing, optional: the current one is kept)
    #[arg(short = 't', long = "template", value_name = "FILE")]
    template: Option<PathBuf>,
    /// Start from the stack's current template, parameters and environment
    #[arg(long)]
    existing: bool,
    #[command(flatten)]
    inputs: InputArgs,
    /// With --existing: reset this parameter to its default; repeat for several
    #[arg(long = "clear-parameter", value_name = "KEY")]
    clear_parameters: Vec<String>,
    /// Minutes the update may take before it fails
    #[arg(long, value_name = "MINUTES")]
    timeout: Option<u32>,
    /// Replace the stack's tags; repeat for several
    #[arg(long = "tag", value_name = "TAG")]
    tags: Vec<String>,
    #[command(flatten)]
    wait: WaitArgs,
}

#[derive(Debug, clap::Args)]
pub struct AdoptArgs {
    /// Name of the new stack
    name: String,
    /// The JSON `ember stack abandon` printed
    #[arg(long, value_name = "FILE")]
    data: PathBuf,
    /// Minutes the adopt may take before it fails
    #[arg(long, value_name = "MINUTES")]
    timeout: Option<u32>,
    #[command(flatten)]
    wait: WaitArgs,
}

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// The HOT template, YAML or JSON
    #[arg(short = 't', long = "template", value_name = "FILE")]
    template: PathBuf,
    #[command(flatten)]
    inputs: InputArgs,
    /// Also describe the parameters of nested templates
    #[arg(long = "show-nested")]
    show_nested: bool,
}

fn stacks(client: &Client) -> StackServiceClient<tonic::transport::Channel> {
    StackServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

/// Prints that an operation started, or waits for it with progress.
async fn follow(
    client: &Client,
    stack: &pb::Stack,
    marker: String,
    wait: &WaitArgs,
) -> Result<(), CliError> {
    if !wait.wait {
        println!(
            "stack {} {}  (id {})",
            stack.name, stack.stack_status, stack.id
        );
        return Ok(());
    }
    let settled = watch::wait_until_settled(client, &stack.id, marker, wait.timeout()).await?;
    watch::conclude(&stack.name, settled)
}

pub async fn create(client: &Client, args: CreateArgs) -> Result<(), CliError> {
    let TemplateBundle {
        template,
        files,
        environment_files,
    } = template_files::load(Some(&args.template), &args.inputs.environments)?;
    let parameters = template_files::parse_parameters(&args.inputs.parameters)?;
    let request = pb::CreateStackRequest {
        stack_name: args.name,
        template,
        parameters: Some(map_to_struct(parameters)),
        files,
        environment_files,
        timeout_mins: args.timeout.unwrap_or(0),
        disable_rollback: Some(!args.enable_rollback),
        tags: args.tags,
        ..pb::CreateStackRequest::default()
    };
    let stack = stacks(client)
        .create_stack(client.request(request)?)
        .await?
        .into_inner();
    follow(client, &stack, String::new(), &args.wait).await
}

pub async fn update(client: &Client, args: UpdateArgs) -> Result<(), CliError> {
    if args.template.is_none() && !args.existing {
        return Err(CliError::Usage(
            "give the new template with -t, or --existing to keep the current one".to_owned(),
        ));
    }
    if !args.clear_parameters.is_empty() && !args.existing {
        return Err(CliError::Usage(
            "--clear-parameter needs --existing".to_owned(),
        ));
    }
    let bundle = template_files::load(args.template.as_deref(), &args.inputs.environments)?;
    let parameters = template_files::parse_parameters(&args.inputs.parameters)?;
    let marker = watch::latest_event_id(client, &args.stack).await?;
    let request = pb::UpdateStackRequest {
        stack: args.stack,
        template: bundle.template,
        parameters: Some(map_to_struct(parameters)),
        files: bundle.files,
        environment_files: bundle.environment_files,
        timeout_mins: args.timeout.unwrap_or(0),
        existing: args.existing,
        clear_parameters: args.clear_parameters,
        tags: args.tags,
        ..pb::UpdateStackRequest::default()
    };
    let stack = stacks(client)
        .update_stack(client.request(request)?)
        .await?
        .into_inner();
    follow(client, &stack, marker, &args.wait).await
}

/// `ember stack wait`: follows whatever operation is in progress, from the
/// next event on, to its end.
pub async fn wait(
    client: &Client,
    stack: String,
    timeout: std::time::Duration,
) -> Result<(), CliError> {
    let found = stacks(client)
        .get_stack(client.request(pb::GetStackRequest {
            stack: stack.clone(),
        })?)
        .await?
        .into_inner();
    let marker = watch::latest_event_id(client, &found.id).await?;
    let settled = watch::wait_until_settled(client, &found.id, marker, timeout).await?;
    watch::conclude(&found.name, settled)
}

pub async fn delete(client: &Client, stack: String, wait: &WaitArgs) -> Result<(), CliError> {
    let marker = watch::latest_event_id(client, &stack).await?;
    let deleting = stacks(client)
        .delete_stack(client.request(pb::GetStackRequest { stack })?)
        .await?
        .into_inner();
    if !wait.wait {
        println!("stack {} {}", deleting.name, deleting.stack_status);
        return Ok(());
    }
    let settled = watch::wait_until_settled(client, &deleting.id, marker, wait.timeout()).await?;
    match settled {
        Some(stack) if stack.stack_status == "DELETE_COMPLETE" => {
            watch::conclude(&deleting.name, None)
        }
        other => watch::conclude(&deleting.name, other),
    }
}

pub async fn action(
    client: &Client,
    stack: String,
    kind: pb::StackActionKind,
    wait: &WaitArgs,
) -> Result<(), CliError> {
    let marker = watch::latest_event_id(client, &stack).await?;
    let started = stacks(client)
        .run_stack_action(client.request(pb::StackActionRequest {
            stack,
            action: kind as i32,
        })?)
        .await?
        .into_inner();
    follow(client, &started, marker, wait).await
}

pub async fn lock(
    client: &Client,
    request: pb::LockStackRequest,
    wait: &WaitArgs,
) -> Result<(), CliError> {
    let marker = watch::latest_event_id(client, &request.stack).await?;
    let started = stacks(client)
        .lock_stack(client.request(request)?)
        .await?
        .into_inner();
    follow(client, &started, marker, wait).await
}

pub async fn unlock(client: &Client, stack: String, wait: &WaitArgs) -> Result<(), CliError> {
    let marker = watch::latest_event_id(client, &stack).await?;
    let started = stacks(client)
        .unlock_stack(client.request(pb::GetStackRequest { stack })?)
        .await?
        .into_inner();
    follow(client, &started, marker, wait).await
}

/// Says whether `operation` would be allowed on `stack` now, with the lock
/// that stops it. Not allowed is an error, so scripts can test the exit
/// code: `ember stack allowed web delete && ember stack delete web`.
pub async fn allowed(client: &Client, stack: String, operation: String) -> Result<(), CliError> {
    let answer = stacks(client)
        .check_operation(client.request(pb::CheckOperationRequest {
            stack: stack.clone(),
            operation: operation.clone(),
        })?)
        .await?
        .into_inner();
    let verdict = crate::commands::print_allowed(
        &format!("stack {stack}"),
        &operation,
        &answer.blockers,
        answer.break_glass_would_pass,
    );
    if let Some(lock) = answer.stack_lock {
        let reason = if lock.reason.is_empty() {
            String::new()
        } else {
            format!(": {}", lock.reason)
        };
        println!(
            "locked at level {} by {} {} at {}{reason}",
            lock.level,
            lock.locked_by_role,
            lock.locked_by_user,
            super::format_time(lock.locked_at.as_ref())
        );
    }
    verdict
}

pub async fn abandon(client: &Client, stack: String) -> Result<(), CliError> {
    let response = stacks(client)
        .abandon_stack(client.request(pb::GetStackRequest { stack })?)
        .await?
        .into_inner();
    let data = struct_to_json(response.data.as_ref());
    println!("{}", pretty(&data));
    Ok(())
}

pub async fn adopt(client: &Client, args: AdoptArgs) -> Result<(), CliError> {
    let text = std::fs::read_to_string(&args.data).map_err(|error| {
        CliError::Usage(format!("cannot read {}: {error}", args.data.display()))
    })?;
    let data: Value = serde_json::from_str(&text).map_err(|error| {
        CliError::Usage(format!("{} is not JSON: {error}", args.data.display()))
    })?;
    // As in heat, the adopted stack's template is the one in the data.
    let template = match data.get("template") {
        Some(Value::String(template)) => template.clone(),
        Some(template @ Value::Object(_)) => template.to_string(),
        _ => {
            return Err(CliError::Usage(format!(
                "{} has no template: pass what `ember stack abandon` printed",
                args.data.display()
            )));
        }
    };
    // The stack is rebuilt from what it was made of: parameters,
    // environment and files as abandoned.
    let parameters = match data.get("parameters") {
        Some(Value::Object(parameters)) => parameters.clone(),
        _ => serde_json::Map::new(),
    };
    let environment = match data.get("environment") {
        Some(Value::String(environment)) => environment.clone(),
        Some(environment @ Value::Object(_)) => environment.to_string(),
        _ => String::new(),
    };
    let files = match data.get("files") {
        Some(Value::Object(files)) => files
            .iter()
            .map(|(name, content)| {
                let content = match content {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                (name.clone(), content)
            })
            .collect(),
        _ => Default::default(),
    };
    let request = pb::CreateStackRequest {
        stack_name: args.name,
        template,
        parameters: Some(map_to_struct(parameters)),
        environment,
        files,
        timeout_mins: args.timeout.unwrap_or(0),
        adopt_stack_data: text,
        ..pb::CreateStackRequest::default()
    };
    let stack = stacks(client)
        .create_stack(client.request(request)?)
        .await?
        .into_inner();
    follow(client, &stack, String::new(), &args.wait).await
}

pub async fn validate(client: &Client, args: ValidateArgs) -> Result<(), CliError> {
    let bundle = template_files::load(Some(&args.template), &args.inputs.environments)?;
    let parameters = template_files::parse_parameters(&args.inputs.parameters)?;
    let response = stacks(client)
        .validate_template(client.request(pb::ValidateTemplateRequest {
            template: bundle.template,
            files: bundle.files,
            environment: String::new(),
            environment_files: bundle.environment_files,
            parameters: Some(map_to_struct(parameters)),
            show_nested: args.show_nested,
        })?)
        .await?
        .into_inner();
    let report = ember_api_gateway::rest::orchestration::validation_view(&response);
    println!("{}", pretty(&report));
    Ok(())
}

pub fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}
