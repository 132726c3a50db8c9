//! Group commit of the state writes of running operations. Resources of one
//! stack progress in parallel, and many stacks' operations run at once;
//! each transition must be durable before the operation moves on, but
//! committing each alone would cost a transaction and an fsync per
//! transition. The writer takes every write waiting when the previous
//! commit ends — resource transitions, stack transitions and operation ends
//! ([`FencedWrite`]), of any stacks — and commits them in one transaction,
//! then answers each caller: durable and fast. Each write is fenced with its
//! run's stack lease: a run that lost its lease gets `Error::LeaseLost`
//! while the rest of the batch commits.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{mpsc, oneshot};

use crate::domain::{Event, Resource, Stack};
use crate::error::{Error, Result};
use crate::store::{FencedTransition, FencedWrite, LeaseFence, StackStore, lease_lost};

type Request = (FencedWrite, oneshot::Sender<Result<()>>);

#[derive(Clone)]
pub struct TransitionWriter {
    sender: mpsc::UnboundedSender<Request>,
    /// Writes queued and not yet taken into a batch (readiness reports
    /// it: a deep queue means the database is behind).
    waiting: Arc<AtomicUsize>,
    store: Arc<dyn StackStore>,
}

fn stopped() -> Error {
    Error::DatabaseUnavailable("the transition writer has stopped".to_owned())
}

impl TransitionWriter {
    pub fn start(store: Arc<dyn StackStore>) -> TransitionWriter {
        let (sender, receiver) = mpsc::unbounded_channel();
        let waiting = Arc::new(AtomicUsize::new(0));
        tokio::spawn(write_batches(store.clone(), receiver, waiting.clone()));
        TransitionWriter {
            sender,
            waiting,
            store,
        }
    }

    /// The store the writer commits to.
    pub fn store(&self) -> &Arc<dyn StackStore> {
        &self.store
    }

    /// Writes waiting for the next batch.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Records one resource transition under `fence`; returns once it is
    /// committed.
    pub async fn record(&self, fence: LeaseFence, resource: Resource, event: Event) -> Result<()> {
        self.enqueue(fence, resource, event)?
            .await
            .map_err(|_| stopped())?
    }

    /// Records the stack's new state and its event under `fence`; returns
    /// once it is committed.
    pub async fn record_stack(&self, fence: LeaseFence, stack: &Stack, event: Event) -> Result<()> {
        self.write(FencedWrite::Stack {
            fence,
            stack: stack.clone(),
            event,
        })
        .await
    }

    /// Ends an operation: the stack's final state and its event, with the
    /// lease released; returns once it is committed.
    pub async fn finish(&self, fence: LeaseFence, stack: &Stack, event: Event) -> Result<()> {
        self.write(FencedWrite::Finish {
            fence,
            stack: stack.clone(),
            event,
        })
        .await
    }

    async fn write(&self, write: FencedWrite) -> Result<()> {
        self.send(write)?.await.map_err(|_| stopped())?
    }

    /// Queues one resource transition and returns at once with what will
    /// say when it is committed. Writes commit in the order they are queued
    /// (one batch after another), so a write queued later and awaited
    /// proves this one durable too.
    pub fn enqueue(
        &self,
        fence: LeaseFence,
        resource: Resource,
        event: Event,
    ) -> Result<oneshot::Receiver<Result<()>>> {
        self.send(FencedWrite::Resource(FencedTransition {
            fence,
            resource,
            event,
        }))
    }

    fn send(&self, write: FencedWrite) -> Result<oneshot::Receiver<Result<()>>> {
        let (done, committed) = oneshot::channel();
        self.sender.send((write, done)).map_err(|_| stopped())?;
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
        let (writes, callers): (Vec<_>, Vec<_>) = std::mem::take(&mut batch).into_iter().unzip();
        let result = store.record_fenced_writes(&writes).await;
        for (write, caller) in writes.iter().zip(callers) {
            let answer = match &result {
                Ok(lost) if lost.contains(&write.fence()) => Err(lease_lost(write.fence())),
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
