//! Parameter constraints: the parsed form (`range`, `length`, `modulo`,
//! `allowed_values`, `allowed_pattern`, `custom_constraint`) and checking
//! coerced parameter values against it. Parsing is in
//! `constraint_parsing.rs`.

use fancy_regex::Regex;
use serde_json::{Number, Value};

use super::error::{describe_value, type_name};
use super::parameters::{ParameterType, number_from_text};
use super::python_compat::{python_number, python_str};

/// A parsed constraint with its optional custom error message.
#[derive(Debug, Clone)]
pub struct ParameterConstraint {
    pub rule: ConstraintRule,
    /// Replaces the generated message when the constraint fails.
    pub description: Option<String>,
}

#[derive(Debug, Clone)]
pub enum ConstraintRule {
    Range {
        min: Option<Number>,
        max: Option<Number>,
    },
    Length {
        min: Option<i64>,
        max: Option<i64>,
    },
    Modulo {
        step: i64,
        offset: i64,
    },
    AllowedValues(Vec<Value>),
    AllowedPattern {
        pattern: String,
        /// The pattern anchored at the start; Heat requires the first
        /// match to end at the value's end.
        regex: Regex,
    },
    /// Accepted for compatibility; Ember does not check custom constraints.
    CustomConstraint(String),
}

impl ConstraintRule {
    pub fn kind(&self) -> &'static str {
        match self {
            ConstraintRule::Range { .. } => "range",
            ConstraintRule::Length { .. } => "length",
            ConstraintRule::Modulo { .. } => "modulo",
            ConstraintRule::AllowedValues(_) => "allowed_values",
            ConstraintRule::AllowedPattern { .. } => "allowed_pattern",
            ConstraintRule::CustomConstraint(_) => "custom_constraint",
        }
    }

    /// Which parameter types a constraint applies to, as in Heat.
    pub(super) fn applies_to(&self, parameter_type: ParameterType) -> bool {
        use ParameterType as T;
        match self {
            ConstraintRule::Range { .. } | ConstraintRule::Modulo { .. } => {
                parameter_type == T::Number
            }
            ConstraintRule::Length { .. } => {
                matches!(parameter_type, T::String | T::CommaDelimitedList | T::Json)
            }
            ConstraintRule::AllowedValues(_) | ConstraintRule::CustomConstraint(_) => {
                parameter_type != T::Json
            }
            ConstraintRule::AllowedPattern { .. } => parameter_type == T::String,
        }
    }
}

impl ParameterConstraint {
    /// Checks a coerced value; `shown` is how the value may appear in the
    /// message (hidden parameters pass a mask so secrets are not echoed).
    pub fn check(&self, value: &Value, shown: &str) -> Result<(), String> {
        match self.violation(value, shown) {
            None => Ok(()),
            Some(generated) => Err(self.description.clone().unwrap_or(generated)),
        }
    }

    fn violation(&self, value: &Value, shown: &str) -> Option<String> {
        match &self.rule {
            ConstraintRule::Range { min, max } => {
                let number = value.as_f64()?;
                let below = min
                    .as_ref()
                    .and_then(Number::as_f64)
                    .is_some_and(|min| number < min);
                let above = max
                    .as_ref()
                    .and_then(Number::as_f64)
                    .is_some_and(|max| number > max);
                (below || above)
                    .then(|| format!("value {shown} is out of range ({})", bounds_text(min, max)))
            }
            ConstraintRule::Length { min, max } => {
                let length = match value {
                    Value::String(text) => text.chars().count(),
                    Value::Array(items) => items.len(),
                    Value::Object(map) => map.len(),
                    other => {
                        return Some(format!(
                            "a length constraint cannot measure a {}",
                            type_name(other)
                        ));
                    }
                };
                let length = i64::try_from(length).unwrap_or(i64::MAX);
                let below = min.is_some_and(|min| length < min);
                let above = max.is_some_and(|max| length > max);
                let min = min.map(Number::from);
                let max = max.map(Number::from);
                (below || above).then(|| {
                    format!(
                        "the length of value {shown} is {length}, which is out of range ({})",
                        bounds_text(&min, &max)
                    )
                })
            }
            ConstraintRule::Modulo { step, offset } => {
                let number = value.as_f64()?;
                let step_float = *step as f64;
                // Python's `%` takes the sign of the divisor; Heat relies on
                // it for negative steps.
                let remainder = number - step_float * (number / step_float).floor();
                (remainder != *offset as f64).then(|| {
                    format!("value {shown} is not a multiple of {step} with an offset of {offset}")
                })
            }
            ConstraintRule::AllowedValues(allowed) => {
                let permitted = |candidate: &Value| {
                    allowed
                        .iter()
                        .any(|item| same_allowed_value(item, candidate))
                };
                let ok = match value {
                    Value::Array(items) => items.iter().all(permitted),
                    other => permitted(other),
                };
                (!ok).then(|| {
                    let listed: Vec<String> = allowed.iter().map(describe_value).collect();
                    format!(
                        "value {shown} is not one of the allowed values [{}]",
                        listed.join(", ")
                    )
                })
            }
            ConstraintRule::AllowedPattern { pattern, regex } => {
                let text = value.as_str()?;
                match regex.find(text) {
                    Ok(Some(found)) if found.end() == text.len() => None,
                    Ok(_) => Some(format!(
                        "value {shown} does not match the pattern \"{pattern}\""
                    )),
                    Err(error) => Some(format!(
                        "value {shown} could not be checked against the pattern \"{pattern}\": {error}"
                    )),
                }
            }
            ConstraintRule::CustomConstraint(_) => None,
        }
    }
}

