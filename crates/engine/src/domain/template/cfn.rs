//! The CloudFormation template format as Heat reads it
//! (`AWSTemplateFormatVersion: 2010-09-09` or `HeatTemplateFormatVersion:
//! 2012-12-12`), translated once into the equivalent HOT document so the
//! rest of the module — parameters, conditions, the graph, resolution —
//! has one language to speak:
//!
//! | CFN | HOT |
//! |---|---|
//! | `Parameters` (`Type`, `Default`, `NoEcho`, `AllowedValues`, `AllowedPattern`, `Min/MaxLength`, `Min/MaxValue`, `ConstraintDescription`) | `parameters` with constraints |
//! | `Resources` (`Type`, `Properties`, `Metadata`, `DependsOn`, `DeletionPolicy`, `UpdatePolicy`, `Condition`) | `resources` |
//! | `Outputs` (`Value`, `Description`, `Condition`), `Conditions` | `outputs`, `conditions` |
//! | `Ref` (a parameter, a pseudo-parameter, a resource) | `get_param` / `get_resource` |
//! | `Fn::GetAtt`, `Fn::Join`, `Fn::Split`, `Fn::Replace`, `Fn::If` | `get_attr`, `list_join`, `str_split`, `str_replace`, `if` |
//! | `Fn::Equals`, `Fn::Not`, `Fn::And`, `Fn::Or`, `{"Condition": name}` | `equals`, `not`, `and`, `or`, the name |
//! | `Fn::ResourceFacade` | `resource_facade` |
//! | `Fn::Base64` | its argument (Heat does not encode either) |
//! | `Fn::GetAZs` | `["nova"]`: Ember has one availability zone |
//! | `Fn::Select` | the item, when the list is written out, a parameter or an attribute (a path into it) |
//! | `Fn::MemberListToMap` | the map, when the list is written out |
//! | `Mappings`, `Fn::FindInMap` | the value, for keys written out (or `AWS::Region`); for a key a parameter gives, `if` … `equals` over the mapping's keys |
//!
//! Pseudo-parameters: `AWS::StackName` and `AWS::StackId` are the stack's
//! (`OS::stack_name`, `OS::stack_id`), `AWS::Region` is `RegionOne`.
//! `AWS::CloudFormation::Stack` is a nested stack (`OS::Heat::Stack`, its
//! `TemplateURL` read from the files the client sent), its
//! `Fn::GetAtt: [s, Outputs.X]` the nested stack's output X.

use serde_json::{Map, Value, json};

use super::error::TemplateError;

/// The CloudFormation format versions Ember reads, as Heat names them in
/// its template version list.
pub const CFN_VERSIONS: [&str; 2] = [
    "AWSTemplateFormatVersion.2010-09-09",
    "HeatTemplateFormatVersion.2012-12-12",
];

/// The functions of the CloudFormation format, with what each does;
/// condition functions only when asked.
pub fn cfn_functions(with_conditions: bool) -> Vec<(&'static str, &'static str)> {
    let mut functions = vec![
        (
            "Ref",
            "A function for resolving parameters or resource references.",
        ),
        (
            "Fn::GetAtt",
            "A function for resolving resource attributes.",
        ),
        ("Fn::Join", "A function for joining strings."),
        (
            "Fn::Split",
            "A function for splitting delimited strings into a list.",
        ),
        (
            "Fn::Replace",
            "A function for performing string substitutions.",
        ),
        (
            "Fn::Select",
            "A function for selecting an item from a list or map.",
        ),
        (
            "Fn::Base64",
            "A placeholder function for converting to base64.",
        ),
        (
            "Fn::GetAZs",
            "A function for retrieving the availability zones.",
        ),
        (
            "Fn::MemberListToMap",
            "A function to convert lists with enumerated keys and values to mapping.",
        ),
        (
            "Fn::ResourceFacade",
            "A function for retrieving data in a parent provider template.",
        ),
        (
            "Fn::If",
            "A function to return corresponding value based on condition evaluation.",
        ),
    ];
    if with_conditions {
        functions.extend([
            (
                "Fn::Equals",
                "A function for comparing whether two values are equal.",
            ),
            (
                "Fn::Not",
                "A function that acts as a NOT operator on a condition.",
            ),
            (
                "Fn::And",
                "A function that acts as an AND operator on conditions.",
            ),
            (
                "Fn::Or",
                "A function that acts as an OR operator on conditions.",
            ),
        ]);
    }
    functions
}

/// The HOT version a translated template is read as.
const TRANSLATED_VERSION: &str = "2021-04-16";

const NESTED_STACK_TYPE: &str = "AWS::CloudFormation::Stack";

/// Whether `document` is a CloudFormation-format template.
pub fn is_cfn(document: &Map<String, Value>) -> bool {
    !document.contains_key("heat_template_version")
        && (document.contains_key("AWSTemplateFormatVersion")
            || document.contains_key("HeatTemplateFormatVersion"))
}

