//! `PolicyService`: thin handlers over the policy operations of
//! [`ClusterService`].

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use tonic::Request;

use super::cluster_convert as convert;
use super::{Reply, answer};
use crate::clusters::ClusterService;

pub struct PolicyHandler {
    service: Arc<ClusterService>,
}

impl PolicyHandler {
    pub fn new(service: Arc<ClusterService>) -> Self {
        PolicyHandler { service }
    }
}

#[tonic::async_trait]
impl pb::policy_service_server::PolicyService for PolicyHandler {
    async fn create_policy(&self, request: Request<pb::CreatePolicyRequest>) -> Reply<pb::Policy> {
        answer(
            request,
            |caller, request| async move {
                let spec = convert::json("spec", &request.spec)?;
                self.service
                    .create_policy(&caller, &request.name, spec)
                    .await
            },
            |policy| convert::policy(&policy),
        )
        .await
    }

    async fn get_policy(&self, request: Request<pb::GetObjectRequest>) -> Reply<pb::Policy> {
        answer(
            request,
            |caller, request| async move { self.service.find_policy(&caller, &request.id).await },
            |policy| convert::policy(&policy),
        )
        .await
    }

    async fn list_policies(
        &self,
        request: Request<pb::ListObjectsRequest>,
    ) -> Reply<pb::ListPoliciesResponse> {
        answer(
            request,
            |caller, request| async move {
                let query = convert::object_query(request)?;
                self.service.list_policies(&caller, query).await
            },
            |policies| pb::ListPoliciesResponse {
                policies: policies.iter().map(convert::policy).collect(),
            },
        )
        .await
    }

    async fn delete_policy(
        &self,
        request: Request<pb::GetObjectRequest>,
    ) -> Reply<pb::DeleteResponse> {
        answer(
            request,
            |caller, request| async move { self.service.delete_policy(&caller, &request.id).await },
            |()| pb::DeleteResponse {},
        )
        .await
    }
}
