//! The read commands that complete the CLI, against a real `ember dev`:
//! `stack resource show`, `stack event show`, `stack resources|events -f`,
//! `resource-type list|show`, `node list|show`, `profile list|show|delete`
//! — each with `-f json` parsed back, `-c`, and exit code 1 naming what
//! was not found.

mod support;

use serde_json::Value;
use support::{Dev, create_web_cluster, create_web_profile, ember, example, fail, succeed, text};

fn json(args: &[&str], dir: &std::path::Path) -> Value {
    let printed = succeed(args, dir);
    serde_json::from_str(&printed).unwrap_or_else(|error| panic!("{args:?}: {error}: {printed}"))
}

#[test]
fn a_stacks_resources_and_events_are_shown_one_by_one() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let _dev = Dev::start(dir);
    let template = example("web.yaml");
    succeed(
        &[
            "stack",
            "create",
            "web",
            "-t",
            &template,
            "-P",
            "length=20",
            "--wait",
        ],
        dir,
    );

    let resources = json(&["stack", "resources", "web", "-f", "json"], dir);
    let names: Vec<&str> = resources
        .as_array()
        .expect("a list")
        .iter()
        .map(|row| row["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names.len(), 2, "{resources}");
    assert!(
        names.contains(&"secret") && names.contains(&"server"),
        "{resources}"
    );

    let secret = json(
        &["stack", "resource", "show", "web", "secret", "-f", "json"],
        dir,
    );
    assert_eq!(secret["type"], "OS::Heat::RandomString", "{secret}");
    assert_eq!(secret["status"], "CREATE_COMPLETE", "{secret}");
    assert_eq!(secret["properties"]["length"], 20, "{secret}");
    let value = secret["attributes"]["value"]
        .as_str()
        .expect("value attribute");
    assert_eq!(value.len(), 20, "{secret}");
    assert_eq!(
        succeed(
            &[
                "stack",
                "resource",
                "show",
                "web",
                "secret",
                "-f",
                "value",
                "-c",
                "physical_id"
            ],
            dir
        )
        .trim(),
        secret["physical_id"].as_str().expect("physical id")
    );
    let outputs = json(&["stack", "outputs", "web", "-f", "json"], dir);
    let secret_output = outputs
        .as_array()
        .and_then(|rows| rows.iter().find(|row| row["key"] == "secret"))
        .unwrap_or_else(|| panic!("secret in {outputs}"));
    assert_eq!(secret_output["value"], value, "{outputs}");
    let server_output = json(&["stack", "outputs", "web", "server", "-f", "json"], dir);
    assert_eq!(server_output["key"], "server", "{server_output}");
    assert_eq!(
        succeed(&["stack", "outputs", "web", "secret"], dir).trim(),
        value,
        "a key alone prints the bare value"
    );
    let missing = fail(&["stack", "resource", "show", "web", "nothing"], dir);
    assert!(missing.contains("\"nothing\""), "{missing}");

    // The event ids `stack events -f value -c id` prints are what
    // `stack event show` takes.
    let events = json(
        &[
            "stack",
            "events",
            "web",
            "--resource",
            "server",
            "-f",
            "json",
        ],
        dir,
    );
    let last = events
        .as_array()
        .and_then(|list| list.last())
        .expect("events");
    assert_eq!(last["status"], "CREATE_COMPLETE", "{events}");
    let id = last["id"].as_str().expect("event id");
    let shown = json(
        &["stack", "event", "show", "web", "server", id, "-f", "json"],
        dir,
    );
    assert_eq!(shown["id"], id, "{shown}");
    assert_eq!(shown["resource"], "server", "{shown}");
    assert_eq!(shown["type"], "OS::Nova::Server", "{shown}");
    assert!(shown["time"].is_string(), "{shown}");
    // Without -f, events stay one line each, as openstack prints them.
    let lines = succeed(&["stack", "events", "web", "--resource", "server"], dir);
    assert_eq!(lines.lines().count(), 2, "{lines}");
    // An id that is not an event id is invalid input (3); a well-formed one
    // that names no event is not found (4).
    let malformed = ember(&["stack", "event", "show", "web", "server", "nope"], dir);
    assert_eq!(malformed.status.code(), Some(3), "{}", text(&malformed));
    let unknown = ember(
        &[
            "stack",
            "event",
            "show",
            "web",
            "server",
            "00000000-0000-4000-8000-000000000000",
        ],
        dir,
    );
    assert_eq!(unknown.status.code(), Some(4), "{}", text(&unknown));
}

#[test]
fn resource_types_are_listed_and_their_schemas_shown() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let _dev = Dev::start(dir);

    let all = succeed(&["resource-type", "list", "-f", "value"], dir);
    for known in [
        "OS::Heat::RandomString",
        "OS::Nova::Server",
        "OS::Heat::AutoScalingGroup",
    ] {
        assert!(all.lines().any(|line| line == known), "{known} in:\n{all}");
    }
    let filtered = json(
        &["resource-type", "list", "--name", "Random", "-f", "json"],
        dir,
    );
    assert_eq!(
        filtered,
        serde_json::json!([{"resource_type": "OS::Heat::RandomString"}])
    );

    let schema = json(
        &[
            "resource-type",
            "show",
            "OS::Heat::RandomString",
            "-f",
            "json",
        ],
        dir,
    );
    assert_eq!(schema["resource_type"], "OS::Heat::RandomString");
    assert_eq!(
        schema["properties"]["length"]["type"], "integer",
        "{schema}"
    );
    assert!(schema["attributes"]["value"].is_object(), "{schema}");
    let unknown = fail(&["resource-type", "show", "OS::Nope::Nothing"], dir);
    assert!(unknown.contains("OS::Nope::Nothing"), "{unknown}");
}

