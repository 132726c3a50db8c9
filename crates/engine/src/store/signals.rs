//! Persistence of the signals wait condition handles receive. A signal
//! without an id gets its number among the handle's signals; numbering
//! and storing are one statement, and when two signals race for the same
//! number (PostgreSQL runs them side by side) the loser is stored again
//! under the next one — never one silently replacing the other.

use async_trait::async_trait;
use sea_orm::{ConnectionTrait, DatabaseConnection};
use uuid::Uuid;

use crate::domain::wait_condition::{SignalInput, SignalStatus, WaitSignal};
use crate::error::{Error, Result};
use ember_runtime::database::statement;

#[async_trait]
pub trait WaitSignalStore: Send + Sync + 'static {
    /// Stores a signal of handle `handle_id` of `stack_id`: one with an id
    /// already stored replaces it; one without gets the next number, as
    /// its id and in its default reason (`Signal 3 received`).
    async fn record_wait_signal(
        &self,
        stack_id: Uuid,
        handle_id: &str,
        signal: &SignalInput,
    ) -> Result<WaitSignal>;
    /// The handle's signals, in the order they arrived.
    async fn list_wait_signals(&self, stack_id: Uuid, handle_id: &str) -> Result<Vec<WaitSignal>>;
    async fn clear_wait_signals(&self, stack_id: Uuid, handle_id: &str) -> Result<()>;
    /// Marks `resource` of `stack_id` as paused at breakpoint `hook`.
    async fn set_breakpoint(&self, stack_id: Uuid, resource: &str, hook: &str) -> Result<()>;
    /// Clears a breakpoint; false when it was not set.
    async fn clear_breakpoint(&self, stack_id: Uuid, resource: &str, hook: &str) -> Result<bool>;
    async fn breakpoint_is_set(&self, stack_id: Uuid, resource: &str, hook: &str) -> Result<bool>;
}

pub struct SqlWaitSignalStore {
    connection: DatabaseConnection,
    reader: ember_runtime::database::Reader,
}

impl SqlWaitSignalStore {
    pub fn new(
        connection: DatabaseConnection,
        reader: impl Into<ember_runtime::database::Reader>,
    ) -> Self {
        SqlWaitSignalStore {
            connection,
            reader: reader.into(),
        }
    }
}

/// How often a signal without an id is numbered again after losing a race.
const NUMBERING_ATTEMPTS: usize = 20;

#[async_trait]
impl WaitSignalStore for SqlWaitSignalStore {
    async fn record_wait_signal(
        &self,
        stack_id: Uuid,
        handle_id: &str,
        signal: &SignalInput,
    ) -> Result<WaitSignal> {
        let backend = self.connection.get_database_backend();
        let data = signal.data.to_string();
        // A given id replaces the signal stored under it; a number another
        // signal took meanwhile is taken again. One statement: numbering
        // and storing cannot be split by another writer (and SQLite takes
        // its write lock before reading, so replicas sharing a file wait
        // for each other instead of failing).
        let on_conflict = if signal.unique_id.is_some() {
            "DO UPDATE SET status = excluded.status, reason = excluded.reason, data = excluded.data, received_at = excluded.received_at"
        } else {
            "DO NOTHING"
        };
        let sql = format!(
            "INSERT INTO wait_condition_signals (stack_id, handle_id, unique_id, status, reason, data, received_at) \
             SELECT $1, $2, COALESCE($3, CAST(COUNT(*) + 1 AS TEXT)), $4, \
                    COALESCE($5, 'Signal ' || CAST(COUNT(*) + 1 AS TEXT) || ' received'), $6, $7 \
             FROM wait_condition_signals WHERE stack_id = $1 AND handle_id = $2 \
             ON CONFLICT (stack_id, handle_id, unique_id) {on_conflict} \
             RETURNING unique_id, reason"
        );
        for _ in 0..NUMBERING_ATTEMPTS {
            let stored = self
                .connection
                .query_one_raw(statement(
                    backend,
                    &sql,
                    vec![
                        stack_id.into(),
                        handle_id.into(),
                        signal.unique_id.clone().into(),
                        signal.status.as_str().into(),
                        signal.reason.clone().into(),
                        data.clone().into(),
                        chrono::Utc::now().into(),
                    ],
                ))
                .await?;
            if let Some(row) = stored {
                return Ok(WaitSignal {
                    unique_id: row.try_get("", "unique_id")?,
                    status: signal.status,
                    reason: row.try_get("", "reason")?,
                    data: signal.data.clone(),
                });
            }
        }
        Err(Error::Conflict(format!(
            "handle {handle_id}: too many signals at once, send it again"
        )))
    }

