//! `ember bench identity`: the Keystone front door and token validation.
//!
//! - `POST /identity/v3/auth/tokens` (password method) p50/p99 over REST
//!   with a keep-alive connection: Argon2id verification dominates, so the
//!   hash alone is measured beside it;
//! - what validating a token costs per request: the built-in check (JWT
//!   signature and revocation lookup) in-process, and — when a real
//!   Keystone can be started (`--keystone-python`, default the test venv's)
//!   — `auth.mode = "keystone"` with a warm cache, in-process and as the
//!   difference between the same REST call with a Keystone token and with
//!   an Ember token on that gateway.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ember_api_gateway::auth::Authenticator;
use ember_api_gateway::identity::keystone::{KeystoneConfig, KeystoneValidator};
use serde_json::{Value, json};

use super::summarize;
use crate::dev::{DevCredentials, RunningEmber};

pub struct IdentityBench {
    pub tokens: usize,
    pub calls: usize,
    pub keystone_python: Option<PathBuf>,
}

fn password_body(user: &str, password: &str, project: &str) -> Value {
    json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": user, "domain": {"name": "Default"}, "password": password}}},
        "scope": {"project": {"name": project, "domain": {"name": "Default"}}},
    }})
}

fn ms(us: f64) -> f64 {
    us / 1000.0
}

pub async fn run(settings: IdentityBench) -> Result<(), String> {
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let (config, secrets) = crate::dev::ephemeral_config(data_dir.path());
    let running = RunningEmber::start(config.clone(), secrets.clone()).await?;
    let passwords = crate::dev::seed_dev_identity(&config, &secrets, running.gateway_addr)
        .await?
        .ok_or("the built-in identity is off")?;
    let http = reqwest::Client::new();
    let url = format!("http://{}/identity/v3/auth/tokens", running.gateway_addr);
    let body = password_body("demo", &passwords.demo, "demo");
    let mut samples = Vec::with_capacity(settings.tokens);
    for round in 0..settings.tokens + 10 {
        let started = Instant::now();
        let response = http
            .post(&url)
            .json(&body)
            .send()
            .await
            .map_err(|error| error.to_string())?;
        if response.status() != reqwest::StatusCode::CREATED {
            return Err(format!("token request answered {}", response.status()));
        }
        response.bytes().await.map_err(|error| error.to_string())?;
        if round >= 10 {
            samples.push(started.elapsed());
        }
    }
    let issue = summarize(&mut samples);
    let stored = ember_api_gateway::identity::password::hash(&passwords.demo)?;
    let mut hashing = Vec::with_capacity(50);
    for _ in 0..50 {
        let started = Instant::now();
        ember_api_gateway::identity::password::verify(&passwords.demo, &stored);
        hashing.push(started.elapsed());
    }
    let hashing = summarize(&mut hashing);
    println!(
        "identity: POST /identity/v3/auth/tokens (password, Argon2id m=19 MiB t=2 p=1), {} tokens",
        settings.tokens
    );
    println!(
        "  issue         p50 {:7.2} ms   p90 {:7.2} ms   p99 {:7.2} ms",
        ms(issue.median_us),
        ms(issue.p90_us),
        ms(issue.p99_us)
    );
    println!(
        "  hash verify   p50 {:7.2} ms   p99 {:7.2} ms   (of that, the password check alone)",
        ms(hashing.median_us),
        ms(hashing.p99_us)
    );

    // The built-in check per request: JWT signature + revocation lookup.
    let credentials =
        DevCredentials::mint(running.gateway_addr, &secrets, Duration::from_secs(3600))?;
    let directory = ember_api_gateway::identity::Directory::open(
        &ember_runtime::database::sqlite_url(&data_dir.path().join("gateway.db")),
        running.shutdown.clone(),
    )
    .await?;
    let builtin = Authenticator::BuiltIn {
        signer: ember_runtime::auth::TokenSigner::new(&secrets.signing_key),
        directory,
    };
    // A token's first check verifies its signature and claims; the signer
    // then remembers it, and later checks look it up (the revocation
    // lookup is on every check). `time_calls` warms up with 100 calls.
    let member = builtin
        .verify(&credentials.member.token)
        .await
        .map_err(|error| format!("the member's token: {error}"))?;
    let fresh = (0..settings.calls + 100)
        .map(|_| builtin.signer().issue(&member, Duration::from_secs(3600)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("issuing tokens: {error}"))?;
    let mut unchecked = fresh.iter();
    let first = time_calls(settings.calls, || {
        builtin.verify(unchecked.next().map_or("", String::as_str))
    })
    .await?;
    let per_call = time_calls(settings.calls, || builtin.verify(&credentials.member.token)).await?;
    println!(
        "  built-in token check, in-process: first check of a token p50 {:.1} µs   p99 {:.1} µs; \
         a remembered token p50 {:.1} µs   p99 {:.1} µs",
        first.median_us, first.p99_us, per_call.median_us, per_call.p99_us
    );
    running.stop().await?;

    let python = settings.keystone_python.or_else(|| {
        let venv = PathBuf::from("target/test-tools/keystone-venv/bin/python");
        venv.exists().then_some(venv)
    });
    match python {
        Some(python) => keystone_mode(&python, settings.calls).await,
        None => {
            println!(
                "  keystone mode: SKIPPED — no Keystone (run tests/keystone/setup.sh, or pass --keystone-python)"
            );
            Ok(())
        }
    }
}

async fn time_calls<F, Fut, T, E>(calls: usize, mut call: F) -> Result<super::Summary, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    let mut samples = Vec::with_capacity(calls);
    for round in 0..calls + 100 {
        let started = Instant::now();
        call().await.map_err(|error| error.to_string())?;
        if round >= 100 {
            samples.push(started.elapsed());
        }
    }
    Ok(summarize(&mut samples))
}

