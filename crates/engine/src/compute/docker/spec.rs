//! What container an instance is: the Docker Engine API body made from the
//! instance, its flavor and the driver's configuration. Pure, so every rule
//! of the mapping is tested without an engine:
//!
//! - `image` → the container's image; `flavor` → `NanoCpus` and `Memory`
//!   (swap capped at the same, so the memory limit is the limit);
//! - `metadata` → labels, plus `ember.instance_id`, `ember.project_id` and
//!   `ember.instance_name` (Ember's own win over metadata of the same key);
//! - the workload: `command` → the container's command; else user data
//!   that is a script (`#!…`) is written to `/tmp/ember-user-data` and run
//!   as the container's process; else the image's own command runs. User
//!   data is always in the environment as `EMBER_USER_DATA` (for images
//!   that read it, as cloud-init reads its metadata service), with `env`
//!   and `EMBER_INSTANCE_ID`/`EMBER_INSTANCE_NAME`;
//! - the name is `<name_prefix><instance uuid>`, the hostname the instance
//!   name made DNS-safe; the container joins the configured network and
//!   runs under an init process (signals reach the workload, so a stop's
//!   SIGTERM ends a shell or `sleep`, which as PID 1 would ignore it);
//! - the server's `networks` → the container's endpoints
//!   ([`with_endpoints`]): one per container network, each with its fixed
//!   IPv4 address and MAC address when a port or `fixed_ip` gives one; the
//!   volumes attached → named-volume mounts ([`with_mounts`]).

use std::collections::HashMap;

use bollard::models::{
    ContainerCreateBody, EndpointIpamConfig, EndpointSettings, HostConfig, Mount, MountType,
    NetworkingConfig, RestartPolicy, RestartPolicyNameEnum,
};

use super::DockerComputeConfig;
use crate::compute::flavors::Flavor;
use crate::domain::instance::Instance;

/// The label every Ember container carries: the instance it is.
pub const INSTANCE_ID_LABEL: &str = "ember.instance_id";
pub const PROJECT_ID_LABEL: &str = "ember.project_id";
pub const INSTANCE_NAME_LABEL: &str = "ember.instance_name";
/// Where a user-data script is written inside the container.
pub const USER_DATA_PATH: &str = "/tmp/ember-user-data";

const MIB: i64 = 1024 * 1024;

/// The container's name.
pub fn container_name(config: &DockerComputeConfig, instance: &Instance) -> String {
    format!("{}{}", config.name_prefix, instance.uuid)
}

