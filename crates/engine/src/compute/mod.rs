//! Compute: the [`ComputeDriver`] trait through which the engine builds,
//! powers and deletes machines, and learns what they really do. Instances
//! never talk to hardware directly; the engine starts a driver call after
//! recording the in-progress state and records the outcome when the call
//! returns, and a watcher (`crate::instances::watch`) follows the driver's
//! observations so a machine that dies behind Ember's back shows up.
//!
//! Two drivers:
//! - [`simulated::SimulatedDriver`] simulates a fleet with configurable
//!   latency and failure injection (a machine can be told to die), so
//!   everything runs on one machine and failures can be tested;
//! - [`docker::DockerDriver`] runs each instance as a container through the
//!   Docker Engine API (Docker, or Podman's compatible service).
//!
//! Driver calls are idempotent: a retried build finds the machine it made
//! (by the instance uuid it carries), deleting a machine that is gone
//! succeeds.

pub mod docker;
pub mod flavors;
pub mod interfaces;
pub mod openstack;
pub mod simulated;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use uuid::Uuid;

pub use crate::domain::instance::observation::{MachineExit, MachineState};
use crate::domain::instance::placement::Placement;
use crate::domain::instance::{Instance, InstanceTask, MaintenanceLock};
use flavors::{Flavor, FlavorTable};

/// Why a driver call failed; recorded as the instance's fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ComputeError(pub String);

/// A machine's power as a listing shows it: enough to spot a contradiction
/// (the details come from [`ComputeDriver::inspect`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MachinePower {
    Running,
    Stopped,
    Missing,
}

/// What a cloud's machine shows beyond its state: the id the cloud knows
/// it by and its addresses (Nova's server id and `addresses`), for a
/// server resource's physical id and attributes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MachineDetails {
    pub machine_id: String,
    /// Network name → its addresses, as Nova shows them.
    pub addresses: std::collections::BTreeMap<String, Vec<serde_json::Value>>,
    pub access_ipv4: String,
    pub access_ipv6: String,
    pub instance_name: Option<String>,
    /// Everything the cloud said (the `show` attribute).
    pub raw: serde_json::Value,
}

/// Whether a build may have run before for its instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildAttempt {
    /// The instance was just recorded: nothing was made for it yet (two
    /// racing builds are still kept to one machine by its name).
    First,
    /// Resumed after a restart (or by another engine): an earlier try may
    /// have made the machine, which is looked for first.
    Resumed,
}

/// The machine behind an instance. Each call returns when the work is done
/// (or failed); calls may take seconds, and the engine never waits for them
/// on a request path.
#[async_trait]
pub trait ComputeDriver: Send + Sync + 'static {
    /// The driver's name, for logs.
    fn name(&self) -> &'static str;
    /// What the machines are called in messages ("container").
    fn machine_noun(&self) -> &'static str;
    /// Provisions the machine with `flavor`'s limits and powers it on.
    async fn build(
        &self,
        instance: &Instance,
        flavor: &Flavor,
        attempt: BuildAttempt,
    ) -> Result<(), ComputeError>;
    async fn power_on(&self, instance: &Instance) -> Result<(), ComputeError>;
    /// Stops the machine: a grace period, then it is killed.
    async fn power_off(&self, instance: &Instance) -> Result<(), ComputeError>;
    async fn reboot(&self, instance: &Instance) -> Result<(), ComputeError>;
    /// Tears the machine down; succeeding for a machine that is already gone.
    async fn delete(&self, instance: &Instance) -> Result<(), ComputeError>;

    /// The machine's state now, with how it ended if it stopped.
    async fn inspect(&self, instance: &Instance) -> Result<MachineState, ComputeError>;
    /// The power of each of `instances`' machines, in one pass (the
    /// periodic resync): one entry per instance, `Missing` when it has
    /// none.
    async fn sync(&self, instances: &[Instance])
    -> Result<Vec<(Uuid, MachinePower)>, ComputeError>;
    /// The uuids of instances whose machine changed, as they change. The
    /// stream ends or fails when the driver's connection does; the watcher
    /// then reconnects and resyncs (what happened meanwhile was missed).
    async fn observe(&self)
    -> Result<BoxStream<'static, Result<Uuid, ComputeError>>, ComputeError>;

    /// Refuses a placement the driver cannot honour, naming what it cannot
    /// (checked before an instance is recorded). By default every
    /// placement is taken (the simulated driver simulates it).
    fn check_placement(&self, placement: &Placement) -> Result<(), String> {
        let _ = placement;
        Ok(())
    }

    /// Applies a maintenance lock to the machine itself, where the cloud
    /// has one (Nova's lock); nothing by default.
    async fn lock(&self, instance: &Instance, lock: &MaintenanceLock) -> Result<(), ComputeError> {
        let _ = (instance, lock);
        Ok(())
    }

    /// Lifts what [`ComputeDriver::lock`] placed; nothing by default.
    async fn unlock(
        &self,
        instance: &Instance,
        lock: &MaintenanceLock,
    ) -> Result<(), ComputeError> {
        let _ = (instance, lock);
        Ok(())
    }

    /// Gives the machine the instance's name and metadata, where the cloud
    /// keeps its own (Nova's); nothing by default.
    async fn apply_details(&self, instance: &Instance) -> Result<(), ComputeError> {
        let _ = instance;
        Ok(())
    }

    /// Takes the ports the instance was given (not those the cloud made for
    /// it) off its machine, so a replacement can be given them while the
    /// machine is still there (Heat's `prepare_for_replace`); nothing by
    /// default.
    async fn release_ports(&self, instance: &Instance) -> Result<(), ComputeError> {
        let _ = instance;
        Ok(())
    }

    /// Whether [`ComputeDriver::replug`] changes a machine's interfaces in
    /// place; a driver that cannot has its servers replaced instead.
    fn replugs_in_place(&self) -> bool {
        false
    }

    /// Plugs the machine into `instance.placement.networks` in place (Nova's
    /// interface attach and detach, as Heat updates a server's networks):
    /// each interface the machine has that a request matches stays, the
    /// others are taken off (the ports made for it deleted, those it was
    /// given kept), and a request nothing matches gets a new interface.
    /// Compared with what the machine has, not with what it was asked for
    /// before, so doing it again after a failure or a crash finishes it.
    async fn replug(&self, instance: &Instance) -> Result<(), ComputeError> {
        let _ = instance;
        Err(ComputeError(format!(
            "a {} cannot change its networks in place",
            self.machine_noun()
        )))
    }

    /// The simulated cloud the machines' networks are on: the simulated
    /// driver's, so the simulated twins of the openstack types
    /// (`crate::resources::simulated_cloud`) make the networks, ports and
    /// volumes its machines use. `None` for the other drivers.
    fn simulated_cloud(&self) -> Option<Arc<crate::cloud::simulated::SimulatedCloud>> {
        None
    }

    /// The container engine the machines run on: the docker driver's, so
    /// the docker twins of the network and volume types
    /// (`crate::resources::docker_cloud`) make the container networks and
    /// volumes its containers use. `None` for the other drivers.
    fn docker_engine(&self) -> Option<Arc<docker::DockerEngine>> {
        None
    }

    /// What the cloud shows of the machine (`None`: nothing beyond the
    /// instance's record, or no machine).
    async fn details(&self, instance: &Instance) -> Result<Option<MachineDetails>, ComputeError> {
        let _ = instance;
        Ok(None)
    }
}

