//! `ember.identity.v1.IdentityAdminService`: the built-in identity managed
//! over gRPC, served by the gateway itself. The gRPC door lets only admin
//! tokens through to it, and other Ember services acting for a user who
//! holds the admin role (`crate::grpc_proxy`).

use ember_proto::identity::v1 as pb;
use ember_proto::identity::v1::identity_admin_service_server::IdentityAdminService;
use tonic::{Request, Response, Status};

use super::{
    Assignee, AssigneeName, Assignment, Directory, Group, GroupChanges, IdentityError, Lockout,
    Project, ProjectChanges, Role, User, UserUpdate,
};

pub const SERVICE_NAME: &str = "ember.identity.v1.IdentityAdminService";

pub struct AdminHandler {
    directory: Directory,
}

impl AdminHandler {
    pub fn new(directory: Directory) -> AdminHandler {
        AdminHandler { directory }
    }

    /// Users as answered now: with whether wrong passwords lock them out.
    fn user_message(&self) -> impl Fn(User) -> pb::User + Copy + use<> {
        let lockout = self.directory.lockout();
        move |user| user_message(user, lockout)
    }

    fn users_message(&self) -> impl FnOnce(Vec<User>) -> pb::ListUsersResponse + use<> {
        let user_message = self.user_message();
        move |users| pb::ListUsersResponse {
            users: users.into_iter().map(user_message).collect(),
        }
    }
}

fn project_message(project: Project) -> pb::Project {
    pb::Project {
        id: project.id,
        name: project.name,
        description: project.description,
        domain_id: super::DOMAIN_ID.to_owned(),
        created_at: Some(ember_runtime::time::to_timestamp(project.created_at)),
        enabled: project.enabled,
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
        description: user.description.unwrap_or_default(),
        email: user.email.unwrap_or_default(),
        enabled: user.enabled,
    }
}

fn role_message(role: Role) -> pb::Role {
    pb::Role {
        built_in: role.is_built_in(),
        id: role.id,
        name: role.name,
        domain_id: super::DOMAIN_ID.to_owned(),
    }
}

fn group_message(group: Group) -> pb::Group {
    pb::Group {
        id: group.id,
        name: group.name,
        description: group.description,
        domain_id: super::DOMAIN_ID.to_owned(),
        created_at: Some(ember_runtime::time::to_timestamp(group.created_at)),
    }
}

fn assignment_message(assignment: Assignment) -> pb::RoleAssignment {
    let (user, group) = match assignment.assignee {
        Assignee::User(user) => (user, String::new()),
        Assignee::Group(group) => (String::new(), group),
    };
    pb::RoleAssignment {
        user,
        project: assignment.project_id,
        role: assignment.role,
        group,
    }
}

fn required<'a>(what: &str, value: &'a str) -> Result<&'a str, Status> {
    if value.trim().is_empty() {
        Err(Status::invalid_argument(format!("{what} is required")))
    } else {
        Ok(value)
    }
}

/// The holder, project and role an assignment names, each required.
fn assignment_named(
    request: &pb::RoleAssignment,
) -> Result<(AssigneeName<'_>, &str, &str), Status> {
    Ok((
        assignee(request)?,
        required("project", &request.project)?,
        required("role", &request.role)?,
    ))
}

/// The user or group an assignment names: exactly one of them.
fn assignee(request: &pb::RoleAssignment) -> Result<AssigneeName<'_>, Status> {
    match (
        request.user.trim().is_empty(),
        request.group.trim().is_empty(),
    ) {
        (false, true) => Ok(AssigneeName::User(&request.user)),
        (true, false) => Ok(AssigneeName::Group(&request.group)),
        (true, true) => Err(Status::invalid_argument("user or group is required")),
        (false, false) => Err(Status::invalid_argument("name a user or a group, not both")),
    }
}

type Reply<T> = Result<Response<T>, Status>;

fn reply<T, U>(result: Result<T, IdentityError>, convert: impl FnOnce(T) -> U) -> Reply<U> {
    result
        .map(|value| Response::new(convert(value)))
        .map_err(IdentityError::into_status)
}

