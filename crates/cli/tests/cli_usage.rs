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

/// The gateway URL and the member's token `ember dev` wrote.
fn dev_url_and_token(data_dir: &std::path::Path) -> (String, String) {
    let text = std::fs::read_to_string(data_dir.join("dev-credentials.json")).expect("credentials");
    let credentials: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    (
        credentials["gateway_url"].as_str().expect("url").to_owned(),
        credentials["member"]["token"]
            .as_str()
            .expect("token")
            .to_owned(),
    )
}

/// Runs `ember` with nothing from the environment saying where Ember is.
fn ember_bare(args: &[&str]) -> std::process::Output {
    Command::new(EMBER)
        .args(args)
        .env_remove("EMBER_DATA_DIR")
        .env_remove("EMBER_URL")
        .env_remove("EMBER_TOKEN")
        .env_remove("EMBER_CONFIG")
        .current_dir(std::env::temp_dir())
        .output()
        .expect("ember runs")
}

/// `--url`, `--token`, `--as` and `--data-dir` may stand before the command
/// or after it.
#[test]
fn global_flags_work_anywhere_on_the_line() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let _dev = support::Dev::start(dir);
    let (url, token) = dev_url_and_token(dir);
    let dir_text = dir.display().to_string();

    for args in [
        vec!["--url", &url, "--token", &token, "stack", "list"],
        vec!["stack", "--url", &url, "--token", &token, "list"],
        vec!["stack", "list", "--url", &url, "--token", &token],
    ] {
        let output = ember_bare(&args);
        assert!(output.status.success(), "{args:?}: {}", text(&output));
        assert!(
            String::from_utf8_lossy(&output.stdout).starts_with("ID"),
            "{args:?}: {}",
            text(&output)
        );
    }
    for args in [
        vec!["--data-dir", &dir_text, "--as", "admin", "whoami"],
        vec!["whoami", "--data-dir", &dir_text, "--as", "admin"],
    ] {
        let output = ember_bare(&args);
        assert!(output.status.success(), "{args:?}: {}", text(&output));
        assert!(
            String::from_utf8_lossy(&output.stdout).contains("roles admin,member"),
            "{args:?}: {}",
            text(&output)
        );
    }
    // `token issue` reads the dev signing key from a --data-dir given first.
    let output = ember_bare(&[
        "--data-dir",
        &dir_text,
        "token",
        "issue",
        "--user",
        "ops",
        "--project",
        "demo",
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let minted = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let output = ember_bare(&["--url", &url, "--token", &minted, "whoami"]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("user ops"),
        "{}",
        text(&output)
    );
}

/// A `--wait` on a cluster action that ends FAILED exits non-zero and says
/// why; one that succeeds exits 0.
#[test]
fn a_failed_cluster_action_makes_wait_exit_non_zero_with_the_reason() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let _dev = support::Dev::start(dir);
    for (name, failure) in [("stuck", "delete"), ("fine", "power_off")] {
        let spec = dir.join(format!("{name}.yaml"));
        std::fs::write(
            &spec,
            format!("type: ember.instance\nversion: \"1.0\"\nproperties:\n  flavor: m1.small\n  image: debian-12\n  metadata: {{\"ember:simulate_failure\": {failure}}}\n"),
        )
        .expect("spec written");
        let spec = spec.display().to_string();
        support::succeed(&["cluster", "profile-create", name, "--spec", &spec], dir);
        support::succeed(
            &[
                "cluster",
                "create",
                name,
                "--profile",
                name,
                "--desired",
                "1",
                "--wait",
            ],
            dir,
        );
    }
    // The node's machine cannot be deleted: CLUSTER_DELETE fails.
    let output = support::ember(&["cluster", "delete", "stuck", "--wait"], dir);
    assert!(!output.status.success(), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("(CLUSTER_DELETE) is FAILED") && stderr.contains("could not be deleted"),
        "{}",
        text(&output)
    );
    let deleted = support::succeed(&["cluster", "delete", "fine", "--wait"], dir);
    assert_eq!(deleted.trim(), "cluster fine deleted", "{deleted}");
}

/// Parses what a command printed as JSON.
fn json_of(args: &[&str], dir: &std::path::Path) -> serde_json::Value {
    let printed = support::succeed(args, dir);
    serde_json::from_str(&printed).unwrap_or_else(|error| panic!("{args:?}: {error}: {printed}"))
}

