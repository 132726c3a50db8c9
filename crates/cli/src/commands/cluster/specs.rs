//! `ember cluster profile-create|policy-create`: profiles and policies made
//! from a spec file (YAML or JSON), through the gateway's `ProfileService`
//! and `PolicyService`. Listing, showing and deleting them are `ember
//! profile …` and `ember policy …`.

use std::path::Path;

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::policy_service_client::PolicyServiceClient;
use ember_proto::engine::v1::profile_service_client::ProfileServiceClient;

use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::error::CliError;

pub async fn create_profile(
    connect: &ConnectArgs,
    name: String,
    spec: &Path,
    protected: bool,
) -> Result<(), CliError> {
    let spec = read_spec(spec)?;
    let client = Client::connect(connect, DevIdentity::Member).await?;
    let profile = ProfileServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .create_profile(client.request(pb::CreateProfileRequest {
            name,
            spec,
            metadata: String::new(),
            protected,
        })?)
        .await?
        .into_inner();
    println!(
        "profile {} created ({}, id {}{})",
        profile.name,
        profile.r#type,
        profile.id,
        if profile.protected {
            "; its nodes start protected from scale-in"
        } else {
            ""
        }
    );
    Ok(())
}

pub async fn create_policy(
    connect: &ConnectArgs,
    name: String,
    spec: &Path,
) -> Result<(), CliError> {
    let spec = read_spec(spec)?;
    let client = Client::connect(connect, DevIdentity::Member).await?;
    let policy = PolicyServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .create_policy(client.request(pb::CreatePolicyRequest { name, spec })?)
        .await?
        .into_inner();
    println!(
        "policy {} created ({}, id {})",
        policy.name, policy.r#type, policy.id
    );
    Ok(())
}

/// The spec file as the JSON text the API takes; YAML is accepted too
/// (JSON is YAML).
fn read_spec(path: &Path) -> Result<String, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| CliError::Usage(format!("--spec {}: {error}", path.display())))?;
    let document: serde_json::Value = serde_yaml_ng::from_str(&text).map_err(|error| {
        CliError::Usage(format!(
            "--spec {}: not YAML or JSON: {error}",
            path.display()
        ))
    })?;
    if !document.is_object() {
        return Err(CliError::Usage(format!(
            "--spec {}: write a mapping with type, version and properties",
            path.display()
        )));
    }
    serde_json::to_string(&document)
        .map_err(|error| CliError::Usage(format!("--spec {}: {error}", path.display())))
}
