//! `GET …/audit`: the audit trail of maintenance locks — locks, unlocks,
//! refusals, expiries and break-glass on stacks, clusters, nodes and
//! instances — served under Heat's root (`/orchestration/v1/{project_id}/audit`)
//! and Senlin's (`/clustering/v1/audit`) alike. The caller's project's
//! records, newest first; `all_projects=true` for an admin's view of
//! every project. Read-only: nothing in the API changes a record.

use axum::Json;
use axum::extract::{Query, State};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::audit_service_client::AuditServiceClient;
use ember_runtime::{ErrorKind, Identity};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::GatewayState;
use crate::error::RestError;

/// The query a reader may give.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditParams {
    target_type: Option<String>,
    target: Option<String>,
    outcome: Option<String>,
    since: Option<String>,
    until: Option<String>,
    marker: Option<String>,
    limit: Option<u32>,
    all_projects: Option<bool>,
}

fn time(name: &str, text: Option<&str>) -> Result<Option<prost_types::Timestamp>, RestError> {
    text.map(|text| {
        chrono::DateTime::parse_from_rfc3339(text)
            .map(|at| ember_runtime::time::to_timestamp(at.to_utc()))
            .map_err(|error| {
                RestError::new(
                    ErrorKind::InvalidInput,
                    format!("{name}: {text:?} is not an RFC 3339 time ({error})"),
                )
            })
    })
    .transpose()
}

fn record_view(record: pb::AuditRecord) -> Value {
    let text = |value: String| {
        if value.is_empty() {
            Value::Null
        } else {
            value.into()
        }
    };
    json!({
        "id": record.id,
        "at": super::rfc3339(record.at.as_ref(), chrono::SecondsFormat::Micros),
        "project_id": record.project_id,
        "user_id": record.user_id,
        "target_type": record.target_type,
        "target_id": record.target_id,
        "target_name": record.target_name,
        "operation": record.operation,
        "outcome": record.outcome,
        "reason": text(record.reason),
        "blocker": text(record.blocker),
        "request_id": text(record.request_id),
    })
}

/// The records `params` select for `identity`.
pub async fn list(
    state: &GatewayState,
    identity: &Identity,
    params: AuditParams,
) -> Result<Json<Value>, RestError> {
    let request = pb::ListAuditRecordsRequest {
        target_type: params.target_type.unwrap_or_default(),
        target: params.target.unwrap_or_default(),
        outcome: params.outcome.unwrap_or_default(),
        since: time("since", params.since.as_deref())?,
        until: time("until", params.until.as_deref())?,
        marker: params.marker.unwrap_or_default(),
        limit: params.limit.unwrap_or_default(),
        all_projects: params.all_projects.unwrap_or_default(),
    };
    let records = AuditServiceClient::new(state.upstreams.engine.clone())
        .list_audit_records(state.internal_request(identity, request))
        .await?
        .into_inner()
        .records;
    Ok(Json(json!({
        "audit_records": records.into_iter().map(record_view).collect::<Vec<_>>(),
    })))
}

/// `GET /orchestration/v1/{project_id}/audit`.
pub async fn list_in_project(
    State(state): State<GatewayState>,
    caller: super::orchestration::HeatCaller,
    params: Result<Query<AuditParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, RestError> {
    let Query(params) = params.map_err(query_refused)?;
    list(&state, &caller.identity, params).await
}

/// `GET /clustering/v1/audit`.
pub async fn list_for_caller(
    State(state): State<GatewayState>,
    super::Authenticated(identity): super::Authenticated,
    params: Result<Query<AuditParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, RestError> {
    let Query(params) = params.map_err(query_refused)?;
    list(&state, &identity, params).await
}

fn query_refused(rejection: axum::extract::rejection::QueryRejection) -> RestError {
    RestError::new(
        ErrorKind::InvalidInput,
        format!(
            "the query is not one Ember reads (target_type, target, outcome, since, until, marker, limit, all_projects): {}",
            rejection.body_text()
        ),
    )
}
