//! Real OpenStack clients with nothing but the clouds.yaml `ember dev`
//! writes: `openstack --os-cloud ember stack …` and `cluster …`
//! (python-senlinclient's plugin), and openstacksdk's
//! `openstack.connect(cloud="ember")` — password auth through the
//! Keystone front door, the catalog from the token, no endpoint overrides.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ember_tests::TestEmber;

fn test_python() -> PathBuf {
    match std::env::var_os("EMBER_TEST_PYTHON") {
        Some(python) => PathBuf::from(python),
        None => panic!(
            "EMBER_TEST_PYTHON is not set: run ./scripts/test, which installs \
             tests/requirements.txt into target/test-tools/venv and sets it"
        ),
    }
}

fn describe(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

async fn run(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("joined")
        .unwrap_or_else(|error| panic!("cannot run the test Python: {error}"))
}

/// `openstack --os-cloud ember <args>` (in `dir`), which must succeed.
pub(crate) async fn openstack(ember: &TestEmber, dir: &Path, args: &[&str]) -> String {
    let mut command = Command::new(test_python().with_file_name("openstack"));
    command
        .current_dir(dir)
        .env("OS_CLIENT_CONFIG_FILE", ember.clouds_yaml())
        .args(["--os-cloud", "ember"])
        .args(args);
    let output = run(command).await;
    assert!(
        output.status.success(),
        "openstack {args:?}: {}",
        describe(&output)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// python-senlinclient 3.1.0 hands osc-lib plain functions as column
/// formatters when it shows an object; osc-lib 4.6+ (which OSC 10.5 needs)
/// refuses them with exactly this, after the API call succeeded. The
/// command's effect is checked through a listing that has no formatters.
const SENLINCLIENT_DISPLAY_BUG: &str = "Invalid formatter provided.";

/// `openstack --os-cloud ember <args>` whose request must succeed; only
/// the client's own display bug is tolerated.
pub(crate) async fn openstack_despite_display(ember: &TestEmber, dir: &Path, args: &[&str]) {
    let mut command = Command::new(test_python().with_file_name("openstack"));
    command
        .current_dir(dir)
        .env("OS_CLIENT_CONFIG_FILE", ember.clouds_yaml())
        .args(["--os-cloud", "ember"])
        .args(args);
    let output = run(command).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() || stderr.trim() == SENLINCLIENT_DISPLAY_BUG,
        "openstack {args:?}: {}",
        describe(&output)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openstack_cli_works_with_the_generated_clouds_yaml() {
    let ember = TestEmber::start().await;
    ember.seed_identity().await;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        dir.path().join("word.yaml"),
        "heat_template_version: 2018-08-31\nresources:\n  word: {type: OS::Heat::RandomString}\noutputs:\n  word: {value: {get_attr: [word, value]}}\n",
    )
    .expect("template");
    openstack(&ember, dir.path(), &["stack", "list"]).await;
    let created = openstack(
        &ember,
        dir.path(),
        &[
            "stack",
            "create",
            "-t",
            "word.yaml",
            "cli-stack",
            "--wait",
            "-f",
            "json",
        ],
    )
    .await;
    assert!(created.contains("CREATE_COMPLETE"), "{created}");
    let listed = openstack(
        &ember,
        dir.path(),
        &["stack", "list", "-f", "value", "-c", "Stack Name"],
    )
    .await;
    assert!(listed.lines().any(|line| line == "cli-stack"), "{listed}");
    let shown = openstack(
        &ember,
        dir.path(),
        &[
            "stack",
            "show",
            "cli-stack",
            "-f",
            "value",
            "-c",
            "stack_status",
        ],
    )
    .await;
    assert_eq!(shown.trim(), "CREATE_COMPLETE");
    openstack(
        &ember,
        dir.path(),
        &["stack", "delete", "cli-stack", "--yes", "--wait"],
    )
    .await;
    let listed = openstack(
        &ember,
        dir.path(),
        &["stack", "list", "-f", "value", "-c", "Stack Name"],
    )
    .await;
    assert!(!listed.contains("cli-stack"), "{listed}");

    // Clustering, through python-senlinclient's plugin. (Its `list`
    // commands need --full-id with osc-lib 4.6+: without it they hand
    // osc-lib a plain function as a formatter, which it refuses.)
    std::fs::write(
        dir.path().join("profile.yaml"),
        "type: os.heat.stack\nversion: 1.0\nproperties:\n  template: word.yaml\n",
    )
    .expect("profile");
    openstack(&ember, dir.path(), &["cluster", "list", "--full-id"]).await;
    openstack_despite_display(
        &ember,
        dir.path(),
        &[
            "cluster",
            "profile",
            "create",
            "--spec-file",
            "profile.yaml",
            "cli-profile",
        ],
    )
    .await;
    let profiles = openstack(
        &ember,
        dir.path(),
        &[
            "cluster",
            "profile",
            "list",
            "--full-id",
            "-f",
            "value",
            "-c",
            "name",
        ],
    )
    .await;
    assert!(
        profiles.lines().any(|line| line == "cli-profile"),
        "{profiles}"
    );
    openstack_despite_display(
        &ember,
        dir.path(),
        &[
            "cluster",
            "create",
            "--profile",
            "cli-profile",
            "--desired-capacity",
            "2",
            "cli-cluster",
        ],
    )
    .await;
    ember_tests::wait_for(
        "cli-cluster to be ACTIVE",
        std::time::Duration::from_secs(30),
        || {
            let ember = &ember;
            let dir = dir.path();
            async move {
                openstack(
                    ember,
                    dir,
                    &[
                        "cluster",
                        "list",
                        "--full-id",
                        "-f",
                        "value",
                        "-c",
                        "name",
                        "-c",
                        "status",
                    ],
                )
                .await
                .lines()
                .any(|line| line == "cli-cluster ACTIVE")
            }
        },
    )
    .await;
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openstacksdk_connects_with_the_generated_clouds_yaml() {
    let ember = TestEmber::start().await;
    ember.seed_identity().await;
    let mut command = Command::new(test_python());
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("compat/openstacksdk_clouds.py"))
        .env("OS_CLIENT_CONFIG_FILE", ember.clouds_yaml());
    let output = run(command).await;
    assert!(output.status.success(), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("openstacksdk clouds: ok"),
        "{}",
        describe(&output)
    );
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openstack_stack_snapshots_and_export_through_the_cli() {
    let ember = TestEmber::start().await;
    ember.seed_identity().await;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        dir.path().join("word.yaml"),
        "heat_template_version: 2018-08-31\nresources:\n  word: {type: OS::Heat::RandomString}\noutputs:\n  word: {value: {get_attr: [word, value]}}\n",
    )
    .expect("template");
    openstack(
        &ember,
        dir.path(),
        &["stack", "create", "-t", "word.yaml", "snapped", "--wait"],
    )
    .await;
    let word = openstack(
        &ember,
        dir.path(),
        &[
            "stack",
            "output",
            "show",
            "snapped",
            "word",
            "-f",
            "value",
            "-c",
            "output_value",
        ],
    )
    .await;
    let created = openstack(
        &ember,
        dir.path(),
        &[
            "stack", "snapshot", "create", "snapped", "--name", "first", "-f", "value", "-c", "id",
        ],
    )
    .await;
    let snapshot_id = created.trim().to_owned();
    assert_eq!(snapshot_id.len(), 36, "{created}");
    let listed = openstack(
        &ember,
        dir.path(),
        &[
            "stack", "snapshot", "list", "snapped", "-f", "value", "-c", "id", "-c", "name", "-c",
            "status",
        ],
    )
    .await;
    assert!(
        listed.contains(&format!("{snapshot_id} first COMPLETE")),
        "{listed}"
    );
    let shown = openstack(
        &ember,
        dir.path(),
        &["stack", "snapshot", "show", "snapped", &snapshot_id],
    )
    .await;
    assert!(
        shown.contains(word.trim()),
        "the snapshot holds the word: {shown}"
    );
    openstack(
        &ember,
        dir.path(),
        &["stack", "snapshot", "restore", "snapped", &snapshot_id],
    )
    .await;
    ember_tests::wait_for("the restore", std::time::Duration::from_secs(30), || {
        let ember = &ember;
        let dir = dir.path();
        async move {
            openstack(
                ember,
                dir,
                &[
                    "stack",
                    "show",
                    "snapped",
                    "-f",
                    "value",
                    "-c",
                    "stack_status",
                ],
            )
            .await
            .trim()
                == "RESTORE_COMPLETE"
        }
    })
    .await;
    openstack(
        &ember,
        dir.path(),
        &[
            "stack",
            "export",
            "snapped",
            "--output-file",
            "snapped.json",
        ],
    )
    .await;
    let exported: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("snapped.json")).expect("exported file"),
    )
    .expect("json");
    assert_eq!(
        exported["resources"]["word"]["attributes"]["value"],
        word.trim()
    );
    openstack(
        &ember,
        dir.path(),
        &["stack", "snapshot", "delete", "snapped", &snapshot_id],
    )
    .await;
    let listed = openstack(
        &ember,
        dir.path(),
        &[
            "stack", "snapshot", "list", "snapped", "-f", "value", "-c", "id",
        ],
    )
    .await;
    assert!(!listed.contains(&snapshot_id), "{listed}");
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openstack_software_configs_and_deployments_through_the_cli() {
    let ember = TestEmber::start().await;
    ember.seed_identity().await;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        dir.path().join("configure.sh"),
        "#!/bin/sh\necho configured\n",
    )
    .expect("script");
    let config_id = openstack(
        &ember,
        dir.path(),
        &[
            "software",
            "config",
            "create",
            "--config-file",
            "configure.sh",
            "--group",
            "script",
            "configure",
            "-f",
            "value",
            "-c",
            "id",
        ],
    )
    .await
    // heatclient prints every field of the new config, the id first.
    .lines()
    .next()
    .unwrap_or_default()
    .trim()
    .to_owned();
    assert_eq!(config_id.len(), 36, "{config_id}");
    let listed = openstack(
        &ember,
        dir.path(),
        &["software", "config", "list", "-f", "value", "-c", "id"],
    )
    .await;
    assert!(listed.contains(&config_id), "{listed}");
    let shown = openstack(
        &ember,
        dir.path(),
        &["software", "config", "show", &config_id, "--config-only"],
    )
    .await;
    assert!(shown.contains("echo configured"), "{shown}");

    let deployment = openstack(
        &ember,
        dir.path(),
        &[
            "software",
            "deployment",
            "create",
            "--config",
            &config_id,
            "--server",
            "server-1",
            "--signal-transport",
            "NO_SIGNAL",
            "--input-value",
            "port=8080",
            "web-deploy",
            "-f",
            "json",
        ],
    )
    .await;
    // heatclient prints every field whatever -c asks: read the id.
    let deployment: serde_json::Value = serde_json::from_str(&deployment).expect("json");
    let deployment = deployment["id"].as_str().expect("an id").to_owned();
    assert_eq!(deployment.len(), 36, "{deployment}");
    let listed = openstack(
        &ember,
        dir.path(),
        &[
            "software",
            "deployment",
            "list",
            "--server",
            "server-1",
            "-f",
            "value",
            "-c",
            "id",
        ],
    )
    .await;
    assert!(listed.contains(&deployment), "{listed}");
    let shown = openstack(
        &ember,
        dir.path(),
        &["software", "deployment", "show", &deployment, "-f", "json"],
    )
    .await;
    let shown: serde_json::Value = serde_json::from_str(&shown).expect("json");
    assert_eq!(shown["server_id"], "server-1", "{shown}");
    let metadata = openstack(
        &ember,
        dir.path(),
        &["software", "deployment", "metadata", "show", "server-1"],
    )
    .await;
    assert!(
        metadata.contains("echo configured") && metadata.contains("8080"),
        "{metadata}"
    );
    openstack(
        &ember,
        dir.path(),
        &["software", "deployment", "delete", &deployment],
    )
    .await;
    let listed = openstack(
        &ember,
        dir.path(),
        &[
            "software",
            "deployment",
            "list",
            "--server",
            "server-1",
            "-f",
            "value",
            "-c",
            "id",
        ],
    )
    .await;
    assert!(!listed.contains(&deployment), "{listed}");
    openstack(
        &ember,
        dir.path(),
        &["software", "config", "delete", &config_id],
    )
    .await;
    ember.stop().await;
}