const TOP_LEVEL_KEYS: [&str; 8] = [
    "AWSTemplateFormatVersion",
    "HeatTemplateFormatVersion",
    "Description",
    "Parameters",
    "Mappings",
    "Conditions",
    "Resources",
    "Outputs",
];

/// The HOT document equivalent to a CloudFormation one.
pub fn translate(document: &Map<String, Value>) -> Result<Map<String, Value>, TemplateError> {
    for (key, expected) in [
        ("AWSTemplateFormatVersion", "2010-09-09"),
        ("HeatTemplateFormatVersion", "2012-12-12"),
    ] {
        if let Some(version) = document.get(key)
            && version.as_str() != Some(expected)
        {
            return Err(TemplateError::new(
                key,
                format!(
                    "unknown {key} {}, expected {expected}",
                    super::error::describe_value(version)
                ),
            ));
        }
    }
    super::document::only_known_sections(document, &TOP_LEVEL_KEYS)?;
    let parameters = section(document, "Parameters")?;
    let resources = section(document, "Resources")?;
    let mappings = section(document, "Mappings")?;
    for (name, mapping) in mappings {
        if !mapping.is_object() {
            return Err(TemplateError::new(
                format!("Mappings.{name}"),
                format!(
                    "a mapping is a map of keys to maps, found {}",
                    super::error::describe_value(mapping)
                ),
            ));
        }
    }
    let translator = Translator {
        parameters: parameters.keys().cloned().collect(),
        mappings: mappings.clone(),
        nested_stacks: resources
            .iter()
            .filter(|(_, definition)| {
                definition.get("Type").and_then(Value::as_str) == Some(NESTED_STACK_TYPE)
            })
            .map(|(name, _)| name.clone())
            .collect(),
    };
    let mut hot = Map::new();
    hot.insert(
        "heat_template_version".to_owned(),
        json!(TRANSLATED_VERSION),
    );
    if let Some(description) = document.get("Description") {
        hot.insert("description".to_owned(), description.clone());
    }
    let mut hot_parameters = Map::new();
    for (name, definition) in parameters {
        hot_parameters.insert(name.clone(), parameter(name, definition)?);
    }
    if !hot_parameters.is_empty() {
        hot.insert("parameters".to_owned(), Value::Object(hot_parameters));
    }
    let conditions = section(document, "Conditions")?;
    if !conditions.is_empty() {
        let mut hot_conditions = Map::new();
        for (name, expression) in conditions {
            let path = format!("Conditions.{name}");
            hot_conditions.insert(name.clone(), translator.value(expression, &path)?);
        }
        hot.insert("conditions".to_owned(), Value::Object(hot_conditions));
    }
    let mut hot_resources = Map::new();
    for (name, definition) in resources {
        hot_resources.insert(name.clone(), translator.resource(name, definition)?);
    }
    hot.insert("resources".to_owned(), Value::Object(hot_resources));
    let outputs = section(document, "Outputs")?;
    if !outputs.is_empty() {
        let mut hot_outputs = Map::new();
        for (name, definition) in outputs {
            hot_outputs.insert(name.clone(), translator.output(name, definition)?);
        }
        hot.insert("outputs".to_owned(), Value::Object(hot_outputs));
    }
    Ok(hot)
}

fn section<'a>(
    document: &'a Map<String, Value>,
    key: &str,
) -> Result<&'a Map<String, Value>, TemplateError> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    match document.get(key) {
        None | Some(Value::Null) => Ok(EMPTY.get_or_init(Map::new)),
        Some(Value::Object(map)) => Ok(map),
        Some(other) => Err(TemplateError::new(
            key,
            format!(
                "the {key} section must be a map, found {}",
                super::error::describe_value(other)
            ),
        )),
    }
}

/// Checks a definition's keys against the ones CloudFormation allows.
fn known_keys(
    definition: &Map<String, Value>,
    allowed: &[&str],
    path: &str,
) -> Result<(), TemplateError> {
    match definition
        .keys()
        .find(|key| !allowed.contains(&key.as_str()))
    {
        Some(unknown) => Err(TemplateError::new(
            format!("{path}.{unknown}"),
            format!(
                "unknown key '{unknown}', expected one of {}",
                allowed.join(", ")
            ),
        )),
        None => Ok(()),
    }
}

fn as_map<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>, TemplateError> {
    value.as_object().ok_or_else(|| {
        TemplateError::new(
            path,
            format!(
                "must be a map, found {}",
                super::error::describe_value(value)
            ),
        )
    })
}

