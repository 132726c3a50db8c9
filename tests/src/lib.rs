//! The end-to-end test harness: a whole Ember (four services) started in
//! this process on ephemeral ports, exactly as `ember dev` starts it, plus
//! helpers to call it the way users do (tokens for any caller, requests as
//! one, its `/metrics`).

use std::net::SocketAddr;
use std::time::Duration;

use ember::config::Secrets;
use ember::dev::{DevCredentials, RunningEmber};
use ember_runtime::Identity;
use ember_runtime::auth::TokenSigner;
use tonic::transport::Channel;

pub mod containers;

/// With `EMBER_TEST_LOG=<file>`, every Ember started by this test binary
/// logs there (`RUST_LOG` filters, `info` by default): what the services
/// did when a test under load fails. Tests in one binary share the file.
fn log_to_file_if_asked() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let Some(path) = std::env::var_os("EMBER_TEST_LOG") else {
            return;
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|error| panic!("EMBER_TEST_LOG {path:?}: {error}"));
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        // Another subscriber already installed (a test's own) wins.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(std::sync::Mutex::new(file))
            .try_init();
    });
}

pub struct TestEmber {
    pub running: RunningEmber,
    /// The configuration it was started with (ephemeral ports resolved by
    /// the running services, not here).
    pub config: ember::config::EmberConfig,
    pub credentials: DevCredentials,
    pub http: reqwest::Client,
    pub data_dir: tempfile::TempDir,
}

impl TestEmber {
    /// Starts Ember on SQLite in a temporary data directory and waits until
    /// `/healthz` reports every service serving.
    pub async fn start() -> TestEmber {
        TestEmber::start_configured(|_| {}).await
    }

    /// Like [`TestEmber::start`], with `configure` applied to the
    /// configuration first (e.g. a NATS server for lifecycle-hook).
    pub async fn start_configured(
        configure: impl FnOnce(&mut ember::config::EmberConfig),
    ) -> TestEmber {
        log_to_file_if_asked();
        let data_dir = tempfile::tempdir().expect("temporary data dir");
        let (mut config, secrets) = ember::dev::ephemeral_config(data_dir.path());
        // The tests' webhook receivers listen on this machine's loopback,
        // which Ember refuses by default: the harness allows it as an
        // operator would allow an internal target (the SSRF tests take it
        // back in `configure`).
        config.webhook_targets.allow = vec!["127.0.0.0/8".to_owned(), "::1/128".to_owned()];
        configure(&mut config);
        let running = RunningEmber::start(config.clone(), secrets.clone())
            .await
            .expect("ember starts");
        let credentials =
            DevCredentials::mint(running.gateway_addr, &secrets, Duration::from_secs(3600))
                .expect("tokens");
        let ember = TestEmber {
            running,
            config,
            credentials,
            http: reqwest::Client::new(),
            data_dir,
        };
        let url = ember.url("/healthz");
        let http = ember.http.clone();
        wait_for(
            "gateway /healthz to answer 200",
            Duration::from_secs(10),
            || {
                let http = http.clone();
                let url = url.clone();
                async move {
                    http.get(&url)
                        .send()
                        .await
                        .is_ok_and(|response| response.status().is_success())
                }
            },
        )
        .await;
        ember
    }

    /// Seeds the built-in identity as `ember dev` does (project demo,
    /// users admin and demo with passwords) and writes `clouds.yaml` into
    /// the data dir; returns the passwords.
    pub async fn seed_identity(&self) -> ember::dev::DevPasswords {
        ember::dev::seed_dev_identity(&self.config, self.secrets(), self.running.gateway_addr)
            .await
            .expect("dev identities seeded")
            .expect("the built-in identity")
    }

    /// The `clouds.yaml` [`TestEmber::seed_identity`] wrote.
    pub fn clouds_yaml(&self) -> std::path::PathBuf {
        self.data_dir.path().join(ember::dev::CLOUDS_FILE)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.running.gateway_addr)
    }

    /// What the gateway's `/metrics` shows now (Prometheus text).
    pub async fn metrics(&self) -> String {
        self.http
            .get(self.url("/metrics"))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text")
    }

    /// Sends `method path` (a path below the gateway) as `token`, with
    /// `body` as JSON when there is one, at clustering microversion 1.12
    /// (the other APIs ignore it).
    pub async fn send_as(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> reqwest::Response {
        let mut request = self
            .http
            .request(method, self.url(path))
            .header("X-Auth-Token", token)
            .header("OpenStack-API-Version", "clustering 1.12");
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().await.expect("the gateway answers")
    }

    /// A token this Ember takes for `user` in `project` with `roles`, an
    /// hour long.
    pub fn token_for(&self, user: &str, project: &str, roles: &[&str]) -> String {
        let roles = roles.iter().map(|role| (*role).to_owned()).collect();
        TokenSigner::new(&self.secrets().signing_key)
            .issue(
                &Identity::new(user, project, roles),
                Duration::from_secs(3600),
            )
            .expect("a token")
    }

    /// A member of another project (mallory of `other`): who the tests
    /// send to find nothing of the demo project's.
    pub fn outsider_token(&self) -> String {
        self.token_for("mallory", "other", &["member"])
    }

    pub fn member_token(&self) -> &str {
        &self.credentials.member.token
    }

    pub fn admin_token(&self) -> &str {
        &self.credentials.admin.token
    }

    pub fn secrets(&self) -> &Secrets {
        &self.running.secrets
    }

    /// A gRPC channel to the gateway.
    pub async fn gateway_channel(&self) -> Channel {
        channel(self.running.gateway_addr).await
    }

    pub async fn stop(self) {
        self.running.stop().await.expect("clean stop");
    }
}

pub async fn channel(address: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{address}"))
        .expect("url")
        .connect()
        .await
        .expect("connects")
}

/// A gRPC request carrying `Authorization: Bearer <token>`.
pub fn with_bearer<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("header"),
    );
    request
}

/// Tests wait with these, never with a bare sleep.
pub use ember_runtime::testing::{poll_until, poll_until_ok, wait_for};
