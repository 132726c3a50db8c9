//! The README walked top to bottom, as a new user copy-pastes it: every
//! ```` ```sh ```` block of README.md runs, in order, with bash, against a
//! real `ember dev` this test starts from an empty data directory, so the
//! README cannot rot again. The convention (also in docs/readme-blocks.md):
//!
//! - a block fenced ```` ```sh ```` runs;
//! - a block fenced ```` ```sh ```` whose first line is `# not run: <why>`
//!   is an illustration (it needs what a test cannot have: a container
//!   engine, docker-compose, a release build, a Keystone, …); the reason is
//!   on the page for the reader and printed by this test, never skipped
//!   silently;
//! - shell fenced any other way (`bash`, `shell`, `console`, …) fails the
//!   test, so no block dodges the convention; other languages (`json`,
//!   `toml`, `yaml`, `text`, none) are not shell and are not run;
//! - the section headed `## Benchmarks` is not walked (release builds and
//!   minutes of load); the test says so.
//!
//! The walk runs in a fresh directory holding `examples/` (a link to the
//! repository's) with `ember dev`'s data directory at `./ember-data`, as the
//! README assumes. Its `ember dev` listens on a free port, and
//! `127.0.0.1:8004` in each block is replaced with that address before the
//! block runs (the only change made to a block). Shell variables carry over
//! from block to block as in one terminal. curl runs with `fail-with-body`
//! (a `.curlrc` in `CURL_HOME`), so an HTTP error fails the block; the
//! README marks the calls meant to fail with `|| true`. `grpcurl`,
//! `openstack` and `python3` come from the virtualenv `./scripts/test`
//! installs (`EMBER_TEST_PYTHON`, else `target/test-tools/venv`); the test
//! fails, naming it, when that is missing.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod support;

use support::{EMBER, ember};

/// How long one block may run: the slowest waits for a cluster or a stack.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(180);
/// The marker of a shell block that is not run.
const NOT_RUN: &str = "# not run:";
/// The section this test does not walk.
const NOT_WALKED_SECTION: &str = "## Benchmarks";

/// One fenced block of the README.
#[derive(Debug)]
struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    info: String,
    text: String,
    /// The `## ` section it stands in.
    section: String,
}

/// Every fenced block, in order. Fences are lines starting with three
/// backticks; an unclosed block is an error.
fn fenced_blocks(readme: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut section = String::new();
    let mut open: Option<Block> = None;
    for (index, line) in readme.lines().enumerate() {
        match open.as_mut() {
            Some(block) => {
                if line.trim_start().starts_with("```") {
                    blocks.push(open.take().expect("an open block"));
                } else {
                    block.text.push_str(line);
                    block.text.push('\n');
                }
            }
            None => {
                if let Some(info) = line.trim_start().strip_prefix("```") {
                    open = Some(Block {
                        line: index + 1,
                        info: info.trim().to_owned(),
                        text: String::new(),
                        section: section.clone(),
                    });
                } else if line.starts_with("## ") {
                    section = line.to_owned();
                }
            }
        }
    }
    if let Some(block) = open {
        panic!("README.md line {}: a block is never closed", block.line);
    }
    blocks
}

/// What the walk does with a block.
#[derive(Debug, PartialEq)]
enum Treatment {
    Run,
    NotRun(String),
    NotShell,
}

