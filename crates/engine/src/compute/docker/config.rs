//! The docker driver's configuration (`[engine.compute]` with `driver =
//! "docker"`), resolved, and its checks: each problem names its key.

use std::time::Duration;

/// Where the engine is when neither configuration nor `DOCKER_HOST` says.
pub const DEFAULT_DOCKER_HOST: &str = "unix:///var/run/docker.sock";

/// Whether images are pulled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPolicy {
    /// Never: a missing image fails the build, naming it.
    Never,
    /// When the engine does not have the image.
    Missing,
}

impl PullPolicy {
    pub fn parse(text: &str) -> Option<PullPolicy> {
        match text {
            "never" => Some(PullPolicy::Never),
            "missing" => Some(PullPolicy::Missing),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerComputeConfig {
    /// `unix:///path/to.sock`, `tcp://host:port` or `http://host:port`.
    pub docker_host: String,
    /// The network containers join, created if missing; empty = the
    /// engine's default network.
    pub network: String,
    /// Containers are named `<name_prefix><instance uuid>`.
    pub name_prefix: String,
    pub pull: PullPolicy,
    /// How long a stop waits after SIGTERM before SIGKILL.
    pub stop_grace: Duration,
    /// Run an init process as PID 1 (forwards signals, reaps zombies).
    pub init: bool,
    /// How long one engine call may take to answer.
    pub api_timeout: Duration,
}

impl DockerComputeConfig {
    /// `DOCKER_HOST` if set, else the default socket.
    pub fn default_host() -> String {
        std::env::var("DOCKER_HOST")
            .ok()
            .filter(|host| !host.is_empty())
            .unwrap_or_else(|| DEFAULT_DOCKER_HOST.to_owned())
    }

    /// Checks the configuration, naming the key at fault.
    pub fn validate(&self) -> Result<(), String> {
        let host = &self.docker_host;
        if !(host.starts_with("unix://")
            || host.starts_with("tcp://")
            || host.starts_with("http://"))
        {
            return Err(format!(
                "engine.compute.docker_host: {host:?} must be unix:///path, tcp://host:port or http://host:port"
            ));
        }
        let name_chars = |text: &str| {
            text.chars()
                .all(|character| character.is_ascii_alphanumeric() || "_.-".contains(character))
        };
        if !name_chars(&self.name_prefix) || self.name_prefix.len() > 64 {
            return Err(format!(
                "engine.compute.name_prefix: {:?} may hold only letters, digits, '_', '.' and '-' (at most 64)",
                self.name_prefix
            ));
        }
        if !name_chars(&self.network) || self.network.len() > 64 {
            return Err(format!(
                "engine.compute.network: {:?} may hold only letters, digits, '_', '.' and '-' (at most 64)",
                self.network
            ));
        }
        if self.api_timeout.is_zero() {
            return Err("engine.compute.api_timeout_secs: must be more than 0".to_owned());
        }
        Ok(())
    }

    #[cfg(test)]
    pub(crate) fn for_tests(name_prefix: &str) -> DockerComputeConfig {
        DockerComputeConfig {
            docker_host: DEFAULT_DOCKER_HOST.to_owned(),
            network: "ember-test".to_owned(),
            name_prefix: name_prefix.to_owned(),
            pull: PullPolicy::Never,
            stop_grace: Duration::from_secs(10),
            init: true,
            api_timeout: Duration::from_secs(120),
        }
    }
}
