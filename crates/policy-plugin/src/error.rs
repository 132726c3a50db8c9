//! The policy plugin's errors and their one mapping to gRPC statuses (made
//! as every service makes them, by `ember_runtime::error::ServiceError`).

use ember_runtime::ErrorKind;
use ember_runtime::error::ServiceError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The rules file is missing or is not the TOML the plugin expects.
    #[error("rules file {path}: {reason}")]
    RulesFile { path: String, reason: String },
    /// The rules file parsed but says something impossible.
    #[error("rules file {path} is invalid:\n  - {}", .problems.join("\n  - "))]
    InvalidRules { path: String, problems: Vec<String> },
    /// A call the plugin cannot answer (e.g. no stack snapshot).
    #[error("{0}")]
    InvalidInput(String),
    #[error(transparent)]
    Serve(#[from] ember_runtime::server::ServeError),
}

impl ServiceError for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::RulesFile { .. } | Error::InvalidRules { .. } | Error::InvalidInput(_) => {
                ErrorKind::InvalidInput
            }
            Error::Serve(_) => ErrorKind::Internal,
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(error: Error) -> Self {
        error.into_status()
    }
}
