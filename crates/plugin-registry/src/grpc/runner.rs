//! Thin handlers of `PluginRunnerService`, the engine's side door: decode the
//! operation and snapshots, run the chain, encode the outcomes. Any caller
//! holding the internal credential may call; no admin role is needed, since
//! the engine calls on behalf of whoever started the operation.

use std::sync::Arc;

use ember_proto::plugin::v1 as plugin_pb;
use ember_proto::pluginregistry::v1 as pb;
use tonic::{Request, Response, Status};

use super::convert::{call_outcome_to_proto, operation_from_proto};
use crate::runner::{OnDemand, OperationContext, PluginRunner};

pub struct PluginRunnerHandler {
    runner: Arc<PluginRunner>,
}

impl PluginRunnerHandler {
    pub fn new(runner: Arc<PluginRunner>) -> Self {
        PluginRunnerHandler { runner }
    }
}

/// The project that selects plugins: the request's, else the stack's.
fn project_of(project_id: String, stack: Option<&plugin_pb::StackSnapshot>) -> String {
    if project_id.is_empty() {
        stack
            .map(|stack| stack.project_id.clone())
            .unwrap_or_default()
    } else {
        project_id
    }
}

#[tonic::async_trait]
impl pb::plugin_runner_service_server::PluginRunnerService for PluginRunnerHandler {
    async fn run_pre_operations(
        &self,
        request: Request<pb::RunPreOperationsRequest>,
    ) -> Result<Response<pb::RunPreOperationsResponse>, Status> {
        let request = request.into_inner();
        let context = OperationContext {
            operation: operation_from_proto(request.operation, "operation")?,
            project_id: project_of(request.project_id, request.stack.as_ref()),
            break_glass: request.break_glass && !request.dry_run,
        };
        let dry_run = request.dry_run;
        let plugin_request = plugin_pb::PreOperationRequest {
            operation: request.operation,
            stack: request.stack,
            previous: request.previous,
            dry_run,
        };
        let report = if request.snapshot_on_demand && plugin_request.stack.is_none() {
            // Asked without the stack: a plugin that would be called needs
            // it; otherwise the answer is known from this registry read.
            match self
                .runner
                .pre_operations_on_demand(&context, plugin_request)
                .await?
            {
                OnDemand::NoPlugin => {
                    return Ok(Response::new(pb::RunPreOperationsResponse {
                        allowed: true,
                        ..Default::default()
                    }));
                }
                OnDemand::SnapshotNeeded => {
                    return Ok(Response::new(pb::RunPreOperationsResponse {
                        snapshot_needed: true,
                        ..Default::default()
                    }));
                }
                OnDemand::Answered(report) => report,
            }
        } else if dry_run {
            self.runner
                .ask_pre_operations(&context, plugin_request)
                .await?
        } else {
            self.runner
                .run_pre_operations(&context, plugin_request)
                .await?
        };
        Ok(Response::new(pb::RunPreOperationsResponse {
            allowed: report.allowed,
            reason: report.reason,
            calls: report
                .calls
                .into_iter()
                .map(call_outcome_to_proto)
                .collect(),
            post_operation_plugins: report.post_operation_plugins,
            snapshot_needed: false,
        }))
    }

    async fn run_post_operations(
        &self,
        request: Request<pb::RunPostOperationsRequest>,
    ) -> Result<Response<pb::RunPostOperationsResponse>, Status> {
        let request = request.into_inner();
        let operation = operation_from_proto(request.operation, "operation")?;
        tracing::debug!(
            operation = operation.as_str(),
            project_id = %project_of(request.project_id.clone(), request.stack.as_ref()),
            failed = request.failed,
            plugins = request.plugins.len(),
            "running post-operations"
        );
        let plugin_request = plugin_pb::PostOperationRequest {
            operation: request.operation,
            stack: request.stack,
            failed: request.failed,
            reason: request.reason,
        };
        let calls = self
            .runner
            .run_post_operations(&request.plugins, plugin_request)
            .await?;
        Ok(Response::new(pb::RunPostOperationsResponse {
            calls: calls.into_iter().map(call_outcome_to_proto).collect(),
        }))
    }
}
