//! Thin handlers for the clustering services (`ProfileService`,
//! `PolicyService`, `ClusterService`, `NodeService`, `ActionService`) and
//! the internal `ClusterLifecycleCallbackService`: decode, call
//! [`crate::clusters::ClusterService`] with the caller's identity, encode.

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use ember_runtime::Identity;
use tonic::{Request, Response, Status};

use super::cluster_convert as convert;
use crate::clusters::lifecycle::DeadlineResult;
use crate::clusters::{ClusterService, NewCluster, NewNode, ResizeRequest};
use crate::domain::cluster::sizing::AdjustmentType;
use crate::domain::cluster::{ActionStatus, ClusterAction, parse_object};
use crate::error::Error;
use crate::store::clusters::ObjectQuery;

type Reply<T> = Result<Response<T>, Status>;

#[derive(Clone)]
pub struct ClusteringHandler {
    service: Arc<ClusterService>,
}

impl ClusteringHandler {
    pub fn new(service: Arc<ClusterService>) -> Self {
        ClusteringHandler { service }
    }

    async fn cluster_reply(
        &self,
        caller: &Identity,
        action: &ClusterAction,
    ) -> Reply<pb::ClusterActionResponse> {
        let cluster = match action.cluster_id {
            Some(id) => self.cluster_view(caller, &id.to_string()).await.ok(),
            None => None,
        };
        Ok(Response::new(pb::ClusterActionResponse {
            action_id: action.id.to_string(),
            cluster,
        }))
    }

    async fn cluster_view(
        &self,
        caller: &Identity,
        name_or_id: &str,
    ) -> Result<pb::Cluster, Error> {
        let cluster = self.service.find_cluster(caller, name_or_id).await?;
        let profile_name = self
            .service
            .store()
            .get_profile(cluster.profile_id)
            .await?
            .map(|p| p.name)
            .unwrap_or_default();
        let nodes = self
            .service
            .cluster_members(caller, &cluster.id.to_string())
            .await?;
        let policies: Vec<_> = self
            .service
            .store()
            .list_bindings(cluster.id)
            .await?
            .into_iter()
            .map(|(b, _)| b.policy_id)
            .collect();
        Ok(convert::cluster(&cluster, &profile_name, &nodes, &policies))
    }
}

fn object_query(request: pb::ListObjectsRequest) -> Result<ObjectQuery, Error> {
    Ok(ObjectQuery {
        project_id: None,
        name: convert::non_empty(request.name),
        limit: request.limit,
        marker: convert::marker(&request.marker)?,
    })
}

#[tonic::async_trait]
impl pb::profile_service_server::ProfileService for ClusteringHandler {
    async fn create_profile(
        &self,
        request: Request<pb::CreateProfileRequest>,
    ) -> Reply<pb::Profile> {
        let caller = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let spec = convert::json("spec", &request.spec)?;
        let metadata = parse_object("metadata", &request.metadata)?;
        Ok(Response::new(convert::profile(
            &self
                .service
                .create_profile(&caller, &request.name, spec, metadata)
                .await?,
        )))
    }

    async fn get_profile(&self, request: Request<pb::GetObjectRequest>) -> Reply<pb::Profile> {
        let caller = Identity::of(&request)?.clone();
        Ok(Response::new(convert::profile(
            &self
                .service
                .find_profile(&caller, &request.get_ref().id)
                .await?,
        )))
    }

    async fn list_profiles(
        &self,
        request: Request<pb::ListObjectsRequest>,
    ) -> Reply<pb::ListProfilesResponse> {
        let caller = Identity::of(&request)?.clone();
        let profiles = self
            .service
            .list_profiles(&caller, object_query(request.into_inner())?)
            .await?;
        Ok(Response::new(pb::ListProfilesResponse {
            profiles: profiles.iter().map(convert::profile).collect(),
        }))
    }

    async fn delete_profile(
        &self,
        request: Request<pb::GetObjectRequest>,
    ) -> Reply<pb::DeleteResponse> {
        let caller = Identity::of(&request)?.clone();
        self.service
            .delete_profile(&caller, &request.get_ref().id)
            .await?;
        Ok(Response::new(pb::DeleteResponse {}))
    }
}