fn parameter(name: &str, definition: &Value) -> Result<Value, TemplateError> {
    let path = format!("Parameters.{name}");
    let definition = as_map(definition, &path)?;
    known_keys(
        definition,
        &[
            "Type",
            "Default",
            "NoEcho",
            "AllowedValues",
            "AllowedPattern",
            "MaxLength",
            "MinLength",
            "MaxValue",
            "MinValue",
            "Description",
            "ConstraintDescription",
            "Label",
        ],
        &path,
    )?;
    let kind = match definition.get("Type").and_then(Value::as_str) {
        Some("String") => "string",
        Some("Number") => "number",
        Some("CommaDelimitedList") | Some("List<String>") => "comma_delimited_list",
        Some("Json") => "json",
        Some("Boolean") => "boolean",
        // AWS-specific parameter types (AWS::EC2::KeyPair::KeyName, …)
        // are strings to Heat.
        Some(other) if other.starts_with("AWS::") => "string",
        Some(other) => {
            return Err(TemplateError::new(
                format!("{path}.Type"),
                format!(
                    "unknown parameter type '{other}', expected String, Number, CommaDelimitedList, Json or Boolean"
                ),
            ));
        }
        None => {
            return Err(TemplateError::new(
                format!("{path}.Type"),
                "a parameter needs a Type",
            ));
        }
    };
    let mut hot = Map::new();
    hot.insert("type".to_owned(), json!(kind));
    for (from, to) in [
        ("Default", "default"),
        ("Description", "description"),
        ("Label", "label"),
    ] {
        if let Some(value) = definition.get(from) {
            hot.insert(to.to_owned(), value.clone());
        }
    }
    if let Some(no_echo) = definition.get("NoEcho") {
        let hidden = match no_echo {
            Value::Bool(hidden) => *hidden,
            Value::String(text) => text.eq_ignore_ascii_case("true"),
            _ => false,
        };
        hot.insert("hidden".to_owned(), json!(hidden));
    }
    let described = |mut constraint: Map<String, Value>| {
        if let Some(description) = definition.get("ConstraintDescription") {
            constraint.insert("description".to_owned(), description.clone());
        }
        Value::Object(constraint)
    };
    let number = |key: &str| -> Result<Option<Value>, TemplateError> {
        match definition.get(key) {
            None => Ok(None),
            Some(Value::Number(number)) => Ok(Some(Value::Number(number.clone()))),
            Some(Value::String(text)) => text
                .trim()
                .parse::<f64>()
                .map(|number| Some(json!(number)))
                .map_err(|_| {
                    TemplateError::new(format!("{path}.{key}"), format!("'{text}' is not a number"))
                }),
            Some(other) => Err(TemplateError::new(
                format!("{path}.{key}"),
                format!(
                    "must be a number, found {}",
                    super::error::describe_value(other)
                ),
            )),
        }
    };
    let mut constraints = Vec::new();
    if let Some(values) = definition.get("AllowedValues") {
        constraints.push(described(Map::from_iter([(
            "allowed_values".to_owned(),
            values.clone(),
        )])));
    }
    if let Some(pattern) = definition.get("AllowedPattern") {
        constraints.push(described(Map::from_iter([(
            "allowed_pattern".to_owned(),
            pattern.clone(),
        )])));
    }
    for (minimum, maximum, constraint) in [
        ("MinLength", "MaxLength", "length"),
        ("MinValue", "MaxValue", "range"),
    ] {
        let (min, max) = (number(minimum)?, number(maximum)?);
        if min.is_some() || max.is_some() {
            let mut bounds = Map::new();
            if let Some(min) = min {
                bounds.insert("min".to_owned(), min);
            }
            if let Some(max) = max {
                bounds.insert("max".to_owned(), max);
            }
            constraints.push(described(Map::from_iter([(
                constraint.to_owned(),
                Value::Object(bounds),
            )])));
        }
    }
    if !constraints.is_empty() {
        hot.insert("constraints".to_owned(), Value::Array(constraints));
    }
    Ok(Value::Object(hot))
}

struct Translator {
    parameters: Vec<String>,
    /// The `Mappings` section, for `Fn::FindInMap`.
    mappings: Map<String, Value>,
    nested_stacks: Vec<String>,
}

