//! Engine messages → Heat's response bodies: stacks, outputs, resources,
//! events, validation and resource type schemas, with Heat's field names,
//! combined `ACTION_STATUS` strings, `2026-01-01T00:00:00Z` timestamps and
//! absolute `links` (python-heatclient follows them and refuses a redirect
//! that does not start with its endpoint).

use ember_proto::engine::v1 as pb;
use serde_json::{Map, Value, json};

use super::protobuf_json::{list_to_json, optional_value_to_json, struct_to_json, struct_to_map};

/// Builds the absolute URLs of one project's Heat API, from the origin
/// (`http://host:port`) the caller reached the gateway at.
#[derive(Debug, Clone)]
pub struct HeatUrls {
    base: String,
}

impl HeatUrls {
    pub fn new(origin: &str, project_id: &str) -> HeatUrls {
        HeatUrls {
            base: format!("{origin}/orchestration/v1/{}", path_segment(project_id)),
        }
    }

    pub fn stacks(&self) -> String {
        format!("{}/stacks", self.base)
    }

    /// One allocation: a list writes one per stack.
    pub fn stack(&self, stack_name: &str, stack_id: &str) -> String {
        let mut url =
            String::with_capacity(self.base.len() + "/stacks//".len() + stack_name.len() + 36);
        url.push_str(&self.base);
        url.push_str("/stacks/");
        push_path_segment(&mut url, stack_name);
        url.push('/');
        push_path_segment(&mut url, stack_id);
        url
    }

    /// The lookup URL of a stack known by id only; it redirects.
    pub fn stack_lookup(&self, stack: &str) -> String {
        format!("{}/{}", self.stacks(), path_segment(stack))
    }

    pub fn resource(&self, stack_name: &str, stack_id: &str, resource_name: &str) -> String {
        format!(
            "{}/resources/{}",
            self.stack(stack_name, stack_id),
            path_segment(resource_name)
        )
    }

    pub fn event(&self, event: &pb::Event) -> String {
        format!(
            "{}/events/{}",
            self.resource(&event.stack_name, &event.stack_id, &event.resource_name),
            path_segment(&event.id)
        )
    }
}

/// Percent-encodes one path segment (resource names may hold anything).
pub fn path_segment(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    push_path_segment(&mut encoded, text);
    encoded
}

/// [`path_segment`], appended to `out`.
fn push_path_segment(out: &mut String, text: &str) {
    let unreserved = |byte: u8| byte.is_ascii_alphanumeric() || b"-._~:@".contains(&byte);
    if text.bytes().all(unreserved) {
        out.push_str(text);
        return;
    }
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for byte in text.bytes() {
        if unreserved(byte) {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xF)]));
        }
    }
}

fn link(href: String, rel: &str) -> Value {
    json!({ "href": href, "rel": rel })
}

/// Heat's timestamp format, or null.
pub fn heat_time(timestamp: Option<&prost_types::Timestamp>) -> Value {
    heat_time_text(timestamp).map_or(Value::Null, Value::String)
}

fn heat_time_text(timestamp: Option<&prost_types::Timestamp>) -> Option<String> {
    HeatTime::of(timestamp).map(|time| time.as_str().to_owned())
}

/// `2026-01-01T00:00:00Z`, written digit by digit into the value itself:
/// a list of 200 stacks writes 400 of them, and formatting each through
/// `format!` was a fifth of the gateway's time on that list.
pub struct HeatTime([u8; 20]);

