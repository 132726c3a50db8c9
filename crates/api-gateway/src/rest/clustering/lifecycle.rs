//! `GET /clustering/v1/clusters/{id}/lifecycle-actions` (Ember's; Senlin
//! has no such call): the cluster's lifecycle actions waiting for
//! `complete_lifecycle`, with what only the lifecycle-hook service knows —
//! the deadline as heartbeats moved it, the transition, the delivery. The
//! cluster is found first as the caller may see it (404 otherwise).

use axum::Json;
use axum::extract::{Path, State};
use ember_proto::engine::v1 as pb;
use ember_proto::lifecyclehook::v1 as hooks;
use ember_proto::lifecyclehook::v1::lifecycle_hook_service_client::LifecycleHookServiceClient;
use serde_json::{Value, json};

use super::views::time;
use crate::GatewayState;
use crate::error::RestError;
use crate::rest::Authenticated;

/// The most waiting actions one answer lists (the service's page size;
/// one scale-in waits on at most as many nodes as the cluster has).
const PAGE: u32 = 1000;

pub async fn pending(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
) -> Result<Json<Value>, RestError> {
    let cluster = super::clusters::client(&state)
        .get_cluster(state.internal_request(&identity, pb::GetObjectRequest { id }))
        .await?
        .into_inner();
    let mut service = LifecycleHookServiceClient::new(state.upstreams.lifecycle_hook.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES);
    let mut actions = Vec::new();
    let mut marker = String::new();
    loop {
        let page = service
            .list_pending(state.internal_request(
                &identity,
                hooks::ListPendingRequest {
                    cluster_id: cluster.id.clone(),
                    limit: PAGE,
                    marker,
                    include_resolved: false,
                },
            ))
            .await?
            .into_inner();
        actions.extend(page.actions.iter().map(view));
        if page.next_marker.is_empty() {
            break;
        }
        marker = page.next_marker;
    }
    Ok(Json(json!({ "lifecycle_actions": actions })))
}

fn view(action: &hooks::PendingLifecycleAction) -> Value {
    let delivery = match hooks::DeliveryState::try_from(action.delivery_state) {
        Ok(hooks::DeliveryState::Pending) => "PENDING",
        Ok(hooks::DeliveryState::Delivered) => "DELIVERED",
        Ok(hooks::DeliveryState::Retrying) => "RETRYING",
        Ok(hooks::DeliveryState::Failed) => "FAILED",
        _ => "UNKNOWN",
    };
    json!({
        "lifecycle_action_token": action.token,
        "node_id": action.node_id,
        "physical_id": action.resource_id,
        "cluster_id": action.cluster_id,
        "lifecycle_transition_type": action.lifecycle_transition_type,
        "deadline": time(action.deadline.as_ref()),
        "timeout": action.timeout_secs,
        "delivery_state": delivery,
        "delivery_attempts": action.delivery_attempts,
        "last_error": (!action.last_error.is_empty()).then_some(&action.last_error),
        "delivered_at": time(action.delivered_at.as_ref()),
        "created_at": time(action.created_at.as_ref()),
    })
}