#[tonic::async_trait]
impl pb::policy_service_server::PolicyService for ClusteringHandler {
    async fn create_policy(&self, request: Request<pb::CreatePolicyRequest>) -> Reply<pb::Policy> {
        let caller = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let spec = convert::json("spec", &request.spec)?;
        Ok(Response::new(convert::policy(
            &self
                .service
                .create_policy(&caller, &request.name, spec)
                .await?,
        )))
    }

    async fn get_policy(&self, request: Request<pb::GetObjectRequest>) -> Reply<pb::Policy> {
        let caller = Identity::of(&request)?.clone();
        Ok(Response::new(convert::policy(
            &self
                .service
                .find_policy(&caller, &request.get_ref().id)
                .await?,
        )))
    }

    async fn list_policies(
        &self,
        request: Request<pb::ListObjectsRequest>,
    ) -> Reply<pb::ListPoliciesResponse> {
        let caller = Identity::of(&request)?.clone();
        let policies = self
            .service
            .list_policies(&caller, object_query(request.into_inner())?)
            .await?;
        Ok(Response::new(pb::ListPoliciesResponse {
            policies: policies.iter().map(convert::policy).collect(),
        }))
    }

    async fn delete_policy(
        &self,
        request: Request<pb::GetObjectRequest>,
    ) -> Reply<pb::DeleteResponse> {
        let caller = Identity::of(&request)?.clone();
        self.service
            .delete_policy(&caller, &request.get_ref().id)
            .await?;
        Ok(Response::new(pb::DeleteResponse {}))
    }
}

#[tonic::async_trait]
impl pb::cluster_service_server::ClusterService for ClusteringHandler {
    async fn create_cluster(
        &self,
        request: Request<pb::CreateClusterRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        let caller = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let new = NewCluster {
            name: request.name,
            profile: request.profile,
            min_size: request.min_size,
            max_size: request.max_size,
            desired_capacity: request.desired_capacity,
            metadata: parse_object("metadata", &request.metadata)?,
        };
        let (_, action) = self.service.create_cluster(&caller, new).await?;
        self.cluster_reply(&caller, &action).await
    }

    async fn get_cluster(&self, request: Request<pb::GetObjectRequest>) -> Reply<pb::Cluster> {
        let caller = Identity::of(&request)?.clone();
        Ok(Response::new(
            self.cluster_view(&caller, &request.get_ref().id).await?,
        ))
    }

    async fn list_clusters(
        &self,
        request: Request<pb::ListObjectsRequest>,
    ) -> Reply<pb::ListClustersResponse> {
        let caller = Identity::of(&request)?.clone();
        let clusters = self
            .service
            .list_clusters(&caller, object_query(request.into_inner())?)
            .await?;
        let mut views = Vec::with_capacity(clusters.len());
        for cluster in clusters {
            views.push(self.cluster_view(&caller, &cluster.id.to_string()).await?);
        }
        Ok(Response::new(pb::ListClustersResponse { clusters: views }))
    }

    async fn delete_cluster(
        &self,
        request: Request<pb::GetObjectRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        let caller = Identity::of(&request)?.clone();
        let action = self
            .service
            .delete_cluster(&caller, &request.get_ref().id)
            .await?;
        Ok(Response::new(pb::ClusterActionResponse {
            action_id: action.id.to_string(),
            cluster: None,
        }))
    }

    async fn scale_in(
        &self,
        request: Request<pb::ScaleRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        let caller = Identity::of(&request)?.clone();
        let action = self
            .service
            .scale(
                &caller,
                &request.get_ref().cluster,
                false,
                request.get_ref().count,
            )
            .await?;
        self.cluster_reply(&caller, &action).await
    }

    async fn scale_out(
        &self,
        request: Request<pb::ScaleRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        let caller = Identity::of(&request)?.clone();
        let action = self
            .service
            .scale(
                &caller,
                &request.get_ref().cluster,
                true,
                request.get_ref().count,
            )
            .await?;
        self.cluster_reply(&caller, &action).await
    }

