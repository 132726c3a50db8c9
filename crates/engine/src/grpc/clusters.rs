//! `ClusterService`: thin handlers over the cluster operations of
//! [`ClusterService`]. A request that changes a cluster records an action
//! and answers with it and the cluster as it is now.

use crate::domain::cluster::policy::LifecycleResult;
use std::future::Future;
use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use ember_runtime::Identity;
use tonic::Request;

use super::cluster_convert as convert;
use super::{Reply, answer};
use crate::clusters::{ClusterService, ClusterUpdate, HealthAction, NewCluster, ResizeRequest};
use crate::domain::cluster::sizing::AdjustmentType;
use crate::domain::cluster::{ClusterAction, parse_object};
use crate::error::Result;

pub struct ClusterHandler {
    service: Arc<ClusterService>,
}

impl ClusterHandler {
    pub fn new(service: Arc<ClusterService>) -> Self {
        ClusterHandler { service }
    }

    /// The shape of every cluster-changing call: `call` records the
    /// action; the answer carries it and the cluster as it is now (none
    /// when the cluster cannot be read, e.g. it is already gone).
    async fn accepted<Message, Call>(
        &self,
        request: Request<Message>,
        call: impl FnOnce(Identity, Message) -> Call,
    ) -> Reply<pb::ClusterActionResponse>
    where
        Call: Future<Output = Result<ClusterAction>>,
    {
        answer(
            request,
            |caller, message| async move {
                let action = call(caller.clone(), message).await?;
                let cluster = match action.cluster_id {
                    Some(id) => self
                        .service
                        .cluster_details(&caller, &id.to_string())
                        .await
                        .ok()
                        .map(|details| convert::cluster(&details)),
                    None => None,
                };
                Ok((action, cluster))
            },
            |(action, cluster)| convert::accepted(&action, cluster),
        )
        .await
    }
}

#[tonic::async_trait]
impl pb::cluster_service_server::ClusterService for ClusterHandler {
    async fn create_cluster(
        &self,
        request: Request<pb::CreateClusterRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        let subject_token = ember_runtime::identity::SubjectToken::of(&request).cloned();
        self.accepted(request, |caller, request| async move {
            let new = NewCluster {
                name: request.name,
                profile: request.profile,
                min_size: request.min_size,
                max_size: request.max_size,
                desired_capacity: request.desired_capacity,
                metadata: parse_object("metadata", &request.metadata)?,
                timeout: request.timeout,
                config: parse_object("config", &request.config)?,
            };
            let (_, action) = self
                .service
                .create_cluster_delegating(&caller, subject_token.as_ref(), new)
                .await?;
            Ok(action)
        })
        .await
    }

    async fn get_cluster(&self, request: Request<pb::GetObjectRequest>) -> Reply<pb::Cluster> {
        answer(
            request,
            |caller, request| async move { self.service.cluster_details(&caller, &request.id).await },
            |details| convert::cluster(&details),
        )
        .await
    }

    async fn list_clusters(
        &self,
        request: Request<pb::ListObjectsRequest>,
    ) -> Reply<pb::ListClustersResponse> {
        let packed = request.get_ref().packed_node_ids;
        answer(
            request,
            |caller, request| async move {
                let (global_project, query) = convert::object_query(
                    request,
                    crate::domain::cluster::query::CLUSTER_SORT_KEYS,
                )?;
                self.service
                    .list_cluster_details(&caller, global_project, query)
                    .await
            },
            |clusters| pb::ListClustersResponse {
                clusters: clusters
                    .iter()
                    .map(if packed {
                        convert::cluster_packed
                    } else {
                        convert::cluster
                    })
                    .collect(),
            },
        )
        .await
    }

    async fn delete_cluster(
        &self,
        request: Request<pb::GetObjectRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        answer(
            request,
            |caller, request| async move { self.service.delete_cluster(&caller, &request.id).await },
            |action| convert::accepted(&action, None),
        )
        .await
    }

    async fn scale_in(
        &self,
        request: Request<pb::ScaleRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        self.accepted(request, |caller, request| async move {
            self.service
                .scale(&caller, &request.cluster, false, request.count)
                .await
        })
        .await
    }

    async fn scale_out(
        &self,
        request: Request<pb::ScaleRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        self.accepted(request, |caller, request| async move {
            self.service
                .scale(&caller, &request.cluster, true, request.count)
                .await
        })
        .await
    }

