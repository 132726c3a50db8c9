//! Functions that read from the stack: `get_param`, `get_resource`,
//! `get_attr`, `get_file` and `resource_facade`.

use serde_json::Value;

use super::super::error::{TemplateError, describe_value, type_name};
use super::super::version::EvaluationMode;
use super::{Resolver, fail};

impl Resolver<'_> {
    pub(super) fn get_param(
        &self,
        args: &Value,
        path: &str,
        mode: EvaluationMode,
    ) -> Result<Value, TemplateError> {
        let args = self.resolve_in(args, path, mode)?;
        let (name, components) = match &args {
            Value::String(name) if !name.is_empty() => (name, &[][..]),
            Value::Array(items) => match items.split_first() {
                Some((Value::String(name), rest)) => (name, rest),
                Some((other, _)) => {
                    return fail(
                        path,
                        format!(
                            "the parameter name in get_param must be a string, found {}",
                            describe_value(other)
                        ),
                    );
                }
                None => return fail(path, "get_param needs a parameter name"),
            },
            Value::String(_) | Value::Null => {
                return fail(path, "get_param needs a parameter name");
            }
            other => {
                return fail(
                    path,
                    format!(
                        "get_param takes a parameter name or a list [name, key or index, ...], found a {}",
                        type_name(other)
                    ),
                );
            }
        };
        let Some(value) = self.context.parameter(name) else {
            // Heat's words (UserParameterMissing).
            return fail(path, format!("The Parameter ({name}) was not provided."));
        };
        // Heat yields an empty string when the path leads nowhere.
        Ok(traverse_parameter(&value, components).unwrap_or_else(|| Value::String(String::new())))
    }

    pub(super) fn get_resource(&self, args: &Value, path: &str) -> Result<Value, TemplateError> {
        match self.resolve_value(args, path)? {
            Value::String(name) => self
                .context
                .resource_reference(&name)
                .map_err(|message| TemplateError::new(path, message)),
            other => fail(
                path,
                format!(
                    "get_resource takes a resource name, found {}",
                    describe_value(&other)
                ),
            ),
        }
    }

    pub(super) fn get_attr(&self, args: &Value, path: &str) -> Result<Value, TemplateError> {
        let usage = "get_attr takes a list [resource_name, attribute_name, key or index, ...]";
        let Value::Array(items) = self.resolve_value(args, path)? else {
            return fail(path, usage);
        };
        let Some((Value::String(resource), rest)) = items.split_first() else {
            return fail(
                path,
                format!("{usage}, and the resource name must be a string"),
            );
        };
        match rest.split_first() {
            None if self.version.supports_get_attr_all_attributes() => self
                .context
                .resource_attributes(resource)
                .map_err(|message| TemplateError::new(path, message)),
            None => fail(
                path,
                format!(
                    "{usage}; the attribute name may only be omitted from heat_template_version 2015-10-15"
                ),
            ),
            Some((Value::String(attribute), selection)) => {
                if let Some(bad) = selection
                    .iter()
                    .find(|component| !matches!(component, Value::String(_) | Value::Number(_)))
                {
                    return fail(
                        path,
                        format!(
                            "get_attr path components must be keys or indexes, found {}",
                            describe_value(bad)
                        ),
                    );
                }
                self.context
                    .resource_attribute(resource, attribute, selection)
                    .map_err(|message| TemplateError::new(path, message))
            }
            Some((other, _)) => fail(
                path,
                format!(
                    "the attribute name in get_attr must be a string, found {}",
                    describe_value(other)
                ),
            ),
        }
    }

    pub(super) fn get_file(&self, args: &Value, path: &str) -> Result<Value, TemplateError> {
        match self.resolve_value(args, path)? {
            Value::String(name) => self.context.file(&name).map(Value::String).ok_or_else(|| {
                TemplateError::new(
                    path,
                    format!("get_file: no file named '{name}' was supplied with the stack"),
                )
            }),
            other => fail(
                path,
                format!(
                    "get_file takes a file name, found {}",
                    describe_value(&other)
                ),
            ),
        }
    }

    pub(super) fn resource_facade(&self, args: &Value, path: &str) -> Result<Value, TemplateError> {
        match self.resolve_value(args, path)? {
            Value::String(attribute)
                if ["metadata", "deletion_policy", "update_policy"]
                    .contains(&attribute.as_str()) =>
            {
                self.context
                    .resource_facade(&attribute)
                    .map_err(|message| TemplateError::new(path, message))
            }
            other => fail(
                path,
                format!(
                    "resource_facade takes metadata, deletion_policy or update_policy, found {}",
                    describe_value(&other)
                ),
            ),
        }
    }
}

/// Heat's `get_param` path walk: map keys, list (and string) indexes
/// including negative ones and numeric strings. `None` when it fails.
fn traverse_parameter(value: &Value, components: &[Value]) -> Option<Value> {
    let mut current = value.clone();
    for component in components {
        current = match (&current, component) {
            (Value::Object(map), Value::String(key)) => map.get(key)?.clone(),
            (Value::Object(map), Value::Number(number)) if number.is_i64() || number.is_u64() => {
                map.get(&number.to_string())?.clone()
            }
            (Value::Array(items), key) => {
                let index = python_index(key, items.len())?;
                items.get(index)?.clone()
            }
            (Value::String(text), key) => {
                let characters: Vec<char> = text.chars().collect();
                let index = python_index(key, characters.len())?;
                Value::String(characters.get(index)?.to_string())
            }
            _ => return None,
        };
    }
    Some(current)
}

