//! Database connections for every service: SQLite (the embedded default, a
//! file under the data dir) or PostgreSQL, from one URL.
//!
//! SQLite runs in WAL mode with one pooled connection: writes are serialised
//! in-process (no SQLITE_BUSY under load) and each commit is one fsync of the
//! write-ahead log. PostgreSQL gets a real pool.

use std::str::FromStr as _;
use std::time::Duration;

use sea_orm::sqlx::ConnectOptions as _;
use sea_orm::{ConnectOptions, Database, DatabaseConnection, DbErr};
use sea_orm_migration::MigratorTrait;

pub use crate::columns::{ColumnValue, Columns, Decoded};
pub use crate::reader::Reader;

#[derive(Debug, thiserror::Error)]
pub enum DatabaseError {
    #[error("database URL {url:?} is not supported: use sqlite://PATH or postgres://…")]
    UnsupportedUrl { url: String },
    #[error("cannot create the directory for {path}: {source}")]
    Directory {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot connect to {url}: {source}")]
    Connect { url: String, source: DbErr },
    #[error("migrations failed on {url}: {source}")]
    Migrate { url: String, source: DbErr },
}

/// A raw statement written with PostgreSQL's `$1`, `$2`… placeholders, for
/// either backend (SQLite's numbered `?1`, `?2`…: a placeholder may appear
/// more than once).
pub fn statement(
    backend: sea_orm::DatabaseBackend,
    sql: &str,
    values: Vec<sea_orm::Value>,
) -> sea_orm::Statement {
    let sql = match backend {
        sea_orm::DatabaseBackend::Sqlite => sql.replace('$', "?"),
        _ => sql.to_owned(),
    };
    sea_orm::Statement::from_sql_and_values(backend, sql, values)
}

/// Which database a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn of(url: &str) -> Option<Backend> {
        if url.starts_with("sqlite:") {
            Some(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Some(Backend::Postgres)
        } else {
            None
        }
    }
}

/// The URL of a SQLite database file, created on first use.
pub fn sqlite_url(path: &std::path::Path) -> String {
    format!("sqlite://{}?mode=rwc", path.display())
}

/// Hides the password of a database URL for logs and errors.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let credentials = &url[scheme_end + 3..at];
            match credentials.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..scheme_end + 3],
                    &credentials[..colon],
                    &url[at..]
                ),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// What every pool of Ember's starts from. Idle connections are never
/// reaped and never recycled by age: sqlx 0.9.0's pool maintenance task,
/// which does that, can spin forever on a worker thread (its idle count
/// wraps below zero when a release races an acquire; upstream sqlx issue
/// 3645, fixed after 0.9.0), and with the writer pool's one connection it
/// starved every operation. A pool keeps at most its few connections; a
/// PostgreSQL connection that broke (a restarted or moved server) is found
/// by the ping before each acquire and replaced (see [`ping_before_acquire`]).
/// A SQLite connection is a file: nothing between it and the database can
/// break, and a ping would be one more hand-off to its thread per acquire.
fn pool_options(url: &str) -> ConnectOptions {
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .sqlx_logging(false)
        .connect_timeout(Duration::from_secs(10))
        .acquire_timeout(Duration::from_secs(30))
        .idle_timeout(None)
        .max_lifetime(None)
        .test_before_acquire(false);
    if Backend::of(url) == Some(Backend::Postgres) {
        ping_before_acquire(&mut options);
    }
    options
}

/// How long a pooled PostgreSQL connection has to answer the ping before
/// it is handed out.
pub const PING_PATIENCE: Duration = Duration::from_secs(3);

