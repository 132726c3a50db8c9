//! The real `ember` binary as a user runs it: `ember dev` from an empty data
//! dir and again on the same one, SIGTERM, the client commands, and
//! configuration errors.

mod support;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{EMBER, dev_command, free_port};

struct Dev {
    child: Child,
    port: u16,
}

impl Dev {
    fn start(data_dir: &Path) -> Dev {
        let port = free_port();
        let child = dev_command(data_dir, port)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ember dev starts");
        let dev = Dev { child, port };
        dev.wait_until_healthy();
        dev
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn wait_until_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let client = plain_http::status_of;
        loop {
            if client(&self.url("/healthz"), None) == Some(200) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "ember dev not healthy within 20 s"
            );
            std::thread::park_timeout(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM and returns how long the process took to exit.
    fn terminate(mut self) -> (Duration, Output) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).expect("pid"));
        let started = Instant::now();
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal");
        let deadline = started + Duration::from_secs(10);
        loop {
            if self.child.try_wait().expect("wait").is_some() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "ember dev ignored SIGTERM for 10 s"
            );
            std::thread::park_timeout(Duration::from_millis(10));
        }
        let elapsed = started.elapsed();
        let output = self.child.wait_with_output().expect("output");
        (elapsed, output)
    }
}

/// A tiny blocking HTTP/1.1 GET over std, so these tests need no async runtime.
mod plain_http {
    use std::io::{Read, Write};

    pub fn status_of(url: &str, token: Option<&str>) -> Option<u16> {
        get(url, token).map(|(status, _)| status)
    }

    pub fn get(url: &str, token: Option<&str>) -> Option<(u16, String)> {
        let rest = url.strip_prefix("http://")?;
        let (host, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}")))?;
        let mut stream = std::net::TcpStream::connect(host).ok()?;
        let auth = token
            .map(|token| format!("X-Auth-Token: {token}\r\n"))
            .unwrap_or_default();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Connection: close\r\n\r\n"
        )
        .ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        let status = response.split_whitespace().nth(1)?.parse().ok()?;
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_owned())
            .unwrap_or_default();
        Some((status, body))
    }
}

fn ember(args: &[&str], data_dir: &Path) -> Output {
    Command::new(EMBER)
        .args(args)
        .env("EMBER_DATA_DIR", data_dir)
        .env_remove("EMBER_URL")
        .env_remove("EMBER_TOKEN")
        .output()
        .expect("ember runs")
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "command failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn credentials(data_dir: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(data_dir.join("dev-credentials.json")).expect("credentials file");
    serde_json::from_str(&text).expect("json")
}