/// `web-1.example` → `web-1-example`: letters, digits and dashes, at most
/// 63, not starting or ending with a dash; `None` when nothing is left.
pub fn hostname(name: &str) -> Option<String> {
    let mut host: String = name
        .chars()
        .map(|character| {
            if character.is_ascii_alphanumeric() {
                character.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    host.truncate(63);
    let host = host.trim_matches('-').to_owned();
    (!host.is_empty()).then_some(host)
}

/// The body of `POST /containers/create` for `instance`.
pub fn container_body(
    config: &DockerComputeConfig,
    instance: &Instance,
    flavor: &Flavor,
) -> ContainerCreateBody {
    let mut labels: HashMap<String, String> = instance
        .metadata
        .iter()
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    labels.insert(INSTANCE_ID_LABEL.to_owned(), instance.uuid.to_string());
    labels.insert(PROJECT_ID_LABEL.to_owned(), instance.project_id.clone());
    labels.insert(INSTANCE_NAME_LABEL.to_owned(), instance.name.clone());

    let workload = &instance.workload;
    let mut env: Vec<String> = workload
        .env
        .iter()
        .filter(|(name, _)| !name.starts_with("EMBER_"))
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    env.push(format!("EMBER_INSTANCE_ID={}", instance.uuid));
    env.push(format!("EMBER_INSTANCE_NAME={}", instance.name));
    if !workload.user_data.is_empty() {
        env.push(format!("EMBER_USER_DATA={}", workload.user_data));
    }
    let (entrypoint, cmd) = if !workload.command.is_empty() {
        (None, Some(workload.command.clone()))
    } else if workload.user_data.starts_with("#!") {
        (
            Some(vec!["/bin/sh".to_owned(), "-c".to_owned()]),
            Some(vec![format!(
                "printf '%s' \"$EMBER_USER_DATA\" > {USER_DATA_PATH} && chmod 0755 {USER_DATA_PATH} && exec {USER_DATA_PATH}"
            )]),
        )
    } else {
        (None, None)
    };

    let memory = i64::try_from(flavor.memory_mb)
        .ok()
        .and_then(|mib| mib.checked_mul(MIB))
        .filter(|bytes| *bytes > 0);
    let nano_cpus = (flavor.vcpus > 0.0).then(|| (flavor.vcpus * 1e9).round() as i64);
    ContainerCreateBody {
        image: Some(instance.image.clone()),
        hostname: hostname(&instance.name),
        labels: Some(labels),
        env: Some(env),
        entrypoint,
        cmd,
        stop_timeout: Some(i64::try_from(config.stop_grace.as_secs()).unwrap_or(i64::MAX)),
        host_config: Some(HostConfig {
            memory,
            memory_swap: memory,
            nano_cpus,
            network_mode: (!config.network.is_empty()).then(|| config.network.clone()),
            init: Some(config.init),
            restart_policy: Some(RestartPolicy {
                name: Some(RestartPolicyNameEnum::NO),
                maximum_retry_count: None,
            }),
            ..HostConfig::default()
        }),
        ..ContainerCreateBody::default()
    }
}

/// One interface of a container: the container network it is on, and the
/// address and MAC address it must have (else the engine picks).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoint {
    /// The container network's name.
    pub network: String,
    pub ipv4_address: Option<String>,
    pub mac_address: Option<String>,
}

/// A container volume mounted into a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeMount {
    /// The container volume's name.
    pub volume: String,
    /// The path inside the container.
    pub target: String,
    pub read_only: bool,
}

/// `body` on `endpoints` instead of the engine's network: the first is the
/// container's network mode, and every one is an endpoint with its
/// addresses. No endpoints: `body` as it is.
pub fn with_endpoints(
    mut body: ContainerCreateBody,
    endpoints: &[Endpoint],
) -> ContainerCreateBody {
    let Some(first) = endpoints.first() else {
        return body;
    };
    let host = body.host_config.get_or_insert_with(HostConfig::default);
    host.network_mode = Some(first.network.clone());
    let endpoints_config = endpoints
        .iter()
        .map(|endpoint| {
            let settings = EndpointSettings {
                ipam_config: endpoint
                    .ipv4_address
                    .as_ref()
                    .map(|address| EndpointIpamConfig {
                        ipv4_address: Some(address.clone()),
                        ..EndpointIpamConfig::default()
                    }),
                mac_address: endpoint.mac_address.clone(),
                ..EndpointSettings::default()
            };
            (endpoint.network.clone(), settings)
        })
        .collect();
    body.networking_config = Some(NetworkingConfig {
        endpoints_config: Some(endpoints_config),
    });
    body
}

/// `body` with `mounts` (named container volumes) mounted.
pub fn with_mounts(mut body: ContainerCreateBody, mounts: &[VolumeMount]) -> ContainerCreateBody {
    if mounts.is_empty() {
        return body;
    }
    let host = body.host_config.get_or_insert_with(HostConfig::default);
    host.mounts = Some(
        mounts
            .iter()
            .map(|mount| Mount {
                typ: Some(MountType::VOLUME),
                source: Some(mount.volume.clone()),
                target: Some(mount.target.clone()),
                read_only: Some(mount.read_only),
                ..Mount::default()
            })
            .collect(),
    );
    body
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::domain::instance::{NewInstance, Workload};

    fn instance(workload: Workload) -> Instance {
        let new = NewInstance {
            name: "Worker 1.example".into(),
            flavor: "small".into(),
            image: "localhost/worker:1".into(),
            metadata: BTreeMap::from([
                ("role".into(), "worker".into()),
                (INSTANCE_ID_LABEL.into(), "forged".into()),
            ]),
            workload,
            placement: Default::default(),
            delegation: None,
        };
        Instance::new_building("demo", "alice", new, chrono::Utc::now()).expect("valid")
    }

    fn small() -> Flavor {
        Flavor {
            vcpus: 0.5,
            memory_mb: 256,
        }
    }

    #[test]
    fn flavor_metadata_and_identity_become_limits_and_labels() {
        let config = DockerComputeConfig::for_tests("ember-");
        let instance = instance(Workload::default());
        let body = container_body(&config, &instance, &small());
        let host = body.host_config.expect("host config");
        assert_eq!(host.memory, Some(256 * MIB));
        assert_eq!(host.memory_swap, Some(256 * MIB));
        assert_eq!(host.nano_cpus, Some(500_000_000));
        assert_eq!(host.network_mode.as_deref(), Some("ember-test"));
        assert_eq!(host.init, Some(true));
        let labels = body.labels.expect("labels");
        assert_eq!(labels["role"], "worker");
        assert_eq!(labels[INSTANCE_ID_LABEL], instance.uuid.to_string());
        assert_eq!(labels[PROJECT_ID_LABEL], "demo");
        assert_eq!(body.image.as_deref(), Some("localhost/worker:1"));
        assert_eq!(body.hostname.as_deref(), Some("worker-1-example"));
        assert_eq!(body.cmd, None, "the image's own command runs");
        assert_eq!(
            container_name(&config, &instance),
            format!("ember-{}", instance.uuid)
        );
        let unlimited = container_body(&config, &instance, &Flavor::UNLIMITED)
            .host_config
            .expect("host config");
        assert_eq!((unlimited.memory, unlimited.nano_cpus), (None, None));
    }

    #[test]
    fn a_command_wins_and_a_script_runs_as_the_process() {
        let config = DockerComputeConfig::for_tests("ember-");
        let commanded = container_body(
            &config,
            &instance(Workload {
                command: vec!["/bin/sleep".into(), "60".into()],
                env: BTreeMap::from([
                    ("MODE".into(), "drain".into()),
                    ("EMBER_INSTANCE_ID".into(), "forged".into()),
                ]),
                user_data: "#!/bin/sh\necho ignored".into(),
            }),
            &small(),
        );
        assert_eq!(
            commanded.cmd,
            Some(vec!["/bin/sleep".to_owned(), "60".to_owned()])
        );
        let env = commanded.env.expect("env");
        assert!(env.contains(&"MODE=drain".to_owned()), "{env:?}");
        assert!(
            !env.contains(&"EMBER_INSTANCE_ID=forged".to_owned()),
            "{env:?}"
        );
        assert!(
            env.iter()
                .any(|item| item.starts_with("EMBER_USER_DATA=#!/bin/sh"))
        );

        let scripted = container_body(
            &config,
            &instance(Workload {
                user_data: "#!/bin/sh\nexec sleep 60\n".into(),
                ..Workload::default()
            }),
            &small(),
        );
        assert_eq!(
            scripted.entrypoint,
            Some(vec!["/bin/sh".to_owned(), "-c".to_owned()])
        );
        assert!(scripted.cmd.expect("cmd")[0].contains(USER_DATA_PATH));
        let cloud_config = container_body(
            &config,
            &instance(Workload {
                user_data: "#cloud-config\npackages: []\n".into(),
                ..Workload::default()
            }),
            &small(),
        );
        assert_eq!((cloud_config.entrypoint, cloud_config.cmd), (None, None));
    }

    #[test]
    fn endpoints_and_mounts_replace_the_engine_network_and_add_volumes() {
        let config = DockerComputeConfig::for_tests("ember-");
        let body = container_body(&config, &instance(Workload::default()), &small());
        assert_eq!(
            with_endpoints(body.clone(), &[]),
            body,
            "no endpoints: as it was"
        );
        let body = with_endpoints(
            body,
            &[
                Endpoint {
                    network: "ember-subnet-1".into(),
                    ipv4_address: Some("10.0.0.5".into()),
                    mac_address: Some("fa:16:3e:00:00:01".into()),
                },
                Endpoint {
                    network: "ember-net-2".into(),
                    ..Endpoint::default()
                },
            ],
        );
        let body = with_mounts(
            body,
            &[VolumeMount {
                volume: "ember-vol-1".into(),
                target: "/mnt/vdb".into(),
                read_only: true,
            }],
        );
        let host = body.host_config.expect("host config");
        assert_eq!(host.network_mode.as_deref(), Some("ember-subnet-1"));
        let mounts = host.mounts.expect("mounts");
        assert_eq!(mounts[0].source.as_deref(), Some("ember-vol-1"));
        assert_eq!(mounts[0].target.as_deref(), Some("/mnt/vdb"));
        assert_eq!(mounts[0].read_only, Some(true));
        let endpoints = body
            .networking_config
            .and_then(|config| config.endpoints_config)
            .expect("endpoints");
        let first = &endpoints["ember-subnet-1"];
        assert_eq!(
            first
                .ipam_config
                .as_ref()
                .and_then(|ipam| ipam.ipv4_address.as_deref()),
            Some("10.0.0.5")
        );
        assert_eq!(first.mac_address.as_deref(), Some("fa:16:3e:00:00:01"));
        assert!(endpoints["ember-net-2"].ipam_config.is_none());
    }

    #[test]
    fn hostnames_are_dns_safe() {
        assert_eq!(hostname("web_1").as_deref(), Some("web-1"));
        assert_eq!(hostname("--").as_deref(), None);
        assert_eq!(hostname(&"a".repeat(80)).map(|host| host.len()), Some(63));
    }
}
