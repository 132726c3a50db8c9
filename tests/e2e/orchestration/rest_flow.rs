//! A stack's life over REST, the way Heat clients drive it: create with
//! parameters, watch it settle, read resources, outputs and events, change
//! it, run actions, delete it.

use ember_tests::TestEmber;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{HeatRest, assert_heat_time};

#[tokio::test]
async fn a_stack_is_created_read_and_deleted_over_rest() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);

    let created = heat
        .post(
            "/stacks",
            json!({
                "stack_name": "web",
                "template": super::stack_template(),
                "parameters": {"greeting": "hello", "length": 12},
                "tags": "blue,green",
                "timeout_mins": "10",
            }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
    let id = created.body["stack"]["id"].as_str().expect("id").to_owned();
    let canonical = format!("{}/stacks/web/{id}", heat.base);
    assert_eq!(
        created.body["stack"]["links"][0]["href"],
        canonical.as_str()
    );
    assert_eq!(created.body["stack"]["links"][0]["rel"], "self");
    assert_eq!(created.location.as_deref(), Some(canonical.as_str()));

    // Heat's lookups: by name or id, and sub-paths by name, answer 302
    // with an absolute Location (python-heatclient requires both).
    for (path, expected) in [
        ("/stacks/web".to_owned(), canonical.clone()),
        (format!("/stacks/{id}"), canonical.clone()),
        (
            "/stacks/web/resources?nested_depth=1".to_owned(),
            format!("{canonical}/resources?nested_depth=1"),
        ),
        (
            "/stacks/web/events".to_owned(),
            format!("{canonical}/events"),
        ),
    ] {
        let answer = heat.get(&path).await;
        assert_eq!(answer.status, StatusCode::FOUND, "{path}: {answer:?}");
        assert_eq!(
            answer.location.as_deref(),
            Some(expected.as_str()),
            "{path}"
        );
    }

    let stack_path = format!("/stacks/web/{id}");
    let stack = heat.wait_until_settled(&stack_path).await;
    assert_eq!(stack["stack_status"], "CREATE_COMPLETE", "{stack}");
    assert_eq!(stack["stack_name"], "web");
    assert_eq!(stack["parameters"]["greeting"], "hello");
    assert_eq!(stack["tags"], json!(["blue", "green"]));
    assert_eq!(stack["timeout_mins"], 10);
    assert_eq!(stack["template_description"], "end-to-end stack");
    assert_heat_time(&stack["creation_time"]);
    let outputs = stack["outputs"].as_array().expect("outputs");
    let greeting = outputs
        .iter()
        .find(|output| output["output_key"] == "greeting")
        .expect("greeting output");
    assert_eq!(greeting["output_value"], "hello");

    let listed = heat.get("/stacks").await;
    assert_eq!(listed.status, StatusCode::OK);
    assert_eq!(listed.body["stacks"][0]["id"], id.as_str());
    assert_eq!(listed.body["stacks"][0]["stack_status"], "CREATE_COMPLETE");
    let by_name = heat.get("/stacks?stack_name=other").await;
    assert_eq!(by_name.body["stacks"], json!([]));

    // Resources.
    let resources = heat.get(&format!("{stack_path}/resources")).await;
    assert_eq!(resources.status, StatusCode::OK, "{resources:?}");
    let resources = resources.body["resources"]
        .as_array()
        .expect("list")
        .clone();
    let mut names: Vec<&str> = resources
        .iter()
        .map(|resource| resource["resource_name"].as_str().expect("name"))
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["echo", "nothing", "random", "slow"]);
    for resource in &resources {
        assert_eq!(resource["resource_status"], "CREATE_COMPLETE", "{resource}");
        assert_eq!(resource["logical_resource_id"], resource["resource_name"]);
        assert_heat_time(&resource["creation_time"]);
        assert_eq!(resource["links"][1]["href"], canonical.as_str());
    }
    let slow = resources
        .iter()
        .find(|resource| resource["resource_name"] == "slow")
        .expect("slow");
    assert_eq!(slow["required_by"], json!(["echo"]));
    assert_eq!(slow["resource_type"], "OS::Heat::TestResource");
    let filtered = heat
        .get(&format!("{stack_path}/resources?type=OS::Heat::None"))
        .await;
    assert_eq!(filtered.body["resources"].as_array().map(Vec::len), Some(1));
    let unknown_filter = heat
        .get(&format!("{stack_path}/resources?colour=red"))
        .await;
    assert_eq!(unknown_filter.status, StatusCode::BAD_REQUEST);

    let random = heat.get(&format!("{stack_path}/resources/random")).await;
    assert_eq!(random.status, StatusCode::OK, "{random:?}");
    let value = random.body["resource"]["attributes"]["value"]
        .as_str()
        .expect("random value");
    assert_eq!(value.chars().count(), 12);
    let metadata = heat
        .get(&format!("{stack_path}/resources/random/metadata"))
        .await;
    assert_eq!(metadata.status, StatusCode::OK);
    assert!(metadata.body["metadata"].is_object(), "{metadata:?}");
    let absent = heat.get(&format!("{stack_path}/resources/absent")).await;
    assert_eq!(absent.status, StatusCode::NOT_FOUND);

    // Outputs.
    let outputs = heat.get(&format!("{stack_path}/outputs")).await;
    assert_eq!(outputs.status, StatusCode::OK);
    let mut keys: Vec<&str> = outputs.body["outputs"]
        .as_array()
        .expect("outputs")
        .iter()
        .map(|output| output["output_key"].as_str().expect("key"))
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["greeting", "random_value"]);
    let output = heat
        .get(&format!("{stack_path}/outputs/random_value"))
        .await;
    assert_eq!(output.body["output"]["output_value"], value);
    let missing = heat.get(&format!("{stack_path}/outputs/nope")).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    // What the stack was made from.
    let template = heat.get(&format!("{stack_path}/template")).await;
    assert_eq!(template.body["heat_template_version"], "2018-08-31");
    assert!(template.body["resources"]["slow"].is_object());
    let environment = heat.get(&format!("{stack_path}/environment")).await;
    assert_eq!(environment.status, StatusCode::OK);
    assert!(environment.body.is_object());
    let files = heat.get(&format!("{stack_path}/files")).await;
    assert_eq!(files.body, json!({}));

    // Events: oldest first, paged by marker, newest first on request.
    let events = heat.get(&format!("{stack_path}/events")).await;
    assert_eq!(events.status, StatusCode::OK);
    let events = events.body["events"].as_array().expect("events").clone();
    assert!(events.len() >= 10, "stack and 4 resources × 2: {events:?}");
    assert_eq!(events[0]["resource_name"], "web");
    assert_eq!(events[0]["resource_status"], "CREATE_IN_PROGRESS");
    assert_heat_time(&events[0]["event_time"]);
    let last = events.last().expect("last");
    assert_eq!(last["resource_name"], "web");
    assert_eq!(last["resource_status"], "CREATE_COMPLETE");
    let first_page = heat.get(&format!("{stack_path}/events?limit=2")).await;
    let first_page = first_page.body["events"].as_array().expect("page").clone();
    assert_eq!(first_page.len(), 2);
    let marker = first_page[1]["id"].as_str().expect("id");
    let second_page = heat
        .get(&format!("{stack_path}/events?limit=2&marker={marker}"))
        .await;
    assert_eq!(second_page.body["events"][0]["id"], events[2]["id"]);
    let newest = heat
        .get(&format!("{stack_path}/events?limit=1&sort_dir=desc"))
        .await;
    assert_eq!(newest.body["events"][0]["id"], last["id"]);
    let completes = heat
        .get(&format!(
            "{stack_path}/events?resource_status=COMPLETE&resource_action=CREATE"
        ))
        .await;
    let completes = completes.body["events"]
        .as_array()
        .expect("filtered")
        .clone();
    assert_eq!(
        completes.len(),
        5,
        "4 resources and the stack: {completes:?}"
    );

    let slow_events = heat
        .get(&format!("{stack_path}/resources/slow/events"))
        .await;
    let slow_events = slow_events.body["events"].as_array().expect("slow").clone();
    assert_eq!(slow_events.len(), 2, "{slow_events:?}");
    assert!(
        slow_events
            .iter()
            .all(|event| event["resource_name"] == "slow")
    );
    let event_id = slow_events[1]["id"].as_str().expect("id");
    let shown = heat
        .get(&format!("{stack_path}/resources/slow/events/{event_id}"))
        .await;
    assert_eq!(shown.status, StatusCode::OK, "{shown:?}");
    assert_eq!(shown.body["event"]["id"], event_id);
    assert_eq!(
        shown.body["event"]["resource_type"],
        "OS::Heat::TestResource"
    );
    assert_eq!(shown.body["event"]["links"][0]["rel"], "self");

    // Delete: 204, then the stack is gone by name.
    let deleted = heat.call(Method::DELETE, &stack_path, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{deleted:?}");
    assert_eq!(deleted.body, Value::Null);
    heat.wait_until_deleted(&stack_path).await;
    let gone = heat.get("/stacks/web").await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert!(gone.message().contains("web"), "{gone:?}");
    let listed = heat.get("/stacks").await;
    assert_eq!(listed.body["stacks"], json!([]));
    ember.stop().await;
}

