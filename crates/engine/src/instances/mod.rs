//! The instance service: what every entry point (gRPC, and stack resources
//! such as `OS::Nova::Server` in-process) calls to create, read, change,
//! power, delete, lock and unlock instances on behalf of a caller.
//!
//! Each change is read → decided by [`policy::decide`] (the one place the
//! ownership and maintenance-lock rules live) → written with a conditional
//! update on the revision it was decided on. If another change landed in
//! between, the request is decided again on the new state, so a lock placed
//! concurrently is never bypassed. Driver work then runs in the background
//! ([`tasks::TaskRunner`]), and a watcher ([`watch::MachineWatcher`])
//! records what the machines really do. A lock with an expiry is lifted by
//! every engine's sweep ([`InstanceService::lift_expired_locks`]) once its
//! time has come, with a `lock_expired` event.

pub mod tasks;
pub mod wait;
pub mod watch;

use std::sync::Arc;

use ember_runtime::Identity;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};
use uuid::Uuid;

use crate::compute::flavors::FlavorTable;
use crate::compute::simulated::SimulatedComputeConfig;
use crate::compute::{ComputeConfig, ComputeDriver};
use crate::domain::audit::AuditOutcome;
use crate::domain::instance::observation::Observation;
use crate::domain::instance::policy::{self, Decision, InstanceRequest};
use crate::domain::instance::{
    Instance, InstanceChanges, InstanceStatus, MaintenanceLock, NewInstance, PowerAction,
};
use crate::error::{Error, Result};
use crate::store::instances::{
    ExpiredInstanceLock, InstanceEvent, InstanceListQuery, InstanceStore, MAX_EVENTS_LISTED,
};

/// How many times a request is decided again when the instance keeps
/// changing under it before the caller is told to retry.
pub const DECISION_ATTEMPTS: u32 = 5;

/// Which instances to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceFilter {
    /// Only this status (instances whose delete completed are never
    /// listed).
    pub status: Option<InstanceStatus>,
    pub locked: Option<bool>,
    /// Exact name.
    pub name: Option<String>,
    /// 0 = the default page size (100); at most 1000.
    pub limit: u32,
    /// Uuid of the last instance of the previous page.
    pub marker: Option<Uuid>,
    /// Every project's instances (admins only).
    pub all_projects: bool,
}

/// A page of instances and the marker of the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstancePage {
    pub instances: Vec<Instance>,
    /// Set when the page is full: pass it as the next `marker`.
    pub next_marker: Option<Uuid>,
}

/// What a lock request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOutcome {
    pub instance: Instance,
    /// The lock the instance had before the request (`None`: the request
    /// placed the only lock, so whoever asked may lift it later).
    pub previous_lock: Option<MaintenanceLock>,
}

/// A request that was applied: the instance before and after.
struct Applied {
    before: Instance,
    after: Instance,
}

pub struct InstanceService {
    store: Arc<dyn InstanceStore>,
    driver: Arc<dyn ComputeDriver>,
    flavors: FlavorTable,
    tasks: tasks::TaskRunner,
    /// The quotas every create is checked against (none in unit tests).
    quotas: Option<Arc<crate::quotas::Quotas>>,
    /// The audit trail of locks, refusals and admins acting through locks.
    audit: crate::audit::Auditing,
    /// Machines found in another state than recorded (see `watch`).
    observed: tokio::sync::broadcast::Sender<Observation>,
    /// The cloud of the openstack backend: instances act on it through a
    /// delegation (their own, or their stack's or cluster's).
    cloud: Option<Arc<crate::cloud::OpenStackCloud>>,
}

/// What an instance service checks against, records in and acts on,
/// given when it is made: its lock-expiry sweep starts with it, and a lock
/// even the first sweep lifts is recorded. The default has none of them,
/// as unit tests want.
#[derive(Default)]
pub struct InstanceSettings {
    /// The quotas every create is checked against; `None` checks none.
    pub quotas: Option<Arc<crate::quotas::Quotas>>,
    /// Where locks, refusals and admins acting through locks are
    /// recorded; `None` records nothing.
    pub audit: Option<Arc<crate::audit::AuditTrail>>,
    /// The cloud of the openstack backend: instances act on it through a
    /// delegation, and one made through the API gets a trust of its own;
    /// `None` on the other backends.
    pub cloud: Option<Arc<crate::cloud::OpenStackCloud>>,
}

