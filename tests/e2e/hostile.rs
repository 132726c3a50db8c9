//! Hostile input from an ordinary member, through the gateway: what an
//! attacker tried (issue 13) stays refused cleanly, with bounded answers,
//! and never costs other projects their service.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ember_tests::{TestEmber, wait_for};
use serde_json::{Value, json};

async fn call(
    ember: &TestEmber,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value, usize) {
    let mut request = ember
        .http
        .request(method, ember.url(path))
        .header("X-Auth-Token", token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("answered");
    let status = response.status().as_u16();
    let bytes = response.bytes().await.expect("body");
    let length = bytes.len();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        length,
    )
}

fn message(body: &Value) -> String {
    body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn oversized_values_are_refused_with_bounded_answers_and_other_projects_keep_working() {
    let ember = TestEmber::start().await;
    let bystander = ember.token_for("bob", "bystanders", &["member"]);
    // Another project lists its stacks the whole time.
    let stop = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(AtomicUsize::new(0));
    let lists = Arc::new(AtomicUsize::new(0));
    let loop_ember = ember.url("/orchestration/v1/bystanders/stacks");
    let watcher = {
        let (stop, failures, lists, http) = (
            stop.clone(),
            failures.clone(),
            lists.clone(),
            ember.http.clone(),
        );
        tokio::spawn(async move {
            while stop.load(Ordering::SeqCst) == 0 {
                let answer = http
                    .get(&loop_ember)
                    .header("X-Auth-Token", &bystander)
                    .send()
                    .await;
                lists.fetch_add(1, Ordering::SeqCst);
                if !answer.is_ok_and(|response| response.status().is_success()) {
                    failures.fetch_add(1, Ordering::SeqCst);
                }
            }
        })
    };

    let member = ember.member_token().to_owned();
    let attacks = (0..10).map(|round| {
        let ember = &ember;
        let member = member.clone();
        async move {
            let (status, body, length) = if round % 2 == 0 {
                call(
                    ember,
                    &member,
                    reqwest::Method::POST,
                    "/orchestration/v1/demo/stacks",
                    Some(json!({"stack_name": "x".repeat(1_000_000),
                        "template": {"heat_template_version": "2021-04-16", "resources": {}}})),
                )
                .await
            } else {
                call(
                    ember,
                    &member,
                    reqwest::Method::POST,
                    "/orchestration/v1/demo/validate",
                    Some(json!({"template": {"heat_template_version": "2021-04-16",
                        "resources": {"r": {"type": "T".repeat(200_000)}}}})),
                )
                .await
            };
            assert_eq!(status, 400, "{body}");
            assert!(length < 4096, "a bounded answer, got {length} bytes");
            let text = message(&body);
            assert!(
                text.contains("1000000 bytes") || text.contains("200000 bytes"),
                "the message says how large the value was: {text}"
            );
        }
    });
    futures::future::join_all(attacks).await;
    stop.store(1, Ordering::SeqCst);
    watcher.await.expect("watcher");
    assert!(lists.load(Ordering::SeqCst) > 0);
    assert_eq!(
        failures.load(Ordering::SeqCst),
        0,
        "another project's requests failed while the oversized ones ran"
    );
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_numbers_out_of_range_are_refused_and_change_nothing() {
    let ember = TestEmber::start_configured(|config| {
        config.engine.compute.build_ms = 0;
        config.engine.compute.delete_ms = 0;
    })
    .await;
    let token = ember.member_token().to_owned();
    let (status, body, _) = call(
        &ember,
        &token,
        reqwest::Method::POST,
        "/clustering/v1/profiles",
        Some(
            json!({"profile": {"name": "p", "spec": {"type": "ember.instance", "version": "1.0",
            "properties": {"flavor": "m1.small", "image": "debian-12"}}}}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body, _) = call(
        &ember,
        &token,
        reqwest::Method::POST,
        "/clustering/v1/clusters",
        Some(json!({"cluster": {"name": "c", "profile_id": "p", "min_size": 0, "desired_capacity": 3}})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let cluster = body["cluster"]["id"].as_str().expect("id").to_owned();
    let settled = || {
        let ember = &ember;
        let token = token.clone();
        let path = format!("/clustering/v1/clusters/{cluster}");
        async move {
            let (_, body, _) = call(ember, &token, reqwest::Method::GET, &path, None).await;
            body["cluster"]["status"] == "ACTIVE"
                && body["cluster"]["nodes"].as_array().map(Vec::len) == Some(3)
        }
    };
    wait_for("the cluster of 3", Duration::from_secs(20), settled).await;

    let actions = format!("/clustering/v1/clusters/{cluster}/actions");
    for attack in [
        json!({"resize": {"adjustment_type": "CHANGE_IN_PERCENTAGE", "number": 1e308}}),
        json!({"resize": {"adjustment_type": "CHANGE_IN_CAPACITY", "number": 1e300}}),
        json!({"resize": {"adjustment_type": "EXACT_CAPACITY", "number": -1}}),
        json!({"scale_out": {"count": 4_294_967_295_u64}}),
        json!({"scale_in": {"count": 4_294_967_295_u64}}),
    ] {
        let (status, body, _) = call(
            &ember,
            &token,
            reqwest::Method::POST,
            &actions,
            Some(attack.clone()),
        )
        .await;
        assert!(
            status == 400 || status == 409,
            "{attack}: refused up front, got {status} {body}"
        );
        assert!(!message(&body).is_empty(), "{attack}: a message: {body}");
    }
    // Nothing moved: still 3 nodes, ACTIVE, no action queued.
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(300) {
        assert!(settled().await, "the cluster changed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ember.stop().await;
}
