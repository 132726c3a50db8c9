//! `ember identity …` against a real `ember dev`: the dev admin manages
//! projects, users and role assignments with the exact spellings scripts
//! rely on; bad input and non-admins are refused by name; `ember dev`
//! seeds the dev users and writes clouds.yaml; EMBER_URL and EMBER_TOKEN
//! (which the README has users export) do not stop `ember dev` or
//! `ember token issue`.

mod support;

use std::process::Command;

use support::{Dev, fail, succeed, text};

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
