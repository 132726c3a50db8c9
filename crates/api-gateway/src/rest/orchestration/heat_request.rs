//! Heat request bodies and query strings → engine requests. Everything a
//! client may send is decided here, in pure functions: which keys each body
//! takes (an unknown key is a 400 naming it), the two spellings Heat allows
//! for templates, environments and adopt data (a JSON object or a YAML/JSON
//! string), tags as a comma string or a list, booleans and integers as JSON
//! or as strings, and the one-action-per-body rule of `…/actions`.

use std::collections::HashMap;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use ember_proto::engine::v1 as pb;
use ember_runtime::ErrorKind;
use serde_json::{Map, Value};

use super::protobuf_json::map_to_struct;
use crate::error::RestError;

/// Heat's limit on one tag.
const LONGEST_TAG: usize = 80;

fn invalid(message: impl Into<String>) -> RestError {
    RestError::new(ErrorKind::InvalidInput, message)
}

/// What a JSON value is, for messages ("got an array").
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A request body as a JSON object; an empty body is an empty object, so
/// each operation can say which key it misses.
pub fn parse_body(bytes: &[u8]) -> Result<Map<String, Value>, RestError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(invalid(format!(
            "the request body must be a JSON object, got {}",
            kind_of(&other)
        ))),
        Err(error) => Err(invalid(format!(
            "the request body is not valid JSON: {error}"
        ))),
    }
}

/// The operations that take a stack body, each with the keys it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operation {
    Create,
    Preview,
    /// PUT (`existing` false) or PATCH (`existing` true).
    Update {
        existing: bool,
    },
    Validate,
}

const TEMPLATE_KEYS: &[&str] = &[
    "template",
    "template_url",
    "files",
    "files_container",
    "environment",
    "environment_files",
    "parameters",
];
/// `timeout` is what `openstack stack adopt` sends for `timeout_mins`.
const STACK_KEYS: &[&str] = &[
    "stack_name",
    "timeout_mins",
    "timeout",
    "disable_rollback",
    "tags",
];

impl Operation {
    fn accepts(self, key: &str) -> bool {
        let extra: &[&str] = match self {
            Operation::Validate => &[],
            Operation::Create | Operation::Preview => &["adopt_stack_data"],
            Operation::Update { existing: false } => &["converge"],
            Operation::Update { existing: true } => &["converge", "clear_parameters"],
        };
        TEMPLATE_KEYS.contains(&key)
            || (self != Operation::Validate && STACK_KEYS.contains(&key))
            || extra.contains(&key)
    }

    fn accepted_keys(self) -> Vec<&'static str> {
        TEMPLATE_KEYS
            .iter()
            .chain(STACK_KEYS)
            .chain(&["adopt_stack_data", "converge", "clear_parameters"])
            .copied()
            .filter(|key| self.accepts(key))
            .collect()
    }

    fn name(self) -> &'static str {
        match self {
            Operation::Create => "stack create",
            Operation::Preview => "stack preview",
            Operation::Update { existing: false } => "stack update (PUT)",
            Operation::Update { existing: true } => "stack update (PATCH)",
            Operation::Validate => "template validate",
        }
    }
}

/// A stack body, every key parsed; absent (or null) keys stay empty.
#[derive(Debug, Default, PartialEq)]
struct StackBody {
    stack_name: Option<String>,
    template: Option<String>,
    parameters: Map<String, Value>,
    files: HashMap<String, String>,
    environment: String,
    environment_files: Vec<String>,
    timeout_mins: Option<u32>,
    disable_rollback: Option<bool>,
    tags: Option<Vec<String>>,
    adopt_stack_data: Option<String>,
    clear_parameters: Vec<String>,
}

