//! A project's quota over REST (Ember's own, under Heat's root): its
//! limits with what it uses, and an admin's changes. The URL's project is
//! the one shown (the caller's own, or any for an admin — as every Heat
//! route checks); the engine decides who may change it (admins only).
//!
//! | call | success |
//! |---|---|
//! | `GET /orchestration/v1/{project_id}/quotas` | 200 `{"quota": {project_id, limits: [{name, limit, overridden, used}]}}` |
//! | `PUT /orchestration/v1/{project_id}/quotas` `{"quota": {"limits": {name: n}, "reset": [name]}}` | 200, the same shape |

use std::collections::HashMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::quota_service_client::QuotaServiceClient;
use ember_runtime::ErrorKind;
use serde::Deserialize;
use serde_json::{Value, json};

use super::orchestration::HeatCaller;
use crate::GatewayState;
use crate::error::RestError;

fn client(state: &GatewayState) -> QuotaServiceClient<ember_runtime::in_process::Upstream> {
    QuotaServiceClient::new(state.upstreams.engine.clone())
}

pub async fn show(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(project_id): Path<String>,
) -> Result<Json<Value>, RestError> {
    let quota = client(&state)
        .get_quota(state.internal_request(&caller.identity, pb::GetQuotaRequest { project_id }))
        .await?
        .into_inner();
    Ok(Json(view(&quota)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Change {
    #[serde(default)]
    limits: HashMap<String, i64>,
    #[serde(default)]
    reset: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChangeBody {
    quota: Change,
}

pub async fn set(
    State(state): State<GatewayState>,
    caller: HeatCaller,
    Path(project_id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, RestError> {
    let ChangeBody { quota: change } = serde_json::from_slice(&body).map_err(|error| {
        RestError::new(
            ErrorKind::InvalidInput,
            format!(
                "the body must be {{\"quota\": {{\"limits\": {{name: number}}, \"reset\": [name]}}}}: {error}"
            ),
        )
    })?;
    let quota = client(&state)
        .set_quota(state.internal_request(
            &caller.identity,
            pb::SetQuotaRequest {
                project_id,
                limits: change.limits,
                reset: change.reset,
            },
        ))
        .await?
        .into_inner();
    Ok(Json(view(&quota)))
}

fn view(quota: &pb::ProjectQuota) -> Value {
    let limits: Vec<Value> = quota
        .limits
        .iter()
        .map(|limit| {
            json!({
                "name": limit.name,
                "limit": limit.limit,
                "overridden": limit.overridden,
                "used": limit.used,
            })
        })
        .collect();
    json!({"quota": {"project_id": quota.project_id, "limits": limits}})
}
