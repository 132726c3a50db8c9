//! Heat request bodies and query strings → engine requests. Everything a
//! client may send is decided here, in pure functions: which keys each body
//! takes (an unknown key is a 400 naming it), the two spellings Heat allows
//! for templates, environments and adopt data (a JSON object or a YAML/JSON
//! string), tags as a comma string or a list, booleans and integers as JSON
//! or as strings, and the one-action-per-body rule of `…/actions`.

mod actions;
mod mark_unhealthy;
mod stack_body;

use std::collections::HashMap;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use ember_runtime::ErrorKind;
use serde_json::{Map, Value};

use crate::error::RestError;

pub use actions::{ActionKind, stack_action};
pub use mark_unhealthy::mark_unhealthy_body;
pub use stack_body::{create_stack_request, update_stack_request, validate_template_request};

/// Heat's limit on one tag.
const LONGEST_TAG: usize = 80;

pub(super) fn invalid(message: impl Into<String>) -> RestError {
    RestError::new(ErrorKind::InvalidInput, message)
}

/// What a JSON value is, for messages ("got an array").
pub(super) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A request body as a JSON object; an empty body is an empty object, so
/// each operation can say which key it misses.
pub fn parse_body(bytes: &[u8]) -> Result<Map<String, Value>, RestError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(invalid(format!(
            "the request body must be a JSON object, got {}",
            kind_of(&other)
        ))),
        Err(error) => Err(invalid(format!(
            "the request body is not valid JSON: {error}"
        ))),
    }
}

pub(super) fn string(key: &str, value: Value) -> Result<String, RestError> {
    match value {
        Value::String(text) => Ok(text),
        other => Err(invalid(format!(
            "{key} must be a string, got {}",
            kind_of(&other)
        ))),
    }
}

/// A template, environment or adopt data: an object (sent on as JSON text)
/// or YAML/JSON text as it is.
pub(super) fn document_text(key: &str, value: Value) -> Result<String, RestError> {
    match value {
        Value::String(text) => Ok(text),
        Value::Object(map) => Ok(Value::Object(map).to_string()),
        other => Err(invalid(format!(
            "{key} must be a JSON object or a YAML/JSON string, got {}",
            kind_of(&other)
        ))),
    }
}

pub(super) fn object(key: &str, value: Value) -> Result<Map<String, Value>, RestError> {
    match value {
        Value::Object(map) => Ok(map),
        other => Err(invalid(format!(
            "{key} must be an object of name: value, got {}",
            kind_of(&other)
        ))),
    }
}

pub(super) fn files(value: Value) -> Result<HashMap<String, String>, RestError> {
    object("files", value)?
        .into_iter()
        .map(|(name, content)| match content {
            Value::String(text) => Ok((name, text)),
            // Some clients send a nested template already parsed.
            Value::Object(_) | Value::Array(_) => Ok((name, content.to_string())),
            other => Err(invalid(format!(
                "files[{name:?}] must be the file's content as a string, got {}",
                kind_of(&other)
            ))),
        })
        .collect()
}

/// A list of strings; a lone string is a list of one.
pub(super) fn string_list(key: &str, value: Value) -> Result<Vec<String>, RestError> {
    match value {
        Value::String(text) => Ok(vec![text]),
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::String(text) => Ok(text),
                other => Err(invalid(format!(
                    "{key} must be a list of strings, got {} in it",
                    kind_of(&other)
                ))),
            })
            .collect(),
        other => Err(invalid(format!(
            "{key} must be a list of strings, got {}",
            kind_of(&other)
        ))),
    }
}

/// A non-negative integer, as a JSON number or a string of digits.
pub fn whole_number(key: &str, value: &Value) -> Result<u32, RestError> {
    let parsed = match value {
        Value::Number(number) => number
            .as_u64()
            .and_then(|number| u32::try_from(number).ok()),
        Value::String(text) => text.trim().parse::<u32>().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| {
        invalid(format!(
            "{key} must be a whole number (0 or more), got {value}"
        ))
    })
}

/// A boolean, as JSON or as the strings OpenStack clients send ("True").
pub fn boolean(key: &str, value: &Value) -> Result<bool, RestError> {
    match value {
        Value::Bool(boolean) => Ok(*boolean),
        Value::String(text) => boolean_text(key, text),
        other => Err(invalid(format!("{key} must be true or false, got {other}"))),
    }
}

