//! Parameter declarations: the `parameters` section schema (type, default,
//! hidden, label, immutable, tags, constraints) and the type coercions Heat
//! applies to supplied values.

use serde::Serialize;
use serde_json::{Map, Number, Value};

use super::constraints::ParameterConstraint;
use super::error::{TemplateError, child_path, describe_value, index_path, type_name};
use super::python_compat::python_str;
use super::version::TemplateVersion;

/// What hidden values are replaced with wherever they are shown.
pub const HIDDEN_VALUE_MASK: &str = "******";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ParameterType {
    String,
    Number,
    Json,
    CommaDelimitedList,
    Boolean,
}

impl ParameterType {
    pub fn parse(text: &str) -> Option<ParameterType> {
        match text {
            "string" => Some(ParameterType::String),
            "number" => Some(ParameterType::Number),
            "json" => Some(ParameterType::Json),
            "comma_delimited_list" => Some(ParameterType::CommaDelimitedList),
            "boolean" => Some(ParameterType::Boolean),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ParameterType::String => "string",
            ParameterType::Number => "number",
            ParameterType::Json => "json",
            ParameterType::CommaDelimitedList => "comma_delimited_list",
            ParameterType::Boolean => "boolean",
        }
    }
}

/// One declared template parameter.
#[derive(Debug, Clone)]
pub struct ParameterSchema {
    pub name: String,
    pub parameter_type: ParameterType,
    pub description: Option<String>,
    pub label: Option<String>,
    /// The template's default, as written (not coerced).
    pub default: Option<Value>,
    pub hidden: bool,
    pub immutable: bool,
    pub tags: Vec<String>,
    pub constraints: Vec<ParameterConstraint>,
}

const PARAMETER_KEYS: [&str; 8] = [
    "type",
    "description",
    "default",
    "constraints",
    "hidden",
    "label",
    "immutable",
    "tags",
];

impl ParameterSchema {
    /// Parses the declaration of parameter `name` found at `path`, and
    /// checks its default against its type and constraints.
    pub(crate) fn parse(
        name: &str,
        definition: &Value,
        version: TemplateVersion,
        path: &str,
    ) -> Result<ParameterSchema, TemplateError> {
        let Value::Object(map) = definition else {
            return Err(TemplateError::new(
                path,
                format!(
                    "parameter {name} must be a map with at least a type, found a {}",
                    type_name(definition)
                ),
            ));
        };
        for key in map.keys() {
            let known = PARAMETER_KEYS.contains(&key.as_str());
            if !known || (key == "tags" && !version.supports_parameter_tags()) {
                let hint = if known {
                    format!(
                        " (tags require heat_template_version 2018-03-02 or later, the template uses {version})"
                    )
                } else {
                    String::new()
                };
                return Err(TemplateError::new(
                    child_path(path, key),
                    format!("unknown key '{key}' in parameter {name}{hint}"),
                ));
            }
        }
        let parameter_type = match map.get("type") {
            Some(Value::String(text)) => ParameterType::parse(text).ok_or_else(|| {
                TemplateError::new(
                    child_path(path, "type"),
                    format!(
                        "unknown parameter type '{text}', expected string, number, json, comma_delimited_list or boolean"
                    ),
                )
            })?,
            None | Some(Value::Null) => {
                return Err(TemplateError::new(
                    path,
                    format!("parameter {name} has no type"),
                ));
            }
            Some(other) => {
                return Err(TemplateError::new(
                    child_path(path, "type"),
                    format!("the parameter type must be a string, found a {}", type_name(other)),
                ));
            }
        };
        let constraints = match map.get("constraints") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(entries)) => {
                let constraints_path = child_path(path, "constraints");
                entries
                    .iter()
                    .enumerate()
                    .map(|(index, entry)| {
                        ParameterConstraint::parse(
                            entry,
                            parameter_type,
                            version,
                            &index_path(&constraints_path, index),
                        )
                    })
                    .collect::<Result<Vec<_>, _>>()?
            }
            Some(other) => {
                return Err(TemplateError::new(
                    child_path(path, "constraints"),
                    format!("constraints must be a list, found a {}", type_name(other)),
                ));
            }
        };
        let schema = ParameterSchema {
            name: name.to_string(),
            parameter_type,
            description: optional_string(map, "description", path)?,
            label: optional_string(map, "label", path)?,
            default: map.get("default").filter(|value| !value.is_null()).cloned(),
            hidden: optional_bool(map, "hidden", path)?,
            immutable: optional_bool(map, "immutable", path)?,
            tags: string_list(map, "tags", path)?,
            constraints,
        };
        if let Some(default) = &schema.default {
            schema.validate_value(default).map_err(|message| {
                TemplateError::new(
                    child_path(path, "default"),
                    format!("the default value is invalid: {message}"),
                )
            })?;
        }
        Ok(schema)
    }

    /// Coerces a supplied value to the parameter's type and checks every
    /// constraint, returning the value templates will see.
    pub fn validate_value(&self, raw: &Value) -> Result<Value, String> {
        let value = coerce_parameter_value(self.parameter_type, raw, self.hidden)?;
        let shown = if self.hidden {
            HIDDEN_VALUE_MASK.to_string()
        } else {
            describe_value(&value)
        };
        for constraint in &self.constraints {
            constraint.check(&value, &shown)?;
        }
        Ok(value)
    }
}

