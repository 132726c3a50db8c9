//! Running Ember: all four services in one process (`ember dev`, tests,
//! benchmarks) or one service alone (`ember serve`). Services in one
//! process call each other's gRPC routes directly (see
//! `ember_runtime::in_process`); each still serves its port, as a separate
//! container does.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use ember_runtime::Identity;
use ember_runtime::auth::{TokenSigner, random_secret};
use ember_runtime::in_process::Links;
use ember_runtime::server::StartError;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::{EmberConfig, Secrets};

/// The four services.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServiceName {
    ApiGateway,
    Engine,
    LifecycleHook,
    PluginRegistry,
}

impl ServiceName {
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceName::ApiGateway => "api-gateway",
            ServiceName::Engine => "engine",
            ServiceName::LifecycleHook => "lifecycle-hook",
            ServiceName::PluginRegistry => "plugin-registry",
        }
    }
}

/// Binds `address`, naming it in the error.
pub async fn bind(what: &str, address: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(address)
        .await
        .map_err(|error| format!("{what} cannot listen on {address}: {error}"))
}

/// Runs one service on a bound listener until `shutdown`.
pub async fn serve_one(
    service: ServiceName,
    config: &EmberConfig,
    secrets: &Secrets,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), StartError> {
    serve_one_with(service, config, secrets, listener, None, shutdown).await
}

/// [`serve_one`], the service serving its end of `links` and calling the
/// others through theirs when they run in this process.
pub async fn serve_one_with(
    service: ServiceName,
    config: &EmberConfig,
    secrets: &Secrets,
    listener: TcpListener,
    links: Option<&Links>,
    shutdown: CancellationToken,
) -> Result<(), StartError> {
    let peers = links.map(Links::peers).unwrap_or_default();
    match service {
        ServiceName::ApiGateway => {
            let mut gateway = config.gateway(secrets);
            gateway.peers = peers;
            ember_api_gateway::serve(gateway, listener, shutdown).await
        }
        ServiceName::Engine => {
            let mut engine = config.engine(secrets);
            engine.in_process = links.map(|links| links.engine.listener.clone());
            engine.peers = peers;
            ember_engine::serve(engine, listener, shutdown).await
        }
        ServiceName::LifecycleHook => {
            let mut lifecycle_hook = config.lifecycle_hook(secrets);
            lifecycle_hook.in_process = links.map(|links| links.lifecycle_hook.listener.clone());
            ember_lifecycle_hook::serve(lifecycle_hook, listener, shutdown).await
        }
        ServiceName::PluginRegistry => {
            let mut plugin_registry = config.plugin_registry(secrets);
            plugin_registry.in_process = links.map(|links| links.plugin_registry.listener.clone());
            ember_plugin_registry::serve(plugin_registry, listener, shutdown).await
        }
    }
}

/// All four services running in this process.
pub struct RunningEmber {
    pub gateway_addr: SocketAddr,
    pub engine_addr: SocketAddr,
    pub lifecycle_hook_addr: SocketAddr,
    pub plugin_registry_addr: SocketAddr,
    pub secrets: Secrets,
    /// The key webhook deliveries are signed with (configured, or made up
    /// at start).
    pub webhook_secret: String,
    pub shutdown: CancellationToken,
    tasks: JoinSet<(ServiceName, Result<(), StartError>)>,
}

impl RunningEmber {
    /// Starts the four services: the gateway on `config.gateway.listen`, the
    /// internal ones on ephemeral loopback ports (they are reachable only
    /// through the gateway anyway).
    pub async fn start(mut config: EmberConfig, secrets: Secrets) -> Result<RunningEmber, String> {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let gateway = bind("api-gateway", config.gateway.listen).await?;
        let engine = bind("engine", loopback).await?;
        let lifecycle_hook = bind("lifecycle-hook", loopback).await?;
        let plugin_registry = bind("plugin-registry", loopback).await?;
        let address = |listener: &TcpListener| {
            listener
                .local_addr()
                .map_err(|error| format!("cannot read a bound address: {error}"))
        };
        let gateway_addr = address(&gateway)?;
        let engine_addr = address(&engine)?;
        let lifecycle_hook_addr = address(&lifecycle_hook)?;
        let plugin_registry_addr = address(&plugin_registry)?;
        config.gateway.engine_url = format!("http://{engine_addr}");
        config.gateway.lifecycle_hook_url = format!("http://{lifecycle_hook_addr}");
        config.gateway.plugin_registry_url = format!("http://{plugin_registry_addr}");
        // The engine's plugin runner calls go to the same plugin-registry.
        config.engine.plugin_registry_url = format!("http://{plugin_registry_addr}");
        // The engine hands lifecycle hooks over; lifecycle-hook calls back
        // when their deadlines pass.
        config.engine.lifecycle_hook_url = format!("http://{lifecycle_hook_addr}");
        config.lifecycle_hook.engine_url = format!("http://{engine_addr}");
        // The Keystone resource types manage this gateway's built-in
        // identity unless the configuration names another gateway.
        if config.engine.identity_url.is_empty() {
            config.engine.identity_url = format!("http://{gateway_addr}");
        }
        // URLs the engine hands out (wait condition signals) point at this
        // gateway unless the configuration says where users reach it.
        if config.engine.public_url.is_empty() {
            config.engine.public_url = format!("http://{gateway_addr}");
        }
        let webhook_secret = config
            .lifecycle_hook
            .webhook_secret
            .get_or_insert_with(random_secret)
            .clone();

        let shutdown = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let links = Links::default();
        for (service, listener) in [
            (ServiceName::Engine, engine),
            (ServiceName::LifecycleHook, lifecycle_hook),
            (ServiceName::PluginRegistry, plugin_registry),
            (ServiceName::ApiGateway, gateway),
        ] {
            let config = config.clone();
            let secrets = secrets.clone();
            let shutdown = shutdown.clone();
            let links = links.clone();
            tasks.spawn(async move {
                let result =
                    serve_one_with(service, &config, &secrets, listener, Some(&links), shutdown)
                        .await;
                (service, result)
            });
        }
        Ok(RunningEmber {
            gateway_addr,
            engine_addr,
            lifecycle_hook_addr,
            plugin_registry_addr,
            secrets,
            webhook_secret,
            shutdown,
            tasks,
        })
    }

