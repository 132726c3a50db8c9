//! Reading a resource's properties as the Neutron types need them:
//! present or not (null is not), lists of text or of maps with each bad
//! item named by its place, and Heat's `value_specs` — extra fields merged
//! into Neutron's request body, never setting what a property sets.

use serde_json::{Map, Value};

use crate::resources::{ResourceFailure, ResourceTypeSchema};

/// An object's fields as a map (what attributes and `show` read).
pub fn fields(object: Value) -> Map<String, Value> {
    match object {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// A property's value unless absent or null.
pub fn present<'a>(properties: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    properties.get(name).filter(|value| !value.is_null())
}

/// A list property's items as text (`[]` when not given).
pub fn strings(
    properties: &Map<String, Value>,
    name: &str,
) -> Result<Vec<String>, ResourceFailure> {
    match present(properties, name) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(text) => Ok(text.clone()),
                Value::Number(number) => Ok(number.to_string()),
                other => Err(ResourceFailure::new(format!(
                    "{name}: expected a list of strings, got the item {other}"
                ))),
            })
            .collect(),
        Some(other) => Err(ResourceFailure::new(format!(
            "{name}: expected a list, got {other}"
        ))),
    }
}

/// A list property's items as maps (`[]` when not given), for the lists
/// of structured entries (fixed IPs, rules, host routes): `name[i]` names
/// a bad entry.
pub fn maps<'a>(
    properties: &'a Map<String, Value>,
    name: &str,
) -> Result<Vec<&'a Map<String, Value>>, ResourceFailure> {
    match present(properties, name) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(index, item)| {
                item.as_object().ok_or_else(|| {
                    ResourceFailure::new(format!("{name}[{index}]: expected a map, got {item}"))
                })
            })
            .collect(),
        Some(other) => Err(ResourceFailure::new(format!(
            "{name}: expected a list, got {other}"
        ))),
    }
}

/// Copies each of `names` the template gives into `body`, as given.
pub fn copy_given(body: &mut Map<String, Value>, properties: &Map<String, Value>, names: &[&str]) {
    for name in names {
        if let Some(value) = present(properties, name) {
            body.insert((*name).to_owned(), value.clone());
        }
    }
}

/// Puts the object's name into a create body — the template's, else
/// `default_name` (the resource's) — then each of `names` the template
/// gives, as given.
pub fn copy_name_and_given(
    body: &mut Map<String, Value>,
    properties: &Map<String, Value>,
    default_name: &str,
    names: &[&str],
) {
    let name = present(properties, "name")
        .cloned()
        .unwrap_or_else(|| Value::String(default_name.to_owned()));
    body.insert("name".to_owned(), name);
    copy_given(body, properties, names);
}

/// Heat's `validate_properties`: `value_specs` may not set what a
/// property of the type sets, nor `shared` or `tenant_id`.
pub fn check_value_specs(
    schema: &ResourceTypeSchema,
    properties: &Map<String, Value>,
) -> Result<(), ResourceFailure> {
    let Some(value_specs) = present(properties, "value_specs").and_then(Value::as_object) else {
        return Ok(());
    };
    let refused: Vec<&str> = value_specs
        .keys()
        .map(String::as_str)
        .filter(|key| matches!(*key, "shared" | "tenant_id") || schema.property(key).is_some())
        .collect();
    if refused.is_empty() {
        Ok(())
    } else {
        Err(ResourceFailure::new(format!(
            "{} not allowed in value_specs",
            refused.join(", ")
        )))
    }
}

/// Merges `value_specs` into a body (Heat's `merge_value_specs`): each
/// entry becomes a top-level field; with `before` (an update), only the
/// entries whose value changed.
pub fn merge_value_specs(
    body: &mut Map<String, Value>,
    value_specs: &Map<String, Value>,
    before: Option<&Map<String, Value>>,
) {
    for (key, value) in value_specs {
        if before.and_then(|before| before.get(key)) == Some(value) {
            continue;
        }
        body.insert(key.clone(), value.clone());
    }
}

/// Merges the template's `value_specs`, if given, into a create body.
pub fn merge_given_value_specs(body: &mut Map<String, Value>, properties: &Map<String, Value>) {
    if let Some(value_specs) = present(properties, "value_specs").and_then(Value::as_object) {
        merge_value_specs(body, value_specs, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{PropertySchema, PropertyType};
    use serde_json::json;

    fn properties(value: Value) -> Map<String, Value> {
        fields(value)
    }

    #[test]
    fn value_specs_become_fields_and_an_update_sends_only_what_changed() {
        let mut body = properties(json!({"name": "n"}));
        let specs = properties(json!({"mtu": 1400, "description": "d"}));
        merge_value_specs(&mut body, &specs, None);
        assert_eq!(
            body,
            properties(json!({"name": "n", "mtu": 1400, "description": "d"}))
        );

        let mut update = Map::new();
        let before = properties(json!({"mtu": 1400, "description": "old"}));
        merge_value_specs(&mut update, &specs, Some(&before));
        assert_eq!(update, properties(json!({"description": "d"})));
    }

    #[test]
    fn value_specs_may_not_set_what_a_property_sets() {
        let schema = ResourceTypeSchema {
            type_name: "OS::Neutron::Net",
            description: "",
            properties: vec![
                PropertySchema::new("name", PropertyType::String, ""),
                PropertySchema::new("value_specs", PropertyType::Map, ""),
            ],
            attributes: vec![],
            accepts_any_properties: false,
            accepts_any_attributes: false,
        };
        let refused = check_value_specs(
            &schema,
            &properties(json!({"value_specs": {"name": "x", "shared": true, "mtu": 1}})),
        )
        .expect_err("refused");
        assert_eq!(
            refused.to_string(),
            "name, shared not allowed in value_specs"
        );
        assert!(
            check_value_specs(&schema, &properties(json!({"value_specs": {"mtu": 1}}))).is_ok()
        );
        assert!(check_value_specs(&schema, &properties(json!({}))).is_ok());
    }

    #[test]
    fn list_properties_name_their_bad_items() {
        let given = properties(json!({"tags": ["a", 7], "rules": [{"a": 1}, "x"], "bad": [{}]}));
        assert_eq!(strings(&given, "tags").expect("strings"), vec!["a", "7"]);
        assert!(strings(&given, "missing").expect("none").is_empty());
        assert_eq!(
            maps(&given, "rules").expect_err("not a map").to_string(),
            "rules[1]: expected a map, got \"x\""
        );
        assert_eq!(
            strings(&given, "bad").expect_err("not text").to_string(),
            "bad: expected a list of strings, got the item {}"
        );
    }
}
