//! `AuditService`: reading the audit trail (see `crate::audit`).

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::audit_service_server::AuditService;
use ember_runtime::ids::parse_optional_uuid;
use tonic::Request;

use super::{Reply, answer};
use crate::audit::AuditTrail;
use crate::domain::audit::{AuditOutcome, AuditQuery, AuditRecord, AuditTarget};
use crate::error::{Error, Result};
use ember_runtime::time::to_timestamp;

pub struct AuditHandler {
    trail: Arc<AuditTrail>,
}

impl AuditHandler {
    pub fn new(trail: Arc<AuditTrail>) -> AuditHandler {
        AuditHandler { trail }
    }
}

/// What a request asks for, checked.
fn query_of(request: &pb::ListAuditRecordsRequest) -> Result<AuditQuery> {
    let time = |name: &str, at: &Option<prost_types::Timestamp>| {
        at.as_ref()
            .map(|at| {
                chrono::DateTime::from_timestamp(at.seconds, u32::try_from(at.nanos).unwrap_or(0))
                    .ok_or_else(|| Error::InvalidInput(format!("{name}: not a time")))
            })
            .transpose()
    };
    let text = |value: &str| (!value.is_empty()).then(|| value.to_owned());
    Ok(AuditQuery {
        project_id: None,
        target: text(&request.target_type)
            .map(|name| AuditTarget::parse(&name))
            .transpose()?,
        target_id: text(&request.target),
        outcome: text(&request.outcome)
            .map(|name| AuditOutcome::parse(&name))
            .transpose()?,
        since: time("since", &request.since)?,
        until: time("until", &request.until)?,
        marker: parse_optional_uuid("marker", &request.marker)?,
        limit: u64::from(request.limit),
    })
}

fn record_to_proto(record: AuditRecord) -> pb::AuditRecord {
    pb::AuditRecord {
        id: record.id.to_string(),
        at: Some(to_timestamp(record.at)),
        project_id: record.project_id,
        user_id: record.user_id,
        target_type: record.target.as_str().to_owned(),
        target_id: record.target_id,
        target_name: record.target_name,
        operation: record.operation,
        outcome: record.outcome.as_str().to_owned(),
        reason: record.reason,
        blocker: record.blocker,
        request_id: record.request_id,
    }
}

#[tonic::async_trait]
impl AuditService for AuditHandler {
    async fn list_audit_records(
        &self,
        request: Request<pb::ListAuditRecordsRequest>,
    ) -> Reply<pb::ListAuditRecordsResponse> {
        answer(
            request,
            |caller, request| async move {
                let query = query_of(&request)?;
                self.trail.list(&caller, query, request.all_projects).await
            },
            |records| pb::ListAuditRecordsResponse {
                records: records.into_iter().map(record_to_proto).collect(),
            },
        )
        .await
    }
}
