//! Senlin's node calls through the Clustering REST API: check, recover and
//! the profile type's operations (`/nodes/{id}/actions`, `/nodes/{id}/ops`),
//! the 202 node update (a profile change replaces the node's instance),
//! node create's request checks, and one event by id — with the messages
//! Senlin's clients compare, and nothing reachable from another project.

use axum::http::StatusCode;
use ember_tests::TestEmber;
use reqwest::Method;
use serde_json::{Value, json};

use crate::clustering::clusters::{Rest, location};

fn nova_spec(flavor: &str) -> Value {
    json!({"type": "os.nova.server", "version": "1.0",
        "properties": {"flavor": flavor, "image": "cirros", "name": "server"}})
}

fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

async fn profile(rest: &Rest<'_>, name: &str, spec: Value) -> String {
    let (status, _, body) = rest
        .post(
            "/profiles",
            json!({"profile": {"name": name, "spec": spec}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["profile"]["id"].as_str().expect("id").to_owned()
}

/// An ACTIVE node of no cluster; its view.
async fn active_node(rest: &Rest<'_>, name: &str, profile: &str) -> Value {
    let (status, headers, body) = rest
        .post(
            "/nodes",
            json!({"node": {"name": name, "profile_id": profile, "role": "member",
                "metadata": {"k1": "v1"}}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    let id = body["node"]["id"].as_str().expect("id");
    rest.get(&format!("/nodes/{id}")).await["node"].clone()
}

/// POSTs to a node's `actions` or `ops`; the status and body, and the
/// `Location` when accepted.
async fn act(
    rest: &Rest<'_>,
    path: &str,
    version: &str,
    body: Value,
) -> (StatusCode, Value, Option<String>) {
    let response = rest
        .ember
        .http
        .post(rest.ember.url(&format!("/clustering/v1{path}")))
        .header("X-Auth-Token", &rest.token)
        .header("OpenStack-API-Version", format!("clustering {version}"))
        .json(&body)
        .send()
        .await
        .expect("request");
    let status = StatusCode::from_u16(response.status().as_u16()).expect("status");
    let location = response
        .headers()
        .get("location")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body, location)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_is_checked_recovered_and_operated_on_as_senlin_does() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let small = profile(&rest, "small", nova_spec("m1.small")).await;
    let node = active_node(&rest, "n1", &small).await;
    assert_eq!(node["profile_name"], "small", "{node}");
    assert_eq!(node["metadata"], json!({"k1": "v1"}), "{node}");
    assert!(
        node.get("tainted").is_none(),
        "1.12 shows no tainted: {node}"
    );
    let id = node["id"].as_str().expect("id").to_owned();
    let actions = format!("/nodes/{id}/actions");

    let detailed = rest.get(&format!("/nodes/{id}?show_details=true")).await["node"].clone();
    assert_eq!(detailed["details"]["id"], node["physical_id"], "{detailed}");
    assert_eq!(detailed["details"]["status"], "ACTIVE", "{detailed}");
    assert_eq!(detailed["details"]["flavor"], "m1.small", "{detailed}");
    assert!(
        node.get("details").is_none(),
        "details only when asked: {node}"
    );
    let (status, _, answer) = rest
        .call(
            Method::GET,
            &format!("/nodes/{id}?show_details=maybe"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(
        message(&answer),
        "Invalid value 'maybe' specified for 'show_details'"
    );

    let (status, body, at) = act(&rest, &actions, "1.12", json!({"check": {}})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let at = at.expect("Location");
    assert_eq!(
        at,
        format!(
            "/clustering/v1/actions/{}",
            body["action"].as_str().expect("id")
        )
    );
    rest.wait_action(&at, "SUCCEEDED").await;

    let (status, body, at) = act(
        &rest,
        &actions,
        "1.12",
        json!({"recover": {"operation": "REBUILD"}}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&at.expect("Location"), "SUCCEEDED").await;
    let recovered = rest.get(&format!("/nodes/{id}")).await["node"].clone();
    assert_eq!(recovered["status"], "ACTIVE", "{recovered}");
    assert_ne!(
        recovered["physical_id"], node["physical_id"],
        "a rebuild replaces the instance"
    );

    for (body, expected) in [
        (json!({}), "No action specified."),
        (
            json!({"check": {}, "recover": {}}),
            "Multiple actions specified.",
        ),
        (
            json!({"bogus": {}}),
            "Unrecognized action 'bogus' specified",
        ),
        (json!({"check": []}), "The params provided is not a map."),
        (
            json!({"recover": {"operation": "DANCE"}}),
            "Operation value 'DANCE' has to be one of the following: REBOOT, REBUILD, RECREATE.",
        ),
    ] {
        let (status, answer, _) = act(&rest, &actions, "1.12", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(message(&answer), expected, "{body}");
    }

    let ops = format!("/nodes/{id}/ops");
    let (status, body, at) = act(&rest, &ops, "1.4", json!({"reboot": {"type": "SOFT"}})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&at.expect("Location"), "SUCCEEDED").await;
    let (status, body, at) = act(&rest, &ops, "1.4", json!({"stop": {}})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&at.expect("Location"), "SUCCEEDED").await;
    let instance = rest.get(&format!("/nodes/{id}")).await["node"]["physical_id"].clone();
    assert!(instance.is_string(), "{instance}");

    for (version, body, expected) in [
        (
            "1.3",
            json!({"reboot": {}}),
            "API version '1.3' is not supported on this method.",
        ),
        ("1.4", json!({}), "No operation specified."),
        (
            "1.4",
            json!({"foo": {}, "bar": {}}),
            "Multiple operations specified.",
        ),
        (
            "1.4",
            json!({"dance": {}}),
            "The requested operation 'dance' is not supported by the profile type 'os.nova.server-1.0'.",
        ),
        (
            "1.4",
            json!({"reboot": {"type": "Unknown"}}),
            "'Unknown' must be one of the allowed values: SOFT, HARD.",
        ),
    ] {
        let (status, answer, _) = act(&rest, &ops, version, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(message(&answer), expected, "{body}");
    }

    // Another project reaches neither the node nor its events.
    let stranger = Rest {
        ember: &ember,
        token: ember.outsider_token(),
    };
    let (status, answer, _) = act(&stranger, &actions, "1.12", json!({"check": {}})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert_eq!(
        message(&answer),
        format!("The node '{id}' could not be found.")
    );
    let (status, answer, _) = act(&stranger, &ops, "1.4", json!({"reboot": {}})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");

    let events = rest.get(&format!("/events?oid={id}")).await["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        events.iter().any(|event| event["action"] == "NODE_RECOVER"),
        "{events:?}"
    );
    let event_id = events[0]["id"].as_str().expect("event id").to_owned();
    let event = rest.get(&format!("/events/{event_id}")).await["event"].clone();
    assert_eq!(event["id"], event_id.as_str(), "{event}");
    for key in [
        "action",
        "cluster_id",
        "level",
        "oid",
        "oname",
        "otype",
        "status",
        "timestamp",
    ] {
        assert!(event.get(key).is_some(), "{key} in {event}");
    }
    let (status, _, answer) = stranger
        .call(Method::GET, &format!("/events/{event_id}"), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert_eq!(
        message(&answer),
        format!("The event '{event_id}' could not be found.")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_update_answers_202_and_a_new_profile_replaces_its_instance() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let small = profile(&rest, "small", nova_spec("m1.small")).await;
    let large = profile(&rest, "large", nova_spec("m1.large")).await;
    let stack = profile(
        &rest,
        "stack",
        json!({"type": "os.heat.stack", "version": "1.0",
            "properties": {"template": {"heat_template_version": "2014-10-16", "resources": {}}}}),
    )
    .await;
    let node = active_node(&rest, "n1", &small).await;
    let id = node["id"].as_str().expect("id").to_owned();
    let path = format!("/nodes/{id}");

    let (status, headers, body) = rest
        .call(
            Method::PATCH,
            &path,
            Some(json!({"node": {"name": "renamed", "role": "admin", "metadata": {"k2": "v2"}}})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["node"]["name"], "renamed", "{body}");
    assert_eq!(body["node"]["profile_name"], "small", "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    let updated = rest.get(&path).await["node"].clone();
    assert_eq!(updated["role"], "admin", "{updated}");
    assert_eq!(updated["metadata"], json!({"k2": "v2"}), "{updated}");
    assert_eq!(
        updated["physical_id"], node["physical_id"],
        "no new instance"
    );

    let (status, headers, body) = rest
        .call(
            Method::PATCH,
            &path,
            Some(json!({"node": {"profile_id": "large"}})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    let moved = rest.get(&path).await["node"].clone();
    assert_eq!(moved["profile_id"], large.as_str(), "{moved}");
    assert_eq!(moved["profile_name"], "large", "{moved}");
    assert_eq!(moved["status"], "ACTIVE", "{moved}");
    assert_ne!(moved["physical_id"], node["physical_id"], "{moved}");

    for (update, expected) in [
        (json!({}), "No property needs an update.".to_owned()),
        (
            json!({"profile_id": stack}),
            "Cannot update a node to a different profile type, operation aborted.".to_owned(),
        ),
        (
            json!({"profile_id": "nowhere"}),
            "The specified profile 'nowhere' could not be found.".to_owned(),
        ),
    ] {
        let (status, _, body) = rest
            .call(Method::PATCH, &path, Some(json!({"node": update.clone()})))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{update}: {body}");
        assert_eq!(message(&body), expected, "{update}");
    }

    let stranger = Rest {
        ember: &ember,
        token: ember.outsider_token(),
    };
    let (status, _, body) = stranger
        .call(
            Method::PATCH,
            &path,
            Some(json!({"node": {"name": "mine"}})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(rest.get(&path).await["node"]["name"], "renamed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_create_refuses_what_senlin_refuses() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    profile(&rest, "small", nova_spec("m1.small")).await;
    for (body, expected) in [
        (json!({}), "Request body missing 'node' key."),
        (
            json!({"node": {"profile_id": "small"}}),
            "'name' is a required property",
        ),
        (
            json!({"node": {"name": "n"}}),
            "'profile_id' is a required property",
        ),
        (
            json!({"node": {"name": "n", "profile_id": "small", "boo": "foo"}}),
            "Additional properties are not allowed ('boo' was unexpected)",
        ),
        (
            json!({"node": {"name": "n", "profile_id": "nowhere"}}),
            "The specified profile 'nowhere' could not be found.",
        ),
        (
            json!({"node": {"name": "n", "profile_id": "small", "cluster_id": "nowhere"}}),
            "The specified cluster 'nowhere' could not be found.",
        ),
    ] {
        let (status, _, answer) = rest.post("/nodes", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(message(&answer), expected, "{body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_is_adopted_as_a_node_once_and_only_by_its_project() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let response = ember
        .http
        .post(ember.url("/compute/v1/instances"))
        .header("X-Auth-Token", &rest.token)
        .json(
            &json!({"instance": {"name": "legacy", "flavor": "m1.small", "image": "debian-12",
            "metadata": {"team": "web"}}}),
        )
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 202);
    let instance: Value = response.json().await.expect("json");
    let uuid = instance["instance"]["uuid"]
        .as_str()
        .expect("uuid")
        .to_owned();
    crate::instances::wait_for_status(&ember, &rest.token, &uuid, "ACTIVE").await;

    let (status, answer, _) = act(
        &rest,
        "/nodes/adopt-preview",
        "1.6",
        json!({"identity": uuid, "type": "os.nova.server-1.0"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(
        message(&answer),
        "API version '1.6' is not supported on this method."
    );
    let (status, answer, _) = act(
        &rest,
        "/nodes/adopt-preview",
        "1.7",
        json!({"identity": uuid, "type": "os.nova.server-1.0",
            "overrides": {"flavor": "m1.large"}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let preview = &answer["node_profile"]["node_preview"];
    assert_eq!(preview["type"], "os.nova.server", "{answer}");
    assert_eq!(preview["properties"]["image"], "debian-12", "{answer}");
    assert_eq!(preview["properties"]["flavor"], "m1.large", "{answer}");
    assert_eq!(
        preview["properties"]["metadata"],
        json!({"team": "web"}),
        "{answer}"
    );

    let stranger = Rest {
        ember: &ember,
        token: ember.outsider_token(),
    };
    let adopt = json!({"identity": uuid, "type": "os.nova.server-1.0", "name": "adopted",
        "role": "legacy"});
    let (status, answer, _) = act(&stranger, "/nodes/adopt", "1.7", adopt.clone()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(
        message(&answer),
        format!("The specified server '{uuid}' could not be found.")
    );

    let (status, answer, _) = act(&rest, "/nodes/adopt", "1.7", adopt.clone()).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let node = &answer["node"];
    assert_eq!(node["status"], "ACTIVE", "{answer}");
    assert_eq!(node["physical_id"], uuid.as_str(), "{answer}");
    assert_eq!(node["profile_name"], "prof-adopted", "{answer}");
    assert_eq!(node["cluster_id"], "", "{answer}");
    let (status, answer, _) = act(&rest, "/nodes/adopt", "1.7", adopt).await;
    assert_eq!(status, StatusCode::CONFLICT, "adopted twice: {answer}");

    for (body, expected) in [
        (
            json!({"type": "os.nova.server-1.0"}),
            "'identity' is a required property",
        ),
        (
            json!({"identity": uuid, "type": "os.heat.stack-1.0"}),
            "The profile_type 'os.heat.stack-1.0' could not be found (an instance is adopted as os.nova.server-1.0 or ember.instance-1.0).",
        ),
    ] {
        let (status, answer, _) = act(&rest, "/nodes/adopt", "1.7", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(message(&answer), expected, "{body}");
    }

    // The node manages the instance now: checking it reads the instance.
    let node_id = node["id"].as_str().expect("id").to_owned();
    let (status, body, at) = act(
        &rest,
        &format!("/nodes/{node_id}/actions"),
        "1.7",
        json!({"check": {}}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&at.expect("Location"), "SUCCEEDED").await;
}
