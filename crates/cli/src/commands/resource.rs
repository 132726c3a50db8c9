//! `ember resource …`: what is done to one resource of a stack — mark it
//! unhealthy so the next update replaces it (or reset the mark), and send
//! it a signal (a scaling policy resizes its group). Through the gateway's
//! gRPC ResourceService.

use ember_api_gateway::rest::orchestration::protobuf_json::json_to_value;
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::resource_service_client::ResourceServiceClient;
use serde_json::Value;

use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::error::CliError;

#[derive(Debug, clap::Subcommand)]
pub enum ResourceCommand {
    /// Mark a resource unhealthy (CHECK_FAILED): the next stack update replaces it
    MarkUnhealthy {
        /// Stack name or id (a nested stack's, for a member of a nested stack or group)
        stack: String,
        /// Resource name or physical id
        resource: String,
        /// Why, recorded as the resource's status reason
        #[arg(long)]
        reason: Option<String>,
        /// Undo a mark instead: CHECK_FAILED becomes CHECK_COMPLETE
        #[arg(long)]
        reset: bool,
    },
    /// Signal a resource; a scaling policy resizes its AutoScalingGroup
    Signal {
        /// Stack name or id
        stack: String,
        /// Resource name or physical id
        resource: String,
        /// The signal's details, as JSON (e.g. '{"current": "alarm"}')
        #[arg(long, value_name = "JSON")]
        data: Option<String>,
    },
}

pub async fn run(command: ResourceCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    match command {
        ResourceCommand::MarkUnhealthy {
            stack,
            resource,
            reason,
            reset,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let request = pb::MarkUnhealthyRequest {
                stack,
                resource,
                mark_unhealthy: !reset,
                resource_status_reason: reason.unwrap_or_default(),
            };
            let marked = ResourceServiceClient::new(client.channel.clone())
                .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
                .mark_unhealthy(client.request(request)?)
                .await?
                .into_inner();
            println!(
                "{} ({}) in stack {}: {}  {}",
                marked.resource_name,
                marked.physical_resource_id,
                marked.stack_name,
                marked.resource_status,
                marked.resource_status_reason
            );
            Ok(())
        }
        ResourceCommand::Signal {
            stack,
            resource,
            data,
        } => {
            let details = parse_details(data.as_deref())?;
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let request = pb::SignalResourceRequest {
                stack,
                resource,
                details: Some(json_to_value(details)),
                signal_token: String::new(),
            };
            let answer = ResourceServiceClient::new(client.channel.clone())
                .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
                .signal(client.request(request)?)
                .await?
                .into_inner();
            println!("{}", answer.message);
            Ok(())
        }
    }
}

fn parse_details(data: Option<&str>) -> Result<Value, CliError> {
    match data {
        None => Ok(Value::Null),
        Some(text) => serde_json::from_str(text)
            .map_err(|error| CliError::Usage(format!("--data must be JSON: {error}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_data_is_json_or_nothing() {
        assert_eq!(parse_details(None), Ok(Value::Null));
        assert_eq!(
            parse_details(Some(r#"{"current": "alarm"}"#)),
            Ok(serde_json::json!({"current": "alarm"}))
        );
        let error = parse_details(Some("{oops")).expect_err("not JSON");
        assert!(
            matches!(&error, CliError::Usage(message) if message.starts_with("--data must be JSON")),
            "{error:?}"
        );
    }
}
