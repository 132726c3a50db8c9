//! Waiting in tests: one poll with a deadline that every test crate shares,
//! so a test waits for the condition it needs instead of sleeping, and a
//! wait that never ends fails naming what it waited for. Needs the
//! `testing` feature.

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

/// The first pause between looks; each pause doubles up to [`MAX_PAUSE`],
/// so a quick condition is seen at once and a slow one is not hammered.
const FIRST_PAUSE: Duration = Duration::from_millis(2);
const MAX_PAUSE: Duration = Duration::from_millis(100);

/// Polls `condition` until it holds, failing the test with `what` after
/// `timeout`.
pub async fn wait_for<F, Fut>(what: &str, timeout: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    poll(what, timeout, || {
        let holds = condition();
        async move { if holds.await { Ok(()) } else { Err(None) } }
    })
    .await;
}

/// Polls `probe` until it finds something, and returns it; fails the test
/// with `what` after `timeout`.
pub async fn poll_until<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    poll(what, timeout, || {
        let found = probe();
        async move { found.await.ok_or(None) }
    })
    .await
}

/// Polls `look` until it answers `Ok`, and returns the value; fails the
/// test after `timeout` with `what` and what the last look saw instead
/// (its `Err`: a stack's status, a count).
pub async fn poll_until_ok<T, S, F, Fut>(what: &str, timeout: Duration, mut look: F) -> T
where
    S: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, S>>,
{
    poll(what, timeout, || {
        let seen = look();
        async move { seen.await.map_err(|seen| Some(seen.to_string())) }
    })
    .await
}

async fn poll<T, F, Fut>(what: &str, timeout: Duration, mut look: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Option<String>>>,
{
    let deadline = Instant::now() + timeout;
    let mut pause = FIRST_PAUSE;
    loop {
        let seen = match look().await {
            Ok(found) => return found,
            Err(seen) => seen,
        };
        if Instant::now() >= deadline {
            match seen {
                Some(seen) => panic!("timed out after {timeout:?} waiting for {what}: {seen}"),
                None => panic!("timed out after {timeout:?} waiting for {what}"),
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[tokio::test]
    async fn a_condition_that_comes_to_hold_ends_the_wait() {
        let looks = AtomicU32::new(0);
        wait_for("the third look", Duration::from_secs(5), || async {
            looks.fetch_add(1, Ordering::SeqCst) == 2
        })
        .await;
        assert_eq!(looks.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_probe_returns_what_it_found() {
        let looks = AtomicU32::new(0);
        let found = poll_until("a value", Duration::from_secs(5), || async {
            let look = looks.fetch_add(1, Ordering::SeqCst);
            (look == 1).then_some(look * 10)
        })
        .await;
        assert_eq!(found, 10);
    }

    #[tokio::test]
    #[should_panic(expected = "timed out after 50ms waiting for nothing")]
    async fn a_condition_that_never_holds_fails_naming_what_it_waited_for() {
        wait_for("nothing", Duration::from_millis(50), || async { false }).await;
    }

    #[tokio::test]
    #[should_panic(expected = "waiting for stack web to settle: CREATE_IN_PROGRESS")]
    async fn a_look_that_never_finds_fails_with_what_it_last_saw() {
        poll_until_ok::<(), _, _, _>("stack web to settle", Duration::from_millis(50), || async {
            Err("CREATE_IN_PROGRESS")
        })
        .await;
    }
}