struct KeystoneProcess(Child);

impl Drop for KeystoneProcess {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.0.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let _ = self.0.wait();
    }
}

async fn keystone_mode(python: &std::path::Path, calls: usize) -> Result<(), String> {
    let launcher = PathBuf::from("tests/keystone/run.py");
    if !launcher.exists() {
        println!("  keystone mode: SKIPPED — run from the repository root (tests/keystone/run.py)");
        return Ok(());
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map_err(|error| error.to_string())?
        .port();
    let keystone_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let mut child = Command::new(python)
        .arg(&launcher)
        .args(["--port", &port.to_string(), "--cache", "--dir"])
        .arg(keystone_dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|error| format!("cannot start Keystone: {error}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let process = KeystoneProcess(child);
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    })
    .await
    .map_err(|error| error.to_string())?
    .map_err(|error| error.to_string())?;
    let described: Value =
        serde_json::from_str(&line).map_err(|error| format!("Keystone did not start: {error}"))?;
    let text = |pointer: &str| {
        described
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let keystone = KeystoneConfig {
        url: text("/url"),
        user: text("/service/user"),
        password: text("/service/password"),
        project: text("/service/project"),
        user_domain: "Default".into(),
        project_domain: "Default".into(),
        cache_ttl: Duration::from_secs(300),
        cache_size: 10_000,
        ca_file: String::new(),
        timeout: Duration::from_secs(5),
    };
    let http = reqwest::Client::new();
    let response = http
        .post(format!("{}/auth/tokens?nocatalog", keystone.url))
        .json(&password_body(
            &text("/demo/user"),
            &text("/demo/password"),
            &text("/demo/project"),
        ))
        .send()
        .await
        .map_err(|error| error.to_string())?;
    let token = response
        .headers()
        .get("x-subject-token")
        .and_then(|value| value.to_str().ok())
        .ok_or("Keystone issued no token")?
        .to_owned();
    let project = text("/demo/project_id");

    let validator = KeystoneValidator::new(keystone.clone())?;
    validator
        .validate(&token)
        .await
        .map_err(|error| error.to_string())?;
    let warm = time_calls(calls, || validator.validate(&token)).await?;
    println!(
        "  keystone mode, warm cache, in-process: p50 {:.1} µs   p99 {:.1} µs",
        warm.median_us, warm.p99_us
    );

    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let (mut config, secrets) = crate::dev::ephemeral_config(data_dir.path());
    config.auth.mode = "keystone".into();
    config.auth.keystone.url = keystone.url.clone();
    config.auth.keystone.user = keystone.user.clone();
    config.auth.keystone.password = Some(keystone.password.clone());
    config.auth.keystone.project = keystone.project.clone();
    config.auth.keystone.cache_ttl_secs = 300;
    let running = RunningEmber::start(config, secrets.clone()).await?;
    let ember_token = ember_runtime::auth::TokenSigner::new(&secrets.signing_key)
        .issue(
            &ember_runtime::Identity::new("bench", &project, vec!["member".into()]),
            Duration::from_secs(3600),
        )
        .map_err(|error| error.to_string())?;
    let stacks = format!(
        "http://{}/orchestration/v1/{project}/stacks",
        running.gateway_addr
    );
    let get = |token: String| {
        let http = http.clone();
        let stacks = stacks.clone();
        async move {
            let response = http
                .get(&stacks)
                .header("x-auth-token", token)
                .send()
                .await
                .map_err(|error| error.to_string())?;
            if !response.status().is_success() {
                return Err(format!("GET stacks answered {}", response.status()));
            }
            response.bytes().await.map_err(|error| error.to_string())
        }
    };
    // Interleaved, so drift of the machine hits both alike.
    let mut with_keystone = Vec::with_capacity(calls);
    let mut with_ember = Vec::with_capacity(calls);
    for round in 0..calls + 100 {
        let started = Instant::now();
        get(token.clone()).await?;
        let keystone_took = started.elapsed();
        let started = Instant::now();
        get(ember_token.clone()).await?;
        if round >= 100 {
            with_keystone.push(keystone_took);
            with_ember.push(started.elapsed());
        }
    }
    let with_keystone = summarize(&mut with_keystone);
    let with_ember = summarize(&mut with_ember);
    println!(
        "  GET /orchestration/v1/{{project}}/stacks over REST ({calls} each, interleaved): Keystone token p50 {:.1} µs, Ember token p50 {:.1} µs — {:.1} µs added by the Keystone check",
        with_keystone.median_us,
        with_ember.median_us,
        with_keystone.median_us - with_ember.median_us
    );
    running.stop().await?;
    drop(process);
    Ok(())
}
