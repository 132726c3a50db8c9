//! `google.protobuf.Struct`/`Value` ⇄ JSON, the one conversion every crate
//! uses: free-form JSON (parameters, templates, attributes, abandon data)
//! travels in the protos as `Struct`, and the engine, the gateway and the
//! CLI must read and write it the same way.

use prost_types::value::Kind;
use serde_json::{Map, Number, Value};

/// Largest integer an f64 holds exactly: numbers up to it that have no
/// fraction are shown as integers, as the user wrote them (`5`, not `5.0`).
const LARGEST_EXACT_INTEGER: f64 = 9_007_199_254_740_992.0;

/// A `Struct` as a JSON object; an absent one is an empty object.
pub fn struct_to_json(value: Option<&prost_types::Struct>) -> Value {
    Value::Object(struct_to_map(value))
}

pub fn struct_to_map(value: Option<&prost_types::Struct>) -> Map<String, Value> {
    value
        .map(|value| {
            value
                .fields
                .iter()
                .map(|(key, field)| (key.clone(), value_to_json(field)))
                .collect()
        })
        .unwrap_or_default()
}

pub fn list_to_json(value: Option<&prost_types::ListValue>) -> Value {
    Value::Array(
        value
            .map(|list| list.values.iter().map(value_to_json).collect())
            .unwrap_or_default(),
    )
}

pub fn value_to_json(value: &prost_types::Value) -> Value {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(boolean)) => Value::Bool(*boolean),
        Some(Kind::NumberValue(number)) => number_to_json(*number),
        Some(Kind::StringValue(text)) => Value::String(text.clone()),
        Some(Kind::ListValue(list)) => list_to_json(Some(list)),
        Some(Kind::StructValue(object)) => struct_to_json(Some(object)),
    }
}

/// An optional `Value` (absent = JSON null).
pub fn optional_value_to_json(value: Option<&prost_types::Value>) -> Value {
    value.map(value_to_json).unwrap_or(Value::Null)
}

#[allow(clippy::cast_possible_truncation)] // guarded: whole and within ±2^53
fn number_to_json(number: f64) -> Value {
    if number.fract() == 0.0 && number.abs() <= LARGEST_EXACT_INTEGER {
        Value::Number(Number::from(number as i64))
    } else {
        Number::from_f64(number).map_or(Value::Null, Value::Number)
    }
}

pub fn map_to_struct(map: Map<String, Value>) -> prost_types::Struct {
    prost_types::Struct {
        fields: map
            .into_iter()
            .map(|(key, value)| (key, json_to_value(value)))
            .collect(),
    }
}

pub fn json_to_value(value: Value) -> prost_types::Value {
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(boolean) => Kind::BoolValue(boolean),
        Value::Number(number) => Kind::NumberValue(number.as_f64().unwrap_or(0.0)),
        Value::String(text) => Kind::StringValue(text),
        Value::Array(items) => Kind::ListValue(prost_types::ListValue {
            values: items.into_iter().map(json_to_value).collect(),
        }),
        Value::Object(map) => Kind::StructValue(map_to_struct(map)),
    };
    prost_types::Value { kind: Some(kind) }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_survives_a_round_trip_with_integers_kept_whole() {
        let original = json!({
            "count": 5,
            "ratio": 0.5,
            "name": "web",
            "enabled": true,
            "nothing": null,
            "list": [1, "two", {"three": 3}],
        });
        let Value::Object(map) = original.clone() else {
            panic!("object")
        };
        let back = struct_to_json(Some(&map_to_struct(map)));
        assert_eq!(back, original);
        assert_eq!(back["count"].to_string(), "5");
    }

    #[test]
    fn an_absent_struct_is_an_empty_object() {
        assert_eq!(struct_to_json(None), json!({}));
        assert_eq!(list_to_json(None), json!([]));
        assert_eq!(optional_value_to_json(None), Value::Null);
    }
}