/// How many observations wait for a slow subscriber.
const OBSERVATION_BUFFER: usize = 1024;

/// The most expired instance locks one sweep lifts (the next takes the
/// rest).
const EXPIRED_LOCKS_PER_SWEEP: u64 = 500;

/// How many machines' expired locks are lifted at once (a cloud call each
/// with the openstack backend).
const MACHINE_UNLOCKS_AT_ONCE: usize = 16;

impl InstanceService {
    /// Driver tasks stop when `shutdown` is cancelled; call
    /// [`InstanceService::resume_unfinished_tasks`] at start-up to pick up
    /// the ones a previous run left in progress. Any flavor name is
    /// accepted, nothing watches the machines (see
    /// [`InstanceService::start_with`]), and nothing is checked against
    /// quotas or recorded in an audit trail.
    pub fn new(
        store: Arc<dyn InstanceStore>,
        driver: Arc<dyn ComputeDriver>,
        shutdown: CancellationToken,
    ) -> InstanceService {
        InstanceService::configured(
            store,
            driver,
            FlavorTable::accepting_any(),
            InstanceSettings::default(),
            shutdown,
        )
    }

    /// Like [`InstanceService::new`], accepting only `flavors`, with what
    /// `settings` give.
    pub fn configured(
        store: Arc<dyn InstanceStore>,
        driver: Arc<dyn ComputeDriver>,
        flavors: FlavorTable,
        settings: InstanceSettings,
        shutdown: CancellationToken,
    ) -> InstanceService {
        let InstanceSettings {
            quotas,
            audit,
            cloud,
        } = settings;
        InstanceService {
            tasks: tasks::TaskRunner::new(store.clone(), driver.clone(), flavors.clone(), shutdown),
            store,
            driver,
            flavors,
            quotas,
            audit: crate::audit::Auditing::new(audit),
            observed: tokio::sync::broadcast::channel(OBSERVATION_BUFFER).0,
            cloud,
        }
    }

    /// The service on the simulated driver configured by `compute` (see
    /// [`InstanceService::start_with`]).
    pub async fn start(
        store: Arc<dyn InstanceStore>,
        compute: &SimulatedComputeConfig,
        shutdown: CancellationToken,
    ) -> std::result::Result<Arc<InstanceService>, String> {
        InstanceService::start_with(
            store,
            &ComputeConfig::simulated(compute.clone()),
            InstanceSettings::default(),
            shutdown,
        )
        .await
    }

    /// The service as the engine runs it: on the configured driver, with
    /// what `settings` give, the tasks a previous run left in progress
    /// resumed and a watcher following the machines until `shutdown`.
    /// Fails only on a bad configuration.
    pub async fn start_with(
        store: Arc<dyn InstanceStore>,
        compute: &ComputeConfig,
        settings: InstanceSettings,
        shutdown: CancellationToken,
    ) -> std::result::Result<Arc<InstanceService>, String> {
        InstanceService::start_with_driver(store, compute.driver()?, compute, settings, shutdown)
            .await
    }

