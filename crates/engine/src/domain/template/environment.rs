//! Stack environments: parsing (`parameters`, `parameter_defaults`,
//! `resource_registry`, accepted-but-ignored sections) and merging several
//! environments in order. The registry itself is in `resource_registry.rs`.

use serde_json::{Map, Value};

use super::document::parse_document;
use super::error::{TemplateError, child_path, describe_value, type_name};
use super::resource_registry::{ResourceRegistry, merge_types, parse_registry};

/// A parsed environment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Environment {
    /// Values for template parameters, as if the user had supplied them.
    pub parameters: Map<String, Value>,
    /// Defaults that override template defaults (also for nested stacks).
    pub parameter_defaults: Map<String, Value>,
    pub resource_registry: ResourceRegistry,
}
const SECTIONS: [&str; 6] = [
    "parameters",
    "parameter_defaults",
    "resource_registry",
    "event_sinks",
    "encrypted_param_names",
    "parameter_merge_strategies",
];

impl Environment {
    /// Parses a YAML or JSON environment.
    pub fn parse(text: &str) -> Result<Environment, TemplateError> {
        Self::from_map(parse_document(text, "environment")?)
    }

    pub fn from_value(document: Value) -> Result<Environment, TemplateError> {
        match document {
            Value::Object(map) => Self::from_map(map),
            Value::Null => Ok(Environment::default()),
            other => Err(TemplateError::new(
                "",
                format!(
                    "the environment must be a map, found a {}",
                    type_name(&other)
                ),
            )),
        }
    }

    fn from_map(document: Map<String, Value>) -> Result<Environment, TemplateError> {
        let mut environment = Environment::default();
        for (section, value) in &document {
            match section.as_str() {
                "parameters" => environment.parameters = section_map(value, section)?,
                "parameter_defaults" => {
                    environment.parameter_defaults = section_map(value, section)?
                }
                "resource_registry" => {
                    environment.resource_registry = parse_registry(&section_map(value, section)?)?;
                }
                // Ember has no event sinks, and encryption of parameters is
                // the API layer's concern: both are accepted and ignored.
                "event_sinks" | "encrypted_param_names" => {
                    if !matches!(value, Value::Array(_) | Value::Null) {
                        return Err(TemplateError::new(
                            section.as_str(),
                            format!("{section} must be a list, found a {}", type_name(value)),
                        ));
                    }
                }
                "parameter_merge_strategies" => check_merge_strategies(value)?,
                other => {
                    return Err(TemplateError::new(
                        other,
                        format!(
                            "unknown environment section '{other}', expected one of {}",
                            SECTIONS.join(", ")
                        ),
                    ));
                }
            }
        }
        Ok(environment)
    }

    /// Applies a later environment on top of this one: later values win,
    /// a null registry entry removes a mapping (a null glob removes every
    /// mapping it matches), and null parameter values are ignored, as in
    /// Heat.
    pub fn merge(&mut self, later: &Environment) {
        for (target, source) in [
            (&mut self.parameters, &later.parameters),
            (&mut self.parameter_defaults, &later.parameter_defaults),
        ] {
            for (name, value) in source {
                if !value.is_null() {
                    target.insert(name.clone(), value.clone());
                }
            }
        }
        merge_types(
            &mut self.resource_registry.types,
            &later.resource_registry.types,
        );
        for (name, overrides) in &later.resource_registry.resources {
            let existing = self
                .resource_registry
                .resources
                .entry(name.clone())
                .or_default();
            merge_types(&mut existing.types, &overrides.types);
            if !overrides.hooks.is_empty() {
                existing.hooks = overrides.hooks.clone();
            }
            if !overrides.restricted_actions.is_empty() {
                existing.restricted_actions = overrides.restricted_actions.clone();
            }
        }
    }

    /// Merges environments in order, later ones winning.
    pub fn merged<'a>(environments: impl IntoIterator<Item = &'a Environment>) -> Environment {
        let mut merged = Environment::default();
        for environment in environments {
            merged.merge(environment);
        }
        merged
    }
}

pub(super) fn section_map(
    value: &Value,
    section: &str,
) -> Result<Map<String, Value>, TemplateError> {
    match value {
        Value::Null => Ok(Map::new()),
        Value::Object(map) => Ok(map.clone()),
        other => Err(TemplateError::new(
            section,
            format!("{section} must be a map, found a {}", type_name(other)),
        )),
    }
}

