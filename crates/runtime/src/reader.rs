//! Where a service's reads outside transactions go.
//!
//! PostgreSQL (and an in-memory SQLite database) read through the service's
//! one pool. A SQLite file gets read-only connections of its own beside the
//! one writer (WAL lets readers run while the writer commits), lent to one
//! statement at a time and taken back as soon as it is done.
//!
//! They are not a sqlx pool: sqlx's pool hands a released connection back
//! only after a task it spawns has pinged it, and a SQLite connection's
//! ping is a round trip to the connection's own thread — one more thread
//! hand-off (two context switches) after every read, and a task, for a
//! check that a file cannot fail. Counted with `perf probe`, that was ten
//! releases for every stack eight clients created and deleted, and one
//! for every `GET` of a stack.
//!
//! The hottest reads (lists and lookups of stacks, a stack's resources) go
//! further:
//! [`Reader::rows`] steps them on the calling thread, on a read-only
//! connection of its own, and decodes each row where it lies. A sqlx
//! connection steps on a thread of its own and copies every value of every
//! row (`sqlite3_value_dup`, a SQLite allocation each) to send the row
//! across: for a list of 200 stacks, 4,600 allocations made on one thread
//! and freed on another, and a hand-off each way. A page of rows from
//! SQLite's cache is a fraction of a millisecond of CPU, no longer than
//! the decoding the task did anyway.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sea_orm::sea_query::Values;
use sea_orm::sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sea_orm::sqlx::{self, ConnectOptions as _, Executor as _};
use sea_orm::{
    ConnectionTrait, DatabaseBackend, DatabaseConnection, DbErr, ExecResult, QueryResult,
    RuntimeErr, Statement,
};
use sea_query_sqlx::SqlxValues;
use tokio::sync::Semaphore;

use crate::columns::Columns;

/// Reads outside transactions: see the module's documentation.
#[derive(Clone)]
pub struct Reader(Reads);

/// How long [`Reader::connect_failure`] waits for its connection.
const CONNECT_DIAGNOSIS_PATIENCE: std::time::Duration = std::time::Duration::from_secs(3);

#[derive(Clone)]
enum Reads {
    /// The service's own pool serves reads too.
    Shared(DatabaseConnection),
    Sqlite(Arc<SqliteReaders>),
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Reads::Shared(_) => formatter.write_str("Reader(shared pool)"),
            Reads::Sqlite(readers) => write!(formatter, "Reader({} SQLite readers)", readers.size),
        }
    }
}

impl Reader {
    /// Reads through `connection`, the pool that also writes.
    pub fn shared(connection: DatabaseConnection) -> Reader {
        Reader(Reads::Shared(connection))
    }

    /// `count` read-only connections to the SQLite file `options` opens.
    pub(crate) async fn sqlite(
        options: SqliteConnectOptions,
        count: usize,
    ) -> Result<Reader, sqlx::Error> {
        let mut idle = Vec::with_capacity(count);
        for _ in 0..count {
            idle.push(options.connect().await?);
        }
        let path = options.get_filename().to_owned();
        // One now, so a file that cannot be read fails here, not on a read.
        let stepping =
            open_stepping(&path).map_err(|error| sqlx::Error::Configuration(error.into()))?;
        Ok(Reader(Reads::Sqlite(Arc::new(SqliteReaders {
            size: count,
            idle: Mutex::new(idle),
            available: Semaphore::new(count),
            path,
            stepping: Mutex::new(vec![stepping]),
        }))))
    }

