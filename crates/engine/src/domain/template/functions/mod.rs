//! Intrinsic function evaluation: the `ResolveContext` the engine
//! implements, the public `resolve`/`resolve_condition` entry points, and
//! the recursive resolver that dispatches to the function families in the
//! sibling files.

mod collections;
mod context;
mod encoding;
mod logic;
mod references;
mod repeat;
mod strings;

use std::cell::Cell;

use serde_json::{Map, Value};

use super::document::MAX_NESTING_DEPTH;
use super::error::{TemplateError, child_path, index_path};
use super::version::{Classification, EvaluationMode, FunctionName, TemplateVersion, classify};

pub use context::{StaticResolveContext, select_attribute_path};

/// What intrinsic functions need from the running stack.
pub trait ResolveContext {
    /// A resolved parameter value, including the `OS::*` pseudo parameters.
    fn parameter(&self, name: &str) -> Option<Value>;
    /// `get_resource`: the physical id, or null before the resource exists.
    fn resource_reference(&self, name: &str) -> Result<Value, String>;
    /// `get_attr`: the attribute, with `path` selecting inside it.
    fn resource_attribute(
        &self,
        name: &str,
        attribute: &str,
        path: &[Value],
    ) -> Result<Value, String>;
    /// `get_file`: the content stored in the stack's `files`.
    fn file(&self, name: &str) -> Option<String>;
    /// The evaluated value of a named condition.
    fn condition(&self, name: &str) -> Option<bool>;

    /// The template's version, which changes the behaviour of a few
    /// functions (`list_join`, `str_replace`, `repeat`, `if`, `get_attr`).
    fn template_version(&self) -> TemplateVersion {
        TemplateVersion::LATEST
    }

    /// `get_attr: [name]`: every attribute of the resource as a map.
    fn resource_attributes(&self, name: &str) -> Result<Value, String> {
        Err(format!(
            "get_attr without an attribute name is not available for resource {name}"
        ))
    }

    /// `resource_facade`: data of the parent resource when this template
    /// is used as a template resource.
    fn resource_facade(&self, attribute: &str) -> Result<Value, String> {
        Err(format!(
            "resource_facade {attribute} is only available inside a template resource"
        ))
    }
}

/// Resolves every intrinsic function in `value`. `path` is where `value`
/// sits in the template and prefixes every error.
pub fn resolve(
    value: &Value,
    context: &dyn ResolveContext,
    path: &str,
) -> Result<Value, TemplateError> {
    let lookup = context_condition_lookup(context);
    Resolver::new(context, &lookup, 0).resolve_value(value, path)
}

/// Evaluates a condition expression: a boolean, a condition name, or a
/// condition function (`equals`, `not`, `and`, `or`, `contains`,
/// `get_param`). Named conditions come from `ResolveContext::condition`.
pub fn resolve_condition(
    value: &Value,
    context: &dyn ResolveContext,
    path: &str,
) -> Result<bool, TemplateError> {
    let lookup = context_condition_lookup(context);
    Resolver::new(context, &lookup, 0).condition(value, path)
}

fn context_condition_lookup(
    context: &dyn ResolveContext,
) -> impl Fn(&str, &str, usize) -> Result<bool, TemplateError> + '_ {
    move |name: &str, path: &str, _depth: usize| {
        context
            .condition(name)
            .ok_or_else(|| TemplateError::new(path, format!("unknown condition '{name}'")))
    }
}

/// Looks a named condition up: `(name, path of the reference, current
/// depth)`. Condition evaluation supplies a lazy, cycle-checking lookup.
pub(crate) type ConditionLookup<'a> = dyn Fn(&str, &str, usize) -> Result<bool, TemplateError> + 'a;

/// Walks a snippet and evaluates the functions in it.
pub(crate) struct Resolver<'a> {
    pub(crate) context: &'a dyn ResolveContext,
    pub(crate) version: TemplateVersion,
    lookup: &'a ConditionLookup<'a>,
    /// Shared recursion budget: nested values, function arguments and
    /// chains of named conditions all count, so no input can exhaust the
    /// stack.
    depth: Cell<usize>,
    /// Shared output budget: what every function that builds (repeat,
    /// str_replace, list_join, …) produces in this resolution is taken
    /// from it *before* it is allocated, so nested expansions cannot
    /// multiply past [`MAX_RESOLUTION_BYTES`] together.
    produced: Cell<usize>,
}

