//! How a client command fails: one error whose variant names what the
//! operator (or the script) can do about it, and decides the process's
//! exit code. The codes are part of the CLI's interface — scripts branch
//! on them — so they never change meaning; a new kind takes a new number.
//!
//! | code | variant | meaning |
//! |---|---|---|
//! | 0 | — | success |
//! | 1 | [`CliError::Failed`] | the operation failed: it ended `*_FAILED`/`ERROR`, the server failed internally (`INTERNAL`, `UNKNOWN`, `DATA_LOSS`), a gRPC server that is not the gateway (`UNIMPLEMENTED`), a local file could not be written |
//! | 2 | [`CliError::Usage`] | the command line is wrong, found before anything was sent: clap's parse errors, and the CLI's own checks of flag values and of the files they name |
//! | 3 | [`CliError::InvalidInput`] | the server refused the request's content (`INVALID_ARGUMENT`, `OUT_OF_RANGE`): a template that does not validate, a value out of range |
//! | 4 | [`CliError::NotFound`] | the stack, cluster, instance, … does not exist (`NOT_FOUND`) |
//! | 5 | [`CliError::Conflict`] | refused because of the object's state (`ALREADY_EXISTS`, `FAILED_PRECONDITION`, `ABORTED`): locked, busy, a duplicate name; `allowed` answering no |
//! | 6 | [`CliError::Unauthenticated`] | no token, or one that is expired or forged (`UNAUTHENTICATED`) |
//! | 7 | [`CliError::Forbidden`] | the token's identity may not do this (`PERMISSION_DENIED`) |
//! | 8 | [`CliError::Unavailable`] | the gateway or a service behind it cannot be reached or is overloaded (connection refused, `UNAVAILABLE`, `RESOURCE_EXHAUSTED`, `CANCELLED`, an answer that is not gRPC) |
//! | 9 | [`CliError::TimedOut`] | it did not finish in time and may still be running (`DEADLINE_EXCEEDED`, `--wait-timeout` passing) |
//!
//! What a gRPC code means comes from [`ember_runtime::ErrorKind`], the
//! table the gateway also answers REST callers with, so the CLI and the
//! HTTP status agree; the message is [`describe`]'s, unchanged.

use crate::client::describe;

/// A client command's failure: its message, as printed after `error: `,
/// and what kind of failure it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CliError {
    /// The operation ran and failed, or something unexpected broke.
    Failed(String),
    /// The command line is wrong; nothing was sent.
    Usage(String),
    /// The server refused the request's content as invalid.
    InvalidInput(String),
    /// What the command names does not exist.
    NotFound(String),
    /// The object's state refuses this now.
    Conflict(String),
    /// No credentials, or credentials the server does not accept.
    Unauthenticated(String),
    /// The identity may not do this.
    Forbidden(String),
    /// The gateway or a service behind it cannot be reached: retry later.
    Unavailable(String),
    /// Did not finish in time; it may still be going on.
    TimedOut(String),
}

impl CliError {
    /// The process's exit code for this failure (see the module's table).
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Failed(_) => 1,
            CliError::Usage(_) => 2,
            CliError::InvalidInput(_) => 3,
            CliError::NotFound(_) => 4,
            CliError::Conflict(_) => 5,
            CliError::Unauthenticated(_) => 6,
            CliError::Forbidden(_) => 7,
            CliError::Unavailable(_) => 8,
            CliError::TimedOut(_) => 9,
        }
    }

    /// What is printed after `error: `.
    pub fn message(&self) -> &str {
        match self {
            CliError::Failed(message)
            | CliError::Usage(message)
            | CliError::InvalidInput(message)
            | CliError::NotFound(message)
            | CliError::Conflict(message)
            | CliError::Unauthenticated(message)
            | CliError::Forbidden(message)
            | CliError::Unavailable(message)
            | CliError::TimedOut(message) => message,
        }
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.message())
    }
}

impl std::error::Error for CliError {}

/// A plain message is a general failure: the benches and local I/O convert
/// with `?`; anything more specific says its variant.
impl From<String> for CliError {
    fn from(message: String) -> CliError {
        CliError::Failed(message)
    }
}

