//! `ember identity …` against a real `ember dev`: the dev admin manages
//! projects, users, roles, groups and role assignments with the exact
//! spellings scripts rely on, and what they change decides who logs in at
//! the Keystone front door; bad input and non-admins are refused by name;
//! `ember dev` seeds the dev users and writes clouds.yaml; EMBER_URL and
//! EMBER_TOKEN (which the README has users export) do not stop `ember dev`
//! or `ember token issue`.

mod support;

use std::process::{Command, Output};

use support::{Dev, fail, field, succeed, text};

const EMBER: &str = env!("CARGO_BIN_EXE_ember");

#[test]
fn identities_through_the_cli() {
    let data_dir = tempfile::tempdir().expect("data dir");
    let dir = data_dir.path();
    let _dev = Dev::start(dir);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !dir.join("clouds.yaml").exists() {
        assert!(std::time::Instant::now() < deadline, "no clouds.yaml");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let clouds = std::fs::read_to_string(dir.join("clouds.yaml")).expect("clouds.yaml");
    assert!(
        clouds.contains("  ember:\n") && clouds.contains("  ember-admin:\n"),
        "{clouds}"
    );
    assert!(
        clouds.contains("/identity") && clouds.contains("project_name: demo"),
        "{clouds}"
    );
    let passwords: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("dev-identity.json")).expect("dev-identity.json"),
    )
    .expect("json");
    assert!(clouds.contains(passwords["demo"].as_str().expect("demo password")));

    let users = succeed(&["identity", "user", "list"], dir);
    assert!(
        users.lines().any(|line| line.starts_with("admin ")),
        "{users}"
    );
    assert!(
        users.lines().any(|line| line.starts_with("demo ")),
        "{users}"
    );
    let created = succeed(
        &[
            "identity",
            "project",
            "create",
            "web",
            "--description",
            "the web team",
        ],
        dir,
    );
    assert!(created.contains("project web created"), "{created}");
    let projects = succeed(&["identity", "project", "list"], dir);
    assert!(
        projects
            .lines()
            .any(|line| line.starts_with("web ") && line.contains("the web team")),
        "{projects}"
    );
    let created = succeed(
        &[
            "identity",
            "user",
            "create",
            "alice",
            "--password",
            "alice-password",
            "--project",
            "web",
        ],
        dir,
    );
    assert!(created.contains("user alice created"), "{created}");
    succeed(&["identity", "role", "add", "alice", "web", "member"], dir);
    let roles = succeed(&["identity", "role", "list", "--project", "web"], dir);
    assert!(roles.contains("member"), "{roles}");
    let roles = succeed(&["identity", "role", "list", "--user", "alice"], dir);
    assert_eq!(
        roles.lines().count(),
        2,
        "a header and one assignment: {roles}"
    );

    // Bad input, named.
    let refused = fail(
        &["identity", "user", "create", "bob", "--password", "short"],
        dir,
    );
    assert!(refused.contains("at least 8 characters"), "{refused}");
    let refused = fail(&["identity", "project", "create", "web"], dir);
    assert!(refused.contains("already exists"), "{refused}");
    let refused = fail(&["identity", "role", "add", "nobody", "web", "member"], dir);
    assert!(refused.contains("user \"nobody\" not found"), "{refused}");
    let refused = fail(
        &["identity", "role", "add", "alice", "web", "bad role"],
        dir,
    );
    assert!(refused.contains("role \"bad role\""), "{refused}");
    let refused = fail(
        &["identity", "role", "remove", "alice", "web", "admin"],
        dir,
    );
    assert!(refused.contains("not found"), "{refused}");
    let refused = fail(&["identity", "project", "create", "x\ny"], dir);
    assert!(refused.contains("project name"), "{refused}");

    // A member may not manage identities (EMBER_URL/EMBER_TOKEN select it).
    let credentials: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("dev-credentials.json")).expect("credentials"),
    )
    .expect("json");
    let output = Command::new(EMBER)
        .args(["identity", "project", "list"])
        .env(
            "EMBER_URL",
            credentials["gateway_url"].as_str().expect("url"),
        )
        .env(
            "EMBER_TOKEN",
            credentials["member"]["token"].as_str().expect("token"),
        )
        .output()
        .expect("runs");
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("admin role"),
        "{}",
        text(&output)
    );

    succeed(
        &[
            "identity",
            "user",
            "password",
            "alice",
            "--password",
            "another-password",
        ],
        dir,
    );
    succeed(
        &["identity", "role", "remove", "alice", "web", "member"],
        dir,
    );
    succeed(&["identity", "user", "delete", "alice"], dir);
    succeed(&["identity", "project", "delete", "web"], dir);
    let projects = succeed(&["identity", "project", "list"], dir);
    assert!(!projects.contains("web"), "{projects}");
    let refused = fail(&["identity", "user", "delete", "alice"], dir);
    assert!(refused.contains("not found"), "{refused}");
}