#[tokio::test]
async fn a_stack_is_patched_and_taken_through_suspend_resume_and_check_over_rest() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let stack_path = heat
        .create_stack("app", json!({"greeting": "hello", "length": 6}))
        .await;
    let stack = heat.wait_until_settled(&stack_path).await;
    assert_eq!(stack["stack_status"], "CREATE_COMPLETE", "{stack}");
    let random_before = heat
        .get(&format!("{stack_path}/outputs/random_value"))
        .await
        .body["output"]["output_value"]
        .clone();

    // Tags given by a PATCH are the stack's; a PATCH that names none
    // keeps them (a PUT that names none clears them, as Heat's does).
    let tagged = heat
        .call(Method::PATCH, &stack_path, Some(json!({"tags": "a,b"})))
        .await;
    assert_eq!(tagged.status, StatusCode::ACCEPTED, "{tagged:?}");
    let stack = heat.wait_until_settled(&stack_path).await;
    assert_eq!(stack["tags"], json!(["a", "b"]), "{stack}");

    // PATCH keeps the template and the other parameters.
    let patched = heat
        .call(
            Method::PATCH,
            &stack_path,
            Some(json!({"parameters": {"greeting": "bye"}})),
        )
        .await;
    assert_eq!(patched.status, StatusCode::ACCEPTED, "{patched:?}");
    assert_eq!(patched.body, Value::Null, "202 has an empty body");
    let stack = heat.wait_until_settled(&stack_path).await;
    assert_eq!(stack["stack_status"], "UPDATE_COMPLETE", "{stack}");
    assert_eq!(stack["tags"], json!(["a", "b"]), "{stack}");
    assert_heat_time(&stack["updated_time"]);
    let greeting = heat.get(&format!("{stack_path}/outputs/greeting")).await;
    assert_eq!(greeting.body["output"]["output_value"], "bye");
    let random_after = heat
        .get(&format!("{stack_path}/outputs/random_value"))
        .await;
    assert_eq!(
        random_after.body["output"]["output_value"], random_before,
        "an unchanged resource keeps its value"
    );

    // PUT replaces the template: without one it is refused.
    let no_template = heat
        .call(Method::PUT, &stack_path, Some(json!({"parameters": {}})))
        .await;
    assert_eq!(no_template.status, StatusCode::BAD_REQUEST);
    assert!(
        no_template.message().contains("template"),
        "{no_template:?}"
    );

    for (action, settled) in [
        ("suspend", "SUSPEND_COMPLETE"),
        ("resume", "RESUME_COMPLETE"),
        ("check", "CHECK_COMPLETE"),
    ] {
        let answer = heat
            .post(&format!("{stack_path}/actions"), json!({ action: null }))
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{action}: {answer:?}");
        let stack = heat.wait_until_settled(&stack_path).await;
        assert_eq!(stack["stack_status"], settled, "{action}: {stack}");
    }
    // Heat's lookup redirects a POST to actions by name, too.
    let redirected = heat
        .post("/stacks/app/actions", json!({"check": null}))
        .await;
    assert_eq!(redirected.status, StatusCode::FOUND);
    assert_eq!(
        redirected.location,
        Some(format!("{}{stack_path}/actions", heat.base))
    );
    let events = heat
        .get(&format!("{stack_path}/events?sort_dir=desc&limit=1"))
        .await;
    assert_eq!(
        events.body["events"][0]["resource_status"],
        "CHECK_COMPLETE"
    );

    let deleted = heat.call(Method::DELETE, &stack_path, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{deleted:?}");
    heat.wait_until_deleted(&stack_path).await;
    ember.stop().await;
}

