//! The `resource_registry` of an environment: type aliases, globs,
//! template resources and per-resource settings (type overrides, hooks,
//! restricted actions), and resolving a resource's type through them.

use std::collections::BTreeSet;

use indexmap::IndexMap;
use serde_json::{Map, Value};

use super::environment::{Environment, section_map};
use super::error::{TemplateError, child_path, describe_value, index_path, type_name};

/// The `resource_registry` section.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceRegistry {
    /// Type mappings: `"My::Server": "OS::Nova::Server"`, template files
    /// (`"My::Thing": "thing.yaml"`) and globs (`"OS::Networking::*":
    /// "OS::Neutron::*"`). `None` (YAML null) removes a mapping made by an
    /// earlier environment.
    pub types: IndexMap<String, Option<String>>,
    /// Per-resource settings, keyed by resource name (hooks and restricted
    /// actions also accept `*` and `?` patterns).
    pub resources: IndexMap<String, ResourceOverrides>,
}

/// Settings for one resource name under `resource_registry.resources`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceOverrides {
    /// Type mappings applying to this resource only.
    pub types: IndexMap<String, Option<String>>,
    pub hooks: Vec<String>,
    pub restricted_actions: Vec<String>,
    /// Settings for the resources of this resource's nested stack, by
    /// their names (`resources: {nested: {foo: {hooks: pre-create}}}`):
    /// the nested stack's environment has them as its own `resources`
    /// (see [`child_environment`]).
    pub nested: IndexMap<String, ResourceOverrides>,
}

/// What a resource type finally means after the registry is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolvedType {
    /// A resource type implemented by the engine.
    Builtin(String),
    /// A nested stack built from a template in the stack's `files`.
    TemplateResource { file: String },
}

const HOOK_TYPES: [&str; 6] = [
    "pre-create",
    "pre-update",
    "pre-delete",
    "post-create",
    "post-update",
    "post-delete",
];

const RESTRICTED_ACTIONS: [&str; 2] = ["update", "replace"];

/// Alias chains longer than this are refused.
const MAX_TYPE_CHAIN: usize = 64;

impl Environment {
    /// Follows the registry from `resource_type` for the resource called
    /// `resource_name`: per-resource mappings first, then exact mappings,
    /// then globs, until a built-in type or a template file is reached.
    pub fn resolve_type(
        &self,
        resource_name: &str,
        resource_type: &str,
    ) -> Result<ResolvedType, TemplateError> {
        let path = child_path("resource_registry", resource_type);
        let mut current = resource_type.to_string();
        let mut chain = vec![current.clone()];
        loop {
            if is_template_file(&current) {
                return Ok(ResolvedType::TemplateResource { file: current });
            }
            let Some(target) = self.mapping_for(resource_name, &current) else {
                return Ok(ResolvedType::Builtin(current));
            };
            if target == current {
                return Ok(ResolvedType::Builtin(current));
            }
            if chain.contains(&target) {
                chain.push(target);
                return Err(TemplateError::new(
                    path,
                    format!("resource type aliases form a cycle: {}", chain.join(" -> ")),
                ));
            }
            chain.push(target.clone());
            if chain.len() > MAX_TYPE_CHAIN {
                return Err(TemplateError::new(
                    path,
                    format!("resource type aliases are chained more than {MAX_TYPE_CHAIN} times"),
                ));
            }
            current = target;
        }
    }

    fn mapping_for(&self, resource_name: &str, resource_type: &str) -> Option<String> {
        let registry = &self.resource_registry;
        if let Some(Some(target)) = registry
            .resources
            .get(resource_name)
            .and_then(|overrides| overrides.types.get(resource_type))
        {
            return Some(target.clone());
        }
        if let Some(Some(target)) = registry.types.get(resource_type) {
            return Some(target.clone());
        }
        // Heat picks among matching globs in sorted order of the pattern.
        let mut globs: Vec<(&String, &String)> = registry
            .types
            .iter()
            .filter_map(|(pattern, target)| Some((pattern, target.as_ref()?)))
            .filter(|(pattern, target)| {
                pattern.ends_with('*')
                    && resource_type.starts_with(&pattern[..pattern.len() - 1])
                    && resource_type != target.as_str()
            })
            .collect();
        globs.sort();
        let (pattern, target) = globs.first()?;
        let prefix = &pattern[..pattern.len() - 1];
        Some(match target.strip_suffix('*') {
            Some(target_prefix) => format!("{target_prefix}{}", &resource_type[prefix.len()..]),
            None => (*target).clone(),
        })
    }

