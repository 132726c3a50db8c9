//! The simulated compute driver: every call takes a configurable time and
//! then succeeds — or fails, when asked to, so failures can be tested end to
//! end without hardware. It keeps its fleet in memory and reports it like a
//! real one (observations and resync), so a simulated machine can be made
//! to die behind the engine's back.
//!
//! Failure injection, per instance through its metadata:
//! - `ember:simulate_failure` = a comma-separated list of tasks that fail
//!   (`build`, `power_on`, `power_off`, `reboot`, `delete`, or `all`);
//! - `ember:simulate_build_ms` = how long this instance's build takes;
//! - `ember:simulate_exit_after_ms` = the machine exits this long after
//!   each time it starts (build, power on, reboot), with
//!   `ember:simulate_exit_code` (default 137, as if killed);
//!
//! and for the whole engine through configuration:
//! `engine.compute.fail_builds_matching`, a regular expression; builds of
//! instances whose name matches it fail.
//!
//! The fleet lives in memory: after a restart the simulated machines the
//! engine does not know any more are taken to be as their instances say
//! (a fleet that kept running), never reported missing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use regex::Regex;
use tokio::sync::broadcast;
use uuid::Uuid;

use super::flavors::Flavor;
use super::{
    BuildAttempt, ComputeDriver, ComputeError, MachineDetails, MachineExit, MachinePower,
    MachineState,
};
use crate::cloud::simulated::SimulatedCloud;
use crate::domain::instance::{Instance, InstanceTask, PowerState};

/// Metadata key listing the tasks that fail for this instance.
pub const SIMULATE_FAILURE_KEY: &str = "ember:simulate_failure";
/// Metadata key overriding this instance's build time, in milliseconds.
pub const SIMULATE_BUILD_MS_KEY: &str = "ember:simulate_build_ms";
/// The longest build time metadata may ask for.
pub const MAX_SIMULATED_BUILD: Duration = Duration::from_secs(3600);
/// Metadata key: the machine exits this many milliseconds after it starts.
pub const SIMULATE_EXIT_AFTER_MS_KEY: &str = "ember:simulate_exit_after_ms";
/// Metadata key: the exit code of such an exit (default 137).
pub const SIMULATE_EXIT_CODE_KEY: &str = "ember:simulate_exit_code";
/// How many observations wait for a slow watcher before it must resync.
const OBSERVATION_BUFFER: usize = 1024;

/// How the simulated fleet behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimulatedComputeConfig {
    pub build_latency: Duration,
    pub power_latency: Duration,
    pub reboot_latency: Duration,
    pub delete_latency: Duration,
    /// A regular expression; builds of instances whose name matches fail.
    /// Empty = none.
    pub fail_builds_matching: String,
}

impl Default for SimulatedComputeConfig {
    fn default() -> Self {
        SimulatedComputeConfig {
            build_latency: Duration::from_millis(500),
            power_latency: Duration::from_millis(200),
            reboot_latency: Duration::from_millis(300),
            delete_latency: Duration::from_millis(200),
            fail_builds_matching: String::new(),
        }
    }
}

/// Checks the `fail_builds_matching` pattern, naming the key on error.
pub fn validate_failure_pattern(pattern: &str) -> Result<(), String> {
    compile_pattern(pattern).map(|_| ())
}

fn compile_pattern(pattern: &str) -> Result<Option<Regex>, String> {
    if pattern.is_empty() {
        return Ok(None);
    }
    Regex::new(pattern).map(Some).map_err(|error| {
        format!(
            "engine.compute.fail_builds_matching: {pattern:?} is not a regular expression: {error}"
        )
    })
}

/// What the simulated fleet remembers of a machine: how many times it has
/// started (so a scheduled exit of an earlier start does not stop a later
/// one) and, when it died by injection, how.
#[derive(Debug, Clone, Default)]
struct SimulatedMachine {
    starts: u64,
    died: Option<MachineExit>,
}

type Fleet = Arc<Mutex<HashMap<Uuid, SimulatedMachine>>>;