/// `-f json|yaml|value` and `-c` on the show and list commands: the output
/// parses back, `-c` picks fields in the order given, and a wrong column or
/// format is refused naming the right ones.
#[test]
fn show_and_list_print_json_yaml_and_single_values_for_scripts() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let _dev = support::Dev::start(dir);
    let template = dir.join("small.yaml");
    std::fs::write(
        &template,
        "heat_template_version: 2018-08-31\nparameters:\n  length: {type: number, default: 8}\nresources:\n  secret:\n    type: OS::Heat::RandomString\n    properties: {length: {get_param: length}}\noutputs:\n  secret: {value: {get_attr: [secret, value]}}\n",
    )
    .expect("template written");
    let template = template.display().to_string();
    support::succeed(
        &[
            "stack",
            "create",
            "small",
            "-t",
            &template,
            "-P",
            "length=12",
            "--wait",
        ],
        dir,
    );
    support::succeed(
        &[
            "stack", "lock", "small", "--level", "stacks", "--reason", "backup", "--wait",
        ],
        dir,
    );

    let shown = json_of(&["stack", "show", "small", "-f", "json"], dir);
    assert_eq!(shown["name"], "small", "{shown}");
    assert_eq!(shown["status"], "LOCK_COMPLETE", "{shown}");
    assert_eq!(shown["parameters"]["length"], 12, "{shown}");
    assert_eq!(
        shown["outputs"]["secret"].as_str().map(str::len),
        Some(12),
        "{shown}"
    );
    assert_eq!(shown["lock"]["level"], "stacks", "{shown}");
    assert_eq!(shown["lock"]["reason"], "backup", "{shown}");
    assert_eq!(shown["lock"]["locked_by_user"], "demo", "{shown}");
    let table = support::succeed(&["stack", "show", "small"], dir);
    assert!(
        table.lines().any(|line| line.starts_with("lock ")
            && line.contains("level stacks by owner demo at ")
            && line.ends_with(": backup")),
        "{table}"
    );
    assert_eq!(
        support::succeed(
            &[
                "stack", "show", "small", "-f", "value", "-c", "status", "-c", "name"
            ],
            dir
        ),
        "LOCK_COMPLETE\nsmall\n"
    );
    let listed = json_of(&["stack", "list", "-f", "json"], dir);
    assert_eq!(listed[0]["name"], "small", "{listed}");
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    let yaml: serde_json::Value = serde_yaml_ng::from_str(&support::succeed(
        &["stack", "list", "-f", "yaml", "-c", "name", "-c", "status"],
        dir,
    ))
    .expect("YAML");
    assert_eq!(
        yaml,
        serde_json::json!([{"name": "small", "status": "LOCK_COMPLETE"}])
    );
    assert_eq!(
        support::succeed(&["stack", "list", "-f", "value", "-c", "name"], dir),
        "small\n"
    );

    // A column that does not exist, and a format that does not.
    let refused = support::fail(&["stack", "list", "-c", "colour"], dir);
    assert!(
        refused
            .contains("-c \"colour\": no such column; the columns are id, name, status, created"),
        "{refused}"
    );
    let refused = support::fail(&["stack", "show", "small", "-f", "xml"], dir);
    assert!(
        refused.contains("invalid value 'xml'") && refused.contains("json"),
        "{refused}"
    );

    // Clusters: show carries its nodes in JSON.
    support::create_web_profile(dir);
    support::create_web_cluster(dir, "2", &["--max", "-1"]);
    let cluster = json_of(&["cluster", "show", "web", "-f", "json"], dir);
    assert_eq!(cluster["desired_capacity"], 2, "{cluster}");
    assert_eq!(cluster["max_size"], -1, "{cluster}");
    let nodes = cluster["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 2, "{cluster}");
    assert!(
        nodes.iter().all(|node| node["status"] == "ACTIVE"),
        "{cluster}"
    );
    assert_eq!(
        support::succeed(
            &["cluster", "show", "web", "-c", "max size", "-f", "value"],
            dir
        ),
        "unlimited\n"
    );
    assert_eq!(
        support::succeed(
            &[
                "cluster", "list", "-f", "value", "-c", "name", "-c", "nodes"
            ],
            dir
        ),
        "web 2\n"
    );

    // Instances: the nodes' machines.
    let instances = json_of(&["instance", "list", "-f", "json"], dir);
    assert_eq!(instances.as_array().map(Vec::len), Some(2), "{instances}");
    let first = instances[0]["uuid"].as_str().expect("uuid").to_owned();
    let instance = json_of(&["instance", "show", &first, "-f", "json"], dir);
    assert_eq!(instance["status"], "ACTIVE", "{instance}");
    assert_eq!(instance["locked"], serde_json::Value::Null, "{instance}");
    assert_eq!(instance["flavor"], "m1.small", "{instance}");

    // Plugins: every setting, the filters included.
    support::succeed(
        &[
            "plugin",
            "register",
            "audit",
            "--endpoint",
            "http://127.0.0.1:9",
            "--operations",
            "delete",
            "--projects",
            "demo",
            "--failure-mode",
            "warn",
            "--disabled",
        ],
        dir,
    );
    let plugin = json_of(&["plugin", "show", "audit", "-f", "json"], dir);
    assert_eq!(
        plugin["operations"],
        serde_json::json!(["delete"]),
        "{plugin}"
    );
    assert_eq!(plugin["projects"], serde_json::json!(["demo"]), "{plugin}");
    assert_eq!(plugin["failure_mode"], "WARN", "{plugin}");
    assert_eq!(plugin["enabled"], false, "{plugin}");
    let plugins = json_of(&["plugin", "list", "-f", "json", "-c", "name"], dir);
    assert_eq!(plugins, serde_json::json!([{"name": "audit"}]));
    let removed = support::succeed(&["plugin", "remove", "audit"], dir);
    assert_eq!(
        removed, "plugin \"audit\" removed\n",
        "nothing printed back"
    );

    // The built-in identity.
    let users = json_of(&["identity", "user", "list", "-f", "json"], dir);
    let names: Vec<&str> = users
        .as_array()
        .expect("users")
        .iter()
        .filter_map(|user| user["name"].as_str())
        .collect();
    assert!(
        names.contains(&"admin") && names.contains(&"demo"),
        "{users}"
    );
    let roles = support::succeed(
        &[
            "identity", "role", "list", "--user", "demo", "-f", "value", "-c", "role",
        ],
        dir,
    );
    assert_eq!(roles, "member\n");
}

