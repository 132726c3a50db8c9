//! Real OpenStack clients against the gateway: python-heatclient runs
//! `tests/compat/heatclient_flow.py`, and the `openstack` CLI lists stacks
//! with endpoint + token auth. Both need EMBER_TEST_PYTHON, the interpreter
//! of the virtualenv `./scripts/test` makes from tests/requirements.txt.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ember_tests::TestEmber;
use serde_json::json;

use super::HeatRest;

/// The test clients' Python, or a failure that says how to get it.
fn test_python() -> PathBuf {
    match std::env::var_os("EMBER_TEST_PYTHON") {
        Some(python) => PathBuf::from(python),
        None => panic!(
            "EMBER_TEST_PYTHON is not set: run ./scripts/test, which installs \
             tests/requirements.txt into target/test-tools/venv and sets it \
             (or point it at a Python with python-heatclient and python-openstackclient)"
        ),
    }
}

fn compat_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("compat")
        .join(name)
}

async fn run(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("joined")
        .unwrap_or_else(|error| panic!("cannot run the test Python: {error}"))
}

fn describe(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test]
async fn python_heatclient_drives_a_whole_stack_life() {
    let python = test_python();
    let ember = TestEmber::start().await;
    let mut command = Command::new(python);
    command
        .arg(compat_script("heatclient_flow.py"))
        .arg(ember.url("/orchestration/v1/demo"))
        .arg(ember.member_token());
    let output = run(command).await;
    assert!(output.status.success(), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("heatclient flow: ok"),
        "{}",
        describe(&output)
    );
    ember.stop().await;
}

/// `openstack … stack <args>` with endpoint + token auth, which must succeed.
async fn openstack(python: &Path, ember: &TestEmber, args: &[&str]) -> String {
    // `openstack` is the console script next to the test Python.
    let mut command = Command::new(python.with_file_name("openstack"));
    command
        .args(["--os-auth-type", "admin_token", "--os-endpoint"])
        .arg(ember.url("/orchestration/v1/demo"))
        .args(["--os-token", ember.member_token()])
        .args(args)
        .env_remove("OS_CLOUD")
        .env_remove("OS_AUTH_URL");
    let output = run(command).await;
    assert!(
        output.status.success(),
        "openstack {args:?}: {}",
        describe(&output)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn the_openstack_cli_works_with_endpoint_and_token_auth() {
    let python = test_python();
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let stack_path = heat.create_stack("listed", json!({"greeting": "hi"})).await;
    heat.wait_until_settled(&stack_path).await;

    let listed = openstack(&python, &ember, &["stack", "list", "-f", "json"]).await;
    let listed: serde_json::Value = serde_json::from_str(&listed).expect("json list");
    let names: Vec<&str> = listed
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|stack| stack["Stack Name"].as_str())
        .collect();
    assert_eq!(names, ["listed"]);

    let value = openstack(
        &python,
        &ember,
        &[
            "stack",
            "output",
            "show",
            "listed",
            "greeting",
            "-f",
            "value",
            "-c",
            "output_value",
        ],
    )
    .await;
    assert_eq!(value.trim(), "hi");

    // Abandon to a file and adopt it back: `stack adopt` sends `timeout`.
    let data_dir = tempfile::tempdir().expect("tempdir");
    let data = data_dir.path().join("listed.json");
    let data_arg = data.display().to_string();
    openstack(
        &python,
        &ember,
        &["stack", "abandon", "listed", "--output-file", &data_arg],
    )
    .await;
    let adopted = openstack(
        &python,
        &ember,
        &[
            "stack",
            "adopt",
            "--adopt-file",
            &data_arg,
            "--wait",
            "back",
            "-f",
            "json",
        ],
    )
    .await;
    assert!(adopted.contains("ADOPT_COMPLETE"), "{adopted}");
    openstack(
        &python,
        &ember,
        &["stack", "delete", "--yes", "--wait", "back"],
    )
    .await;
    let listed = openstack(&python, &ember, &["stack", "list", "-f", "json"]).await;
    assert_eq!(listed.trim(), "[]");
    ember.stop().await;
}
