//! `NodeService`: thin handlers over the node operations of
//! [`ClusterService`]. Nodes are answered with their profile's name
//! (Senlin's node view shows it).

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use tonic::Request;

use super::cluster_convert as convert;
use super::{Reply, answer};
use crate::clusters::{Adoption, ClusterService, HealthAction, NewNode, NodeUpdate};
use crate::domain::cluster::query::{NODE_SORT_KEYS, NodeQuery, SortKey};
use crate::domain::cluster::{Node, parse_object};
use crate::error::Result;

pub struct NodeHandler {
    service: Arc<ClusterService>,
}

impl NodeHandler {
    pub fn new(service: Arc<ClusterService>) -> Self {
        NodeHandler { service }
    }

    /// `nodes` with their profiles' names.
    async fn named(&self, nodes: &[Node]) -> Result<Vec<pb::Node>> {
        let names = self.service.profile_names(nodes).await?;
        Ok(nodes
            .iter()
            .map(|node| {
                let name = names.get(&node.profile_id).map_or("", String::as_str);
                convert::named_node(node, name)
            })
            .collect())
    }

    async fn named_one(&self, node: &Node) -> Result<pb::Node> {
        let mut named = self.named(std::slice::from_ref(node)).await?;
        Ok(named.pop().unwrap_or_else(|| convert::node(node)))
    }

    /// NODE_CHECK, or NODE_RECOVER with its parameters.
    async fn check_or_recover(
        &self,
        request: Request<pb::NodeActionRequest>,
        health: HealthAction,
    ) -> Reply<pb::NodeActionResponse> {
        answer(
            request,
            |caller, request| async move {
                let params = parse_object("params", &request.params)?;
                let acted = self
                    .service
                    .check_or_recover_node(&caller, &request.node, health, params)
                    .await?;
                self.acted_on(acted).await
            },
            |response| response,
        )
        .await
    }

    /// A node action's answer: its id and the node.
    async fn acted_on(
        &self,
        (node, action): (Node, crate::domain::cluster::ClusterAction),
    ) -> Result<pb::NodeActionResponse> {
        Ok(pb::NodeActionResponse {
            action_id: action.id.to_string(),
            node: Some(self.named_one(&node).await?),
        })
    }
}

