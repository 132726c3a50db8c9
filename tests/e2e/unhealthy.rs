//! Mark unhealthy and scaling signals end to end (spec heat-mark-unhealthy):
//! the Heat PATCH on a resource with every way its body can be wrong, 404,
//! 409 while an update holds the stack, the next update replacing what was
//! marked; `POST …/signal` resizing an AutoScalingGroup; the same through
//! gRPC `ResourceService.MarkUnhealthy` and `Signal`; and
//! python-heatclient's `resources.mark_unhealthy` (tests/compat/).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::resource_service_client::ResourceServiceClient;
use ember_tests::{TestEmber, with_bearer};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::orchestration::{Answer, HeatRest, SETTLE};

fn template() -> Value {
    json!({
        "heat_template_version": "2021-04-16",
        "parameters": {"word": {"type": "string", "default": "one"}},
        "resources": {
            "flaky": {"type": "OS::Heat::RandomString", "properties": {"length": 12}},
            "user": {
                "type": "OS::Heat::Value",
                "properties": {"value": {"get_attr": ["flaky", "value"]}},
            },
            "slow": {
                "type": "OS::Heat::TestResource",
                "properties": {
                    "value": {"get_param": "word"},
                    "action_wait_secs": {"update": 1},
                },
            },
            "asg": {
                "type": "OS::Heat::AutoScalingGroup",
                "properties": {
                    "min_size": 1,
                    "max_size": 3,
                    "resource": {"type": "OS::Heat::TestResource", "properties": {"value": "m"}},
                },
            },
            "grow": {
                "type": "OS::Heat::ScalingPolicy",
                "properties": {
                    "auto_scaling_group_id": {"get_resource": "asg"},
                    "adjustment_type": "change_in_capacity",
                    "scaling_adjustment": 1,
                },
            },
        },
    })
}

