//! `PolicyService`: thin handlers over the policy operations of
//! [`ClusterService`].

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use tonic::Request;

use super::cluster_convert as convert;
use super::profiles::{get_type, list_types};
use super::{Reply, answer};
use crate::clusters::ClusterService;
use crate::domain::cluster::query;
use crate::domain::cluster::types;
use crate::error::Error;

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
                let (global_project, query) =
                    convert::object_query(request, query::POLICY_SORT_KEYS)?;
                self.service
                    .list_policies(&caller, global_project, query)
                    .await
            },
            |policies| pb::ListPoliciesResponse {
                policies: policies.iter().map(convert::policy).collect(),
            },
        )
        .await
    }

    async fn update_policy(&self, request: Request<pb::UpdatePolicyRequest>) -> Reply<pb::Policy> {
        answer(
            request,
            |caller, request| async move {
                let name = request
                    .name
                    .ok_or_else(|| Error::InvalidInput("'name' is a required property".into()))?;
                self.service.update_policy(&caller, &request.id, name).await
            },
            |policy| convert::policy(&policy),
        )
        .await
    }

    async fn validate_policy(
        &self,
        request: Request<pb::ValidateSpecRequest>,
    ) -> Reply<pb::Policy> {
        answer(
            request,
            |caller, request| async move {
                let spec = convert::json("spec", &request.spec)?;
                self.service.validate_policy(&caller, spec).await
            },
            |policy| convert::policy(&policy),
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

    async fn list_policy_types(
        &self,
        request: Request<pb::ListTypesRequest>,
    ) -> Reply<pb::ListTypesResponse> {
        list_types(request, types::POLICY_TYPES).await
    }

    async fn get_policy_type(
        &self,
        request: Request<pb::GetTypeRequest>,
    ) -> Reply<pb::TypeDescription> {
        get_type(request, types::POLICY_TYPES, "policy_type").await
    }
}
