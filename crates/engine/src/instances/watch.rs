//! Watches the machines: follows the driver's observations (the container
//! engine's event stream) and, as a fallback for anything missed, compares
//! every settled instance with its machine every `resync_interval` and
//! right after each (re)connection. A contradiction is decided by
//! [`observation::reconcile`] and written with its event in one conditional
//! write on the revision read *before* the machine was looked at — so a
//! request or task outcome that landed meanwhile always wins, and what is
//! recorded is never older than the record it replaces.
//!
//! Nothing is done to machines here: a machine found dead is reported
//! (instance ERROR or STOPPED with the reason, an event, and a notice to
//! subscribers such as the clusters, whose node goes ERROR), never
//! restarted or removed — a locked instance's machine is left alone.
//!
//! Every engine replica runs a watcher; two recording the same observation
//! race on the revision and exactly one writes.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};
use uuid::Uuid;

use crate::compute::{ComputeDriver, ComputeError, MachinePower};
use crate::domain::instance::observation::{self, Observation};
use crate::domain::instance::{Instance, InstanceStatus, PowerState};
use crate::error::Result;
use crate::store::instances::InstanceStore;

/// Instances compared with their machines per driver call in a resync.
const RESYNC_BATCH: u64 = 500;
/// Observations waiting to be reconciled.
const OBSERVATION_QUEUE: usize = 4096;
/// The longest pause between attempts to reach an unreachable driver.
const MAX_RECONNECT_PAUSE: Duration = Duration::from_secs(30);

pub struct MachineWatcher {
    store: Arc<dyn InstanceStore>,
    driver: Arc<dyn ComputeDriver>,
    resync_interval: Duration,
    observed: broadcast::Sender<Observation>,
}

/// Whether the instance is settled in a state its machine can contradict.
fn is_watched(instance: &Instance) -> bool {
    matches!(
        (instance.status, instance.power_state),
        (InstanceStatus::Active, PowerState::On)
            | (InstanceStatus::Stopped, PowerState::Off)
            | (InstanceStatus::Error, PowerState::Off)
    )
}

/// Whether a listing's power contradicts the record (then the machine is
/// inspected for the details).
fn contradicts(instance: &Instance, power: MachinePower) -> bool {
    let expected = match instance.power_state {
        PowerState::On => MachinePower::Running,
        _ => MachinePower::Stopped,
    };
    power != expected
}

impl MachineWatcher {
    pub fn new(
        store: Arc<dyn InstanceStore>,
        driver: Arc<dyn ComputeDriver>,
        resync_interval: Duration,
        observed: broadcast::Sender<Observation>,
    ) -> MachineWatcher {
        MachineWatcher {
            store,
            driver,
            resync_interval,
            observed,
        }
    }

    /// Runs until `shutdown`.
    pub fn spawn(self: Arc<Self>, shutdown: CancellationToken) {
        tokio::spawn(async move {
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = self.run() => {}
            }
        });
    }

    async fn run(&self) {
        let mut pause = Duration::from_millis(500);
        let mut warned = false;
        loop {
            let mut stream = match self.driver.observe().await {
                Ok(stream) => stream,
                Err(failure) => {
                    if !warned {
                        warn!(driver = self.driver.name(), %failure, "cannot watch the machines; retrying");
                        warned = true;
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_RECONNECT_PAUSE);
                    continue;
                }
            };
            if warned {
                info!(driver = self.driver.name(), "watching the machines again");
            }
            warned = false;
            pause = Duration::from_millis(500);
            // The stream is driven from now on, on its own task, so what
            // happens during the resync below is not missed.
            let (sender, mut observed) = tokio::sync::mpsc::channel(OBSERVATION_QUEUE);
            let pump = tokio::spawn(async move {
                while let Some(item) = stream.next().await {
                    if sender.send(item).await.is_err() {
                        return;
                    }
                }
            });
            // What happened while nobody watched.
            self.resync_logged().await;
            let mut ticker = tokio::time::interval(self.resync_interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                tokio::select! {
                    item = observed.recv() => match item {
                        Some(Ok(uuid)) => {
                            if let Err(failure) = self.reconcile_one(uuid).await {
                                debug!(instance_uuid = %uuid, %failure, "cannot reconcile an observed machine now; the resync will");
                            }
                        }
                        Some(Err(failure)) => {
                            warn!(driver = self.driver.name(), %failure, "observations were missed; resyncing");
                            self.resync_logged().await;
                        }
                        None => {
                            warn!(driver = self.driver.name(), "the machines' event stream ended; reconnecting");
                            break;
                        }
                    },
                    _ = ticker.tick() => self.resync_logged().await,
                }
            }
            pump.abort();
        }
    }

    async fn resync_logged(&self) {
        match self.resync().await {
            Ok(0) => {}
            Ok(changed) => info!(
                changed,
                "resync found machines in another state than recorded"
            ),
            Err(failure) => debug!(%failure, "resync failed; trying again at the next one"),
        }
    }

    /// Compares the instance with its machine now.
    pub async fn reconcile_one(&self, uuid: Uuid) -> std::result::Result<bool, String> {
        let Some(instance) = self
            .store
            .get_instance(uuid)
            .await
            .map_err(|error| error.to_string())?
        else {
            // Another deployment's, or deleted: not ours to judge.
            return Ok(false);
        };
        if !is_watched(&instance) {
            return Ok(false);
        }
        let machine = self
            .driver
            .inspect(&instance)
            .await
            .map_err(|error| error.to_string())?;
        self.apply(&instance, &machine)
            .await
            .map_err(|error| error.to_string())
    }

    async fn apply(
        &self,
        instance: &Instance,
        machine: &observation::MachineState,
    ) -> Result<bool> {
        let Some(observation) = observation::reconcile(
            instance,
            machine,
            self.driver.machine_noun(),
            ember_runtime::time::now(),
        ) else {
            return Ok(false);
        };
        if !self.store.record_observation(&observation).await? {
            // The instance changed meanwhile: its new state stands.
            return Ok(false);
        }
        warn!(
            instance_uuid = %instance.uuid,
            name = %instance.name,
            from = instance.status.as_str(),
            to = observation.next.status.as_str(),
            reason = %observation.reason,
            "machine found in another state than recorded"
        );
        // Nobody subscribed is fine.
        let _ = self.observed.send(observation);
        Ok(true)
    }

    /// Compares every watched instance with its machine; returns how many
    /// were changed.
    pub async fn resync(&self) -> std::result::Result<usize, String> {
        let mut changed = 0;
        let mut after = None;
        loop {
            let batch = self
                .store
                .list_watched_instances(after, RESYNC_BATCH)
                .await
                .map_err(|error| error.to_string())?;
            let Some(last) = batch.last() else {
                return Ok(changed);
            };
            after = Some(last.uuid);
            let powers = self
                .driver
                .sync(&batch)
                .await
                .map_err(|ComputeError(error)| error)?;
            for (instance, (_, power)) in batch.iter().zip(powers) {
                if !contradicts(instance, power) {
                    continue;
                }
                let machine = match power {
                    MachinePower::Missing => observation::MachineState::Missing,
                    _ => self
                        .driver
                        .inspect(instance)
                        .await
                        .map_err(|ComputeError(error)| error)?,
                };
                if self
                    .apply(instance, &machine)
                    .await
                    .map_err(|error| error.to_string())?
                {
                    changed += 1;
                }
            }
            if (batch.len() as u64) < RESYNC_BATCH {
                return Ok(changed);
            }
        }
    }
}
