//! `ProfileService`: thin handlers over the profile operations of
//! [`ClusterService`].

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use tonic::Request;

use super::cluster_convert as convert;
use super::{Reply, answer};
use crate::clusters::ClusterService;
use crate::domain::cluster::parse_object;

pub struct ProfileHandler {
    service: Arc<ClusterService>,
}

impl ProfileHandler {
    pub fn new(service: Arc<ClusterService>) -> Self {
        ProfileHandler { service }
    }
}

#[tonic::async_trait]
impl pb::profile_service_server::ProfileService for ProfileHandler {
    async fn create_profile(
        &self,
        request: Request<pb::CreateProfileRequest>,
    ) -> Reply<pb::Profile> {
        answer(
            request,
            |caller, request| async move {
                let spec = convert::json("spec", &request.spec)?;
                let metadata = parse_object("metadata", &request.metadata)?;
                self.service
                    .create_profile(&caller, &request.name, spec, metadata)
                    .await
            },
            |profile| convert::profile(&profile),
        )
        .await
    }

    async fn get_profile(&self, request: Request<pb::GetObjectRequest>) -> Reply<pb::Profile> {
        answer(
            request,
            |caller, request| async move { self.service.find_profile(&caller, &request.id).await },
            |profile| convert::profile(&profile),
        )
        .await
    }

    async fn list_profiles(
        &self,
        request: Request<pb::ListObjectsRequest>,
    ) -> Reply<pb::ListProfilesResponse> {
        answer(
            request,
            |caller, request| async move {
                let query = convert::object_query(request)?;
                self.service.list_profiles(&caller, query).await
            },
            |profiles| pb::ListProfilesResponse {
                profiles: profiles.iter().map(convert::profile).collect(),
            },
        )
        .await
    }

    async fn delete_profile(
        &self,
        request: Request<pb::GetObjectRequest>,
    ) -> Reply<pb::DeleteResponse> {
        answer(
            request,
            |caller, request| async move { self.service.delete_profile(&caller, &request.id).await },
            |()| pb::DeleteResponse {},
        )
        .await
    }
}