/// The most bytes one resolution may build, all functions together
/// (values count their bytes plus a fixed cost for each JSON node).
pub(crate) const MAX_RESOLUTION_BYTES: usize = 8 * 1024 * 1024;

/// Deeper recursion than this is refused; parsed templates are at most
/// 128 levels deep, which leaves room for chains of named conditions.
const MAX_RESOLVE_DEPTH: usize = 2 * MAX_NESTING_DEPTH;

impl<'a> Resolver<'a> {
    pub(crate) fn new(
        context: &'a dyn ResolveContext,
        lookup: &'a ConditionLookup<'a>,
        starting_depth: usize,
    ) -> Self {
        Self {
            context,
            version: context.template_version(),
            lookup,
            depth: Cell::new(starting_depth),
            produced: Cell::new(0),
        }
    }

    /// Like `new`, but with an explicit template version instead of the
    /// context's (used where the template itself is at hand).
    pub(crate) fn with_version(
        context: &'a dyn ResolveContext,
        lookup: &'a ConditionLookup<'a>,
        starting_depth: usize,
        version: TemplateVersion,
    ) -> Self {
        Self {
            context,
            version,
            lookup,
            depth: Cell::new(starting_depth),
            produced: Cell::new(0),
        }
    }

    /// What is left of the output budget.
    pub(super) fn remaining_output(&self) -> usize {
        MAX_RESOLUTION_BYTES.saturating_sub(self.produced.get())
    }

    /// Takes `bytes` from the output budget before they are built;
    /// refuses (naming `what` and the sizes) when they do not fit.
    pub(super) fn spend_output(
        &self,
        bytes: usize,
        what: &str,
        path: &str,
    ) -> Result<(), TemplateError> {
        let total = self.produced.get().saturating_add(bytes);
        if total > MAX_RESOLUTION_BYTES {
            return Err(TemplateError::new(
                path,
                format!(
                    "{what} would take the template past {MAX_RESOLUTION_BYTES} bytes of generated values (this snippet already built {} bytes, {what} needs {bytes} more)",
                    self.produced.get()
                ),
            ));
        }
        self.produced.set(total);
        Ok(())
    }

    pub(crate) fn resolve_value(&self, value: &Value, path: &str) -> Result<Value, TemplateError> {
        self.resolve_in(value, path, EvaluationMode::Value)
    }

    /// Resolves a snippet; a value omitted by a two-argument `if` becomes
    /// null when it is not inside a list or map.
    pub(crate) fn resolve_in(
        &self,
        value: &Value,
        path: &str,
        mode: EvaluationMode,
    ) -> Result<Value, TemplateError> {
        Ok(self.node(value, path, mode)?.unwrap_or(Value::Null))
    }

    /// `None` means "omit this item" (a false two-argument `if`).
    fn node(
        &self,
        value: &Value,
        path: &str,
        mode: EvaluationMode,
    ) -> Result<Option<Value>, TemplateError> {
        self.nested(path, || self.node_inner(value, path, mode))
    }

    /// Runs `step` one level deeper, refusing to go past the depth limit.
    fn nested<T>(
        &self,
        path: &str,
        step: impl FnOnce() -> Result<T, TemplateError>,
    ) -> Result<T, TemplateError> {
        let depth = self.depth.get() + 1;
        if depth > MAX_RESOLVE_DEPTH {
            return Err(TemplateError::new(
                path,
                format!(
                    "the snippet nests functions, values and conditions more than {MAX_RESOLVE_DEPTH} levels deep"
                ),
            ));
        }
        self.depth.set(depth);
        let result = step();
        self.depth.set(depth - 1);
        result
    }