#[test]
fn nodes_and_profiles_are_listed_shown_and_a_profile_deleted() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let _dev = Dev::start(dir);
    create_web_profile(dir);
    let profile = example("web-profile.yaml");
    succeed(
        &["cluster", "profile-create", "spare", "--spec", &profile],
        dir,
    );
    create_web_cluster(dir, "2", &[]);

    let nodes = json(&["node", "list", "--cluster", "web", "-f", "json"], dir);
    let nodes = nodes.as_array().expect("a list");
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    assert!(
        nodes.iter().all(|node| node["status"] == "ACTIVE"),
        "{nodes:?}"
    );
    let name = nodes[0]["name"].as_str().expect("node name");
    let node = json(&["node", "show", name, "-f", "json"], dir);
    assert_eq!(node["id"], nodes[0]["id"], "{node}");
    assert_eq!(node["tainted"], false, "{node}");
    assert!(
        !node["physical_id"]
            .as_str()
            .expect("physical id")
            .is_empty()
    );
    assert_eq!(
        succeed(&["node", "show", name, "-f", "value", "-c", "status"], dir).trim(),
        "ACTIVE"
    );
    fail(&["node", "show", "no-such-node"], dir);

    let profiles = succeed(&["profile", "list", "-f", "value", "-c", "name"], dir);
    let mut listed: Vec<&str> = profiles.lines().collect();
    listed.sort_unstable();
    assert_eq!(listed, ["spare", "web"], "{profiles}");
    let shown = json(&["profile", "show", "web", "-f", "json"], dir);
    assert_eq!(shown["type"], "ember.instance-1.0", "{shown}");
    assert_eq!(shown["spec"]["properties"]["flavor"], "m1.small", "{shown}");

    // In use by the cluster: refused, naming why; unused: deleted.
    let in_use = fail(&["profile", "delete", "web"], dir);
    assert!(
        in_use.contains("still referenced by some clusters and/or nodes"),
        "{in_use}"
    );
    assert_eq!(
        succeed(&["profile", "delete", "spare"], dir).trim(),
        "profile spare deleted"
    );
    assert_eq!(
        succeed(&["profile", "list", "-f", "value", "-c", "name"], dir).trim(),
        "web"
    );
    fail(&["profile", "show", "spare"], dir);
}

