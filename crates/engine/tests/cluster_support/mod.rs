//! What the cluster engine tests share: engines (cluster service, instance
//! service on the simulated driver, dispatcher) on one test database, as
//! replicas would run, the cluster store alone, and readers that page
//! through everything.

#![allow(dead_code)] // each test binary uses its own part of the support

use std::sync::Arc;
use std::time::Duration;

use ember_engine::clusters::dispatcher::{self, DispatcherSettings};
use ember_engine::clusters::hooks::HookClient;
use ember_engine::clusters::{ClusterService, ClusterSettings, NewCluster};
use ember_engine::compute::ComputeConfig;
use ember_engine::compute::simulated::SimulatedComputeConfig;
use ember_engine::domain::cluster::{ActionStatus, Cluster, ClusterAction, ClusterEvent, Node};
use ember_engine::domain::instance::Instance;
use ember_engine::instances::{InstanceFilter, InstanceService, InstanceSettings};
use ember_engine::resources::ResourceTypeRegistry;
use ember_engine::stacks::{StackOperations, StackSettings};
use ember_engine::store::clusters::{ClusterStore, SqlClusterStore};
use ember_engine::store::instances::SqlInstanceStore;
use ember_engine::store::{SqlStackStore, StackStore, migrations::Migrator};
use ember_runtime::Identity;
use ember_runtime::database::{connect_and_migrate, testing::TestDatabase};
use ember_runtime::identity::InternalCredential;
use ember_runtime::testing::poll_until;
use serde_json::{Map, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// A cluster store on `database`, migrated here.
pub async fn cluster_store(database: &TestDatabase) -> SqlClusterStore {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    SqlClusterStore::new(connection)
}

pub fn member() -> Identity {
    Identity::new("demo", "demo", vec!["member".to_owned()])
}

pub fn driver(build: Duration) -> SimulatedComputeConfig {
    SimulatedComputeConfig {
        build_latency: build,
        power_latency: Duration::from_millis(5),
        reboot_latency: Duration::from_millis(5),
        delete_latency: Duration::from_millis(5),
        fail_builds_matching: String::new(),
    }
}

/// One engine replica: its own connection pool, instance service and
/// cluster service (dispatcher running unless asked otherwise).
pub struct Engine {
    pub service: Arc<ClusterService>,
    pub instances: Arc<InstanceService>,
    /// The audit trail its services write (as the engine's do).
    pub audit: Arc<ember_engine::audit::AuditTrail>,
    shutdown: CancellationToken,
}

impl Engine {
    pub async fn start(
        database: &TestDatabase,
        compute: SimulatedComputeConfig,
        settings: DispatcherSettings,
        dispatch: bool,
    ) -> Engine {
        let connection = connect_and_migrate::<Migrator>(&database.url)
            .await
            .expect("migrated");
        let shutdown = CancellationToken::new();
        let audit = ember_engine::audit::AuditTrail::new(Arc::new(
            ember_engine::store::audit::SqlAuditStore::new(connection.clone(), connection.clone()),
        ));
        let instances = InstanceService::start_with(
            Arc::new(SqlInstanceStore::new(connection.clone())),
            &ComputeConfig::simulated(compute),
            InstanceSettings {
                audit: Some(audit.clone()),
                ..InstanceSettings::default()
            },
            shutdown.clone(),
        )
        .await
        .expect("instances");
        let stack_store: Arc<dyn StackStore> = Arc::new(SqlStackStore::new(connection.clone()));
        let stacks = StackOperations::configured(
            stack_store,
            Arc::new(ResourceTypeRegistry::with_compute(instances.clone())),
            StackSettings {
                audit: Some(audit.clone()),
                ..StackSettings::default()
            },
        );
        let hooks = HookClient::connect_lazy("", None, InternalCredential::new("test-credential"))
            .expect("hook client");
        let cluster_store: Arc<dyn ClusterStore> = Arc::new(SqlClusterStore::new(connection));
        let engine_id = stacks.engine_id();
        let service = ClusterService::with_settings(
            cluster_store,
            instances.clone(),
            stacks,
            hooks,
            ClusterSettings {
                dispatcher: settings,
                audit: Some(audit.clone()),
                ..ClusterSettings::default()
            },
            engine_id,
        );
        if dispatch {
            dispatcher::spawn(service.clone(), shutdown.clone());
        }
        Engine {
            service,
            instances,
            audit,
            shutdown,
        }
    }

    /// Stops everything this engine runs at once, as a SIGKILL would: runs
    /// under way are abandoned, leases are no longer renewed, instance
    /// builds are left BUILDING.
    pub async fn kill(self) {
        self.shutdown.cancel();
        self.instances.drain().await;
    }

    /// Starts this engine's dispatcher and sweeper (for an engine started
    /// without them, to decide when it begins taking actions over).
    pub fn dispatch(&self) {
        dispatcher::spawn(self.service.clone(), self.shutdown.clone());
    }

    pub fn store(&self) -> &Arc<dyn ClusterStore> {
        self.service.store()
    }
}

pub async fn instance_profile(engine: &Engine, name: &str) {
    engine
        .service
        .create_profile(
            &member(),
            name,
            json!({
                "type": "ember.instance",
                "version": "1.0",
                "properties": {"flavor": "m1.small", "image": "debian-12"}
            }),
            Map::new(),
            false,
        )
        .await
        .expect("profile");
}

pub async fn cluster(engine: &Engine, id: Uuid) -> Cluster {
    engine
        .store()
        .get_cluster(id)
        .await
        .expect("read")
        .expect("cluster exists")
}

/// Every action of the cluster, paging through them.
pub async fn all_actions(engine: &Engine, cluster_id: Uuid) -> Vec<ClusterAction> {
    let mut all = Vec::new();
    let mut marker = None;
    loop {
        let page = engine
            .store()
            .list_actions(&ember_engine::store::clusters::ActionQuery {
                cluster_id: Some(cluster_id),
                limit: 1000,
                marker,
                ..Default::default()
            })
            .await
            .expect("actions");
        let Some(last) = page.last() else {
            return all;
        };
        marker = Some(last.id);
        all.extend(page);
    }
}

/// Every event of the cluster.
pub async fn all_events(engine: &Engine, cluster_id: Uuid) -> Vec<ClusterEvent> {
    let mut all = Vec::new();
    let mut marker = None;
    loop {
        let page = engine
            .store()
            .list_events(&ember_engine::store::clusters::EventQuery {
                cluster_id: Some(cluster_id),
                limit: 1000,
                marker,
                ..Default::default()
            })
            .await
            .expect("events");
        let Some(last) = page.last() else {
            return all;
        };
        marker = Some(last.id);
        all.extend(page);
    }
}

/// Every instance the demo project can see.
pub async fn all_instances(engine: &Engine) -> Vec<Instance> {
    let mut all = Vec::new();
    let mut marker = None;
    loop {
        let page = engine
            .instances
            .list(
                &member(),
                &InstanceFilter {
                    limit: 1000,
                    marker,
                    ..Default::default()
                },
            )
            .await
            .expect("instances");
        all.extend(page.instances);
        match page.next_marker {
            Some(next) => marker = Some(next),
            None => return all,
        }
    }
}

pub async fn members(engine: &Engine, cluster_id: Uuid) -> Vec<Node> {
    engine
        .store()
        .list_cluster_nodes(cluster_id)
        .await
        .expect("nodes")
}

/// Whether every action of the cluster is final.
pub async fn quiescent(engine: &Engine, cluster_id: Uuid) -> bool {
    all_actions(engine, cluster_id)
        .await
        .iter()
        .all(|action| action.status.is_final())
}

pub async fn wait_for_action(engine: &Engine, action_id: Uuid, timeout: Duration) -> ClusterAction {
    poll_until("the action to end", timeout, || async {
        engine
            .store()
            .get_action(action_id)
            .await
            .expect("read")
            .filter(|action| action.status.is_final())
    })
    .await
}

/// Creates the cluster `name` from the profile of the same name, sized
/// `(min_size, max_size, desired_capacity)`, and waits for its
/// CLUSTER_CREATE, which must succeed.
pub async fn active_cluster(
    engine: &Engine,
    name: &str,
    (min_size, max_size, desired_capacity): (i32, i32, i32),
) -> Cluster {
    let (cluster, create) = engine
        .service
        .create_cluster(
            &member(),
            NewCluster {
                name: name.into(),
                profile: name.into(),
                min_size,
                max_size,
                desired_capacity,
                metadata: Map::new(),
                timeout: None,
                config: Map::new(),
            },
        )
        .await
        .expect("cluster");
    let create = wait_for_action(engine, create.id, Duration::from_secs(30)).await;
    assert!(succeeded(&create), "{}", create.status_reason);
    cluster
}

pub fn succeeded(action: &ClusterAction) -> bool {
    action.status == ActionStatus::Succeeded
}

/// What must hold once every action of the cluster has ended: nothing in
/// progress, no node deleted twice, the desired capacity = the members =
/// the instances, node names and indexes never repeated. Returns the
/// cluster.
pub async fn assert_settled_invariants(engine: &Engine, cluster_id: Uuid) -> Cluster {
    use std::collections::{HashMap, HashSet};

    use ember_engine::domain::cluster::{ActionKind, ClusterStatus, NodeStatus};

    let actions = all_actions(engine, cluster_id).await;
    for action in &actions {
        assert!(
            action.status.is_final(),
            "{} {} still {}",
            action.kind.as_str(),
            action.id,
            action.status.as_str()
        );
        assert!(
            !action.status_reason.contains("database error"),
            "{} {} ended on a raw database error: {}",
            action.kind.as_str(),
            action.id,
            action.status_reason
        );
    }
    // The actions that delete (no children of their own): at most one
    // succeeded per node.
    let mut deletions: HashMap<Uuid, usize> = HashMap::new();
    for action in actions.iter().filter(|action| {
        action.kind == ActionKind::NodeDelete && action.depends_on.is_empty() && succeeded(action)
    }) {
        *deletions.entry(action.target_id).or_default() += 1;
    }
    assert!(
        deletions.values().all(|count| *count == 1),
        "nodes deleted twice: {:?}",
        deletions
            .iter()
            .filter(|(_, count)| **count > 1)
            .collect::<Vec<_>>()
    );
    let events = all_events(engine, cluster_id).await;
    let mut delete_events: HashMap<&str, usize> = HashMap::new();
    let mut names: HashMap<&str, HashSet<&str>> = HashMap::new();
    for event in events.iter().filter(|event| event.obj_type == "NODE") {
        if event.action == "NODE_DELETE" {
            *delete_events.entry(event.obj_id.as_str()).or_default() += 1;
        }
        if event.action == "NODE_CREATE" {
            names
                .entry(event.obj_name.as_str())
                .or_default()
                .insert(event.obj_id.as_str());
        }
    }
    assert!(
        delete_events.values().all(|count| *count == 1),
        "more than one NODE_DELETE event for a node: {delete_events:?}"
    );
    assert!(
        names.values().all(|ids| ids.len() == 1),
        "a node name given to two nodes: {:?}",
        names
            .iter()
            .filter(|(_, ids)| ids.len() > 1)
            .collect::<Vec<_>>()
    );
    let cluster = cluster(engine, cluster_id).await;
    assert!(
        matches!(
            cluster.status,
            ClusterStatus::Active | ClusterStatus::Warning | ClusterStatus::Error
        ),
        "cluster left {}: {}",
        cluster.status.as_str(),
        cluster.status_reason
    );
    assert_eq!(
        engine
            .store()
            .cluster_lock_holder(cluster_id)
            .await
            .expect("read"),
        None,
        "the lock is still held"
    );
    let members = members(engine, cluster_id).await;
    for node in &members {
        assert!(
            matches!(node.status, NodeStatus::Active | NodeStatus::Error),
            "node {} left {}: {}",
            node.name,
            node.status.as_str(),
            node.status_reason
        );
    }
    assert_eq!(
        usize::try_from(cluster.desired_capacity).ok(),
        Some(members.len()),
        "desired capacity {} but {} members ({})",
        cluster.desired_capacity,
        members.len(),
        cluster.status_reason
    );
    let indexes: HashSet<i32> = members.iter().map(|node| node.index).collect();
    let member_names: HashSet<&str> = members.iter().map(|node| node.name.as_str()).collect();
    assert_eq!(indexes.len(), members.len(), "repeated indexes");
    assert_eq!(member_names.len(), members.len(), "repeated names");
    let instances = all_instances(engine).await;
    let physical: HashSet<String> = members
        .iter()
        .filter_map(|node| node.physical_id.clone())
        .collect();
    let live: HashSet<String> = instances
        .iter()
        .map(|instance| instance.uuid.to_string())
        .collect();
    assert_eq!(
        physical, live,
        "the members' instances and the live instances differ (leaked or lost)"
    );
    assert_eq!(live.len(), members.len(), "one instance per member");
    cluster
}