impl Translator {
    fn resource(&self, name: &str, definition: &Value) -> Result<Value, TemplateError> {
        let path = format!("Resources.{name}");
        let definition = as_map(definition, &path)?;
        known_keys(
            definition,
            &[
                "Type",
                "Properties",
                "Metadata",
                "DependsOn",
                "DeletionPolicy",
                "UpdatePolicy",
                "Condition",
                "Description",
            ],
            &path,
        )?;
        let Some(kind) = definition.get("Type").and_then(Value::as_str) else {
            return Err(TemplateError::new(
                format!("{path}.Type"),
                "a resource needs a Type",
            ));
        };
        let mut hot = Map::new();
        let properties = match definition.get("Properties") {
            None | Some(Value::Null) => None,
            Some(properties) => Some(self.value(properties, &format!("{path}.Properties"))?),
        };
        if kind == NESTED_STACK_TYPE {
            hot.insert("type".to_owned(), json!("OS::Heat::Stack"));
            hot.insert(
                "properties".to_owned(),
                nested_stack_properties(properties.as_ref(), &path)?,
            );
        } else {
            hot.insert("type".to_owned(), json!(kind));
            if let Some(properties) = properties {
                hot.insert("properties".to_owned(), properties);
            }
        }
        if let Some(metadata) = definition.get("Metadata") {
            hot.insert(
                "metadata".to_owned(),
                self.value(metadata, &format!("{path}.Metadata"))?,
            );
        }
        for (from, to) in [
            ("DependsOn", "depends_on"),
            ("DeletionPolicy", "deletion_policy"),
            ("UpdatePolicy", "update_policy"),
            ("Condition", "condition"),
        ] {
            if let Some(value) = definition.get(from) {
                hot.insert(to.to_owned(), value.clone());
            }
        }
        Ok(Value::Object(hot))
    }

    fn output(&self, name: &str, definition: &Value) -> Result<Value, TemplateError> {
        let path = format!("Outputs.{name}");
        let definition = as_map(definition, &path)?;
        known_keys(definition, &["Value", "Description", "Condition"], &path)?;
        let mut hot = Map::new();
        if let Some(value) = definition.get("Value") {
            hot.insert(
                "value".to_owned(),
                self.value(value, &format!("{path}.Value"))?,
            );
        }
        if let Some(description) = definition.get("Description") {
            hot.insert("description".to_owned(), description.clone());
        }
        if let Some(condition) = definition.get("Condition") {
            hot.insert("condition".to_owned(), condition.clone());
        }
        Ok(Value::Object(hot))
    }

