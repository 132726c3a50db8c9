//! Group commit of resource transitions. Resources of one stack progress in
//! parallel; each transition must be durable before the operation moves on,
//! but committing each alone would cost one fsync per transition. The writer
//! takes every transition waiting when the previous commit ends and writes
//! them in one transaction, then answers each caller — durable and fast.
//! Each transition is fenced with its run's stack lease: a run that lost
//! its lease gets `Error::LeaseLost` while the rest of the batch commits.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{mpsc, oneshot};

use crate::domain::{Event, Resource};
use crate::error::{Error, Result};
use crate::store::{FencedTransition, LeaseFence, StackStore};

type Request = (FencedTransition, oneshot::Sender<Result<()>>);

#[derive(Clone)]
pub struct TransitionWriter {
    sender: mpsc::UnboundedSender<Request>,
    /// Transitions queued and not yet taken into a batch (readiness
    /// reports it: a deep queue means the database is behind).
    waiting: Arc<AtomicUsize>,
}

fn stopped() -> Error {
    Error::DatabaseUnavailable("the transition writer has stopped".to_owned())
}

impl TransitionWriter {
    pub fn start(store: Arc<dyn StackStore>) -> TransitionWriter {
        let (sender, receiver) = mpsc::unbounded_channel();
        let waiting = Arc::new(AtomicUsize::new(0));
        tokio::spawn(write_batches(store, receiver, waiting.clone()));
        TransitionWriter { sender, waiting }
    }

    /// Transitions waiting for the next batch.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Records one transition under `fence`; returns once it is committed.
    pub async fn record(&self, fence: LeaseFence, resource: Resource, event: Event) -> Result<()> {
        self.enqueue(fence, resource, event)?
            .await
            .map_err(|_| stopped())?
    }

    /// Queues one transition and returns at once with what will say when it
    /// is committed. Transitions commit in the order they are queued (one
    /// batch after another), so a transition queued later and awaited proves
    /// this one durable too.
    pub fn enqueue(
        &self,
        fence: LeaseFence,
        resource: Resource,
        event: Event,
    ) -> Result<oneshot::Receiver<Result<()>>> {
        let (done, committed) = oneshot::channel();
        let transition = FencedTransition {
            fence,
            resource,
            event,
        };
        self.sender
            .send((transition, done))
            .map_err(|_| stopped())?;
        self.waiting.fetch_add(1, Ordering::Relaxed);
        Ok(committed)
    }
}

async fn write_batches(
    store: Arc<dyn StackStore>,
    mut receiver: mpsc::UnboundedReceiver<Request>,
    waiting: Arc<AtomicUsize>,
) {
    let mut batch = Vec::new();
    while receiver.recv_many(&mut batch, 1024).await > 0 {
        waiting.fetch_sub(batch.len(), Ordering::Relaxed);
        let (transitions, callers): (Vec<_>, Vec<_>) =
            std::mem::take(&mut batch).into_iter().unzip();
        let result = store.record_resource_transitions(&transitions).await;
        for (transition, caller) in transitions.iter().zip(callers) {
            let answer = match &result {
                Ok(lost) if lost.contains(&transition.fence) => Err(Error::LeaseLost(format!(
                    "stack {} was taken over by another engine",
                    transition.fence.stack_id
                ))),
                Ok(_) => Ok(()),
                // The store's own error, kind and all (a constraint
                // violation is not "database unavailable").
                Err(error) => Err(error.clone()),
            };
            // A caller that gave up waiting is not an error here.
            let _ = caller.send(answer);
        }
    }
}
