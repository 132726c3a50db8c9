//! Reading a row's columns by position, for the rows read most (stacks,
//! their resources, clusters), from whichever connection produced the row: a
//! sea-orm [`QueryResult`] (PostgreSQL, or a SQLite database read through
//! sqlx) or a row [`Reader::rows`](crate::reader::Reader::rows) stepped on
//! a SQLite reader of its own.
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
//!
//! On SQLite, values are read as sqlx writes them (sqlx writes every row
//! Ember stores): a uuid as its 16 bytes, a timestamp as RFC 3339 text, JSON
//! as its text, a boolean as 0 or 1.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use rusqlite::types::ValueRef;
use sea_orm::prelude::Uuid;
use sea_orm::sqlx::{self, Postgres, Row, Sqlite};
use sea_orm::{DbErr, QueryResult, TryGetError, TryGetable};

/// One row's columns.
pub enum Columns<'a> {
    /// A row sea-orm read.
    Queried(&'a QueryResult),
    /// A row being stepped on a SQLite reader's connection.
    Stepped(&'a rusqlite::Row<'a>),
}

impl<'a> From<&'a QueryResult> for Columns<'a> {
    fn from(row: &'a QueryResult) -> Columns<'a> {
        Columns::Queried(row)
    }
}

impl Columns<'_> {
    /// Column `index`, as `T` (an `Option` for a nullable column).
    pub fn get<T: ColumnValue>(&self, index: usize) -> Result<T, TryGetError> {
        T::read(self, index)
    }

    /// Text column `index` (not NULL), lent to `read` where it lies: for a
    /// text parsed into something else (an action, a status), which needs
    /// no copy of its own. Not for JSON: PostgreSQL sends `jsonb` as binary.
    pub fn with_text<T>(
        &self,
        index: usize,
        read: impl FnOnce(&str) -> T,
    ) -> Result<T, TryGetError> {
        let text = match self {
            Columns::Stepped(row) => match row
                .get_ref(index)
                .map_err(|error| column_error(index, error))?
            {
                ValueRef::Null => None,
                value => Some(text(value).map_err(|error| column_error(index, error))?),
            },
            Columns::Queried(row) => {
                let decoded = if let Some(row) = row.try_as_sqlite_row() {
                    row.try_get_unchecked::<Option<&str>, usize>(index)
                } else if let Some(row) = row.try_as_pg_row() {
                    row.try_get_unchecked::<Option<&str>, usize>(index)
                } else {
                    let owned: String = String::read(self, index)?;
                    return Ok(read(&owned));
                };
                decoded.map_err(|error| column_error(index, error))?
            }
        };
        text.map(read)
            .ok_or_else(|| TryGetError::Null(format!("column {index}")))
    }
}

