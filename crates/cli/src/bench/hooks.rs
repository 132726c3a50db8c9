//! `ember bench hooks`: scale-in lifecycle hooks on the embedded defaults
//! (SQLite, the embedded queue, no NATS), as a user sees them through the
//! gateway's gRPC services, and as one lifecycle-hook holds them.
//!
//! 1. Delivery: `scale_in` of every node of a cluster with a
//!    `senlin.policy.deletion-1.1` policy whose hook is the embedded queue;
//!    from the request to the last message delivered (the `delivered_at`
//!    lifecycle-hook records, against the clock read just before the
//!    request; all services run in this process, on the same clock), with
//!    where the time went, read from the timestamps the services store.
//! 2. Completion: `complete_lifecycle` of each token one at a time, to its
//!    NODE_DELETE action SUCCEEDED (the node row is deleted just before);
//!    then the deadline path with real actions: a scale-in whose 1 s hook
//!    nobody completes, from the deadline to every node deleted.
//! 3. Holding: many pending actions recorded through lifecycle-hook's
//!    internal service the way the engine records them, all with one
//!    deadline a few seconds ahead; the process RSS, and the time from the
//!    deadline to every one fired.
//!
//! The simulated compute driver builds and deletes instances at once
//! (`engine.compute.build_ms` and `delete_ms` 0), so the figures are
//! Ember's own work. Prints figures; never passes or fails on time.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::action_service_client::ActionServiceClient;
use ember_proto::engine::v1::cluster_service_client::ClusterServiceClient;
use ember_proto::engine::v1::policy_service_client::PolicyServiceClient;
use ember_proto::engine::v1::profile_service_client::ProfileServiceClient;
use ember_proto::lifecyclehook::v1 as hook_pb;
use ember_proto::lifecyclehook::v1::lifecycle_hook_internal_service_client::LifecycleHookInternalServiceClient;
use ember_proto::lifecyclehook::v1::lifecycle_hook_service_client::LifecycleHookServiceClient;
use ember_runtime::Identity;
use ember_runtime::identity::InternalCredential;
use serde_json::json;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::Channel;
use uuid::Uuid;

use super::{connect, summarize};
use crate::dev::{DEV_PROJECT, DevCredentials, RunningEmber};

/// Between two polls of a state the bench waits for.
const POLL: Duration = Duration::from_millis(1);
/// The longest wait for any one state.
const PATIENCE: Duration = Duration::from_secs(120);
/// The hook's timeout in the delivery and completion cases: long enough
/// that no deadline fires while they run.
const HOOK_TIMEOUT_SECS: u32 = 3600;
const QUEUE: &str = "bench-drain";
/// Pending actions per RecordPendingActions call (the engine sends one
/// call per removal).
const RECORD_BATCH: usize = 1000;
/// How far ahead of the recording the deadline of the held actions is.
const DEADLINE_LEAD: Duration = Duration::from_secs(5);

pub async fn run(runs: usize, nodes: usize, pending: usize) -> Result<(), String> {
    // With RUST_LOG set, the services' logs (and tower_http=debug's latency
    // of every gRPC call) show where a slow figure's time went.
    if std::env::var_os("RUST_LOG").is_some() {
        ember_runtime::telemetry::init(&ember_runtime::config::LogConfig::default());
    }
    println!(
        "scale-in lifecycle hooks on SQLite and the embedded queue (no NATS), through the gateway; \
         simulated compute with build_ms = delete_ms = 0 (the default delete_ms is 200), so the \
         figures measure Ember"
    );
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let running = start(data_dir.path()).await?;
    let result = delivery_and_completion(&running, runs, nodes).await;
    let stopped = running.stop().await;
    result.and(stopped)?;

    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let running = start(data_dir.path()).await?;
    let result = holding(&running, pending).await;
    let stopped = running.stop().await;
    result.and(stopped)
}

async fn start(data_dir: &std::path::Path) -> Result<RunningEmber, String> {
    let (mut config, secrets) = crate::dev::ephemeral_config(data_dir);
    config.engine.compute.build_ms = 0;
    config.engine.compute.delete_ms = 0;
    RunningEmber::start(config, secrets).await
}

/// The gateway's gRPC services, called as the dev project's member.
struct Gateway {
    channel: Channel,
    bearer: MetadataValue<Ascii>,
}

