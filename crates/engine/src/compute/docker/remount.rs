//! Mounting a volume into (or out of) an instance's container after it was
//! made. A container takes its mounts only when it is created, so the
//! container is made again: the same name, labels, workload, limits, the
//! same addresses and MAC addresses on the same networks (pinned from the
//! old one), and the mounts changed — its workload restarts, as a machine
//! does after a reboot.
//!
//! Crash-safe and idempotent: the new container is made under a temporary
//! name (`<name>.next`) while the old one is still there, then the old is
//! removed and the new renamed and started. A try that runs again finds
//! where the last one stopped: a container that has the mounts asked for
//! is done (it is started if the instance is to run); a leftover
//! `<name>.next` beside the old container is removed and made again; one
//! alone is renamed and started. While this engine recreates a container,
//! its watcher takes the instance's machine as running (see
//! [`DockerEngine::is_recreating`]).

use bollard::Docker;
use bollard::models::ContainerInspectResponse;
use bollard::query_parameters::{
    CreateContainerOptions, RemoveContainerOptions, RenameContainerOptions, StopContainerOptions,
};
use tracing::info;

use super::spec::{self, Endpoint, VolumeMount, container_name};
use super::{DockerEngine, state};
use crate::compute::ComputeError;
use crate::compute::flavors::Flavor;
use crate::domain::instance::{Instance, PowerState};

const MIB: i64 = 1024 * 1024;

/// What changes of a container's mounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountChange {
    /// Mount a volume (at its target, replacing nothing: a target in use
    /// by another volume is refused).
    Attach(VolumeMount),
    /// Unmount whatever is at this target.
    Detach { target: String },
}

/// The named-volume mounts a container has.
pub fn mounts_of(inspected: &ContainerInspectResponse) -> Vec<VolumeMount> {
    inspected
        .mounts
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter(|mount| mount.typ.as_deref() == Some("volume"))
        .filter_map(|mount| {
            Some(VolumeMount {
                volume: mount.name.clone()?,
                target: mount.destination.clone()?,
                read_only: mount.rw == Some(false),
            })
        })
        .collect()
}

/// The endpoints of a container, with the addresses it has now pinned.
fn endpoints_of(inspected: &ContainerInspectResponse) -> Vec<Endpoint> {
    let mut endpoints: Vec<Endpoint> = inspected
        .network_settings
        .as_ref()
        .and_then(|settings| settings.networks.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|(network, endpoint)| {
            let pinned = endpoint
                .ipam_config
                .and_then(|ipam| ipam.ipv4_address)
                .or(endpoint.ip_address)
                .filter(|address| !address.is_empty());
            Endpoint {
                network,
                ipv4_address: pinned,
                mac_address: endpoint.mac_address.filter(|mac| !mac.is_empty()),
            }
        })
        .collect();
    // The network the container was made on stays its first.
    let mode = inspected
        .host_config
        .as_ref()
        .and_then(|host| host.network_mode.clone());
    endpoints.sort_by_key(|endpoint| Some(&endpoint.network) != mode.as_ref());
    endpoints
}

/// The limits the container runs with, as a flavor.
fn flavor_of(inspected: &ContainerInspectResponse) -> Flavor {
    let host = inspected.host_config.as_ref();
    Flavor {
        vcpus: host
            .and_then(|host| host.nano_cpus)
            .map_or(0.0, |nano| nano as f64 / 1e9),
        memory_mb: host
            .and_then(|host| host.memory)
            .and_then(|bytes| u64::try_from(bytes / MIB).ok())
            .unwrap_or(0),
    }
}

/// The mounts after `change`, or why the change cannot be made.
fn changed(mut mounts: Vec<VolumeMount>, change: &MountChange) -> Result<Vec<VolumeMount>, String> {
    match change {
        MountChange::Attach(mount) => {
            if let Some(taken) = mounts.iter().find(|known| known.target == mount.target) {
                if taken.volume == mount.volume {
                    mounts.retain(|known| known.target != mount.target);
                } else {
                    return Err(format!(
                        "{} is taken by another volume on this server",
                        mount.target
                    ));
                }
            }
            mounts.push(mount.clone());
        }
        MountChange::Detach { target } => mounts.retain(|known| &known.target != target),
    }
    Ok(mounts)
}

impl DockerEngine {
    async fn inspect_named(
        &self,
        docker: &Docker,
        name: &str,
    ) -> Result<Option<ContainerInspectResponse>, ComputeError> {
        match self.inspect_container(docker, name).await {
            Ok(inspected) => Ok(Some(inspected)),
            Err(error) if state::status_code(&error) == Some(404) => Ok(None),
            Err(error) => Err(self.failure(&format!("cannot inspect container {name}"), &error)),
        }
    }

    async fn remove_container(&self, docker: &Docker, name: &str) -> Result<(), ComputeError> {
        let options = RemoveContainerOptions {
            force: true,
            ..RemoveContainerOptions::default()
        };
        match docker.remove_container(name, Some(options)).await {
            Ok(()) => Ok(()),
            Err(error) if state::status_code(&error) == Some(404) => Ok(()),
            Err(error) => Err(self.failure(&format!("cannot remove container {name}"), &error)),
        }
    }