/// The empty answer of a call that only does something (a delete, a removal).
fn done<T: Default>(result: Result<(), IdentityError>) -> Reply<T> {
    reply(result, |()| T::default())
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
                .create_project_with(
                    &request.name,
                    &request.description,
                    &request.id,
                    request.enabled.unwrap_or(true),
                )
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

    async fn get_project(&self, request: Request<pb::GetProjectRequest>) -> Reply<pb::Project> {
        let project = request.into_inner().project;
        reply(
            self.directory
                .find_project(required("project", &project)?)
                .await,
            project_message,
        )
    }

    async fn update_project(
        &self,
        request: Request<pb::UpdateProjectRequest>,
    ) -> Reply<pb::Project> {
        let request = request.into_inner();
        required("project", &request.project)?;
        reply(
            self.directory
                .update_project(
                    &request.project,
                    ProjectChanges {
                        name: request.name,
                        description: request.description,
                        enabled: request.enabled,
                    },
                )
                .await,
            project_message,
        )
    }

    async fn delete_project(
        &self,
        request: Request<pb::DeleteProjectRequest>,
    ) -> Reply<pb::DeleteProjectResponse> {
        let project = request.into_inner().project;
        done(
            self.directory
                .delete_project(required("project", &project)?)
                .await,
        )
    }

    async fn create_user(&self, request: Request<pb::CreateUserRequest>) -> Reply<pb::User> {
        let request = request.into_inner();
        required("name", &request.name)?;
        required("password", &request.password)?;
        reply(
            self.directory
                .create_user_with(super::NewUser {
                    name: &request.name,
                    password: &request.password,
                    id: &request.id,
                    default_project: &request.default_project,
                    description: &request.description,
                    email: &request.email,
                    enabled: request.enabled.unwrap_or(true),
                })
                .await,
            self.user_message(),
        )
    }

    async fn list_users(
        &self,
        _request: Request<pb::ListUsersRequest>,
    ) -> Reply<pb::ListUsersResponse> {
        reply(
            self.directory.store().list_users().await,
            self.users_message(),
        )
    }

    async fn get_user(&self, request: Request<pb::GetUserRequest>) -> Reply<pb::User> {
        let user = request.into_inner().user;
        let found = self.directory.find_user(required("user", &user)?).await;
        reply(found, self.user_message())
    }

    async fn update_user(&self, request: Request<pb::UpdateUserRequest>) -> Reply<pb::User> {
        let request = request.into_inner();
        required("user", &request.user)?;
        reply(
            self.directory
                .update_user(
                    &request.user,
                    UserUpdate {
                        name: request.name,
                        description: request.description,
                        email: request.email,
                        enabled: request.enabled,
                        default_project: request.default_project,
                    },
                )
                .await,
            self.user_message(),
        )
    }

    async fn delete_user(
        &self,
        request: Request<pb::DeleteUserRequest>,
    ) -> Reply<pb::DeleteUserResponse> {
        let user = request.into_inner().user;
        done(self.directory.delete_user(required("user", &user)?).await)
    }

    async fn unlock_user(&self, request: Request<pb::UnlockUserRequest>) -> Reply<pb::User> {
        let user = request.into_inner().user;
        let found = self.directory.unlock_user(required("user", &user)?).await;
        reply(found, self.user_message())
    }

    async fn set_password(&self, request: Request<pb::SetPasswordRequest>) -> Reply<pb::User> {
        let request = request.into_inner();
        required("user", &request.user)?;
        required("password", &request.password)?;
        reply(
            self.directory
                .set_password(&request.user, &request.password)
                .await,
            self.user_message(),
        )
    }

    async fn add_role(&self, request: Request<pb::RoleAssignment>) -> Reply<pb::RoleAssignment> {
        let request = request.into_inner();
        let (assignee, project, role) = assignment_named(&request)?;
        reply(
            self.directory.give_role(assignee, project, role).await,
            assignment_message,
        )
    }

    async fn remove_role(
        &self,
        request: Request<pb::RoleAssignment>,
    ) -> Reply<pb::RemoveRoleResponse> {
        let request = request.into_inner();
        let (assignee, project, role) = assignment_named(&request)?;
        done(self.directory.remove_role(assignee, project, role).await)
    }

    async fn list_role_assignments(
        &self,
        request: Request<pb::ListRoleAssignmentsRequest>,
    ) -> Reply<pb::ListRoleAssignmentsResponse> {
        let request = request.into_inner();
        reply(
            self.directory
                .list_assignments(&request.user, &request.group, &request.project)
                .await,
            |assignments| pb::ListRoleAssignmentsResponse {
                assignments: assignments.into_iter().map(assignment_message).collect(),
            },
        )
    }

    async fn create_role(&self, request: Request<pb::CreateRoleRequest>) -> Reply<pb::Role> {
        let request = request.into_inner();
        required("name", &request.name)?;
        reply(
            self.directory.create_role(&request.name, &request.id).await,
            role_message,
        )
    }

    async fn list_roles(
        &self,
        _request: Request<pb::ListRolesRequest>,
    ) -> Reply<pb::ListRolesResponse> {
        reply(self.directory.store().list_roles().await, |roles| {
            pb::ListRolesResponse {
                roles: roles.into_iter().map(role_message).collect(),
            }
        })
    }

    async fn get_role(&self, request: Request<pb::GetRoleRequest>) -> Reply<pb::Role> {
        let role = request.into_inner().role;
        reply(
            self.directory.find_role(required("role", &role)?).await,
            role_message,
        )
    }

    async fn update_role(&self, request: Request<pb::UpdateRoleRequest>) -> Reply<pb::Role> {
        let request = request.into_inner();
        required("role", &request.role)?;
        required("name", &request.name)?;
        reply(
            self.directory
                .rename_role(&request.role, &request.name)
                .await,
            role_message,
        )
    }

    async fn delete_role(
        &self,
        request: Request<pb::DeleteRoleRequest>,
    ) -> Reply<pb::DeleteRoleResponse> {
        let role = request.into_inner().role;
        done(self.directory.delete_role(required("role", &role)?).await)
    }

    async fn create_group(&self, request: Request<pb::CreateGroupRequest>) -> Reply<pb::Group> {
        let request = request.into_inner();
        required("name", &request.name)?;
        reply(
            self.directory
                .create_group(&request.name, &request.description, &request.id)
                .await,
            group_message,
        )
    }

    async fn list_groups(
        &self,
        _request: Request<pb::ListGroupsRequest>,
    ) -> Reply<pb::ListGroupsResponse> {
        reply(self.directory.store().list_groups().await, |groups| {
            pb::ListGroupsResponse {
                groups: groups.into_iter().map(group_message).collect(),
            }
        })
    }

    async fn get_group(&self, request: Request<pb::GetGroupRequest>) -> Reply<pb::Group> {
        let group = request.into_inner().group;
        reply(
            self.directory.find_group(required("group", &group)?).await,
            group_message,
        )
    }

    async fn update_group(&self, request: Request<pb::UpdateGroupRequest>) -> Reply<pb::Group> {
        let request = request.into_inner();
        required("group", &request.group)?;
        reply(
            self.directory
                .update_group(
                    &request.group,
                    GroupChanges {
                        name: request.name,
                        description: request.description,
                    },
                )
                .await,
            group_message,
        )
    }

    async fn delete_group(
        &self,
        request: Request<pb::DeleteGroupRequest>,
    ) -> Reply<pb::DeleteGroupResponse> {
        let group = request.into_inner().group;
        done(
            self.directory
                .delete_group(required("group", &group)?)
                .await,
        )
    }

    async fn add_group_member(
        &self,
        request: Request<pb::GroupMembership>,
    ) -> Reply<pb::GroupMembership> {
        let request = request.into_inner();
        required("group", &request.group)?;
        required("user", &request.user)?;
        reply(
            self.directory
                .add_group_member(&request.group, &request.user)
                .await,
            |(group, user)| pb::GroupMembership {
                group: group.id,
                user: user.id,
            },
        )
    }

    async fn remove_group_member(
        &self,
        request: Request<pb::GroupMembership>,
    ) -> Reply<pb::RemoveGroupMemberResponse> {
        let request = request.into_inner();
        required("group", &request.group)?;
        required("user", &request.user)?;
        done(
            self.directory
                .remove_group_member(&request.group, &request.user)
                .await,
        )
    }

    async fn list_group_members(
        &self,
        request: Request<pb::ListGroupMembersRequest>,
    ) -> Reply<pb::ListUsersResponse> {
        let group = request.into_inner().group;
        let members = self
            .directory
            .group_members(required("group", &group)?)
            .await;
        reply(members, self.users_message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assignment_names_exactly_one_of_user_and_group() {
        let assignment = |user: &str, group: &str| pb::RoleAssignment {
            user: user.into(),
            project: "web".into(),
            role: "member".into(),
            group: group.into(),
        };
        let user = assignment("alice", "");
        assert_eq!(assignee(&user).ok(), Some(AssigneeName::User("alice")));
        let group = assignment("", "ops");
        assert_eq!(assignee(&group).ok(), Some(AssigneeName::Group("ops")));
        for (user, group, expected) in [
            ("", " ", "user or group is required"),
            ("alice", "ops", "a user or a group, not both"),
        ] {
            let refusal = assignee(&assignment(user, group)).expect_err("refused");
            assert_eq!(refusal.code(), tonic::Code::InvalidArgument);
            assert!(refusal.message().contains(expected), "{refusal:?}");
        }
    }

    #[test]
    fn answers_carry_the_holder_in_its_own_field() {
        let of_group = assignment_message(Assignment {
            assignee: Assignee::Group("g1".into()),
            project_id: "p1".into(),
            role: "admin".into(),
        });
        assert_eq!(
            (of_group.user.as_str(), of_group.group.as_str()),
            ("", "g1")
        );
        let role = role_message(Role {
            id: "reader".into(),
            name: "reader".into(),
        });
        assert!(role.built_in);
        assert_eq!(role.domain_id, "default");
    }
}
