//! What the CLI test binaries share: a real `ember dev` in a temporary
//! data directory, and running `ember` commands against it.

// Each test binary uses its own subset of these helpers.
#![allow(dead_code)]

pub mod browser;
pub mod deployment;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const EMBER: &str = env!("CARGO_BIN_EXE_ember");

/// A running `ember dev`, stopped with SIGTERM when dropped.
pub struct Dev {
    child: Child,
    /// Where its gateway answers, `http://127.0.0.1:<port>`.
    pub url: String,
}

impl Dev {
    /// The `ember dev` process.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn start(data_dir: &Path) -> Dev {
        let port = free_port();
        let child = dev_command(data_dir, port)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ember dev starts");
        let dev = Dev {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        // Ready once the CLI reaches the engine through the gateway.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if data_dir.join("dev-credentials.json").exists()
                && ember(&["whoami"], data_dir).status.success()
            {
                return dev;
            }
            assert!(Instant::now() < deadline, "ember dev not ready within 20 s");
            std::thread::park_timeout(Duration::from_millis(50));
        }
    }
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address")
        .port()
}

/// `ember dev` listening on `port` with its data in `data_dir`, logging
/// warnings and errors only.
pub fn dev_command(data_dir: &Path, port: u16) -> Command {
    let mut command = Command::new(EMBER);
    command
        .args([
            "dev",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(data_dir)
        .env("RUST_LOG", "warn");
    command
}

impl Drop for Dev {
    fn drop(&mut self) {
        terminate(&mut self.child);
    }
}

/// Stops an `ember dev` the way an operator does (SIGTERM, its graceful
/// shutdown) and waits for it to exit.
pub fn terminate(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let _ = child.wait();
}

/// The VALUE column of a `show` table's FIELD row.
pub fn field(shown: &str, name: &str) -> String {
    shown
        .lines()
        .find_map(|line| {
            line.strip_prefix(name)
                .filter(|rest| rest.starts_with("  "))
                .map(|rest| rest.trim().to_owned())
        })
        .unwrap_or_default()
}

pub fn ember(args: &[&str], data_dir: &Path) -> Output {
    Command::new(EMBER)
        .args(args)
        .env("EMBER_DATA_DIR", data_dir)
        .env_remove("EMBER_URL")
        .env_remove("EMBER_TOKEN")
        .output()
        .expect("ember runs")
}

pub fn text(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Runs a command that must succeed and returns its stdout.
pub fn succeed(args: &[&str], data_dir: &Path) -> String {
    let output = ember(args, data_dir);
    assert!(output.status.success(), "ember {args:?}: {}", text(&output));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The path of the repository's `examples/<name>`.
pub fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
        .display()
        .to_string()
}

/// Creates the cluster profile `web` from `examples/web-profile.yaml` (each
/// node a small instance).
pub fn create_web_profile(data_dir: &Path) {
    let spec = example("web-profile.yaml");
    succeed(
        &["cluster", "profile-create", "web", "--spec", &spec],
        data_dir,
    );
}

/// The arguments of `ember cluster create web --profile web --desired
/// <desired> <extra…> --wait`.
pub fn web_cluster_args<'a>(desired: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "cluster",
        "create",
        "web",
        "--profile",
        "web",
        "--desired",
        desired,
    ];
    args.extend_from_slice(extra);
    args.push("--wait");
    args
}

/// Runs [`web_cluster_args`] and returns what it printed.
pub fn create_web_cluster(data_dir: &Path, desired: &str, extra: &[&str]) -> String {
    succeed(&web_cluster_args(desired, extra), data_dir)
}

/// Runs a command that must fail and returns its stderr.
pub fn fail(args: &[&str], data_dir: &Path) -> String {
    let output = ember(args, data_dir);
    assert!(
        !output.status.success(),
        "ember {args:?} succeeded: {}",
        text(&output)
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs a command that must fail with exit `code` (docs/guide/calling.md,
/// "Exit codes") and returns its stderr.
pub fn fail_with(code: i32, args: &[&str], data_dir: &Path) -> String {
    let output = ember(args, data_dir);
    assert_eq!(
        output.status.code(),
        Some(code),
        "ember {args:?}: {}",
        text(&output)
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Writes under `dir` an `ember.instance` 1.0 profile spec and a
/// deletion-1.1 policy spec (OLDEST_FIRST) whose hook is the queue `drain`
/// with `timeout` seconds, and returns the `ember` commands that make the
/// cluster `web` of `size` nodes with that policy attached.
pub fn hooked_cluster_commands(dir: &Path, size: u32, timeout: u32) -> Vec<Vec<String>> {
    let write = |name: &str, contents: &str| {
        let path = dir.join(name);
        std::fs::write(&path, contents).expect("spec written");
        path.display().to_string()
    };
    let profile = write(
        "web-profile.yaml",
        "type: ember.instance\nversion: \"1.0\"\nproperties: {flavor: m1.small, image: debian-12}\n",
    );
    let policy = write(
        "drain-policy.yaml",
        &format!(
            "type: senlin.policy.deletion\nversion: \"1.1\"\nproperties:\n  criteria: OLDEST_FIRST\n  hooks: {{type: zaqar, params: {{queue: drain}}, timeout: {timeout}}}\n"
        ),
    );
    let size = size.to_string();
    [
        vec!["cluster", "profile-create", "web", "--spec", &profile],
        vec!["cluster", "policy-create", "drain", "--spec", &policy],
        web_cluster_args(&size, &[]),
        vec!["cluster", "policy-attach", "web", "drain", "--wait"],
    ]
    .into_iter()
    .map(|command| command.into_iter().map(str::to_owned).collect())
    .collect()
}
