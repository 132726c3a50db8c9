//! Group commit for Ember's SQLite databases: every commit is on disk
//! before the statement that made it returns, and the commits that arrive
//! together share one flush.
//!
//! SQLite in WAL mode with `synchronous = FULL` flushes the write-ahead log
//! once per commit, inside the commit: on the machines Ember runs on that
//! flush is most of a commit's time (0.3–1.5 ms against ~35 µs for the
//! rest), and with one writer connection every commit waits for every
//! flush before it. PostgreSQL and InnoDB share one flush among the
//! commits waiting for it; SQLite has no such thing, so Ember builds it from
//! two of SQLite's hooks, installed on each writer connection by
//! [`GroupCommit::install`]:
//!
//! - The connections run `synchronous = NORMAL`, so SQLite itself flushes
//!   the log only around checkpoints, and the **WAL hook**, which SQLite
//!   calls after each commit (its write lock already released), makes the
//!   commit durable before it returns: the first commit to arrive flushes
//!   the log file (`fdatasync`), and the commits that arrive while that
//!   flush runs wait for it to end and then share the next one. A commit
//!   returns only once a flush that began after its own write has ended —
//!   the durability of `FULL`, at one flush per group. The hook also runs
//!   SQLite's automatic checkpoint, which installing it replaces.
//! - The pool has several writer connections, so that one commits while
//!   others wait for their flush. They take SQLite's write lock in turn;
//!   the **busy handler** of a connection that finds it taken waits until
//!   a commit releases it (or [`WRITER_POLL`] passes) instead of SQLite's
//!   default sleeps of 1 to 100 ms, and gives up after the busy timeout.
//!
//! Nothing here changes what a transaction sees or when it may fail: the
//! write lock is SQLite's as before; transactions that write must begin
//! `IMMEDIATE` (a deferred one that reads first would fail with
//! `SQLITE_BUSY_SNAPSHOT` once another connection committed), which
//! `ember_runtime::database::begin_write` does.
//!
//! The one crate of Ember that calls C: unsafe code is denied here as
//! `forbid` is everywhere else, and allowed on the calls that install the
//! hooks and on the hooks' reading of their argument alone, each with its
//! SAFETY argument.
#![deny(unsafe_code)]

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use rusqlite::ffi;
use sea_orm::sqlx::sqlite::SqliteConnection;

/// How many pages the write-ahead log may hold before a commit checkpoints
/// it into the database file (SQLite's own default, which installing the
/// WAL hook switches off).
pub const AUTOCHECKPOINT_PAGES: c_int = 1000;

/// The longest a connection waiting for the write lock goes without trying
/// again when no commit says the lock is free (a transaction that ended by
/// rolling back, or wrote nothing, releases it without a WAL hook).
pub const WRITER_POLL: Duration = Duration::from_micros(500);

/// A busy handler that has not run for this long is no longer waiting (it
/// runs at least every [`WRITER_POLL`] while it waits).
const WAIT_GONE_AFTER: Duration = Duration::from_millis(100);

/// One SQLite database file's group commit, shared by every writer
/// connection this process opens to it (they share its log). Made once
/// per file by [`GroupCommit::for_database`] and never freed: SQLite holds
/// a pointer to it in each connection's hooks until the connection is
/// closed, which sqlx does on a thread of its own, possibly after the pool
/// that opened it is gone.
#[derive(Debug)]
pub struct GroupCommit {
    /// The write-ahead log: the database's path with `-wal` appended.
    wal: PathBuf,
    /// The folder that holds it, flushed once so that the log's name
    /// survives as its contents do.
    folder: PathBuf,
    busy_timeout: Duration,
    ledger: Mutex<Ledger>,
    flushed: Condvar,
    writer: Mutex<u64>,
    writer_released: Condvar,
    /// The connections waiting for the write lock, by their thread: since
    /// when, and when their busy handler last ran.
    waits: Mutex<HashMap<ThreadId, Wait>>,
    commits: AtomicU64,
    flushes: AtomicU64,
}

#[derive(Debug, Clone, Copy)]
struct Wait {
    since: Instant,
    seen: Instant,
}

/// Every database file's group commit, by its absolute path.
static BY_DATABASE: Mutex<Option<HashMap<PathBuf, &'static GroupCommit>>> = Mutex::new(None);