/// Runs `task` on `driver`.
pub async fn run_task(
    driver: &dyn ComputeDriver,
    task: InstanceTask,
    instance: &Instance,
    flavor: &Flavor,
    attempt: BuildAttempt,
) -> Result<(), ComputeError> {
    match task {
        InstanceTask::Build => driver.build(instance, flavor, attempt).await,
        InstanceTask::PowerOn => driver.power_on(instance).await,
        InstanceTask::PowerOff => driver.power_off(instance).await,
        InstanceTask::Reboot => driver.reboot(instance).await,
        InstanceTask::Delete => driver.delete(instance).await,
    }
}

/// Which driver runs instances, and how.
#[derive(Debug, Clone, PartialEq)]
pub enum DriverConfig {
    Simulated(simulated::SimulatedComputeConfig),
    Docker(docker::DockerComputeConfig),
    /// Nova, on the cloud of `[engine.openstack]` (made with it: see
    /// [`openstack::NovaDriver`]).
    OpenStack,
}

/// Everything about compute the engine is configured with.
#[derive(Debug, Clone, PartialEq)]
pub struct ComputeConfig {
    pub driver: DriverConfig,
    /// The flavors instances may name.
    pub flavors: FlavorTable,
    /// How often every settled instance is compared with its machine, in
    /// case an observation was missed.
    pub resync_interval: Duration,
}

/// The default resync interval.
pub const DEFAULT_RESYNC_INTERVAL: Duration = Duration::from_secs(5);

impl ComputeConfig {
    /// The simulated driver, any flavor name accepted.
    pub fn simulated(config: simulated::SimulatedComputeConfig) -> ComputeConfig {
        ComputeConfig {
            driver: DriverConfig::Simulated(config),
            flavors: FlavorTable::accepting_any(),
            resync_interval: DEFAULT_RESYNC_INTERVAL,
        }
    }

    /// Makes the configured driver. Fails only on a bad configuration: an
    /// unreachable container engine is reported by each call (so instances
    /// go to ERROR saying so), not at start-up.
    pub fn driver(&self) -> Result<Arc<dyn ComputeDriver>, String> {
        Ok(match &self.driver {
            DriverConfig::Simulated(config) => {
                Arc::new(simulated::SimulatedDriver::new(config.clone())?)
            }
            DriverConfig::Docker(config) => Arc::new(docker::DockerDriver::new(config.clone())?),
            DriverConfig::OpenStack => {
                return Err(
                    "the openstack compute driver is made with its cloud ([engine.openstack])"
                        .to_owned(),
                );
            }
        })
    }
}

impl Default for ComputeConfig {
    fn default() -> Self {
        ComputeConfig::simulated(simulated::SimulatedComputeConfig::default())
    }
}
