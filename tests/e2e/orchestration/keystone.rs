//! Heat's `OS::Keystone::*` types against `ember dev`'s built-in identity:
//! an admin's stack makes a project, a role, a group and a user whose
//! password logs in with the roles the template gives it (directly,
//! through the group, and through a role assignment); an update moves
//! those roles; a delete leaves nothing. A member's stack is refused by the
//! identity itself (only admins manage identities, as in Keystone), and
//! what the built-in identity cannot honour is refused when validated.

use std::collections::BTreeSet;

use ember_proto::identity::v1 as pb;
use ember_proto::identity::v1::identity_admin_service_client::IdentityAdminServiceClient;
use ember_tests::TestEmber;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tonic::Code;

use super::HeatRest;
use crate::identity::{admin, call, password_body};

const PASSWORD: &str = "Kestrel-pass-2026";

/// The identities of the first template; `moved` drops the user's group
/// and the reader assignment, changes the user's email and the project's
/// description.
fn template(moved: bool) -> Value {
    let groups = if moved {
        json!([])
    } else {
        json!([{"get_resource": "operators"}])
    };
    let mut resources = json!({
        "project": {
            "type": "OS::Keystone::Project",
            "properties": {
                "name": "ks-project",
                "description": if moved { "moved" } else { "made by a stack" },
            },
        },
        "operator": {
            "type": "OS::Keystone::Role",
            "properties": {"name": "ks-operator"},
        },
        "operators": {
            "type": "OS::Keystone::Group",
            "properties": {
                "name": "ks-operators",
                "roles": [{"role": {"get_resource": "operator"}, "project": {"get_resource": "project"}}],
            },
        },
        "alice": {
            "type": "OS::Keystone::User",
            "properties": {
                "name": "ks-alice",
                "password": PASSWORD,
                "email": if moved { "alice@new.example" } else { "alice@example.org" },
                "default_project": {"get_resource": "project"},
                "groups": groups,
                "roles": [{"role": "member", "project": {"get_resource": "project"}}],
            },
        },
    });
    if !moved {
        resources["reading"] = json!({
            "type": "OS::Keystone::UserRoleAssignment",
            "properties": {
                "user": {"get_resource": "alice"},
                "roles": [{"role": "reader", "project": "ks-project"}],
            },
        });
    }
    json!({
        "heat_template_version": "2018-08-31",
        "resources": resources,
        "outputs": {
            "project_id": {"value": {"get_resource": "project"}},
            "project_domain": {"value": {"get_attr": ["project", "domain_id"]}},
            "user_default_project": {"value": {"get_attr": ["alice", "default_project_id"]}},
        },
    })
}

/// The names of the roles a password login of `user` on `project` gets;
/// `None` when the login is refused (401).
async fn roles_at_login(ember: &TestEmber, user: &str, project: &str) -> Option<BTreeSet<String>> {
    let answer = call(
        ember,
        Method::POST,
        "/identity/v3/auth/tokens",
        &[],
        Some(&password_body(user, PASSWORD, project)),
    )
    .await;
    if answer.status == StatusCode::UNAUTHORIZED {
        return None;
    }
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    Some(
        answer.body["token"]["roles"]
            .as_array()
            .expect("roles")
            .iter()
            .filter_map(|role| role["name"].as_str().map(str::to_owned))
            .collect(),
    )
}

fn names(roles: &[&str]) -> BTreeSet<String> {
    roles.iter().map(|role| (*role).to_owned()).collect()
}

async fn identities(ember: &TestEmber) -> IdentityAdminServiceClient<tonic::transport::Channel> {
    IdentityAdminServiceClient::new(ember.gateway_channel().await)
}