    async fn resize(
        &self,
        request: Request<pb::ResizeRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        self.accepted(request, |caller, request| async move {
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
            self.service.resize(&caller, &request.cluster, resize).await
        })
        .await
    }

    async fn del_nodes(
        &self,
        request: Request<pb::NodesRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        self.accepted(request, |caller, request| async move {
            self.service
                .change_nodes(
                    &caller,
                    &request.cluster,
                    &request.nodes,
                    false,
                    request.destroy_after_deletion,
                )
                .await
        })
        .await
    }

    async fn add_nodes(
        &self,
        request: Request<pb::NodesRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        self.accepted(request, |caller, request| async move {
            self.service
                .change_nodes(&caller, &request.cluster, &request.nodes, true, None)
                .await
        })
        .await
    }

    async fn attach_policy(
        &self,
        request: Request<pb::AttachPolicyRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        self.accepted(request, |caller, request| async move {
            self.service
                .attach_policy(
                    &caller,
                    &request.cluster,
                    &request.policy,
                    request.priority,
                    request.enabled.unwrap_or(true),
                )
                .await
        })
        .await
    }

    async fn detach_policy(
        &self,
        request: Request<pb::DetachPolicyRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        self.accepted(request, |caller, request| async move {
            self.service
                .detach_policy(&caller, &request.cluster, &request.policy)
                .await
        })
        .await
    }

    async fn list_cluster_policies(
        &self,
        request: Request<pb::GetObjectRequest>,
    ) -> Reply<pb::ListClusterPoliciesResponse> {
        answer(
            request,
            |caller, request| async move {
                let (cluster, bindings) = self
                    .service
                    .list_cluster_policies(&caller, &request.id)
                    .await?;
                Ok((cluster.name, bindings))
            },
            |(cluster_name, bindings)| pb::ListClusterPoliciesResponse {
                policies: bindings
                    .iter()
                    .map(|(binding, policy)| convert::binding(binding, policy, &cluster_name))
                    .collect(),
            },
        )
        .await
    }

    async fn get_cluster_policy(
        &self,
        request: Request<pb::ClusterPolicyRequest>,
    ) -> Reply<pb::ClusterPolicy> {
        answer(
            request,
            |caller, request| async move {
                self.service
                    .cluster_policy(&caller, &request.cluster, &request.policy)
                    .await
            },
            |(cluster, binding, policy)| convert::binding(&binding, &policy, &cluster.name),
        )
        .await
    }

    async fn update_cluster_policy(
        &self,
        request: Request<pb::UpdateClusterPolicyRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        self.accepted(request, |caller, request| async move {
            self.service
                .update_cluster_policy(&caller, &request.cluster, &request.policy, request.enabled)
                .await
        })
        .await
    }

    async fn update_cluster(
        &self,
        request: Request<pb::UpdateClusterRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        self.accepted(request, |caller, request| async move {
            let update = ClusterUpdate {
                name: request.name,
                metadata: request
                    .metadata
                    .as_deref()
                    .map(|text| parse_object("metadata", text))
                    .transpose()?,
                timeout: request.timeout,
                profile: request.profile,
                profile_only: request.profile_only,
                config: request
                    .config
                    .as_deref()
                    .map(|text| parse_object("config", text))
                    .transpose()?,
            };
            let (_, action) = self
                .service
                .update_cluster(&caller, &request.cluster, update)
                .await?;
            Ok(action)
        })
        .await
    }

    async fn replace_nodes(
        &self,
        request: Request<pb::ReplaceNodesRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        self.accepted(request, |caller, request| async move {
            let mut pairs: Vec<(String, String)> = request.nodes.into_iter().collect();
            pairs.sort();
            self.service
                .replace_nodes(&caller, &request.cluster, pairs)
                .await
        })
        .await
    }

    async fn collect_cluster_attributes(
        &self,
        request: Request<pb::CollectRequest>,
    ) -> Reply<pb::CollectResponse> {
        answer(
            request,
            |caller, request| async move {
                self.service
                    .collect(&caller, &request.cluster, &request.path)
                    .await
            },
            |values| pb::CollectResponse {
                values: values
                    .iter()
                    .map(|(node_id, value)| pb::NodeAttribute {
                        node_id: node_id.to_string(),
                        value: value.to_string(),
                    })
                    .collect(),
            },
        )
        .await
    }

    async fn check(
        &self,
        request: Request<pb::GetObjectRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        self.accepted(request, |caller, request| async move {
            self.service
                .check_or_recover(&caller, &request.id, HealthAction::Check)
                .await
        })
        .await
    }

