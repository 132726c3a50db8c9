//! `ResourceService`: resources of the caller's stacks — listing and
//! showing them, marking them unhealthy, and signalling them.

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use ember_runtime::Identity;
use tonic::{Request, Response, Status};

use super::convert::resource_to_proto;
use crate::stacks::StackOperations;
use ember_runtime::protobuf_json::value_to_json;

/// How deep nested stacks are listed at most.
const MAX_NESTED_DEPTH: u32 = 10;

pub struct ResourceHandler {
    operations: Arc<StackOperations>,
}

impl ResourceHandler {
    pub fn new(operations: Arc<StackOperations>) -> Self {
        ResourceHandler { operations }
    }
}

#[tonic::async_trait]
impl pb::resource_service_server::ResourceService for ResourceHandler {
    async fn list_resources(
        &self,
        request: Request<pb::ListResourcesRequest>,
    ) -> Result<Response<pb::ListResourcesResponse>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let stack = self
            .operations
            .find_stack(&identity, &request.stack)
            .await?;
        let views = self
            .operations
            .resources(&stack, request.nested_depth.min(MAX_NESTED_DEPTH))
            .await?;
        let resources = views
            .into_iter()
            .filter(|view| {
                request.types.is_empty() || request.types.contains(&view.resource.type_name)
            })
            .filter(|view| {
                request.statuses.is_empty()
                    || request.statuses.contains(&view.resource.resource_status())
            })
            .map(|view| {
                resource_to_proto(&view.resource, &view.stack_name, view.required_by, false)
            })
            .collect();
        Ok(Response::new(pb::ListResourcesResponse { resources }))
    }

    async fn get_resource(
        &self,
        request: Request<pb::GetResourceRequest>,
    ) -> Result<Response<pb::Resource>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let stack = self
            .operations
            .find_stack(&identity, &request.stack)
            .await?;
        let view = self
            .operations
            .resource(&stack, &request.resource_name)
            .await?;
        let mut resource =
            resource_to_proto(&view.resource, &view.stack_name, view.required_by, true);
        if !request.attributes.is_empty()
            && let Some(attributes) = resource.attributes.as_mut()
        {
            attributes
                .fields
                .retain(|name, _| request.attributes.contains(name));
        }
        Ok(Response::new(resource))
    }

    async fn mark_unhealthy(
        &self,
        request: Request<pb::MarkUnhealthyRequest>,
    ) -> Result<Response<pb::Resource>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let reason = Some(request.resource_status_reason).filter(|reason| !reason.is_empty());
        let resource = self
            .operations
            .mark_unhealthy(
                &identity,
                &request.stack,
                &request.resource,
                request.mark_unhealthy,
                reason,
            )
            .await?;
        let stack = self
            .operations
            .find_stack(&identity, &resource.stack_id.to_string())
            .await?;
        Ok(Response::new(resource_to_proto(
            &resource,
            &stack.name,
            Vec::new(),
            true,
        )))
    }

    async fn signal(
        &self,
        request: Request<pb::SignalResourceRequest>,
    ) -> Result<Response<pb::SignalResourceResponse>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let details = request
            .details
            .as_ref()
            .map_or(serde_json::Value::Null, value_to_json);
        let outcome = if request.signal_token.is_empty() {
            self.operations
                .signal_resource(&identity, &request.stack, &request.resource, details)
                .await?
        } else {
            self.operations
                .signal_wait_handle_with_token(
                    None,
                    &request.stack,
                    &request.resource,
                    &request.signal_token,
                    details,
                )
                .await?
        };
        let capacity = |capacity: u64| u32::try_from(capacity).unwrap_or(u32::MAX);
        Ok(Response::new(match outcome.scaling {
            Some(scaling) => pb::SignalResourceResponse {
                scaling: true,
                group: scaling.group,
                from_capacity: capacity(scaling.from_capacity),
                to_capacity: capacity(scaling.to_capacity),
                message: outcome.message,
            },
            None => pb::SignalResourceResponse {
                message: outcome.message,
                ..Default::default()
            },
        }))
    }
}