#[test]
fn policies_are_listed_shown_detached_and_deleted() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let _dev = Dev::start(dir);
    let policy = example("drain-policy.yaml");
    create_web_profile(dir);
    succeed(
        &["cluster", "policy-create", "drain", "--spec", &policy],
        dir,
    );
    create_web_cluster(dir, "1", &[]);
    succeed(&["cluster", "policy-attach", "web", "drain", "--wait"], dir);

    let listed = json(&["policy", "list", "-f", "json"], dir);
    assert_eq!(listed[0]["name"], "drain", "{listed}");
    assert_eq!(listed[0]["type"], "senlin.policy.deletion-1.1", "{listed}");
    let shown = json(&["policy", "show", "drain", "-f", "json"], dir);
    assert_eq!(
        shown["spec"]["properties"]["hooks"]["params"]["queue"], "drain",
        "{shown}"
    );

    let attached = fail(&["policy", "delete", "drain"], dir);
    assert!(
        attached.contains("still attached to some clusters"),
        "{attached}"
    );
    succeed(&["cluster", "policy-detach", "web", "drain", "--wait"], dir);
    let cluster = json(&["cluster", "show", "web", "-f", "json"], dir);
    assert_eq!(cluster["policies"], serde_json::json!([]), "{cluster}");
    assert_eq!(
        succeed(&["policy", "delete", "drain"], dir).trim(),
        "policy drain deleted"
    );
    assert_eq!(
        json(&["policy", "list", "-f", "json"], dir),
        serde_json::json!([])
    );
    fail(&["policy", "show", "drain"], dir);
    // Detaching what is not attached fails, naming it.
    let again = fail(&["cluster", "policy-detach", "web", "drain", "--wait"], dir);
    assert!(again.contains("drain"), "{again}");
}

#[test]
fn nodes_are_created_updated_and_deleted_and_clusters_checked_and_recovered() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let _dev = Dev::start(dir);
    create_web_profile(dir);
    create_web_cluster(dir, "1", &[]);

    // An orphan node, then one that joins the cluster.
    let created = succeed(
        &["node", "create", "loner", "--profile", "web", "--wait"],
        dir,
    );
    assert_eq!(created.trim(), "node loner created");
    let loner = json(&["node", "show", "loner", "-f", "json"], dir);
    assert_eq!(loner["cluster"], "", "an orphan: {loner}");
    assert_eq!(loner["status"], "ACTIVE", "{loner}");
    succeed(
        &[
            "node",
            "create",
            "joiner",
            "--profile",
            "web",
            "--cluster",
            "web",
            "--wait",
        ],
        dir,
    );
    let cluster = json(&["cluster", "show", "web", "-f", "json"], dir);
    assert_eq!(
        cluster["nodes"].as_array().map(Vec::len),
        Some(2),
        "{cluster}"
    );

    let updated = json(
        &[
            "node",
            "update",
            "joiner",
            "--role",
            "db",
            "--tainted",
            "true",
            "-f",
            "json",
        ],
        dir,
    );
    assert_eq!(updated["role"], "db", "{updated}");
    assert_eq!(updated["tainted"], true, "{updated}");
    let refused = ember(&["node", "update", "joiner", "--tainted", "maybe"], dir);
    assert_eq!(refused.status.code(), Some(2), "a usage error");

    // Without --wait: the accepted action, and how to follow it.
    let accepted = succeed(&["node", "delete", "loner"], dir);
    assert!(
        accepted.starts_with("node loner: action ")
            && accepted.contains("ember cluster action show"),
        "{accepted}"
    );
    assert_eq!(
        succeed(&["node", "delete", "joiner", "--wait"], dir).trim(),
        "node joiner deleted"
    );
    let checked = succeed(&["cluster", "check", "web", "--wait"], dir);
    assert!(checked.contains("CLUSTER_CHECK completed"), "{checked}");
    let recovered = succeed(&["cluster", "recover", "web", "--wait"], dir);
    assert!(recovered.contains("CLUSTER_RECOVER"), "{recovered}");
    // The delete accepted without --wait ends too.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let left = succeed(&["node", "list", "-f", "value", "-c", "name"], dir);
        if left.lines().count() == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "only the cluster's first node should be left: {left}"
        );
        std::thread::park_timeout(std::time::Duration::from_millis(50));
    }
    fail(&["node", "delete", "loner", "--wait"], dir);
}
