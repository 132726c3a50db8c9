//! `MaintenanceService`: an admin's purge of old records (see
//! `crate::retention`).

use std::sync::Arc;
use std::time::Duration;

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::maintenance_service_server::MaintenanceService;
use ember_runtime::Identity;
use tonic::{Request, Response, Status};

use crate::retention::Retention;

pub struct MaintenanceHandler {
    retention: Arc<Retention>,
}

impl MaintenanceHandler {
    pub fn new(retention: Arc<Retention>) -> MaintenanceHandler {
        MaintenanceHandler { retention }
    }
}

#[tonic::async_trait]
impl MaintenanceService for MaintenanceHandler {
    async fn purge(
        &self,
        request: Request<pb::PurgeRequest>,
    ) -> Result<Response<pb::PurgeResponse>, Status> {
        let identity = Identity::of(&request)?.clone();
        let older_than = request.get_ref().older_than_seconds;
        if older_than == 0 {
            return Err(Status::invalid_argument(
                "older_than_seconds: give an age of at least 1 second (everything deleted or ended before then is purged)",
            ));
        }
        let purged = self
            .retention
            .purge_now(&identity, Duration::from_secs(older_than))
            .await?;
        Ok(Response::new(pb::PurgeResponse {
            stacks: purged.stacks,
            cluster_actions: purged.cluster_actions,
            cluster_events: purged.cluster_events,
            instances: purged.instances,
        }))
    }
}
