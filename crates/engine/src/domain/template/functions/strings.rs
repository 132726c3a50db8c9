//! String functions: `str_replace` (and its strict variants), `list_join`
//! and `str_split`.

use serde_json::{Map, Value};

use super::super::error::{TemplateError, child_path, describe_value, type_name};
use super::super::python_compat::{python_json_dumps, python_str};
use super::{Resolver, fail};

/// Functions building strings refuse results larger than this, so a
/// template cannot expand into gigabytes.
pub(super) const MAX_STRING_BYTES: usize = 16 * 1024 * 1024;

/// Upper bound on placeholders × template bytes for one `str_replace`.
const MAX_REPLACE_WORK: usize = 1 << 30;

/// The three flavours of `str_replace`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Strictness {
    /// `str_replace`: unused params are fine, null params become "".
    Lenient,
    /// `str_replace_strict`: every param must occur in the template.
    Strict,
    /// `str_replace_vstrict`: additionally no param may be null or empty.
    VeryStrict,
}

impl Strictness {
    fn function_name(self) -> &'static str {
        match self {
            Strictness::Lenient => "str_replace",
            Strictness::Strict => "str_replace_strict",
            Strictness::VeryStrict => "str_replace_vstrict",
        }
    }
}

/// A piece of the template being rewritten: original text, or the
/// replacement for the placeholder at an index. Replacements are never
/// scanned again, exactly as in Heat.
enum Piece<'t> {
    Literal(&'t str),
    Replacement(usize),
}

