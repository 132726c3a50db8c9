//! `ember.identity.v1.IdentityAdminService` through the gateway's gRPC
//! door: admins only (and other Ember services acting for a user who holds
//! the admin role now), every bad input refused by name, and whatever
//! takes a right away — a deleted project, a role or a membership taken
//! away, a renamed or deleted role, a deleted group, a disabled user or
//! project — refusing the tokens that stood for it. Roles, groups and
//! updates run on SQLite and on PostgreSQL (the gateway's store), as does
//! the upgrade of roles named before roles were objects.

use ember_api_gateway::identity::migrations::Migrator;
use ember_api_gateway::identity::{Directory, Reference, password};
use ember_proto::identity::v1 as pb;
use ember_proto::identity::v1::identity_admin_service_client::IdentityAdminServiceClient;
use ember_runtime::Identity;
use ember_runtime::database::{connect, statement, testing::TestDatabase};
use ember_runtime::identity::InternalCredential;
use ember_tests::{TestEmber, with_bearer};
use reqwest::{Method, StatusCode};
use sea_orm::ConnectionTrait;
use sea_orm_migration::MigratorTrait;
use tokio_util::sync::CancellationToken;
use tonic::Code;
use tonic::transport::Channel;

use super::{admin, call, login, password_body, stacks_status};

type Admin = IdentityAdminServiceClient<Channel>;

/// Asserts `result` is refused with `code` and a message containing
/// `expected`.
fn refused<T: std::fmt::Debug>(result: Result<T, tonic::Status>, code: Code, expected: &str) {
    let status = result.expect_err(expected);
    assert_eq!(status.code(), code, "{expected}: {status:?}");
    assert!(
        status.message().contains(expected),
        "{expected:?} not in {:?}",
        status.message()
    );
}

/// Ember with the gateway's identity store on `database` (None: SQLite).
async fn ember_on(database: Option<&TestDatabase>) -> TestEmber {
    let url = database.map(|database| database.url.clone());
    TestEmber::start_configured(move |config| {
        if let Some(url) = url {
            config.gateway.database_url = url;
        }
    })
    .await
}

