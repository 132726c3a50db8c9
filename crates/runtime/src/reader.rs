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

/// Reads outside transactions: see the module's documentation.
#[derive(Clone)]
pub struct Reader(Reads);

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
        Ok(Reader(Reads::Sqlite(Arc::new(SqliteReaders {
            size: count,
            idle: Mutex::new(idle),
            available: Semaphore::new(count),
        }))))
    }

    /// Whether reads have connections of their own (a SQLite file), not
    /// the writer's pool: then they are worth a readiness check of their own.
    pub fn has_own_connections(&self) -> bool {
        matches!(self.0, Reads::Sqlite(_))
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
