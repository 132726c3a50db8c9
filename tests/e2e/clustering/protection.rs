//! Scale-in protection through the Clustering REST API: a protected node
//! is never chosen by a scale-in or resize (which removes what it can and
//! says how many it could not), and deleting it — del_nodes, a node
//! delete, replace_nodes — is 409 naming the protection until it is
//! cleared; a profile's `protected` is the mark its new nodes start with.

use axum::http::StatusCode;
use ember_tests::TestEmber;
use reqwest::Method;
use serde_json::{Value, json};

use crate::clustering::clusters::{Rest, location};

fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

/// A profile `name` (protected or not) and a cluster of `size` nodes of it.
async fn cluster(rest: &Rest<'_>, name: &str, size: u32, protected: bool) -> String {
    let (status, _, body) = rest
        .post(
            "/profiles",
            json!({"profile": {"name": format!("{name}-p"), "protected": protected,
                "spec": {"type": "os.nova.server", "version": "1.0",
                "properties": {"flavor": "m1.small", "image": "cirros"}}}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["profile"]["protected"], protected, "{body}");
    let (status, headers, body) = rest
        .post(
            "/clusters",
            json!({"cluster": {"name": name, "profile_id": format!("{name}-p"),
                "desired_capacity": size, "max_size": -1}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    body["cluster"]["id"].as_str().expect("id").to_owned()
}

/// Marks `node` protected or not; the node as shown afterwards.
async fn protect(rest: &Rest<'_>, node: &str, protected: bool) -> Value {
    let (status, headers, body) = rest
        .call(
            Method::PATCH,
            &format!("/nodes/{node}"),
            Some(json!({"node": {"protected": protected}})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["node"]["protected"], protected, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    rest.get(&format!("/nodes/{node}")).await["node"].clone()
}

/// Runs a cluster action to its end; the action as it ended.
async fn finished(rest: &Rest<'_>, cluster: &str, action: Value, expected: &str) -> Value {
    let location = rest.act(cluster, action).await;
    rest.wait_action(&location, expected).await;
    rest.get(location.trim_start_matches("/clustering/v1"))
        .await["action"]
        .clone()
}

fn ids(nodes: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = nodes
        .iter()
        .map(|node| node["id"].as_str().expect("id").to_owned())
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protected_nodes_survive_every_removal_path_until_unprotected() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let cluster_id = cluster(&rest, "guarded", 3, false).await;
    let members = rest.nodes(&cluster_id).await;
    assert!(members.iter().all(|node| node["protected"] == false));
    let (kept, spare) = (ids(&members[..2]), ids(&members[2..]));
    for node in &kept {
        protect(&rest, node, true).await;
    }

    // Another project cannot see the node, let alone protect it.
    let mallory = ember.outsider_token();
    let other = Rest {
        ember: &ember,
        token: mallory,
    };
    let (status, _, body) = other
        .call(
            Method::PATCH,
            &format!("/nodes/{}", kept[0]),
            Some(json!({"node": {"protected": false}})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _, body) = rest
        .call(
            Method::PATCH,
            &format!("/nodes/{}", kept[0]),
            Some(json!({"node": {"protected": "perhaps"}})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // Deleting a protected node, by any path, is refused with why.
    let (status, _, body) = rest
        .call(Method::DELETE, &format!("/nodes/{}", kept[0]), None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        message(&body).contains("is protected from scale-in: clear its protection first"),
        "{body}"
    );
    let (status, _, body) = rest
        .post(
            &format!("/clusters/{cluster_id}/actions"),
            json!({"del_nodes": {"nodes": [kept[0], spare[0]]}}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(message(&body).contains("protected from scale-in"), "{body}");
    let allowed = rest
        .get(&format!("/nodes/{}/allowed?operation=delete", kept[1]))
        .await;
    assert_eq!(allowed["allowed"], false, "{allowed}");
    assert!(
        allowed["blockers"]
            .as_array()
            .is_some_and(|blockers| blockers
                .iter()
                .any(|blocker| blocker["kind"] == "protection")),
        "{allowed}"
    );
    let (status, headers, body) = rest
        .post(
            "/nodes",
            json!({"node": {"name": "stand-in", "profile_id": "guarded-p"}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    let stand_in = body["node"]["id"].as_str().expect("id").to_owned();
    let (status, _, body) = rest
        .post(
            &format!("/clusters/{cluster_id}/actions"),
            json!({"replace_nodes": {"nodes": {kept[1].clone(): stand_in}}}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(message(&body).contains("protected from scale-in"), "{body}");

    // A scale-in of 2 takes the one node it may, and says so.
    let action = finished(
        &rest,
        &cluster_id,
        json!({"scale_in": {"count": 2}}),
        "SUCCEEDED",
    )
    .await;
    let reason = action["status_reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(
            "1 node(s) removed, 1 fewer than asked: the other members are protected from scale-in"
        ),
        "{action}"
    );
    assert_eq!(ids(&rest.nodes(&cluster_id).await), kept);
    let shown = rest.get(&format!("/clusters/{cluster_id}")).await;
    assert_eq!(shown["cluster"]["desired_capacity"], 2, "{shown}");

    // With every member protected, a scale-in or a resize removes nothing.
    for request in [
        json!({"scale_in": {"count": 1}}),
        json!({"resize": {"adjustment_type": "EXACT_CAPACITY", "number": 1}}),
    ] {
        let action = finished(&rest, &cluster_id, request.clone(), "FAILED").await;
        assert!(
            action["status_reason"].as_str().is_some_and(
                |reason| reason.contains("2 of its 2 members are protected from scale-in")
            ),
            "{request}: {action}"
        );
        assert_eq!(ids(&rest.nodes(&cluster_id).await), kept, "{request}");
    }

    // Unprotected, a node goes as any other.
    protect(&rest, &kept[0], false).await;
    let (status, headers, body) = rest
        .call(Method::DELETE, &format!("/nodes/{}", kept[0]), None)
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    assert_eq!(ids(&rest.nodes(&cluster_id).await), [kept[1].clone()]);
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protected_profiles_nodes_start_protected() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let cluster_id = cluster(&rest, "pets", 2, true).await;
    let members = rest.nodes(&cluster_id).await;
    assert_eq!(members.len(), 2);
    assert!(
        members.iter().all(|node| node["protected"] == true),
        "{members:?}"
    );
    // Scaled out, the new node is protected too; scaled in, none goes.
    finished(
        &rest,
        &cluster_id,
        json!({"scale_out": {"count": 1}}),
        "SUCCEEDED",
    )
    .await;
    let members = rest.nodes(&cluster_id).await;
    assert_eq!(members.len(), 3);
    assert!(
        members.iter().all(|node| node["protected"] == true),
        "{members:?}"
    );
    finished(
        &rest,
        &cluster_id,
        json!({"scale_in": {"count": 1}}),
        "FAILED",
    )
    .await;
    assert_eq!(rest.nodes(&cluster_id).await.len(), 3);
    let (status, _, body) = rest
        .post(
            "/profiles",
            json!({"profile": {"name": "bad", "protected": "maybe",
                "spec": {"type": "os.nova.server", "version": "1.0",
                "properties": {"flavor": "m1.small", "image": "cirros"}}}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    ember.stop().await;
}