pub struct SimulatedDriver {
    config: SimulatedComputeConfig,
    /// The networks, ports and volumes its machines use.
    cloud: Arc<SimulatedCloud>,
    fail_builds_matching: Option<Regex>,
    fleet: Fleet,
    observations: broadcast::Sender<Uuid>,
}

impl SimulatedDriver {
    pub fn new(config: SimulatedComputeConfig) -> Result<SimulatedDriver, String> {
        let fail_builds_matching = compile_pattern(&config.fail_builds_matching)?;
        Ok(SimulatedDriver {
            config,
            fail_builds_matching,
            cloud: Arc::new(SimulatedCloud::new()),
            fleet: Fleet::default(),
            observations: broadcast::channel(OBSERVATION_BUFFER).0,
        })
    }

    /// How long `task` takes for `instance`.
    fn latency(&self, task: InstanceTask, instance: &Instance) -> Duration {
        match task {
            InstanceTask::Build => instance
                .metadata
                .get(SIMULATE_BUILD_MS_KEY)
                .and_then(|millis| millis.trim().parse::<u64>().ok())
                .map(Duration::from_millis)
                .map_or(self.config.build_latency, |asked| {
                    asked.min(MAX_SIMULATED_BUILD)
                }),
            InstanceTask::PowerOn | InstanceTask::PowerOff => self.config.power_latency,
            InstanceTask::Reboot => self.config.reboot_latency,
            InstanceTask::Delete => self.config.delete_latency,
        }
    }

    /// Why `task` fails for `instance`, when it was asked to.
    fn injected_failure(&self, task: InstanceTask, instance: &Instance) -> Option<String> {
        if let Some(tasks) = instance.metadata.get(SIMULATE_FAILURE_KEY) {
            let requested = tasks
                .split(',')
                .map(str::trim)
                .any(|name| name == task.as_str() || name == "all");
            if requested {
                return Some(format!(
                    "simulated {} failure (metadata {SIMULATE_FAILURE_KEY}={tasks:?})",
                    task.as_str()
                ));
            }
        }
        match (&self.fail_builds_matching, task) {
            (Some(pattern), InstanceTask::Build) if pattern.is_match(&instance.name) => {
                Some(format!(
                    "simulated build failure (name {:?} matches engine.compute.fail_builds_matching {:?})",
                    instance.name,
                    pattern.as_str()
                ))
            }
            _ => None,
        }
    }

    async fn simulate(&self, task: InstanceTask, instance: &Instance) -> Result<(), ComputeError> {
        // The simulation itself: the fleet takes this long to answer.
        tokio::time::sleep(self.latency(task, instance)).await;
        match self.injected_failure(task, instance) {
            Some(reason) => Err(ComputeError(reason)),
            None => Ok(()),
        }
    }

    /// The machine is gone (deleted): forgotten.
    fn forget(&self, uuid: Uuid) {
        if let Ok(mut fleet) = self.fleet.lock() {
            fleet.remove(&uuid);
        }
    }

