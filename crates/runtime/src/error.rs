//! The one table that says what each kind of failure means to a caller, on
//! gRPC and on HTTP. Every crate's error enum maps its variants onto an
//! [`ErrorKind`]; nothing else decides status codes. The matches here are
//! exhaustive on purpose: a new kind cannot silently become a 500.

use tonic::Code;

/// What a caller can do about a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The request is malformed or names invalid values: fix the request.
    InvalidInput,
    /// No credentials, or credentials that are expired or forged.
    Unauthenticated,
    /// Authenticated, but this caller may not do this.
    Forbidden,
    /// The object does not exist (or belongs to another project).
    NotFound,
    /// The object exists but its state forbids this now (locked, busy, wrong
    /// status, duplicate name): retry later or change the state first.
    Conflict,
    /// A dependency is down or overloaded: retry with backoff.
    Unavailable,
    /// The operation did not finish in time.
    Timeout,
    /// A bug or an unexpected failure: nothing the caller did.
    Internal,
}

impl ErrorKind {
    pub fn grpc_code(self) -> Code {
        match self {
            ErrorKind::InvalidInput => Code::InvalidArgument,
            ErrorKind::Unauthenticated => Code::Unauthenticated,
            ErrorKind::Forbidden => Code::PermissionDenied,
            ErrorKind::NotFound => Code::NotFound,
            ErrorKind::Conflict => Code::FailedPrecondition,
            ErrorKind::Unavailable => Code::Unavailable,
            ErrorKind::Timeout => Code::DeadlineExceeded,
            ErrorKind::Internal => Code::Internal,
        }
    }