    /// Runs until shutdown is requested or a service stops on its own (then
    /// the others are stopped too). Returns the first failure.
    pub async fn wait(mut self) -> Result<(), String> {
        let mut first_failure = None;
        while let Some(joined) = self.tasks.join_next().await {
            let failure = match joined {
                Ok((_, Ok(()))) if self.shutdown.is_cancelled() => None,
                Ok((service, Ok(()))) => Some(format!("{} stopped unexpectedly", service.as_str())),
                Ok((service, Err(error))) => Some(format!("{}: {error}", service.as_str())),
                Err(error) => Some(format!("a service task failed: {error}")),
            };
            if let Some(failure) = failure {
                tracing::error!(%failure, "stopping Ember");
                first_failure.get_or_insert(failure);
                self.shutdown.cancel();
            }
        }
        first_failure.map_or(Ok(()), Err)
    }

    /// Stops every service and waits for them to drain.
    pub async fn stop(self) -> Result<(), String> {
        self.shutdown.cancel();
        self.wait().await
    }
}

/// A configuration for an Ember that must not collide with anything: the
/// gateway on an ephemeral loopback port, SQLite under `data_dir`, and fresh
/// secrets. Tests and benchmarks start Ember with this.
pub fn ephemeral_config(data_dir: &Path) -> (EmberConfig, Secrets) {
    let mut config = EmberConfig {
        data_dir: data_dir.to_path_buf(),
        ..EmberConfig::default()
    };
    config.gateway.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    // Tests and benchmarks watch lifecycle deadlines pass in seconds.
    config.engine.lifecycle_hook_min_timeout_s = 1;
    let secrets = Secrets {
        signing_key: random_secret(),
        internal_credential: random_secret(),
    };
    (config, secrets)
}

/// The dev identities: an admin and a member of the same project.
pub const DEV_PROJECT: &str = "demo";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Credential {
    pub token: String,
    pub user_id: String,
    pub project_id: String,
    pub roles: Vec<String>,
}

/// What `ember dev` writes to `<data-dir>/dev-credentials.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DevCredentials {
    pub gateway_url: String,
    pub admin: Credential,
    pub member: Credential,
}

pub const DEV_CREDENTIALS_FILE: &str = "dev-credentials.json";
pub const DEV_SECRETS_FILE: &str = "dev-secrets.json";

impl DevCredentials {
    pub fn mint(
        gateway_addr: SocketAddr,
        secrets: &Secrets,
        ttl: Duration,
    ) -> Result<DevCredentials, String> {
        let signer = TokenSigner::new(&secrets.signing_key);
        let credential = |user: &str, roles: &[&str]| -> Result<Credential, String> {
            let identity = Identity::new(
                user,
                DEV_PROJECT,
                roles.iter().map(|role| (*role).to_owned()).collect(),
            );
            let token = signer
                .issue(&identity, ttl)
                .map_err(|error| error.to_string())?;
            Ok(Credential {
                token,
                user_id: identity.user_id,
                project_id: identity.project_id,
                roles: identity.roles,
            })
        };
        Ok(DevCredentials {
            gateway_url: format!("http://{gateway_addr}"),
            admin: credential("admin", &["admin", "member"])?,
            member: credential("demo", &["member"])?,
        })
    }

    pub fn read(data_dir: &Path) -> Result<DevCredentials, String> {
        let path = data_dir.join(DEV_CREDENTIALS_FILE);
        let text = std::fs::read_to_string(&path).map_err(|error| {
            format!(
                "cannot read {}: {error} (is `ember dev` running?)",
                path.display()
            )
        })?;
        serde_json::from_str(&text).map_err(|error| format!("{}: {error}", path.display()))
    }

    pub fn write(&self, data_dir: &Path) -> Result<(), String> {
        write_private(&data_dir.join(DEV_CREDENTIALS_FILE), self)
    }
}

