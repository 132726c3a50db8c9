//! The docker compute driver: each instance is a container, made and
//! watched through the Docker Engine API with the bollard crate — the same
//! calls work against Docker and against Podman's compatible API service.
//!
//! | instance | container |
//! |---|---|
//! | build | create (`<name_prefix><uuid>`, see [`spec`]) + start |
//! | power off | stop: SIGTERM, `stop_grace`, then SIGKILL |
//! | power on | start |
//! | reboot | restart (the same grace) |
//! | delete | stop (the same grace), then remove; gone already is success |
//!
//! Idempotent: a build that runs again (resumed after a restart, or by an
//! engine that took over) looks for the container already made for the
//! instance by its `ember.instance_id` label and only starts it; a first
//! build creates at once, and if the name is taken by an earlier try it
//! finds that one by the label too. Every other call finds the container by its name, else by the
//! label, so containers made under another `name_prefix` are still found.
//!
//! The client connects lazily: an engine that is unreachable at start-up or
//! later fails each call with a message naming the socket (the instance
//! goes to ERROR), and the next call tries again. Images are never pulled
//! unless `pull = "missing"`; a missing image is a build failure naming it.

pub mod config;
mod engine;
pub mod objects;
mod prepare;
pub mod remount;
pub mod spec;
mod state;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use bollard::Docker;
use bollard::models::{ContainerInspectResponse, ContainerSummary};
use bollard::query_parameters::{
    CreateContainerOptions, EventsOptions, ListContainersOptions, RemoveContainerOptions,
    RestartContainerOptions, StopContainerOptions,
};
use futures::StreamExt;
use futures::stream::BoxStream;
use tracing::{info, warn};
use uuid::Uuid;

pub use config::{DEFAULT_DOCKER_HOST, DockerComputeConfig, PullPolicy};
pub use engine::DockerEngine;
pub use spec::{INSTANCE_ID_LABEL, PROJECT_ID_LABEL, container_name};

use super::flavors::Flavor;
use super::{
    BuildAttempt, ComputeDriver, ComputeError, MachineDetails, MachinePower, MachineState,
};
use crate::domain::instance::Instance;
use crate::domain::instance::placement::Placement;

pub struct DockerDriver {
    /// The connection and configuration, shared with the docker backend's
    /// networks, ports and volumes (`crate::resources::docker_cloud`).
    engine: Arc<DockerEngine>,
}

impl std::ops::Deref for DockerDriver {
    type Target = DockerEngine;

    fn deref(&self) -> &DockerEngine {
        &self.engine
    }
}

/// A container operation besides create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operation {
    Start,
    Stop,
    Restart,
    Remove,
}

impl Operation {
    fn verb(self) -> &'static str {
        match self {
            Operation::Start => "start",
            Operation::Stop => "stop",
            Operation::Restart => "restart",
            Operation::Remove => "remove",
        }
    }
}

impl DockerDriver {
    pub fn new(config: DockerComputeConfig) -> Result<DockerDriver, String> {
        Ok(DockerDriver {
            engine: Arc::new(DockerEngine::new(config)?),
        })
    }
}

impl DockerEngine {
    /// Lists containers. Podman names some passing states in ways the
    /// Docker API does not ("stopped" between a container's exit and its
    /// clean-up), which no Docker client can decode: such an answer is
    /// asked again a moment later.
    async fn list(
        &self,
        docker: &Docker,
        options: ListContainersOptions,
    ) -> Result<Vec<ContainerSummary>, bollard::errors::Error> {
        let mut attempt = 0;
        loop {
            match docker.list_containers(Some(options.clone())).await {
                Err(error) if undecodable(&error) && attempt < TRANSIENT_ATTEMPTS => {
                    attempt += 1;
                    tokio::time::sleep(TRANSIENT_PAUSE).await;
                }
                result => return result,
            }
        }
    }

