//! The README and the user guide walked top to bottom, as a new user
//! copy-pastes them: every ```` ```sh ```` block of README.md and then of
//! each page of the book under docs/, in the book's order (the links of
//! docs/SUMMARY.md, so a page added there is walked without being listed
//! again here), runs with bash against one real `ember dev` this test
//! starts from an empty data directory, so the docs cannot rot again. The
//! convention (also in docs/readme-blocks.md):
//!
//! - a block fenced ```` ```sh ```` runs;
//! - a block fenced ```` ```sh ```` whose first line is `# not run: <why>`
//!   is an illustration (it needs what a test cannot have: a container
//!   engine, docker-compose, a release build, a Keystone, …); the reason is
//!   on the page for the reader and printed by this test, never skipped
//!   silently;
//! - shell fenced any other way (`bash`, `shell`, `console`, …) fails the
//!   test, so no block dodges the convention; other languages (`json`,
//!   `toml`, `yaml`, `text`, none) are not shell and are not run.
//!
//! Every message names the file and the line.
//!
//! The walk runs in a fresh directory holding `examples/` (a link to the
//! repository's) with `ember dev`'s data directory at `./ember-data`, as the
//! docs assume. Its `ember dev` listens on a free port, and
//! `127.0.0.1:8004` in each block is replaced with that address before the
//! block runs (the only change made to a block). Shell variables carry over
//! from block to block, and from page to page, as in one terminal. curl
//! runs with `fail-with-body` (a `.curlrc` in `CURL_HOME`), so an HTTP error
//! fails the block; the docs mark the calls meant to fail with `|| true`.
//! `grpcurl`, `openstack` and `python3` come from the virtualenv
//! `./scripts/test` installs (`EMBER_TEST_PYTHON`, else
//! `target/test-tools/venv`); the test fails, naming it, when that is
//! missing.
//!
//! A second test checks the links of the same files, without `ember dev`:
//! every relative link names a file that exists, every `#anchor` a heading
//! of its file, and a page of the book links only inside docs/ (the built
//! book has nothing else); every page under docs/ is in the book.

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
/// The book's directory and its table of contents, in it.
const BOOK: &str = "docs";
const SUMMARY: &str = "SUMMARY.md";

/// One fenced block of a walked file.
#[derive(Debug)]
struct Block {
    /// The file, relative to the repository (`README.md`, `docs/guide/…`).
    file: String,
    /// 1-based line of the opening fence.
    line: usize,
    info: String,
    text: String,
}

/// Every fenced block of `file`, in order. Fences are lines starting with
/// three backticks; an unclosed block is an error.
fn fenced_blocks(file: &str, markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (index, line) in markdown.lines().enumerate() {
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
                        file: file.to_owned(),
                        line: index + 1,
                        info: info.trim().to_owned(),
                        text: String::new(),
                    });
                }
            }
        }
    }
    if let Some(block) = open {
        panic!(
            "{} line {}: a block is never closed",
            block.file, block.line
        );
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

/// What to do with `block`, or why its file breaks the convention.
fn treatment(block: &Block) -> Result<Treatment, String> {
    let language = block.info.split_whitespace().next().unwrap_or("");
    match language {
        "sh" => {}
        "bash" | "shell" | "console" | "zsh" | "shell-session" | "shellsession" => {
            return Err(format!(
                "{} line {}: shell fenced as ```{}: fence it ```sh (it runs) or ```sh \
                 with a first line `{NOT_RUN} <why>` (an illustration)",
                block.file, block.line, block.info
            ));
        }
        _ => return Ok(Treatment::NotShell),
    }
    let first = block.text.lines().next().unwrap_or("");
    match first.strip_prefix(NOT_RUN) {
        Some(reason) if reason.trim().is_empty() => Err(format!(
            "{} line {}: `{NOT_RUN}` needs a reason",
            block.file, block.line
        )),
        Some(reason) => Ok(Treatment::NotRun(reason.trim().to_owned())),
        None => Ok(Treatment::Run),
    }
}

/// The pages of the book in its order: the targets of the links of
/// `docs/SUMMARY.md`, relative to the repository.
fn book_pages(summary: &str) -> Vec<String> {
    let mut pages = Vec::new();
    for (_, target) in markdown_links(summary) {
        let page = target.split('#').next().unwrap_or("");
        if !page.is_empty() {
            pages.push(format!("{BOOK}/{page}"));
        }
    }
    pages
}

/// The files the walk reads, in order: README.md, then the book's pages.
fn walked_files(repository: &Path) -> Vec<String> {
    let summary_path = format!("{BOOK}/{SUMMARY}");
    let summary = std::fs::read_to_string(repository.join(&summary_path))
        .unwrap_or_else(|error| panic!("{summary_path}: {error}"));
    let mut files = vec!["README.md".to_owned()];
    files.extend(book_pages(&summary));
    files
}

fn read(repository: &Path, file: &str) -> String {
    std::fs::read_to_string(repository.join(file))
        .unwrap_or_else(|error| panic!("{file} (listed in {BOOK}/{SUMMARY}?): {error}"))
}

/// `line` without its inline code spans, so a link shown as code is not
/// taken for a link.
fn without_code_spans(line: &str) -> String {
    let mut kept = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        kept.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|c| *c == '`').count();
        let fence = "`".repeat(ticks);
        let after = &rest[start + ticks..];
        match after.find(&fence) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                rest = after;
                break;
            }
        }
    }
    kept.push_str(rest);
    kept
}