#[test]
fn client_environment_variables_do_not_stop_the_server_or_token_issue() {
    let data_dir = tempfile::tempdir().expect("data dir");
    let output = Command::new(EMBER)
        .args(["token", "issue", "--user", "alice", "--project", "p1"])
        .env("EMBER_DATA_DIR", data_dir.path())
        .env("EMBER_URL", "http://127.0.0.1:8004")
        .env("EMBER_TOKEN", "some-token")
        .env("EMBER_AUTH__SIGNING_KEY", "k".repeat(40))
        .env("EMBER_AUTH__INTERNAL_CREDENTIAL", "c".repeat(40))
        .output()
        .expect("runs");
    assert!(output.status.success(), "{}", text(&output));
    // A misspelt key inside a section is still an error naming it.
    let output = Command::new(EMBER)
        .args(["token", "issue", "--user", "alice", "--project", "p1"])
        .env("EMBER_DATA_DIR", data_dir.path())
        .env("EMBER_AUTH__SIGNING_KEY", "k".repeat(40))
        .env("EMBER_AUTH__SIGNNG_KEY", "typo")
        .output()
        .expect("runs");
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("signng_key"),
        "{}",
        text(&output)
    );

    // `ember dev` with both exported starts and serves.
    let dev_dir = tempfile::tempdir().expect("data dir");
    let mut child = Command::new(EMBER)
        .args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dev_dir.path())
        .env("EMBER_URL", "http://127.0.0.1:8004")
        .env("EMBER_TOKEN", "some-token")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("ember dev starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let started = loop {
        if dev_dir.path().join("clouds.yaml").exists() {
            break true;
        }
        if child.try_wait().expect("status").is_some() || std::time::Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        started,
        "ember dev did not start with EMBER_URL and EMBER_TOKEN set"
    );
}