    /// The machine (re)started: alive again, and set to exit later if its
    /// metadata says so.
    fn started(&self, instance: &Instance) {
        let starts = match self.fleet.lock() {
            Ok(mut fleet) => {
                let machine = fleet.entry(instance.uuid).or_default();
                machine.died = None;
                machine.starts += 1;
                machine.starts
            }
            Err(_) => return,
        };
        let Some(after) = instance
            .metadata
            .get(SIMULATE_EXIT_AFTER_MS_KEY)
            .and_then(|millis| millis.trim().parse::<u64>().ok())
        else {
            return;
        };
        let exit_code = instance
            .metadata
            .get(SIMULATE_EXIT_CODE_KEY)
            .and_then(|code| code.trim().parse::<i64>().ok())
            .unwrap_or(137);
        let (fleet, observations, uuid) =
            (self.fleet.clone(), self.observations.clone(), instance.uuid);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(after).min(MAX_SIMULATED_BUILD)).await;
            let died = match fleet.lock() {
                Ok(mut fleet) => match fleet.get_mut(&uuid) {
                    Some(machine) if machine.starts == starts && machine.died.is_none() => {
                        machine.died = Some(MachineExit {
                            exit_code,
                            finished_at: Some(ember_runtime::time::now()),
                            ..MachineExit::default()
                        });
                        true
                    }
                    _ => false,
                },
                Err(_) => false,
            };
            if died {
                // Nobody watching is fine.
                let _ = observations.send(uuid);
            }
        });
    }

    /// A simulated machine is as its instance says — several engine
    /// replicas each keep a fleet of their own, and a restarted engine
    /// knows none — except one this fleet made die after the instance's
    /// last change.
    fn state_of(&self, instance: &Instance) -> MachineState {
        let died = self.fleet.lock().ok().and_then(|fleet| {
            fleet
                .get(&instance.uuid)
                .and_then(|machine| machine.died.clone())
        });
        match died {
            Some(exit) if exit.finished_at.is_some_and(|at| at > instance.updated_at) => {
                MachineState::Exited(exit)
            }
            _ => match instance.power_state {
                PowerState::On | PowerState::PoweringOff => MachineState::Running,
                PowerState::Off | PowerState::PoweringOn => {
                    MachineState::Exited(MachineExit::default())
                }
                PowerState::NoState => MachineState::Missing,
            },
        }
    }
}