    /// A value with its CloudFormation functions turned into HOT ones.
    fn value(&self, value: &Value, path: &str) -> Result<Value, TemplateError> {
        match value {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(index, item)| self.value(item, &format!("{path}[{index}]")))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            Value::Object(map) if map.len() == 1 => {
                let (key, argument) = map
                    .iter()
                    .next()
                    .ok_or_else(|| TemplateError::new(path, "empty"))?;
                self.function(key, argument, path)
                    .unwrap_or_else(|| self.plain_map(map, path))
            }
            Value::Object(map) => self.plain_map(map, path),
            other => Ok(other.clone()),
        }
    }

    fn plain_map(&self, map: &Map<String, Value>, path: &str) -> Result<Value, TemplateError> {
        map.iter()
            .map(|(key, item)| Ok((key.clone(), self.value(item, &format!("{path}.{key}"))?)))
            .collect::<Result<Map<_, _>, TemplateError>>()
            .map(Value::Object)
    }

    /// `Some` when `{key: argument}` is a CloudFormation function.
    fn function(
        &self,
        key: &str,
        argument: &Value,
        path: &str,
    ) -> Option<Result<Value, TemplateError>> {
        let path = format!("{path}.{key}");
        let arguments = |count: usize| -> Result<Vec<Value>, TemplateError> {
            match argument {
                Value::Array(items) if items.len() == count => items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| self.value(item, &format!("{path}[{index}]")))
                    .collect(),
                other => Err(TemplateError::new(
                    path.as_str(),
                    format!(
                        "{key} takes a list of {count} arguments, found {}",
                        super::error::describe_value(other)
                    ),
                )),
            }
        };
        let translated = match key {
            "Ref" => self.reference(argument, &path),
            "Fn::GetAtt" => arguments(2).and_then(|args| self.get_attr(args, &path)),
            "Fn::Join" => arguments(2).map(|args| json!({ "list_join": args })),
            "Fn::Split" => arguments(2).map(|args| json!({ "str_split": args })),
            "Fn::Replace" => arguments(2).map(|mut args| {
                let template = args.pop().unwrap_or(Value::Null);
                let params = args.pop().unwrap_or(Value::Null);
                json!({"str_replace": {"template": template, "params": params}})
            }),
            "Fn::If" => arguments(3).map(|args| json!({ "if": args })),
            "Fn::Equals" => arguments(2).map(|args| json!({ "equals": args })),
            "Fn::Not" => arguments(1).map(|mut args| json!({ "not": args.pop() })),
            "Fn::And" | "Fn::Or" => match argument {
                Value::Array(items) if items.len() >= 2 => items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| self.value(item, &format!("{path}[{index}]")))
                    .collect::<Result<Vec<_>, _>>()
                    .map(|items| json!({ if key == "Fn::And" { "and" } else { "or" }: items })),
                other => Err(TemplateError::new(
                    path.as_str(),
                    format!(
                        "{key} takes a list of at least 2 conditions, found {}",
                        super::error::describe_value(other)
                    ),
                )),
            },
            "Condition" => match argument {
                Value::String(name) => Ok(json!(name)),
                other => Err(TemplateError::new(
                    path.as_str(),
                    format!(
                        "Condition names a condition, found {}",
                        super::error::describe_value(other)
                    ),
                )),
            },
            "Fn::ResourceFacade" => match argument {
                Value::String(attribute) => Ok(json!({ "resource_facade": attribute.to_lowercase()
                    .replace("deletionpolicy", "deletion_policy")
                    .replace("updatepolicy", "update_policy") })),
                other => Err(TemplateError::new(
                    path.as_str(),
                    format!(
                        "Fn::ResourceFacade takes Metadata, DeletionPolicy or UpdatePolicy, found {}",
                        super::error::describe_value(other)
                    ),
                )),
            },
            "Fn::Base64" => self.value(argument, &path),
            "Fn::GetAZs" => Ok(json!(["nova"])),
            "Fn::Select" => arguments(2).and_then(|args| select(args, &path)),
            "Fn::MemberListToMap" => arguments(3).and_then(|args| member_list_to_map(args, &path)),
            "Fn::FindInMap" => arguments(3).and_then(|args| self.find_in_map(&args, &path)),
            _ => return None,
        };
        Some(translated)
    }

    /// `Fn::FindInMap: [map, top-level key, second-level key]`: the value,
    /// when the keys are written out (or `AWS::Region`); a key another
    /// function gives (a parameter's value) becomes a choice among the
    /// mapping's keys (`if` … `equals`), which fails, naming the mapping,
    /// for a value that is not one of them.
    fn find_in_map(&self, args: &[Value], path: &str) -> Result<Value, TemplateError> {
        let [name, top, second] = args else {
            return Err(TemplateError::new(path, "Fn::FindInMap takes 3 arguments"));
        };
        let Value::String(name) = name else {
            return Err(TemplateError::new(
                format!("{path}[0]"),
                format!(
                    "Fn::FindInMap names a mapping of the Mappings section, found {}",
                    super::error::describe_value(name)
                ),
            ));
        };
        let Some(mapping) = self.mappings.get(name) else {
            return Err(TemplateError::new(
                format!("{path}[0]"),
                format!("Fn::FindInMap: there is no mapping {name:?} in the Mappings section"),
            ));
        };
        look_up(name, mapping, &[top, second], path)
    }

    fn reference(&self, argument: &Value, path: &str) -> Result<Value, TemplateError> {
        let Value::String(name) = argument else {
            return Err(TemplateError::new(
                path,
                format!(
                    "Ref names a parameter or a resource, found {}",
                    super::error::describe_value(argument)
                ),
            ));
        };
        Ok(match name.as_str() {
            "AWS::StackName" => json!({"get_param": "OS::stack_name"}),
            "AWS::StackId" => json!({"get_param": "OS::stack_id"}),
            "AWS::Region" => json!("RegionOne"),
            "AWS::NoValue" => Value::Null,
            _ if self.parameters.iter().any(|parameter| parameter == name) => {
                json!({ "get_param": name })
            }
            _ => json!({ "get_resource": name }),
        })
    }

    fn get_attr(&self, args: Vec<Value>, path: &str) -> Result<Value, TemplateError> {
        let (Some(Value::String(resource)), Some(attribute)) = (args.first(), args.get(1)) else {
            return Err(TemplateError::new(
                path,
                "Fn::GetAtt takes [resource name, attribute]",
            ));
        };
        // A nested CloudFormation stack's outputs are `Outputs.Name`.
        if self.nested_stacks.contains(resource)
            && let Some(output) = attribute
                .as_str()
                .and_then(|name| name.strip_prefix("Outputs."))
        {
            return Ok(json!({"get_attr": [resource, "outputs", output]}));
        }
        Ok(json!({ "get_attr": [resource, attribute] }))
    }
}

/// `AWS::CloudFormation::Stack`'s properties as `OS::Heat::Stack`'s.
fn nested_stack_properties(properties: Option<&Value>, path: &str) -> Result<Value, TemplateError> {
    let empty = Map::new();
    let properties = match properties {
        None => &empty,
        Some(value) => as_map(value, &format!("{path}.Properties"))?,
    };
    known_keys(
        properties,
        &["TemplateURL", "TimeoutInMinutes", "Parameters"],
        &format!("{path}.Properties"),
    )?;
    let Some(url) = properties.get("TemplateURL") else {
        return Err(TemplateError::new(
            format!("{path}.Properties.TemplateURL"),
            "AWS::CloudFormation::Stack needs a TemplateURL (sent among the files)",
        ));
    };
    let mut hot = Map::new();
    hot.insert("template".to_owned(), json!({ "get_file": url }));
    if let Some(parameters) = properties.get("Parameters") {
        hot.insert("parameters".to_owned(), parameters.clone());
    }
    if let Some(timeout) = properties.get("TimeoutInMinutes") {
        hot.insert("timeout".to_owned(), timeout.clone());
    }
    Ok(Value::Object(hot))
}

