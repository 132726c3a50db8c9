//! Cancelling a running update: it stops and rolls back (always, whatever
//! `disable_rollback` says) — here, or on the engine running it, which its
//! lease's heartbeat tells (within a third of the lease's TTL).

use ember_runtime::Identity;

use crate::domain::Stack;
use crate::error::{Error, Result};
use crate::stacks::{StackCaller, StackOperation, StackOperations};

impl StackOperations {
    /// Stops a running update and rolls it back.
    pub async fn cancel_update(&self, identity: &Identity, name_or_id: &str) -> Result<Stack> {
        let stack = self.find_stack(identity, name_or_id).await?;
        self.admit(
            &stack,
            StackOperation::CancelUpdate,
            StackCaller::User(identity),
        )
        .await?;
        // Here, or by the engine running it, asked through the lease.
        let asked = self.engine.stops.cancel_update(stack.id)
            || self
                .store()
                .request_stack_stop(
                    stack.id,
                    crate::store::StopRequest::CancelUpdate,
                    ember_runtime::time::now(),
                )
                .await?;
        if !asked {
            return Err(Error::Conflict(format!(
                "the update of stack {:?} just finished: nothing to cancel",
                stack.name
            )));
        }
        Ok(stack)
    }
}