async fn output(heat: &HeatRest, stack: &str, key: &str) -> Value {
    heat.get(&format!("{stack}/outputs/{key}")).await.body["output"]["output_value"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admins_stack_makes_identities_that_log_in_move_with_updates_and_go_with_it() {
    let ember = TestEmber::start().await;
    ember.seed_identity().await;
    let heat = HeatRest::new(&ember, "demo", Some(ember.admin_token()));
    let created = heat
        .post(
            "/stacks",
            json!({"stack_name": "identities", "template": template(false)}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
    let stack = format!(
        "/stacks/identities/{}",
        created.body["stack"]["id"].as_str().expect("id")
    );
    let settled = heat.wait_until_settled(&stack).await;
    assert_eq!(settled["stack_status"], "CREATE_COMPLETE", "{settled}");

    let project_id = output(&heat, &stack, "project_id").await;
    assert_eq!(
        output(&heat, &stack, "user_default_project").await,
        project_id
    );
    assert_eq!(output(&heat, &stack, "project_domain").await, "default");
    assert_eq!(
        roles_at_login(&ember, "ks-alice", "ks-project").await,
        Some(names(&["member", "ks-operator", "reader"])),
        "the user holds its own role, its group's and its assignment's"
    );
    let mut identity = identities(&ember).await;
    let project = identity
        .get_project(admin(
            &ember,
            pb::GetProjectRequest {
                project: "ks-project".into(),
            },
        ))
        .await
        .expect("the project")
        .into_inner();
    assert_eq!(Value::String(project.id.clone()), project_id);
    assert_eq!(project.description, "made by a stack");

    let updated = heat
        .call(
            Method::PUT,
            &stack,
            Some(json!({"template": template(true)})),
        )
        .await;
    assert_eq!(updated.status, StatusCode::ACCEPTED, "{updated:?}");
    let settled = heat.wait_until_settled(&stack).await;
    assert_eq!(settled["stack_status"], "UPDATE_COMPLETE", "{settled}");
    assert_eq!(
        roles_at_login(&ember, "ks-alice", "ks-project").await,
        Some(names(&["member"])),
        "the group and the assignment the update dropped took their roles"
    );
    let user = identity
        .get_user(admin(
            &ember,
            pb::GetUserRequest {
                user: "ks-alice".into(),
            },
        ))
        .await
        .expect("the user")
        .into_inner();
    assert_eq!(user.email, "alice@new.example");
    let project = identity
        .get_project(admin(
            &ember,
            pb::GetProjectRequest {
                project: "ks-project".into(),
            },
        ))
        .await
        .expect("the project, kept in place")
        .into_inner();
    assert_eq!(Value::String(project.id), project_id);
    assert_eq!(project.description, "moved");

    let deleted = heat.call(Method::DELETE, &stack, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{deleted:?}");
    heat.wait_until_deleted(&stack).await;
    assert_eq!(
        roles_at_login(&ember, "ks-alice", "ks-project").await,
        None,
        "the user is gone"
    );
    for gone in [
        identity
            .get_project(admin(
                &ember,
                pb::GetProjectRequest {
                    project: "ks-project".into(),
                },
            ))
            .await
            .map(drop),
        identity
            .get_role(admin(
                &ember,
                pb::GetRoleRequest {
                    role: "ks-operator".into(),
                },
            ))
            .await
            .map(drop),
        identity
            .get_group(admin(
                &ember,
                pb::GetGroupRequest {
                    group: "ks-operators".into(),
                },
            ))
            .await
            .map(drop),
    ] {
        assert_eq!(gone.expect_err("deleted").code(), Code::NotFound);
    }
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_stack_is_refused_by_the_identity_and_makes_nothing() {
    let ember = TestEmber::start().await;
    ember.seed_identity().await;
    let heat = HeatRest::member(&ember);
    let created = heat
        .post(
            "/stacks",
            json!({"stack_name": "not-mine", "template": {
                "heat_template_version": "2018-08-31",
                "resources": {"project": {
                    "type": "OS::Keystone::Project",
                    "properties": {"name": "ks-members-project"},
                }},
            }}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
    let stack = format!(
        "/stacks/not-mine/{}",
        created.body["stack"]["id"].as_str().expect("id")
    );
    let settled = heat.wait_until_settled(&stack).await;
    assert_eq!(settled["stack_status"], "CREATE_FAILED", "{settled}");
    let reason = settled["stack_status_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("admin role"), "{reason}");
    let missing = identities(&ember)
        .await
        .get_project(admin(
            &ember,
            pb::GetProjectRequest {
                project: "ks-members-project".into(),
            },
        ))
        .await;
    assert_eq!(missing.expect_err("never made").code(), Code::NotFound);
    // Deleting the failed stack deletes nothing it did not make.
    assert_eq!(
        heat.call(Method::DELETE, &stack, None).await.status,
        StatusCode::NO_CONTENT
    );
    heat.wait_until_deleted(&stack).await;
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_built_in_identity_cannot_honour_is_refused_when_validated() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::new(&ember, "demo", Some(ember.admin_token()));
    for (resource, expected) in [
        (
            json!({"type": "OS::Keystone::Project", "properties": {"parent": "elsewhere"}}),
            "parent: the built-in identity has no project hierarchy",
        ),
        (
            json!({"type": "OS::Keystone::Project", "properties": {"domain": "heat"}}),
            "domain: the built-in identity has one domain",
        ),
        (
            json!({"type": "OS::Keystone::User", "properties": {
                "roles": [{"role": "member", "domain": "default"}]}}),
            "roles: the built-in identity gives roles on projects only",
        ),
        (
            json!({"type": "OS::Keystone::Group", "properties": {
                "roles": [{"role": "member", "project": "demo", "domain": "default"}]}}),
            "Cannot define the following properties at the same time: project, domain",
        ),
        (
            json!({"type": "OS::Keystone::UserRoleAssignment", "properties": {
                "user": "demo", "roles": [{"role": "member"}]}}),
            "Either project or domain must be specified for role member",
        ),
    ] {
        let answer = heat
            .post(
                "/validate",
                json!({"template": {
                    "heat_template_version": "2018-08-31",
                    "resources": {"identity": resource},
                }}),
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{expected}: {answer:?}"
        );
        assert!(
            answer.message().contains(expected),
            "{expected:?} not in {:?}",
            answer.message()
        );
    }
    ember.stop().await;
}
