//! Tenant webhooks never reach internal addresses (issue 40, SSRF): with
//! the default rules a deletion policy whose hook URL is (or resolves to)
//! loopback, link-local (the metadata service), or a private address is
//! refused with a 400 naming the host and why — on create and on validate
//! — and an operator's allow-list (`[webhook_targets] allow`) admits one
//! target, which is then delivered to over real HTTP, and only that
//! host:port.

use std::time::Duration;

use ember_tests::{TestEmber, wait_for};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::clusters::{Rest, cluster_with_hooks, hex_hmac, webhook_target};

fn deletion_policy(url: &str) -> Value {
    json!({"type": "senlin.policy.deletion", "version": "1.1", "properties": {
        "hooks": {"type": "webhook", "params": {"url": url}, "timeout": 60}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_to_internal_addresses_are_refused_by_default() {
    // The product's default rules (the harness's loopback allowance taken
    // back).
    let ember = TestEmber::start_configured(|config| {
        config.webhook_targets = Default::default();
    })
    .await;
    let rest = Rest::member(&ember);
    // A receiver really listens on loopback: refused all the same.
    let (listening, received) = webhook_target().await;
    let port = listening
        .rsplit(':')
        .next()
        .and_then(|tail| tail.split('/').next())
        .expect("a port")
        .to_owned();
    for (url, host, why) in [
        (listening.clone(), "127.0.0.1", "a loopback address"),
        (
            format!("http://[::1]:{port}/hook"),
            "::1",
            "a loopback address",
        ),
        (
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "169.254.169.254",
            "a link-local address",
        ),
        (
            format!("http://localhost:{port}/hook"),
            "localhost",
            "a loopback address",
        ),
        (
            "http://10.1.2.3/hook".to_owned(),
            "10.1.2.3",
            "a private address",
        ),
        (
            "http://0.0.0.0/hook".to_owned(),
            "0.0.0.0",
            "an unspecified address",
        ),
    ] {
        for (path, policy) in [
            (
                "/policies",
                json!({"name": "drain", "spec": deletion_policy(&url)}),
            ),
            ("/policies/validate", json!({"spec": deletion_policy(&url)})),
        ] {
            let (status, _, body) = rest.post(path, json!({"policy": policy})).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {url}: {body}");
            let message = body.to_string();
            assert!(
                message.contains(&format!("webhook host \\\"{host}\\\"")) && message.contains(why),
                "{path} {url}: {message}"
            );
        }
    }
    let (status, _, body) = rest
        .post(
            "/policies/validate",
            json!({"policy": {"spec": deletion_policy("http://93.184.215.14/hook")}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "a public address is fine: {body}");
    let policies = rest.get("/policies").await;
    assert_eq!(policies["policies"], json!([]), "nothing was recorded");
    assert!(
        received.lock().expect("lock").is_empty(),
        "nothing was called"
    );
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allow_listed_target_is_accepted_and_delivered_to() {
    let (hook_url, received) = webhook_target().await;
    let endpoint = hook_url
        .trim_start_matches("http://")
        .trim_end_matches("/hook")
        .to_owned();
    let ember = TestEmber::start_configured(|config| {
        config.webhook_targets = ember_runtime::egress::WebhookTargetsSection {
            allow_private_addresses: false,
            allow: vec![endpoint.clone()],
        };
    })
    .await;
    let rest = Rest::member(&ember);
    // Only that host:port: the same address on another port is refused.
    let other_port = "http://127.0.0.1:1/hook";
    let (status, _, body) = rest
        .post(
            "/policies/validate",
            json!({"policy": {"spec": deletion_policy(other_port)}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    let (cluster_id, _) = cluster_with_hooks(
        &rest,
        1,
        json!({"type": "webhook", "params": {"url": hook_url}, "timeout": 60}),
    )
    .await;
    rest.act(&cluster_id, json!({"scale_in": {"count": 1}}))
        .await;
    wait_for("the hook's delivery", Duration::from_secs(20), || {
        let received = received.clone();
        async move { !received.lock().expect("lock").is_empty() }
    })
    .await;
    let (signature, body) = received.lock().expect("lock")[0].clone();
    assert_eq!(signature, hex_hmac(&ember.running.webhook_secret, &body));
    let message: Value = serde_json::from_slice(&body).expect("JSON message");
    assert_eq!(message["cluster_id"], cluster_id.as_str(), "{message}");
    ember.stop().await;
}
