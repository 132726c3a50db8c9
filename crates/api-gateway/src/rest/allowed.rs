//! "Why is this blocked?" — `GET …/allowed?operation=X` on clusters, nodes
//! and instances (the stacks' dry run, `…/actions/{action}/allowed`,
//! answers the same way). Every blocker at once, each as the operation
//! would answer it (its message and status), decided by the very function
//! the operation asks; `reason` is the first, what the call itself would
//! say. Nothing is recorded: asking is not acting.

use axum::Json;
use axum::extract::{Path, Query, State};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::cluster_service_client::ClusterServiceClient;
use ember_proto::engine::v1::instance_service_client::InstanceServiceClient;
use ember_proto::engine::v1::node_service_client::NodeServiceClient;
use ember_runtime::ErrorKind;
use serde::Deserialize;
use serde_json::{Value, json};

use super::Authenticated;
use crate::GatewayState;
use crate::error::RestError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowedParams {
    operation: Option<String>,
    /// For a cluster's scale_out and scale_in.
    count: Option<u32>,
}

impl AllowedParams {
    fn operation(&self) -> Result<String, RestError> {
        self.operation
            .clone()
            .filter(|operation| !operation.is_empty())
            .ok_or_else(|| {
                RestError::new(
                    ErrorKind::InvalidInput,
                    "give the operation to ask about: ?operation=delete (for example)",
                )
            })
    }
}

fn query(
    params: Result<Query<AllowedParams>, axum::extract::rejection::QueryRejection>,
) -> Result<AllowedParams, RestError> {
    params.map(|Query(params)| params).map_err(|rejection| {
        RestError::new(
            ErrorKind::InvalidInput,
            format!(
                "the query is not one Ember reads (operation, count): {}",
                rejection.body_text()
            ),
        )
    })
}

/// The blockers as the REST answer lists them: kind, message and the
/// HTTP status the operation would answer with.
pub fn blockers_view(blockers: &[pb::Blocker]) -> Value {
    blockers
        .iter()
        .map(|blocker| {
            let status = match blocker.code.as_str() {
                "invalid_input" => 400,
                "forbidden" => 403,
                "not_found" => 404,
                "conflict" => 409,
                _ => 500,
            };
            json!({"kind": blocker.kind, "message": blocker.message, "status": status})
        })
        .collect()
}

/// The answer every dry run shares: allowed, the first blocker's message
/// (`null` when allowed) and every blocker.
fn verdict(
    allowed: bool,
    reason: String,
    blockers: &[pb::Blocker],
) -> serde_json::Map<String, Value> {
    let mut answer = serde_json::Map::new();
    answer.insert("allowed".into(), allowed.into());
    answer.insert(
        "reason".into(),
        if reason.is_empty() {
            Value::Null
        } else {
            reason.into()
        },
    );
    answer.insert("blockers".into(), blockers_view(blockers));
    answer
}

/// `GET /clustering/v1/clusters/{id}/allowed?operation=scale_out&count=2`.
pub async fn cluster(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
    params: Result<Query<AllowedParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, RestError> {
    let params = query(params)?;
    let request = pb::CheckClusterOperationRequest {
        cluster: id,
        operation: params.operation()?,
        count: params.count.unwrap_or_default(),
    };
    let check = ClusterServiceClient::new(state.upstreams.engine.clone())
        .check_cluster_operation(state.internal_request(&identity, request))
        .await?
        .into_inner();
    let mut answer = verdict(check.allowed, check.reason, &check.blockers);
    answer.insert(
        "break_glass_would_pass".into(),
        check.break_glass_would_pass.into(),
    );
    answer.insert(
        "maintenance_lock".into(),
        check
            .maintenance_lock
            .as_ref()
            .map_or(Value::Null, super::clustering::views::cluster_lock),
    );
    answer.insert(
        "queued_behind".into(),
        check.queued_behind.iter().map(queued_action).collect(),
    );
    answer.insert(
        "remediation".into(),
        check
            .remediation
            .as_ref()
            .map_or(Value::Null, super::clustering::views::remediation),
    );
    answer.insert(
        "pending_lifecycle_actions".into(),
        check
            .pending_lifecycle_actions
            .iter()
            .map(queued_action)
            .collect(),
    );
    Ok(Json(Value::Object(answer)))
}

fn queued_action(action: &pb::QueuedAction) -> Value {
    json!({
        "id": action.id,
        "action": action.action,
        "target": action.target,
        "status": action.status,
        "since": action.since.as_ref()
            .and_then(|at| chrono::DateTime::from_timestamp(at.seconds, 0))
            .map(|at| at.to_rfc3339()),
    })
}

/// `GET /clustering/v1/nodes/{id}/allowed?operation=delete`.
pub async fn node(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(id): Path<String>,
    params: Result<Query<AllowedParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, RestError> {
    let params = query(params)?;
    let request = pb::CheckNodeOperationRequest {
        node: id,
        operation: params.operation()?,
    };
    let check = NodeServiceClient::new(state.upstreams.engine.clone())
        .check_node_operation(state.internal_request(&identity, request))
        .await?
        .into_inner();
    let mut answer = verdict(check.allowed, check.reason, &check.blockers);
    answer.insert(
        "break_glass_would_pass".into(),
        check.break_glass_would_pass.into(),
    );
    Ok(Json(Value::Object(answer)))
}

/// `GET /compute/v1/instances/{uuid}/allowed?operation=delete`.
pub async fn instance(
    State(state): State<GatewayState>,
    Authenticated(identity): Authenticated,
    Path(uuid): Path<String>,
    params: Result<Query<AllowedParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, RestError> {
    let params = query(params)?;
    let request = pb::CheckInstanceOperationRequest {
        uuid,
        operation: params.operation()?,
    };
    let check = InstanceServiceClient::new(state.upstreams.engine.clone())
        .check_instance_operation(state.internal_request(&identity, request))
        .await?
        .into_inner();
    Ok(Json(Value::Object(verdict(
        check.allowed,
        check.reason,
        &check.blockers,
    ))))
}
