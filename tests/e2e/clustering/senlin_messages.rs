//! Senlin's message receivers through the gateway: messages posted to a
//! receiver's queue with Zaqar's v2 call run their cluster action as the
//! receiver's creator (a scale-out grows the cluster; two messages, two
//! actions); `POST /receivers/{id}/notify` runs pending ones; bad bodies,
//! a missing Client-ID and another project's queue are refused with
//! nothing stored; a message naming a cluster that does not exist is
//! dropped with an ERROR event on the receiver; a deleted receiver's queue
//! is gone; gRPC callers post with `PostReceiverMessages`.

use std::time::Duration;

use axum::http::StatusCode;
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::receiver_service_client::ReceiverServiceClient;
use ember_runtime::database::testing::TestDatabase;
use ember_tests::{TestEmber, wait_for};
use reqwest::Method;
use serde_json::{Value, json};

use crate::clustering::clusters::Rest;

const CLIENT_ID: &str = "3381af92-2b9e-11e3-b191-71861300734c";

/// An ACTIVE cluster of `desired` nodes (max 6); its id.
pub(crate) async fn active_cluster(rest: &Rest<'_>, name: &str, desired: i32) -> String {
    crate::clustering::senlin_receivers::active_cluster_of(rest, name, desired, 6).await
}