async fn create(heat: &HeatRest, name: &str) -> String {
    let answer = heat
        .post(
            "/stacks",
            json!({"stack_name": name, "template": template()}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let path = format!(
        "/stacks/{name}/{}",
        answer.body["stack"]["id"].as_str().expect("id")
    );
    let stack = heat.wait_until_settled(&path).await;
    assert_eq!(stack["stack_status"], "CREATE_COMPLETE", "{stack}");
    path
}

async fn resource(heat: &HeatRest, stack_path: &str, name: &str) -> Value {
    let answer = heat.get(&format!("{stack_path}/resources/{name}")).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    answer.body["resource"].clone()
}

async fn patch(heat: &HeatRest, path: &str, body: Value) -> Answer {
    heat.call(Method::PATCH, path, Some(body)).await
}

#[tokio::test]
async fn mark_unhealthy_over_rest_refuses_bad_bodies_and_the_next_update_replaces() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let stack = create(&heat, "health").await;
    let flaky_path = format!("{stack}/resources/flaky");
    let before = resource(&heat, &stack, "flaky").await;

    for (body, key) in [
        (json!({}), "mark_unhealthy"),
        (json!({"resource_status_reason": "x"}), "mark_unhealthy"),
        (json!({"mark_unhealthy": true, "reason": "x"}), "\"reason\""),
        (json!({"mark_unhealthy": "maybe"}), "mark_unhealthy"),
        (json!({"mark_unhealthy": 1}), "mark_unhealthy"),
        (json!({"mark_unhealthy": [true]}), "mark_unhealthy"),
        (
            json!({"mark_unhealthy": true, "resource_status_reason": 42}),
            "resource_status_reason",
        ),
        (json!([{"mark_unhealthy": true}]), "JSON object"),
    ] {
        let answer = patch(&heat, &flaky_path, body.clone()).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}: {answer:?}");
        assert!(
            answer.message().contains(key),
            "{body}: {}",
            answer.message()
        );
    }
    let unchanged = resource(&heat, &stack, "flaky").await;
    assert_eq!(
        unchanged["resource_status"], "CREATE_COMPLETE",
        "no bad body changed anything"
    );

    let unknown = patch(
        &heat,
        &format!("{stack}/resources/nope"),
        json!({"mark_unhealthy": true}),
    )
    .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{unknown:?}");

    let marked = patch(
        &heat,
        &flaky_path,
        json!({"mark_unhealthy": "TRUE", "resource_status_reason": "app check failed"}),
    )
    .await;
    assert_eq!(marked.status, StatusCode::OK, "{marked:?}");
    assert_eq!(marked.body, Value::Null, "an empty body, as Heat answers");
    let flaky = resource(&heat, &stack, "flaky").await;
    assert_eq!(
        (
            flaky["resource_status"].as_str(),
            flaky["resource_status_reason"].as_str()
        ),
        (Some("CHECK_FAILED"), Some("app check failed"))
    );
    let reset = patch(&heat, &flaky_path, json!({"mark_unhealthy": false})).await;
    assert_eq!(reset.status, StatusCode::OK, "{reset:?}");
    assert_eq!(
        resource(&heat, &stack, "flaky").await["resource_status"],
        "CHECK_COMPLETE"
    );

    // A running update holds the stack: 409, and nothing changes.
    let update = heat
        .call(
            Method::PATCH,
            &stack,
            Some(json!({"parameters": {"word": "two"}})),
        )
        .await;
    assert_eq!(update.status, StatusCode::ACCEPTED, "{update:?}");
    let busy = patch(&heat, &flaky_path, json!({"mark_unhealthy": true})).await;
    assert_eq!(busy.status, StatusCode::CONFLICT, "{busy:?}");
    let settled = heat.wait_until_settled(&stack).await;
    assert_eq!(settled["stack_status"], "UPDATE_COMPLETE", "{settled}");
    let flaky = resource(&heat, &stack, "flaky").await;
    assert_eq!(
        flaky["resource_status"], "CHECK_COMPLETE",
        "the refused mark changed nothing"
    );

    // By physical id.
    let slow = resource(&heat, &stack, "slow").await;
    let slow_id = slow["physical_resource_id"].as_str().expect("id");
    let by_id = patch(
        &heat,
        &format!("{stack}/resources/{slow_id}"),
        json!({"mark_unhealthy": true}),
    )
    .await;
    assert_eq!(by_id.status, StatusCode::OK, "{by_id:?}");
    let slow = resource(&heat, &stack, "slow").await;
    assert_eq!(slow["resource_status"], "CHECK_FAILED");
    assert_eq!(
        slow["resource_status_reason"],
        "state changed by resource_mark_unhealthy api"
    );

    // Mark, update with the same template: replaced, dependents follow.
    let marked = patch(&heat, &flaky_path, json!({"mark_unhealthy": true})).await;
    assert_eq!(marked.status, StatusCode::OK, "{marked:?}");
    let update = heat.call(Method::PATCH, &stack, Some(json!({}))).await;
    assert_eq!(update.status, StatusCode::ACCEPTED, "{update:?}");
    let settled = heat.wait_until_settled(&stack).await;
    assert_eq!(settled["stack_status"], "UPDATE_COMPLETE", "{settled}");
    let flaky = resource(&heat, &stack, "flaky").await;
    assert_eq!(flaky["resource_status"], "CREATE_COMPLETE");
    assert_ne!(flaky["attributes"]["value"], before["attributes"]["value"]);
    let user = resource(&heat, &stack, "user").await;
    assert_eq!(user["attributes"]["value"], flaky["attributes"]["value"]);
    let slow_after = resource(&heat, &stack, "slow").await;
    assert_eq!(slow_after["resource_status"], "CREATE_COMPLETE");
    assert_ne!(
        slow_after["physical_resource_id"], slow["physical_resource_id"],
        "marked by physical id, replaced too"
    );
    ember.stop().await;
}