impl Gateway {
    async fn connect(running: &RunningEmber) -> Result<Gateway, String> {
        let credentials = DevCredentials::mint(
            running.gateway_addr,
            &running.secrets,
            Duration::from_secs(3600),
        )?;
        let bearer = format!("Bearer {}", credentials.member.token)
            .parse()
            .map_err(|_| "token is not a valid header".to_owned())?;
        Ok(Gateway {
            channel: connect(running.gateway_addr).await?,
            bearer,
        })
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request
            .metadata_mut()
            .insert("authorization", self.bearer.clone());
        request
    }

    fn clusters(&self) -> ClusterServiceClient<Channel> {
        ClusterServiceClient::new(self.channel.clone())
    }

    fn hooks(&self) -> LifecycleHookServiceClient<Channel> {
        LifecycleHookServiceClient::new(self.channel.clone())
    }

    async fn action(&self, id: &str) -> Result<pb::Action, String> {
        ActionServiceClient::new(self.channel.clone())
            .get_action(self.request(pb::GetObjectRequest { id: id.to_owned() }))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|status| format!("GetAction {id}: {}", status.message()))
    }

    /// Polls an action every `poll` until it is final; an error unless it
    /// SUCCEEDED.
    async fn succeeded(&self, id: &str, poll: Duration) -> Result<pb::Action, String> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let action = self.action(id).await?;
            match action.status.as_str() {
                "SUCCEEDED" => return Ok(action),
                "FAILED" | "CANCELLED" => {
                    return Err(format!(
                        "action {id} ({}) is {}: {}",
                        action.action, action.status, action.status_reason
                    ));
                }
                _ if Instant::now() > deadline => {
                    return Err(format!("action {id} is still {}", action.status));
                }
                _ => tokio::time::sleep(poll).await,
            }
        }
    }

    /// The cluster's actions in `status` (at most 1000).
    async fn clusters_actions(
        &self,
        cluster_id: &str,
        status: &str,
    ) -> Result<Vec<pb::Action>, String> {
        Ok(ActionServiceClient::new(self.channel.clone())
            .list_actions(self.request(pb::ListActionsRequest {
                cluster: cluster_id.to_owned(),
                status: status.to_owned(),
                limit: 1000,
                marker: String::new(),
            }))
            .await
            .map_err(|status| format!("ListActions: {}", status.message()))?
            .into_inner()
            .actions)
    }

    /// Every pending action (of `cluster_id`, or all), page by page.
    async fn pending(
        &self,
        cluster_id: &str,
        include_resolved: bool,
    ) -> Result<Vec<hook_pb::PendingLifecycleAction>, String> {
        let mut all = Vec::new();
        let mut marker = String::new();
        loop {
            let page = self
                .hooks()
                .list_pending(self.request(hook_pb::ListPendingRequest {
                    cluster_id: cluster_id.to_owned(),
                    limit: 1000,
                    marker,
                    include_resolved,
                }))
                .await
                .map_err(|status| format!("ListPending: {}", status.message()))?
                .into_inner();
            all.extend(page.actions);
            if page.next_marker.is_empty() {
                return Ok(all);
            }
            marker = page.next_marker;
        }
    }
}

fn time(timestamp: Option<&prost_types::Timestamp>) -> Result<DateTime<Utc>, String> {
    timestamp
        .and_then(|t| DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).unwrap_or(0)))
        .ok_or_else(|| "a timestamp is missing".to_owned())
}