/// Each PostgreSQL connection is pinged before it is handed out, and one
/// that does not answer within [`PING_PATIENCE`] is dropped and replaced.
/// sqlx's own check waits for the answer without limit: a server that
/// vanished without closing its connections (a container killed and its
/// address gone, a failover to another host) never answers, and every
/// acquire that picked such a connection waited out the whole acquire
/// timeout (30 s) and failed, one dead connection after another.
fn ping_before_acquire(options: &mut ConnectOptions) {
    use sea_orm::sqlx::Connection as _;
    options.map_sqlx_postgres_before_acquire(|connection, _| {
        Box::pin(async move {
            match tokio::time::timeout(PING_PATIENCE, connection.ping()).await {
                Ok(answered) => answered.map(|()| true),
                Err(_) => Err(sea_orm::sqlx::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "the connection did not answer a ping within {} s",
                        PING_PATIENCE.as_secs()
                    ),
                ))),
            }
        })
    });
}

/// Connects, creating a SQLite file's directory if needed.
pub async fn connect(url: &str) -> Result<DatabaseConnection, DatabaseError> {
    let backend =
        Backend::of(url).ok_or_else(|| DatabaseError::UnsupportedUrl { url: redact(url) })?;
    let mut options = pool_options(url);
    match backend {
        Backend::Sqlite => {
            if let Some(path) = sqlite_path(url)
                && let Some(parent) = path.parent()
                && !parent.as_os_str().is_empty()
            {
                std::fs::create_dir_all(parent).map_err(|source| DatabaseError::Directory {
                    path: path.display().to_string(),
                    source,
                })?;
            }
            options
                .max_connections(1)
                .min_connections(1)
                .map_sqlx_sqlite_opts(|sqlite| {
                    sqlite
                        .journal_mode(sea_orm::sqlx::sqlite::SqliteJournalMode::Wal)
                        .synchronous(sea_orm::sqlx::sqlite::SqliteSynchronous::Full)
                        .foreign_keys(true)
                        .busy_timeout(Duration::from_secs(10))
                        .row_buffer_size(SQLITE_ROW_BUFFER)
                });
        }
        Backend::Postgres => {
            options.max_connections(16).min_connections(1);
            without_tls_on_this_host(&mut options, url);
        }
    }
    Database::connect(options)
        .await
        .map_err(|source| DatabaseError::Connect {
            url: redact(url),
            source,
        })
}

/// Connections of a PostgreSQL `url` to a server on this host go without
/// TLS unless the URL or `PGSSLMODE` chooses a mode (see
/// [`asks_for_tls_mode`]).
fn without_tls_on_this_host(options: &mut ConnectOptions, url: &str) {
    let tls_asked = asks_for_tls_mode(url, std::env::var_os("PGSSLMODE").is_some());
    options.map_sqlx_postgres_opts(move |postgres| {
        if !tls_asked && is_this_host(postgres.get_host()) {
            postgres.ssl_mode(sea_orm::sqlx::postgres::PgSslMode::Disable)
        } else {
            postgres
        }
    });
}

/// Whether a PostgreSQL URL (or `PGSSLMODE`) chooses the TLS mode itself.
///
/// When neither does, a connection to a server on this host goes without
/// TLS: it protects nothing there, and through sqlx 0.9.0 — which leaves
/// Nagle's algorithm on (sqlx issue 4335) while rustls writes a large
/// statement as several records — each such statement waited ~40 ms for
/// the server's delayed acknowledgement: a create of 100 resources took
/// 150 ms instead of 25. (libpq's default, `prefer`, would use TLS
/// whenever the server offers it, as Debian's PostgreSQL does.)
fn asks_for_tls_mode(url: &str, pgsslmode_set: bool) -> bool {
    pgsslmode_set
        || url.split_once('?').is_some_and(|(_, query)| {
            query
                .split('&')
                .any(|pair| matches!(pair.split('=').next(), Some("sslmode" | "ssl-mode")))
        })
}

