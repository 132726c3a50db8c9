//! The `ember.plugin.v1.LifecyclePlugin` handler: convert the snapshot,
//! evaluate the policy, answer. Post-operations need nothing from a policy
//! that keeps no state, so they are only logged.

use std::sync::Arc;

use ember_proto::common::v1::StackOperation;
use ember_proto::plugin::v1 as pb;
use tonic::{Request, Response, Status};

use crate::error::Error;
use crate::evaluate::{Decision, evaluate};
use crate::rules::Policy;
use crate::snapshot::StackView;

pub struct PolicyPlugin {
    policy: Arc<Policy>,
}

impl PolicyPlugin {
    pub fn new(policy: Arc<Policy>) -> Self {
        PolicyPlugin { policy }
    }
}

/// "create" for STACK_OPERATION_CREATE; `None` for unknown numbers.
fn operation_name(value: i32) -> Option<String> {
    match StackOperation::try_from(value) {
        Ok(StackOperation::Unspecified) | Err(_) => None,
        Ok(operation) => Some(
            operation
                .as_str_name()
                .trim_start_matches("STACK_OPERATION_")
                .to_ascii_lowercase(),
        ),
    }
}

#[tonic::async_trait]
impl pb::lifecycle_plugin_server::LifecyclePlugin for PolicyPlugin {
    async fn pre_operation(
        &self,
        request: Request<pb::PreOperationRequest>,
    ) -> Result<Response<pb::PreOperationResponse>, Status> {
        let request = request.into_inner();
        let operation = operation_name(request.operation).ok_or_else(|| {
            Error::InvalidInput(format!(
                "operation: unknown operation {}",
                request.operation
            ))
        })?;
        let stack = request
            .stack
            .as_ref()
            .ok_or_else(|| Error::InvalidInput("stack: the snapshot is missing".to_owned()))?;
        let decision = evaluate(&self.policy, &operation, &StackView::from(stack));
        let (verdict, message) = match decision {
            Decision::Allow => (pb::Verdict::Allow, String::new()),
            Decision::Warn(message) => (pb::Verdict::Warn, message),
            Decision::Deny(message) => (pb::Verdict::Deny, message),
        };
        tracing::info!(
            stack = %stack.stack_name,
            project_id = %stack.project_id,
            %operation,
            verdict = verdict.as_str_name(),
            %message,
            "policy decided"
        );
        Ok(Response::new(pb::PreOperationResponse {
            verdict: verdict as i32,
            message,
        }))
    }

    async fn post_operation(
        &self,
        request: Request<pb::PostOperationRequest>,
    ) -> Result<Response<pb::PostOperationResponse>, Status> {
        let request = request.into_inner();
        tracing::debug!(
            stack = %request.stack.as_ref().map(|stack| stack.stack_name.as_str()).unwrap_or(""),
            operation = ?operation_name(request.operation),
            failed = request.failed,
            reason = %request.reason,
            "post-operation"
        );
        Ok(Response::new(pb::PostOperationResponse {}))
    }
}