    /// Whether any resource has a hook set.
    pub fn has_hooks(&self) -> bool {
        self.resource_registry
            .resources
            .values()
            .any(|overrides| !overrides.hooks.is_empty())
    }

    /// Hooks set for a resource (patterns may use `*` and `?`).
    pub fn hooks_for(&self, resource_name: &str) -> BTreeSet<String> {
        self.matching_overrides(resource_name)
            .flat_map(|overrides| overrides.hooks.iter().cloned())
            .collect()
    }

    /// Actions (`update`, `replace`) the environment forbids for a resource.
    pub fn restricted_actions_for(&self, resource_name: &str) -> BTreeSet<String> {
        self.matching_overrides(resource_name)
            .flat_map(|overrides| overrides.restricted_actions.iter().cloned())
            .collect()
    }

    fn matching_overrides<'a>(
        &'a self,
        resource_name: &'a str,
    ) -> impl Iterator<Item = &'a ResourceOverrides> {
        self.resource_registry
            .resources
            .iter()
            .filter(move |(pattern, _)| glob_matches(pattern, resource_name))
            .map(|(_, overrides)| overrides)
    }
}

fn is_template_file(name: &str) -> bool {
    name.ends_with(".yaml") || name.ends_with(".template")
}

pub(super) fn merge_types(
    target: &mut IndexMap<String, Option<String>>,
    later: &IndexMap<String, Option<String>>,
) {
    for (name, mapping) in later {
        match mapping {
            Some(mapping) => {
                target.insert(name.clone(), Some(mapping.clone()));
            }
            None => match name.strip_suffix('*') {
                Some(prefix) => target.retain(|existing, _| !existing.starts_with(prefix)),
                None => {
                    target.shift_remove(name);
                }
            },
        }
    }
}

