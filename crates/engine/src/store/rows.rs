//! Writing events and resource rows by the hundred, straight from the
//! domain values.
//!
//! The writer's batches insert every event and upsert every resource row of
//! every stack moving at once. Through sea-orm each row went from the domain
//! value to an `ActiveModel` (every column cloned), from that to an
//! expression per column, through the query builder, and only then to the
//! statement's bound values: the profile of eight clients creating and
//! deleting stacks showed that path at about a third of the writer thread's
//! time, the thread every commit waits on. Here the statement's text is
//! written once per call and each column goes straight to the bound value
//! sea-orm would have made of it (same types, so the same encoding on
//! both backends: a uuid as SQLite's 16-byte blob, a timestamp as its text).
//!
//! On PostgreSQL the rows go as one JSON parameter that
//! `json_to_recordset` turns back into typed rows: one statement text per
//! table whatever the batch's size. With a `VALUES` list each row count
//! was a statement of its own, parsed and then planned at each bind until
//! the connection had run it five times — batches vary, so most binds
//! planned (the statement log of 8 clients creating and deleting showed
//! the resource upsert's bind as the largest cost after the stack lookup).

use std::sync::LazyLock;

use sea_orm::{ConnectionTrait, DatabaseBackend, Statement, Value};

use crate::domain::{Event, Resource};
use crate::error::Result;

/// Rows per statement: SQLite allows 32766 bound values, PostgreSQL 65535
/// (a resource row binds 14).
const ROWS_PER_STATEMENT: usize = 500;

/// Each column with its PostgreSQL type (as `json_to_recordset` reads it).
const EVENT_COLUMNS: &[(&str, &str)] = &[
    ("id", "uuid"),
    ("stack_id", "uuid"),
    ("resource_name", "varchar"),
    ("physical_resource_id", "varchar"),
    ("resource_type", "varchar"),
    ("action", "varchar"),
    ("status", "varchar"),
    ("reason", "text"),
    ("created_at", "timestamptz"),
];

const RESOURCE_COLUMNS: &[(&str, &str)] = &[
    ("id", "uuid"),
    ("stack_id", "uuid"),
    ("name", "varchar"),
    ("type_name", "varchar"),
    ("physical_id", "varchar"),
    ("action", "varchar"),
    ("status", "varchar"),
    ("status_reason", "text"),
    ("properties", "json"),
    ("attributes", "json"),
    ("metadata", "json"),
    ("data", "json"),
    ("created_at", "timestamptz"),
    ("updated_at", "timestamptz"),
];

/// What an upsert of a resource row changes when the row exists: every
/// column but its id, stack, name, type and creation time.
const RESOURCE_CHANGES: &[&str] = &[
    "physical_id",
    "action",
    "status",
    "status_reason",
    "properties",
    "attributes",
    "metadata",
    "data",
    "updated_at",
];

/// A domain value written as one row of its table.
trait TableRow {
    const TABLE: &'static str;
    /// The columns, with their PostgreSQL types.
    const COLUMNS: &'static [(&'static str, &'static str)];
    /// Appends the row's values, in [`Self::COLUMNS`]' order.
    fn bind(&self, values: &mut Vec<Value>);
    /// The row as a JSON object keyed by column, as `json_to_recordset`
    /// reads it.
    fn record(&self) -> serde_json::Value;
}

/// A timestamp as PostgreSQL reads it, to the microsecond it stores
/// (truncated, as sqlx's binary encoding truncates).
fn timestamp(at: &chrono::DateTime<chrono::Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

impl TableRow for Event {
    const TABLE: &'static str = "events";
    const COLUMNS: &'static [(&'static str, &'static str)] = EVENT_COLUMNS;

    fn bind(&self, values: &mut Vec<Value>) {
        values.extend([
            Value::from(self.id),
            Value::from(self.stack_id),
            Value::from(self.resource_name.as_str()),
            Value::from(self.physical_resource_id.as_str()),
            Value::from(self.resource_type.as_str()),
            Value::from(self.action.as_str()),
            Value::from(self.status.as_str()),
            Value::from(self.reason.as_str()),
            Value::from(self.created_at),
        ]);
    }

    fn record(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "stack_id": self.stack_id,
            "resource_name": self.resource_name,
            "physical_resource_id": self.physical_resource_id,
            "resource_type": self.resource_type,
            "action": self.action.as_str(),
            "status": self.status.as_str(),
            "reason": self.reason,
            "created_at": timestamp(&self.created_at),
        })
    }
}

