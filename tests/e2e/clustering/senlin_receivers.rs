//! Senlin's receivers through the Clustering REST API: a webhook receiver
//! is created for a cluster, found by id, name or short id, listed,
//! updated and deleted; its alarm URL fires the action with no token, as
//! the receiver's creator (a scale-out grows the cluster); another project
//! can neither see nor change it, a guessed id is 404 like any other, and
//! deleting its cluster deletes it.

use std::time::Duration;

use axum::http::StatusCode;
use ember_tests::{TestEmber, wait_for};
use reqwest::Method;
use serde_json::{Value, json};

use crate::clustering::clusters::{Rest, location};

fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

/// An ACTIVE cluster of `desired` nodes (max 5); its id.
pub(crate) async fn active_cluster(rest: &Rest<'_>, name: &str, desired: i32) -> String {
    active_cluster_of(rest, name, desired, 5).await
}

/// An ACTIVE cluster of `desired` nodes, at most `max_size`, of a profile
/// of its own name; its id.
pub(crate) async fn active_cluster_of(
    rest: &Rest<'_>,
    name: &str,
    desired: i32,
    max_size: i32,
) -> String {
    rest.create_profile(
        json!({"name": name, "spec": {"type": "ember.instance", "version": "1.0",
                "properties": {"flavor": "m1.small", "image": "debian-12"}}}),
    )
    .await;
    let (status, headers, body) = rest
        .post(
            "/clusters",
            json!({"cluster": {"name": name, "profile_id": name, "min_size": 0,
                "max_size": max_size, "desired_capacity": desired}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    body["cluster"]["id"].as_str().expect("id").to_owned()
}

/// POSTs `url` (a whole alarm URL) with no token: status, Location, body.
pub(crate) async fn trigger(
    ember: &TestEmber,
    url: &str,
    body: Option<Value>,
) -> (StatusCode, String, Value) {
    let mut request = ember.http.post(url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = StatusCode::from_u16(response.status().as_u16()).expect("status");
    let location = response
        .headers()
        .get("location")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, location, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_receiver_scales_its_cluster_without_a_token() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let cluster_id = active_cluster(&rest, "web", 1).await;

    let (status, _, body) = rest
        .post(
            "/receivers",
            json!({"receiver": {"name": "grow", "type": "webhook", "cluster_id": "web",
                "action": "CLUSTER_SCALE_OUT", "params": {"count": 1}}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let receiver = body["receiver"].clone();
    for key in [
        "action",
        "actor",
        "channel",
        "cluster_id",
        "created_at",
        "domain",
        "id",
        "name",
        "params",
        "project",
        "type",
        "updated_at",
        "user",
    ] {
        assert!(receiver.get(key).is_some(), "{key} in {receiver}");
    }
    assert_eq!(receiver["cluster_id"], cluster_id.as_str(), "{receiver}");
    assert_eq!(receiver["params"], json!({"count": 1}), "{receiver}");
    let id = receiver["id"].as_str().expect("id").to_owned();
    // Random, not time-ordered: a v7 id's first 48 bits would be now in
    // milliseconds (all 128 bits are random: 2^-128 to guess).
    let leading = uuid::Uuid::parse_str(&id).expect("a UUID").as_u128() >> 80;
    let now = u128::try_from(chrono::Utc::now().timestamp_millis()).expect("after 1970");
    assert!(
        leading.abs_diff(now) > 86_400_000,
        "the id starts with the time: {id}"
    );
    let alarm_url = receiver["channel"]["alarm_url"]
        .as_str()
        .expect("alarm_url")
        .to_owned();
    assert_eq!(
        alarm_url,
        ember.url(&format!("/clustering/v1/webhooks/{id}/trigger?V=2")),
        "the gateway's URL with the receiver id"
    );

    // Found by id, name and short id; listed with filters.
    for name_or_id in [id.as_str(), "grow", &id[..8]] {
        let shown = rest.get(&format!("/receivers/{name_or_id}")).await;
        assert_eq!(
            shown["receiver"]["id"],
            id.as_str(),
            "{name_or_id}: {shown}"
        );
    }
    let listed = rest
        .get(&format!(
            "/receivers?cluster_id={cluster_id}&action=CLUSTER_SCALE_OUT"
        ))
        .await;
    assert_eq!(
        listed["receivers"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    let none = rest.get("/receivers?action=CLUSTER_RESIZE").await;
    assert_eq!(none["receivers"], json!([]), "{none}");

    // Firing it needs no token and runs as its creator: one more node.
    let (status, action_location, body) = trigger(&ember, &alarm_url, None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert!(
        action_location.ends_with(&format!(
            "/actions/{}",
            body["action"].as_str().unwrap_or("?")
        )),
        "{action_location} {body}"
    );
    rest.wait_action(&action_location, "SUCCEEDED").await;
    let action = rest
        .get(&action_location.replace("/clustering/v1", ""))
        .await;
    assert_eq!(action["action"]["action"], "CLUSTER_SCALE_OUT", "{action}");
    assert_eq!(rest.nodes(&cluster_id).await.len(), 2);

    // The trigger's params win over the receiver's (version 1's shape too).
    let (status, action_location, body) =
        trigger(&ember, &alarm_url, Some(json!({"params": {"count": 2}}))).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&action_location, "SUCCEEDED").await;
    assert_eq!(rest.nodes(&cluster_id).await.len(), 4);

    // A bad parameter is said plainly; no V is Senlin's 400.
    let (status, _, body) = trigger(&ember, &alarm_url, Some(json!({"count": "lots"}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(message(&body), "params: count must be an integer", "{body}");
    let (status, _, body) = trigger(&ember, alarm_url.trim_end_matches("?V=2"), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        message(&body),
        "V query parameter is required in webhook trigger URL"
    );

    // Guesses are 404 like an id that was never made: a name, a short id,
    // another random id.
    for guess in ["grow", &id[..8], &uuid::Uuid::new_v4().to_string()] {
        let url = ember.url(&format!("/clustering/v1/webhooks/{guess}/trigger?V=2"));
        let (status, _, body) = trigger(&ember, &url, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{guess}: {body}");
        assert_eq!(
            message(&body),
            format!("The receiver '{guess}' could not be found."),
            "{body}"
        );
    }

    // Updated: name and params; nothing to change is Senlin's 400.
    let (status, _, body) = rest
        .call(
            Method::PATCH,
            &format!("/receivers/{id}"),
            Some(json!({"receiver": {"name": "grow-more", "params": {"count": "1"}}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["receiver"]["name"], "grow-more", "{body}");
    assert_eq!(body["receiver"]["params"], json!({"count": "1"}), "{body}");
    assert!(body["receiver"]["updated_at"].is_string(), "{body}");
    let (status, _, body) = rest
        .call(
            Method::PATCH,
            &format!("/receivers/{id}"),
            Some(json!({"receiver": {"name": "grow-more"}})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(message(&body), "No property needs an update.");

    // Deleting the receiver revokes its URL.
    let (status, _, body) = rest
        .post(
            "/receivers",
            json!({"receiver": {"name": "shrink", "type": "webhook", "cluster_id": cluster_id,
                "action": "CLUSTER_SCALE_IN"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let shrink_id = body["receiver"]["id"].as_str().expect("id").to_owned();
    let shrink_url = body["receiver"]["channel"]["alarm_url"]
        .as_str()
        .expect("alarm_url")
        .to_owned();
    let (status, _, body) = rest
        .call(Method::DELETE, &format!("/receivers/{shrink_id}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (status, _, body) = trigger(&ember, &shrink_url, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");

    // Deleting the cluster deletes its receivers (Senlin's CLUSTER_DELETE).
    let (status, headers, body) = rest
        .call(Method::DELETE, &format!("/clusters/{cluster_id}"), None)
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    let (status, _, body) = trigger(&ember, &alarm_url, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(
        message(&body),
        format!("The receiver '{id}' could not be found.")
    );
    let (status, _, body) = rest
        .call(Method::GET, &format!("/receivers/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(rest.get("/receivers").await["receivers"], json!([]));
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receivers_are_checked_and_stay_in_their_project() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let cluster_id = active_cluster(&rest, "db", 0).await;
    let create = |receiver: Value| {
        let rest = &rest;
        async move {
            rest.post("/receivers", json!({ "receiver": receiver }))
                .await
        }
    };

    // Senlin's messages for each bad request.
    let refused = [
        (
            json!({"name": "r", "type": "bogus", "cluster_id": "db", "action": "CLUSTER_SCALE_IN"}),
            "Value 'bogus' is not acceptable for field 'type'.",
        ),
        (
            json!({"name": "r", "type": "webhook", "cluster_id": "db", "action": "ILLEGAL_ACTION"}),
            "Value 'ILLEGAL_ACTION' is not acceptable for field 'action'.",
        ),
        (
            json!({"name": "r", "type": "webhook", "cluster_id": "db", "action": "CLUSTER_CREATE"}),
            "Action name cannot be any of ['CLUSTER_CREATE'].",
        ),
        (
            json!({"name": "r", "type": "webhook", "action": "CLUSTER_SCALE_IN"}),
            "Cluster identity is required for creating webhook receiver.",
        ),
        (
            json!({"name": "r", "type": "webhook", "cluster_id": "db"}),
            "Action name is required for creating webhook receiver.",
        ),
        (
            json!({"name": "r", "type": "webhook", "cluster_id": "e281873f-0dff-4be6-8795-f781efe7cc14",
                "action": "CLUSTER_SCALE_IN"}),
            "The referenced cluster 'e281873f-0dff-4be6-8795-f781efe7cc14' could not be found.",
        ),
        (
            json!({"name": "r", "type": "webhook", "cluster_id": "db", "action": "CLUSTER_SCALE_IN",
                "params": {"count": "lots"}}),
            "params: count must be an integer",
        ),
        (
            json!({"name": "r", "type": "webhook", "cluster_id": "db", "action": "CLUSTER_SCALE_IN",
                "params": {"number": 1}}),
            "params: CLUSTER_SCALE_IN takes count (got \"number\")",
        ),
    ];
    for (receiver, expected) in refused {
        let (status, _, body) = create(receiver.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{receiver}: {body}");
        assert_eq!(message(&body), expected, "{receiver}");
    }
    let (status, _, body) = rest
        .post(
            "/receivers",
            json!({"receive": {"name": "r", "type": "webhook"}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // A reader may look but not make one.
    let reader = Rest {
        ember: &ember,
        token: ember.token_for("reader", "demo", &["reader"]),
    };
    let (status, _, body) = reader
        .post(
            "/receivers",
            json!({"receiver": {"name": "r", "type": "webhook", "cluster_id": "db",
                "action": "CLUSTER_SCALE_IN"}}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");

    // Two receivers of one name: that name is ambiguous.
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (status, _, body) = create(json!({"name": "r-01", "type": "webhook",
            "cluster_id": cluster_id, "action": "CLUSTER_RESIZE", "params": {"max_size": 2}}))
        .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        ids.push(body["receiver"]["id"].as_str().expect("id").to_owned());
    }
    for method in [Method::GET, Method::DELETE] {
        let (status, _, body) = rest.call(method.clone(), "/receivers/r-01", None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {body}");
        assert_eq!(
            message(&body),
            "Multiple results found matching the query criteria 'r-01'. Please be more specific."
        );
    }
    // A message receiver names its queue.
    let (status, _, body) = create(json!({"name": "queue", "type": "message"})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let queue_id = body["receiver"]["id"].as_str().expect("id").to_owned();
    assert_eq!(
        body["receiver"]["channel"]["queue_name"],
        format!("senlin-receiver-{queue_id}").as_str(),
        "{body}"
    );
    assert_eq!(body["receiver"]["cluster_id"], Value::Null, "{body}");
    // ... and is no webhook.
    let url = ember.url(&format!("/clustering/v1/webhooks/{queue_id}/trigger?V=2"));
    let (status, _, body) = trigger(&ember, &url, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");

    // Listing: Senlin's parameter checks; only admins list every project.
    let (status, _, body) = rest
        .call(Method::GET, "/receivers?global_project=True", None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        message(&body),
        "You are not authorized to complete this operation."
    );
    let (status, _, body) = rest
        .call(Method::GET, "/receivers?sort=bad-sort", None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        message(&body),
        "Unsupported sort key 'bad-sort' for 'sort'."
    );
    let page = rest.get("/receivers?sort=name:desc&limit=2").await;
    let names: Vec<&str> = page["receivers"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|receiver| receiver["name"].as_str())
        .collect();
    assert_eq!(names, ["r-01", "r-01"], "{page}");
    let marker = page["receivers"][1]["id"].as_str().expect("id");
    let rest_of_it = rest
        .get(&format!("/receivers?sort=name:desc&marker={marker}"))
        .await;
    assert_eq!(
        rest_of_it["receivers"].as_array().map(Vec::len),
        Some(1),
        "{rest_of_it}"
    );
    let admin = Rest {
        ember: &ember,
        token: ember.admin_token().to_owned(),
    };
    let everyone = admin.get("/receivers?global_project=true").await;
    assert_eq!(
        everyone["receivers"].as_array().map(Vec::len),
        Some(3),
        "{everyone}"
    );

    // Another project sees none of it, and changes none of it.
    let foreign = Rest {
        ember: &ember,
        token: ember.outsider_token(),
    };
    let theirs = foreign.get("/receivers").await;
    assert_eq!(theirs["receivers"], json!([]), "{theirs}");
    for (method, body) in [
        (Method::GET, None),
        (Method::PATCH, Some(json!({"receiver": {"name": "mine"}}))),
        (Method::DELETE, None),
    ] {
        for name_or_id in [ids[0].as_str(), "r-01", &ids[0][..8]] {
            let (status, _, answer) = foreign
                .call(
                    method.clone(),
                    &format!("/receivers/{name_or_id}"),
                    body.clone(),
                )
                .await;
            assert_eq!(
                status,
                StatusCode::NOT_FOUND,
                "{method} {name_or_id}: {answer}"
            );
        }
    }
    // Nor can it point a receiver at the cluster.
    let (status, _, body) = foreign
        .post(
            "/receivers",
            json!({"receiver": {"name": "r", "type": "webhook", "cluster_id": cluster_id,
                "action": "CLUSTER_SCALE_IN"}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // Everything of the owner's is as it was.
    for id in &ids {
        let shown = rest.get(&format!("/receivers/{id}")).await;
        assert_eq!(shown["receiver"]["name"], "r-01", "{shown}");
    }

    // The resize webhook Senlin's suite fires: SUCCEEDED.
    let shown = rest.get(&format!("/receivers/{}", ids[0])).await;
    let url = shown["receiver"]["channel"]["alarm_url"]
        .as_str()
        .expect("alarm_url")
        .to_owned();
    let (status, action_location, body) = trigger(&ember, &url, None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&action_location, "SUCCEEDED").await;
    wait_for("max_size 2", Duration::from_secs(10), || {
        let rest = &rest;
        let path = format!("/clusters/{cluster_id}");
        async move { rest.get(&path).await["cluster"]["max_size"] == 2 }
    })
    .await;
    ember.stop().await;
}
