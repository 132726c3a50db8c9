//! Why a stack operation's run stopped short, typed: a failure the stack
//! reports in Heat's words, a store error that is named as such (not
//! relabelled), or the loss of the stack lease — after which the run writes
//! nothing more, because another engine now decides the stack's state.

use crate::error::Error;

#[derive(Debug, Clone)]
pub enum RunFailure {
    /// A resource, a plugin, a timeout or a cancel failed the operation: it
    /// ends `<ACTION>_FAILED` (or rolls back) with this reason.
    Failed(String),
    /// Recording the operation's progress failed.
    Store(Error),
    /// Another engine took the stack over: stop, write nothing more.
    LeaseLost,
    /// This engine is shutting down: no new step started, the ones running
    /// finished, and the operation is handed back unfinished (nothing
    /// final written, the lease released) for an engine to resume.
    HandedBack,
}

pub type RunResult<T = ()> = Result<T, RunFailure>;

impl RunFailure {
    /// The stack's status reason for this failure.
    pub fn reason(&self) -> String {
        match self {
            RunFailure::Failed(reason) => reason.clone(),
            RunFailure::Store(error) => {
                format!("recording the operation's progress failed: {error}")
            }
            RunFailure::LeaseLost => "the stack lease was taken over by another engine".to_owned(),
            RunFailure::HandedBack => {
                "the engine shut down: the operation was handed back to be resumed".to_owned()
            }
        }
    }

    fn severity(&self) -> u8 {
        match self {
            RunFailure::Failed(_) => 0,
            RunFailure::Store(_) => 1,
            RunFailure::HandedBack => 2,
            RunFailure::LeaseLost => 3,
        }
    }

    /// The worse of `self` (the first) and `other`, as
    /// [`Self::keep_worst`] keeps it.
    pub fn worse(self, other: RunFailure) -> RunFailure {
        if self.severity() >= other.severity() {
            self
        } else {
            other
        }
    }

    /// Keeps the first failure unless `other` is more serious (a lost lease
    /// must stop the run even if a resource failed first; a hand-back wins
    /// over a failure, which the resuming engine then retries).
    pub fn keep_worst(first: &mut Option<RunFailure>, other: RunFailure) {
        match first {
            Some(kept) if kept.severity() >= other.severity() => {}
            _ => *first = Some(other),
        }
    }
}

impl From<String> for RunFailure {
    fn from(reason: String) -> Self {
        RunFailure::Failed(reason)
    }
}

impl From<Error> for RunFailure {
    fn from(error: Error) -> Self {
        match error {
            Error::LeaseLost(_) => RunFailure::LeaseLost,
            error => RunFailure::Store(error),
        }
    }
}

impl std::fmt::Display for RunFailure {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.reason())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_failure_is_kept() {
        let mut kept = None;
        RunFailure::keep_worst(&mut kept, RunFailure::Failed("first".into()));
        RunFailure::keep_worst(&mut kept, RunFailure::Failed("second".into()));
        assert!(matches!(&kept, Some(RunFailure::Failed(reason)) if reason == "first"));
        RunFailure::keep_worst(&mut kept, RunFailure::Store(Error::Database("x".into())));
        assert!(matches!(kept, Some(RunFailure::Store(_))));
        RunFailure::keep_worst(&mut kept, RunFailure::LeaseLost);
        RunFailure::keep_worst(&mut kept, RunFailure::Failed("late".into()));
        assert!(matches!(kept, Some(RunFailure::LeaseLost)));
    }

    #[test]
    fn store_errors_keep_their_kind() {
        let failure = RunFailure::from(Error::Conflict("duplicate".into()));
        assert!(matches!(failure, RunFailure::Store(Error::Conflict(_))));
        assert!(failure.reason().contains("duplicate"), "{failure}");
        assert!(matches!(
            RunFailure::from(Error::LeaseLost("gone".into())),
            RunFailure::LeaseLost
        ));
    }
}