    /// Inspects a container, asking again while its state is a passing one
    /// the Docker API cannot name (see [`DockerDriver::list`]).
    async fn inspect_container(
        &self,
        docker: &Docker,
        container: &str,
    ) -> Result<ContainerInspectResponse, bollard::errors::Error> {
        let mut attempt = 0;
        loop {
            match docker.inspect_container(container, None).await {
                Err(error) if undecodable(&error) && attempt < TRANSIENT_ATTEMPTS => {
                    attempt += 1;
                    tokio::time::sleep(TRANSIENT_PAUSE).await;
                }
                result => return result,
            }
        }
    }

    /// The id of the container labelled as `uuid`'s, if any.
    async fn find_by_label(
        &self,
        docker: &Docker,
        uuid: Uuid,
    ) -> Result<Option<String>, ComputeError> {
        let options = ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([(
                "label".to_owned(),
                vec![format!("{INSTANCE_ID_LABEL}={uuid}")],
            )])),
            ..ListContainersOptions::default()
        };
        let containers = self
            .list(docker, options)
            .await
            .map_err(|error| self.failure("cannot list containers", &error))?;
        // Podman may ignore a label filter it cannot parse: check the label.
        Ok(containers.into_iter().find_map(|summary| {
            let labelled = summary
                .labels
                .as_ref()
                .and_then(|labels| labels.get(INSTANCE_ID_LABEL))
                .is_some_and(|label| *label == uuid.to_string());
            if labelled { summary.id } else { None }
        }))
    }

    async fn run(
        &self,
        docker: &Docker,
        container: &str,
        operation: Operation,
    ) -> Result<(), bollard::errors::Error> {
        let grace = i32::try_from(self.config.stop_grace.as_secs()).unwrap_or(i32::MAX);
        match operation {
            Operation::Start => docker.start_container(container, None).await,
            Operation::Stop => {
                let options = StopContainerOptions {
                    t: Some(grace),
                    ..StopContainerOptions::default()
                };
                docker.stop_container(container, Some(options)).await
            }
            Operation::Restart => {
                let options = RestartContainerOptions {
                    t: Some(grace),
                    ..RestartContainerOptions::default()
                };
                docker.restart_container(container, Some(options)).await
            }
            Operation::Remove => {
                let options = RemoveContainerOptions {
                    force: true,
                    v: true,
                    ..RemoveContainerOptions::default()
                };
                docker.remove_container(container, Some(options)).await
            }
        }
    }

    /// Runs `operation` on the instance's container, found by name or by
    /// label. `Ok(false)` when the instance has no container.
    async fn on_container(
        &self,
        instance: &Instance,
        operation: Operation,
    ) -> Result<bool, ComputeError> {
        let docker = self.client().await?;
        let name = container_name(&self.config, instance);
        let what = || format!("cannot {} container {name}", operation.verb());
        match self.run(docker, &name, operation).await {
            Ok(()) => return Ok(true),
            Err(error) if state::status_code(&error) == Some(404) => {}
            Err(error) => return Err(self.failure(&what(), &error)),
        }
        let Some(id) = self.find_by_label(docker, instance.uuid).await? else {
            return Ok(false);
        };
        match self.run(docker, &id, operation).await {
            Ok(()) => Ok(true),
            Err(error) if state::status_code(&error) == Some(404) => Ok(false),
            Err(error) => Err(self.failure(&what(), &error)),
        }
    }

    /// Creates the instance's container, or finds the one an earlier try
    /// made; returns its id.
    async fn create(
        &self,
        docker: &Docker,
        instance: &Instance,
        flavor: &Flavor,
        attempt: BuildAttempt,
        endpoints: &[spec::Endpoint],
    ) -> Result<String, ComputeError> {
        // A build that runs again (after a restart, or taken over by
        // another engine) finds what an earlier try made, whatever it was
        // named then. A first build skips the look-up: its create fails on
        // the name if another try made it meanwhile, and finds it then.
        if attempt == BuildAttempt::Resumed
            && let Some(id) = self.find_by_label(docker, instance.uuid).await?
        {
            info!(instance_uuid = %instance.uuid, container = %id, "found the container an earlier build made");
            return Ok(id);
        }
        let name = container_name(&self.config, instance);
        let mut tried_network = false;
        let mut tried_image = false;
        loop {
            let options = CreateContainerOptions {
                name: Some(name.clone()),
                ..CreateContainerOptions::default()
            };
            let body = spec::with_endpoints(
                spec::container_body(&self.config, instance, flavor),
                endpoints,
            );
            let error = match docker.create_container(Some(options), body).await {
                Ok(created) => return Ok(created.id),
                Err(error) => error,
            };
            // Made by an earlier try of this build (Docker answers 409,
            // Podman 500 "name already in use"): use it.
            if let Some(id) = self.find_by_label(docker, instance.uuid).await? {
                info!(instance_uuid = %instance.uuid, container = %id, "found the container an earlier build made");
                return Ok(id);
            }
            let message = error.to_string();
            if state::status_code(&error) == Some(404)
                && !tried_image
                && !message.contains("network")
            {
                tried_image = true;
                self.missing_image(docker, instance, &error).await?;
                continue;
            }
            if message.contains("network")
                && !tried_network
                && endpoints.is_empty()
                && !self.config.network.is_empty()
            {
                // Removed behind our back since we made sure of it.
                tried_network = true;
                self.network_ready.store(false, Ordering::Release);
                self.ensure_network(docker).await?;
                continue;
            }
            return Err(self.failure(&format!("cannot create container {name}"), &error));
        }
    }
}

