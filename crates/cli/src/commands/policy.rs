//! `ember policy list|show|delete`: cluster policies (deletion, scaling)
//! through the gateway's PolicyService, with `-f`/`-c`. Policies are
//! created with `ember cluster policy-create` and attached or detached with
//! `ember cluster policy-attach|policy-detach`.

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::policy_service_client::PolicyServiceClient;

use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::commands::output::{Cell, OutputArgs, Record};
use crate::error::CliError;

#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Your project's policies
    List {
        /// At most this many (0: the server's default, 100)
        #[arg(long, default_value_t = 0)]
        limit: u32,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// One policy by name or id, with its spec
    Show {
        policy: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete a policy (refused while attached to a cluster)
    Delete { policy: String },
}

fn policy_row(policy: &pb::Policy) -> Record {
    Record::new()
        .field("id", policy.id.as_str())
        .field("name", policy.name.as_str())
        .field("type", policy.r#type.as_str())
        .field("created", Cell::time(policy.created_at.as_ref()))
}

fn policy_record(policy: &pb::Policy) -> Record {
    Record::new()
        .field("id", policy.id.as_str())
        .field("name", policy.name.as_str())
        .field("type", policy.r#type.as_str())
        .field("spec", Cell::json_text(&policy.spec))
        .field("project", policy.project_id.as_str())
        .field("user", policy.user_id.as_str())
        .field("created", Cell::time(policy.created_at.as_ref()))
}

pub async fn run(command: PolicyCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    let client = Client::connect(connect, DevIdentity::Member).await?;
    let mut policies = PolicyServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES);
    match command {
        PolicyCommand::List { limit, output } => {
            let listed = policies
                .list_policies(client.request(pb::ListObjectsRequest {
                    limit,
                    ..pb::ListObjectsRequest::default()
                })?)
                .await?
                .into_inner();
            output.print_list(&listed.policies, policy_row)
        }
        PolicyCommand::Show { policy, output } => {
            let found = policies
                .get_policy(client.request(pb::GetObjectRequest { id: policy })?)
                .await?
                .into_inner();
            output.print_record(&policy_record(&found))
        }
        PolicyCommand::Delete { policy } => {
            policies
                .delete_policy(client.request(pb::GetObjectRequest { id: policy.clone() })?)
                .await?;
            println!("policy {policy} deleted");
            Ok(())
        }
    }
}