/// The inline links `[text](target)` of a markdown file outside fenced
/// blocks and code spans, with their 1-based line.
fn markdown_links(markdown: &str) -> Vec<(usize, String)> {
    let mut links = Vec::new();
    let mut in_fence = false;
    for (index, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            links.push((index + 1, target.to_owned()));
            rest = &after[end..];
        }
    }
    links
}

/// The anchors of a markdown file's headings, made as GitHub and mdBook
/// make them: the heading's text lowercased, spaces as `-`, punctuation
/// (backticks, colons, parentheses, …) dropped; a repeated one gets `-1`,
/// `-2`, ….
fn heading_anchors(markdown: &str) -> Vec<String> {
    let mut anchors: Vec<String> = Vec::new();
    let mut in_fence = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || !line.starts_with('#') {
            continue;
        }
        let text = line.trim_start_matches('#');
        if !text.starts_with(' ') {
            continue;
        }
        let base: String = text
            .trim()
            .chars()
            .filter_map(|c| {
                if c.is_alphanumeric() || c == '-' || c == '_' {
                    Some(c.to_lowercase().collect::<String>())
                } else if c == ' ' {
                    Some("-".to_owned())
                } else {
                    None
                }
            })
            .collect();
        let mut anchor = base.clone();
        let mut repeat = 0;
        while anchors.contains(&anchor) {
            repeat += 1;
            anchor = format!("{base}-{repeat}");
        }
        anchors.push(anchor);
    }
    anchors
}

/// `path` with its `.` and `..` components resolved, without touching the
/// file system (so a missing file is reported as missing, not as an error
/// of `canonicalize`).
fn normalized(path: &Path) -> PathBuf {
    let mut result = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                result.pop();
            }
            other => result.push(other),
        }
    }
    result
}

/// What is wrong with the links of `file` (relative to `repository`), one
/// message each, naming the file and the line.
fn broken_links(repository: &Path, file: &str, markdown: &str) -> Vec<String> {
    let mut broken = Vec::new();
    let directory = Path::new(file).parent().unwrap_or(Path::new(""));
    let in_book = file.starts_with(&format!("{BOOK}/"));
    for (line, target) in markdown_links(markdown) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (target.as_str(), None),
        };
        let linked = if path.is_empty() {
            PathBuf::from(file)
        } else {
            normalized(&directory.join(path))
        };
        if in_book && !linked.starts_with(BOOK) {
            broken.push(format!(
                "{file} line {line}: link `{target}` leaves {BOOK}/, which the built book does \
                 not have: name the file as code (`path`) instead"
            ));
            continue;
        }
        if !repository.join(&linked).exists() {
            broken.push(format!(
                "{file} line {line}: link `{target}`: {} does not exist",
                linked.display()
            ));
            continue;
        }
        let Some(anchor) = anchor else { continue };
        if linked
            .extension()
            .is_some_and(|extension| extension == "md")
        {
            let text = std::fs::read_to_string(repository.join(&linked)).unwrap_or_default();
            if !heading_anchors(&text).iter().any(|known| known == anchor) {
                broken.push(format!(
                    "{file} line {line}: link `{target}`: {} has no heading with the anchor \
                     #{anchor}",
                    linked.display()
                ));
            }
        }
    }
    broken
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
fn blocks_tell_their_kind_apart() {
    let page = "intro\n```sh\nember whoami\n```\n## Other\n```sh\n# not run: needs Podman\npodman ps\n```\n```json\n{}\n```\n";
    let blocks = fenced_blocks("docs/guide/page.md", page);
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
        ]
    );
    assert_eq!(blocks[0].line, 2);
    assert_eq!(blocks[0].text, "ember whoami\n");
    let refused = treatment(&fenced_blocks("docs/guide/page.md", "```bash\nls\n```\n")[0]);
    assert!(
        refused
            .as_ref()
            .is_err_and(|why| why.contains("docs/guide/page.md line 1: shell fenced as ```bash")),
        "{refused:?}"
    );
    let no_reason = treatment(&fenced_blocks("README.md", "```sh\n# not run:\nls\n```\n")[0]);
    assert!(
        no_reason
            .as_ref()
            .is_err_and(|why| why.starts_with("README.md line 1:")),
        "{no_reason:?}"
    );
}