fn parse_stack_body(map: Map<String, Value>, operation: Operation) -> Result<StackBody, RestError> {
    let mut body = StackBody::default();
    let mut adopted = None;
    for (key, value) in map {
        if !operation.accepts(&key) {
            return Err(invalid(format!(
                "unknown key {key:?} in the {} body: expected {}",
                operation.name(),
                operation.accepted_keys().join(", ")
            )));
        }
        if value.is_null() {
            continue;
        }
        match key.as_str() {
            "stack_name" => body.stack_name = Some(string(&key, value)?),
            "template" => body.template = Some(document_text(&key, value)?),
            "template_url" => {
                return Err(invalid(
                    "template_url is not supported: send the template inline",
                ));
            }
            "files_container" => {
                return Err(invalid(
                    "files_container is not supported: send the files inline in files",
                ));
            }
            "parameters" => body.parameters = object(&key, value)?,
            "files" => body.files = files(value)?,
            "environment" => body.environment = document_text(&key, value)?,
            "environment_files" => body.environment_files = string_list(&key, value)?,
            "timeout_mins" => body.timeout_mins = Some(whole_number(&key, &value)?),
            "timeout" => {
                let minutes = whole_number(&key, &value)?;
                body.timeout_mins.get_or_insert(minutes);
            }
            "disable_rollback" => body.disable_rollback = Some(boolean(&key, &value)?),
            "tags" => body.tags = Some(tags(value)?),
            "clear_parameters" => body.clear_parameters = string_list(&key, value)?,
            "converge" => {
                if boolean(&key, &value)? {
                    return Err(invalid(
                        "converge is not supported: updates start from the recorded state",
                    ));
                }
            }
            "adopt_stack_data" => {
                let data = adopt_data(value)?;
                body.adopt_stack_data = Some(data.text.clone());
                adopted = Some(data);
            }
            _ => return Err(invalid(format!("unknown key {key:?}"))),
        }
    }
    if let Some(adopted) = adopted {
        // As in Heat, adopted stacks take their template from the adopt
        // data; what the body leaves out of the rest comes from it too.
        body.template = Some(adopted.template);
        if body.parameters.is_empty() {
            body.parameters = adopted.parameters;
        }
        if body.environment.is_empty() {
            body.environment = adopted.environment;
        }
        if body.files.is_empty() {
            body.files = adopted.files;
        }
    }
    Ok(body)
}

fn string(key: &str, value: Value) -> Result<String, RestError> {
    match value {
        Value::String(text) => Ok(text),
        other => Err(invalid(format!(
            "{key} must be a string, got {}",
            kind_of(&other)
        ))),
    }
}

/// A template, environment or adopt data: an object (sent on as JSON text)
/// or YAML/JSON text as it is.
fn document_text(key: &str, value: Value) -> Result<String, RestError> {
    match value {
        Value::String(text) => Ok(text),
        Value::Object(map) => Ok(Value::Object(map).to_string()),
        other => Err(invalid(format!(
            "{key} must be a JSON object or a YAML/JSON string, got {}",
            kind_of(&other)
        ))),
    }
}

fn object(key: &str, value: Value) -> Result<Map<String, Value>, RestError> {
    match value {
        Value::Object(map) => Ok(map),
        other => Err(invalid(format!(
            "{key} must be an object of name: value, got {}",
            kind_of(&other)
        ))),
    }
}

fn files(value: Value) -> Result<HashMap<String, String>, RestError> {
    object("files", value)?
        .into_iter()
        .map(|(name, content)| match content {
            Value::String(text) => Ok((name, text)),
            // Some clients send a nested template already parsed.
            Value::Object(_) | Value::Array(_) => Ok((name, content.to_string())),
            other => Err(invalid(format!(
                "files[{name:?}] must be the file's content as a string, got {}",
                kind_of(&other)
            ))),
        })
        .collect()
}

/// A list of strings; a lone string is a list of one.
fn string_list(key: &str, value: Value) -> Result<Vec<String>, RestError> {
    match value {
        Value::String(text) => Ok(vec![text]),
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::String(text) => Ok(text),
                other => Err(invalid(format!(
                    "{key} must be a list of strings, got {} in it",
                    kind_of(&other)
                ))),
            })
            .collect(),
        other => Err(invalid(format!(
            "{key} must be a list of strings, got {}",
            kind_of(&other)
        ))),
    }
}

/// A non-negative integer, as a JSON number or a string of digits.
pub fn whole_number(key: &str, value: &Value) -> Result<u32, RestError> {
    let parsed = match value {
        Value::Number(number) => number
            .as_u64()
            .and_then(|number| u32::try_from(number).ok()),
        Value::String(text) => text.trim().parse::<u32>().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| {
        invalid(format!(
            "{key} must be a whole number (0 or more), got {value}"
        ))
    })
}

