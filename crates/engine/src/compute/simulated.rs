//! The simulated compute driver: every call takes a configurable time and
//! then succeeds — or fails, when asked to, so failures can be tested end to
//! end without hardware.
//!
//! Failure injection, per instance through its metadata:
//! - `ember:simulate_failure` = a comma-separated list of tasks that fail
//!   (`build`, `power_on`, `power_off`, `reboot`, `delete`, or `all`);
//! - `ember:simulate_build_ms` = how long this instance's build takes;
//!
//! and for the whole engine through configuration:
//! `engine.compute.fail_builds_matching`, a regular expression; builds of
//! instances whose name matches it fail.

use std::time::Duration;

use async_trait::async_trait;
use regex::Regex;

use super::{ComputeDriver, ComputeError};
use crate::domain::instance::{Instance, InstanceTask};

/// Metadata key listing the tasks that fail for this instance.
pub const SIMULATE_FAILURE_KEY: &str = "ember:simulate_failure";
/// Metadata key overriding this instance's build time, in milliseconds.
pub const SIMULATE_BUILD_MS_KEY: &str = "ember:simulate_build_ms";
/// The longest build time metadata may ask for.
pub const MAX_SIMULATED_BUILD: Duration = Duration::from_secs(3600);

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

pub struct SimulatedDriver {
    config: SimulatedComputeConfig,
    fail_builds_matching: Option<Regex>,
}

impl SimulatedDriver {
    pub fn new(config: SimulatedComputeConfig) -> Result<SimulatedDriver, String> {
        let fail_builds_matching = compile_pattern(&config.fail_builds_matching)?;
        Ok(SimulatedDriver {
            config,
            fail_builds_matching,
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
}

#[async_trait]
impl ComputeDriver for SimulatedDriver {
    fn name(&self) -> &'static str {
        "simulated"
    }

    async fn build(&self, instance: &Instance) -> Result<(), ComputeError> {
        self.simulate(InstanceTask::Build, instance).await
    }

    async fn power_on(&self, instance: &Instance) -> Result<(), ComputeError> {
        self.simulate(InstanceTask::PowerOn, instance).await
    }

    async fn power_off(&self, instance: &Instance) -> Result<(), ComputeError> {
        self.simulate(InstanceTask::PowerOff, instance).await
    }

    async fn reboot(&self, instance: &Instance) -> Result<(), ComputeError> {
        self.simulate(InstanceTask::Reboot, instance).await
    }

    async fn delete(&self, instance: &Instance) -> Result<(), ComputeError> {
        self.simulate(InstanceTask::Delete, instance).await
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
                super::super::run_task(&driver, task, &healthy).await,
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
        assert!(driver.build(&flaky).await.is_ok());
        let broken = instance("web-1", &[(SIMULATE_FAILURE_KEY, "all")]);
        assert!(driver.power_on(&broken).await.is_err());
    }

    #[tokio::test]
    async fn builds_of_matching_names_fail() {
        let driver = SimulatedDriver::new(instant()).expect("valid");
        let error = driver
            .build(&instance("doomed-1", &[]))
            .await
            .expect_err("fails");
        assert!(error.0.contains("fail_builds_matching"), "{error}");
        assert!(driver.power_on(&instance("doomed-1", &[])).await.is_ok());
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
