//! `ember bench clustering`: the Clustering API's reads at size and a
//! webhook receiver's trigger.
//!
//! 200 clusters of 25 nodes (5,000 nodes) are inserted through the engine's
//! store into a fresh SQLite data directory before Ember starts (each with
//! a finished CLUSTER_CREATE / NODE_CREATE action, as the API would leave
//! them); then every call goes through the gateway as a client makes it
//! (REST, `X-Auth-Token`, one keep-alive connection, one call at a time):
//! the cluster list of all 200 (each with its member ids and policies), a
//! page of the node list and one cluster's nodes, and `POST
//! /webhooks/{id}/trigger` of a CLUSTER_SCALE_OUT receiver — the call
//! returns once the action is recorded READY, so its latency is the time
//! from the alarm to a READY action. Prints figures; never passes or fails
//! on time.

use std::time::{Duration, Instant};

use ember_engine::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, ClusterEvent, ClusterStatus, Node,
    NodeStatus, Profile, ProfileSpec,
};
use ember_engine::store::clusters::{ClusterStore, SqlClusterStore};
use ember_runtime::Identity;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::summarize;
use crate::dev::{DEV_PROJECT, DevCredentials, RunningEmber};

const WARM_UP_CALLS: usize = 50;

pub struct ClusteringBench {
    pub clusters: usize,
    pub nodes_per_cluster: usize,
    pub calls: usize,
    pub triggers: usize,
}

pub async fn run(bench: ClusteringBench) -> Result<(), String> {
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let (config, secrets) = crate::dev::ephemeral_config(data_dir.path());
    let database_url = config.engine(&secrets).database_url;

    let started = Instant::now();
    let cluster_ids = seed(&database_url, bench.clusters, bench.nodes_per_cluster).await?;
    let node_count = bench.clusters * bench.nodes_per_cluster;
    println!(
        "{} clusters of {} nodes ({node_count} nodes) inserted through the engine store (SQLite) in {:.1} s",
        bench.clusters,
        bench.nodes_per_cluster,
        started.elapsed().as_secs_f64()
    );

    let running = RunningEmber::start(config, secrets.clone()).await?;
    let credentials =
        DevCredentials::mint(running.gateway_addr, &secrets, Duration::from_secs(3600))?;
    let token = credentials.member.token.clone();
    let http = reqwest::Client::new();
    let base = format!("http://{}/clustering/v1", running.gateway_addr);
    let get = |path: String| {
        let request = http
            .get(format!("{base}{path}"))
            .header("X-Auth-Token", &token)
            .header("OpenStack-API-Version", "clustering 1.14");
        async move { received(request, 200).await }
    };

    let listed: Value =
        serde_json::from_slice(&get(format!("/clusters?limit={}", bench.clusters)).await?)
            .map_err(|error| format!("the cluster list is not JSON: {error}"))?;
    let shown = listed["clusters"].as_array().map_or(0, Vec::len);
    if shown != bench.clusters {
        return Err(format!(
            "the cluster list showed {shown} of {} clusters",
            bench.clusters
        ));
    }
    let mut rows = Vec::new();
    let cases = [
        (
            format!(
                "GET /clusters?limit={} ({} clusters)",
                bench.clusters, bench.clusters
            ),
            format!("/clusters?limit={}", bench.clusters),
        ),
        (
            format!("GET /nodes (a page of 100, {node_count} stored)"),
            "/nodes?limit=100".to_owned(),
        ),
        (
            format!("GET /nodes?cluster_id= ({} nodes)", bench.nodes_per_cluster),
            format!("/nodes?cluster_id={}", cluster_ids[cluster_ids.len() / 2]),
        ),
        (
            "GET /clusters/{id}".to_owned(),
            format!("/clusters/{}", cluster_ids[0]),
        ),
    ];
    for (name, path) in cases {
        for _ in 0..WARM_UP_CALLS {
            get(path.clone()).await?;
        }
        let mut samples = Vec::with_capacity(bench.calls);
        for _ in 0..bench.calls {
            let call_started = Instant::now();
            get(path.clone()).await?;
            samples.push(call_started.elapsed());
        }
        rows.push((name, summarize(&mut samples)));
    }

    // A webhook receiver on a cluster with room to grow: each trigger
    // records a CLUSTER_SCALE_OUT READY (they queue on the cluster lock).
    let receiver = answer(
        http.post(format!("{base}/receivers"))
            .header("X-Auth-Token", &token)
            .json(&json!({"receiver": {"name": "bench", "type": "webhook",
                "cluster_id": cluster_ids[0].to_string(), "action": "CLUSTER_SCALE_OUT",
                "params": {"count": 1}}})),
        201,
    )
    .await?;
    let alarm_url = receiver["receiver"]["channel"]["alarm_url"]
        .as_str()
        .ok_or_else(|| format!("the receiver has no alarm_url: {receiver}"))?
        .to_owned();
    let alarm_url = if alarm_url.starts_with("http") {
        alarm_url
    } else {
        format!("http://{}{alarm_url}", running.gateway_addr)
    };
    let mut triggers = Vec::with_capacity(bench.triggers);
    for _ in 0..bench.triggers {
        let call_started = Instant::now();
        let accepted = answer(http.post(&alarm_url), 202).await?;
        triggers.push(call_started.elapsed());
        if accepted["action"].as_str().is_none() {
            return Err(format!("the trigger named no action: {accepted}"));
        }
    }
    rows.push((
        format!(
            "POST webhook trigger → action READY ({} triggers)",
            bench.triggers
        ),
        summarize(&mut triggers),
    ));

    println!(
        "{} calls per read row through the gateway, one at a time, after {WARM_UP_CALLS} warm-up calls, each timed to the last byte of its answer (milliseconds)",
        bench.calls
    );
    println!("{:<56} {:>8} {:>8} {:>8}", "call", "p50", "p90", "p99");
    for (call, summary) in rows {
        println!(
            "{call:<56} {:>8.2} {:>8.2} {:>8.2}",
            summary.median_us / 1e3,
            summary.p90_us / 1e3,
            summary.p99_us / 1e3
        );
    }
    running.stop().await
}

