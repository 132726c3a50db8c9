//! `repeat`: expanding a template once per loop value (cartesian product,
//! or zipped with `permutations: false`), with hard limits on the output.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::super::document::{MAX_NESTING_DEPTH, nesting_depth};
use super::super::error::{TemplateError, child_path, describe_value, type_name};
use super::super::python_compat::python_str;
use super::{Resolver, fail};

/// `repeat` may produce at most this many items.
pub(super) const MAX_REPEAT_ITEMS: usize = 10_000;

/// What each generated JSON node costs besides its text (its `Value`).
const NODE_COST: usize = 32;

impl Resolver<'_> {
    pub(super) fn repeat(&self, args: &Value, path: &str) -> Result<Value, TemplateError> {
        let usage = "repeat takes a map with for_each and template";
        let Value::Object(arguments) = args else {
            return fail(path, usage);
        };
        let (Some(for_each), Some(template)) =
            (arguments.get("for_each"), arguments.get("template"))
        else {
            return fail(path, format!("{usage}; for_each or template is missing"));
        };
        // Older versions ignore `permutations`, as Heat does.
        let permutations = if self.version.supports_repeat_permutations() {
            match arguments.get("permutations") {
                None => true,
                Some(Value::Bool(flag)) => *flag,
                Some(other) => {
                    return fail(
                        path,
                        format!(
                            "repeat permutations must be true or false, found {}",
                            describe_value(other)
                        ),
                    );
                }
            }
        } else {
            true
        };
        let Value::Object(loops) = self.resolve_value(for_each, &child_path(path, "for_each"))?
        else {
            return fail(
                path,
                "the repeat for_each must be a map of loop variables to lists",
            );
        };
        if loops.is_empty() {
            return fail(path, "the repeat for_each needs at least one loop variable");
        }
        let maps_allowed = permutations && self.version.supports_repeat_over_maps();
        let mut variables: Vec<(&String, Vec<String>)> = Vec::with_capacity(loops.len());
        for (variable, values) in &loops {
            let items: Vec<Value> = match values {
                Value::Null => Vec::new(),
                Value::Array(items) => items.clone(),
                Value::Object(map) if maps_allowed => {
                    map.keys().map(|key| Value::String(key.clone())).collect()
                }
                other => {
                    let expected = if maps_allowed {
                        "a list or a map"
                    } else {
                        "a list"
                    };
                    return fail(
                        path,
                        format!(
                            "the repeat for_each value of {variable} must be {expected}, found a {}",
                            type_name(other)
                        ),
                    );
                }
            };
            let mut texts = Vec::with_capacity(items.len());
            for item in &items {
                match item {
                    Value::Array(_) | Value::Object(_) | Value::Null => {
                        return fail(
                            path,
                            format!(
                                "repeat loop values must be strings or numbers, {variable} contains {}",
                                describe_value(item)
                            ),
                        );
                    }
                    scalar => texts.push(python_str(scalar).unwrap_or_default()),
                }
            }
            variables.push((variable, texts));
        }
        let count = if permutations {
            variables.iter().try_fold(1usize, |product, (_, values)| {
                product.checked_mul(values.len())
            })
        } else {
            let lengths: HashSet<usize> = loops
                .values()
                .zip(&variables)
                .filter(|(raw, _)| !raw.is_null())
                .map(|(_, (_, values))| values.len())
                .collect();
            if lengths.len() > 1 {
                return fail(
                    path,
                    "with permutations false, every repeat for_each list must have the same length",
                );
            }
            variables.iter().map(|(_, values)| values.len()).min()
        };
        let count = match count {
            Some(count) if count <= MAX_REPEAT_ITEMS => count,
            _ => {
                return fail(
                    path,
                    format!("repeat would produce more than {MAX_REPEAT_ITEMS} items"),
                );
            }
        };
        let template = self.resolve_value(template, &child_path(path, "template"))?;
        if nesting_depth(&template) > 2 * MAX_NESTING_DEPTH {
            return fail(path, "the repeat template is nested too deeply");
        }
        // The output's nodes are charged before the list is allocated; the
        // text as it is built.
        self.spend_output(count.saturating_mul(NODE_COST), "repeat", path)?;
        let granted = self.remaining_output();
        let mut budget = granted;
        let mut output = Vec::with_capacity(count);
        for item in 0..count {
            let mut remaining = item;
            let mut replacements: Vec<(&str, &str)> = vec![("", ""); variables.len()];
            // The first variable varies slowest, like itertools.product.
            for (slot, (variable, values)) in replacements.iter_mut().zip(&variables).rev() {
                let index = if permutations {
                    let index = remaining % values.len().max(1);
                    remaining /= values.len().max(1);
                    index
                } else {
                    item
                };
                let value = values.get(index).map_or("", String::as_str);
                *slot = (variable.as_str(), value);
            }
            let expanded = substitute(&template, &replacements, &mut budget).ok_or_else(|| {
                TemplateError::new(
                    path,
                    format!(
                        "repeat would take the template past {} bytes of generated values",
                        super::MAX_RESOLUTION_BYTES
                    ),
                )
            })?;
            output.push(expanded);
        }
        self.spend_output(granted - budget, "repeat", path)?;
        Ok(Value::Array(output))
    }
}

