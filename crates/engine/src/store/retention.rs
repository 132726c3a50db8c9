//! What retention removes, a bounded batch at a time (see
//! `crate::retention`): the records of stacks deleted long ago (with every
//! row of theirs), cluster actions that ended and cluster events long ago,
//! instances deleted long ago with their events, and old audit records.
//! Each batch is one short transaction; nothing live is ever touched.

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, TransactionTrait};
use uuid::Uuid;

use ember_runtime::database::statement;

use crate::error::{Error, Result};

/// The tables holding rows of one stack, by its `stack_id`.
const STACK_TABLES: &[&str] = &[
    "resources",
    "events",
    "stack_leases",
    "wait_condition_signals",
    "breakpoint_hooks",
    "stack_snapshots",
    "stack_update_origins",
];

/// Cluster action statuses that are final.
const ENDED_ACTIONS: &str = "('SUCCEEDED', 'FAILED', 'CANCELLED')";

/// Rows of one table purged with the rows of others that hang on them.
struct Family {
    table: &'static str,
    key: &'static str,
    /// What the rows must still be when they are deleted.
    still: &'static str,
    children: &'static [&'static str],
    child_key: &'static str,
}

#[derive(Clone, Debug)]
pub struct RetentionStore {
    connection: DatabaseConnection,
}

