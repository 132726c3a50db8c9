//! `NodeService`: thin handlers over the node operations of
//! [`ClusterService`].

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use tonic::Request;

use super::cluster_convert as convert;
use super::{Reply, answer};
use crate::clusters::{ClusterService, NewNode};
use crate::domain::cluster::parse_object;

pub struct NodeHandler {
    service: Arc<ClusterService>,
}

impl NodeHandler {
    pub fn new(service: Arc<ClusterService>) -> Self {
        NodeHandler { service }
    }
}

#[tonic::async_trait]
impl pb::node_service_server::NodeService for NodeHandler {
    async fn create_node(
        &self,
        request: Request<pb::CreateNodeRequest>,
    ) -> Reply<pb::NodeActionResponse> {
        answer(
            request,
            |caller, request| async move {
                let new = NewNode {
                    name: request.name,
                    profile: request.profile,
                    cluster: convert::non_empty(request.cluster),
                    role: request.role,
                    metadata: parse_object("metadata", &request.metadata)?,
                };
                self.service.create_node(&caller, new).await
            },
            |(node, action)| pb::NodeActionResponse {
                action_id: action.id.to_string(),
                node: Some(convert::node(&node)),
            },
        )
        .await
    }

    async fn get_node(&self, request: Request<pb::GetObjectRequest>) -> Reply<pb::Node> {
        answer(
            request,
            |caller, request| async move { self.service.find_node(&caller, &request.id).await },
            |node| convert::node(&node),
        )
        .await
    }

    async fn list_nodes(
        &self,
        request: Request<pb::ListNodesRequest>,
    ) -> Reply<pb::ListNodesResponse> {
        answer(
            request,
            |caller, request| async move {
                let cluster = convert::non_empty(request.cluster);
                let marker = convert::marker(&request.marker)?;
                self.service
                    .list_nodes(&caller, cluster.as_deref(), request.limit, marker)
                    .await
            },
            |nodes| pb::ListNodesResponse {
                nodes: nodes.iter().map(convert::node).collect(),
            },
        )
        .await
    }

    async fn update_node(&self, request: Request<pb::UpdateNodeRequest>) -> Reply<pb::Node> {
        answer(
            request,
            |caller, request| async move {
                self.service
                    .update_node(
                        &caller,
                        &request.id,
                        request.name,
                        request.role,
                        request.tainted,
                    )
                    .await
            },
            |node| convert::node(&node),
        )
        .await
    }

    async fn delete_node(
        &self,
        request: Request<pb::GetObjectRequest>,
    ) -> Reply<pb::NodeActionResponse> {
        answer(
            request,
            |caller, request| async move { self.service.delete_node(&caller, &request.id).await },
            |action| pb::NodeActionResponse {
                action_id: action.id.to_string(),
                node: None,
            },
        )
        .await
    }
}