/// `fnmatchcase` for the `*` and `?` wildcards.
fn glob_matches(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    let (mut p, mut n) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some('*') => {
                backtrack = Some((p, n));
                p += 1;
            }
            Some(&expected) if expected == '?' || expected == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match backtrack {
                Some((star, matched)) => {
                    p = star + 1;
                    n = matched + 1;
                    backtrack = Some((star, matched + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|character| *character == '*')
}

fn type_mapping(value: &Value, path: &str) -> Result<Option<String>, TemplateError> {
    match value {
        Value::Null => Ok(None),
        Value::String(target) if !target.is_empty() => Ok(Some(target.clone())),
        other => Err(TemplateError::new(
            path,
            format!(
                "a resource type mapping must be a type name or a template file, found {}",
                describe_value(other)
            ),
        )),
    }
}

pub(super) fn parse_registry(map: &Map<String, Value>) -> Result<ResourceRegistry, TemplateError> {
    let mut registry = ResourceRegistry::default();
    for (key, value) in map {
        let path = child_path("resource_registry", key);
        if key == "resources" {
            for (resource, settings) in &section_map(value, &path)? {
                let resource_path = child_path(&path, resource);
                registry
                    .resources
                    .insert(resource.clone(), parse_overrides(settings, &resource_path)?);
            }
        } else {
            registry
                .types
                .insert(key.clone(), type_mapping(value, &path)?);
        }
    }
    Ok(registry)
}

fn parse_overrides(settings: &Value, path: &str) -> Result<ResourceOverrides, TemplateError> {
    let mut overrides = ResourceOverrides::default();
    for (key, value) in &section_map(settings, path)? {
        let key_path = child_path(path, key);
        match key.as_str() {
            "hooks" => overrides.hooks = word_list(value, &key_path, &HOOK_TYPES, "hook")?,
            "restricted_actions" => {
                overrides.restricted_actions =
                    word_list(value, &key_path, &RESTRICTED_ACTIONS, "restricted action")?;
            }
            _ if value.is_object() => {
                overrides
                    .nested
                    .insert(key.clone(), parse_overrides(value, &key_path)?);
            }
            _ => {
                overrides
                    .types
                    .insert(key.clone(), type_mapping(value, &key_path)?);
            }
        }
    }
    Ok(overrides)
}

/// The environment (a JSON document) the nested stack of resource
/// `resource_name` gets from its parent's: the same, except that its
/// `resource_registry.resources` holds what the parent's gave that
/// resource's nested stack — the settings under each entry whose name or
/// pattern matches `resource_name`, the exact name's last — as Heat's
/// child environments do. Settings for the parent's own resources do not
/// reach into the nested stack.
pub fn child_environment(environment: &Value, resource_name: &str) -> Value {
    let mut child = environment.clone();
    let Some(registry) = child
        .get_mut("resource_registry")
        .and_then(Value::as_object_mut)
    else {
        return child;
    };
    let Some(Value::Object(resources)) = registry.remove("resources") else {
        return child;
    };
    let mut narrowed = Map::new();
    let matching = resources
        .iter()
        .filter(|(pattern, _)| glob_matches(pattern, resource_name))
        .chain(resources.get_key_value(resource_name));
    for (_, settings) in matching {
        let Value::Object(settings) = settings else {
            continue;
        };
        for (name, nested) in settings {
            if nested.is_object() {
                narrowed.insert(name.clone(), nested.clone());
            }
        }
    }
    if !narrowed.is_empty() {
        registry.insert("resources".to_owned(), Value::Object(narrowed));
    }
    child
}

/// A string or list of strings, each one of `allowed`.
fn word_list(
    value: &Value,
    path: &str,
    allowed: &[&str],
    what: &str,
) -> Result<Vec<String>, TemplateError> {
    let items: Vec<(String, &Value)> = match value {
        Value::String(_) => vec![(path.to_string(), value)],
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(index, item)| (index_path(path, index), item))
            .collect(),
        other => {
            return Err(TemplateError::new(
                path,
                format!(
                    "a {what} setting must be a string or a list, found a {}",
                    type_name(other)
                ),
            ));
        }
    };
    items
        .into_iter()
        .map(|(item_path, item)| match item {
            Value::String(word) if allowed.contains(&word.as_str()) => Ok(word.clone()),
            other => Err(TemplateError::new(
                item_path,
                format!(
                    "invalid {what} {}, expected one of {}",
                    describe_value(other),
                    allowed.join(", ")
                ),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nested_stack_gets_the_settings_its_resource_was_given_and_no_others() {
        let parent = serde_json::json!({
            "parameters": {"size": 3},
            "resource_registry": {
                "My::Thing": "thing.yaml",
                "resources": {
                    "foo_step2": {"hooks": "pre-create"},
                    "nested": {"foo_step2": {"hooks": "pre-create"}, "OS::Nova::Server": "x.yaml"},
                    "nest*": {"bar": {"hooks": ["pre-delete"]}},
                },
            },
        });
        let child = child_environment(&parent, "nested");
        assert_eq!(
            child,
            serde_json::json!({
                "parameters": {"size": 3},
                "resource_registry": {
                    "My::Thing": "thing.yaml",
                    "resources": {
                        "bar": {"hooks": ["pre-delete"]},
                        "foo_step2": {"hooks": "pre-create"},
                    },
                },
            })
        );
        let environment = Environment::from_value(child).unwrap();
        assert_eq!(environment.hooks_for("foo_step2").len(), 1);
        assert_eq!(environment.hooks_for("bar").len(), 1);
        // Another resource's nested stack gets none of them; the parent's
        // own hook on foo_step2 stays with the parent.
        let other = Environment::from_value(child_environment(&parent, "other")).unwrap();
        assert!(other.resource_registry.resources.is_empty());
        let parsed = Environment::from_value(parent).unwrap();
        assert_eq!(
            parsed.resource_registry.resources["nested"].nested["foo_step2"].hooks,
            ["pre-create"]
        );
    }

    #[test]
    fn a_nested_setting_is_checked_as_a_top_level_one() {
        let error = Environment::parse(
            "resource_registry:\n  resources:\n    nested:\n      inner:\n        hooks: pre-lunch\n",
        )
        .unwrap_err();
        assert!(
            error.to_string().contains("resources.nested.inner.hooks"),
            "{error}"
        );
    }

    fn builtin(name: &str) -> ResolvedType {
        ResolvedType::Builtin(name.to_string())
    }

    #[test]
    fn resolves_aliases_templates_and_globs() {
        let environment = Environment::parse(
            "resource_registry:\n  My::Server: Custom::Server\n  Custom::Server: OS::Nova::Server\n  My::Thing: thing.yaml\n  OS::Networking::*: OS::Neutron::*\n  Legacy::*: OS::Heat::None\n  resources:\n    db:\n      OS::Nova::Server: db_server.yaml\n",
        )
        .unwrap();
        assert_eq!(
            environment.resolve_type("web", "My::Server").unwrap(),
            builtin("OS::Nova::Server")
        );
        assert_eq!(
            environment.resolve_type("db", "My::Server").unwrap(),
            ResolvedType::TemplateResource {
                file: "db_server.yaml".into()
            }
        );
        assert_eq!(
            environment.resolve_type("x", "My::Thing").unwrap(),
            ResolvedType::TemplateResource {
                file: "thing.yaml".into()
            }
        );
        assert_eq!(
            environment
                .resolve_type("x", "OS::Networking::Port")
                .unwrap(),
            builtin("OS::Neutron::Port")
        );
        assert_eq!(
            environment.resolve_type("x", "Legacy::Anything").unwrap(),
            builtin("OS::Heat::None")
        );
        assert_eq!(
            environment.resolve_type("x", "OS::Heat::None").unwrap(),
            builtin("OS::Heat::None")
        );
        assert_eq!(
            environment.resolve_type("x", "nested.template").unwrap(),
            ResolvedType::TemplateResource {
                file: "nested.template".into()
            }
        );
        assert_eq!(
            environment.resolve_type("x", "OS::Nova::Server").unwrap(),
            builtin("OS::Nova::Server")
        );
    }

    #[test]
    fn detects_alias_cycles() {
        let environment =
            Environment::parse("resource_registry: {A: B, B: C, C: A, Same: Same}").unwrap();
        let error = environment.resolve_type("r", "A").unwrap_err();
        assert_eq!(error.path, "resource_registry.A");
        assert_eq!(
            error.message,
            "resource type aliases form a cycle: A -> B -> C -> A"
        );
        assert_eq!(
            environment.resolve_type("r", "Same").unwrap(),
            builtin("Same")
        );
    }

    #[test]
    fn hooks_and_restrictions_match_patterns() {
        let environment = Environment::parse(
            "resource_registry:\n  resources:\n    web_*: {hooks: pre-create}\n    '*': {restricted_actions: [update]}\n    web_?: {hooks: [post-create]}\n",
        )
        .unwrap();
        assert_eq!(
            environment
                .hooks_for("web_1")
                .into_iter()
                .collect::<Vec<_>>(),
            vec!["post-create", "pre-create"]
        );
        assert_eq!(environment.hooks_for("web_10").len(), 1);
        assert!(environment.hooks_for("db").is_empty());
        assert_eq!(environment.restricted_actions_for("db").len(), 1);
        assert!(glob_matches("a*b*c", "axxbyyc"));
        assert!(!glob_matches("a*b", "axxc"));
    }
}
