//! `ember stack resource show` and `ember stack event show`: one resource
//! (its properties, attributes and metadata) or one event of a stack, with
//! `-f`/`-c` like every show.

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::event_service_client::EventServiceClient;
use ember_proto::engine::v1::resource_service_client::ResourceServiceClient;

use crate::client::Client;
use crate::commands::output::{Cell, OutputArgs, Record};
use crate::error::CliError;

#[derive(Debug, clap::Subcommand)]
pub enum ResourceCommand {
    /// One resource of a stack: status, physical id, properties,
    /// attributes, metadata
    Show {
        stack: String,
        /// The resource's logical name (or its physical id)
        resource: String,
        /// Resolve only these attributes (repeatable); default all
        #[arg(long = "with-attr", value_name = "ATTRIBUTE")]
        attributes: Vec<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum EventCommand {
    /// One event of a stack's resource (ids as `ember stack events` and
    /// `openstack stack event list` print them)
    Show {
        stack: String,
        /// The resource the event is about (the stack's own name for the
        /// stack's events)
        resource: String,
        event: String,
        #[command(flatten)]
        output: OutputArgs,
    },
}

pub fn resource_record(resource: &pb::Resource) -> Record {
    Record::new()
        .field("name", resource.resource_name.as_str())
        .field("type", resource.resource_type.as_str())
        .field("status", resource.resource_status.as_str())
        .field("reason", resource.resource_status_reason.as_str())
        .field("physical_id", resource.physical_resource_id.as_str())
        .field("stack", resource.stack_name.as_str())
        .field("stack_id", resource.stack_id.as_str())
        .field("nested_stack", resource.nested_stack_id.as_str())
        .field("parent_resource", resource.parent_resource.as_str())
        .field(
            "required_by",
            Cell::shown_as(
                resource.required_by.clone(),
                resource.required_by.join(", "),
            ),
        )
        .field("properties", Cell::object(resource.properties.as_ref()))
        .field("attributes", Cell::object(resource.attributes.as_ref()))
        .field("metadata", Cell::object(resource.metadata.as_ref()))
        .field("created", Cell::time(resource.created_at.as_ref()))
        .field("updated", Cell::time(resource.updated_at.as_ref()))
}

pub fn event_record(event: &pb::Event) -> Record {
    Record::new()
        .field("id", event.id.as_str())
        .field("resource", event.resource_name.as_str())
        .field("status", event.resource_status.as_str())
        .field("reason", event.resource_status_reason.as_str())
        .field("physical_id", event.physical_resource_id.as_str())
        .field("type", event.resource_type.as_str())
        .field("stack", event.stack_name.as_str())
        .field("stack_id", event.stack_id.as_str())
        .field("time", Cell::time(event.created_at.as_ref()))
}

pub async fn resource(client: &Client, command: ResourceCommand) -> Result<(), CliError> {
    let ResourceCommand::Show {
        stack,
        resource,
        attributes,
        output,
    } = command;
    let found = ResourceServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .get_resource(client.request(pb::GetResourceRequest {
            stack,
            resource_name: resource,
            attributes,
        })?)
        .await?
        .into_inner();
    output.print_record(&resource_record(&found))
}

pub async fn event(client: &Client, command: EventCommand) -> Result<(), CliError> {
    let EventCommand::Show {
        stack,
        resource,
        event,
        output,
    } = command;
    let found = EventServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .get_event(client.request(pb::GetEventRequest {
            stack,
            resource_name: resource,
            event_id: event,
        })?)
        .await?
        .into_inner();
    output.print_record(&event_record(&found))
}
