//! Reading Compute API requests strictly: JSON bodies, their keys and
//! types, uuids and query flags. Every refusal is a 400 naming the key.

use std::collections::HashMap;

use ember_proto::engine::v1 as pb;
use ember_runtime::ErrorKind;
use serde_json::{Map, Value};

use crate::error::RestError;

pub fn bad_request(message: impl Into<String>) -> RestError {
    RestError::new(ErrorKind::InvalidInput, message)
}

/// The body as a JSON object.
pub fn json_object(body: &[u8]) -> Result<Map<String, Value>, RestError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(other) => Err(bad_request(format!(
            "the body must be a JSON object (got {})",
            kind_of(&other)
        ))),
        Err(error) => Err(bad_request(format!("the body is not JSON: {error}"))),
    }
}

/// `{"instance": {…}}` or the bare object.
pub fn unwrap_instance(body: Map<String, Value>) -> Result<Map<String, Value>, RestError> {
    match body.get("instance") {
        Some(Value::Object(inner)) if body.len() == 1 => Ok(inner.clone()),
        Some(other) if body.len() == 1 => Err(bad_request(format!(
            "instance: must be an object (got {})",
            kind_of(other)
        ))),
        _ => Ok(body),
    }
}

pub fn refuse_unknown_keys(
    body: &Map<String, Value>,
    allowed: &[&str],
    what: &str,
) -> Result<(), RestError> {
    match body.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(unknown) => Err(bad_request(format!(
            "unknown key {unknown:?}: {what} takes only {}",
            allowed
                .iter()
                .map(|key| format!("{key:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        None => Ok(()),
    }
}

pub fn required_string(body: &Map<String, Value>, key: &str) -> Result<String, RestError> {
    match body.get(key) {
        Some(Value::String(text)) => Ok(text.clone()),
        None | Some(Value::Null) => Err(bad_request(format!("{key}: missing"))),
        Some(other) => Err(bad_request(format!(
            "{key}: must be a string (got {})",
            kind_of(other)
        ))),
    }
}

pub fn metadata(value: &Value) -> Result<HashMap<String, String>, RestError> {
    string_map("metadata", value)
}

/// An object whose values are all strings (`metadata`, `env`).
pub fn string_map(key: &str, value: &Value) -> Result<HashMap<String, String>, RestError> {
    let Value::Object(items) = value else {
        return Err(bad_request(format!(
            "{key}: must be an object of strings (got {})",
            kind_of(value)
        )));
    };
    items
        .iter()
        .map(|(name, value)| match value {
            Value::String(text) => Ok((name.clone(), text.clone())),
            other => Err(bad_request(format!(
                "{key} {name:?}: values must be strings (got {})",
                kind_of(other)
            ))),
        })
        .collect()
}

/// A list of strings (`command`).
pub fn string_list(key: &str, value: &Value) -> Result<Vec<String>, RestError> {
    let Value::Array(items) = value else {
        return Err(bad_request(format!(
            "{key}: must be a list of strings (got {})",
            kind_of(value)
        )));
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| match item {
            Value::String(text) => Ok(text.clone()),
            other => Err(bad_request(format!(
                "{key}[{index}]: must be a string (got {})",
                kind_of(other)
            ))),
        })
        .collect()
}

/// `user_data` as Nova and Mogan take it: base64 of UTF-8 text.
pub fn user_data(value: &Value) -> Result<String, RestError> {
    use base64::Engine;
    let Value::String(encoded) = value else {
        return Err(bad_request(format!(
            "user_data: must be a base64 string (got {})",
            kind_of(value)
        )));
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|error| {
            bad_request(format!(
                "user_data: is not base64 ({error}): encode it, as Nova requires"
            ))
        })?;
    String::from_utf8(bytes)
        .map_err(|_| bad_request("user_data: the decoded user data is not UTF-8 text"))
}

pub fn query_bool(key: &str, text: &str) -> Result<bool, RestError> {
    match text.to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(bad_request(format!(
            "{key}: must be true or false (got {text:?})"
        ))),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `networks`: a list of `{network | uuid | net_id, port | port_id, subnet,
/// fixed_ip}` (Nova's and Mogan's spellings both taken).
pub fn networks(value: &Value) -> Result<Vec<pb::InstanceNetwork>, RestError> {
    let Value::Array(entries) = value else {
        return Err(bad_request(format!(
            "networks: must be a list of maps (got {value})"
        )));
    };
    entries
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let Value::Object(entry) = entry else {
                return Err(bad_request(format!(
                    "networks[{index}]: must be a map (got {entry})"
                )));
            };
            let known = [
                "network", "uuid", "net_id", "port", "port_id", "subnet", "fixed_ip",
            ];
            if let Some(unknown) = entry.keys().find(|key| !known.contains(&key.as_str())) {
                return Err(bad_request(format!(
                    "networks[{index}].{unknown}: unknown key (one of {})",
                    known.join(", ")
                )));
            }
            let text = |keys: &[&str]| -> Result<String, RestError> {
                for key in keys {
                    match entry.get(*key) {
                        None | Some(Value::Null) => {}
                        Some(Value::String(text)) => return Ok(text.clone()),
                        Some(other) => {
                            return Err(bad_request(format!(
                                "networks[{index}].{key}: must be a string (got {other})"
                            )));
                        }
                    }
                }
                Ok(String::new())
            };
            Ok(pb::InstanceNetwork {
                network: text(&["network", "uuid", "net_id"])?,
                port: text(&["port", "port_id"])?,
                subnet: text(&["subnet"])?,
                fixed_ip: text(&["fixed_ip"])?,
            })
        })
        .collect()
}
