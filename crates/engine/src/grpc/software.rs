//! `SoftwareConfigService` and `SoftwareDeploymentService`: software
//! configs, deployments and server metadata, over the software layer.

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::software_config_service_server::SoftwareConfigService;
use ember_proto::engine::v1::software_deployment_service_server::SoftwareDeploymentService;
use ember_runtime::Identity;
use ember_runtime::protobuf_json::optional_value_to_json;
use serde_json::Value;
use tonic::{Request, Response, Status};

use crate::domain::software::{SoftwareConfig, SoftwareDeployment};
use crate::software::{DeploymentUpdate, NewConfig, NewDeployment, SoftwareService};

#[derive(Clone)]
pub struct SoftwareHandler {
    software: Arc<SoftwareService>,
}

impl SoftwareHandler {
    pub fn new(software: Arc<SoftwareService>) -> SoftwareHandler {
        SoftwareHandler { software }
    }
}

fn time(at: chrono::DateTime<chrono::Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub fn config_to_proto(config: &SoftwareConfig) -> pb::SoftwareConfig {
    pb::SoftwareConfig {
        id: config.id.to_string(),
        name: config.name.clone(),
        group: config.group.clone(),
        config: Some(ember_runtime::protobuf_json::json_to_value(
            config.config.clone(),
        )),
        inputs: Some(prost_types::ListValue {
            values: config
                .inputs
                .iter()
                .cloned()
                .map(ember_runtime::protobuf_json::json_to_value)
                .collect(),
        }),
        outputs: Some(prost_types::ListValue {
            values: config
                .outputs
                .iter()
                .cloned()
                .map(ember_runtime::protobuf_json::json_to_value)
                .collect(),
        }),
        options: Some(ember_runtime::protobuf_json::map_to_struct(
            config.options.clone(),
        )),
        creation_time: time(config.created_at),
        project_id: config.project_id.clone(),
    }
}

fn deployment_to_proto(deployment: &SoftwareDeployment) -> pb::SoftwareDeployment {
    pb::SoftwareDeployment {
        id: deployment.id.to_string(),
        server_id: deployment.server_id.clone(),
        config_id: deployment.config_id.to_string(),
        input_values: Some(ember_runtime::protobuf_json::map_to_struct(
            deployment.input_values.clone(),
        )),
        output_values: Some(ember_runtime::protobuf_json::map_to_struct(
            deployment.output_values.clone(),
        )),
        action: deployment.action.clone(),
        status: deployment.status.as_str().to_owned(),
        status_reason: deployment.status_reason.clone(),
        creation_time: time(deployment.created_at),
        updated_time: deployment.updated_at.map(time).unwrap_or_default(),
    }
}

/// A field given as a protobuf Value: `None` when absent.
fn given(value: Option<&prost_types::Value>) -> Option<Value> {
    value.map(|value| optional_value_to_json(Some(value)))
}

#[tonic::async_trait]
impl SoftwareConfigService for SoftwareHandler {
    async fn create_software_config(
        &self,
        request: Request<pb::CreateSoftwareConfigRequest>,
    ) -> Result<Response<pb::SoftwareConfig>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let config = self
            .software
            .create_config(
                &identity,
                NewConfig {
                    name: request.name,
                    group: request.group,
                    config: optional_value_to_json(request.config.as_ref()),
                    inputs: optional_value_to_json(request.inputs.as_ref()),
                    outputs: optional_value_to_json(request.outputs.as_ref()),
                    options: optional_value_to_json(request.options.as_ref()),
                },
            )
            .await?;
        Ok(Response::new(config_to_proto(&config)))
    }

    async fn get_software_config(
        &self,
        request: Request<pb::GetSoftwareConfigRequest>,
    ) -> Result<Response<pb::SoftwareConfig>, Status> {
        let identity = Identity::of(&request)?.clone();
        let config = self
            .software
            .get_config(&identity, &request.get_ref().id)
            .await?;
        Ok(Response::new(config_to_proto(&config)))
    }

    async fn list_software_configs(
        &self,
        request: Request<pb::ListSoftwareConfigsRequest>,
    ) -> Result<Response<pb::ListSoftwareConfigsResponse>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let configs = self
            .software
            .list_configs(
                &identity,
                (request.limit > 0).then_some(u64::from(request.limit)),
                Some(request.marker.as_str()),
                request.all_projects,
            )
            .await?;
        Ok(Response::new(pb::ListSoftwareConfigsResponse {
            software_configs: configs.iter().map(config_to_proto).collect(),
        }))
    }

    async fn delete_software_config(
        &self,
        request: Request<pb::GetSoftwareConfigRequest>,
    ) -> Result<Response<pb::DeleteSoftwareConfigResponse>, Status> {
        let identity = Identity::of(&request)?.clone();
        self.software
            .delete_config(&identity, &request.get_ref().id)
            .await?;
        Ok(Response::new(pb::DeleteSoftwareConfigResponse {}))
    }
}

