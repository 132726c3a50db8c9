//! `--wait` shows progress on stderr for instances and clusters, as it
//! does for stacks (events): the instance's states, the cluster action's
//! status and each node's transitions, with the time since the wait began;
//! stdout stays the result.

mod support;

use support::{Dev, create_web_profile, ember, text, web_cluster_args};

/// The stderr lines of a command that must succeed.
fn progress(args: &[&str], dir: &std::path::Path) -> Vec<String> {
    let output = ember(args, dir);
    assert!(output.status.success(), "ember {args:?}: {}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        !stdout.contains("[ "),
        "progress stays off stdout: {}",
        text(&output)
    );
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The position of the first line that has every needle, else a panic.
fn line_with(lines: &[String], needles: &[&str]) -> usize {
    lines
        .iter()
        .position(|line| needles.iter().all(|needle| line.contains(needle)))
        .unwrap_or_else(|| panic!("no line with {needles:?} in:\n{}", lines.join("\n")))
}

#[test]
fn waits_show_progress_for_instances_and_clusters() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let _dev = Dev::start(dir);

    let created = progress(
        &[
            "instance",
            "create",
            "p1",
            "--flavor",
            "m1.small",
            "--image",
            "debian-12",
            "--wait",
        ],
        dir,
    );
    let building = line_with(&created, &["s] instance p1: BUILDING"]);
    let active = line_with(&created, &["s] instance p1: ACTIVE (power on)"]);
    assert!(building < active, "{created:?}");
    assert!(
        created[0].starts_with('['),
        "elapsed time first: {created:?}"
    );
    let deleted = progress(&["instance", "delete", "p1", "--wait"], dir);
    line_with(&deleted, &["instance p1: DELETING"]);
    line_with(&deleted, &["instance p1: deleted"]);

    create_web_profile(dir);
    let created = progress(&web_cluster_args("2", &[]), dir);
    line_with(&created, &["CLUSTER_CREATE SUCCEEDED"]);
    let scaled = progress(
        &["cluster", "scale-out", "web", "--count", "1", "--wait"],
        dir,
    );
    let new_node = line_with(&scaled, &["s] node ", ": CREATING"]);
    let succeeded = line_with(&scaled, &["CLUSTER_SCALE_OUT SUCCEEDED"]);
    let running = line_with(&scaled, &["CLUSTER_SCALE_OUT RUNNING"]);
    assert!(running < new_node && running < succeeded, "{scaled:?}");
    let shrunk = progress(
        &["cluster", "scale-in", "web", "--count", "2", "--wait"],
        dir,
    );
    let gone: Vec<&String> = shrunk
        .iter()
        .filter(|line| line.ends_with(": deleted"))
        .collect();
    assert_eq!(gone.len(), 2, "{shrunk:?}");
    // The cluster's own delete: its nodes vanish with it, and the wait
    // still ends in success.
    let deleted = progress(&["cluster", "delete", "web", "--wait"], dir);
    line_with(&deleted, &["CLUSTER_DELETE SUCCEEDED"]);
}