/// A loopback address, `localhost`, or a Unix socket directory.
fn is_this_host(host: &str) -> bool {
    host == "localhost"
        || host.starts_with('/')
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

/// How many rows a SQLite connection's thread may read ahead of the task
/// that consumes them. sqlx's default (50) made the thread and the task
/// hand over every 50 rows: a list of 200 stacks or a stack of 1,000
/// resources went back and forth between threads; with room for a whole
/// page the thread reads it in one go.
const SQLITE_ROW_BUFFER: usize = 1024;

/// How many connections serve reads of a SQLite database.
pub const SQLITE_READ_CONNECTIONS: u32 = 4;

/// Whether [`connect_reader`] opens connections of their own for `url` (a
/// SQLite file) rather than reading through the writer's pool.
fn has_own_readers(url: &str) -> bool {
    Backend::of(url) == Some(Backend::Sqlite) && sqlite_path(url).is_some()
}

/// Where reads outside transactions go (see [`crate::reader`]). SQLite in
/// WAL mode lets readers run while the one writer commits, but a single
/// connection queues every read behind every write: a SQLite file's reads
/// get [`SQLITE_READ_CONNECTIONS`] read-only connections of their own.
/// PostgreSQL's pool already serves both; an in-memory SQLite database
/// exists only in its one connection. Both read through `writer`.
pub async fn connect_reader(
    url: &str,
    writer: &DatabaseConnection,
) -> Result<Reader, DatabaseError> {
    if !has_own_readers(url) {
        return Ok(Reader::shared(writer.clone()));
    }
    let failed = |source: sea_orm::sqlx::Error| DatabaseError::Connect {
        url: redact(url),
        source: sea_orm::DbErr::Conn(sea_orm::RuntimeErr::SqlxError(std::sync::Arc::new(source))),
    };
    let options = sea_orm::sqlx::sqlite::SqliteConnectOptions::from_str(url)
        .map_err(failed)?
        .read_only(true)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(10))
        .row_buffer_size(SQLITE_ROW_BUFFER)
        .disable_statement_logging();
    Reader::sqlite(options, SQLITE_READ_CONNECTIONS as usize)
        .await
        .map_err(failed)
}

/// How long [`connect_and_migrate_patiently`] waits before its second try;
/// each later wait doubles, up to [`CONNECT_RETRY_MAX`].
const CONNECT_RETRY_FIRST: Duration = Duration::from_millis(250);
const CONNECT_RETRY_MAX: Duration = Duration::from_secs(5);

/// [`connect_and_migrate`], waiting for a database that cannot be reached
/// yet (a deployment's services started before their database, or the
/// database restarting): each failure to connect is logged with its cause
/// and tried again, backing off up to [`CONNECT_RETRY_MAX`], until it
/// succeeds or `shutdown` comes between tries (then the last error is
/// returned). A service calls it before it serves: until the
/// database answers, its probes fail and no caller is answered. What
/// waiting cannot mend — an unsupported URL, a migration the database
/// refused — fails at once.
pub async fn connect_and_migrate_patiently<M: MigratorTrait>(
    url: &str,
    shutdown: &tokio_util::sync::CancellationToken,
) -> Result<DatabaseConnection, DatabaseError> {
    let mut pause = CONNECT_RETRY_FIRST;
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        // An attempt runs to its end, shutdown or not (a refused or
        // unresolvable address fails it at once): a service stopped while
        // it migrates finishes migrating and then stops cleanly.
        match connect_and_migrate_or_say_why::<M>(url).await {
            Ok(connection) => {
                if attempts > 1 {
                    tracing::info!(url = %redact(url), attempts, "connected to the database");
                }
                return Ok(connection);
            }
            Err(error) if error.is_unreachable() => {
                tracing::warn!(
                    attempts,
                    retry_in_ms = pause.as_millis() as u64,
                    error = %crate::error::with_causes(error.to_string(), std::error::Error::source(&error)),
                    "the database cannot be reached yet; not ready until it can"
                );
                if shutdown.is_cancelled() {
                    return Err(error);
                }
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = shutdown.cancelled() => return Err(error),
                }
                pause = (pause * 2).min(CONNECT_RETRY_MAX);
            }
            Err(error) => return Err(error),
        }
    }
}

