//! Software configuration end to end (issue 16): Heat's software config and
//! deployment API (table-driven, bad input included, other projects kept
//! out), and stacks whose deployments wait for an agent — played here by
//! `curl` against the URL the derived config hands out, as
//! heat-config-notify does.

use std::time::Duration;

use ember_tests::TestEmber;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::process::Command;

use super::HeatRest;

fn other_project(ember: &TestEmber) -> HeatRest {
    let token = ember.outsider_token();
    HeatRest::new(ember, "other", Some(&token))
}

#[tokio::test]
async fn software_configs_and_deployments_through_the_heat_api() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);

    // A config: created (200, as Heat), shown, listed.
    let created = heat
        .post(
            "/software_configs",
            json!({"name": "hello", "group": "script", "config": "#!/bin/sh\necho $greeting",
                "inputs": [{"name": "greeting", "default": "hi"}],
                "outputs": [{"name": "result"}, {"name": "problem", "error_output": true}],
                "options": {"verbose": true}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::OK, "{created:?}");
    let config = created.body["software_config"].clone();
    let config_id = config["id"].as_str().expect("id").to_owned();
    assert_eq!(config["group"], "script");
    assert_eq!(
        config["inputs"],
        json!([{"name": "greeting", "type": "String", "default": "hi"}])
    );
    assert_eq!(config["outputs"][1]["error_output"], true);
    let shown = heat.get(&format!("/software_configs/{config_id}")).await;
    assert_eq!(
        shown.body["software_config"]["config"],
        "#!/bin/sh\necho $greeting"
    );
    let listed = heat.get("/software_configs").await;
    assert_eq!(
        listed.body["software_configs"],
        json!([{"id": config_id, "name": "hello", "group": "script",
            "creation_time": config["creation_time"]}])
    );

    // Configs are immutable: no update route.
    let put = heat
        .call(
            Method::PUT,
            &format!("/software_configs/{config_id}"),
            Some(json!({"config": "x"})),
        )
        .await;
    assert_eq!(put.status, StatusCode::METHOD_NOT_ALLOWED, "{put:?}");

    // A deployment of it to a server, listed by server, updated by an agent.
    let deployed = heat
        .post(
            "/software_deployments",
            json!({"config_id": config_id, "server_id": "server-1",
                "input_values": {"greeting": "hello"}, "action": "CREATE",
                "status": "IN_PROGRESS", "status_reason": "Deploy data available"}),
        )
        .await;
    assert_eq!(deployed.status, StatusCode::OK, "{deployed:?}");
    let deployment_id = deployed.body["software_deployment"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let by_server = heat.get("/software_deployments?server_id=server-1").await;
    assert_eq!(
        by_server.body["software_deployments"][0]["id"], deployment_id,
        "{by_server:?}"
    );
    assert_eq!(
        heat.get("/software_deployments?server_id=server-2")
            .await
            .body["software_deployments"],
        json!([])
    );
    let metadata = heat.get("/software_deployments/metadata/server-1").await;
    assert_eq!(
        metadata.body["metadata"][0]["id"], config_id,
        "{metadata:?}"
    );
    let updated = heat
        .call(
            Method::PUT,
            &format!("/software_deployments/{deployment_id}"),
            Some(
                json!({"status": "COMPLETE", "status_reason": "Outputs received",
                "output_values": {"deploy_stdout": "hello", "result": "42"}}),
            ),
        )
        .await;
    assert_eq!(updated.status, StatusCode::OK, "{updated:?}");
    let deployment = &updated.body["software_deployment"];
    assert_eq!(deployment["status"], "COMPLETE");
    assert_eq!(deployment["output_values"]["result"], "42");
    assert!(deployment["updated_time"].is_string(), "{deployment}");

    // A config a deployment uses cannot go.
    let refused = heat
        .call(
            Method::DELETE,
            &format!("/software_configs/{config_id}"),
            None,
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{refused:?}");
    assert!(refused.message().contains("referenced"), "{refused:?}");

    // Another project sees none of it and changes none of it.
    let other = other_project(&ember);
    for path in [
        format!("/software_configs/{config_id}"),
        format!("/software_deployments/{deployment_id}"),
    ] {
        assert_eq!(
            other.get(&path).await.status,
            StatusCode::NOT_FOUND,
            "{path}"
        );
        let deleted = other.call(Method::DELETE, &path, None).await;
        assert_eq!(deleted.status, StatusCode::NOT_FOUND, "{path}");
    }
    assert_eq!(
        other.get("/software_configs").await.body["software_configs"],
        json!([])
    );
    assert_eq!(
        other
            .get("/software_deployments/metadata/server-1")
            .await
            .body["metadata"],
        json!([])
    );
    let changed = other
        .call(
            Method::PUT,
            &format!("/software_deployments/{deployment_id}"),
            Some(json!({"status": "FAILED"})),
        )
        .await;
    assert_eq!(changed.status, StatusCode::NOT_FOUND, "{changed:?}");

    // Bad input, each named.
    for (path, body, expected) in [
        (
            "/software_configs",
            json!({"config": "x", "inputs": "greeting"}),
            "must be a list of maps",
        ),
        (
            "/software_configs",
            json!({"config": "x", "inputs": [{"type": "String"}]}),
            "name is required",
        ),
        (
            "/software_configs",
            json!({"config": "x", "outputs": [{"name": "o", "type": "Float"}]}),
            "is not one of",
        ),
        (
            "/software_configs",
            json!({"config": "x", "options": ["a"]}),
            "options must be a map",
        ),
        (
            "/software_deployments",
            json!({"server_id": "s"}),
            "config_id is required",
        ),
        (
            "/software_deployments",
            json!({"config_id": config_id}),
            "server_id is required",
        ),
        (
            "/software_deployments",
            json!({"config_id": "nope", "server_id": "s"}),
            "config_id",
        ),
        (
            "/software_deployments",
            json!({"config_id": config_id, "server_id": "s", "status": "DONE"}),
            "status must be",
        ),
    ] {
        let answer = heat.post(path, body.clone()).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}: {answer:?}");
        assert!(answer.message().contains(expected), "{body}: {answer:?}");
    }
    let unknown = heat.get("/software_configs/not-a-uuid").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);

    // Deleted: the deployment, then the config.
    let gone = heat
        .call(
            Method::DELETE,
            &format!("/software_deployments/{deployment_id}"),
            None,
        )
        .await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    let gone = heat
        .call(
            Method::DELETE,
            &format!("/software_configs/{config_id}"),
            None,
        )
        .await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    assert_eq!(
        heat.get(&format!("/software_configs/{config_id}"))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    ember.stop().await;
}

fn deployment_stack(transport: &str) -> Value {
    json!({
        "heat_template_version": "2021-04-16",
        "resources": {
            "server": {"type": "OS::Heat::None"},
            "config": {
                "type": "OS::Heat::SoftwareConfig",
                "properties": {
                    "group": "script",
                    "config": "#!/bin/sh\necho configured",
                    "inputs": [{"name": "port", "type": "Number"}],
                    "outputs": [{"name": "endpoint"}],
                },
            },
            "deploy": {
                "type": "OS::Heat::SoftwareDeployment",
                "properties": {
                    "config": {"get_resource": "config"},
                    "server": {"get_resource": "server"},
                    "input_values": {"port": 8080},
                    "signal_transport": transport,
                },
            },
        },
        "outputs": {
            "stdout": {"value": {"get_attr": ["deploy", "deploy_stdout"]}},
            "endpoint": {"value": {"get_attr": ["deploy", "endpoint"]}},
            "server": {"value": {"get_resource": "server"}},
        },
    })
}

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

/// What an agent on `server` reads: its deployments' derived configs.
async fn agent_metadata(heat: &HeatRest, server: &str) -> Vec<Value> {
    for _ in 0..200 {
        let metadata = heat
            .get(&format!("/software_deployments/metadata/{server}"))
            .await;
        let configs = metadata.body["metadata"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if !configs.is_empty() {
            return configs;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no deployment reached server {server}");
}

fn input<'a>(config: &'a Value, name: &str) -> &'a Value {
    config["inputs"]
        .as_array()
        .and_then(|inputs| inputs.iter().find(|input| input["name"] == name))
        .map(|input| &input["value"])
        .unwrap_or_else(|| panic!("no input {name}: {config}"))
}

async fn curl(args: &[&str]) -> String {
    let output = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
        .args(args)
        .output()
        .await
        .expect("curl runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

async fn server_of(heat: &HeatRest, stack: &str) -> String {
    physical_id_of(heat, stack, "server").await
}

/// A resource's physical id, once it has one (5 s at most).
async fn physical_id_of(heat: &HeatRest, stack: &str, resource: &str) -> String {
    for _ in 0..200 {
        let answer = heat.get(&format!("{stack}/resources/{resource}")).await;
        if let Some(id) = answer.body["resource"]["physical_resource_id"]
            .as_str()
            .filter(|id| !id.is_empty())
        {
            return id.to_owned();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{resource} of {stack} never got an id");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_waits_for_its_agent_and_takes_its_outputs() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let stack = create(&heat, "deployed", deployment_stack("CFN_SIGNAL")).await;
    let server = server_of(&heat, &stack).await;
    let configs = agent_metadata(&heat, &server).await;
    let derived = &configs[0];
    assert_eq!(derived["group"], "script");
    assert_eq!(derived["config"], "#!/bin/sh\necho configured");
    assert_eq!(input(derived, "port"), 8080);
    assert_eq!(input(derived, "deploy_action"), "CREATE");
    assert_eq!(input(derived, "deploy_server_id"), server.as_str());
    assert_eq!(input(derived, "deploy_resource_name"), "deploy");
    assert_eq!(input(derived, "deploy_signal_verb"), "POST");
    let signal_url = input(derived, "deploy_signal_id")
        .as_str()
        .expect("a signal URL")
        .to_owned();

    // The stack waits for the agent.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        heat.get(&stack).await.body["stack"]["stack_status"],
        "CREATE_IN_PROGRESS"
    );
    // The agent reports (heat-config-notify's body), with curl.
    let status = curl(&[
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        r#"{"deploy_stdout": "configured", "deploy_stderr": "", "deploy_status_code": 0, "endpoint": "http://10.0.0.5:8080"}"#,
        &signal_url,
    ])
    .await;
    assert_eq!(status, "200");
    let done = heat.wait_until_settled(&stack).await;
    assert_eq!(done["stack_status"], "CREATE_COMPLETE", "{done}");
    let output = |key: &'static str| {
        let heat = &heat;
        let stack = stack.clone();
        async move {
            heat.get(&format!("{stack}/outputs/{key}")).await.body["output"]["output_value"].clone()
        }
    };
    assert_eq!(output("stdout").await, "configured");
    assert_eq!(output("endpoint").await, "http://10.0.0.5:8080");
    let deployments = heat
        .get(&format!("/software_deployments?server_id={server}"))
        .await;
    assert_eq!(
        deployments.body["software_deployments"][0]["status"], "COMPLETE",
        "{deployments:?}"
    );

    // Deleting the stack removes the deployment and its derived config.
    let answer = heat.call(Method::DELETE, &stack, None).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    heat.wait_until_deleted(&stack).await;
    assert_eq!(
        heat.get(&format!("/software_deployments?server_id={server}"))
            .await
            .body["software_deployments"],
        json!([])
    );
    assert_eq!(
        heat.get("/software_configs").await.body["software_configs"],
        json!([])
    );
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_deployment_fails_the_stack_and_no_signal_does_not_wait() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let unwaited = create(&heat, "unwaited", deployment_stack("NO_SIGNAL")).await;
    let done = heat.wait_until_settled(&unwaited).await;
    assert_eq!(done["stack_status"], "CREATE_COMPLETE", "{done}");

    let failing = create(&heat, "failing", deployment_stack("TEMP_URL_SIGNAL")).await;
    let server = server_of(&heat, &failing).await;
    let configs = agent_metadata(&heat, &server).await;
    assert_eq!(input(&configs[0], "deploy_signal_verb"), "PUT");
    let signal_url = input(&configs[0], "deploy_signal_id")
        .as_str()
        .expect("url")
        .to_owned();
    let status = curl(&[
        "-X",
        "PUT",
        "--data-binary",
        r#"{"deploy_status_code": 3, "deploy_stderr": "boom"}"#,
        &signal_url,
    ])
    .await;
    assert_eq!(status, "200");
    let failed = heat.wait_until_settled(&failing).await;
    assert_eq!(failed["stack_status"], "CREATE_FAILED", "{failed}");
    let reason = failed["stack_status_reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("Deployment to server failed: deploy_status_code : Deployment exited with non-zero status code: 3"),
        "{reason}"
    );
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_structured_deployment_fills_its_inputs_and_heat_signal_takes_the_token() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let stack = create(
        &heat,
        "structured",
        json!({
            "heat_template_version": "2021-04-16",
            "resources": {
                "server": {"type": "OS::Heat::None"},
                "config": {
                    "type": "OS::Heat::StructuredConfig",
                    "properties": {"group": "os-apply-config",
                        "config": {"app": {"port": {"get_input": "port"},
                            "action": {"get_input": "deploy_action"}}}},
                },
                "deploy": {
                    "type": "OS::Heat::StructuredDeployment",
                    "properties": {
                        "config": {"get_resource": "config"},
                        "server": {"get_resource": "server"},
                        "input_values": {"port": 8443},
                        "signal_transport": "HEAT_SIGNAL",
                    },
                },
            },
        }),
    )
    .await;
    let server = server_of(&heat, &stack).await;
    let configs = agent_metadata(&heat, &server).await;
    assert_eq!(
        configs[0]["config"],
        json!({"app": {"port": 8443, "action": "CREATE"}}),
        "{configs:?}"
    );
    let endpoint = input(&configs[0], "deploy_signal_id")
        .as_str()
        .expect("endpoint")
        .to_owned();
    let token = input(&configs[0], "deploy_signal_token")
        .as_str()
        .expect("token")
        .to_owned();
    assert!(endpoint.ends_with(&format!("token={token}")), "{endpoint}");
    // A wrong secret is an unknown deployment.
    let wrong = endpoint.replace(&token, "ember-signal-00");
    let status = curl(&["-X", "POST", "--data-binary", "{}", &wrong]).await;
    assert_eq!(status, "404");
    let status = curl(&[
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        r#"{"deploy_status_code": "0"}"#,
        &endpoint,
    ])
    .await;
    assert_eq!(status, "200");
    let done = heat.wait_until_settled(&stack).await;
    assert_eq!(done["stack_status"], "CREATE_COMPLETE", "{done}");
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_group_deploys_to_each_server_and_gathers_their_outputs() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let template = json!({
        "heat_template_version": "2021-04-16",
        "resources": {
            "web": {"type": "OS::Heat::None"},
            "db": {"type": "OS::Heat::None"},
            "config": {"type": "OS::Heat::SoftwareConfig",
                       "properties": {"group": "script", "config": "#!/bin/sh\necho hi"}},
            "deploys": {
                "type": "OS::Heat::SoftwareDeploymentGroup",
                "properties": {
                    "config": {"get_resource": "config"},
                    "servers": {"web": {"get_resource": "web"}, "db": {"get_resource": "db"}},
                    "signal_transport": "CFN_SIGNAL",
                },
            },
        },
        "outputs": {
            "stdouts": {"value": {"get_attr": ["deploys", "deploy_stdouts"]}},
            "codes": {"value": {"get_attr": ["deploys", "deploy_status_codes"]}},
        },
    });
    let stack = create(&heat, "grouped", template).await;
    // Each server's agent sees its own deployment and signals it.
    for server_name in ["web", "db"] {
        let server = physical_id_of(&heat, &stack, server_name).await;
        let configs = agent_metadata(&heat, &server).await;
        assert_eq!(configs.len(), 1, "{configs:?}");
        assert_eq!(input(&configs[0], "deploy_resource_name"), server_name);
        let signal_url = input(&configs[0], "deploy_signal_id")
            .as_str()
            .expect("a signal URL")
            .to_owned();
        let body = format!(
            r#"{{"deploy_stdout": "{server_name} ok", "deploy_stderr": "", "deploy_status_code": 0}}"#
        );
        let status = curl(&[
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            &body,
            &signal_url,
        ])
        .await;
        assert_eq!(status, "200");
    }
    let done = heat.wait_until_settled(&stack).await;
    assert_eq!(done["stack_status"], "CREATE_COMPLETE", "{done}");
    let output = |key: &'static str| {
        let heat = &heat;
        let stack = stack.clone();
        async move {
            heat.get(&format!("{stack}/outputs/{key}")).await.body["output"]["output_value"].clone()
        }
    };
    assert_eq!(
        output("stdouts").await,
        json!({"web": "web ok", "db": "db ok"})
    );
    assert_eq!(output("codes").await, json!({"web": 0, "db": 0}));

    // Heat's older name of the group is taken (hidden: not listed), and
    // its member's nested stack is shown as the resource's while it is made.
    let old_name = create(
        &heat,
        "old-name",
        json!({
            "heat_template_version": "2021-04-16",
            "resources": {
                "web": {"type": "OS::Heat::None"},
                "deploys": {"type": "OS::Heat::SoftwareDeployments",
                    "properties": {"servers": {"web": {"get_resource": "web"}},
                                   "signal_transport": "NO_SIGNAL"}}},
            "outputs": {"codes": {"value": {"get_attr": ["deploys", "deploy_status_codes"]}}},
        }),
    )
    .await;
    let done = heat.wait_until_settled(&old_name).await;
    assert_eq!(done["stack_status"], "CREATE_COMPLETE", "{done}");
    let deploys = heat
        .get(&format!("{old_name}/resources/deploys"))
        .await
        .body["resource"]
        .clone();
    assert!(
        deploys["links"]
            .as_array()
            .is_some_and(|links| links.iter().any(|link| link["rel"] == "nested")),
        "{deploys}"
    );
    let listed = heat.get("/resource_types").await.body;
    assert!(
        !listed
            .to_string()
            .contains("OS::Heat::SoftwareDeployments\""),
        "{listed}"
    );

    // A server id that is not a string fails the stack, naming it.
    let bad = create(
        &heat,
        "bad-group",
        json!({
            "heat_template_version": "2021-04-16",
            "resources": {"deploys": {"type": "OS::Heat::SoftwareDeploymentGroup",
                "properties": {"servers": {"web": 7}, "signal_transport": "NO_SIGNAL"}}},
        }),
    )
    .await;
    let failed = heat.wait_until_settled(&bad).await;
    assert_eq!(failed["stack_status"], "CREATE_FAILED", "{failed}");
    assert!(
        failed["stack_status_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("servers.web"),
        "{failed}"
    );
    ember.stop().await;
}

/// A deployment group's nested stack locks and unlocks with its stack, as
/// every group's does (heat-lock-stack: "the stack and all nested stacks").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_groups_nested_stack_locks_with_its_stack() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let stack = create(
        &heat,
        "locked-deploys",
        json!({
            "heat_template_version": "2021-04-16",
            "resources": {
                "web": {"type": "OS::Heat::None"},
                "config": {"type": "OS::Heat::SoftwareConfig",
                           "properties": {"group": "script", "config": "#!/bin/sh\necho hi"}},
                "deploys": {"type": "OS::Heat::SoftwareDeploymentGroup",
                    "properties": {"config": {"get_resource": "config"},
                                   "servers": {"web": {"get_resource": "web"}},
                                   "signal_transport": "NO_SIGNAL"}}},
        }),
    )
    .await;
    let done = heat.wait_until_settled(&stack).await;
    assert_eq!(done["stack_status"], "CREATE_COMPLETE", "{done}");
    // The nested stack's canonical path, as `/stacks/{id}` redirects to it.
    let by_id = heat
        .get(&format!(
            "/stacks/{}",
            physical_id_of(&heat, &stack, "deploys").await
        ))
        .await;
    let location = by_id
        .location
        .clone()
        .expect("a redirect to the nested stack");
    let nested = location[location.find("/stacks/").expect("a stack URL")..].to_owned();
    for (action, status) in [
        (json!({"lock": {"level": "stacks"}}), "LOCK_COMPLETE"),
        (json!({"unlock": null}), "UNLOCK_COMPLETE"),
    ] {
        let answer = heat.post(&format!("{stack}/actions"), action).await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        let settled = heat.wait_until_settled(&stack).await;
        assert_eq!(settled["stack_status"], status, "{settled}");
        let child = heat.get(&nested).await;
        assert_eq!(
            child.body["stack"]["stack_status"], status,
            "the deployments' nested stack follows its stack: {child:?}"
        );
    }
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployed_server_is_a_target_ember_does_not_create() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let template = json!({
        "heat_template_version": "2021-04-16",
        "resources": {
            "server": {"type": "OS::Heat::DeployedServer", "properties": {"name": "bare-metal-1"}},
            "config": {"type": "OS::Heat::SoftwareConfig",
                       "properties": {"group": "script", "config": "#!/bin/sh\necho hi"}},
            "deploy": {"type": "OS::Heat::SoftwareDeployment",
                       "properties": {"config": {"get_resource": "config"},
                                      "server": {"get_resource": "server"},
                                      "signal_transport": "NO_SIGNAL"}},
        },
        "outputs": {
            "collect": {"value": {"get_attr": ["server", "os_collect_config"]}},
            "name": {"value": {"get_attr": ["server", "name"]}},
            "server": {"value": {"get_resource": "server"}},
        },
    });
    let stack = create(&heat, "deployed-server", template).await;
    let done = heat.wait_until_settled(&stack).await;
    assert_eq!(done["stack_status"], "CREATE_COMPLETE", "{done}");
    let output = |key: &'static str| {
        let heat = &heat;
        let stack = stack.clone();
        async move {
            heat.get(&format!("{stack}/outputs/{key}")).await.body["output"]["output_value"].clone()
        }
    };
    let server = output("server").await.as_str().expect("an id").to_owned();
    assert_eq!(output("name").await, "bare-metal-1");
    let metadata_url = output("collect").await["request"]["metadata_url"]
        .as_str()
        .expect("a metadata URL")
        .to_owned();
    assert_eq!(
        metadata_url,
        ember.url(&format!(
            "/orchestration/v1/demo/software_deployments/metadata/{server}"
        ))
    );
    // The agent (with its own token) reads its deployments there.
    let configs = agent_metadata(&heat, &server).await;
    assert_eq!(configs[0]["config"], "#!/bin/sh\necho hi");
    // And the server resource's own metadata carries them, as Heat keeps
    // them there for the agent's heat collector.
    let metadata = heat
        .get(&format!("{stack}/resources/server/metadata"))
        .await
        .body;
    let deployments = metadata["metadata"]["deployments"]
        .as_array()
        .unwrap_or_else(|| panic!("no deployments in {metadata}"));
    assert_eq!(deployments.len(), 1, "{metadata}");
    assert_eq!(deployments[0]["config"], "#!/bin/sh\necho hi");
    // A server its agent reads has the list from the start, empty before
    // any deployment (Heat's suite reads the key at once).
    let idle = create(
        &heat,
        "deployed-idle",
        json!({"heat_template_version": "2021-04-16", "resources": {
            "server": {"type": "OS::Heat::DeployedServer"}}}),
    )
    .await;
    heat.wait_until_settled(&idle).await;
    let metadata = heat
        .get(&format!("{idle}/resources/server/metadata"))
        .await
        .body;
    assert_eq!(metadata["metadata"]["deployments"], json!([]), "{metadata}");

    // A transport Ember cannot serve fails by name.
    let bad = create(
        &heat,
        "bad-transport",
        json!({
            "heat_template_version": "2021-04-16",
            "resources": {"server": {"type": "OS::Heat::DeployedServer",
                "properties": {"software_config_transport": "ZAQAR_MESSAGE"}}},
        }),
    )
    .await;
    let failed = heat.wait_until_settled(&bad).await;
    assert_eq!(failed["stack_status"], "CREATE_FAILED", "{failed}");
    assert!(
        failed["stack_status_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("ZAQAR_MESSAGE"),
        "{failed}"
    );
    ember.stop().await;
}
