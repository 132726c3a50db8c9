//! Wait conditions signalled the way servers signal them: with the real
//! `curl`, using the command and URLs the handle hands out (issue 16) —
//! success with data, several signals at once, a failure, a timeout, the
//! CloudFormation pair through its signal URL, and the refusals (a wrong
//! secret, a malformed signal, another project).

use std::time::Duration;

use ember_tests::TestEmber;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::process::Command;

use super::HeatRest;

fn template(count: u64, timeout: u64, transport: &str) -> Value {
    json!({
        "heat_template_version": "2021-04-16",
        "resources": {
            "handle": {
                "type": "OS::Heat::WaitConditionHandle",
                "properties": {"signal_transport": transport},
            },
            "wait": {
                "type": "OS::Heat::WaitCondition",
                "properties": {
                    "handle": {"get_resource": "handle"},
                    "count": count,
                    "timeout": timeout,
                },
            },
            "after": {"type": "OS::Heat::None", "depends_on": "wait"},
        },
        "outputs": {
            "data": {"value": {"get_attr": ["wait", "data"]}},
            "curl_cli": {"value": {"get_attr": ["handle", "curl_cli"]}},
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

/// An attribute of a resource, once the resource has it.
async fn attribute(heat: &HeatRest, stack: &str, resource: &str, name: &str) -> Value {
    let mut value = Value::Null;
    for _ in 0..200 {
        let answer = heat.get(&format!("{stack}/resources/{resource}")).await;
        value = answer.body["resource"]["attributes"][name].clone();
        if !value.is_null() {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{stack}: {resource}.{name} never appeared: {value}");
}

/// Runs a shell command line (as a boot script would), returning stdout.
async fn sh(command: &str) -> String {
    let output = Command::new("sh")
        .arg("-c")
        .arg(command)
        .output()
        .await
        .expect("sh runs");
    assert!(
        output.status.success(),
        "{command}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stack_status(stack: &Value) -> &str {
    stack["stack_status"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_signals_complete_a_wait_condition_with_their_data() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let stack = create(&heat, "waits", template(3, 60, "TOKEN_SIGNAL")).await;
    let curl_cli = attribute(&heat, &stack, "handle", "curl_cli").await;
    let curl_cli = curl_cli.as_str().expect("curl_cli is a command");
    assert!(
        curl_cli.starts_with("curl -i -X POST -H 'X-Auth-Token: ember-signal-"),
        "{curl_cli}"
    );

    // The stack waits: nothing signalled yet.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let waiting = heat.get(&stack).await.body["stack"].clone();
    assert_eq!(stack_status(&waiting), "CREATE_IN_PROGRESS", "{waiting}");

    // A named signal with data, then two without an id sent at once: each
    // gets its own number.
    let answer = sh(&format!(
        "{curl_cli} --data-binary '{{\"status\": \"SUCCESS\", \"id\": \"first\", \"data\": \"ready\"}}'"
    ))
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let first_unnamed = format!("{curl_cli} --data-binary '{{\"data\": \"a\"}}'");
    let second_unnamed = format!("{curl_cli} --data-binary '{{\"data\": \"b\"}}'");
    let (one, two) = tokio::join!(sh(&first_unnamed), sh(&second_unnamed));
    assert!(one.starts_with("HTTP/1.1 200") && two.starts_with("HTTP/1.1 200"));

    let done = heat.wait_until_settled(&stack).await;
    assert_eq!(stack_status(&done), "CREATE_COMPLETE", "{done}");
    let outputs = heat.get(&format!("{stack}/outputs/data")).await;
    let data: Value = serde_json::from_str(
        outputs.body["output"]["output_value"]
            .as_str()
            .expect("data is a JSON string"),
    )
    .expect("JSON");
    assert_eq!(data["first"], "ready", "{data}");
    let mut others: Vec<&str> = ["2", "3"]
        .iter()
        .filter_map(|id| data[*id].as_str())
        .collect();
    others.sort_unstable();
    assert_eq!(others, ["a", "b"], "each unnamed signal kept: {data}");

    // The handle's metadata is its signals, by id (what Heat shows).
    let metadata = heat
        .get(&format!("{stack}/resources/handle/metadata"))
        .await;
    assert_eq!(
        metadata.body["metadata"]["first"],
        json!({"status": "SUCCESS", "reason": "Signal 1 received", "data": "ready"}),
        "{metadata:?}"
    );

    // Each signal left an event on the handle.
    let events = heat.get(&format!("{stack}/resources/handle/events")).await;
    let reasons: Vec<&str> = events.body["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|event| event["resource_status_reason"].as_str())
        .filter(|reason| reason.starts_with("status:SUCCESS"))
        .collect();
    assert_eq!(reasons.len(), 3, "{events:?}");
    assert!(
        reasons.contains(&"status:SUCCESS reason:Signal 2 received")
            || reasons.contains(&"status:SUCCESS reason:Signal 3 received")
    );
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_signal_or_the_timeout_fails_the_stack_with_the_reason() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let failing = create(&heat, "fails", template(2, 60, "TOKEN_SIGNAL")).await;
    let timing_out = create(&heat, "times-out", template(2, 1, "TOKEN_SIGNAL")).await;
    let curl_cli = attribute(&heat, &failing, "handle", "curl_cli").await;
    sh(&format!(
        "{} --data-binary '{{\"status\": \"FAILURE\", \"reason\": \"disk full\"}}'",
        curl_cli.as_str().expect("curl_cli")
    ))
    .await;
    let failed = heat.wait_until_settled(&failing).await;
    assert_eq!(stack_status(&failed), "CREATE_FAILED", "{failed}");
    assert!(
        failed["stack_status_reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("disk full")),
        "{failed}"
    );

    // One success of two, then the timeout.
    let curl_cli = attribute(&heat, &timing_out, "handle", "curl_cli").await;
    sh(&format!(
        "{} --data-binary '{{}}'",
        curl_cli.as_str().expect("curl_cli")
    ))
    .await;
    let timed_out = heat.wait_until_settled(&timing_out).await;
    assert_eq!(stack_status(&timed_out), "CREATE_FAILED", "{timed_out}");
    let reason = timed_out["stack_status_reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains("WaitConditionTimeout: 1 of 2 received - Signal 1 received"),
        "{reason}"
    );
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cloudformation_pair_is_signalled_through_its_url() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let stack = create(
        &heat,
        "cfn-wait",
        json!({
            "heat_template_version": "2021-04-16",
            "resources": {
                "handle": {"type": "AWS::CloudFormation::WaitConditionHandle"},
                "wait": {
                    "type": "AWS::CloudFormation::WaitCondition",
                    "properties": {"Handle": {"get_resource": "handle"}, "Timeout": 60},
                },
            },
            "outputs": {
                "url": {"value": {"get_resource": "handle"}},
                "data": {"value": {"get_attr": ["wait", "Data"]}},
            },
        }),
    )
    .await;
    // The handle's reference is its signal URL (the output resolves once
    // the handle exists; the stack still waits).
    let started = std::time::Instant::now();
    let url = loop {
        let answer = heat.get(&format!("{stack}/outputs/url")).await;
        let url = answer.body["output"]["output_value"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if url.contains("/signals/") && url.contains("token=ember-signal-") {
            break url;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the handle's URL never showed: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };

    // A CloudFormation signal must carry its four keys.
    let bad = sh(&format!(
        "curl -s -o /dev/null -w '%{{http_code}}' -X PUT -H 'Content-Type: application/json' --data-binary '{{\"Status\": \"SUCCESS\"}}' '{url}'"
    ))
    .await;
    assert_eq!(bad, "400");
    let wrong_token = url.replace("token=ember-signal-", "token=ember-signal-0");
    let refused = sh(&format!(
        "curl -s -o /dev/null -w '%{{http_code}}' -X PUT --data-binary '{{}}' '{wrong_token}'"
    ))
    .await;
    assert_eq!(refused, "404", "a wrong secret is an unknown handle");
    let accepted = sh(&format!(
        "curl -s -o /dev/null -w '%{{http_code}}' -X PUT -H 'Content-Type: application/json' --data-binary '{{\"Status\": \"SUCCESS\", \"Reason\": \"configured\", \"UniqueId\": \"vm1\", \"Data\": \"42\"}}' '{url}'"
    ))
    .await;
    assert_eq!(accepted, "200");
    let done = heat.wait_until_settled(&stack).await;
    assert_eq!(stack_status(&done), "CREATE_COMPLETE", "{done}");
    let data = heat.get(&format!("{stack}/outputs/data")).await;
    assert_eq!(data.body["output"]["output_value"], "{\"vm1\":\"42\"}");
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_are_refused_without_the_secret_or_from_another_project() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let stack = create(&heat, "guarded", template(1, 60, "TOKEN_SIGNAL")).await;
    let endpoint = attribute(&heat, &stack, "handle", "endpoint").await;
    let endpoint = endpoint.as_str().expect("endpoint").to_owned();

    // A made-up secret, and a malformed signal with the right one.
    let answer = ember
        .http
        .post(&endpoint)
        .header("X-Auth-Token", "ember-signal-0000")
        .json(&json!({}))
        .send()
        .await
        .expect("answered");
    assert_eq!(answer.status(), 404);
    let token = attribute(&heat, &stack, "handle", "token").await;
    let answer = ember
        .http
        .post(&endpoint)
        .header("X-Auth-Token", token.as_str().expect("token"))
        .json(&json!({"status": "MAYBE"}))
        .send()
        .await
        .expect("answered");
    assert_eq!(answer.status(), 400);
    let body: Value = answer.json().await.expect("json");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|message| message.starts_with("Metadata format invalid")),
        "{body}"
    );

    // Another project's member, with a token of its own.
    let intruder = ember.outsider_token();
    let theirs = HeatRest::new(&ember, "other", Some(&intruder));
    let answer = theirs
        .post(&format!("{stack}/resources/handle/signal"), json!({}))
        .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{answer:?}");

    // The stack still waits: nothing got through.
    let still = heat.get(&stack).await.body["stack"].clone();
    assert_eq!(stack_status(&still), "CREATE_IN_PROGRESS", "{still}");
    // The owner signals with the API and a user token, as openstack stack
    // resource signal does.
    let answer = heat
        .post(
            &format!("{stack}/resources/handle/signal"),
            json!({"status": "SUCCESS"}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let done = heat.wait_until_settled(&stack).await;
    assert_eq!(stack_status(&done), "CREATE_COMPLETE", "{done}");
    ember.stop().await;
}