    fn node_inner(
        &self,
        value: &Value,
        path: &str,
        mode: EvaluationMode,
    ) -> Result<Option<Value>, TemplateError> {
        match value {
            Value::Object(map) if map.len() == 1 => {
                if let Some((key, args)) = map.iter().next() {
                    match classify(key, self.version, mode) {
                        Classification::Data => {}
                        Classification::Rejected(message) => {
                            return Err(TemplateError::new(child_path(path, key), message));
                        }
                        Classification::Function(function) => {
                            return self.call(function, args, &child_path(path, key), mode);
                        }
                    }
                }
                self.resolve_map(map, path, mode).map(Some)
            }
            Value::Object(map) => self.resolve_map(map, path, mode).map(Some),
            Value::Array(items) => {
                let mut resolved = Vec::with_capacity(items.len());
                for (index, item) in items.iter().enumerate() {
                    if let Some(item) = self.node(item, &index_path(path, index), mode)? {
                        resolved.push(item);
                    }
                }
                Ok(Some(Value::Array(resolved)))
            }
            scalar => Ok(Some(scalar.clone())),
        }
    }

    fn resolve_map(
        &self,
        map: &Map<String, Value>,
        path: &str,
        mode: EvaluationMode,
    ) -> Result<Value, TemplateError> {
        let mut resolved = Map::new();
        for (key, item) in map {
            if let Some(item) = self.node(item, &child_path(path, key), mode)? {
                resolved.insert(key.clone(), item);
            }
        }
        Ok(Value::Object(resolved))
    }

    fn call(
        &self,
        function: FunctionName,
        args: &Value,
        path: &str,
        mode: EvaluationMode,
    ) -> Result<Option<Value>, TemplateError> {
        use FunctionName as F;
        let value = match function {
            F::If => return self.if_function(args, path),
            F::GetParam => self.get_param(args, path, mode)?,
            F::GetResource => self.get_resource(args, path)?,
            F::GetAttr => self.get_attr(args, path)?,
            F::GetFile => self.get_file(args, path)?,
            F::ResourceFacade => self.resource_facade(args, path)?,
            F::StrReplace => self.str_replace(args, path, strings::Strictness::Lenient)?,
            F::StrReplaceStrict => self.str_replace(args, path, strings::Strictness::Strict)?,
            F::StrReplaceVstrict => {
                self.str_replace(args, path, strings::Strictness::VeryStrict)?
            }
            F::ListJoin => self.list_join(args, path)?,
            F::StrSplit => self.str_split(args, path)?,
            F::Digest => self.digest(args, path)?,
            F::MakeUrl => self.make_url(args, path)?,
            F::Repeat => self.repeat(args, path)?,
            F::MapMerge => self.map_merge(args, path)?,
            F::MapReplace => self.map_replace(args, path)?,
            F::ListConcat => self.list_concat(args, path, false)?,
            F::ListConcatUnique => self.list_concat(args, path, true)?,
            F::Filter => self.filter(args, path)?,
            F::Contains => self.contains(args, path, mode)?,
            F::Equals => self.equals(args, path)?,
            F::Not => self.not(args, path)?,
            F::And => self.and_or(args, path, true)?,
            F::Or => self.and_or(args, path, false)?,
            // `classify` rejects these before they get here; keep a clear
            // error rather than a panic should that ever change.
            F::Yaql => return Err(TemplateError::new(path, "yaql is not supported by Ember")),
            F::CloudFormation => {
                return Err(TemplateError::new(
                    path,
                    "CloudFormation functions are not supported by Ember",
                ));
            }
        };
        Ok(Some(value))
    }

    /// Looks a named condition up through the configured lookup.
    pub(crate) fn named_condition(&self, name: &str, path: &str) -> Result<bool, TemplateError> {
        (self.lookup)(name, path, self.depth.get())
    }
}

