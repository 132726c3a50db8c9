//! Many clients scaling, resizing and deleting nodes of one cluster at
//! once, through two engines (two replicas: their own pools, instance
//! services and dispatchers) on one database, SQLite and PostgreSQL. Once
//! every action has ended, the checker asserts what the cluster lock, the
//! fenced writes and the atomic index allocator guarantee: no node deleted
//! twice, desired capacity = members = live instances, names and indexes
//! never repeated, nothing left in progress.

mod cluster_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster_support::{
    Engine, active_cluster, assert_settled_invariants, driver, instance_profile, member, members,
    quiescent,
};
use ember_engine::Error;
use ember_engine::clusters::dispatcher::DispatcherSettings;
use ember_engine::clusters::{ClusterService, ResizeRequest};
use ember_engine::domain::cluster::sizing::AdjustmentType;
use ember_runtime::database::testing::TestDatabase;
use ember_runtime::testing::wait_for;
use rand::Rng;
use uuid::Uuid;

const CLIENTS: usize = 10;
const LOAD: Duration = Duration::from_secs(3);

fn settings() -> DispatcherSettings {
    DispatcherSettings {
        action_lease: Duration::from_secs(5),
        sweep_interval: Duration::from_millis(200),
        max_running: 64,
        ..DispatcherSettings::default()
    }
}

/// One random request; errors a user would get (sizes, races with other
/// requests) are fine, anything else is not.
async fn one_request(service: &ClusterService, cluster_id: Uuid) -> Result<(), Error> {
    let caller = member();
    let cluster = cluster_id.to_string();
    let (choice, count, target) = {
        let mut rng = rand::rng();
        (
            rng.random_range(0..6u32),
            rng.random_range(1..=3u32),
            rng.random_range(0..=8i32),
        )
    };
    let result = match choice {
        0 => service
            .scale(&caller, &cluster, true, count)
            .await
            .map(drop),
        1 => service
            .scale(&caller, &cluster, false, count.min(2))
            .await
            .map(drop),
        2 => service
            .resize(
                &caller,
                &cluster,
                ResizeRequest {
                    adjustment: Some((AdjustmentType::ExactCapacity, f64::from(target))),
                    min_size: None,
                    max_size: None,
                    min_step: 1,
                    strict: false,
                },
            )
            .await
            .map(drop),
        3 => service
            .resize(
                &caller,
                &cluster,
                ResizeRequest {
                    adjustment: Some((
                        AdjustmentType::ChangeInCapacity,
                        f64::from(target - 4) / 2.0,
                    )),
                    min_size: None,
                    max_size: None,
                    min_step: 1,
                    strict: false,
                },
            )
            .await
            .map(drop),
        4 | 5 => {
            let nodes = service
                .list_nodes(&caller, Some(&cluster), 1000, None)
                .await?;
            let picked: Vec<String> = {
                let mut rng = rand::rng();
                nodes
                    .iter()
                    .filter(|_| rng.random_bool(0.3))
                    .take(2)
                    .map(|node| node.id.to_string())
                    .collect()
            };
            match (choice, picked.first()) {
                (_, None) => Ok(()),
                (4, Some(_)) => service
                    .change_nodes(&caller, &cluster, &picked, false, Some(true))
                    .await
                    .map(drop),
                (_, Some(node)) => service.delete_node(&caller, node).await.map(drop),
            }
        }
        _ => Ok(()),
    };
    match result {
        Ok(()) | Err(Error::Conflict(_) | Error::NotFound(_) | Error::InvalidInput(_)) => Ok(()),
        Err(other) => Err(other),
    }
}

