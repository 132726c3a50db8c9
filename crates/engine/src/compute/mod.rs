//! Compute: the [`ComputeDriver`] trait through which the engine builds,
//! powers and deletes machines. Instances never talk to hardware directly;
//! the engine starts a driver call after recording the in-progress state and
//! records the outcome when the call returns.
//!
//! The default driver, [`simulated::SimulatedDriver`], simulates a fleet
//! with configurable latency and failure injection, so everything runs on
//! one machine and failures can be tested.

pub mod simulated;

use async_trait::async_trait;

use crate::domain::instance::{Instance, InstanceTask};

/// Why a driver call failed; recorded as the instance's fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ComputeError(pub String);

/// The machine behind an instance. Each call returns when the work is done
/// (or failed); calls may take seconds, and the engine never waits for them
/// on a request path.
#[async_trait]
pub trait ComputeDriver: Send + Sync + 'static {
    /// The driver's name, for logs.
    fn name(&self) -> &'static str;
    /// Provisions the machine and powers it on.
    async fn build(&self, instance: &Instance) -> Result<(), ComputeError>;
    async fn power_on(&self, instance: &Instance) -> Result<(), ComputeError>;
    async fn power_off(&self, instance: &Instance) -> Result<(), ComputeError>;
    async fn reboot(&self, instance: &Instance) -> Result<(), ComputeError>;
    /// Tears the machine down; succeeding for a machine that is already gone.
    async fn delete(&self, instance: &Instance) -> Result<(), ComputeError>;
}

/// Runs `task` on `driver`.
pub async fn run_task(
    driver: &dyn ComputeDriver,
    task: InstanceTask,
    instance: &Instance,
) -> Result<(), ComputeError> {
    match task {
        InstanceTask::Build => driver.build(instance).await,
        InstanceTask::PowerOn => driver.power_on(instance).await,
        InstanceTask::PowerOff => driver.power_off(instance).await,
        InstanceTask::Reboot => driver.reboot(instance).await,
        InstanceTask::Delete => driver.delete(instance).await,
    }
}
