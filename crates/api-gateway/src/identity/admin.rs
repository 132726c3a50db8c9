//! `ember.identity.v1.IdentityAdminService`: the built-in identity managed
//! over gRPC, served by the gateway itself. The gRPC door lets only admin
//! tokens through to it.

use ember_proto::identity::v1 as pb;
use ember_proto::identity::v1::identity_admin_service_server::IdentityAdminService;
use tonic::{Request, Response, Status};

use super::{Assignment, Directory, IdentityError, Lockout, Project, User};

pub const SERVICE_NAME: &str = "ember.identity.v1.IdentityAdminService";

pub struct AdminHandler {
    directory: Directory,
}

impl AdminHandler {
    pub fn new(directory: Directory) -> AdminHandler {
        AdminHandler { directory }
    }
}

fn project_message(project: Project) -> pb::Project {
    pb::Project {
        id: project.id,
        name: project.name,
        description: project.description,
        domain_id: super::DOMAIN_ID.to_owned(),
        created_at: Some(ember_runtime::time::to_timestamp(project.created_at)),
    }
}

fn user_message(user: User, lockout: Lockout) -> pb::User {
    let locked = lockout.locks(&user, ember_runtime::time::now());
    let locked_until = user
        .failed_auth_at
        .filter(|_| locked)
        .and_then(|last| lockout.lifted_at(last))
        .map(ember_runtime::time::to_timestamp);
    pb::User {
        id: user.id,
        name: user.name,
        domain_id: super::DOMAIN_ID.to_owned(),
        default_project_id: user.default_project_id.unwrap_or_default(),
        created_at: Some(ember_runtime::time::to_timestamp(user.created_at)),
        failed_auth_count: u32::try_from(user.failed_auth_count).unwrap_or(0),
        locked,
        locked_until,
    }
}

fn assignment_message(assignment: Assignment) -> pb::RoleAssignment {
    pb::RoleAssignment {
        user: assignment.user_id,
        project: assignment.project_id,
        role: assignment.role,
    }
}

fn required<'a>(what: &str, value: &'a str) -> Result<&'a str, Status> {
    if value.trim().is_empty() {
        Err(Status::invalid_argument(format!("{what} is required")))
    } else {
        Ok(value)
    }
}

type Reply<T> = Result<Response<T>, Status>;

fn reply<T, U>(result: Result<T, IdentityError>, convert: impl FnOnce(T) -> U) -> Reply<U> {
    result
        .map(|value| Response::new(convert(value)))
        .map_err(IdentityError::into_status)
}

#[tonic::async_trait]
impl IdentityAdminService for AdminHandler {
    async fn create_project(
        &self,
        request: Request<pb::CreateProjectRequest>,
    ) -> Reply<pb::Project> {
        let request = request.into_inner();
        required("name", &request.name)?;
        reply(
            self.directory
                .create_project(&request.name, &request.description, &request.id)
                .await,
            project_message,
        )
    }

    async fn list_projects(
        &self,
        _request: Request<pb::ListProjectsRequest>,
    ) -> Reply<pb::ListProjectsResponse> {
        reply(self.directory.store().list_projects().await, |projects| {
            pb::ListProjectsResponse {
                projects: projects.into_iter().map(project_message).collect(),
            }
        })
    }

    async fn delete_project(
        &self,
        request: Request<pb::DeleteProjectRequest>,
    ) -> Reply<pb::DeleteProjectResponse> {
        let project = request.into_inner().project;
        required("project", &project)?;
        reply(self.directory.delete_project(&project).await, |()| {
            pb::DeleteProjectResponse {}
        })
    }

    async fn create_user(&self, request: Request<pb::CreateUserRequest>) -> Reply<pb::User> {
        let lockout = self.directory.lockout();
        let request = request.into_inner();
        required("name", &request.name)?;
        required("password", &request.password)?;
        reply(
            self.directory
                .create_user(
                    &request.name,
                    &request.password,
                    &request.id,
                    &request.default_project,
                )
                .await,
            |user| user_message(user, lockout),
        )
    }

    async fn list_users(
        &self,
        _request: Request<pb::ListUsersRequest>,
    ) -> Reply<pb::ListUsersResponse> {
        let lockout = self.directory.lockout();
        reply(self.directory.store().list_users().await, |users| {
            pb::ListUsersResponse {
                users: users
                    .into_iter()
                    .map(|user| user_message(user, lockout))
                    .collect(),
            }
        })
    }

    async fn delete_user(
        &self,
        request: Request<pb::DeleteUserRequest>,
    ) -> Reply<pb::DeleteUserResponse> {
        let user = request.into_inner().user;
        required("user", &user)?;
        reply(self.directory.delete_user(&user).await, |()| {
            pb::DeleteUserResponse {}
        })
    }

    async fn unlock_user(&self, request: Request<pb::UnlockUserRequest>) -> Reply<pb::User> {
        let user = request.into_inner().user;
        required("user", &user)?;
        let lockout = self.directory.lockout();
        reply(self.directory.unlock_user(&user).await, |user| {
            user_message(user, lockout)
        })
    }

    async fn set_password(&self, request: Request<pb::SetPasswordRequest>) -> Reply<pb::User> {
        let lockout = self.directory.lockout();
        let request = request.into_inner();
        required("user", &request.user)?;
        required("password", &request.password)?;
        reply(
            self.directory
                .set_password(&request.user, &request.password)
                .await,
            |user| user_message(user, lockout),
        )
    }

    async fn add_role(&self, request: Request<pb::RoleAssignment>) -> Reply<pb::RoleAssignment> {
        let request = request.into_inner();
        required("user", &request.user)?;
        required("project", &request.project)?;
        required("role", &request.role)?;
        reply(
            self.directory
                .add_role(&request.user, &request.project, &request.role)
                .await,
            assignment_message,
        )
    }

    async fn remove_role(
        &self,
        request: Request<pb::RoleAssignment>,
    ) -> Reply<pb::RemoveRoleResponse> {
        let request = request.into_inner();
        required("user", &request.user)?;
        required("project", &request.project)?;
        required("role", &request.role)?;
        reply(
            self.directory
                .remove_role(&request.user, &request.project, &request.role)
                .await,
            |()| pb::RemoveRoleResponse {},
        )
    }

    async fn list_role_assignments(
        &self,
        request: Request<pb::ListRoleAssignmentsRequest>,
    ) -> Reply<pb::ListRoleAssignmentsResponse> {
        let request = request.into_inner();
        reply(
            self.directory
                .list_assignments(&request.user, &request.project)
                .await,
            |assignments| pb::ListRoleAssignmentsResponse {
                assignments: assignments.into_iter().map(assignment_message).collect(),
            },
        )
    }
}
