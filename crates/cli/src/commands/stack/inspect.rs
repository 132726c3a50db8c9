//! The commands that read stacks: list, show, resources, events, outputs
//! and template.

use ember_api_gateway::rest::orchestration::protobuf_json::{
    optional_value_to_json, struct_to_json,
};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::event_service_client::EventServiceClient;
use ember_proto::engine::v1::resource_service_client::ResourceServiceClient;
use ember_proto::engine::v1::stack_service_client::StackServiceClient;
use serde_json::{Value, json};

use super::lifecycle::pretty;
use super::{format_time, watch};
use crate::client::Client;
use crate::commands::output::{Cell, OutputArgs, Record};
use crate::error::CliError;

fn stacks(client: &Client) -> StackServiceClient<tonic::transport::Channel> {
    StackServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

/// A JSON value on one line; strings without quotes.
fn inline(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A stack as `stack list` shows it.
fn stack_row(stack: &pb::Stack) -> Record {
    Record::new()
        .field("id", stack.id.as_str())
        .field("name", stack.name.as_str())
        .field("status", stack.stack_status.as_str())
        .field("created", Cell::time(stack.created_at.as_ref()))
}

pub async fn list(
    client: &Client,
    nested: bool,
    limit: u32,
    output: &OutputArgs,
) -> Result<(), CliError> {
    let response = stacks(client)
        .list_stacks(client.request(pb::ListStacksRequest {
            limit,
            marker: String::new(),
            name: String::new(),
            show_nested: nested,
            locked: None,
        })?)
        .await?
        .into_inner();
    output.print_list(&response.stacks, stack_row)
}

/// The maintenance lock: who, with which role, when, how far and why.
fn lock_cell(lock: Option<&pb::StackLock>) -> Cell {
    let Some(lock) = lock else {
        return Cell::from(Value::Null);
    };
    let locked_at = format_time(lock.locked_at.as_ref());
    let reason = if lock.reason.is_empty() {
        String::new()
    } else {
        format!(": {}", lock.reason)
    };
    let expires_at = lock.expires_at.as_ref().map(|at| format_time(Some(at)));
    let until = expires_at
        .as_ref()
        .map(|at| format!(" until {at}"))
        .unwrap_or_default();
    Cell::shown_as(
        json!({
            "level": lock.level,
            "locked_by_user": lock.locked_by_user,
            "locked_by_role": lock.locked_by_role,
            "locked_at": locked_at,
            "reason": lock.reason,
            "expires_at": expires_at,
        }),
        format!(
            "level {} by {} {} at {locked_at}{until}{reason}",
            lock.level, lock.locked_by_role, lock.locked_by_user
        ),
    )
}

/// A stack as `stack show` shows it: parameters and outputs as mappings.
fn stack_record(stack: &pb::Stack) -> Record {
    let mut outputs = serde_json::Map::new();
    let mut output_lines = Vec::new();
    for output in &stack.outputs {
        let value = optional_value_to_json(output.output_value.as_ref());
        let text = if output.output_error.is_empty() {
            inline(&value)
        } else {
            format!("(error: {})", output.output_error)
        };
        output_lines.push(format!("{}={text}", output.output_key));
        outputs.insert(
            output.output_key.clone(),
            if output.output_error.is_empty() {
                value
            } else {
                json!({"error": output.output_error})
            },
        );
    }
    Record::new()
        .field("id", stack.id.as_str())
        .field("name", stack.name.as_str())
        .field("status", stack.stack_status.as_str())
        .field("reason", stack.status_reason.as_str())
        .field("description", stack.description.as_str())
        .field("parent", stack.parent_id.as_str())
        .field(
            "tags",
            Cell::shown_as(stack.tags.clone(), stack.tags.join(",")),
        )
        .field(
            "timeout",
            if stack.timeout_mins == 0 {
                Cell::from(Value::Null)
            } else {
                Cell::shown_as(stack.timeout_mins, format!("{} min", stack.timeout_mins))
            },
        )
        .field("rollback", !stack.disable_rollback)
        .field("lock", lock_cell(stack.stack_lock.as_ref()))
        .field("created", Cell::time(stack.created_at.as_ref()))
        .field("updated", Cell::time(stack.updated_at.as_ref()))
        .field("parameters", Cell::object(stack.parameters.as_ref()))
        .field(
            "outputs",
            Cell::shown_as(Value::Object(outputs), output_lines.join("\n")),
        )
}

pub async fn show(client: &Client, stack: String, output: &OutputArgs) -> Result<(), CliError> {
    let stack = stacks(client)
        .get_stack(client.request(pb::GetStackRequest { stack })?)
        .await?
        .into_inner();
    output.print_record(&stack_record(&stack))
}

pub async fn resources(
    client: &Client,
    stack: String,
    nested_depth: u32,
    output: &OutputArgs,
) -> Result<(), CliError> {
    let response = ResourceServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .list_resources(client.request(pb::ListResourcesRequest {
            stack,
            nested_depth,
            ..pb::ListResourcesRequest::default()
        })?)
        .await?
        .into_inner();
    output.print_list(&response.resources, resource_row)
}

/// A resource as `stack resources` lists it.
fn resource_row(resource: &pb::Resource) -> Record {
    Record::new()
        .field("name", resource.resource_name.as_str())
        .field("type", resource.resource_type.as_str())
        .field("status", resource.resource_status.as_str())
        .field("physical_id", resource.physical_resource_id.as_str())
        .field("stack", resource.stack_name.as_str())
        .field(
            "updated",
            Cell::time(
                resource
                    .updated_at
                    .as_ref()
                    .or(resource.created_at.as_ref()),
            ),
        )
}

pub async fn events(
    client: &Client,
    stack: String,
    resource: Option<String>,
    nested_depth: u32,
    limit: u32,
    output: &OutputArgs,
) -> Result<(), CliError> {
    let response = EventServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .list_events(client.request(pb::ListEventsRequest {
            stack,
            resource_name: resource.unwrap_or_default(),
            nested_depth,
            limit,
            ..pb::ListEventsRequest::default()
        })?)
        .await?
        .into_inner();
    // Without -f or -c, one line per event, as `openstack stack event list`
    // prints them (and `--wait` does).
    if output.is_whole_table() {
        for event in &response.events {
            println!("{}", watch::event_line(event));
        }
        return Ok(());
    }
    output.print_list(&response.events, super::detail::event_record)
}

pub async fn outputs(
    client: &Client,
    stack: String,
    key: Option<String>,
    output: &OutputArgs,
) -> Result<(), CliError> {
    if let Some(output_key) = key {
        let found = stacks(client)
            .get_output(client.request(pb::GetOutputRequest { stack, output_key })?)
            .await?
            .into_inner();
        // With -f or -c, the output as a record; else its bare value.
        if !output.is_whole_table() {
            return output.print_record(&output_row(&found));
        }
        let output = found;
        if !output.output_error.is_empty() {
            return Err(CliError::Failed(format!(
                "output {} has no value: {}",
                output.output_key, output.output_error
            )));
        }
        match optional_value_to_json(output.output_value.as_ref()) {
            Value::String(text) => println!("{text}"),
            other => println!("{}", pretty(&other)),
        }
        return Ok(());
    }
    let response = stacks(client)
        .list_outputs(client.request(pb::GetStackRequest { stack })?)
        .await?
        .into_inner();
    output.print_list(&response.outputs, output_row)
}

/// An output as `stack outputs` lists it: its value as JSON in `-f json`,
/// or `{"error": …}` when it cannot be resolved.
fn output_row(output: &pb::Output) -> Record {
    let value = if output.output_error.is_empty() {
        let value = optional_value_to_json(output.output_value.as_ref());
        Cell::shown_as(value.clone(), inline(&value))
    } else {
        Cell::shown_as(
            json!({"error": output.output_error}),
            format!("(error: {})", output.output_error),
        )
    };
    Record::new()
        .field("key", output.output_key.as_str())
        .field("value", value)
        .field("description", output.description.as_str())
}

pub async fn template(client: &Client, stack: String) -> Result<(), CliError> {
    let stored = stacks(client)
        .get_stack_template(client.request(pb::GetStackRequest { stack })?)
        .await?
        .into_inner();
    let template = struct_to_json(stored.template.as_ref());
    let yaml = serde_yaml_ng::to_string(&template)
        .map_err(|error| format!("cannot print the template as YAML: {error}"))?;
    print!("{yaml}");
    Ok(())
}
