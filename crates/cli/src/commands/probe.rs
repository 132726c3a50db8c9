//! `ember probe`: container health checks without curl in the image.

use std::time::Duration;

use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::error::CliError;

#[derive(Debug, clap::Subcommand)]
pub enum ProbeCommand {
    /// gRPC health check of a service (exit 0 when SERVING)
    Grpc {
        /// host:port
        address: String,
    },
    /// HTTP GET that must answer 2xx (e.g. the gateway's /healthz)
    Http { url: String },
}

pub async fn run(command: ProbeCommand) -> Result<(), CliError> {
    let checked = tokio::time::timeout(Duration::from_secs(5), async {
        match command {
            ProbeCommand::Grpc { address } => {
                let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
                    .map_err(|error| CliError::Unavailable(format!("{address}: {error}")))?
                    .connect()
                    .await
                    .map_err(|error| {
                        CliError::Unavailable(format!("cannot reach {address}: {error}"))
                    })?;
                let status = HealthClient::new(channel)
                    .check(HealthCheckRequest {
                        service: String::new(),
                    })
                    .await
                    .map_err(|status| {
                        CliError::Unavailable(format!("{address}: {}", status.message()))
                    })?
                    .into_inner()
                    .status;
                if status == ServingStatus::Serving as i32 {
                    Ok(())
                } else {
                    Err(CliError::Unavailable(format!("{address} is not serving")))
                }
            }
            ProbeCommand::Http { url } => {
                let response = reqwest::get(&url).await.map_err(|error| {
                    CliError::Unavailable(format!("cannot reach {url}: {error}"))
                })?;
                if response.status().is_success() {
                    Ok(())
                } else {
                    Err(CliError::Unavailable(format!(
                        "{url} answered {}",
                        response.status()
                    )))
                }
            }
        }
    })
    .await;
    checked.unwrap_or_else(|_| Err(CliError::Unavailable("no answer within 5 s".to_owned())))
}
