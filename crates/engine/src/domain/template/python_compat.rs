//! Reproduces the Python text conversions whose output Heat users can
//! observe: `str()` of scalars, `json.dumps(..., sort_keys=True)`, and
//! `urllib.parse.quote`. Matching them keeps rendered strings (user data,
//! digests of rendered strings, URLs) identical to what Heat produces.

use std::fmt::Write;

use serde_json::{Number, Value};

/// Python's `str()` of a scalar value, or `None` for lists and maps.
/// `null` is handled by callers because each function treats it
/// differently.
pub(crate) fn python_str(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(python_number(number)),
        Value::Bool(true) => Some("True".to_string()),
        Value::Bool(false) => Some("False".to_string()),
        Value::Null => Some("None".to_string()),
        Value::Array(_) | Value::Object(_) => None,
    }
}

pub(crate) fn python_number(number: &Number) -> String {
    if number.is_f64() {
        number
            .as_f64()
            .map_or_else(|| number.to_string(), python_float)
    } else {
        number.to_string()
    }
}

/// Python's `repr(float)`: shortest round-trip digits, a trailing `.0` for
/// integral values, and exponent notation outside `1e-4 <= |x| < 1e16`.
pub(crate) fn python_float(number: f64) -> String {
    if number == 0.0 {
        return if number.is_sign_negative() {
            "-0.0"
        } else {
            "0.0"
        }
        .to_string();
    }
    // `{:e}` yields the shortest round-trip digits, e.g. "1.5e-5".
    let scientific = format!("{number:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    if !(-4..16).contains(&exponent) {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{sign}{first}{fraction}e{exponent_sign}{:02}",
            exponent.abs()
        );
    }
    let point = exponent + 1;
    if point <= 0 {
        let zeros = "0".repeat(point.unsigned_abs() as usize);
        format!("{sign}0.{zeros}{digits}")
    } else {
        let point = point as usize;
        if digits.len() <= point {
            let zeros = "0".repeat(point - digits.len());
            format!("{sign}{digits}{zeros}.0")
        } else {
            let (whole, fraction) = digits.split_at(point);
            format!("{sign}{whole}.{fraction}")
        }
    }
}

/// Python's `json.dumps(value, sort_keys=True)` with its default
/// separators (`", "`, `": "`) and ASCII-only output.
pub(crate) fn python_json_dumps(value: &Value) -> String {
    let mut output = String::new();
    write_python_json(value, &mut output);
    output
}

fn write_python_json(value: &Value, output: &mut String) {
    match value {
        Value::Null => output.push_str("null"),
        Value::Bool(flag) => output.push_str(if *flag { "true" } else { "false" }),
        Value::Number(number) => output.push_str(&python_number(number)),
        Value::String(text) => write_python_json_string(text, output),
        Value::Array(items) => {
            output.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    output.push_str(", ");
                }
                write_python_json(item, output);
            }
            output.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            output.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    output.push_str(", ");
                }
                write_python_json_string(key, output);
                output.push_str(": ");
                if let Some(item) = map.get(key) {
                    write_python_json(item, output);
                }
            }
            output.push('}');
        }
    }
}

fn write_python_json_string(text: &str, output: &mut String) {
    output.push('"');
    for character in text.chars() {
        match character {
            '"' => output.push_str("\\\""),
            '\\' => output.push_str("\\\\"),
            '\n' => output.push_str("\\n"),
            '\r' => output.push_str("\\r"),
            '\t' => output.push_str("\\t"),
            '\u{08}' => output.push_str("\\b"),
            '\u{0c}' => output.push_str("\\f"),
            ' '..='~' => output.push(character),
            _ => {
                let mut units = [0u16; 2];
                for unit in character.encode_utf16(&mut units) {
                    let _ = write!(output, "\\u{unit:04x}");
                }
            }
        }
    }
    output.push('"');
}

/// Python's `urllib.parse.quote(text, safe=...)`: letters, digits and
/// `_.-~` are never encoded; other bytes of the UTF-8 encoding are, except
/// those in `safe`.
pub(crate) fn percent_quote(text: &str, safe: &str) -> String {
    let mut output = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric()
            || b"_.-~".contains(&byte)
            || safe.as_bytes().contains(&byte)
        {
            output.push(char::from(byte));
        } else {
            let _ = write!(output, "%{byte:02X}");
        }
    }
    output
}

/// Python's `quote_plus(text, safe="")`: like `percent_quote` but spaces
/// become `+`.
pub(crate) fn percent_quote_plus(text: &str) -> String {
    text.split(' ')
        .map(|part| percent_quote(part, ""))
        .collect::<Vec<_>>()
        .join("+")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scalars_render_like_python_str() {
        assert_eq!(python_str(&json!("a")).unwrap(), "a");
        assert_eq!(python_str(&json!(3)).unwrap(), "3");
        assert_eq!(python_str(&json!(true)).unwrap(), "True");
        assert_eq!(python_str(&json!(null)).unwrap(), "None");
        assert_eq!(python_str(&json!([1])), None);
    }

    #[test]
    fn floats_render_like_python_repr() {
        assert_eq!(python_float(1.0), "1.0");
        assert_eq!(python_float(3.5), "3.5");
        assert_eq!(python_float(-0.25), "-0.25");
        assert_eq!(python_float(0.0001), "0.0001");
        assert_eq!(python_float(0.00001), "1e-05");
        assert_eq!(python_float(1.5e-7), "1.5e-07");
        assert_eq!(python_float(1e16), "1e+16");
        assert_eq!(python_float(123456789012345.0), "123456789012345.0");
        assert_eq!(python_float(0.1), "0.1");
    }

    #[test]
    fn json_dumps_sorts_keys_and_uses_python_separators() {
        let value = json!({"b": [1, 2.0, null], "a": {"é": true}});
        assert_eq!(
            python_json_dumps(&value),
            r#"{"a": {"\u00e9": true}, "b": [1, 2.0, null]}"#
        );
        assert_eq!(python_json_dumps(&json!("😀\n")), r#""\ud83d\ude00\n""#);
    }

    #[test]
    fn quoting_matches_urllib() {
        assert_eq!(percent_quote("a b/c", "/"), "a%20b/c");
        assert_eq!(percent_quote("user@x", ""), "user%40x");
        assert_eq!(percent_quote("é", ""), "%C3%A9");
        assert_eq!(percent_quote_plus("a b/c"), "a+b%2Fc");
    }
}