/// What to do with `block`, or why the README breaks the convention.
fn treatment(block: &Block) -> Result<Treatment, String> {
    let language = block.info.split_whitespace().next().unwrap_or("");
    match language {
        "sh" => {}
        "bash" | "shell" | "console" | "zsh" | "shell-session" | "shellsession" => {
            return Err(format!(
                "README.md line {}: shell fenced as ```{}: fence it ```sh (it runs) or ```sh \
                 with a first line `{NOT_RUN} <why>` (an illustration)",
                block.line, block.info
            ));
        }
        _ => return Ok(Treatment::NotShell),
    }
    if block.section.trim() == NOT_WALKED_SECTION {
        return Ok(Treatment::NotRun(format!(
            "in {NOT_WALKED_SECTION}: benchmarks need a release build and minutes of load"
        )));
    }
    let first = block.text.lines().next().unwrap_or("");
    match first.strip_prefix(NOT_RUN) {
        Some(reason) if reason.trim().is_empty() => Err(format!(
            "README.md line {}: `{NOT_RUN}` needs a reason",
            block.line
        )),
        Some(reason) => Ok(Treatment::NotRun(reason.trim().to_owned())),
        None => Ok(Treatment::Run),
    }
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// The virtualenv `./scripts/test` installs the real clients into.
fn client_tools() -> PathBuf {
    let bin = match std::env::var_os("EMBER_TEST_PYTHON") {
        Some(python) => Path::new(&python)
            .parent()
            .expect("EMBER_TEST_PYTHON names a file")
            .to_path_buf(),
        None => repository().join("target/test-tools/venv/bin"),
    };
    for tool in ["grpcurl", "openstack", "python3"] {
        assert!(
            bin.join(tool).exists(),
            "the README walk needs {tool} in {} (the virtualenv ./scripts/test installs, or \
             EMBER_TEST_PYTHON naming its python): run ./scripts/test",
            bin.display()
        );
    }
    bin
}

/// `ember dev` on a free port with its data in `walk/ember-data`, its
/// output kept in `dev.log`.
struct WalkDev {
    child: Child,
    address: String,
    log: PathBuf,
}

impl WalkDev {
    fn start(walk: &Path, log: PathBuf) -> WalkDev {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("address")
            .port();
        let address = format!("127.0.0.1:{port}");
        let log_file = std::fs::File::create(&log).expect("dev log");
        let child = Command::new(EMBER)
            .args(["dev", "--listen", &address, "--data-dir", "ember-data"])
            .current_dir(walk)
            .env("RUST_LOG", "warn")
            .stdout(log_file.try_clone().expect("log"))
            .stderr(log_file)
            .spawn()
            .expect("ember dev starts");
        let dev = WalkDev {
            child,
            address,
            log,
        };
        let data_dir = walk.join("ember-data");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !(data_dir.join("dev-credentials.json").exists()
            && ember(&["whoami"], &data_dir).status.success())
        {
            assert!(
                Instant::now() < deadline,
                "ember dev not ready within 30 s:\n{}",
                dev.log_tail()
            );
            std::thread::park_timeout(Duration::from_millis(50));
        }
        dev
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for WalkDev {
    fn drop(&mut self) {
        support::terminate(&mut self.child);
    }
}

/// The outcome of one block.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
}

/// Runs `script` with bash in `walk`, bounded by [`BLOCK_TIMEOUT`].
fn run_script(script: &Path, walk: &Path, scratch: &Path, path: &str, curl_home: &Path) -> Ran {
    let stdout_path = scratch.join("block.stdout");
    let stderr_path = scratch.join("block.stderr");
    let mut child = Command::new("bash")
        .arg(script)
        .current_dir(walk)
        .env("PATH", path)
        .env("CURL_HOME", curl_home)
        .env_remove("EMBER_URL")
        .env_remove("EMBER_TOKEN")
        .env_remove("EMBER_DATA_DIR")
        .env_remove("EMBER_CONFIG")
        .env_remove("OS_CLIENT_CONFIG_FILE")
        .env_remove("OS_CLOUD")
        .env_remove("DOCKER_HOST")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).expect("stdout file"))
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
        .process_group(0)
        .spawn()
        .expect("bash runs");
    let deadline = Instant::now() + BLOCK_TIMEOUT;
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for bash") {
            break status;
        }
        if Instant::now() > deadline {
            timed_out = true;
            if let Ok(pid) = i32::try_from(child.id()) {
                // The whole process group: the block's commands too.
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            break child.wait().expect("bash ends");
        }
        std::thread::park_timeout(Duration::from_millis(20));
    };
    Ran {
        code: status.code(),
        stdout: std::fs::read_to_string(&stdout_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&stderr_path).unwrap_or_default(),
        timed_out,
    }
}

