//! Runs driver tasks in the background and records their outcomes.
//!
//! A task starts after the instance's in-progress state is written, so a
//! crash at any point leaves a state [`TaskRunner::resume_unfinished`] can
//! pick up at the next start. The outcome is written only if the instance is
//! still in that in-progress state (a delete that came meanwhile wins).
//! Recording retries while the database is unavailable, with backoff, up to
//! [`RECORD_ATTEMPTS`]; after that the instance stays in progress until the
//! next start resumes it.
//!
//! Tasks of one instance run one after another, never at once: a delete
//! that arrives while the build is still making the machine waits for it,
//! then removes what it made — a real machine is never left behind by a
//! build that finished after its delete.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{error, info, warn};

use uuid::Uuid;

use crate::compute::flavors::FlavorTable;
use crate::compute::{BuildAttempt, ComputeDriver, ComputeError, run_task};
use crate::domain::instance::{Instance, InstanceTask};
use crate::error::{Error, Result};
use crate::store::instances::{InstanceStore, TaskOutcome};

/// How many times an outcome is written before giving up until restart.
pub const RECORD_ATTEMPTS: u32 = 6;
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// One lock per instance with a task running or waiting.
type InstanceLocks = Arc<Mutex<HashMap<Uuid, Arc<tokio::sync::Mutex<()>>>>>;

/// How many tasks of each instance this runner has started and not yet
/// ended (waiting for their turn included).
type StartedTasks = Arc<Mutex<HashMap<Uuid, usize>>>;

#[derive(Clone)]
pub struct TaskRunner {
    store: Arc<dyn InstanceStore>,
    driver: Arc<dyn ComputeDriver>,
    flavors: FlavorTable,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    instance_locks: InstanceLocks,
    started: StartedTasks,
    /// The instances whose task ended here, as each outcome is recorded
    /// (see [`TaskRunner::subscribe_settled`]).
    settled: tokio::sync::broadcast::Sender<uuid::Uuid>,
}

/// How many ended tasks wait for a slow subscriber (one that falls behind
/// reads the instances again).
const SETTLED_BUFFER: usize = 1024;

impl TaskRunner {
    pub fn new(
        store: Arc<dyn InstanceStore>,
        driver: Arc<dyn ComputeDriver>,
        flavors: FlavorTable,
        shutdown: CancellationToken,
    ) -> TaskRunner {
        TaskRunner {
            store,
            driver,
            flavors,
            shutdown,
            tracker: TaskTracker::new(),
            instance_locks: InstanceLocks::default(),
            started: StartedTasks::default(),
            settled: tokio::sync::broadcast::channel(SETTLED_BUFFER).0,
        }
    }

    /// The uuid of every instance whose task ends in this engine from now
    /// on, sent once its outcome is recorded: who waits for an instance to
    /// settle reads it again then, instead of polling the database.
    pub fn subscribe_settled(&self) -> tokio::sync::broadcast::Receiver<uuid::Uuid> {
        self.settled.subscribe()
    }

    /// Runs `task` on the driver once no other task of the instance runs.
    async fn run_serialised(
        &self,
        task: InstanceTask,
        instance: &Instance,
        attempt: BuildAttempt,
    ) -> Result<(), ComputeError> {
        let lock = match self.instance_locks.lock() {
            Ok(mut locks) => locks.entry(instance.uuid).or_default().clone(),
            Err(_) => Arc::default(),
        };
        let result = async {
            let _turn = lock.lock().await;
            // Only a build applies the flavor (a flavor since removed from
            // the configuration does not stop a delete).
            let flavor = match task {
                InstanceTask::Build => self
                    .flavors
                    .resolve(&instance.flavor)
                    .map_err(|error| ComputeError(error.to_string()))?,
                _ => crate::compute::flavors::Flavor::UNLIMITED,
            };
            run_task(self.driver.as_ref(), task, instance, &flavor, attempt).await
        }
        .await;
        if let Ok(mut locks) = self.instance_locks.lock() {
            // Ours and the map's: nobody else waits on it.
            if Arc::strong_count(&lock) == 2 {
                locks.remove(&instance.uuid);
            }
        }
        result
    }

    /// Starts `task` for `instance` (already written in the task's
    /// in-progress state). On shutdown the call is abandoned and the
    /// instance stays in progress for the next start to resume.
    pub fn start(&self, task: InstanceTask, instance: Instance) {
        self.spawn(task, instance, BuildAttempt::First);
    }