#[tokio::test]
async fn preview_validate_resource_types_and_build_info_answer_in_heat_shapes() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);

    let preview = heat
        .post(
            "/stacks/preview",
            json!({"stack_name": "draft", "template": super::stack_template(), "parameters": {"greeting": "hi"}}),
        )
        .await;
    assert_eq!(preview.status, StatusCode::OK, "{preview:?}");
    assert_eq!(preview.body["stack"]["stack_name"], "draft");
    assert_eq!(
        preview.body["stack"]["resources"].as_array().map(Vec::len),
        Some(4)
    );
    // Heat's preview shape: no id yet, pseudo parameters, parameters as
    // text, each resource as it would start with its properties.
    assert_eq!(preview.body["stack"]["id"], "None");
    assert_eq!(preview.body["stack"]["parameters"]["OS::stack_id"], "None");
    assert_eq!(preview.body["stack"]["parameters"]["greeting"], "hi");
    for resource in preview.body["stack"]["resources"]
        .as_array()
        .expect("resources")
    {
        assert_eq!(resource["resource_action"], "INIT", "{resource}");
        assert_eq!(resource["resource_status"], "COMPLETE", "{resource}");
        assert_eq!(resource["physical_resource_id"], "", "{resource}");
        assert_eq!(resource["creation_time"], Value::Null, "{resource}");
        assert_eq!(
            resource["resource_identity"]["path"],
            format!(
                "/resources/{}",
                resource["resource_name"].as_str().unwrap_or_default()
            )
        );
        assert!(resource["properties"].is_object(), "{resource}");
    }
    // Nested stacks are previewed as Heat lists them: their resources, as
    // a list, in place of the resource making them — a template resource
    // (given its properties), and a group's members of that template.
    let inner = "heat_template_version: 2015-04-30\nparameters:\n  value: {type: string}\nresources:\n  nested:\n    type: OS::Heat::Value\n    properties: {value: {get_param: value}}\n";
    let outer = json!({
        "heat_template_version": "2015-04-30",
        "parameters": {"incoming": {"type": "string", "default": "abc"}},
        "resources": {
            "main": {"type": "inner.yaml", "properties": {"value": {"get_param": "incoming"}}},
            "rg": {"type": "OS::Heat::ResourceGroup", "properties": {"count": 2,
                   "resource_def": {"type": "inner.yaml", "properties": {"value": "member"}}}}}});
    let nested = heat
        .post(
            "/stacks/preview",
            json!({"stack_name": "layered", "template": outer, "files": {"inner.yaml": inner}}),
        )
        .await;
    assert_eq!(nested.status, StatusCode::OK, "{nested:?}");
    let resources = nested.body["stack"]["resources"]
        .as_array()
        .expect("resources");
    let main = resources
        .iter()
        .find_map(|item| {
            item.as_array()
                .and_then(|list| list.first())
                .filter(|first| first["parent_resource"] == "main")
        })
        .unwrap_or_else(|| panic!("main's resources: {resources:?}"));
    assert_eq!(main["resource_name"], "nested");
    assert_eq!(main["stack_name"], "layered-main");
    assert_eq!(main["properties"]["value"], "abc");
    assert_eq!(main["resource_identity"]["stack_name"], "layered-main");
    let group = resources
        .iter()
        .filter_map(Value::as_array)
        .find(|list| list.iter().all(Value::is_array))
        .unwrap_or_else(|| panic!("the group's members: {resources:?}"));
    assert_eq!(group.len(), 2, "{group:?}");
    assert_eq!(group[0][0]["resource_name"], "nested");
    assert_eq!(group[0][0]["properties"]["value"], "member");
    assert_eq!(
        heat.get("/stacks").await.body["stacks"],
        json!([]),
        "nothing created"
    );

    let yaml = "heat_template_version: 2018-08-31\ndescription: checked\nparameters:\n  size:\n    type: number\n    default: 3\nresources: {}\n";
    let validated = heat.post("/validate", json!({ "template": yaml })).await;
    assert_eq!(validated.status, StatusCode::OK, "{validated:?}");
    assert_eq!(validated.body["Description"], "checked");
    assert!(
        validated.body["Parameters"]["size"].is_object(),
        "{validated:?}"
    );
    // A value given through the environment, and a template file's
    // parameters with show_nested, as Heat shows them.
    let parent = "heat_template_version: 2018-08-31\nparameters:\n  n:\n    type: number\n    default: 5\nresources:\n  inner:\n    type: inner.yaml\n    properties:\n      size: {get_param: n}\n";
    let nested = heat
        .post(
            "/validate?show_nested=true",
            json!({"template": parent, "files": {"inner.yaml": yaml},
                   "environment": {"parameters": {"n": 7}}}),
        )
        .await;
    assert_eq!(nested.status, StatusCode::OK, "{nested:?}");
    assert_eq!(nested.body["Parameters"]["n"]["Value"], json!(7));
    assert_eq!(
        nested.body["NestedParameters"]["inner"]["Parameters"]["size"]["Value"],
        json!(7),
        "{nested:?}"
    );
    assert_eq!(
        nested.body["Environment"],
        json!({"parameters": {"n": 7}, "parameter_defaults": {}, "event_sinks": [],
               "resource_registry": {"inner.yaml": "inner.yaml", "resources": {}}})
    );
    let bad_version = heat
        .post(
            "/validate",
            json!({"template": yaml.replace("2018-08-31", "invalid")}),
        )
        .await;
    assert_eq!(bad_version.status, StatusCode::BAD_REQUEST);
    assert!(
        bad_version
            .message()
            .contains("The template version is invalid"),
        "{bad_version:?}"
    );
    let invalid = heat
        .post("/validate", json!({"template": {"heat_template_version": "2018-08-31", "resources": {"a": {"type": "OS::No::Such"}}}}))
        .await;
    assert_eq!(invalid.status, StatusCode::BAD_REQUEST, "{invalid:?}");
    assert!(invalid.message().contains("resources.a"), "{invalid:?}");
    // A parameter without a value does not hide an unknown type (Heat
    // reports it either way); without the unknown type the same template
    // validates, its parameter reported without a value.
    let template = |resource_type: &str| {
        json!({"heat_template_version": "2018-08-31",
            "parameters": {"flavor": {"type": "string"}},
            "resources": {"a": {"type": resource_type, "properties": {}}}})
    };
    let invalid = heat
        .post("/validate", json!({"template": template("OS::No::Such")}))
        .await;
    assert_eq!(invalid.status, StatusCode::BAD_REQUEST, "{invalid:?}");
    assert!(
        invalid.message().contains("resources.a.type")
            && invalid.message().contains("OS::No::Such"),
        "{invalid:?}"
    );
    let valid = heat
        .post("/validate", json!({"template": template("OS::Heat::None")}))
        .await;
    assert_eq!(valid.status, StatusCode::OK, "{valid:?}");
    assert!(
        valid.body["Parameters"]["flavor"].get("Value").is_none(),
        "{valid:?}"
    );

    let types = heat.get("/resource_types").await;
    let types = types.body["resource_types"]
        .as_array()
        .expect("types")
        .clone();
    for wanted in [
        "OS::Heat::None",
        "OS::Heat::TestResource",
        "OS::Heat::RandomString",
        "OS::Heat::Value",
    ] {
        assert!(
            types.iter().any(|name| name == wanted),
            "{wanted} in {types:?}"
        );
    }
    let filtered = heat.get("/resource_types?name=Random").await;
    assert_eq!(
        filtered.body["resource_types"],
        json!(["OS::Heat::RandomString"])
    );
    let schema = heat.get("/resource_types/OS::Heat::RandomString").await;
    assert_eq!(schema.status, StatusCode::OK, "{schema:?}");
    assert_eq!(schema.body["resource_type"], "OS::Heat::RandomString");
    assert!(
        schema.body["properties"]["length"].is_object(),
        "{schema:?}"
    );
    assert!(schema.body["attributes"]["value"].is_object(), "{schema:?}");
    let generated = heat
        .get("/resource_types/OS::Heat::RandomString/template?template_type=hot")
        .await;
    // Heat keys the generated resource by its class name.
    assert_eq!(
        generated.body["resources"]["RandomString"]["type"],
        "OS::Heat::RandomString"
    );
    let unknown = heat.get("/resource_types/OS::No::Such").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{unknown:?}");

    let info = heat.get("/build_info").await;
    assert_eq!(info.body["api"]["revision"], env!("CARGO_PKG_VERSION"));
    assert_eq!(info.body["engine"]["revision"], env!("CARGO_PKG_VERSION"));
    ember.stop().await;
}

