//! Turns template and environment text (JSON or YAML) into a
//! `serde_json::Value`, enforcing the size and shape limits that keep
//! hostile input from exhausting memory or the stack.

use serde_json::{Map, Number, Value};
use serde_yaml_ng::Value as YamlValue;

use super::error::{TemplateError, child_path, index_path};

/// Heat's default `max_template_size`; the same limit applies to
/// environments.
pub const MAX_DOCUMENT_BYTES: usize = 512 * 1024;

/// Deeper nesting than this is refused. Both parsers already stop at 128
/// levels; the check also protects values built in code.
pub(crate) const MAX_NESTING_DEPTH: usize = 128;

/// Parses JSON or YAML text into a map. `kind` names the document in
/// messages ("template", "environment").
pub fn parse_document(text: &str, kind: &str) -> Result<Map<String, Value>, TemplateError> {
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(TemplateError::new(
            "",
            format!(
                "the {kind} is too large ({} bytes, the limit is {MAX_DOCUMENT_BYTES})",
                text.len()
            ),
        ));
    }
    // Like Heat, JSON is tried first: its errors and numbers are exact, and
    // YAML then covers everything else.
    let value = match serde_json::from_str::<Value>(text) {
        Ok(value) => value,
        Err(_) => parse_yaml(text, kind)?,
    };
    match value {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        other => Err(TemplateError::new(
            "",
            format!(
                "the {kind} must be a JSON object or YAML mapping, found a {}",
                super::error::type_name(&other)
            ),
        )),
    }
}

fn parse_yaml(text: &str, kind: &str) -> Result<Value, TemplateError> {
    let mut yaml: YamlValue = serde_yaml_ng::from_str(text).map_err(|error| {
        TemplateError::new("", format!("the {kind} is not valid JSON or YAML: {error}"))
    })?;
    // PyYAML, which Heat uses, honours `<<` merge keys.
    yaml.apply_merge().map_err(|error| {
        TemplateError::new(
            "",
            format!("the {kind} has an invalid YAML merge key: {error}"),
        )
    })?;
    yaml_to_json(&yaml, "", 0)
}

fn yaml_to_json(yaml: &YamlValue, path: &str, depth: usize) -> Result<Value, TemplateError> {
    if depth > MAX_NESTING_DEPTH {
        return Err(TemplateError::new(
            path,
            format!("nesting is deeper than {MAX_NESTING_DEPTH} levels"),
        ));
    }
    match yaml {
        YamlValue::Null => Ok(Value::Null),
        YamlValue::Bool(flag) => Ok(Value::Bool(*flag)),
        YamlValue::Number(number) => yaml_number(number, path),
        YamlValue::String(text) => Ok(Value::String(text.clone())),
        YamlValue::Sequence(items) => items
            .iter()
            .enumerate()
            .map(|(index, item)| yaml_to_json(item, &index_path(path, index), depth + 1))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        YamlValue::Mapping(mapping) => {
            let mut map = Map::new();
            for (key, item) in mapping {
                let key = yaml_key(key, path)?;
                let item_path = child_path(path, &key);
                map.insert(key, yaml_to_json(item, &item_path, depth + 1)?);
            }
            Ok(Value::Object(map))
        }
        YamlValue::Tagged(tagged) => Err(TemplateError::new(
            path,
            format!("the YAML tag {} is not supported", tagged.tag),
        )),
    }
}

/// JSON keys are strings; scalar YAML keys (`1:`, `true:`) become their
/// text, and anything else is refused.
fn yaml_key(key: &YamlValue, path: &str) -> Result<String, TemplateError> {
    match key {
        YamlValue::String(text) => Ok(text.clone()),
        YamlValue::Number(number) => Ok(number.to_string()),
        YamlValue::Bool(flag) => Ok(flag.to_string()),
        YamlValue::Null => Ok("null".to_string()),
        _ => Err(TemplateError::new(
            path,
            "map keys must be strings, numbers or booleans",
        )),
    }
}

fn yaml_number(number: &serde_yaml_ng::Number, path: &str) -> Result<Value, TemplateError> {
    if let Some(integer) = number.as_i64() {
        return Ok(Value::Number(integer.into()));
    }
    if let Some(integer) = number.as_u64() {
        return Ok(Value::Number(integer.into()));
    }
    number
        .as_f64()
        .and_then(Number::from_f64)
        .map(Value::Number)
        .ok_or_else(|| TemplateError::new(path, format!("the number {number} is not finite")))
}