#[test]
fn dev_starts_on_an_empty_data_dir_restarts_on_it_and_stops_on_sigterm() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dev = Dev::start(data_dir.path());

    let written = credentials(data_dir.path());
    for who in ["admin", "member"] {
        for field in ["token", "user_id", "project_id"] {
            assert!(
                written[who][field]
                    .as_str()
                    .is_some_and(|value| !value.is_empty()),
                "{who}.{field}: {written}"
            );
        }
    }
    assert_eq!(written["member"]["project_id"], "demo");
    let member_token = written["member"]["token"]
        .as_str()
        .expect("token")
        .to_owned();
    let (status, body) = plain_http::get(
        &dev.url("/orchestration/v1/demo/stacks"),
        Some(&member_token),
    )
    .expect("request");
    assert_eq!((status, body.as_str()), (200, r#"{"stacks":[]}"#));

    let (elapsed, output) = dev.terminate();
    assert!(output.status.success(), "exit status {:?}", output.status);
    assert!(
        elapsed < Duration::from_secs(5),
        "shutdown took {elapsed:?}"
    );
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(printed.contains("admin token"), "{printed}");

    // Same data dir: migrations are idempotent and the dev signing key is
    // kept, so tokens from the first run still work.
    let dev = Dev::start(data_dir.path());
    let (status, _) = plain_http::get(
        &dev.url("/orchestration/v1/demo/stacks"),
        Some(&member_token),
    )
    .expect("request");
    assert_eq!(status, 200);
    let (elapsed, output) = dev.terminate();
    assert!(output.status.success());
    assert!(
        elapsed < Duration::from_secs(5),
        "shutdown took {elapsed:?}"
    );
}

#[test]
fn client_commands_work_against_a_running_dev() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dev = Dev::start(data_dir.path());
    let dir = data_dir.path();

    let whoami = stdout(&ember(&["whoami"], dir));
    assert!(
        whoami.contains("user demo") && whoami.contains("roles member"),
        "{whoami}"
    );
    let as_admin = stdout(&ember(&["whoami", "--as", "admin"], dir));
    assert!(as_admin.contains("admin,member"), "{as_admin}");

    let registered = stdout(&ember(
        &[
            "plugin",
            "register",
            "quota",
            "--endpoint",
            "http://127.0.0.1:7000",
            "--ordinal",
            "5",
            "--operations",
            "create,update",
        ],
        dir,
    ));
    assert!(
        registered.contains("quota") && registered.contains("create,update"),
        "{registered}"
    );
    let listed = stdout(&ember(&["plugin", "list"], dir));
    assert!(
        listed
            .lines()
            .any(|line| line.starts_with("5") && line.contains("quota")),
        "{listed}"
    );

    let refused = ember(&["plugin", "list", "--as", "member"], dir);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("forbidden: the plugin registry is admin only")
    );

    let bad_operation = ember(
        &[
            "plugin",
            "register",
            "x",
            "--endpoint",
            "http://h:1",
            "--operations",
            "launch",
        ],
        dir,
    );
    assert!(
        String::from_utf8_lossy(&bad_operation.stderr).contains("unknown operation \"launch\"")
    );

    let stacks = stdout(&ember(&["stack", "list"], dir));
    assert!(stacks.starts_with("ID"), "{stacks}");
    let missing = ember(&["stack", "show", "absent"], dir);
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("not found: stack \"absent\" not found")
    );
    let hooks = stdout(&ember(&["hook", "list"], dir));
    assert!(hooks.starts_with("TOKEN"), "{hooks}");

    // A token minted with the dev signing key is accepted by the gateway.
    let token = stdout(&ember(
        &[
            "token",
            "issue",
            "--user",
            "ops",
            "--project",
            "demo",
            "--role",
            "admin",
        ],
        dir,
    ));
    let url = format!("http://127.0.0.1:{}", dev.port);
    let whoami = stdout(&ember(
        &["whoami", "--token", token.trim(), "--url", &url],
        dir,
    ));
    assert!(
        whoami.contains("user ops") && whoami.contains("roles admin"),
        "{whoami}"
    );
    dev.terminate();
}

#[test]
fn bad_configuration_is_reported_by_key_before_anything_starts() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let output = Command::new(EMBER)
        .args(["dev", "--data-dir"])
        .arg(data_dir.path())
        .env("EMBER_GATEWAY__ENGINE_URL", "engine:50052")
        .env("EMBER_ENGINE__DATABASE_URL", "mysql://root@localhost/ember")
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("gateway.engine_url"), "{stderr}");
    assert!(stderr.contains("engine.database_url"), "{stderr}");

    let config = data_dir.path().join("ember.toml");
    std::fs::write(&config, "[gateway]\nlisten = \"nowhere\"\n").expect("write");
    let output = Command::new(EMBER)
        .args(["--config"])
        .arg(&config)
        .args(["serve", "api-gateway"])
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("gateway.listen"), "{stderr}");

    let output = Command::new(EMBER)
        .args(["serve", "engine"])
        .env_remove("EMBER_AUTH__SIGNING_KEY")
        .output()
        .expect("runs");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("EMBER_AUTH__SIGNING_KEY"));

    // With JSON logs, the fatal error is a JSON line too.
    let output = Command::new(EMBER)
        .args(["serve", "engine"])
        .env_remove("EMBER_AUTH__SIGNING_KEY")
        .env("EMBER_LOG__FORMAT", "json")
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line: serde_json::Value =
        serde_json::from_str(stderr.trim().lines().last().unwrap_or_default())
            .unwrap_or_else(|error| panic!("not a JSON line ({error}): {stderr}"));
    assert_eq!(line["level"], "ERROR", "{stderr}");
    assert!(
        line["message"]
            .as_str()
            .unwrap_or_default()
            .contains("EMBER_AUTH__SIGNING_KEY"),
        "{stderr}"
    );
}

#[test]
fn a_service_runs_alone_with_serve() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let mut child = Command::new(EMBER)
        .args([
            "serve",
            "plugin-registry",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(data_dir.path())
        .env("EMBER_AUTH__SIGNING_KEY", "s".repeat(40))
        .env("EMBER_AUTH__INTERNAL_CREDENTIAL", "c".repeat(40))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !data_dir.path().join("plugin-registry.db").exists()
        || std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
    {
        assert!(
            Instant::now() < deadline,
            "ember serve plugin-registry did not start"
        );
        std::thread::park_timeout(Duration::from_millis(20));
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal");
    let status = child.wait().expect("exits");
    assert!(status.success(), "{status:?}");
}