#[tokio::test]
async fn an_abandoned_stack_is_adopted_back_with_its_resources_over_rest() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let stack_path = heat
        .create_stack("old", json!({"greeting": "kept", "length": 9}))
        .await;
    let stack = heat.wait_until_settled(&stack_path).await;
    assert_eq!(stack["stack_status"], "CREATE_COMPLETE", "{stack}");
    let random_before = heat
        .get(&format!("{stack_path}/resources/random"))
        .await
        .body["resource"]
        .clone();

    let abandoned = heat
        .call(Method::DELETE, &format!("{stack_path}/abandon"), None)
        .await;
    assert_eq!(abandoned.status, StatusCode::OK, "{abandoned:?}");
    let data = abandoned.body;
    assert_eq!(data["name"], "old");
    assert!(
        data["template"]["resources"]["random"].is_object(),
        "{data}"
    );
    assert_eq!(
        data["resources"]["random"]["resource_id"],
        random_before["physical_resource_id"]
    );
    assert_eq!(heat.get("/stacks/old").await.status, StatusCode::NOT_FOUND);

    // Heat clients send the abandon data back as a string or an object;
    // the template, parameters and environment come with it.
    let adopted = heat
        .post(
            "/stacks",
            json!({"stack_name": "new", "adopt_stack_data": data.to_string()}),
        )
        .await;
    assert_eq!(adopted.status, StatusCode::CREATED, "{adopted:?}");
    let id = adopted.body["stack"]["id"].as_str().expect("id");
    let adopted_path = format!("/stacks/new/{id}");
    let stack = heat.wait_until_settled(&adopted_path).await;
    assert_eq!(stack["stack_status"], "ADOPT_COMPLETE", "{stack}");
    assert_eq!(stack["parameters"]["greeting"], "kept");
    let random_after = heat
        .get(&format!("{adopted_path}/resources/random"))
        .await
        .body["resource"]
        .clone();
    assert_eq!(
        random_after["physical_resource_id"],
        random_before["physical_resource_id"]
    );
    assert_eq!(
        random_after["attributes"]["value"], random_before["attributes"]["value"],
        "the adopted resource is the same one"
    );
    ember.stop().await;
}