/// [`connect_and_migrate`], but a PostgreSQL server is first reached by
/// one connection of its own: a pool retries a refused connection until
/// its timeout and then says only that it timed out, where this one fails
/// at once with the cause (refused, unresolvable, still starting up, a
/// password refused).
async fn connect_and_migrate_or_say_why<M: MigratorTrait>(
    url: &str,
) -> Result<DatabaseConnection, DatabaseError> {
    if Backend::of(url) == Some(Backend::Postgres)
        && let Ok(options) = sea_orm::sqlx::postgres::PgConnectOptions::from_str(url)
    {
        connect_once(&options, Duration::from_secs(10))
            .await
            .map_err(|source| DatabaseError::Connect {
                url: redact(url),
                source: DbErr::Conn(sea_orm::RuntimeErr::SqlxError(std::sync::Arc::new(source))),
            })?;
    }
    connect_and_migrate::<M>(url).await
}

/// Opens one PostgreSQL connection with `options`, outside any pool, and
/// closes it: its error is the cause a pool's own attempts hide behind
/// "timed out" (refused, unresolvable, still starting up, a password
/// refused). Gives up after `patience`.
pub(crate) async fn connect_once(
    options: &sea_orm::sqlx::postgres::PgConnectOptions,
    patience: Duration,
) -> Result<(), sea_orm::sqlx::Error> {
    use sea_orm::sqlx::Connection as _;
    match tokio::time::timeout(patience, sea_orm::sqlx::PgConnection::connect_with(options)).await {
        Ok(connected) => {
            let _ = connected?.close().await;
            Ok(())
        }
        Err(_) => Err(sea_orm::sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no connection within {} s", patience.as_secs()),
        ))),
    }
}

impl DatabaseError {
    /// Whether the database could not be reached (waiting may mend it),
    /// rather than refusing what was asked of it.
    pub fn is_unreachable(&self) -> bool {
        match self {
            DatabaseError::Connect { .. } => true,
            DatabaseError::Migrate { source, .. } => {
                matches!(source, DbErr::Conn(_) | DbErr::ConnectionAcquire(_))
            }
            DatabaseError::UnsupportedUrl { .. } | DatabaseError::Directory { .. } => false,
        }
    }
}

/// Connects and applies every pending migration of `M` (idempotent).
///
/// Replicas of a service may start at the same moment on one database, so
/// migrations run under a lock that spans processes: a PostgreSQL advisory
/// lock keyed by the database and schema, or an exclusive file lock next to
/// the SQLite file. The replica that waited finds everything applied.
pub async fn connect_and_migrate<M: MigratorTrait>(
    url: &str,
) -> Result<DatabaseConnection, DatabaseError> {
    let failed = |source| DatabaseError::Migrate {
        url: redact(url),
        source,
    };
    // Taken before connecting: the first connection to a new SQLite file
    // switches it to WAL, which fails with "database is locked" when
    // another process does the same at that moment.
    let lock = MigrationLock::acquire(url).await.map_err(failed)?;
    let migrated = match connect(url).await {
        Ok(connection) => M::up(&connection, None)
            .await
            .map(|()| connection)
            .map_err(failed),
        Err(error) => Err(error),
    };
    lock.release().await;
    migrated
}

/// Held while migrations run: an exclusive lock on a file next to the
/// SQLite database, or a PostgreSQL advisory lock held by a session of its
/// own (it ends with that session, should the process die).
enum MigrationLock {
    Sqlite(std::fs::File),
    Postgres(DatabaseConnection),
    None,
}