    async fn resize(
        &self,
        request: Request<pb::ResizeRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        let caller = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let adjustment = if request.adjustment_type.is_empty() {
            None
        } else {
            Some((
                AdjustmentType::parse(&request.adjustment_type)?,
                request.number,
            ))
        };
        let resize = ResizeRequest {
            adjustment,
            min_size: request.min_size,
            max_size: request.max_size,
            min_step: request.min_step,
            strict: request.strict,
        };
        let action = self
            .service
            .resize(&caller, &request.cluster, resize)
            .await?;
        self.cluster_reply(&caller, &action).await
    }

    async fn del_nodes(
        &self,
        request: Request<pb::NodesRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        let caller = Identity::of(&request)?.clone();
        let action = self
            .service
            .change_nodes(
                &caller,
                &request.get_ref().cluster,
                &request.get_ref().nodes,
                false,
            )
            .await?;
        self.cluster_reply(&caller, &action).await
    }

    async fn add_nodes(
        &self,
        request: Request<pb::NodesRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        let caller = Identity::of(&request)?.clone();
        let action = self
            .service
            .change_nodes(
                &caller,
                &request.get_ref().cluster,
                &request.get_ref().nodes,
                true,
            )
            .await?;
        self.cluster_reply(&caller, &action).await
    }

    async fn attach_policy(
        &self,
        request: Request<pb::AttachPolicyRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        let caller = Identity::of(&request)?.clone();
        let r = request.get_ref();
        let action = self
            .service
            .attach_policy(
                &caller,
                &r.cluster,
                &r.policy,
                r.priority,
                r.enabled.unwrap_or(true),
            )
            .await?;
        self.cluster_reply(&caller, &action).await
    }

    async fn detach_policy(
        &self,
        request: Request<pb::DetachPolicyRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        let caller = Identity::of(&request)?.clone();
        let action = self
            .service
            .detach_policy(
                &caller,
                &request.get_ref().cluster,
                &request.get_ref().policy,
            )
            .await?;
        self.cluster_reply(&caller, &action).await
    }

    async fn list_cluster_policies(
        &self,
        request: Request<pb::GetObjectRequest>,
    ) -> Reply<pb::ListClusterPoliciesResponse> {
        let caller = Identity::of(&request)?.clone();
        let bindings = self
            .service
            .list_cluster_policies(&caller, &request.get_ref().id)
            .await?;
        Ok(Response::new(pb::ListClusterPoliciesResponse {
            policies: bindings
                .iter()
                .map(|(b, p)| convert::binding(b, p))
                .collect(),
        }))
    }

    async fn check(
        &self,
        request: Request<pb::GetObjectRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        let caller = Identity::of(&request)?.clone();
        let action = self
            .service
            .check_or_recover(&caller, &request.get_ref().id, false)
            .await?;
        self.cluster_reply(&caller, &action).await
    }

    async fn recover(
        &self,
        request: Request<pb::GetObjectRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        let caller = Identity::of(&request)?.clone();
        let action = self
            .service
            .check_or_recover(&caller, &request.get_ref().id, true)
            .await?;
        self.cluster_reply(&caller, &action).await
    }

    async fn complete_lifecycle(
        &self,
        request: Request<pb::LifecycleTokenRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        let caller = Identity::of(&request)?.clone();
        let r = request.get_ref();
        let action = self
            .service
            .complete_lifecycle(&caller, &r.cluster, &r.lifecycle_action_token)
            .await?;
        Ok(Response::new(pb::ClusterActionResponse {
            action_id: action.id.to_string(),
            cluster: None,
        }))
    }

    async fn record_lifecycle_heartbeat(
        &self,
        request: Request<pb::LifecycleTokenRequest>,
    ) -> Reply<pb::HeartbeatResponse> {
        let caller = Identity::of(&request)?.clone();
        let r = request.get_ref();
        let deadline = self
            .service
            .record_lifecycle_heartbeat(&caller, &r.cluster, &r.lifecycle_action_token)
            .await?;
        Ok(Response::new(pb::HeartbeatResponse {
            deadline: Some(deadline),
        }))
    }
}

