//! The walk along the dependency graph: each resource starts as soon as
//! what it waits for is done; the first failure stops new starts.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use tokio::task::JoinSet;

use crate::domain::template::DependencyGraph;
use crate::stacks::failure::{RunFailure, RunResult};

/// Which way a walk follows the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A resource runs after everything it depends on (create, update, resume, check).
    DependenciesFirst,
    /// A resource runs after everything that depends on it (delete, suspend).
    DependentsFirst,
}

/// Runs `action` on each of `names` as soon as its predecessors (within
/// `names`) succeeded, in parallel otherwise. After the first failure no new
/// resource starts; running ones finish. Returns the first failure.
pub async fn walk<F, Fut>(
    graph: &DependencyGraph,
    names: &BTreeSet<String>,
    direction: Direction,
    action: F,
) -> RunResult
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = RunResult> + Send + 'static,
{
    let predecessors = |name: &str| -> BTreeSet<String> {
        match direction {
            Direction::DependenciesFirst => {
                graph.dependencies_of(name).cloned().unwrap_or_default()
            }
            Direction::DependentsFirst => graph.dependents_of(name),
        }
    };
    let successors = |name: &str| -> BTreeSet<String> {
        match direction {
            Direction::DependenciesFirst => graph.dependents_of(name),
            Direction::DependentsFirst => graph.dependencies_of(name).cloned().unwrap_or_default(),
        }
    };
    let mut waiting_on: BTreeMap<String, usize> = names
        .iter()
        .map(|name| {
            (
                name.clone(),
                predecessors(name)
                    .iter()
                    .filter(|other| names.contains(*other))
                    .count(),
            )
        })
        .collect();
    let mut ready: Vec<String> = waiting_on
        .iter()
        .filter(|(_, count)| **count == 0)
        .map(|(name, _)| name.clone())
        .collect();
    let mut running = JoinSet::new();
    let mut first_failure: Option<RunFailure> = None;
    loop {
        if first_failure.is_none() {
            for name in ready.drain(..) {
                // Boxed: the task is then a pointer, where Tokio otherwise
                // copied the whole action future (kilobytes) into the task,
                // into its await and over it as it finished — a few
                // percent of the CPU of creating stacks of small resources.
                let task = Box::pin(action(name.clone()));
                running.spawn(async move { (name, task.await) });
            }
        }
        let Some(joined) = running.join_next().await else {
            break;
        };
        match joined {
            Ok((name, Ok(()))) => {
                for next in successors(&name) {
                    if let Some(count) = waiting_on.get_mut(&next) {
                        *count = count.saturating_sub(1);
                        if *count == 0 {
                            ready.push(next);
                        }
                    }
                }
            }
            Ok((_, Err(failure))) => RunFailure::keep_worst(&mut first_failure, failure),
            Err(error) => RunFailure::keep_worst(
                &mut first_failure,
                RunFailure::Failed(format!("a resource task failed: {error}")),
            ),
        }
    }
    first_failure.map_or(Ok(()), Err)
}
