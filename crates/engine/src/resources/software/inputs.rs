//! Input substitution: a structured config's `{get_input: name}` markers
//! replaced by the deployment's input values.

use serde_json::{Map, Value};

use crate::resources::ResourceFailure;

/// Replaces `{<key>: name}` in a structured config with the input's value;
/// with `strict`, a name without an input fails.
pub(super) fn substitute_inputs(
    config: &Value,
    key: &str,
    values: &Map<String, Value>,
    strict: bool,
) -> Result<Value, ResourceFailure> {
    Ok(match config {
        Value::Object(map) if map.len() == 1 && map.contains_key(key) => {
            let name = map.get(key).and_then(Value::as_str).unwrap_or_default();
            match values.get(name) {
                Some(value) => value.clone(),
                None if strict => {
                    return Err(ResourceFailure::new(format!(
                        "Input {name} not found in input_values for {key}"
                    )));
                }
                None => Value::Null,
            }
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(field, value)| {
                    Ok((
                        field.clone(),
                        substitute_inputs(value, key, values, strict)?,
                    ))
                })
                .collect::<Result<_, ResourceFailure>>()?,
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| substitute_inputs(item, key, values, strict))
                .collect::<Result<_, _>>()?,
        ),
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::config::multipart_message;
    use super::*;

    #[test]
    fn structured_configs_take_their_inputs() {
        let config = json!({"config": {"port": {"get_input": "port"}, "list": [{"get_input": "deploy_action"}]}});
        let values = json!({"port": 80, "deploy_action": "CREATE"});
        let substituted = substitute_inputs(
            &config,
            "get_input",
            values.as_object().expect("map"),
            false,
        )
        .expect("substituted");
        assert_eq!(
            substituted,
            json!({"config": {"port": 80, "list": ["CREATE"]}})
        );
        let missing = json!({"x": {"get_input": "nope"}});
        assert_eq!(
            substitute_inputs(&missing, "get_input", &Map::new(), false).expect("lax"),
            json!({"x": null})
        );
        assert!(substitute_inputs(&missing, "get_input", &Map::new(), true).is_err());
    }

    #[test]
    fn a_multipart_message_holds_each_part() {
        let message = multipart_message(&[
            (
                "text".into(),
                "x-shellscript".into(),
                "boot.sh".into(),
                "#!/bin/sh\necho hi".into(),
            ),
            (
                "text".into(),
                "cloud-config".into(),
                "part-001".into(),
                "#cloud-config\n".into(),
            ),
        ]);
        assert!(message.starts_with("Content-Type: multipart/mixed; boundary="));
        assert!(message.contains("filename=\"boot.sh\""));
        assert!(message.contains("Content-Type: text/cloud-config"));
        assert!(message.trim_end().ends_with("--"));
    }
}
