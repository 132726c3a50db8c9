//! What scripts and new users rely on in the `ember` CLI: a token is only
//! minted with a key a server has, flags go anywhere on the line, exit codes
//! say what happened, `-f json` output parses, and errors say what to do.

mod support;

use std::process::Command;

use support::{EMBER, text};

/// `ember token issue` with no signing key configured and no `ember dev`
/// data directory refuses, names where it looked, and creates nothing.
#[test]
fn token_issue_without_a_signing_key_refuses_and_names_where_it_looked() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let missing = data_dir.path().join("nothing-here");
    let output = Command::new(EMBER)
        .args(["token", "issue", "--user", "ops", "--project", "demo"])
        .env("EMBER_DATA_DIR", &missing)
        .env_remove("EMBER_AUTH__SIGNING_KEY")
        .env_remove("EMBER_CONFIG")
        .output()
        .expect("ember runs");
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        output.stdout.is_empty(),
        "no token printed: {}",
        text(&output)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no signing key"), "{stderr}");
    assert!(stderr.contains("EMBER_AUTH__SIGNING_KEY"), "{stderr}");
    assert!(
        stderr.contains(&missing.join("dev-secrets.json").display().to_string()),
        "{stderr}"
    );
    assert!(
        !missing.exists(),
        "nothing is created where the key was looked for"
    );

    // With the deployment's key configured, the token is minted.
    let output = Command::new(EMBER)
        .args(["token", "issue", "--user", "ops", "--project", "demo"])
        .env("EMBER_DATA_DIR", &missing)
        .env("EMBER_AUTH__SIGNING_KEY", "k".repeat(40))
        .env_remove("EMBER_CONFIG")
        .output()
        .expect("ember runs");
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .split('.')
            .count(),
        3,
        "a signed token: {}",
        text(&output)
    );
}

/// The gateway URL and the member's token `ember dev` wrote.
fn dev_url_and_token(data_dir: &std::path::Path) -> (String, String) {
    let text = std::fs::read_to_string(data_dir.join("dev-credentials.json")).expect("credentials");
    let credentials: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    (
        credentials["gateway_url"].as_str().expect("url").to_owned(),
        credentials["member"]["token"]
            .as_str()
            .expect("token")
            .to_owned(),
    )
}

/// Runs `ember` with nothing from the environment saying where Ember is.
fn ember_bare(args: &[&str]) -> std::process::Output {
    Command::new(EMBER)
        .args(args)
        .env_remove("EMBER_DATA_DIR")
        .env_remove("EMBER_URL")
        .env_remove("EMBER_TOKEN")
        .env_remove("EMBER_CONFIG")
        .current_dir(std::env::temp_dir())
        .output()
        .expect("ember runs")
}

/// `--url`, `--token`, `--as` and `--data-dir` may stand before the command
/// or after it.
#[test]
fn global_flags_work_anywhere_on_the_line() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let _dev = support::Dev::start(dir);
    let (url, token) = dev_url_and_token(dir);
    let dir_text = dir.display().to_string();

    for args in [
        vec!["--url", &url, "--token", &token, "stack", "list"],
        vec!["stack", "--url", &url, "--token", &token, "list"],
        vec!["stack", "list", "--url", &url, "--token", &token],
    ] {
        let output = ember_bare(&args);
        assert!(output.status.success(), "{args:?}: {}", text(&output));
        assert!(
            String::from_utf8_lossy(&output.stdout).starts_with("ID"),
            "{args:?}: {}",
            text(&output)
        );
    }
    for args in [
        vec!["--data-dir", &dir_text, "--as", "admin", "whoami"],
        vec!["whoami", "--data-dir", &dir_text, "--as", "admin"],
    ] {
        let output = ember_bare(&args);
        assert!(output.status.success(), "{args:?}: {}", text(&output));
        assert!(
            String::from_utf8_lossy(&output.stdout).contains("roles admin,member"),
            "{args:?}: {}",
            text(&output)
        );
    }
    // `token issue` reads the dev signing key from a --data-dir given first.
    let output = ember_bare(&[
        "--data-dir",
        &dir_text,
        "token",
        "issue",
        "--user",
        "ops",
        "--project",
        "demo",
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let minted = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let output = ember_bare(&["--url", &url, "--token", &minted, "whoami"]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("user ops"),
        "{}",
        text(&output)
    );
}

/// A `--wait` on a cluster action that ends FAILED exits non-zero and says
/// why; one that succeeds exits 0.
#[test]
fn a_failed_cluster_action_makes_wait_exit_non_zero_with_the_reason() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let _dev = support::Dev::start(dir);
    for (name, failure) in [("stuck", "delete"), ("fine", "power_off")] {
        let spec = dir.join(format!("{name}.yaml"));
        std::fs::write(
            &spec,
            format!("type: ember.instance\nversion: \"1.0\"\nproperties:\n  flavor: m1.small\n  image: debian-12\n  metadata: {{\"ember:simulate_failure\": {failure}}}\n"),
        )
        .expect("spec written");
        let spec = spec.display().to_string();
        support::succeed(&["cluster", "profile-create", name, "--spec", &spec], dir);
        support::succeed(
            &[
                "cluster",
                "create",
                name,
                "--profile",
                name,
                "--desired",
                "1",
                "--wait",
            ],
            dir,
        );
    }
    // The node's machine cannot be deleted: CLUSTER_DELETE fails.
    let output = support::ember(&["cluster", "delete", "stuck", "--wait"], dir);
    assert!(!output.status.success(), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("(CLUSTER_DELETE) is FAILED") && stderr.contains("could not be deleted"),
        "{}",
        text(&output)
    );
    let deleted = support::succeed(&["cluster", "delete", "fine", "--wait"], dir);
    assert_eq!(deleted.trim(), "cluster fine deleted", "{deleted}");
}