/// Which commits are durable.
#[derive(Debug, Default)]
struct Ledger {
    /// Commits counted so far; each commit's ticket is this count after it.
    committed: u64,
    /// Every ticket up to this one is durable.
    durable: u64,
    /// A flush is under way.
    flushing: bool,
    /// The folder has been flushed.
    folder_flushed: bool,
}

/// What a [`GroupCommit`] has done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Commits made durable.
    pub commits: u64,
    /// Flushes of the log it took.
    pub flushes: u64,
}

impl GroupCommit {
    /// The group commit of the SQLite database at `database` (the file's
    /// path as the connections open it). `busy_timeout` is how long a
    /// connection waits for the write lock before its statement fails
    /// with `SQLITE_BUSY`.
    /// The same file opened again in this process shares the first one's
    /// (and its busy timeout).
    pub fn for_database(database: &Path, busy_timeout: Duration) -> &'static GroupCommit {
        let database = absolute(database);
        let mut registry = BY_DATABASE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let registry = registry.get_or_insert_with(HashMap::new);
        if let Some(commits) = registry.get(&database) {
            return commits;
        }
        let mut wal = database.clone().into_os_string();
        wal.push("-wal");
        let folder = database
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_owned);
        let commits: &'static GroupCommit = Box::leak(Box::new(GroupCommit {
            wal: PathBuf::from(wal),
            folder,
            busy_timeout,
            ledger: Mutex::new(Ledger::default()),
            flushed: Condvar::new(),
            writer: Mutex::new(0),
            writer_released: Condvar::new(),
            waits: Mutex::new(HashMap::new()),
            commits: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
        }));
        registry.insert(database, commits);
        commits
    }

    /// The group commit of the database file at `database`, if this process
    /// opened writers to it.
    pub fn of_database(database: &Path) -> Option<&'static GroupCommit> {
        let database = absolute(database);
        BY_DATABASE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .and_then(|registry| registry.get(&database).copied())
    }

    /// How long the connection that has waited longest for the write lock
    /// has been waiting (`None`: none is waiting). A writer that waits long
    /// is what a starved database looks like here: another process, or a
    /// transaction that does not end, holds the lock.
    pub fn longest_wait(&self) -> Option<Duration> {
        let now = Instant::now();
        self.waits()
            .values()
            .filter(|wait| now.duration_since(wait.seen) < WAIT_GONE_AFTER)
            .map(|wait| now.duration_since(wait.since))
            .max()
    }

    /// Installs the WAL hook and the busy handler on `connection`, a
    /// writer connection of this database opened in WAL mode with
    /// `synchronous = NORMAL`.
    pub async fn install(
        &'static self,
        connection: &mut SqliteConnection,
    ) -> Result<(), sea_orm::sqlx::Error> {
        let mut handle = connection.lock_handle().await?;
        let database = handle.as_raw_handle().as_ptr();
        let this = std::ptr::from_ref::<GroupCommit>(self)
            .cast_mut()
            .cast::<c_void>();
        // SAFETY: `database` is an open connection that no other thread
        // uses while `handle` is held (sqlx's guarantee for
        // `lock_handle`). The hooks' argument points to a `GroupCommit`
        // that lives for the rest of the process (`'static`), and they
        // only read it through shared references.
        #[allow(unsafe_code)]
        unsafe {
            ffi::sqlite3_wal_hook(database, Some(wal_hook), this);
            ffi::sqlite3_busy_handler(database, Some(busy_handler), this);
        }
        Ok(())
    }

    /// How many commits it made durable, and with how many flushes.
    pub fn counts(&self) -> Counts {
        Counts {
            commits: self.commits.load(Ordering::Relaxed),
            flushes: self.flushes.load(Ordering::Relaxed),
        }
    }

    /// Called after a commit wrote its frames to the log: returns once a
    /// flush that began after that write has ended, starting one if none
    /// is under way.
    fn make_durable(&self) -> std::io::Result<()> {
        let mut ledger = self.ledger();
        ledger.committed += 1;
        let ticket = ledger.committed;
        loop {
            if ledger.durable >= ticket {
                self.commits.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            if ledger.flushing {
                ledger = self
                    .flushed
                    .wait(ledger)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            }
            ledger.flushing = true;
            let covers = ledger.committed;
            let folder = !ledger.folder_flushed;
            drop(ledger);
            let flushed = self.flush(folder);
            self.flushes.fetch_add(1, Ordering::Relaxed);
            ledger = self.ledger();
            ledger.flushing = false;
            if flushed.is_ok() {
                ledger.durable = ledger.durable.max(covers);
                ledger.folder_flushed |= folder;
            }
            self.flushed.notify_all();
            flushed?;
        }
    }

    /// Flushes the log file (and its folder the first time). A log that is
    /// gone was checkpointed into the database file and removed, which
    /// SQLite flushes itself.
    fn flush(&self, folder: bool) -> std::io::Result<()> {
        match std::fs::OpenOptions::new().write(true).open(&self.wal) {
            Ok(file) => file.sync_data()?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        if folder {
            std::fs::File::open(&self.folder)?.sync_all()?;
        }
        Ok(())
    }

    fn waits(&self) -> MutexGuard<'_, HashMap<ThreadId, Wait>> {
        self.waits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A commit released the write lock: the connections waiting for it
    /// try again.
    fn writer_released(&self) {
        let mut releases = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *releases = releases.wrapping_add(1);
        self.writer_released.notify_all();
    }

    /// Waits until a commit releases the write lock, or `at_most`.
    fn wait_for_writer(&self, at_most: Duration) {
        let releases = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let seen = *releases;
        let _ = self
            .writer_released
            .wait_timeout_while(releases, at_most, |releases| *releases == seen);
    }
}

thread_local! {
    /// When the connection on this thread (sqlx runs each connection on a
    /// thread of its own) first found the write lock taken, for its busy
    /// timeout.
    static BUSY_SINCE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// SQLite's WAL hook: called on the committing connection's thread after
/// each commit that wrote to the log, once the write lock is released.
extern "C" fn wal_hook(
    argument: *mut c_void,
    database: *mut ffi::sqlite3,
    name: *const c_char,
    pages: c_int,
) -> c_int {
    // SAFETY: `argument` is the `&'static GroupCommit` `install` gave.
    #[allow(unsafe_code)]
    let commits = unsafe { &*argument.cast::<GroupCommit>() };
    commits.writer_released();
    commits.waits().remove(&std::thread::current().id());
    let durable = commits.make_durable();
    if pages >= AUTOCHECKPOINT_PAGES {
        // What SQLite's default WAL hook does: a passive checkpoint of the
        // log, from the connection that committed.
        // SAFETY: `database` and `name` are the ones SQLite passed to this
        // hook, valid for its duration; checkpointing from the WAL hook is
        // what SQLite's own default hook does.
        #[allow(unsafe_code)]
        unsafe {
            ffi::sqlite3_wal_checkpoint_v2(
                database,
                name,
                ffi::SQLITE_CHECKPOINT_PASSIVE,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
        }
    }
    match durable {
        Ok(()) => ffi::SQLITE_OK,
        Err(error) => {
            // The commit is made but not known to be on disk: the
            // statement that committed fails, as it would under FULL.
            tracing::error!(log = %commits.wal.display(), %error, "cannot flush SQLite's write-ahead log");
            ffi::SQLITE_IOERR_FSYNC
        }
    }
}

/// SQLite's busy handler: called when the connection finds the write lock
/// taken, with how many times it was called for this wait. Returns
/// non-zero to try again.
extern "C" fn busy_handler(argument: *mut c_void, count: c_int) -> c_int {
    // SAFETY: `argument` is the `&'static GroupCommit` `install` gave.
    #[allow(unsafe_code)]
    let commits = unsafe { &*argument.cast::<GroupCommit>() };
    let now = Instant::now();
    let since = BUSY_SINCE.with(|since| {
        if count == 0 || since.get().is_none() {
            since.set(Some(now));
        }
        since.get().unwrap_or(now)
    });
    let thread = std::thread::current().id();
    if now.duration_since(since) >= commits.busy_timeout {
        commits.waits().remove(&thread);
        return 0;
    }
    commits.waits().insert(thread, Wait { since, seen: now });
    commits.wait_for_writer(WRITER_POLL);
    1
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}
