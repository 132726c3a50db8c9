//! `ember bench hooks`: lifecycle hooks on the embedded defaults
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
//! 4. Launching (`--launch`): one scale-out whose every new node waits on
//!    a launch hook, completed by `--callers` concurrent callers; from the
//!    last completion to the scale-out's end.
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

mod holding;
mod launch;
mod removal;

use crate::dev::{DEV_PROJECT, DevCredentials, RunningEmber};
use holding::holding;
use launch::launching;
use removal::delivery_and_completion;

/// Between two polls of a state the bench waits for.
pub(super) const POLL: Duration = Duration::from_millis(1);
/// The longest wait for any one state.
pub(super) const PATIENCE: Duration = Duration::from_secs(120);
/// The hook's timeout in the delivery and completion cases: long enough
/// that no deadline fires while they run.
const HOOK_TIMEOUT_SECS: u32 = 3600;
pub(super) const QUEUE: &str = "bench-drain";
/// Pending actions per RecordPendingActions call (the engine sends one
/// call per removal).
const RECORD_BATCH: usize = 1000;
/// How far ahead of the recording the deadline of the held actions is.
const DEADLINE_LEAD: Duration = Duration::from_secs(5);

pub async fn run(
    runs: usize,
    nodes: usize,
    pending: usize,
    launch: usize,
    callers: usize,
) -> Result<(), String> {
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
    result.and(stopped)?;

    if launch == 0 {
        return Ok(());
    }
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let running = start(data_dir.path()).await?;
    let result = launching(&running, launch, callers).await;
    let stopped = running.stop().await;
    result.and(stopped)
}

pub(super) async fn start(data_dir: &std::path::Path) -> Result<RunningEmber, String> {
    let (mut config, secrets) = crate::dev::ephemeral_config(data_dir);
    config.engine.compute.build_ms = 0;
    config.engine.compute.delete_ms = 0;
    RunningEmber::start(config, secrets).await
}

/// The gateway's gRPC services, called as the dev project's member.
#[derive(Clone)]
pub(super) struct Gateway {
    channel: Channel,
    bearer: MetadataValue<Ascii>,
}

impl Gateway {
    pub(super) async fn connect(running: &RunningEmber) -> Result<Gateway, String> {
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

    pub(super) fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request
            .metadata_mut()
            .insert("authorization", self.bearer.clone());
        request
    }

    pub(super) fn clusters(&self) -> ClusterServiceClient<Channel> {
        ClusterServiceClient::new(self.channel.clone())
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
    }

    pub(super) fn hooks(&self) -> LifecycleHookServiceClient<Channel> {
        LifecycleHookServiceClient::new(self.channel.clone())
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
    }