/// Converts an index the way Python indexing does: integers or integer
/// strings, negative counting from the end.
fn python_index(key: &Value, length: usize) -> Option<usize> {
    let index = match key {
        Value::Number(number) => number.as_i64()?,
        Value::String(text) => text.trim().parse::<i64>().ok()?,
        _ => return None,
    };
    let length = i64::try_from(length).ok()?;
    let absolute = if index < 0 { length + index } else { index };
    usize::try_from(absolute).ok()
}

#[cfg(test)]
mod tests {
    use super::super::super::version::TemplateVersion;
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn get_param_returns_values_and_walks_paths() {
        assert_eq!(ok(json!({"get_param": "name"})), json!("web"));
        assert_eq!(ok(json!({"get_param": "count"})), json!(3));
        assert_eq!(
            ok(json!({"get_param": ["config", "db", "hosts", 1]})),
            json!("h2")
        );
        assert_eq!(
            ok(json!({"get_param": ["config", "db", "hosts", "0"]})),
            json!("h1")
        );
        assert_eq!(ok(json!({"get_param": ["zones", -1]})), json!("az2"));
        assert_eq!(ok(json!({"get_param": ["name", 0]})), json!("w"));
        assert_eq!(
            ok(json!({"get_param": ["config", "db", "hosts", {"str_split": [",", "1,0", 0]}]})),
            json!("h2")
        );
    }

    #[test]
    fn get_param_paths_that_lead_nowhere_give_empty_strings() {
        assert_eq!(ok(json!({"get_param": ["config", "missing"]})), json!(""));
        assert_eq!(ok(json!({"get_param": ["zones", 5]})), json!(""));
        assert_eq!(ok(json!({"get_param": ["count", 0]})), json!(""));
        assert_eq!(ok(json!({"get_param": ["zones", "x"]})), json!(""));
    }

    #[test]
    fn get_param_bad_input() {
        assert_eq!(
            err(json!({"get_param": "nope"})).message,
            "The Parameter (nope) was not provided."
        );
        assert_eq!(
            err(json!({"get_param": []})).message,
            "get_param needs a parameter name"
        );
        assert_eq!(
            err(json!({"get_param": ""})).message,
            "get_param needs a parameter name"
        );
        assert!(
            err(json!({"get_param": [1]}))
                .message
                .contains("must be a string")
        );
        let error = err(json!({"get_param": {"a": 1}}));
        assert_eq!(error.path, "p.get_param");
        assert!(error.message.contains("found a map"));
    }

    #[test]
    fn get_resource_returns_references() {
        assert_eq!(ok(json!({"get_resource": "server"})), json!("uuid-1"));
        assert_eq!(ok(json!({"get_resource": "pending"})), json!(null));
        assert_eq!(
            err(json!({"get_resource": "ghost"})).message,
            "unknown resource 'ghost'"
        );
        assert!(
            err(json!({"get_resource": ["server"]}))
                .message
                .contains("takes a resource name")
        );
    }

    #[test]
    fn get_attr_reads_attributes_and_paths() {
        assert_eq!(
            ok(json!({"get_attr": ["server", "first_address"]})),
            json!("10.0.0.5")
        );
        assert_eq!(
            ok(json!({"get_attr": ["server", "networks", "private", 1]})),
            json!("fd00::5")
        );
        assert_eq!(
            ok(json!({"get_attr": ["server", "networks", "public"]})),
            json!(null)
        );
        assert_eq!(
            ok(json!({"get_attr": ["server"]}))["first_address"],
            json!("10.0.0.5")
        );
    }

    #[test]
    fn get_attr_bad_input() {
        assert!(
            err(json!({"get_attr": "server"}))
                .message
                .starts_with("get_attr takes a list")
        );
        assert!(
            err(json!({"get_attr": []}))
                .message
                .contains("resource name must be a string")
        );
        assert!(
            err(json!({"get_attr": ["server", 5]}))
                .message
                .contains("attribute name in get_attr must be a string")
        );
        assert!(
            err(json!({"get_attr": ["server", "networks", [1]]}))
                .message
                .contains("keys or indexes")
        );
        assert_eq!(
            err(json!({"get_attr": ["server", "nope"]})).message,
            "resource 'server' has no attribute 'nope'"
        );
        let old = at_version(TemplateVersion::V2015_04_30);
        let error = resolve_with(json!({"get_attr": ["server"]}), &old).unwrap_err();
        assert!(
            error
                .message
                .contains("may only be omitted from heat_template_version 2015-10-15")
        );
    }

    #[test]
    fn get_file_returns_contents() {
        assert_eq!(
            ok(json!({"get_file": "script.sh"})),
            json!("#!/bin/sh\necho hi\n")
        );
        assert!(
            err(json!({"get_file": "missing.sh"}))
                .message
                .contains("no file named 'missing.sh'")
        );
        assert!(
            err(json!({"get_file": 3}))
                .message
                .contains("takes a file name")
        );
    }

    #[test]
    fn resource_facade_checks_its_argument() {
        assert!(
            err(json!({"resource_facade": "metadata"}))
                .message
                .contains("only available inside a template resource")
        );
        assert!(
            err(json!({"resource_facade": "properties"}))
                .message
                .contains("takes metadata, deletion_policy or update_policy")
        );
    }
}
