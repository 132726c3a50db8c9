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