#[test]
fn readme_blocks_tell_their_kind_apart() {
    let readme = "intro\n```sh\nember whoami\n```\n## Other\n```sh\n# not run: needs Podman\npodman ps\n```\n```json\n{}\n```\n## Benchmarks\n```sh\nember bench\n```\n";
    let blocks = fenced_blocks(readme);
    let kinds: Vec<Treatment> = blocks
        .iter()
        .map(|block| treatment(block).expect("follows the convention"))
        .collect();
    assert_eq!(
        kinds,
        vec![
            Treatment::Run,
            Treatment::NotRun("needs Podman".to_owned()),
            Treatment::NotShell,
            Treatment::NotRun(
                "in ## Benchmarks: benchmarks need a release build and minutes of load".to_owned()
            ),
        ]
    );
    assert_eq!(blocks[0].line, 2);
    assert_eq!(blocks[0].text, "ember whoami\n");
    let refused = treatment(&fenced_blocks("```bash\nls\n```\n")[0]);
    assert!(
        refused
            .as_ref()
            .is_err_and(|why| why.contains("fenced as ```bash")),
        "{refused:?}"
    );
    let no_reason = treatment(&fenced_blocks("```sh\n# not run:\nls\n```\n")[0]);
    assert!(no_reason.is_err(), "{no_reason:?}");
}

#[test]
fn the_readme_runs_top_to_bottom_against_ember_dev() {
    let repository = repository();
    let readme = std::fs::read_to_string(repository.join("README.md")).expect("README.md");
    let blocks = fenced_blocks(&readme);
    let tools = client_tools();

    let root = tempfile::tempdir().expect("tempdir");
    let walk = root.path().join("walk");
    let scratch = root.path().join("scratch");
    std::fs::create_dir_all(&walk).expect("walk dir");
    std::fs::create_dir_all(&scratch).expect("scratch dir");
    std::os::unix::fs::symlink(repository.join("examples"), walk.join("examples"))
        .expect("examples linked");
    let curl_home = scratch.join("curl");
    std::fs::create_dir_all(&curl_home).expect("curl home");
    std::fs::write(curl_home.join(".curlrc"), "fail-with-body\n").expect(".curlrc");
    let state = scratch.join("state.sh");
    std::fs::write(&state, "").expect("state file");

    let dev = WalkDev::start(&walk, scratch.join("dev.log"));
    let ember_dir = Path::new(EMBER).parent().expect("ember's directory");
    let path = format!(
        "{}:{}:{}",
        ember_dir.display(),
        tools.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    let mut ran = 0;
    let mut not_run = Vec::new();
    for block in &blocks {
        match treatment(block).unwrap_or_else(|why| panic!("{why}")) {
            Treatment::NotShell => continue,
            Treatment::NotRun(reason) => {
                eprintln!("README.md line {}: NOT RUN ({reason})", block.line);
                not_run.push(format!("line {}: {reason}", block.line));
                continue;
            }
            Treatment::Run => {}
        }
        let text = block.text.replace("127.0.0.1:8004", &dev.address);
        // Variables (exported, as `set -a` makes every assignment) and the
        // directory carry over from the block before, as in one terminal.
        let script = format!(
            "set -a\n. {state}\nset -euo pipefail\n{text}\nexport -p > {state}\nprintf 'cd %q\\n' \"$PWD\" >> {state}\n",
            state = state.display()
        );
        let script_path = scratch.join(format!("block-{}.sh", block.line));
        std::fs::write(&script_path, script).expect("script");
        let started = Instant::now();
        let outcome = run_script(&script_path, &walk, &scratch, &path, &curl_home);
        if outcome.timed_out || outcome.code != Some(0) {
            panic!(
                "README.md line {line} failed ({how}):\n```sh\n{text}```\nstdout:\n{stdout}\nstderr:\n{stderr}\n\nember dev's log (last lines):\n{log}",
                line = block.line,
                how = if outcome.timed_out {
                    format!("no end within {} s", BLOCK_TIMEOUT.as_secs())
                } else {
                    format!("exit code {:?}", outcome.code)
                },
                text = block.text,
                stdout = outcome.stdout,
                stderr = outcome.stderr,
                log = dev.log_tail(),
            );
        }
        // Shown with --no-capture (nextest keeps it for failing tests only).
        eprintln!(
            "README.md line {}: ran in {:.1} s\n{}{}",
            block.line,
            started.elapsed().as_secs_f64(),
            outcome.stdout,
            outcome.stderr
        );
        ran += 1;
    }
    eprintln!(
        "README walk: {ran} blocks ran; {} NOT RUN:\n  {}",
        not_run.len(),
        not_run.join("\n  ")
    );
    // The walk must have walked: the quick start and the sections after it.
    assert!(
        ran >= 20,
        "only {ran} README blocks ran: is the README still fenced ```sh?"
    );
}
