//! List and map functions: `map_merge`, `map_replace`,
//! `list_concat`, `list_concat_unique` and `filter`, plus the value
//! equality they (and `equals`/`contains`) share.

use std::collections::HashSet;
use std::fmt::Write;

use serde_json::{Map, Value};

use super::super::error::{TemplateError, describe_value, type_name};
use super::super::python_compat::{python_json_dumps, python_str};
use super::{Resolver, fail};

impl Resolver<'_> {
    pub(super) fn map_merge(&self, args: &Value, path: &str) -> Result<Value, TemplateError> {
        let Value::Array(items) = self.resolve_value(args, path)? else {
            return fail(path, "map_merge takes a list of maps");
        };
        let mut merged = Map::new();
        for (index, item) in items.iter().enumerate() {
            match item {
                Value::Null => {}
                Value::Object(map) => {
                    for (key, value) in map {
                        merged.insert(key.clone(), value.clone());
                    }
                }
                other => {
                    return fail(
                        path,
                        format!(
                            "map_merge merges maps, item {index} is a {}",
                            type_name(other)
                        ),
                    );
                }
            }
        }
        Ok(Value::Object(merged))
    }

    pub(super) fn map_replace(&self, args: &Value, path: &str) -> Result<Value, TemplateError> {
        let usage = "map_replace takes a list [map, {keys: {old: new}, values: {old: new}}]";
        let Value::Array(items) = self.resolve_value(args, path)? else {
            return fail(path, usage);
        };
        let [input, replacements] = items.as_slice() else {
            return fail(path, usage);
        };
        let empty = Map::new();
        let as_map = |value: &'_ Value, what: &str| -> Result<Map<String, Value>, TemplateError> {
            match value {
                Value::Null => Ok(empty.clone()),
                Value::Object(map) => Ok(map.clone()),
                other => fail(
                    path,
                    format!(
                        "{usage}; {what} must be a map, found a {}",
                        type_name(other)
                    ),
                ),
            }
        };
        let input = as_map(input, "the input")?;
        let replacements = as_map(replacements, "the replacements")?;
        if let Some(unknown) = replacements
            .keys()
            .find(|key| *key != "keys" && *key != "values")
        {
            return fail(
                path,
                format!("{usage}; unknown replacement section '{unknown}'"),
            );
        }
        let key_map = as_map(replacements.get("keys").unwrap_or(&Value::Null), "keys")?;
        let value_map = as_map(replacements.get("values").unwrap_or(&Value::Null), "values")?;

        let mut output = Map::new();
        for (key, value) in &input {
            let new_key = match key_map.get(key) {
                None | Some(Value::Null) => key.clone(),
                Some(replacement) => {
                    let Some(replacement) = python_str(replacement)
                        .filter(|_| !replacement.is_array() && !replacement.is_object())
                    else {
                        return fail(
                            path,
                            format!(
                                "map_replace key replacements must be strings, {key} maps to a {}",
                                type_name(replacement)
                            ),
                        );
                    };
                    if replacement != *key && input.contains_key(&replacement) {
                        return fail(
                            path,
                            format!(
                                "map_replace key replacement {replacement} collides with a key in the input map"
                            ),
                        );
                    }
                    if output.contains_key(&replacement) {
                        return fail(
                            path,
                            format!(
                                "map_replace key replacement {replacement} collides with a key in the output map"
                            ),
                        );
                    }
                    replacement
                }
            };
            // Only hashable values can be looked up; strings and integers
            // are what YAML keys can match.
            let lookup_key = match value {
                Value::String(text) => Some(text.clone()),
                Value::Number(number) if !number.is_f64() => Some(number.to_string()),
                _ => None,
            };
            let new_value = lookup_key
                .and_then(|lookup| value_map.get(&lookup).cloned())
                .unwrap_or_else(|| value.clone());
            output.insert(new_key, new_value);
        }
        Ok(Value::Object(output))
    }

    pub(super) fn list_concat(
        &self,
        args: &Value,
        path: &str,
        unique: bool,
    ) -> Result<Value, TemplateError> {
        let name = if unique {
            "list_concat_unique"
        } else {
            "list_concat"
        };
        let Value::Array(items) = self.resolve_value(args, path)? else {
            return fail(path, format!("{name} takes a list of lists"));
        };
        let mut output = Vec::new();
        for (index, item) in items.iter().enumerate() {
            match item {
                Value::Null => {}
                Value::Array(list) => output.extend(list.iter().cloned()),
                other => {
                    return fail(
                        path,
                        format!(
                            "{name} concatenates lists, item {index} is {}",
                            describe_value(other)
                        ),
                    );
                }
            }
        }
        if unique {
            let mut seen = HashSet::new();
            output.retain(|item| seen.insert(canonical_key(item)));
        }
        Ok(Value::Array(output))
    }

    pub(super) fn filter(&self, args: &Value, path: &str) -> Result<Value, TemplateError> {
        let Value::Array(arguments) = args else {
            return fail(path, "filter takes a list [values_to_remove, list]");
        };
        let [values, sequence] = arguments.as_slice() else {
            return fail(
                path,
                format!(
                    "filter takes a list [values_to_remove, list], found {} arguments",
                    arguments.len()
                ),
            );
        };
        let sequence = self.resolve_value(sequence, &super::super::error::index_path(path, 1))?;
        if is_falsy(&sequence) {
            return Ok(sequence);
        }
        let Value::Array(sequence) = sequence else {
            return fail(
                path,
                format!("filter works on lists, found a {}", type_name(&sequence)),
            );
        };
        let values = self.resolve_value(values, &super::super::error::index_path(path, 0))?;
        if is_falsy(&values) {
            return Ok(Value::Array(sequence));
        }
        let Value::Array(values) = values else {
            return fail(
                path,
                format!(
                    "filter removes a list of values, found a {}",
                    type_name(&values)
                ),
            );
        };
        let removed: HashSet<String> = values.iter().map(canonical_key).collect();
        Ok(Value::Array(
            sequence
                .into_iter()
                .filter(|item| !removed.contains(&canonical_key(item)))
                .collect(),
        ))
    }
}

