//! Heat's `OS::Keystone::*` types against the cloud's own Keystone,
//! acting through the stack's trust: an admin's stack makes a project, a
//! role, a group and a user that authenticates with the roles the template
//! gives it; an update moves them; a delete leaves nothing in Keystone. A
//! member's stack gets Keystone's own refusal.

use std::collections::BTreeSet;

use ember_openstack::keystone::{Keystone, Kind};
use ember_openstack::testing::Account;
use serde_json::{Value, json};

use super::{CloudEmber, unique};

/// The roles a password login of `user` on `project` gets; `None` when
/// Keystone refuses it.
async fn roles_at_login(
    cloud: &CloudEmber,
    user: &str,
    password: &str,
    project: &str,
) -> Option<BTreeSet<String>> {
    let account = Account {
        user: user.to_owned(),
        password: password.to_owned(),
        project: project.to_owned(),
        user_id: String::new(),
        project_id: String::new(),
    };
    let token = cloud.session(&account).token().await.ok()?;
    Some(token.roles.iter().map(|role| role.name.clone()).collect())
}

fn template(names: &Names, moved: bool) -> Value {
    let groups = if moved {
        json!([])
    } else {
        json!([{"get_resource": "operators"}])
    };
    json!({
        "heat_template_version": "2018-08-31",
        "resources": {
            "project": {"type": "OS::Keystone::Project", "properties": {
                "name": names.project,
                "description": if moved { "moved" } else { "made by a stack" },
                "tags": ["ember"],
            }},
            "operator": {"type": "OS::Keystone::Role", "properties": {"name": names.role}},
            "operators": {"type": "OS::Keystone::Group", "properties": {
                "name": names.group,
                "roles": [{"role": {"get_resource": "operator"}, "project": {"get_resource": "project"}}],
            }},
            "alice": {"type": "OS::Keystone::User", "properties": {
                "name": names.user,
                "password": names.password,
                "email": if moved { "alice@new.example" } else { "alice@example.org" },
                "default_project": {"get_resource": "project"},
                "groups": groups,
            }},
            "membership": {"type": "OS::Keystone::UserRoleAssignment", "properties": {
                "user": {"get_resource": "alice"},
                "roles": [{"role": "member", "project": {"get_resource": "project"}}],
            }},
        },
        "outputs": {
            "project_id": {"value": {"get_resource": "project"}},
            "user_id": {"value": {"get_resource": "alice"}},
        },
    })
}

struct Names {
    project: String,
    role: String,
    group: String,
    user: String,
    password: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admins_stack_makes_keystone_identities_through_its_trust_and_deletes_them() {
    let Some(cloud) = CloudEmber::start("openstack::keystone").await else {
        return;
    };
    let admin = cloud.cloud.facts.admin.clone();
    let names = Names {
        project: unique("ks-project"),
        role: unique("ks-operator"),
        group: unique("ks-operators"),
        user: unique("ks-alice"),
        password: "Kestrel-pass-2026".to_owned(),
    };
    let stack = cloud
        .create_stack(&admin, &unique("identities"), template(&names, false))
        .await;
    cloud.settled_as(&admin, &stack, "CREATE_COMPLETE").await;
    let outputs = cloud.outputs(&admin, &stack).await;
    let project_id = outputs["project_id"]
        .as_str()
        .expect("a project id")
        .to_owned();
    let user_id = outputs["user_id"].as_str().expect("a user id").to_owned();

    let keystone = Keystone::new(&cloud.session(&admin));
    let project = keystone
        .get(Kind::Project, &project_id)
        .await
        .expect("Keystone answers")
        .expect("the project is in Keystone");
    assert_eq!(project["name"], names.project.as_str());
    assert_eq!(project["tags"], json!(["ember"]));
    let user = keystone
        .get(Kind::User, &user_id)
        .await
        .expect("Keystone answers")
        .expect("the user is in Keystone");
    assert_eq!(user["default_project_id"], project_id.as_str());
    assert_eq!(
        roles_at_login(&cloud, &names.user, &names.password, &names.project).await,
        Some(BTreeSet::from([
            "member".to_owned(),
            "reader".to_owned(),
            names.role.clone()
        ])),
        "the user holds its assignment's role (and reader, which Keystone's member implies) and its group's"
    );

    let updated = cloud
        .call(
            &admin,
            reqwest::Method::PUT,
            &stack,
            Some(json!({"template": template(&names, true)})),
        )
        .await;
    assert_eq!(updated.status, reqwest::StatusCode::ACCEPTED, "{updated:?}");
    cloud.settled_as(&admin, &stack, "UPDATE_COMPLETE").await;
    assert_eq!(
        roles_at_login(&cloud, &names.user, &names.password, &names.project).await,
        Some(BTreeSet::from(["member".to_owned(), "reader".to_owned()])),
        "leaving the group took its role"
    );
    let user = keystone
        .get(Kind::User, &user_id)
        .await
        .expect("Keystone answers")
        .expect("the same user, changed in place");
    assert_eq!(user["email"], "alice@new.example");

    cloud.delete_stack(&admin, &stack).await;
    for (kind, name) in [
        (Kind::Project, &names.project),
        (Kind::User, &names.user),
        (Kind::Group, &names.group),
        (Kind::Role, &names.role),
    ] {
        assert_eq!(
            keystone.ids_of(kind, name).await.expect("Keystone answers"),
            Vec::<String>::new(),
            "{} {name} is gone from Keystone",
            kind.member()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_stack_gets_keystones_refusal() {
    let Some(cloud) = CloudEmber::start("openstack::keystone_member").await else {
        return;
    };
    let demo = cloud.demo().clone();
    let name = unique("ks-members-project");
    let stack = cloud
        .create_stack(
            &demo,
            &unique("not-mine"),
            json!({
                "heat_template_version": "2018-08-31",
                "resources": {"project": {"type": "OS::Keystone::Project", "properties": {"name": name}}},
            }),
        )
        .await;
    let settled = cloud.settled_as(&demo, &stack, "CREATE_FAILED").await;
    let reason = settled["stack_status_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("HTTP 403"), "Keystone's 403: {reason}");
    let keystone = Keystone::new(&cloud.session(&cloud.cloud.facts.admin));
    assert_eq!(
        keystone
            .ids_of(Kind::Project, &name)
            .await
            .expect("Keystone answers"),
        Vec::<String>::new()
    );
    cloud.delete_stack(&demo, &stack).await;
}