    pub fn http_status(self) -> http::StatusCode {
        use http::StatusCode;
        match self {
            ErrorKind::InvalidInput => StatusCode::BAD_REQUEST,
            ErrorKind::Unauthenticated => StatusCode::UNAUTHORIZED,
            ErrorKind::Forbidden => StatusCode::FORBIDDEN,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
            ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The kind a gRPC status from another service stands for, so the
    /// gateway can answer REST callers with the right HTTP status.
    pub fn from_grpc_code(code: Code) -> ErrorKind {
        match code {
            Code::InvalidArgument | Code::OutOfRange => ErrorKind::InvalidInput,
            Code::Unauthenticated => ErrorKind::Unauthenticated,
            Code::PermissionDenied => ErrorKind::Forbidden,
            Code::NotFound => ErrorKind::NotFound,
            Code::AlreadyExists | Code::FailedPrecondition | Code::Aborted => ErrorKind::Conflict,
            // Cancelled reaches the gateway when the upstream's connection
            // dropped mid-call (the service died): unavailable, not slow.
            Code::Unavailable | Code::ResourceExhausted | Code::Cancelled => ErrorKind::Unavailable,
            Code::DeadlineExceeded => ErrorKind::Timeout,
            Code::Ok | Code::Unknown | Code::Unimplemented | Code::Internal | Code::DataLoss => {
                ErrorKind::Internal
            }
        }
    }

    /// Builds the gRPC status for this kind with a caller-readable message,
    /// at most [`MAX_STATUS_MESSAGE_BYTES`] long: the message travels in an
    /// HTTP/2 header, and one too large fails the whole connection it
    /// shares with other callers' requests.
    pub fn status(self, message: impl Into<String>) -> tonic::Status {
        let message = message.into();
        let message =
            crate::quote::bounded_message(&message, MAX_STATUS_MESSAGE_BYTES).into_owned();
        tonic::Status::new(self.grpc_code(), message)
    }
}

/// The longest message a gRPC status carries (before percent-encoding).
pub const MAX_STATUS_MESSAGE_BYTES: usize = 1024;

/// A service crate's error enum: each variant names one [`ErrorKind`], and
/// the gRPC status follows from it the same way in every service. Each crate
/// implements [`ServiceError::kind`] with an exhaustive match and its
/// `From<Error> for tonic::Status` with [`ServiceError::into_status`] (the
/// orphan rule keeps that `From` in the crate that owns the enum).
pub trait ServiceError: std::error::Error + Sized {
    /// What the caller can do about this failure.
    fn kind(&self) -> ErrorKind;

    /// The status a caller receives. An internal failure is logged here, on
    /// the service's side, since it is a bug or an unexpected failure nobody
    /// else will see; the caller gets the same message either way.
    fn into_status(self) -> tonic::Status {
        let kind = self.kind();
        if kind == ErrorKind::Internal {
            tracing::error!(error = %self, "internal error");
        }
        kind.status(self.to_string())
    }
}

/// A failed database call, as the caller sees it: the database could not be
/// reached (no connection from the pool, or the connection broke), which is
/// worth retrying, or anything else (a constraint, a query, a decode), which
/// is internal. Each service's `From<sea_orm::DbErr>` turns this into its own
/// variants, so the line between the two is drawn once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseFailure {
    /// The database is unreachable: retry with backoff.
    Unavailable(String),
    /// The database answered with an error: a bug or corrupt data.
    Internal(String),
}

impl From<sea_orm::DbErr> for DatabaseFailure {
    fn from(error: sea_orm::DbErr) -> Self {
        match error {
            sea_orm::DbErr::ConnectionAcquire(_) | sea_orm::DbErr::Conn(_) => {
                DatabaseFailure::Unavailable(error.to_string())
            }
            other => DatabaseFailure::Internal(other.to_string()),
        }
    }
}

/// The whole error enum of a service whose failures are its requests and its
/// own database (plugin-registry, lifecycle-hook): each re-exports it as its
/// `Error`. A service that fails in more ways (the engine) has its own enum.
#[derive(Debug, thiserror::Error)]
pub enum RequestOrDatabaseError {
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

impl ServiceError for RequestOrDatabaseError {
    fn kind(&self) -> ErrorKind {
        match self {
            RequestOrDatabaseError::InvalidInput(_) => ErrorKind::InvalidInput,
            RequestOrDatabaseError::Forbidden(_) => ErrorKind::Forbidden,
            RequestOrDatabaseError::NotFound(_) => ErrorKind::NotFound,
            RequestOrDatabaseError::Conflict(_) => ErrorKind::Conflict,
            RequestOrDatabaseError::DatabaseUnavailable(_) => ErrorKind::Unavailable,
            RequestOrDatabaseError::Database(_) => ErrorKind::Internal,
        }
    }
}

impl From<sea_orm::DbErr> for RequestOrDatabaseError {
    fn from(error: sea_orm::DbErr) -> Self {
        match DatabaseFailure::from(error) {
            DatabaseFailure::Unavailable(message) => {
                RequestOrDatabaseError::DatabaseUnavailable(message)
            }
            DatabaseFailure::Internal(message) => RequestOrDatabaseError::Database(message),
        }
    }
}

impl From<crate::ids::NotAUuid> for RequestOrDatabaseError {
    fn from(error: crate::ids::NotAUuid) -> Self {
        RequestOrDatabaseError::InvalidInput(error.to_string())
    }
}

impl From<RequestOrDatabaseError> for tonic::Status {
    fn from(error: RequestOrDatabaseError) -> Self {
        error.into_status()
    }
}

/// `text` followed by every cause in `source`'s chain that it does not
/// already say, joined with ": " — tonic and hyper keep the useful part
/// ("invalid peer certificate: UnknownIssuer", "connection reset") in the
/// causes of an error whose own text is just "transport error".
pub fn with_causes(
    text: impl Into<String>,
    mut source: Option<&(dyn std::error::Error + 'static)>,
) -> String {
    let mut text = text.into();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error whose own text says nothing, with the real cause behind it.
    #[derive(Debug)]
    struct Opaque(std::io::Error);

    impl std::fmt::Display for Opaque {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("transport error")
        }
    }

    impl std::error::Error for Opaque {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn causes_are_appended_once() {
        let error = Opaque(std::io::Error::other("connection reset"));
        assert_eq!(
            with_causes(error.to_string(), std::error::Error::source(&error)),
            "transport error: connection reset"
        );
        assert_eq!(
            with_causes(
                "failed: connection reset",
                std::error::Error::source(&error)
            ),
            "failed: connection reset"
        );
    }

    const ALL: [ErrorKind; 8] = [
        ErrorKind::InvalidInput,
        ErrorKind::Unauthenticated,
        ErrorKind::Forbidden,
        ErrorKind::NotFound,
        ErrorKind::Conflict,
        ErrorKind::Unavailable,
        ErrorKind::Timeout,
        ErrorKind::Internal,
    ];

    #[test]
    fn every_kind_survives_a_round_trip_through_grpc() {
        for kind in ALL {
            assert_eq!(ErrorKind::from_grpc_code(kind.grpc_code()), kind);
        }
    }

    #[test]
    fn http_statuses_follow_openstack_conventions() {
        assert_eq!(ErrorKind::InvalidInput.http_status(), 400);
        assert_eq!(ErrorKind::Unauthenticated.http_status(), 401);
        assert_eq!(ErrorKind::Forbidden.http_status(), 403);
        assert_eq!(ErrorKind::NotFound.http_status(), 404);
        assert_eq!(ErrorKind::Conflict.http_status(), 409);
        assert_eq!(ErrorKind::Unavailable.http_status(), 503);
        assert_eq!(ErrorKind::Internal.http_status(), 500);
    }

    #[test]
    fn a_lost_connection_is_unavailable_and_a_failed_query_internal() {
        let lost = sea_orm::DbErr::ConnectionAcquire(sea_orm::ConnAcquireErr::Timeout);
        let message = lost.to_string();
        assert_eq!(
            DatabaseFailure::from(lost),
            DatabaseFailure::Unavailable(message)
        );
        let failed = sea_orm::DbErr::Custom("no such table".into());
        let message = failed.to_string();
        assert_eq!(
            DatabaseFailure::from(failed),
            DatabaseFailure::Internal(message)
        );
    }

    #[test]
    fn already_exists_from_another_service_is_a_conflict() {
        assert_eq!(
            ErrorKind::from_grpc_code(Code::AlreadyExists),
            ErrorKind::Conflict
        );
    }
}
