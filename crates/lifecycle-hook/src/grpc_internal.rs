//! Thin handlers for the internal `LifecycleHookInternalService`, called by
//! the engine with the internal credential: record a removal's pending
//! lifecycle actions (then wake the delivery worker), resolve completed
//! ones, and move deadlines on heartbeats. Not forwarded by the gateway.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use ember_proto::lifecyclehook::v1 as pb;
use ember_runtime::Identity;
use ember_runtime::ids::parse_uuid;
use ember_runtime::time::to_timestamp;
use tonic::{Request, Response, Status};

use crate::domain::{DeliveryState, PendingLifecycleAction, Resolution, Target, Transition};
use crate::error::Error;
use crate::store::{HookEvent, PendingActionStore};
use crate::workers::Wake;

pub struct LifecycleHookInternalHandler {
    store: Arc<dyn PendingActionStore>,
    wake: Wake,
}

impl LifecycleHookInternalHandler {
    pub fn new(store: Arc<dyn PendingActionStore>, wake: Wake) -> Self {
        LifecycleHookInternalHandler { store, wake }
    }
}

fn timestamp(field: &str, value: Option<prost_types::Timestamp>) -> Result<DateTime<Utc>, Error> {
    value
        .and_then(|t| DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).unwrap_or(0)))
        .ok_or_else(|| Error::InvalidInput(format!("{field}: give a valid timestamp")))
}

fn new_action(
    action: pb::NewPendingAction,
    now: DateTime<Utc>,
) -> Result<PendingLifecycleAction, Error> {
    let token = parse_uuid("token", &action.token)?;
    let target = action
        .target
        .ok_or_else(|| Error::InvalidInput(format!("action {token}: give a target")))?;
    let target = match pb::TargetType::try_from(target.r#type) {
        Ok(pb::TargetType::Webhook) if !target.url.is_empty() => {
            Target::Webhook { url: target.url }
        }
        Ok(pb::TargetType::Queue) if !target.queue.is_empty() => Target::Queue {
            queue: target.queue,
        },
        _ => {
            return Err(Error::InvalidInput(format!(
                "action {token}: target needs a type and its queue or url"
            )));
        }
    };
    let transition = match action.lifecycle_transition_type.as_str() {
        "" => Transition::Terminating,
        text => Transition::parse(text).ok_or_else(|| {
            Error::InvalidInput(format!(
                "action {token}: lifecycle_transition_type {text:?} must be launching or terminating"
            ))
        })?,
    };
    Ok(PendingLifecycleAction {
        token,
        transition,
        node_id: parse_uuid("node_id", &action.node_id)?,
        resource_id: action.resource_id,
        cluster_id: parse_uuid("cluster_id", &action.cluster_id)?,
        project_id: action.project_id,
        target,
        deadline: timestamp("deadline", action.deadline)?,
        delivery_state: DeliveryState::Pending,
        delivery_attempts: 0,
        last_error: None,
        delivered_at: None,
        created_at: now,
        timeout_secs: action.timeout_secs,
        resolution: None,
        resolved_at: None,
        resolved_by: None,
    })
}

#[tonic::async_trait]
impl pb::lifecycle_hook_internal_service_server::LifecycleHookInternalService
    for LifecycleHookInternalHandler
{
    async fn record_pending_actions(
        &self,
        request: Request<pb::RecordPendingActionsRequest>,
    ) -> Result<Response<pb::RecordPendingActionsResponse>, Status> {
        Identity::of(&request)?;
        let now = ember_runtime::time::now();
        let actions = request
            .into_inner()
            .actions
            .into_iter()
            .map(|action| new_action(action, now))
            .collect::<Result<Vec<_>, _>>()?;
        self.store.record_pending_actions(&actions).await?;
        tracing::info!(count = actions.len(), "pending lifecycle actions recorded");
        self.wake.notify();
        Ok(Response::new(pb::RecordPendingActionsResponse {}))
    }

    async fn resolve_pending_actions(
        &self,
        request: Request<pb::ResolvePendingActionsRequest>,
    ) -> Result<Response<pb::ResolvePendingActionsResponse>, Status> {
        Identity::of(&request)?;
        let request = request.into_inner();
        let resolution = match request.resolution.as_str() {
            "" | "COMPLETED" => Resolution::Completed,
            "EXPIRED" => Resolution::Expired,
            other => {
                return Err(Error::InvalidInput(format!(
                    "resolution {other:?} must be COMPLETED or EXPIRED"
                ))
                .into());
            }
        };
        let tokens = request
            .tokens
            .iter()
            .map(|token| parse_uuid("token", token))
            .collect::<Result<Vec<_>, _>>()?;
        let mut events = Vec::with_capacity(tokens.len());
        for token in &tokens {
            if let Some(action) = self.store.get_pending(*token).await?
                && action.resolution.is_none()
            {
                events.push(HookEvent::about(
                    &action,
                    resolution.as_str(),
                    format!(
                        "{} by {}",
                        resolution.as_str().to_lowercase(),
                        request.resolved_by
                    ),
                ));
            }
        }
        self.store
            .resolve(&tokens, resolution, &request.resolved_by, &events)
            .await?;
        Ok(Response::new(pb::ResolvePendingActionsResponse {}))
    }

    async fn extend_deadline(
        &self,
        request: Request<pb::ExtendDeadlineRequest>,
    ) -> Result<Response<pb::ExtendDeadlineResponse>, Status> {
        Identity::of(&request)?;
        let token = parse_uuid("token", &request.get_ref().token)?;
        match self
            .store
            .extend_deadline(token, ember_runtime::time::now())
            .await
        {
            Ok(action) => {
                self.wake.notify();
                Ok(Response::new(pb::ExtendDeadlineResponse {
                    deadline: Some(to_timestamp(action.deadline)),
                }))
            }
            // The engine tells "already finished" from "unknown" by code.
            Err(Error::Conflict(message)) => Err(Status::failed_precondition(message)),
            Err(other) => Err(other.into()),
        }
    }
}
