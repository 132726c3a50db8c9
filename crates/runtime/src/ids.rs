//! Ids a caller sends as text. One parser serves every service, so a
//! malformed id is refused everywhere with the same message, naming the
//! field and what it held: `marker: "abc" is not a UUID`.

use std::fmt;

use uuid::Uuid;

use crate::ErrorKind;
use crate::error::ServiceError;
use crate::quote::quoted;

/// A request field that should hold a UUID and does not. Each service's
/// error turns it into its invalid-input variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAUuid {
    field: String,
    text: String,
}

impl fmt::Display for NotAUuid {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "{}: {:?} is not a UUID",
            self.field,
            quoted(&self.text)
        )
    }
}

impl std::error::Error for NotAUuid {}

impl ServiceError for NotAUuid {
    fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}

/// A handler may refuse a malformed id with `?` before it has its own error.
impl From<NotAUuid> for tonic::Status {
    fn from(error: NotAUuid) -> Self {
        error.into_status()
    }
}

/// The UUID `text` holds; `field` names it in the error when it holds none.
pub fn parse_uuid(field: &str, text: &str) -> Result<Uuid, NotAUuid> {
    Uuid::parse_str(text).map_err(|_| NotAUuid {
        field: field.to_owned(),
        text: text.to_owned(),
    })
}

/// An optional id, as proto3 sends one: empty text is none given.
pub fn parse_optional_uuid(field: &str, text: &str) -> Result<Option<Uuid>, NotAUuid> {
    if text.is_empty() {
        return Ok(None);
    }
    parse_uuid(field, text).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_id_is_refused_naming_its_field_and_text() {
        let error = parse_uuid("marker", "abc").expect_err("not a uuid");
        assert_eq!(error.to_string(), "marker: \"abc\" is not a UUID");
        let id = Uuid::new_v4();
        assert_eq!(parse_uuid("marker", &id.to_string()), Ok(id));
    }

    #[test]
    fn an_empty_optional_id_is_none_and_a_malformed_one_is_refused() {
        assert_eq!(parse_optional_uuid("marker", ""), Ok(None));
        let id = Uuid::new_v4();
        assert_eq!(parse_optional_uuid("marker", &id.to_string()), Ok(Some(id)));
        let error = parse_optional_uuid("cluster_id", " ").expect_err("blank");
        assert_eq!(error.to_string(), "cluster_id: \" \" is not a UUID");
    }

    #[test]
    fn a_malformed_id_is_an_invalid_argument() {
        let status = tonic::Status::from(parse_uuid("uuid", "web-1").expect_err("not a uuid"));
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert_eq!(status.message(), "uuid: \"web-1\" is not a UUID");
    }

    #[test]
    fn a_long_malformed_id_is_quoted_bounded() {
        let long = "x".repeat(10_000);
        let message = parse_uuid("uuid", &long).expect_err("long").to_string();
        assert!(message.len() < 400, "{message}");
        assert!(message.ends_with("is not a UUID"), "{message}");
    }
}