/// Every byte produced is taken from `budget`; `None` once it runs out.
fn substitute(
    template: &Value,
    replacements: &[(&str, &str)],
    budget: &mut usize,
) -> Option<Value> {
    let value = match template {
        Value::String(text) => Value::String(replace_all(text, replacements, budget)?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| substitute(item, replacements, budget))
                .collect::<Option<Vec<_>>>()?,
        ),
        Value::Object(map) => {
            let mut output = Map::new();
            for (key, item) in map {
                output.insert(
                    replace_all(key, replacements, budget)?,
                    substitute(item, replacements, budget)?,
                );
            }
            Value::Object(output)
        }
        other => {
            *budget = budget.checked_sub(NODE_COST)?;
            other.clone()
        }
    };
    Some(value)
}

fn replace_all(text: &str, replacements: &[(&str, &str)], budget: &mut usize) -> Option<String> {
    let mut output = text.to_string();
    for (variable, value) in replacements {
        if variable.is_empty() {
            continue;
        }
        let occurrences = output.matches(variable).count();
        if occurrences == 0 {
            continue;
        }
        // Check the size before building the string, so one huge
        // expansion cannot be allocated at all.
        let grown = output
            .len()
            .checked_add(occurrences.checked_mul(value.len())?)?
            .saturating_sub(occurrences * variable.len());
        if grown > *budget {
            return None;
        }
        output = output.replace(variable, value);
    }
    *budget = budget.checked_sub(output.len() + NODE_COST)?;
    Some(output)
}

#[cfg(test)]
mod tests {
    use super::super::super::version::TemplateVersion;
    use super::super::test_support::*;
    use super::*;
    use serde_json::json;

    #[test]
    fn repeat_expands_one_variable() {
        assert_eq!(
            ok(
                json!({"repeat": {"for_each": {"<%port%>": [80, "443"]}, "template": {"port": "<%port%>", "<%port%>_rule": "allow <%port%>"}}})
            ),
            json!([{"port": "80", "80_rule": "allow 80"}, {"port": "443", "443_rule": "allow 443"}])
        );
        assert_eq!(
            ok(
                json!({"repeat": {"for_each": {"%z%": {"get_param": "zones"}}, "template": "zone-%z%"}})
            ),
            json!(["zone-az1", "zone-az2"])
        );
    }

    #[test]
    fn repeat_produces_the_cartesian_product_in_order() {
        assert_eq!(
            ok(
                json!({"repeat": {"for_each": {"%a%": ["1", "2"], "%b%": ["x", "y"]}, "template": "%a%%b%"}})
            ),
            json!(["1x", "1y", "2x", "2y"])
        );
    }