#[tokio::test]
async fn put_replaces_the_template_and_cancel_update_rolls_back() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let stack_path = heat
        .create_stack("swap", json!({"greeting": "first"}))
        .await;
    heat.wait_until_settled(&stack_path).await;
    let tagged = heat
        .call(Method::PATCH, &stack_path, Some(json!({"tags": "x,y"})))
        .await;
    assert_eq!(tagged.status, StatusCode::ACCEPTED, "{tagged:?}");
    let stack = heat.wait_until_settled(&stack_path).await;
    assert_eq!(stack["tags"], json!(["x", "y"]), "{stack}");

    // PUT: a full new template; resources it leaves out are deleted.
    let mut template = super::stack_template();
    template["resources"]
        .as_object_mut()
        .expect("resources")
        .remove("nothing");
    let put = heat
        .call(
            Method::PUT,
            &stack_path,
            Some(json!({"template": template, "parameters": {"greeting": "second"}})),
        )
        .await;
    assert_eq!(put.status, StatusCode::ACCEPTED, "{put:?}");
    let stack = heat.wait_until_settled(&stack_path).await;
    assert_eq!(stack["stack_status"], "UPDATE_COMPLETE", "{stack}");
    assert_eq!(stack["tags"], Value::Null, "a PUT without tags clears them");
    let resources = heat.get(&format!("{stack_path}/resources")).await;
    let names: Vec<&str> = resources.body["resources"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|resource| resource["resource_name"].as_str())
        .collect();
    assert!(!names.contains(&"nothing"), "{names:?}");
    assert_eq!(names.len(), 3, "{names:?}");

    // A slow update, cancelled while it runs, rolls back to "second".
    template["resources"]["slow"]["properties"]["action_wait_secs"]["update"] = json!(1.5);
    let slow_update = heat
        .call(
            Method::PUT,
            &stack_path,
            Some(json!({"template": template, "parameters": {"greeting": "third"}})),
        )
        .await;
    assert_eq!(slow_update.status, StatusCode::ACCEPTED, "{slow_update:?}");
    let slow_path = format!("{stack_path}/resources/slow");
    let http_wait = std::time::Instant::now() + super::SETTLE;
    while heat.get(&slow_path).await.body["resource"]["resource_status"] != "UPDATE_IN_PROGRESS" {
        assert!(
            std::time::Instant::now() < http_wait,
            "slow never started updating"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let cancelled = heat
        .post(
            &format!("{stack_path}/actions"),
            json!({"cancel_update": null}),
        )
        .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{cancelled:?}");
    let stack = heat.wait_until_settled(&stack_path).await;
    assert_eq!(stack["stack_status"], "ROLLBACK_COMPLETE", "{stack}");
    let greeting = heat.get(&format!("{stack_path}/outputs/greeting")).await;
    assert_eq!(greeting.body["output"]["output_value"], "second");
    ember.stop().await;
}

#[tokio::test]
async fn nested_stacks_show_through_nested_depth_with_canonical_links() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let child = "heat_template_version: 2018-08-31\nresources:\n  inner:\n    type: OS::Heat::Value\n    properties:\n      value: {get_file: data.txt}\noutputs:\n  inner_value:\n    value: {get_attr: [inner, value]}\n";
    let created = heat
        .post(
            "/stacks",
            json!({
                "stack_name": "family",
                "template": {
                    "heat_template_version": "2018-08-31",
                    "resources": {"kid": {"type": "child.yaml"}},
                    "outputs": {"from_kid": {"value": {"get_attr": ["kid", "inner_value"]}}},
                },
                "files": {"child.yaml": child, "data.txt": "nested data"},
            }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
    let id = created.body["stack"]["id"].as_str().expect("id");
    let stack_path = format!("/stacks/family/{id}");
    let stack = heat.wait_until_settled(&stack_path).await;
    assert_eq!(stack["stack_status"], "CREATE_COMPLETE", "{stack}");
    let output = heat.get(&format!("{stack_path}/outputs/from_kid")).await;
    assert_eq!(output.body["output"]["output_value"], "nested data");

    let shallow = heat.get(&format!("{stack_path}/resources")).await;
    assert_eq!(shallow.body["resources"].as_array().map(Vec::len), Some(1));
    let kid = &shallow.body["resources"][0];
    let nested = kid["links"]
        .as_array()
        .expect("links")
        .iter()
        .find(|link| link["rel"] == "nested")
        .expect("a nested link")["href"]
        .as_str()
        .expect("href")
        .to_owned();
    // The link is canonical (name/id): following it needs no redirect.
    let nested_stack = heat.get(&nested).await;
    assert_eq!(
        nested_stack.status,
        StatusCode::OK,
        "{nested}: {nested_stack:?}"
    );
    assert_eq!(nested_stack.body["stack"]["parent"], id);

    let deep = heat
        .get(&format!("{stack_path}/resources?nested_depth=1"))
        .await;
    let deep = deep.body["resources"].as_array().expect("list").clone();
    let inner = deep
        .iter()
        .find(|resource| resource["resource_name"] == "inner")
        .unwrap_or_else(|| panic!("inner in {deep:?}"));
    assert_eq!(inner["parent_resource"], "kid");
    assert_eq!(inner["links"][1]["href"], nested.as_str(), "its stack link");

    let listed = heat.get("/stacks?show_nested=True").await;
    assert_eq!(listed.body["stacks"].as_array().map(Vec::len), Some(2));
    let roots = heat.get("/stacks").await;
    assert_eq!(roots.body["stacks"].as_array().map(Vec::len), Some(1));
    ember.stop().await;
}
