//! A cluster of worker containers (Senlin's container.dockerinc.docker-1.0
//! profile): scale-out makes running containers, a scale-in under a
//! deletion policy with a hook leaves the victim's container running until
//! the drainer (here, the test's webhook target) finishes and calls
//! complete_lifecycle — only then is it removed. A node whose container is
//! killed goes ERROR by itself, and recover replaces it.

use std::time::Duration;

use axum::http::StatusCode;
use ember_tests::containers::{ContainerEngine, ENGINE_DEADLINE};
use ember_tests::wait_for;
use serde_json::{Value, json};

use super::{ember_on, wait_running};
use crate::clustering::clusters::{Rest, attach, location, webhook_target};

fn physical_ids(nodes: &[Value]) -> Vec<String> {
    nodes
        .iter()
        .map(|node| {
            node["physical_id"]
                .as_str()
                .expect("physical id")
                .to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_containers_scale_out_and_in_through_a_draining_hook() {
    let Some(engine) = ContainerEngine::from_env("worker_containers_scale_out_and_in").await else {
        return;
    };
    let (ember, prefix) = ember_on(&engine, |_| {}).await;
    let rest = Rest::member(&ember);
    let (status, _, body) = rest
        .post(
            "/profiles",
            json!({"profile": {"name": "worker", "spec": {
                "type": "container.dockerinc.docker", "version": "1.0",
                "properties": {"image": engine.image, "name": "worker",
                    "command": "/bin/sh -c 'echo working; exec sleep 3600'",
                    "flavor": "half", "env": {"QUEUE": "jobs"}}}}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        body["profile"]["type"], "container.dockerinc.docker-1.0",
        "{body}"
    );
    let (status, headers, body) = rest
        .post(
            "/clusters",
            json!({"cluster": {"name": "workers", "profile_id": "worker", "desired_capacity": 2}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let cluster_id = body["cluster"]["id"].as_str().expect("id").to_owned();
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    let scaled = rest
        .act(&cluster_id, json!({"scale_out": {"count": 1}}))
        .await;
    rest.wait_action(&scaled, "SUCCEEDED").await;
    let nodes = rest.nodes(&cluster_id).await;
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    for uuid in physical_ids(&nodes) {
        assert!(engine.running(&uuid).await, "node container {uuid} runs");
        let container = engine.container_of(&uuid).await.expect("container");
        let env = container
            .config
            .and_then(|config| config.env)
            .unwrap_or_default();
        assert!(env.contains(&"QUEUE=jobs".to_owned()), "{env:?}");
    }
    assert_eq!(engine.containers(&prefix).await.len(), 3);

    // The drainer: a webhook target that receives one message per victim.
    let (url, received) = webhook_target().await;
    attach(
        &rest,
        &cluster_id,
        "drain",
        json!({"type": "senlin.policy.deletion", "version": "1.1", "properties": {
            "hooks": {"type": "webhook", "params": {"url": url}, "timeout": 120}}}),
    )
    .await;
    rest.act(&cluster_id, json!({"scale_in": {"count": 1}}))
        .await;
    wait_for("the hook message", Duration::from_secs(30), || async {
        !received.lock().expect("lock").is_empty()
    })
    .await;
    let message: Value = {
        let received = received.lock().expect("lock");
        serde_json::from_slice(&received[0].1).expect("JSON message")
    };
    let victim_node = message["node_id"].as_str().expect("node id").to_owned();
    let token = message["lifecycle_action_token"]
        .as_str()
        .expect("token")
        .to_owned();
    let victim = rest.get(&format!("/nodes/{victim_node}")).await["node"]["physical_id"]
        .as_str()
        .expect("victim's instance")
        .to_owned();
    // While the drainer works, the victim's container keeps running.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(engine.running(&victim).await, "still draining");
    assert_eq!(rest.nodes(&cluster_id).await.len(), 3);

    let (status, _, body) = rest
        .post(
            &format!("/clusters/{cluster_id}/actions"),
            json!({"complete_lifecycle": {"lifecycle_action_token": token}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    wait_for(
        "the victim's container removed",
        ENGINE_DEADLINE,
        || async { engine.container_of(&victim).await.is_none() },
    )
    .await;
    wait_for("two nodes left", ENGINE_DEADLINE, || async {
        rest.nodes(&cluster_id).await.len() == 2
    })
    .await;

    // A node whose container is killed goes ERROR without a check.
    let nodes = rest.nodes(&cluster_id).await;
    let dying = nodes[0].clone();
    let dying_instance = dying["physical_id"]
        .as_str()
        .expect("physical id")
        .to_owned();
    engine
        .kill_behind_the_back(&format!("{prefix}{dying_instance}"))
        .await;
    let node_path = format!("/nodes/{}", dying["id"].as_str().expect("node id"));
    wait_for("the node to be ERROR", ENGINE_DEADLINE, || async {
        rest.get(&node_path).await["node"]["status"] == "ERROR"
    })
    .await;
    let node = rest.get(&node_path).await;
    assert!(
        node["node"]["status_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("killed by SIGKILL"),
        "{node}"
    );
    // Recover replaces its container.
    let recovered = rest.act(&cluster_id, json!({"recover": {}})).await;
    rest.wait_action(&recovered, "SUCCEEDED").await;
    let node = rest.get(&node_path).await;
    assert_eq!(node["node"]["status"], "ACTIVE", "{node}");
    let replacement = node["node"]["physical_id"]
        .as_str()
        .expect("new instance")
        .to_owned();
    assert_ne!(replacement, dying_instance);
    wait_running(&engine, &replacement, true).await;
    assert!(engine.container_of(&dying_instance).await.is_none());

    let (status, _, body) = rest
        .call(
            reqwest::Method::DELETE,
            &format!("/clusters/{cluster_id}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    wait_for("every container removed", ENGINE_DEADLINE, || async {
        engine.containers(&prefix).await.is_empty()
    })
    .await;
    ember.stop().await;
}
