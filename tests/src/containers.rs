//! A real container engine for the docker compute driver's tests: the one
//! `scripts/containers.sh start` runs (Podman's Docker-compatible API in a
//! network namespace of its own), found through `EMBER_TEST_DOCKER_HOST`,
//! with the locally built test images `EMBER_TEST_IMAGE` and
//! `EMBER_TEST_IMAGE_2` (FROM scratch + busybox).
//!
//! Without an engine the tests skip, saying so loudly on stderr — unless
//! `EMBER_TEST_REQUIRE_CONTAINERS=1` (CI), where a missing engine fails them.
//! Each test names its containers with a prefix of its own and removes
//! whatever is left under it at the end.

use std::collections::HashMap;
use std::time::Duration;

use bollard::Docker;
use bollard::models::{ContainerInspectResponse, ContainerSummary};
use bollard::query_parameters::{
    KillContainerOptions, ListContainersOptions, RemoveContainerOptions,
};

/// The label every Ember container carries.
pub const INSTANCE_ID_LABEL: &str = "ember.instance_id";
/// The network the tests' containers join (created by the driver).
pub const TEST_NETWORK: &str = "ember-test";

pub struct ContainerEngine {
    pub docker_host: String,
    /// `localhost/ember-test/busybox:1`: `sleep 86400` by default.
    pub image: String,
    /// The same image under another name (an update "changes" the image).
    pub image_2: String,
    pub docker: Docker,
}

fn skip_or_fail(test: &str, reason: &str) -> Option<ContainerEngine> {
    if std::env::var("EMBER_TEST_REQUIRE_CONTAINERS").is_ok_and(|value| value == "1") {
        panic!(
            "{test}: a container engine is required (EMBER_TEST_REQUIRE_CONTAINERS=1) but {reason}"
        );
    }
    eprintln!();
    eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
    eprintln!("!!! SKIPPED {test}: no container engine: {reason}");
    eprintln!(
        "!!! run `scripts/containers.sh start` and export what it prints (./scripts/test does)"
    );
    eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
    None
}

impl ContainerEngine {
    /// The engine of `EMBER_TEST_DOCKER_HOST`, answering; `None` (after
    /// saying so) when there is none.
    pub async fn from_env(test: &str) -> Option<ContainerEngine> {
        let Ok(docker_host) = std::env::var("EMBER_TEST_DOCKER_HOST") else {
            return skip_or_fail(test, "EMBER_TEST_DOCKER_HOST is not set");
        };
        let docker =
            match Docker::connect_with_unix(&docker_host, 120, bollard::API_DEFAULT_VERSION) {
                Ok(docker) => docker,
                Err(error) => return skip_or_fail(test, &format!("{docker_host}: {error}")),
            };
        let docker = match docker.negotiate_version().await {
            Ok(docker) => docker,
            Err(error) => {
                return skip_or_fail(test, &format!("{docker_host} does not answer: {error}"));
            }
        };
        let image = std::env::var("EMBER_TEST_IMAGE")
            .unwrap_or_else(|_| "localhost/ember-test/busybox:1".to_owned());
        let image_2 = std::env::var("EMBER_TEST_IMAGE_2")
            .unwrap_or_else(|_| "localhost/ember-test/busybox:2".to_owned());
        if docker.inspect_image(&image).await.is_err() {
            return skip_or_fail(test, &format!("the test image {image} is not built"));
        }
        Some(ContainerEngine {
            docker_host,
            image,
            image_2,
            docker,
        })
    }

    /// A container name prefix of one's own: `ember-t1a2b3c4-`.
    pub fn unique_prefix() -> String {
        let id = uuid::Uuid::new_v4().simple().to_string();
        format!("ember-t{}-", &id[..8])
    }

    /// Makes `config` run instances as containers on this engine, named
    /// with `prefix`, with the flavors the tests use: `small` (1 vCPU,
    /// 64 MiB) and `half` (half a CPU, 32 MiB).
    pub fn configure(&self, config: &mut ember::config::EmberConfig, prefix: &str) {
        let compute = &mut config.engine.compute;
        compute.driver = "docker".to_owned();
        compute.docker_host = self.docker_host.clone();
        compute.network = TEST_NETWORK.to_owned();
        compute.name_prefix = prefix.to_owned();
        compute.stop_grace_secs = 3;
        compute.resync_ms = 1000;
        for (name, vcpus, memory_mb) in [("small", 1.0, 64), ("half", 0.5, 32)] {
            compute.flavors.insert(
                name.to_owned(),
                ember_engine::config::FlavorSection { vcpus, memory_mb },
            );
        }
    }

