//! Thin handlers for the internal `LifecycleHookInternalService`, called by
//! the engine with the internal credential: decode the engine's request
//! into domain values, ask [`PendingActions`] to record, resolve or extend,
//! encode the answer. Not forwarded by the gateway.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use ember_proto::lifecyclehook::v1 as pb;
use ember_runtime::Identity;
use ember_runtime::ids::parse_uuid;
use ember_runtime::time::to_timestamp;
use tonic::{Request, Response, Status};

use crate::domain::{NewPendingAction, Resolution, Target, Transition};
use crate::error::Error;
use crate::pending_actions::PendingActions;

pub struct LifecycleHookInternalHandler {
    pending_actions: Arc<PendingActions>,
}

impl LifecycleHookInternalHandler {
    pub fn new(pending_actions: Arc<PendingActions>) -> Self {
        LifecycleHookInternalHandler { pending_actions }
    }
}

fn timestamp(field: &str, value: Option<prost_types::Timestamp>) -> Result<DateTime<Utc>, Error> {
    value
        .and_then(|t| DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).unwrap_or(0)))
        .ok_or_else(|| Error::InvalidInput(format!("{field}: give a valid timestamp")))
}

fn new_action_from_proto(action: pb::NewPendingAction) -> Result<NewPendingAction, Error> {
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
    // Empty: a deletion policy's hook, the transition the field began with.
    let transition = match action.lifecycle_transition_type.as_str() {
        "" => Transition::Terminating,
        text => Transition::parse(text).ok_or_else(|| {
            Error::InvalidInput(format!(
                "action {token}: lifecycle_transition_type {text:?} must be launching or terminating"
            ))
        })?,
    };
    Ok(NewPendingAction {
        token,
        transition,
        node_id: parse_uuid("node_id", &action.node_id)?,
        resource_id: action.resource_id,
        cluster_id: parse_uuid("cluster_id", &action.cluster_id)?,
        project_id: action.project_id,
        target,
        deadline: timestamp("deadline", action.deadline)?,
        timeout_secs: action.timeout_secs,
    })
}

/// An empty resolution is COMPLETED.
fn resolution_from_proto(text: &str) -> Result<Resolution, Error> {
    match text {
        "" => Ok(Resolution::Completed),
        text => Resolution::parse(text).ok_or_else(|| {
            Error::InvalidInput(format!("resolution {text:?} must be COMPLETED or EXPIRED"))
        }),
    }
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
        let actions = request
            .into_inner()
            .actions
            .into_iter()
            .map(new_action_from_proto)
            .collect::<Result<Vec<_>, _>>()?;
        self.pending_actions.record(actions).await?;
        Ok(Response::new(pb::RecordPendingActionsResponse {}))
    }

    async fn resolve_pending_actions(
        &self,
        request: Request<pb::ResolvePendingActionsRequest>,
    ) -> Result<Response<pb::ResolvePendingActionsResponse>, Status> {
        Identity::of(&request)?;
        let request = request.into_inner();
        let resolution = resolution_from_proto(&request.resolution)?;
        let tokens = request
            .tokens
            .iter()
            .map(|token| parse_uuid("token", token))
            .collect::<Result<Vec<_>, _>>()?;
        self.pending_actions
            .resolve(&tokens, resolution, &request.resolved_by)
            .await?;
        Ok(Response::new(pb::ResolvePendingActionsResponse {}))
    }

    async fn extend_deadline(
        &self,
        request: Request<pb::ExtendDeadlineRequest>,
    ) -> Result<Response<pb::ExtendDeadlineResponse>, Status> {
        Identity::of(&request)?;
        let token = parse_uuid("token", &request.get_ref().token)?;
        match self.pending_actions.extend_deadline(token).await {
            Ok(deadline) => Ok(Response::new(pb::ExtendDeadlineResponse {
                deadline: Some(to_timestamp(deadline)),
            })),
            // The engine tells "already finished" from "unknown" by code.
            Err(Error::Conflict(message)) => Err(Status::failed_precondition(message)),
            Err(other) => Err(other.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto_action() -> pb::NewPendingAction {
        pb::NewPendingAction {
            token: uuid::Uuid::now_v7().to_string(),
            node_id: uuid::Uuid::now_v7().to_string(),
            resource_id: "instance-1".to_owned(),
            cluster_id: uuid::Uuid::now_v7().to_string(),
            project_id: "project-a".to_owned(),
            target: Some(pb::Target {
                r#type: pb::TargetType::Queue as i32,
                queue: "drain".to_owned(),
                url: String::new(),
            }),
            deadline: Some(to_timestamp(ember_runtime::time::now())),
            timeout_secs: 60,
            lifecycle_transition_type: String::new(),
        }
    }

    #[test]
    fn a_new_action_without_transition_is_terminating_and_needs_a_complete_target() {
        let decoded = new_action_from_proto(proto_action()).expect("decoded");
        assert_eq!(decoded.transition, Transition::Terminating);
        assert_eq!(
            decoded.target,
            Target::Queue {
                queue: "drain".to_owned()
            }
        );
        let launching = pb::NewPendingAction {
            lifecycle_transition_type: "launching".to_owned(),
            ..proto_action()
        };
        assert_eq!(
            new_action_from_proto(launching)
                .expect("decoded")
                .transition,
            Transition::Launching
        );
        let webhook_without_url = pb::NewPendingAction {
            target: Some(pb::Target {
                r#type: pb::TargetType::Webhook as i32,
                queue: "drain".to_owned(),
                url: String::new(),
            }),
            ..proto_action()
        };
        match new_action_from_proto(webhook_without_url) {
            Err(Error::InvalidInput(message)) => {
                assert!(
                    message.ends_with("target needs a type and its queue or url"),
                    "{message}"
                );
            }
            other => panic!("a webhook without its url: {other:?}"),
        }
    }

    #[test]
    fn a_resolution_is_completed_unless_expired_is_said() {
        for (text, resolution) in [
            ("", Resolution::Completed),
            ("COMPLETED", Resolution::Completed),
            ("EXPIRED", Resolution::Expired),
        ] {
            assert_eq!(resolution_from_proto(text).expect(text), resolution);
        }
        assert!(matches!(
            resolution_from_proto("DONE"),
            Err(Error::InvalidInput(message)) if message == "resolution \"DONE\" must be COMPLETED or EXPIRED"
        ));
    }
}
