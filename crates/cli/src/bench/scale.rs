//! `ember bench cluster-scale`: one cluster of simulated nodes at growing
//! sizes (by default 100, 1,000 and 10,000), each on a fresh `ember dev`
//! (SQLite, the embedded queue), every call through the gateway as a
//! client makes it:
//!
//! 1. create the cluster with `desired_capacity` N → CLUSTER_CREATE
//!    SUCCEEDED;
//! 2. `cluster show` (REST `GET /clusters/{id}`), and the whole node list
//!    paged by 100 (`openstack cluster node list`: `GET
//!    /nodes?cluster_id=…&limit=100&marker=…`), per call;
//! 3. scale out by N/10 → SUCCEEDED;
//! 4. scale in by N/10 with a `senlin.policy.deletion-1.1` policy
//!    (OLDEST_FIRST, no hook) → SUCCEEDED;
//! 5. at the largest size, scale in by N/10 again, the deletion policy now
//!    with a lifecycle hook: every token completed by `--completers`
//!    concurrent callers; from the last completion answered to the
//!    scale-in's end.
//!
//! Each action's time runs from the clock read just before the request to
//! the action's stored `updated_at` (the services run in this process, on
//! the same clock); its cost per node is that over the nodes it made or
//! removed — flat from 100 to 10,000 when it grows linearly. The simulated
//! driver builds and deletes instances at once (`build_ms` = `delete_ms`
//! = 0) and the quotas are lifted, so the figures are Ember's own work.
//! Prints figures; never passes or fails on time.

use std::time::{Duration, Instant};

use ember_proto::engine::v1 as pb;
use serde_json::{Value, json};

use super::hooks::{
    Gateway, POLL, QUEUE, between, complete_concurrently, create_node_profile, create_policy,
    millis, print_figure, print_header, print_row, time,
};
use super::summarize;
use crate::dev::{DevCredentials, RunningEmber};

/// How often the bench reads an action it waits for: rarely enough that
/// its own reads cost the engine nothing worth counting. Every figure is
/// taken from the action's stored times, never from when a read saw it
/// end; and a read of an action over thousands of nodes decodes all their
/// ids, so a bench polling every millisecond spent a third of a core on
/// its own reads (perf: `get_action` was 8% of all samples).
const ACTION_POLL: Duration = Duration::from_millis(100);
/// Measured `cluster show` calls per size.
const SHOWS: usize = 200;
/// The node list's page.
const PAGE: usize = 100;

pub struct ClusterScaleBench {
    pub sizes: Vec<usize>,
    pub completers: usize,
}

/// One size's figures.
struct SizeRun {
    nodes: usize,
    create: Duration,
    scale_out: (usize, Duration),
    scale_in: (usize, Duration),
    show: Vec<Duration>,
    pages: Vec<Duration>,
}

pub async fn run(bench: ClusterScaleBench) -> Result<(), String> {
    println!(
        "one cluster of simulated nodes (build_ms = delete_ms = 0) on `ember dev` (SQLite, \
         embedded queue), through the gateway; a fresh deployment per size"
    );
    let largest = bench.sizes.iter().copied().max().unwrap_or(0);
    let mut runs = Vec::with_capacity(bench.sizes.len());
    for &nodes in &bench.sizes {
        let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
        let running = start(data_dir.path(), nodes).await?;
        let result = at_size(
            &running,
            nodes,
            (nodes == largest).then_some(bench.completers),
        )
        .await;
        let stopped = running.stop().await;
        runs.push(result.and_then(|run| stopped.map(|()| run))?);
    }

    println!();
    println!(
        "cost per node of each action (request → stored end, over the nodes it made or removed)"
    );
    println!(
        "{:<10} {:>12} {:>10} {:>12} {:>10} {:>12} {:>10}",
        "nodes", "create ms", "µs/node", "scale-out ms", "µs/node", "scale-in ms", "µs/node"
    );
    for run in &runs {
        let per_node =
            |duration: Duration, count: usize| duration.as_secs_f64() * 1e6 / count.max(1) as f64;
        println!(
            "{:<10} {:>12.1} {:>10.1} {:>12.1} {:>10.1} {:>12.1} {:>10.1}",
            run.nodes,
            millis(run.create),
            per_node(run.create, run.nodes),
            millis(run.scale_out.1),
            per_node(run.scale_out.1, run.scale_out.0),
            millis(run.scale_in.1),
            per_node(run.scale_in.1, run.scale_in.0),
        );
    }
    println!();
    print_header("reads (milliseconds per call)");
    for run in &mut runs {
        print_row(
            &format!("GET /clusters/{{id}}, {} nodes", run.nodes),
            &mut run.show,
        );
        let pages = run.pages.len();
        print_row(
            &format!(
                "GET /nodes?cluster_id=&limit={PAGE}, all {pages} pages of {}",
                run.nodes
            ),
            &mut run.pages,
        );
    }
    Ok(())
}