/// Roles are objects: a created role is listed beside the built-in admin,
/// member and reader, shown by name or id, renamed with its assignments
/// following the new name, and deleted with every assignment of it (a
/// user's and a group's); built-in roles can be neither renamed nor
/// deleted, a duplicate is refused, and giving a role that does not exist
/// is refused — each refusal naming the role.
#[test]
fn roles_are_created_renamed_and_deleted_with_their_assignments() {
    let data_dir = tempfile::tempdir().expect("data dir");
    let dir = data_dir.path();
    let _dev = Dev::start(dir);

    let definitions = succeed(&["identity", "role", "definitions"], dir);
    for built_in in ["admin", "member", "reader"] {
        assert_eq!(
            row(&definitions, built_in),
            [built_in, built_in, "yes"],
            "built in, its id its name: {definitions}"
        );
    }
    assert_eq!(definitions.lines().count(), 4, "{definitions}");

    let created = succeed(&["identity", "role", "create", "heat_stack_owner"], dir);
    assert!(
        created.starts_with("role heat_stack_owner created (id "),
        "{created}"
    );
    let definitions = succeed(&["identity", "role", "definitions"], dir);
    let listed = row(&definitions, "heat_stack_owner");
    assert_eq!(listed[2], "no", "not built in: {definitions}");
    let role_id = listed[1].to_owned();
    assert!(created.contains(&role_id), "{created} / {definitions}");
    for name_or_id in ["heat_stack_owner", role_id.as_str()] {
        let shown = succeed(&["identity", "role", "show", name_or_id], dir);
        assert_eq!(field(&shown, "name"), "heat_stack_owner", "{shown}");
        assert_eq!(field(&shown, "id"), role_id, "{shown}");
        assert_eq!(field(&shown, "built in"), "no", "{shown}");
    }
    let shown = succeed(&["identity", "role", "show", "admin"], dir);
    assert_eq!(field(&shown, "built in"), "yes", "{shown}");
    let refused = fail(&["identity", "role", "create", "heat_stack_owner"], dir);
    assert!(
        refused.contains("a role named \"heat_stack_owner\"") && refused.contains("already exists"),
        "{refused}"
    );

    // An assignment made with the role follows its new name.
    succeed(&["identity", "project", "create", "shop"], dir);
    succeed(
        &[
            "identity",
            "user",
            "create",
            "bob",
            "--password",
            "bob has a long password",
        ],
        dir,
    );
    let shop_id = id_of(&["identity", "project", "show", "shop"], dir);
    let bob_id = id_of(&["identity", "user", "show", "bob"], dir);
    let added = succeed(
        &["identity", "role", "add", "bob", "shop", "heat_stack_owner"],
        dir,
    );
    assert_eq!(
        added.trim(),
        "bob has role heat_stack_owner on project shop",
        "{added}"
    );
    let renamed = succeed(
        &[
            "identity",
            "role",
            "set",
            "heat_stack_owner",
            "--name",
            "stack_owner",
        ],
        dir,
    );
    assert_eq!(
        renamed.trim(),
        "role heat_stack_owner renamed stack_owner",
        "{renamed}"
    );
    let assignments = succeed(&["identity", "role", "list", "--user", "bob"], dir);
    assert_eq!(
        row(&assignments, &bob_id),
        [bob_id.as_str(), shop_id.as_str(), "stack_owner"],
        "{assignments}"
    );
    assert!(!assignments.contains("heat_stack_owner"), "{assignments}");
    let shown = succeed(&["identity", "role", "show", &role_id], dir);
    assert_eq!(field(&shown, "name"), "stack_owner", "same id: {shown}");
    let refused = fail(&["identity", "role", "show", "heat_stack_owner"], dir);
    assert!(
        refused.contains("role \"heat_stack_owner\" not found"),
        "{refused}"
    );

    // Built-in roles stay; a role that does not exist cannot be given.
    let refused = fail(&["identity", "role", "delete", "admin"], dir);
    assert!(
        refused.contains("role \"admin\" is built in: it cannot be deleted"),
        "{refused}"
    );
    let refused = fail(
        &["identity", "role", "set", "member", "--name", "boss"],
        dir,
    );
    assert!(
        refused.contains("role \"member\" is built in: it cannot be renamed"),
        "{refused}"
    );
    let refused = fail(&["identity", "role", "add", "bob", "shop", "ghost"], dir);
    assert!(refused.contains("role \"ghost\" not found"), "{refused}");
    let refused = fail(&["identity", "role", "create", "bad role"], dir);
    assert!(refused.contains("role name \"bad role\""), "{refused}");
    let definitions = succeed(&["identity", "role", "definitions"], dir);
    assert_eq!(row(&definitions, "admin"), ["admin", "admin", "yes"]);
    assert_eq!(row(&definitions, "member"), ["member", "member", "yes"]);
    assert!(!definitions.contains("ghost") && !definitions.contains("boss"));

    // Deleting the role takes a user's and a group's assignments of it.
    succeed(&["identity", "group", "create", "owners"], dir);
    succeed(
        &[
            "identity",
            "role",
            "add",
            "--group",
            "owners",
            "shop",
            "stack_owner",
        ],
        dir,
    );
    let assignments = succeed(&["identity", "role", "list", "--project", "shop"], dir);
    assert_eq!(
        assignments.matches("stack_owner").count(),
        2,
        "bob's and the group's: {assignments}"
    );
    let deleted = succeed(&["identity", "role", "delete", "stack_owner"], dir);
    assert_eq!(
        deleted.trim(),
        "role stack_owner deleted, with its assignments",
        "{deleted}"
    );
    let assignments = succeed(&["identity", "role", "list", "--project", "shop"], dir);
    assert_eq!(
        assignments.lines().count(),
        1,
        "a header only: {assignments}"
    );
    let definitions = succeed(&["identity", "role", "definitions"], dir);
    assert!(!definitions.contains("stack_owner"), "{definitions}");
    let refused = fail(&["identity", "role", "show", &role_id], dir);
    assert!(
        refused.contains(&format!("role \"{role_id}\" not found")),
        "{refused}"
    );
    let refused = fail(&["identity", "role", "delete", "stack_owner"], dir);
    assert!(
        refused.contains("role \"stack_owner\" not found"),
        "{refused}"
    );
}

