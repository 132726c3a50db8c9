//! The engine's errors and their one mapping to gRPC statuses. What each
//! kind means to a caller, and how a database failure and a status are made,
//! is shared by every service in `ember_runtime::error`.

use ember_runtime::ErrorKind;
use ember_runtime::error::{DatabaseFailure, ServiceError};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
    /// The database could not be reached: retry (the engine's own retry
    /// loops retry only this variant).
    #[error("database unavailable: {0}")]
    DatabaseUnavailable(String),
    /// Another service the engine needs (lifecycle-hook) is down: retry.
    #[error("{0}")]
    Unavailable(String),
    /// The database answered with an error, or holds a row the engine
    /// cannot read: internal, logged where it becomes a status.
    #[error("database error: {0}")]
    Database(String),
    /// This engine no longer holds the stack lease the write was fenced
    /// with: another engine took the stack over (or the lease was released).
    /// The operation stops; nothing was written.
    #[error("stack lease lost: {0}")]
    LeaseLost(String),
    /// A policy spec with a property its type's schema does not have: 400,
    /// naming the property. (Senlin answers it with a 500 — its schema
    /// error escapes policy validation — which its own API suite's comments
    /// call a 400 while asserting the 500: a bug, not a contract.)
    #[error("{0}")]
    PolicySpecRefused(String),
    /// The cloud behind the openstack backend refused or could not answer
    /// (its own status and message).
    #[error("{0}")]
    Cloud(#[from] ember_openstack::Error),
}

impl Error {
    /// Whether this is Ember's own store failing — the database unreachable
    /// or answering with an error, or the stack lease the write was fenced
    /// with gone — rather than a verdict on what was asked. A resource step
    /// keeps such an error typed ([`ResourceFailure::Store`]): it says
    /// nothing about the resource, so it must not become the resource's
    /// FAILED status reason. Every other variant is a verdict in the
    /// caller's terms (invalid input, not found, a conflict, a refusal, a
    /// cloud's or another service's answer) and becomes the resource's
    /// reason as text.
    ///
    /// [`ResourceFailure::Store`]: crate::resources::ResourceFailure::Store
    pub fn is_store_failure(&self) -> bool {
        match self {
            Error::DatabaseUnavailable(_) | Error::Database(_) | Error::LeaseLost(_) => true,
            Error::InvalidInput(_)
            | Error::Forbidden(_)
            | Error::NotFound(_)
            | Error::Conflict(_)
            | Error::Unavailable(_)
            | Error::PolicySpecRefused(_)
            | Error::Cloud(_) => false,
        }
    }
}

impl ServiceError for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidInput(_) => ErrorKind::InvalidInput,
            Error::Forbidden(_) => ErrorKind::Forbidden,
            Error::NotFound(_) => ErrorKind::NotFound,
            Error::Conflict(_) => ErrorKind::Conflict,
            Error::DatabaseUnavailable(_) => ErrorKind::Unavailable,
            Error::Unavailable(_) => ErrorKind::Unavailable,
            Error::Database(_) => ErrorKind::Internal,
            Error::LeaseLost(_) => ErrorKind::Conflict,
            Error::PolicySpecRefused(_) => ErrorKind::InvalidInput,
            Error::Cloud(error) => cloud_kind(error),
        }
    }
}

/// What a cloud's answer means to Ember's caller: the service's 4xx
/// verdicts pass through as the same kind; no answer, no endpoint, or a
/// 5xx is the service being unavailable (503 naming it).
fn cloud_kind(error: &ember_openstack::Error) -> ErrorKind {
    use ember_openstack::Error as Cloud;
    match error {
        Cloud::Api(api) => match api.status {
            400 | 422 => ErrorKind::InvalidInput,
            401 | 403 => ErrorKind::Forbidden,
            404 => ErrorKind::NotFound,
            409 | 413 => ErrorKind::Conflict,
            _ => ErrorKind::Unavailable,
        },
        Cloud::Authentication(_) => ErrorKind::Forbidden,
        Cloud::Unreachable { .. } | Cloud::NoEndpoint { .. } | Cloud::Decode { .. } => {
            ErrorKind::Unavailable
        }
        Cloud::Unsupported { .. } => ErrorKind::Unavailable,
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

impl From<ember_runtime::ids::NotAUuid> for Error {
    fn from(error: ember_runtime::ids::NotAUuid) -> Self {
        Error::InvalidInput(error.to_string())
    }
}

impl From<Error> for tonic::Status {
    fn from(error: Error) -> Self {
        error.into_status()
    }
}
