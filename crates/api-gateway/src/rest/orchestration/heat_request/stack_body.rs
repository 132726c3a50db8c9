//! Stack bodies: create, preview, update (PUT and PATCH) and validate —
//! which keys each operation takes, what is required, and how adopt data
//! supplies the template and defaults.

use std::collections::HashMap;

use ember_proto::engine::v1 as pb;
use serde_json::{Map, Value};

use super::{
    boolean, document_text, files, invalid, kind_of, object, string, string_list, tags,
    whole_number,
};
use crate::error::RestError;
use crate::rest::orchestration::protobuf_json::map_to_struct;

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
    let mut ignored = Vec::new();
    for (key, value) in map {
        if !operation.accepts(&key) {
            // As Heat: a key the operation does not take is ignored (clients
            // such as TripleO's send `existing`), and said in the log.
            ignored.push(format!("{:?}", ember_runtime::quote::quoted(&key)));
            continue;
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
    if !ignored.is_empty() {
        tracing::info!(
            operation = operation.name(),
            keys = %ignored.iter().take(10).cloned().collect::<Vec<_>>().join(", "),
            count = ignored.len(),
            expected = %operation.accepted_keys().join(", "),
            "unknown keys in the request body ignored, as Heat ignores them"
        );
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
    // Heat ignores a stack_name in an update's body (a stack is never
    // renamed; clients such as heatclient send one): so does Ember.
    if let Some(name) = body
        .stack_name
        .as_deref()
        .filter(|name| *name != stack_name)
    {
        tracing::debug!(
            stack = stack_name,
            ignored = name,
            "an update's stack_name is ignored, as Heat ignores it"
        );
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
        show_nested: false,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{body, message};
    use super::*;

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
    fn unknown_keys_are_ignored_as_heat_ignores_them_and_malformed_ones_refused() {
        let with_unknown = create_stack_request(
            body(
                json!({"stack_name": "web", "template": {"heat_template_version": "2021-04-16"},
                "existing": true, "templtae": {}}),
            ),
            false,
        )
        .expect("unknown keys are ignored");
        let without = create_stack_request(
            body(json!({"stack_name": "web", "template": {"heat_template_version": "2021-04-16"}})),
            false,
        )
        .expect("valid");
        assert_eq!(with_unknown, without);
        // A wrong value of a known key is still refused.
        let wrong = create_stack_request(
            body(json!({"stack_name": "web", "template": {}, "timeout_mins": "soon"})),
            false,
        )
        .expect_err("wrong value");
        let wrong = message(wrong);
        assert!(wrong.contains("timeout_mins"), "{wrong}");

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
        let parameters = crate::rest::orchestration::protobuf_json::struct_to_json(
            defaulted.parameters.as_ref(),
        );
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
        let parameters = crate::rest::orchestration::protobuf_json::struct_to_json(
            overridden.parameters.as_ref(),
        );
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

        // PUT does not take clear_parameters: ignored, as Heat ignores it.
        let clear_on_put = update_stack_request(
            "web",
            "id-1",
            body(json!({"template": {}, "clear_parameters": ["b"]})),
            false,
        )
        .expect("ignored on PUT");
        assert!(clear_on_put.clear_parameters.is_empty());

        let renamed = update_stack_request(
            "web",
            "id-1",
            body(json!({"stack_name": "other", "template": {}})),
            false,
        )
        .expect("a stack_name in an update is ignored, as Heat ignores it");
        assert_eq!(renamed.stack, "id-1");
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
        // stack_name is not a validate key: ignored, as Heat ignores it.
        validate_template_request(body(json!({"template": {}, "stack_name": "x"})))
            .expect("ignored");
    }
}
