//! `ProfileService`: thin handlers over the profile operations of
//! [`ClusterService`].

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use tonic::Request;

use super::cluster_convert as convert;
use super::{Reply, answer};
use crate::clusters::ClusterService;
use crate::domain::cluster::query;
use crate::domain::cluster::{parse_object, types};

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
                    .create_profile(&caller, &request.name, spec, metadata, request.protected)
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
                let (global_project, query) =
                    convert::object_query(request, query::PROFILE_SORT_KEYS)?;
                self.service
                    .list_profiles(&caller, global_project, query)
                    .await
            },
            |profiles| pb::ListProfilesResponse {
                profiles: profiles.iter().map(convert::profile).collect(),
            },
        )
        .await
    }

    async fn update_profile(
        &self,
        request: Request<pb::UpdateProfileRequest>,
    ) -> Reply<pb::Profile> {
        answer(
            request,
            |caller, request| async move {
                let metadata = request
                    .metadata
                    .as_deref()
                    .map(|text| parse_object("metadata", text))
                    .transpose()?;
                self.service
                    .update_profile(&caller, &request.id, request.name, metadata)
                    .await
            },
            |profile| convert::profile(&profile),
        )
        .await
    }

    async fn validate_profile(
        &self,
        request: Request<pb::ValidateSpecRequest>,
    ) -> Reply<pb::Profile> {
        answer(
            request,
            |caller, request| async move {
                let spec = convert::json("spec", &request.spec)?;
                self.service.validate_profile(&caller, spec).await
            },
            |profile| convert::profile(&profile),
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

    async fn list_profile_types(
        &self,
        request: Request<pb::ListTypesRequest>,
    ) -> Reply<pb::ListTypesResponse> {
        list_types(request, types::PROFILE_TYPES).await
    }

    async fn get_profile_type(
        &self,
        request: Request<pb::GetTypeRequest>,
    ) -> Reply<pb::TypeDescription> {
        get_type(request, types::PROFILE_TYPES, "profile_type").await
    }

    async fn list_profile_type_operations(
        &self,
        request: Request<pb::GetTypeRequest>,
    ) -> Reply<pb::TypeOperations> {
        answer(
            request,
            |_caller, request| async move { types::profile_type_operations(&request.type_name) },
            |operations| pb::TypeOperations {
                operations: operations.to_string(),
            },
        )
        .await
    }
}

/// `ListProfileTypes` and `ListPolicyTypes`: the types of `definitions`
/// the API lists.
pub(super) async fn list_types(
    request: Request<pb::ListTypesRequest>,
    definitions: &'static [types::TypeDefinition],
) -> Reply<pb::ListTypesResponse> {
    answer(
        request,
        |_caller, _request| async move { Ok(definitions) },
        |definitions| pb::ListTypesResponse {
            types: definitions
                .iter()
                .filter(|definition| definition.listed)
                .map(type_description)
                .collect(),
        },
    )
    .await
}

/// `GetProfileType` and `GetPolicyType`: the type of `definitions` the
/// request names (`field` is what an unknown name's error calls it).
pub(super) async fn get_type(
    request: Request<pb::GetTypeRequest>,
    definitions: &'static [types::TypeDefinition],
    field: &'static str,
) -> Reply<pb::TypeDescription> {
    answer(
        request,
        |_caller, request| async move { types::find(definitions, field, &request.type_name) },
        type_description,
    )
    .await
}

/// A profile or policy type as the API describes it.
fn type_description(definition: &types::TypeDefinition) -> pb::TypeDescription {
    pb::TypeDescription {
        name: definition.name.to_owned(),
        version: definition.version.to_owned(),
        schema: definition.schema().to_string(),
        support_status: definition.support_status().to_string(),
    }
}
