//! `ember bench lock-expiry`: the engine's expiry sweep at scale. 100,000
//! clusters (or instances, `--instances`, or stacks of one resource,
//! `--stacks`, whose expiries are UNLOCK operations) under a maintenance
//! lock (so the sweep's query runs over a large indexed table), of which
//! 1,000 expire at the same moment; the engine's own sweeps (with the audit trail) run
//! as in a deployment. Prints how long after the expiry the last of the
//! 1,000 was lifted, how long lifting them took, and checks that exactly
//! those were lifted, once each, with one audit record each.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use ember_engine::audit::AuditTrail;
use ember_engine::clusters::dispatcher;
use ember_engine::clusters::hooks::HookClient;
use ember_engine::clusters::{ClusterService, ClusterSettings};
use ember_engine::compute::ComputeConfig;
use ember_engine::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, ClusterEvent, ClusterLock, ClusterLockLevel,
    ClusterStatus,
};
use ember_engine::instances::{InstanceService, InstanceSettings};
use ember_engine::resources::ResourceTypeRegistry;
use ember_engine::stacks::{StackOperations, StackSettings};
use ember_engine::store::audit::SqlAuditStore;
use ember_engine::store::clusters::{ClusterStore, SqlClusterStore};
use ember_engine::store::instances::SqlInstanceStore;
use ember_engine::store::migrations::Migrator;
use ember_engine::store::{SqlStackStore, StackStore};
use ember_runtime::Identity;
use ember_runtime::database::{connect_and_migrate, statement};
use ember_runtime::identity::InternalCredential;
use futures::StreamExt;
use sea_orm::{ConnectionTrait, DatabaseConnection};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How long after setting them the 1,000 expire: the sweep is running by
/// then.
const EXPIRES_AFTER: Duration = Duration::from_secs(3);

/// What the locks are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Clusters,
    Instances,
    Stacks,
}

impl Target {
    fn table(self) -> &'static str {
        match self {
            Target::Clusters => "clusters",
            Target::Instances => "instances",
            Target::Stacks => "stacks",
        }
    }

    /// The SQL condition of a row still locked.
    fn locked(self) -> &'static str {
        match self {
            Target::Clusters => "maintenance_lock IS NOT NULL",
            Target::Instances => "locked",
            // Until its UNLOCK completes.
            Target::Stacks => "(lock_level IS NOT NULL OR status <> 'COMPLETE')",
        }
    }

    fn id_column(self) -> &'static str {
        match self {
            Target::Clusters | Target::Stacks => "id",
            Target::Instances => "uuid",
        }
    }
}

