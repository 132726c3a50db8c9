//! `EventService`: what happened to the caller's stacks.

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use ember_runtime::ids::parse_optional_uuid;
use tonic::Request;

use super::convert::event_to_proto;
use super::{Reply, answer};
use crate::domain::stack::ResourceFilter;
use crate::domain::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use crate::error::Error;
use crate::stacks::StackOperations;

pub struct EventHandler {
    operations: Arc<StackOperations>,
}

impl EventHandler {
    pub fn new(operations: Arc<StackOperations>) -> Self {
        EventHandler { operations }
    }
}

#[tonic::async_trait]
impl pb::event_service_server::EventService for EventHandler {
    async fn list_events(
        &self,
        request: Request<pb::ListEventsRequest>,
    ) -> Reply<pb::ListEventsResponse> {
        answer(
            request,
            |caller, request| async move {
                let stack = self.operations.find_stack(&caller, &request.stack).await?;
                let marker = parse_optional_uuid("marker", &request.marker)?;
                let resource_name =
                    (!request.resource_name.is_empty()).then_some(request.resource_name);
                let filter = ResourceFilter {
                    names: request.resource_names,
                    types: request.resource_types,
                    actions: request.resource_actions,
                    statuses: request.resource_statuses,
                    physical_ids: Vec::new(),
                };
                let (events, stack_names) = self
                    .operations
                    .filtered_events(
                        &stack,
                        resource_name,
                        request.nested_depth.min(10),
                        (request.limit, marker, request.descending),
                        filter,
                    )
                    .await?;
                let page_size = match request.limit {
                    0 => DEFAULT_PAGE_SIZE,
                    limit => limit.min(MAX_PAGE_SIZE),
                };
                let next_marker = if events.len() == page_size as usize {
                    events
                        .last()
                        .map(|event| event.id.to_string())
                        .unwrap_or_default()
                } else {
                    String::new()
                };
                let events = events
                    .iter()
                    .map(|event| {
                        let stack_name =
                            stack_names.get(&event.stack_id).map_or("", String::as_str);
                        event_to_proto(event, stack_name)
                    })
                    .collect();
                Ok(pb::ListEventsResponse {
                    events,
                    next_marker,
                })
            },
            |events| events,
        )
        .await
    }

    async fn get_event(&self, request: Request<pb::GetEventRequest>) -> Reply<pb::Event> {
        answer(
            request,
            |caller, request| async move {
                let stack = self.operations.find_stack(&caller, &request.stack).await?;
                let event_id = parse_optional_uuid("event_id", &request.event_id)?
                    .ok_or_else(|| Error::InvalidInput("event_id: give an event id".to_owned()))?;
                let event = self.operations.event(&stack, event_id).await?;
                if !request.resource_name.is_empty() && event.resource_name != request.resource_name
                {
                    return Err(Error::NotFound(format!(
                        "event {event_id} is not an event of resource {:?}",
                        request.resource_name
                    )));
                }
                Ok(event_to_proto(&event, &stack.name))
            },
            |event| event,
        )
        .await
    }
}