    async fn check_cluster_operation(
        &self,
        request: Request<pb::CheckClusterOperationRequest>,
    ) -> Reply<pb::CheckClusterOperationResponse> {
        answer(
            request,
            |caller, request| async move {
                self.service
                    .check_cluster_operation(
                        &caller,
                        &request.cluster,
                        &request.operation,
                        request.count,
                    )
                    .await
            },
            |check| {
                let (allowed, reason, blockers) = super::convert::dry_run_verdict(&check.blockers);
                pb::CheckClusterOperationResponse {
                    allowed,
                    reason,
                    blockers,
                    maintenance_lock: check
                        .cluster
                        .maintenance_lock
                        .as_ref()
                        .map(super::cluster_convert::cluster_lock),
                    queued_behind: check.queued_behind.iter().map(queued_action).collect(),
                    pending_lifecycle_actions: check
                        .queued_behind
                        .iter()
                        .filter(|action| {
                            action.status
                                == crate::domain::cluster::ActionStatus::WaitingLifecycleCompletion
                        })
                        .map(queued_action)
                        .collect(),
                    break_glass_would_pass: check.break_glass_would_pass,
                    remediation: check
                        .remediation
                        .as_ref()
                        .map(super::cluster_convert::remediation_status),
                }
            },
        )
        .await
    }

    async fn lock_cluster(&self, request: Request<pb::LockClusterRequest>) -> Reply<pb::Cluster> {
        answer(
            request,
            |caller, request| async move {
                let lock = convert::lock_request(&request)?;
                let cluster = self
                    .service
                    .lock_cluster(&caller, &request.cluster, lock)
                    .await?;
                self.service
                    .cluster_details(&caller, &cluster.id.to_string())
                    .await
            },
            |details| convert::cluster(&details),
        )
        .await
    }

    async fn unlock_cluster(&self, request: Request<pb::GetObjectRequest>) -> Reply<pb::Cluster> {
        answer(
            request,
            |caller, request| async move {
                let cluster = self.service.unlock_cluster(&caller, &request.id).await?;
                self.service
                    .cluster_details(&caller, &cluster.id.to_string())
                    .await
            },
            |details| convert::cluster(&details),
        )
        .await
    }

    async fn recover(
        &self,
        request: Request<pb::GetObjectRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        self.accepted(request, |caller, request| async move {
            self.service
                .check_or_recover(&caller, &request.id, HealthAction::Recover)
                .await
        })
        .await
    }

    async fn operate_cluster(
        &self,
        request: Request<pb::ClusterOperationRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        self.accepted(request, |caller, request| async move {
            let params = parse_object("params", &request.params)?;
            let filters = parse_object("filters", &request.filters)?;
            self.service
                .operate_cluster(
                    &caller,
                    &request.cluster,
                    &request.operation,
                    params,
                    filters,
                )
                .await
        })
        .await
    }

    async fn complete_lifecycle(
        &self,
        request: Request<pb::LifecycleTokenRequest>,
    ) -> Reply<pb::ClusterActionResponse> {
        answer(
            request,
            |caller, request| async move {
                let result = if request.lifecycle_action_result.is_empty() {
                    LifecycleResult::Continue
                } else {
                    LifecycleResult::parse(
                        &request.lifecycle_action_result,
                        "lifecycle_action_result",
                    )?
                };
                self.service
                    .complete_lifecycle(
                        &caller,
                        &request.cluster,
                        &request.lifecycle_action_token,
                        result,
                    )
                    .await
            },
            |action| convert::accepted(&action, None),
        )
        .await
    }

    async fn record_lifecycle_heartbeat(
        &self,
        request: Request<pb::LifecycleTokenRequest>,
    ) -> Reply<pb::HeartbeatResponse> {
        answer(
            request,
            |caller, request| async move {
                self.service
                    .record_lifecycle_heartbeat(
                        &caller,
                        &request.cluster,
                        &request.lifecycle_action_token,
                    )
                    .await
            },
            |deadline| pb::HeartbeatResponse {
                deadline: Some(deadline),
            },
        )
        .await
    }
}

/// An action a dry run lists: what, on what, where it stands, since when.
fn queued_action(action: &crate::domain::cluster::ClusterAction) -> pb::QueuedAction {
    pb::QueuedAction {
        id: action.id.to_string(),
        action: action.kind.as_str().to_owned(),
        status: action.status.as_str().to_owned(),
        since: Some(ember_runtime::time::to_timestamp(action.created_at)),
        target: action.target_id.to_string(),
    }
}
