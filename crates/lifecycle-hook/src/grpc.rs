//! Thin gRPC handlers for `LifecycleHookService`.

use std::sync::Arc;

use ember_proto::lifecyclehook::v1 as pb;
use ember_runtime::Identity;
use ember_runtime::time::{to_optional_timestamp, to_timestamp};
use tonic::{Request, Response, Status};
use uuid::Uuid;

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

fn parse_uuid(field: &str, value: &str) -> Result<Option<Uuid>, Error> {
    if value.is_empty() {
        return Ok(None);
    }
    Uuid::parse_str(value)
        .map(Some)
        .map_err(|_| Error::InvalidInput(format!("{field} {value:?} is not a UUID")))
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
            cluster_id: parse_uuid("cluster_id", &request.cluster_id)?,
            limit: request.limit,
            marker: parse_uuid("marker", &request.marker)?,
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
    }
}
