//! `openstack cluster …` (python-senlinclient 3.1.0 in python-openstackclient)
//! with nothing but the clouds.yaml `ember dev` writes: the flows a Senlin
//! user runs every day — profiles and policies, a cluster expanded, shrunk
//! and resized, its members and actions, a policy attached, a webhook
//! receiver, an update and a collect — each checked through the client's
//! own listings.

use std::path::Path;
use std::time::Duration;

use ember_tests::{TestEmber, wait_for};

use crate::identity::clients::{openstack, openstack_despite_display};

/// Polls `openstack <args>` until its output satisfies `done`.
async fn until(
    ember: &TestEmber,
    dir: &Path,
    what: &str,
    args: &[&str],
    done: impl Fn(&str) -> bool,
) {
    wait_for(what, Duration::from_secs(60), || async {
        done(&openstack(ember, dir, args).await)
    })
    .await;
}

fn lines(output: &str) -> usize {
    output
        .lines()
        .filter(|line| !line.trim().is_empty())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openstack_cluster_runs_the_common_senlin_flows() {
    let ember = TestEmber::start().await;
    ember.seed_identity().await;
    let dir = tempfile::tempdir().expect("dir");
    let dir = dir.path();
    std::fs::write(
        dir.join("profile.yaml"),
        "type: os.nova.server\nversion: 1.0\nproperties:\n  flavor: m1.small\n  image: cirros\n  name: web\n",
    )
    .expect("profile");
    std::fs::write(
        dir.join("policy.yaml"),
        "type: senlin.policy.deletion\nversion: 1.0\nproperties:\n  criteria: OLDEST_FIRST\n",
    )
    .expect("policy");

    openstack_despite_display(
        &ember,
        dir,
        &[
            "cluster",
            "profile",
            "create",
            "--spec-file",
            "profile.yaml",
            "cli-p",
        ],
    )
    .await;
    openstack_despite_display(
        &ember,
        dir,
        &[
            "cluster",
            "policy",
            "create",
            "--spec-file",
            "policy.yaml",
            "cli-del",
        ],
    )
    .await;
    let policies = openstack(
        &ember,
        dir,
        &[
            "cluster",
            "policy",
            "list",
            "--full-id",
            "-f",
            "value",
            "-c",
            "name",
        ],
    )
    .await;
    assert!(policies.lines().any(|line| line == "cli-del"), "{policies}");

    openstack_despite_display(
        &ember,
        dir,
        &[
            "cluster",
            "create",
            "--profile",
            "cli-p",
            "--desired-capacity",
            "2",
            "--max-size",
            "6",
            "cli-c",
        ],
    )
    .await;
    let members = [
        "cluster",
        "members",
        "list",
        "--full-id",
        "-f",
        "value",
        "-c",
        "id",
        "cli-c",
    ];
    until(
        &ember,
        dir,
        "cli-c ACTIVE",
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
        |out| out.lines().any(|line| line == "cli-c ACTIVE"),
    )
    .await;
    assert_eq!(lines(&openstack(&ember, dir, &members).await), 2);
    // A full page carries `clusters_links`; the client follows it to the
    // empty page after and stops.
    let limited = openstack(
        &ember,
        dir,
        &[
            "cluster",
            "list",
            "--limit",
            "1",
            "--full-id",
            "-f",
            "value",
            "-c",
            "name",
        ],
    )
    .await;
    assert_eq!(limited.trim(), "cli-c", "{limited}");

    openstack(&ember, dir, &["cluster", "expand", "--count", "2", "cli-c"]).await;
    until(&ember, dir, "4 members", &members, |out| lines(out) == 4).await;
    openstack(&ember, dir, &["cluster", "shrink", "--count", "1", "cli-c"]).await;
    until(&ember, dir, "3 members", &members, |out| lines(out) == 3).await;
    openstack(
        &ember,
        dir,
        &["cluster", "resize", "--capacity", "2", "cli-c"],
    )
    .await;
    until(&ember, dir, "2 members", &members, |out| lines(out) == 2).await;
    let nodes = openstack(
        &ember,
        dir,
        &[
            "cluster",
            "node",
            "list",
            "--full-id",
            "-f",
            "value",
            "-c",
            "status",
        ],
    )
    .await;
    assert_eq!(
        nodes.lines().filter(|line| *line == "ACTIVE").count(),
        2,
        "{nodes}"
    );

    // `cluster action list` asks the server and then trips over the
    // client's own formatters (python-senlinclient 3.1.0 with osc-lib 4.7,
    // see `openstack_despite_display`): its request must succeed, and the
    // actions are read back over REST.
    openstack_despite_display(&ember, dir, &["cluster", "action", "list", "--full-id"]).await;
    let actions = ember
        .http
        .get(ember.url("/clustering/v1/actions?action=CLUSTER_SCALE_OUT"))
        .header("X-Auth-Token", ember.member_token())
        .send()
        .await
        .expect("actions")
        .json::<serde_json::Value>()
        .await
        .expect("JSON");
    let expand = actions["actions"][0]["id"]
        .as_str()
        .expect("the expand's action")
        .to_owned();
    assert_eq!(actions["actions"][0]["status"], "SUCCEEDED", "{actions}");
    openstack_despite_display(&ember, dir, &["cluster", "action", "show", &expand]).await;

    openstack(
        &ember,
        dir,
        &[
            "cluster", "policy", "attach", "--policy", "cli-del", "cli-c",
        ],
    )
    .await;
    until(
        &ember,
        dir,
        "the policy bound",
        &[
            "cluster",
            "policy",
            "binding",
            "list",
            "--full-id",
            "-f",
            "value",
            "-c",
            "policy_name",
            "cli-c",
        ],
        |out| out.lines().any(|line| line == "cli-del"),
    )
    .await;

    openstack_despite_display(
        &ember,
        dir,
        &[
            "cluster",
            "receiver",
            "create",
            "--type",
            "webhook",
            "--cluster",
            "cli-c",
            "--action",
            "CLUSTER_SCALE_OUT",
            "cli-r",
        ],
    )
    .await;
    let receivers = openstack(
        &ember,
        dir,
        &[
            "cluster",
            "receiver",
            "list",
            "--full-id",
            "-f",
            "value",
            "-c",
            "name",
            "-c",
            "type",
        ],
    )
    .await;
    assert!(
        receivers.lines().any(|line| line == "cli-r webhook"),
        "{receivers}"
    );

    openstack_despite_display(
        &ember,
        dir,
        &["cluster", "update", "--name", "cli-c2", "cli-c"],
    )
    .await;
    until(
        &ember,
        dir,
        "the rename",
        &["cluster", "list", "--full-id", "-f", "value", "-c", "name"],
        |out| out.lines().any(|line| line == "cli-c2"),
    )
    .await;
    let collected = openstack(
        &ember,
        dir,
        &[
            "cluster",
            "collect",
            "--full-id",
            "--path",
            "status",
            "-f",
            "value",
            "-c",
            "attr_value",
            "cli-c2",
        ],
    )
    .await;
    assert_eq!(
        collected.lines().filter(|line| *line == "ACTIVE").count(),
        2,
        "{collected}"
    );

    openstack(&ember, dir, &["cluster", "receiver", "delete", "cli-r"]).await;
    openstack(&ember, dir, &["cluster", "delete", "--force", "cli-c2"]).await;
    until(
        &ember,
        dir,
        "the cluster gone",
        &["cluster", "list", "--full-id", "-f", "value", "-c", "name"],
        |out| !out.lines().any(|line| line == "cli-c2"),
    )
    .await;
    ember.stop().await;
}
