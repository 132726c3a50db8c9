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
}

impl RestError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        RestError {
            kind,
            message: message.into(),
        }
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
        RestError::new(ErrorKind::from_grpc_code(status.code()), status.message())
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
        (status, Json(body)).into_response()
    }
}
