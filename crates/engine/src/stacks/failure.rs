//! Why a stack operation's run stopped short, typed: a failure the stack
//! reports in Heat's words, a store error that is named as such (not
//! relabelled), or the loss of the stack lease — after which the run writes
//! nothing more, because another engine now decides the stack's state.

use crate::error::Error;
use crate::resources::ResourceFailure;

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

/// How a run takes a resource step's failure: the resource's own failure
/// comes back as its reason, for the caller to record the resource FAILED
/// with it and fail the operation; Ember's own store failing under the
/// step is the run's failure ([`RunFailure::Store`], or
/// [`RunFailure::LeaseLost`]) and nothing is recorded of the resource —
/// the store said nothing about it. Its row stays as the step left it (in
/// progress), so the operation that next acts on the stack resumes the
/// step, as after any write of the run the store refused.
pub(crate) fn resource_reason(failure: ResourceFailure) -> RunResult<String> {
    match failure {
        ResourceFailure::Failed(reason) => Ok(reason),
        ResourceFailure::Store(error) => Err(RunFailure::from(error)),
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
    fn a_resource_step_failing_in_the_store_stops_the_run_instead_of_failing_the_resource() {
        let unavailable = Error::DatabaseUnavailable("connection refused".into());
        let stopped = resource_reason(ResourceFailure::from(unavailable.clone()))
            .expect_err("not the resource's failure");
        assert!(
            matches!(&stopped, RunFailure::Store(error) if *error == unavailable),
            "{stopped:?}"
        );
        assert_eq!(
            stopped.reason(),
            "recording the operation's progress failed: database unavailable: connection refused"
        );
        let unreadable = ResourceFailure::from(Error::Database("bad row".into()));
        assert!(matches!(
            resource_reason(unreadable),
            Err(RunFailure::Store(Error::Database(_)))
        ));
        let lost = ResourceFailure::from(Error::LeaseLost("taken over".into()));
        assert!(matches!(resource_reason(lost), Err(RunFailure::LeaseLost)));
    }

    #[test]
    fn a_resource_failing_in_the_callers_terms_keeps_its_words() {
        for (error, reason) in [
            (Error::InvalidInput("bad size".into()), "bad size"),
            (Error::NotFound("no such image".into()), "no such image"),
            (Error::Conflict("volume in use".into()), "volume in use"),
            (
                Error::Unavailable("cannot lock vm-1: refused".into()),
                "cannot lock vm-1: refused",
            ),
        ] {
            let failure = ResourceFailure::from(error);
            assert_eq!(failure, ResourceFailure::new(reason));
            assert_eq!(
                resource_reason(failure).expect("the resource's own"),
                reason
            );
        }
        let reworded =
            ResourceFailure::new("bad").map_reason(|reason| format!("resources.a: {reason}"));
        assert_eq!(reworded.to_string(), "resources.a: bad");
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
