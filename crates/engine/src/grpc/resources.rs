//! `ResourceService`: resources of the caller's stacks.

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use ember_runtime::Identity;
use tonic::{Request, Response, Status};

use super::convert::resource_to_proto;
use crate::stacks::StackOperations;

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
}