    pub(super) async fn action(&self, id: &str) -> Result<pb::Action, String> {
        ActionServiceClient::new(self.channel.clone())
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
            .get_action(self.request(pb::GetObjectRequest { id: id.to_owned() }))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|status| format!("GetAction {id}: {}", status.message()))
    }

    /// Polls an action every `poll` until it is final; an error unless it
    /// SUCCEEDED.
    pub(super) async fn succeeded(&self, id: &str, poll: Duration) -> Result<pb::Action, String> {
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
    pub(super) async fn clusters_actions(
        &self,
        cluster_id: &str,
        status: &str,
    ) -> Result<Vec<pb::Action>, String> {
        Ok(ActionServiceClient::new(self.channel.clone())
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
            .list_actions(self.request(pb::ListActionsRequest {
                cluster: cluster_id.to_owned(),
                status: status.to_owned(),
                limit: 1000,
                marker: String::new(),
                ..pb::ListActionsRequest::default()
            }))
            .await
            .map_err(|status| format!("ListActions: {}", status.message()))?
            .into_inner()
            .actions)
    }

    /// Every pending action (of `cluster_id`, or all), page by page.
    pub(super) async fn pending(
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

/// The profile `bench-node` every bench cluster is made of: an
/// `ember.instance` of the simulated driver.
pub(super) async fn create_node_profile(gateway: &Gateway) -> Result<(), String> {
    let node_spec = json!({"type": "ember.instance", "version": "1.0",
        "properties": {"flavor": "m1.small", "image": "debian-12"}});
    ProfileServiceClient::new(gateway.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .create_profile(gateway.request(pb::CreateProfileRequest {
            name: "bench-node".to_owned(),
            spec: node_spec.to_string(),
            metadata: String::new(),
            protected: false,
        }))
        .await
        .map_err(|status| format!("CreateProfile: {}", status.message()))?;
    Ok(())
}

/// Creates the policy `name` of `spec`.
pub(super) async fn create_policy(
    gateway: &Gateway,
    name: &str,
    spec: serde_json::Value,
) -> Result<(), String> {
    PolicyServiceClient::new(gateway.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .create_policy(gateway.request(pb::CreatePolicyRequest {
            name: name.to_owned(),
            spec: spec.to_string(),
        }))
        .await
        .map_err(|status| format!("CreatePolicy: {}", status.message()))?;
    Ok(())
}

/// One `complete_lifecycle` answered: its token, when the answer came,
/// and how long the call took.
pub(super) struct Completion {
    pub token: String,
    pub answered_at: DateTime<Utc>,
    pub took: Duration,
}

/// Completes the lifecycle actions of `tokens` with `result`, split among
/// `callers` concurrent callers, each on its own share one call at a
/// time; every call's answer.
pub(super) async fn complete_concurrently(
    gateway: &Gateway,
    cluster_id: &str,
    tokens: &[String],
    callers: usize,
    result: &str,
) -> Result<Vec<Completion>, String> {
    let per_caller = tokens.len().div_ceil(callers.max(1)).max(1);
    let mut tasks = tokio::task::JoinSet::new();
    for chunk in tokens.chunks(per_caller) {
        let (gateway, cluster_id, chunk) = (gateway.clone(), cluster_id.to_owned(), chunk.to_vec());
        let result = result.to_owned();
        tasks.spawn(async move {
            let mut answers = Vec::with_capacity(chunk.len());
            for token in chunk {
                let sent = Instant::now();
                gateway
                    .clusters()
                    .complete_lifecycle(gateway.request(pb::LifecycleTokenRequest {
                        cluster: cluster_id.clone(),
                        lifecycle_action_token: token.clone(),
                        lifecycle_action_result: result.clone(),
                    }))
                    .await
                    .map_err(|status| format!("CompleteLifecycle {token}: {}", status.message()))?;
                answers.push(Completion {
                    took: sent.elapsed(),
                    answered_at: ember_runtime::time::now(),
                    token,
                });
            }
            Ok::<_, String>(answers)
        });
    }
    let mut answers = Vec::with_capacity(tokens.len());
    while let Some(joined) = tasks.join_next().await {
        answers.extend(joined.map_err(|error| error.to_string())??);
    }
    Ok(answers)
}

pub(super) fn time(timestamp: Option<&prost_types::Timestamp>) -> Result<DateTime<Utc>, String> {
    timestamp
        .and_then(|t| DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).unwrap_or(0)))
        .ok_or_else(|| "a timestamp is missing".to_owned())
}

/// `later - earlier` (zero if the clock says otherwise).
pub(super) fn between(earlier: DateTime<Utc>, later: DateTime<Utc>) -> Duration {
    (later - earlier).to_std().unwrap_or_default()
}

pub(super) fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// Prints median, p99, min and max of `samples` in milliseconds.
pub(super) fn print_row(label: &str, samples: &mut [Duration]) {
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
pub(super) fn print_figure(label: &str, value: f64, decimals: usize, unit: &str) {
    println!("{label:<58} {value:>10.decimals$} {unit}");
}

pub(super) fn print_header(what: &str) {
    println!(
        "{what:<58} {:>8} {:>8} {:>8} {:>8}",
        "median", "p99", "min", "max"
    );
}