/// `$first, $first+1, …` for `count` values.
fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|index| format!("${index}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl RetentionStore {
    pub fn new(connection: DatabaseConnection) -> RetentionStore {
        RetentionStore { connection }
    }

    /// Ids of the first `batch` rows `sql` selects (one `id`-like column,
    /// `$1` the cutoff, `$2` the batch).
    async fn ids(&self, sql: &str, cutoff: DateTime<Utc>, batch: u64) -> Result<Vec<Uuid>> {
        let backend = self.connection.get_database_backend();
        let rows = self
            .connection
            .query_all_raw(statement(
                backend,
                sql,
                vec![
                    cutoff.into(),
                    i64::try_from(batch).unwrap_or(i64::MAX).into(),
                ],
            ))
            .await?;
        rows.iter()
            .map(|row| row.try_get_by_index::<Uuid>(0).map_err(Error::from))
            .collect()
    }

    /// Removes up to `batch` stacks deleted before `cutoff`, with their
    /// resources, events, leases, signals, hooks, snapshots and update
    /// origins; returns how many stacks went.
    pub async fn purge_deleted_stacks(&self, cutoff: DateTime<Utc>, batch: u64) -> Result<u64> {
        let ids = self
            .ids(
                "SELECT id FROM stacks WHERE deleted_at IS NOT NULL AND deleted_at < $1 \
                 ORDER BY deleted_at LIMIT $2",
                cutoff,
                batch,
            )
            .await?;
        let stacks = Family {
            table: "stacks",
            key: "id",
            still: "deleted_at IS NOT NULL",
            children: STACK_TABLES,
            child_key: "stack_id",
        };
        self.delete_family(&stacks, &ids).await
    }

    /// Up to `batch` stacks that have more than `keep` events.
    pub async fn stacks_with_events_over(&self, keep: u64, batch: u64) -> Result<Vec<Uuid>> {
        let backend = self.connection.get_database_backend();
        let rows = self
            .connection
            .query_all_raw(statement(
                backend,
                "SELECT stack_id FROM events GROUP BY stack_id HAVING COUNT(*) > $1 LIMIT $2",
                vec![
                    i64::try_from(keep).unwrap_or(i64::MAX).into(),
                    i64::try_from(batch).unwrap_or(i64::MAX).into(),
                ],
            ))
            .await?;
        rows.iter()
            .map(|row| row.try_get_by_index::<Uuid>(0).map_err(Error::from))
            .collect()
    }

    /// Deletes the events of `stack_id` but its newest `keep` (event ids
    /// are time-ordered); returns how many went.
    pub async fn trim_events(&self, stack_id: Uuid, keep: u64) -> Result<u64> {
        let backend = self.connection.get_database_backend();
        Ok(self
            .connection
            .execute_raw(statement(
                backend,
                "DELETE FROM events WHERE stack_id = $1 AND id < \
                 (SELECT id FROM events WHERE stack_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)",
                vec![
                    stack_id.into(),
                    i64::try_from(keep.saturating_sub(1))
                        .unwrap_or(i64::MAX)
                        .into(),
                ],
            ))
            .await?
            .rows_affected())
    }

    /// Removes up to `batch` cluster actions that ended before `cutoff`.
    pub async fn purge_ended_actions(&self, cutoff: DateTime<Utc>, batch: u64) -> Result<u64> {
        self.delete_selected(
            "cluster_actions",
            &format!(
                "SELECT id FROM cluster_actions WHERE status IN {ENDED_ACTIONS} AND updated_at < $1 \
                 ORDER BY updated_at LIMIT $2"
            ),
            cutoff,
            batch,
        )
        .await
    }

    /// Removes up to `batch` cluster events older than `cutoff`.
    pub async fn purge_cluster_events(&self, cutoff: DateTime<Utc>, batch: u64) -> Result<u64> {
        self.delete_selected(
            "cluster_events",
            "SELECT id FROM cluster_events WHERE generated_at < $1 ORDER BY generated_at LIMIT $2",
            cutoff,
            batch,
        )
        .await
    }

    /// Removes up to `batch` audit records written before `cutoff`.
    pub async fn purge_audit_records(&self, cutoff: DateTime<Utc>, batch: u64) -> Result<u64> {
        self.delete_selected(
            "audit_records",
            "SELECT id FROM audit_records WHERE at < $1 ORDER BY at LIMIT $2",
            cutoff,
            batch,
        )
        .await
    }

    /// Removes up to `batch` instances deleted before `cutoff`, with their
    /// events.
    pub async fn purge_deleted_instances(&self, cutoff: DateTime<Utc>, batch: u64) -> Result<u64> {
        let ids = self
            .ids(
                "SELECT uuid FROM instances WHERE status = 'DELETED' AND updated_at < $1 \
                 ORDER BY updated_at LIMIT $2",
                cutoff,
                batch,
            )
            .await?;
        let instances = Family {
            table: "instances",
            key: "uuid",
            still: "status = 'DELETED'",
            children: &["instance_events"],
            child_key: "instance_uuid",
        };
        self.delete_family(&instances, &ids).await
    }

    /// Deletes the rows of `family` among `ids` (those still matching its
    /// condition), their children's first, in one transaction; returns how
    /// many went.
    async fn delete_family(&self, family: &Family, ids: &[Uuid]) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let values: Vec<sea_orm::Value> = ids.iter().map(|id| (*id).into()).collect();
        let list = placeholders(1, ids.len());
        let transaction = self.connection.begin().await?;
        let backend = transaction.get_database_backend();
        for child in family.children {
            transaction
                .execute_raw(statement(
                    backend,
                    &format!("DELETE FROM {child} WHERE {} IN ({list})", family.child_key),
                    values.clone(),
                ))
                .await?;
        }
        let removed = transaction
            .execute_raw(statement(
                backend,
                &format!(
                    "DELETE FROM {} WHERE {} IN ({list}) AND {}",
                    family.table, family.key, family.still
                ),
                values,
            ))
            .await?
            .rows_affected();
        transaction.commit().await?;
        Ok(removed)
    }

    /// Deletes from `table` the rows (by `id`) `select` picks.
    async fn delete_selected(
        &self,
        table: &str,
        select: &str,
        cutoff: DateTime<Utc>,
        batch: u64,
    ) -> Result<u64> {
        let ids = self.ids(select, cutoff, batch).await?;
        if ids.is_empty() {
            return Ok(0);
        }
        let backend = self.connection.get_database_backend();
        let values: Vec<sea_orm::Value> = ids.iter().map(|id| (*id).into()).collect();
        Ok(self
            .connection
            .execute_raw(statement(
                backend,
                &format!(
                    "DELETE FROM {table} WHERE id IN ({})",
                    placeholders(1, ids.len())
                ),
                values,
            ))
            .await?
            .rows_affected())
    }
}
