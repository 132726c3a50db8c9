//! `auth.mode = "keystone"` against a real Keystone (PyPI `keystone` on
//! SQLite under gunicorn, started by tests/keystone/run.py): a token
//! Keystone issued works at the gateway, a revoked one and garbage are
//! refused with 401, Ember's own `/identity` is not served, and with
//! Keystone stopped an unvalidated token gets 503 naming Keystone.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use ember_tests::TestEmber;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{call, password_body};

/// A real Keystone, stopped when dropped.
struct Keystone {
    child: Child,
    described: Value,
    _dir: tempfile::TempDir,
}

impl Keystone {
    fn start() -> Keystone {
        let python = match std::env::var_os("EMBER_TEST_KEYSTONE_PYTHON") {
            Some(python) => PathBuf::from(python),
            None => panic!(
                "EMBER_TEST_KEYSTONE_PYTHON is not set: run ./scripts/test, which installs \
                 Keystone (tests/keystone/setup.sh) into target/test-tools/keystone-venv and sets it"
            ),
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let dir = tempfile::tempdir().expect("dir");
        let mut child = Command::new(python)
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/keystone/run.py"))
            .args(["--port", &port.to_string(), "--cache", "--dir"])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("Keystone's launcher starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the launcher's line");
        let described: Value = serde_json::from_str(&line)
            .unwrap_or_else(|error| panic!("Keystone did not start ({error}): {line:?}"));
        Keystone {
            child,
            described,
            _dir: dir,
        }
    }

    fn url(&self) -> String {
        self.described["url"].as_str().expect("url").to_owned()
    }

    fn stop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let _ = self.child.wait();
    }

    /// A token Keystone issues for `who` (`demo`, `admin`).
    async fn token(&self, http: &reqwest::Client, who: &str) -> String {
        let account = &self.described[who];
        let body = password_body(
            account["user"].as_str().expect("user"),
            account["password"].as_str().expect("password"),
            account["project"].as_str().expect("project"),
        );
        let response = http
            .post(format!("{}/auth/tokens?nocatalog", self.url()))
            .json(&body)
            .send()
            .await
            .expect("Keystone answers");
        assert_eq!(response.status(), StatusCode::CREATED);
        response
            .headers()
            .get("x-subject-token")
            .and_then(|value| value.to_str().ok())
            .expect("a token")
            .to_owned()
    }
}

impl Drop for Keystone {
    fn drop(&mut self) {
        self.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_of_a_real_keystone_are_validated_cached_and_refused_as_it_says() {
    let mut keystone = Keystone::start();
    let url = keystone.url();
    let service = keystone.described["service"].clone();
    let ember = TestEmber::start_configured(move |config| {
        config.auth.mode = "keystone".into();
        config.auth.keystone.url = url.trim_end_matches("/v3").to_owned();
        config.auth.keystone.user = service["user"].as_str().unwrap_or_default().to_owned();
        config.auth.keystone.password = service["password"].as_str().map(str::to_owned);
        config.auth.keystone.project = service["project"].as_str().unwrap_or_default().to_owned();
        config.auth.keystone.cache_ttl_secs = 300;
    })
    .await;
    let project = keystone.described["demo"]["project_id"]
        .as_str()
        .expect("demo's project id")
        .to_owned();
    let stacks = format!("/orchestration/v1/{project}/stacks");
    let get = |token: String| {
        let ember = &ember;
        let stacks = stacks.clone();
        async move {
            call(
                ember,
                Method::GET,
                &stacks,
                &[("x-auth-token", &token)],
                None,
            )
            .await
        }
    };

    let token = keystone.token(&ember.http, "demo").await;
    let answer = get(token.clone()).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    // Its identity is Keystone's: a stack it creates belongs to the project.
    let created = call(
        &ember,
        Method::POST,
        &stacks,
        &[("x-auth-token", &token)],
        Some(&json!({"stack_name": "from-keystone", "template": {
            "heat_template_version": "2018-08-31",
            "resources": {"none": {"type": "OS::Heat::None"}}}})),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let other = call(
        &ember,
        Method::GET,
        "/orchestration/v1/demo/stacks",
        &[("x-auth-token", &token)],
        None,
    )
    .await;
    assert_eq!(other.status, StatusCode::FORBIDDEN, "another project's URL");

    // Garbage and a token Keystone revoked: 401.
    let answer = get("gAAAAABnot-a-real-fernet-token".to_owned()).await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{}", answer.body);
    assert!(answer.message().contains("Keystone"), "{}", answer.body);
    let revoked = keystone.token(&ember.http, "demo").await;
    let admin = keystone.token(&ember.http, "admin").await;
    let response = ember
        .http
        .delete(format!("{}/auth/tokens", keystone.url()))
        .header("x-auth-token", &admin)
        .header("x-subject-token", &revoked)
        .send()
        .await
        .expect("Keystone answers");
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    let answer = get(revoked).await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{}", answer.body);

    // Ember's own front door is not served; its operator tokens still work.
    let front = call(
        &ember,
        Method::POST,
        "/identity/v3/auth/tokens",
        &[],
        Some(&password_body("demo", "x", "demo")),
    )
    .await;
    assert_eq!(front.status, StatusCode::NOT_FOUND);
    let dev = call(
        &ember,
        Method::GET,
        "/orchestration/v1/demo/stacks",
        &[("x-auth-token", ember.member_token())],
        None,
    )
    .await;
    assert_eq!(dev.status, StatusCode::OK);

    // Keystone stopped: a validated token is served from the cache; one
    // never seen cannot be checked — 503 naming Keystone, not 500 or 401.
    let unseen = keystone.token(&ember.http, "demo").await;
    keystone.stop();
    assert_eq!(get(token).await.status, StatusCode::OK, "cached");
    let answer = get(unseen).await;
    assert_eq!(
        answer.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        answer.body
    );
    assert!(answer.message().contains("Keystone at"), "{}", answer.body);
    ember.stop().await;
}