/// A value type a column may hold, decoded from either kind of row.
pub trait Decoded:
    TryGetable
    + for<'r> sqlx::Decode<'r, Sqlite>
    + sqlx::Type<Sqlite>
    + for<'r> sqlx::Decode<'r, Postgres>
    + sqlx::Type<Postgres>
{
    /// The value of a non-NULL SQLite column, as sqlx wrote it.
    fn from_sqlite(value: ValueRef<'_>) -> Result<Self, String>;
}

/// What [`Columns::get`] reads: a value type, or an `Option` of one for a
/// nullable column.
pub trait ColumnValue: Sized {
    fn read(row: &Columns<'_>, index: usize) -> Result<Self, TryGetError>;
}

fn column_error(index: usize, error: impl std::fmt::Display) -> TryGetError {
    TryGetError::DbErr(DbErr::Type(format!("column {index}: {error}")))
}

impl<T: Decoded> ColumnValue for Option<T> {
    fn read(row: &Columns<'_>, index: usize) -> Result<Self, TryGetError> {
        let row = match row {
            Columns::Queried(row) => row,
            Columns::Stepped(row) => {
                return match row
                    .get_ref(index)
                    .map_err(|error| column_error(index, error))?
                {
                    ValueRef::Null => Ok(None),
                    value => T::from_sqlite(value)
                        .map(Some)
                        .map_err(|error| column_error(index, error)),
                };
            }
        };
        let decoded = if let Some(row) = row.try_as_sqlite_row() {
            row.try_get_unchecked::<Option<T>, usize>(index)
        } else if let Some(row) = row.try_as_pg_row() {
            row.try_get_unchecked::<Option<T>, usize>(index)
        } else {
            return row.try_get_by_index_nullable(index);
        };
        decoded.map_err(|error| column_error(index, error))
    }
}

fn text(value: ValueRef<'_>) -> Result<&str, String> {
    value.as_str().map_err(|error| error.to_string())
}

fn integer(value: ValueRef<'_>) -> Result<i64, String> {
    value.as_i64().map_err(|error| error.to_string())
}

impl Decoded for String {
    fn from_sqlite(value: ValueRef<'_>) -> Result<Self, String> {
        text(value).map(str::to_owned)
    }
}

impl Decoded for bool {
    fn from_sqlite(value: ValueRef<'_>) -> Result<Self, String> {
        integer(value).map(|value| value != 0)
    }
}

impl Decoded for i32 {
    fn from_sqlite(value: ValueRef<'_>) -> Result<Self, String> {
        i32::try_from(integer(value)?).map_err(|error| error.to_string())
    }
}

impl Decoded for i64 {
    fn from_sqlite(value: ValueRef<'_>) -> Result<Self, String> {
        integer(value)
    }
}

impl Decoded for Uuid {
    fn from_sqlite(value: ValueRef<'_>) -> Result<Self, String> {
        let bytes = value.as_blob().map_err(|error| error.to_string())?;
        Uuid::from_slice(bytes).map_err(|error| error.to_string())
    }
}

impl Decoded for serde_json::Value {
    fn from_sqlite(value: ValueRef<'_>) -> Result<Self, String> {
        let bytes = match value {
            ValueRef::Text(bytes) | ValueRef::Blob(bytes) => bytes,
            other => return Err(format!("JSON stored as {}", other.data_type())),
        };
        serde_json::from_slice(bytes).map_err(|error| error.to_string())
    }
}

impl Decoded for DateTime<Utc> {
    fn from_sqlite(value: ValueRef<'_>) -> Result<Self, String> {
        let text = text(value)?;
        if let Some(time) = as_sqlx_writes(text) {
            return Ok(time);
        }
        // Any other RFC 3339 text; then SQLite's own forms, as sqlx reads them.
        DateTime::parse_from_rfc3339(text)
            .or_else(|_| DateTime::parse_from_str(text, "%F %T%.f%:z"))
            .map(|time| time.with_timezone(&Utc))
            .or_else(|_| NaiveDateTime::parse_from_str(text, "%F %T%.f").map(|time| time.and_utc()))
            .map_err(|_| format!("invalid timestamp {text:?}"))
    }
}

/// `text` in the one form sqlx writes a UTC time in
/// (`2026-11-28T03:20:00.123456+00:00`: RFC 3339, `+00:00`, no fraction or
/// 3, 6 or 9 digits), read without a general parser: a list of 200 stacks
/// reads 400 of them. `None` for anything else, left to the general one.
fn as_sqlx_writes(text: &str) -> Option<DateTime<Utc>> {
    let bytes = text.as_bytes();
    let (fraction, offset) = bytes
        .get(19..)?
        .split_at_checked(bytes.len().checked_sub(25)?)?;
    if offset != b"+00:00" || [bytes[4], bytes[7], bytes[10], bytes[13], bytes[16]] != *b"--T::" {
        return None;
    }
    let number = |digits: &[u8]| {
        digits.iter().try_fold(0_u32, |number, digit| {
            digit
                .is_ascii_digit()
                .then(|| number * 10 + u32::from(digit - b'0'))
        })
    };
    let nanoseconds = match fraction {
        [] => 0,
        [b'.', digits @ ..] if (1..=9).contains(&digits.len()) => {
            number(digits)? * 10_u32.pow(9 - u32::try_from(digits.len()).ok()?)
        }
        _ => return None,
    };
    let year = i32::try_from(number(&bytes[0..4])?).ok()?;
    NaiveDate::from_ymd_opt(year, number(&bytes[5..7])?, number(&bytes[8..10])?)?
        .and_hms_nano_opt(
            number(&bytes[11..13])?,
            number(&bytes[14..16])?,
            number(&bytes[17..19])?,
            nanoseconds,
        )
        .map(|time| time.and_utc())
}

macro_rules! not_null {
    ($($value:ty),* $(,)?) => {$(
        impl ColumnValue for $value {
            fn read(row: &Columns<'_>, index: usize) -> Result<Self, TryGetError> {
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
    Uuid,
    DateTime<Utc>,
    serde_json::Value,
);

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};
    use sea_orm::{ConnectionTrait, Database, QueryResult, Statement};

    use super::{ColumnValue, Columns};

    const ROW: &str = "SELECT 'text', NULL, 42, 1, '2026-11-26T18:00:00Z', 'not a time', \
                       X'00112233445566778899AABBCCDDEEFF', '[\"a\", 1]', '2026-11-26 18:00:00.5'";

    fn column<T: ColumnValue>(row: &Columns<'_>, index: usize) -> Result<T, sea_orm::TryGetError> {
        row.get(index)
    }

    /// The same expectations of both kinds of row.
    fn check(row: &Columns<'_>) {
        assert_eq!(column::<String>(row, 0).expect("text"), "text");
        assert_eq!(column::<Option<String>>(row, 1).expect("null"), None);
        assert_eq!(column::<Option<i32>>(row, 2).expect("int"), Some(42));
        assert_eq!(column::<i64>(row, 2).expect("bigint"), 42);
        assert!(column::<bool>(row, 3).expect("bool"));
        let time: DateTime<Utc> = column(row, 4).expect("time");
        assert_eq!(time.to_rfc3339(), "2026-11-26T18:00:00+00:00");
        assert!(column::<DateTime<Utc>>(row, 5).is_err());
        assert!(column::<String>(row, 1).is_err(), "NULL in a value column");
        assert!(column::<Option<i32>>(row, 9).is_err(), "no such column");
        assert_eq!(
            column::<sea_orm::prelude::Uuid>(row, 6)
                .expect("uuid")
                .to_string(),
            "00112233-4455-6677-8899-aabbccddeeff"
        );
        assert_eq!(
            column::<serde_json::Value>(row, 7).expect("json"),
            serde_json::json!(["a", 1])
        );
    }

    #[test]
    fn the_form_sqlx_writes_is_read_as_the_general_parser_reads_it() {
        use chrono::{SecondsFormat, TimeZone};
        let base = Utc.with_ymd_and_hms(2026, 2, 28, 23, 59, 59).unwrap();
        for nanoseconds in [0, 500_000_000, 123_000_000, 123_456_000, 123_456_789, 1] {
            let time = base + chrono::Duration::nanoseconds(nanoseconds);
            let text = time.to_rfc3339_opts(SecondsFormat::AutoSi, false);
            assert_eq!(super::as_sqlx_writes(&text), Some(time), "{text}");
        }
        // Fractions of any length up to nine digits.
        assert_eq!(
            super::as_sqlx_writes("2026-11-26T18:00:00.5+00:00"),
            Some(
                Utc.with_ymd_and_hms(2026, 11, 26, 18, 0, 0).unwrap()
                    + chrono::Duration::milliseconds(500)
            )
        );
        // Other forms go to the general parser; impossible dates fail.
        for other in [
            "2026-11-26T18:00:00Z",
            "2026-11-26 18:00:00",
            "2026-11-26T18:00:00+01:00",
            "2026-11-26T18:00:00.+00:00",
            "2026-11-26T18:00:00.1234567890+00:00",
            "2026-11-26T18:00:60+00:00",
            "2026-13-26T18:00:00+00:00",
            "2026-02-30T18:00:00+00:00",
            "2026-1x-26T18:00:00+00:00",
            "+00:00",
            "",
        ] {
            assert_eq!(super::as_sqlx_writes(other), None, "{other}");
        }
    }

    #[test]
    fn text_is_lent_where_it_lies() {
        let connection = rusqlite::Connection::open_in_memory().expect("sqlite");
        let mut statement = connection.prepare(ROW).expect("prepare");
        let mut rows = statement.query([]).expect("query");
        let columns = Columns::Stepped(rows.next().expect("step").expect("a row"));
        assert_eq!(columns.with_text(0, str::len).expect("text"), 4);
        assert!(matches!(
            columns.with_text(1, str::len),
            Err(sea_orm::TryGetError::Null(_))
        ));
        assert!(columns.with_text(6, str::len).is_err(), "a blob is no text");
        assert!(columns.with_text(42, str::len).is_err(), "no such column");
    }

    /// [`ROW`] as sea-orm reads it.
    async fn queried_row() -> QueryResult {
        let db = Database::connect("sqlite::memory:").await.expect("sqlite");
        db.query_one_raw(Statement::from_string(db.get_database_backend(), ROW))
            .await
            .expect("query")
            .expect("a row")
    }

    #[tokio::test]
    async fn text_is_lent_from_a_row_sea_orm_read() {
        let row = queried_row().await;
        let columns = Columns::from(&row);
        assert_eq!(columns.with_text(0, str::to_owned).expect("text"), "text");
        assert!(matches!(
            columns.with_text(1, str::len),
            Err(sea_orm::TryGetError::Null(_))
        ));
    }

    #[tokio::test]
    async fn a_row_sea_orm_read_is_decoded() {
        check(&Columns::from(&queried_row().await));
    }

    #[test]
    fn a_stepped_sqlite_row_is_decoded_alike() {
        let connection = rusqlite::Connection::open_in_memory().expect("sqlite");
        let mut statement = connection.prepare(ROW).expect("prepare");
        let mut rows = statement.query([]).expect("query");
        let row = rows.next().expect("step").expect("a row");
        let columns = Columns::Stepped(row);
        check(&columns);
        // (sqlx, unchecked, reads SQLite's coercion of the text instead.)
        assert!(columns.get::<i32>(0).is_err(), "text where a number is due");
        // SQLite's own timestamp form, as sqlx reads it too.
        let time: DateTime<Utc> = columns.get(8).expect("SQLite time");
        assert_eq!(time.to_rfc3339(), "2026-11-26T18:00:00.500+00:00");
    }
}