fn optional_string(
    map: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<String>, TemplateError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(TemplateError::new(
            child_path(path, key),
            format!("{key} must be a string, found a {}", type_name(other)),
        )),
    }
}

fn optional_bool(map: &Map<String, Value>, key: &str, path: &str) -> Result<bool, TemplateError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(flag)) => Ok(*flag),
        Some(other) => Err(TemplateError::new(
            child_path(path, key),
            format!(
                "{key} must be true or false, found {}",
                describe_value(other)
            ),
        )),
    }
}

fn string_list(
    map: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Vec<String>, TemplateError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(index, item)| match item {
                Value::String(text) => Ok(text.clone()),
                other => Err(TemplateError::new(
                    index_path(&child_path(path, key), index),
                    format!(
                        "{key} entries must be strings, found a {}",
                        type_name(other)
                    ),
                )),
            })
            .collect(),
        Some(other) => Err(TemplateError::new(
            child_path(path, key),
            format!(
                "{key} must be a list of strings, found a {}",
                type_name(other)
            ),
        )),
    }
}

/// Python's `int(text)` falling back to `float(text)`, which is how Heat
/// reads numbers; non-finite results are refused because JSON cannot hold
/// them.
pub(crate) fn number_from_text(text: &str) -> Option<Number> {
    let trimmed = text.trim();
    if let Ok(integer) = trimmed.parse::<i64>() {
        return Some(integer.into());
    }
    if let Ok(integer) = trimmed.parse::<u64>() {
        return Some(integer.into());
    }
    let lowered = trimmed.to_ascii_lowercase();
    if lowered.contains("inf") || lowered.contains("nan") {
        return None;
    }
    trimmed.parse::<f64>().ok().and_then(Number::from_f64)
}

/// oslo's strict `bool_from_string`: the accepted spellings, any case.
pub(crate) fn boolean_from_text(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "t" | "true" | "on" | "y" | "yes" => Some(true),
        "0" | "f" | "false" | "off" | "n" | "no" => Some(false),
        _ => None,
    }
}

