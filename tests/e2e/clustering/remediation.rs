//! A health policy's remediation budget through the Clustering REST API:
//! a node marked unhealthy (`mark_unhealthy`, Ember's node action) is
//! recovered by the cluster's health policy while the budget allows, the
//! next is held with the reason, and the cluster view and "allowed?" show
//! the budget. Another project cannot mark a node it cannot see.

use std::time::Duration;

use axum::http::StatusCode;
use ember_tests::{TestEmber, wait_for};
use serde_json::{Value, json};

use crate::clustering::clusters::{Rest, location};

async fn mark(rest: &Rest<'_>, node: &str, body: Value) -> (StatusCode, Value) {
    let (status, _, body) = rest
        .post(
            &format!("/nodes/{node}/actions"),
            json!({ "mark_unhealthy": body }),
        )
        .await;
    (status, body)
}

/// The project's NODE_RECOVER actions (its one cluster's).
async fn recoveries(rest: &Rest<'_>) -> usize {
    let actions = rest.get("/actions?action=NODE_RECOVER").await;
    actions["actions"].as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn marked_nodes_are_recovered_within_the_budget_and_the_rest_held() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    rest.create_profile(json!({"name": "heal-p", "spec": {"type": "ember.instance",
                "version": "1.0", "properties": {"flavor": "m1.small", "image": "debian-12"}}}))
        .await;
    let (status, headers, body) = rest
        .post(
            "/clusters",
            json!({"cluster": {"name": "heal", "profile_id": "heal-p", "desired_capacity": 3,
                "max_size": 5}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let cluster_id = body["cluster"]["id"].as_str().expect("id").to_owned();
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    let (status, _, body) = rest
        .post(
            "/policies",
            json!({"policy": {"name": "heal-health", "spec": {"type": "senlin.policy.health",
                "version": "1.1", "properties": {
                    "detection": {"detection_modes": [{"type": "NODE_STATUS_POLLING"}]},
                    "recovery": {"actions": [{"name": "RECREATE"}]},
                    "remediation": {"max_unhealthy": "67%", "max_recoveries": 1, "window": 600}}}}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, _, body) = rest
        .post(
            "/policies",
            json!({"policy": {"name": "bad-health", "spec": {"type": "senlin.policy.health",
                "version": "1.1", "properties": {"remediation": {"max_unhealthy": "140%"}}}}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let attached = rest
        .act(
            &cluster_id,
            json!({"policy_attach": {"policy_id": "heal-health"}}),
        )
        .await;
    rest.wait_action(&attached, "SUCCEEDED").await;
    let shown = rest.get(&format!("/clusters/{cluster_id}")).await;
    let budget = &shown["cluster"]["remediation"];
    assert_eq!(budget["policy"], "heal-health", "{shown}");
    assert_eq!(budget["max_unhealthy"], "67%", "{shown}");
    assert_eq!(budget["max_unhealthy_count"], 2, "{shown}");
    assert_eq!(budget["remaining"], 1, "{shown}");
    assert_eq!(budget["held"], Value::Null, "{shown}");
    let listed = rest.get("/clusters").await;
    assert!(
        listed["clusters"][0].get("remediation").is_none(),
        "lists carry no budget: {listed}"
    );

    let nodes = rest.nodes(&cluster_id).await;
    let ids: Vec<String> = nodes
        .iter()
        .map(|node| node["id"].as_str().expect("id").to_owned())
        .collect();

    // Another project cannot mark the node; bad bodies are refused.
    let mallory = ember.outsider_token();
    let other = Rest {
        ember: &ember,
        token: mallory,
    };
    let (status, body) = mark(&other, &ids[0], json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    for bad in [json!({"reason": 7}), json!({"why": "x"}), json!("x")] {
        let (status, body) = mark(&rest, &ids[0], bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }

    // The first is recovered: the budget allows one per 600 s.
    let (status, body) = mark(&rest, &ids[0], json!({"reason": "disk errors"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["node"]["status"], "ERROR", "{body}");
    assert_eq!(
        body["node"]["status_reason"], "marked unhealthy by demo: disk errors",
        "{body}"
    );
    let (status, body) = mark(&rest, &ids[0], json!({})).await;
    assert!(
        status == StatusCode::CONFLICT,
        "an unhealthy or recovering node is not marked again: {status} {body}"
    );
    wait_for("the node recovered", Duration::from_secs(20), || async {
        rest.get(&format!("/nodes/{}", ids[0])).await["node"]["status"] == "ACTIVE"
    })
    .await;
    assert_eq!(recoveries(&rest).await, 1);

    // The second waits for the window, and says so (the mark answers once
    // the policy has decided).
    let (status, body) = mark(&rest, &ids[1], json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        rest.get(&format!("/nodes/{}", ids[1])).await["node"]["status"],
        "ERROR"
    );
    assert_eq!(recoveries(&rest).await, 1);
    let shown = rest.get(&format!("/clusters/{cluster_id}")).await;
    let budget = &shown["cluster"]["remediation"];
    assert_eq!(budget["remaining"], 0, "{shown}");
    assert_eq!(budget["recoveries_in_window"], 1, "{shown}");
    assert!(
        budget["held"].as_str().is_some_and(|held| held
            .starts_with("automatic recovery held: the budget of 1 recoveries per 600 s is spent")),
        "{shown}"
    );
    let allowed = rest
        .get(&format!("/clusters/{cluster_id}/allowed?operation=recover"))
        .await;
    assert_eq!(allowed["remediation"]["remaining"], 0, "{allowed}");
    let events = rest
        .get(&format!(
            "/events?cluster_id={cluster_id}&action=CLUSTER_RECOVER"
        ))
        .await;
    assert!(
        events["events"]
            .as_array()
            .is_some_and(|events| events.iter().any(|event| event["status"] == "HELD")),
        "{events}"
    );
    ember.stop().await;
}
