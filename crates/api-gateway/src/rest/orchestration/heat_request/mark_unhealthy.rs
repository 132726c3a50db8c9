//! The body of `PATCH …/resources/{resource}` (spec heat-mark-unhealthy):
//! exactly `mark_unhealthy` — a JSON boolean, or "true"/"false" in any case
//! as Heat's extract_bool takes them — and an optional
//! `resource_status_reason` string (null counts as absent:
//! python-heatclient sends it when no reason is given). Anything else is a
//! 400 naming the key.

use serde_json::{Map, Value};

use super::{invalid, kind_of};
use crate::error::RestError;

const MARK_UNHEALTHY: &str = "mark_unhealthy";
const REASON: &str = "resource_status_reason";

/// A parsed mark-unhealthy body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkUnhealthyBody {
    pub mark_unhealthy: bool,
    /// Empty when none was given (the engine then uses Heat's default).
    pub resource_status_reason: String,
}

pub fn mark_unhealthy_body(map: Map<String, Value>) -> Result<MarkUnhealthyBody, RestError> {
    if let Some(unknown) = map
        .keys()
        .find(|key| !matches!(key.as_str(), MARK_UNHEALTHY | REASON))
    {
        return Err(invalid(format!(
            "unknown key {unknown:?}: the body takes only {MARK_UNHEALTHY} and {REASON}"
        )));
    }
    let mark_unhealthy = match map.get(MARK_UNHEALTHY) {
        None => {
            return Err(invalid(format!(
                "{MARK_UNHEALTHY} is required: send {{\"{MARK_UNHEALTHY}\": true}} (or false to reset a mark)"
            )));
        }
        Some(Value::Bool(mark)) => *mark,
        Some(Value::String(text)) if text.eq_ignore_ascii_case("true") => true,
        Some(Value::String(text)) if text.eq_ignore_ascii_case("false") => false,
        Some(other) => {
            return Err(invalid(format!(
                "{MARK_UNHEALTHY} must be true or false (a boolean, or the string \"true\" or \"false\"), got {}: {other}",
                kind_of(other)
            )));
        }
    };
    let resource_status_reason = match map.get(REASON) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(reason)) => reason.clone(),
        Some(other) => {
            return Err(invalid(format!(
                "{REASON} must be a string, got {}",
                kind_of(other)
            )));
        }
    };
    Ok(MarkUnhealthyBody {
        mark_unhealthy,
        resource_status_reason,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{body, message};
    use super::*;

    #[test]
    fn the_body_takes_a_boolean_and_an_optional_reason() {
        let cases = [
            (json!({"mark_unhealthy": true}), true, ""),
            (json!({"mark_unhealthy": false}), false, ""),
            (json!({"mark_unhealthy": "TRUE"}), true, ""),
            (json!({"mark_unhealthy": "False"}), false, ""),
            (
                json!({"mark_unhealthy": true, "resource_status_reason": "disk"}),
                true,
                "disk",
            ),
            (
                json!({"mark_unhealthy": true, "resource_status_reason": null}),
                true,
                "",
            ),
        ];
        for (value, mark, reason) in cases {
            let parsed = mark_unhealthy_body(body(value.clone())).expect("valid");
            assert_eq!(
                (
                    parsed.mark_unhealthy,
                    parsed.resource_status_reason.as_str()
                ),
                (mark, reason),
                "{value}"
            );
        }
    }

    #[test]
    fn anything_else_is_refused_naming_the_key() {
        let cases = [
            (json!({}), "mark_unhealthy is required"),
            (
                json!({"resource_status_reason": "x"}),
                "mark_unhealthy is required",
            ),
            (
                json!({"mark_unhealthy": true, "other": 1}),
                "unknown key \"other\"",
            ),
            (
                json!({"mark_unhealthy": "yes"}),
                "mark_unhealthy must be true or false",
            ),
            (
                json!({"mark_unhealthy": 1}),
                "mark_unhealthy must be true or false",
            ),
            (
                json!({"mark_unhealthy": null}),
                "mark_unhealthy must be true or false",
            ),
            (
                json!({"mark_unhealthy": true, "resource_status_reason": 5}),
                "resource_status_reason must be a string",
            ),
        ];
        for (value, expected) in cases {
            let error = mark_unhealthy_body(body(value.clone())).expect_err("refused");
            assert!(message(error).contains(expected), "{value} → {expected}");
        }
    }
}
