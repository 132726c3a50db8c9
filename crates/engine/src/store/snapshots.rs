//! Stack snapshots in SQL: one row each, the data as JSON text. Deleting a
//! stack deletes its snapshots in the same transaction (`sql.rs`).

use sea_orm::{ConnectionTrait, QueryResult};
use uuid::Uuid;

use crate::domain::StackSnapshot;
use crate::error::{Error, Result};
use ember_runtime::database::statement;

const COLUMNS: &str = "id, stack_id, project_id, name, status, status_reason, data, created_at";

fn snapshot_of(row: &QueryResult) -> Result<StackSnapshot> {
    let data: String = row.try_get("", "data")?;
    Ok(StackSnapshot {
        id: row.try_get("", "id")?,
        stack_id: row.try_get("", "stack_id")?,
        project_id: row.try_get("", "project_id")?,
        name: row.try_get("", "name")?,
        status: row.try_get("", "status")?,
        status_reason: row.try_get("", "status_reason")?,
        data: serde_json::from_str(&data)
            .map_err(|error| Error::Database(format!("stored snapshot data: {error}")))?,
        created_at: row.try_get("", "created_at")?,
    })
}

pub async fn insert(connection: &impl ConnectionTrait, snapshot: &StackSnapshot) -> Result<()> {
    let backend = connection.get_database_backend();
    connection
        .execute_raw(statement(
            backend,
            &format!(
                "INSERT INTO stack_snapshots ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
            ),
            vec![
                snapshot.id.into(),
                snapshot.stack_id.into(),
                snapshot.project_id.clone().into(),
                snapshot.name.clone().into(),
                snapshot.status.clone().into(),
                snapshot.status_reason.clone().into(),
                snapshot.data.to_string().into(),
                snapshot.created_at.into(),
            ],
        ))
        .await?;
    Ok(())
}

pub async fn list(connection: &impl ConnectionTrait, stack_id: Uuid) -> Result<Vec<StackSnapshot>> {
    let backend = connection.get_database_backend();
    let rows = connection
        .query_all_raw(statement(
            backend,
            &format!(
                "SELECT {COLUMNS} FROM stack_snapshots WHERE stack_id = $1 ORDER BY created_at, id"
            ),
            vec![stack_id.into()],
        ))
        .await?;
    rows.iter().map(snapshot_of).collect()
}

/// How many snapshots `stack_id` has (their data is not read).
pub async fn count(connection: &impl ConnectionTrait, stack_id: Uuid) -> Result<u64> {
    let backend = connection.get_database_backend();
    let row = connection
        .query_one_raw(statement(
            backend,
            "SELECT COUNT(*) AS n FROM stack_snapshots WHERE stack_id = $1",
            vec![stack_id.into()],
        ))
        .await?;
    let count: i64 = match row {
        Some(row) => row.try_get("", "n")?,
        None => 0,
    };
    Ok(u64::try_from(count).unwrap_or_default())
}

pub async fn get(
    connection: &impl ConnectionTrait,
    stack_id: Uuid,
    snapshot_id: Uuid,
) -> Result<Option<StackSnapshot>> {
    let backend = connection.get_database_backend();
    let row = connection
        .query_one_raw(statement(
            backend,
            &format!("SELECT {COLUMNS} FROM stack_snapshots WHERE stack_id = $1 AND id = $2"),
            vec![stack_id.into(), snapshot_id.into()],
        ))
        .await?;
    row.as_ref().map(snapshot_of).transpose()
}

/// False when there was no such snapshot.
pub async fn delete(
    connection: &impl ConnectionTrait,
    stack_id: Uuid,
    snapshot_id: Uuid,
) -> Result<bool> {
    let backend = connection.get_database_backend();
    let deleted = connection
        .execute_raw(statement(
            backend,
            "DELETE FROM stack_snapshots WHERE stack_id = $1 AND id = $2",
            vec![stack_id.into(), snapshot_id.into()],
        ))
        .await?
        .rows_affected();
    Ok(deleted > 0)
}

/// Deletes the snapshots of every stack of `stack_ids`, in one statement.
pub async fn delete_all_of(connection: &impl ConnectionTrait, stack_ids: &[Uuid]) -> Result<()> {
    let backend = connection.get_database_backend();
    for chunk in stack_ids.chunks(500) {
        let placeholders: Vec<String> = (1..=chunk.len()).map(|at| format!("${at}")).collect();
        connection
            .execute_raw(statement(
                backend,
                &format!(
                    "DELETE FROM stack_snapshots WHERE stack_id IN ({})",
                    placeholders.join(", ")
                ),
                chunk.iter().map(|&id| id.into()).collect(),
            ))
            .await?;
    }
    Ok(())
}

pub async fn delete_all(connection: &impl ConnectionTrait, stack_id: Uuid) -> Result<()> {
    let backend = connection.get_database_backend();
    connection
        .execute_raw(statement(
            backend,
            "DELETE FROM stack_snapshots WHERE stack_id = $1",
            vec![stack_id.into()],
        ))
        .await?;
    Ok(())
}