/// Shorthand for an error at a function's path.
pub(crate) fn fail<T>(path: &str, message: impl Into<String>) -> Result<T, TemplateError> {
    Err(TemplateError::new(path, message))
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;
    use serde_json::json;

    /// A context with a few parameters, resources, files and conditions
    /// that the function tests share.
    pub(crate) fn context() -> StaticResolveContext {
        let mut context = StaticResolveContext::new(TemplateVersion::LATEST);
        context.parameters.insert("name".into(), json!("web"));
        context.parameters.insert("count".into(), json!(3));
        context.parameters.insert("flag".into(), json!(true));
        context
            .parameters
            .insert("zones".into(), json!(["az1", "az2"]));
        context.parameters.insert(
            "config".into(),
            json!({"db": {"hosts": ["h1", "h2"]}, "port": 5432}),
        );
        context
            .resource_references
            .insert("server".into(), json!("uuid-1"));
        context
            .resource_references
            .insert("pending".into(), Value::Null);
        context.resource_attributes.insert(
            "server".into(),
            [
                ("first_address".to_string(), json!("10.0.0.5")),
                (
                    "networks".to_string(),
                    json!({"private": ["10.0.0.5", "fd00::5"]}),
                ),
            ]
            .into_iter()
            .collect(),
        );
        context
            .files
            .insert("script.sh".into(), "#!/bin/sh\necho hi\n".into());
        context.conditions.insert("prod".into(), true);
        context.conditions.insert("dev".into(), false);
        context
    }

    pub(crate) fn resolve_with(
        value: Value,
        context: &StaticResolveContext,
    ) -> Result<Value, TemplateError> {
        resolve(&value, context, "p")
    }

    pub(crate) fn ok(value: Value) -> Value {
        match resolve_with(value, &context()) {
            Ok(resolved) => resolved,
            Err(error) => panic!("unexpected error: {error}"),
        }
    }

    pub(crate) fn err(value: Value) -> TemplateError {
        match resolve_with(value, &context()) {
            Ok(resolved) => panic!("expected an error, got {resolved}"),
            Err(error) => error,
        }
    }

    pub(crate) fn at_version(version: TemplateVersion) -> StaticResolveContext {
        let mut versioned = context();
        versioned.version = version;
        versioned
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_data_is_returned_unchanged() {
        let data = json!({"a": [1, "b", null, {"c": true}], "get_parm": "x"});
        assert_eq!(ok(data.clone()), data);
        assert_eq!(ok(json!({"get_parm": "x"})), json!({"get_parm": "x"}));
    }

    #[test]
    fn functions_resolve_inside_nested_structures() {
        assert_eq!(
            ok(json!({"a": [{"get_param": "name"}], "b": {"c": {"get_resource": "server"}}})),
            json!({"a": ["web"], "b": {"c": "uuid-1"}})
        );
    }

    #[test]
    fn condition_functions_are_data_in_values() {
        assert_eq!(ok(json!({"equals": [1, 1]})), json!({"equals": [1, 1]}));
        assert_eq!(ok(json!({"not": "prod"})), json!({"not": "prod"}));
    }

    #[test]
    fn unsupported_functions_name_themselves() {
        let error = err(json!({"x": {"yaql": {"expression": "1"}}}));
        assert_eq!(error.path, "p.x.yaql");
        assert_eq!(error.message, "yaql is not supported by Ember");
        let error = err(json!({"Fn::Join": [",", ["a"]]}));
        assert!(error.message.contains("Fn::Join is not supported"));
    }

    #[test]
    fn version_from_context_gates_functions() {
        let old = at_version(TemplateVersion::V2015_10_15);
        let error = resolve_with(json!({"map_merge": [{}]}), &old).unwrap_err();
        assert!(
            error
                .message
                .contains("requires heat_template_version 2016-04-08")
        );
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let mut value = json!("leaf");
        for _ in 0..(MAX_RESOLVE_DEPTH + 10) {
            value = json!({"list_concat": [[value]]});
        }
        let error = err(value);
        assert!(error.message.contains("levels deep"));
    }

    #[test]
    fn resolve_condition_accepts_names_booleans_and_functions() {
        let context = context();
        assert!(resolve_condition(&json!("prod"), &context, "c").unwrap());
        assert!(!resolve_condition(&json!(false), &context, "c").unwrap());
        assert!(
            resolve_condition(
                &json!({"equals": [{"get_param": "count"}, 3]}),
                &context,
                "c"
            )
            .unwrap()
        );
        let error = resolve_condition(&json!("nope"), &context, "c").unwrap_err();
        assert_eq!(error.to_string(), "c: unknown condition 'nope'");
    }
}
