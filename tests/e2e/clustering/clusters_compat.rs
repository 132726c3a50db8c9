//! openstacksdk's clustering proxy (the Senlin client inside PyPI
//! `openstacksdk`) against the Clustering API, unchanged: it runs
//! `tests/compat/openstacksdk_clustering.py` with an endpoint override and a
//! token (no Keystone), then checks what the flow left in Ember through the
//! REST API, so the test fails if the SDK and the API drift apart even when
//! the script is fooled. Needs EMBER_TEST_PYTHON, the interpreter of the
//! virtualenv `./scripts/test` makes from tests/requirements.txt.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ember_tests::TestEmber;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// The test clients' Python, or a failure that says how to get it.
fn test_python() -> PathBuf {
    match std::env::var_os("EMBER_TEST_PYTHON") {
        Some(python) => PathBuf::from(python),
        None => panic!(
            "EMBER_TEST_PYTHON is not set: run ./scripts/test, which installs \
             tests/requirements.txt into target/test-tools/venv and sets it \
             (or point it at a Python with openstacksdk)"
        ),
    }
}

fn compat_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("compat")
        .join(name)
}

fn describe(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `GET path` on the gateway with `token` (if any): status and JSON body.
async fn get(ember: &TestEmber, path: &str, token: Option<&str>) -> (StatusCode, Value) {
    let mut request = ember.http.get(ember.url(path));
    if let Some(token) = token {
        request = request.header("X-Auth-Token", token);
    }
    let response = request.send().await.expect("request");
    let status = response.status();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body)
}

/// How many of `actions` are `kind` and SUCCEEDED.
fn succeeded(actions: &[&Value], kind: &str) -> usize {
    actions
        .iter()
        .filter(|action| action["action"] == kind && action["status"] == "SUCCEEDED")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openstacksdk_drives_a_cluster_through_its_whole_life() {
    let python = test_python();
    let ember = TestEmber::start().await;
    let token = ember.member_token().to_owned();

    let mut command = Command::new(python);
    command
        .arg(compat_script("openstacksdk_clustering.py"))
        .arg(ember.url(""))
        .arg(&token)
        // Without a cloud name the SDK reads neither clouds.yaml nor OS_*;
        // these keep it that way if the script ever names one.
        .env_remove("OS_CLOUD")
        .env_remove("OS_AUTH_URL");
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("joined")
        .unwrap_or_else(|error| panic!("cannot run the test Python: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{}", describe(&output));
    assert!(
        stdout.contains("openstacksdk clustering flow: ok"),
        "{}",
        describe(&output)
    );
    let cluster_id = stdout
        .lines()
        .find_map(|line| line.strip_prefix("cluster "))
        .unwrap_or_else(|| panic!("no \"cluster <id>\" line: {}", describe(&output)))
        .trim()
        .to_owned();

    // The version document the SDK discovered answers without a token and
    // points at itself.
    let (status, version) = get(&ember, "/clustering/v1", None).await;
    assert_eq!(status, StatusCode::OK, "{version}");
    assert_eq!(version["version"]["id"], "1.0", "{version}");
    assert_eq!(
        version["version"]["links"][0]["href"], "/clustering/v1",
        "{version}"
    );

    // The cluster is gone, and so is everything it made.
    let (status, body) = get(
        &ember,
        &format!("/clustering/v1/clusters/{cluster_id}"),
        Some(&token),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, clusters) = get(&ember, "/clustering/v1/clusters", Some(&token)).await;
    assert_eq!(status, StatusCode::OK, "{clusters}");
    assert_eq!(clusters["clusters"], json!([]), "{clusters}");
    let (status, profiles) = get(&ember, "/clustering/v1/profiles", Some(&token)).await;
    assert_eq!(status, StatusCode::OK, "{profiles}");
    assert_eq!(profiles["profiles"], json!([]), "{profiles}");
    let (status, nodes) = get(&ember, "/clustering/v1/nodes", Some(&token)).await;
    assert_eq!(status, StatusCode::OK, "{nodes}");
    assert_eq!(nodes["nodes"], json!([]), "{nodes}");
    let (status, instances) = get(&ember, "/compute/v1/instances", Some(&token)).await;
    assert_eq!(status, StatusCode::OK, "{instances}");
    assert_eq!(instances["instances"], json!([]), "{instances}");

    // Every change the SDK asked for ran once, as the action it was, and
    // the refused resize made none. (Node actions are the engine's detail:
    // not counted here.) The deleted cluster's history stays listable by
    // its id.
    let (status, actions) = get(
        &ember,
        &format!("/clustering/v1/actions?cluster_id={cluster_id}"),
        Some(&token),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{actions}");
    let actions = actions["actions"].as_array().cloned().unwrap_or_default();
    let cluster_actions: Vec<&Value> = actions
        .iter()
        .filter(|action| action["target"] == cluster_id.as_str())
        .collect();
    let expected = [
        ("CLUSTER_CREATE", 1),
        ("CLUSTER_SCALE_OUT", 1),
        ("CLUSTER_SCALE_IN", 1),
        ("CLUSTER_RESIZE", 2),
        ("CLUSTER_DELETE", 1),
    ];
    for (kind, count) in expected {
        assert_eq!(
            succeeded(&cluster_actions, kind),
            count,
            "{kind}: {cluster_actions:#?}"
        );
    }
    assert_eq!(cluster_actions.len(), 6, "{cluster_actions:#?}");
    assert!(
        actions.iter().all(|action| action["status"] == "SUCCEEDED"),
        "{actions:#?}"
    );
    ember.stop().await;
}