/// How a lookup's failure begins: the parameter its last branch asks for,
/// which does not exist, names the mapping and its keys.
pub(super) const NOT_A_KEY: &str = "Fn::FindInMap: the value given is not a key of mapping";

/// The value under `keys` in `level` of mapping `name`: looked up now for a
/// key written out, chosen at resolution (`if` … `equals` over the
/// level's keys) for a key a function gives.
fn look_up(name: &str, level: &Value, keys: &[&Value], path: &str) -> Result<Value, TemplateError> {
    let Some((key, rest)) = keys.split_first() else {
        return Ok(level.clone());
    };
    let Value::Object(entries) = level else {
        return Err(TemplateError::new(
            path,
            format!(
                "Fn::FindInMap: mapping {name:?} is not two levels of keys here: found {}",
                super::error::describe_value(level)
            ),
        ));
    };
    let literal = match key {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    };
    if let Value::Object(function) = key
        && function.len() == 1
    {
        // A key another lookup chooses (nested Fn::FindInMap): the choice
        // is made first and this lookup done in each of its branches (a
        // condition cannot hold an `if`); its failure stays a failure.
        if let Some(Value::Array(branches)) = function.get("if")
            && let [condition, when_true, when_false] = branches.as_slice()
        {
            let with_key = |chosen: &Value| -> Result<Value, TemplateError> {
                let keys: Vec<&Value> = std::iter::once(chosen)
                    .chain(rest.iter().copied())
                    .collect();
                look_up(name, level, &keys, path)
            };
            return Ok(json!({"if": [condition, with_key(when_true)?, with_key(when_false)?]}));
        }
        if function
            .get("get_param")
            .and_then(Value::as_str)
            .is_some_and(|marker| marker.starts_with(NOT_A_KEY))
        {
            return Ok((*key).clone());
        }
    }
    if let Some(literal) = literal {
        let Some(next) = entries.get(&literal) else {
            return Err(TemplateError::new(
                path,
                format!("Fn::FindInMap: mapping {name:?} has no key {literal:?}"),
            ));
        };
        return look_up(name, next, rest, path);
    }
    // Resolved with the stack: a parameter's value picks the entry; a
    // value that is none of the keys fails the resolution, naming them.
    let known: Vec<&str> = entries.keys().map(String::as_str).collect();
    let mut chosen = json!({"get_param": format!(
        "{NOT_A_KEY} {name} ({})",
        known.join(", ")
    )});
    for (entry_key, next) in entries.iter().rev() {
        chosen = json!({"if": [
            {"equals": [(*key).clone(), entry_key]},
            look_up(name, next, rest, path)?,
            chosen,
        ]});
    }
    Ok(chosen)
}

/// `Fn::Select: [index, list]` as a written-out item, or a path into a
/// parameter or an attribute.
fn select(mut args: Vec<Value>, path: &str) -> Result<Value, TemplateError> {
    let list = args.pop().unwrap_or(Value::Null);
    let index = args.pop().unwrap_or(Value::Null);
    let index_number = match &index {
        Value::Number(number) => number.as_u64(),
        Value::String(text) => text.trim().parse::<u64>().ok(),
        _ => None,
    };
    match (&list, index_number) {
        // Heat answers "" for an index out of range.
        (Value::Array(items), Some(index)) => Ok(usize::try_from(index)
            .ok()
            .and_then(|index| items.get(index).cloned())
            .unwrap_or_else(|| json!(""))),
        (Value::Object(map), _) if map.len() == 1 && map.contains_key("get_param") => {
            let mut route = match &map["get_param"] {
                Value::Array(route) => route.clone(),
                name => vec![name.clone()],
            };
            route.push(index_number.map_or(index, |index| json!(index)));
            Ok(json!({ "get_param": route }))
        }
        (Value::Object(map), _) if map.len() == 1 && map.contains_key("get_attr") => {
            let mut route = map["get_attr"].as_array().cloned().unwrap_or_default();
            route.push(index_number.map_or(index, |index| json!(index)));
            Ok(json!({ "get_attr": route }))
        }
        (Value::Object(map), Some(_) | None) if !map.keys().any(|key| is_function(key)) => {
            let key = match &index {
                Value::String(key) => key.clone(),
                other => other.to_string(),
            };
            Ok(map.get(&key).cloned().unwrap_or_else(|| json!("")))
        }
        (Value::String(text), Some(index)) => Ok(text
            .split(',')
            .nth(usize::try_from(index).unwrap_or(usize::MAX))
            .map_or_else(|| json!(""), |item| json!(item))),
        _ => Err(TemplateError::new(
            path,
            "Fn::Select picks from a list written out, a parameter or an attribute; Ember cannot select from a list computed by another function",
        )),
    }
}