/// `later - earlier` (zero if the clock says otherwise).
fn between(earlier: DateTime<Utc>, later: DateTime<Utc>) -> Duration {
    (later - earlier).to_std().unwrap_or_default()
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// Prints median, p99, min and max of `samples` in milliseconds.
fn print_row(label: &str, samples: &mut [Duration]) {
    let summary = summarize(samples);
    let (min, max) = (
        samples.first().copied().unwrap_or_default(),
        samples.last().copied().unwrap_or_default(),
    );
    println!(
        "{label:<58} {:>8.2} {:>8.2} {:>8.2} {:>8.2}",
        summary.median_us / 1e3,
        summary.p99_us / 1e3,
        millis(min),
        millis(max)
    );
}

/// Prints one figure: a label, a value with `decimals`, and its unit.
fn print_figure(label: &str, value: f64, decimals: usize, unit: &str) {
    println!("{label:<58} {value:>10.decimals$} {unit}");
}

fn print_header(what: &str) {
    println!(
        "{what:<58} {:>8} {:>8} {:>8} {:>8}",
        "median", "p99", "min", "max"
    );
}

/// Where the time of one delivery run went.
#[derive(Default)]
struct DeliveryRun {
    /// Request sent → last message delivered (stored timestamps).
    total: Duration,
    /// Request sent → the poll that saw every message delivered.
    observed: Duration,
    /// Request sent → the CLUSTER_SCALE_IN action recorded.
    accepted: Duration,
    /// Recorded → the NODE_DELETE children made (the dispatcher claimed the
    /// action and loaded the cluster, its nodes and its policy).
    claimed: Duration,
    /// Children made → lifecycle-hook recorded the pending actions (the
    /// engine's transaction, then the hand-over call).
    handed_over: Duration,
    /// Recorded → the last message on the embedded queue.
    queued: Duration,
}

async fn delivery_and_completion(
    running: &RunningEmber,
    runs: usize,
    nodes: usize,
) -> Result<(), String> {
    let gateway = Gateway::connect(running).await?;
    let node_spec = json!({"type": "ember.instance", "version": "1.0",
        "properties": {"flavor": "m1.small", "image": "debian-12"}});
    ProfileServiceClient::new(gateway.channel.clone())
        .create_profile(gateway.request(pb::CreateProfileRequest {
            name: "bench-node".to_owned(),
            spec: node_spec.to_string(),
            metadata: String::new(),
        }))
        .await
        .map_err(|status| format!("CreateProfile: {}", status.message()))?;
    for (name, timeout) in [("bench-drain", HOOK_TIMEOUT_SECS), ("bench-expire", 1)] {
        let spec = json!({"type": "senlin.policy.deletion", "version": "1.1",
            "properties": {"criteria": "OLDEST_FIRST",
                "hooks": {"type": "zaqar", "params": {"queue": QUEUE}, "timeout": timeout}}});
        PolicyServiceClient::new(gateway.channel.clone())
            .create_policy(gateway.request(pb::CreatePolicyRequest {
                name: name.to_owned(),
                spec: spec.to_string(),
            }))
            .await
            .map_err(|status| format!("CreatePolicy: {}", status.message()))?;
    }

    let mut deliveries = Vec::with_capacity(runs);
    let (mut completions, mut answers, mut observed) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        let cluster_id =
            cluster_with_hook(&gateway, &format!("bench-{run}"), "bench-drain", nodes).await?;
        let (delivery, tokens) = scale_in(&gateway, &cluster_id, nodes).await?;
        deliveries.push(delivery);
        for token in &tokens {
            let sent_at = ember_runtime::time::now();
            let started = Instant::now();
            gateway
                .clusters()
                .complete_lifecycle(gateway.request(pb::LifecycleTokenRequest {
                    cluster: cluster_id.clone(),
                    lifecycle_action_token: token.clone(),
                }))
                .await
                .map_err(|status| format!("CompleteLifecycle {token}: {}", status.message()))?;
            answers.push(started.elapsed());
            let action = gateway.succeeded(token, POLL).await?;
            observed.push(started.elapsed());
            completions.push(between(sent_at, time(action.updated_at.as_ref())?));
        }
    }

    println!();
    println!(
        "scale_in of {nodes} nodes, hook on the embedded queue ({runs} runs, milliseconds; \
         stored timestamps against the clock read before the request)"
    );
    print_header("case");
    let column = |pick: fn(&DeliveryRun) -> Duration| -> Vec<Duration> {
        deliveries.iter().map(pick).collect()
    };
    print_row(
        &format!("request → all {nodes} messages delivered"),
        &mut column(|run| run.total),
    );
    print_row(
        "  the same, seen by polling ListPending (1 ms)",
        &mut column(|run| run.observed),
    );
    print_row(
        "  request → CLUSTER_SCALE_IN recorded",
        &mut column(|run| run.accepted),
    );
    print_row(
        "  → claimed; cluster, nodes, policy read; children made",
        &mut column(|run| run.claimed),
    );
    print_row(
        "  → children stored, handed to lifecycle-hook",
        &mut column(|run| run.handed_over),
    );
    print_row(
        "  → last message on the embedded queue",
        &mut column(|run| run.queued),
    );

    println!();
    println!(
        "complete_lifecycle → its NODE_DELETE SUCCEEDED, one at a time, {} completions (milliseconds)",
        completions.len()
    );
    print_header("case");
    print_row(
        "complete_lifecycle → node deleted (stored updated_at)",
        &mut completions,
    );
    print_row(
        "  the same, seen by polling GetAction (1 ms)",
        &mut observed,
    );
    print_row("  the CompleteLifecycle call alone", &mut answers);
    expiry(&gateway, nodes).await
}