    #[test]
    fn repeat_zips_without_permutations() {
        assert_eq!(
            ok(
                json!({"repeat": {"for_each": {"%a%": ["1", "2"], "%b%": ["x", "y"]}, "template": "%a%%b%", "permutations": false}})
            ),
            json!(["1x", "2y"])
        );
        let error = err(
            json!({"repeat": {"for_each": {"%a%": ["1"], "%b%": ["x", "y"]}, "template": "t", "permutations": false}}),
        );
        assert!(error.message.contains("same length"));
    }

    #[test]
    fn repeat_iterates_map_keys_and_null_lists() {
        assert_eq!(
            ok(json!({"repeat": {"for_each": {"%k%": {"a": 1, "b": 2}}, "template": "%k%"}})),
            json!(["a", "b"])
        );
        assert_eq!(
            ok(json!({"repeat": {"for_each": {"%k%": null}, "template": "%k%"}})),
            json!([])
        );
        let old = at_version(TemplateVersion::V2016_04_08);
        let error = resolve_with(
            json!({"repeat": {"for_each": {"%k%": {"a": 1}}, "template": "%k%"}}),
            &old,
        )
        .unwrap_err();
        assert!(error.message.contains("must be a list, found a map"));
    }

    #[test]
    fn repeat_bad_input() {
        assert!(
            err(json!({"repeat": ["x"]}))
                .message
                .starts_with("repeat takes a map")
        );
        assert!(
            err(json!({"repeat": {"template": "x"}}))
                .message
                .contains("for_each or template is missing")
        );
        assert!(
            err(json!({"repeat": {"for_each": [1], "template": "x"}}))
                .message
                .contains("must be a map of loop variables")
        );
        assert!(
            err(json!({"repeat": {"for_each": {}, "template": "x"}}))
                .message
                .contains("at least one loop variable")
        );
        assert!(
            err(json!({"repeat": {"for_each": {"a": "xyz"}, "template": "x"}}))
                .message
                .contains("must be a list or a map, found a string")
        );
        assert!(
            err(json!({"repeat": {"for_each": {"a": [[1]]}, "template": "x"}}))
                .message
                .contains("must be strings or numbers")
        );
        assert!(
            err(
                json!({"repeat": {"for_each": {"a": ["1"]}, "template": "x", "permutations": "no"}})
            )
            .message
            .contains("permutations must be true or false")
        );
    }

    #[test]
    fn nested_repeats_share_one_output_budget() {
        // Each repeat alone stays under its item limit and under the
        // budget; nested, they would multiply into gigabytes. The shared
        // budget refuses before the outer expansion is allocated.
        let thousand: Vec<String> = (0..1000).map(|n| format!("{n:0>200}")).collect();
        let inner =
            json!({"repeat": {"for_each": {"<%i%>": thousand}, "template": "<%i%>-<%j%>-<%k%>"}});
        let middle = json!({"repeat": {"for_each": {"<%j%>": thousand}, "template": inner}});
        let outer = json!({"repeat": {"for_each": {"<%k%>": thousand}, "template": middle}});
        let started = std::time::Instant::now();
        let error = err(outer);
        assert!(
            error.message.contains("bytes of generated values"),
            "{}",
            error.message
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "refused early: {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn repeat_output_is_bounded() {
        let hundred: Vec<String> = (0..100).map(|n| n.to_string()).collect();
        let error = err(
            json!({"repeat": {"for_each": {"a": hundred, "b": hundred, "c": hundred}, "template": "abc"}}),
        );
        assert_eq!(error.message, "repeat would produce more than 10000 items");
        let many: Vec<String> = (0..MAX_REPEAT_ITEMS).map(|n| n.to_string()).collect();
        let big_template = "x".repeat(10_000);
        let error = err(json!({"repeat": {"for_each": {"a": many}, "template": big_template}}));
        assert!(error.message.contains("bytes"));
        let huge: Vec<String> = (0..64).map(|n| n.to_string()).collect();
        let loops: Map<String, Value> = (0..20)
            .map(|n| (format!("v{n}"), json!(huge.clone())))
            .collect();
        let error = err(json!({"repeat": {"for_each": loops, "template": "t"}}));
        assert!(error.message.contains("more than 10000 items"));
    }
}