async fn start(data_dir: &std::path::Path, nodes: usize) -> Result<RunningEmber, String> {
    let (mut config, secrets) = crate::dev::ephemeral_config(data_dir);
    config.engine.compute.build_ms = 0;
    config.engine.compute.delete_ms = 0;
    let room = u64::try_from(nodes * 2).unwrap_or(u64::MAX);
    let quotas = &mut config.engine.quotas;
    quotas.nodes_per_cluster = quotas.nodes_per_cluster.max(room);
    quotas.nodes = quotas.nodes.max(room);
    quotas.instances = quotas.instances.max(room);
    RunningEmber::start(config, secrets).await
}

async fn at_size(
    running: &RunningEmber,
    nodes: usize,
    completers: Option<usize>,
) -> Result<SizeRun, String> {
    let gateway = Gateway::connect(running).await?;
    create_node_profile(&gateway).await?;
    let spec = json!({"type": "senlin.policy.deletion", "version": "1.1",
        "properties": {"criteria": "OLDEST_FIRST"}});
    create_policy(&gateway, "bench-oldest", spec).await?;

    let sent_at = ember_runtime::time::now();
    let created = gateway
        .clusters()
        .create_cluster(gateway.request(pb::CreateClusterRequest {
            name: "bench-scale".to_owned(),
            profile: "bench-node".to_owned(),
            min_size: 0,
            max_size: -1,
            desired_capacity: count(nodes)?,
            ..pb::CreateClusterRequest::default()
        }))
        .await
        .map_err(|status| format!("CreateCluster: {}", status.message()))?
        .into_inner();
    let create = ended(&gateway, &created.action_id, sent_at).await?;
    let cluster_id = created
        .cluster
        .map(|cluster| cluster.id)
        .ok_or("CreateCluster answered without the cluster")?;
    println!("{nodes} nodes: created in {:.1} ms", millis(create));
    attach(&gateway, &cluster_id, "bench-oldest").await?;
    let (show, pages) = reads(running, &cluster_id, nodes).await?;

    let step = (nodes / 10).max(1);
    let sent_at = ember_runtime::time::now();
    let scaled = scale(&gateway, &cluster_id, Scale::Out, step).await?;
    let scale_out = ended(&gateway, &scaled, sent_at).await?;
    let sent_at = ember_runtime::time::now();
    let scaled = scale(&gateway, &cluster_id, Scale::In, step).await?;
    let scale_in = ended(&gateway, &scaled, sent_at).await?;
    println!(
        "{nodes} nodes: scaled out by {step} in {:.1} ms, in by {step} in {:.1} ms",
        millis(scale_out),
        millis(scale_in)
    );
    if let Some(completers) = completers {
        hooked_scale_in(&gateway, &cluster_id, step, completers).await?;
    }
    Ok(SizeRun {
        nodes,
        create,
        scale_out: (step, scale_out),
        scale_in: (step, scale_in),
        show,
        pages,
    })
}

fn count(nodes: usize) -> Result<i32, String> {
    i32::try_from(nodes).map_err(|error| error.to_string())
}

/// Attaches `policy` to the cluster and waits for the attach.
async fn attach(gateway: &Gateway, cluster_id: &str, policy: &str) -> Result<(), String> {
    let attached = gateway
        .clusters()
        .attach_policy(gateway.request(pb::AttachPolicyRequest {
            cluster: cluster_id.to_owned(),
            policy: policy.to_owned(),
            ..pb::AttachPolicyRequest::default()
        }))
        .await
        .map_err(|status| format!("AttachPolicy {policy}: {}", status.message()))?
        .into_inner();
    gateway.succeeded(&attached.action_id, ACTION_POLL).await?;
    Ok(())
}