/// Waiting is `--wait [--wait-timeout SECONDS]` everywhere; `--timeout` is
/// only ever the operation's own limit (a stack's, in minutes).
#[test]
fn waiting_is_wait_and_wait_timeout_on_every_command_that_waits() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    for command in [
        &["stack", "delete", "web"][..],
        &["cluster", "scale-out", "web"][..],
        &["instance", "delete", "web-1"][..],
        &["hook", "complete", "web", "token"][..],
    ] {
        let mut args = command.to_vec();
        args.extend(["--wait-timeout", "5"]);
        let refused = support::fail(&args, dir);
        assert!(
            refused.contains("the following required arguments were not provided")
                && refused.contains("--wait"),
            "{args:?}: {refused}"
        );
        args.push("--wait");
        let refused = support::fail(&args, dir);
        assert!(
            refused.contains("no token"),
            "{args:?} parses, then needs a server: {refused}"
        );
    }
    // Clusters and instances have no operation timeout: --timeout is refused
    // rather than taken for a wait.
    let refused = support::fail(
        &["cluster", "scale-out", "web", "--wait", "--timeout", "5"],
        dir,
    );
    assert!(
        refused.contains("unexpected argument '--timeout'"),
        "{refused}"
    );
    let refused = support::fail(
        &[
            "stack",
            "create",
            "web",
            "-t",
            "web.yaml",
            "--timeout",
            "soon",
        ],
        dir,
    );
    assert!(
        refused.contains("'soon'") && refused.contains("--timeout <MINUTES>"),
        "{refused}"
    );
}

/// A change without `--wait` prints the action the engine accepted and how
/// to follow it — not the cluster as it was before the change — and
/// `ember cluster action show|list` follow it.
#[test]
fn a_cluster_change_without_wait_prints_the_accepted_action_to_follow() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let _dev = support::Dev::start(dir);
    support::create_web_profile(dir);
    support::create_web_cluster(dir, "1", &[]);
    let accepted = support::succeed(
        &[
            "cluster",
            "resize",
            "web",
            "--min-size",
            "2",
            "--adjustment-type",
            "exact-capacity",
            "--number",
            "2",
        ],
        dir,
    );
    let mut lines = accepted.lines();
    let action_id = lines
        .next()
        .and_then(|line| line.strip_prefix("cluster web: action "))
        .and_then(|rest| rest.strip_suffix(" accepted"))
        .unwrap_or_else(|| panic!("no accepted action: {accepted}"))
        .to_owned();
    assert_eq!(
        lines.next(),
        Some(
            format!(
                "follow it with `ember cluster action show {action_id}` (or run the command with --wait)"
            )
            .as_str()
        ),
        "{accepted}"
    );
    assert!(
        !accepted.contains("min size"),
        "no stale cluster: {accepted}"
    );

    // Followed as the output says, until it ends.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let action = loop {
        let action = json_of(
            &["cluster", "action", "show", &action_id, "-f", "json"],
            dir,
        );
        if action["status"] == "SUCCEEDED" {
            break action;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "action not done in 20 s: {action}"
        );
        std::thread::park_timeout(std::time::Duration::from_millis(100));
    };
    assert_eq!(action["action"], "CLUSTER_RESIZE", "{action}");
    assert_eq!(
        support::succeed(
            &[
                "cluster",
                "show",
                "web",
                "-f",
                "value",
                "-c",
                "min_size",
                "-c",
                "desired_capacity"
            ],
            dir
        ),
        "2\n2\n"
    );
    let listed = json_of(
        &[
            "cluster",
            "action",
            "list",
            "--cluster",
            "web",
            "-f",
            "json",
        ],
        dir,
    );
    let kinds: Vec<&str> = listed
        .as_array()
        .expect("actions")
        .iter()
        .filter_map(|action| action["action"].as_str())
        .collect();
    assert!(
        kinds.contains(&"CLUSTER_RESIZE") && kinds.contains(&"CLUSTER_CREATE"),
        "{listed}"
    );
    let missing = support::fail(
        &[
            "cluster",
            "action",
            "show",
            "01a201ea-4194-738c-a929-e884c0e53ed9",
        ],
        dir,
    );
    assert!(missing.contains("not found"), "{missing}");
}