/// A boolean, as JSON or as the strings OpenStack clients send ("True").
pub fn boolean(key: &str, value: &Value) -> Result<bool, RestError> {
    match value {
        Value::Bool(boolean) => Ok(*boolean),
        Value::String(text) => boolean_text(key, text),
        other => Err(invalid(format!("{key} must be true or false, got {other}"))),
    }
}

fn boolean_text(key: &str, text: &str) -> Result<bool, RestError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "t" | "yes" | "y" | "on" | "1" => Ok(true),
        "false" | "f" | "no" | "n" | "off" | "0" => Ok(false),
        _ => Err(invalid(format!(
            "{key} must be true or false, got {text:?}"
        ))),
    }
}

/// Tags as "a,b" or ["a", "b"]; blanks around commas are dropped.
fn tags(value: Value) -> Result<Vec<String>, RestError> {
    let tags: Vec<String> = match value {
        Value::String(text) => text
            .split(',')
            .map(str::trim)
            .filter(|tag| !tag.is_empty())
            .map(str::to_owned)
            .collect(),
        other => string_list("tags", other)?,
    };
    if let Some(long) = tags.iter().find(|tag| tag.chars().count() > LONGEST_TAG) {
        return Err(invalid(format!(
            "tag {long:?} is longer than {LONGEST_TAG} characters"
        )));
    }
    Ok(tags)
}

/// Abandon data given to adopt: its JSON text, and what the adopted stack
/// is made from.
struct AdoptData {
    text: String,
    template: String,
    parameters: Map<String, Value>,
    environment: String,
    files: HashMap<String, String>,
}

fn adopt_data(value: Value) -> Result<AdoptData, RestError> {
    let data = match value {
        Value::String(text) => serde_json::from_str::<Value>(&text)
            .map_err(|error| invalid(format!("adopt_stack_data is not valid JSON: {error}")))?,
        other => other,
    };
    let Value::Object(map) = data else {
        return Err(invalid(format!(
            "adopt_stack_data must be the JSON object abandon returned, got {}",
            kind_of(&data)
        )));
    };
    let template = match map.get("template") {
        Some(template @ (Value::Object(_) | Value::String(_))) => {
            document_text("adopt_stack_data.template", template.clone())?
        }
        _ => {
            return Err(invalid(
                "adopt_stack_data has no template: pass the data abandon returned",
            ));
        }
    };
    let parameters = match map.get("parameters") {
        Some(Value::Object(parameters)) => parameters.clone(),
        _ => Map::new(),
    };
    let environment = match map.get("environment") {
        Some(environment @ (Value::Object(_) | Value::String(_))) => {
            document_text("adopt_stack_data.environment", environment.clone())?
        }
        _ => String::new(),
    };
    let files = match map.get("files") {
        Some(files_given @ Value::Object(_)) => files(files_given.clone())?,
        _ => HashMap::new(),
    };
    Ok(AdoptData {
        text: Value::Object(map).to_string(),
        template,
        parameters,
        environment,
        files,
    })
}

fn require_stack_name(body: &StackBody) -> Result<String, RestError> {
    match &body.stack_name {
        Some(name) if !name.is_empty() => Ok(name.clone()),
        _ => Err(invalid("the body has no stack_name: name the stack")),
    }
}

fn require_template(body: &mut StackBody, hint: &str) -> Result<String, RestError> {
    body.template
        .take()
        .ok_or_else(|| invalid(format!("the body has no template: {hint}")))
}

const INLINE_TEMPLATE_HINT: &str = "send the template inline, as an object or a YAML/JSON string";

/// `POST /stacks` (and, with `preview`, `POST /stacks/preview`).
pub fn create_stack_request(
    map: Map<String, Value>,
    preview: bool,
) -> Result<pb::CreateStackRequest, RestError> {
    let operation = if preview {
        Operation::Preview
    } else {
        Operation::Create
    };
    let mut body = parse_stack_body(map, operation)?;
    let stack_name = require_stack_name(&body)?;
    let template = require_template(&mut body, INLINE_TEMPLATE_HINT)?;
    Ok(pb::CreateStackRequest {
        stack_name,
        template,
        parameters: Some(map_to_struct(body.parameters)),
        files: body.files,
        environment: body.environment,
        environment_files: body.environment_files,
        timeout_mins: body.timeout_mins.unwrap_or(0),
        disable_rollback: body.disable_rollback,
        tags: body.tags.unwrap_or_default(),
        adopt_stack_data: body.adopt_stack_data.unwrap_or_default(),
    })
}

