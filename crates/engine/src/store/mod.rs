//! Persistence of the engine: store traits named after domain operations,
//! each one transaction, and their sea-orm implementation for SQLite and
//! PostgreSQL. sea-orm never leaks out of this module.

pub mod audit;
pub mod clusters;
pub mod delegations;
mod entity;
pub mod instances;
pub mod migrations;
pub mod quotas;
pub mod receivers;
mod resource_filters;
pub mod retention;
mod rows;
pub mod signals;
mod snapshots;
pub mod software;
mod sql;

use async_trait::async_trait;
use uuid::Uuid;

use chrono::{DateTime, Utc};

use crate::domain::{Event, Resource, Stack, StackDefinition};
use crate::error::Result;

pub use sql::SqlStackStore;

/// What proves an operation still holds its stack lease: the stack and the
/// generation its take was given. Every state write of the operation
/// carries it and is refused once another take (a takeover by the sweep,
/// or a new operation after this lease was released) moved the generation
/// on — so a holder that lost its lease can never overwrite the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseFence {
    pub stack_id: Uuid,
    pub generation: i64,
    /// The take's own token, for a take that starts an operation at the
    /// generation it saw free ([`OperationStart::holder`]): the fence then
    /// holds only while the lease row carries it too. Such a take's run
    /// may queue writes before the take commits — if another operation
    /// took the lease at the same generation instead, they are refused.
    /// `None` for other takes (their fence is known only once they
    /// committed).
    pub holder: Option<Uuid>,
}

/// What a lease's renewal found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseRenewal {
    /// Renewed.
    Renewed,
    /// Renewed, and another engine asked this one to stop its operation.
    StopRequested(StopRequest),
    /// The fence no longer holds: nothing was renewed.
    Lost,
}

/// What an engine asks of the one holding a stack's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopRequest {
    /// A delete: stop the operation (it does not roll back).
    Delete,
    /// `cancel_update`: cancel the update (it rolls back).
    CancelUpdate,
}

impl StopRequest {
    pub fn label(self) -> &'static str {
        match self {
            StopRequest::Delete => "DELETE",
            StopRequest::CancelUpdate => "CANCEL_UPDATE",
        }
    }

    pub fn parse(label: &str) -> Option<StopRequest> {
        [StopRequest::Delete, StopRequest::CancelUpdate]
            .into_iter()
            .find(|request| request.label() == label)
    }
}

impl LeaseFence {
    /// The generation of a new stack's first lease.
    pub const FIRST_GENERATION: i64 = 1;

    /// The fence of a lease taken at `generation` without a holder token.
    pub fn at(stack_id: Uuid, generation: i64) -> LeaseFence {
        LeaseFence {
            stack_id,
            generation,
            holder: None,
        }
    }

    /// The fence a take at `generation` that starts an operation gives
    /// `holder` (see [`OperationStart`]).
    pub fn after_take(stack_id: Uuid, generation: i64, holder: Uuid) -> LeaseFence {
        LeaseFence {
            stack_id,
            generation: generation + 1,
            holder: Some(holder),
        }
    }

    /// The fence of `stack_id`'s first lease, taken as it is recorded: no
    /// other operation can hold it (stack ids are never reused), so a run
    /// may queue writes under it before the stack's record commits.
    pub fn first(stack_id: Uuid) -> LeaseFence {
        LeaseFence::at(stack_id, Self::FIRST_GENERATION)
    }
}

/// A resource's new state and its event, written under `fence`.
#[derive(Debug, Clone)]
pub struct FencedTransition {
    pub fence: LeaseFence,
    pub resource: Resource,
    pub event: Event,
}

/// A state write of a running operation, under its lease's fence. The
/// transition writer commits every write waiting, of any stacks, in one
/// transaction ([`StackStore::record_fenced_writes`]).
#[derive(Debug, Clone)]
pub enum FencedWrite {
    /// A resource's new state and its event.
    Resource(FencedTransition),
    /// The stack's new state (e.g. `DELETE_IN_PROGRESS`) and its event,
    /// and the audit record of what began it (a lock, an unlock, an
    /// expiry), when there is one: written together or not at all.
    Stack {
        fence: LeaseFence,
        stack: Stack,
        event: Event,
        audit: Option<Box<crate::domain::audit::AuditRecord>>,
    },
    /// The end of the operation: the stack's final state and its event,
    /// and the lease released (an update's origin dropped with it) — so
    /// whoever sees the final state can start the next operation at once.
    Finish {
        fence: LeaseFence,
        stack: Stack,
        event: Event,
    },
}