#[tonic::async_trait]
impl pb::node_service_server::NodeService for ClusteringHandler {
    async fn create_node(
        &self,
        request: Request<pb::CreateNodeRequest>,
    ) -> Reply<pb::NodeActionResponse> {
        let caller = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let new = NewNode {
            name: request.name,
            profile: request.profile,
            cluster: convert::non_empty(request.cluster),
            role: request.role,
            metadata: parse_object("metadata", &request.metadata)?,
        };
        let (node, action) = self.service.create_node(&caller, new).await?;
        Ok(Response::new(pb::NodeActionResponse {
            action_id: action.id.to_string(),
            node: Some(convert::node(&node)),
        }))
    }

    async fn get_node(&self, request: Request<pb::GetObjectRequest>) -> Reply<pb::Node> {
        let caller = Identity::of(&request)?.clone();
        Ok(Response::new(convert::node(
            &self
                .service
                .find_node(&caller, &request.get_ref().id)
                .await?,
        )))
    }

    async fn list_nodes(
        &self,
        request: Request<pb::ListNodesRequest>,
    ) -> Reply<pb::ListNodesResponse> {
        let caller = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let cluster = convert::non_empty(request.cluster);
        let nodes = self
            .service
            .list_nodes(
                &caller,
                cluster.as_deref(),
                request.limit,
                convert::marker(&request.marker)?,
            )
            .await?;
        Ok(Response::new(pb::ListNodesResponse {
            nodes: nodes.iter().map(convert::node).collect(),
        }))
    }

    async fn update_node(&self, request: Request<pb::UpdateNodeRequest>) -> Reply<pb::Node> {
        let caller = Identity::of(&request)?.clone();
        let r = request.into_inner();
        Ok(Response::new(convert::node(
            &self
                .service
                .update_node(&caller, &r.id, r.name, r.role, r.tainted)
                .await?,
        )))
    }

    async fn delete_node(
        &self,
        request: Request<pb::GetObjectRequest>,
    ) -> Reply<pb::NodeActionResponse> {
        let caller = Identity::of(&request)?.clone();
        let action = self
            .service
            .delete_node(&caller, &request.get_ref().id)
            .await?;
        Ok(Response::new(pb::NodeActionResponse {
            action_id: action.id.to_string(),
            node: None,
        }))
    }
}

#[tonic::async_trait]
impl pb::action_service_server::ActionService for ClusteringHandler {
    async fn get_action(&self, request: Request<pb::GetObjectRequest>) -> Reply<pb::Action> {
        let caller = Identity::of(&request)?.clone();
        Ok(Response::new(convert::action(
            &self
                .service
                .get_action(&caller, &request.get_ref().id)
                .await?,
        )))
    }

    async fn list_actions(
        &self,
        request: Request<pb::ListActionsRequest>,
    ) -> Reply<pb::ListActionsResponse> {
        let caller = Identity::of(&request)?.clone();
        let r = request.into_inner();
        let status = match r.status.as_str() {
            "" => None,
            text => Some(ActionStatus::parse(text).ok_or_else(|| {
                Error::InvalidInput(format!("status {text:?} is not an action status"))
            })?),
        };
        let cluster = convert::non_empty(r.cluster);
        let actions = self
            .service
            .list_actions(
                &caller,
                cluster.as_deref(),
                status,
                r.limit,
                convert::marker(&r.marker)?,
            )
            .await?;
        Ok(Response::new(pb::ListActionsResponse {
            actions: actions.iter().map(convert::action).collect(),
        }))
    }

    async fn list_cluster_events(
        &self,
        request: Request<pb::ListClusterEventsRequest>,
    ) -> Reply<pb::ListClusterEventsResponse> {
        let caller = Identity::of(&request)?.clone();
        let r = request.into_inner();
        let cluster = convert::non_empty(r.cluster);
        let events = self
            .service
            .list_events(
                &caller,
                cluster.as_deref(),
                convert::non_empty(r.obj_id),
                r.limit,
                convert::marker(&r.marker)?,
            )
            .await?;
        Ok(Response::new(pb::ListClusterEventsResponse {
            events: events.iter().map(convert::event).collect(),
        }))
    }
}

#[tonic::async_trait]
impl pb::cluster_lifecycle_callback_service_server::ClusterLifecycleCallbackService
    for ClusteringHandler
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
