//! Reading `constraints:` entries of a parameter declaration into
//! `ParameterConstraint`s, with the shape rules of each kind (`range`,
//! `length`, `modulo`, `allowed_values`, `allowed_pattern`,
//! `custom_constraint`) and the parameter types each applies to.

use fancy_regex::RegexBuilder;
use serde_json::{Map, Number, Value};

use super::constraints::{ConstraintRule, ParameterConstraint};
use super::error::{TemplateError, child_path, type_name};
use super::parameters::{ParameterType, number_from_text};
use super::version::TemplateVersion;

const CONSTRAINT_KINDS: [&str; 6] = [
    "range",
    "length",
    "modulo",
    "allowed_values",
    "allowed_pattern",
    "custom_constraint",
];

/// Compiled patterns larger than this are refused so a template cannot make
/// the engine build an enormous automaton.
const MAX_PATTERN_PROGRAM_BYTES: usize = 1 << 20;

/// How far a pattern with look-around or backreferences may backtrack on
/// one value before the check gives up (a catastrophic pattern costs a
/// refusal, not the engine's time).
const MAX_PATTERN_BACKTRACKS: usize = 100_000;

impl ParameterConstraint {
    /// Parses one entry of a parameter's `constraints` list found at `path`.
    pub(crate) fn parse(
        definition: &Value,
        parameter_type: ParameterType,
        version: TemplateVersion,
        path: &str,
    ) -> Result<ParameterConstraint, TemplateError> {
        let Value::Object(map) = definition else {
            return Err(TemplateError::new(
                path,
                format!(
                    "a constraint must be a map, found a {}",
                    type_name(definition)
                ),
            ));
        };
        for key in map.keys() {
            if key != "description" && !CONSTRAINT_KINDS.contains(&key.as_str()) {
                return Err(TemplateError::new(
                    path,
                    format!(
                        "unknown constraint key '{key}', expected one of description, {}",
                        CONSTRAINT_KINDS.join(", ")
                    ),
                ));
            }
        }
        let kinds: Vec<&str> = CONSTRAINT_KINDS
            .into_iter()
            .filter(|kind| map.contains_key(*kind))
            .collect();
        let kind = match kinds.as_slice() {
            [kind] => *kind,
            [] => {
                return Err(TemplateError::new(
                    path,
                    "the constraint does not say what it constrains: expected one of range, length, modulo, allowed_values, allowed_pattern, custom_constraint",
                ));
            }
            several => {
                return Err(TemplateError::new(
                    path,
                    format!(
                        "a constraint entry must have exactly one kind, found {}; use one list entry per constraint",
                        several.join(" and ")
                    ),
                ));
            }
        };
        let description = match map.get("description") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(text.clone()),
            Some(other) => {
                return Err(TemplateError::new(
                    child_path(path, "description"),
                    format!(
                        "a constraint description must be a string, found a {}",
                        type_name(other)
                    ),
                ));
            }
        };
        let rule_path = child_path(path, kind);
        let body = map.get(kind).unwrap_or(&Value::Null);
        let rule = match kind {
            "range" => parse_range(body, &rule_path)?,
            "length" => parse_length(body, &rule_path)?,
            "modulo" => {
                if !version.supports_modulo_constraint() {
                    return Err(TemplateError::new(
                        rule_path,
                        format!(
                            "the modulo constraint requires heat_template_version 2017-02-24 or later (the template uses {version})"
                        ),
                    ));
                }
                parse_modulo(body, &rule_path)?
            }
            "allowed_values" => match body {
                Value::Array(values) => ConstraintRule::AllowedValues(values.clone()),
                other => {
                    return Err(TemplateError::new(
                        rule_path,
                        format!(
                            "allowed_values must be a list, found a {}",
                            type_name(other)
                        ),
                    ));
                }
            },
            "allowed_pattern" => parse_pattern(body, &rule_path)?,
            _ => match body {
                Value::String(name) => ConstraintRule::CustomConstraint(name.clone()),
                other => {
                    return Err(TemplateError::new(
                        rule_path,
                        format!(
                            "custom_constraint must be a string, found a {}",
                            type_name(other)
                        ),
                    ));
                }
            },
        };
        if !rule.applies_to(parameter_type) {
            return Err(TemplateError::new(
                rule_path,
                format!(
                    "the {} constraint cannot be used with a {} parameter",
                    rule.kind(),
                    parameter_type.name()
                ),
            ));
        }
        Ok(ParameterConstraint { rule, description })
    }
}