impl Resolver<'_> {
    pub(super) fn str_replace(
        &self,
        args: &Value,
        path: &str,
        strictness: Strictness,
    ) -> Result<Value, TemplateError> {
        let name = strictness.function_name();
        let usage = format!("{name} takes a map with a template string and a params map");
        let Value::Object(arguments) = args else {
            return fail(path, usage);
        };
        let (Some(template), Some(params)) = (arguments.get("template"), arguments.get("params"))
        else {
            return fail(path, format!("{usage}; template or params is missing"));
        };
        let template = match self.resolve_value(template, &child_path(path, "template"))? {
            Value::String(text) => text,
            other => {
                return fail(
                    path,
                    format!(
                        "the {name} template must be a string, found a {}",
                        type_name(&other)
                    ),
                );
            }
        };
        let Value::Object(params) = self.resolve_value(params, &child_path(path, "params"))? else {
            return fail(path, format!("the {name} params must be a map"));
        };
        let mut placeholders: Vec<(&String, String)> = Vec::with_capacity(params.len());
        for (key, value) in &params {
            if key.is_empty() {
                return fail(path, format!("{name} placeholders cannot be empty strings"));
            }
            placeholders.push((key, self.replacement_text(key, value, strictness, path)?));
        }
        // Longer placeholders win over shorter ones they contain; ties go to
        // the lexicographically smaller one, as in Heat.
        placeholders.sort_by(|(left, _), (right, _)| {
            right
                .chars()
                .count()
                .cmp(&left.chars().count())
                .then_with(|| left.cmp(right))
        });

        // Each placeholder is searched for in the whole template; refuse
        // combinations that would take unreasonably long.
        if placeholders.len().saturating_mul(template.len().max(1)) > MAX_REPLACE_WORK {
            return fail(
                path,
                format!(
                    "{name} has too many params ({}) for a template of {} bytes",
                    placeholders.len(),
                    template.len()
                ),
            );
        }
        let mut pieces = vec![Piece::Literal(template.as_str())];
        let mut unused = Vec::new();
        for (index, (placeholder, _)) in placeholders.iter().enumerate() {
            let mut found = false;
            let mut next = Vec::with_capacity(pieces.len());
            for piece in pieces {
                match piece {
                    Piece::Literal(text) => {
                        let mut parts = text.split(placeholder.as_str());
                        next.push(Piece::Literal(parts.next().unwrap_or("")));
                        for part in parts {
                            found = true;
                            next.push(Piece::Replacement(index));
                            next.push(Piece::Literal(part));
                        }
                    }
                    replacement => next.push(replacement),
                }
            }
            pieces = next;
            if !found {
                unused.push(placeholder.as_str());
            }
        }
        if strictness != Strictness::Lenient && !unused.is_empty() {
            return fail(
                path,
                format!(
                    "{name} params not found in the template: {}",
                    unused.join(", ")
                ),
            );
        }
        let total: usize = pieces
            .iter()
            .map(|piece| match piece {
                Piece::Literal(text) => text.len(),
                Piece::Replacement(index) => {
                    placeholders.get(*index).map_or(0, |(_, text)| text.len())
                }
            })
            .sum();
        if total > MAX_STRING_BYTES {
            return fail(
                path,
                format!(
                    "{name} would produce {total} bytes, more than the limit of {MAX_STRING_BYTES}"
                ),
            );
        }
        self.spend_output(total, name, path)?;
        let mut output = String::with_capacity(total);
        for piece in &pieces {
            match piece {
                Piece::Literal(text) => output.push_str(text),
                Piece::Replacement(index) => {
                    if let Some((_, text)) = placeholders.get(*index) {
                        output.push_str(text);
                    }
                }
            }
        }
        Ok(Value::String(output))
    }

    fn replacement_text(
        &self,
        placeholder: &str,
        value: &Value,
        strictness: Strictness,
        path: &str,
    ) -> Result<String, TemplateError> {
        let name = strictness.function_name();
        let empty_error = || {
            fail(
                path,
                format!("{name} param {placeholder} is null or empty, it must have a value"),
            )
        };
        let text = match value {
            Value::Null if strictness == Strictness::VeryStrict => return empty_error(),
            Value::Null => String::new(),
            Value::Array(_) | Value::Object(_) => {
                if !self.version.supports_json_in_string_functions() {
                    return fail(
                        path,
                        format!(
                            "{name} param {placeholder} must be a string or number in heat_template_version {}, found a {}",
                            self.version,
                            type_name(value)
                        ),
                    );
                }
                let is_empty = value.as_array().is_some_and(Vec::is_empty)
                    || value.as_object().is_some_and(Map::is_empty);
                if is_empty && strictness == Strictness::VeryStrict {
                    return empty_error();
                }
                python_json_dumps(value)
            }
            scalar => python_str(scalar).unwrap_or_default(),
        };
        if text.is_empty() && strictness == Strictness::VeryStrict {
            return empty_error();
        }
        Ok(text)
    }

    pub(super) fn list_join(&self, args: &Value, path: &str) -> Result<Value, TemplateError> {
        let multiple = self.version.supports_json_in_string_functions();
        let usage = if multiple {
            "list_join takes a list [delimiter, list, ...]"
        } else {
            "list_join takes a list [delimiter, list]"
        };
        let Value::Array(items) = self.resolve_value(args, path)? else {
            return fail(path, usage);
        };
        let Some((delimiter, lists)) = items.split_first() else {
            return fail(path, usage);
        };
        if lists.is_empty() || (!multiple && lists.len() != 1) {
            return fail(path, format!("{usage}, found {} arguments", items.len()));
        }
        let Value::String(delimiter) = delimiter else {
            return fail(
                path,
                format!(
                    "the list_join delimiter must be a string, found {}",
                    describe_value(delimiter)
                ),
            );
        };
        let mut strings: Vec<String> = Vec::new();
        for list in lists {
            let list = match list {
                Value::Array(list) => list,
                // Heat skips empty ("falsy") arguments.
                Value::Null => continue,
                Value::String(text) if text.is_empty() => continue,
                other => {
                    return fail(
                        path,
                        format!("list_join joins lists, found a {}", type_name(other)),
                    );
                }
            };
            for item in list {
                strings.push(match item {
                    Value::Null => String::new(),
                    Value::String(text) => text.clone(),
                    Value::Array(_) | Value::Object(_) if multiple => python_json_dumps(item),
                    other => {
                        let allowed = if multiple {
                            "strings, lists or maps"
                        } else {
                            "strings"
                        };
                        return fail(
                            path,
                            format!(
                                "list_join items must be {allowed}, found {}",
                                describe_value(other)
                            ),
                        );
                    }
                });
            }
        }
        let total = strings.iter().map(String::len).sum::<usize>()
            + delimiter.len() * strings.len().saturating_sub(1);
        if total > MAX_STRING_BYTES {
            return fail(
                path,
                format!(
                    "list_join would produce {total} bytes, more than the limit of {MAX_STRING_BYTES}"
                ),
            );
        }
        self.spend_output(total, "list_join", path)?;
        Ok(Value::String(strings.join(delimiter)))
    }

    pub(super) fn str_split(&self, args: &Value, path: &str) -> Result<Value, TemplateError> {
        let usage = "str_split takes a list [delimiter, string] or [delimiter, string, index]";
        let Value::Array(items) = self.resolve_value(args, path)? else {
            return fail(path, usage);
        };
        let (Some(delimiter), Some(text)) = (items.first(), items.get(1)) else {
            return fail(path, usage);
        };
        let delimiter = match delimiter {
            Value::String(delimiter) if !delimiter.is_empty() => delimiter,
            other => {
                return fail(
                    path,
                    format!(
                        "the str_split delimiter must be a non-empty string, found {}",
                        describe_value(other)
                    ),
                );
            }
        };
        let text = match text {
            // Heat passes a not-yet-known value (null) straight through.
            Value::Null => return Ok(Value::Null),
            Value::String(text) => text,
            other => {
                return fail(
                    path,
                    format!("str_split splits a string, found a {}", type_name(other)),
                );
            }
        };
        let parts: Vec<&str> = text.split(delimiter.as_str()).collect();
        let Some(index) = items.get(2) else {
            return Ok(Value::Array(
                parts
                    .into_iter()
                    .map(|part| Value::String(part.to_string()))
                    .collect(),
            ));
        };
        let requested = match index {
            Value::Number(number) => number.as_i64(),
            Value::String(text) => text.trim().parse::<i64>().ok(),
            _ => None,
        };
        let Some(requested) = requested else {
            return fail(
                path,
                format!(
                    "the str_split index must be an integer, found {}",
                    describe_value(index)
                ),
            );
        };
        let count = i64::try_from(parts.len()).unwrap_or(i64::MAX);
        let position = if requested < 0 {
            count + requested
        } else {
            requested
        };
        usize::try_from(position)
            .ok()
            .and_then(|position| parts.get(position))
            .map(|part| Value::String((*part).to_string()))
            .ok_or_else(|| {
                TemplateError::new(
                    path,
                    format!(
                        "the str_split index {requested} is out of range, the string has {} parts (indexes 0 to {})",
                        parts.len(),
                        parts.len() - 1
                    ),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::version::TemplateVersion;
    use super::super::test_support::*;
    use serde_json::json;

    #[test]
    fn str_replace_substitutes_params() {
        assert_eq!(
            ok(
                json!({"str_replace": {"template": "http://$host:$port/", "params": {"$host": {"get_param": "name"}, "$port": 80}}})
            ),
            json!("http://web:80/")
        );
    }

    #[test]
    fn str_replace_prefers_longer_keys_and_does_not_rescan_values() {
        assert_eq!(
            ok(
                json!({"str_replace": {"template": "$var1 $var10", "params": {"$var1": "a", "$var10": "b"}}})
            ),
            json!("a b")
        );
        assert_eq!(
            ok(json!({"str_replace": {"template": "abcd", "params": {"ab": "X", "bcd": "Y"}}})),
            json!("aY")
        );
        assert_eq!(
            ok(json!({"str_replace": {"template": "x", "params": {"x": "yy", "y": "z"}}})),
            json!("yy")
        );
    }

    #[test]
    fn str_replace_renders_values_like_heat() {
        assert_eq!(
            ok(
                json!({"str_replace": {"template": "a b c d", "params": {"a": true, "b": null, "c": 1.0, "d": {"k": [1]}}}})
            ),
            json!("True  1.0 {\"k\": [1]}")
        );
        let old = at_version(TemplateVersion::V2015_04_30);
        let error = resolve_with(
            json!({"str_replace": {"template": "a", "params": {"a": [1]}}}),
            &old,
        )
        .unwrap_err();
        assert!(
            error
                .message
                .contains("must be a string or number in heat_template_version 2015-04-30")
        );
    }

    #[test]
    fn str_replace_bad_input() {
        assert!(
            err(json!({"str_replace": "x"}))
                .message
                .contains("takes a map")
        );
        assert!(
            err(json!({"str_replace": {"template": "x"}}))
                .message
                .contains("template or params is missing")
        );
        assert!(
            err(json!({"str_replace": {"template": 1, "params": {}}}))
                .message
                .contains("template must be a string")
        );
        assert!(
            err(json!({"str_replace": {"template": "x", "params": [1]}}))
                .message
                .contains("params must be a map")
        );
        assert!(
            err(json!({"str_replace": {"template": "x", "params": {"": "y"}}}))
                .message
                .contains("cannot be empty")
        );
        let error = err(
            json!({"o": {"str_replace": {"template": "x", "params": {"a": {"get_param": "nope"}}}}}),
        );
        assert_eq!(error.path, "p.o.str_replace.params.a.get_param");
    }

    #[test]
    fn str_replace_strict_requires_every_param() {
        assert_eq!(
            ok(json!({"str_replace_strict": {"template": "a-b", "params": {"a": "1", "b": "2"}}})),
            json!("1-2")
        );
        let error = err(
            json!({"str_replace_strict": {"template": "a", "params": {"a": "1", "zz": "2", "y": "3"}}}),
        );
        assert_eq!(
            error.message,
            "str_replace_strict params not found in the template: zz, y"
        );
        assert_eq!(
            ok(json!({"str_replace_strict": {"template": "a", "params": {"a": null}}})),
            json!("")
        );
    }

    #[test]
    fn str_replace_vstrict_rejects_empty_values() {
        assert_eq!(
            ok(json!({"str_replace_vstrict": {"template": "a", "params": {"a": "x"}}})),
            json!("x")
        );
        for empty in [json!(null), json!(""), json!([]), json!({})] {
            let error =
                err(json!({"str_replace_vstrict": {"template": "a", "params": {"a": empty}}}));
            assert!(
                error.message.contains("param a is null or empty"),
                "{error}"
            );
        }
        assert!(
            err(json!({"str_replace_vstrict": {"template": "a", "params": {"a": "x", "b": "y"}}}))
                .message
                .contains("not found in the template: b")
        );
    }

    #[test]
    fn str_replace_output_is_bounded() {
        let error = err(
            json!({"str_replace": {"template": "x".repeat(5000), "params": {"x": "y".repeat(5000)}}}),
        );
        assert!(error.message.contains("more than the limit"));
    }

    #[test]
    fn str_replace_work_is_bounded() {
        let params: serde_json::Map<String, serde_json::Value> =
            (0..20_000).map(|n| (format!("k{n}"), json!("v"))).collect();
        let error =
            err(json!({"str_replace": {"template": "x".repeat(100_000), "params": params}}));
        assert!(error.message.contains("too many params (20000)"));
    }

    #[test]
    fn list_join_joins_one_or_more_lists() {
        assert_eq!(ok(json!({"list_join": [", ", ["a", "b"]]})), json!("a, b"));
        assert_eq!(
            ok(json!({"list_join": ["-", ["a"], [], null, ["b", null]]})),
            json!("a-b-")
        );
        assert_eq!(
            ok(json!({"list_join": [",", {"get_param": "zones"}]})),
            json!("az1,az2")
        );
        assert_eq!(
            ok(json!({"list_join": [" ", [{"a": 1}, [2]]]})),
            json!("{\"a\": 1} [2]")
        );
    }

    #[test]
    fn list_join_bad_input() {
        assert!(
            err(json!({"list_join": ","}))
                .message
                .contains("takes a list")
        );
        assert!(
            err(json!({"list_join": [","]}))
                .message
                .contains("found 1 arguments")
        );
        assert!(
            err(json!({"list_join": [1, ["a"]]}))
                .message
                .contains("delimiter must be a string")
        );
        assert!(
            err(json!({"list_join": [",", "ab"]}))
                .message
                .contains("joins lists, found a string")
        );
        assert!(
            err(json!({"list_join": [",", [1]]}))
                .message
                .contains("items must be strings, lists or maps, found 1")
        );
        let old = at_version(TemplateVersion::V2015_04_30);
        assert!(
            resolve_with(json!({"list_join": [",", ["a"], ["b"]]}), &old)
                .unwrap_err()
                .message
                .contains("[delimiter, list]")
        );
        assert!(
            resolve_with(json!({"list_join": [",", [["a"]]]}), &old)
                .unwrap_err()
                .message
                .contains("items must be strings")
        );
    }

    #[test]
    fn str_split_splits_and_indexes() {
        assert_eq!(
            ok(json!({"str_split": [",", "a,b,,c"]})),
            json!(["a", "b", "", "c"])
        );
        assert_eq!(ok(json!({"str_split": [",", "a,b,c", 1]})), json!("b"));
        assert_eq!(ok(json!({"str_split": [",", "a,b,c", "2"]})), json!("c"));
        assert_eq!(ok(json!({"str_split": [",", "a,b,c", -1]})), json!("c"));
        assert_eq!(ok(json!({"str_split": [",", null]})), json!(null));
    }

    #[test]
    fn str_split_bad_input() {
        assert!(
            err(json!({"str_split": "a,b"}))
                .message
                .starts_with("str_split takes a list")
        );
        assert!(
            err(json!({"str_split": [","]}))
                .message
                .starts_with("str_split takes a list")
        );
        assert!(
            err(json!({"str_split": ["", "ab"]}))
                .message
                .contains("non-empty string")
        );
        assert!(
            err(json!({"str_split": [",", 5]}))
                .message
                .contains("splits a string, found a number")
        );
        assert!(
            err(json!({"str_split": [",", "a", "x"]}))
                .message
                .contains("index must be an integer")
        );
        assert_eq!(
            err(json!({"str_split": [",", "a,b", 2]})).message,
            "the str_split index 2 is out of range, the string has 2 parts (indexes 0 to 1)"
        );
    }
}
