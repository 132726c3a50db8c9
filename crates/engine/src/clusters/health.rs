//! Node health from the machines: when the instance watcher finds a node's
//! machine dead (its container exited or was removed behind Ember's back),
//! the node becomes ERROR with the reason and a NODE_CHECK event, at once
//! — without waiting for a CLUSTER_CHECK — so `cluster recover` and
//! Senlin's health tooling see it. A member of a cluster with a health
//! policy is then recovered as the policy and its budget allow
//! (`remediation`); without one, recovering is the operator's decision.
//!
//! The write is conditional on the node being ACTIVE: a node being
//! created, deleted or recovered by a running action is that action's.

use std::sync::Arc;

use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::ClusterService;

pub(super) fn spawn(service: Arc<ClusterService>, shutdown: CancellationToken) {
    // Held recoveries whose engine restarted, and clusters whose health
    // policy was attached after members failed, are found by the sweep.
    tokio::spawn({
        let service = Arc::clone(&service);
        let shutdown = shutdown.clone();
        async move {
            let mut ticks = tokio::time::interval(super::remediation::SWEEP_INTERVAL);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = ticks.tick() => {}
                }
                if let Err(failure) = service.sweep_remediation().await {
                    warn!(%failure, "cannot sweep the clusters with health policies");
                }
            }
        }
    });
    let mut observations = service.instances.subscribe_observations();
    tokio::spawn(async move {
        loop {
            let observation = tokio::select! {
                () = shutdown.cancelled() => return,
                received = observations.recv() => match received {
                    Ok(observation) => observation,
                    Err(RecvError::Lagged(missed)) => {
                        // A CLUSTER_CHECK finds what was missed.
                        warn!(missed, "node health fell behind the machine observations");
                        continue;
                    }
                    Err(RecvError::Closed) => return,
                },
            };
            if !observation.machine_failed() {
                continue;
            }
            let instance = &observation.next;
            let reason = format!(
                "instance {} is {}: {}",
                instance.uuid,
                instance.status.as_str(),
                observation.reason
            );
            match service
                .store
                .mark_node_machine_failed(&instance.uuid.to_string(), &reason, instance.updated_at)
                .await
            {
                Ok(Some(node)) => {
                    info!(node_id = %node.id, node = %node.name, %reason, "node is ERROR: its machine failed");
                    if let Some(cluster_id) = node.cluster_id
                        && let Err(failure) = service.remediate(cluster_id).await
                    {
                        warn!(%cluster_id, %failure, "cannot start the health policy's recovery");
                    }
                }
                Ok(None) => {}
                Err(failure) => {
                    warn!(instance_uuid = %instance.uuid, %failure, "cannot mark the node of a failed machine ERROR")
                }
            }
        }
    });
}