pub(super) fn boolean_text(key: &str, text: &str) -> Result<bool, RestError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "t" | "yes" | "y" | "on" | "1" => Ok(true),
        "false" | "f" | "no" | "n" | "off" | "0" => Ok(false),
        _ => Err(invalid(format!(
            "{key} must be true or false, got {text:?}"
        ))),
    }
}

/// Tags as "a,b" or ["a", "b"]; blanks around commas are dropped.
pub(super) fn tags(value: Value) -> Result<Vec<String>, RestError> {
    let tags: Vec<String> = match value {
        Value::String(text) => text
            .split(',')
            .map(str::trim)
            .filter(|tag| !tag.is_empty())
            .map(str::to_owned)
            .collect(),
        other => string_list("tags", other)?,
    };
    if let Some(long) = tags.iter().find(|tag| tag.chars().count() > LONGEST_TAG) {
        return Err(invalid(format!(
            "tag {long:?} is longer than {LONGEST_TAG} characters"
        )));
    }
    Ok(tags)
}

/// A query string as pairs, repeated keys kept (Heat filters take several
/// values: `?type=A&type=B`).
#[derive(Debug, Default)]
pub struct QueryParams(pub Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = RestError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, RestError> {
        axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)
            .map(|query| QueryParams(query.0))
            .map_err(|error| invalid(format!("the query string is invalid: {error}")))
    }
}

impl QueryParams {
    pub fn first(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    }

    /// Every value of `key`; a comma list counts as several.
    pub fn all(&self, key: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(name, _)| name == key)
            .flat_map(|(_, value)| value.split(','))
            .map(str::trim)
            .filter(|value| !value.is_empty())
            .map(str::to_owned)
            .collect()
    }

    pub fn boolean(&self, key: &str) -> Result<Option<bool>, RestError> {
        self.first(key)
            .map(|text| boolean_text(key, text))
            .transpose()
    }

    pub fn whole_number(&self, key: &str) -> Result<Option<u32>, RestError> {
        self.first(key)
            .map(|text| whole_number(key, &Value::String(text.to_owned())))
            .transpose()
    }

    /// Heat refuses filters it does not know on some lists.
    pub fn refuse_unknown(&self, accepted: &[&str]) -> Result<(), RestError> {
        match self
            .0
            .iter()
            .find(|(name, _)| !accepted.contains(&name.as_str()))
        {
            Some((name, _)) => Err(invalid(format!(
                "unknown query parameter {name:?}: expected {}",
                accepted.join(", ")
            ))),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
pub(super) mod testing {
    use serde_json::{Map, Value};

    use crate::error::RestError;

    pub fn body(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    /// The message of a 400, as the client reads it.
    pub fn message(error: RestError) -> String {
        let debug = format!("{error:?}");
        assert!(debug.contains("InvalidInput"), "{debug}");
        debug.replace("\\\"", "\"")
    }
}

#[cfg(test)]
mod tests {
    use super::testing::message;
    use super::*;

    #[test]
    fn bodies_must_be_json_objects() {
        assert!(parse_body(b"").expect("empty").is_empty());
        assert!(message(parse_body(b"[1]").expect_err("array")).contains("got a list"));
        assert!(message(parse_body(b"{nope").expect_err("bad json")).contains("not valid JSON"));
    }

    #[test]
    fn query_parameters_parse_heat_style() {
        let query = QueryParams(vec![
            ("show_nested".into(), "True".into()),
            ("limit".into(), "10".into()),
            ("type".into(), "A".into()),
            ("type".into(), "B,C".into()),
            ("bad".into(), "x".into()),
        ]);
        assert_eq!(query.boolean("show_nested").expect("bool"), Some(true));
        assert_eq!(query.whole_number("limit").expect("number"), Some(10));
        assert_eq!(query.all("type"), ["A", "B", "C"]);
        assert_eq!(query.boolean("absent").expect("absent"), None);
        let error = query
            .refuse_unknown(&["show_nested", "limit", "type"])
            .expect_err("bad");
        assert!(message(error).contains("\"bad\""));
        let bad_limit = QueryParams(vec![("limit".into(), "-3".into())]);
        assert!(message(bad_limit.whole_number("limit").expect_err("negative")).contains("limit"));
    }
}
