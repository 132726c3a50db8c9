//! The plugin-registry's errors and their one mapping to gRPC statuses. What each
//! kind means to a caller, and how a database failure and a status are made,
//! is shared by every service in `ember_runtime::error`.

use ember_runtime::ErrorKind;
use ember_runtime::error::{DatabaseFailure, ServiceError};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request names invalid values: fix the request.
    #[error("{0}")]
    InvalidInput(String),
    /// This caller may not do this.
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    /// The object's state forbids this now: retry later or change the state.
    #[error("{0}")]
    Conflict(String),
    /// The database could not be reached: retry.
    #[error("database unavailable: {0}")]
    DatabaseUnavailable(String),
    /// The database answered with an error, or holds a row the service
    /// cannot read: internal, logged where it becomes a status.
    #[error("database error: {0}")]
    Database(String),
}

impl ServiceError for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidInput(_) => ErrorKind::InvalidInput,
            Error::Forbidden(_) => ErrorKind::Forbidden,
            Error::NotFound(_) => ErrorKind::NotFound,
            Error::Conflict(_) => ErrorKind::Conflict,
            Error::DatabaseUnavailable(_) => ErrorKind::Unavailable,
            Error::Database(_) => ErrorKind::Internal,
        }
    }
}

impl From<sea_orm::DbErr> for Error {
    fn from(error: sea_orm::DbErr) -> Self {
        match DatabaseFailure::from(error) {
            DatabaseFailure::Unavailable(message) => Error::DatabaseUnavailable(message),
            DatabaseFailure::Internal(message) => Error::Database(message),
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(error: Error) -> Self {
        error.into_status()
    }
}