#[test]
fn the_book_order_and_links_are_read_as_written() {
    let summary = "# Summary\n\n# User guide\n\n- [What runs](guide/what-runs.md)\n- [Stacks](guide/stacks.md#locks)\n\n# More\n\n- [Architecture](architecture.md)\n";
    assert_eq!(
        book_pages(summary),
        vec![
            "docs/guide/what-runs.md",
            "docs/guide/stacks.md",
            "docs/architecture.md"
        ]
    );
    let page = "See [a](b.md) and `[not](a link)`.\n```sh\necho '[no](link)'\n```\n[c](https://x.org) [d](#e)\n";
    assert_eq!(
        markdown_links(page),
        vec![
            (1, "b.md".to_owned()),
            (5, "https://x.org".to_owned()),
            (5, "#e".to_owned())
        ]
    );
    let headings = "# Stacks\n## Maintenance lock (spec heat-lock-stack)\n```sh\n# not a heading\n```\n## A real cloud: the `openstack` backend\n## Stacks\n";
    assert_eq!(
        heading_anchors(headings),
        vec![
            "stacks",
            "maintenance-lock-spec-heat-lock-stack",
            "a-real-cloud-the-openstack-backend",
            "stacks-1"
        ]
    );
}

#[test]
fn a_broken_link_is_named_with_its_file_and_line() {
    let repository = tempfile::tempdir().expect("tempdir");
    let root = repository.path();
    std::fs::create_dir_all(root.join("docs/guide")).expect("docs/guide");
    std::fs::write(root.join("examples.yaml"), "").expect("a file outside docs/");
    std::fs::write(
        root.join("docs/guide/stacks.md"),
        "# Stacks\n## Maintenance lock\n",
    )
    .expect("a page");
    let readme = "[ok](docs/guide/stacks.md#maintenance-lock)\n[gone](docs/guide/gone.md)\n\n[anchor](docs/guide/stacks.md#locks)\n";
    assert_eq!(
        broken_links(root, "README.md", readme),
        vec![
            "README.md line 2: link `docs/guide/gone.md`: docs/guide/gone.md does not exist",
            "README.md line 4: link `docs/guide/stacks.md#locks`: docs/guide/stacks.md has no \
             heading with the anchor #locks",
        ]
    );
    let page = "[up](../../examples.yaml) [here](#stacks) [there](#nowhere)\n";
    let broken = broken_links(root, "docs/guide/stacks.md", page);
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(
        broken[0]
            .starts_with("docs/guide/stacks.md line 1: link `../../examples.yaml` leaves docs/"),
        "{broken:?}"
    );
    assert!(
        broken[1].ends_with("has no heading with the anchor #nowhere"),
        "{broken:?}"
    );
}

#[test]
fn every_link_of_the_readme_and_the_book_resolves() {
    let repository = repository();
    let files = walked_files(&repository);
    let mut broken = Vec::new();
    for file in &files {
        broken.extend(broken_links(&repository, file, &read(&repository, file)));
    }
    // A page under docs/ that SUMMARY.md does not list is neither in the
    // book nor walked.
    let book = repository.join(BOOK);
    let mut pending = vec![book.clone()];
    while let Some(directory) = pending.pop() {
        for entry in std::fs::read_dir(&directory).expect("docs/ readable") {
            let path = entry.expect("docs/ entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|extension| extension == "md")
                && path != book.join(SUMMARY)
            {
                let relative = path
                    .strip_prefix(&repository)
                    .expect("inside the repository")
                    .display()
                    .to_string();
                if !files.contains(&relative) {
                    broken.push(format!(
                        "{relative}: not in {BOOK}/{SUMMARY}, so neither in the book nor walked"
                    ));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "{} broken link(s):\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn the_readme_and_the_book_run_in_order_against_ember_dev() {
    let repository = repository();
    let blocks: Vec<Block> = walked_files(&repository)
        .iter()
        .flat_map(|file| fenced_blocks(file, &read(&repository, file)))
        .collect();
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
    for (index, block) in blocks.iter().enumerate() {
        match treatment(block).unwrap_or_else(|why| panic!("{why}")) {
            Treatment::NotShell => continue,
            Treatment::NotRun(reason) => {
                eprintln!("{} line {}: NOT RUN ({reason})", block.file, block.line);
                not_run.push(format!("{} line {}: {reason}", block.file, block.line));
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
        let script_path = scratch.join(format!("block-{index}.sh"));
        std::fs::write(&script_path, script).expect("script");
        let started = Instant::now();
        let outcome = run_script(&script_path, &walk, &scratch, &path, &curl_home);
        if outcome.timed_out || outcome.code != Some(0) {
            panic!(
                "{file} line {line} failed ({how}):\n```sh\n{text}```\nstdout:\n{stdout}\nstderr:\n{stderr}\n\nember dev's log (last lines):\n{log}",
                file = block.file,
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
            "{} line {}: ran in {:.1} s\n{}{}",
            block.file,
            block.line,
            started.elapsed().as_secs_f64(),
            outcome.stdout,
            outcome.stderr
        );
        ran += 1;
    }
    eprintln!(
        "README and book walk: {ran} blocks ran; {} NOT RUN:\n  {}",
        not_run.len(),
        not_run.join("\n  ")
    );
    // The walk must have walked: the quick start and the pages after it.
    assert!(
        ran >= 20,
        "only {ran} blocks of the README and the book ran: are they still fenced ```sh?"
    );
}