/// The deadline path with real actions: a scale-in whose hook times out
/// after 1 s (the least) and nobody completes.
async fn expiry(gateway: &Gateway, nodes: usize) -> Result<(), String> {
    let cluster_id = cluster_with_hook(gateway, "bench-expire", "bench-expire", nodes).await?;
    let scale_in = gateway
        .clusters()
        .scale_in(gateway.request(pb::ScaleRequest {
            cluster: cluster_id.clone(),
            count: u32::try_from(nodes).map_err(|error| error.to_string())?,
        }))
        .await
        .map_err(|status| format!("ScaleIn: {}", status.message()))?
        .into_inner();
    // The parent finishes with its last NODE_DELETE.
    gateway
        .succeeded(&scale_in.action_id, Duration::from_millis(10))
        .await?;
    let resolved = gateway.pending(&cluster_id, true).await?;
    let (mut deadlines, mut expired_at) = (Vec::new(), Vec::new());
    for action in resolved
        .iter()
        .filter(|action| action.resolution == "EXPIRED")
    {
        deadlines.push(time(action.deadline.as_ref())?);
        expired_at.push(time(action.resolved_at.as_ref())?);
    }
    let mut deleted_at = Vec::new();
    for action in gateway.clusters_actions(&cluster_id, "SUCCEEDED").await? {
        if action.action == "NODE_DELETE" {
            deleted_at.push(time(action.updated_at.as_ref())?);
        }
    }
    if expired_at.len() != nodes || deleted_at.len() != nodes {
        return Err(format!(
            "{} of {nodes} hooks expired and {} nodes deleted",
            expired_at.len(),
            deleted_at.len()
        ));
    }
    let deadline = deadlines.iter().min().copied().unwrap_or_default();
    let after = |times: &[DateTime<Utc>]| {
        millis(between(
            deadline,
            times.iter().max().copied().unwrap_or(deadline),
        ))
    };
    println!();
    println!("deadline path: scale_in of {nodes} nodes, hook timeout 1 s, nobody completes");
    print_figure(
        &format!("deadline → all {nodes} EXPIRED (lifecycle-hook resolved_at)"),
        after(&expired_at),
        1,
        "ms",
    );
    print_figure(
        &format!("deadline → all {nodes} nodes deleted (NODE_DELETE updated_at)"),
        after(&deleted_at),
        1,
        "ms",
    );
    Ok(())
}

/// A cluster of `nodes` ACTIVE nodes with `policy` attached; its id.
async fn cluster_with_hook(
    gateway: &Gateway,
    name: &str,
    policy: &str,
    nodes: usize,
) -> Result<String, String> {
    let created = gateway
        .clusters()
        .create_cluster(gateway.request(pb::CreateClusterRequest {
            name: name.to_owned(),
            profile: "bench-node".to_owned(),
            min_size: 0,
            max_size: -1,
            desired_capacity: i32::try_from(nodes).map_err(|error| error.to_string())?,
            metadata: String::new(),
        }))
        .await
        .map_err(|status| format!("CreateCluster: {}", status.message()))?
        .into_inner();
    gateway.succeeded(&created.action_id, POLL).await?;
    let cluster_id = created
        .cluster
        .map(|cluster| cluster.id)
        .ok_or("CreateCluster answered without the cluster")?;
    let attached = gateway
        .clusters()
        .attach_policy(gateway.request(pb::AttachPolicyRequest {
            cluster: cluster_id.clone(),
            policy: policy.to_owned(),
            priority: 0,
            enabled: None,
        }))
        .await
        .map_err(|status| format!("AttachPolicy: {}", status.message()))?
        .into_inner();
    gateway.succeeded(&attached.action_id, POLL).await?;
    Ok(cluster_id)
}

