//! Persistence of the audit trail (see `domain::audit`): appended, read
//! newest first with the reader's filters in SQL, never updated. Old
//! records go by retention only (`store::retention`).

use async_trait::async_trait;
use sea_orm::{ConnectionTrait, DatabaseConnection};

use crate::domain::audit::{AuditOutcome, AuditQuery, AuditRecord, AuditTarget};
use crate::error::{Error, Result};
use ember_runtime::database::statement;

#[async_trait]
pub trait AuditStore: Send + Sync + 'static {
    /// Appends `record`.
    async fn append_audit(&self, record: &AuditRecord) -> Result<()>;
    /// The records `query` selects, newest first.
    async fn list_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>>;
}

pub struct SqlAuditStore {
    connection: DatabaseConnection,
    reader: ember_runtime::database::Reader,
}

impl SqlAuditStore {
    pub fn new(
        connection: DatabaseConnection,
        reader: impl Into<ember_runtime::database::Reader>,
    ) -> Self {
        SqlAuditStore {
            connection,
            reader: reader.into(),
        }
    }
}

const COLUMNS: &str = "id, at, project_id, user_id, target, target_id, target_name, operation, \
                       outcome, reason, blocker, request_id";

fn record_from(row: &sea_orm::QueryResult) -> Result<AuditRecord> {
    let text = |column: &str| -> Result<String> { Ok(row.try_get::<String>("", column)?) };
    Ok(AuditRecord {
        id: row.try_get("", "id")?,
        at: row.try_get("", "at")?,
        project_id: text("project_id")?,
        user_id: text("user_id")?,
        target: AuditTarget::parse(&text("target")?)
            .map_err(|_| Error::Database("an audit record of an unknown target type".into()))?,
        target_id: text("target_id")?,
        target_name: text("target_name")?,
        operation: text("operation")?,
        outcome: AuditOutcome::parse(&text("outcome")?)
            .map_err(|_| Error::Database("an audit record of an unknown outcome".into()))?,
        reason: text("reason")?,
        blocker: text("blocker")?,
        request_id: text("request_id")?,
    })
}

/// `text` cut to `most` characters (what its column holds).
fn cut(text: &str, most: usize) -> String {
    text.chars().take(most).collect()
}

/// Appends `records` through `connection` — a transaction of another
/// store's, when a record must be written with what it records (an
/// expiry with the lift).
pub(crate) async fn insert_audit_records(
    connection: &impl ConnectionTrait,
    records: &[AuditRecord],
) -> Result<()> {
    // 12 values a row, well under both backends' limits per statement.
    for chunk in records.chunks(500) {
        let mut values: Vec<sea_orm::Value> = Vec::with_capacity(chunk.len() * 12);
        let mut rows = Vec::with_capacity(chunk.len());
        for record in chunk {
            let first = values.len() + 1;
            rows.push(format!(
                "({})",
                (first..first + 12)
                    .map(|index| format!("${index}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            values.extend([
                record.id.into(),
                record.at.into(),
                cut(&record.project_id, 64).into(),
                cut(&record.user_id, 64).into(),
                record.target.as_str().into(),
                cut(&record.target_id, 64).into(),
                cut(&record.target_name, 255).into(),
                cut(&record.operation, 64).into(),
                record.outcome.as_str().into(),
                record.reason.clone().into(),
                record.blocker.clone().into(),
                cut(&record.request_id, 128).into(),
            ]);
        }
        connection
            .execute_raw(statement(
                connection.get_database_backend(),
                &format!(
                    "INSERT INTO audit_records ({COLUMNS}) VALUES {}",
                    rows.join(", ")
                ),
                values,
            ))
            .await?;
    }
    Ok(())
}

#[async_trait]
impl AuditStore for SqlAuditStore {
    async fn append_audit(&self, record: &AuditRecord) -> Result<()> {
        insert_audit_records(&self.connection, std::slice::from_ref(record)).await
    }

    async fn list_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        // Each condition names its value `$_`, numbered as it is bound.
        let mut conditions = Vec::new();
        let mut values: Vec<sea_orm::Value> = Vec::new();
        let mut bind = |condition: &str, value: sea_orm::Value| {
            values.push(value);
            conditions.push(condition.replace("$_", &format!("${}", values.len())));
        };
        if let Some(project_id) = &query.project_id {
            bind("project_id = $_", project_id.clone().into());
        }
        if let Some(target) = query.target {
            bind("target = $_", target.as_str().into());
        }
        if let Some(target) = &query.target_id {
            // A name or an id: records keep both.
            bind(
                "(target_id = $_ OR target_name = $_)",
                target.clone().into(),
            );
        }
        if let Some(outcome) = query.outcome {
            bind("outcome = $_", outcome.as_str().into());
        }
        if let Some(since) = query.since {
            bind("at >= $_", since.into());
        }
        if let Some(until) = query.until {
            bind("at <= $_", until.into());
        }
        if let Some(marker) = query.marker {
            bind("id < $_", marker.into());
        }
        let filter = if conditions.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conditions.join(" AND "))
        };
        values.push(i64::try_from(query.limit).unwrap_or(i64::MAX).into());
        let sql = format!(
            "SELECT {COLUMNS} FROM audit_records {filter} ORDER BY id DESC LIMIT ${}",
            values.len()
        );
        let backend = self.reader.get_database_backend();
        let rows = self
            .reader
            .query_all_raw(statement(backend, &sql, values))
            .await?;
        rows.iter().map(record_from).collect()
    }
}