#[async_trait]
impl ComputeDriver for SimulatedDriver {
    fn name(&self) -> &'static str {
        "simulated"
    }

    fn machine_noun(&self) -> &'static str {
        "simulated machine"
    }

    async fn build(
        &self,
        instance: &Instance,
        _flavor: &Flavor,
        _attempt: BuildAttempt,
    ) -> Result<(), ComputeError> {
        self.simulate(InstanceTask::Build, instance).await?;
        self.cloud
            .with(|world| {
                world.plug(
                    &instance.project_id,
                    instance.uuid,
                    &instance.placement.networks,
                )
            })
            .map_err(ComputeError)?;
        self.started(instance);
        Ok(())
    }

    async fn power_on(&self, instance: &Instance) -> Result<(), ComputeError> {
        self.simulate(InstanceTask::PowerOn, instance).await?;
        self.started(instance);
        Ok(())
    }

    async fn power_off(&self, instance: &Instance) -> Result<(), ComputeError> {
        self.simulate(InstanceTask::PowerOff, instance).await?;
        if let Ok(mut fleet) = self.fleet.lock()
            && let Some(machine) = fleet.get_mut(&instance.uuid)
        {
            // Stopped on request: a pending injected exit no longer applies.
            machine.starts += 1;
            machine.died = None;
        }
        Ok(())
    }

    async fn reboot(&self, instance: &Instance) -> Result<(), ComputeError> {
        self.simulate(InstanceTask::Reboot, instance).await?;
        self.started(instance);
        Ok(())
    }

    async fn delete(&self, instance: &Instance) -> Result<(), ComputeError> {
        self.simulate(InstanceTask::Delete, instance).await?;
        self.cloud.with(|world| {
            world.unplug(instance.uuid, false);
        });
        self.forget(instance.uuid);
        Ok(())
    }

    fn simulated_cloud(&self) -> Option<Arc<SimulatedCloud>> {
        Some(self.cloud.clone())
    }

    async fn release_ports(&self, instance: &Instance) -> Result<(), ComputeError> {
        self.cloud.with(|world| {
            world.unplug(instance.uuid, true);
        });
        Ok(())
    }

    fn replugs_in_place(&self) -> bool {
        true
    }

    async fn replug(&self, instance: &Instance) -> Result<(), ComputeError> {
        self.cloud
            .with(|world| {
                world.replug(
                    &instance.project_id,
                    instance.uuid,
                    &instance.placement.networks,
                )
            })
            .map_err(ComputeError)
    }

    /// A machine with interfaces shows their addresses, as Nova shows a
    /// server's; one without has nothing beyond its instance.
    async fn details(&self, instance: &Instance) -> Result<Option<MachineDetails>, ComputeError> {
        if instance.placement.networks.is_empty() {
            return Ok(None);
        }
        let addresses = self
            .cloud
            .with(|world| world.addresses(&instance.project_id, instance.uuid));
        let raw = serde_json::json!({
            "id": instance.uuid.to_string(),
            "name": instance.name,
            "status": instance.status.as_str(),
            "addresses": addresses,
            "metadata": instance.metadata,
            "key_name": instance.placement.key_name,
            "security_groups": instance.placement.security_groups.iter()
                .map(|name| serde_json::json!({"name": name})).collect::<Vec<_>>(),
            "flavor": {"original_name": instance.flavor},
            "image": {"id": instance.image},
        });
        Ok(Some(MachineDetails {
            machine_id: instance.uuid.to_string(),
            addresses,
            access_ipv4: String::new(),
            access_ipv6: String::new(),
            instance_name: Some(format!("instance-{}", instance.uuid.simple())),
            raw,
        }))
    }

    async fn inspect(&self, instance: &Instance) -> Result<MachineState, ComputeError> {
        Ok(self.state_of(instance))
    }

    async fn sync(
        &self,
        instances: &[Instance],
    ) -> Result<Vec<(Uuid, MachinePower)>, ComputeError> {
        Ok(instances
            .iter()
            .map(|instance| {
                let power = match self.state_of(instance) {
                    MachineState::Running => MachinePower::Running,
                    MachineState::Exited(_) => MachinePower::Stopped,
                    MachineState::Missing => MachinePower::Missing,
                };
                (instance.uuid, power)
            })
            .collect())
    }

    async fn observe(
        &self,
    ) -> Result<BoxStream<'static, Result<Uuid, ComputeError>>, ComputeError> {
        let receiver = self.observations.subscribe();
        Ok(Box::pin(futures::stream::unfold(
            receiver,
            |mut receiver| async move {
                match receiver.recv().await {
                    Ok(uuid) => Some((Ok(uuid), receiver)),
                    Err(broadcast::error::RecvError::Lagged(missed)) => Some((
                        Err(ComputeError(format!(
                            "the watcher fell {missed} observations behind"
                        ))),
                        receiver,
                    )),
                    Err(broadcast::error::RecvError::Closed) => None,
                }
            },
        )))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::domain::instance::NewInstance;

    fn instance(name: &str, metadata: &[(&str, &str)]) -> Instance {
        let new = NewInstance {
            name: name.into(),
            flavor: "m1.small".into(),
            image: "debian-12".into(),
            metadata: metadata
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect::<BTreeMap<_, _>>(),
            workload: Default::default(),
            placement: Default::default(),
            delegation: None,
        };
        Instance::new_building("demo", "demo", new, chrono::Utc::now()).expect("valid")
    }

    fn instant() -> SimulatedComputeConfig {
        SimulatedComputeConfig {
            build_latency: Duration::ZERO,
            power_latency: Duration::ZERO,
            reboot_latency: Duration::ZERO,
            delete_latency: Duration::ZERO,
            fail_builds_matching: "^doomed-".into(),
        }
    }

    #[tokio::test]
    async fn tasks_succeed_unless_asked_to_fail() {
        let driver = SimulatedDriver::new(instant()).expect("valid");
        let healthy = instance("web-1", &[]);
        for task in InstanceTask::ALL {
            assert_eq!(
                super::super::run_task(
                    &driver,
                    task,
                    &healthy,
                    &Flavor::UNLIMITED,
                    BuildAttempt::First
                )
                .await,
                Ok(())
            );
        }
    }

    #[tokio::test]
    async fn metadata_names_the_tasks_that_fail() {
        let driver = SimulatedDriver::new(instant()).expect("valid");
        let flaky = instance("web-1", &[(SIMULATE_FAILURE_KEY, "reboot, delete")]);
        assert!(driver.reboot(&flaky).await.is_err());
        let error = driver.delete(&flaky).await.expect_err("fails");
        assert!(error.0.contains("simulated delete failure"), "{error}");
        assert!(
            driver
                .build(&flaky, &Flavor::UNLIMITED, BuildAttempt::First)
                .await
                .is_ok()
        );
        let broken = instance("web-1", &[(SIMULATE_FAILURE_KEY, "all")]);
        assert!(driver.power_on(&broken).await.is_err());
    }

    #[tokio::test]
    async fn builds_of_matching_names_fail() {
        let driver = SimulatedDriver::new(instant()).expect("valid");
        let error = driver
            .build(
                &instance("doomed-1", &[]),
                &Flavor::UNLIMITED,
                BuildAttempt::First,
            )
            .await
            .expect_err("fails");
        assert!(error.0.contains("fail_builds_matching"), "{error}");
        assert!(driver.power_on(&instance("doomed-1", &[])).await.is_ok());
    }

    #[tokio::test]
    async fn a_machine_told_to_exit_dies_and_is_observed() {
        use futures::StreamExt;
        let driver = SimulatedDriver::new(instant()).expect("valid");
        let mut observations = driver.observe().await.expect("observe");
        let doomed = instance(
            "worker-1",
            &[
                (SIMULATE_EXIT_AFTER_MS_KEY, "20"),
                (SIMULATE_EXIT_CODE_KEY, "3"),
            ],
        );
        let mut active = doomed.clone();
        active.status = crate::domain::instance::InstanceStatus::Active;
        active.power_state = PowerState::On;
        driver
            .build(&doomed, &Flavor::UNLIMITED, BuildAttempt::First)
            .await
            .expect("built");
        assert_eq!(
            driver.inspect(&active).await.expect("inspect"),
            MachineState::Running
        );
        assert_eq!(
            observations.next().await.expect("exited").expect("ok"),
            doomed.uuid
        );
        let MachineState::Exited(exit) = driver.inspect(&active).await.expect("inspect") else {
            panic!("exited");
        };
        assert_eq!(exit.exit_code, 3);
        assert_eq!(
            driver
                .sync(std::slice::from_ref(&active))
                .await
                .expect("sync"),
            vec![(active.uuid, MachinePower::Stopped)]
        );
        // Recorded after the death (the watcher wrote it): as recorded.
        let mut recorded = active.clone();
        recorded.updated_at = ember_runtime::time::now() + chrono::Duration::seconds(1);
        assert_eq!(
            driver.inspect(&recorded).await.expect("inspect"),
            MachineState::Running
        );
        driver.delete(&doomed).await.expect("deleted");
        // Unknown to the fleet: as its record says (here BUILDING, nostate).
        assert_eq!(
            driver
                .sync(std::slice::from_ref(&doomed))
                .await
                .expect("sync"),
            vec![(doomed.uuid, MachinePower::Missing)]
        );
    }

    #[test]
    fn metadata_sets_the_build_time_within_a_limit() {
        let driver = SimulatedDriver::new(SimulatedComputeConfig::default()).expect("valid");
        let slow = instance("web-1", &[(SIMULATE_BUILD_MS_KEY, "60000")]);
        assert_eq!(
            driver.latency(InstanceTask::Build, &slow),
            Duration::from_secs(60)
        );
        let absurd = instance("web-1", &[(SIMULATE_BUILD_MS_KEY, "999999999999")]);
        assert_eq!(
            driver.latency(InstanceTask::Build, &absurd),
            MAX_SIMULATED_BUILD
        );
        let garbled = instance("web-1", &[(SIMULATE_BUILD_MS_KEY, "soon")]);
        assert_eq!(
            driver.latency(InstanceTask::Build, &garbled),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn a_bad_pattern_is_refused_naming_the_key() {
        let error = validate_failure_pattern("(").expect_err("invalid");
        assert!(
            error.starts_with("engine.compute.fail_builds_matching"),
            "{error}"
        );
    }
}
