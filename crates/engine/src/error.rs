//! The engine's errors and their one mapping to gRPC statuses.

use ember_runtime::ErrorKind;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    InvalidInput(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("database unavailable: {0}")]
    DatabaseUnavailable(String),
    /// Another service the engine needs (lifecycle-hook) is down: retry.
    #[error("{0}")]
    Unavailable(String),
    #[error("database error: {0}")]
    Database(String),
    /// This engine no longer holds the stack lease the write was fenced
    /// with: another engine took the stack over (or the lease was released).
    /// The operation stops; nothing was written.
    #[error("stack lease lost: {0}")]
    LeaseLost(String),
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidInput(_) => ErrorKind::InvalidInput,
            Error::Forbidden(_) => ErrorKind::Forbidden,
            Error::NotFound(_) => ErrorKind::NotFound,
            Error::Conflict(_) => ErrorKind::Conflict,
            Error::DatabaseUnavailable(_) => ErrorKind::Unavailable,
            Error::Unavailable(_) => ErrorKind::Unavailable,
            Error::Database(_) => ErrorKind::Internal,
            Error::LeaseLost(_) => ErrorKind::Conflict,
        }
    }
}

impl From<sea_orm::DbErr> for Error {
    fn from(error: sea_orm::DbErr) -> Self {
        match error {
            sea_orm::DbErr::ConnectionAcquire(_) | sea_orm::DbErr::Conn(_) => {
                Error::DatabaseUnavailable(error.to_string())
            }
            other => Error::Database(other.to_string()),
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(error: Error) -> Self {
        if error.kind() == ErrorKind::Internal {
            tracing::error!(%error, "internal error");
        }
        error.kind().status(error.to_string())
    }
}
