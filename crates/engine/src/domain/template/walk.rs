//! Static traversal of template snippets without resolving anything: finds
//! every function call (honouring which arguments are condition
//! expressions) so parsing can reject unavailable functions and analysis
//! can collect references.

use serde_json::Value;

use super::document::MAX_NESTING_DEPTH;
use super::error::{TemplateError, child_path, index_path};
use super::version::{Classification, EvaluationMode, FunctionName, TemplateVersion, classify};

/// Receives what the walk finds. Both methods default to doing nothing.
pub(crate) trait Visitor {
    fn function_call(
        &mut self,
        _function: FunctionName,
        _args: &Value,
        _path: &str,
    ) -> Result<(), TemplateError> {
        Ok(())
    }

    /// A bare string in a position where it names a condition.
    fn condition_reference(&mut self, _name: &str, _path: &str) -> Result<(), TemplateError> {
        Ok(())
    }
}

/// A visitor that only lets the walk reject unavailable functions.
pub(crate) struct NoVisitor;

impl Visitor for NoVisitor {}

pub(crate) struct Walker<'visitor> {
    version: TemplateVersion,
    visitor: &'visitor mut dyn Visitor,
}

impl<'visitor> Walker<'visitor> {
    pub(crate) fn new(version: TemplateVersion, visitor: &'visitor mut dyn Visitor) -> Self {
        Self { version, visitor }
    }

    /// Walks an ordinary value (properties, outputs, metadata...).
    pub(crate) fn walk_value(&mut self, value: &Value, path: &str) -> Result<(), TemplateError> {
        self.walk(value, EvaluationMode::Value, path, 0)
    }

    /// Walks a condition expression: a boolean, a condition name or a
    /// condition function.
    pub(crate) fn walk_condition(
        &mut self,
        value: &Value,
        path: &str,
    ) -> Result<(), TemplateError> {
        self.walk_condition_at(value, path, 0)
    }

    fn walk_condition_at(
        &mut self,
        value: &Value,
        path: &str,
        depth: usize,
    ) -> Result<(), TemplateError> {
        match value {
            Value::String(name) => self.visitor.condition_reference(name, path),
            other => self.walk(other, EvaluationMode::Condition, path, depth),
        }
    }

    fn walk(
        &mut self,
        value: &Value,
        mode: EvaluationMode,
        path: &str,
        depth: usize,
    ) -> Result<(), TemplateError> {
        if depth > MAX_NESTING_DEPTH {
            return Err(TemplateError::new(
                path,
                format!("nesting is deeper than {MAX_NESTING_DEPTH} levels"),
            ));
        }
        match value {
            Value::Object(map) if map.len() == 1 => {
                let Some((key, args)) = map.iter().next() else {
                    return Ok(());
                };
                let function_path = child_path(path, key);
                match classify(key, self.version, mode) {
                    Classification::Data => self.walk(args, mode, &function_path, depth + 1),
                    Classification::Rejected(message) => {
                        Err(TemplateError::new(function_path, message))
                    }
                    Classification::Function(function) => {
                        self.visitor.function_call(function, args, &function_path)?;
                        self.walk_arguments(function, args, mode, &function_path, depth + 1)
                    }
                }
            }
            Value::Object(map) => map.iter().try_for_each(|(key, item)| {
                self.walk(item, mode, &child_path(path, key), depth + 1)
            }),
            Value::Array(items) => items.iter().enumerate().try_for_each(|(index, item)| {
                self.walk(item, mode, &index_path(path, index), depth + 1)
            }),
            _ => Ok(()),
        }
    }

    fn walk_arguments(
        &mut self,
        function: FunctionName,
        args: &Value,
        mode: EvaluationMode,
        path: &str,
        depth: usize,
    ) -> Result<(), TemplateError> {
        match (function, args) {
            (FunctionName::If, Value::Array(items)) => {
                for (index, item) in items.iter().enumerate() {
                    let item_path = index_path(path, index);
                    if index == 0 {
                        self.walk_condition_at(item, &item_path, depth + 1)?;
                    } else {
                        self.walk(item, EvaluationMode::Value, &item_path, depth + 1)?;
                    }
                }
                Ok(())
            }
            (FunctionName::Not, _) => self.walk_condition_at(args, path, depth),
            (FunctionName::And | FunctionName::Or, Value::Array(items)) => {
                items.iter().enumerate().try_for_each(|(index, item)| {
                    self.walk_condition_at(item, &index_path(path, index), depth + 1)
                })
            }
            _ => self.walk(args, mode, path, depth),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Default)]
    struct Recorder {
        calls: Vec<(FunctionName, String)>,
        conditions: Vec<(String, String)>,
    }

    impl Visitor for Recorder {
        fn function_call(
            &mut self,
            function: FunctionName,
            _args: &Value,
            path: &str,
        ) -> Result<(), TemplateError> {
            self.calls.push((function, path.to_string()));
            Ok(())
        }

        fn condition_reference(&mut self, name: &str, path: &str) -> Result<(), TemplateError> {
            self.conditions.push((name.to_string(), path.to_string()));
            Ok(())
        }
    }

    #[test]
    fn finds_calls_and_condition_names_with_paths() {
        let mut recorder = Recorder::default();
        let value = json!({"a": [{"if": ["prod", {"get_resource": "r"}, {"not": "dev"}]}]});
        Walker::new(TemplateVersion::LATEST, &mut recorder)
            .walk_value(&value, "p")
            .unwrap();
        assert_eq!(
            recorder.calls,
            vec![
                (FunctionName::If, "p.a[0].if".to_string()),
                (
                    FunctionName::GetResource,
                    "p.a[0].if[1].get_resource".to_string()
                ),
            ]
        );
        // `not` is data outside conditions, so only the `if` name counts.
        assert_eq!(
            recorder.conditions,
            vec![("prod".to_string(), "p.a[0].if[0]".to_string())]
        );
    }

    #[test]
    fn condition_expressions_name_conditions_in_logic_functions() {
        let mut recorder = Recorder::default();
        let value = json!({"and": ["a", {"not": "b"}, {"equals": ["c", "d"]}]});
        Walker::new(TemplateVersion::LATEST, &mut recorder)
            .walk_condition(&value, "conditions.x")
            .unwrap();
        let names: Vec<&str> = recorder
            .conditions
            .iter()
            .map(|(name, _)| name.as_str())
            .collect();
        assert_eq!(names, vec!["a", "b"]);
    }

    #[test]
    fn rejects_unavailable_functions_with_their_path() {
        let value = json!({"x": {"str_split": [",", "a,b"]}});
        let error = Walker::new(TemplateVersion::V2015_04_30, &mut NoVisitor)
            .walk_value(&value, "outputs.o.value")
            .unwrap_err();
        assert_eq!(error.path, "outputs.o.value.x.str_split");
        assert!(
            error
                .message
                .contains("requires heat_template_version 2015-10-15")
        );
    }

    #[test]
    fn stops_at_excessive_depth() {
        let mut value = json!(1);
        for _ in 0..(MAX_NESTING_DEPTH + 5) {
            value = json!([value]);
        }
        let error = Walker::new(TemplateVersion::LATEST, &mut NoVisitor)
            .walk_value(&value, "p")
            .unwrap_err();
        assert!(error.message.contains("nesting is deeper"));
    }
}