    /// Every row `statement` returns, each decoded by `decode` (see the
    /// module's documentation: on a SQLite file of its own the statement is
    /// stepped on this thread).
    pub async fn rows<T>(
        &self,
        statement: Statement,
        decode: impl Fn(&Columns<'_>) -> Result<T, sea_orm::TryGetError>,
    ) -> Result<Vec<T>, DbErr> {
        match &self.0 {
            Reads::Shared(connection) => connection
                .query_all_raw(statement)
                .await?
                .iter()
                .map(|row| decode(&Columns::Queried(row)).map_err(DbErr::from))
                .collect(),
            Reads::Sqlite(readers) => readers.step(statement, decode),
        }
    }

    /// Whether reads have connections of their own (a SQLite file), not
    /// the writer's pool: then they are worth a readiness check of their own.
    pub fn has_own_connections(&self) -> bool {
        matches!(self.0, Reads::Sqlite(_))
    }

    /// Why the pool cannot hand out a connection, when it is a PostgreSQL
    /// pool whose own attempts fail: one connection is opened directly
    /// with the pool's options, and its error is the cause the pool's
    /// acquire timeout hides (a refused or unresolvable address, a
    /// database still starting, a password refused). `None` when it
    /// connects (the pool is busy, not cut off) or is not PostgreSQL.
    pub async fn connect_failure(&self) -> Option<String> {
        let Reads::Shared(connection) = &self.0 else {
            return None;
        };
        if connection.get_database_backend() != sea_orm::DatabaseBackend::Postgres {
            return None;
        }
        let options = connection.get_postgres_connection_pool().connect_options();
        let error = crate::database::connect_once(&options, CONNECT_DIAGNOSIS_PATIENCE)
            .await
            .err()?;
        Some(crate::error::with_causes(
            error.to_string(),
            std::error::Error::source(&error),
        ))
    }

    /// Connections held and how many are idle (`None` where unknown).
    pub fn pool_size(&self) -> (Option<u32>, Option<usize>) {
        match &self.0 {
            Reads::Shared(connection) => crate::readiness::pool_size(connection),
            Reads::Sqlite(readers) => (
                Some(u32::try_from(readers.size).unwrap_or(u32::MAX)),
                Some(readers.available.available_permits()),
            ),
        }
    }
}

impl From<DatabaseConnection> for Reader {
    fn from(connection: DatabaseConnection) -> Reader {
        Reader::shared(connection)
    }
}

/// Read-only SQLite connections, each lent to one statement at a time.
struct SqliteReaders {
    size: usize,
    idle: Mutex<Vec<SqliteConnection>>,
    /// One permit per idle connection.
    available: Semaphore,
    /// The database file.
    path: PathBuf,
    /// Idle connections [`Reader::rows`] steps statements on: one per
    /// thread stepping at once at most, so never more than the threads.
    stepping: Mutex<Vec<rusqlite::Connection>>,
}

/// Statements each stepping connection keeps prepared.
const STEPPING_STATEMENTS: usize = 64;

/// A read-only connection to step statements on.
fn open_stepping(path: &std::path::Path) -> rusqlite::Result<rusqlite::Connection> {
    use rusqlite::OpenFlags;
    let connection = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    connection.busy_timeout(Duration::from_secs(10))?;
    connection.set_prepared_statement_cache_capacity(STEPPING_STATEMENTS);
    Ok(connection)
}

/// How long a read waits for a connection before it fails (as sqlx's pool
/// would: the service's reads are starved).
const ACQUIRE_PATIENCE: Duration = Duration::from_secs(30);

impl SqliteReaders {
    async fn lend(&self) -> Result<Lent<'_>, DbErr> {
        let permit = tokio::time::timeout(ACQUIRE_PATIENCE, self.available.acquire())
            .await
            .map_err(|_| DbErr::ConnectionAcquire(sea_orm::ConnAcquireErr::Timeout))?
            .map_err(|_| DbErr::ConnectionAcquire(sea_orm::ConnAcquireErr::ConnectionClosed))?;
        let connection = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .ok_or_else(|| {
                DbErr::Custom("a SQLite reader's permit came without a connection".to_owned())
            })?;
        Ok(Lent {
            connection: Some(connection),
            readers: self,
            _permit: permit,
        })
    }
}

