//! `IdentityService`: tells a caller which identity reached the engine.

use ember_proto::common::v1::Identity as IdentityMessage;
use ember_proto::engine::v1::{WhoAmIRequest, identity_service_server::IdentityService};
use ember_runtime::Identity;
use tonic::{Request, Response, Status};

pub struct IdentityHandler;

#[tonic::async_trait]
impl IdentityService for IdentityHandler {
    async fn who_am_i(
        &self,
        request: Request<WhoAmIRequest>,
    ) -> Result<Response<IdentityMessage>, Status> {
        let identity = Identity::of(&request)?;
        Ok(Response::new(IdentityMessage {
            user_id: identity.user_id.clone(),
            project_id: identity.project_id.clone(),
            roles: identity.roles.clone(),
        }))
    }
}
