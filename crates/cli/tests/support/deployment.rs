//! The deployment shape for crash and restart tests: each service its own
//! `ember serve` process (as in docker-compose), sharing one data
//! directory and one set of secrets, killed with SIGKILL and started again
//! on the same port and data.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ember_runtime::testing::wait_for;
use serde_json::Value;

use super::{EMBER, text};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    Gateway,
    Engine,
    LifecycleHook,
    PluginRegistry,
}

impl Service {
    pub const ALL: [Service; 4] = [
        Service::Engine,
        Service::LifecycleHook,
        Service::PluginRegistry,
        Service::Gateway,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Service::Gateway => "api-gateway",
            Service::Engine => "engine",
            Service::LifecycleHook => "lifecycle-hook",
            Service::PluginRegistry => "plugin-registry",
        }
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// Four `ember serve` processes sharing one data directory (one SQLite
/// database per service) and one set of secrets.
pub struct Deployment {
    pub data_dir: tempfile::TempDir,
    pub env: Vec<(String, String)>,
    pub ports: HashMap<Service, u16>,
    pub children: HashMap<Service, Child>,
    /// More lifecycle-hook replicas, sharing the first one's database.
    pub replicas: Vec<Child>,
    pub http: reqwest::Client,
    pub token: String,
}

impl Deployment {
    pub fn start() -> Deployment {
        Deployment::start_with(&[])
    }

    /// Starts with extra `EMBER_*` settings.
    pub fn start_with(settings: &[(&str, &str)]) -> Deployment {
        let data_dir = tempfile::tempdir().expect("data dir");
        let ports: HashMap<Service, u16> = Service::ALL
            .iter()
            .map(|service| (*service, free_port()))
            .collect();
        let url = |service: Service| format!("http://127.0.0.1:{}", ports[&service]);
        let env: Vec<(String, String)> = [
            ("EMBER_DATA_DIR", data_dir.path().display().to_string()),
            ("EMBER_AUTH__SIGNING_KEY", "s".repeat(40)),
            ("EMBER_AUTH__INTERNAL_CREDENTIAL", "i".repeat(40)),
            ("EMBER_LIFECYCLE_HOOK__WEBHOOK_SECRET", "w".repeat(40)),
            ("EMBER_GATEWAY__ENGINE_URL", url(Service::Engine)),
            (
                "EMBER_GATEWAY__LIFECYCLE_HOOK_URL",
                url(Service::LifecycleHook),
            ),
            (
                "EMBER_GATEWAY__PLUGIN_REGISTRY_URL",
                url(Service::PluginRegistry),
            ),
            (
                "EMBER_ENGINE__LIFECYCLE_HOOK_URL",
                url(Service::LifecycleHook),
            ),
            (
                "EMBER_ENGINE__PLUGIN_REGISTRY_URL",
                url(Service::PluginRegistry),
            ),
            ("EMBER_ENGINE__COMPUTE__BUILD_MS", "0".into()),
            // The crash tests watch lifecycle deadlines pass in seconds.
            ("EMBER_ENGINE__LIFECYCLE_HOOK_MIN_TIMEOUT_S", "1".into()),
            ("EMBER_ENGINE__COMPUTE__DELETE_MS", "0".into()),
            ("EMBER_LIFECYCLE_HOOK__ENGINE_URL", url(Service::Engine)),
            ("EMBER_LIFECYCLE_HOOK__NATS_URL", String::new()),
            ("RUST_LOG", "warn".into()),
        ]
        .into_iter()
        .chain(
            settings
                .iter()
                .map(|(key, value)| (*key, (*value).to_owned())),
        )
        .map(|(key, value)| (key.to_owned(), value))
        .collect();
        let token = {
            let output = Command::new(EMBER)
                .args(["token", "issue", "--user", "demo", "--project", "demo"])
                .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .output()
                .expect("ember token issue runs");
            assert!(output.status.success(), "{}", text(&output));
            String::from_utf8_lossy(&output.stdout).trim().to_owned()
        };
        let mut deployment = Deployment {
            data_dir,
            env,
            ports,
            children: HashMap::new(),
            replicas: Vec::new(),
            http: reqwest::Client::new(),
            token,
        };
        for service in Service::ALL {
            deployment.spawn(service);
        }
        deployment
    }

    pub fn spawn(&mut self, service: Service) {
        let child = self.serve(service, self.ports[&service]);
        self.children.insert(service, child);
    }

    /// Another lifecycle-hook on its own port and the same database.
    pub fn spawn_lifecycle_hook_replica(&mut self) {
        let child = self.serve(Service::LifecycleHook, free_port());
        self.replicas.push(child);
    }

    pub fn serve(&self, service: Service, port: u16) -> Child {
        Command::new(EMBER)
            .args([
                "serve",
                service.name(),
                "--listen",
                &format!("127.0.0.1:{port}"),
            ])
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ember serve starts")
    }

    /// SIGKILL: no drain, no clean-up, exactly a crash.
    pub fn kill(&mut self, service: Service) {
        let mut child = self.children.remove(&service).expect("running");
        child.kill().expect("killed");
        child.wait().expect("reaped");
    }

    /// SIGTERM, as `docker-compose stop` sends: the service drains and
    /// exits by itself (waited for, at most 15 s; then it is killed).
    pub fn terminate(&mut self, service: Service) {
        let mut child = self.children.remove(&service).expect("running");
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "SIGTERM sent");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        while child.try_wait().expect("status").is_none() {
            if std::time::Instant::now() > deadline {
                child.kill().expect("killed");
                panic!("{} did not exit within 15 s of SIGTERM", service.name());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    pub fn gateway(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.ports[&Service::Gateway])
    }

    /// Waits until `/healthz` reports every service serving.
    pub async fn wait_healthy(&self) {
        let url = self.gateway("/healthz");
        wait_for("every service healthy", Duration::from_secs(30), || async {
            self.http
                .get(&url)
                .send()
                .await
                .is_ok_and(|response| response.status().is_success())
        })
        .await;
    }

    /// The CLI as the member user against this deployment, its output
    /// discarded (see [`Self::ember`] for a command that must succeed).
    pub fn ember_command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(EMBER);
        command
            .args(args)
            .env("EMBER_URL", self.gateway(""))
            .env("EMBER_TOKEN", &self.token)
            .env("EMBER_DATA_DIR", self.data_dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        command
    }

    /// A token of the admin `ops` in the project `demo`.
    pub fn admin_token(&self) -> String {
        let output = Command::new(EMBER)
            .args([
                "token",
                "issue",
                "--user",
                "ops",
                "--project",
                "demo",
                "--role",
                "admin",
            ])
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .expect("ember token issue runs");
        assert!(output.status.success(), "{}", text(&output));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// Runs the CLI as the member user against this deployment.
    pub fn ember(&self, args: &[&str]) -> String {
        let output = self
            .ember_command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .expect("ember runs");
        assert!(output.status.success(), "ember {args:?}: {}", text(&output));
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    pub async fn rest(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, self.gateway(&format!("/clustering/v1{path}")))
            .header("X-Auth-Token", &self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let body = response.json().await.unwrap_or(Value::Null);
        (status, body)
    }

    pub async fn get(&self, path: &str) -> Value {
        let (status, body) = self.rest(reqwest::Method::GET, path, None).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        for child in self.children.values_mut().chain(&mut self.replicas) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn bearer<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("header"),
    );
    request
}
