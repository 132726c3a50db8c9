//! Heat-native resources templates lean on (issue 16): `OS::Heat::Delay`
//! holding its place in the graph, and `OS::Heat::ResourceChain` creating
//! its members in order with their references and attributes.

use std::time::{Duration, Instant};

use ember_tests::TestEmber;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::HeatRest;

async fn create(heat: &HeatRest, name: &str, template: Value) -> String {
    let answer = heat
        .post("/stacks", json!({"stack_name": name, "template": template}))
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    format!(
        "/stacks/{name}/{}",
        answer.body["stack"]["id"].as_str().expect("id")
    )
}

async fn output(heat: &HeatRest, stack: &str, key: &str) -> Value {
    heat.get(&format!("{stack}/outputs/{key}")).await.body["output"]["output_value"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delay_holds_its_place_and_a_chain_creates_its_members_in_order() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let started = Instant::now();
    let stack = create(
        &heat,
        "paced",
        json!({
            "heat_template_version": "2021-04-16",
            "resources": {
                "first": {"type": "OS::Heat::None"},
                "pause": {
                    "type": "OS::Heat::Delay",
                    "properties": {"min_wait": 0.4, "max_jitter": 0.1, "actions": ["CREATE"]},
                    "depends_on": "first",
                },
                "chain": {
                    "type": "OS::Heat::ResourceChain",
                    "depends_on": "pause",
                    "properties": {
                        "resources": ["OS::Heat::TestResource", "OS::Heat::TestResource",
                                      "OS::Heat::TestResource"],
                        "resource_properties": {"value": "link"},
                    },
                },
            },
            "outputs": {
                "refs": {"value": {"get_attr": ["chain", "refs"]}},
                "outputs": {"value": {"get_attr": ["chain", "attributes", "output"]}},
                "second": {"value": {"get_attr": ["chain", "resource.1.output"]}},
            },
        }),
    )
    .await;
    let done = heat.wait_until_settled(&stack).await;
    assert_eq!(done["stack_status"], "CREATE_COMPLETE", "{done}");
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "the delay held the create for min_wait"
    );
    let refs = output(&heat, &stack, "refs").await;
    assert_eq!(refs.as_array().map(Vec::len), Some(3), "{refs}");
    assert_eq!(
        output(&heat, &stack, "outputs").await,
        json!({"0": "link", "1": "link", "2": "link"})
    );
    assert_eq!(output(&heat, &stack, "second").await, "link");

    // The members are a nested stack whose resources were created in
    // order: each one's create started after the previous one completed.
    let nested = heat.get(&format!("{stack}/resources?nested_depth=1")).await;
    let members: Vec<&Value> = nested.body["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter(|resource| resource["resource_type"] == "OS::Heat::TestResource")
        .collect();
    assert_eq!(members.len(), 3, "{nested:?}");
    let chain_id = members[0]["stack_identity"]["stack_id"]
        .as_str()
        .or_else(|| {
            members[0]["links"]
                .as_array()
                .and_then(|links| links.iter().find(|link| link["rel"] == "stack"))
                .and_then(|link| link["href"].as_str())
                .and_then(|href| href.rsplit('/').next())
        })
        .expect("the members' stack")
        .to_owned();
    let events = heat
        .get(&format!(
            "{stack}/events?nested_depth=1&sort_dir=asc&limit=200"
        ))
        .await;
    let order: Vec<String> = events.body["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|event| event["resource_status"] == "CREATE_COMPLETE")
        .filter(|event| {
            event["links"].as_array().is_some_and(|links| {
                links.iter().any(|link| {
                    link["href"]
                        .as_str()
                        .is_some_and(|href| href.contains(&chain_id))
                })
            })
        })
        .filter_map(|event| event["resource_name"].as_str().map(str::to_owned))
        .filter(|name| name.parse::<u32>().is_ok())
        .collect();
    assert_eq!(order, ["0", "1", "2"], "{events:?}");
    ember.stop().await;
}

#[tokio::test]
async fn bad_delay_and_chain_properties_are_refused() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    // Values written out are checked before anything runs (as Heat
    // validates a stack), by /validate too.
    for (resources, expected) in [
        (
            json!({"d": {"type": "OS::Heat::Delay", "properties": {"actions": ["REBOOT"]}}}),
            "resources.d.properties.actions: \"REBOOT\" is not one of",
        ),
        (
            json!({"d": {"type": "OS::Heat::Delay", "properties": {"min_wait": -1}}}),
            "resources.d.properties.min_wait",
        ),
        (
            json!({"c": {"type": "OS::Heat::ResourceChain", "properties": {}}}),
            "resources.c.properties.resources: property is required",
        ),
        (
            json!({"w": {"type": "OS::Heat::WaitCondition",
                "properties": {"handle": "h", "timeout": 50000}}}),
            "resources.w.properties.timeout",
        ),
    ] {
        for path in ["/stacks", "/validate"] {
            let answer = heat
                .post(
                    path,
                    json!({"stack_name": "refused", "template": {"heat_template_version": "2021-04-16", "resources": resources}}),
                )
                .await;
            assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{path}: {answer:?}");
            assert!(answer.message().contains(expected), "{path}: {answer:?}");
        }
    }
    // A value from a parameter is checked once it resolves.
    let stack = create(
        &heat,
        "late",
        json!({"heat_template_version": "2021-04-16",
            "parameters": {"wait": {"type": "number", "default": -1}},
            "resources": {"d": {"type": "OS::Heat::Delay",
                "properties": {"min_wait": {"get_param": "wait"}}}}}),
    )
    .await;
    let failed = heat.wait_until_settled(&stack).await;
    assert_eq!(failed["stack_status"], "CREATE_FAILED", "{failed}");
    assert!(
        failed["stack_status_reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("min_wait")),
        "{failed}"
    );
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_gives_the_abandon_data_and_the_stack_stays() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let stack = create(
        &heat,
        "exported",
        json!({
            "heat_template_version": "2021-04-16",
            "resources": {"word": {"type": "OS::Heat::RandomString", "properties": {"length": 12}}},
            "outputs": {"word": {"value": {"get_attr": ["word", "value"]}}},
        }),
    )
    .await;
    heat.wait_until_settled(&stack).await;
    let word = output(&heat, &stack, "word").await;
    let exported = heat.get(&format!("{stack}/export")).await;
    assert_eq!(exported.status, StatusCode::OK, "{exported:?}");
    let data = &exported.body;
    assert_eq!(data["name"], "exported");
    assert_eq!(data["status"], "COMPLETE");
    assert_eq!(
        data["template"]["resources"]["word"]["type"],
        "OS::Heat::RandomString"
    );
    let resource = &data["resources"]["word"];
    assert_eq!(resource["type"], "OS::Heat::RandomString");
    assert!(resource["resource_id"].is_string(), "{resource}");
    assert_eq!(resource["attributes"]["value"], word, "{resource}");
    // The stack is still there, unchanged.
    let shown = heat.get(&stack).await;
    assert_eq!(shown.status, StatusCode::OK);
    assert_eq!(shown.body["stack"]["stack_status"], "CREATE_COMPLETE");
    // Another project cannot export it; an unknown stack is 404.
    let other = HeatRest::new(&ember, "other", Some(&ember.outsider_token()));
    let id = stack.rsplit('/').next().expect("id");
    let refused = other.get(&format!("/stacks/exported/{id}/export")).await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND, "{refused:?}");
    let missing = heat
        .get("/stacks/missing/01a20000-0000-7000-8000-000000000000/export")
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_resource_is_adopted_never_changed_and_left_in_place() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    // An instance made outside the stack.
    let made = ember
        .http
        .post(ember.url("/compute/v1/instances"))
        .header("X-Auth-Token", ember.member_token())
        .json(&json!({"instance": {"name": "outside", "flavor": "m1.small", "image": "debian-12"}}))
        .send()
        .await
        .expect("request");
    assert_eq!(made.status(), StatusCode::ACCEPTED);
    let uuid = made.json::<Value>().await.expect("json")["instance"]["uuid"]
        .as_str()
        .expect("uuid")
        .to_owned();
    let template = |external: &str| {
        json!({
            "heat_template_version": "2021-04-16",
            "parameters": {"server": {"type": "string", "default": external}},
            "resources": {
                "server": {"type": "OS::Nova::Server", "external_id": {"get_param": "server"},
                           "properties": {"flavor": "m1.small", "image": "debian-12"}},
                "note": {"type": "OS::Heat::Value", "properties": {"value": {"get_resource": "server"}}},
            },
            "outputs": {"server": {"value": {"get_resource": "server"}},
                        "name": {"value": {"get_attr": ["server", "name"]}}},
        })
    };
    let stack = create(&heat, "adopter", template(&uuid)).await;
    let settled = heat.wait_until_settled(&stack).await;
    assert_eq!(settled["stack_status"], "CREATE_COMPLETE", "{settled}");
    let server = heat.get(&format!("{stack}/resources/server")).await;
    assert_eq!(
        server.body["resource"]["resource_status"], "ADOPT_COMPLETE",
        "{server:?}"
    );
    assert_eq!(
        server.body["resource"]["physical_resource_id"],
        uuid.as_str()
    );
    assert_eq!(output(&heat, &stack, "server").await, uuid.as_str());
    // The adopted server is read like a made one: get_attr has its name.
    assert_eq!(output(&heat, &stack, "name").await, "outside");

    // Another project's stack cannot adopt it (nor a nested stack be
    // adopted): not found, as an id nobody made.
    let other = HeatRest::new(&ember, "other", Some(&ember.outsider_token()));
    let stolen = create(&other, "thief", template(&uuid)).await;
    let settled = other.wait_until_settled(&stolen).await;
    assert_eq!(settled["stack_status"], "CREATE_FAILED", "{settled}");
    let reason = settled["stack_status_reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!(
            "resources.server.external_id: no instance {uuid} in this project"
        )),
        "{settled}"
    );
    let thief = other.get(&format!("{stolen}/resources/server")).await;
    assert_eq!(
        thief.body["resource"]["resource_status"], "ADOPT_FAILED",
        "{thief:?}"
    );
    let nested = create(
        &heat,
        "nested-adopter",
        json!({
            "heat_template_version": "2021-04-16",
            "resources": {"group": {"type": "OS::Heat::ResourceGroup",
                                    "external_id": stack.rsplit('/').next().expect("id"),
                                    "properties": {"resource_def": {"type": "OS::Heat::None"}}}},
        }),
    )
    .await;
    let settled = heat.wait_until_settled(&nested).await;
    assert_eq!(settled["stack_status"], "CREATE_FAILED", "{settled}");
    assert!(
        settled["stack_status_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("cannot adopt an existing stack"),
        "{settled}"
    );

    // Its id cannot change.
    let changed = heat
        .call(
            reqwest::Method::PUT,
            &stack,
            Some(json!({"template": template("another-one")})),
        )
        .await;
    assert_eq!(changed.status, StatusCode::ACCEPTED, "{changed:?}");
    let settled = heat.wait_until_settled(&stack).await;
    assert_eq!(settled["stack_status"], "UPDATE_FAILED", "{settled}");
    assert!(
        settled["stack_status_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("external_id: an external resource's id cannot be updated"),
        "{settled}"
    );
    // A bad id is refused by name.
    let bad = create(
        &heat,
        "bad-external",
        json!({
            "heat_template_version": "2021-04-16",
            "resources": {"n": {"type": "OS::Heat::None", "external_id": {"list_join": [",", []]}}},
        }),
    )
    .await;
    let settled = heat.wait_until_settled(&bad).await;
    assert_eq!(settled["stack_status"], "CREATE_FAILED", "{settled}");
    assert!(
        settled["stack_status_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("external_id"),
        "{settled}"
    );

    // Deleting the stack leaves the instance where it was.
    let deleted = heat.call(reqwest::Method::DELETE, &stack, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{deleted:?}");
    heat.wait_until_deleted(&stack).await;
    let still = ember
        .http
        .get(ember.url(&format!("/compute/v1/instances/{uuid}")))
        .header("X-Auth-Token", ember.member_token())
        .send()
        .await
        .expect("request");
    assert_eq!(
        still.status(),
        StatusCode::OK,
        "the external instance stays"
    );
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_group_launches_servers_from_its_launch_configuration_and_resizes() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let template = |size: u64| {
        json!({
            "heat_template_version": "2021-04-16",
            "resources": {
                "launch": {"type": "AWS::AutoScaling::LaunchConfiguration",
                           "properties": {"ImageId": "debian-12", "InstanceType": "m1.small",
                                          "UserData": "#!/bin/sh\necho hi"}},
                "group": {"type": "OS::Heat::InstanceGroup",
                          "properties": {"AvailabilityZones": ["nova"], "Size": size,
                                         "LaunchConfigurationName": {"get_resource": "launch"},
                                         "Tags": [{"Key": "team", "Value": "web"}]}},
            },
            "outputs": {"list": {"value": {"get_attr": ["group", "InstanceList"]}}},
        })
    };
    let stack = create(&heat, "launched", template(2)).await;
    let settled = heat.wait_until_settled(&stack).await;
    assert_eq!(settled["stack_status"], "CREATE_COMPLETE", "{settled}");
    let servers: Vec<String> = output(&heat, &stack, "list")
        .await
        .as_str()
        .expect("a list")
        .split(',')
        .map(str::to_owned)
        .collect();
    assert_eq!(servers.len(), 2, "{servers:?}");
    // Each is a real instance, made from the launch configuration.
    for server in &servers {
        let instance = ember
            .http
            .get(ember.url(&format!("/compute/v1/instances/{server}")))
            .header("X-Auth-Token", ember.member_token())
            .send()
            .await
            .expect("request");
        assert_eq!(instance.status(), StatusCode::OK);
        let instance = instance.json::<Value>().await.expect("json");
        assert_eq!(instance["instance"]["flavor"], "m1.small", "{instance}");
        assert_eq!(instance["instance"]["image"], "debian-12", "{instance}");
        assert_eq!(
            instance["instance"]["metadata"]["team"], "web",
            "{instance}"
        );
    }
    // Resized by an update.
    let updated = heat
        .call(
            reqwest::Method::PUT,
            &stack,
            Some(json!({"template": template(3)})),
        )
        .await;
    assert_eq!(updated.status, StatusCode::ACCEPTED, "{updated:?}");
    let settled = heat.wait_until_settled(&stack).await;
    assert_eq!(settled["stack_status"], "UPDATE_COMPLETE", "{settled}");
    let list = output(&heat, &stack, "list").await;
    assert_eq!(
        list.as_str().map(|list| list.split(',').count()),
        Some(3),
        "{list}"
    );
    // A group naming something that is not a launch configuration fails by name.
    let bad = create(&heat, "unlaunched", json!({
        "heat_template_version": "2021-04-16",
        "resources": {"group": {"type": "OS::Heat::InstanceGroup",
            "properties": {"AvailabilityZones": ["nova"], "Size": 1, "LaunchConfigurationName": "nothing"}}},
    }))
    .await;
    let failed = heat.wait_until_settled(&bad).await;
    assert_eq!(failed["stack_status"], "CREATE_FAILED", "{failed}");
    assert!(
        failed["stack_status_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("LaunchConfiguration"),
        "{failed}"
    );
    ember.stop().await;
}

/// A stack that cannot finish is deleted by its owner at once over REST,
/// as Heat deletes a stack in progress (the create is stopped first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_that_cannot_finish_is_deleted_at_once() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let stack = create(
        &heat,
        "endless",
        json!({
            "heat_template_version": "2021-04-16",
            "resources": {"forever": {"type": "OS::Heat::Delay",
                                      "properties": {"min_wait": 1_000_000}}},
        }),
    )
    .await;
    let shown = heat.get(&stack).await;
    assert_eq!(shown.body["stack"]["stack_status"], "CREATE_IN_PROGRESS");
    // Another project cannot stop it: not found.
    let other = HeatRest::new(&ember, "other", Some(&ember.outsider_token()));
    let refused = other.call(reqwest::Method::DELETE, &stack, None).await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND, "{refused:?}");
    let deleted = heat.call(reqwest::Method::DELETE, &stack, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{deleted:?}");
    heat.wait_until_deleted(&stack).await;
    ember.stop().await;
}

/// `OS::Heat::Stack` with a `context` (Heat's remote stack): Ember's own
/// region makes the stack here, readable by its id; another region, or a
/// remote template that is not one, refuses the create at once (400) in
/// Heat's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_stack_in_embers_own_region_is_made_and_others_are_refused() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let remote = "heat_template_version: 2013-05-23\nresources:\n  random1:\n    type: OS::Heat::RandomString\noutputs:\n  remote_key:\n    value: {get_attr: [random1, value]}\n";
    let template = |region: &str| {
        json!({
            "heat_template_version": "2013-05-23",
            "resources": {"my_stack": {"type": "OS::Heat::Stack", "properties": {
                "context": {"region_name": region},
                "template": {"get_file": "remote_stack.yaml"}}}},
            "outputs": {"key": {"value": {"get_attr": ["my_stack", "outputs"]}}},
        })
    };
    let create = |name: &str, template: Value, remote: &str| {
        json!({"stack_name": name, "template": template,
               "files": {"remote_stack.yaml": remote}})
    };
    let made = heat
        .post("/stacks", create("remote", template("RegionOne"), remote))
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{made:?}");
    let stack = format!(
        "/stacks/remote/{}",
        made.body["stack"]["id"].as_str().expect("id")
    );
    let settled = heat.wait_until_settled(&stack).await;
    assert_eq!(settled["stack_status"], "CREATE_COMPLETE", "{settled}");
    let key = output(&heat, &stack, "key").await;
    let word = key["remote_key"].as_str().unwrap_or_default().to_owned();
    assert_eq!(word.len(), 32, "{key}");
    let resource = heat.get(&format!("{stack}/resources/my_stack")).await;
    let remote_id = resource.body["resource"]["physical_resource_id"]
        .as_str()
        .expect("the remote stack's id")
        .to_owned();
    // Found by its id alone, as heatclient finds Heat's remote stack.
    let found = heat.get(&format!("/stacks/{remote_id}")).await;
    assert_eq!(found.status, StatusCode::FOUND, "{found:?}");
    let location = found.location.clone().unwrap_or_default();
    let path = &location[location.find("/stacks/").expect("a stack URL")..];
    assert!(path.ends_with(&remote_id), "{location}");
    let shown = heat.get(path).await;
    assert_eq!(shown.status, StatusCode::OK, "{shown:?}");
    let remote_output = shown.body["stack"]["outputs"]
        .as_array()
        .and_then(|outputs| {
            outputs
                .iter()
                .find(|output| output["output_key"] == "remote_key")
        })
        .map(|output| output["output_value"].clone());
    assert_eq!(remote_output, Some(json!(word)), "{shown:?}");

    let bad_region = heat
        .post("/stacks", create("darkhole", template("DARKHOLE"), remote))
        .await;
    assert_eq!(bad_region.status, StatusCode::BAD_REQUEST, "{bad_region:?}");
    assert_eq!(
        bad_region.body["error"]["message"],
        "Cannot establish connection to Heat endpoint at region \"DARKHOLE\" due to \"publicURL endpoint for orchestration service in DARKHOLE region not found\""
    );
    let bad_template = heat
        .post(
            "/stacks",
            create(
                "malformed",
                template("RegionOne"),
                &remote.replace("resources", "resource"),
            ),
        )
        .await;
    assert_eq!(
        bad_template.status,
        StatusCode::BAD_REQUEST,
        "{bad_template:?}"
    );
    assert_eq!(
        bad_template.body["error"]["message"],
        "Failed validating stack template using Heat endpoint at region \"RegionOne\" due to \"ERROR: The template section is invalid: resource\""
    );
    // Nothing was made of either.
    for name in ["darkhole", "malformed"] {
        let missing = heat.get(&format!("/stacks/{name}")).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND, "{missing:?}");
    }
    ember.stop().await;
}