/// Groups, and enabling users and projects, decide who logs in at the
/// Keystone front door: a user holding a role only through a group logs in
/// to that project once both it and the project are enabled, is refused
/// while either is disabled, and is refused (its earlier token too) once
/// taken out of the group. Along the way every group command, `project
/// show|set` and `user show|set` are read as a user reads them; bad input
/// is refused naming what was wrong; the dev member may not create a group.
#[test]
fn groups_and_enabling_decide_who_logs_in() {
    const PASSWORD: &str = "bob has a long password";
    let data_dir = tempfile::tempdir().expect("data dir");
    let dir = data_dir.path();
    let dev = Dev::start(dir);

    // A disabled project and a disabled user, described.
    let created = succeed(
        &[
            "identity",
            "project",
            "create",
            "shop",
            "--description",
            "the shop",
            "--disable",
        ],
        dir,
    );
    assert!(
        created.starts_with("project shop created (id "),
        "{created}"
    );
    let shown = succeed(&["identity", "project", "show", "shop"], dir);
    assert_eq!(field(&shown, "name"), "shop", "{shown}");
    assert_eq!(field(&shown, "enabled"), "no", "{shown}");
    assert_eq!(field(&shown, "description"), "the shop", "{shown}");
    let shop_id = field(&shown, "id");
    let projects = succeed(&["identity", "project", "list"], dir);
    assert_eq!(row(&projects, "shop")[1..3], [shop_id.as_str(), "no"]);
    let created = succeed(
        &[
            "identity",
            "user",
            "create",
            "bob",
            "--password",
            PASSWORD,
            "--project",
            "shop",
            "--description",
            "on call",
            "--email",
            "bob@example.com",
            "--disable",
        ],
        dir,
    );
    assert!(created.starts_with("user bob created (id "), "{created}");
    let shown = succeed(&["identity", "user", "show", "bob"], dir);
    assert_eq!(field(&shown, "enabled"), "no", "{shown}");
    assert_eq!(field(&shown, "email"), "bob@example.com", "{shown}");
    assert_eq!(field(&shown, "description"), "on call", "{shown}");
    assert_eq!(field(&shown, "default project"), shop_id, "{shown}");

    // A group: created, listed, shown, renamed and described.
    let created = succeed(
        &[
            "identity",
            "group",
            "create",
            "shop-admins",
            "--description",
            "they run the shop",
        ],
        dir,
    );
    assert!(
        created.starts_with("group shop-admins created (id "),
        "{created}"
    );
    let groups = succeed(&["identity", "group", "list"], dir);
    assert!(
        groups
            .lines()
            .any(|line| line.starts_with("shop-admins ") && line.ends_with("they run the shop")),
        "{groups}"
    );
    let shown = succeed(&["identity", "group", "show", "shop-admins"], dir);
    assert_eq!(field(&shown, "description"), "they run the shop", "{shown}");
    let group_id = field(&shown, "id");
    assert!(created.contains(&group_id), "{created} / {shown}");
    let updated = succeed(
        &[
            "identity",
            "group",
            "set",
            "shop-admins",
            "--name",
            "shop-owners",
            "--description",
            "they own the shop",
        ],
        dir,
    );
    assert_eq!(updated.trim(), "group shop-owners updated", "{updated}");
    let shown = succeed(&["identity", "group", "show", &group_id], dir);
    assert_eq!(field(&shown, "name"), "shop-owners", "{shown}");
    assert_eq!(field(&shown, "description"), "they own the shop", "{shown}");
    let refused = fail(&["identity", "group", "show", "shop-admins"], dir);
    assert!(
        refused.contains("group \"shop-admins\" not found"),
        "{refused}"
    );

    // Bob joins it; the group gets member on the shop.
    let added = succeed(
        &["identity", "group", "add-user", "shop-owners", "bob"],
        dir,
    );
    assert_eq!(
        added.trim(),
        "bob is a member of group shop-owners",
        "{added}"
    );
    let members = succeed(&["identity", "group", "members", "shop-owners"], dir);
    assert_eq!(members.lines().count(), 2, "a header and bob: {members}");
    assert!(
        row(&members, "bob").contains(&"bob@example.com"),
        "{members}"
    );
    let added = succeed(
        &[
            "identity",
            "role",
            "add",
            "--group",
            "shop-owners",
            "shop",
            "member",
        ],
        dir,
    );
    assert_eq!(
        added.trim(),
        "group shop-owners has role member on project shop",
        "{added}"
    );
    let assignments = succeed(&["identity", "role", "list", "--group", "shop-owners"], dir);
    assert_eq!(
        row(&assignments, &group_id),
        [group_id.as_str(), shop_id.as_str(), "member"],
        "the user column empty: {assignments}"
    );
    let named = succeed(
        &[
            "identity",
            "role",
            "list",
            "--group",
            "shop-owners",
            "--names",
        ],
        dir,
    );
    assert_eq!(
        row(&named, "shop-owners"),
        ["shop-owners", "shop", "member"],
        "--names shows names for ids: {named}"
    );
    let own = succeed(&["identity", "role", "list", "--user", "bob"], dir);
    assert_eq!(own.lines().count(), 1, "bob's own only: {own}");

    // Logins follow the user's and the project's enabled flags.
    assert_eq!(login(&dev.url, "bob", PASSWORD, "shop").0, 401);
    let updated = succeed(&["identity", "user", "set", "bob", "--enable"], dir);
    assert_eq!(updated.trim(), "user bob updated", "{updated}");
    let shown = succeed(&["identity", "user", "show", "bob"], dir);
    assert_eq!(field(&shown, "enabled"), "yes", "{shown}");
    assert_eq!(
        login(&dev.url, "bob", PASSWORD, "shop").0,
        401,
        "the project is still disabled"
    );
    let updated = succeed(&["identity", "project", "set", "shop", "--enable"], dir);
    assert_eq!(updated.trim(), "project shop updated", "{updated}");
    let (status, token) = login(&dev.url, "bob", PASSWORD, "shop");
    assert_eq!(status, 201, "bob holds member on shop through his group");
    let token = token.expect("X-Subject-Token");
    let output = ember_as(&dev.url, &token, &["whoami"]);
    assert!(output.status.success(), "{}", text(&output));

    let updated = succeed(
        &[
            "identity",
            "project",
            "set",
            "shop",
            "--disable",
            "--description",
            "closed for now",
        ],
        dir,
    );
    assert_eq!(
        updated.trim(),
        "project shop updated (disabled: its tokens no longer work)",
        "{updated}"
    );
    let shown = succeed(&["identity", "project", "show", "shop"], dir);
    assert_eq!(field(&shown, "enabled"), "no", "{shown}");
    assert_eq!(field(&shown, "description"), "closed for now", "{shown}");
    assert_eq!(login(&dev.url, "bob", PASSWORD, "shop").0, 401);
    let output = ember_as(&dev.url, &token, &["whoami"]);
    assert!(!output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("revoked"), "{}", text(&output));
    succeed(&["identity", "project", "set", "shop", "--enable"], dir);
    let updated = succeed(&["identity", "user", "set", "bob", "--disable"], dir);
    assert_eq!(
        updated.trim(),
        "user bob updated (disabled: its tokens no longer work)",
        "{updated}"
    );
    assert_eq!(login(&dev.url, "bob", PASSWORD, "shop").0, 401);
    succeed(
        &[
            "identity",
            "user",
            "set",
            "bob",
            "--enable",
            "--email",
            "",
            "--description",
            "",
        ],
        dir,
    );
    let shown: serde_json::Value = serde_json::from_str(&succeed(
        &["identity", "user", "show", "bob", "-f", "json"],
        dir,
    ))
    .expect("json");
    assert_eq!(
        (&shown["enabled"], &shown["email"], &shown["description"]),
        (&true.into(), &"".into(), &"".into()),
        "enabled, the email and description cleared: {shown}"
    );
    let (status, token) = login(&dev.url, "bob", PASSWORD, "shop");
    assert_eq!(status, 201);
    let token = token.expect("X-Subject-Token");

    // Bad input, named.
    let refused = fail(&["identity", "group", "create", ""], dir);
    assert!(refused.contains("name is required"), "{refused}");
    let refused = fail(&["identity", "group", "create", "bad name"], dir);
    assert!(refused.contains("group name \"bad name\""), "{refused}");
    let refused = fail(&["identity", "group", "create", "shop-owners"], dir);
    assert!(
        refused.contains("a group named \"shop-owners\"") && refused.contains("already exists"),
        "{refused}"
    );
    let refused = fail(
        &["identity", "group", "add-user", "shop-owners", "nobody"],
        dir,
    );
    assert!(refused.contains("user \"nobody\" not found"), "{refused}");
    let refused = fail(&["identity", "group", "add-user", "nogroup", "bob"], dir);
    assert!(refused.contains("group \"nogroup\" not found"), "{refused}");
    let refused = fail(
        &[
            "identity", "role", "add", "--group", "nogroup", "shop", "member",
        ],
        dir,
    );
    assert!(refused.contains("group \"nogroup\" not found"), "{refused}");
    let refused = fail(&["identity", "project", "set", "nowhere", "--enable"], dir);
    assert!(
        refused.contains("project \"nowhere\" not found"),
        "{refused}"
    );
    let refused = fail(&["identity", "user", "show", "nobody"], dir);
    assert!(refused.contains("user \"nobody\" not found"), "{refused}");
    let refused = fail(
        &["identity", "user", "set", "bob", "--name", "bad name"],
        dir,
    );
    assert!(refused.contains("user name \"bad name\""), "{refused}");

    // The dev member may not manage groups.
    let credentials: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("dev-credentials.json")).expect("credentials"),
    )
    .expect("json");
    let member_token = credentials["member"]["token"].as_str().expect("token");
    let output = ember_as(
        &dev.url,
        member_token,
        &["identity", "group", "create", "sneaky"],
    );
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("needs the admin role"),
        "{}",
        text(&output)
    );
    let groups = succeed(&["identity", "group", "list"], dir);
    assert!(!groups.contains("sneaky"), "{groups}");

    // Out of the group, bob holds nothing on the shop.
    let removed = succeed(
        &["identity", "group", "remove-user", "shop-owners", "bob"],
        dir,
    );
    assert_eq!(
        removed.trim(),
        "bob is no longer a member of group shop-owners",
        "{removed}"
    );
    let members = succeed(&["identity", "group", "members", "shop-owners"], dir);
    assert_eq!(members.lines().count(), 1, "a header only: {members}");
    assert_eq!(login(&dev.url, "bob", PASSWORD, "shop").0, 401);
    let output = ember_as(&dev.url, &token, &["whoami"]);
    assert!(
        !output.status.success() && text(&output).contains("revoked"),
        "{}",
        text(&output)
    );
    let refused = fail(
        &["identity", "group", "remove-user", "shop-owners", "bob"],
        dir,
    );
    assert!(
        refused.contains("user \"bob\" in group \"shop-owners\" not found"),
        "{refused}"
    );

    // Deleting the group takes its role assignments with it.
    let deleted = succeed(&["identity", "group", "delete", "shop-owners"], dir);
    assert_eq!(deleted.trim(), "group shop-owners deleted", "{deleted}");
    let groups = succeed(&["identity", "group", "list"], dir);
    assert_eq!(groups.lines().count(), 1, "a header only: {groups}");
    let assignments = succeed(&["identity", "role", "list", "--project", "shop"], dir);
    assert_eq!(
        assignments.lines().count(),
        1,
        "a header only: {assignments}"
    );
    let refused = fail(&["identity", "group", "delete", "shop-owners"], dir);
    assert!(
        refused.contains("group \"shop-owners\" not found"),
        "{refused}"
    );
}

