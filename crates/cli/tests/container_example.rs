//! The worked example of docs/guide/backends.md, run as written: `examples/container-workers/
//! run.sh` with this build's `ember`, against the test container engine —
//! a cluster of worker containers whose scale-in victim is drained by the
//! example's drainer (Python) before its container is removed. Skips
//! loudly without an engine, unless EMBER_TEST_REQUIRE_CONTAINERS=1.

use std::process::Command;

#[test]
fn the_container_workers_example_drains_a_worker_before_removing_it() {
    let Ok(docker_host) = std::env::var("EMBER_TEST_DOCKER_HOST") else {
        assert!(
            std::env::var("EMBER_TEST_REQUIRE_CONTAINERS").as_deref() != Ok("1"),
            "a container engine is required (EMBER_TEST_REQUIRE_CONTAINERS=1) but EMBER_TEST_DOCKER_HOST is not set"
        );
        eprintln!(
            "!!! SKIPPED the container-workers example: no container engine (EMBER_TEST_DOCKER_HOST is not set; ./scripts/test starts one)"
        );
        return;
    };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let output = Command::new("bash")
        .arg(root.join("examples/container-workers/run.sh"))
        .env("DOCKER_HOST", &docker_host)
        .env("EMBER", env!("CARGO_BIN_EXE_ember"))
        .env_remove("EMBER_DATA_DIR")
        .output()
        .expect("bash runs the example");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("example OK"),
        "the example failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(
        stdout.contains("worker drained, no job in hand"),
        "{stdout}"
    );
}