    /// Restarts the task `instance` is left in (it is in that task's
    /// in-progress state) unless this runner runs one of its tasks already:
    /// the engine that started it went away (a stack step taken over from
    /// it finds the instance still building or being deleted). Returns
    /// whether it did. A task another live engine runs as well is harmless:
    /// the driver finds what was made (by the instance's id) and only the
    /// first outcome is recorded.
    pub fn continue_unfinished(&self, instance: Instance) -> bool {
        let Some(task) = instance.unfinished_task() else {
            return false;
        };
        // A poisoned map: assume it runs (a second task is harmless, but
        // not needed).
        let running_here = match self.started.lock() {
            Ok(started) => started.contains_key(&instance.uuid),
            Err(_) => true,
        };
        if running_here {
            return false;
        }
        info!(instance_uuid = %instance.uuid, task = task.as_str(), "continuing an instance task its engine left unfinished");
        self.spawn(task, instance, BuildAttempt::Resumed);
        true
    }

    fn spawn(&self, task: InstanceTask, instance: Instance, attempt: BuildAttempt) {
        let runner = self.clone();
        if let Ok(mut started) = self.started.lock() {
            *started.entry(instance.uuid).or_default() += 1;
        }
        let ended = TaskEnded {
            started: self.started.clone(),
            uuid: instance.uuid,
        };
        self.tracker.spawn(async move {
            let _ended = ended;
            let result = tokio::select! {
                () = runner.shutdown.cancelled() => return,
                result = runner.run_serialised(task, &instance, attempt) => result,
            };
            let (status, power_state) = match &result {
                Ok(()) => task.succeeded(),
                Err(_) => task.failed(),
            };
            let outcome = TaskOutcome {
                task,
                status,
                power_state,
                status_reason: match &result {
                    Ok(()) => String::new(),
                    Err(failure) => format!("{} failed: {failure}", task.as_str()),
                },
                at: ember_runtime::time::now(),
            };
            runner.record(&instance, &outcome).await;
            // Nobody listening is fine.
            let _ = runner.settled.send(instance.uuid);
        });
    }

    async fn record(&self, instance: &Instance, outcome: &TaskOutcome) {
        let mut pause = FIRST_RETRY_PAUSE;
        for attempt in 1..=RECORD_ATTEMPTS {
            match self.store.finish_instance_task(instance, outcome).await {
                Ok(true) => {
                    info!(
                        instance_uuid = %instance.uuid,
                        task = outcome.task.as_str(),
                        status = outcome.status.as_str(),
                        reason = %outcome.status_reason,
                        "instance task finished"
                    );
                    return;
                }
                Ok(false) => {
                    info!(
                        instance_uuid = %instance.uuid,
                        task = outcome.task.as_str(),
                        "instance task outcome dropped: the instance moved on meanwhile"
                    );
                    return;
                }
                Err(Error::DatabaseUnavailable(reason)) if attempt < RECORD_ATTEMPTS => {
                    warn!(instance_uuid = %instance.uuid, %reason, attempt, "retrying to record a task outcome");
                    tokio::select! {
                        () = self.shutdown.cancelled() => return,
                        () = tokio::time::sleep(pause) => {}
                    }
                    pause *= 2;
                }
                Err(failure) => {
                    error!(
                        instance_uuid = %instance.uuid,
                        task = outcome.task.as_str(),
                        %failure,
                        "cannot record a task outcome: the instance stays in progress until the engine restarts"
                    );
                    return;
                }
            }
        }
    }

    /// Restarts the driver task of every instance left in progress (by a
    /// crash or a shutdown). Returns how many were restarted.
    pub async fn resume_unfinished(&self) -> Result<usize> {
        let unfinished = self.store.list_unfinished_instances().await?;
        let mut resumed = 0;
        for instance in unfinished {
            if let Some(task) = instance.unfinished_task() {
                info!(instance_uuid = %instance.uuid, task = task.as_str(), driver = self.driver.name(), "resuming instance task");
                self.spawn(task, instance, BuildAttempt::Resumed);
                resumed += 1;
            }
        }
        Ok(resumed)
    }

    /// Waits until every started task has finished or been abandoned.
    pub async fn drain(&self) {
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// Counts a started task out when it ends, however it ends.
struct TaskEnded {
    started: StartedTasks,
    uuid: Uuid,
}

impl Drop for TaskEnded {
    fn drop(&mut self) {
        if let Ok(mut started) = self.started.lock()
            && let Some(count) = started.get_mut(&self.uuid)
        {
            *count = count.saturating_sub(1);
            if *count == 0 {
                started.remove(&self.uuid);
            }
        }
    }
}