/// The words of the row of a list table whose first column is `first`.
fn row<'a>(table: &'a str, first: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .find(|words| words.first() == Some(&first))
        .unwrap_or_else(|| panic!("no row {first:?} in:\n{table}"))
}

/// The `id` a `show` command prints.
fn id_of(show: &[&str], dir: &std::path::Path) -> String {
    let shown = succeed(show, dir);
    let id = field(&shown, "id");
    assert!(!id.is_empty(), "no id: {shown}");
    id
}

/// `ember <args>` with EMBER_URL and EMBER_TOKEN, as a user who exported
/// them runs it.
fn ember_as(gateway: &str, token: &str, args: &[&str]) -> Output {
    Command::new(EMBER)
        .args(args)
        .env_remove("EMBER_DATA_DIR")
        .env("EMBER_URL", gateway)
        .env("EMBER_TOKEN", token)
        .output()
        .expect("runs")
}

/// A password login at the Keystone front door (`POST
/// /identity/v3/auth/tokens`) scoped to `project`: its status, and the
/// token it issued (`X-Subject-Token`).
fn login(gateway: &str, user: &str, password: &str, project: &str) -> (u16, Option<String>) {
    let body = serde_json::json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": user, "domain": {"name": "Default"}, "password": password,
        }}},
        "scope": {"project": {"name": project, "domain": {"name": "Default"}}},
    }});
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let response = reqwest::Client::new()
            .post(format!("{gateway}/identity/v3/auth/tokens"))
            .json(&body)
            .send()
            .await
            .expect("the gateway answers");
        let token = response
            .headers()
            .get("x-subject-token")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        (response.status().as_u16(), token)
    })
}