impl SqliteReaders {
    /// Steps `statement` on an idle stepping connection (a new one if none
    /// is idle), decoding each row with `decode`.
    fn step<T>(
        &self,
        statement: Statement,
        decode: impl Fn(&Columns<'_>) -> Result<T, sea_orm::TryGetError>,
    ) -> Result<Vec<T>, DbErr> {
        let idle = self
            .stepping
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let connection = match idle {
            Some(connection) => connection,
            None => open_stepping(&self.path).map_err(sqlite_error)?,
        };
        let rows = step_on(&connection, statement, decode);
        self.stepping
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(connection);
        rows
    }
}

fn step_on<T>(
    connection: &rusqlite::Connection,
    statement: Statement,
    decode: impl Fn(&Columns<'_>) -> Result<T, sea_orm::TryGetError>,
) -> Result<Vec<T>, DbErr> {
    let mut prepared = connection
        .prepare_cached(&statement.sql)
        .map_err(sqlite_error)?;
    for (index, value) in statement
        .values
        .into_iter()
        .flat_map(|values| values.0)
        .enumerate()
    {
        prepared
            .raw_bind_parameter(index + 1, bound(value)?)
            .map_err(sqlite_error)?;
    }
    let mut rows = prepared.raw_query();
    let mut decoded = Vec::new();
    while let Some(row) = rows.next().map_err(sqlite_error)? {
        decoded.push(decode(&Columns::Stepped(row)).map_err(DbErr::from)?);
    }
    Ok(decoded)
}

fn sqlite_error(error: rusqlite::Error) -> DbErr {
    DbErr::Query(RuntimeErr::Internal(format!("SQLite: {error}")))
}

/// `value` bound as sqlx binds it (see [`crate::columns`]), so a statement
/// compares a column with what sqlx wrote there.
fn bound(value: sea_orm::Value) -> Result<rusqlite::types::Value, DbErr> {
    use rusqlite::types::Value as Bound;
    use sea_orm::Value;
    let integer = |value: Option<i64>| value.map_or(Bound::Null, Bound::Integer);
    Ok(match value {
        Value::Bool(value) => integer(value.map(i64::from)),
        Value::TinyInt(value) => integer(value.map(i64::from)),
        Value::SmallInt(value) => integer(value.map(i64::from)),
        Value::Int(value) => integer(value.map(i64::from)),
        Value::BigInt(value) => integer(value),
        Value::TinyUnsigned(value) => integer(value.map(i64::from)),
        Value::SmallUnsigned(value) => integer(value.map(i64::from)),
        Value::Unsigned(value) => integer(value.map(i64::from)),
        Value::BigUnsigned(None) => Bound::Null,
        Value::BigUnsigned(Some(value)) => Bound::Integer(i64::try_from(value).map_err(|_| {
            DbErr::Query(RuntimeErr::Internal(format!(
                "{value} is beyond SQLite's integers"
            )))
        })?),
        Value::Float(value) => value.map_or(Bound::Null, |value| Bound::Real(f64::from(value))),
        Value::Double(value) => value.map_or(Bound::Null, Bound::Real),
        Value::String(value) => value.map_or(Bound::Null, Bound::Text),
        Value::Char(value) => value.map_or(Bound::Null, |value| Bound::Text(value.to_string())),
        Value::Bytes(value) => value.map_or(Bound::Null, Bound::Blob),
        Value::Json(value) => match value {
            Some(json) => Bound::Text(json.to_string()),
            None => Bound::Null,
        },
        Value::ChronoDateTimeUtc(value) => value.map_or(Bound::Null, |time| {
            Bound::Text(time.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, false))
        }),
        Value::Uuid(value) => {
            value.map_or(Bound::Null, |uuid| Bound::Blob(uuid.as_bytes().to_vec()))
        }
        other => {
            return Err(DbErr::Query(RuntimeErr::Internal(format!(
                "a SQLite reader does not bind {other:?}"
            ))));
        }
    })
}

/// A connection lent to one statement; back among the idle ones when
/// dropped (before its permit is released). A statement whose caller went
/// away finishes on the connection's thread before the next one starts
/// there.
struct Lent<'a> {
    connection: Option<SqliteConnection>,
    readers: &'a SqliteReaders,
    _permit: tokio::sync::SemaphorePermit<'a>,
}

impl Lent<'_> {
    /// The connection (held from the lending until the drop gives it back).
    fn connection(&mut self) -> Result<&mut SqliteConnection, DbErr> {
        self.connection
            .as_mut()
            .ok_or_else(|| DbErr::Custom("a lent SQLite reader was given back early".to_owned()))
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take() {
            self.readers
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(connection);
        }
    }
}

fn query(statement: &Statement) -> sqlx::query::Query<'_, sqlx::Sqlite, SqlxValues> {
    let values = statement.values.clone().unwrap_or(Values(Vec::new()));
    sqlx::query_with(
        sqlx::AssertSqlSafe(statement.sql.as_str()),
        SqlxValues(values),
    )
}

fn query_error(error: sqlx::Error) -> DbErr {
    DbErr::Query(RuntimeErr::SqlxError(Arc::new(error)))
}

fn exec_error(error: sqlx::Error) -> DbErr {
    DbErr::Exec(RuntimeErr::SqlxError(Arc::new(error)))
}