/// Polls the group until it settles at `size` members.
async fn wait_for_size(heat: &HeatRest, stack: &str, size: u64) -> Value {
    let deadline = Instant::now() + SETTLE;
    loop {
        let group = resource(heat, stack, "asg").await;
        if group["resource_status"] != "UPDATE_IN_PROGRESS"
            && group["attributes"]["current_size"] == json!(size)
        {
            return group;
        }
        assert!(
            Instant::now() < deadline,
            "group never reached {size}: {group}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_signal_to_a_scaling_policy_resizes_its_group_over_rest_and_grpc() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let stack = create(&heat, "scaled").await;
    let group = resource(&heat, &stack, "asg").await;
    assert_eq!(group["attributes"]["current_size"], 1);
    assert!(
        group["links"]
            .as_array()
            .expect("links")
            .iter()
            .any(|link| link["rel"] == "nested"),
        "the group links its members' stack: {group}"
    );

    let signalled = heat
        .post(
            &format!("{stack}/resources/grow/signal"),
            json!({"current": "alarm"}),
        )
        .await;
    assert_eq!(signalled.status, StatusCode::OK, "{signalled:?}");
    wait_for_size(&heat, &stack, 2).await;
    // An empty body is a signal too.
    let empty = heat
        .call(
            Method::POST,
            &format!("{stack}/resources/grow/signal"),
            None,
        )
        .await;
    assert_eq!(empty.status, StatusCode::OK, "{empty:?}");
    wait_for_size(&heat, &stack, 3).await;

    let not_a_policy = heat
        .post(&format!("{stack}/resources/slow/signal"), json!({}))
        .await;
    assert_eq!(
        not_a_policy.status,
        StatusCode::BAD_REQUEST,
        "{not_a_policy:?}"
    );
    assert!(
        not_a_policy.message().contains("does not accept signals"),
        "{not_a_policy:?}"
    );
    let unknown = heat
        .post(&format!("{stack}/resources/nope/signal"), json!({}))
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{unknown:?}");

    // gRPC: at max_size the signal changes nothing and says so.
    let mut resources = ResourceServiceClient::new(ember.gateway_channel().await);
    let token = ember.member_token();
    let stack_id = stack.rsplit('/').next().expect("id").to_owned();
    let answer = resources
        .signal(with_bearer(
            pb::SignalResourceRequest {
                stack: stack_id.clone(),
                resource: "grow".into(),
                details: None,
                signal_token: String::new(),
            },
            token,
        ))
        .await
        .expect("signal")
        .into_inner();
    assert!(!answer.scaling);
    assert!(
        answer.message.contains("stays at 3 members"),
        "{}",
        answer.message
    );

    let marked = resources
        .mark_unhealthy(with_bearer(
            pb::MarkUnhealthyRequest {
                stack: stack_id.clone(),
                resource: "user".into(),
                mark_unhealthy: true,
                resource_status_reason: "over grpc".into(),
            },
            token,
        ))
        .await
        .expect("marked")
        .into_inner();
    assert_eq!(marked.resource_status, "CHECK_FAILED");
    assert_eq!(marked.resource_status_reason, "over grpc");
    let missing = resources
        .mark_unhealthy(with_bearer(
            pb::MarkUnhealthyRequest {
                stack: stack_id,
                resource: "nope".into(),
                mark_unhealthy: true,
                resource_status_reason: String::new(),
            },
            token,
        ))
        .await
        .expect_err("unknown");
    assert_eq!(missing.code(), tonic::Code::NotFound);
    ember.stop().await;
}

fn test_python() -> PathBuf {
    match std::env::var_os("EMBER_TEST_PYTHON") {
        Some(python) => PathBuf::from(python),
        None => panic!(
            "EMBER_TEST_PYTHON is not set: run ./scripts/test, which installs \
             tests/requirements.txt into target/test-tools/venv and sets it"
        ),
    }
}

#[tokio::test]
async fn python_heatclient_marks_a_resource_unhealthy() {
    let python = test_python();
    let ember = TestEmber::start().await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("compat")
        .join("heatclient_unhealthy.py");
    let mut command = Command::new(python);
    command
        .arg(script)
        .arg(ember.url("/orchestration/v1/demo"))
        .arg(ember.member_token());
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("joined")
        .expect("the test Python runs");
    let describe = format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{describe}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("heatclient mark_unhealthy: ok"),
        "{describe}"
    );
    ember.stop().await;
}