/// Python's truthiness for JSON values.
fn is_falsy(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(flag) => !flag,
        Value::Number(number) => number.as_f64() == Some(0.0),
        Value::String(text) => text.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
    }
}

/// A text form under which two values are equal exactly when Python's `==`
/// would say so for JSON data (so `1` and `1.0` match); used for fast
/// membership tests.
pub(super) fn canonical_key(value: &Value) -> String {
    let mut output = String::new();
    write_canonical(value, &mut output);
    output
}

fn write_canonical(value: &Value, output: &mut String) {
    match value {
        Value::Number(number) => match number.as_f64() {
            Some(float) if number.is_f64() && float.fract() == 0.0 && float.abs() < 9.0e15 => {
                let _ = write!(output, "{}", float as i64);
            }
            _ => output.push_str(&number.to_string()),
        },
        Value::Array(items) => {
            output.push('[');
            for item in items {
                write_canonical(item, output);
                output.push(',');
            }
            output.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            output.push('{');
            for key in keys {
                output.push_str(&python_json_dumps(&Value::String(key.clone())));
                output.push(':');
                if let Some(item) = map.get(key) {
                    write_canonical(item, output);
                }
                output.push(',');
            }
            output.push('}');
        }
        scalar => output.push_str(&scalar.to_string()),
    }
}

/// Python-style equality of two JSON values.
pub(super) fn values_equal(left: &Value, right: &Value) -> bool {
    canonical_key(left) == canonical_key(right)
}