    async fn list_wait_signals(&self, stack_id: Uuid, handle_id: &str) -> Result<Vec<WaitSignal>> {
        let backend = self.reader.get_database_backend();
        let rows = self
            .reader
            .query_all_raw(statement(
                backend,
                "SELECT unique_id, status, reason, data FROM wait_condition_signals \
                 WHERE stack_id = $1 AND handle_id = $2 ORDER BY received_at, unique_id",
                vec![stack_id.into(), handle_id.into()],
            ))
            .await?;
        rows.into_iter()
            .map(|row| {
                let status: String = row.try_get("", "status")?;
                let data: String = row.try_get("", "data")?;
                Ok(WaitSignal {
                    unique_id: row.try_get("", "unique_id")?,
                    status: SignalStatus::parse(&status).ok_or_else(|| {
                        Error::Database(format!("stored signal status {status:?} is unknown"))
                    })?,
                    reason: row.try_get("", "reason")?,
                    data: serde_json::from_str(&data).unwrap_or(serde_json::Value::Null),
                })
            })
            .collect()
    }

    async fn clear_wait_signals(&self, stack_id: Uuid, handle_id: &str) -> Result<()> {
        let backend = self.connection.get_database_backend();
        self.connection
            .execute_raw(statement(
                backend,
                "DELETE FROM wait_condition_signals WHERE stack_id = $1 AND handle_id = $2",
                vec![stack_id.into(), handle_id.into()],
            ))
            .await?;
        Ok(())
    }

    async fn set_breakpoint(&self, stack_id: Uuid, resource: &str, hook: &str) -> Result<()> {
        let backend = self.connection.get_database_backend();
        self.connection
            .execute_raw(statement(
                backend,
                "INSERT INTO breakpoint_hooks (stack_id, resource_name, hook, set_at) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (stack_id, resource_name, hook) DO NOTHING",
                vec![
                    stack_id.into(),
                    resource.into(),
                    hook.into(),
                    chrono::Utc::now().into(),
                ],
            ))
            .await?;
        Ok(())
    }

    async fn clear_breakpoint(&self, stack_id: Uuid, resource: &str, hook: &str) -> Result<bool> {
        let backend = self.connection.get_database_backend();
        let cleared = self
            .connection
            .execute_raw(statement(
                backend,
                "DELETE FROM breakpoint_hooks WHERE stack_id = $1 AND resource_name = $2 AND hook = $3",
                vec![stack_id.into(), resource.into(), hook.into()],
            ))
            .await?
            .rows_affected();
        Ok(cleared > 0)
    }

    async fn breakpoint_is_set(&self, stack_id: Uuid, resource: &str, hook: &str) -> Result<bool> {
        // Read on the writer: a clear committed a moment ago must be seen.
        let backend = self.connection.get_database_backend();
        let row = self
            .connection
            .query_one_raw(statement(
                backend,
                "SELECT 1 AS present FROM breakpoint_hooks WHERE stack_id = $1 AND resource_name = $2 AND hook = $3",
                vec![stack_id.into(), resource.into(), hook.into()],
            ))
            .await?;
        Ok(row.is_some())
    }
}