/// `PUT` (`existing` false: a full new template) or `PATCH` (`existing`
/// true: changes to the current one) of the stack `stack_name`/`stack_id`.
pub fn update_stack_request(
    stack_name: &str,
    stack_id: &str,
    map: Map<String, Value>,
    existing: bool,
) -> Result<pb::UpdateStackRequest, RestError> {
    let mut body = parse_stack_body(map, Operation::Update { existing })?;
    if let Some(name) = body
        .stack_name
        .as_deref()
        .filter(|name| *name != stack_name)
    {
        return Err(invalid(format!(
            "stack_name {name:?} does not match the stack {stack_name:?}: stacks cannot be renamed"
        )));
    }
    let template = if existing {
        body.template.take().unwrap_or_default()
    } else {
        require_template(
            &mut body,
            "a full update (PUT) needs the new template; PATCH keeps the current one",
        )?
    };
    Ok(pb::UpdateStackRequest {
        stack: stack_id.to_owned(),
        template,
        parameters: Some(map_to_struct(body.parameters)),
        files: body.files,
        environment: body.environment,
        environment_files: body.environment_files,
        timeout_mins: body.timeout_mins.unwrap_or(0),
        disable_rollback: body.disable_rollback,
        existing,
        clear_parameters: body.clear_parameters,
        tags: body.tags.unwrap_or_default(),
    })
}

/// `POST /validate`.
pub fn validate_template_request(
    map: Map<String, Value>,
) -> Result<pb::ValidateTemplateRequest, RestError> {
    let mut body = parse_stack_body(map, Operation::Validate)?;
    let template = require_template(&mut body, INLINE_TEMPLATE_HINT)?;
    Ok(pb::ValidateTemplateRequest {
        template,
        files: body.files,
        environment: body.environment,
        environment_files: body.environment_files,
        parameters: Some(map_to_struct(body.parameters)),
    })
}

/// One action `POST …/actions` accepts: the body's key, the engine
/// operation it starts, and the options its value may carry.
struct StackActionRule {
    name: &'static str,
    kind: pb::StackActionKind,
    options: &'static [&'static str],
}

/// Every action of the actions endpoint. A new action is one line here.
const STACK_ACTIONS: &[StackActionRule] = &[
    StackActionRule {
        name: "suspend",
        kind: pb::StackActionKind::Suspend,
        options: &[],
    },
    StackActionRule {
        name: "resume",
        kind: pb::StackActionKind::Resume,
        options: &[],
    },
    StackActionRule {
        name: "check",
        kind: pb::StackActionKind::Check,
        options: &[],
    },
    StackActionRule {
        name: "cancel_update",
        kind: pb::StackActionKind::CancelUpdate,
        options: &[],
    },
];

/// A parsed actions body: what to run and the options given with it.
#[derive(Debug, PartialEq)]
pub struct StackAction {
    pub kind: pb::StackActionKind,
    pub options: Map<String, Value>,
}