/// Errors say what was reached, what was expected, and how to go on: a
/// port nothing listens on, a server that is not Ember, no token, and a
/// mistyped subcommand that is never answered with a destructive one. The
/// exit code says which: 8 unreachable (or not answering in gRPC), 1 a
/// server of another kind, 6 no token, 2 a usage error.
#[test]
fn errors_say_what_was_reached_what_was_expected_and_what_to_do() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();

    // Nothing listens on the port.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed_url = format!("http://{}", closed.local_addr().expect("address"));
    drop(closed);
    let refused = support::fail_with(
        8,
        &["--url", &closed_url, "--token", "t", "stack", "list"],
        dir,
    );
    assert!(
        refused.contains(&format!(
            "cannot reach the gateway at {closed_url} (from --url or EMBER_URL)"
        )) && refused.contains("Connection refused")
            && refused.contains("expected Ember's gateway"),
        "{refused}"
    );

    // A server that answers, but not in gRPC (an HTTP/1 server).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let other_url = format!("http://{}", listener.local_addr().expect("address"));
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        if let Ok((mut stream, _)) = listener.accept() {
            let mut request = [0_u8; 1024];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let refused = support::fail_with(
        8,
        &["--url", &other_url, "--token", "t", "stack", "list"],
        dir,
    );
    assert!(
        refused.contains(&format!("the server at {other_url} did not answer in gRPC"))
            && refused.contains("expected Ember's gateway"),
        "{refused}"
    );
    server.join().expect("server thread");

    // A gRPC server, but not the gateway: Ember's plugin-registry alone.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address")
        .port();
    let mut registry = Command::new(EMBER)
        .args([
            "serve",
            "plugin-registry",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir)
        .env("EMBER_AUTH__SIGNING_KEY", "s".repeat(40))
        .env("EMBER_AUTH__INTERNAL_CREDENTIAL", "c".repeat(40))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("plugin-registry starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "plugin-registry did not start"
        );
        std::thread::park_timeout(std::time::Duration::from_millis(20));
    }
    let registry_url = format!("http://127.0.0.1:{port}");
    let refused = support::fail_with(
        1,
        &["--url", &registry_url, "--token", "t", "stack", "list"],
        dir,
    );
    let _ = registry.kill();
    let _ = registry.wait();
    assert!(
        refused.contains(&format!(
            "the server at {registry_url} does not serve this Ember API (unimplemented"
        )) && refused.contains("expected Ember's gateway"),
        "{refused}"
    );

    // No `ember dev` in the data directory and no token.
    let refused = support::fail_with(6, &["stack", "list"], dir);
    assert!(
        refused.contains(&format!(
            "no token: there is no {} to take one from",
            dir.join("dev-credentials.json").display()
        )) && refused.contains("--data-dir DIR")
            && refused.contains("EMBER_TOKEN")
            && refused.contains("ember token issue")
            && !refused.contains("run `ember dev`"),
        "{refused}"
    );

    // A typo is answered with a harmless suggestion, never a destructive one.
    let output = support::ember(&["stack", "lst"], dir);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("a similar subcommand exists: 'list'"),
        "{}",
        text(&output)
    );
    for typo in [
        &["stack", "delet"][..],
        &["cluster", "del-node"][..],
        &["plugin", "remov"][..],
    ] {
        let output = support::ember(typo, dir);
        assert_eq!(output.status.code(), Some(2), "{typo:?}: {}", text(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("unrecognized subcommand"),
            "{typo:?}: {stderr}"
        );
        assert!(!stderr.contains("similar"), "{typo:?}: {stderr}");
    }
}