#[tonic::async_trait]
impl pb::node_service_server::NodeService for NodeHandler {
    async fn create_node(
        &self,
        request: Request<pb::CreateNodeRequest>,
    ) -> Reply<pb::NodeActionResponse> {
        let subject_token = ember_runtime::identity::SubjectToken::of(&request).cloned();
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
                let created = self
                    .service
                    .create_node_delegating(&caller, subject_token.as_ref(), new)
                    .await?;
                self.acted_on(created).await
            },
            |response| response,
        )
        .await
    }

    async fn get_node(&self, request: Request<pb::GetObjectRequest>) -> Reply<pb::Node> {
        answer(
            request,
            |caller, request| async move {
                let node = self.service.find_node(&caller, &request.id).await?;
                self.named_one(&node).await
            },
            |node| node,
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
                let query = NodeQuery {
                    names: request.names,
                    statuses: request.statuses,
                    sort: SortKey::parse_list(&request.sort, NODE_SORT_KEYS)?,
                    limit: request.limit,
                    marker: convert::marker(&request.marker)?,
                    ..NodeQuery::default()
                };
                let cluster = convert::non_empty(request.cluster);
                let nodes = self
                    .service
                    .list_nodes_matching(&caller, cluster.as_deref(), request.global_project, query)
                    .await?;
                self.named(&nodes).await
            },
            |nodes| pb::ListNodesResponse { nodes },
        )
        .await
    }

    async fn update_node(&self, request: Request<pb::UpdateNodeRequest>) -> Reply<pb::Node> {
        answer(
            request,
            |caller, request| async move {
                let node = self
                    .service
                    .update_node(
                        &caller,
                        &request.id,
                        request.name,
                        request.role,
                        request.tainted,
                        request.protected,
                    )
                    .await?;
                self.named_one(&node).await
            },
            |node| node,
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

    async fn update_node_action(
        &self,
        request: Request<pb::UpdateNodeRequest>,
    ) -> Reply<pb::NodeActionResponse> {
        answer(
            request,
            |caller, request| async move {
                let metadata = match &request.metadata {
                    Some(text) => Some(parse_object("metadata", text)?),
                    None => None,
                };
                let update = NodeUpdate {
                    name: request.name,
                    role: request.role,
                    tainted: request.tainted,
                    protected: request.protected,
                    metadata,
                    profile: request.profile,
                };
                let updated = self
                    .service
                    .update_node_with_action(&caller, &request.id, update)
                    .await?;
                self.acted_on(updated).await
            },
            |response| response,
        )
        .await
    }

    async fn mark_node_unhealthy(
        &self,
        request: Request<pb::MarkNodeUnhealthyRequest>,
    ) -> Reply<pb::Node> {
        answer(
            request,
            |caller, request| async move {
                let node = self
                    .service
                    .mark_node_unhealthy(&caller, &request.node, &request.reason)
                    .await?;
                self.named_one(&node).await
            },
            |node| node,
        )
        .await
    }

    async fn check_node(
        &self,
        request: Request<pb::NodeActionRequest>,
    ) -> Reply<pb::NodeActionResponse> {
        self.check_or_recover(request, HealthAction::Check).await
    }

    async fn recover_node(
        &self,
        request: Request<pb::NodeActionRequest>,
    ) -> Reply<pb::NodeActionResponse> {
        self.check_or_recover(request, HealthAction::Recover).await
    }

    async fn operate_node(
        &self,
        request: Request<pb::NodeOperationRequest>,
    ) -> Reply<pb::NodeActionResponse> {
        answer(
            request,
            |caller, request| async move {
                let params = parse_object("params", &request.params)?;
                let operated = self
                    .service
                    .operate_node(&caller, &request.node, &request.operation, params)
                    .await?;
                self.acted_on(operated).await
            },
            |response| response,
        )
        .await
    }

    async fn adopt_node(&self, request: Request<pb::AdoptNodeRequest>) -> Reply<pb::Node> {
        answer(
            request,
            |caller, request| async move {
                let node = self.service.adopt_node(&caller, adoption(request)?).await?;
                self.named_one(&node).await
            },
            |node| node,
        )
        .await
    }

    async fn preview_adopt_node(
        &self,
        request: Request<pb::AdoptNodeRequest>,
    ) -> Reply<pb::AdoptPreview> {
        answer(
            request,
            |caller, request| async move {
                self.service
                    .preview_adoption(&caller, &adoption(request)?)
                    .await
            },
            |spec| pb::AdoptPreview {
                spec: spec.to_string(),
            },
        )
        .await
    }

    async fn check_node_operation(
        &self,
        request: Request<pb::CheckNodeOperationRequest>,
    ) -> Reply<pb::CheckNodeOperationResponse> {
        answer(
            request,
            |caller, request| async move {
                self.service
                    .check_node_operation(&caller, &request.node, &request.operation)
                    .await
            },
            |check| {
                let (allowed, reason, blockers) = super::convert::dry_run_verdict(&check.blockers);
                pb::CheckNodeOperationResponse {
                    allowed,
                    reason,
                    blockers,
                    break_glass_would_pass: check.break_glass_would_pass,
                }
            },
        )
        .await
    }

    async fn get_node_details(&self, request: Request<pb::GetObjectRequest>) -> Reply<pb::Node> {
        answer(
            request,
            |caller, request| async move {
                let node = self.service.find_node(&caller, &request.id).await?;
                let details = self.service.node_details(&caller, &node).await?;
                Ok(pb::Node {
                    details: details.to_string(),
                    ..self.named_one(&node).await?
                })
            },
            |node| node,
        )
        .await
    }
}

fn adoption(request: pb::AdoptNodeRequest) -> Result<Adoption> {
    Ok(Adoption {
        identity: request.identity,
        type_name: request.r#type,
        name: request.name,
        role: request.role,
        metadata: parse_object("metadata", &request.metadata)?,
        overrides: parse_object("overrides", &request.overrides)?,
        snapshot: request.snapshot,
    })
}
