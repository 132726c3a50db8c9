//! Conversions between chrono times and protobuf timestamps.

use chrono::{DateTime, Utc};

pub fn to_timestamp(time: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: time.timestamp(),
        // Always below 2e9, so it fits; chrono keeps leap seconds above 1e9.
        nanos: i32::try_from(time.timestamp_subsec_nanos()).unwrap_or(999_999_999),
    }
}

pub fn to_optional_timestamp(time: Option<DateTime<Utc>>) -> Option<prost_types::Timestamp> {
    time.map(to_timestamp)
}

/// The time now, truncated to microseconds: PostgreSQL keeps microseconds and
/// SQLite whatever it is given, so values read back compare equal on both.
pub fn now() -> DateTime<Utc> {
    let now = Utc::now();
    DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now)
}
