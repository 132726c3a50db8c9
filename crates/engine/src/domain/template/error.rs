//! The single error type of the template module and the helpers that build
//! the dotted template paths every error points at.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

/// An error found in a template, environment or parameter value.
///
/// `path` locates the offending input inside the document, for example
/// `resources.server.properties.flavor`; it is empty when the error concerns
/// the document as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TemplateError {
    pub path: String,
    pub message: String,
}

impl TemplateError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for TemplateError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            formatter.write_str(&self.message)
        } else {
            write!(formatter, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for TemplateError {}

/// Appends a map key to a path: `resources` + `server` → `resources.server`.
pub(crate) fn child_path(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// Appends a list index to a path: `depends_on` + 1 → `depends_on[1]`.
pub(crate) fn index_path(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}

/// Names the JSON type of a value the way error messages refer to it.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

/// Renders a value for an error message, shortened so that a huge input
/// cannot produce a huge message.
pub(crate) fn describe_value(value: &Value) -> String {
    const MAX_CHARS: usize = 80;
    let text = value.to_string();
    if text.chars().count() <= MAX_CHARS {
        text
    } else {
        let shortened: String = text.chars().take(MAX_CHARS).collect();
        format!("{shortened}...")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn display_prefixes_the_path_when_present() {
        let error = TemplateError::new("resources.server.properties.flavor", "bad flavor");
        assert_eq!(
            error.to_string(),
            "resources.server.properties.flavor: bad flavor"
        );
    }

    #[test]
    fn display_is_just_the_message_without_a_path() {
        assert_eq!(TemplateError::new("", "empty").to_string(), "empty");
    }

    #[test]
    fn paths_are_joined_with_dots_and_brackets() {
        assert_eq!(child_path("", "resources"), "resources");
        assert_eq!(child_path("resources", "a"), "resources.a");
        assert_eq!(index_path("depends_on", 2), "depends_on[2]");
    }

    #[test]
    fn long_values_are_shortened_in_messages() {
        let long = json!("x".repeat(500));
        let described = describe_value(&long);
        assert!(described.ends_with("..."));
        assert_eq!(described.chars().count(), 83);
        assert_eq!(describe_value(&json!([1, 2])), "[1,2]");
    }
}
