//! One claimed run of an action: the action as claimed, its fencing token,
//! and the fenced writes it makes. A run that finds it lost its action (the
//! fence no longer matches) stops with [`Stop::Lost`] and writes nothing
//! more.

use super::ClusterService;
use crate::domain::cluster::{ActionStatus, ClusterAction, Fence};
use crate::error::Error;
use crate::store::clusters::{ChangeOutcome, ClusterChange, Settle};

/// Why a run stopped before it finished normally.
#[derive(Debug)]
pub(super) enum Stop {
    /// Another claim owns the action now: write nothing.
    Lost,
    /// The action fails with this error.
    Failed(Error),
}

impl From<Error> for Stop {
    fn from(error: Error) -> Self {
        Stop::Failed(error)
    }
}

pub(super) type RunResult<T> = std::result::Result<T, Stop>;

/// How a run ended normally.
// One value per run, moved once into the final write: boxing the large
// variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Ran {
    /// Finish the action with this status and reason, writing `change` and
    /// settling its cluster as `settle` says, in one transaction.
    Finished {
        status: ActionStatus,
        reason: String,
        change: ClusterChange,
        settle: Settle,
    },
    /// The action waits on its children (or was already finished by its
    /// own final write): nothing more to write now.
    Handed,
}

impl Ran {
    pub(super) fn succeeded(reason: impl Into<String>, settle: Settle) -> Ran {
        Ran::Finished {
            status: ActionStatus::Succeeded,
            reason: reason.into(),
            change: ClusterChange::default(),
            settle,
        }
    }
}

/// A claimed action and the token its writes carry.
pub(super) struct Run {
    pub action: ClusterAction,
    pub fence: Fence,
}

impl Run {
    pub(super) fn new(action: ClusterAction) -> Option<Run> {
        let fence = action.fence()?;
        Some(Run { action, fence })
    }

    /// A fenced write; `Stop::Lost` when the action is no longer this run's.
    pub(super) async fn apply(
        &self,
        service: &ClusterService,
        change: &ClusterChange,
    ) -> RunResult<ChangeOutcome> {
        service
            .store
            .apply_cluster_change(&self.fence, change)
            .await?
            .ok_or(Stop::Lost)
    }

    /// `Stop::Lost` unless the action is still this run's: checked right
    /// before a call that creates or deletes something.
    pub(super) async fn check_still_owned(&self, service: &ClusterService) -> RunResult<()> {
        if service.store.still_owned(&self.fence).await? {
            Ok(())
        } else {
            Err(Stop::Lost)
        }
    }

    /// Whether an earlier run of this action may have written already (it
    /// was taken over).
    pub(super) fn is_rerun(&self) -> bool {
        self.fence.attempt > 1
    }
}