#[async_trait::async_trait]
impl ConnectionTrait for Reader {
    fn get_database_backend(&self) -> DatabaseBackend {
        match &self.0 {
            Reads::Shared(connection) => connection.get_database_backend(),
            Reads::Sqlite(_) => DatabaseBackend::Sqlite,
        }
    }

    async fn execute_raw(&self, statement: Statement) -> Result<ExecResult, DbErr> {
        match &self.0 {
            Reads::Shared(connection) => connection.execute_raw(statement).await,
            Reads::Sqlite(readers) => {
                let mut lent = readers.lend().await?;
                query(&statement)
                    .execute(lent.connection()?)
                    .await
                    .map(ExecResult::from)
                    .map_err(exec_error)
            }
        }
    }

    async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        match &self.0 {
            Reads::Shared(connection) => connection.execute_unprepared(sql).await,
            Reads::Sqlite(readers) => {
                let mut lent = readers.lend().await?;
                lent.connection()?
                    .execute(sqlx::AssertSqlSafe(sql.to_owned()))
                    .await
                    .map(ExecResult::from)
                    .map_err(exec_error)
            }
        }
    }

    async fn query_one_raw(&self, statement: Statement) -> Result<Option<QueryResult>, DbErr> {
        match &self.0 {
            Reads::Shared(connection) => connection.query_one_raw(statement).await,
            Reads::Sqlite(readers) => {
                let mut lent = readers.lend().await?;
                query(&statement)
                    .fetch_optional(lent.connection()?)
                    .await
                    .map(|row| row.map(QueryResult::from))
                    .map_err(query_error)
            }
        }
    }

    async fn query_all_raw(&self, statement: Statement) -> Result<Vec<QueryResult>, DbErr> {
        match &self.0 {
            Reads::Shared(connection) => connection.query_all_raw(statement).await,
            Reads::Sqlite(readers) => {
                let mut lent = readers.lend().await?;
                query(&statement)
                    .fetch_all(lent.connection()?)
                    .await
                    .map(|rows| rows.into_iter().map(QueryResult::from).collect())
                    .map_err(query_error)
            }
        }
    }

    fn support_returning(&self) -> bool {
        match &self.0 {
            Reads::Shared(connection) => connection.support_returning(),
            Reads::Sqlite(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sea_orm::{ConnectionTrait, DatabaseBackend, Statement};

    use crate::database::{SQLITE_READ_CONNECTIONS, connect, connect_reader, sqlite_url};

    async fn file_with_rows(
        directory: &tempfile::TempDir,
        rows: usize,
    ) -> (sea_orm::DatabaseConnection, super::Reader) {
        let url = sqlite_url(&directory.path().join("reads.db"));
        let writer = connect(&url).await.expect("writer");
        writer
            .execute_unprepared("CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
            .await
            .expect("table");
        for id in 0..rows {
            writer
                .execute_unprepared(&format!("INSERT INTO things VALUES ({id}, 'thing {id}')"))
                .await
                .expect("row");
        }
        let reader = connect_reader(&url, &writer).await.expect("reader");
        (writer, reader)
    }

    fn select(sql: &str, values: Vec<sea_orm::Value>) -> Statement {
        Statement::from_sql_and_values(DatabaseBackend::Sqlite, sql, values)
    }

    #[tokio::test]
    async fn a_sqlite_file_is_read_on_connections_of_its_own_that_see_every_commit_and_cannot_write()
     {
        let directory = tempfile::tempdir().expect("tempdir");
        let (writer, reader) = file_with_rows(&directory, 3).await;
        assert_eq!(
            reader.pool_size(),
            (Some(SQLITE_READ_CONNECTIONS), Some(4)),
            "{reader:?}"
        );
        let rows = reader
            .query_all_raw(select("SELECT name FROM things ORDER BY id", vec![]))
            .await
            .expect("rows");
        let names: Vec<String> = rows
            .iter()
            .map(|row| row.try_get_by_index(0).expect("name"))
            .collect();
        assert_eq!(names, ["thing 0", "thing 1", "thing 2"]);
        writer
            .execute_unprepared("INSERT INTO things VALUES (3, 'thing 3')")
            .await
            .expect("a later commit");
        let found = reader
            .query_one_raw(select(
                "SELECT name FROM things WHERE id = ?",
                vec![3_i64.into()],
            ))
            .await
            .expect("read")
            .expect("the row committed after the readers opened");
        assert_eq!(
            found.try_get_by_index::<String>(0).expect("name"),
            "thing 3"
        );
        assert!(
            reader
                .query_one_raw(select(
                    "SELECT name FROM things WHERE id = ?",
                    vec![9_i64.into()]
                ))
                .await
                .expect("read")
                .is_none()
        );
        let refused = reader
            .execute_unprepared("INSERT INTO things VALUES (4, 'not written')")
            .await
            .expect_err("a reader cannot write");
        assert!(refused.to_string().contains("readonly"), "{refused}");
        let broken = reader
            .query_all_raw(select("SELECT missing_column FROM things", vec![]))
            .await
            .expect_err("a bad statement fails");
        assert!(broken.to_string().contains("no such column"), "{broken}");
        assert_eq!(reader.pool_size().1, Some(4), "every connection came back");
    }

    #[tokio::test]
    async fn reads_beyond_the_connections_wait_and_a_read_given_up_gives_its_connection_back() {
        let directory = tempfile::tempdir().expect("tempdir");
        let (_writer, reader) = file_with_rows(&directory, 200).await;
        let mut reads = tokio::task::JoinSet::new();
        for _ in 0..32 {
            let reader = reader.clone();
            reads.spawn(async move {
                reader
                    .query_all_raw(select(
                        "SELECT a.id FROM things a JOIN things b ON b.id <= a.id",
                        vec![],
                    ))
                    .await
            });
        }
        while let Some(rows) = reads.join_next().await {
            assert_eq!(rows.expect("task").expect("read").len(), 200 * 201 / 2);
        }
        // Given up at once, mid-statement or before it was sent.
        for _ in 0..8 {
            let _ = tokio::time::timeout(
                Duration::ZERO,
                reader.query_all_raw(select(
                    "SELECT a.id FROM things a JOIN things b ON b.id <= a.id",
                    vec![],
                )),
            )
            .await;
        }
        assert_eq!(reader.pool_size().1, Some(4));
        let count = reader
            .query_one_raw(select("SELECT count(*) FROM things", vec![]))
            .await
            .expect("a read after them")
            .expect("a row");
        assert_eq!(count.try_get_by_index::<i64>(0).expect("count"), 200);
    }

    /// A table sqlx writes values of every bound kind into.
    async fn typed_rows(writer: &sea_orm::DatabaseConnection) -> Vec<sea_orm::Value> {
        writer
            .execute_unprepared(
                "CREATE TABLE typed (id BLOB PRIMARY KEY, at TEXT NOT NULL, flag INTEGER NOT NULL, \
                 doc TEXT NOT NULL, n INTEGER, label TEXT)",
            )
            .await
            .expect("table");
        let id = uuid::Uuid::from_u128(0x0011_2233_4455_6677_8899_aabb_ccdd_eeff);
        let at = chrono::DateTime::parse_from_rfc3339("2026-11-27T10:00:00.123456Z")
            .expect("time")
            .to_utc();
        let values: Vec<sea_orm::Value> = vec![
            id.into(),
            at.into(),
            true.into(),
            serde_json::json!({"a": [1, "b"]}).into(),
            Option::<i32>::None.into(),
            "label".into(),
        ];
        writer
            .execute_raw(Statement::from_sql_and_values(
                DatabaseBackend::Sqlite,
                "INSERT INTO typed VALUES (?, ?, ?, ?, ?, ?)",
                values.clone(),
            ))
            .await
            .expect("row");
        values
    }

    #[tokio::test]
    async fn rows_are_stepped_in_place_with_values_bound_as_sqlx_wrote_them() {
        let directory = tempfile::tempdir().expect("tempdir");
        let (writer, reader) = file_with_rows(&directory, 3).await;
        let values = typed_rows(&writer).await;
        // Every written value finds its row again, compared as stored.
        let found = reader
            .rows(
                select(
                    "SELECT id, at, flag, doc, n, label FROM typed \
                     WHERE id = ? AND at = ? AND flag = ? AND doc = ? AND n IS ? AND label = ?",
                    values.clone(),
                ),
                |row| {
                    Ok((
                        row.get::<uuid::Uuid>(0)?,
                        row.get::<chrono::DateTime<chrono::Utc>>(1)?,
                        row.get::<bool>(2)?,
                        row.get::<serde_json::Value>(3)?,
                        row.get::<Option<i32>>(4)?,
                        row.get::<String>(5)?,
                    ))
                },
            )
            .await
            .expect("rows");
        assert_eq!(found.len(), 1, "the row by every value sqlx wrote");
        let (id, at, flag, doc, n, label) = &found[0];
        assert_eq!(sea_orm::Value::from(*id), values[0]);
        assert_eq!(sea_orm::Value::from(*at), values[1]);
        assert!(flag);
        assert_eq!(doc, &serde_json::json!({"a": [1, "b"]}));
        assert_eq!((n, label.as_str()), (&None, "label"));
        let earlier = reader
            .rows(
                select(
                    "SELECT count(*) FROM typed WHERE at < ?",
                    vec![
                        chrono::DateTime::parse_from_rfc3339("2026-11-27T10:00:00.2Z")
                            .expect("time")
                            .to_utc()
                            .into(),
                    ],
                ),
                |row| row.get::<i64>(0),
            )
            .await
            .expect("count");
        assert_eq!(earlier, [1], "timestamps compare in time order");

        // Later commits are seen; the connection cannot write.
        writer
            .execute_unprepared("INSERT INTO things VALUES (3, 'thing 3')")
            .await
            .expect("a later commit");
        let names = reader
            .rows(
                select("SELECT name FROM things ORDER BY id", vec![]),
                |row| row.get::<String>(0),
            )
            .await
            .expect("names");
        assert_eq!(names, ["thing 0", "thing 1", "thing 2", "thing 3"]);
        let refused = reader
            .rows(select("DELETE FROM things RETURNING id", vec![]), |row| {
                row.get::<i64>(0)
            })
            .await
            .expect_err("a stepping connection cannot write");
        assert!(refused.to_string().contains("readonly"), "{refused}");

        // Bad statements and bad decodes are errors, and leave the
        // connection usable.
        let broken = reader
            .rows(select("SELECT missing_column FROM things", vec![]), |row| {
                row.get::<i64>(0)
            })
            .await
            .expect_err("a bad statement fails");
        assert!(broken.to_string().contains("no such column"), "{broken}");
        let mistyped = reader
            .rows(select("SELECT name FROM things", vec![]), |row| {
                row.get::<uuid::Uuid>(0)
            })
            .await
            .expect_err("text is no uuid");
        assert!(mistyped.to_string().contains("column 0"), "{mistyped}");
        let unbindable = reader
            .rows(
                select(
                    "SELECT name FROM things WHERE id = ?",
                    vec![sea_orm::Value::ChronoDate(None)],
                ),
                |row| row.get::<String>(0),
            )
            .await
            .expect_err("a value kind Ember never binds");
        assert!(
            unbindable.to_string().contains("does not bind"),
            "{unbindable}"
        );
        let count = reader
            .rows(select("SELECT count(*) FROM things", vec![]), |row| {
                row.get::<i64>(0)
            })
            .await
            .expect("a read after them");
        assert_eq!(count, [4]);
    }

    #[tokio::test]
    async fn rows_of_an_in_memory_database_are_read_through_its_connection() {
        let writer = connect("sqlite::memory:").await.expect("writer");
        let reader = connect_reader("sqlite::memory:", &writer)
            .await
            .expect("reader");
        let values = typed_rows(&writer).await;
        let found = reader
            .rows(
                select(
                    "SELECT id, n FROM typed WHERE id = ?",
                    vec![values[0].clone()],
                ),
                |row| Ok((row.get::<uuid::Uuid>(0)?, row.get::<Option<i32>>(1)?)),
            )
            .await
            .expect("rows");
        assert_eq!(found.len(), 1);
        assert_eq!(
            (sea_orm::Value::from(found[0].0), found[0].1),
            (values[0].clone(), None)
        );
    }

    #[tokio::test]
    async fn an_in_memory_database_is_read_through_its_one_connection() {
        let writer = connect("sqlite::memory:").await.expect("writer");
        let reader = connect_reader("sqlite::memory:", &writer)
            .await
            .expect("reader");
        assert_eq!(format!("{reader:?}"), "Reader(shared pool)");
        writer
            .execute_unprepared("CREATE TABLE t (x INTEGER)")
            .await
            .expect("table");
        reader
            .execute_unprepared("INSERT INTO t VALUES (1)")
            .await
            .expect("the shared connection writes too");
    }
}
