//! Many pending actions held by one lifecycle-hook: memory, and the time
//! from their deadline to every one fired.

use super::*;

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

pub(super) async fn holding(running: &RunningEmber, count: usize) -> Result<(), String> {
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
                lifecycle_transition_type: "terminating".to_owned(),
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
                project_id: String::new(),
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
