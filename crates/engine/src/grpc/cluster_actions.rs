//! `ActionService`: thin handlers over the cluster actions and events of
//! [`ClusterService`] (Senlin's actions; not the stack actions).

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use tonic::Request;

use super::cluster_convert as convert;
use super::{Reply, answer};
use crate::clusters::ClusterService;
use crate::domain::cluster::ActionStatus;
use crate::error::Error;

pub struct ClusterActionHandler {
    service: Arc<ClusterService>,
}

impl ClusterActionHandler {
    pub fn new(service: Arc<ClusterService>) -> Self {
        ClusterActionHandler { service }
    }
}

#[tonic::async_trait]
impl pb::action_service_server::ActionService for ClusterActionHandler {
    async fn get_action(&self, request: Request<pb::GetObjectRequest>) -> Reply<pb::Action> {
        answer(
            request,
            |caller, request| async move { self.service.get_action(&caller, &request.id).await },
            |action| convert::action(&action),
        )
        .await
    }

    async fn list_actions(
        &self,
        request: Request<pb::ListActionsRequest>,
    ) -> Reply<pb::ListActionsResponse> {
        answer(
            request,
            |caller, request| async move {
                let status = match request.status.as_str() {
                    "" => None,
                    text => Some(ActionStatus::parse(text).ok_or_else(|| {
                        Error::InvalidInput(format!("status {text:?} is not an action status"))
                    })?),
                };
                let cluster = convert::non_empty(request.cluster);
                let marker = convert::marker(&request.marker)?;
                self.service
                    .list_actions(&caller, cluster.as_deref(), status, request.limit, marker)
                    .await
            },
            |actions| pb::ListActionsResponse {
                actions: actions.iter().map(convert::action).collect(),
            },
        )
        .await
    }

    async fn list_cluster_events(
        &self,
        request: Request<pb::ListClusterEventsRequest>,
    ) -> Reply<pb::ListClusterEventsResponse> {
        answer(
            request,
            |caller, request| async move {
                let cluster = convert::non_empty(request.cluster);
                let marker = convert::marker(&request.marker)?;
                self.service
                    .list_events(
                        &caller,
                        cluster.as_deref(),
                        convert::non_empty(request.obj_id),
                        request.limit,
                        marker,
                    )
                    .await
            },
            |events| pb::ListClusterEventsResponse {
                events: events.iter().map(convert::event).collect(),
            },
        )
        .await
    }
}