impl FencedWrite {
    pub fn fence(&self) -> LeaseFence {
        match self {
            FencedWrite::Resource(transition) => transition.fence,
            FencedWrite::Stack { fence, .. } | FencedWrite::Finish { fence, .. } => *fence,
        }
    }

    pub fn event(&self) -> &Event {
        match self {
            FencedWrite::Resource(transition) => &transition.event,
            FencedWrite::Stack { event, .. } | FencedWrite::Finish { event, .. } => event,
        }
    }
}

/// Who asks for a stack's lease, for which operation, and until when it
/// lives without a heartbeat.
#[derive(Debug, Clone)]
pub struct LeaseRequest {
    pub engine_id: Uuid,
    pub operation: String,
    /// A lease that expired before this is free.
    pub now: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

impl LeaseRequest {
    pub fn new(
        engine_id: Uuid,
        operation: &str,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> LeaseRequest {
        LeaseRequest {
            engine_id,
            operation: operation.to_owned(),
            now,
            expires_at,
        }
    }
}

/// A new stack to record with its first lease, as
/// [`StackStore::create_stack_with_lease`] does.
#[derive(Debug, Clone)]
pub struct NewStack {
    pub stack: Stack,
    pub definition: StackDefinition,
    /// Its resources, all INIT_COMPLETE.
    pub resources: Vec<Resource>,
    /// Its first event.
    pub event: Event,
    pub lease: LeaseRequest,
}

/// A take of an existing stack's lease, as [`StackStore::take_stack_lease`]
/// does.
#[derive(Debug, Clone)]
pub struct LeaseTake {
    pub stack_id: Uuid,
    pub lease: LeaseRequest,
    /// An operation started with the take, in its transaction.
    pub start: Option<Box<OperationStart>>,
}

/// What a take starts (see [`LeaseTake::starting`]).
#[derive(Debug, Clone)]
pub struct OperationStart {
    /// The lease is taken only while it is still at this generation: no
    /// operation took it since the caller saw it free at it, so what the
    /// caller read after that is still the stack's state.
    pub generation: i64,
    /// The take's own token, kept in the lease row: the new lease's fence
    /// is known before the take commits (see [`LeaseFence::holder`]).
    pub holder: Uuid,
    /// What is written under the new lease, in the take's transaction.
    pub writes: StartWrites,
}

impl OperationStart {
    /// The fence of the lease this start takes, if it does.
    pub fn fence(&self, stack_id: Uuid) -> LeaseFence {
        LeaseFence::after_take(stack_id, self.generation, self.holder)
    }
}

/// What an [`OperationStart`] writes.
#[derive(Debug, Clone)]
pub enum StartWrites {
    /// The stack's new state (e.g. DELETE_IN_PROGRESS) and its event.
    Stack { stack: Stack, event: Event },
    /// An update's start, as [`StackStore::begin_stack_update`] writes it.
    Update {
        stack: Stack,
        definition: StackDefinition,
        new_resources: Vec<Resource>,
        event: Event,
    },
    /// A resource's new health state and its event, and the lease released
    /// again: the whole of a health mark (as
    /// [`StackStore::mark_resource_health`] writes it).
    ResourceHealth { resource: Resource, event: Event },
}

impl LeaseTake {
    /// `engine_id` taking `stack_id`'s lease for `operation` at `now`,
    /// until `expires_at`.
    pub fn new(
        stack_id: Uuid,
        engine_id: Uuid,
        operation: &str,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> LeaseTake {
        LeaseTake {
            stack_id,
            lease: LeaseRequest::new(engine_id, operation, now, expires_at),
            start: None,
        }
    }

    /// The take, made only while the lease is at `start`'s generation and
    /// recording `start`'s state with it; otherwise nothing is taken or
    /// written (the take answers `None`, as for a busy stack).
    pub fn starting(mut self, start: OperationStart) -> LeaseTake {
        self.start = Some(Box::new(start));
        self
    }
}

/// What the transition writer commits at once: running operations' state
/// writes, new stacks, and takes of stack leases.
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    pub writes: Vec<FencedWrite>,
    pub new_stacks: Vec<NewStack>,
    pub takes: Vec<LeaseTake>,
}

impl WriteBatch {
    /// Whether `write` is fenced by a lease a take of this batch takes:
    /// it is written after the takes.
    pub fn after_takes(&self, write: &FencedWrite) -> bool {
        let Some(holder) = write.fence().holder else {
            return false;
        };
        self.takes.iter().any(|take| {
            take.start
                .as_ref()
                .is_some_and(|start| start.holder == holder)
        })
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.new_stacks.is_empty() && self.takes.is_empty()
    }
}

/// What became of a [`WriteBatch`]'s parts, each in the batch's order.
#[derive(Debug)]
pub struct BatchOutcome {
    /// The fences of writes that no longer held (those writes were not
    /// made), as [`StackStore::record_fenced_writes`] returns them.
    pub lost: Vec<LeaseFence>,
    /// Each new stack's lease, or why it was not recorded (a live stack of
    /// its project has its name: `Error::Conflict`).
    pub new_stacks: Vec<Result<LeaseFence>>,
    /// Each take's fence, or `None` where another operation holds the
    /// lease (an error of its own where a take ran after the commit).
    pub takes: Vec<Result<Option<LeaseFence>>>,
}

/// The error of a write whose fence no longer holds.
pub fn lease_lost(fence: LeaseFence) -> crate::error::Error {
    crate::error::Error::LeaseLost(format!(
        "stack {} is no longer held by generation {} of its lease: another engine took it over",
        fence.stack_id, fence.generation
    ))
}

/// A stack left `*_IN_PROGRESS` under a lease that expired or was
/// released: its operation's engine went away (or dropped the run).
#[derive(Debug, Clone)]
pub struct OrphanCandidate {
    pub stack: Stack,
    /// The engine that held the lease last, if any lease was ever taken.
    pub holder: Option<Uuid>,
    /// The generation the sweep expects to take over (0: no lease row).
    pub generation: i64,
}

pub use crate::domain::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};

pub use crate::domain::stack::{EventListQuery, ResourceFilter, StackListQuery};

#[async_trait]
pub trait StackStore: Send + Sync + 'static {
    /// Records a new stack with what it is built from, its resources (all
    /// INIT_COMPLETE) and its first event, and takes its lease, in one
    /// transaction (a new stack's lease is free): never a lease without its
    /// stack, nor a stack in progress without its lease. Returns the
    /// lease's fence, or `Error::Conflict` (nothing written) when a live
    /// stack of the project has its name.
    async fn create_stack_with_lease(&self, new_stack: &NewStack) -> Result<LeaseFence>;
    /// A stack of `project_id` by name (live stacks only) or id (deleted
    /// ones too, as Heat shows DELETE_COMPLETE stacks by id).
    async fn find_stack(&self, project_id: &str, name_or_id: &str) -> Result<Option<Stack>>;
    /// Any stack by id.
    async fn get_stack(&self, stack_id: Uuid) -> Result<Option<Stack>>;
    /// Root stacks whose maintenance lock expired by `now` and that still
    /// hold it (LOCK_COMPLETE, LOCK_FAILED), soonest expired first, at
    /// most `limit`.
    async fn expired_stack_locks(&self, now: DateTime<Utc>, limit: u64) -> Result<Vec<Stack>>;
    /// When the soonest of those locks expires (one past already, if any
    /// is left); `None` when no root stack holds a lock with an expiry.
    async fn next_stack_lock_expiry(&self) -> Result<Option<DateTime<Utc>>>;
    /// The stacks whose parent is `stack_id`.
    async fn list_child_stacks(&self, stack_id: Uuid) -> Result<Vec<Stack>>;
    async fn load_definition(&self, stack_id: Uuid) -> Result<StackDefinition> {
        Ok(self.load_versioned_definition(stack_id).await?.0)
    }
    /// The stack's definition and its [`Stack::definition_version`], read
    /// together.
    async fn load_versioned_definition(&self, stack_id: Uuid) -> Result<(StackDefinition, i64)>;
    /// Starts an update (or an update's rollback): keeps the definition it
    /// replaces as the update's origin (see [`Self::load_update_origin`]),
    /// writes the stack's new state, settings and definition, adds rows for
    /// resources the new template introduces, and records the event, in one
    /// transaction.
    async fn begin_stack_update(
        &self,
        stack: &Stack,
        definition: &StackDefinition,
        new_resources: &[Resource],
        event: &Event,
        fence: LeaseFence,
    ) -> Result<()>;
    /// The definition the stack's running update (or its rollback) moves
    /// away from, as [`Self::begin_stack_update`] kept it; `None` when no
    /// update of the stack is running (the origin goes when the operation
    /// ends) — e.g. the rollback of a failed create.
    async fn load_update_origin(&self, stack_id: Uuid) -> Result<Option<StackDefinition>>;
    /// Records the last transitions of resources that are gone for good
    /// (removed from the template, or replaced) and removes their rows, in
    /// one transaction. Their events stay.
    async fn retire_resources(
        &self,
        transitions: &[(Resource, Event)],
        fence: LeaseFence,
    ) -> Result<()>;
    /// Records events that change no state (plugin calls, refused signals).
    async fn record_events(&self, events: &[Event]) -> Result<()>;
    /// Writes resources' new states and their events in one transaction,
    /// each under its own stack's fence (a batch may span stacks).
    /// Transitions whose fence no longer holds are not written; their
    /// fences are returned, and the rest is committed.
    async fn record_resource_transitions(
        &self,
        transitions: &[FencedTransition],
    ) -> Result<Vec<LeaseFence>> {
        let writes: Vec<FencedWrite> = transitions
            .iter()
            .cloned()
            .map(FencedWrite::Resource)
            .collect();
        self.record_fenced_writes(&writes).await
    }
    /// Commits `writes` (of any stacks) in one transaction, in their order,
    /// each under its own fence: the writes whose fence no longer holds are
    /// not written and their fences are returned; the rest is committed.
    async fn record_fenced_writes(&self, writes: &[FencedWrite]) -> Result<Vec<LeaseFence>>;
    /// Commits a batch's fenced writes (as [`Self::record_fenced_writes`]),
    /// records its new stacks with their leases (as
    /// [`Self::create_stack_with_lease`]; one whose name is taken is
    /// skipped with `Error::Conflict`, the rest recorded) and takes its
    /// leases (as [`Self::take_stack_lease`]) — on SQLite all in one
    /// transaction; on PostgreSQL the takes follow its commit, each alone.
    /// An `Err` means nothing of the batch was committed.
    async fn record_batch(&self, batch: &WriteBatch) -> Result<BatchOutcome>;
    /// Whether the database commits one transaction at a time (SQLite's
    /// one writer): new stacks and lease takes then share the transition
    /// writer's batches, saving a commit each, and the writer's loop runs
    /// on a thread of its own (its connection does no I/O through the
    /// shared runtime). PostgreSQL commits
    /// concurrent transactions in parallel from its pool; funnelling them
    /// through the one writer would queue them instead.
    fn commits_one_at_a_time(&self) -> bool {
        false
    }
    async fn list_resources(&self, stack_id: Uuid) -> Result<Vec<Resource>>;
    /// The stack's resources that `filter` takes, in [`Self::list_resources`]'s
    /// order. A nested stack resource not made yet (no physical id) is
    /// taken by its nested stack's id, as it is shown.
    async fn list_filtered_resources(
        &self,
        stack_id: Uuid,
        filter: &ResourceFilter,
    ) -> Result<Vec<Resource>>;
    /// Stores a snapshot of a stack (deleting the stack deletes them).
    async fn insert_snapshot(&self, snapshot: &crate::domain::StackSnapshot) -> Result<()>;
    /// A stack's snapshots, oldest first.
    async fn list_snapshots(&self, stack_id: Uuid) -> Result<Vec<crate::domain::StackSnapshot>>;
    /// How many snapshots a stack has (for its quota).
    async fn count_snapshots(&self, stack_id: Uuid) -> Result<u64>;
    async fn get_snapshot(
        &self,
        stack_id: Uuid,
        snapshot_id: Uuid,
    ) -> Result<Option<crate::domain::StackSnapshot>>;
    /// False when the stack has no such snapshot.
    async fn delete_snapshot(&self, stack_id: Uuid, snapshot_id: Uuid) -> Result<bool>;
    async fn list_events(&self, query: &EventListQuery) -> Result<Vec<Event>>;
    async fn get_event(&self, stack_id: Uuid, event_id: Uuid) -> Result<Option<Event>>;
    /// Takes the stack's lease for the take's engine unless an unexpired
    /// one is held: one conditional write that also moves the generation
    /// on. Returns the fence of the new holder, or `None` when the stack is
    /// busy.
    async fn take_stack_lease(&self, take: &LeaseTake) -> Result<Option<LeaseFence>>;
    /// Extends a lease while `fence` holds, saying whether a delete asked
    /// its operation to stop ([`Self::request_stack_stop`]).
    async fn renew_stack_lease(
        &self,
        fence: LeaseFence,
        expires_at: DateTime<Utc>,
    ) -> Result<LeaseRenewal>;
    /// Asks the engine holding the stack's lease at `now` to stop its
    /// operation as `request` says (a delete or a cancel on another
    /// engine): the holder's next renewal learns it. False when no lease
    /// is held.
    async fn request_stack_stop(
        &self,
        stack_id: Uuid,
        request: StopRequest,
        now: DateTime<Utc>,
    ) -> Result<bool>;
    /// Releases the lease `fence` holds (a no-op once it no longer holds).
    /// The row stays, expired, so generations never repeat.
    async fn release_stack_lease(&self, fence: LeaseFence) -> Result<()>;
    /// The project's stack `name_or_id` (as [`Self::find_stack`]) with the
    /// generation of its lease if that is free at `now` (as
    /// [`Self::free_lease_generation`]), read in one statement: the state
    /// read is at least as new as that generation (any later change is made
    /// under a lease taken after it, which moves the generation on).
    async fn find_stack_with_free_lease(
        &self,
        project_id: &str,
        name_or_id: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<(Stack, Option<i64>)>>;
    /// The generation of the stack's lease if it is free at `now`
    /// (expired or released); `None` while it is held, or if the stack
    /// has no lease row.
    async fn free_lease_generation(
        &self,
        stack_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<i64>>;
    /// The soonest moment after `now` at which a lease of a stack in
    /// progress expires, if any: when the sweep should look next (a holder
    /// that is alive renews its lease before then).
    async fn next_lease_expiry(&self, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>>;
    /// Stacks left `*_IN_PROGRESS` whose lease expired or was released (or
    /// that have no lease at all), in one read.
    async fn list_orphan_candidates(
        &self,
        now: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<OrphanCandidate>>;
    /// [`Self::list_orphan_candidates`] for one stack: the stack as an
    /// orphan candidate when it is `*_IN_PROGRESS` under an expired or
    /// released lease (or none), `None` otherwise — not in progress, or
    /// its lease is live. How a parent resuming its operation finds the
    /// nested stack it continues.
    async fn orphan_candidate(
        &self,
        stack_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<OrphanCandidate>>;
    /// The sweep's one decision about an orphan, in one transaction: takes
    /// the lease over from the generation the candidate was seen with (only
    /// if it is still expired), and — only while the stack is still in
    /// that `*_IN_PROGRESS` — marks it and its in-progress resources FAILED
    /// with `reason` and their events, then releases the lease. Returns the
    /// stack as written, or `None` when anything moved meanwhile (nothing
    /// is written then).
    async fn fail_orphaned_stack(
        &self,
        candidate: &OrphanCandidate,
        engine_id: Uuid,
        now: DateTime<Utc>,
        reason: &str,
    ) -> Result<Option<Stack>>;
    /// Takes an orphan's lease over so that this engine resumes its
    /// operation: from the generation the candidate was seen with, only if
    /// it is still expired and the stack still in that `*_IN_PROGRESS`; the
    /// lease then lives until `expires_at` (renewed by the resuming run).
    /// Writes nothing else. `None` when anything moved meanwhile.
    async fn take_over_orphaned_stack(
        &self,
        candidate: &OrphanCandidate,
        engine_id: Uuid,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> Result<Option<LeaseFence>>;
    /// A page of `project_id`'s stacks, newest first; `Error::NotFound` if
    /// the marker names no stack of the project.
    async fn list_stacks(&self, project_id: &str, query: &StackListQuery) -> Result<Vec<Stack>>;
    /// Records a resource's new health state (mark unhealthy, or its reset)
    /// with its event, and releases the lease, in one transaction.
    /// `Error::NotFound` if the row is gone (then only the lease is
    /// released).
    async fn mark_resource_health(
        &self,
        resource: &Resource,
        event: &Event,
        fence: LeaseFence,
    ) -> Result<()>;
    /// Ends a scaling signal: writes the group's final row and its event
    /// and releases the lease, in one transaction — whoever sees the group
    /// settled can start the next operation at once.
    async fn finish_scaling(
        &self,
        group: &Resource,
        event: &Event,
        fence: LeaseFence,
    ) -> Result<()>;
}
