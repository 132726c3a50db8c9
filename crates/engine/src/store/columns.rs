//! Reading a row's columns by position, straight through sqlx, for the
//! rows lists read by the hundred (stacks, clusters).
//!
//! sea-orm reads a nullable column as its value type and turns the NULL
//! error into `None` — after formatting that error's message. A stack row
//! has eight nullable columns, mostly NULL: a list of 200 stacks spent a
//! fifth of the engine's time formatting messages it then dropped, and as
//! much again in sqlx's per-value type checks. Here a NULL is `None` with
//! no message, and values are decoded without sqlx's compatibility check:
//! the schema is Ember's own, each column holds the type it is declared
//! with (a text where a uuid or a timestamp is expected still fails in its
//! decoder).

use sea_orm::sqlx::{self, Postgres, Row, Sqlite};
use sea_orm::{DbErr, QueryResult, TryGetError, TryGetable};

/// A value type sqlx decodes on both backends (what a column may hold).
pub(crate) trait Decoded:
    TryGetable
    + for<'r> sqlx::Decode<'r, Sqlite>
    + sqlx::Type<Sqlite>
    + for<'r> sqlx::Decode<'r, Postgres>
    + sqlx::Type<Postgres>
{
}

impl<T> Decoded for T where
    T: TryGetable
        + for<'r> sqlx::Decode<'r, Sqlite>
        + sqlx::Type<Sqlite>
        + for<'r> sqlx::Decode<'r, Postgres>
        + sqlx::Type<Postgres>
{
}

/// What [`column`] reads: a value type, or an `Option` of one for a
/// nullable column.
pub(crate) trait ColumnValue: Sized {
    fn read(row: &QueryResult, index: usize) -> Result<Self, TryGetError>;
}

impl<T: Decoded> ColumnValue for Option<T> {
    fn read(row: &QueryResult, index: usize) -> Result<Self, TryGetError> {
        let decoded = if let Some(row) = row.try_as_sqlite_row() {
            row.try_get_unchecked::<Option<T>, usize>(index)
        } else if let Some(row) = row.try_as_pg_row() {
            row.try_get_unchecked::<Option<T>, usize>(index)
        } else {
            return row.try_get_by_index_nullable(index);
        };
        decoded.map_err(|error| TryGetError::DbErr(DbErr::Type(format!("column {index}: {error}"))))
    }
}

macro_rules! not_null {
    ($($value:ty),* $(,)?) => {$(
        impl ColumnValue for $value {
            fn read(row: &QueryResult, index: usize) -> Result<Self, TryGetError> {
                Option::<$value>::read(row, index)?
                    .ok_or_else(|| TryGetError::Null(format!("column {index}")))
            }
        }
    )*};
}

not_null!(
    String,
    bool,
    i32,
    i64,
    uuid::Uuid,
    chrono::DateTime<chrono::Utc>,
    serde_json::Value,
);

/// Column `index` of `row`.
pub(crate) fn column<T: ColumnValue>(row: &QueryResult, index: usize) -> Result<T, TryGetError> {
    T::read(row, index)
}

#[cfg(test)]
mod tests {
    use sea_orm::{ConnectionTrait, Database, Statement};

    use super::column;

    #[tokio::test]
    async fn nulls_are_none_and_values_are_decoded() {
        let db = Database::connect("sqlite::memory:").await.expect("sqlite");
        let row = db
            .query_one_raw(Statement::from_string(
                db.get_database_backend(),
                "SELECT 'text', NULL, 42, 1, '2026-11-26T18:00:00Z', 'not a time'",
            ))
            .await
            .expect("query")
            .expect("a row");
        assert_eq!(column::<String>(&row, 0).expect("text"), "text");
        assert_eq!(column::<Option<String>>(&row, 1).expect("null"), None);
        assert_eq!(column::<Option<i32>>(&row, 2).expect("int"), Some(42));
        assert!(column::<bool>(&row, 3).expect("bool"));
        let time: chrono::DateTime<chrono::Utc> = column(&row, 4).expect("time");
        assert_eq!(time.to_rfc3339(), "2026-11-26T18:00:00+00:00");
        assert!(column::<chrono::DateTime<chrono::Utc>>(&row, 5).is_err());
        assert!(column::<String>(&row, 1).is_err(), "NULL in a value column");
        assert!(column::<Option<i32>>(&row, 9).is_err(), "no such column");
    }
}