fn bounds_map<'a>(
    body: &'a Value,
    path: &str,
    kind: &str,
    keys: [&str; 2],
) -> Result<&'a Map<String, Value>, TemplateError> {
    let Value::Object(map) = body else {
        return Err(TemplateError::new(
            path,
            format!(
                "the {kind} constraint must be a map, found a {}",
                type_name(body)
            ),
        ));
    };
    if let Some(unknown) = map.keys().find(|key| !keys.contains(&key.as_str())) {
        return Err(TemplateError::new(
            path,
            format!(
                "unknown key '{unknown}' in the {kind} constraint, expected {} and/or {}",
                keys[0], keys[1]
            ),
        ));
    }
    Ok(map)
}

/// A bound given as a number or numeric string, as Heat accepts both.
fn bound(map: &Map<String, Value>, key: &str, path: &str) -> Result<Option<Number>, TemplateError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) => Ok(Some(number.clone())),
        Some(Value::String(text)) => number_from_text(text).map(Some).ok_or_else(|| {
            TemplateError::new(child_path(path, key), format!("'{text}' is not a number"))
        }),
        Some(other) => Err(TemplateError::new(
            child_path(path, key),
            format!("{key} must be a number, found a {}", type_name(other)),
        )),
    }
}

fn integral(number: &Number) -> Option<i64> {
    number.as_i64().or_else(|| {
        number
            .as_f64()
            .filter(|float| float.fract() == 0.0 && float.abs() < 9.0e15)
            .map(|float| float as i64)
    })
}

fn parse_range(body: &Value, path: &str) -> Result<ConstraintRule, TemplateError> {
    let map = bounds_map(body, path, "range", ["min", "max"])?;
    let min = bound(map, "min", path)?;
    let max = bound(map, "max", path)?;
    if min.is_none() && max.is_none() {
        return Err(TemplateError::new(
            path,
            "a range constraint needs min, max or both",
        ));
    }
    Ok(ConstraintRule::Range { min, max })
}

fn parse_length(body: &Value, path: &str) -> Result<ConstraintRule, TemplateError> {
    let map = bounds_map(body, path, "length", ["min", "max"])?;
    let mut limits = [None, None];
    for (slot, key) in limits.iter_mut().zip(["min", "max"]) {
        if let Some(number) = bound(map, key, path)? {
            *slot = Some(integral(&number).ok_or_else(|| {
                TemplateError::new(
                    child_path(path, key),
                    format!("length {key} must be an integer, found {number}"),
                )
            })?);
        }
    }
    let [min, max] = limits;
    if min.is_none() && max.is_none() {
        return Err(TemplateError::new(
            path,
            "a length constraint needs min, max or both",
        ));
    }
    Ok(ConstraintRule::Length { min, max })
}

fn parse_modulo(body: &Value, path: &str) -> Result<ConstraintRule, TemplateError> {
    let map = bounds_map(body, path, "modulo", ["step", "offset"])?;
    let mut parts = [0i64; 2];
    for (slot, key) in parts.iter_mut().zip(["step", "offset"]) {
        let number = bound(map, key, path)?.ok_or_else(|| {
            TemplateError::new(path, "a modulo constraint needs both step and offset")
        })?;
        *slot = integral(&number).ok_or_else(|| {
            TemplateError::new(
                child_path(path, key),
                format!("modulo {key} must be an integer, found {number}"),
            )
        })?;
    }
    let [step, offset] = parts;
    if step == 0 {
        return Err(TemplateError::new(path, "modulo step cannot be 0"));
    }
    if offset.unsigned_abs() >= step.unsigned_abs() {
        return Err(TemplateError::new(
            path,
            format!("modulo offset {offset} must be smaller than step {step} in absolute value"),
        ));
    }
    if (step < 0 && offset > 0) || (step > 0 && offset < 0) {
        return Err(TemplateError::new(
            path,
            "modulo step and offset must be both positive or both negative",
        ));
    }
    Ok(ConstraintRule::Modulo { step, offset })
}

