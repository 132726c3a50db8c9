//! `ember cluster …` as an operator runs it, against a real `ember dev`:
//! create a profile and a cluster of 2 nodes with `--wait`, list and show
//! it, scale in by one without a hook policy and see one node left, and an
//! unknown cluster failing with a message that names it; the `hook`
//! commands refuse a token that is not one of the cluster's. With a hooked
//! deletion policy, `del-nodes --wait` waits, names the token, and ends
//! when `ember hook complete` is run.

mod support;

use std::time::{Duration, Instant};

use support::{
    Dev, EMBER, create_web_cluster, fail, field, hooked_cluster_commands, succeed, text,
};

/// Rows of the node table `show` prints under the cluster.
fn node_rows(shown: &str) -> Vec<String> {
    shown
        .lines()
        .skip_while(|line| !line.starts_with("NODE "))
        .skip(1)
        .take_while(|line| !line.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn clusters_through_the_cli() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let _dev = Dev::start(dir);

    let spec = dir.join("web-profile.yaml");
    std::fs::write(
        &spec,
        "type: ember.instance\nversion: \"1.0\"\nproperties:\n  flavor: m1.small\n  image: debian-12\n",
    )
    .expect("write spec");
    let spec = spec.to_str().expect("utf-8 path");
    let created = succeed(&["cluster", "profile-create", "web", "--spec", spec], dir);
    assert!(
        created.contains("profile web created (ember.instance-1.0"),
        "{created}"
    );

    let created = create_web_cluster(
        dir,
        "2",
        &["--min", "0", "--max", "5", "--wait-timeout", "30"],
    );
    assert_eq!(field(&created, "status"), "ACTIVE", "{created}");
    assert_eq!(field(&created, "desired capacity"), "2", "{created}");
    assert_eq!(field(&created, "nodes"), "2", "{created}");
    assert!(!field(&created, "action").is_empty(), "{created}");

    let listed = succeed(&["cluster", "list"], dir);
    assert!(listed.starts_with("ID"), "{listed}");
    let row = listed
        .lines()
        .find(|line| line.contains(" web "))
        .unwrap_or_else(|| panic!("web missing: {listed}"));
    assert!(row.contains("ACTIVE"), "{row}");

    let shown = succeed(&["cluster", "show", "web"], dir);
    assert_eq!(field(&shown, "profile"), "web", "{shown}");
    let nodes = node_rows(&shown);
    assert_eq!(nodes.len(), 2, "{shown}");
    assert!(nodes.iter().all(|node| node.contains("ACTIVE")), "{shown}");

    // No deletion policy with hooks: the victim is deleted right away.
    let scaled = succeed(
        &[
            "cluster",
            "scale-in",
            "web",
            "--count",
            "1",
            "--wait",
            "--wait-timeout",
            "30",
        ],
        dir,
    );
    assert_eq!(field(&scaled, "desired capacity"), "1", "{scaled}");
    // The node row goes once its delete finishes; poll with a deadline.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let shown = succeed(&["cluster", "show", "web"], dir);
        if field(&shown, "nodes") == "1" && node_rows(&shown).len() == 1 {
            assert_eq!(field(&shown, "status"), "ACTIVE", "{shown}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still not one node after 20 s: {shown}"
        );
        std::thread::park_timeout(Duration::from_millis(100));
    }

    // Receivers: a webhook that grows the cluster, seen, changed, deleted.
    let made = succeed(
        &[
            "receiver",
            "create",
            "grow",
            "--cluster",
            "web",
            "--action",
            "CLUSTER_SCALE_OUT",
            "--param",
            "count=2",
            "-f",
            "json",
        ],
        dir,
    );
    let made: serde_json::Value = serde_json::from_str(&made).expect("json");
    assert_eq!(made["type"], "webhook", "{made}");
    assert_eq!(made["params"], serde_json::json!({"count": 2}), "{made}");
    let url = made["channel"]["alarm_url"].as_str().unwrap_or_default();
    assert!(url.contains("/clustering/v1/webhooks/"), "{made}");
    let listed = succeed(&["receiver", "list", "--type", "webhook"], dir);
    assert!(
        listed
            .lines()
            .any(|line| line.contains(" grow ") && line.contains("CLUSTER_SCALE_OUT")),
        "{listed}"
    );
    let updated = succeed(
        &[
            "receiver", "update", "grow", "--param", "count=3", "-f", "json",
        ],
        dir,
    );
    let updated: serde_json::Value = serde_json::from_str(&updated).expect("json");
    assert_eq!(
        updated["params"],
        serde_json::json!({"count": 3}),
        "{updated}"
    );
    let shown = succeed(
        &["receiver", "show", "grow", "-c", "action", "-f", "value"],
        dir,
    );
    assert_eq!(shown.trim(), "CLUSTER_SCALE_OUT");
    let refused = fail(
        &["receiver", "create", "bad", "--action", "CLUSTER_SCALE_OUT"],
        dir,
    );
    assert!(
        refused.contains("Cluster identity is required for creating webhook receiver"),
        "{refused}"
    );
    let refused = fail(&["receiver", "create", "bad", "--param", "count"], dir);
    assert!(refused.contains("expected KEY=VALUE"), "{refused}");
    let deleted = succeed(&["receiver", "delete", "grow"], dir);
    assert!(deleted.contains("receiver grow deleted"), "{deleted}");
    let gone = fail(&["receiver", "show", "grow"], dir);
    assert!(gone.contains("not found"), "{gone}");

    let unknown = fail(&["cluster", "scale-in", "nope"], dir);
    assert!(unknown.contains("not found"), "{unknown}");
    assert!(unknown.contains("nope"), "{unknown}");
    let unknown = fail(&["cluster", "show", "nope"], dir);
    assert!(unknown.contains("not found"), "{unknown}");
    let unknown_token = "01a201ea-4194-738c-a929-e884c0e53ed9";
    for command in ["complete", "heartbeat"] {
        let refused = fail(&["hook", command, "web", unknown_token], dir);
        assert!(
            refused.contains(&format!(
                "not found: lifecycle action token \"{unknown_token}\" is not a lifecycle action of cluster \"web\""
            )),
            "{refused}"
        );
    }
    let pending = succeed(&["hook", "list", "--cluster", "web"], dir);
    assert_eq!(pending.lines().count(), 1, "no hook policy: {pending}");
    let messages = succeed(&["hook", "messages", "drain"], dir);
    assert_eq!(messages.trim(), "ID  TOKEN  CREATED  BODY", "{messages}");
    let nothing = fail(&["cluster", "resize", "web"], dir);
    assert!(nothing.contains("nothing to resize"), "{nothing}");
}

#[test]
fn a_hooked_removal_waits_for_hook_complete() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let _dev = Dev::start(dir);
    for command in hooked_cluster_commands(dir, 2, 300) {
        let command: Vec<&str> = command.iter().map(String::as_str).collect();
        succeed(&command, dir);
    }
    let shown = succeed(&["cluster", "show", "web"], dir);
    let victim = node_rows(&shown)[0]
        .split_whitespace()
        .next()
        .expect("node id")
        .to_owned();

    // The removal waits in the background until the hook is completed.
    let waiting = std::process::Command::new(EMBER)
        .args([
            "cluster",
            "del-nodes",
            "web",
            &victim,
            "--wait",
            "--wait-timeout",
            "60",
        ])
        .env("EMBER_DATA_DIR", dir)
        .env_remove("EMBER_URL")
        .env_remove("EMBER_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("del-nodes runs");
    let deadline = Instant::now() + Duration::from_secs(20);
    let token = loop {
        let pending = succeed(&["hook", "list", "--cluster", "web"], dir);
        if let Some(row) = pending.lines().nth(1) {
            assert!(row.contains(&victim), "{pending}");
            break row.split_whitespace().next().expect("token").to_owned();
        }
        assert!(Instant::now() < deadline, "no pending hook: {pending}");
        std::thread::park_timeout(Duration::from_millis(50));
    };
    // The pending action is recorded before its message is delivered to
    // the queue (the delivery worker's next pass): wait for it.
    loop {
        let messages = succeed(&["hook", "messages", "drain"], dir);
        if messages.contains(&token) {
            break;
        }
        assert!(Instant::now() < deadline, "no message: {messages}");
        std::thread::park_timeout(Duration::from_millis(50));
    }
    // Scripts read both as JSON: the pending action, and the message a
    // receiver gets, its body a JSON object.
    let pending: serde_json::Value = serde_json::from_str(&succeed(
        &["hook", "list", "--cluster", "web", "-f", "json"],
        dir,
    ))
    .expect("hook list -f json");
    assert_eq!(pending[0]["token"], token.as_str(), "{pending}");
    assert_eq!(pending[0]["delivery"], "DELIVERED", "{pending}");
    assert_eq!(
        succeed(
            &[
                "hook",
                "list",
                "--cluster",
                "web",
                "-f",
                "value",
                "-c",
                "token"
            ],
            dir
        )
        .trim(),
        token
    );
    let queued: serde_json::Value =
        serde_json::from_str(&succeed(&["hook", "messages", "drain", "-f", "json"], dir))
            .expect("hook messages -f json");
    let message = queued
        .as_array()
        .and_then(|messages| {
            messages
                .iter()
                .find(|message| message["token"] == token.as_str())
        })
        .unwrap_or_else(|| panic!("no message for {token}: {queued}"));
    assert_eq!(
        message["body"]["lifecycle_action_token"],
        token.as_str(),
        "{queued}"
    );
    assert_eq!(
        message["body"]["lifecycle_transition_type"], "terminating",
        "{queued}"
    );
    assert_eq!(message["body"]["node_id"], pending[0]["node"], "{queued}");
    let shown = succeed(&["cluster", "show", "web"], dir);
    assert_eq!(node_rows(&shown).len(), 2, "the node waits: {shown}");
    assert!(
        shown.contains("waiting for lifecycle completion"),
        "{shown}"
    );

    succeed(&["hook", "complete", "web", &token], dir);
    let output = waiting.wait_with_output().expect("del-nodes ends");
    assert!(output.status.success(), "{}", text(&output));
    let told = String::from_utf8_lossy(&output.stderr);
    assert!(
        told.contains("waiting for the lifecycle hooks of 1 node(s)") && told.contains(&token),
        "{told}"
    );
    let shown = succeed(&["cluster", "show", "web"], dir);
    assert_eq!(node_rows(&shown).len(), 1, "{shown}");
    assert!(!shown.contains(&victim), "{shown}");
    let again = fail(&["hook", "complete", "web", &token], dir);
    assert!(again.contains("already completed"), "{again}");
}
