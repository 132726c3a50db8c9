//! Cancelling a running update: it stops and rolls back (always, whatever
//! `disable_rollback` says).

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
        if !self.shared.cancel_update(stack.id) {
            return Err(Error::Conflict(format!(
                "the update of stack {:?} is run by another engine or just finished: try again",
                stack.name
            )));
        }
        Ok(stack)
    }
}