    /// [`InstanceService::start_with`] on a driver made by the caller (the
    /// openstack driver is made with its cloud), with what `settings` give
    /// from the start: the expiry sweep begins here, and a lock it lifts
    /// must be recorded in the trail.
    pub async fn start_with_driver(
        store: Arc<dyn InstanceStore>,
        driver: Arc<dyn ComputeDriver>,
        compute: &ComputeConfig,
        settings: InstanceSettings,
        shutdown: CancellationToken,
    ) -> std::result::Result<Arc<InstanceService>, String> {
        let service = Arc::new(InstanceService::configured(
            store,
            driver,
            compute.flavors.clone(),
            settings,
            shutdown.clone(),
        ));
        // A database that is down now fails the first requests too; the
        // tasks are resumed at the next start.
        match service.resume_unfinished_tasks().await {
            Ok(0) => {}
            Ok(resumed) => info!(resumed, "resumed unfinished instance tasks"),
            Err(failure) => warn!(%failure, "cannot resume unfinished instance tasks"),
        }
        Arc::new(service.watcher(compute.resync_interval)).spawn(shutdown.clone());
        service.spawn_lock_expiry(shutdown);
        info!(driver = service.driver.name(), "compute driver ready");
        Ok(service)
    }

    /// A watcher of this service's machines (started by
    /// [`InstanceService::start_with`]; tests drive one by hand).
    pub fn watcher(&self, resync_interval: std::time::Duration) -> watch::MachineWatcher {
        watch::MachineWatcher::new(
            self.store.clone(),
            self.driver.clone(),
            resync_interval,
            self.observed.clone(),
        )
    }

    /// Every instance whose task ends in this engine, from now on (see
    /// `tasks::TaskRunner::subscribe_settled`).
    pub fn subscribe_settled(&self) -> tokio::sync::broadcast::Receiver<Uuid> {
        self.tasks.subscribe_settled()
    }

    /// Every machine found in another state than recorded, from now on.
    pub fn subscribe_observations(&self) -> tokio::sync::broadcast::Receiver<Observation> {
        self.observed.subscribe()
    }

    /// Refuses a flavor this cloud does not have (400 naming the known
    /// ones).
    pub fn check_flavor(&self, flavor: &str) -> Result<()> {
        self.flavors.resolve(flavor).map(|_| ())
    }

    /// The compute driver's name.
    /// The simulated cloud behind the driver's machines, on the simulated
    /// backend (see [`ComputeDriver::simulated_cloud`]).
    pub fn simulated_cloud(&self) -> Option<Arc<crate::cloud::simulated::SimulatedCloud>> {
        self.driver.simulated_cloud()
    }

    /// The container engine behind the driver's machines, on the docker
    /// backend (see [`ComputeDriver::docker_engine`]).
    pub fn docker_engine(&self) -> Option<Arc<crate::compute::docker::DockerEngine>> {
        self.driver.docker_engine()
    }