/// The kind follows the gRPC code, through the same table the gateway uses
/// for HTTP; the message is [`describe`]'s.
impl From<tonic::Status> for CliError {
    fn from(status: tonic::Status) -> CliError {
        use ember_runtime::ErrorKind;
        // No server chose this code: the answer was not gRPC, or the
        // connection broke while answering.
        let not_grpc = std::error::Error::source(&status).is_some();
        let kind = ErrorKind::from_grpc_code(status.code());
        let message = describe(status);
        if not_grpc {
            return CliError::Unavailable(message);
        }
        match kind {
            ErrorKind::InvalidInput => CliError::InvalidInput(message),
            ErrorKind::Unauthenticated => CliError::Unauthenticated(message),
            ErrorKind::Forbidden => CliError::Forbidden(message),
            ErrorKind::NotFound => CliError::NotFound(message),
            ErrorKind::Conflict => CliError::Conflict(message),
            ErrorKind::Unavailable => CliError::Unavailable(message),
            ErrorKind::Timeout => CliError::TimedOut(message),
            ErrorKind::Internal => CliError::Failed(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use tonic::Code;

    use super::*;

    /// The exit code each gRPC code ends the CLI with. A `match` without a
    /// wildcard: a code tonic adds fails to compile here until it is given
    /// one.
    fn expected_exit_code(code: Code) -> u8 {
        match code {
            Code::Ok | Code::Unknown | Code::Unimplemented | Code::Internal | Code::DataLoss => 1,
            Code::InvalidArgument | Code::OutOfRange => 3,
            Code::NotFound => 4,
            Code::AlreadyExists | Code::FailedPrecondition | Code::Aborted => 5,
            Code::Unauthenticated => 6,
            Code::PermissionDenied => 7,
            Code::Unavailable | Code::ResourceExhausted | Code::Cancelled => 8,
            Code::DeadlineExceeded => 9,
        }
    }

    #[test]
    fn every_grpc_code_has_its_exit_code_and_keeps_its_message() {
        // gRPC codes are 0..=16; 17 is no code (tonic reads it as Unknown),
        // so the loop below covers them all.
        assert_eq!(Code::from(17), Code::Unknown);
        for number in 0..=16 {
            let code = Code::from(number);
            let error = CliError::from(tonic::Status::new(code, "stack \"web\" is locked"));
            assert_eq!(error.exit_code(), expected_exit_code(code), "{code:?}");
            assert_eq!(
                error.message(),
                describe(tonic::Status::new(code, "stack \"web\" is locked")),
                "{code:?}"
            );
        }
    }

    #[test]
    fn the_message_users_read_names_the_code() {
        let error = CliError::from(tonic::Status::not_found("stack \"web\" not found"));
        assert_eq!(
            error,
            CliError::NotFound("not found: stack \"web\" not found".to_owned())
        );
        assert_eq!(error.to_string(), "not found: stack \"web\" not found");
    }

    #[test]
    fn an_answer_that_is_not_grpc_is_unavailable() {
        let transport = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        let status = tonic::Status::from_error(Box::new(transport));
        assert!(std::error::Error::source(&status).is_some(), "{status:?}");
        let error = CliError::from(status);
        assert_eq!(error.exit_code(), 8, "{error}");
        assert!(
            error.message().contains("did not answer in gRPC"),
            "{error}"
        );
    }

    #[test]
    fn a_plain_message_is_a_general_failure() {
        let error = CliError::from("cannot write web.json: disk full".to_owned());
        assert_eq!(error.exit_code(), 1);
        assert_eq!(error.to_string(), "cannot write web.json: disk full");
    }

    #[test]
    fn exit_codes_are_distinct_and_leave_clap_its_two() {
        let errors = [
            CliError::Failed(String::new()),
            CliError::Usage(String::new()),
            CliError::InvalidInput(String::new()),
            CliError::NotFound(String::new()),
            CliError::Conflict(String::new()),
            CliError::Unauthenticated(String::new()),
            CliError::Forbidden(String::new()),
            CliError::Unavailable(String::new()),
            CliError::TimedOut(String::new()),
        ];
        let codes: Vec<u8> = errors.iter().map(CliError::exit_code).collect();
        assert_eq!(codes, (1..=9).collect::<Vec<u8>>());
        assert_eq!(
            clap::Error::new(clap::error::ErrorKind::InvalidValue).exit_code(),
            i32::from(CliError::Usage(String::new()).exit_code()),
            "a usage error the CLI finds exits as clap's own"
        );
    }
}
