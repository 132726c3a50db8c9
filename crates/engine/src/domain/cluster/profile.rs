//! Profile specs: what a node is. `ember.instance-1.0` makes each node a
//! compute instance; `os.heat.stack-1.0` makes it a stack from a template.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq)]
pub enum ProfileKind {
    Instance {
        flavor: String,
        image: String,
        metadata: BTreeMap<String, String>,
    },
    Stack {
        /// The template as text (YAML or JSON).
        template: String,
        parameters: Map<String, Value>,
        environment: String,
        files: BTreeMap<String, String>,
        timeout_mins: Option<u32>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProfileSpec {
    pub kind: ProfileKind,
    /// The spec as given.
    pub spec: Value,
}

impl ProfileSpec {
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            ProfileKind::Instance { .. } => "ember.instance-1.0",
            ProfileKind::Stack { .. } => "os.heat.stack-1.0",
        }
    }

    /// Parses `{"type", "version", "properties"}`.
    pub fn parse(spec: Value) -> Result<ProfileSpec> {
        let invalid = |message: String| Error::InvalidInput(message);
        let object = spec
            .as_object()
            .ok_or_else(|| invalid("profile spec must be an object".into()))?;
        let type_name = object.get("type").and_then(Value::as_str).unwrap_or("");
        let version = super::policy::version_text(object.get("version"));
        let empty = Map::new();
        let properties = match object.get("properties") {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(map)) => map,
            Some(_) => return Err(invalid("profile spec properties must be an object".into())),
        };
        let text = |key: &str| -> Result<String> {
            match properties.get(key) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(text)) => Ok(text.clone()),
                Some(other) => Err(invalid(format!(
                    "properties.{key} must be a string, got {other}"
                ))),
            }
        };
        let string_map = |key: &str| -> Result<BTreeMap<String, String>> {
            match properties.get(key) {
                None | Some(Value::Null) => Ok(BTreeMap::new()),
                Some(Value::Object(map)) => map
                    .iter()
                    .map(|(name, value)| match value {
                        Value::String(text) => Ok((name.clone(), text.clone())),
                        other => Ok((name.clone(), other.to_string())),
                    })
                    .collect(),
                Some(other) => Err(invalid(format!(
                    "properties.{key} must be an object, got {other}"
                ))),
            }
        };
        let kind = match (type_name, version.as_str()) {
            ("ember.instance", "1.0") => {
                let flavor = text("flavor")?;
                let image = text("image")?;
                if flavor.is_empty() || image.is_empty() {
                    return Err(invalid(
                        "ember.instance-1.0 needs properties.flavor and properties.image".into(),
                    ));
                }
                ProfileKind::Instance {
                    flavor,
                    image,
                    metadata: string_map("metadata")?,
                }
            }
            ("os.heat.stack", "1.0") => {
                let template = match properties.get("template") {
                    Some(Value::String(text)) if !text.trim().is_empty() => text.clone(),
                    Some(Value::Object(map)) if !map.is_empty() => {
                        Value::Object(map.clone()).to_string()
                    }
                    _ => {
                        return Err(invalid(
                            "os.heat.stack-1.0 needs properties.template (text or object)".into(),
                        ));
                    }
                };
                let parameters = match properties.get("parameters") {
                    None | Some(Value::Null) => Map::new(),
                    Some(Value::Object(map)) => map.clone(),
                    Some(_) => {
                        return Err(invalid("properties.parameters must be an object".into()));
                    }
                };
                let environment = match properties.get("environment") {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(text)) => text.clone(),
                    Some(other) => other.to_string(),
                };
                let timeout_mins = match properties.get("timeout") {
                    None | Some(Value::Null) => None,
                    Some(value) => Some(
                        value
                            .as_u64()
                            .and_then(|value| u32::try_from(value).ok())
                            .ok_or_else(|| {
                                invalid(format!("properties.timeout must be minutes, got {value}"))
                            })?,
                    ),
                };
                ProfileKind::Stack {
                    template,
                    parameters,
                    environment,
                    files: string_map("files")?,
                    timeout_mins,
                }
            }
            _ => {
                return Err(invalid(format!(
                    "profile type {type_name:?} version {version:?} is not supported: use ember.instance 1.0 or os.heat.stack 1.0"
                )));
            }
        };
        Ok(ProfileSpec { kind, spec })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_profile_types_parse() {
        let instance = ProfileSpec::parse(json!({"type": "ember.instance", "version": 1.0,
            "properties": {"flavor": "small", "image": "debian"}}))
        .expect("instance");
        assert_eq!(instance.type_name(), "ember.instance-1.0");
        let stack = ProfileSpec::parse(json!({"type": "os.heat.stack", "version": "1.0",
            "properties": {"template": {"heat_template_version": "2018-08-31"}}}))
        .expect("stack");
        assert_eq!(stack.type_name(), "os.heat.stack-1.0");
        let error = ProfileSpec::parse(json!({"type": "os.nova.server", "version": "1.0"}))
            .expect_err("unsupported")
            .to_string();
        assert!(error.contains("os.nova.server"), "{error}");
    }
}