/// What a container cannot honour of a placement, named: it runs on the
/// engine's container network or on the project's container networks its
/// `networks` name (by network, subnet or port, with a fixed IPv4 address),
/// with no key pairs, volumes to boot from, zones or device tags.
/// Scheduler hints are hints (Nova, too, ignores those it does not know),
/// and the `default` security group is what a container has.
fn unplaceable(placement: &Placement) -> Result<(), String> {
    let mut refused: Vec<String> = placement
        .given()
        .into_iter()
        .filter(|given| match *given {
            "scheduler_hints" | "networks" => false,
            "security_groups" => placement
                .security_groups
                .iter()
                .any(|group| group != "default"),
            _ => true,
        })
        .map(str::to_owned)
        .collect();
    for (index, network) in placement.networks.iter().enumerate() {
        if network.tag.is_some() {
            refused.push(format!("networks[{index}].tag"));
        }
        if let Some(fixed_ip) = &network.fixed_ip
            && fixed_ip.parse::<std::net::Ipv4Addr>().is_err()
        {
            refused.push(format!(
                "networks[{index}].fixed_ip {fixed_ip:?} (not an IPv4 address)"
            ));
        }
    }
    if refused.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the docker backend cannot honour {}: a container is plugged into container networks (with IPv4 addresses), without key pairs, security groups, boot volumes, zones or device tags (the simulated and openstack backends take them)",
        refused.join(", ")
    ))
}