/// Converts a supplied value to the representation templates see for the
/// given type, as Heat does. `hidden` keeps the value out of messages.
pub fn coerce_parameter_value(
    parameter_type: ParameterType,
    raw: &Value,
    hidden: bool,
) -> Result<Value, String> {
    let shown = if hidden {
        HIDDEN_VALUE_MASK.to_string()
    } else {
        describe_value(raw)
    };
    match parameter_type {
        ParameterType::String => match raw {
            Value::Array(_) | Value::Object(_) | Value::Null => Err(format!(
                "a string parameter needs a string, number or boolean, found a {}",
                type_name(raw)
            )),
            other => Ok(Value::String(python_str(other).unwrap_or_default())),
        },
        ParameterType::Number => match raw {
            Value::Number(number) => Ok(Value::Number(number.clone())),
            Value::String(text) => number_from_text(text)
                .map(Value::Number)
                .ok_or_else(|| format!("value {shown} is not a number")),
            other => Err(format!(
                "a number parameter needs a number, found a {}",
                type_name(other)
            )),
        },
        ParameterType::Boolean => {
            let text = match raw {
                Value::Bool(flag) => return Ok(Value::Bool(*flag)),
                Value::String(text) => Some(text.clone()),
                Value::Number(number) if !number.is_f64() => Some(number.to_string()),
                _ => None,
            };
            text.as_deref()
                .and_then(boolean_from_text)
                .map(Value::Bool)
                .ok_or_else(|| {
                    format!(
                        "value {shown} is not a boolean (use true/false, yes/no, on/off, t/f, y/n or 1/0)"
                    )
                })
        }
        ParameterType::CommaDelimitedList => match raw {
            Value::String(text) if text.is_empty() => Ok(Value::Array(Vec::new())),
            Value::String(text) => Ok(Value::Array(
                text.split(',').map(|item| Value::String(item.to_string())).collect(),
            )),
            Value::Array(items) => items
                .iter()
                .map(|item| {
                    python_str(item).map(Value::String).ok_or_else(|| {
                        format!(
                            "comma_delimited_list items must be strings, numbers or booleans, found a {}",
                            type_name(item)
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            other => Err(format!(
                "a comma_delimited_list parameter needs a string like \"a,b\" or a list, found a {}",
                type_name(other)
            )),
        },
        ParameterType::Json => match raw {
            Value::String(text) if text.trim().is_empty() => Ok(Value::Object(Map::new())),
            Value::String(text) => serde_json::from_str(text).map_err(|error| {
                if hidden {
                    "the value is not valid JSON".to_string()
                } else {
                    format!("value {shown} is not valid JSON: {error}")
                }
            }),
            other => Ok(other.clone()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(definition: Value) -> Result<ParameterSchema, TemplateError> {
        ParameterSchema::parse("p", &definition, TemplateVersion::LATEST, "parameters.p")
    }

    #[test]
    fn parses_a_full_declaration() {
        let parsed = schema(json!({
            "type": "string", "description": "d", "label": "L", "default": "a",
            "hidden": true, "immutable": true, "tags": ["t"],
            "constraints": [{"allowed_values": ["a", "b"]}]
        }))
        .unwrap();
        assert_eq!(parsed.parameter_type, ParameterType::String);
        assert_eq!(parsed.label.as_deref(), Some("L"));
        assert!(parsed.hidden && parsed.immutable);
        assert_eq!(parsed.tags, vec!["t"]);
        assert_eq!(parsed.constraints.len(), 1);
    }

    #[test]
    fn rejects_bad_declarations_with_paths() {
        let cases = [
            (json!("string"), "parameters.p", "must be a map"),
            (json!({}), "parameters.p", "has no type"),
            (
                json!({"type": "int"}),
                "parameters.p.type",
                "unknown parameter type 'int'",
            ),
            (
                json!({"type": "string", "secret": true}),
                "parameters.p.secret",
                "unknown key 'secret'",
            ),
            (
                json!({"type": "string", "hidden": "yes"}),
                "parameters.p.hidden",
                "must be true or false",
            ),
            (
                json!({"type": "string", "constraints": {}}),
                "parameters.p.constraints",
                "must be a list",
            ),
            (
                json!({"type": "string", "tags": "x"}),
                "parameters.p.tags",
                "must be a list of strings",
            ),
            (
                json!({"type": "number", "default": "abc"}),
                "parameters.p.default",
                "value \"abc\" is not a number",
            ),
            (
                json!({"type": "string", "default": "c", "constraints": [{"allowed_values": ["a"]}]}),
                "parameters.p.default",
                "the default value is invalid: value \"c\" is not one of the allowed values",
            ),
        ];
        for (definition, path, fragment) in cases {
            let error = schema(definition).unwrap_err();
            assert_eq!(error.path, path, "{error}");
            assert!(error.message.contains(fragment), "{error}");
        }
    }

    #[test]
    fn tags_need_queens() {
        let error = ParameterSchema::parse(
            "p",
            &json!({"type": "string", "tags": []}),
            TemplateVersion::V2017_09_01,
            "parameters.p",
        )
        .unwrap_err();
        assert!(
            error
                .message
                .contains("tags require heat_template_version 2018-03-02")
        );
    }

    #[test]
    fn numbers_are_read_like_python() {
        let coerce = |raw: Value| coerce_parameter_value(ParameterType::Number, &raw, false);
        assert_eq!(coerce(json!("3")).unwrap(), json!(3));
        assert_eq!(coerce(json!(" 3.5 ")).unwrap(), json!(3.5));
        assert_eq!(coerce(json!("1e3")).unwrap(), json!(1000.0));
        assert_eq!(coerce(json!(7)).unwrap(), json!(7));
        assert_eq!(
            coerce(json!("nan")).unwrap_err(),
            "value \"nan\" is not a number"
        );
        assert!(coerce(json!(true)).unwrap_err().contains("found a boolean"));
    }

    #[test]
    fn booleans_accept_oslo_spellings() {
        let coerce = |raw: Value| coerce_parameter_value(ParameterType::Boolean, &raw, false);
        for truthy in ["true", "YES", "On", "t", "y", "1"] {
            assert_eq!(coerce(json!(truthy)).unwrap(), json!(true), "{truthy}");
        }
        for falsy in ["false", "No", "OFF", "f", "n", "0"] {
            assert_eq!(coerce(json!(falsy)).unwrap(), json!(false), "{falsy}");
        }
        assert_eq!(coerce(json!(1)).unwrap(), json!(true));
        assert_eq!(coerce(json!(false)).unwrap(), json!(false));
        assert!(
            coerce(json!("maybe"))
                .unwrap_err()
                .contains("is not a boolean")
        );
        assert!(coerce(json!(2)).is_err());
    }

    #[test]
    fn lists_split_strings_and_stringify_items() {
        let coerce =
            |raw: Value| coerce_parameter_value(ParameterType::CommaDelimitedList, &raw, false);
        assert_eq!(coerce(json!("a,b, c")).unwrap(), json!(["a", "b", " c"]));
        assert_eq!(coerce(json!("")).unwrap(), json!([]));
        assert_eq!(
            coerce(json!([1, "x", true])).unwrap(),
            json!(["1", "x", "True"])
        );
        assert!(coerce(json!([[1]])).unwrap_err().contains("found a list"));
        assert!(coerce(json!(5)).unwrap_err().contains("found a number"));
    }

    #[test]
    fn json_parses_strings_and_keeps_structures() {
        let coerce = |raw: Value| coerce_parameter_value(ParameterType::Json, &raw, false);
        assert_eq!(coerce(json!("{\"a\": [1]}")).unwrap(), json!({"a": [1]}));
        assert_eq!(coerce(json!({"a": 1})).unwrap(), json!({"a": 1}));
        assert_eq!(coerce(json!(["x"])).unwrap(), json!(["x"]));
        assert_eq!(coerce(json!("")).unwrap(), json!({}));
        assert!(
            coerce(json!("{nope"))
                .unwrap_err()
                .contains("is not valid JSON")
        );
    }

    #[test]
    fn strings_render_scalars_like_python() {
        let coerce = |raw: Value| coerce_parameter_value(ParameterType::String, &raw, false);
        assert_eq!(coerce(json!(5)).unwrap(), json!("5"));
        assert_eq!(coerce(json!(true)).unwrap(), json!("True"));
        assert!(coerce(json!({"a": 1})).unwrap_err().contains("found a map"));
    }

    #[test]
    fn hidden_values_are_not_echoed() {
        let secret = schema(json!({"type": "string", "hidden": true,
            "constraints": [{"length": {"min": 8}}]}))
        .unwrap();
        let message = secret.validate_value(&json!("hunter2")).unwrap_err();
        assert!(message.contains("******"));
        assert!(!message.contains("hunter2"));
        let message =
            coerce_parameter_value(ParameterType::Number, &json!("hunter2"), true).unwrap_err();
        assert!(!message.contains("hunter2"));
    }
}