/// Heat converts allowed values to the parameter's type before comparing,
/// so `allowed_values: [1, 2]` accepts the string parameter value "1".
fn same_allowed_value(allowed: &Value, candidate: &Value) -> bool {
    match candidate {
        Value::Number(number) => {
            let allowed_number = match allowed {
                Value::Number(allowed) => allowed.as_f64(),
                Value::String(text) => number_from_text(text).and_then(|n| n.as_f64()),
                _ => None,
            };
            allowed_number.is_some_and(|allowed| Some(allowed) == number.as_f64())
        }
        Value::Bool(flag) => match allowed {
            Value::Bool(allowed) => allowed == flag,
            other => python_str(other)
                .and_then(|text| super::parameters::boolean_from_text(&text))
                .is_some_and(|allowed| allowed == *flag),
        },
        Value::String(text) => python_str(allowed).is_some_and(|allowed| &allowed == text),
        other => allowed == other,
    }
}

fn bounds_text(min: &Option<Number>, max: &Option<Number>) -> String {
    match (min, max) {
        (Some(min), Some(max)) => format!("min {}, max {}", python_number(min), python_number(max)),
        (Some(min), None) => format!("min {}", python_number(min)),
        (None, Some(max)) => format!("max {}", python_number(max)),
        (None, None) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::error::TemplateError;
    use super::super::version::TemplateVersion;
    use super::*;
    use serde_json::json;

    fn constraint(definition: Value, parameter_type: ParameterType) -> ParameterConstraint {
        ParameterConstraint::parse(&definition, parameter_type, TemplateVersion::LATEST, "c")
            .unwrap()
    }

    fn parse_error(definition: Value, parameter_type: ParameterType) -> TemplateError {
        ParameterConstraint::parse(&definition, parameter_type, TemplateVersion::LATEST, "c")
            .unwrap_err()
    }

    #[test]
    fn range_accepts_values_within_bounds() {
        let range = constraint(
            json!({"range": {"min": 1, "max": 5}}),
            ParameterType::Number,
        );
        assert!(range.check(&json!(1), "1").is_ok());
        assert!(range.check(&json!(5.0), "5.0").is_ok());
        assert_eq!(
            range.check(&json!(6), "6").unwrap_err(),
            "value 6 is out of range (min 1, max 5)"
        );
        let only_min = constraint(json!({"range": {"min": "2.5"}}), ParameterType::Number);
        assert_eq!(
            only_min.check(&json!(2), "2").unwrap_err(),
            "value 2 is out of range (min 2.5)"
        );
    }

    #[test]
    fn length_counts_characters_items_and_keys() {
        let length = constraint(
            json!({"length": {"min": 2, "max": 3}}),
            ParameterType::String,
        );
        assert!(length.check(&json!("héé"), "\"héé\"").is_ok());
        assert_eq!(
            length.check(&json!("a"), "\"a\"").unwrap_err(),
            "the length of value \"a\" is 1, which is out of range (min 2, max 3)"
        );
        let list = constraint(
            json!({"length": {"max": 1}}),
            ParameterType::CommaDelimitedList,
        );
        assert!(list.check(&json!(["a", "b"]), "x").is_err());
        let map = constraint(json!({"length": {"min": 1}}), ParameterType::Json);
        assert!(map.check(&json!({}), "{}").is_err());
        assert!(map.check(&json!({"a": 1}), "x").is_ok());
    }

    #[test]
    fn modulo_uses_python_remainders() {
        let odd = constraint(
            json!({"modulo": {"step": 2, "offset": 1}}),
            ParameterType::Number,
        );
        assert!(odd.check(&json!(7), "7").is_ok());
        assert!(odd.check(&json!(-3), "-3").is_ok());
        assert_eq!(
            odd.check(&json!(4), "4").unwrap_err(),
            "value 4 is not a multiple of 2 with an offset of 1"
        );
        assert!(odd.check(&json!(3.5), "3.5").is_err());
        let negative = constraint(
            json!({"modulo": {"step": -3, "offset": -1}}),
            ParameterType::Number,
        );
        assert!(negative.check(&json!(5), "5").is_ok());
    }

    #[test]
    fn allowed_values_compare_in_the_parameter_type() {
        let sizes = constraint(
            json!({"allowed_values": ["m1.small", 2]}),
            ParameterType::String,
        );
        assert!(sizes.check(&json!("m1.small"), "x").is_ok());
        assert!(sizes.check(&json!("2"), "x").is_ok());
        assert_eq!(
            sizes.check(&json!("big"), "\"big\"").unwrap_err(),
            "value \"big\" is not one of the allowed values [\"m1.small\", 2]"
        );
        let numbers = constraint(json!({"allowed_values": ["1", 2.0]}), ParameterType::Number);
        assert!(numbers.check(&json!(1), "1").is_ok());
        assert!(numbers.check(&json!(2), "2").is_ok());
        assert!(numbers.check(&json!(3), "3").is_err());
        let flags = constraint(json!({"allowed_values": ["yes"]}), ParameterType::Boolean);
        assert!(flags.check(&json!(true), "true").is_ok());
        assert!(flags.check(&json!(false), "false").is_err());
        let lists = constraint(
            json!({"allowed_values": ["a", "b"]}),
            ParameterType::CommaDelimitedList,
        );
        assert!(lists.check(&json!(["a", "b", "a"]), "x").is_ok());
        assert!(lists.check(&json!(["a", "c"]), "x").is_err());
    }

    #[test]
    fn allowed_pattern_must_match_the_whole_value() {
        let pattern = constraint(json!({"allowed_pattern": "[a-z]+"}), ParameterType::String);
        assert!(pattern.check(&json!("abc"), "x").is_ok());
        assert_eq!(
            pattern.check(&json!("abc1"), "\"abc1\"").unwrap_err(),
            "value \"abc1\" does not match the pattern \"[a-z]+\""
        );
        let alternation = constraint(json!({"allowed_pattern": "a|b"}), ParameterType::String);
        assert!(alternation.check(&json!("ab"), "x").is_err());
    }

    /// Heat evaluates a pattern with Python's `re.match` and wants the
    /// match to end at the value's end: look-ahead and backreferences
    /// work, `^`/`$` are allowed, and the first match found is the one
    /// that counts (so `a|ab` refuses "ab" while `ab|a` takes it).
    #[test]
    fn allowed_pattern_reads_as_pythons_re_match() {
        let password = constraint(
            json!({"allowed_pattern": "^(?=.*[A-Z])(?=.*\\d)[A-Za-z\\d]{8,}$"}),
            ParameterType::String,
        );
        assert!(password.check(&json!("Secret123"), "x").is_ok());
        assert!(
            password.check(&json!("secret123"), "x").is_err(),
            "no capital"
        );
        assert!(password.check(&json!("Secret"), "x").is_err(), "too short");
        let no_admin = constraint(
            json!({"allowed_pattern": "(?!admin$)[a-z]+"}),
            ParameterType::String,
        );
        assert!(no_admin.check(&json!("alice"), "x").is_ok());
        assert!(no_admin.check(&json!("admin"), "x").is_err());
        assert!(no_admin.check(&json!("admins"), "x").is_ok());
        let doubled = constraint(
            json!({"allowed_pattern": "(\\w)\\1"}),
            ParameterType::String,
        );
        assert!(doubled.check(&json!("aa"), "x").is_ok());
        assert!(doubled.check(&json!("ab"), "x").is_err());
        let first = constraint(json!({"allowed_pattern": "a|ab"}), ParameterType::String);
        assert!(
            first.check(&json!("ab"), "x").is_err(),
            "re.match takes \"a\""
        );
        let longer_first = constraint(json!({"allowed_pattern": "ab|a"}), ParameterType::String);
        assert!(longer_first.check(&json!("ab"), "x").is_ok());
        let named = constraint(
            json!({"allowed_pattern": "(?P<zone>[a-z]+)-(?P=zone)"}),
            ParameterType::String,
        );
        assert!(named.check(&json!("az-az"), "x").is_ok());
        assert!(named.check(&json!("az-bz"), "x").is_err());
    }

    /// A pattern that backtracks without end is refused for the value,
    /// with a reason, instead of holding the engine.
    #[test]
    fn a_catastrophic_pattern_gives_up_with_a_reason() {
        let catastrophic = constraint(
            json!({"allowed_pattern": "(?=x?)(a+)+$"}),
            ParameterType::String,
        );
        let started = std::time::Instant::now();
        let refused = catastrophic
            .check(&json!(format!("{}b", "a".repeat(40))), "v")
            .unwrap_err();
        assert!(refused.contains("could not be checked"), "{refused}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn custom_constraints_are_accepted_but_not_checked() {
        let custom = constraint(
            json!({"custom_constraint": "nova.flavor"}),
            ParameterType::String,
        );
        assert!(custom.check(&json!("anything"), "x").is_ok());
        assert!(
            parse_error(json!({"custom_constraint": ["x"]}), ParameterType::String)
                .message
                .contains("must be a string")
        );
    }

    #[test]
    fn descriptions_replace_generated_messages() {
        let described = constraint(
            json!({"range": {"max": 2}, "description": "at most two please"}),
            ParameterType::Number,
        );
        assert_eq!(
            described.check(&json!(3), "3").unwrap_err(),
            "at most two please"
        );
    }
}