/// Refuses a top-level section of `document` that is not one of `known`
/// (a HOT template's sections, or a CloudFormation template's).
pub(crate) fn only_known_sections(
    document: &Map<String, Value>,
    known: &[&str],
) -> Result<(), TemplateError> {
    match document.keys().find(|key| !known.contains(&key.as_str())) {
        // Heat's words (clients and its suites compare them).
        Some(key) => Err(TemplateError::new(
            "",
            format!("The template section is invalid: {key}"),
        )),
        None => Ok(()),
    }
}

/// Measures nesting depth without recursion, so values of any depth can be
/// checked safely.
pub(crate) fn nesting_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(value, 1usize)];
    while let Some((current, depth)) = pending.pop() {
        deepest = deepest.max(depth);
        match current {
            Value::Array(items) => pending.extend(items.iter().map(|item| (item, depth + 1))),
            Value::Object(map) => pending.extend(map.values().map(|item| (item, depth + 1))),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_json_and_yaml() {
        let from_json = parse_document(r#"{"a": [1, 2.5]}"#, "template").unwrap();
        assert_eq!(Value::Object(from_json), json!({"a": [1, 2.5]}));
        let from_yaml = parse_document("a:\n  - 1\n  - x\n", "template").unwrap();
        assert_eq!(Value::Object(from_yaml), json!({"a": [1, "x"]}));
    }

    #[test]
    fn unquoted_dates_stay_strings() {
        let map = parse_document("heat_template_version: 2016-10-14", "template").unwrap();
        assert_eq!(map["heat_template_version"], json!("2016-10-14"));
    }

    #[test]
    fn scalar_keys_become_strings() {
        let map = parse_document("1: a\ntrue: b\n", "template").unwrap();
        assert_eq!(Value::Object(map), json!({"1": "a", "true": "b"}));
    }

    #[test]
    fn complex_keys_are_rejected_with_their_path() {
        let error = parse_document("outer:\n  ? [a, b]\n  : x\n", "template").unwrap_err();
        assert_eq!(error.path, "outer");
        assert!(error.message.contains("map keys must be strings"));
    }

    #[test]
    fn merge_keys_are_applied() {
        let map = parse_document("base: &b {x: 1}\nd:\n  <<: *b\n  y: 2\n", "template").unwrap();
        assert_eq!(map["d"], json!({"x": 1, "y": 2}));
    }

    #[test]
    fn tags_and_non_finite_numbers_are_rejected() {
        let error = parse_document("a: !custom x", "template").unwrap_err();
        assert_eq!(error.path, "a");
        assert!(error.message.contains("YAML tag !custom"));
        let error = parse_document("a: .inf", "template").unwrap_err();
        assert!(error.message.contains("not finite"));
    }

    #[test]
    fn non_maps_and_syntax_errors_are_rejected() {
        let error = parse_document("[1, 2]", "template").unwrap_err();
        assert_eq!(
            error.message,
            "the template must be a JSON object or YAML mapping, found a list"
        );
        let error = parse_document("a: [1, 2", "environment").unwrap_err();
        assert!(
            error
                .message
                .starts_with("the environment is not valid JSON or YAML")
        );
        assert!(parse_document("", "template").unwrap().is_empty());
    }

    #[test]
    fn adversarial_documents_are_refused_without_panicking() {
        let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
        assert!(parse_document(&deep, "template").is_err());
        let deep_yaml = format!("a: {}{}", "{b: ".repeat(300), "}".repeat(300));
        assert!(parse_document(&deep_yaml, "template").is_err());
        let laughs = "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n\
            c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n\
            e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n\
            g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n";
        assert!(parse_document(laughs, "template").is_err());
        let huge = format!("a: \"{}\"", "x".repeat(MAX_DOCUMENT_BYTES));
        let error = parse_document(&huge, "template").unwrap_err();
        assert!(error.message.contains("too large"));
    }

    #[test]
    fn nesting_depth_is_measured_iteratively() {
        assert_eq!(nesting_depth(&json!(1)), 1);
        assert_eq!(nesting_depth(&json!({"a": [[1]]})), 4);
    }
}
