//! A cluster's `config` (Senlin's, API 1.7) through the Clustering REST
//! API: `node.name.format` names the members a create, a scale-out and a
//! resize add; `cluster.stop_node_before_delete` stops each instance
//! before its delete (on scale-in and on cluster delete), seen in the
//! instance's own events; bad values are refused with nothing created or
//! changed; `PATCH` replaces the config from 1.7 on and ignores it before,
//! as Senlin does; another project sees none of it.

use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use ember_tests::{TestEmber, wait_for};
use reqwest::Method;
use serde_json::{Value, json};

use crate::clustering::clusters::{Rest, location};

fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

/// One clustering call in microversion `version`.
async fn call_at(
    rest: &Rest<'_>,
    version: &str,
    method: Method,
    path: &str,
    body: Value,
) -> (StatusCode, HeaderMap, Value) {
    let response = rest
        .ember
        .http
        .request(method, rest.ember.url(&format!("/clustering/v1{path}")))
        .header("X-Auth-Token", &rest.token)
        .header("OpenStack-API-Version", format!("clustering {version}"))
        .json(&body)
        .send()
        .await
        .expect("request");
    let status = StatusCode::from_u16(response.status().as_u16()).expect("status");
    let headers = response.headers().clone();
    let text = response.text().await.expect("body");
    (
        status,
        headers,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

async fn nova_profile(rest: &Rest<'_>, name: &str) {
    rest.create_profile(json!({"name": name, "spec": {"type": "os.nova.server",
                "version": "1.0", "properties": {"flavor": "m1.small", "image": "cirros"}}}))
        .await;
}

/// Creates a cluster of `size` on `profile` with `config`, ACTIVE; its
/// body as the create answered it.
async fn configured_cluster(
    rest: &Rest<'_>,
    name: &str,
    profile: &str,
    size: u32,
    config: Value,
) -> Value {
    let (status, headers, body) = rest
        .post(
            "/clusters",
            json!({"cluster": {"name": name, "profile_id": profile, "desired_capacity": size,
                "max_size": -1, "config": config}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    body["cluster"].clone()
}

/// The member names of a cluster, sorted.
async fn member_names(rest: &Rest<'_>, cluster: &str) -> Vec<String> {
    let mut names: Vec<String> = rest
        .nodes(cluster)
        .await
        .iter()
        .map(|node| node["name"].as_str().expect("name").to_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_are_named_by_the_format_through_create_scale_out_and_resize() {
    let ember = TestEmber::start_configured(|config| {
        config.engine.compute.build_ms = 0;
    })
    .await;
    let rest = Rest::member(&ember);
    nova_profile(&rest, "named").await;
    let cluster = configured_cluster(
        &rest,
        "web",
        "named",
        2,
        json!({"node.name.format": "web-$3I", "scheduler.hint": "any"}),
    )
    .await;
    assert_eq!(
        cluster["config"],
        json!({"node.name.format": "web-$3I", "scheduler.hint": "any"}),
        "{cluster}"
    );
    let id = cluster["id"].as_str().expect("id").to_owned();
    assert_eq!(member_names(&rest, &id).await, ["web-001", "web-002"]);

    let scaled = rest.act(&id, json!({"scale_out": {"count": 1}})).await;
    rest.wait_action(&scaled, "SUCCEEDED").await;
    let resized = rest
        .act(
            &id,
            json!({"resize": {"adjustment_type": "EXACT_CAPACITY", "number": 4}}),
        )
        .await;
    rest.wait_action(&resized, "SUCCEEDED").await;
    assert_eq!(
        member_names(&rest, &id).await,
        ["web-001", "web-002", "web-003", "web-004"]
    );
    let shown = rest.get(&format!("/clusters/{id}")).await;
    assert_eq!(shown["cluster"]["config"]["node.name.format"], "web-$3I");

    // Random text: `$4r` is 4 lower-case letters or digits, a letter first.
    let random = configured_cluster(
        &rest,
        "db",
        "named",
        2,
        json!({"node.name.format": "db-$4r-$I"}),
    )
    .await;
    let names = member_names(&rest, random["id"].as_str().expect("id")).await;
    assert_eq!(names.len(), 2, "{names:?}");
    for name in &names {
        let (random_part, index) = name
            .strip_prefix("db-")
            .and_then(|rest| rest.split_once('-'))
            .expect("db-<random>-<index>");
        assert_eq!(random_part.len(), 4, "{name}");
        assert!(
            random_part.starts_with(|c: char| c.is_ascii_lowercase())
                && random_part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
            "{name}"
        );
        assert!(["1", "2"].contains(&index), "{name}");
    }

    // Without a config the members keep Ember's names.
    let plain = configured_cluster(&rest, "plain", "named", 1, json!({})).await;
    assert_eq!(plain["config"], json!({}));
    let names = member_names(&rest, plain["id"].as_str().expect("id")).await;
    assert!(names[0].starts_with("node-"), "{names:?}");

    // Another project sees neither the cluster nor its config.
    let stranger = Rest {
        ember: &ember,
        token: ember.outsider_token(),
    };
    let (status, _, body) = stranger
        .call(Method::GET, &format!("/clusters/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(stranger.get("/clusters").await["clusters"], json!([]));
    let (status, _, body) = call_at(
        &stranger,
        "1.7",
        Method::PATCH,
        &format!("/clusters/{id}"),
        json!({"cluster": {"config": {"node.name.format": "x-$I"}}}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let shown = rest.get(&format!("/clusters/{id}")).await;
    assert_eq!(shown["cluster"]["config"]["node.name.format"], "web-$3I");
    ember.stop().await;
}

/// The kinds of the instance's events (task outcomes), oldest first.
async fn instance_event_kinds(rest: &Rest<'_>, uuid: &str) -> Vec<String> {
    let response = rest
        .ember
        .http
        .get(
            rest.ember
                .url(&format!("/compute/v1/instances/{uuid}/events")),
        )
        .header("X-Auth-Token", &rest.token)
        .send()
        .await
        .expect("request");
    assert!(response.status().is_success(), "events of {uuid}");
    let body: Value = response.json().await.expect("JSON");
    body["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|event| event["kind"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The instance's status, or None once it is gone (404).
async fn instance_status(rest: &Rest<'_>, uuid: &str) -> Option<String> {
    let response = rest
        .ember
        .http
        .get(rest.ember.url(&format!("/compute/v1/instances/{uuid}")))
        .header("X-Auth-Token", &rest.token)
        .send()
        .await
        .expect("request");
    if response.status() == reqwest::StatusCode::NOT_FOUND {
        return None;
    }
    let body: Value = response.json().await.expect("JSON");
    Some(
        body["instance"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

/// Waits until the instance is being deleted (the delete is slow in this
/// test) and answers its event kinds then — before it is gone.
async fn event_kinds_while_deleting(rest: &Rest<'_>, uuid: &str) -> Vec<String> {
    wait_for(
        &format!("instance {uuid} to be DELETING"),
        Duration::from_secs(20),
        || async {
            let status = instance_status(rest, uuid).await;
            assert!(
                status.is_some(),
                "instance {uuid} was gone before it was seen deleting"
            );
            status.as_deref() == Some("DELETING")
        },
    )
    .await;
    instance_event_kinds(rest, uuid).await
}

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
async fn a_member_is_stopped_before_it_is_deleted_when_the_config_says_so() {
    let ember = TestEmber::start_configured(|config| {
        config.engine.compute.build_ms = 0;
        config.engine.compute.power_ms = 0;
        // Slow enough to look at the instance while it is being deleted.
        config.engine.compute.delete_ms = 1500;
    })
    .await;
    let rest = Rest::member(&ember);
    nova_profile(&rest, "stoppable").await;
    let stopping = configured_cluster(
        &rest,
        "stopping",
        "stoppable",
        2,
        json!({"cluster.stop_node_before_delete": true}),
    )
    .await;
    let stopping = stopping["id"].as_str().expect("id").to_owned();
    let plain = configured_cluster(&rest, "plain", "stoppable", 1, json!({})).await;
    let plain = plain["id"].as_str().expect("id").to_owned();

    // Scale-in: the victim's instance is powered off, then deleted.
    let scale_in = rest.act(&stopping, json!({"scale_in": {"count": 1}})).await;
    let victim = deleting_member(&rest, &stopping).await;
    let kinds = event_kinds_while_deleting(&rest, &victim).await;
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("power_off"),
        "stopped, then deleting: {kinds:?}"
    );
    rest.wait_action(&scale_in, "SUCCEEDED").await;
    assert_eq!(instance_status(&rest, &victim).await, None);
    let victim_node = rest
        .get(&format!(
            "/events?action=NODE_OPERATION&cluster_id={stopping}"
        ))
        .await;
    assert!(
        victim_node["events"]
            .as_array()
            .expect("events")
            .iter()
            .any(|event| event["status_reason"] == "stopped before delete"),
        "{victim_node}"
    );

    // Cluster delete stops the last member too.
    let last = physical_ids(&rest.nodes(&stopping).await);
    assert_eq!(last.len(), 1, "{last:?}");
    let (status, headers, body) = rest
        .call(Method::DELETE, &format!("/clusters/{stopping}"), None)
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let kinds = event_kinds_while_deleting(&rest, &last[0]).await;
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("power_off"),
        "{kinds:?}"
    );
    rest.wait_action(&location(&headers), "SUCCEEDED").await;

    // Without the config, nothing is stopped: deleted while running.
    let running = physical_ids(&rest.nodes(&plain).await);
    let scale_in = rest.act(&plain, json!({"scale_in": {"count": 1}})).await;
    let kinds = event_kinds_while_deleting(&rest, &running[0]).await;
    assert!(!kinds.iter().any(|kind| kind == "power_off"), "{kinds:?}");
    rest.wait_action(&scale_in, "SUCCEEDED").await;
    ember.stop().await;
}

/// Waits until a member of the cluster is DELETING; its instance id.
async fn deleting_member(rest: &Rest<'_>, cluster: &str) -> String {
    let found = std::sync::Mutex::new(None);
    wait_for(
        "a member to be chosen for removal",
        Duration::from_secs(20),
        || async {
            let deleting = rest
                .nodes(cluster)
                .await
                .iter()
                .find(|node| node["status"] == "DELETING")
                .and_then(|node| node["physical_id"].as_str().map(str::to_owned));
            let seen = deleting.is_some();
            *found.lock().expect("lock") = deleting;
            seen
        },
    )
    .await;
    found
        .into_inner()
        .expect("lock")
        .expect("a member is deleting")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_config_is_refused_and_nothing_is_created() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    nova_profile(&rest, "checked").await;
    let refused = [
        (json!("abc"), "The value (abc) is not a valid JSON."),
        (json!(5), "5 is not of type 'object'"),
        (json!([1, "a"]), "[1, 'a'] is not of type 'object'"),
        (
            json!({"cluster.stop_timeout_before_update": "soon"}),
            "invalid literal for int() with base 10: 'soon'",
        ),
        (
            json!({"cluster.stop_timeout_before_update": [30]}),
            "cluster.stop_timeout_before_update value must be of type int.",
        ),
        (
            json!({"cluster.stop_timeout_before_update": -3}),
            "Value must be >= 0 for field 'cluster.stop_timeout_before_update'. (got -3)",
        ),
        (
            json!({"cluster.stop_node_before_delete": "perhaps"}),
            "The value for 'cluster.stop_node_before_delete' must be a boolean, not \"perhaps\"",
        ),
        (
            json!({"node.name.format": 7}),
            "The value for 'node.name.format' must be a string, not 7",
        ),
    ];
    for (config, expected) in refused {
        let (status, _, body) = rest
            .post(
                "/clusters",
                json!({"cluster": {"name": "bad", "profile_id": "checked",
                    "desired_capacity": 1, "config": config}}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{config}: {body}");
        assert_eq!(message(&body), expected, "{config}");
    }
    let (status, _, body) = rest
        .post(
            "/clusters",
            json!({"cluster": {"name": "bad", "profile_id": "checked",
                "desired_capacity": 1, "config": {"node.name.format": "no spaces $I"}}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        message(&body).starts_with("The value for 'node.name.format' gives invalid node names"),
        "{body}"
    );
    assert_eq!(rest.get("/clusters").await["clusters"], json!([]));
    assert_eq!(rest.get("/nodes").await["nodes"], json!([]));
    assert_eq!(rest.get("/actions").await["actions"], json!([]));
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_replaces_the_config_from_microversion_1_7() {
    let ember = TestEmber::start_configured(|config| {
        config.engine.compute.build_ms = 0;
    })
    .await;
    let rest = Rest::member(&ember);
    nova_profile(&rest, "patched").await;
    let cluster = configured_cluster(
        &rest,
        "api",
        "patched",
        1,
        json!({"node.name.format": "old-$I"}),
    )
    .await;
    let id = cluster["id"].as_str().expect("id").to_owned();
    let path = format!("/clusters/{id}");

    // Before 1.7 Senlin drops `config` from an update: alone, nothing is
    // left to update.
    let (status, _, body) = call_at(
        &rest,
        "1.6",
        Method::PATCH,
        &path,
        json!({"cluster": {"config": {"node.name.format": "new-$2I"}}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(message(&body), "No property needs an update.");

    // A bad value: 400, the config as it was.
    let (status, _, body) = call_at(
        &rest,
        "1.7",
        Method::PATCH,
        &path,
        json!({"cluster": {"config": {"cluster.stop_timeout_before_update": "later"}}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        message(&body),
        "invalid literal for int() with base 10: 'later'"
    );
    let (status, _, body) = call_at(
        &rest,
        "1.7",
        Method::PATCH,
        &path,
        json!({"cluster": {"config": "not json"}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(message(&body), "The value (not json) is not a valid JSON.");

    // 1.7: replaced whole (the old format goes), the timeout made a number.
    let (status, headers, body) = call_at(
        &rest,
        "1.7",
        Method::PATCH,
        &path,
        json!({"cluster": {"config": {"node.name.format": "new-$2I",
            "cluster.stop_timeout_before_update": "45"}}}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    let shown = rest.get(&path).await;
    assert_eq!(
        shown["cluster"]["config"],
        json!({"node.name.format": "new-$2I", "cluster.stop_timeout_before_update": 45}),
        "{shown}"
    );
    let scaled = rest.act(&id, json!({"scale_out": {"count": 1}})).await;
    rest.wait_action(&scaled, "SUCCEEDED").await;
    assert_eq!(member_names(&rest, &id).await, ["new-02", "old-1"]);

    // The same config again changes nothing.
    let (status, _, body) = call_at(
        &rest,
        "1.7",
        Method::PATCH,
        &path,
        json!({"cluster": {"config": {"node.name.format": "new-$2I",
            "cluster.stop_timeout_before_update": 45}}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(message(&body), "No property needs an update.");
    ember.stop().await;
}