/// A message receiver named `name`: its id and queue name.
pub(crate) async fn message_receiver(rest: &Rest<'_>, name: &str) -> (String, String) {
    let (status, _, body) = rest
        .post(
            "/receivers",
            json!({"receiver": {"name": name, "type": "message"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["receiver"]["id"].as_str().expect("id").to_owned();
    let queue = body["receiver"]["channel"]["queue_name"]
        .as_str()
        .expect("queue_name")
        .to_owned();
    (id, queue)
}

/// Zaqar's message post as `token`, with `client_id` when given.
async fn post_messages(
    ember: &TestEmber,
    token: &str,
    queue: &str,
    client_id: Option<&str>,
    body: Value,
) -> (StatusCode, Value) {
    let mut request = ember
        .http
        .post(ember.url(&format!("/messaging/v2/queues/{queue}/messages")))
        .header("X-Auth-Token", token)
        .json(&body);
    if let Some(client_id) = client_id {
        request = request.header("Client-ID", client_id);
    }
    let response = request.send().await.expect("request");
    let status = StatusCode::from_u16(response.status().as_u16()).expect("status");
    (status, response.json().await.unwrap_or(Value::Null))
}

fn scale_out(cluster: &str, count: i64) -> Value {
    json!({"body": {"cluster": cluster, "action": "CLUSTER_SCALE_OUT", "params": {"count": count}},
        "ttl": 300})
}

/// Waits until the cluster has `count` CLUSTER_SCALE_OUT actions, all
/// SUCCEEDED.
pub(crate) async fn wait_scale_outs(rest: &Rest<'_>, cluster_id: &str, count: usize) {
    let path = format!("/actions?cluster_id={cluster_id}&action=CLUSTER_SCALE_OUT");
    wait_for(
        &format!("{count} scale-outs SUCCEEDED"),
        Duration::from_secs(30),
        || {
            let path = path.clone();
            async move {
                let actions = rest.get(&path).await["actions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                actions.len() == count
                    && actions.iter().all(|action| action["status"] == "SUCCEEDED")
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posted_messages_scale_a_cluster_as_the_receivers_creator() {
    posted_messages_scale_a_cluster(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posted_messages_scale_a_cluster_as_the_receivers_creator_on_postgres() {
    let Some(database) = TestDatabase::postgres().await else {
        eprintln!("PostgreSQL variant not run: EMBER_TEST_DATABASE_URL is not set");
        return;
    };
    posted_messages_scale_a_cluster(Some(&database)).await;
    database.drop_schema().await;
}

async fn posted_messages_scale_a_cluster(database: Option<&TestDatabase>) {
    let url = database.map(|database| database.url.clone());
    let ember = TestEmber::start_configured(move |config| {
        if let Some(url) = url {
            config.engine.database_url = url;
        }
    })
    .await;
    let rest = Rest::member(&ember);
    let cluster_id = active_cluster(&rest, "web", 1).await;
    let (receiver_id, queue) = message_receiver(&rest, "scaler").await;
    assert_eq!(queue, format!("senlin-receiver-{receiver_id}"));

    // One message: 201 naming it, then the cluster grows.
    let (status, body) = post_messages(
        &ember,
        ember.member_token(),
        &queue,
        Some(CLIENT_ID),
        json!({"messages": [scale_out("web", 1)]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let resources = body["resources"].as_array().expect("resources");
    assert_eq!(resources.len(), 1, "{body}");
    assert!(
        resources[0]
            .as_str()
            .is_some_and(|path| path.starts_with(&format!("/v2/queues/{queue}/messages/"))),
        "{body}"
    );
    wait_scale_outs(&rest, &cluster_id, 1).await;
    assert_eq!(rest.nodes(&cluster_id).await.len(), 2);
    let actions = rest
        .get(&format!(
            "/actions?cluster_id={cluster_id}&action=CLUSTER_SCALE_OUT"
        ))
        .await;
    let shown = &actions["actions"][0];
    assert_eq!(
        shown["user"],
        rest.get(&format!("/receivers/{receiver_id}")).await["receiver"]["user"],
        "{shown}"
    );

    // Two messages (by short id, by name): two actions.
    let (status, body) = post_messages(
        &ember,
        ember.member_token(),
        &queue,
        Some(CLIENT_ID),
        json!({"messages": [scale_out(&cluster_id[..8], 1), scale_out(&cluster_id, 2)]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        body["resources"].as_array().map(Vec::len),
        Some(2),
        "{body}"
    );
    wait_scale_outs(&rest, &cluster_id, 3).await;
    assert_eq!(rest.nodes(&cluster_id).await.len(), 5);

    // Notify: by id, name or short id, 204, whatever is pending runs.
    for name_or_id in [receiver_id.as_str(), "scaler", &receiver_id[..8]] {
        let (status, _, body) = rest
            .call(
                Method::POST,
                &format!("/receivers/{name_or_id}/notify"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{name_or_id}: {body}");
    }
    let (status, body) = post_messages(
        &ember,
        ember.member_token(),
        &queue,
        Some(CLIENT_ID),
        json!({"messages": [scale_out("web", 1)]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, _, body) = rest
        .call(
            Method::POST,
            &format!("/receivers/{receiver_id}/notify"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    wait_scale_outs(&rest, &cluster_id, 4).await;
    assert_eq!(rest.nodes(&cluster_id).await.len(), 6);

    // gRPC callers post through the gateway too.
    let mut grpc = ReceiverServiceClient::new(ember.gateway_channel().await);
    let posted = grpc
        .post_receiver_messages(ember_tests::with_bearer(
            pb::PostReceiverMessagesRequest {
                queue_name: queue.clone(),
                messages: vec![pb::ReceiverMessageInput {
                    body: json!({"cluster": "web", "action": "CLUSTER_SCALE_IN", "params": {"count": 2}})
                        .to_string(),
                    ttl: None,
                }],
            },
            ember.member_token(),
        ))
        .await
        .expect("PostReceiverMessages")
        .into_inner();
    assert_eq!(posted.message_ids.len(), 1);
    wait_for("the scale-in to run", Duration::from_secs(30), || {
        let rest = &rest;
        let path =
            format!("/actions?cluster_id={cluster_id}&action=CLUSTER_SCALE_IN&status=SUCCEEDED");
        async move { rest.get(&path).await["actions"].as_array().map(Vec::len) == Some(1) }
    })
    .await;
    assert_eq!(rest.nodes(&cluster_id).await.len(), 4);

    // The Keystone front door's catalog names the messaging endpoint.
    let catalog: Value = ember
        .http
        .get(ember.url("/identity/v3/auth/catalog"))
        .header("X-Auth-Token", ember.member_token())
        .header("X-Subject-Token", ember.member_token())
        .send()
        .await
        .expect("catalog")
        .json()
        .await
        .expect("JSON");
    let messaging = catalog["catalog"]
        .as_array()
        .and_then(|services| {
            services
                .iter()
                .find(|service| service["type"] == "messaging")
        })
        .unwrap_or_else(|| panic!("messaging in {catalog}"));
    assert_eq!(
        messaging["endpoints"][0]["url"],
        ember.url("/messaging"),
        "{messaging}"
    );
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_messages_are_refused_and_queues_stay_in_their_project() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let cluster_id = active_cluster(&rest, "db", 0).await;
    let (receiver_id, queue) = message_receiver(&rest, "inbox").await;
    let token = ember.member_token();

    // Zaqar's Client-ID: required, a UUID.
    let good = json!({"messages": [scale_out("db", 1)]});
    let (status, body) = post_messages(&ember, token, &queue, None, good.clone()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        body["description"], "The Client-ID header is required.",
        "{body}"
    );
    let (status, body) = post_messages(&ember, token, &queue, Some("me"), good.clone()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["description"], "Malformed hexadecimal UUID.", "{body}");

    // Bad bodies: 400 naming the message, and nothing of the post runs.
    let refused = [
        (
            json!({"messages": [scale_out("db", 1), {"body": "grow"}]}),
            "messages[1]: the body must be a JSON object {\"cluster\": …, \"action\": …, \"params\": {…}}",
        ),
        (
            json!({"messages": [{"body": {"cluster": "db"}}]}),
            "messages[0]: Both cluster identity and action must be specified.",
        ),
        (
            json!({"messages": [scale_out("db", 1), {"body": {"cluster": "db", "action": "GROW"}}]}),
            "messages[1]: Illegal cluster action 'GROW' specified.",
        ),
        (
            json!({"messages": [{"body": {"cluster": "db", "action": "CLUSTER_CREATE"}}]}),
            "messages[0]: Action name cannot be any of ['CLUSTER_CREATE'].",
        ),
        (
            json!({"messages": [{"body": {"cluster": "db", "action": "CLUSTER_SCALE_OUT", "params": {"count": "many"}}}]}),
            "messages[0]: params: count must be an integer",
        ),
        (
            json!({"messages": [{"body": {"cluster": "db", "action": "CLUSTER_CHECK"}, "ttl": 5}]}),
            "messages[0]: The TTL for a message may not exceed 1209600 seconds, and must be at least 60 seconds long.",
        ),
        (
            json!({"messages": [{"ttl": 60}]}),
            "messages[0]: body is required",
        ),
        (json!({"messages": []}), "No messages to enqueue."),
        (
            json!([scale_out("db", 1)]),
            "the body must be {\"messages\": [{\"body\": {…}, \"ttl\": seconds}, …]}",
        ),
    ];
    for (post, expected) in refused {
        let (status, body) =
            post_messages(&ember, token, &queue, Some(CLIENT_ID), post.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{post}: {body}");
        assert_eq!(body["title"], "Invalid API request", "{body}");
        assert_eq!(body["description"], expected, "{post}");
    }

    // Another project: its post and its notify are 404; so is a queue
    // that is no receiver's.
    let foreign = ember.outsider_token();
    let (status, body) =
        post_messages(&ember, &foreign, &queue, Some(CLIENT_ID), good.clone()).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(
        body["description"]
            .as_str()
            .is_some_and(|text| text.starts_with(&format!("queue '{queue}' not found"))),
        "{body}"
    );
    let (status, body) =
        post_messages(&ember, token, "orders", Some(CLIENT_ID), good.clone()).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let foreign_rest = Rest {
        ember: &ember,
        token: foreign.clone(),
    };
    for name_or_id in [receiver_id.as_str(), "inbox", &receiver_id[..8]] {
        let (status, _, body) = foreign_rest
            .call(
                Method::POST,
                &format!("/receivers/{name_or_id}/notify"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{name_or_id}: {body}");
        assert_eq!(
            body["error"]["message"],
            format!("The receiver '{name_or_id}' could not be found."),
        );
    }
    // Nothing ran for any of it.
    let actions = rest
        .get(&format!(
            "/actions?cluster_id={cluster_id}&action=CLUSTER_SCALE_OUT"
        ))
        .await;
    assert_eq!(actions["actions"], json!([]), "{actions}");

    // Notifying a webhook receiver is Senlin's 400.
    let (status, _, body) = rest
        .post(
            "/receivers",
            json!({"receiver": {"name": "hook", "type": "webhook", "cluster_id": "db",
                "action": "CLUSTER_SCALE_OUT"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, _, body) = rest
        .call(Method::POST, "/receivers/hook/notify", None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        body["error"]["message"],
        "Notifying non-message receiver is not allowed."
    );
    let webhook_queue = format!(
        "senlin-receiver-{}",
        rest.get("/receivers/hook").await["receiver"]["id"]
            .as_str()
            .expect("id")
    );
    let (status, body) =
        post_messages(&ember, token, &webhook_queue, Some(CLIENT_ID), good.clone()).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a webhook has no queue: {body}"
    );

    // A message naming a cluster that does not exist: dropped, with an
    // ERROR event on the receiver saying why, and no action.
    let (status, body) = post_messages(
        &ember,
        token,
        &queue,
        Some(CLIENT_ID),
        json!({"messages": [{"body": {"cluster": "ghost", "action": "CLUSTER_CHECK"}}]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let message_id = body["resources"][0]
        .as_str()
        .and_then(|path| path.rsplit('/').next())
        .expect("message id")
        .to_owned();
    let events_path = format!("/events?oid={receiver_id}&level=ERROR");
    wait_for(
        "the dropped message's event",
        Duration::from_secs(15),
        || {
            let rest = &rest;
            let path = events_path.clone();
            async move { rest.get(&path).await["events"].as_array().map(Vec::len) == Some(1) }
        },
    )
    .await;
    let events = rest.get(&events_path).await;
    let event = &events["events"][0];
    assert_eq!(event["otype"], "RECEIVER", "{event}");
    assert_eq!(event["oname"], "inbox", "{event}");
    assert_eq!(
        event["status_reason"],
        format!(
            "message {message_id} (CLUSTER_CHECK on cluster 'ghost') dropped: The cluster 'ghost' could not be found."
        ),
        "{event}"
    );
    let checks = rest
        .get(&format!(
            "/actions?cluster_id={cluster_id}&action=CLUSTER_CHECK"
        ))
        .await;
    assert_eq!(checks["actions"], json!([]), "{checks}");
    // Another project does not see the event.
    let theirs = foreign_rest.get(&events_path).await;
    assert_eq!(theirs["events"], json!([]), "{theirs}");

    // Deleting the receiver deletes its queue.
    let (status, _, body) = rest
        .call(Method::DELETE, &format!("/receivers/{receiver_id}"), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (status, body) = post_messages(&ember, token, &queue, Some(CLIENT_ID), good).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _, body) = rest
        .call(
            Method::POST,
            &format!("/receivers/{receiver_id}/notify"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    ember.stop().await;
}
