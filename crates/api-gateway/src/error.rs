//! REST errors in the OpenStack shape. Heat clients read
//! `error.message`; Senlin clients the same; `code`, `title` and
//! `explanation` are there for people and for older clients.

use axum::Json;
use axum::response::{IntoResponse, Response};
use ember_runtime::ErrorKind;

#[derive(Debug)]
pub struct RestError {
    kind: ErrorKind,
    message: String,
    /// The call to an internal service failed on the way (the gateway's
    /// metrics count these).
    upstream_failure: bool,
}

/// Marks a response whose call to an internal service failed on the way;
/// the router's metrics layer counts it.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamFailure;

impl RestError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        RestError {
            kind,
            message: message.into(),
            upstream_failure: false,
        }
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The OpenStack exception type name clients may switch on.
    fn error_type(&self) -> &'static str {
        match self.kind {
            ErrorKind::InvalidInput => "InvalidInput",
            ErrorKind::Unauthenticated => "NotAuthenticated",
            ErrorKind::Forbidden => "Forbidden",
            ErrorKind::NotFound => "EntityNotFound",
            ErrorKind::Conflict => "Conflict",
            ErrorKind::Unavailable => "ServiceUnavailable",
            ErrorKind::Timeout => "Timeout",
            ErrorKind::Internal => "InternalError",
        }
    }
}

impl From<tonic::Status> for RestError {
    fn from(status: tonic::Status) -> Self {
        // A status made on this side of the call, from a failed or dropped
        // connection (the service is down, or died mid-call), carries the
        // transport error as its source: the service is unavailable,
        // whatever code tonic gave it ("transport error" is Unknown).
        if let Some(source) = std::error::Error::source(&status) {
            let cause = ember_runtime::error::with_causes(source.to_string(), source.source());
            return RestError {
                upstream_failure: true,
                ..RestError::new(
                    ErrorKind::Unavailable,
                    format!("an Ember service behind the gateway is unavailable: {cause}"),
                )
            };
        }
        RestError::new(ErrorKind::from_grpc_code(status.code()), status.message())
    }
}

impl From<ember_runtime::ids::NotAUuid> for RestError {
    fn from(error: ember_runtime::ids::NotAUuid) -> Self {
        RestError::new(ErrorKind::InvalidInput, error.to_string())
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        let status = self.kind.http_status();
        let title = status.canonical_reason().unwrap_or("Error");
        let body = serde_json::json!({
            "code": status.as_u16(),
            "title": title,
            "explanation": self.message,
            "error": {
                "code": status.as_u16(),
                "title": title,
                "message": self.message,
                "type": self.error_type(),
                "traceback": null,
            }
        });
        let mut response = (status, Json(body)).into_response();
        if self.upstream_failure {
            response.extensions_mut().insert(UpstreamFailure);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_connection_is_unavailable_whatever_its_code() {
        let dropped = tonic::Status::from_error(Box::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "connection reset by peer",
        )));
        let error = RestError::from(dropped);
        assert_eq!(error.kind, ErrorKind::Unavailable);
        assert!(
            error.message.contains("connection reset by peer"),
            "{}",
            error.message
        );
        let response = error.into_response();
        assert!(
            response.extensions().get::<UpstreamFailure>().is_some(),
            "marked for the upstream-errors metric"
        );
    }

    #[test]
    fn a_status_the_service_answered_keeps_its_kind() {
        let answered = tonic::Status::not_found("cluster \"web\" not found");
        let error = RestError::from(answered);
        assert_eq!(error.kind, ErrorKind::NotFound);
        assert_eq!(error.message, "cluster \"web\" not found");
        assert!(
            error
                .into_response()
                .extensions()
                .get::<UpstreamFailure>()
                .is_none(),
            "an answer is not an upstream failure"
        );
    }
}
