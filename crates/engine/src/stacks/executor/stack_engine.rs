//! The stack engine: what every stack operation run needs from the engine
//! process — the store, the registry, the writer, the engine's settings
//! (with its quotas, audit trail and cloud, all given when the stack
//! operations are made), the plug-in gate, the draining token and run
//! tracker that shutdown uses, and the stack leases it takes.

use std::sync::Arc;

use uuid::Uuid;

use crate::resources::ResourceTypeRegistry;
use crate::stacks::lease::{BUSY_POLL, WhenBusy};
use crate::stacks::writer::TransitionWriter;

use super::parse_cache::ParsedCache;
use super::target::RunTarget;

/// What every stack operation run needs from this engine process, one per
/// [`StackOperations`](crate::stacks::StackOperations) and shared by all its
/// runs; not [`RuntimeContext`](crate::stacks::context::RuntimeContext),
/// which resolves one stack's intrinsic functions against its resources.
pub struct StackEngine {
    pub(in crate::stacks) store: Arc<dyn crate::store::StackStore>,
    pub(in crate::stacks) registry: Arc<ResourceTypeRegistry>,
    pub(in crate::stacks) writer: TransitionWriter,
    pub(in crate::stacks) engine_id: Uuid,
    /// The lifecycle plugins called around root stack operations.
    pub(in crate::stacks) plugins: crate::stacks::plugins::PluginGate,
    /// How long a stack lease lives without its heartbeat.
    pub(in crate::stacks) lease_ttl: std::time::Duration,
    /// How long an operation runs on a stack without `timeout_mins`.
    pub(in crate::stacks) action_timeout: std::time::Duration,
    /// The operations this engine runs that a delete may stop, and the
    /// updates a cancel may stop.
    pub(in crate::stacks) stops: crate::stacks::bounds::Stops,
    /// The region of Ember's catalog.
    pub(in crate::stacks) region: String,
    /// The quotas creates and updates are checked against (none in unit
    /// tests).
    pub(in crate::stacks) quotas: Option<Arc<crate::quotas::Quotas>>,
    /// The audit trail of locks, refusals and break-glass.
    pub(in crate::stacks) audit: crate::audit::Auditing,
    /// Recently parsed stored definitions.
    pub(in crate::stacks) parsed_cache: ParsedCache,
    /// Cancelled when the engine shuts down: root operations that can be
    /// resumed (create, delete, update and its rollback, suspend, resume,
    /// check) start no new resource step and hand their operation back unfinished
    /// ([`RunFailure::HandedBack`]) for an engine to resume.
    pub(in crate::stacks) draining: tokio_util::sync::CancellationToken,
    /// Every operation run this engine started, so that shutdown can wait
    /// for the steps in flight.
    pub(in crate::stacks) runs: tokio_util::task::TaskTracker,
    /// The cloud of the openstack backend: root stacks are made with a
    /// delegation to act on it through, and deleted with it.
    pub(in crate::stacks) cloud: Option<Arc<crate::cloud::OpenStackCloud>>,
}

impl StackEngine {
    /// Starts an operation's run, tracked for shutdown, in the context of
    /// the call that asked for it (its request id in the records the run
    /// writes, an admin's break-glass for the lifecycle plug-ins it meets).
    pub(crate) fn spawn_run<F>(&self, run: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runs
            .spawn(ember_runtime::call_context::CallContext::current().scope(run))
    }

    /// How long an operation on `stack` may run (its `timeout_mins`, else
    /// the engine's default).
    pub(crate) fn operation_timeout(&self, stack: &crate::domain::Stack) -> std::time::Duration {
        crate::stacks::bounds::operation_timeout(stack, self.action_timeout)
    }

    /// Whether a step of `target`'s operation may start: not once the
    /// engine is handing its root operations back (nested stacks run on:
    /// their parent's step waits for them).
    pub(in crate::stacks) fn handing_back(&self, target: &RunTarget) -> bool {
        target.nested_depth == 0 && self.draining.is_cancelled()
    }
}

impl StackEngine {
    /// Takes the stack lease for `operation` as this engine, or refuses
    /// (409) when another operation holds it.
    pub(crate) async fn take_lease(
        &self,
        stack_id: Uuid,
        stack_name: &str,
        holder: crate::stacks::LeaseHolder,
    ) -> crate::error::Result<crate::stacks::StackLease> {
        self.take_lease_when(stack_id, stack_name, holder, WhenBusy::Refuse)
            .await
    }

    /// Takes the stack lease for `operation` as this engine; when another
    /// operation holds it, refuses at once or asks again until a lease
    /// taken now would have expired (then refuses), as `when_busy` says.
    pub(crate) async fn take_lease_when(
        &self,
        stack_id: Uuid,
        stack_name: &str,
        holder: crate::stacks::LeaseHolder,
        when_busy: WhenBusy,
    ) -> crate::error::Result<crate::stacks::StackLease> {
        let patience_ends = tokio::time::Instant::now() + self.lease_ttl + BUSY_POLL;
        loop {
            let taken = crate::stacks::StackLease::try_take(
                &self.writer,
                &self.stops,
                stack_id,
                stack_name,
                self.engine_id,
                holder,
                self.lease_ttl,
            )
            .await?;
            match taken {
                Ok(stack_lease) => return Ok(stack_lease),
                Err(busy) => {
                    let waits = when_busy == WhenBusy::WaitOutLease
                        && tokio::time::Instant::now() < patience_ends;
                    if !waits {
                        return Err(busy.into());
                    }
                    tokio::time::sleep(BUSY_POLL).await;
                }
            }
        }
    }

    /// Takes `stack_id`'s lease for `operation` only while it is free at
    /// `start`'s generation — no operation took it since the caller saw it
    /// free there, so what the caller read after that is the stack's
    /// state — and records `start`'s writes in the same transaction: an
    /// operation's usual start, in one commit. `None`, nothing written, when the lease moved
    /// on or is held (then the caller starts as any operation does).
    pub(crate) async fn take_lease_at(
        &self,
        stack_id: Uuid,
        holder: crate::stacks::LeaseHolder,
        start: crate::store::OperationStart,
    ) -> crate::error::Result<Option<crate::store::LeaseFence>> {
        self.writer
            .take_lease(self.lease_take_at(stack_id, holder, start))
            .await
    }

    /// The take [`Self::take_lease_at`] makes.
    pub(crate) fn lease_take_at(
        &self,
        stack_id: Uuid,
        holder: crate::stacks::LeaseHolder,
        start: crate::store::OperationStart,
    ) -> crate::store::LeaseTake {
        let now = ember_runtime::time::now();
        crate::store::LeaseTake::new(
            stack_id,
            self.engine_id,
            holder.label(),
            now,
            crate::stacks::lease::expiry_after(now, self.lease_ttl),
        )
        .starting(start)
    }

    /// The guard of a lease [`Self::take_lease_at`] took.
    pub(crate) fn hold_lease(&self, fence: crate::store::LeaseFence) -> crate::stacks::StackLease {
        crate::stacks::StackLease::held(self.writer.clone(), &self.stops, fence, self.lease_ttl)
    }
}