/// The dev deployment's secrets: from configuration if set, else kept in
/// `<data-dir>/dev-secrets.json` so tokens survive a restart.
pub fn dev_secrets(config: &EmberConfig) -> Result<Secrets, String> {
    if let Ok(secrets) = config.required_secrets() {
        return Ok(secrets);
    }
    let path = config.data_dir.join(DEV_SECRETS_FILE);
    let mut secrets = match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str::<Secrets>(&text)
            .map_err(|error| format!("{}: {error}", path.display()))?,
        Err(_) => Secrets {
            signing_key: random_secret(),
            internal_credential: random_secret(),
        },
    };
    if let Some(key) = &config.auth.signing_key {
        secrets.signing_key = key.clone();
    }
    if let Some(credential) = &config.auth.internal_credential {
        secrets.internal_credential = credential.clone();
    }
    write_private(&path, &secrets)?;
    Ok(secrets)
}

/// Writes JSON readable by the owner only: it holds secrets or tokens.
fn write_private(path: &Path, value: &impl Serialize) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
    }
    let text = serde_json::to_string_pretty(value).map_err(|error| error.to_string())?;
    write_private_text(path, &text)
}

/// The dev users' passwords, kept in `<data-dir>/dev-identity.json` so
/// they survive a restart.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DevPasswords {
    pub admin: String,
    pub demo: String,
}

pub const DEV_IDENTITY_FILE: &str = "dev-identity.json";
/// The `clouds.yaml` `ember dev` writes: clouds `ember` (user demo) and
/// `ember-admin` (user admin), both in project demo, password auth.
pub const CLOUDS_FILE: &str = "clouds.yaml";

/// Makes sure the built-in identity has the dev project `demo`, the users
/// `admin` (roles admin and member) and `demo` (role member) with the
/// passwords of `dev-identity.json` (made up the first time), and writes
/// `clouds.yaml` for the gateway at `gateway_addr`. Nothing to do when the
/// gateway validates tokens against an external Keystone.
pub async fn seed_dev_identity(
    config: &EmberConfig,
    secrets: &Secrets,
    gateway_addr: SocketAddr,
) -> Result<Option<DevPasswords>, String> {
    let ember_api_gateway::AuthMode::BuiltIn { database_url } = config.gateway(secrets).auth else {
        return Ok(None);
    };
    let path = config.data_dir.join(DEV_IDENTITY_FILE);
    let kept = std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str::<DevPasswords>(&text).ok());
    let passwords = kept.clone().unwrap_or_else(|| DevPasswords {
        admin: random_secret()[..20].to_owned(),
        demo: random_secret()[..20].to_owned(),
    });
    let stop = CancellationToken::new();
    let directory = ember_api_gateway::identity::Directory::open(&database_url, stop.clone())
        .await
        .map_err(|error| format!("identity store: {error}"))?;
    let seeded = async {
        if directory.find_project(DEV_PROJECT).await.is_err() {
            directory
                .create_project(DEV_PROJECT, "Ember's dev project", DEV_PROJECT)
                .await?;
        }
        for (user, password, roles) in [
            ("admin", &passwords.admin, &["admin", "member"][..]),
            ("demo", &passwords.demo, &["member"][..]),
        ] {
            match directory.find_user(user).await {
                Ok(_) if kept.is_some() => {}
                Ok(_) => {
                    directory.set_password(user, password).await?;
                }
                Err(_) => {
                    directory
                        .create_user(user, password, user, DEV_PROJECT)
                        .await?;
                }
            }
            for role in roles {
                directory.add_role(user, DEV_PROJECT, role).await?;
            }
        }
        Ok::<(), ember_api_gateway::identity::IdentityError>(())
    }
    .await;
    stop.cancel();
    seeded.map_err(|error| format!("seeding the dev identities: {error}"))?;
    write_private(&path, &passwords)?;
    let clouds = clouds_yaml(&format!("http://{gateway_addr}"), &passwords);
    let clouds_path = config.data_dir.join(CLOUDS_FILE);
    write_private_text(&clouds_path, &clouds)?;
    Ok(Some(passwords))
}

/// A `clouds.yaml` for the gateway at `url`.
pub fn clouds_yaml(url: &str, passwords: &DevPasswords) -> String {
    let cloud = |name: &str, user: &str, password: &str| {
        format!(
            "  {name}:\n    auth:\n      auth_url: {url}/identity\n      username: {user}\n      password: \"{password}\"\n      project_name: {DEV_PROJECT}\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n    identity_api_version: 3\n    interface: public\n"
        )
    };
    format!(
        "# Written by `ember dev`: OS_CLIENT_CONFIG_FILE=<this file> openstack --os-cloud ember stack list\nclouds:\n{}{}",
        cloud("ember", "demo", &passwords.demo),
        cloud("ember-admin", "admin", &passwords.admin),
    )
}

fn write_private_text(path: &Path, text: &str) -> Result<(), String> {
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, text)
        .map_err(|error| format!("cannot write {}: {error}", temporary.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))
            .map_err(|error| format!("cannot restrict {}: {error}", temporary.display()))?;
    }
    std::fs::rename(&temporary, path)
        .map_err(|error| format!("cannot write {}: {error}", path.display()))
}
