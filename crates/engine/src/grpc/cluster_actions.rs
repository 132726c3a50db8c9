//! `ActionService`: thin handlers over the cluster actions and events of
//! [`ClusterService`] (Senlin's actions; not the stack actions).

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use tonic::Request;

use super::cluster_convert as convert;
use super::{Reply, answer};
use crate::clusters::ClusterService;
use crate::domain::cluster::ActionStatus;
use crate::domain::cluster::query::{
    ACTION_SORT_KEYS, ActionQuery, EVENT_SORT_KEYS, EventQuery, SortKey,
};
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

    async fn cancel_action(&self, request: Request<pb::GetObjectRequest>) -> Reply<pb::Action> {
        answer(
            request,
            |caller, request| async move { self.service.cancel_action(&caller, &request.id).await },
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
                let statuses = convert::non_empty(request.status)
                    .into_iter()
                    .chain(request.statuses)
                    .map(|text| {
                        ActionStatus::parse(&text).ok_or_else(|| {
                            Error::InvalidInput(format!("Field value {text} is invalid"))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let targets = request
                    .targets
                    .iter()
                    .map(|text| convert::marker(text).map(Option::unwrap_or_default))
                    .collect::<Result<Vec<_>, _>>()?;
                let query = ActionQuery {
                    statuses,
                    names: request.names,
                    kinds: request.actions,
                    targets,
                    sort: SortKey::parse_list(&request.sort, ACTION_SORT_KEYS)?,
                    limit: request.limit,
                    marker: convert::marker(&request.marker)?,
                    ..ActionQuery::default()
                };
                let cluster = convert::non_empty(request.cluster);
                self.service
                    .list_actions(&caller, cluster.as_deref(), request.global_project, query)
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
                let query = EventQuery {
                    obj_id: convert::non_empty(request.obj_id),
                    obj_types: request.obj_types,
                    obj_names: request.obj_names,
                    actions: request.actions,
                    levels: request.levels,
                    sort: SortKey::parse_list(&request.sort, EVENT_SORT_KEYS)?,
                    limit: request.limit,
                    marker: convert::marker(&request.marker)?,
                    ..EventQuery::default()
                };
                let cluster = convert::non_empty(request.cluster);
                self.service
                    .list_events(&caller, cluster.as_deref(), request.global_project, query)
                    .await
            },
            |events| pb::ListClusterEventsResponse {
                events: events.iter().map(convert::event).collect(),
            },
        )
        .await
    }

    async fn get_cluster_event(
        &self,
        request: Request<pb::GetObjectRequest>,
    ) -> Reply<pb::ClusterEvent> {
        answer(
            request,
            |caller, request| async move { self.service.get_event(&caller, &request.id).await },
            |event| convert::event(&event),
        )
        .await
    }
}