#[derive(Clone, Copy)]
enum Scale {
    Out,
    In,
}

/// Scales the cluster out or in by `step`: the action's id.
async fn scale(
    gateway: &Gateway,
    cluster_id: &str,
    direction: Scale,
    step: usize,
) -> Result<String, String> {
    let request = gateway.request(pb::ScaleRequest {
        cluster: cluster_id.to_owned(),
        count: u32::try_from(step).map_err(|error| error.to_string())?,
    });
    let answer = match direction {
        Scale::Out => gateway.clusters().scale_out(request).await,
        Scale::In => gateway.clusters().scale_in(request).await,
    };
    Ok(answer
        .map_err(|status| format!("scaling by {step}: {}", status.message()))?
        .into_inner()
        .action_id)
}

/// Waits for the action to succeed: from `sent_at` to its stored end.
async fn ended(
    gateway: &Gateway,
    action_id: &str,
    sent_at: chrono::DateTime<chrono::Utc>,
) -> Result<Duration, String> {
    let action = gateway.succeeded(action_id, ACTION_POLL).await?;
    Ok(between(sent_at, time(action.updated_at.as_ref())?))
}

/// `cluster show`, and the node list walked page by page: each call's
/// latency (REST through the gateway, one keep-alive connection).
async fn reads(
    running: &RunningEmber,
    cluster_id: &str,
    nodes: usize,
) -> Result<(Vec<Duration>, Vec<Duration>), String> {
    let credentials = DevCredentials::mint(
        running.gateway_addr,
        &running.secrets,
        Duration::from_secs(3600),
    )?;
    let token = credentials.member.token;
    let http = reqwest::Client::new();
    let base = format!("http://{}/clustering/v1", running.gateway_addr);
    let get = |path: String| {
        let request = http
            .get(format!("{base}{path}"))
            .header("X-Auth-Token", &token)
            .header("OpenStack-API-Version", "clustering 1.14");
        async move {
            let response = request.send().await.map_err(|error| error.to_string())?;
            let status = response.status();
            let body: Value = response.json().await.map_err(|error| error.to_string())?;
            if status.as_u16() != 200 {
                return Err(format!("GET {path}: {status}: {body}"));
            }
            Ok::<_, String>(body)
        }
    };

    let mut show = Vec::with_capacity(SHOWS);
    for _ in 0..SHOWS {
        let started = Instant::now();
        let body = get(format!("/clusters/{cluster_id}")).await?;
        show.push(started.elapsed());
        let members = body["cluster"]["nodes"].as_array().map_or(0, Vec::len);
        if members != nodes {
            return Err(format!("cluster show listed {members} of {nodes} nodes"));
        }
    }

    let mut pages = Vec::with_capacity(nodes / PAGE + 1);
    let mut listed = 0;
    let mut marker = String::new();
    loop {
        let mut path = format!("/nodes?cluster_id={cluster_id}&limit={PAGE}");
        if !marker.is_empty() {
            path.push_str(&format!("&marker={marker}"));
        }
        let started = Instant::now();
        let body = get(path).await?;
        pages.push(started.elapsed());
        let page = body["nodes"].as_array().cloned().unwrap_or_default();
        listed += page.len();
        match page.last().and_then(|node| node["id"].as_str()) {
            Some(last) if page.len() == PAGE => marker = last.to_owned(),
            _ => break,
        }
    }
    if listed != nodes {
        return Err(format!("the node list paged {listed} of {nodes} nodes"));
    }
    Ok((show, pages))
}

