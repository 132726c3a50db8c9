//! `ember.identity.v1.IdentityAdminService` through the gateway's gRPC
//! door: admins only, every bad input refused by name, and a deleted
//! project's tokens refused.

use ember_proto::identity::v1 as pb;
use ember_proto::identity::v1::identity_admin_service_client::IdentityAdminServiceClient;
use ember_tests::{TestEmber, with_bearer};
use reqwest::StatusCode;
use tonic::Code;

use super::{admin, login, stacks_status};

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
                id: String::new(),
            },
        ))
        .await
        .expect("created")
        .into_inner();
    assert_eq!(project.id.len(), 32, "a Keystone-style id: {project:?}");
    assert_eq!(project.domain_id, "default");
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
            Code::FailedPrecondition,
            "already exists",
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
                .add_role(admin(
                    &ember,
                    pb::RoleAssignment {
                        user: "nobody".into(),
                        project: "green".into(),
                        role: "member".into(),
                    },
                ))
                .await
                .expect_err("an unknown user"),
            Code::NotFound,
            "user \"nobody\" not found",
        ),
        (
            service
                .remove_role(admin(
                    &ember,
                    pb::RoleAssignment {
                        user: "demo".into(),
                        project: "green".into(),
                        role: "member".into(),
                    },
                ))
                .await
                .expect_err("a role not held"),
            Code::NotFound,
            "not found",
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
                id: String::new(),
            },
        ))
        .await
        .expect("created");
    let assignment = service
        .add_role(admin(
            &ember,
            pb::RoleAssignment {
                user: "carol".into(),
                project: "green".into(),
                role: "member".into(),
            },
        ))
        .await
        .expect("added")
        .into_inner();
    assert_eq!(assignment.project, project.id, "answers carry ids");
    service
        .add_role(admin(
            &ember,
            pb::RoleAssignment {
                user: "carol".into(),
                project: "green".into(),
                role: "member".into(),
            },
        ))
        .await
        .expect("adding again changes nothing");
    let listed = service
        .list_role_assignments(admin(
            &ember,
            pb::ListRoleAssignmentsRequest {
                user: "carol".into(),
                project: String::new(),
            },
        ))
        .await
        .expect("listed")
        .into_inner()
        .assignments;
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
