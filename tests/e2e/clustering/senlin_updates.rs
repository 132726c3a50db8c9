//! Senlin's update, validate, replace, collect, cluster-policy and cancel
//! calls through the Clustering REST API: what each changes, the messages
//! Senlin's clients compare, and that another project reaches nothing.

use std::time::Duration;

use axum::http::StatusCode;
use ember_tests::{TestEmber, wait_for};
use reqwest::Method;
use serde_json::{Value, json};

use crate::clustering::clusters::{Rest, location, webhook_target};

fn nova_spec(flavor: &str) -> Value {
    json!({"type": "os.nova.server", "version": "1.0",
        "properties": {"flavor": flavor, "image": "cirros", "name": "server"}})
}

async fn created(rest: &Rest<'_>, path: &str, body: Value) -> Value {
    let (status, _, answer) = rest.post(path, body).await;
    assert!(status.is_success(), "POST {path}: {status} {answer}");
    answer
}

/// A cluster of `size` nodes of `profile`, ACTIVE; its id.
async fn cluster(rest: &Rest<'_>, name: &str, profile: &str, size: i32) -> String {
    let (status, headers, body) = rest
        .post(
            "/clusters",
            json!({"cluster": {"name": name, "profile_id": profile, "desired_capacity": size,
                "min_size": 0, "max_size": 10, "timeout": 120}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["cluster"]["timeout"], 120, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    body["cluster"]["id"].as_str().expect("id").to_owned()
}

fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_and_policies_are_renamed_and_validated_as_senlin_does() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let profile = created(
        &rest,
        "/profiles",
        json!({"profile": {"name": "p1", "spec": nova_spec("m1.small")}}),
    )
    .await["profile"]["id"]
        .as_str()
        .expect("id")
        .to_owned();

    let (status, _, body) = rest
        .call(
            Method::PATCH,
            &format!("/profiles/{profile}"),
            Some(json!({"profile": {"name": "p2", "metadata": {"k": "v"}}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["profile"]["name"], "p2");
    assert_eq!(body["profile"]["metadata"], json!({"k": "v"}));
    assert!(body["profile"]["updated_at"].is_string(), "{body}");
    assert_eq!(rest.get("/profiles/p2").await["profile"]["id"], profile);

    let (status, _, body) = rest
        .call(
            Method::PATCH,
            &format!("/profiles/{profile}"),
            Some(json!({"profile": {}})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(message(&body), "No property needs an update.");
    let (status, _, body) = rest
        .call(
            Method::PATCH,
            &format!("/profiles/{profile}"),
            Some(json!({"profile": {"name": "p3", "spec": {}}})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        message(&body).contains("Additional properties are not allowed"),
        "{body}"
    );

    let (status, _, body) = rest
        .post(
            "/profiles/validate",
            json!({"profile": {"spec": nova_spec("m1.small")}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["profile"]["name"], "validated_profile");
    assert_eq!(body["profile"]["type"], "os.nova.server-1.0");
    assert_eq!(body["profile"]["spec"], nova_spec("m1.small"));
    assert_eq!(
        rest.get("/profiles").await["profiles"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "validate stores nothing"
    );
    let (status, _, body) = rest
        .post("/profiles/validate", json!({"profile": {}}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(message(&body), "'spec' is a required property");

    let policy_spec = json!({"type": "senlin.policy.scaling", "version": "1.0",
        "properties": {"event": "CLUSTER_SCALE_IN", "adjustment": {"type": "CHANGE_IN_CAPACITY", "number": 1}}});
    let policy = created(
        &rest,
        "/policies",
        json!({"policy": {"name": "scale", "spec": policy_spec}}),
    )
    .await["policy"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let (status, _, body) = rest
        .call(
            Method::PATCH,
            &format!("/policies/{policy}"),
            Some(json!({"policy": {"name": "scale-2"}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["policy"]["name"], "scale-2");
    let (status, _, body) = rest
        .call(
            Method::PATCH,
            &format!("/policies/{policy}"),
            Some(json!({"policy": {}})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(message(&body), "'name' is a required property");
    let (status, _, body) = rest
        .post(
            "/policies/validate",
            json!({"policy": {"spec": policy_spec}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["policy"]["name"], "validated_policy");
    assert_eq!(body["policy"]["type"], "senlin.policy.scaling-1.0");

    // Another project renames nothing: both are not found.
    let mallory = Rest {
        ember: &ember,
        token: ember.outsider_token(),
    };
    for (path, body) in [
        (
            format!("/profiles/{profile}"),
            json!({"profile": {"name": "x"}}),
        ),
        (
            format!("/policies/{policy}"),
            json!({"policy": {"name": "x"}}),
        ),
    ] {
        let (status, _, answer) = mallory.call(Method::PATCH, &path, Some(body)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {answer}");
    }
    assert_eq!(
        rest.get(&format!("/profiles/{profile}")).await["profile"]["name"],
        "p2"
    );
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_update_renames_it_and_moves_its_members_to_a_new_profile() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    created(
        &rest,
        "/profiles",
        json!({"profile": {"name": "small", "spec": nova_spec("m1.small")}}),
    )
    .await;
    created(
        &rest,
        "/profiles",
        json!({"profile": {"name": "large", "spec": nova_spec("m1.large")}}),
    )
    .await;
    created(
        &rest,
        "/profiles",
        json!({"profile": {"name": "tiny", "spec": nova_spec("m1.tiny")}}),
    )
    .await;
    created(
        &rest,
        "/profiles",
        json!({"profile": {"name": "stack", "spec": {"type": "os.heat.stack", "version": "1.0",
            "properties": {"template": {"heat_template_version": "2016-10-14", "resources": {}}}}}}),
    )
    .await;
    let cluster_id = cluster(&rest, "web", "small", 2).await;
    let before: Vec<String> = rest
        .nodes(&cluster_id)
        .await
        .iter()
        .map(|node| node["physical_id"].as_str().unwrap_or_default().to_owned())
        .collect();

    let (status, headers, body) = rest
        .call(
            Method::PATCH,
            &format!("/clusters/{cluster_id}"),
            Some(
                json!({"cluster": {"name": "web-2", "metadata": {"tier": "front"}, "timeout": 240,
                "profile_id": "large"}}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert!(location(&headers).contains("/actions/"));
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    let shown = rest.get(&format!("/clusters/{cluster_id}")).await;
    assert_eq!(shown["cluster"]["name"], "web-2", "{shown}");
    assert_eq!(shown["cluster"]["timeout"], 240, "{shown}");
    assert_eq!(shown["cluster"]["metadata"], json!({"tier": "front"}));
    assert_eq!(shown["cluster"]["profile_name"], "large", "{shown}");
    assert_eq!(shown["cluster"]["status"], "ACTIVE", "{shown}");
    let large = rest.get("/profiles/large").await["profile"]["id"].clone();
    let nodes = rest.nodes(&cluster_id).await;
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    for node in &nodes {
        assert_eq!(node["profile_id"], large, "{node}");
        assert_eq!(node["status"], "ACTIVE", "{node}");
        let physical = node["physical_id"].as_str().unwrap_or_default().to_owned();
        assert!(!before.contains(&physical), "{node} kept its old resource");
    }

    // profile_only: the cluster moves, its members stay.
    let (status, headers, body) = rest
        .call(
            Method::PATCH,
            &format!("/clusters/{cluster_id}"),
            Some(json!({"cluster": {"profile_id": "tiny", "profile_only": true}})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    assert_eq!(
        rest.get(&format!("/clusters/{cluster_id}")).await["cluster"]["profile_name"],
        "tiny"
    );
    assert!(
        rest.nodes(&cluster_id)
            .await
            .iter()
            .all(|node| node["profile_id"] == large)
    );

    for (update, status, expected) in [
        (
            json!({"cluster": {}}),
            StatusCode::BAD_REQUEST,
            "No property needs an update.",
        ),
        (
            json!({"cluster": {"profile_id": "stack"}}),
            StatusCode::BAD_REQUEST,
            "Cannot update a cluster to a different profile type, operation aborted.",
        ),
        (
            json!({"cluster": {"profile_id": "nope"}}),
            StatusCode::BAD_REQUEST,
            "The specified profile 'nope' could not be found.",
        ),
        (
            json!({}),
            StatusCode::BAD_REQUEST,
            "Malformed request data, missing 'cluster' key in request body.",
        ),
    ] {
        let (got, _, body) = rest
            .call(
                Method::PATCH,
                &format!("/clusters/{cluster_id}"),
                Some(update.clone()),
            )
            .await;
        assert_eq!(got, status, "{update}: {body}");
        assert_eq!(message(&body), expected, "{update}");
    }

    // Collect: one attribute of every member.
    let (status, _, body) = rest
        .call(
            Method::GET,
            &format!("/clusters/{cluster_id}/attrs/details.status"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let values = body["cluster_attributes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(values.len(), 2, "{body}");
    assert!(
        values.iter().all(|value| value["value"] == "ACTIVE"),
        "{body}"
    );

    let mallory = Rest {
        ember: &ember,
        token: ember.outsider_token(),
    };
    let (status, _, body) = mallory
        .call(
            Method::PATCH,
            &format!("/clusters/{cluster_id}"),
            Some(json!({"cluster": {"name": "stolen"}})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _, body) = mallory
        .call(
            Method::GET,
            &format!("/clusters/{cluster_id}/attrs/name"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_nodes_swaps_a_member_for_an_orphan_and_policies_are_updated() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    created(
        &rest,
        "/profiles",
        json!({"profile": {"name": "small", "spec": nova_spec("m1.small")}}),
    )
    .await;
    let cluster_id = cluster(&rest, "web", "small", 1).await;
    let old = rest.nodes(&cluster_id).await[0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let (status, headers, body) = rest
        .post(
            "/nodes",
            json!({"node": {"name": "spare", "profile_id": "small"}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    let spare = body["node"]["id"].as_str().expect("id").to_owned();

    let (status, _, body) = rest
        .post(
            &format!("/clusters/{cluster_id}/actions"),
            json!({"replace_nodes": {"nodes": {spare.clone(): old.clone()}}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        message(&body).contains("to be replaced are not members of the cluster"),
        "{body}"
    );
    let done = rest
        .act(
            &cluster_id,
            json!({"replace_nodes": {"nodes": {old.clone(): spare.clone()}}}),
        )
        .await;
    rest.wait_action(&done, "SUCCEEDED").await;
    let members: Vec<Value> = rest.nodes(&cluster_id).await;
    assert_eq!(members.len(), 1, "{members:?}");
    assert_eq!(members[0]["id"], spare.as_str());
    // The replaced node left the cluster and stays, as Senlin leaves it.
    let left = rest.get(&format!("/nodes/{old}")).await;
    assert!(
        left["node"]["cluster_id"]
            .as_str()
            .is_none_or(str::is_empty),
        "{left}"
    );
    assert_eq!(left["node"]["status"], "ACTIVE", "{left}");
    assert_eq!(left["node"]["index"], -1, "an orphan's index: {left}");

    // Cluster policies: show one, disable it.
    created(
        &rest,
        "/policies",
        json!({"policy": {"name": "scale", "spec": {"type": "senlin.policy.scaling", "version": "1.0",
            "properties": {"event": "CLUSTER_SCALE_OUT", "adjustment": {"type": "CHANGE_IN_CAPACITY", "number": 1}}}}}),
    )
    .await;
    let attached = rest
        .act(
            &cluster_id,
            json!({"policy_attach": {"policy_id": "scale"}}),
        )
        .await;
    rest.wait_action(&attached, "SUCCEEDED").await;
    let policy_id = rest.get("/policies/scale").await["policy"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let binding = rest
        .get(&format!("/clusters/{cluster_id}/policies/{policy_id}"))
        .await;
    assert_eq!(binding["cluster_policy"]["enabled"], true, "{binding}");
    assert_eq!(
        binding["cluster_policy"]["cluster_name"], "web",
        "{binding}"
    );
    let updated = rest
        .act(
            &cluster_id,
            json!({"policy_update": {"policy_id": "scale", "enabled": false}}),
        )
        .await;
    rest.wait_action(&updated, "SUCCEEDED").await;
    let binding = rest
        .get(&format!("/clusters/{cluster_id}/policies/{policy_id}"))
        .await;
    assert_eq!(binding["cluster_policy"]["enabled"], false, "{binding}");

    let mallory = Rest {
        ember: &ember,
        token: ember.outsider_token(),
    };
    let (status, _, body) = mallory
        .call(
            Method::GET,
            &format!("/clusters/{cluster_id}/policies/{policy_id}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_node_waiting_for_its_lifecycle_keeps_the_node() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let (hook_url, _received) = webhook_target().await;
    created(
        &rest,
        "/profiles",
        json!({"profile": {"name": "small", "spec": nova_spec("m1.small")}}),
    )
    .await;
    let cluster_id = cluster(&rest, "web", "small", 2).await;
    created(
        &rest,
        "/policies",
        json!({"policy": {"name": "drain", "spec": {"type": "senlin.policy.deletion", "version": "1.1",
            "properties": {"hooks": {"type": "webhook", "params": {"url": hook_url}, "timeout": 600}}}}}),
    )
    .await;
    let attached = rest
        .act(
            &cluster_id,
            json!({"policy_attach": {"policy_id": "drain"}}),
        )
        .await;
    rest.wait_action(&attached, "SUCCEEDED").await;
    let scale_in = rest
        .act(&cluster_id, json!({"scale_in": {"count": 1}}))
        .await;

    let waiting_path = format!("/actions?cluster_id={cluster_id}&action=NODE_DELETE");
    let waiting_action = || async {
        let actions = rest.get(&waiting_path).await;
        actions["actions"].as_array().and_then(|actions| {
            actions
                .iter()
                .find(|action| action["status"] == "WAITING_LIFECYCLE_COMPLETION")
                .and_then(|action| action["id"].as_str().map(str::to_owned))
        })
    };
    wait_for(
        "a node delete waiting for its lifecycle",
        Duration::from_secs(30),
        || async { waiting_action().await.is_some() },
    )
    .await;
    let waiting = waiting_action().await.expect("a waiting node delete");

    // Another project cannot cancel it; a status other than CANCELLED is refused.
    let mallory = Rest {
        ember: &ember,
        token: ember.outsider_token(),
    };
    let cancel = json!({"action": {"status": "CANCELLED"}});
    let (status, _, body) = mallory
        .call(
            Method::PATCH,
            &format!("/actions/{waiting}"),
            Some(cancel.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _, body) = rest
        .call(
            Method::PATCH,
            &format!("/actions/{waiting}"),
            Some(json!({"action": {"status": "invalid"}})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    let (status, _, body) = rest
        .call(
            Method::PATCH,
            &format!("/actions/{waiting}"),
            Some(cancel.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let action = rest.get(&format!("/actions/{waiting}")).await;
    assert_eq!(action["action"]["status"], "CANCELLED", "{action}");
    assert!(action["action"]["end_time"].is_number(), "{action}");
    assert_eq!(action["action"]["cause"], "Derived Action", "{action}");
    // Nothing of the removal was done: the node stays, ACTIVE, and the
    // scale-in ends (not SUCCEEDED: its removal did not happen).
    rest.wait_action(&scale_in, "FAILED").await;
    let nodes = rest.nodes(&cluster_id).await;
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    assert!(
        nodes.iter().all(|node| node["status"] == "ACTIVE"),
        "{nodes:?}"
    );
    // A finished action is not cancelled again.
    let (status, _, body) = rest
        .call(Method::PATCH, &format!("/actions/{waiting}"), Some(cancel))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let scale_in_view = rest
        .get(scale_in.trim_start_matches("/clustering/v1"))
        .await;
    assert_eq!(scale_in_view["action"]["cause"], "RPC Request");
    assert!(
        scale_in_view["action"]["start_time"].is_number(),
        "{scale_in_view}"
    );
    ember.stop().await;
}
