//! Group commit of the state writes of running operations. Resources of one
//! stack progress in parallel, and many stacks' operations run at once;
//! each transition must be durable before the operation moves on, but
//! committing each alone would cost a transaction and an fsync per
//! transition. The writer takes every write waiting when the previous
//! commit ends — resource transitions, stack transitions and operation ends
//! ([`FencedWrite`]), of any stacks, and new stacks and takes of stack
//! leases, which start operations — and commits them in one transaction,
//! then answers each caller: durable and fast. Each write is fenced with its
//! run's stack lease: a run that lost its lease gets `Error::LeaseLost`
//! while the rest of the batch commits; a new stack whose name is taken
//! gets `Error::Conflict` while the rest are recorded.
//!
//! An operation's end may be queued behind its last transitions without
//! waiting for them ([`TransitionWriter::finish_after_earlier`]): the
//! writer remembers which runs had a write fail, and writes such an end
//! only if none of its run's writes did. On SQLite the writer's loop has a
//! thread of its own ([`run_on_own_thread`]), and a new stack's run may
//! queue writes under the stack's first lease as soon as the stack is
//! queued ([`TransitionWriter::queue_create_stack`]), and a delete's run
//! under its take's fence as soon as the take is queued
//! ([`TransitionWriter::queue_take`]; [`Recorded`] tells such a run whether
//! its start committed): a batch records its new stacks before its fenced
//! writes, and writes under its own takes' leases after the takes.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{mpsc, oneshot};

use crate::domain::{Event, Resource, Stack};
use crate::error::{Error, Result};
use crate::store::{
    FencedTransition, FencedWrite, LeaseFence, LeaseTake, NewStack, StackStore, WriteBatch,
    lease_lost,
};

/// What callers queue, with where the answer goes.
enum Request {
    Write(FencedWrite, oneshot::Sender<Result<()>>),
    /// An operation's end, written only if every earlier write under its
    /// fence committed (see [`TransitionWriter::finish_after_earlier`]).
    FinishAfterEarlier(FencedWrite, oneshot::Sender<Result<()>>),
    /// The run of this fence has ended: forget that a write of it failed.
    Forget(LeaseFence),
    NewStack(Box<NewStack>, oneshot::Sender<Result<LeaseFence>>),
    Take(LeaseTake, oneshot::Sender<Result<Option<LeaseFence>>>),
}

/// Where a take stands once [`TransitionWriter::queue_take`] returns.
pub enum TakeRecord {
    /// In the writer's queue: the answer says whether it was taken.
    Queued(oneshot::Receiver<Result<Option<LeaseFence>>>),
    /// Answered: taken under this fence (committed), or not.
    Answered(Option<LeaseFence>),
}

/// Where a new stack stands once [`TransitionWriter::queue_create_stack`]
/// returns.
pub enum NewStackRecord {
    /// In the writer's queue: the answer says whether it was recorded.
    Queued(oneshot::Receiver<Result<LeaseFence>>),
    /// Recorded (committed) under this fence.
    Recorded(LeaseFence),
}

#[derive(Clone)]
pub struct TransitionWriter {
    sender: mpsc::UnboundedSender<Request>,
    /// Writes queued and not yet taken into a batch (readiness reports
    /// it: a deep queue means the database is behind).
    waiting: Arc<AtomicUsize>,
    /// How many runs the writer remembers a failed write of: while none,
    /// a run's end needs not tell it to forget one.
    remembered: Arc<AtomicUsize>,
    store: Arc<dyn StackStore>,
}

fn stopped() -> Error {
    Error::DatabaseUnavailable("the transition writer has stopped".to_owned())
}

/// Waits for the answer to a queued request: the writer's, or its stop.
pub(super) async fn answer<T>(receiver: oneshot::Receiver<Result<T>>) -> Result<T> {
    receiver.await.map_err(|_| stopped())?
}

/// Whether an operation's start committed — a new stack's record, or a
/// delete's take of the lease, which records DELETE_IN_PROGRESS — for its
/// run that started before it did ([`StackOperations::begin_create`],
/// [`StackOperations::begin_delete`]); known at once for one that started
/// after.
#[derive(Clone)]
pub(super) struct Recorded(
    Option<futures::future::Shared<futures::future::BoxFuture<'static, Result<LeaseFence>>>>,
);

impl Recorded {
    pub(super) fn already() -> Recorded {
        Recorded(None)
    }

    /// The writer's answer to a queued new stack, awaited by both the call
    /// that created it and its run.
    pub(super) fn pending(committed: oneshot::Receiver<Result<LeaseFence>>) -> Recorded {
        Recorded(Some(futures::FutureExt::shared(Box::pin(answer(
            committed,
        )))))
    }

