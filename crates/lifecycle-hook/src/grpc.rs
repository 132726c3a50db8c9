//! Thin gRPC handlers for `LifecycleHookService`.

use std::sync::Arc;

use ember_proto::lifecyclehook::v1 as pb;
use ember_runtime::Identity;
use ember_runtime::ids::parse_optional_uuid;
use ember_runtime::time::{to_optional_timestamp, to_timestamp};
use tonic::{Request, Response, Status};

use crate::domain::{DeliveryState, PendingLifecycleAction, Target};
use crate::error::Error;
use crate::store::{PendingActionStore, PendingListQuery};

pub struct LifecycleHookHandler {
    store: Arc<dyn PendingActionStore>,
}

impl LifecycleHookHandler {
    pub fn new(store: Arc<dyn PendingActionStore>) -> Self {
        LifecycleHookHandler { store }
    }
}

#[tonic::async_trait]
impl pb::lifecycle_hook_service_server::LifecycleHookService for LifecycleHookHandler {
    async fn list_pending(
        &self,
        request: Request<pb::ListPendingRequest>,
    ) -> Result<Response<pb::ListPendingResponse>, Status> {
        let identity = Identity::of(&request)?;
        // Admins see every project's pending actions, others only their own.
        let project_id = (!identity.is_admin()).then(|| identity.project_id.clone());
        let request = request.into_inner();
        let query = PendingListQuery {
            project_id,
            cluster_id: parse_optional_uuid("cluster_id", &request.cluster_id)?,
            limit: request.limit,
            marker: parse_optional_uuid("marker", &request.marker)?,
            include_resolved: request.include_resolved,
        };
        let actions = self.store.list_pending(&query).await?;
        let next_marker = if actions.len() == query.page_size() as usize {
            actions
                .last()
                .map(|action| action.token.to_string())
                .unwrap_or_default()
        } else {
            String::new()
        };
        Ok(Response::new(pb::ListPendingResponse {
            actions: actions.iter().map(action_to_proto).collect(),
            next_marker,
        }))
    }

    async fn list_queue_messages(
        &self,
        request: Request<pb::ListQueueMessagesRequest>,
    ) -> Result<Response<pb::ListQueueMessagesResponse>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        if request.queue.is_empty() {
            return Err(Error::InvalidInput("queue: give a queue name".into()).into());
        }
        // A queue belongs to a project: the caller's, unless an admin names
        // another.
        let project_id = match request.project_id.as_str() {
            "" => identity.project_id.clone(),
            own if own == identity.project_id => identity.project_id.clone(),
            other if identity.is_admin() => other.to_owned(),
            other => {
                return Err(Error::Forbidden(format!(
                    "project_id {:?}: only an admin may read another project's queues",
                    ember_runtime::quote::quoted(other)
                ))
                .into());
            }
        };
        let after_id = i64::try_from(request.after_id).map_err(|_| {
            Error::InvalidInput(format!("after_id {} is too large", request.after_id))
        })?;
        let limit = u64::from(match request.limit {
            0 => 100,
            limit => limit.min(1000),
        });
        let messages = self
            .store
            .list_queue_messages(&project_id, &request.queue, after_id, limit)
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
        let identity = Identity::of(&request)?;
        let project_id = (!identity.is_admin()).then(|| identity.project_id.clone());
        let request = request.into_inner();
        let limit = u64::from(match request.limit {
            0 => 100,
            limit => limit.min(1000),
        });
        let events = self
            .store
            .list_events(
                project_id.as_deref(),
                parse_optional_uuid("cluster_id", &request.cluster_id)?,
                parse_optional_uuid("token", &request.token)?,
                limit,
            )
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