#[async_trait]
impl ComputeDriver for DockerDriver {
    fn name(&self) -> &'static str {
        "docker"
    }

    fn machine_noun(&self) -> &'static str {
        "container"
    }

    fn check_placement(&self, placement: &Placement) -> Result<(), String> {
        unplaceable(placement)
    }

    async fn build(
        &self,
        instance: &Instance,
        flavor: &Flavor,
        attempt: BuildAttempt,
    ) -> Result<(), ComputeError> {
        let docker = self.client().await?;
        let endpoints = self.endpoints_of(instance).await?;
        if endpoints.is_empty() {
            self.ensure_network(docker).await?;
        }
        let id = self
            .create(docker, instance, flavor, attempt, &endpoints)
            .await?;
        docker.start_container(&id, None).await.map_err(|error| {
            self.failure(
                &format!(
                    "cannot start container {}",
                    container_name(&self.config, instance)
                ),
                &error,
            )
        })
    }

    async fn power_on(&self, instance: &Instance) -> Result<(), ComputeError> {
        match self.on_container(instance, Operation::Start).await? {
            true => Ok(()),
            false => Err(gone(&self.config, instance)),
        }
    }

    async fn power_off(&self, instance: &Instance) -> Result<(), ComputeError> {
        match self.on_container(instance, Operation::Stop).await? {
            true => Ok(()),
            false => Err(gone(&self.config, instance)),
        }
    }

    async fn reboot(&self, instance: &Instance) -> Result<(), ComputeError> {
        match self.on_container(instance, Operation::Restart).await? {
            true => Ok(()),
            false => Err(gone(&self.config, instance)),
        }
    }

    async fn delete(&self, instance: &Instance) -> Result<(), ComputeError> {
        // The workload gets its SIGTERM and grace first, as on power off.
        if !self.on_container(instance, Operation::Stop).await? {
            return Ok(());
        }
        self.on_container(instance, Operation::Remove)
            .await
            .map(|_| ())
    }

    fn docker_engine(&self) -> Option<Arc<DockerEngine>> {
        Some(self.engine.clone())
    }

    /// The container's addresses, as Nova shows a server's (by network
    /// name), so a server's `first_address`, `networks` and `addresses`
    /// are the container's own. The machine's id is the instance's uuid.
    async fn details(&self, instance: &Instance) -> Result<Option<MachineDetails>, ComputeError> {
        let docker = self.client().await?;
        let name = container_name(&self.config, instance);
        let inspected = match self.inspect_container(docker, &name).await {
            Ok(inspected) => inspected,
            Err(error) if state::status_code(&error) == Some(404) => return Ok(None),
            Err(error) => {
                return Err(self.failure(&format!("cannot inspect container {name}"), &error));
            }
        };
        let addresses = self.addresses_of(&inspected).await?;
        let volumes: Vec<serde_json::Value> = remount::mounts_of(&inspected)
            .iter()
            .map(|mount| serde_json::json!({"id": mount.volume, "mount_path": mount.target}))
            .collect();
        let raw = serde_json::json!({
            "id": instance.uuid.to_string(),
            "name": instance.name,
            "status": instance.status.as_str(),
            "addresses": addresses,
            "metadata": instance.metadata,
            "flavor": {"original_name": instance.flavor},
            "image": {"id": instance.image},
            "container": name,
            "os-extended-volumes:volumes_attached": volumes,
        });
        Ok(Some(MachineDetails {
            machine_id: instance.uuid.to_string(),
            addresses,
            access_ipv4: String::new(),
            access_ipv6: String::new(),
            instance_name: Some(name),
            raw,
        }))
    }

    async fn inspect(&self, instance: &Instance) -> Result<MachineState, ComputeError> {
        // Stopped or missing for a moment on purpose (see `remount`).
        if self.is_recreating(instance.uuid) {
            return Ok(MachineState::Running);
        }
        let docker = self.client().await?;
        let name = container_name(&self.config, instance);
        let inspected = match self.inspect_container(docker, &name).await {
            Ok(inspected) => inspected,
            Err(error) if state::status_code(&error) == Some(404) => {
                let Some(id) = self.find_by_label(docker, instance.uuid).await? else {
                    return Ok(MachineState::Missing);
                };
                match self.inspect_container(docker, &id).await {
                    Ok(inspected) => inspected,
                    Err(error) if state::status_code(&error) == Some(404) => {
                        return Ok(MachineState::Missing);
                    }
                    Err(error) => {
                        return Err(self.failure(&format!("cannot inspect container {id}"), &error));
                    }
                }
            }
            Err(error) => {
                return Err(self.failure(&format!("cannot inspect container {name}"), &error));
            }
        };
        Ok(state::machine_state(inspected.state.as_ref()))
    }

    async fn sync(
        &self,
        instances: &[Instance],
    ) -> Result<Vec<(Uuid, MachinePower)>, ComputeError> {
        let docker = self.client().await?;
        let options = ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([(
                "label".to_owned(),
                vec![INSTANCE_ID_LABEL.to_owned()],
            )])),
            ..ListContainersOptions::default()
        };
        let containers = self
            .list(docker, options)
            .await
            .map_err(|error| self.failure("cannot list containers", &error))?;
        let mut found: HashMap<Uuid, MachinePower> = HashMap::new();
        for (uuid, power) in containers.iter().filter_map(state::listed) {
            let entry = found.entry(uuid).or_insert(power);
            if power == MachinePower::Running {
                *entry = power;
            }
        }
        Ok(instances
            .iter()
            .map(|instance| {
                let power = if self.is_recreating(instance.uuid) {
                    MachinePower::Running
                } else {
                    found
                        .get(&instance.uuid)
                        .copied()
                        .unwrap_or(MachinePower::Missing)
                };
                (instance.uuid, power)
            })
            .collect())
    }

    async fn observe(
        &self,
    ) -> Result<BoxStream<'static, Result<Uuid, ComputeError>>, ComputeError> {
        let docker = self.client().await?.clone();
        let host = self.config.docker_host.clone();
        let options = EventsOptions {
            filters: Some(HashMap::from([(
                "type".to_owned(),
                vec!["container".to_owned()],
            )])),
            ..EventsOptions::default()
        };
        let events = docker.events(Some(options));
        Ok(Box::pin(events.filter_map(move |event| {
            let host = host.clone();
            async move {
                match event {
                    Ok(event) => state::changed_instance(&event).map(Ok),
                    Err(error) => {
                        warn!(%error, "the container engine's event stream failed");
                        Some(Err(ComputeError(format!(
                            "event stream: {}",
                            state::describe(&error, &host)
                        ))))
                    }
                }
            }
        })))
    }
}

