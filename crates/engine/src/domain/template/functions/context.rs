//! A `ResolveContext` backed by plain maps, for previews, validation and
//! tests, plus the attribute path selection Heat applies to `get_attr`.

use indexmap::IndexMap;
use serde_json::Value;

use super::super::version::TemplateVersion;
use super::ResolveContext;

/// Everything a resolution needs, held in maps.
#[derive(Debug, Clone)]
pub struct StaticResolveContext {
    pub version: TemplateVersion,
    pub parameters: IndexMap<String, Value>,
    pub resource_references: IndexMap<String, Value>,
    /// Attributes per resource name.
    pub resource_attributes: IndexMap<String, IndexMap<String, Value>>,
    pub files: IndexMap<String, String>,
    pub conditions: IndexMap<String, bool>,
}

impl StaticResolveContext {
    pub fn new(version: TemplateVersion) -> Self {
        Self {
            version,
            parameters: IndexMap::new(),
            resource_references: IndexMap::new(),
            resource_attributes: IndexMap::new(),
            files: IndexMap::new(),
            conditions: IndexMap::new(),
        }
    }
}

impl Default for StaticResolveContext {
    fn default() -> Self {
        Self::new(TemplateVersion::LATEST)
    }
}

impl ResolveContext for StaticResolveContext {
    fn parameter(&self, name: &str) -> Option<Value> {
        self.parameters.get(name).cloned()
    }

    fn resource_reference(&self, name: &str) -> Result<Value, String> {
        self.resource_references
            .get(name)
            .cloned()
            .ok_or_else(|| format!("unknown resource '{name}'"))
    }

    fn resource_attribute(
        &self,
        name: &str,
        attribute: &str,
        path: &[Value],
    ) -> Result<Value, String> {
        let attributes = self.resource_attributes.get(name).ok_or_else(|| {
            if self.resource_references.contains_key(name) {
                format!("resource '{name}' has no attributes yet")
            } else {
                format!("unknown resource '{name}'")
            }
        })?;
        let value = attributes
            .get(attribute)
            .ok_or_else(|| format!("resource '{name}' has no attribute '{attribute}'"))?;
        Ok(select_attribute_path(value, path))
    }

    fn file(&self, name: &str) -> Option<String> {
        self.files.get(name).cloned()
    }

    fn condition(&self, name: &str) -> Option<bool> {
        self.conditions.get(name).copied()
    }

    fn template_version(&self) -> TemplateVersion {
        self.version
    }

    fn resource_attributes(&self, name: &str) -> Result<Value, String> {
        self.resource_attributes
            .get(name)
            .map(|attributes| Value::Object(attributes.clone().into_iter().collect()))
            .ok_or_else(|| format!("unknown resource '{name}'"))
    }
}

/// Follows `path` (map keys and list indexes) into an attribute value.
/// As in Heat, a path that does not lead anywhere yields null rather than
/// an error, because attributes often fill in only after creation.
pub fn select_attribute_path(value: &Value, path: &[Value]) -> Value {
    let mut current = value;
    for component in path {
        let next = match (current, component) {
            (Value::Object(map), Value::String(key)) => map.get(key),
            (Value::Array(items), Value::Number(index)) => index
                .as_u64()
                .and_then(|index| items.get(usize::try_from(index).ok()?)),
            (Value::Array(items), Value::String(index)) => index
                .parse::<usize>()
                .ok()
                .and_then(|index| items.get(index)),
            _ => None,
        };
        match next {
            Some(next) => current = next,
            None => return Value::Null,
        }
    }
    current.clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selects_keys_and_indexes() {
        let value = json!({"a": [{"b": 1}, {"b": 2}]});
        assert_eq!(
            select_attribute_path(&value, &[json!("a"), json!(1), json!("b")]),
            json!(2)
        );
        assert_eq!(
            select_attribute_path(&value, &[json!("a"), json!("0")]),
            json!({"b": 1})
        );
        assert_eq!(select_attribute_path(&value, &[]), value);
    }

    #[test]
    fn missing_paths_give_null() {
        let value = json!({"a": [1]});
        assert_eq!(select_attribute_path(&value, &[json!("x")]), Value::Null);
        assert_eq!(
            select_attribute_path(&value, &[json!("a"), json!(5)]),
            Value::Null
        );
        assert_eq!(
            select_attribute_path(&value, &[json!("a"), json!(0), json!("z")]),
            Value::Null
        );
        assert_eq!(select_attribute_path(&value, &[json!(true)]), Value::Null);
    }

    #[test]
    fn context_reports_unknown_things() {
        let mut context = StaticResolveContext::default();
        context.resource_references.insert("r".into(), json!("id"));
        assert_eq!(
            context.resource_reference("x").unwrap_err(),
            "unknown resource 'x'"
        );
        assert_eq!(
            context.resource_attribute("r", "a", &[]).unwrap_err(),
            "resource 'r' has no attributes yet"
        );
        context
            .resource_attributes
            .insert("r".into(), IndexMap::new());
        assert_eq!(
            context.resource_attribute("r", "a", &[]).unwrap_err(),
            "resource 'r' has no attribute 'a'"
        );
        assert_eq!(context.resource_attributes("r").unwrap(), json!({}));
    }
}
