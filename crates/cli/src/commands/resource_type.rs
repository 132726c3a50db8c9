//! `ember resource-type list|show`: the resource types templates may use
//! and the property and attribute schema of one, as Heat's
//! `GET /resource_types[/TYPE]` and `openstack orchestration resource type
//! list|show` give them.

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::stack_service_client::StackServiceClient;

use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::commands::output::{Cell, OutputArgs, Record};
use crate::error::CliError;

#[derive(Debug, clap::Subcommand)]
pub enum ResourceTypeCommand {
    /// The resource types Ember can create
    List {
        /// Only types whose name contains this
        #[arg(long, default_value = "")]
        name: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// One type's properties and attributes (with their schemas)
    Show {
        /// e.g. OS::Heat::RandomString
        resource_type: String,
        #[command(flatten)]
        output: OutputArgs,
    },
}

/// One row of `list`: a type's name (the API lists names only).
#[derive(Debug, Default)]
struct TypeName(String);

fn type_row(name: &TypeName) -> Record {
    Record::new().field("resource_type", name.0.as_str())
}

fn schema_record(schema: &pb::ResourceTypeSchema) -> Record {
    Record::new()
        .field("resource_type", schema.resource_type.as_str())
        .field("description", schema.description.as_str())
        .field("template_resource", schema.template_resource_name.as_str())
        .field("properties", Cell::object(schema.properties.as_ref()))
        .field("attributes", Cell::object(schema.attributes.as_ref()))
}

pub async fn run(command: ResourceTypeCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    let client = Client::connect(connect, DevIdentity::Member).await?;
    let mut stacks = StackServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES);
    match command {
        ResourceTypeCommand::List { name, output } => {
            let listed = stacks
                .list_resource_types(
                    client.request(pb::ListResourceTypesRequest { name_filter: name })?,
                )
                .await?
                .into_inner();
            let names: Vec<TypeName> = listed.resource_types.into_iter().map(TypeName).collect();
            output.print_list(&names, type_row)
        }
        ResourceTypeCommand::Show {
            resource_type,
            output,
        } => {
            let schema = stacks
                .get_resource_type_schema(
                    client.request(pb::GetResourceTypeSchemaRequest { resource_type })?,
                )
                .await?
                .into_inner();
            output.print_record(&schema_record(&schema))
        }
    }
}