fn action_names() -> String {
    STACK_ACTIONS
        .iter()
        .map(|rule| rule.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The body of `POST …/actions`: exactly one key naming the action, its
/// value null or an object of that action's options.
pub fn stack_action(map: Map<String, Value>) -> Result<StackAction, RestError> {
    let mut entries = map.into_iter();
    let Some((name, value)) = entries.next() else {
        return Err(invalid(format!(
            "no action given: send one of {} as the body's only key, e.g. {{\"check\": null}}",
            action_names()
        )));
    };
    if let Some((second, _)) = entries.next() {
        return Err(invalid(format!(
            "one action at a time: the body names both {name:?} and {second:?}"
        )));
    }
    let Some(rule) = STACK_ACTIONS.iter().find(|rule| rule.name == name) else {
        return Err(invalid(format!(
            "unknown action {name:?}: expected one of {}",
            action_names()
        )));
    };
    let options = match value {
        Value::Null => Map::new(),
        Value::Object(options) => options,
        other => {
            return Err(invalid(format!(
                "action {name:?} takes null or an object of options, got {}",
                kind_of(&other)
            )));
        }
    };
    if let Some(unknown) = options
        .keys()
        .find(|key| !rule.options.contains(&key.as_str()))
    {
        return Err(invalid(if rule.options.is_empty() {
            format!("action {name:?} takes no options, got {unknown:?}")
        } else {
            format!(
                "unknown option {unknown:?} for action {name:?}: expected {}",
                rule.options.join(", ")
            )
        }));
    }
    Ok(StackAction {
        kind: rule.kind,
        options,
    })
}

/// A query string as pairs, repeated keys kept (Heat filters take several
/// values: `?type=A&type=B`).
#[derive(Debug, Default)]
pub struct QueryParams(pub Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = RestError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, RestError> {
        axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)
            .map(|query| QueryParams(query.0))
            .map_err(|error| invalid(format!("the query string is invalid: {error}")))
    }
}

impl QueryParams {
    pub fn first(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    }

    /// Every value of `key`; a comma list counts as several.
    pub fn all(&self, key: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(name, _)| name == key)
            .flat_map(|(_, value)| value.split(','))
            .map(str::trim)
            .filter(|value| !value.is_empty())
            .map(str::to_owned)
            .collect()
    }

    pub fn boolean(&self, key: &str) -> Result<Option<bool>, RestError> {
        self.first(key)
            .map(|text| boolean_text(key, text))
            .transpose()
    }

    pub fn whole_number(&self, key: &str) -> Result<Option<u32>, RestError> {
        self.first(key)
            .map(|text| whole_number(key, &Value::String(text.to_owned())))
            .transpose()
    }

    /// Heat refuses filters it does not know on some lists.
    pub fn refuse_unknown(&self, accepted: &[&str]) -> Result<(), RestError> {
        match self
            .0
            .iter()
            .find(|(name, _)| !accepted.contains(&name.as_str()))
        {
            Some((name, _)) => Err(invalid(format!(
                "unknown query parameter {name:?}: expected {}",
                accepted.join(", ")
            ))),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn body(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    /// The message of a 400, as the client reads it.
    fn message(error: RestError) -> String {
        let debug = format!("{error:?}");
        assert!(debug.contains("InvalidInput"), "{debug}");
        debug.replace("\\\"", "\"")
    }

    #[test]
    fn a_template_object_is_sent_on_as_json_text_and_a_string_as_it_is() {
        let as_object = create_stack_request(
            body(json!({
                "stack_name": "web",
                "template": {"heat_template_version": "2018-08-31", "resources": {}},
                "parameters": {"count": 2, "name": "a"},
            })),
            false,
        )
        .expect("valid");
        let template: Value = serde_json::from_str(&as_object.template).expect("json text");
        assert_eq!(template["heat_template_version"], "2018-08-31");
        assert_eq!(as_object.stack_name, "web");
        let parameters = as_object.parameters.expect("parameters");
        assert!(parameters.fields.contains_key("count"));

        let yaml = "heat_template_version: 2018-08-31\nresources: {}\n";
        let as_string =
            create_stack_request(body(json!({"stack_name": "web", "template": yaml})), false)
                .expect("valid");
        assert_eq!(as_string.template, yaml);
        assert_eq!(
            as_string.disable_rollback, None,
            "absent keeps the engine's default"
        );
    }

    #[test]
    fn unknown_and_malformed_keys_are_refused_by_name() {
        let unknown = create_stack_request(
            body(json!({"stack_name": "web", "template": {}, "templtae": {}})),
            false,
        )
        .expect_err("unknown key");
        assert!(message(unknown).contains("\"templtae\""));

        let url = create_stack_request(
            body(json!({"stack_name": "web", "template_url": "http://x/t.yaml"})),
            false,
        )
        .expect_err("template_url");
        assert!(message(url).contains("template_url is not supported: send the template inline"));

        for (key, value) in [
            ("timeout_mins", json!(-1)),
            ("timeout_mins", json!("soon")),
            ("disable_rollback", json!("maybe")),
            ("parameters", json!(["a"])),
            ("template", json!(42)),
            ("tags", json!(7)),
            ("environment_files", json!({"a": 1})),
        ] {
            let mut map = body(json!({"stack_name": "web", "template": {}}));
            map.insert(key.to_owned(), value);
            let error = create_stack_request(map, false).expect_err(key);
            assert!(message(error).contains(key), "the message names {key}");
        }

        let missing =
            create_stack_request(body(json!({"template": {}})), false).expect_err("no name");
        assert!(message(missing).contains("stack_name"));
        let missing = create_stack_request(body(json!({"stack_name": "web"})), false)
            .expect_err("no template");
        assert!(message(missing).contains("no template"));
    }

    #[test]
    fn clients_spellings_of_tags_booleans_and_numbers_are_accepted() {
        let request = create_stack_request(
            body(json!({
                "stack_name": "web",
                "template": {},
                "tags": "a, b,,c",
                "disable_rollback": "False",
                "timeout_mins": "30",
                "environment": {"parameters": {"x": 1}},
                "environment_files": ["env.yaml"],
                "files": {"env.yaml": "parameters: {}", "nested.yaml": {"resources": {}}},
                "parameters": null,
            })),
            false,
        )
        .expect("valid");
        assert_eq!(request.tags, ["a", "b", "c"]);
        assert_eq!(request.disable_rollback, Some(false));
        assert_eq!(request.timeout_mins, 30);
        let environment: Value = serde_json::from_str(&request.environment).expect("json");
        assert_eq!(environment["parameters"]["x"], 1);
        assert_eq!(request.files["nested.yaml"], "{\"resources\":{}}");

        let listed = create_stack_request(
            body(
                json!({"stack_name": "web", "template": {}, "tags": ["x", "y"], "timeout_mins": 5}),
            ),
            false,
        )
        .expect("valid");
        assert_eq!(listed.tags, ["x", "y"]);
        assert_eq!(listed.timeout_mins, 5);
        let long = create_stack_request(
            body(json!({"stack_name": "web", "template": {}, "tags": "x".repeat(81)})),
            false,
        )
        .expect_err("long tag");
        assert!(message(long).contains("longer than 80"));
    }

    #[test]
    fn adopt_data_brings_its_template() {
        let data = json!({"name": "old", "template": {"resources": {"a": {"type": "OS::Heat::None"}}}, "resources": {}});
        let request = create_stack_request(
            body(json!({"stack_name": "web", "adopt_stack_data": data.to_string()})),
            false,
        )
        .expect("valid");
        let template: Value = serde_json::from_str(&request.template).expect("json");
        assert_eq!(template["resources"]["a"]["type"], "OS::Heat::None");
        let adopted: Value = serde_json::from_str(&request.adopt_stack_data).expect("json");
        assert_eq!(adopted["name"], "old");
        let with_timeout = create_stack_request(
            body(json!({"stack_name": "web", "adopt_stack_data": data.clone(), "timeout": 7})),
            false,
        )
        .expect("openstack stack adopt sends timeout");
        assert_eq!(with_timeout.timeout_mins, 7);

        let full = json!({
            "template": {"resources": {}},
            "parameters": {"greeting": "kept"},
            "environment": {"parameter_defaults": {"a": 1}},
            "files": {"f.txt": "content"},
            "resources": {},
        });
        let defaulted = create_stack_request(
            body(json!({"stack_name": "web", "adopt_stack_data": full.clone()})),
            false,
        )
        .expect("valid");
        let parameters = super::super::protobuf_json::struct_to_json(defaulted.parameters.as_ref());
        assert_eq!(
            parameters["greeting"], "kept",
            "parameters come from the data"
        );
        assert!(defaulted.environment.contains("parameter_defaults"));
        assert_eq!(defaulted.files["f.txt"], "content");
        let overridden = create_stack_request(
            body(json!({"stack_name": "web", "adopt_stack_data": full, "parameters": {"greeting": "new"}})),
            false,
        )
        .expect("valid");
        let parameters =
            super::super::protobuf_json::struct_to_json(overridden.parameters.as_ref());
        assert_eq!(parameters["greeting"], "new", "the body's parameters win");

        let without = create_stack_request(
            body(json!({"stack_name": "web", "adopt_stack_data": {"resources": {}}})),
            false,
        )
        .expect_err("no template");
        assert!(message(without).contains("adopt_stack_data has no template"));
    }

    #[test]
    fn put_needs_a_template_and_patch_keeps_the_current_one() {
        let put = update_stack_request("web", "id-1", body(json!({"parameters": {"a": 1}})), false)
            .expect_err("PUT without template");
        assert!(message(put).contains("PATCH keeps the current one"));

        let patch = update_stack_request(
            "web",
            "id-1",
            body(json!({"parameters": {"a": 1}, "clear_parameters": ["b"], "template": null})),
            true,
        )
        .expect("PATCH");
        assert!(patch.existing);
        assert_eq!(patch.stack, "id-1");
        assert!(patch.template.is_empty());
        assert_eq!(patch.clear_parameters, ["b"]);

        let clear_on_put = update_stack_request(
            "web",
            "id-1",
            body(json!({"template": {}, "clear_parameters": ["b"]})),
            false,
        )
        .expect_err("clear_parameters is PATCH only");
        assert!(message(clear_on_put).contains("\"clear_parameters\""));

        let renamed = update_stack_request(
            "web",
            "id-1",
            body(json!({"stack_name": "other", "template": {}})),
            false,
        )
        .expect_err("rename");
        assert!(message(renamed).contains("cannot be renamed"));
        update_stack_request(
            "web",
            "id-1",
            body(json!({"stack_name": "web", "template": {}, "converge": false})),
            false,
        )
        .expect("same name and converge false are fine");
    }

    #[test]
    fn validate_takes_only_template_keys() {
        let request = validate_template_request(body(json!({
            "template": {"heat_template_version": "2018-08-31"},
            "parameters": {"a": "b"},
        })))
        .expect("valid");
        assert!(request.template.contains("2018-08-31"));
        let error = validate_template_request(body(json!({"template": {}, "stack_name": "x"})))
            .expect_err("stack_name is not a validate key");
        assert!(message(error).contains("\"stack_name\""));
    }

    #[test]
    fn an_actions_body_names_exactly_one_known_action() {
        for (name, kind) in [
            ("suspend", pb::StackActionKind::Suspend),
            ("resume", pb::StackActionKind::Resume),
            ("check", pb::StackActionKind::Check),
            ("cancel_update", pb::StackActionKind::CancelUpdate),
        ] {
            let parsed = stack_action(body(json!({ name: null }))).expect(name);
            assert_eq!(parsed.kind, kind);
            assert!(parsed.options.is_empty());
        }
        stack_action(body(json!({"check": {}}))).expect("an empty object is no options");

        let cases = [
            (json!({}), "no action given"),
            (
                json!({"suspend": null, "resume": null}),
                "one action at a time",
            ),
            (json!({"lock": null}), "unknown action \"lock\""),
            (json!({"cancel_without_rollback": null}), "unknown action"),
            (
                json!({"check": {"deep": true}}),
                "takes no options, got \"deep\"",
            ),
            (json!({"check": 1}), "takes null or an object"),
        ];
        for (value, expected) in cases {
            let error = stack_action(body(value.clone())).expect_err("refused");
            assert!(message(error).contains(expected), "{value} → {expected}");
        }
    }

    #[test]
    fn bodies_must_be_json_objects() {
        assert!(parse_body(b"").expect("empty").is_empty());
        assert!(message(parse_body(b"[1]").expect_err("array")).contains("got a list"));
        assert!(message(parse_body(b"{nope").expect_err("bad json")).contains("not valid JSON"));
    }

    #[test]
    fn query_parameters_parse_heat_style() {
        let query = QueryParams(vec![
            ("show_nested".into(), "True".into()),
            ("limit".into(), "10".into()),
            ("type".into(), "A".into()),
            ("type".into(), "B,C".into()),
            ("bad".into(), "x".into()),
        ]);
        assert_eq!(query.boolean("show_nested").expect("bool"), Some(true));
        assert_eq!(query.whole_number("limit").expect("number"), Some(10));
        assert_eq!(query.all("type"), ["A", "B", "C"]);
        assert_eq!(query.boolean("absent").expect("absent"), None);
        let error = query
            .refuse_unknown(&["show_nested", "limit", "type"])
            .expect_err("bad");
        assert!(message(error).contains("\"bad\""));
        let bad_limit = QueryParams(vec![("limit".into(), "-3".into())]);
        assert!(message(bad_limit.whole_number("limit").expect_err("negative")).contains("limit"));
    }
}