impl HeatTime {
    /// The time, or `None` for no time or a year outside 0–9999.
    pub fn of(timestamp: Option<&prost_types::Timestamp>) -> Option<HeatTime> {
        use chrono::{Datelike, Timelike};
        let time = chrono::DateTime::from_timestamp(timestamp?.seconds, 0)?;
        let year = u32::try_from(time.year())
            .ok()
            .filter(|year| *year <= 9999)?;
        let mut text = *b"0000-00-00T00:00:00Z";
        let mut put = |at: usize, width: usize, mut value: u32| {
            for position in (at..at + width).rev() {
                // A digit: `value % 10` is below 10.
                text[position] = b'0' + (value % 10) as u8;
                value /= 10;
            }
        };
        put(0, 4, year);
        put(5, 2, time.month());
        put(8, 2, time.day());
        put(11, 2, time.hour());
        put(14, 2, time.minute());
        put(17, 2, time.second());
        Some(HeatTime(text))
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII digits and separators are ever written.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl serde::Serialize for HeatTime {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A stack as Heat lists it, serialized straight from the engine's message
/// (no intermediate JSON tree: a list of 200 stacks spent more time
/// building and dropping trees than anything else in the gateway).
#[derive(serde::Serialize)]
pub struct StackSummary<'a> {
    id: &'a str,
    stack_name: &'a str,
    description: &'a str,
    stack_status: &'a str,
    stack_status_reason: &'a str,
    creation_time: Option<HeatTime>,
    updated_time: Option<HeatTime>,
    /// When a deleted stack was deleted (Heat's clients wait for it after
    /// DELETE_COMPLETE); null for a live one.
    deletion_time: Option<HeatTime>,
    stack_owner: &'a str,
    stack_user_project_id: &'a str,
    parent: Option<&'a str>,
    tags: Option<&'a [String]>,
    timeout_mins: Option<u32>,
    disable_rollback: bool,
    project: &'a str,
    stack_lock: Option<Value>,
    links: [Link<'static>; 1],
}

#[derive(serde::Serialize)]
struct Link<'a> {
    href: String,
    rel: &'a str,
}

impl<'a> StackSummary<'a> {
    pub fn new(urls: &HeatUrls, stack: &'a pb::Stack) -> StackSummary<'a> {
        StackSummary {
            id: &stack.id,
            stack_name: &stack.name,
            description: &stack.description,
            stack_status: &stack.stack_status,
            stack_status_reason: &stack.status_reason,
            creation_time: HeatTime::of(stack.created_at.as_ref()),
            updated_time: HeatTime::of(stack.updated_at.as_ref()),
            deletion_time: HeatTime::of(stack.deleted_at.as_ref()),
            stack_owner: &stack.user_id,
            stack_user_project_id: &stack.project_id,
            parent: Some(stack.parent_id.as_str()).filter(|parent| !parent.is_empty()),
            tags: Some(stack.tags.as_slice()).filter(|tags| !tags.is_empty()),
            timeout_mins: Some(stack.timeout_mins).filter(|minutes| *minutes != 0),
            disable_rollback: stack.disable_rollback,
            project: &stack.project_id,
            stack_lock: stack.stack_lock.as_ref().map(stack_lock),
            links: [Link {
                href: urls.stack(&stack.name, &stack.id),
                rel: "self",
            }],
        }
    }
}

fn null_if_empty(text: &str) -> Value {
    if text.is_empty() {
        Value::Null
    } else {
        Value::String(text.to_owned())
    }
}

/// `{"id", "links"}`: what create answers.
pub fn created_stack(urls: &HeatUrls, stack: &pb::Stack) -> Value {
    json!({
        "id": stack.id,
        "links": [link(urls.stack(&stack.name, &stack.id), "self")],
    })
}

/// A stack as Heat lists it.
pub fn stack_summary(urls: &HeatUrls, stack: &pb::Stack) -> Value {
    serde_json::to_value(StackSummary::new(urls, stack)).unwrap_or(Value::Null)
}

/// Who locked a stack (Ember's addition to Heat's stack view).
pub fn stack_lock(lock: &pb::StackLock) -> Value {
    json!({
        "level": lock.level,
        "locked_by_user": lock.locked_by_user,
        "locked_by_role": lock.locked_by_role,
        "locked_at": heat_time(lock.locked_at.as_ref()),
        "reason": null_if_empty(&lock.reason),
        "expires_at": heat_time(lock.expires_at.as_ref()),
    })
}

/// A stack as Heat shows it: the summary plus parameters and outputs.
pub fn stack_detail(urls: &HeatUrls, stack: &pb::Stack) -> Value {
    let mut view = stack_summary(urls, stack);
    if let Value::Object(fields) = &mut view {
        let parameters: Map<String, Value> = struct_to_map(stack.parameters.as_ref())
            .into_iter()
            .map(|(name, value)| (name, Value::String(parameter_text(&value))))
            .collect();
        fields.insert("parameters".into(), Value::Object(parameters));
        fields.insert(
            "outputs".into(),
            stack.outputs.iter().map(output_detail).collect(),
        );
        fields.insert(
            "template_description".into(),
            Value::String(stack.template_description.clone()),
        );
        fields.insert("capabilities".into(), json!([]));
        fields.insert("notification_topics".into(), json!([]));
        fields.insert(
            "parent_resource".into(),
            null_if_empty(&stack.parent_resource),
        );
    }
    view
}

/// A preview as Heat answers it: the stack as it would be (no id yet:
/// Heat's `"None"`), its parameters with the pseudo ones, and each resource
/// as it would start (`INIT COMPLETE`, nothing made, no times), with its
/// properties and the identities Heat gives it.
pub fn stack_preview(urls: &HeatUrls, preview: &pb::StackPreview) -> Value {
    let stack = preview.stack.clone().unwrap_or_default();
    let mut view = stack_detail(urls, &stack);
    let resources = preview_resources(urls, preview, None);
    if let Value::Object(fields) = &mut view {
        fields.insert("id".into(), json!(NO_ID));
        fields.insert("stack_status".into(), json!("INIT_COMPLETE"));
        if stack.template_description.is_empty() {
            fields.insert("template_description".into(), json!("No description"));
            fields.insert("description".into(), json!("No description"));
        }
        if let Some(Value::Object(parameters)) = fields.get_mut("parameters") {
            parameters.insert("OS::stack_id".into(), json!(NO_ID));
            parameters.insert("OS::stack_name".into(), json!(stack.name));
            parameters.insert("OS::project_id".into(), json!(stack.project_id));
        }
        fields.insert("resources".into(), Value::Array(resources));
    }
    view
}

/// Heat's "None" for the ids of what a preview has not made.
const NO_ID: &str = "None";

/// The resources of one stack of a preview, as Heat lists them: a nested
/// stack's resources, as a list, in place of the resource that makes it;
/// `parent` the resource of the stack above, for a nested stack's.
fn preview_resources(
    urls: &HeatUrls,
    preview: &pb::StackPreview,
    parent: Option<&str>,
) -> Vec<Value> {
    let stack = preview.stack.clone().unwrap_or_default();
    let identity = |path: String| {
        json!({
            "stack_name": stack.name,
            "stack_id": NO_ID,
            "tenant": stack.project_id,
            "path": path,
        })
    };
    preview
        .resources
        .iter()
        .map(|resource| {
            if let Some(nested) = preview.nested.get(&resource.resource_name) {
                return Value::Array(preview_resources(
                    urls,
                    nested,
                    Some(&resource.resource_name),
                ));
            }
            let mut shown = resource_view(urls, resource, true);
            if let Value::Object(fields) = &mut shown {
                fields.remove("links");
                fields.insert("resource_action".into(), json!("INIT"));
                fields.insert("resource_status".into(), json!("COMPLETE"));
                fields.insert("creation_time".into(), Value::Null);
                fields.insert("updated_time".into(), Value::Null);
                fields.insert("stack_name".into(), json!(stack.name));
                fields.insert(
                    "resource_identity".into(),
                    identity(format!("/resources/{}", resource.resource_name)),
                );
                fields.insert("stack_identity".into(), identity(String::new()));
                fields.insert(
                    "properties".into(),
                    struct_to_json(resource.properties.as_ref()),
                );
                fields.insert(
                    "metadata".into(),
                    struct_to_json(resource.metadata.as_ref()),
                );
                if let Some(parent) = parent {
                    fields.insert("parent_resource".into(), json!(parent));
                }
            }
            shown
        })
        .collect()
}

/// A parameter's value as Heat shows it in a stack: always text — a number
/// as written, a boolean `True`/`False` (Python's), a list joined with
/// commas, a map as JSON (Python's spacing).
fn parameter_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Null => String::new(),
        Value::Number(number) => number.to_string(),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(text) => text.clone(),
                other => python_json(other),
            })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => python_json(value),
    }
}

