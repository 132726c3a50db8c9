//! Removals with hooks: delivery of every message of a scale-in,
//! `complete_lifecycle` to node deleted, and the deadline path.

use super::*;

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

pub(super) async fn delivery_and_completion(
    running: &RunningEmber,
    runs: usize,
    nodes: usize,
) -> Result<(), String> {
    let gateway = Gateway::connect(running).await?;
    create_node_profile(&gateway).await?;
    for (name, timeout) in [("bench-drain", HOOK_TIMEOUT_SECS), ("bench-expire", 1)] {
        let spec = json!({"type": "senlin.policy.deletion", "version": "1.1",
            "properties": {"criteria": "OLDEST_FIRST",
                "hooks": {"type": "zaqar", "params": {"queue": QUEUE}, "timeout": timeout}}});
        create_policy(&gateway, name, spec).await?;
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
                    ..pb::LifecycleTokenRequest::default()
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
pub(super) async fn cluster_with_hook(
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
            timeout: None,
            config: String::new(),
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
