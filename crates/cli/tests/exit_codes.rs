//! The exit codes scripts branch on (docs/guide/calling.md, "Exit codes"):
//! each kind of failure ends the real `ember` binary with its own code and
//! the same `error: …` line as before the codes were told apart.

mod support;

use std::path::Path;
use std::process::Output;

use support::{Dev, EMBER, ember, succeed, text};

/// A stack that completes at once.
const QUICK_TEMPLATE: &str = "heat_template_version: 2018-08-31\nresources:\n  secret:\n    type: OS::Heat::RandomString\n    properties:\n      length: 8\n";

/// A stack whose create takes 30 s.
const SLOW_TEMPLATE: &str = "heat_template_version: 2018-08-31\nresources:\n  slow:\n    type: OS::Heat::TestResource\n    properties:\n      action_wait_secs: {create: 30}\n";

/// Asserts `output` exited with `code` and its stderr is one `error: `
/// line starting with `start`; returns that line.
fn assert_exit(output: &Output, code: i32, start: &str) -> String {
    assert_eq!(output.status.code(), Some(code), "{}", text(output));
    let stderr = String::from_utf8_lossy(&output.stderr)
        .trim_end()
        .to_owned();
    assert!(
        stderr.starts_with(&format!("error: {start}")) && stderr.lines().count() == 1,
        "expected `error: {start}…`: {}",
        text(output)
    );
    stderr
}

fn write(dir: &Path, name: &str, contents: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("template written");
    path.display().to_string()
}

/// Against a running `ember dev`: success, each refusal the server sends,
/// and the failures the CLI finds itself, each with its code.
#[test]
fn each_kind_of_failure_exits_with_its_own_code() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let quick = write(dir, "quick.yaml", QUICK_TEMPLATE);
    let slow = write(dir, "slow.yaml", SLOW_TEMPLATE);
    let _dev = Dev::start(dir);

    // 0: success.
    let created = ember(&["stack", "create", "web", "-t", &quick, "--wait"], dir);
    assert_eq!(created.status.code(), Some(0), "{}", text(&created));

    // 4: what the command names does not exist.
    let missing = assert_exit(
        &ember(&["stack", "show", "nothing-here"], dir),
        4,
        "not found: ",
    );
    assert!(missing.contains("nothing-here"), "{missing}");
    assert_exit(
        &ember(&["cluster", "show", "nothing-here"], dir),
        4,
        "not found: ",
    );
    assert_exit(
        &ember(&["instance", "show", "nothing-here"], dir),
        4,
        "not found: no instance named \"nothing-here\"",
    );

    // 5: refused because of the state: a duplicate name, a locked stack,
    // and `allowed` answering no.
    let duplicate = assert_exit(
        &ember(&["stack", "create", "web", "-t", &quick], dir),
        5,
        "conflict: ",
    );
    assert!(duplicate.contains("already exists"), "{duplicate}");
    succeed(
        &[
            "stack",
            "lock",
            "web",
            "--level",
            "stacks",
            "--reason",
            "db upgrade",
            "--wait",
        ],
        dir,
    );
    let locked = assert_exit(&ember(&["stack", "delete", "web"], dir), 5, "conflict: ");
    assert!(locked.contains("unlock it first"), "{locked}");
    let not_allowed = ember(&["stack", "allowed", "web", "delete"], dir);
    assert_exit(&not_allowed, 5, "delete is not allowed on stack web now");
    assert!(
        String::from_utf8_lossy(&not_allowed.stdout).starts_with("delete: not allowed"),
        "{}",
        text(&not_allowed)
    );
    succeed(&["stack", "unlock", "web", "--wait"], dir);

    // 3: the server refuses the request's content.
    let web = support::example("web.yaml");
    let invalid = assert_exit(
        &ember(
            &["stack", "create", "short", "-t", &web, "-P", "length=4"],
            dir,
        ),
        3,
        "invalid input: ",
    );
    assert!(invalid.contains("length"), "{invalid}");

    // 7: the member may not do what only an admin may.
    assert_exit(
        &ember(&["plugin", "list", "--as", "member"], dir),
        7,
        "forbidden: ",
    );

    // 6: a token the gateway does not accept.
    assert_exit(
        &ember(&["stack", "list", "--token", "not-a-token"], dir),
        6,
        "not authenticated: ",
    );

    // 2: the CLI refuses the command line before sending anything.
    assert_exit(
        &ember(
            &["stack", "create", "x", "-t", "/nonexistent/web.yaml"],
            dir,
        ),
        2,
        "cannot read /nonexistent/web.yaml",
    );
    assert_exit(
        &ember(&["stack", "create", "x", "-t", &quick, "-P", "length"], dir),
        2,
        "parameter \"length\" must be KEY=VALUE",
    );
    let unparsed = ember(&["stack", "create"], dir);
    assert_eq!(unparsed.status.code(), Some(2), "{}", text(&unparsed));

    // 9: a wait cut short; the operation goes on.
    assert_exit(
        &ember(
            &[
                "stack",
                "create",
                "slow",
                "-t",
                &slow,
                "--wait",
                "--wait-timeout",
                "1",
            ],
            dir,
        ),
        9,
        "stack slow still CREATE_IN_PROGRESS after 1 s: stopped waiting (it goes on)",
    );
    assert_eq!(
        succeed(
            &["stack", "show", "slow", "-f", "value", "-c", "status"],
            dir
        )
        .trim(),
        "CREATE_IN_PROGRESS",
        "the create went on"
    );
}

/// Without a gateway: nothing listening is 8 (retry later), no token is 6,
/// a malformed URL is 2.
#[test]
fn an_unreachable_gateway_and_missing_credentials_have_their_codes() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed_url = format!("http://{}", closed.local_addr().expect("address"));
    drop(closed);

    let unreachable = assert_exit(
        &ember(
            &["--url", &closed_url, "--token", "t", "stack", "list"],
            dir,
        ),
        8,
        &format!("cannot reach the gateway at {closed_url} (from --url or EMBER_URL)"),
    );
    assert!(unreachable.contains("Connection refused"), "{unreachable}");

    assert_exit(&ember(&["stack", "list"], dir), 6, "no token: ");

    assert_exit(
        &ember(
            &["--url", "not a url", "--token", "t", "stack", "list"],
            dir,
        ),
        2,
        "--url \"not a url\": ",
    );

    let output = std::process::Command::new(EMBER)
        .args(["stack", "lst"])
        .output()
        .expect("ember runs");
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
}