fn check_merge_strategies(value: &Value) -> Result<(), TemplateError> {
    let section = "parameter_merge_strategies";
    for (name, strategy) in &section_map(value, section)? {
        match strategy {
            Value::String(strategy) if strategy == "overwrite" => {}
            other => {
                return Err(TemplateError::new(
                    child_path(section, name),
                    format!(
                        "parameter merge strategy {} is not supported by Ember, only overwrite is",
                        describe_value(other)
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::resource_registry::ResolvedType;
    use super::*;
    use serde_json::json;

    fn builtin(name: &str) -> ResolvedType {
        ResolvedType::Builtin(name.to_string())
    }

    #[test]
    fn parses_all_sections() {
        let environment = Environment::parse(
            "parameters: {a: 1}\nparameter_defaults: {b: 2}\nevent_sinks: []\nencrypted_param_names: [a]\nparameter_merge_strategies: {a: overwrite}\nresource_registry:\n  My::Server: OS::Nova::Server\n  My::Thing: thing.yaml\n  Old::Type: null\n  resources:\n    web*:\n      hooks: [pre-create, pre-update]\n      restricted_actions: replace\n    db:\n      OS::Nova::Server: db_server.yaml\n",
        )
        .unwrap();
        assert_eq!(environment.parameters["a"], json!(1));
        assert_eq!(environment.parameter_defaults["b"], json!(2));
        let types = &environment.resource_registry.types;
        assert_eq!(types["My::Server"].as_deref(), Some("OS::Nova::Server"));
        assert_eq!(types["Old::Type"], None);
        let web = &environment.resource_registry.resources["web*"];
        assert_eq!(web.hooks, vec!["pre-create", "pre-update"]);
        assert_eq!(web.restricted_actions, vec!["replace"]);
        assert!(Environment::parse("").unwrap() == Environment::default());
    }

    #[test]
    fn rejects_bad_environments_with_paths() {
        let cases = [
            (
                "paramters: {}",
                "paramters",
                "unknown environment section 'paramters'",
            ),
            ("parameters: [1]", "parameters", "parameters must be a map"),
            (
                "resource_registry: {A: 1}",
                "resource_registry.A",
                "must be a type name or a template file",
            ),
            (
                "resource_registry: {resources: {r: {hooks: pre-eat}}}",
                "resource_registry.resources.r.hooks",
                "invalid hook \"pre-eat\"",
            ),
            (
                "resource_registry: {resources: {r: {restricted_actions: [update, delete]}}}",
                "resource_registry.resources.r.restricted_actions[1]",
                "invalid restricted action",
            ),
            (
                "parameter_merge_strategies: {a: deep_merge}",
                "parameter_merge_strategies.a",
                "not supported by Ember",
            ),
            ("event_sinks: {a: 1}", "event_sinks", "must be a list"),
        ];
        for (text, path, fragment) in cases {
            let error = Environment::parse(text).unwrap_err();
            assert_eq!(error.path, path, "{error}");
            assert!(error.message.contains(fragment), "{error}");
        }
        assert!(
            Environment::parse("[1]")
                .unwrap_err()
                .message
                .contains("must be a JSON object")
        );
    }

    #[test]
    fn merging_lets_later_environments_win() {
        let first = Environment::parse(
            "parameters: {a: 1, b: 2}\nparameter_defaults: {d: 1}\nresource_registry:\n  A: X\n  OS::Net::A: Y\n  OS::Net::B: Z\n  resources:\n    r: {hooks: pre-create, T: t1.yaml}\n",
        )
        .unwrap();
        let second = Environment::parse(
            "parameters: {b: 3, c: null}\nparameter_defaults: {d: 2}\nresource_registry:\n  A: W\n  OS::Net::*: null\n  resources:\n    r: {T: t2.yaml}\n",
        )
        .unwrap();
        let merged = Environment::merged([&first, &second]);
        assert_eq!(
            Value::Object(merged.parameters.clone()),
            json!({"a": 1, "b": 3})
        );
        assert_eq!(merged.parameter_defaults["d"], json!(2));
        assert_eq!(
            merged.resource_registry.types.keys().collect::<Vec<_>>(),
            vec!["A"]
        );
        assert_eq!(merged.resolve_type("q", "A").unwrap(), builtin("W"));
        let r = &merged.resource_registry.resources["r"];
        assert_eq!(r.hooks, vec!["pre-create"]);
        assert_eq!(r.types["T"].as_deref(), Some("t2.yaml"));
    }
}
