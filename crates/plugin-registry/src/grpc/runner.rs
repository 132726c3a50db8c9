//! Thin handlers of `PluginRunnerService`, the engine's side door: decode the
//! operation and snapshots, ask the [`PluginRunner`] (which picks the
//! project, and runs, asks about or holds back the chain), encode the
//! outcomes. Any caller holding the internal credential may call; no admin
//! role is needed, since the engine calls on behalf of whoever started the
//! operation.

use std::sync::Arc;

use ember_proto::plugin::v1 as plugin_pb;
use ember_proto::pluginregistry::v1 as pb;
use tonic::{Request, Response, Status};

use super::convert::{call_outcome_to_proto, operation_from_proto};
use crate::runner::{OnDemand, PluginRunner, PostOperationsAsked, PreOperationsAsked};

pub struct PluginRunnerHandler {
    runner: Arc<PluginRunner>,
}

impl PluginRunnerHandler {
    pub fn new(runner: Arc<PluginRunner>) -> Self {
        PluginRunnerHandler { runner }
    }
}

#[tonic::async_trait]
impl pb::plugin_runner_service_server::PluginRunnerService for PluginRunnerHandler {
    async fn run_pre_operations(
        &self,
        request: Request<pb::RunPreOperationsRequest>,
    ) -> Result<Response<pb::RunPreOperationsResponse>, Status> {
        let request = request.into_inner();
        let asked = PreOperationsAsked {
            operation: operation_from_proto(request.operation, "operation")?,
            project_id: request.project_id,
            break_glass: request.break_glass,
            snapshot_on_demand: request.snapshot_on_demand,
            request: plugin_pb::PreOperationRequest {
                operation: request.operation,
                stack: request.stack,
                previous: request.previous,
                dry_run: request.dry_run,
            },
        };
        Ok(Response::new(
            match self.runner.pre_operations(asked).await? {
                OnDemand::NoPlugin => pb::RunPreOperationsResponse {
                    allowed: true,
                    ..Default::default()
                },
                OnDemand::SnapshotNeeded => pb::RunPreOperationsResponse {
                    snapshot_needed: true,
                    ..Default::default()
                },
                OnDemand::Answered(report) => pb::RunPreOperationsResponse {
                    allowed: report.allowed,
                    reason: report.reason,
                    calls: report
                        .calls
                        .into_iter()
                        .map(call_outcome_to_proto)
                        .collect(),
                    post_operation_plugins: report.post_operation_plugins,
                    snapshot_needed: false,
                },
            },
        ))
    }

    async fn run_post_operations(
        &self,
        request: Request<pb::RunPostOperationsRequest>,
    ) -> Result<Response<pb::RunPostOperationsResponse>, Status> {
        let request = request.into_inner();
        let asked = PostOperationsAsked {
            operation: operation_from_proto(request.operation, "operation")?,
            project_id: request.project_id,
            plugins: request.plugins,
            request: plugin_pb::PostOperationRequest {
                operation: request.operation,
                stack: request.stack,
                failed: request.failed,
                reason: request.reason,
            },
        };
        let calls = self.runner.post_operations(asked).await?;
        Ok(Response::new(pb::RunPostOperationsResponse {
            calls: calls.into_iter().map(call_outcome_to_proto).collect(),
        }))
    }
}