pub async fn run(
    target: Target,
    locks: usize,
    expiring: usize,
    postgres: Option<String>,
) -> Result<(), String> {
    let expiring = expiring.min(locks);
    if target == Target::Stacks && postgres.is_some() {
        return Err(
            "--stacks runs on a temporary SQLite database only (the stacks it makes are not cleaned from a PostgreSQL one)"
                .into(),
        );
    }
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let url = match &postgres {
        Some(url) => url.clone(),
        None => format!(
            "sqlite://{}?mode=rwc",
            data_dir.path().join("engine.db").display()
        ),
    };
    let connection = connect_and_migrate::<Migrator>(&url)
        .await
        .map_err(|error| format!("{url}: {error}"))?;
    if postgres.is_some() {
        for table in [
            "audit_records",
            "cluster_events",
            "cluster_actions",
            "clusters",
            "instance_events",
            "instances",
        ] {
            connection
                .execute_unprepared(&format!(
                    "DELETE FROM {table} WHERE project_id = 'bench-expiry'"
                ))
                .await
                .map_err(|error| error.to_string())?;
        }
    }
    let store: Arc<dyn ClusterStore> = Arc::new(SqlClusterStore::new(connection.clone()));
    let table = target.table();
    println!(
        "lock expiry on {}: {locks} locked {table}, {expiring} expiring at once",
        if postgres.is_some() {
            "PostgreSQL"
        } else {
            "SQLite"
        }
    );
    let started = Instant::now();
    // Clusters are made first and locked at once after; instances are
    // inserted locked (the expiry is set as the setup starts).
    let shutdown = CancellationToken::new();
    let (service, stacks) = cluster_service(&connection, store.clone(), &shutdown).await?;
    let made = match target {
        Target::Clusters => Some(create_clusters(&store, locks).await?),
        Target::Stacks => Some(create_stacks(&connection, &stacks, locks).await?),
        Target::Instances => None,
    };
    let expires_at = Utc::now() + chrono::Duration::from_std(EXPIRES_AFTER).unwrap_or_default();
    let ids = match made {
        Some(ids) if target == Target::Stacks => {
            lock_stacks(&connection, &ids, expiring, expires_at).await?;
            ids
        }
        Some(ids) => {
            lock_all(&connection, &ids, expiring, expires_at).await?;
            ids
        }
        None => create_locked_instances(&connection, locks, expiring, expires_at).await?,
    };
    println!(
        "  setup: {locks} {table} made and locked in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if Utc::now() >= expires_at {
        return Err(format!(
            "the setup took longer than the {} s before the expiry: try fewer --locks",
            EXPIRES_AFTER.as_secs()
        ));
    }

    dispatcher::spawn(service.clone(), shutdown.clone());
    stacks.spawn_lock_expiry(shutdown.clone());
    let soon: Vec<Uuid> = ids[..expiring].to_vec();
    let mut first_lift = None;
    let deadline = Instant::now() + EXPIRES_AFTER + Duration::from_secs(60);
    let last_lift = loop {
        let lifted = lifted_count(&connection, target, &soon).await?;
        let now = Utc::now();
        if lifted > 0 && first_lift.is_none() {
            first_lift = Some(now);
        }
        if lifted == soon.len() {
            break now;
        }
        if Instant::now() > deadline {
            shutdown.cancel();
            return Err(format!(
                "only {lifted} of {expiring} expired locks lifted a minute after their expiry"
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    shutdown.cancel();
    let after_expiry = (last_lift - expires_at).to_std().unwrap_or_default();
    let lifting = first_lift
        .map(|first| (last_lift - first).to_std().unwrap_or_default())
        .unwrap_or_default();
    let still_locked = locked_count(&connection, target).await?;
    let records = audit_count(&connection).await?;
    println!(
        "  {expiring} expired locks lifted {:.3} s after their expiry (lifting took {:.3} s; the sweep wakes at the soonest expiry, and looks again at least every {} ms)",
        after_expiry.as_secs_f64(),
        lifting.as_secs_f64(),
        ember_engine::lock_expiry::LOOK_AT_LEAST_EVERY.as_millis()
    );
    println!(
        "  still locked: {still_locked} (expected {}); expiry audit records: {records} (expected {expiring})",
        locks - expiring
    );
    if still_locked != (locks - expiring) as i64 || records != expiring as i64 {
        return Err("the sweep lifted other locks than the expired ones, or some twice".into());
    }
    Ok(())
}

fn owner() -> Identity {
    Identity::new("bench", "bench-expiry", vec!["member".to_owned()])
}

/// `count` clusters, made through the store 16 at a time.
async fn create_clusters(store: &Arc<dyn ClusterStore>, count: usize) -> Result<Vec<Uuid>, String> {
    let profile_id = Uuid::now_v7();
    let made: Vec<Result<Uuid, String>> = futures::stream::iter(0..count)
        .map(|index| {
            let store = store.clone();
            async move {
                let now = Utc::now();
                let cluster = Cluster {
                    id: Uuid::now_v7(),
                    name: format!("expiry-{index}"),
                    profile_id,
                    min_size: 0,
                    max_size: -1,
                    desired_capacity: 0,
                    status: ClusterStatus::Active,
                    status_reason: String::new(),
                    metadata: serde_json::Map::new(),
                    next_index: 1,
                    timeout: None,
                    config: Default::default(),
                    project_id: owner().project_id,
                    user_id: owner().user_id,
                    created_at: now,
                    updated_at: now,
                    maintenance_lock: None,
                };
                let action = ClusterAction::new(
                    ActionKind::ClusterCreate,
                    cluster.id,
                    Some(cluster.id),
                    ActionStatus::Succeeded,
                    serde_json::Map::new(),
                    &owner(),
                    now,
                );
                let event = ClusterEvent::new(
                    "CLUSTER",
                    cluster.id,
                    &cluster.name,
                    Some(cluster.id),
                    "CLUSTER_CREATE",
                    "SUCCEEDED",
                    String::new(),
                    &owner().project_id,
                    &owner().user_id,
                );
                store
                    .create_cluster(&cluster, &action, &event)
                    .await
                    .map(|()| cluster.id)
                    .map_err(|error| error.to_string())
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    made.into_iter().collect()
}

/// `count` active instances, locked: the first `expiring` until
/// `expires_at`, the others for a day; inserted 500 at a time.
async fn create_locked_instances(
    connection: &DatabaseConnection,
    count: usize,
    expiring: usize,
    expires_at: chrono::DateTime<Utc>,
) -> Result<Vec<Uuid>, String> {
    use ember_engine::domain::instance::{
        Instance, InstanceStatus, LockedBy, MaintenanceLock, NewInstance, PowerState,
    };
    use ember_engine::store::instances::InstanceStore;
    let store = SqlInstanceStore::new(connection.clone());
    let later = Utc::now() + chrono::Duration::days(1);
    let mut ids = Vec::with_capacity(count);
    for start in (0..count).step_by(CHUNK) {
        let mut chunk = Vec::with_capacity(CHUNK);
        for index in start..(start + CHUNK).min(count) {
            let now = Utc::now();
            let new = NewInstance {
                name: format!("expiry-{index}"),
                flavor: "m1.small".to_owned(),
                image: "debian-12".to_owned(),
                metadata: Default::default(),
                workload: Default::default(),
                placement: Default::default(),
                delegation: None,
            };
            let building = Instance::new_building(&owner().project_id, &owner().user_id, new, now)
                .map_err(|error| error.to_string())?;
            let instance = Instance {
                status: InstanceStatus::Active,
                power_state: PowerState::On,
                maintenance_lock: Some(MaintenanceLock {
                    locked_by: LockedBy::Owner,
                    user_id: owner().user_id,
                    locked_at: now,
                    reason: Some("bench".into()),
                    expires_at: Some(if index < expiring { expires_at } else { later }),
                }),
                ..building
            };
            ids.push(instance.uuid);
            chunk.push(instance);
        }
        store
            .insert_instances(&chunk)
            .await
            .map_err(|error| error.to_string())?;
    }
    Ok(ids)
}

/// Locks every cluster (as the lock's JSON and expiry columns say), the
/// first `expiring` until `expires_at`, the others for a day.
async fn lock_all(
    connection: &DatabaseConnection,
    ids: &[Uuid],
    expiring: usize,
    expires_at: chrono::DateTime<Utc>,
) -> Result<(), String> {
    lock_in_chunks(connection, "clusters", ids, expiring, expires_at, |until| {
        let lock = ClusterLock {
            level: ClusterLockLevel::Clusters,
            locked_by_user: owner().user_id,
            locked_by_admin: false,
            locked_at: Utc::now(),
            reason: Some("bench".into()),
            expires_at: Some(until),
            locked_instances: Vec::new(),
        };
        let text = serde_json::to_string(&lock).map_err(|error| error.to_string())?;
        Ok((
            "maintenance_lock = $1, lock_expires_at = $2",
            vec![text.into(), until.into()],
        ))
    })
    .await
}

/// Sets `table`'s lock on the rows `ids` names, 500 at a time: `set` gives
/// the SET clause (placeholders `$1`…) and its values for a lock until a
/// time — `expires_at` for the first `expiring`, a day for the others.
async fn lock_in_chunks(
    connection: &DatabaseConnection,
    table: &str,
    ids: &[Uuid],
    expiring: usize,
    expires_at: chrono::DateTime<Utc>,
    set: impl Fn(chrono::DateTime<Utc>) -> Result<(&'static str, Vec<sea_orm::Value>), String>,
) -> Result<(), String> {
    let backend = connection.get_database_backend();
    let later = Utc::now() + chrono::Duration::days(1);
    for (index, chunk) in ids.chunks(CHUNK).enumerate() {
        let until = if index * CHUNK < expiring {
            expires_at
        } else {
            later
        };
        let (clause, mut values) = set(until)?;
        let list = placeholders(values.len() + 1, chunk.len());
        values.extend(chunk.iter().map(|id| sea_orm::Value::from(*id)));
        connection
            .execute_raw(statement(
                backend,
                &format!("UPDATE {table} SET {clause} WHERE id IN ({list})"),
                values,
            ))
            .await
            .map_err(|error| error.to_string())?;
    }
    Ok(())
}

/// How many rows one statement names.
const CHUNK: usize = 500;

/// `$first, $first+1, …`: `count` placeholders.
fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|index| format!("${index}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `count` stacks of one `OS::Heat::None`, made through the engine 16 at a
/// time; returns once every one is CREATE_COMPLETE.
async fn create_stacks(
    connection: &DatabaseConnection,
    stacks: &Arc<StackOperations>,
    how_many: usize,
) -> Result<Vec<Uuid>, String> {
    let made: Vec<Result<Uuid, String>> = futures::stream::iter(0..how_many)
        .map(|index| {
            let stacks = stacks.clone();
            async move {
                let request = ember_engine::stacks::CreateStack {
                    name: format!("expiry-{index}"),
                    template: "heat_template_version: 2021-04-16\nresources:\n  none: {type: OS::Heat::None}\n".to_owned(),
                    environment: String::new(),
                    environment_files: Vec::new(),
                    files: Default::default(),
                    parameters: Default::default(),
                    timeout_mins: None,
                    disable_rollback: true,
                    tags: Vec::new(),
                    adopt_data: None,
                };
                stacks
                    .create_stack(&owner(), request)
                    .await
                    .map(|stack| stack.id)
                    .map_err(|error| error.to_string())
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let ids: Vec<Uuid> = made.into_iter().collect::<Result<_, _>>()?;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let complete = count(
            connection,
            "SELECT COUNT(*) FROM stacks WHERE project_id = 'bench-expiry' AND action = 'CREATE' AND status = 'COMPLETE'",
            Vec::new(),
        )
        .await?;
        if complete == ids.len() as i64 {
            return Ok(ids);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "only {complete} of {} stacks created in 10 minutes",
                ids.len()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Locks every stack (LOCK_COMPLETE, level stacks, held by the bench's
/// member), the first `expiring` until `expires_at`, the others for a day.
async fn lock_stacks(
    connection: &DatabaseConnection,
    ids: &[Uuid],
    expiring: usize,
    expires_at: chrono::DateTime<Utc>,
) -> Result<(), String> {
    lock_in_chunks(connection, "stacks", ids, expiring, expires_at, |until| {
        Ok((
            "action = 'LOCK', status = 'COMPLETE', lock_level = 'stacks', locked_by_user = $1, \
             locked_by_admin = false, locked_at = $2, lock_expires_at = $3",
            vec![owner().user_id.into(), Utc::now().into(), until.into()],
        ))
    })
    .await
}

async fn cluster_service(
    connection: &DatabaseConnection,
    store: Arc<dyn ClusterStore>,
    shutdown: &CancellationToken,
) -> Result<(Arc<ClusterService>, Arc<StackOperations>), String> {
    let trail = AuditTrail::new(Arc::new(SqlAuditStore::new(
        connection.clone(),
        connection.clone(),
    )));
    let instances = InstanceService::start_with(
        Arc::new(SqlInstanceStore::new(connection.clone())),
        &ComputeConfig::simulated(Default::default()),
        InstanceSettings {
            audit: Some(trail.clone()),
            ..InstanceSettings::default()
        },
        shutdown.clone(),
    )
    .await?;
    let stack_store: Arc<dyn StackStore> = Arc::new(SqlStackStore::new(connection.clone()));
    let stacks = StackOperations::configured(
        stack_store,
        Arc::new(ResourceTypeRegistry::with_compute(instances.clone())),
        StackSettings {
            audit: Some(trail.clone()),
            ..StackSettings::default()
        },
    );
    let hooks = HookClient::connect_lazy("", None, InternalCredential::new("bench"))
        .map_err(|error| error.to_string())?;
    let engine_id = stacks.engine_id();
    let service = ClusterService::with_settings(
        store,
        instances.clone(),
        stacks.clone(),
        hooks,
        ClusterSettings {
            audit: Some(trail),
            ..ClusterSettings::default()
        },
        engine_id,
    );
    Ok((service, stacks))
}

async fn count(
    connection: &DatabaseConnection,
    sql: &str,
    values: Vec<sea_orm::Value>,
) -> Result<i64, String> {
    let backend = connection.get_database_backend();
    let row = connection
        .query_one_raw(statement(backend, sql, values))
        .await
        .map_err(|error| error.to_string())?
        .ok_or("no count")?;
    row.try_get_by_index::<i64>(0)
        .map_err(|error| error.to_string())
}

async fn lifted_count(
    connection: &DatabaseConnection,
    target: Target,
    ids: &[Uuid],
) -> Result<usize, String> {
    let mut lifted = 0;
    for chunk in ids.chunks(CHUNK) {
        let list = placeholders(1, chunk.len());
        lifted += count(
            connection,
            &format!(
                "SELECT COUNT(*) FROM {} WHERE NOT ({}) AND {} IN ({list})",
                target.table(),
                target.locked(),
                target.id_column()
            ),
            chunk.iter().map(|id| sea_orm::Value::from(*id)).collect(),
        )
        .await?;
    }
    Ok(usize::try_from(lifted).unwrap_or_default())
}

async fn locked_count(connection: &DatabaseConnection, target: Target) -> Result<i64, String> {
    count(
        connection,
        &format!(
            "SELECT COUNT(*) FROM {} WHERE {} AND project_id = 'bench-expiry'",
            target.table(),
            target.locked()
        ),
        Vec::new(),
    )
    .await
}

async fn audit_count(connection: &DatabaseConnection) -> Result<i64, String> {
    count(
        connection,
        "SELECT COUNT(*) FROM audit_records WHERE outcome = 'expired' AND project_id = 'bench-expiry'",
        Vec::new(),
    )
    .await
}