/// Scales the cluster in by `nodes` and waits for every message; returns
/// the run's figures and the lifecycle action tokens.
async fn scale_in(
    gateway: &Gateway,
    cluster_id: &str,
    nodes: usize,
) -> Result<(DeliveryRun, Vec<String>), String> {
    let sent_at = ember_runtime::time::now();
    let started = Instant::now();
    let scale_in = gateway
        .clusters()
        .scale_in(gateway.request(pb::ScaleRequest {
            cluster: cluster_id.to_owned(),
            count: u32::try_from(nodes).map_err(|error| error.to_string())?,
        }))
        .await
        .map_err(|status| format!("ScaleIn: {}", status.message()))?
        .into_inner();
    let delivered = hook_pb::DeliveryState::Delivered as i32;
    let pending = loop {
        let pending = gateway.pending(cluster_id, false).await?;
        if pending.len() == nodes
            && pending
                .iter()
                .all(|action| action.delivery_state == delivered)
        {
            break pending;
        }
        if started.elapsed() > PATIENCE {
            return Err(format!(
                "{} of {nodes} messages delivered after {PATIENCE:?}",
                pending
                    .iter()
                    .filter(|action| action.delivery_state == delivered)
                    .count()
            ));
        }
        tokio::time::sleep(POLL).await;
    };
    let observed = started.elapsed();

    let parent = gateway.action(&scale_in.action_id).await?;
    let children = gateway
        .clusters_actions(cluster_id, "WAITING_LIFECYCLE_COMPLETION")
        .await?;
    let accepted_at = time(parent.created_at.as_ref())?;
    let mut children_at = Vec::with_capacity(children.len());
    for child in &children {
        children_at.push(time(child.created_at.as_ref())?);
    }
    let (mut recorded_at, mut delivered_at) = (Vec::new(), Vec::new());
    for action in &pending {
        recorded_at.push(time(action.created_at.as_ref())?);
        delivered_at.push(time(action.delivered_at.as_ref())?);
    }
    let earliest = |times: &[DateTime<Utc>]| times.iter().min().copied().unwrap_or(sent_at);
    let last_delivered = delivered_at.iter().max().copied().unwrap_or(sent_at);
    let run = DeliveryRun {
        total: between(sent_at, last_delivered),
        observed,
        accepted: between(sent_at, accepted_at),
        claimed: between(accepted_at, earliest(&children_at)),
        handed_over: between(earliest(&children_at), earliest(&recorded_at)),
        queued: between(earliest(&recorded_at), last_delivered),
    };
    Ok((
        run,
        pending.into_iter().map(|action| action.token).collect(),
    ))
}

/// The resident set size of this process (every service runs in it), KiB.
fn resident_kib() -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|error| format!("cannot read /proc/self/status: {error}"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| "no VmRSS in /proc/self/status".to_owned())
}