fn parse_pattern(body: &Value, path: &str) -> Result<ConstraintRule, TemplateError> {
    let Value::String(pattern) = body else {
        return Err(TemplateError::new(
            path,
            format!(
                "allowed_pattern must be a string, found a {}",
                type_name(body)
            ),
        ));
    };
    // Heat checks `re.match(pattern, value)` and that the match ends at
    // the value's end: anchored at the start, the first match a
    // backtracking engine finds (so `a|ab` refuses "ab", as in Heat), with
    // Python's look-around and backreferences.
    let regex = RegexBuilder::new(&format!(r"\A(?:{pattern})"))
        .delegate_size_limit(MAX_PATTERN_PROGRAM_BYTES)
        .backtrack_limit(MAX_PATTERN_BACKTRACKS)
        .build()
        .map_err(|error| {
            TemplateError::new(
                path,
                format!("allowed_pattern \"{pattern}\" is not a valid regular expression: {error}"),
            )
        })?;
    Ok(ConstraintRule::AllowedPattern {
        pattern: pattern.clone(),
        regex,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_error(definition: Value, parameter_type: ParameterType) -> TemplateError {
        ParameterConstraint::parse(&definition, parameter_type, TemplateVersion::LATEST, "c")
            .unwrap_err()
    }

    #[test]
    fn range_rejects_bad_definitions() {
        assert!(
            parse_error(json!({"range": {}}), ParameterType::Number)
                .message
                .contains("needs min, max or both")
        );
        assert!(
            parse_error(json!({"range": {"min": "x"}}), ParameterType::Number)
                .message
                .contains("'x' is not a number")
        );
        assert!(
            parse_error(json!({"range": {"low": 1}}), ParameterType::Number)
                .message
                .contains("unknown key 'low'")
        );
        let error = parse_error(json!({"range": {"min": 1}}), ParameterType::String);
        assert_eq!(error.path, "c.range");
        assert_eq!(
            error.message,
            "the range constraint cannot be used with a string parameter"
        );
    }

    #[test]
    fn length_rejects_bad_definitions() {
        assert!(
            parse_error(json!({"length": {"min": 1.5}}), ParameterType::String)
                .message
                .contains("must be an integer")
        );
        assert!(
            parse_error(json!({"length": {}}), ParameterType::String)
                .message
                .contains("needs min, max or both")
        );
        assert!(
            parse_error(json!({"length": {"min": 1}}), ParameterType::Number)
                .message
                .contains("cannot be used with a number parameter")
        );
    }

    #[test]
    fn modulo_rejects_bad_definitions_and_old_versions() {
        for (definition, fragment) in [
            (
                json!({"modulo": {"step": 0, "offset": 0}}),
                "step cannot be 0",
            ),
            (
                json!({"modulo": {"step": 2, "offset": 2}}),
                "must be smaller than step",
            ),
            (
                json!({"modulo": {"step": 2, "offset": -1}}),
                "both positive or both negative",
            ),
            (json!({"modulo": {"step": 2}}), "needs both step and offset"),
            (
                json!({"modulo": {"step": 2.5, "offset": 0}}),
                "must be an integer",
            ),
        ] {
            let error = parse_error(definition, ParameterType::Number);
            assert!(error.message.contains(fragment), "{error}");
        }
        let error = ParameterConstraint::parse(
            &json!({"modulo": {"step": 2, "offset": 0}}),
            ParameterType::Number,
            TemplateVersion::V2016_10_14,
            "c",
        )
        .unwrap_err();
        assert!(
            error
                .message
                .contains("requires heat_template_version 2017-02-24")
        );
    }

    #[test]
    fn allowed_values_rejects_bad_definitions() {
        assert!(
            parse_error(json!({"allowed_values": "a"}), ParameterType::String)
                .message
                .contains("must be a list")
        );
        assert!(
            parse_error(json!({"allowed_values": ["a"]}), ParameterType::Json)
                .message
                .contains("cannot be used with a json parameter")
        );
    }

    #[test]
    fn allowed_pattern_rejects_bad_definitions() {
        assert!(
            parse_error(json!({"allowed_pattern": "("}), ParameterType::String)
                .message
                .contains("not a valid regular expression")
        );
        assert!(
            parse_error(json!({"allowed_pattern": 5}), ParameterType::String)
                .message
                .contains("must be a string")
        );
        assert!(
            parse_error(
                json!({"allowed_pattern": "(?:\\w{1000}){1000}"}),
                ParameterType::String
            )
            .message
            .contains("not a valid regular expression")
        );
    }

    #[test]
    fn malformed_entries_are_rejected() {
        assert!(
            parse_error(json!("range"), ParameterType::Number)
                .message
                .contains("must be a map")
        );
        assert!(
            parse_error(json!({"description": "x"}), ParameterType::Number)
                .message
                .contains("does not say what it constrains")
        );
        assert!(
            parse_error(
                json!({"range": {"min": 1}, "modulo": {"step": 2, "offset": 0}}),
                ParameterType::Number
            )
            .message
            .contains("exactly one kind")
        );
        assert!(
            parse_error(json!({"ranges": {}}), ParameterType::Number)
                .message
                .contains("unknown constraint key 'ranges'")
        );
        assert!(
            parse_error(
                json!({"range": {"min": 1}, "description": 3}),
                ParameterType::Number
            )
            .message
            .contains("description must be a string")
        );
    }
}