    /// The containers whose name starts with `prefix`.
    pub async fn containers(&self, prefix: &str) -> Vec<ContainerSummary> {
        let options = ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([(
                "name".to_owned(),
                vec![prefix.to_owned()],
            )])),
            ..ListContainersOptions::default()
        };
        self.list(options)
            .await
            .into_iter()
            .filter(|container| {
                container
                    .names
                    .iter()
                    .flatten()
                    .any(|name| name.trim_start_matches('/').starts_with(prefix))
            })
            .collect()
    }

    /// Lists containers, asking again while Podman names a passing state
    /// the Docker API does not know ("stopped" before a clean-up).
    async fn list(&self, options: ListContainersOptions) -> Vec<ContainerSummary> {
        for _ in 0..50 {
            match self.docker.list_containers(Some(options.clone())).await {
                Ok(containers) => return containers,
                Err(bollard::errors::Error::JsonDataError { .. }) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => panic!("list containers: {error}"),
            }
        }
        panic!("list containers: the engine kept answering states no client can decode");
    }

    /// The container of `instance_uuid`, if there is one.
    pub async fn container_of(&self, instance_uuid: &str) -> Option<ContainerInspectResponse> {
        let options = ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([(
                "label".to_owned(),
                vec![format!("{INSTANCE_ID_LABEL}={instance_uuid}")],
            )])),
            ..ListContainersOptions::default()
        };
        let found = self.list(options).await;
        let id = found.into_iter().find_map(|container| {
            let labels = container.labels.as_ref()?;
            (labels.get(INSTANCE_ID_LABEL).map(String::as_str) == Some(instance_uuid))
                .then_some(container.id)
                .flatten()
        })?;
        for _ in 0..50 {
            match self.docker.inspect_container(&id, None).await {
                Ok(container) => return Some(container),
                Err(bollard::errors::Error::JsonDataError { .. }) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(_) => return None,
            }
        }
        None
    }

    /// Whether the container of `instance_uuid` runs.
    pub async fn running(&self, instance_uuid: &str) -> bool {
        self.container_of(instance_uuid)
            .await
            .and_then(|container| container.state)
            .and_then(|state| state.running)
            .unwrap_or(false)
    }

    /// Runs the podman CLI on this engine's state when the environment has
    /// it (scripts/containers.sh exports CONTAINERS_CONF); `false` when it
    /// cannot (then the tests use the API).
    async fn podman(&self, args: &[&str]) -> bool {
        if std::env::var_os("CONTAINERS_CONF").is_none() {
            return false;
        }
        tokio::process::Command::new("podman")
            .args(args)
            .output()
            .await
            .is_ok_and(|output| output.status.success())
    }

    /// `podman kill` behind Ember's back (SIGKILL: exit code 137).
    pub async fn kill_behind_the_back(&self, container: &str) {
        if !self.podman(&["kill", container]).await {
            self.docker
                .kill_container(container, None::<KillContainerOptions>)
                .await
                .expect("kill through the API");
        }
    }

    /// `podman rm -f` behind Ember's back.
    pub async fn remove_behind_the_back(&self, container: &str) {
        if !self.podman(&["rm", "-f", container]).await {
            self.docker
                .remove_container(
                    container,
                    Some(RemoveContainerOptions {
                        force: true,
                        ..RemoveContainerOptions::default()
                    }),
                )
                .await
                .expect("remove through the API");
        }
    }

    /// Removes every container under `prefix` (what a failed test left).
    pub async fn clean_up(&self, prefix: &str) {
        for container in self.containers(prefix).await {
            if let Some(id) = container.id {
                let _ = self
                    .docker
                    .remove_container(
                        &id,
                        Some(RemoveContainerOptions {
                            force: true,
                            ..RemoveContainerOptions::default()
                        }),
                    )
                    .await;
            }
        }
    }
}

/// How long a real engine may take for one instance operation here (the
/// machine is small and shared).
pub const ENGINE_DEADLINE: Duration = Duration::from_secs(60);