#[tonic::async_trait]
impl SoftwareDeploymentService for SoftwareHandler {
    async fn create_software_deployment(
        &self,
        request: Request<pb::CreateSoftwareDeploymentRequest>,
    ) -> Result<Response<pb::SoftwareDeployment>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let deployment = self
            .software
            .create_deployment(
                &identity,
                NewDeployment {
                    id: None,
                    config_id: request.config_id,
                    server_id: request.server_id,
                    input_values: optional_value_to_json(request.input_values.as_ref()),
                    action: request.action,
                    status: request.status,
                    status_reason: request.status_reason,
                },
            )
            .await?;
        Ok(Response::new(deployment_to_proto(&deployment)))
    }

    async fn get_software_deployment(
        &self,
        request: Request<pb::GetSoftwareDeploymentRequest>,
    ) -> Result<Response<pb::SoftwareDeployment>, Status> {
        let identity = Identity::of(&request)?.clone();
        let deployment = self
            .software
            .get_deployment(&identity, &request.get_ref().id)
            .await?;
        Ok(Response::new(deployment_to_proto(&deployment)))
    }

    async fn list_software_deployments(
        &self,
        request: Request<pb::ListSoftwareDeploymentsRequest>,
    ) -> Result<Response<pb::ListSoftwareDeploymentsResponse>, Status> {
        let identity = Identity::of(&request)?.clone();
        let server_id = Some(request.get_ref().server_id.as_str()).filter(|id| !id.is_empty());
        let deployments = self.software.list_deployments(&identity, server_id).await?;
        Ok(Response::new(pb::ListSoftwareDeploymentsResponse {
            software_deployments: deployments.iter().map(deployment_to_proto).collect(),
        }))
    }

    async fn update_software_deployment(
        &self,
        request: Request<pb::UpdateSoftwareDeploymentRequest>,
    ) -> Result<Response<pb::SoftwareDeployment>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let deployment = self
            .software
            .update_deployment(
                &identity,
                &request.id,
                DeploymentUpdate {
                    config_id: request.config_id,
                    input_values: given(request.input_values.as_ref()),
                    output_values: given(request.output_values.as_ref()),
                    action: request.action,
                    status: request.status,
                    status_reason: request.status_reason,
                },
            )
            .await?;
        Ok(Response::new(deployment_to_proto(&deployment)))
    }

    async fn delete_software_deployment(
        &self,
        request: Request<pb::GetSoftwareDeploymentRequest>,
    ) -> Result<Response<pb::DeleteSoftwareDeploymentResponse>, Status> {
        let identity = Identity::of(&request)?.clone();
        self.software
            .delete_deployment(&identity, &request.get_ref().id)
            .await?;
        Ok(Response::new(pb::DeleteSoftwareDeploymentResponse {}))
    }

    async fn get_server_metadata(
        &self,
        request: Request<pb::GetServerMetadataRequest>,
    ) -> Result<Response<pb::ServerMetadata>, Status> {
        let identity = Identity::of(&request)?.clone();
        let configs = self
            .software
            .server_metadata(&identity, &request.get_ref().server_id)
            .await?;
        Ok(Response::new(pb::ServerMetadata {
            metadata: configs.iter().map(config_to_proto).collect(),
        }))
    }
}