    pub fn driver_name(&self) -> &'static str {
        self.driver.name()
    }

    /// The delegation a stack's instances act through (its root's), when
    /// instances act on a cloud.
    pub async fn stack_delegation(
        &self,
        stack_id: Uuid,
    ) -> Result<Option<crate::domain::delegation::Delegation>> {
        match self.cloud.as_ref() {
            Some(cloud) => cloud.stack_delegation(stack_id).await.map(Some),
            None => Ok(None),
        }
    }

    async fn admit_one_more(&self, caller: &Identity) -> Result<()> {
        match self.quotas.as_ref() {
            Some(quotas) => {
                quotas
                    .admit(
                        &caller.project_id,
                        crate::domain::quota::QuotaKind::Instances,
                        crate::store::quotas::Usage::Instances,
                        1,
                    )
                    .await
            }
            None => Ok(()),
        }
    }

    /// Records a BUILDING instance of the caller's project and starts
    /// building it.
    pub async fn create(&self, caller: &Identity, new: NewInstance) -> Result<Instance> {
        self.create_delegating(caller, None, new).await
    }

    /// [`Self::create`] for a caller who came with their Keystone token:
    /// on a cloud the instance gets a trust of its own from the caller,
    /// which its driver acts through (and deletes with it).
    pub async fn create_delegating(
        &self,
        caller: &Identity,
        subject_token: Option<&ember_runtime::identity::SubjectToken>,
        mut new: NewInstance,
    ) -> Result<Instance> {
        policy::refuse_read_only(caller, "create")?;
        crate::domain::instance::validate_text("flavor", &new.flavor)?;
        self.check_flavor(&new.flavor)?;
        self.check_placement(&new)?;
        self.admit_one_more(caller).await?;
        let mut instance = Instance::new_building(
            &caller.project_id,
            &caller.user_id,
            new.clone(),
            ember_runtime::time::now(),
        )?;
        let owner = crate::domain::delegation::DelegationOwner::Instance(instance.uuid);
        let cloud = self.cloud.as_ref().filter(|_| new.delegation.is_none());
        if let Some(cloud) = cloud {
            new.delegation = Some(cloud.delegate(owner, caller, subject_token).await?);
            instance.delegation = new.delegation.clone();
        }
        if let Err(error) = self.store.insert_instance(&instance).await {
            if let Some(cloud) = cloud
                && let Err(revoking) = cloud.revoke(owner, subject_token).await
            {
                warn!(%revoking, "a refused instance's delegation stays recorded");
            }
            return Err(error);
        }
        self.start_building(caller, &instance);
        Ok(instance)
    }

    /// Refuses what the driver cannot honour of a new instance's placement.
    fn check_placement(&self, new: &NewInstance) -> Result<()> {
        self.driver
            .check_placement(&new.placement)
            .map_err(Error::InvalidInput)
    }

    /// Whether a change of an instance's networks replugs its machine in
    /// place (else whoever asks replaces the instance).
    pub fn replugs_in_place(&self) -> bool {
        self.driver.replugs_in_place()
    }

    async fn replug(&self, next: &Instance) -> Result<()> {
        if !self.driver.replugs_in_place() {
            return Err(Error::InvalidInput(format!(
                "{}: the {} driver cannot change a machine's networks in place",
                next.label(),
                self.driver.name()
            )));
        }
        self.driver
            .check_placement(&next.placement)
            .map_err(Error::InvalidInput)?;
        self.driver
            .replug(next)
            .await
            .map_err(|error| Error::Unavailable(format!("cannot replug {}: {error}", next.label())))
    }

    /// Takes the ports the instance was given off its machine, for a
    /// replacement to take (see [`ComputeDriver::release_ports`]).
    pub async fn release_ports(&self, caller: &Identity, uuid: Uuid) -> Result<()> {
        let instance = self.get(caller, uuid).await?;
        self.driver
            .release_ports(&instance)
            .await
            .map_err(|error| Error::Unavailable(format!("{}: {error}", instance.label())))
    }

    /// What the cloud shows of the instance's machine (its id there, its
    /// addresses), when the driver knows more than the record.
    pub async fn machine_details(
        &self,
        caller: &Identity,
        uuid: Uuid,
    ) -> Result<Option<crate::compute::MachineDetails>> {
        let instance = self.get(caller, uuid).await?;
        self.driver
            .details(&instance)
            .await
            .map_err(|error| Error::Unavailable(format!("{}: {error}", instance.label())))
    }

    /// Logs a newly recorded instance and starts its build task.
    fn start_building(&self, caller: &Identity, instance: &Instance) {
        info!(
            instance_uuid = %instance.uuid,
            name = %instance.name,
            project_id = %instance.project_id,
            user_id = %caller.user_id,
            "instance created"
        );
        self.tasks.start(
            crate::domain::instance::InstanceTask::Build,
            instance.clone(),
        );
    }

    /// Creates the instance with `uuid` unless it exists, so a caller that
    /// runs again (a cluster action taken over after its engine died) finds
    /// what it created instead of creating another: an existing instance
    /// of the caller's project is returned as it is. An instance with this
    /// uuid that was deleted is not created again (409).
    pub async fn create_with_uuid(
        &self,
        caller: &Identity,
        uuid: Uuid,
        new: NewInstance,
    ) -> Result<Instance> {
        policy::refuse_read_only(caller, "create")?;
        crate::domain::instance::validate_text("flavor", &new.flavor)?;
        self.check_flavor(&new.flavor)?;
        self.check_placement(&new)?;
        if self.store.get_instance(uuid).await?.is_none() {
            self.admit_one_more(caller).await?;
        }
        let mut instance = Instance::new_building(
            &caller.project_id,
            &caller.user_id,
            new,
            ember_runtime::time::now(),
        )?;
        instance.uuid = uuid;
        if self.store.insert_instance_if_absent(&instance).await? {
            self.start_building(caller, &instance);
            return Ok(instance);
        }
        match self.store.get_instance(uuid).await? {
            Some(existing) if policy::Access::of(caller, &existing).is_some() => Ok(existing),
            Some(_) => Err(Error::Conflict(format!(
                "instance uuid {uuid} is taken by another project's instance"
            ))),
            None => Err(Error::Conflict(format!(
                "instance {uuid} was deleted: it is not created again"
            ))),
        }
    }

    /// Continues the driver task `uuid` was left in by an engine that
    /// went away (still BUILDING, DELETING, …), unless this engine runs
    /// one of its tasks already: a stack step taken over from that engine
    /// waits for the instance to settle, and someone must be settling it
    /// (an engine only resumes the tasks left unfinished when it starts).
    /// Returns the instance as it is; not found once its delete completed.
    pub async fn continue_unfinished_task(
        &self,
        caller: &Identity,
        uuid: Uuid,
    ) -> Result<Instance> {
        let instance = self.get(caller, uuid).await?;
        self.tasks.continue_unfinished(instance.clone());
        Ok(instance)
    }

    /// Who instance `uuid` belongs to (its creator, as a member of its
    /// project); `None` when there is no such instance or its delete
    /// completed. Only for the engine acting on an instance whose uuid it
    /// derived itself (a stack resource whose create was taken over from
    /// an engine that went away before recording the owner): no API reads
    /// it.
    pub(crate) async fn owner_of(&self, uuid: Uuid) -> Result<Option<Identity>> {
        Ok(self.store.get_instance(uuid).await?.map(|instance| {
            Identity::new(
                instance.user_id,
                instance.project_id,
                vec!["member".to_owned()],
            )
        }))
    }

    /// One instance the caller can see; one whose delete completed is not
    /// found.
    pub async fn get(&self, caller: &Identity, uuid: Uuid) -> Result<Instance> {
        match self.store.get_instance(uuid).await? {
            Some(instance) if policy::Access::of(caller, &instance).is_some() => Ok(instance),
            _ => Err(policy::not_found(uuid)),
        }
    }

    /// The instance after comparing it with its machine now (a check reads
    /// the real state, not the last resync's): a machine that died or was
    /// removed behind Ember's back is recorded first.
    pub async fn refresh(&self, caller: &Identity, uuid: Uuid) -> Result<Instance> {
        self.get(caller, uuid).await?;
        if let Err(failure) = self
            .watcher(crate::compute::DEFAULT_RESYNC_INTERVAL)
            .reconcile_one(uuid)
            .await
        {
            return Err(Error::Unavailable(format!(
                "cannot read instance {uuid}'s machine: {failure}"
            )));
        }
        self.get(caller, uuid).await
    }

    /// What happened to the instance's machine (task outcomes and
    /// observations), oldest first: at most `limit` of the newest (0 = the
    /// most kept listable).
    pub async fn events(
        &self,
        caller: &Identity,
        uuid: Uuid,
        limit: u64,
    ) -> Result<Vec<InstanceEvent>> {
        let instance = self.get(caller, uuid).await?;
        let limit = match limit {
            0 => MAX_EVENTS_LISTED,
            limit => limit.min(MAX_EVENTS_LISTED),
        };
        self.store.list_instance_events(instance.uuid, limit).await
    }

    /// A page of the caller's project's instances (every project's with
    /// `all_projects`, for admins), newest first.
    pub async fn list(&self, caller: &Identity, filter: &InstanceFilter) -> Result<InstancePage> {
        if filter.all_projects && !caller.is_admin() {
            return Err(Error::Forbidden(
                "all_projects: only admins list every project's instances".to_owned(),
            ));
        }
        if let Some(name) = &filter.name {
            crate::domain::instance::validate_text("name", name)?;
        }
        let query = InstanceListQuery {
            project_id: (!filter.all_projects).then(|| caller.project_id.clone()),
            status: filter.status,
            locked: filter.locked,
            name: filter.name.clone(),
            limit: filter.limit,
            marker: filter.marker,
        };
        let instances = self.store.list_instances(&query).await?;
        let next_marker = if instances.len() == query.page_size() as usize {
            instances.last().map(|instance| instance.uuid)
        } else {
            None
        };
        Ok(InstancePage {
            instances,
            next_marker,
        })
    }

    /// Renames the instance and/or replaces its metadata.
    pub async fn update(
        &self,
        caller: &Identity,
        uuid: Uuid,
        changes: InstanceChanges,
    ) -> Result<Instance> {
        let applied = self
            .apply(caller, uuid, InstanceRequest::Update(changes))
            .await?;
        Ok(applied.after)
    }

    /// Starts deleting the instance: DELETING, then, once the driver is
    /// done, gone (not found, as in Nova: clients wait for the 404).
    pub async fn delete(&self, caller: &Identity, uuid: Uuid) -> Result<Instance> {
        Ok(self
            .apply(caller, uuid, InstanceRequest::Delete)
            .await?
            .after)
    }

    /// Starts a power action.
    pub async fn power(
        &self,
        caller: &Identity,
        uuid: Uuid,
        action: PowerAction,
    ) -> Result<Instance> {
        Ok(self
            .apply(caller, uuid, InstanceRequest::Power(action))
            .await?
            .after)
    }

    /// Places a maintenance lock (`locked_by` owner or admin as the caller
    /// is); an owner locking a locked instance changes nothing.
    pub async fn lock(
        &self,
        caller: &Identity,
        uuid: Uuid,
        reason: Option<String>,
    ) -> Result<LockOutcome> {
        self.lock_until(caller, uuid, reason, None).await
    }

    /// [`Self::lock`], the lock expiring at `expires_at` (the engine lifts
    /// it then); on a locked instance, renews its lock until then (its
    /// holder, or an admin).
    pub async fn lock_until(
        &self,
        caller: &Identity,
        uuid: Uuid,
        reason: Option<String>,
        expires_at: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<LockOutcome> {
        let applied = self
            .apply(caller, uuid, InstanceRequest::Lock { reason, expires_at })
            .await?;
        Ok(LockOutcome {
            previous_lock: applied.before.maintenance_lock,
            instance: applied.after,
        })
    }

    /// Lifts the maintenance lock.
    pub async fn unlock(&self, caller: &Identity, uuid: Uuid) -> Result<Instance> {
        Ok(self
            .apply(caller, uuid, InstanceRequest::Unlock)
            .await?
            .after)
    }

    /// The dry run ("allowed?"): everything that would refuse `operation`
    /// (delete, update, power_on, power_off, reboot, lock, unlock) on the
    /// instance now, decided by the function the operation asks
    /// (`policy::decide` refuses with the first); empty when it would be
    /// accepted. An update is asked as one that renames the instance to
    /// its own name.
    pub async fn check_operation(
        &self,
        caller: &Identity,
        uuid: Uuid,
        operation: &str,
    ) -> Result<Vec<crate::domain::admission::Blocker>> {
        let instance = self
            .store
            .get_instance(uuid)
            .await?
            .ok_or_else(|| policy::not_found(uuid))?;
        let request = match operation {
            "delete" => InstanceRequest::Delete,
            "update" => InstanceRequest::Update(crate::domain::instance::InstanceChanges {
                name: Some(instance.name.clone()),
                metadata: None,
                networks: None,
            }),
            "power_on" => InstanceRequest::Power(PowerAction::On),
            "power_off" => InstanceRequest::Power(PowerAction::Off),
            "reboot" => InstanceRequest::Power(PowerAction::Reboot),
            "lock" => InstanceRequest::Lock {
                reason: None,
                expires_at: None,
            },
            "unlock" => InstanceRequest::Unlock,
            other => {
                return Err(Error::InvalidInput(format!(
                    "operation {other:?} is not one an instance dry run answers for: \
                     delete, update, power_on, power_off, reboot, lock, unlock"
                )));
            }
        };
        let blockers = policy::blockers(caller, &instance, &request, ember_runtime::time::now());
        match blockers.first() {
            Some(first) if first.kind == crate::domain::admission::BlockerKind::NotFound => {
                Err(first.error.clone())
            }
            _ => Ok(blockers),
        }
    }

    /// Lifts every instance lock whose expiry has passed (the machines'
    /// own locks first, a few at a time, then the records, with a
    /// `lock_expired` event and an audit record each, in one transaction);
    /// returns how many this engine lifted — a lock an unlock, a renewal
    /// or another engine's sweep changed first is left to that.
    pub async fn lift_expired_locks(&self) -> Result<usize> {
        use futures::StreamExt;
        let now = ember_runtime::time::now();
        let expired = self
            .store
            .expired_instance_locks(now, EXPIRED_LOCKS_PER_SWEEP)
            .await?;
        let lifts: Vec<ExpiredInstanceLock> = futures::stream::iter(expired)
            .map(|instance| async move {
                let lock = instance.maintenance_lock.clone()?;
                if let Err(error) = self.driver.unlock(&instance, &lock).await {
                    warn!(instance_uuid = %instance.uuid, %error, "cannot lift an expired instance lock on its machine");
                    return None;
                }
                let mut next = instance.next_revision(now);
                next.maintenance_lock = None;
                // Written with the lift: a crash leaves both or neither.
                let audit = self.audit.get().map(|_| {
                    crate::audit::AuditTrail::record_of(
                        &lock.user_id,
                        &audit_subject(&instance),
                        "unlock",
                        AuditOutcome::Expired,
                        &lock.describe(),
                        "",
                    )
                });
                Some(ExpiredInstanceLock {
                    next,
                    reason: format!("lock expired (was {})", lock.describe()),
                    audit,
                })
            })
            .buffer_unordered(MACHINE_UNLOCKS_AT_ONCE)
            .filter_map(std::future::ready)
            .collect()
            .await;
        let lifted = self.store.expire_instance_locks(&lifts).await?;
        for instance_uuid in &lifted {
            info!(%instance_uuid, "instance lock expired and lifted");
        }
        Ok(lifted.len())
    }

    /// Lifts expired locks until `shutdown` (see `lock_expiry::spawn_sweep`).
    fn spawn_lock_expiry(self: &Arc<Self>, shutdown: CancellationToken) {
        crate::lock_expiry::spawn_sweep(
            self,
            shutdown,
            "instance locks",
            |service| async move { service.lift_expired_locks().await },
            |service| async move { service.store.next_instance_lock_expiry().await },
        );
    }

    /// Restarts the driver tasks a previous run left in progress.
    pub async fn resume_unfinished_tasks(&self) -> Result<usize> {
        self.tasks.resume_unfinished().await
    }

    /// Waits for running driver tasks to finish or be abandoned (after the
    /// shutdown token is cancelled).
    pub async fn drain(&self) {
        self.tasks.drain().await;
    }

    async fn apply(
        &self,
        caller: &Identity,
        uuid: Uuid,
        request: InstanceRequest,
    ) -> Result<Applied> {
        for _ in 0..DECISION_ATTEMPTS {
            let instance = self
                .store
                .get_instance(uuid)
                .await?
                .ok_or_else(|| policy::not_found(uuid))?;
            let now = ember_runtime::time::now();
            let decided = policy::decide(caller, &instance, &request, now);
            let asked = crate::audit::Asked {
                caller,
                operation: request.verb(),
            };
            if let Err(refusal) = &decided {
                self.audit
                    .refused(asked, &audit_subject(&instance), refusal)
                    .await;
            }
            let (next, task, overridden_lock) = match decided? {
                Decision::Unchanged => {
                    return Ok(Applied {
                        before: instance.clone(),
                        after: instance,
                    });
                }
                Decision::Change {
                    next,
                    task,
                    overridden_lock,
                } => (*next, task, overridden_lock),
            };
            // Nova lets an admin act on a locked instance: recorded before
            // anything is done (and nothing is, unless it is recorded).
            if let Some(lock) = &overridden_lock {
                self.audit
                    .broke_through(
                        asked,
                        &audit_subject(&instance),
                        &policy::locked_error(&instance, lock).to_string(),
                    )
                    .await?;
            }
            // The machine's own lock (Nova's) is placed before the record
            // says locked and lifted before it says unlocked: a failure
            // leaves the record as it was, and doing either again is
            // harmless.
            match (&request, &next.maintenance_lock, &instance.maintenance_lock) {
                (InstanceRequest::Lock { .. }, Some(lock), _) => {
                    self.driver.lock(&next, lock).await.map_err(|error| {
                        Error::Unavailable(format!("cannot lock {}: {error}", next.label()))
                    })?;
                }
                (InstanceRequest::Unlock, None, Some(lock)) => {
                    self.driver.unlock(&instance, lock).await.map_err(|error| {
                        Error::Unavailable(format!("cannot unlock {}: {error}", instance.label()))
                    })?;
                }
                (InstanceRequest::Update(_), _, _) => {
                    self.driver.apply_details(&next).await.map_err(|error| {
                        Error::Unavailable(format!("cannot update {}: {error}", next.label()))
                    })?;
                    // The record says the new networks only once the
                    // machine has them (replugging again is harmless).
                    if next.placement.networks != instance.placement.networks {
                        self.replug(&next).await?;
                    }
                }
                _ => {}
            }
            let written = match &request {
                InstanceRequest::Lock { .. } => self.store.lock_instance(&next).await?,
                InstanceRequest::Unlock => self.store.unlock_instance(&next).await?,
                InstanceRequest::Update(_) => self.store.update_instance_details(&next).await?,
                InstanceRequest::Delete | InstanceRequest::Power(_) => {
                    self.store.start_instance_task(&next).await?
                }
            };
            if !written {
                continue;
            }
            if let Some(lock) = overridden_lock {
                warn!(
                    instance_uuid = %uuid,
                    action = request.verb(),
                    user_id = %caller.user_id,
                    project_id = %caller.project_id,
                    locked_by = lock.locked_by.as_str(),
                    lock_user = %lock.user_id,
                    lock_reason = lock.reason.as_deref().unwrap_or(""),
                    "admin acted on a locked instance"
                );
            }
            info!(
                instance_uuid = %uuid,
                action = request.verb(),
                user_id = %caller.user_id,
                status = next.status.as_str(),
                locked = next.is_locked(),
                "instance changed"
            );
            if let InstanceRequest::Lock { reason, .. } = &request {
                self.audit
                    .record(
                        &caller.user_id,
                        &audit_subject(&next),
                        "lock",
                        AuditOutcome::Accepted,
                        reason.as_deref().unwrap_or_default(),
                        "",
                    )
                    .await;
            }
            if let (InstanceRequest::Unlock, Some(lock)) = (&request, &instance.maintenance_lock) {
                self.audit
                    .record(
                        &caller.user_id,
                        &audit_subject(&next),
                        "unlock",
                        AuditOutcome::Accepted,
                        lock.reason.as_deref().unwrap_or_default(),
                        "",
                    )
                    .await;
            }
            if let Some(task) = task {
                self.tasks.start(task, next.clone());
            }
            return Ok(Applied {
                before: instance,
                after: next,
            });
        }
        Err(Error::Conflict(format!(
            "instance {uuid} kept changing while this {} was decided ({DECISION_ATTEMPTS} attempts): retry",
            request.verb()
        )))
    }
}

/// What the audit trail says a record about `instance` is about.
fn audit_subject(instance: &Instance) -> crate::domain::audit::AuditSubject {
    crate::domain::audit::AuditSubject {
        target: crate::domain::audit::AuditTarget::Instance,
        id: instance.uuid.to_string(),
        name: instance.name.clone(),
        project_id: instance.project_id.clone(),
    }
}