/// JSON as Python's `json.dumps` writes it (`", "` and `": "`).
fn python_json(value: &Value) -> String {
    match value {
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(python_json).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(key, item)| format!("{}: {}", Value::String(key.clone()), python_json(item)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// An output in `GET …/outputs`: key and description only.
pub fn output_summary(output: &pb::Output) -> Value {
    json!({ "output_key": output.output_key, "description": output.description })
}

/// An output with its value, and its error when it could not be resolved.
pub fn output_detail(output: &pb::Output) -> Value {
    let mut view = json!({
        "output_key": output.output_key,
        "description": output.description,
        "output_value": optional_value_to_json(output.output_value.as_ref()),
    });
    if !output.output_error.is_empty()
        && let Value::Object(fields) = &mut view
    {
        fields.insert("output_error".into(), json!(output.output_error));
    }
    view
}

/// A resource as Heat lists it (`detail` adds attributes and description).
/// `nested_stack_name` makes the `nested` link canonical when known.
pub fn resource_view(urls: &HeatUrls, resource: &pb::Resource, detail: bool) -> Value {
    let mut links = vec![
        link(
            urls.resource(
                &resource.stack_name,
                &resource.stack_id,
                &resource.resource_name,
            ),
            "self",
        ),
        link(
            urls.stack(&resource.stack_name, &resource.stack_id),
            "stack",
        ),
    ];
    if !resource.nested_stack_id.is_empty() {
        // The engine names the nested stack when it knows it; else the
        // link is the id-only (redirecting) form.
        let href = if resource.nested_stack_name.is_empty() {
            urls.stack_lookup(&resource.nested_stack_id)
        } else {
            urls.stack(&resource.nested_stack_name, &resource.nested_stack_id)
        };
        links.push(link(href, "nested"));
    }
    // Heat shows a resource never updated with its creation time.
    let updated = resource
        .updated_at
        .as_ref()
        .or(resource.created_at.as_ref());
    let mut view = Map::new();
    view.insert("resource_name".into(), json!(resource.resource_name));
    view.insert("logical_resource_id".into(), json!(resource.resource_name));
    view.insert(
        "physical_resource_id".into(),
        json!(resource.physical_resource_id),
    );
    view.insert("resource_type".into(), json!(resource.resource_type));
    view.insert("resource_status".into(), json!(resource.resource_status));
    view.insert(
        "resource_status_reason".into(),
        json!(resource.resource_status_reason),
    );
    view.insert(
        "creation_time".into(),
        heat_time(resource.created_at.as_ref()),
    );
    view.insert("updated_time".into(), heat_time(updated));
    view.insert("required_by".into(), json!(resource.required_by));
    view.insert("links".into(), Value::Array(links));
    if !resource.parent_resource.is_empty() {
        view.insert("parent_resource".into(), json!(resource.parent_resource));
    }
    if detail {
        view.insert(
            "attributes".into(),
            struct_to_json(resource.attributes.as_ref()),
        );
        // The engine's Resource has no description yet.
        view.insert("description".into(), json!(""));
    }
    Value::Object(view)
}

/// An event as Heat lists it (`detail` adds the resource type).
pub fn event_view(urls: &HeatUrls, event: &pb::Event, detail: bool) -> Value {
    let mut view = json!({
        "id": event.id,
        "event_time": heat_time(event.created_at.as_ref()),
        "resource_name": event.resource_name,
        "logical_resource_id": event.resource_name,
        "physical_resource_id": event.physical_resource_id,
        "resource_status": event.resource_status,
        "resource_status_reason": event.resource_status_reason,
        "links": [
            link(urls.event(event), "self"),
            link(urls.resource(&event.stack_name, &event.stack_id, &event.resource_name), "resource"),
            link(urls.stack(&event.stack_name, &event.stack_id), "stack"),
        ],
    });
    if detail && let Value::Object(fields) = &mut view {
        fields.insert("resource_type".into(), json!(event.resource_type));
    }
    view
}

/// Heat's validate answer; `ParameterGroups` and `NestedParameters` only
/// when there are some.
pub fn validation(response: &pb::ValidateTemplateResponse) -> Value {
    let mut view = Map::new();
    view.insert("Description".into(), json!(response.description));
    view.insert(
        "Parameters".into(),
        struct_to_json(response.parameters.as_ref()),
    );
    let groups = list_to_json(response.parameter_groups.as_ref());
    if groups.as_array().is_some_and(|groups| !groups.is_empty()) {
        view.insert("ParameterGroups".into(), groups);
    }
    let nested = struct_to_json(response.nested_parameters.as_ref());
    if nested.as_object().is_some_and(|nested| !nested.is_empty()) {
        view.insert("NestedParameters".into(), nested);
    }
    view.insert(
        "Environment".into(),
        struct_to_json(response.environment.as_ref()),
    );
    Value::Object(view)
}

/// Heat's resource type schema.
pub fn resource_type_schema(schema: &pb::ResourceTypeSchema) -> Value {
    json!({
        "resource_type": schema.resource_type,
        "properties": struct_to_json(schema.properties.as_ref()),
        "attributes": struct_to_json(schema.attributes.as_ref()),
        "support_status": {
            "status": "SUPPORTED",
            "version": null,
            "message": null,
            "previous_status": null,
        },
        "description": schema.description,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heat_times_are_written_as_strftime_would() {
        for seconds in [
            0,
            59,
            951_782_400,
            1_795_646_363,
            4_102_444_799,
            253_402_300_799,
        ] {
            let expected = chrono::DateTime::from_timestamp(seconds, 0)
                .map(|time| time.format("%Y-%m-%dT%H:%M:%SZ").to_string());
            let written = heat_time_text(Some(&prost_types::Timestamp { seconds, nanos: 0 }));
            assert_eq!(written, expected, "{seconds}");
        }
        assert_eq!(heat_time(None), Value::Null);
        // Beyond year 9999 Heat's format has no room: null, not garbage.
        let far = prost_types::Timestamp {
            seconds: 253_402_300_800,
            nanos: 0,
        };
        assert_eq!(heat_time_text(Some(&far)), None);
    }

    #[test]
    fn path_segments_are_encoded_only_where_needed() {
        assert_eq!(path_segment("web-1.a_b~c:d@e"), "web-1.a_b~c:d@e");
        assert_eq!(path_segment("a b/c%"), "a%20b%2Fc%25");
        assert_eq!(path_segment("é"), "%C3%A9");
    }

    fn timestamp() -> Option<prost_types::Timestamp> {
        Some(prost_types::Timestamp {
            seconds: 1_767_225_600,
            nanos: 5,
        })
    }

    #[test]
    fn links_are_absolute_and_names_are_encoded() {
        let urls = HeatUrls::new("http://127.0.0.1:8004", "demo");
        assert_eq!(
            urls.stack("web", "abc"),
            "http://127.0.0.1:8004/orchestration/v1/demo/stacks/web/abc"
        );
        assert_eq!(
            urls.resource("web", "abc", "my server/1"),
            "http://127.0.0.1:8004/orchestration/v1/demo/stacks/web/abc/resources/my%20server%2F1"
        );
    }

    #[test]
    fn times_are_in_heat_format() {
        assert_eq!(heat_time(timestamp().as_ref()), "2026-01-01T00:00:00Z");
        assert_eq!(heat_time(None), Value::Null);
    }

    #[test]
    fn a_stack_detail_has_heats_fields() {
        let urls = HeatUrls::new("http://h", "demo");
        let stack = pb::Stack {
            id: "id-1".into(),
            name: "web".into(),
            stack_status: "CREATE_COMPLETE".into(),
            created_at: timestamp(),
            outputs: vec![pb::Output {
                output_key: "out".into(),
                output_error: "boom".into(),
                ..pb::Output::default()
            }],
            ..pb::Stack::default()
        };
        let view = stack_detail(&urls, &stack);
        for field in [
            "id",
            "stack_name",
            "stack_status",
            "stack_status_reason",
            "creation_time",
            "updated_time",
            "parameters",
            "outputs",
            "template_description",
            "timeout_mins",
            "disable_rollback",
            "tags",
            "parent",
            "links",
        ] {
            assert!(view.get(field).is_some(), "{field} missing from {view}");
        }
        assert_eq!(view["creation_time"], "2026-01-01T00:00:00Z");
        assert_eq!(view["updated_time"], Value::Null);
        assert_eq!(view["outputs"][0]["output_error"], "boom");
        assert_eq!(
            view["links"][0]["href"],
            "http://h/orchestration/v1/demo/stacks/web/id-1"
        );
    }

    #[test]
    fn a_resource_shows_its_links_and_creation_time_when_never_updated() {
        let urls = HeatUrls::new("http://h", "demo");
        let resource = pb::Resource {
            resource_name: "inner".into(),
            stack_name: "web".into(),
            stack_id: "id-1".into(),
            nested_stack_id: "id-2".into(),
            created_at: timestamp(),
            required_by: vec!["other".into()],
            ..pb::Resource::default()
        };
        let view = resource_view(
            &urls,
            &pb::Resource {
                nested_stack_name: "web-inner-x".into(),
                ..resource.clone()
            },
            false,
        );
        assert_eq!(view["logical_resource_id"], "inner");
        assert_eq!(view["updated_time"], "2026-01-01T00:00:00Z");
        assert_eq!(view["required_by"], json!(["other"]));
        assert_eq!(
            view["links"][2]["href"],
            "http://h/orchestration/v1/demo/stacks/web-inner-x/id-2"
        );
        assert!(view.get("attributes").is_none());
        assert!(view.get("parent_resource").is_none());
        let detail = resource_view(&urls, &resource, true);
        assert_eq!(detail["attributes"], json!({}));
        assert_eq!(
            detail["links"][2]["href"],
            "http://h/orchestration/v1/demo/stacks/id-2"
        );
    }

    #[test]
    fn validation_omits_empty_parameter_groups_as_heat_does() {
        let empty = validation(&pb::ValidateTemplateResponse {
            description: "d".into(),
            ..pb::ValidateTemplateResponse::default()
        });
        assert_eq!(
            empty,
            json!({"Description": "d", "Parameters": {}, "Environment": {}})
        );
        let grouped = validation(&pb::ValidateTemplateResponse {
            parameter_groups: Some(prost_types::ListValue {
                values: vec![super::super::protobuf_json::json_to_value(
                    json!({"label": "g"}),
                )],
            }),
            ..pb::ValidateTemplateResponse::default()
        });
        assert_eq!(grouped["ParameterGroups"], json!([{"label": "g"}]));
    }

    #[test]
    fn parameters_show_as_heat_shows_them_as_text() {
        for (value, text) in [
            (json!("a"), "a"),
            (json!(10), "10"),
            (json!(1.5), "1.5"),
            (json!(true), "True"),
            (json!(["a", "b"]), "a,b"),
            (json!({"k": [1, {"n": null}]}), r#"{"k": [1, {"n": null}]}"#),
        ] {
            assert_eq!(parameter_text(&value), text, "{value}");
        }
    }
}