/// How often, and how far apart, an answer naming a passing state the
/// Docker API does not know is asked again (2 s in all).
const TRANSIENT_ATTEMPTS: u32 = 20;
const TRANSIENT_PAUSE: Duration = Duration::from_millis(100);

/// An answer the client cannot decode (an unknown state name).
fn undecodable(error: &bollard::errors::Error) -> bool {
    matches!(error, bollard::errors::Error::JsonDataError { .. })
}

fn gone(config: &DockerComputeConfig, instance: &Instance) -> ComputeError {
    ComputeError(format!(
        "container {} of {} is gone (removed outside Ember?)",
        container_name(config, instance),
        instance.label()
    ))
}

#[cfg(test)]
mod placement_tests {
    use super::*;
    use crate::domain::instance::placement::NetworkRequest;

    #[test]
    fn a_container_refuses_what_it_cannot_honour_by_name() {
        assert_eq!(unplaceable(&Placement::default()), Ok(()));
        let default_group = Placement {
            security_groups: vec!["default".to_owned()],
            scheduler_hints: serde_json::json!({"group": "g"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            ..Placement::default()
        };
        assert_eq!(unplaceable(&default_group), Ok(()));
        let on_networks = Placement {
            networks: vec![
                NetworkRequest {
                    port: Some("p1".to_owned()),
                    ..NetworkRequest::default()
                },
                NetworkRequest {
                    network: Some("private".to_owned()),
                    fixed_ip: Some("10.0.0.5".to_owned()),
                    ..NetworkRequest::default()
                },
            ],
            ..Placement::default()
        };
        assert_eq!(
            unplaceable(&on_networks),
            Ok(()),
            "networks are container networks"
        );
        let refused = unplaceable(&Placement {
            networks: vec![
                NetworkRequest {
                    network: Some("private".to_owned()),
                    ..NetworkRequest::default()
                },
                NetworkRequest {
                    network: Some("private".to_owned()),
                    fixed_ip: Some("fd00::5".to_owned()),
                    tag: Some("nic1".to_owned()),
                    ..NetworkRequest::default()
                },
            ],
            security_groups: vec!["web".to_owned()],
            key_name: Some("ops".to_owned()),
            ..Placement::default()
        })
        .expect_err("refused");
        assert!(
            refused.starts_with(
                "the docker backend cannot honour security_groups, key_name, networks[1].tag, networks[1].fixed_ip \"fd00::5\" (not an IPv4 address):"
            ),
            "{refused}"
        );
    }
}