async fn holding(running: &RunningEmber, count: usize) -> Result<(), String> {
    let gateway = Gateway::connect(running).await?;
    // Warm the gateway, lifecycle-hook and its database before the baseline.
    gateway.pending("", true).await?;
    let resident_before = resident_kib()?;

    let mut internal =
        LifecycleHookInternalServiceClient::new(connect(running.lifecycle_hook_addr).await?);
    let credential = InternalCredential::new(&running.secrets.internal_credential);
    let engine = Identity::new("ember-engine", DEV_PROJECT, vec!["admin".to_owned()]);
    let cluster_id = Uuid::now_v7().to_string();
    let queue = "bench-held";
    let started_at = ember_runtime::time::now();
    let started = Instant::now();
    let deadline = started_at
        + chrono::Duration::from_std(DEADLINE_LEAD).map_err(|error| error.to_string())?;
    let mut recorded = 0;
    while recorded < count {
        let batch = RECORD_BATCH.min(count - recorded);
        let actions = (0..batch)
            .map(|_| hook_pb::NewPendingAction {
                token: Uuid::now_v7().to_string(),
                node_id: Uuid::now_v7().to_string(),
                resource_id: Uuid::new_v4().to_string(),
                cluster_id: cluster_id.clone(),
                project_id: DEV_PROJECT.to_owned(),
                target: Some(hook_pb::Target {
                    r#type: hook_pb::TargetType::Queue as i32,
                    queue: queue.to_owned(),
                    url: String::new(),
                }),
                timeout_secs: 60,
                deadline: Some(ember_runtime::time::to_timestamp(deadline)),
            })
            .collect();
        let mut request = tonic::Request::new(hook_pb::RecordPendingActionsRequest { actions });
        engine.attach(&credential, &mut request);
        internal
            .record_pending_actions(request)
            .await
            .map_err(|status| format!("RecordPendingActions: {}", status.message()))?;
        recorded += batch;
    }
    let recording = started.elapsed();

    // Every message is delivered (the embedded queue) before the deadline.
    let mut queued = 0;
    let mut after_id = 0;
    while queued < count {
        let messages = gateway
            .hooks()
            .list_queue_messages(gateway.request(hook_pb::ListQueueMessagesRequest {
                queue: queue.to_owned(),
                after_id,
                limit: 1000,
            }))
            .await
            .map_err(|status| format!("ListQueueMessages: {}", status.message()))?
            .into_inner()
            .messages;
        queued += messages.len();
        match messages.last() {
            Some(last) => after_id = last.id,
            None => tokio::time::sleep(Duration::from_millis(5)).await,
        }
        if started.elapsed() > PATIENCE {
            return Err(format!(
                "{queued} of {count} messages queued after {PATIENCE:?}"
            ));
        }
    }
    let delivering = started.elapsed();
    let resident_held = resident_kib()?;
    if ember_runtime::time::now() >= deadline {
        return Err(format!(
            "recording and delivering {count} actions took {:.1} s, past their deadline \
             {DEADLINE_LEAD:?} after the start: the firing figure would mix with delivery",
            delivering.as_secs_f64()
        ));
    }

    // Wait until no unresolved action is left.
    loop {
        let left = gateway
            .hooks()
            .list_pending(gateway.request(hook_pb::ListPendingRequest {
                limit: 1,
                ..Default::default()
            }))
            .await
            .map_err(|status| format!("ListPending: {}", status.message()))?
            .into_inner()
            .actions;
        if left.is_empty() {
            break;
        }
        if started.elapsed() > PATIENCE {
            return Err(format!("deadlines still unfired after {PATIENCE:?}"));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let observed = between(deadline, ember_runtime::time::now());
    let resident_after = resident_kib()?;

    let resolved = gateway.pending(&cluster_id, true).await?;
    let expired = resolved
        .iter()
        .filter(|action| action.resolution == "EXPIRED" && action.resolved_by == "deadline")
        .count();
    if resolved.len() != count || expired != count {
        return Err(format!(
            "{} actions found, {expired} EXPIRED by the deadline, instead of {count}",
            resolved.len()
        ));
    }
    let mut resolved_at = Vec::with_capacity(count);
    for action in &resolved {
        resolved_at.push(time(action.resolved_at.as_ref())?);
    }
    // One resolve per deadline pass stamps its whole batch with one time.
    resolved_at.sort_unstable();
    resolved_at.dedup();
    let first = resolved_at.first().copied().unwrap_or(deadline);
    let last = resolved_at.last().copied().unwrap_or(deadline);
    let mut passes: Vec<Duration> = resolved_at
        .windows(2)
        .map(|pair| between(pair[0], pair[1]))
        .collect();

    let mib = |kib: u64| kib as f64 / 1024.0;
    println!();
    println!(
        "{count} pending actions held by one lifecycle-hook (recorded through \
         RecordPendingActions, {RECORD_BATCH} per call, one deadline {} s after the start)",
        DEADLINE_LEAD.as_secs()
    );
    print_figure("recording them", millis(recording), 1, "ms");
    print_figure(
        "recording them + every message on the embedded queue",
        millis(delivering),
        1,
        "ms",
    );
    print_figure("process RSS before", mib(resident_before), 1, "MiB");
    print_figure(
        "RSS growth: held and delivered, before the deadline",
        mib(resident_held) - mib(resident_before),
        1,
        "MiB",
    );
    print_figure(
        "RSS growth: after every deadline fired",
        mib(resident_after) - mib(resident_before),
        1,
        "MiB",
    );
    let since_deadline = |time| millis(between(deadline, time));
    print_figure(
        "deadline → first fired (resolved_at)",
        since_deadline(first),
        1,
        "ms",
    );
    print_figure(
        &format!("deadline → all {count} fired (resolved_at)"),
        since_deadline(last),
        1,
        "ms",
    );
    print_figure(
        "  the same, seen by polling ListPending (5 ms)",
        millis(observed),
        1,
        "ms",
    );
    print_figure(
        "firing rate, first to last",
        count as f64 / between(first, last).as_secs_f64().max(1e-6),
        0,
        "/s",
    );
    print_figure(
        &format!(
            "one pass, median of {} (resolved_at to resolved_at)",
            passes.len()
        ),
        summarize(&mut passes).median_us / 1e3,
        1,
        "ms",
    );
    println!(
        "(the engine holds no action for these tokens and answers UNKNOWN: lifecycle-hook still \
         claims each deadline, calls the engine (500 tokens per ContinueAfterDeadline, one action \
         lookup per token) and resolves it EXPIRED with an EXPIRED event; the engine's READY update \
         per real action and the node deletes that follow are the deadline path above)"
    );
    Ok(())
}