    /// The named-volume mounts of `instance`'s container (`None`: it has
    /// no container).
    pub async fn mounts(
        &self,
        instance: &Instance,
    ) -> Result<Option<Vec<VolumeMount>>, ComputeError> {
        let docker = self.client().await?;
        let name = container_name(&self.config, instance);
        Ok(self
            .inspect_named(docker, &name)
            .await?
            .as_ref()
            .map(mounts_of))
    }

    /// Changes the mounts of `instance`'s container, making it again (see
    /// the module's header). `Ok(false)`: the instance has no container.
    pub async fn remount(
        &self,
        instance: &Instance,
        change: &MountChange,
    ) -> Result<bool, ComputeError> {
        let docker = self.client().await?;
        let name = container_name(&self.config, instance);
        let next = format!("{name}.next");
        let _recreating = self.recreating(instance.uuid);
        let to_run = instance.power_state != PowerState::Off;
        let Some(current) = self.inspect_named(docker, &name).await? else {
            // An earlier try removed the old one: finish with the new.
            if self.inspect_named(docker, &next).await?.is_none() {
                return Ok(false);
            }
            self.settle(docker, &next, &name, to_run).await?;
            return Ok(true);
        };
        let wanted = changed(mounts_of(&current), change).map_err(ComputeError)?;
        let mut have = mounts_of(&current);
        let mut want = wanted.clone();
        have.sort_by(|a, b| a.target.cmp(&b.target));
        want.sort_by(|a, b| a.target.cmp(&b.target));
        // A leftover of an earlier try that did not get as far as removing
        // the old container.
        self.remove_container(docker, &next).await?;
        if have == want {
            if to_run
                && !matches!(
                    state::machine_state(current.state.as_ref()),
                    crate::compute::MachineState::Running
                )
            {
                docker.start_container(&name, None).await.map_err(|error| {
                    self.failure(&format!("cannot start container {name}"), &error)
                })?;
            }
            return Ok(true);
        }
        let body = spec::with_mounts(
            spec::with_endpoints(
                spec::container_body(&self.config, instance, &flavor_of(&current)),
                &endpoints_of(&current),
            ),
            &wanted,
        );
        // Stopped first: its addresses are free for the new one, and its
        // workload gets its grace as on a reboot.
        let grace = i32::try_from(self.config.stop_grace.as_secs()).unwrap_or(i32::MAX);
        let stop = StopContainerOptions {
            t: Some(grace),
            ..StopContainerOptions::default()
        };
        match docker.stop_container(&name, Some(stop)).await {
            Ok(()) => {}
            Err(error) if matches!(state::status_code(&error), Some(304 | 404)) => {}
            Err(error) => {
                return Err(self.failure(&format!("cannot stop container {name}"), &error));
            }
        }
        let options = CreateContainerOptions {
            name: Some(next.clone()),
            ..CreateContainerOptions::default()
        };
        if let Err(error) = docker.create_container(Some(options), body).await {
            // The old one runs on as it was.
            if to_run {
                let _ = docker.start_container(&name, None).await;
            }
            return Err(self.failure(
                &format!("cannot make container {name} again with its volumes"),
                &error,
            ));
        }
        self.remove_container(docker, &name).await?;
        self.settle(docker, &next, &name, to_run).await?;
        info!(instance_uuid = %instance.uuid, container = %name, "container made again with its volumes");
        Ok(true)
    }

    /// Renames the new container to the instance's name and starts it.
    async fn settle(
        &self,
        docker: &Docker,
        next: &str,
        name: &str,
        to_run: bool,
    ) -> Result<(), ComputeError> {
        docker
            .rename_container(
                next,
                RenameContainerOptions {
                    name: name.to_owned(),
                },
            )
            .await
            .map_err(|error| {
                self.failure(&format!("cannot rename container {next} to {name}"), &error)
            })?;
        if to_run {
            docker
                .start_container(name, None)
                .await
                .map_err(|error| self.failure(&format!("cannot start container {name}"), &error))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(volume: &str, target: &str) -> VolumeMount {
        VolumeMount {
            volume: volume.into(),
            target: target.into(),
            read_only: false,
        }
    }

    #[test]
    fn a_change_adds_or_takes_one_mount_and_never_shadows_another() {
        let mounts = vec![mount("v1", "/mnt/vdb")];
        assert_eq!(
            changed(
                mounts.clone(),
                &MountChange::Attach(mount("v2", "/mnt/vdc"))
            ),
            Ok(vec![mount("v1", "/mnt/vdb"), mount("v2", "/mnt/vdc")])
        );
        assert_eq!(
            changed(
                mounts.clone(),
                &MountChange::Attach(mount("v1", "/mnt/vdb"))
            ),
            Ok(mounts.clone()),
            "the same mount again is the same"
        );
        assert_eq!(
            changed(
                mounts.clone(),
                &MountChange::Attach(mount("v2", "/mnt/vdb"))
            ),
            Err("/mnt/vdb is taken by another volume on this server".to_owned())
        );
        assert_eq!(
            changed(
                mounts,
                &MountChange::Detach {
                    target: "/mnt/vdb".into()
                }
            ),
            Ok(vec![])
        );
    }
}