/// A scale-in of `step` nodes held by a lifecycle hook (the deletion
/// policy's, on the embedded queue), every token completed by
/// `completers` concurrent callers.
async fn hooked_scale_in(
    gateway: &Gateway,
    cluster_id: &str,
    step: usize,
    completers: usize,
) -> Result<(), String> {
    detach(gateway, cluster_id, "bench-oldest").await?;
    let spec = json!({"type": "senlin.policy.deletion", "version": "1.1",
        "properties": {"criteria": "OLDEST_FIRST",
            "hooks": {"type": "zaqar", "params": {"queue": QUEUE}, "timeout": 3600}}});
    create_policy(gateway, "bench-hooked", spec).await?;
    attach(gateway, cluster_id, "bench-hooked").await?;

    let started = Instant::now();
    let scaled = scale(gateway, cluster_id, Scale::In, step).await?;
    let pending = loop {
        let pending = gateway.pending(cluster_id, false).await?;
        if pending.len() >= step {
            break pending;
        }
        if started.elapsed() > super::hooks::PATIENCE {
            return Err(format!(
                "{} of {step} removals waiting on the hook after {:?}",
                pending.len(),
                super::hooks::PATIENCE
            ));
        }
        tokio::time::sleep(POLL * 10).await;
    };
    let waiting = started.elapsed();
    let tokens: Vec<String> = pending.into_iter().map(|action| action.token).collect();
    let completing = Instant::now();
    let completions =
        complete_concurrently(gateway, cluster_id, &tokens, completers, "CONTINUE").await?;
    let mut answers: Vec<Duration> = completions
        .iter()
        .map(|completion| completion.took)
        .collect();
    let last_answer_at = ember_runtime::time::now();
    let all_answered = completing.elapsed();
    let action = gateway.succeeded(&scaled, ACTION_POLL).await?;
    let to_end = between(last_answer_at, time(action.updated_at.as_ref())?);

    println!();
    println!(
        "scale_in of {step} nodes held by a lifecycle hook (embedded queue), completed by \
         {completers} concurrent callers"
    );
    print_figure(
        &format!("scale_in → all {step} removals waiting (ListPending)"),
        millis(waiting),
        1,
        "ms",
    );
    print_figure(
        &format!("{} completions by {completers} callers", tokens.len()),
        millis(all_answered),
        1,
        "ms",
    );
    print_figure(
        "last complete_lifecycle → CLUSTER_SCALE_IN SUCCEEDED",
        millis(to_end),
        1,
        "ms",
    );
    let summary = summarize(&mut answers);
    print_figure(
        "  one CompleteLifecycle under that load, p50",
        summary.median_us / 1e3,
        2,
        "ms",
    );
    print_figure("  p99", summary.p99_us / 1e3, 2, "ms");
    removal_timeline(gateway, &completions, last_answer_at).await
}

/// Where the hooked removals' time went, read from each NODE_DELETE's
/// stored times once the scale-in ended: from its completion answered to
/// its run starting (waiting for a slot), and its run; and how many had not
/// started when the last completion was answered.
async fn removal_timeline(
    gateway: &Gateway,
    completions: &[super::hooks::Completion],
    last_answer_at: chrono::DateTime<chrono::Utc>,
) -> Result<(), String> {
    use futures::StreamExt as _;
    let actions: Vec<Result<pb::Action, String>> = futures::stream::iter(
        completions
            .iter()
            .map(|completion| gateway.action(&completion.token)),
    )
    .buffered(8)
    .collect()
    .await;
    let mut waited = Vec::with_capacity(completions.len());
    let mut ran = Vec::with_capacity(completions.len());
    let mut behind = 0;
    for (completion, action) in completions.iter().zip(actions) {
        let action = action?;
        let started = time(action.started_at.as_ref())?;
        let ended = time(action.ended_at.as_ref())?;
        waited.push(between(completion.answered_at, started));
        ran.push(between(started, ended));
        if started > last_answer_at {
            behind += 1;
        }
    }
    print_figure(
        "  removals not yet started at the last completion",
        f64::from(behind),
        0,
        "",
    );
    for (what, samples) in [
        ("  completion → its NODE_DELETE running", &mut waited),
        ("  NODE_DELETE running → ended", &mut ran),
    ] {
        let summary = summarize(samples);
        print_figure(&format!("{what}, p50"), summary.median_us / 1e3, 2, "ms");
        print_figure(&format!("{what}, p99"), summary.p99_us / 1e3, 2, "ms");
    }
    Ok(())
}

/// Detaches `policy` from the cluster and waits for the detach.
async fn detach(gateway: &Gateway, cluster_id: &str, policy: &str) -> Result<(), String> {
    let detached = gateway
        .clusters()
        .detach_policy(gateway.request(pb::DetachPolicyRequest {
            cluster: cluster_id.to_owned(),
            policy: policy.to_owned(),
        }))
        .await
        .map_err(|status| format!("DetachPolicy {policy}: {}", status.message()))?
        .into_inner();
    gateway.succeeded(&detached.action_id, ACTION_POLL).await?;
    Ok(())
}
