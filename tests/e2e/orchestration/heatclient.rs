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

/// `openstack orchestration template version list` / `function list` and
/// `openstack orchestration resource type show --template-type hot`, as
/// Heat answers them (issue 16).
#[tokio::test]
async fn the_openstack_cli_lists_template_versions_functions_and_starter_templates() {
    let python = test_python();
    let ember = TestEmber::start().await;
    let versions = openstack(
        &python,
        &ember,
        &["orchestration", "template", "version", "list", "-f", "json"],
    )
    .await;
    let versions: serde_json::Value = serde_json::from_str(&versions).expect("json");
    let newton = versions
        .as_array()
        .expect("a list")
        .iter()
        .find(|version| version["Version"] == "heat_template_version.2016-10-14")
        .unwrap_or_else(|| panic!("2016-10-14 listed: {versions}"));
    assert_eq!(newton["Type"], "hot");
    let cfn = versions
        .as_array()
        .expect("a list")
        .iter()
        .find(|version| version["Version"] == "AWSTemplateFormatVersion.2010-09-09")
        .unwrap_or_else(|| panic!("the CFN format listed: {versions}"));
    assert_eq!(cfn["Type"], "cfn");
    assert_eq!(
        newton["Aliases"],
        json!(["heat_template_version.newton"]),
        "{newton}"
    );

    let functions = openstack(
        &python,
        &ember,
        &[
            "orchestration",
            "template",
            "function",
            "list",
            "heat_template_version.newton",
            "-f",
            "json",
        ],
    )
    .await;
    let functions: serde_json::Value = serde_json::from_str(&functions).expect("json");
    let described = |name: &str| {
        functions
            .as_array()
            .expect("a list")
            .iter()
            .find(|function| function["Functions"] == name)
            .map(|function| function["Description"].clone())
    };
    assert_eq!(
        described("get_file"),
        Some(json!("A function for including a file inline.")),
        "{functions}"
    );
    assert_eq!(described("equals"), None, "conditions only when asked");
    let with_conditions = openstack(
        &python,
        &ember,
        &[
            "orchestration",
            "template",
            "function",
            "list",
            "--with_conditions",
            "heat_template_version.2016-10-14",
            "-f",
            "json",
        ],
    )
    .await;
    assert!(with_conditions.contains("\"equals\""), "{with_conditions}");

    let template = openstack(
        &python,
        &ember,
        &[
            "orchestration",
            "resource",
            "type",
            "show",
            "OS::Heat::TestResource",
            "--template-type",
            "hot",
            "-f",
            "json",
        ],
    )
    .await;
    let template: serde_json::Value = serde_json::from_str(&template).expect("json");
    assert_eq!(
        template["resources"]["TestResource"]["type"], "OS::Heat::TestResource",
        "{template}"
    );
    assert_eq!(template["description"], "Initial template of TestResource");

    // An unknown version is Heat's 404.
    let response = ember
        .http
        .get(ember.url(
            "/orchestration/v1/demo/template_versions/heat_template_version.1999-01-01/functions",
        ))
        .header("X-Auth-Token", ember.member_token())
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status(), 404);
    let body: serde_json::Value = response.json().await.expect("json");
    assert_eq!(
        body["error"]["message"],
        "Template with version heat_template_version.1999-01-01 not found"
    );
    let response = ember
        .http
        .get(ember.url(
            "/orchestration/v1/demo/template_versions/heat_template_version.2016-10-14/functions?with_condition_func=maybe",
        ))
        .header("X-Auth-Token", ember.member_token())
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status(), 400);
    ember.stop().await;
}