/// Copies `template` replacing every loop variable in strings and map
/// keys, applying the variables one after the other like `str.replace`.
#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use serde_json::json;

    #[test]
    fn map_merge_merges_in_order() {
        assert_eq!(
            ok(json!({"map_merge": [{"a": 1, "b": 2}, null, {"a": 3, "c": 4}]})),
            json!({"a": 3, "b": 2, "c": 4})
        );
        assert!(
            err(json!({"map_merge": {"a": 1}}))
                .message
                .contains("takes a list of maps")
        );
        assert_eq!(
            err(json!({"map_merge": [{}, [1]]})).message,
            "map_merge merges maps, item 1 is a list"
        );
    }

    #[test]
    fn map_replace_renames_keys_and_values() {
        assert_eq!(
            ok(
                json!({"map_replace": [{"k1": "v1", "k2": "v2", "n": 1}, {"keys": {"k1": "K1"}, "values": {"v2": "V2", "1": "one"}}]})
            ),
            json!({"K1": "v1", "k2": "V2", "n": "one"})
        );
        assert_eq!(ok(json!({"map_replace": [{"a": 1}, {}]})), json!({"a": 1}));
    }

    #[test]
    fn map_replace_bad_input() {
        assert!(
            err(json!({"map_replace": [{"a": 1}]}))
                .message
                .starts_with("map_replace takes a list")
        );
        assert!(
            err(json!({"map_replace": [[1], {}]}))
                .message
                .contains("the input must be a map")
        );
        assert!(
            err(json!({"map_replace": [{}, {"kees": {}}]}))
                .message
                .contains("unknown replacement section 'kees'")
        );
        assert!(
            err(json!({"map_replace": [{"a": 1, "b": 2}, {"keys": {"a": "b"}}]}))
                .message
                .contains("collides with a key in the input map")
        );
        assert!(
            err(json!({"map_replace": [{"a": 1, "b": 2}, {"keys": {"a": "c", "b": "c"}}]}))
                .message
                .contains("collides with a key in the output map")
        );
        assert!(
            err(json!({"map_replace": [{"a": 1}, {"keys": {"a": [1]}}]}))
                .message
                .contains("key replacements must be strings")
        );
    }

    #[test]
    fn list_concat_and_unique() {
        assert_eq!(
            ok(json!({"list_concat": [[1, 2], null, [2, "a"]]})),
            json!([1, 2, 2, "a"])
        );
        assert_eq!(
            ok(json!({"list_concat_unique": [[1, {"a": 1}], [1.0, {"a": 1}, "1"]]})),
            json!([1, {"a": 1}, "1"])
        );
        assert!(
            err(json!({"list_concat": "ab"}))
                .message
                .contains("takes a list of lists")
        );
        assert_eq!(
            err(json!({"list_concat": [[1], "x"]})).message,
            "list_concat concatenates lists, item 1 is \"x\""
        );
        assert!(
            err(json!({"list_concat_unique": [{"a": 1}]}))
                .message
                .starts_with("list_concat_unique concatenates lists")
        );
    }

    #[test]
    fn filter_removes_values() {
        assert_eq!(
            ok(json!({"filter": [[null, "b"], ["a", null, "b", "c"]]})),
            json!(["a", "c"])
        );
        assert_eq!(ok(json!({"filter": [[], ["a"]]})), json!(["a"]));
        assert_eq!(ok(json!({"filter": [["a"], []]})), json!([]));
        assert_eq!(ok(json!({"filter": [["a"], null]})), json!(null));
    }

    #[test]
    fn filter_bad_input() {
        assert!(
            err(json!({"filter": "a"}))
                .message
                .starts_with("filter takes a list")
        );
        assert!(
            err(json!({"filter": [["a"]]}))
                .message
                .contains("found 1 arguments")
        );
        assert!(
            err(json!({"filter": [["a"], "abc"]}))
                .message
                .contains("works on lists")
        );
        assert!(
            err(json!({"filter": ["a", ["a"]]}))
                .message
                .contains("removes a list of values")
        );
    }

    #[test]
    fn equality_follows_python() {
        assert!(values_equal(&json!(1), &json!(1.0)));
        assert!(values_equal(&json!({"a": [1, 2]}), &json!({"a": [1.0, 2]})));
        assert!(!values_equal(&json!("1"), &json!(1)));
        assert!(!values_equal(&json!(true), &json!("true")));
    }
}