impl MigrationLock {
    async fn acquire(url: &str) -> Result<MigrationLock, DbErr> {
        match Backend::of(url) {
            Some(Backend::Sqlite) => {
                let Some(path) = sqlite_path(url) else {
                    return Ok(MigrationLock::None);
                };
                let mut lock_path = path.clone().into_os_string();
                lock_path.push(".migrate-lock");
                let file = tokio::task::spawn_blocking(move || {
                    if let Some(parent) = path.parent()
                        && !parent.as_os_str().is_empty()
                    {
                        std::fs::create_dir_all(parent)?;
                    }
                    let file = std::fs::OpenOptions::new()
                        .create(true)
                        .truncate(false)
                        .write(true)
                        .open(&lock_path)?;
                    file.lock()?;
                    Ok::<_, std::io::Error>(file)
                })
                .await
                .map_err(|error| DbErr::Custom(format!("migration lock: {error}")))?
                .map_err(|error| DbErr::Custom(format!("migration lock file: {error}")))?;
                Ok(MigrationLock::Sqlite(file))
            }
            Some(Backend::Postgres) => {
                use sea_orm::ConnectionTrait;
                let mut options = pool_options(url);
                options.max_connections(1).min_connections(1);
                without_tls_on_this_host(&mut options, url);
                let session = Database::connect(options).await?;
                session
                    .execute_unprepared(
                        "SELECT pg_advisory_lock(hashtext(current_database() || '.' || current_schema() || '.ember-migrations'))",
                    )
                    .await?;
                Ok(MigrationLock::Postgres(session))
            }
            None => Ok(MigrationLock::None),
        }
    }

    async fn release(self) {
        match self {
            // Closing the file releases its lock.
            MigrationLock::Sqlite(file) => drop(file),
            // Closing the session releases its advisory lock.
            MigrationLock::Postgres(session) => {
                let _ = session.close().await;
            }
            MigrationLock::None => {}
        }
    }
}

fn sqlite_path(url: &str) -> Option<std::path::PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next()?;
    if path.is_empty() || path == ":memory:" {
        None
    } else {
        Some(std::path::PathBuf::from(path))
    }
}

/// Databases for tests: a fresh SQLite file always, and a fresh PostgreSQL
/// schema when `EMBER_TEST_DATABASE_URL` names a server. Compiled only with
/// the `testing` feature (test crates enable it in their dev-dependencies).
#[cfg(feature = "testing")]
pub mod testing {
    use super::*;

    /// The environment variable naming the PostgreSQL server for tests.
    pub const TEST_DATABASE_URL_ENV: &str = "EMBER_TEST_DATABASE_URL";

    /// A database that lives as long as this value (a SQLite file in a
    /// temporary directory, or a PostgreSQL schema dropped by [`Self::drop_schema`]).
    pub struct TestDatabase {
        pub url: String,
        pub backend: Backend,
        schema: Option<(String, String)>,
        _directory: Option<tempfile::TempDir>,
    }

    impl TestDatabase {
        pub async fn sqlite() -> TestDatabase {
            let directory = tempfile::tempdir().unwrap_or_else(|error| panic!("tempdir: {error}"));
            let url = sqlite_url(&directory.path().join("test.db"));
            TestDatabase {
                url,
                backend: Backend::Sqlite,
                schema: None,
                _directory: Some(directory),
            }
        }

        /// A fresh schema on the test PostgreSQL server, or `None` when
        /// `EMBER_TEST_DATABASE_URL` is not set. Panics if it is set but the
        /// server is unreachable: a configured backend is never skipped.
        pub async fn postgres() -> Option<TestDatabase> {
            let base = std::env::var(TEST_DATABASE_URL_ENV).ok()?;
            let schema = format!("test_{}", uuid::Uuid::new_v4().simple());
            let admin = connect(&base)
                .await
                .unwrap_or_else(|error| panic!("{TEST_DATABASE_URL_ENV} is set but: {error}"));
            use sea_orm::ConnectionTrait;
            admin
                .execute_unprepared(&format!("CREATE SCHEMA {schema}"))
                .await
                .unwrap_or_else(|error| panic!("create schema {schema}: {error}"));
            let separator = if base.contains('?') { '&' } else { '?' };
            let url = format!("{base}{separator}options[search_path]={schema}");
            Some(TestDatabase {
                url,
                backend: Backend::Postgres,
                schema: Some((base, schema)),
                _directory: None,
            })
        }