/// A profile, `clusters` ACTIVE clusters of `nodes` ACTIVE members each,
/// every one with its finished action, in the dev project; the cluster ids.
async fn seed(database_url: &str, clusters: usize, nodes: usize) -> Result<Vec<Uuid>, String> {
    let failed = |error: ember_engine::error::Error| error.to_string();
    let connection = ember_runtime::database::connect_and_migrate::<
        ember_engine::store::migrations::Migrator,
    >(database_url)
    .await
    .map_err(|error| error.to_string())?;
    let store = SqlClusterStore::new(connection);
    let caller = Identity::new("demo", DEV_PROJECT, vec!["member".into()]);
    let now = ember_runtime::time::now();
    let spec = ProfileSpec::parse(json!({"type": "os.nova.server", "version": "1.0",
        "properties": {"flavor": "m1.small", "image": "cirros"}}))
    .map_err(failed)?;
    let profile = Profile {
        id: Uuid::now_v7(),
        name: "bench".into(),
        spec,
        metadata: Map::new(),
        protected: false,
        project_id: DEV_PROJECT.into(),
        user_id: "demo".into(),
        created_at: now,
        updated_at: None,
    };
    store.insert_profile(&profile).await.map_err(failed)?;
    let size = i32::try_from(nodes).map_err(|error| error.to_string())?;
    let finished = |kind: ActionKind, target: Uuid, cluster: Option<Uuid>| {
        let action = ClusterAction::new(
            kind,
            target,
            cluster,
            ActionStatus::Succeeded,
            Map::new(),
            &caller,
            now,
        );
        let event = ClusterEvent::new(
            "ACTION",
            action.id,
            &action.name,
            cluster,
            kind.as_str(),
            "SUCCEEDED",
            "seeded by the benchmark".into(),
            DEV_PROJECT,
            "demo",
        );
        (action, event)
    };
    let mut ids = Vec::with_capacity(clusters);
    for index in 0..clusters {
        let cluster = Cluster {
            id: Uuid::now_v7(),
            name: format!("bench-{index}"),
            profile_id: profile.id,
            min_size: 0,
            max_size: -1,
            desired_capacity: size,
            status: ClusterStatus::Active,
            status_reason: "seeded".into(),
            metadata: Map::new(),
            next_index: 1,
            timeout: None,
            config: ember_engine::domain::cluster::ClusterConfig::default(),
            project_id: DEV_PROJECT.into(),
            user_id: "demo".into(),
            created_at: now,
            updated_at: now,
            maintenance_lock: None,
        };
        let (action, event) = finished(ActionKind::ClusterCreate, cluster.id, Some(cluster.id));
        store
            .create_cluster(&cluster, &action, &event)
            .await
            .map_err(failed)?;
        for _ in 0..nodes {
            let node = Node {
                id: Uuid::now_v7(),
                name: String::new(),
                cluster_id: Some(cluster.id),
                profile_id: profile.id,
                index: 0,
                role: String::new(),
                status: NodeStatus::Active,
                status_reason: "seeded".into(),
                physical_id: Some(Uuid::now_v7().to_string()),
                tainted: false,
                protected: false,
                metadata: Map::new(),
                project_id: DEV_PROJECT.into(),
                user_id: "demo".into(),
                created_at: now,
                updated_at: now,
            };
            let (action, event) = finished(ActionKind::NodeCreate, node.id, Some(cluster.id));
            store
                .create_node(&node, &action, &event)
                .await
                .map_err(failed)?;
        }
        ids.push(cluster.id);
    }
    Ok(ids)
}

/// Sends `request`, checks the status and reads the JSON answer (so the
/// connection is reused).
async fn answer(request: reqwest::RequestBuilder, expected: u16) -> Result<Value, String> {
    let body = received(request, expected).await?;
    Ok(serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// Sends `request`, checks the status and reads the whole answer: a timed
/// read ends at its last byte, as wrk's does, without the client's parse.
async fn received(request: reqwest::RequestBuilder, expected: u16) -> Result<bytes::Bytes, String> {
    let response = request
        .send()
        .await
        .map_err(|error| format!("request failed: {error}"))?;
    let status = response.status().as_u16();
    let url = response.url().to_string();
    let body = response
        .bytes()
        .await
        .map_err(|error| format!("{url}: reading the answer failed: {error}"))?;
    if status != expected {
        return Err(format!(
            "{url} answered {status} instead of {expected}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    Ok(body)
}
