//! The group commit on real SQLite files: commits that come together share
//! flushes and none is lost or refused, a writer waits for the lock instead
//! of failing, the log is still checkpointed, and a writer that cannot get
//! the lock says how long it has waited.

use std::time::Duration;

use ember_sqlite_commit::GroupCommit;
use sea_orm::sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sea_orm::sqlx::{self, Connection as _};

const WRITERS: u32 = 8;

/// A pool of writers under the group commit, as Ember's runtime opens one.
async fn writers(
    path: &std::path::Path,
    busy_timeout: Duration,
) -> (SqlitePool, &'static GroupCommit) {
    let commits = GroupCommit::for_database(path, busy_timeout);
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal);
    let pool = SqlitePoolOptions::new()
        .max_connections(WRITERS)
        .after_connect(move |connection, _| Box::pin(commits.install(connection)))
        .connect_with(options)
        .await
        .expect("the database opens");
    sqlx::query("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, task INTEGER, body TEXT)")
        .execute(&pool)
        .await
        .expect("a table");
    (pool, commits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_commits_all_land_and_share_flushes() {
    let directory = tempfile::tempdir().expect("a directory");
    let path = directory.path().join("shared.db");
    let (pool, commits) = writers(&path, Duration::from_secs(30)).await;
    let before = commits.counts();
    let tasks = 64;
    let each = 20;
    let mut joined = tokio::task::JoinSet::new();
    for task in 0..tasks {
        let pool = pool.clone();
        joined.spawn(async move {
            for _ in 0..each {
                // A transaction that reads and then writes, begun IMMEDIATE
                // as Ember's begin_write does.
                let mut connection = pool.acquire().await.expect("a connection");
                let mut transaction = connection
                    .begin_with("BEGIN IMMEDIATE")
                    .await
                    .expect("the write lock");
                let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM t WHERE task = ?")
                    .bind(task)
                    .fetch_one(&mut *transaction)
                    .await
                    .expect("a read");
                sqlx::query("INSERT INTO t (task, body) VALUES (?, ?)")
                    .bind(task)
                    .bind(format!("row {count}"))
                    .execute(&mut *transaction)
                    .await
                    .expect("an insert");
                transaction.commit().await.expect("a commit");
            }
        });
    }
    while let Some(done) = joined.join_next().await {
        done.expect("a writer task");
    }
    let (rows,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM t")
        .fetch_one(&pool)
        .await
        .expect("a count");
    assert_eq!(rows, tasks * each);
    let after = commits.counts();
    let made = after.commits - before.commits;
    let flushes = after.flushes - before.flushes;
    assert_eq!(
        made,
        u64::try_from(tasks * each).expect("a count"),
        "every commit went through the hook"
    );
    assert!(flushes >= 1, "the log was flushed");
    assert!(
        flushes < made,
        "commits that came together shared flushes: {made} commits, {flushes} flushes"
    );
    // Another pool on the same file shares the same ledger (they share its
    // log).
    assert!(std::ptr::eq(
        GroupCommit::for_database(&path, Duration::from_secs(1)),
        commits
    ));
    assert!(std::ptr::eq(
        GroupCommit::of_database(&path).expect("registered"),
        commits
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_commit_is_flushed_before_it_returns() {
    let directory = tempfile::tempdir().expect("a directory");
    let path = directory.path().join("lone.db");
    let (pool, commits) = writers(&path, Duration::from_secs(30)).await;
    let before = commits.counts();
    sqlx::query("INSERT INTO t (task, body) VALUES (1, 'one')")
        .execute(&pool)
        .await
        .expect("an insert");
    let after = commits.counts();
    assert_eq!(after.commits - before.commits, 1);
    assert_eq!(
        after.flushes - before.flushes,
        1,
        "its own flush, done before it returned"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_is_still_checkpointed() {
    let directory = tempfile::tempdir().expect("a directory");
    let path = directory.path().join("checkpointed.db");
    let (pool, _) = writers(&path, Duration::from_secs(30)).await;
    // About 40 MB through the log, ten times what SQLite's automatic
    // checkpoint lets it hold before it starts again from its beginning.
    let body = "x".repeat(4000);
    for _ in 0..10_000 {
        sqlx::query("INSERT INTO t (task, body) VALUES (1, ?)")
            .bind(&body)
            .execute(&pool)
            .await
            .expect("an insert");
    }
    let wal = std::fs::metadata(directory.path().join("checkpointed.db-wal"))
        .expect("the log")
        .len();
    assert!(
        wal < 16 * 1024 * 1024,
        "the log was checkpointed and reused: {wal} bytes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_shut_out_waits_says_so_and_gives_up_at_its_timeout() {
    let directory = tempfile::tempdir().expect("a directory");
    let path = directory.path().join("held.db");
    let (pool, commits) = writers(&path, Duration::from_millis(1500)).await;
    // Another connection (as another process would) holds the write lock.
    let mut holder =
        sqlx::SqliteConnection::connect_with(&SqliteConnectOptions::new().filename(&path))
            .await
            .expect("another connection");
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut holder)
        .await
        .expect("the write lock");
    assert_eq!(commits.longest_wait(), None);
    let write = {
        let pool = pool.clone();
        tokio::spawn(async move {
            sqlx::query("INSERT INTO t (task, body) VALUES (2, 'waits')")
                .execute(&pool)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    let waited = commits.longest_wait().expect("a writer waits");
    assert!(waited >= Duration::from_millis(500), "{waited:?}");
    let refused = write.await.expect("the task");
    let error = refused.expect_err("the write gave up at its busy timeout");
    assert!(
        error.to_string().contains("locked"),
        "SQLite's own answer: {error}"
    );
    assert_eq!(commits.longest_wait(), None, "nobody waits any more");

    // Released: the next write goes through at once.
    sqlx::query("ROLLBACK")
        .execute(&mut holder)
        .await
        .expect("released");
    sqlx::query("INSERT INTO t (task, body) VALUES (2, 'now')")
        .execute(&pool)
        .await
        .expect("an insert");
}
