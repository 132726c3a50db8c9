//! What Heat's base classes say and name the same way for every type, so
//! the openstack types fail, name what they make and show attributes in
//! Heat's words: its failure messages for a remote object in a bad state
//! (`ResourceInError`, `ResourceUnknownStatus`), for an update it refuses
//! (`NotSupported`) and for a check that found something wrong; its
//! physical resource names; and the text Python's `str()` makes of a value,
//! which is what many of Heat's attributes return.

use serde_json::{Map, Value};

use super::Cloud;
use crate::domain::Resource;
use crate::resources::{ResourceFailure, ResourceRequest, ResourceTypeSchema};

/// Heat's longest physical resource name.
const LONGEST_PHYSICAL_NAME: usize = 255;

/// Heat's `ResourceInError`: the object went into an error state.
pub fn went_to_status(status: &str, reason: &str) -> ResourceFailure {
    ResourceFailure::new(format!("Went to status {status} due to \"{reason}\""))
}

/// Heat's `ResourceUnknownStatus`: the object is in a state the step does
/// not expect (`result` says which step: `Volume create failed`).
pub fn unknown_status(result: &str, status: &str) -> ResourceFailure {
    ResourceFailure::new(format!(
        "{result} - Unknown status {status} due to \"Unknown\""
    ))
}

/// Heat's `NotSupported`.
pub fn not_supported(feature: &str) -> ResourceFailure {
    ResourceFailure::new(format!("{feature} is not supported."))
}

/// Heat's check failure: `'status': expected '['available', 'in-use']', got 'error'`
/// (the expected values as Python writes a list).
pub fn check_status(expected: &[&str], current: &str) -> Result<(), ResourceFailure> {
    if expected.contains(&current) {
        return Ok(());
    }
    let listed: Vec<String> = expected.iter().map(|value| format!("'{value}'")).collect();
    Err(ResourceFailure::new(format!(
        "'status': expected '[{}]', got '{current}'",
        listed.join(", ")
    )))
}

/// The properties an update changes (by their schema's order).
pub fn changed_properties(
    schema: &ResourceTypeSchema,
    current: &Resource,
    request: &ResourceRequest,
) -> Vec<&'static str> {
    let empty = Map::new();
    let old = current.properties.as_object().unwrap_or(&empty);
    schema
        .properties
        .iter()
        .filter(|property| old.get(property.name) != request.properties.get(property.name))
        .map(|property| property.name)
        .collect()
}

/// For the AWS types, whose every property is immutable in Heat: a change
/// fails the update (`NotSupported`) instead of replacing the resource.
pub fn refuse_immutable_changes(
    schema: &ResourceTypeSchema,
    current: &Resource,
    request: &ResourceRequest,
) -> Result<(), ResourceFailure> {
    let mut changed = changed_properties(schema, current, request);
    if changed.is_empty() {
        return Ok(());
    }
    changed.sort_unstable();
    Err(not_supported(&format!(
        "Update to properties {} of {} ({})",
        changed.join(", "),
        request.resource_name,
        schema.type_name
    )))
}

/// Heat's physical resource name, `<stack>-<resource>-<suffix>`, with a
/// suffix derived from the row (the first 12 hex digits of its
/// [marker](Cloud::marker) for `kind`) instead of Heat's random one: the
/// same on every attempt, so a name defaulted at create is the name an
/// update defaults to again. Over 255 characters it is cut as Heat cuts it
/// (the first two, a dash, the end).
pub fn physical_name(request: &ResourceRequest, kind: &str) -> String {
    let suffix: String = request
        .derived_id(kind)
        .simple()
        .to_string()
        .chars()
        .take(12)
        .collect();
    shortened(format!(
        "{}-{}-{suffix}",
        request.stack_name, request.resource_name
    ))
}

/// A name carrying the row's marker for `kind` in full
/// (`<stack>-<resource>-ember-<uuid>`), for what has nowhere else to carry
/// it (a Nova server group): found again by its name alone.
pub fn marked_name(request: &ResourceRequest, kind: &str) -> String {
    shortened(format!(
        "{}-{}-{}",
        request.stack_name,
        request.resource_name,
        Cloud::marker(request, kind)
    ))
}

/// Whether `name` is one [`marked_name`] gave for `marker`: the marker is
/// a UUID, at the end of the name (a cut keeps the end), so a name ending
/// with it was made by that row and no other.
pub fn carries_marker(name: &str, marker: &str) -> bool {
    name.strip_suffix(marker)
        .is_some_and(|head| head.ends_with('-'))
}

/// Heat's cut of a name over the limit: it keeps the end, where the suffix
/// (and a marker) is.
fn shortened(name: String) -> String {
    let length = name.chars().count();
    if length <= LONGEST_PHYSICAL_NAME {
        return name;
    }
    let head: String = name.chars().take(2).collect();
    let tail: String = name
        .chars()
        .skip(length - (LONGEST_PHYSICAL_NAME - 3))
        .collect();
    format!("{head}-{tail}")
}

