//! Conditional logic: `if`, the condition functions `equals`, `not`,
//! `and`, `or`, `contains`, and the evaluation of condition expressions
//! (booleans, condition names, condition functions).

use serde_json::Value;

use super::super::error::{TemplateError, child_path, describe_value, index_path, type_name};
use super::super::version::{Classification, EvaluationMode, classify};
use super::collections::values_equal;
use super::{Resolver, fail};

impl Resolver<'_> {
    /// `if` resolves only the chosen branch, so errors in the other branch
    /// do not matter (Heat treats `if` as a macro). `None` omits the
    /// enclosing item (two-argument form, 2021-04-16 and later).
    pub(super) fn if_function(
        &self,
        args: &Value,
        path: &str,
    ) -> Result<Option<Value>, TemplateError> {
        let nullable = self.version.supports_nullable_if();
        let usage = if nullable {
            "if takes a list [condition, value_if_true] or [condition, value_if_true, value_if_false]"
        } else {
            "if takes a list [condition, value_if_true, value_if_false]"
        };
        let Value::Array(items) = args else {
            return fail(path, usage);
        };
        let (condition, when_true, when_false) = match items.as_slice() {
            [condition, when_true, when_false] => (condition, when_true, Some(when_false)),
            [condition, when_true] if nullable => (condition, when_true, None),
            _ => return fail(path, format!("{usage}, found {} arguments", items.len())),
        };
        if self.condition(condition, &index_path(path, 0))? {
            self.node(when_true, &index_path(path, 1), EvaluationMode::Value)
        } else {
            match when_false {
                Some(when_false) => {
                    self.node(when_false, &index_path(path, 2), EvaluationMode::Value)
                }
                None => Ok(None),
            }
        }
    }

    /// Evaluates a condition expression found at `path`.
    pub(crate) fn condition(&self, expression: &Value, path: &str) -> Result<bool, TemplateError> {
        self.nested(path, || match expression {
            Value::Bool(flag) => Ok(*flag),
            Value::String(name) => self.named_condition(name, path),
            Value::Object(map) if map.len() == 1 => {
                let Some((key, args)) = map.iter().next() else {
                    return fail(path, "a condition cannot be an empty map");
                };
                let function_path = child_path(path, key);
                match classify(key, self.version, EvaluationMode::Condition) {
                    Classification::Function(function) => {
                        let result = self
                            .call(function, args, &function_path, EvaluationMode::Condition)?
                            .unwrap_or(Value::Null);
                        match result {
                            Value::Bool(flag) => Ok(flag),
                            Value::String(name) => self.named_condition(&name, path),
                            other => fail(
                                &function_path,
                                format!(
                                    "a condition must evaluate to true, false or a condition name, found {}",
                                    describe_value(&other)
                                ),
                            ),
                        }
                    }
                    Classification::Rejected(message) => fail(&function_path, message),
                    Classification::Data => fail(
                        path,
                        format!("'{key}' is not a condition function"),
                    ),
                }
            }
            other => fail(
                path,
                format!(
                    "invalid condition {}: expected true, false, a condition name or a condition function",
                    describe_value(other)
                ),
            ),
        })
    }

    /// A top-level `conditions:` definition, which must evaluate to a
    /// boolean (a condition name alone is not a definition in Heat).
    pub(crate) fn condition_definition(
        &self,
        definition: &Value,
        path: &str,
    ) -> Result<bool, TemplateError> {
        match definition {
            Value::Bool(flag) => Ok(*flag),
            Value::Object(map) if map.len() == 1 => {
                let Some((key, args)) = map.iter().next() else {
                    return fail(path, "a condition cannot be an empty map");
                };
                let function_path = child_path(path, key);
                match classify(key, self.version, EvaluationMode::Condition) {
                    Classification::Function(function) => {
                        match self.call(
                            function,
                            args,
                            &function_path,
                            EvaluationMode::Condition,
                        )? {
                            Some(Value::Bool(flag)) => Ok(flag),
                            other => fail(
                                path,
                                format!(
                                    "a condition definition must evaluate to true or false, found {}",
                                    describe_value(&other.unwrap_or(Value::Null))
                                ),
                            ),
                        }
                    }
                    Classification::Rejected(message) => fail(&function_path, message),
                    Classification::Data => {
                        fail(path, format!("'{key}' is not a condition function"))
                    }
                }
            }
            other => fail(
                path,
                format!(
                    "a condition definition must be true, false or a condition function, found {}",
                    describe_value(other)
                ),
            ),
        }
    }

    pub(super) fn equals(&self, args: &Value, path: &str) -> Result<Value, TemplateError> {
        let Value::Array(items) = args else {
            return fail(path, "equals takes a list [value_1, value_2]");
        };
        let [left, right] = items.as_slice() else {
            return fail(
                path,
                format!(
                    "equals takes a list [value_1, value_2], found {} arguments",
                    items.len()
                ),
            );
        };
        let left = self.resolve_in(left, &index_path(path, 0), EvaluationMode::Condition)?;
        let right = self.resolve_in(right, &index_path(path, 1), EvaluationMode::Condition)?;
        Ok(Value::Bool(values_equal(&left, &right)))
    }

    pub(super) fn not(&self, args: &Value, path: &str) -> Result<Value, TemplateError> {
        if args.is_null() {
            return fail(path, "not takes a condition");
        }
        Ok(Value::Bool(!self.condition(args, path)?))
    }

    /// `and` / `or`: every argument is evaluated (as Heat does) before the
    /// results are combined.
    pub(super) fn and_or(
        &self,
        args: &Value,
        path: &str,
        is_and: bool,
    ) -> Result<Value, TemplateError> {
        let name = if is_and { "and" } else { "or" };
        let Value::Array(items) = args else {
            return fail(path, format!("{name} takes a list of conditions"));
        };
        if items.len() < 2 {
            return fail(
                path,
                format!("{name} needs at least 2 conditions, found {}", items.len()),
            );
        }
        let mut results = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            results.push(self.condition(item, &index_path(path, index))?);
        }
        Ok(Value::Bool(if is_and {
            results.iter().all(|flag| *flag)
        } else {
            results.iter().any(|flag| *flag)
        }))
    }

    pub(super) fn contains(
        &self,
        args: &Value,
        path: &str,
        mode: EvaluationMode,
    ) -> Result<Value, TemplateError> {
        let Value::Array(items) = args else {
            return fail(path, "contains takes a list [value, sequence]");
        };
        let [needle, haystack] = items.as_slice() else {
            return fail(
                path,
                format!(
                    "contains takes a list [value, sequence], found {} arguments",
                    items.len()
                ),
            );
        };
        let needle = self.resolve_in(needle, &index_path(path, 0), mode)?;
        let haystack = self.resolve_in(haystack, &index_path(path, 1), mode)?;
        match (&needle, &haystack) {
            (_, Value::Array(items)) => Ok(Value::Bool(
                items.iter().any(|item| values_equal(item, &needle)),
            )),
            // A Python string is a sequence of characters: `in` tests for a
            // substring.
            (Value::String(part), Value::String(text)) => {
                Ok(Value::Bool(text.contains(part.as_str())))
            }
            (_, other) => fail(
                path,
                format!(
                    "the second argument of contains must be a list, found a {}",
                    type_name(other)
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::version::TemplateVersion;
    use super::super::test_support::*;
    use super::super::{ResolveContext, resolve_condition};
    use serde_json::{Value, json};

    fn condition(expression: Value) -> Result<bool, super::TemplateError> {
        resolve_condition(&expression, &context(), "c")
    }

    #[test]
    fn if_picks_a_branch_by_name_boolean_or_expression() {
        assert_eq!(ok(json!({"if": ["prod", "big", "small"]})), json!("big"));
        assert_eq!(ok(json!({"if": ["dev", "big", "small"]})), json!("small"));
        assert_eq!(ok(json!({"if": [false, 1, 2]})), json!(2));
        assert_eq!(
            ok(json!({"if": [{"equals": [{"get_param": "name"}, "web"]}, 1, 2]})),
            json!(1)
        );
        assert_eq!(ok(json!({"if": [{"get_param": "flag"}, 1, 2]})), json!(1));
    }

    #[test]
    fn if_resolves_only_the_chosen_branch() {
        assert_eq!(
            ok(json!({"if": ["prod", "ok", {"get_param": "missing"}]})),
            json!("ok")
        );
    }

    #[test]
    fn two_argument_if_omits_the_enclosing_item() {
        assert_eq!(
            ok(
                json!({"a": {"if": ["dev", 1]}, "b": [1, {"if": ["dev", 2]}, 3], "c": {"if": ["prod", 4]}})
            ),
            json!({"b": [1, 3], "c": 4})
        );
        assert_eq!(ok(json!({"if": ["dev", 1]})), Value::Null);
        let old = at_version(TemplateVersion::V2018_08_31);
        let error = resolve_with(json!({"if": ["dev", 1]}), &old).unwrap_err();
        assert!(
            error
                .message
                .contains("[condition, value_if_true, value_if_false], found 2 arguments")
        );
    }

    #[test]
    fn if_bad_input() {
        assert!(
            err(json!({"if": "prod"}))
                .message
                .starts_with("if takes a list")
        );
        assert!(
            err(json!({"if": ["prod", 1, 2, 3]}))
                .message
                .contains("found 4 arguments")
        );
        let error = err(json!({"if": ["nope", 1, 2]}));
        assert_eq!(error.path, "p.if[0]");
        assert_eq!(error.message, "unknown condition 'nope'");
        let error = err(json!({"if": [5, 1, 2]}));
        assert!(error.message.contains("invalid condition 5"));
        let error = err(json!({"if": [{"str_replace": {"template": "a", "params": {}}}, 1, 2]}));
        assert_eq!(error.path, "p.if[0].str_replace");
        assert!(error.message.contains("cannot be used in a condition"));
        let error = err(json!({"if": [{"get_param": "count"}, 1, 2]}));
        assert!(
            error
                .message
                .contains("must evaluate to true, false or a condition name, found 3")
        );
    }

    #[test]
    fn equals_compares_resolved_values() {
        assert!(condition(json!({"equals": [{"get_param": "count"}, 3.0]})).unwrap());
        assert!(!condition(json!({"equals": ["3", 3]})).unwrap());
        assert!(condition(json!({"equals": [{"get_param": "zones"}, ["az1", "az2"]]})).unwrap());
        assert!(condition(json!({"equals": [{"a": 1}, {"a": 1}]})).unwrap());
    }

    #[test]
    fn equals_bad_input() {
        assert!(
            condition(json!({"equals": "a"}))
                .unwrap_err()
                .message
                .starts_with("equals takes a list")
        );
        assert!(
            condition(json!({"equals": [1]}))
                .unwrap_err()
                .message
                .contains("found 1 arguments")
        );
        let error = condition(json!({"equals": [{"list_join": [",", ["a"]]}, "a"]})).unwrap_err();
        assert_eq!(error.path, "c.equals[0].list_join");
    }

    #[test]
    fn not_inverts_conditions() {
        assert!(!condition(json!({"not": "prod"})).unwrap());
        assert!(condition(json!({"not": {"equals": [1, 2]}})).unwrap());
        assert!(condition(json!({"not": false})).unwrap());
        assert_eq!(
            condition(json!({"not": null})).unwrap_err().message,
            "not takes a condition"
        );
        assert!(
            condition(json!({"not": [true]}))
                .unwrap_err()
                .message
                .contains("invalid condition")
        );
    }

    #[test]
    fn and_or_combine_conditions() {
        assert!(condition(json!({"and": ["prod", true, {"not": "dev"}]})).unwrap());
        assert!(!condition(json!({"and": ["prod", "dev"]})).unwrap());
        assert!(condition(json!({"or": ["dev", "prod"]})).unwrap());
        assert!(!condition(json!({"or": [false, "dev"]})).unwrap());
    }

    #[test]
    fn and_or_bad_input() {
        assert_eq!(
            condition(json!({"and": ["prod"]})).unwrap_err().message,
            "and needs at least 2 conditions, found 1"
        );
        assert_eq!(
            condition(json!({"or": "prod"})).unwrap_err().message,
            "or takes a list of conditions"
        );
        let error = condition(json!({"or": [true, "ghost"]})).unwrap_err();
        assert_eq!(error.path, "c.or[1]");
    }

    #[test]
    fn contains_checks_membership_in_values_and_conditions() {
        assert_eq!(
            ok(json!({"contains": ["az2", {"get_param": "zones"}]})),
            json!(true)
        );
        assert_eq!(
            ok(json!({"contains": ["az3", {"get_param": "zones"}]})),
            json!(false)
        );
        assert_eq!(ok(json!({"contains": ["eb", "web"]})), json!(true));
        assert!(condition(json!({"contains": [{"get_param": "name"}, ["web", "db"]]})).unwrap());
    }

    #[test]
    fn contains_bad_input() {
        assert!(
            err(json!({"contains": "a"}))
                .message
                .starts_with("contains takes a list")
        );
        assert!(
            err(json!({"contains": ["a"]}))
                .message
                .contains("found 1 arguments")
        );
        assert!(
            err(json!({"contains": ["a", {"a": 1}]}))
                .message
                .contains("must be a list, found a map")
        );
        assert!(
            err(json!({"contains": [1, "abc"]}))
                .message
                .contains("must be a list, found a string")
        );
    }

    #[test]
    fn condition_functions_need_their_version() {
        let old = at_version(TemplateVersion::V2016_10_14);
        let error = resolve_condition(&json!({"contains": ["a", ["a"]]}), &old, "c").unwrap_err();
        assert!(
            error
                .message
                .contains("requires heat_template_version 2017-09-01")
        );
        assert_eq!(old.template_version(), TemplateVersion::V2016_10_14);
    }
}