impl TableRow for Resource {
    const TABLE: &'static str = "resources";
    const COLUMNS: &'static [(&'static str, &'static str)] = RESOURCE_COLUMNS;

    fn bind(&self, values: &mut Vec<Value>) {
        values.extend([
            Value::from(self.id),
            Value::from(self.stack_id),
            Value::from(self.name.as_str()),
            Value::from(self.type_name.as_str()),
            Value::from(self.physical_id.clone()),
            Value::from(self.action.as_str()),
            Value::from(self.status.as_str()),
            Value::from(self.status_reason.as_str()),
            Value::from(self.properties.clone()),
            Value::from(self.attributes.clone()),
            Value::from(self.metadata.clone()),
            Value::from(self.data.clone()),
            Value::from(self.created_at),
            Value::from(self.updated_at),
        ]);
    }

    fn record(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "stack_id": self.stack_id,
            "name": self.name,
            "type_name": self.type_name,
            "physical_id": self.physical_id,
            "action": self.action.as_str(),
            "status": self.status.as_str(),
            "status_reason": self.status_reason,
            "properties": self.properties.to_string(),
            "attributes": self.attributes.to_string(),
            "metadata": self.metadata.to_string(),
            "data": self.data.to_string(),
            "created_at": timestamp(&self.created_at),
            "updated_at": timestamp(&self.updated_at),
        })
    }
}

/// Inserts `events`.
pub(super) async fn insert_events<'a>(
    connection: &impl ConnectionTrait,
    events: impl IntoIterator<Item = &'a Event>,
) -> Result<()> {
    insert(connection, events, "").await
}

/// Inserts new resource rows.
pub(super) async fn insert_resources<'a>(
    connection: &impl ConnectionTrait,
    resources: impl IntoIterator<Item = &'a Resource>,
) -> Result<()> {
    insert(connection, resources, "").await
}

/// Writes resource rows: a row that exists is changed to the one given
/// (see [`RESOURCE_CHANGES`]), one that does not is inserted.
pub(super) async fn upsert_resources<'a>(
    connection: &impl ConnectionTrait,
    resources: impl IntoIterator<Item = &'a Resource>,
) -> Result<()> {
    insert(connection, resources, &RESOURCE_UPSERT).await
}

/// The tail of a resource upsert, written once from [`RESOURCE_CHANGES`].
static RESOURCE_UPSERT: LazyLock<String> = LazyLock::new(|| {
    let changes: Vec<String> = RESOURCE_CHANGES
        .iter()
        .map(|column| format!("\"{column}\" = \"excluded\".\"{column}\""))
        .collect();
    format!(" ON CONFLICT (\"id\") DO UPDATE SET {}", changes.join(", "))
});

/// Inserts `rows`, [`ROWS_PER_STATEMENT`] to a statement, each statement
/// ending with `tail`.
async fn insert<'a, R: TableRow + 'a>(
    connection: &impl ConnectionTrait,
    rows: impl IntoIterator<Item = &'a R>,
    tail: &str,
) -> Result<()> {
    let rows: Vec<&R> = rows.into_iter().collect();
    let backend = connection.get_database_backend();
    if backend == DatabaseBackend::Postgres {
        for chunk in rows.chunks(ROWS_PER_STATEMENT) {
            let records: Vec<serde_json::Value> = chunk.iter().map(|row| row.record()).collect();
            let records = serde_json::Value::Array(records).to_string();
            let text = recordset_text(R::TABLE, R::COLUMNS, tail);
            connection
                .execute_raw(Statement::from_sql_and_values(
                    backend,
                    text,
                    [Value::from(records)],
                ))
                .await?;
        }
        return Ok(());
    }
    for chunk in rows.chunks(ROWS_PER_STATEMENT) {
        let mut values = Vec::with_capacity(chunk.len() * R::COLUMNS.len());
        for row in chunk {
            row.bind(&mut values);
        }
        let text = insert_text(backend, R::TABLE, R::COLUMNS, chunk.len(), tail);
        connection
            .execute_raw(Statement::from_sql_and_values(backend, text, values))
            .await?;
    }
    Ok(())
}

