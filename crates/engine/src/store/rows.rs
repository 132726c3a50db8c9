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

use std::sync::LazyLock;

use sea_orm::{ConnectionTrait, DatabaseBackend, Statement, Value};

use crate::domain::{Event, Resource};
use crate::error::Result;

/// Rows per statement: SQLite allows 32766 bound values, PostgreSQL 65535
/// (a resource row binds 14).
const ROWS_PER_STATEMENT: usize = 500;

const EVENT_COLUMNS: &[&str] = &[
    "id",
    "stack_id",
    "resource_name",
    "physical_resource_id",
    "resource_type",
    "action",
    "status",
    "reason",
    "created_at",
];

const RESOURCE_COLUMNS: &[&str] = &[
    "id",
    "stack_id",
    "name",
    "type_name",
    "physical_id",
    "action",
    "status",
    "status_reason",
    "properties",
    "attributes",
    "metadata",
    "data",
    "created_at",
    "updated_at",
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
    const COLUMNS: &'static [&'static str];
    /// Appends the row's values, in [`Self::COLUMNS`]' order.
    fn bind(&self, values: &mut Vec<Value>);
}

impl TableRow for Event {
    const TABLE: &'static str = "events";
    const COLUMNS: &'static [&'static str] = EVENT_COLUMNS;

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
}

impl TableRow for Resource {
    const TABLE: &'static str = "resources";
    const COLUMNS: &'static [&'static str] = RESOURCE_COLUMNS;

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

/// The text of a `rows`-row insert: `?` placeholders for SQLite and MySQL,
/// numbered ones for PostgreSQL.
fn insert_text(
    backend: DatabaseBackend,
    table: &str,
    columns: &[&str],
    rows: usize,
    tail: &str,
) -> String {
    use std::fmt::Write as _;
    let mut text = String::with_capacity(64 + columns.len() * (16 + rows * 5) + tail.len());
    let _ = write!(text, "INSERT INTO \"{table}\" (");
    for (index, column) in columns.iter().enumerate() {
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
            insert_text(DatabaseBackend::Postgres, "t", &["a", "b"], 2, ""),
            r#"INSERT INTO "t" ("a", "b") VALUES ($1, $2), ($3, $4)"#
        );
        assert_eq!(
            insert_text(DatabaseBackend::Sqlite, "t", &["a", "b"], 2, " ON CONFLICT"),
            r#"INSERT INTO "t" ("a", "b") VALUES (?, ?), (?, ?) ON CONFLICT"#
        );
    }
}
