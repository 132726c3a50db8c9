//! The connection to the container engine and what the docker backend
//! shares over it: the compute driver (containers) and the docker twins of
//! the network and volume types (`crate::resources::docker_cloud`) act
//! through one [`DockerEngine`], so they agree on names, labels and the
//! containers being recreated.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use bollard::Docker;
use tokio::sync::OnceCell;
use tracing::info;
use uuid::Uuid;

use super::{DockerComputeConfig, state};
use crate::compute::ComputeError;

pub struct DockerEngine {
    pub(super) config: DockerComputeConfig,
    /// Made at the first call that succeeds in connecting.
    client: OnceCell<Docker>,
    /// Set once the network is known to exist.
    pub(super) network_ready: AtomicBool,
    /// Instances whose container this engine is recreating (to mount or
    /// unmount a volume): their container is stopped or missing on
    /// purpose for a moment, which the watcher must not take for a death.
    recreating: Mutex<HashSet<Uuid>>,
}

/// Marks an instance as being recreated until dropped.
pub(super) struct Recreating<'a> {
    engine: &'a DockerEngine,
    uuid: Uuid,
}

impl Drop for Recreating<'_> {
    fn drop(&mut self) {
        if let Ok(mut recreating) = self.engine.recreating.lock() {
            recreating.remove(&self.uuid);
        }
    }
}

impl DockerEngine {
    pub fn new(config: DockerComputeConfig) -> Result<DockerEngine, String> {
        config.validate()?;
        Ok(DockerEngine {
            config,
            client: OnceCell::new(),
            network_ready: AtomicBool::new(false),
            recreating: Mutex::new(HashSet::new()),
        })
    }

    pub fn config(&self) -> &DockerComputeConfig {
        &self.config
    }

    pub(super) fn failure(&self, what: &str, error: &bollard::errors::Error) -> ComputeError {
        ComputeError(format!(
            "{what}: {}",
            state::describe(error, &self.config.docker_host)
        ))
    }

    /// The connected client (connecting, and agreeing on an API version
    /// both sides speak, at the first call).
    pub(super) async fn client(&self) -> Result<&Docker, ComputeError> {
        self.client
            .get_or_try_init(|| async {
                let host = &self.config.docker_host;
                let timeout = self.config.api_timeout.as_secs().max(1);
                let connected = if host.starts_with("unix://") {
                    Docker::connect_with_unix(host, timeout, bollard::API_DEFAULT_VERSION)
                } else {
                    Docker::connect_with_http(host, timeout, bollard::API_DEFAULT_VERSION)
                };
                let docker = connected.map_err(|error| {
                    self.failure("cannot connect to the container engine", &error)
                })?;
                let docker = docker.negotiate_version().await.map_err(|error| {
                    self.failure("cannot connect to the container engine", &error)
                })?;
                info!(docker_host = %host, "connected to the container engine");
                Ok(docker)
            })
            .await
    }

    /// Marks `uuid`'s container as being recreated, for as long as the
    /// guard lives.
    pub(super) fn recreating(&self, uuid: Uuid) -> Recreating<'_> {
        if let Ok(mut recreating) = self.recreating.lock() {
            recreating.insert(uuid);
        }
        Recreating { engine: self, uuid }
    }

    /// Whether `uuid`'s container is being recreated by this engine.
    pub(super) fn is_recreating(&self, uuid: Uuid) -> bool {
        self.recreating
            .lock()
            .map(|recreating| recreating.contains(&uuid))
            .unwrap_or(false)
    }
}