async fn concurrent_scaling_keeps_the_cluster_consistent(database: &TestDatabase) {
    let quick = driver(Duration::from_millis(10));
    let one = Arc::new(Engine::start(database, quick.clone(), settings(), true).await);
    let two = Arc::new(Engine::start(database, quick, settings(), true).await);
    instance_profile(&one, "web").await;
    let created = active_cluster(&one, "web", (1, 12, 4)).await;
    assert_eq!(members(&one, created.id).await.len(), 4);

    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let engine = if client % 2 == 0 {
                one.clone()
            } else {
                two.clone()
            };
            let cluster_id = created.id;
            tokio::spawn(async move {
                let mut requests = 0;
                while started.elapsed() < LOAD {
                    if let Err(error) = one_request(&engine.service, cluster_id).await {
                        panic!("client {client}: a request failed unexpectedly: {error:?}");
                    }
                    requests += 1;
                    tokio::time::sleep(Duration::from_millis(40)).await;
                }
                requests
            })
        })
        .collect();
    let mut requests = 0;
    for client in clients {
        requests += client.await.expect("client");
    }
    assert!(requests > CLIENTS * 10, "only {requests} requests made");
    wait_for(
        "every action of the cluster to end",
        Duration::from_secs(120),
        || quiescent(&one, created.id),
    )
    .await;
    let settled = assert_settled_invariants(&one, created.id).await;
    let actions = cluster_support::all_actions(&one, created.id).await;
    let ran = actions
        .iter()
        .filter(|action| cluster_support::succeeded(action))
        .count();
    assert!(ran > 10, "only {ran} actions succeeded: {actions:?}");
    eprintln!(
        "{requests} requests, {} actions ({ran} succeeded), cluster {} with {} nodes",
        actions.len(),
        settled.status.as_str(),
        settled.desired_capacity
    );
    for engine in [one, two] {
        if let Ok(engine) = Arc::try_unwrap(engine) {
            engine.kill().await;
        }
    }
}

/// A cluster runs or queues at most `max_queued_per_cluster` actions: one
/// more is Senlin's 409 naming them, a delete is still taken, and the
/// queue drains.
async fn a_busy_clusters_queue_is_bounded(database: &TestDatabase) {
    let slow = driver(Duration::from_millis(300));
    let engine = Engine::start(
        database,
        slow,
        DispatcherSettings {
            max_queued_per_cluster: 4,
            ..settings()
        },
        true,
    )
    .await;
    instance_profile(&engine, "web").await;
    let created = active_cluster(&engine, "web", (0, 20, 1)).await;
    let cluster = created.id.to_string();
    let mut accepted = Vec::new();
    let refused = loop {
        match engine.service.scale(&member(), &cluster, true, 1).await {
            Ok(action) => accepted.push(action.id),
            Err(error) => break error,
        }
        assert!(accepted.len() <= 4, "more than 4 accepted: {accepted:?}");
    };
    assert_eq!(accepted.len(), 4, "{refused:?}");
    let Error::Conflict(message) = &refused else {
        panic!("{refused:?}");
    };
    assert!(
        message.starts_with(&format!(
            "The CLUSTER_SCALE_OUT action for target {cluster} conflicts with the following action(s): "
        )) && accepted.iter().all(|id| message.contains(&id.to_string())),
        "{message}"
    );
    wait_for("the queue to drain", Duration::from_secs(60), || {
        quiescent(&engine, created.id)
    })
    .await;
    assert_eq!(members(&engine, created.id).await.len(), 5);
    engine
        .service
        .scale(&member(), &cluster, true, 1)
        .await
        .expect("room again");
    engine.kill().await;
}

/// A growth and a removal of more nodes than the dispatcher runs at once
/// (one here) go on as each run's slot frees, never waiting for the idle
/// poll (an hour here): a slot freed after its run's end woke nobody, and
/// the next nodes' actions waited the poll out (half a second by default).
async fn more_node_actions_than_slots_run_as_slots_free(database: &TestDatabase) {
    let engine = Engine::start(
        database,
        driver(Duration::ZERO),
        DispatcherSettings {
            max_running: 1,
            idle_poll: Duration::from_secs(3600),
            ..settings()
        },
        true,
    )
    .await;
    instance_profile(&engine, "web").await;
    let created = active_cluster(&engine, "web", (0, 40, 24)).await;
    assert_eq!(members(&engine, created.id).await.len(), 24);
    let scale_in = engine
        .service
        .scale(&member(), &created.id.to_string(), false, 20)
        .await
        .expect("scale in");
    let ended =
        cluster_support::wait_for_action(&engine, scale_in.id, Duration::from_secs(30)).await;
    assert!(
        cluster_support::succeeded(&ended),
        "{}",
        ended.status_reason
    );
    assert_eq!(members(&engine, created.id).await.len(), 4);
    engine.kill().await;
}

ember_runtime::store_suite!(
    concurrent_scaling_keeps_the_cluster_consistent,
    a_busy_clusters_queue_is_bounded,
    more_node_actions_than_slots_run_as_slots_free
);
