//! The plugin-registry's errors: a request or the database fails, nothing else, so
//! its `Error` is the enum every such service shares,
//! [`ember_runtime::error::RequestOrDatabaseError`] — its variants, their
//! kinds (and so their gRPC statuses) and the `From<sea_orm::DbErr>` are
//! written once there.

pub use ember_runtime::error::RequestOrDatabaseError as Error;

pub type Result<T, E = Error> = std::result::Result<T, E>;