/// The text of PostgreSQL's insert of any number of rows, given as one
/// JSON array of objects (`$1`).
fn recordset_text(table: &str, columns: &[(&str, &str)], tail: &str) -> String {
    let mut names = Vec::with_capacity(columns.len());
    let mut values = Vec::with_capacity(columns.len());
    let mut typed = Vec::with_capacity(columns.len());
    for (column, kind) in columns {
        names.push(format!("\"{column}\""));
        // A JSON column comes as its text, so that a JSON `null` stays a
        // value and does not become SQL's NULL.
        let (value, read_as) = match *kind {
            "json" => (format!("\"{column}\"::json"), "text"),
            _ => (format!("\"{column}\""), *kind),
        };
        values.push(value);
        typed.push(format!("\"{column}\" {read_as}"));
    }
    format!(
        "INSERT INTO \"{table}\" ({}) SELECT {} FROM json_to_recordset($1::json) AS r({}){tail}",
        names.join(", "),
        values.join(", "),
        typed.join(", ")
    )
}

/// The text of a `rows`-row insert: `?` placeholders for SQLite and MySQL,
/// numbered ones for PostgreSQL.
fn insert_text(
    backend: DatabaseBackend,
    table: &str,
    columns: &[(&str, &str)],
    rows: usize,
    tail: &str,
) -> String {
    use std::fmt::Write as _;
    let mut text = String::with_capacity(64 + columns.len() * (16 + rows * 5) + tail.len());
    let _ = write!(text, "INSERT INTO \"{table}\" (");
    for (index, (column, _)) in columns.iter().enumerate() {
        if index > 0 {
            text.push_str(", ");
        }
        let _ = write!(text, "\"{column}\"");
    }
    text.push_str(") VALUES ");
    let mut bound = 0;
    for row in 0..rows {
        if row > 0 {
            text.push_str(", ");
        }
        text.push('(');
        for index in 0..columns.len() {
            if index > 0 {
                text.push_str(", ");
            }
            bound += 1;
            match backend {
                DatabaseBackend::Postgres => {
                    let _ = write!(text, "${bound}");
                }
                _ => text.push('?'),
            }
        }
        text.push(')');
    }
    text.push_str(tail);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_insert_numbers_its_placeholders_on_postgres_only() {
        assert_eq!(
            insert_text(
                DatabaseBackend::Postgres,
                "t",
                &[("a", "uuid"), ("b", "text")],
                2,
                ""
            ),
            r#"INSERT INTO "t" ("a", "b") VALUES ($1, $2), ($3, $4)"#
        );
        assert_eq!(
            insert_text(
                DatabaseBackend::Sqlite,
                "t",
                &[("a", "uuid"), ("b", "text")],
                2,
                " ON CONFLICT"
            ),
            r#"INSERT INTO "t" ("a", "b") VALUES (?, ?), (?, ?) ON CONFLICT"#
        );
    }

    #[test]
    fn postgres_reads_the_rows_from_one_json_parameter() {
        assert_eq!(
            recordset_text("t", &[("a", "uuid"), ("b", "json")], " ON CONFLICT"),
            r#"INSERT INTO "t" ("a", "b") SELECT "a", "b"::json FROM json_to_recordset($1::json) AS r("a" uuid, "b" text) ON CONFLICT"#
        );
    }

    #[test]
    fn a_timestamp_keeps_the_microseconds_postgresql_stores() {
        let at = chrono::DateTime::parse_from_rfc3339("2026-11-30T16:40:01.123456789Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(timestamp(&at), "2026-11-30T16:40:01.123456Z");
    }
}