/// What Python's `str()` makes of a value: text as it is, `True`/`False`,
/// `None`, numbers as written, lists and maps as Python writes them (which
/// is what Heat's `str(getattr(volume, name))` attributes show).
pub fn python_str(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => python_repr(other),
    }
}

/// Python's `repr()` of a JSON value: `{'server_id': 'a', 'id': None}`.
pub fn python_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(number) => number.to_string(),
        Value::String(text) => {
            let escaped = text.replace('\\', "\\\\").replace('\'', "\\'");
            format!("'{escaped}'")
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(python_repr).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .map(|(key, value)| format!("'{key}': {}", python_repr(value)))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
    }
}

/// What Python's `json.dumps` writes (Heat's `jsonutils.dumps`): `", "`
/// and `": "` between items, anything beyond ASCII escaped.
pub fn python_json(value: &Value) -> String {
    match value {
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(python_json).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .map(|(key, value)| format!("{}: {}", ascii_json_text(key), python_json(value)))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
        Value::String(text) => ascii_json_text(text),
        other => other.to_string(),
    }
}

/// A JSON string with every character beyond ASCII as `\uXXXX` (UTF-16).
fn ascii_json_text(text: &str) -> String {
    let quoted = Value::String(text.to_owned()).to_string();
    let mut ascii = String::with_capacity(quoted.len());
    for character in quoted.chars() {
        if character.is_ascii() {
            ascii.push(character);
        } else {
            let mut units = [0_u16; 2];
            for unit in character.encode_utf16(&mut units) {
                ascii.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    ascii
}

/// Heat's `AllowedPattern` failure (the pattern matches the whole value).
pub fn does_not_match(property: &str, value: &str, pattern: &str) -> ResourceFailure {
    ResourceFailure::new(format!(
        "{property}: \"{value}\" does not match pattern \"{pattern}\""
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(stack_name: &str, resource_name: &str) -> ResourceRequest {
        ResourceRequest {
            stack_id: uuid::Uuid::now_v7(),
            stack_name: stack_name.to_owned(),
            project_id: "p".to_owned(),
            user_id: "u".to_owned(),
            nested_depth: 0,
            type_name: "OS::Cinder::Volume".to_owned(),
            resource_name: resource_name.to_owned(),
            resource_id: uuid::Uuid::now_v7(),
            properties: Map::new(),
        }
    }

    #[test]
    fn failures_read_as_heat_writes_them() {
        assert_eq!(
            went_to_status("error", "Unknown").to_string(),
            "Went to status error due to \"Unknown\""
        );
        assert_eq!(
            unknown_status("Volume create failed", "maintenance").to_string(),
            "Volume create failed - Unknown status maintenance due to \"Unknown\""
        );
        assert_eq!(
            not_supported("Shrinking volume").to_string(),
            "Shrinking volume is not supported."
        );
        assert_eq!(check_status(&["available", "in-use"], "in-use"), Ok(()));
        assert_eq!(
            check_status(&["available", "in-use"], "error")
                .expect_err("refused")
                .to_string(),
            "'status': expected '['available', 'in-use']', got 'error'"
        );
    }

    #[test]
    fn physical_names_are_stable_per_row_and_cut_as_heat_cuts_them() {
        let made = request("web", "data");
        let name = physical_name(&made, "volume");
        assert_eq!(name, physical_name(&made, "volume"));
        assert!(name.starts_with("web-data-"), "{name}");
        assert_eq!(name.len(), "web-data-".len() + 12);
        let long = request(&"s".repeat(300), "data");
        let cut = physical_name(&long, "volume");
        assert_eq!(cut.len(), 255);
        assert!(cut.starts_with("ss-"));
        // The end is kept: the resource's name and the row's suffix.
        assert!(cut[..cut.len() - 12].ends_with("-data-"), "{cut}");
        let marked = marked_name(&long, "server group");
        assert!(carries_marker(
            &marked,
            &Cloud::marker(&long, "server group")
        ));
        assert!(!carries_marker(
            &marked,
            &Cloud::marker(&made, "server group")
        ));
        assert!(!carries_marker("ember-x", "ember-x"));
    }

    #[test]
    fn values_read_as_python_prints_them() {
        assert_eq!(python_str(&json!("1")), "1");
        assert_eq!(python_str(&json!(1)), "1");
        assert_eq!(python_str(&json!(false)), "False");
        assert_eq!(python_str(&Value::Null), "None");
        assert_eq!(
            python_str(&json!([{"device": "/dev/vdb", "id": null, "ok": true}])),
            "[{'device': '/dev/vdb', 'id': None, 'ok': True}]"
        );
        assert_eq!(python_repr(&json!("it's")), "'it\\'s'");
        assert_eq!(
            python_json(&json!({"a": "é", "b": [1, true, null]})),
            "{\"a\": \"\\u00e9\", \"b\": [1, true, null]}"
        );
    }
}
