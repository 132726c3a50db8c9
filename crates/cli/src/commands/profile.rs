//! `ember profile list|show|delete`: cluster profiles (what a node is)
//! through the gateway's ProfileService, with `-f`/`-c`. Profiles are
//! created with `ember cluster profile-create`.

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::profile_service_client::ProfileServiceClient;

use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::commands::output::{Cell, OutputArgs, Record};
use crate::error::CliError;

#[derive(Debug, clap::Subcommand)]
pub enum ProfileCommand {
    /// Your project's profiles
    List {
        /// At most this many (0: the server's default, 100)
        #[arg(long, default_value_t = 0)]
        limit: u32,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// One profile by name or id, with its spec
    Show {
        profile: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete a profile (refused while a cluster or node uses it)
    Delete { profile: String },
}

fn profile_row(profile: &pb::Profile) -> Record {
    Record::new()
        .field("id", profile.id.as_str())
        .field("name", profile.name.as_str())
        .field("type", profile.r#type.as_str())
        .field("created", Cell::time(profile.created_at.as_ref()))
}

fn profile_record(profile: &pb::Profile) -> Record {
    Record::new()
        .field("id", profile.id.as_str())
        .field("name", profile.name.as_str())
        .field("type", profile.r#type.as_str())
        .field("spec", Cell::json_text(&profile.spec))
        .field("metadata", Cell::json_text(&profile.metadata))
        .field("project", profile.project_id.as_str())
        .field("user", profile.user_id.as_str())
        .field("created", Cell::time(profile.created_at.as_ref()))
}

pub async fn run(command: ProfileCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    let client = Client::connect(connect, DevIdentity::Member).await?;
    let mut profiles = ProfileServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES);
    match command {
        ProfileCommand::List { limit, output } => {
            let listed = profiles
                .list_profiles(client.request(pb::ListObjectsRequest {
                    limit,
                    ..pb::ListObjectsRequest::default()
                })?)
                .await?
                .into_inner();
            output.print_list(&listed.profiles, profile_row)
        }
        ProfileCommand::Show { profile, output } => {
            let found = profiles
                .get_profile(client.request(pb::GetObjectRequest { id: profile })?)
                .await?
                .into_inner();
            output.print_record(&profile_record(&found))
        }
        ProfileCommand::Delete { profile } => {
            profiles
                .delete_profile(client.request(pb::GetObjectRequest {
                    id: profile.clone(),
                })?)
                .await?;
            println!("profile {profile} deleted");
            Ok(())
        }
    }
}