        /// Drops the PostgreSQL schema (a no-op for SQLite, whose directory
        /// goes away on drop).
        pub async fn drop_schema(&self) {
            if let Some((base, schema)) = &self.schema
                && let Ok(admin) = connect(base).await
            {
                use sea_orm::ConnectionTrait;
                let _ = admin
                    .execute_unprepared(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                    .await;
            }
        }
    }
}

/// Runs each named async test function (taking `&TestDatabase`) on SQLite,
/// and on PostgreSQL when `EMBER_TEST_DATABASE_URL` is set — the store
/// conformance suite pattern every service uses. Needs the `testing` feature.
#[cfg(feature = "testing")]
#[macro_export]
macro_rules! store_suite {
    ($($test:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $test() {
                    let database = $crate::database::testing::TestDatabase::sqlite().await;
                    super::$test(&database).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $test() {
                    let Some(database) = $crate::database::testing::TestDatabase::postgres().await else {
                        eprintln!("PostgreSQL variant not run: EMBER_TEST_DATABASE_URL is not set");
                        return;
                    };
                    super::$test(&database).await;
                    database.drop_schema().await;
                }
            )*
        }
    };
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

    use super::*;

    #[test]
    fn no_pool_runs_the_idle_reaper() {
        for url in ["sqlite:///tmp/ember.db", "postgres://u@127.0.0.1/db"] {
            let options = pool_options(url);
            assert_eq!(options.get_idle_timeout(), Some(None), "{url}");
            assert_eq!(options.get_max_lifetime(), Some(None), "{url}");
        }
    }

    #[test]
    fn only_a_server_on_this_host_without_a_chosen_mode_goes_without_tls() {
        assert!(!asks_for_tls_mode("postgres://u@127.0.0.1:5432/db", false));
        assert!(asks_for_tls_mode(
            "postgres://u@127.0.0.1/db?sslmode=require",
            false
        ));
        assert!(asks_for_tls_mode(
            "postgres://u@h/db?application_name=e&sslmode=prefer",
            false
        ));
        assert!(!asks_for_tls_mode(
            "postgres://u@h/db?application_name=sslmode",
            false
        ));
        assert!(asks_for_tls_mode("postgres://u@127.0.0.1/db", true));
        for host in [
            "127.0.0.1",
            "127.8.0.1",
            "::1",
            "[::1]",
            "localhost",
            "/run/postgresql",
        ] {
            assert!(is_this_host(host), "{host}");
        }
        for host in ["postgres", "10.0.0.5", "db.example.com", "2001:db8::1"] {
            assert!(!is_this_host(host), "{host}");
        }
    }

    #[tokio::test]
    async fn a_loopback_postgres_connection_goes_without_tls() {
        let Ok(url) = std::env::var("EMBER_TEST_DATABASE_URL") else {
            eprintln!("PostgreSQL part not run: EMBER_TEST_DATABASE_URL is not set");
            return;
        };
        if url.contains("sslmode") || !url.contains("127.0.0.1") {
            eprintln!(
                "not run: EMBER_TEST_DATABASE_URL chooses its TLS mode or is not on 127.0.0.1"
            );
            return;
        }
        use sea_orm::ConnectionTrait;
        let connection = connect(&url).await.expect("connects");
        let row = connection
            .query_one_raw(sea_orm::Statement::from_string(
                sea_orm::DatabaseBackend::Postgres,
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            ))
            .await
            .expect("pg_stat_ssl")
            .expect("this backend's row");
        let ssl: bool = row.try_get_by_index(0).expect("ssl column");
        assert!(!ssl, "TLS over loopback");
    }

    /// A TCP relay to PostgreSQL whose connections can all go silent at
    /// once, as when the server's host vanished: nothing more is relayed
    /// and nothing is closed. Connections made afterwards are relayed.
    struct VanishingRelay {
        address: std::net::SocketAddr,
        generation: Arc<std::sync::atomic::AtomicU64>,
    }

    impl VanishingRelay {
        async fn to(server: String) -> VanishingRelay {
            VanishingRelay::at("127.0.0.1:0", server).await
        }

        /// A relay listening on `address`.
        async fn at(address: &str, server: String) -> VanishingRelay {
            use std::sync::atomic::Ordering;
            let listener = tokio::net::TcpListener::bind(address).await.unwrap();
            let address = listener.local_addr().unwrap();
            let generation = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let current = generation.clone();
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let Ok(upstream) = tokio::net::TcpStream::connect(&server).await else {
                        continue;
                    };
                    let born = current.load(Ordering::SeqCst);
                    let (client_read, client_write) = client.into_split();
                    let (upstream_read, upstream_write) = upstream.into_split();
                    for (mut from, mut to) in [
                        (
                            Box::new(client_read) as Box<dyn AsyncRead + Send + Unpin>,
                            Box::new(upstream_write) as Box<dyn AsyncWrite + Send + Unpin>,
                        ),
                        (Box::new(upstream_read), Box::new(client_write)),
                    ] {
                        let current = current.clone();
                        tokio::spawn(async move {
                            let mut buffer = vec![0u8; 16 * 1024];
                            loop {
                                let Ok(read) = from.read(&mut buffer).await else {
                                    return;
                                };
                                if read == 0 {
                                    return;
                                }
                                if current.load(Ordering::SeqCst) != born {
                                    // Silent from now on, with both ends kept open.
                                    std::future::pending::<()>().await;
                                }
                                if to.write_all(&buffer[..read]).await.is_err() {
                                    return;
                                }
                            }
                        });
                    }
                }
            });
            VanishingRelay {
                address,
                generation,
            }
        }

        fn vanish(&self) {
            self.generation
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// The test PostgreSQL server's URL and its `host:port` (which a test
    /// swaps for a relay's), or `None`, said, when none is configured.
    fn test_server() -> Option<(String, String)> {
        let Ok(url) = std::env::var("EMBER_TEST_DATABASE_URL") else {
            eprintln!("not run: EMBER_TEST_DATABASE_URL is not set");
            return None;
        };
        let options: sea_orm::sqlx::postgres::PgConnectOptions =
            url.parse().expect("a PostgreSQL URL");
        let server = format!("{}:{}", options.get_host(), options.get_port());
        assert!(
            url.contains(&server),
            "EMBER_TEST_DATABASE_URL names no host:port to relay: {}",
            redact(&url)
        );
        Some((url, server))
    }

    /// A loopback address nothing listens on (it was free a moment ago).
    fn free_port() -> std::net::SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        listener.local_addr().expect("its address")
    }

    struct NoMigrations;

    impl MigratorTrait for NoMigrations {
        fn migrations() -> Vec<Box<dyn sea_orm_migration::MigrationTrait>> {
            Vec::new()
        }
    }

    /// A service started before its database waits for it: the first
    /// tries are refused (nothing listens yet), the one after the server
    /// appears connects and migrates. What waiting cannot mend fails at
    /// once, and shutdown ends the wait.
    #[tokio::test]
    async fn a_database_that_comes_up_later_is_waited_for() {
        let shutdown = tokio_util::sync::CancellationToken::new();
        let unsupported = connect_and_migrate_patiently::<NoMigrations>("mysql://x", &shutdown)
            .await
            .expect_err("not a supported URL");
        assert!(!unsupported.is_unreachable(), "{unsupported}");

        let Some((url, server)) = test_server() else {
            return;
        };
        let later = free_port();
        let waiting_url = url.replacen(&server, &later.to_string(), 1);
        let waiting = tokio::spawn({
            let shutdown = shutdown.clone();
            async move { connect_and_migrate_patiently::<NoMigrations>(&waiting_url, &shutdown).await }
        });
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        assert!(!waiting.is_finished(), "it waits while nothing listens");
        let _relay = VanishingRelay::at(&later.to_string(), server.clone()).await;
        let connection = tokio::time::timeout(Duration::from_secs(15), waiting)
            .await
            .expect("connected within the backoff's bound")
            .expect("joined")
            .expect("connected once the server is there");
        use sea_orm::ConnectionTrait;
        connection
            .execute_unprepared("SELECT 1")
            .await
            .expect("the connection answers");

        // Still waiting when shutdown comes: it ends with the last error.
        let dead_url = url.replacen(&server, &free_port().to_string(), 1);
        let waiting = tokio::spawn({
            let shutdown = shutdown.clone();
            async move { connect_and_migrate_patiently::<NoMigrations>(&dead_url, &shutdown).await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        shutdown.cancel();
        let error = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("shutdown ends the wait")
            .expect("joined")
            .expect_err("never connected");
        assert!(error.is_unreachable(), "{error}");
        let said = crate::error::with_causes(error.to_string(), std::error::Error::source(&error));
        assert!(
            said.to_lowercase().contains("refused"),
            "the cause, not a pool timeout: {said}"
        );
    }

    #[tokio::test]
    async fn a_postgres_connection_that_went_silent_is_replaced_within_the_ping_patience() {
        let Some((url, server)) = test_server() else {
            return;
        };
        let relay = VanishingRelay::to(server.clone()).await;
        let relayed = url.replacen(&server, &relay.address.to_string(), 1);
        let pool = connect(&relayed).await.expect("connects through the relay");
        use sea_orm::ConnectionTrait;
        pool.execute_unprepared("SELECT 1")
            .await
            .expect("a first query");
        // Every connection back in the pool (they return on a task of
        // their own), so the next acquire picks one the relay silences.
        let sqlx_pool = pool.get_postgres_connection_pool();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while sqlx_pool.num_idle() < sqlx_pool.size() as usize {
            assert!(
                std::time::Instant::now() < deadline,
                "connections not back in the pool after 5 s"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }

        relay.vanish();
        let started = std::time::Instant::now();
        pool.execute_unprepared("SELECT 1")
            .await
            .expect("a query on a new connection");
        let waited = started.elapsed();
        assert!(
            waited >= PING_PATIENCE && waited < PING_PATIENCE + Duration::from_secs(5),
            "the silent connection was replaced after {waited:?}"
        );
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://ember:hunter2@db:5432/engine"),
            "postgres://ember:***@db:5432/engine"
        );
        assert_eq!(
            redact("postgres://postgres@db/engine"),
            "postgres://postgres@db/engine"
        );
        assert_eq!(redact("sqlite:///tmp/x.db"), "sqlite:///tmp/x.db");
    }

    #[test]
    fn backends_are_told_apart() {
        assert_eq!(Backend::of("sqlite://a.db?mode=rwc"), Some(Backend::Sqlite));
        assert_eq!(Backend::of("postgresql://h/db"), Some(Backend::Postgres));
        assert_eq!(Backend::of("mysql://h/db"), None);
    }

    #[tokio::test]
    async fn unsupported_urls_are_refused_by_name() {
        let error = connect("mysql://root@localhost/x")
            .await
            .expect_err("refused");
        assert!(error.to_string().contains("not supported"), "{error}");
    }

    #[tokio::test]
    async fn sqlite_files_and_their_directories_are_created() {
        let directory = tempfile::tempdir().expect("tempdir");
        let path = directory.path().join("nested/dir/engine.db");
        let connection = connect(&sqlite_url(&path)).await.expect("connects");
        connection.ping().await.expect("ping");
        assert!(path.exists());
    }
}
