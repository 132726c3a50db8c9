//! Launch hooks at size: one scale-out of a cluster with an
//! `ember.policy.launch-1.0` policy builds `nodes` nodes that all wait on
//! their lifecycle actions; `callers` concurrent callers complete them
//! (CONTINUE); the figure the issue asks for is from the last
//! `complete_lifecycle` answered to the scale-out's end (its stored
//! `updated_at`, against the clock read when the last answer came).

use super::removal::cluster_with_hook;
use super::*;

pub(super) async fn launching(
    running: &RunningEmber,
    nodes: usize,
    callers: usize,
) -> Result<(), String> {
    let gateway = Gateway::connect(running).await?;
    create_node_profile(&gateway).await?;
    let spec = json!({"type": "ember.policy.launch", "version": "1.0", "properties": {
        "hooks": {"type": "zaqar", "params": {"queue": QUEUE}, "timeout": HOOK_TIMEOUT_SECS}}});
    create_policy(&gateway, "bench-launch", spec).await?;
    let cluster_id = cluster_with_hook(&gateway, "bench-launch", "bench-launch", 0).await?;

    let started = Instant::now();
    let scale_out = gateway
        .clusters()
        .scale_out(gateway.request(pb::ScaleRequest {
            cluster: cluster_id.clone(),
            count: u32::try_from(nodes).map_err(|error| error.to_string())?,
        }))
        .await
        .map_err(|status| format!("ScaleOut: {}", status.message()))?
        .into_inner();
    let pending = loop {
        let pending = gateway.pending(&cluster_id, false).await?;
        if pending.len() >= nodes {
            break pending;
        }
        if started.elapsed() > PATIENCE {
            return Err(format!(
                "{} of {nodes} launch waits after {PATIENCE:?}",
                pending.len()
            ));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let waiting = started.elapsed();
    if let Some(other) = pending
        .iter()
        .find(|action| action.lifecycle_transition_type != "launching")
    {
        return Err(format!(
            "pending action {} is {:?}, not launching",
            other.token, other.lifecycle_transition_type
        ));
    }

    let tokens: Vec<String> = pending.into_iter().map(|action| action.token).collect();
    let completing = Instant::now();
    let mut answers: Vec<Duration> =
        complete_concurrently(&gateway, &cluster_id, &tokens, callers, "CONTINUE")
            .await?
            .iter()
            .map(|completion| completion.took)
            .collect();
    let last_answer_at = ember_runtime::time::now();
    let all_answered = completing.elapsed();
    let last_answer = Instant::now();
    let action = gateway.succeeded(&scale_out.action_id, POLL).await?;
    let observed = last_answer.elapsed();
    let ended = between(last_answer_at, time(action.updated_at.as_ref())?);

    println!();
    println!(
        "scale_out of {nodes} nodes with a launch hook on the embedded queue, \
         completed (CONTINUE) by {callers} concurrent callers"
    );
    print_figure(
        &format!("scale_out → all {nodes} nodes built and waiting (ListPending)"),
        millis(waiting),
        1,
        "ms",
    );
    print_figure(
        &format!("{} completions by {callers} callers", tokens.len()),
        millis(all_answered),
        1,
        "ms",
    );
    print_figure(
        "  completions per second",
        tokens.len() as f64 / all_answered.as_secs_f64().max(1e-9),
        0,
        "/s",
    );
    print_figure(
        "last complete_lifecycle → CLUSTER_SCALE_OUT SUCCEEDED",
        millis(ended),
        1,
        "ms",
    );
    print_figure(
        "  the same, seen by polling GetAction (1 ms)",
        millis(observed),
        1,
        "ms",
    );
    print_header("one CompleteLifecycle call, under the 50 callers' load");
    print_row("  CompleteLifecycle", &mut answers);
    Ok(())
}
