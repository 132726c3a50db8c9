//! `QuotaService`: a project's limits and use, and setting them (admins).

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::quota_service_server::QuotaService;
use ember_runtime::Identity;
use tonic::{Request, Response, Status};

use crate::domain::quota::QuotaKind;
use crate::quotas::{QuotaReport, Quotas};

pub struct QuotaHandler {
    quotas: Arc<Quotas>,
}

impl QuotaHandler {
    pub fn new(quotas: Arc<Quotas>) -> QuotaHandler {
        QuotaHandler { quotas }
    }
}

fn report_to_proto(report: QuotaReport) -> pb::ProjectQuota {
    pb::ProjectQuota {
        limits: QuotaKind::ALL
            .into_iter()
            .map(|kind| pb::QuotaLimit {
                name: kind.as_str().to_owned(),
                limit: report.limits.get(kind),
                overridden: report.overridden.contains(&kind),
                used: report
                    .usage
                    .iter()
                    .find(|(counted, _)| *counted == kind)
                    .map(|(_, used)| *used),
            })
            .collect(),
        project_id: report.project_id,
    }
}

#[tonic::async_trait]
impl QuotaService for QuotaHandler {
    async fn get_quota(
        &self,
        request: Request<pb::GetQuotaRequest>,
    ) -> Result<Response<pb::ProjectQuota>, Status> {
        let identity = Identity::of(&request)?.clone();
        let report = self
            .quotas
            .show(&identity, Some(&request.get_ref().project_id))
            .await?;
        Ok(Response::new(report_to_proto(report)))
    }

    async fn set_quota(
        &self,
        request: Request<pb::SetQuotaRequest>,
    ) -> Result<Response<pb::ProjectQuota>, Status> {
        let identity = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let limits: Vec<(String, i64)> = request.limits.into_iter().collect();
        let report = self
            .quotas
            .set(&identity, &request.project_id, &limits, &request.reset)
            .await?;
        Ok(Response::new(report_to_proto(report)))
    }
}