fn is_function(key: &str) -> bool {
    key.starts_with("get_")
        || key.starts_with("Fn::")
        || key == "Ref"
        || key == "list_join"
        || key == "str_split"
}

/// `Fn::MemberListToMap: [key name, value name, [".member.0.Key=k", …]]`.
fn member_list_to_map(mut args: Vec<Value>, path: &str) -> Result<Value, TemplateError> {
    let list = args.pop().unwrap_or(Value::Null);
    let value_name = args.pop().unwrap_or(Value::Null);
    let key_name = args.pop().unwrap_or(Value::Null);
    let (Some(key_name), Some(value_name), Some(items)) =
        (key_name.as_str(), value_name.as_str(), list.as_array())
    else {
        return Err(TemplateError::new(
            path,
            "Fn::MemberListToMap takes [key name, value name, a list written out]",
        ));
    };
    let mut keys = std::collections::BTreeMap::new();
    let mut values = std::collections::BTreeMap::new();
    for item in items {
        let Some((left, right)) = item.as_str().and_then(|text| text.split_once('=')) else {
            return Err(TemplateError::new(
                path,
                format!(
                    "member {} is not '.member.N.Name=value'",
                    super::error::describe_value(item)
                ),
            ));
        };
        let mut parts = left.trim_start_matches('.').split('.');
        let (Some("member"), Some(index), Some(name)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(TemplateError::new(
                path,
                format!("member '{left}' is not '.member.N.Name'"),
            ));
        };
        if name == key_name {
            keys.insert(index.to_owned(), right.to_owned());
        } else if name == value_name {
            values.insert(index.to_owned(), right.to_owned());
        }
    }
    let map: Map<String, Value> = keys
        .into_iter()
        .map(|(index, key)| (key, json!(values.get(&index).cloned().unwrap_or_default())))
        .collect();
    Ok(Value::Object(map))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn translated(document: Value) -> Value {
        Value::Object(translate(document.as_object().expect("map")).expect("translated"))
    }

    #[test]
    fn sections_parameters_and_functions_become_hot() {
        let hot = translated(json!({
            "AWSTemplateFormatVersion": "2010-09-09",
            "Description": "a CFN stack",
            "Parameters": {
                "Size": {"Type": "Number", "Default": "3", "MinValue": "1", "MaxValue": 10,
                         "ConstraintDescription": "1 to 10"},
                "Names": {"Type": "CommaDelimitedList", "Default": "a,b"},
                "Secret": {"Type": "String", "NoEcho": "true", "AllowedPattern": "[a-z]+"},
            },
            "Conditions": {"Big": {"Fn::Not": [{"Fn::Equals": [{"Ref": "Size"}, "1"]}]},
                           "Both": {"Fn::And": [{"Condition": "Big"}, true]}},
            "Resources": {
                "word": {"Type": "OS::Heat::RandomString", "Properties": {"length": {"Ref": "Size"}},
                         "Condition": "Big", "DeletionPolicy": "Retain"},
                "value": {"Type": "OS::Heat::Value", "DependsOn": "word", "Properties": {"value": {
                    "Fn::Join": ["-", [{"Ref": "AWS::StackName"}, {"Fn::GetAtt": ["word", "value"]},
                                       {"Fn::Select": ["1", {"Ref": "Names"}]},
                                       {"Fn::Select": [0, {"Fn::GetAZs": ""}]},
                                       {"Fn::Base64": "plain"}, {"Ref": "AWS::Region"}]]}}},
            },
            "Outputs": {"Word": {"Value": {"Fn::If": ["Big", {"Ref": "word"}, "none"]},
                                 "Description": "the word", "Condition": "Both"}},
        }));
        assert_eq!(hot["heat_template_version"], "2021-04-16");
        assert_eq!(hot["description"], "a CFN stack");
        assert_eq!(hot["parameters"]["Size"]["type"], "number");
        assert_eq!(
            hot["parameters"]["Size"]["constraints"],
            json!([{"range": {"min": 1.0, "max": 10}, "description": "1 to 10"}])
        );
        assert_eq!(hot["parameters"]["Names"]["type"], "comma_delimited_list");
        assert_eq!(hot["parameters"]["Secret"]["hidden"], true);
        assert_eq!(
            hot["conditions"]["Big"],
            json!({"not": {"equals": [{"get_param": "Size"}, "1"]}})
        );
        assert_eq!(hot["conditions"]["Both"], json!({"and": ["Big", true]}));
        assert_eq!(
            hot["resources"]["word"]["properties"]["length"],
            json!({"get_param": "Size"})
        );
        assert_eq!(hot["resources"]["word"]["condition"], "Big");
        assert_eq!(hot["resources"]["word"]["deletion_policy"], "Retain");
        assert_eq!(hot["resources"]["value"]["depends_on"], "word");
        assert_eq!(
            hot["resources"]["value"]["properties"]["value"],
            json!({"list_join": ["-", [{"get_param": "OS::stack_name"}, {"get_attr": ["word", "value"]},
                                       {"get_param": ["Names", 1]}, "nova", "plain", "RegionOne"]]})
        );
        assert_eq!(
            hot["outputs"]["Word"],
            json!({"value": {"if": ["Big", {"get_resource": "word"}, "none"]},
                   "description": "the word", "condition": "Both"})
        );
    }

    #[test]
    fn split_replace_member_lists_and_nested_stacks() {
        let hot = translated(json!({
            "HeatTemplateFormatVersion": "2012-12-12",
            "Resources": {
                "child": {"Type": "AWS::CloudFormation::Stack",
                          "Properties": {"TemplateURL": "child.yaml", "Parameters": {"a": "1"},
                                         "TimeoutInMinutes": 5}},
                "v": {"Type": "OS::Heat::Value", "Properties": {"value": [
                    {"Fn::Split": [",", "x,y"]},
                    {"Fn::Replace": [{"$x": "1"}, "value $x"]},
                    {"Fn::MemberListToMap": ["Name", "Value",
                        [".member.0.Name=color", ".member.0.Value=blue", ".member.1.Name=size", ".member.1.Value=9"]]},
                    {"Fn::GetAtt": ["child", "Outputs.Result"]},
                    {"Fn::ResourceFacade": "DeletionPolicy"},
                ]}},
            },
        }));
        assert_eq!(
            hot["resources"]["child"],
            json!({"type": "OS::Heat::Stack", "properties": {"template": {"get_file": "child.yaml"},
                   "parameters": {"a": "1"}, "timeout": 5}})
        );
        assert_eq!(
            hot["resources"]["v"]["properties"]["value"],
            json!([
                {"str_split": [",", "x,y"]},
                {"str_replace": {"template": "value $x", "params": {"$x": "1"}}},
                {"color": "blue", "size": "9"},
                {"get_attr": ["child", "outputs", "Result"]},
                {"resource_facade": "deletion_policy"},
            ])
        );
    }

    #[test]
    fn bad_cfn_is_refused_naming_the_place() {
        let cases = [
            (
                json!({"AWSTemplateFormatVersion": "2011-01-01"}),
                "expected 2010-09-09",
            ),
            (
                json!({"AWSTemplateFormatVersion": "2010-09-09", "Extra": {}}),
                "The template section is invalid: Extra",
            ),
            (
                json!({"AWSTemplateFormatVersion": "2010-09-09", "Parameters": {"p": {"Type": "Float"}}}),
                "unknown parameter type 'Float'",
            ),
            (
                json!({"AWSTemplateFormatVersion": "2010-09-09", "Resources": {"r": {"Properties": {}}}}),
                "needs a Type",
            ),
            (
                json!({"AWSTemplateFormatVersion": "2010-09-09", "Resources": {"r": {"Type": "X", "Colour": 1}}}),
                "unknown key 'Colour'",
            ),
            (
                json!({"AWSTemplateFormatVersion": "2010-09-09", "Resources": {"r": {"Type": "X",
                "Properties": {"a": {"Fn::Join": ["-"]}}}}}),
                "Fn::Join takes a list of 2 arguments",
            ),
            (
                json!({"AWSTemplateFormatVersion": "2010-09-09", "Resources": {"r": {"Type": "X",
                "Properties": {"a": {"Fn::FindInMap": ["m", "k", "v"]}}}}}),
                "there is no mapping \"m\" in the Mappings section",
            ),
            (
                json!({"AWSTemplateFormatVersion": "2010-09-09", "Mappings": {"m": {"k": {"v": 1}}},
                "Resources": {"r": {"Type": "X", "Properties": {"a": {"Fn::FindInMap": ["m", "k", "w"]}}}}}),
                "mapping \"m\" has no key \"w\"",
            ),
            (
                json!({"AWSTemplateFormatVersion": "2010-09-09", "Mappings": {"m": ["k"]},
                "Resources": {}}),
                "a mapping is a map of keys to maps",
            ),
            (
                json!({"AWSTemplateFormatVersion": "2010-09-09", "Resources": {"r": {"Type": "X",
                "Properties": {"a": {"Fn::Select": [0, {"Fn::Split": [",", {"Ref": "AWS::StackName"}]}]}}}}}),
                "cannot select from a list computed",
            ),
        ];
        for (document, expected) in cases {
            let error = translate(document.as_object().expect("map")).expect_err("refused");
            assert!(error.to_string().contains(expected), "{document}: {error}");
        }
    }
}