/// Breakpoint hooks (issue 16) as Heat users drive them: a stack created
/// with `hooks` in its environment stops at them, `openstack stack hook
/// poll` lists the paused resources, `openstack stack hook clear` releases
/// them; pre-update and pre-delete the same through the signal API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breakpoint_hooks_pause_resources_until_openstack_stack_hook_clear() {
    let python = test_python();
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let template = json!({
        "heat_template_version": "2021-04-16",
        "resources": {
            "web_a": {"type": "OS::Heat::TestResource", "properties": {"value": "a"}},
            "web_b": {"type": "OS::Heat::TestResource", "properties": {"value": "b"}},
            "db": {"type": "OS::Heat::TestResource", "properties": {"value": "d"}},
        },
    });
    let environment = json!({"resource_registry": {"resources": {
        "web_*": {"hooks": "pre-create"},
        "db": {"hooks": ["pre-update", "pre-delete"]},
    }}});
    let answer = heat
        .post(
            "/stacks",
            json!({"stack_name": "hooked", "template": template, "environment": environment}),
        )
        .await;
    assert_eq!(answer.status, reqwest::StatusCode::CREATED, "{answer:?}");
    let stack = format!(
        "/stacks/hooked/{}",
        answer.body["stack"]["id"].as_str().expect("id")
    );

    let paused = |names: &'static [&'static str]| {
        let python = python.clone();
        let ember = &ember;
        async move {
            for _ in 0..200 {
                let polled = openstack(
                    &python,
                    ember,
                    &["stack", "hook", "poll", "hooked", "-f", "json"],
                )
                .await;
                let polled: serde_json::Value = serde_json::from_str(&polled).expect("json");
                let mut listed: Vec<String> = polled
                    .as_array()
                    .expect("a list")
                    .iter()
                    .filter_map(|row| row["Resource Name"].as_str().map(str::to_owned))
                    .collect();
                listed.sort();
                if listed == names {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            panic!("hook poll never listed {names:?}");
        }
    };
    paused(&["web_a", "web_b"]).await;
    let web_a = heat.get(&format!("{stack}/resources/web_a")).await;
    assert_eq!(
        web_a.body["resource"]["resource_status"], "INIT_COMPLETE",
        "a resource paused before its create is not created: {web_a:?}"
    );
    let events = heat.get(&format!("{stack}/resources/web_a/events")).await;
    assert!(
        events.body["events"].as_array().is_some_and(|events| events
            .iter()
            .any(|event| event["resource_status_reason"]
                == "CREATE paused until Hook pre-create is cleared")),
        "{events:?}"
    );

    openstack(
        &python,
        &ember,
        &["stack", "hook", "clear", "--pre-create", "hooked", "web_a"],
    )
    .await;
    paused(&["web_b"]).await;
    // Clearing it again: the resource is not paused there any more.
    let again = heat
        .post(
            &format!("{stack}/resources/web_a/signal"),
            json!({"unset_hook": "pre-create"}),
        )
        .await;
    assert_eq!(again.status, reqwest::StatusCode::BAD_REQUEST, "{again:?}");
    assert!(again.message().contains("hook is not defined"), "{again:?}");
    let invalid = heat
        .post(
            &format!("{stack}/resources/web_b/signal"),
            json!({"unset_hook": "pre-reboot"}),
        )
        .await;
    assert_eq!(
        invalid.status,
        reqwest::StatusCode::BAD_REQUEST,
        "{invalid:?}"
    );
    assert!(
        invalid.message().contains("Invalid hook type"),
        "{invalid:?}"
    );
    openstack(
        &python,
        &ember,
        &["stack", "hook", "clear", "--pre-create", "hooked", "web_b"],
    )
    .await;
    let created = heat.wait_until_settled(&stack).await;
    assert_eq!(created["stack_status"], "CREATE_COMPLETE", "{created}");

    // An update stops before db, which is then cleared through the API.
    let answer = heat
        .call(
            reqwest::Method::PATCH,
            &stack,
            Some(json!({"parameters": {}})),
        )
        .await;
    assert_eq!(answer.status, reqwest::StatusCode::ACCEPTED, "{answer:?}");
    paused(&["db"]).await;
    let cleared = heat
        .post(
            &format!("{stack}/resources/db/signal"),
            json!({"unset_hook": "pre-update"}),
        )
        .await;
    assert_eq!(cleared.status, reqwest::StatusCode::OK, "{cleared:?}");
    let updated = heat.wait_until_settled(&stack).await;
    assert_eq!(updated["stack_status"], "UPDATE_COMPLETE", "{updated}");

    // And a delete before db goes.
    let answer = heat.call(reqwest::Method::DELETE, &stack, None).await;
    assert_eq!(answer.status, reqwest::StatusCode::NO_CONTENT, "{answer:?}");
    paused(&["db"]).await;
    openstack(
        &python,
        &ember,
        &["stack", "hook", "clear", "--pre-delete", "hooked", "db"],
    )
    .await;
    heat.wait_until_deleted(&stack).await;
    ember.stop().await;
}

/// The update preview (issue 16): `openstack stack update --dry-run` lists
/// what an update would add, delete, replace, update in place and leave
/// alone — and nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_preview_says_what_would_change_and_changes_nothing() {
    let python = test_python();
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let answer = heat
        .post(
            "/stacks",
            json!({"stack_name": "previewed", "template": {
            "heat_template_version": "2021-04-16",
            "resources": {
                "kept": {"type": "OS::Heat::None"},
                "changed": {"type": "OS::Heat::TestResource", "properties": {"value": "a"}},
                "retyped": {"type": "OS::Heat::None"},
                "dropped": {"type": "OS::Heat::None"},
            }}}),
        )
        .await;
    assert_eq!(answer.status, reqwest::StatusCode::CREATED, "{answer:?}");
    let stack = format!(
        "/stacks/previewed/{}",
        answer.body["stack"]["id"].as_str().expect("id")
    );
    heat.wait_until_settled(&stack).await;
    let new_template = json!({
    "heat_template_version": "2021-04-16",
    "resources": {
        "kept": {"type": "OS::Heat::None"},
        "changed": {"type": "OS::Heat::TestResource", "properties": {"value": "b"}},
        "retyped": {"type": "OS::Heat::RandomString"},
        "fresh": {"type": "OS::Heat::None"},
    }});
    let names = |changes: &serde_json::Value, key: &str| -> Vec<String> {
        let mut names: Vec<String> = changes[key]
            .as_array()
            .unwrap_or_else(|| panic!("{key}: {changes}"))
            .iter()
            .filter_map(|resource| resource["resource_name"].as_str().map(str::to_owned))
            .collect();
        names.sort();
        names
    };
    let preview = heat
        .call(
            reqwest::Method::PUT,
            &format!("{stack}/preview"),
            Some(json!({"template": new_template})),
        )
        .await;
    assert_eq!(preview.status, reqwest::StatusCode::OK, "{preview:?}");
    let changes = &preview.body["resource_changes"];
    assert_eq!(names(changes, "added"), ["fresh"]);
    assert_eq!(names(changes, "deleted"), ["dropped"]);
    assert_eq!(names(changes, "replaced"), ["retyped"]);
    assert_eq!(names(changes, "updated"), ["changed"]);
    assert_eq!(names(changes, "unchanged"), ["kept"]);

    // The same through the openstack CLI.
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), new_template.to_string()).expect("template written");
    let dry_run = openstack(
        &python,
        &ember,
        &[
            "stack",
            "update",
            "--dry-run",
            "-t",
            file.path().to_str().expect("path"),
            "previewed",
            "-f",
            "json",
        ],
    )
    .await;
    let dry_run: serde_json::Value = serde_json::from_str(&dry_run).expect("json");
    assert_eq!(names(&dry_run, "added"), ["fresh"], "{dry_run}");
    assert_eq!(names(&dry_run, "replaced"), ["retyped"], "{dry_run}");

    // Nothing changed: the stack is as it was.
    let resources = heat.get(&format!("{stack}/resources")).await;
    let mut current: Vec<&str> = resources.body["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|resource| resource["resource_name"].as_str())
        .collect();
    current.sort_unstable();
    assert_eq!(current, ["changed", "dropped", "kept", "retyped"]);
    assert_eq!(
        heat.get(&stack).await.body["stack"]["stack_status"],
        "CREATE_COMPLETE"
    );
    ember.stop().await;
}