/// Runs `test` on SQLite, and on PostgreSQL when EMBER_TEST_DATABASE_URL
/// is set.
macro_rules! on_both_stores {
    ($test:ident, $sqlite:ident, $postgres:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $sqlite() {
            $test(None).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $postgres() {
            let Some(database) = TestDatabase::postgres().await else {
                eprintln!("PostgreSQL variant not run: EMBER_TEST_DATABASE_URL is not set");
                return;
            };
            $test(Some(&database)).await;
            database.drop_schema().await;
        }
    };
}

/// The status of a password login of `user` scoped to `project`.
async fn login_status(ember: &TestEmber, user: &str, password: &str, project: &str) -> StatusCode {
    call(
        ember,
        Method::POST,
        "/identity/v3/auth/tokens",
        &[],
        Some(&password_body(user, password, project)),
    )
    .await
    .status
}

/// The names of the roles a fresh token of `user` on `project` carries.
async fn token_roles(ember: &TestEmber, user: &str, password: &str, project: &str) -> Vec<String> {
    let answer = call(
        ember,
        Method::POST,
        "/identity/v3/auth/tokens?nocatalog",
        &[],
        Some(&password_body(user, password, project)),
    )
    .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    answer.body["token"]["roles"]
        .as_array()
        .expect("roles")
        .iter()
        .filter_map(|role| role["name"].as_str().map(str::to_owned))
        .collect()
}

/// The names of the projects `GET /v3/auth/projects` offers `token`.
async fn auth_projects(ember: &TestEmber, token: &str) -> Vec<String> {
    let answer = call(
        ember,
        Method::GET,
        "/identity/v3/auth/projects",
        &[("x-auth-token", token)],
        None,
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.body["projects"]
        .as_array()
        .expect("projects")
        .iter()
        .map(|project| project["name"].as_str().expect("a name").to_owned())
        .collect()
}

async fn create_project(service: &mut Admin, ember: &TestEmber, name: &str) -> pb::Project {
    service
        .create_project(admin(
            ember,
            pb::CreateProjectRequest {
                name: name.into(),
                ..Default::default()
            },
        ))
        .await
        .expect("project created")
        .into_inner()
}

async fn create_user(
    service: &mut Admin,
    ember: &TestEmber,
    name: &str,
    password: &str,
) -> pb::User {
    service
        .create_user(admin(
            ember,
            pb::CreateUserRequest {
                name: name.into(),
                password: password.into(),
                ..Default::default()
            },
        ))
        .await
        .expect("user created")
        .into_inner()
}

fn user_role(user: &str, project: &str, role: &str) -> pb::RoleAssignment {
    pb::RoleAssignment {
        user: user.into(),
        project: project.into(),
        role: role.into(),
        group: String::new(),
    }
}

fn group_role(group: &str, project: &str, role: &str) -> pb::RoleAssignment {
    pb::RoleAssignment {
        user: String::new(),
        project: project.into(),
        role: role.into(),
        group: group.into(),
    }
}

fn membership(group: &str, user: &str) -> pb::GroupMembership {
    pb::GroupMembership {
        group: group.into(),
        user: user.into(),
    }
}

async fn assignments(
    service: &mut Admin,
    ember: &TestEmber,
    request: pb::ListRoleAssignmentsRequest,
) -> Vec<pb::RoleAssignment> {
    service
        .list_role_assignments(admin(ember, request))
        .await
        .expect("listed")
        .into_inner()
        .assignments
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_admins_manage_identities_and_bad_input_is_refused_by_name() {
    let ember = TestEmber::start().await;
    ember.seed_identity().await;
    let mut service = IdentityAdminServiceClient::new(ember.gateway_channel().await);

    let status = service
        .list_users(tonic::Request::new(pb::ListUsersRequest {}))
        .await
        .expect_err("no token");
    assert_eq!(status.code(), Code::Unauthenticated);
    let status = service
        .list_users(with_bearer(pb::ListUsersRequest {}, ember.member_token()))
        .await
        .expect_err("a member");
    assert_eq!(status.code(), Code::PermissionDenied);
    assert!(status.message().contains("admin role"), "{status:?}");

    let project = service
        .create_project(admin(
            &ember,
            pb::CreateProjectRequest {
                name: "green".into(),
                description: "the green team".into(),
                ..Default::default()
            },
        ))
        .await
        .expect("created")
        .into_inner();
    assert_eq!(project.id.len(), 32, "a Keystone-style id: {project:?}");
    assert_eq!(project.domain_id, "default");
    assert!(project.enabled, "enabled unless asked otherwise");
    let cases: Vec<(tonic::Status, Code, &str)> = vec![
        (
            service
                .create_project(admin(
                    &ember,
                    pb::CreateProjectRequest {
                        name: "green".into(),
                        ..Default::default()
                    },
                ))
                .await
                .expect_err("a duplicate"),
            Code::AlreadyExists,
            "a project named \"green\"",
        ),
        (
            service
                .create_project(admin(
                    &ember,
                    pb::CreateProjectRequest {
                        name: "".into(),
                        ..Default::default()
                    },
                ))
                .await
                .expect_err("no name"),
            Code::InvalidArgument,
            "name is required",
        ),
        (
            service
                .create_project(admin(
                    &ember,
                    pb::CreateProjectRequest {
                        name: "x".repeat(65),
                        ..Default::default()
                    },
                ))
                .await
                .expect_err("too long"),
            Code::InvalidArgument,
            "1 to 64",
        ),
        (
            service
                .create_user(admin(
                    &ember,
                    pb::CreateUserRequest {
                        name: "carol".into(),
                        password: "short".into(),
                        ..Default::default()
                    },
                ))
                .await
                .expect_err("a short password"),
            Code::InvalidArgument,
            "at least 8 characters",
        ),
        (
            service
                .create_user(admin(
                    &ember,
                    pb::CreateUserRequest {
                        name: "carol".into(),
                        password: "long-enough".into(),
                        default_project: "nowhere".into(),
                        ..Default::default()
                    },
                ))
                .await
                .expect_err("an unknown default project"),
            Code::NotFound,
            "project \"nowhere\" not found",
        ),
        (
            service
                .add_role(admin(&ember, user_role("nobody", "green", "member")))
                .await
                .expect_err("an unknown user"),
            Code::NotFound,
            "user \"nobody\" not found",
        ),
        (
            service
                .remove_role(admin(&ember, user_role("demo", "green", "member")))
                .await
                .expect_err("a role not held"),
            Code::NotFound,
            "role \"member\" of user \"demo\" on project \"green\" not found",
        ),
        (
            service
                .delete_user(admin(
                    &ember,
                    pb::DeleteUserRequest {
                        user: "nobody".into(),
                    },
                ))
                .await
                .expect_err("an unknown user"),
            Code::NotFound,
            "not found",
        ),
    ];
    for (status, code, expected) in cases {
        assert_eq!(status.code(), code, "{status:?}");
        assert!(
            status.message().contains(expected),
            "{expected}: {status:?}"
        );
    }

    service
        .create_user(admin(
            &ember,
            pb::CreateUserRequest {
                name: "carol".into(),
                password: "carol-password".into(),
                default_project: "green".into(),
                ..Default::default()
            },
        ))
        .await
        .expect("created");
    let assignment = service
        .add_role(admin(&ember, user_role("carol", "green", "member")))
        .await
        .expect("added")
        .into_inner();
    assert_eq!(assignment.project, project.id, "answers carry ids");
    service
        .add_role(admin(&ember, user_role("carol", "green", "member")))
        .await
        .expect("adding again changes nothing");
    let listed = assignments(
        &mut service,
        &ember,
        pb::ListRoleAssignmentsRequest {
            user: "carol".into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let users = service
        .list_users(admin(&ember, pb::ListUsersRequest {}))
        .await
        .expect("listed")
        .into_inner()
        .users;
    let carol = users
        .iter()
        .find(|user| user.name == "carol")
        .expect("carol");
    assert_eq!(carol.default_project_id, project.id);
    assert!(carol.enabled);

    // Carol's token works on her project until the project is deleted.
    let token = login(&ember, "carol", "carol-password", "green").await;
    assert_eq!(
        stacks_status(&ember, &project.id, &token).await,
        StatusCode::OK
    );
    service
        .delete_project(admin(
            &ember,
            pb::DeleteProjectRequest {
                project: "green".into(),
            },
        ))
        .await
        .expect("deleted");
    assert_eq!(
        stacks_status(&ember, &project.id, &token).await,
        StatusCode::UNAUTHORIZED
    );
    let projects = service
        .list_projects(admin(&ember, pb::ListProjectsRequest {}))
        .await
        .expect("listed")
        .into_inner()
        .projects;
    assert!(projects.iter().all(|project| project.name != "green"));
    ember.stop().await;
}

/// Roles are objects: three built in, others created before they are
/// given; renaming one takes its assignments along, deleting one takes
/// them away, and either refuses the tokens that carried it.
async fn roles_are_objects_and_their_assignments_follow_them(database: Option<&TestDatabase>) {
    let ember = ember_on(database).await;
    let passwords = ember.seed_identity().await;
    let mut service = IdentityAdminServiceClient::new(ember.gateway_channel().await);

    let roles = service
        .list_roles(admin(&ember, pb::ListRolesRequest {}))
        .await
        .expect("listed")
        .into_inner()
        .roles;
    for name in ["admin", "member", "reader"] {
        let role = roles
            .iter()
            .find(|role| role.name == name)
            .unwrap_or_else(|| panic!("{name} in {roles:?}"));
        assert!(role.built_in, "{role:?}");
        assert_eq!(role.id, name, "a built-in role's id is its name");
        assert_eq!(role.domain_id, "default");
    }
    assert_eq!(roles.len(), 3, "{roles:?}");

    let owner = service
        .create_role(admin(
            &ember,
            pb::CreateRoleRequest {
                name: "heat_stack_owner".into(),
                id: String::new(),
            },
        ))
        .await
        .expect("created")
        .into_inner();
    assert_eq!(owner.id.len(), 32, "{owner:?}");
    assert!(!owner.built_in);
    let by_id = service
        .get_role(admin(
            &ember,
            pb::GetRoleRequest {
                role: owner.id.clone(),
            },
        ))
        .await
        .expect("found by id")
        .into_inner();
    assert_eq!(by_id, owner);
    let create_role = |name: &str| {
        admin(
            &ember,
            pb::CreateRoleRequest {
                name: name.into(),
                id: String::new(),
            },
        )
    };
    refused(
        service.create_role(create_role("heat_stack_owner")).await,
        Code::AlreadyExists,
        "a role named \"heat_stack_owner\"",
    );
    refused(
        service.create_role(create_role("admin")).await,
        Code::AlreadyExists,
        "\"admin\"",
    );
    refused(
        service.create_role(create_role("bad role")).await,
        Code::InvalidArgument,
        "role name \"bad role\"",
    );
    refused(
        service.create_role(create_role("")).await,
        Code::InvalidArgument,
        "name is required",
    );
    refused(
        service
            .get_role(admin(
                &ember,
                pb::GetRoleRequest {
                    role: "ghost".into(),
                },
            ))
            .await,
        Code::NotFound,
        "role \"ghost\" not found",
    );
    refused(
        service
            .add_role(admin(&ember, user_role("demo", "demo", "ghost")))
            .await,
        Code::NotFound,
        "role \"ghost\" not found",
    );
    refused(
        service
            .delete_role(admin(
                &ember,
                pb::DeleteRoleRequest {
                    role: "admin".into(),
                },
            ))
            .await,
        Code::FailedPrecondition,
        "role \"admin\" is built in",
    );
    refused(
        service
            .update_role(admin(
                &ember,
                pb::UpdateRoleRequest {
                    role: "member".into(),
                    name: "members".into(),
                },
            ))
            .await,
        Code::FailedPrecondition,
        "role \"member\" is built in",
    );

    // Given by id, answered by name.
    let given = service
        .add_role(admin(&ember, user_role("demo", "demo", &owner.id)))
        .await
        .expect("given")
        .into_inner();
    assert_eq!(given, user_role("demo", "demo", "heat_stack_owner"));
    assert_eq!(
        token_roles(&ember, "demo", &passwords.demo, "demo").await,
        ["heat_stack_owner", "member"]
    );
    let token = login(&ember, "demo", &passwords.demo, "demo").await;

    refused(
        service
            .update_role(admin(
                &ember,
                pb::UpdateRoleRequest {
                    role: "heat_stack_owner".into(),
                    name: "reader".into(),
                },
            ))
            .await,
        Code::AlreadyExists,
        "a role named \"reader\" already exists",
    );
    let renamed = service
        .update_role(admin(
            &ember,
            pb::UpdateRoleRequest {
                role: "heat_stack_owner".into(),
                name: "stack_owner".into(),
            },
        ))
        .await
        .expect("renamed")
        .into_inner();
    assert_eq!(
        (renamed.id.as_str(), renamed.name.as_str()),
        (owner.id.as_str(), "stack_owner")
    );
    let held: Vec<String> = assignments(
        &mut service,
        &ember,
        pb::ListRoleAssignmentsRequest {
            user: "demo".into(),
            ..Default::default()
        },
    )
    .await
    .into_iter()
    .map(|assignment| assignment.role)
    .collect();
    assert_eq!(held, ["member", "stack_owner"]);
    assert_eq!(
        stacks_status(&ember, "demo", &token).await,
        StatusCode::UNAUTHORIZED,
        "a token naming the old role is refused"
    );
    assert_eq!(
        token_roles(&ember, "demo", &passwords.demo, "demo").await,
        ["member", "stack_owner"]
    );

    let token = login(&ember, "demo", &passwords.demo, "demo").await;
    service
        .delete_role(admin(
            &ember,
            pb::DeleteRoleRequest {
                role: "stack_owner".into(),
            },
        ))
        .await
        .expect("deleted");
    assert_eq!(
        stacks_status(&ember, "demo", &token).await,
        StatusCode::UNAUTHORIZED,
        "a token holding the deleted role is refused"
    );
    assert_eq!(
        token_roles(&ember, "demo", &passwords.demo, "demo").await,
        ["member"]
    );
    refused(
        service
            .delete_role(admin(
                &ember,
                pb::DeleteRoleRequest {
                    role: "stack_owner".into(),
                },
            ))
            .await,
        Code::NotFound,
        "role \"stack_owner\" not found",
    );
    ember.stop().await;
}

on_both_stores!(
    roles_are_objects_and_their_assignments_follow_them,
    roles_are_objects_and_their_assignments_follow_them_on_sqlite,
    roles_are_objects_and_their_assignments_follow_them_on_postgres
);

/// A group's role on a project is held by each member there; taking the
/// membership, the role or the group away refuses the members' tokens.
async fn groups_give_their_roles_to_their_members(database: Option<&TestDatabase>) {
    let ember = ember_on(database).await;
    ember.seed_identity().await;
    let mut service = IdentityAdminServiceClient::new(ember.gateway_channel().await);
    let teal = create_project(&mut service, &ember, "teal").await;
    let erin = create_user(&mut service, &ember, "erin", "erin-password").await;
    let ops = service
        .create_group(admin(
            &ember,
            pb::CreateGroupRequest {
                name: "ops".into(),
                description: "the operators".into(),
                id: String::new(),
            },
        ))
        .await
        .expect("created")
        .into_inner();
    assert_eq!(ops.id.len(), 32, "{ops:?}");
    assert_eq!(ops.description, "the operators");
    let create_group = |name: &str| {
        admin(
            &ember,
            pb::CreateGroupRequest {
                name: name.into(),
                ..Default::default()
            },
        )
    };
    refused(
        service.create_group(create_group("ops")).await,
        Code::AlreadyExists,
        "a group named \"ops\"",
    );
    refused(
        service.create_group(create_group("")).await,
        Code::InvalidArgument,
        "name is required",
    );
    refused(
        service.create_group(create_group("o p s")).await,
        Code::InvalidArgument,
        "group name \"o p s\"",
    );
    assert_eq!(
        login_status(&ember, "erin", "erin-password", "teal").await,
        StatusCode::UNAUTHORIZED,
        "no role on teal yet"
    );

    for _ in 0..2 {
        let added = service
            .add_group_member(admin(&ember, membership("ops", "erin")))
            .await
            .expect("added (again: nothing changes)")
            .into_inner();
        assert_eq!(added, membership(&ops.id, &erin.id), "answers carry ids");
    }
    let members = service
        .list_group_members(admin(
            &ember,
            pb::ListGroupMembersRequest {
                group: "ops".into(),
            },
        ))
        .await
        .expect("listed")
        .into_inner()
        .users;
    assert_eq!(
        members
            .iter()
            .map(|user| user.name.as_str())
            .collect::<Vec<_>>(),
        ["erin"]
    );
    refused(
        service
            .add_group_member(admin(&ember, membership("ops", "nobody")))
            .await,
        Code::NotFound,
        "user \"nobody\" not found",
    );
    refused(
        service
            .add_role(admin(
                &ember,
                pb::RoleAssignment {
                    user: "erin".into(),
                    group: "ops".into(),
                    project: "teal".into(),
                    role: "member".into(),
                },
            ))
            .await,
        Code::InvalidArgument,
        "a user or a group, not both",
    );
    refused(
        service
            .add_role(admin(&ember, user_role("", "teal", "member")))
            .await,
        Code::InvalidArgument,
        "user or group is required",
    );

    let given = service
        .add_role(admin(&ember, group_role("ops", "teal", "member")))
        .await
        .expect("given")
        .into_inner();
    assert_eq!(given, group_role(&ops.id, &teal.id, "member"));
    assert_eq!(
        token_roles(&ember, "erin", "erin-password", "teal").await,
        ["member"],
        "erin holds ops's role on teal"
    );
    let token = login(&ember, "erin", "erin-password", "teal").await;
    assert_eq!(
        stacks_status(&ember, &teal.id, &token).await,
        StatusCode::OK
    );
    assert_eq!(
        auth_projects(&ember, &token).await,
        ["teal"],
        "the projects erin may scope to include its group's"
    );
    create_project(&mut service, &ember, "olive").await;
    service
        .add_role(admin(&ember, user_role("erin", "olive", "reader")))
        .await
        .expect("given");
    assert_eq!(auth_projects(&ember, &token).await, ["olive", "teal"]);
    service
        .update_project(admin(
            &ember,
            pb::UpdateProjectRequest {
                project: "olive".into(),
                enabled: Some(false),
                ..Default::default()
            },
        ))
        .await
        .expect("olive disabled");
    assert_eq!(
        auth_projects(&ember, &token).await,
        ["teal"],
        "a disabled project is not offered"
    );
    service
        .remove_role(admin(&ember, user_role("erin", "olive", "reader")))
        .await
        .expect("taken back");

    let of_group = assignments(
        &mut service,
        &ember,
        pb::ListRoleAssignmentsRequest {
            group: "ops".into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(of_group, [group_role(&ops.id, &teal.id, "member")]);
    let of_user = assignments(
        &mut service,
        &ember,
        pb::ListRoleAssignmentsRequest {
            user: "erin".into(),
            ..Default::default()
        },
    )
    .await;
    assert!(of_user.is_empty(), "erin's own only: {of_user:?}");
    let of_project = assignments(
        &mut service,
        &ember,
        pb::ListRoleAssignmentsRequest {
            project: "teal".into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(of_project, of_group);
    refused(
        service
            .list_role_assignments(admin(
                &ember,
                pb::ListRoleAssignmentsRequest {
                    user: "erin".into(),
                    group: "ops".into(),
                    project: String::new(),
                },
            ))
            .await,
        Code::InvalidArgument,
        "a user or a group, not both",
    );
    refused(
        service
            .list_role_assignments(admin(
                &ember,
                pb::ListRoleAssignmentsRequest {
                    group: "nobody".into(),
                    ..Default::default()
                },
            ))
            .await,
        Code::NotFound,
        "group \"nobody\" not found",
    );

    // Out of the group: the role and the token go.
    service
        .remove_group_member(admin(&ember, membership("ops", "erin")))
        .await
        .expect("removed");
    assert_eq!(
        stacks_status(&ember, &teal.id, &token).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        login_status(&ember, "erin", "erin-password", "teal").await,
        StatusCode::UNAUTHORIZED
    );
    refused(
        service
            .remove_group_member(admin(&ember, membership("ops", "erin")))
            .await,
        Code::NotFound,
        "user \"erin\" in group \"ops\" not found",
    );

    // The group's role taken away.
    service
        .add_group_member(admin(&ember, membership("ops", "erin")))
        .await
        .expect("added back");
    let token = login(&ember, "erin", "erin-password", "teal").await;
    service
        .remove_role(admin(&ember, group_role("ops", "teal", "member")))
        .await
        .expect("taken away");
    assert_eq!(
        stacks_status(&ember, &teal.id, &token).await,
        StatusCode::UNAUTHORIZED
    );
    refused(
        service
            .remove_role(admin(&ember, group_role("ops", "teal", "member")))
            .await,
        Code::NotFound,
        "role \"member\" of group \"ops\" on project \"teal\" not found",
    );

    // The group deleted.
    service
        .add_role(admin(&ember, group_role("ops", "teal", "member")))
        .await
        .expect("given back");
    let token = login(&ember, "erin", "erin-password", "teal").await;
    service
        .delete_group(admin(
            &ember,
            pb::DeleteGroupRequest {
                group: "ops".into(),
            },
        ))
        .await
        .expect("deleted");
    assert_eq!(
        stacks_status(&ember, &teal.id, &token).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        login_status(&ember, "erin", "erin-password", "teal").await,
        StatusCode::UNAUTHORIZED
    );
    refused(
        service
            .get_group(admin(
                &ember,
                pb::GetGroupRequest {
                    group: "ops".into(),
                },
            ))
            .await,
        Code::NotFound,
        "group \"ops\" not found",
    );
    let project_assignments = assignments(
        &mut service,
        &ember,
        pb::ListRoleAssignmentsRequest {
            project: "teal".into(),
            ..Default::default()
        },
    )
    .await;
    assert!(project_assignments.is_empty(), "{project_assignments:?}");

    // Renamed and described; names stay unique.
    for name in ["dev", "qa"] {
        service
            .create_group(create_group(name))
            .await
            .expect("created");
    }
    let renamed = service
        .update_group(admin(
            &ember,
            pb::UpdateGroupRequest {
                group: "dev".into(),
                name: Some("developers".into()),
                description: Some("they write it".into()),
            },
        ))
        .await
        .expect("updated")
        .into_inner();
    assert_eq!(
        (renamed.name.as_str(), renamed.description.as_str()),
        ("developers", "they write it")
    );
    refused(
        service
            .update_group(admin(
                &ember,
                pb::UpdateGroupRequest {
                    group: "qa".into(),
                    name: Some("developers".into()),
                    description: None,
                },
            ))
            .await,
        Code::AlreadyExists,
        "a group named \"developers\" already exists",
    );
    let groups: Vec<String> = service
        .list_groups(admin(&ember, pb::ListGroupsRequest {}))
        .await
        .expect("listed")
        .into_inner()
        .groups
        .into_iter()
        .map(|group| group.name)
        .collect();
    assert_eq!(groups, ["developers", "qa"]);
    ember.stop().await;
}

on_both_stores!(
    groups_give_their_roles_to_their_members,
    groups_give_their_roles_to_their_members_on_sqlite,
    groups_give_their_roles_to_their_members_on_postgres
);

/// Users and projects are renamed, described, disabled and enabled again;
/// a disabled one's tokens and logins are refused.
async fn users_and_projects_are_updated_and_disabled(database: Option<&TestDatabase>) {
    let ember = ember_on(database).await;
    ember.seed_identity().await;
    let mut service = IdentityAdminServiceClient::new(ember.gateway_channel().await);
    let amber = create_project(&mut service, &ember, "amber").await;
    let gray = service
        .create_project(admin(
            &ember,
            pb::CreateProjectRequest {
                name: "gray".into(),
                enabled: Some(false),
                ..Default::default()
            },
        ))
        .await
        .expect("created disabled")
        .into_inner();
    assert!(!gray.enabled);
    let frank = service
        .create_user(admin(
            &ember,
            pb::CreateUserRequest {
                name: "frank".into(),
                password: "frank-password".into(),
                default_project: "amber".into(),
                description: "runs the builds".into(),
                email: "frank@example.com".into(),
                ..Default::default()
            },
        ))
        .await
        .expect("created")
        .into_inner();
    let shown = service
        .get_user(admin(
            &ember,
            pb::GetUserRequest {
                user: frank.id.clone(),
            },
        ))
        .await
        .expect("found by id")
        .into_inner();
    assert_eq!(shown, frank);
    assert_eq!(
        (
            shown.description.as_str(),
            shown.email.as_str(),
            shown.default_project_id.as_str(),
            shown.enabled
        ),
        (
            "runs the builds",
            "frank@example.com",
            amber.id.as_str(),
            true
        )
    );
    for project in ["amber", "gray"] {
        service
            .add_role(admin(&ember, user_role("frank", project, "member")))
            .await
            .expect("given");
    }
    assert_eq!(
        login_status(&ember, "frank", "frank-password", "gray").await,
        StatusCode::UNAUTHORIZED,
        "gray is disabled"
    );

    // Users.
    let update_user = |update: pb::UpdateUserRequest| {
        admin(
            &ember,
            pb::UpdateUserRequest {
                user: "frank".into(),
                ..update
            },
        )
    };
    let of_frank = |update: pb::UpdateUserRequest| pb::UpdateUserRequest {
        user: "frank".into(),
        ..update
    };
    for (update, code, message) in [
        (
            of_frank(pb::UpdateUserRequest {
                name: Some("demo".into()),
                ..Default::default()
            }),
            Code::AlreadyExists,
            "a user named \"demo\" already exists",
        ),
        (
            of_frank(pb::UpdateUserRequest {
                name: Some("fr ank".into()),
                ..Default::default()
            }),
            Code::InvalidArgument,
            "user name \"fr ank\"",
        ),
        (
            of_frank(pb::UpdateUserRequest {
                default_project: Some("nowhere".into()),
                ..Default::default()
            }),
            Code::NotFound,
            "project \"nowhere\" not found",
        ),
        (
            pb::UpdateUserRequest {
                user: "nobody".into(),
                ..Default::default()
            },
            Code::NotFound,
            "user \"nobody\" not found",
        ),
    ] {
        refused(
            service.update_user(admin(&ember, update)).await,
            code,
            message,
        );
    }
    let updated = service
        .update_user(update_user(pb::UpdateUserRequest {
            description: Some(String::new()),
            email: Some("frank@builds.example.com".into()),
            ..Default::default()
        }))
        .await
        .expect("updated")
        .into_inner();
    assert_eq!(
        (
            updated.description.as_str(),
            updated.email.as_str(),
            updated.default_project_id.as_str()
        ),
        ("", "frank@builds.example.com", amber.id.as_str()),
        "unset fields keep theirs"
    );
    let token = login(&ember, "frank", "frank-password", "amber").await;
    let disabled = service
        .update_user(update_user(pb::UpdateUserRequest {
            enabled: Some(false),
            ..Default::default()
        }))
        .await
        .expect("disabled")
        .into_inner();
    assert!(!disabled.enabled);
    assert_eq!(
        stacks_status(&ember, &amber.id, &token).await,
        StatusCode::UNAUTHORIZED
    );
    let refusal = call(
        &ember,
        Method::POST,
        "/identity/v3/auth/tokens",
        &[],
        Some(&password_body("frank", "frank-password", "amber")),
    )
    .await;
    let wrong_password = call(
        &ember,
        Method::POST,
        "/identity/v3/auth/tokens",
        &[],
        Some(&password_body("frank", "not-franks-password", "amber")),
    )
    .await;
    assert_eq!(refusal.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        refusal.body, wrong_password.body,
        "a disabled user learns nothing more than a wrong password tells"
    );
    service
        .update_user(update_user(pb::UpdateUserRequest {
            enabled: Some(true),
            name: Some("franklin".into()),
            default_project: Some(String::new()),
            ..Default::default()
        }))
        .await
        .expect("enabled and renamed");
    let franklin = service
        .get_user(admin(
            &ember,
            pb::GetUserRequest {
                user: "franklin".into(),
            },
        ))
        .await
        .expect("renamed")
        .into_inner();
    assert_eq!(franklin.id, frank.id);
    assert_eq!(franklin.default_project_id, "", "cleared");
    assert!(franklin.enabled);
    let token = login(&ember, "franklin", "frank-password", "amber").await;

    // Projects.
    let update_project = |update: pb::UpdateProjectRequest| {
        admin(
            &ember,
            pb::UpdateProjectRequest {
                project: "amber".into(),
                ..update
            },
        )
    };
    for (update, code, message) in [
        (
            pb::UpdateProjectRequest {
                name: Some("demo".into()),
                ..Default::default()
            },
            Code::AlreadyExists,
            "a project named \"demo\" already exists",
        ),
        (
            pb::UpdateProjectRequest {
                description: Some("x".repeat(1025)),
                ..Default::default()
            },
            Code::InvalidArgument,
            "at most 1024 bytes",
        ),
    ] {
        refused(
            service.update_project(update_project(update)).await,
            code,
            message,
        );
    }
    refused(
        service
            .get_project(admin(
                &ember,
                pb::GetProjectRequest {
                    project: "nowhere".into(),
                },
            ))
            .await,
        Code::NotFound,
        "project \"nowhere\" not found",
    );
    let disabled = service
        .update_project(update_project(pb::UpdateProjectRequest {
            enabled: Some(false),
            description: Some("paused".into()),
            ..Default::default()
        }))
        .await
        .expect("disabled")
        .into_inner();
    assert_eq!(
        (disabled.enabled, disabled.description.as_str()),
        (false, "paused")
    );
    assert_eq!(
        stacks_status(&ember, &amber.id, &token).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        login_status(&ember, "franklin", "frank-password", "amber").await,
        StatusCode::UNAUTHORIZED
    );
    let listed = service
        .list_projects(admin(&ember, pb::ListProjectsRequest {}))
        .await
        .expect("listed")
        .into_inner()
        .projects;
    assert!(
        listed
            .iter()
            .any(|project| project.name == "amber" && !project.enabled),
        "{listed:?}"
    );
    service
        .update_project(update_project(pb::UpdateProjectRequest {
            enabled: Some(true),
            name: Some("ochre".into()),
            ..Default::default()
        }))
        .await
        .expect("enabled and renamed");
    let ochre = service
        .get_project(admin(
            &ember,
            pb::GetProjectRequest {
                project: "ochre".into(),
            },
        ))
        .await
        .expect("renamed")
        .into_inner();
    assert_eq!(
        (ochre.id.as_str(), ochre.enabled),
        (amber.id.as_str(), true)
    );
    let token = login(&ember, "franklin", "frank-password", "ochre").await;
    assert_eq!(
        stacks_status(&ember, &amber.id, &token).await,
        StatusCode::OK
    );
    ember.stop().await;
}

on_both_stores!(
    users_and_projects_are_updated_and_disabled,
    users_and_projects_are_updated_and_disabled_on_sqlite,
    users_and_projects_are_updated_and_disabled_on_postgres
);

/// `message` as another Ember service sends it for `user` in `project`:
/// the internal credential and the identity headers, claiming `admin`.
fn internal<T>(credential: &str, user: &str, project: &str, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    Identity::new(user, project, vec!["admin".into()])
        .attach(&InternalCredential::new(credential), &mut request);
    request
}

/// The engine manages identities for a stack's owner without a token: the
/// internal credential must be right, and the directory — not the roles
/// the call claims — must say the user holds `admin` in the project now.
async fn other_services_act_for_users_who_hold_admin(database: Option<&TestDatabase>) {
    let ember = ember_on(database).await;
    ember.seed_identity().await;
    let credential = ember.secrets().internal_credential.clone();
    let mut service = IdentityAdminServiceClient::new(ember.gateway_channel().await);

    refused(
        service
            .list_users(internal(
                "not-the-credential",
                "admin",
                "demo",
                pb::ListUsersRequest {},
            ))
            .await,
        Code::Unauthenticated,
        "internal service credential is wrong",
    );
    // The dev admin holds admin in demo.
    let created = service
        .create_project(internal(
            &credential,
            "admin",
            "demo",
            pb::CreateProjectRequest {
                name: "engine-made".into(),
                ..Default::default()
            },
        ))
        .await
        .expect("the dev admin may")
        .into_inner();
    assert_eq!(created.name, "engine-made");
    // demo holds member only, whatever the call claims.
    refused(
        service
            .list_users(internal(
                &credential,
                "demo",
                "demo",
                pb::ListUsersRequest {},
            ))
            .await,
        Code::PermissionDenied,
        "managing identities needs the admin role: user \"demo\" holds none in project \"demo\" (its roles there: member)",
    );
    refused(
        service
            .list_users(internal(
                &credential,
                "nobody",
                "demo",
                pb::ListUsersRequest {},
            ))
            .await,
        Code::PermissionDenied,
        "there is no user with id \"nobody\"",
    );
    refused(
        service
            .list_users(internal(
                &credential,
                "admin",
                "nowhere",
                pb::ListUsersRequest {},
            ))
            .await,
        Code::PermissionDenied,
        "there is no project with id \"nowhere\"",
    );

    // Admin through a group only: allowed while the membership lasts.
    let gina = create_user(&mut service, &ember, "gina", "gina-password").await;
    service
        .create_group(admin(
            &ember,
            pb::CreateGroupRequest {
                name: "admins".into(),
                ..Default::default()
            },
        ))
        .await
        .expect("group");
    service
        .add_group_member(admin(&ember, membership("admins", "gina")))
        .await
        .expect("member");
    refused(
        service
            .list_groups(internal(
                &credential,
                &gina.id,
                "demo",
                pb::ListGroupsRequest {},
            ))
            .await,
        Code::PermissionDenied,
        "user \"gina\" holds none in project \"demo\" (its roles there: none)",
    );
    service
        .add_role(admin(&ember, group_role("admins", "demo", "admin")))
        .await
        .expect("the group's admin role");
    let groups = service
        .list_groups(internal(
            &credential,
            &gina.id,
            "demo",
            pb::ListGroupsRequest {},
        ))
        .await
        .expect("admin through the group")
        .into_inner()
        .groups;
    assert_eq!(groups.len(), 1, "{groups:?}");
    // Looked up at each call: disabling gina refuses her next one.
    service
        .update_user(admin(
            &ember,
            pb::UpdateUserRequest {
                user: "gina".into(),
                enabled: Some(false),
                ..Default::default()
            },
        ))
        .await
        .expect("disabled");
    refused(
        service
            .list_groups(internal(
                &credential,
                &gina.id,
                "demo",
                pb::ListGroupsRequest {},
            ))
            .await,
        Code::PermissionDenied,
        "user \"gina\" is disabled",
    );
    ember.stop().await;
}

on_both_stores!(
    other_services_act_for_users_who_hold_admin,
    other_services_act_for_users_who_hold_admin_on_sqlite,
    other_services_act_for_users_who_hold_admin_on_postgres
);

/// Before roles were objects, an assignment could name any well-formed
/// role: after the upgrade such a role exists (its id its name), is
/// listed, still logs in, and can be renamed like any other.
async fn roles_named_before_roles_were_objects_survive_the_upgrade(database: &TestDatabase) {
    let earlier = connect(&database.url).await.expect("connects");
    Migrator::up(&earlier, Some(2))
        .await
        .expect("the earlier release's schema");
    let backend = earlier.get_database_backend();
    let now = chrono::Utc::now();
    let hash = password::hash("an earlier long password").expect("hash");
    for (sql, values) in [
        (
            "INSERT INTO identity_projects (id, name, description, created_at) VALUES ($1, $2, $3, $4)",
            vec!["p1".into(), "web".into(), "".into(), now.into()],
        ),
        (
            "INSERT INTO identity_users (id, name, password_hash, default_project_id, created_at) VALUES ($1, $2, $3, $4, $5)",
            vec![
                "u1".into(),
                "dora".into(),
                hash.into(),
                "p1".into(),
                now.into(),
            ],
        ),
        (
            "INSERT INTO identity_role_assignments (user_id, project_id, role) VALUES ($1, $2, $3)",
            vec!["u1".into(), "p1".into(), "member".into()],
        ),
        (
            "INSERT INTO identity_role_assignments (user_id, project_id, role) VALUES ($1, $2, $3)",
            vec!["u1".into(), "p1".into(), "heat_stack_owner".into()],
        ),
    ] {
        earlier
            .execute_raw(statement(backend, sql, values))
            .await
            .expect("an earlier row");
    }
    earlier.close().await.expect("closed");

    let shutdown = CancellationToken::new();
    let directory = Directory::open(&database.url, shutdown.clone())
        .await
        .expect("migrated to today's schema");
    let roles: Vec<(String, String, bool)> = directory
        .store()
        .list_roles()
        .await
        .expect("roles")
        .into_iter()
        .map(|role| (role.id.clone(), role.name.clone(), role.is_built_in()))
        .collect();
    let expected: Vec<(String, String, bool)> = [
        ("admin", true),
        ("heat_stack_owner", false),
        ("member", true),
        ("reader", true),
    ]
    .into_iter()
    .map(|(name, built_in)| (name.to_owned(), name.to_owned(), built_in))
    .collect();
    assert_eq!(roles, expected);
    let dora = directory.find_user("dora").await.expect("dora");
    assert!(dora.enabled, "users of before are enabled");
    assert_eq!((dora.description, dora.email), (None, None));
    assert!(directory.find_project("web").await.expect("web").enabled);
    let login = directory
        .password_login(
            &Reference::Name {
                name: "dora".into(),
                domain: None,
            },
            "an earlier long password",
            None,
        )
        .await
        .expect("logs in");
    assert_eq!(login.roles, ["heat_stack_owner", "member"]);
    directory
        .rename_role("heat_stack_owner", "stack_owner")
        .await
        .expect("renamed");
    assert_eq!(
        directory.store().roles_of("u1", "p1").await.expect("roles"),
        ["member", "stack_owner"]
    );
    shutdown.cancel();
}

ember_runtime::store_suite!(roles_named_before_roles_were_objects_survive_the_upgrade);

/// Everything the admin service holds, as an admin lists it.
async fn directory_state(service: &mut Admin, ember: &TestEmber) -> String {
    let projects = service
        .list_projects(admin(ember, pb::ListProjectsRequest {}))
        .await
        .expect("projects")
        .into_inner();
    let users = service
        .list_users(admin(ember, pb::ListUsersRequest {}))
        .await
        .expect("users")
        .into_inner();
    let roles = service
        .list_roles(admin(ember, pb::ListRolesRequest {}))
        .await
        .expect("roles")
        .into_inner();
    let groups = service
        .list_groups(admin(ember, pb::ListGroupsRequest {}))
        .await
        .expect("groups")
        .into_inner();
    let assignments = service
        .list_role_assignments(admin(ember, pb::ListRoleAssignmentsRequest::default()))
        .await
        .expect("assignments")
        .into_inner();
    format!("{projects:?}\n{users:?}\n{roles:?}\n{groups:?}\n{assignments:?}")
}

/// Every method of the service — read from the proto descriptors, so a new
/// one is walked without being listed — called by a member and by a
/// reader, with a body naming real objects: each is refused (7,
/// PERMISSION_DENIED) and nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_method_refuses_members_and_readers_and_changes_nothing() {
    use prost::Message;
    let ember = TestEmber::start().await;
    ember.seed_identity().await;
    let mut service = IdentityAdminServiceClient::new(ember.gateway_channel().await);
    let before = directory_state(&mut service, &ember).await;
    let reader = ember.token_for("demo", "demo", &["reader"]);
    let descriptors = prost_types::FileDescriptorSet::decode(ember_proto::FILE_DESCRIPTOR_SET)
        .expect("the descriptor set decodes");
    let methods: Vec<String> = descriptors
        .file
        .iter()
        .filter(|file| file.package() == "ember.identity.v1")
        .flat_map(|file| &file.service)
        .filter(|service| service.name() == "IdentityAdminService")
        .flat_map(|service| &service.method)
        .map(|method| method.name().to_owned())
        .collect();
    assert!(methods.len() >= 28, "{methods:?}");
    for method in &methods {
        let target = format!("ember.identity.v1.IdentityAdminService/{method}");
        for (who, token) in [
            ("member", ember.member_token()),
            ("reader", reader.as_str()),
        ] {
            let (success, _, stderr) = crate::cross_project::grpcurl(&ember, token, &target, "{}");
            assert!(!success, "{who} called {method}");
            let code = serde_json::from_str::<serde_json::Value>(&stderr)
                .ok()
                .and_then(|error| error["code"].as_u64());
            assert_eq!(code, Some(7), "{who} on {method}: {stderr}");
        }
    }
    assert_eq!(directory_state(&mut service, &ember).await, before);
    ember.stop().await;
}
