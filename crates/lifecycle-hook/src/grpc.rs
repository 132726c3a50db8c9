//! Thin gRPC handlers for `LifecycleHookService`: decode the request, ask
//! [`PendingActions`] (which decides what the caller may see), encode the
//! answer.

use std::sync::Arc;

use ember_proto::lifecyclehook::v1 as pb;
use ember_runtime::Identity;
use ember_runtime::ids::parse_optional_uuid;
use ember_runtime::time::{to_optional_timestamp, to_timestamp};
use tonic::{Request, Response, Status};

use crate::domain::{DeliveryState, PendingLifecycleAction, PendingListQuery, Target};
use crate::pending_actions::{HookEventFilter, PendingActions, QueueRead};

pub struct LifecycleHookHandler {
    pending_actions: Arc<PendingActions>,
}

impl LifecycleHookHandler {
    pub fn new(pending_actions: Arc<PendingActions>) -> Self {
        LifecycleHookHandler { pending_actions }
    }
}

#[tonic::async_trait]
impl pb::lifecycle_hook_service_server::LifecycleHookService for LifecycleHookHandler {
    async fn list_pending(
        &self,
        request: Request<pb::ListPendingRequest>,
    ) -> Result<Response<pb::ListPendingResponse>, Status> {
        let caller = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let query = PendingListQuery {
            cluster_id: parse_optional_uuid("cluster_id", &request.cluster_id)?,
            limit: request.limit,
            marker: parse_optional_uuid("marker", &request.marker)?,
            include_resolved: request.include_resolved,
            ..PendingListQuery::default()
        };
        let page = self.pending_actions.list_pending(&caller, query).await?;
        Ok(Response::new(pb::ListPendingResponse {
            actions: page.actions.iter().map(action_to_proto).collect(),
            next_marker: page
                .next_marker
                .map(|token| token.to_string())
                .unwrap_or_default(),
        }))
    }

    async fn list_queue_messages(
        &self,
        request: Request<pb::ListQueueMessagesRequest>,
    ) -> Result<Response<pb::ListQueueMessagesResponse>, Status> {
        let caller = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let read = QueueRead {
            project_id: (!request.project_id.is_empty()).then_some(request.project_id),
            queue: request.queue,
            after_id: request.after_id,
            limit: request.limit,
        };
        let messages = self
            .pending_actions
            .list_queue_messages(&caller, read)
            .await?;
        Ok(Response::new(pb::ListQueueMessagesResponse {
            messages: messages
                .into_iter()
                .map(|message| pb::QueueMessage {
                    id: u64::try_from(message.id).unwrap_or(0),
                    project_id: message.project_id,
                    queue: message.queue,
                    token: message.token.to_string(),
                    body: message.body,
                    created_at: Some(to_timestamp(message.created_at)),
                })
                .collect(),
        }))
    }

    async fn list_hook_events(
        &self,
        request: Request<pb::ListHookEventsRequest>,
    ) -> Result<Response<pb::ListHookEventsResponse>, Status> {
        let caller = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let filter = HookEventFilter {
            cluster_id: parse_optional_uuid("cluster_id", &request.cluster_id)?,
            token: parse_optional_uuid("token", &request.token)?,
            limit: request.limit,
        };
        let events = self
            .pending_actions
            .list_hook_events(&caller, filter)
            .await?;
        Ok(Response::new(pb::ListHookEventsResponse {
            events: events
                .into_iter()
                .map(|event| pb::HookEvent {
                    id: event.id.to_string(),
                    token: event.token.to_string(),
                    cluster_id: event.cluster_id.to_string(),
                    node_id: event.node_id.to_string(),
                    kind: event.kind,
                    detail: event.detail,
                    created_at: Some(to_timestamp(event.created_at)),
                    project_id: event.project_id,
                })
                .collect(),
        }))
    }
}

fn action_to_proto(action: &PendingLifecycleAction) -> pb::PendingLifecycleAction {
    let target = match &action.target {
        Target::Queue { queue } => pb::Target {
            r#type: pb::TargetType::Queue as i32,
            queue: queue.clone(),
            url: String::new(),
        },
        Target::Webhook { url } => pb::Target {
            r#type: pb::TargetType::Webhook as i32,
            queue: String::new(),
            url: url.clone(),
        },
    };
    pb::PendingLifecycleAction {
        token: action.token.to_string(),
        node_id: action.node_id.to_string(),
        resource_id: action.resource_id.clone(),
        cluster_id: action.cluster_id.to_string(),
        project_id: action.project_id.clone(),
        target: Some(target),
        deadline: Some(to_timestamp(action.deadline)),
        delivery_state: match action.delivery_state {
            DeliveryState::Pending => pb::DeliveryState::Pending,
            DeliveryState::Delivered => pb::DeliveryState::Delivered,
            DeliveryState::Retrying => pb::DeliveryState::Retrying,
            DeliveryState::Failed => pb::DeliveryState::Failed,
        } as i32,
        delivery_attempts: action.delivery_attempts,
        last_error: action.last_error.clone().unwrap_or_default(),
        delivered_at: to_optional_timestamp(action.delivered_at),
        created_at: Some(to_timestamp(action.created_at)),
        resolution: action
            .resolution
            .map(|r| r.as_str().to_owned())
            .unwrap_or_default(),
        resolved_at: to_optional_timestamp(action.resolved_at),
        resolved_by: action.resolved_by.clone().unwrap_or_default(),
        timeout_secs: action.timeout_secs,
        lifecycle_transition_type: action.transition.as_str().to_owned(),
    }
}
