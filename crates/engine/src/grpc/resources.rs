//! `ResourceService`: resources of the caller's stacks — listing and
//! showing them, marking them unhealthy, and signalling them.

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use tonic::Request;

use super::convert::{resource_to_proto, resource_view_to_proto};
use super::{Reply, answer};
use crate::domain::stack::ResourceFilter;
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
    ) -> Reply<pb::ListResourcesResponse> {
        answer(
            request,
            |caller, request| async move {
                let stack = self.operations.find_stack(&caller, &request.stack).await?;
                let filter = ResourceFilter {
                    names: request.names,
                    types: request.types,
                    actions: request.actions,
                    statuses: request.statuses,
                    physical_ids: request.physical_resource_ids,
                };
                self.operations
                    .filtered_resources(&stack, request.nested_depth.min(MAX_NESTED_DEPTH), &filter)
                    .await
            },
            |views| pb::ListResourcesResponse {
                resources: views
                    .into_iter()
                    .map(|view| resource_view_to_proto(view, false))
                    .collect(),
            },
        )
        .await
    }

    async fn get_resource(&self, request: Request<pb::GetResourceRequest>) -> Reply<pb::Resource> {
        answer(
            request,
            |caller, request| async move {
                let stack = self.operations.find_stack(&caller, &request.stack).await?;
                let view = self
                    .operations
                    .resource(&stack, &request.resource_name)
                    .await?;
                Ok((view, request.attributes))
            },
            |(view, wanted_attributes)| {
                let mut resource = resource_view_to_proto(view, true);
                if !wanted_attributes.is_empty()
                    && let Some(attributes) = resource.attributes.as_mut()
                {
                    attributes
                        .fields
                        .retain(|name, _| wanted_attributes.contains(name));
                }
                resource
            },
        )
        .await
    }

    async fn mark_unhealthy(
        &self,
        request: Request<pb::MarkUnhealthyRequest>,
    ) -> Reply<pb::Resource> {
        answer(
            request,
            |caller, request| async move {
                let reason =
                    Some(request.resource_status_reason).filter(|reason| !reason.is_empty());
                let resource = self
                    .operations
                    .mark_unhealthy(
                        &caller,
                        &request.stack,
                        &request.resource,
                        request.mark_unhealthy,
                        reason,
                    )
                    .await?;
                let stack = self
                    .operations
                    .find_stack(&caller, &resource.stack_id.to_string())
                    .await?;
                Ok((resource, stack.name))
            },
            |(resource, stack_name)| resource_to_proto(&resource, &stack_name, Vec::new(), true),
        )
        .await
    }

    async fn signal(
        &self,
        request: Request<pb::SignalResourceRequest>,
    ) -> Reply<pb::SignalResourceResponse> {
        answer(
            request,
            |caller, request| async move {
                let details = request
                    .details
                    .as_ref()
                    .map_or(serde_json::Value::Null, value_to_json);
                if request.signal_token.is_empty() {
                    self.operations
                        .signal_resource(&caller, &request.stack, &request.resource, details)
                        .await
                } else {
                    self.operations
                        .signal_wait_handle_with_token(
                            None,
                            &request.stack,
                            &request.resource,
                            &request.signal_token,
                            details,
                        )
                        .await
                }
            },
            |outcome| {
                let capacity = |capacity: u64| u32::try_from(capacity).unwrap_or(u32::MAX);
                match outcome.scaling {
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
                }
            },
        )
        .await
    }
}
