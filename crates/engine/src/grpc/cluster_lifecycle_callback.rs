//! `ClusterLifecycleCallbackService`, internal (served on the engine's own
//! port for lifecycle-hook): lifecycle deadlines that passed, handed to
//! [`ClusterService::continue_after_deadline`].

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use tonic::{Request, Response};

use super::Reply;
use crate::clusters::ClusterService;
use crate::clusters::lifecycle::DeadlineResult;

pub struct ClusterLifecycleCallbackHandler {
    service: Arc<ClusterService>,
}

impl ClusterLifecycleCallbackHandler {
    pub fn new(service: Arc<ClusterService>) -> Self {
        ClusterLifecycleCallbackHandler { service }
    }
}

#[tonic::async_trait]
impl pb::cluster_lifecycle_callback_service_server::ClusterLifecycleCallbackService
    for ClusterLifecycleCallbackHandler
{
    async fn continue_after_deadline(
        &self,
        request: Request<pb::ContinueAfterDeadlineRequest>,
    ) -> Reply<pb::ContinueAfterDeadlineResponse> {
        let results = self
            .service
            .continue_after_deadline(&request.get_ref().tokens)
            .await?;
        let outcomes = results
            .into_iter()
            .map(|result| match result {
                DeadlineResult::Continued => pb::DeadlineOutcome::Continued,
                DeadlineResult::AlreadyCompleted => pb::DeadlineOutcome::AlreadyCompleted,
                DeadlineResult::Unknown => pb::DeadlineOutcome::Unknown,
            } as i32)
            .collect();
        Ok(Response::new(pb::ContinueAfterDeadlineResponse {
            outcomes,
        }))
    }
}
