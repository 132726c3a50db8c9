//! Group commit of resource transitions. Resources of one stack progress in
//! parallel; each transition must be durable before the operation moves on,
//! but committing each alone would cost one fsync per transition. The writer
//! takes every transition waiting when the previous commit ends and writes
//! them in one transaction, then answers each caller — durable and fast.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::domain::{Event, Resource};
use crate::error::{Error, Result};
use crate::store::StackStore;

type Request = ((Resource, Event), oneshot::Sender<Result<()>>);

#[derive(Clone)]
pub struct TransitionWriter {
    sender: mpsc::UnboundedSender<Request>,
}

impl TransitionWriter {
    pub fn start(store: Arc<dyn StackStore>) -> TransitionWriter {
        let (sender, receiver) = mpsc::unbounded_channel();
        tokio::spawn(write_batches(store, receiver));
        TransitionWriter { sender }
    }

    /// Records one transition; returns once it is committed.
    pub async fn record(&self, resource: Resource, event: Event) -> Result<()> {
        let (done, committed) = oneshot::channel();
        self.sender.send(((resource, event), done)).map_err(|_| {
            Error::DatabaseUnavailable("the transition writer has stopped".to_owned())
        })?;
        committed.await.map_err(|_| {
            Error::DatabaseUnavailable("the transition writer has stopped".to_owned())
        })?
    }
}

async fn write_batches(store: Arc<dyn StackStore>, mut receiver: mpsc::UnboundedReceiver<Request>) {
    let mut batch = Vec::new();
    while receiver.recv_many(&mut batch, 1024).await > 0 {
        let (transitions, callers): (Vec<_>, Vec<_>) =
            std::mem::take(&mut batch).into_iter().unzip();
        let result = store.record_resource_transitions(&transitions).await;
        for caller in callers {
            let answer = match &result {
                Ok(()) => Ok(()),
                Err(error) => Err(Error::DatabaseUnavailable(format!(
                    "recording a transition failed: {error}"
                ))),
            };
            // A caller that gave up waiting is not an error here.
            let _ = caller.send(answer);
        }
    }
}