    /// The writer's answer to a queued take: refused (`Error::Conflict`)
    /// when another operation took the lease first.
    pub(super) fn pending_take(
        taken: oneshot::Receiver<Result<Option<LeaseFence>>>,
        stack_id: uuid::Uuid,
    ) -> Recorded {
        let answer = async move {
            self::answer(taken).await?.ok_or_else(|| {
                Error::Conflict(format!(
                    "stack {stack_id}: another operation took its lease first"
                ))
            })
        };
        Recorded(Some(futures::FutureExt::shared(Box::pin(answer))))
    }

    /// Waits until the record committed (`Ok`) or was refused (why).
    pub(super) async fn outcome(&self) -> Result<()> {
        match &self.0 {
            None => Ok(()),
            Some(record) => record.clone().await.map(drop),
        }
    }

    /// Waits until the record committed or was refused: whether it was
    /// recorded.
    pub(super) async fn wait(&self) -> bool {
        self.outcome().await.is_ok()
    }
}

impl TransitionWriter {
    pub fn start(store: Arc<dyn StackStore>) -> TransitionWriter {
        let (sender, receiver) = mpsc::unbounded_channel();
        let waiting = Arc::new(AtomicUsize::new(0));
        let remembered = Arc::new(AtomicUsize::new(0));
        let batches = write_batches(store.clone(), receiver, waiting.clone(), remembered.clone());
        if store.commits_one_at_a_time() {
            run_on_own_thread(batches);
        } else {
            tokio::spawn(batches);
        }
        TransitionWriter {
            sender,
            waiting,
            remembered,
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
        self.record_stack_audited(fence, stack, event, None).await
    }

    /// As [`Self::record_stack`], with the audit record of what began the
    /// change committed in the same transaction.
    pub async fn record_stack_audited(
        &self,
        fence: LeaseFence,
        stack: &Stack,
        event: Event,
        audit: Option<crate::domain::audit::AuditRecord>,
    ) -> Result<()> {
        self.write(FencedWrite::Stack {
            fence,
            stack: stack.clone(),
            event,
            audit: audit.map(Box::new),
        })
        .await
    }

    /// Queues the end of an operation (as [`Self::finish`]) behind the
    /// writes of the run queued before it, to be written only if every one
    /// of them commits; returns at once with what will say whether it was
    /// committed. A run that ends this way needs not wait for its last
    /// transitions before it ends: they and the end usually share one
    /// commit. When an earlier write under `fence` failed, nothing is
    /// written and the answer is an error (the run then learns from its
    /// own transitions why it failed).
    pub fn finish_after_earlier(
        &self,
        fence: LeaseFence,
        stack: &Stack,
        event: Event,
    ) -> Result<oneshot::Receiver<Result<()>>> {
        let (done, committed) = oneshot::channel();
        let write = FencedWrite::Finish {
            fence,
            stack: stack.clone(),
            event,
        };
        self.queue(Request::FinishAfterEarlier(write, done))?;
        Ok(committed)
    }

    /// Says the run holding `fence` is over: it will queue no more writes
    /// (the lease guard's drop). Nothing is sent while the writer
    /// remembers no failed write at all (the usual case).
    pub(crate) fn forget(&self, fence: LeaseFence) {
        if self.remembered.load(Ordering::Relaxed) > 0 {
            // A stopped writer remembers nothing.
            let _ = self.queue(Request::Forget(fence));
        }
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
        answer(self.send(write)?).await
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
        self.queue(Request::Write(write, done))?;
        Ok(committed)
    }

    /// Records a new stack with its first lease (see
    /// [`StackStore::create_stack_with_lease`]); returns the lease's fence
    /// once it is committed, or `Error::Conflict` when a live stack of the
    /// project has its name. In the writer's batch where the database
    /// commits one transaction at a time, else in a transaction of its own.
    pub async fn create_stack(&self, new_stack: NewStack) -> Result<LeaseFence> {
        match self.queue_create_stack(new_stack).await? {
            NewStackRecord::Queued(committed) => answer(committed).await,
            NewStackRecord::Recorded(fence) => Ok(fence),
        }
    }

    /// As [`Self::create_stack`], returning as soon as the new stack is
    /// queued where the writer batches it: writes queued after it under
    /// its first lease ([`LeaseFence::first`]) commit with it or after it
    /// (or fail as lost if it is refused). Elsewhere it is recorded first.
    pub async fn queue_create_stack(&self, new_stack: NewStack) -> Result<NewStackRecord> {
        if !self.store.commits_one_at_a_time() {
            let fence = self.store.create_stack_with_lease(&new_stack).await?;
            return Ok(NewStackRecord::Recorded(fence));
        }
        let (done, committed) = oneshot::channel();
        self.queue(Request::NewStack(Box::new(new_stack), done))?;
        Ok(NewStackRecord::Queued(committed))
    }

    /// Takes a stack's lease (see [`StackStore::take_stack_lease`]): its
    /// fence once committed, or `None` while another operation holds it
    /// (batched as [`Self::create_stack`] is).
    pub async fn take_lease(&self, take: LeaseTake) -> Result<Option<LeaseFence>> {
        if !self.store.commits_one_at_a_time() {
            return self.store.take_stack_lease(&take).await;
        }
        let (done, committed) = oneshot::channel();
        self.queue(Request::Take(take, done))?;
        answer(committed).await
    }

    /// As [`Self::take_lease`] for a take that starts an operation
    /// ([`LeaseTake::starting`]), returning as soon as the take is queued
    /// where the writer batches takes: writes queued after it under its
    /// fence ([`crate::store::OperationStart::fence`]) commit after it, in
    /// its batch or a later one, or are refused with it. Elsewhere it is
    /// answered first.
    pub async fn queue_take(&self, take: LeaseTake) -> Result<TakeRecord> {
        if !self.store.commits_one_at_a_time() {
            return Ok(TakeRecord::Answered(
                self.store.take_stack_lease(&take).await?,
            ));
        }
        let (done, taken) = oneshot::channel();
        self.queue(Request::Take(take, done))?;
        Ok(TakeRecord::Queued(taken))
    }

    fn queue(&self, request: Request) -> Result<()> {
        self.sender.send(request).map_err(|_| stopped())?;
        self.waiting.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Runs the writer's loop on a thread of its own. With SQLite every
/// statement of a batch is a hand-off to the database's thread and back;
/// on the shared runtime each return waited for a worker busy with
/// requests, which made every batch — and so every operation's steps —
/// slower under load (8 clients: begin 245 → 90 µs, a batch's writes
/// 800 → 480 µs). A SQLite connection does no I/O through the runtime, so
/// the loop needs nothing of the shared one. If no thread can be started,
/// the loop runs on the shared runtime.
fn run_on_own_thread(batches: impl std::future::Future<Output = ()> + Send + 'static) {
    let (hand_over, handed) = std::sync::mpsc::sync_channel(1);
    let started = std::thread::Builder::new()
        .name("ember-writer".to_owned())
        .spawn(move || {
            let Ok(batches) = handed.recv() else {
                return;
            };
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime.block_on(batches),
                // Dropping the loop stops the writer: every write is then
                // answered "the transition writer has stopped".
                Err(error) => {
                    tracing::error!(%error, "cannot start the transition writer's runtime")
                }
            }
        });
    match started {
        Ok(_) => {
            if let Err(unsent) = hand_over.send(batches) {
                tokio::spawn(unsent.0);
            }
        }
        Err(error) => {
            tracing::warn!(%error, "cannot start the transition writer's thread: it runs on the shared runtime");
            tokio::spawn(batches);
        }
    }
}

async fn write_batches(
    store: Arc<dyn StackStore>,
    mut receiver: mpsc::UnboundedReceiver<Request>,
    waiting: Arc<AtomicUsize>,
    remembered: Arc<AtomicUsize>,
) {
    let mut requests = Vec::new();
    // Fences of runs a write of which failed (not for a lost lease: the
    // database refuses every later write of those), until the run ends.
    let mut failed = HashSet::new();
    while receiver.recv_many(&mut requests, 1024).await > 0 {
        waiting.fetch_sub(requests.len(), Ordering::Relaxed);
        let mut batch = WriteBatch::default();
        let mut answers = Answers::default();
        let mut ended = Vec::new();
        for request in requests.drain(..) {
            match request {
                Request::Write(write, caller) => {
                    batch.writes.push(write);
                    answers.writes.push(caller);
                }
                Request::FinishAfterEarlier(write, caller) => {
                    // Earlier writes are in this batch (committed with it
                    // or not at all) or were answered before it.
                    if failed.contains(&write.fence()) {
                        let _ = caller.send(Err(earlier_write_failed(write.fence())));
                    } else {
                        batch.writes.push(write);
                        answers.writes.push(caller);
                    }
                }
                Request::Forget(fence) => ended.push(fence),
                Request::NewStack(new_stack, caller) => {
                    batch.new_stacks.push(*new_stack);
                    answers.new_stacks.push(caller);
                }
                Request::Take(take, caller) => {
                    batch.takes.push(take);
                    answers.takes.push(caller);
                }
            }
        }
        failed.extend(commit(store.as_ref(), batch, answers).await);
        for fence in ended {
            failed.remove(&fence);
        }
        // Counted after the batch's callers were answered: a run that
        // dropped its guard in between (one stopping at once, without an
        // end) leaves its fence here — a few bytes; fences never repeat.
        remembered.store(failed.len(), Ordering::Relaxed);
    }
}

fn earlier_write_failed(fence: LeaseFence) -> Error {
    Error::Database(format!(
        "an earlier write of the operation on stack {} was not committed: its end is not written",
        fence.stack_id
    ))
}

/// Where each part of a batch is answered, in the batch's order.
#[derive(Default)]
struct Answers {
    writes: Vec<oneshot::Sender<Result<()>>>,
    new_stacks: Vec<oneshot::Sender<Result<LeaseFence>>>,
    takes: Vec<oneshot::Sender<Result<Option<LeaseFence>>>>,
}

/// Commits `batch` and answers its callers. A batch that fails as a whole
/// while it holds more than its fenced writes is tried again in parts —
/// the writes together, each new stack and each take alone — so that one
/// bad row fails only its own caller. (A caller that gave up waiting is
/// not an error here.) Returns the fences of the writes that failed, not
/// for a lost lease.
async fn commit(store: &dyn StackStore, batch: WriteBatch, answers: Answers) -> Vec<LeaseFence> {
    let only_writes = batch.new_stacks.is_empty() && batch.takes.is_empty();
    let outcome = match store.record_batch(&batch).await {
        Err(_) if !only_writes => return commit_in_parts(store, batch, answers).await,
        outcome => outcome,
    };
    match outcome {
        Ok(outcome) => {
            for (caller, created) in answers.new_stacks.into_iter().zip(outcome.new_stacks) {
                let _ = caller.send(created);
            }
            for (caller, taken) in answers.takes.into_iter().zip(outcome.takes) {
                let _ = caller.send(taken);
            }
            answer_writes(&batch.writes, answers.writes, Ok(&outcome.lost))
        }
        Err(error) => answer_writes(&batch.writes, answers.writes, Err(&error)),
    }
}

async fn commit_in_parts(
    store: &dyn StackStore,
    batch: WriteBatch,
    answers: Answers,
) -> Vec<LeaseFence> {
    // New stacks first, as in a batch: writes may be queued under their
    // first leases; and writes under a lease a take of the batch takes
    // after the takes.
    for (new_stack, caller) in batch.new_stacks.iter().zip(answers.new_stacks) {
        let _ = caller.send(store.create_stack_with_lease(new_stack).await);
    }
    let (mut before_takes, mut after_takes) = (Vec::new(), Vec::new());
    for (write, caller) in batch.writes.iter().zip(answers.writes) {
        let part = if batch.after_takes(write) {
            &mut after_takes
        } else {
            &mut before_takes
        };
        part.push((write.clone(), caller));
    }
    let mut failed = record_in_part(store, before_takes).await;
    for (take, caller) in batch.takes.iter().zip(answers.takes) {
        let _ = caller.send(store.take_stack_lease(take).await);
    }
    failed.extend(record_in_part(store, after_takes).await);
    failed
}

/// Records `writes` together and answers each (see [`answer_writes`]).
async fn record_in_part(
    store: &dyn StackStore,
    writes: Vec<(FencedWrite, oneshot::Sender<Result<()>>)>,
) -> Vec<LeaseFence> {
    if writes.is_empty() {
        return Vec::new();
    }
    let (writes, callers): (Vec<FencedWrite>, Vec<_>) = writes.into_iter().unzip();
    let lost = store.record_fenced_writes(&writes).await;
    answer_writes(&writes, callers, lost.as_deref())
}

/// Answers each fenced write: committed, its lease lost, or the store's
/// own error, kind and all (a constraint violation is not "database
/// unavailable"). Returns the fences of the writes that failed with the
/// store's error.
fn answer_writes(
    writes: &[FencedWrite],
    callers: Vec<oneshot::Sender<Result<()>>>,
    result: std::result::Result<&[LeaseFence], &Error>,
) -> Vec<LeaseFence> {
    for (write, caller) in writes.iter().zip(callers) {
        let answer = match result {
            Ok(lost) if lost.contains(&write.fence()) => Err(lease_lost(write.fence())),
            Ok(_) => Ok(()),
            Err(error) => Err(error.clone()),
        };
        let _ = caller.send(answer);
    }
    match result {
        Ok(_) => Vec::new(),
        Err(_) => writes.iter().map(FencedWrite::fence).collect(),
    }
}
