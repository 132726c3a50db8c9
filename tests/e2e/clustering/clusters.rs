//! Clusters and scale-in lifecycle hooks through the Clustering REST API,
//! with a real webhook target: the messages arrive signed, completions and
//! the deadline race through the engine's one conditional update, and every
//! victim node is deleted exactly once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use ember_tests::{TestEmber, wait_for};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

/// What the webhook target received: (signature header, body).
pub(crate) type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

async fn receive(State(received): State<Received>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let signature = headers
        .get("x-ember-signature")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_owned();
    received
        .lock()
        .expect("lock")
        .push((signature, body.to_vec()));
    StatusCode::OK
}

/// An HTTP server on 127.0.0.1:0 recording every POST to `/hook`.
pub(crate) async fn webhook_target() -> (String, Received) {
    let received: Received = Arc::default();
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}/hook"), received)
}

pub(crate) fn hex_hmac(secret: &str, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("sha256={hex}")
}

pub(crate) struct Rest<'a> {
    pub(crate) ember: &'a TestEmber,
    pub(crate) token: String,
}

impl<'a> Rest<'a> {
    /// The demo project's member, as the tests call by default.
    pub(crate) fn member(ember: &'a TestEmber) -> Rest<'a> {
        Rest {
            ember,
            token: ember.member_token().to_owned(),
        }
    }

    /// Makes the profile `profile` (the body's `profile` object), which
    /// must be accepted (201); its id.
    pub(crate) async fn create_profile(&self, profile: Value) -> String {
        let (status, _, body) = self.post("/profiles", json!({ "profile": profile })).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["profile"]["id"]
            .as_str()
            .expect("the profile's id")
            .to_owned()
    }

    pub(crate) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, HeaderMap, Value) {
        let response = self
            .ember
            .send_as(&self.token, method, &format!("/clustering/v1{path}"), body)
            .await;
        let status = StatusCode::from_u16(response.status().as_u16()).expect("status");
        let headers = response.headers().clone();
        let text = response.text().await.expect("body");
        let value = serde_json::from_str(&text).unwrap_or(Value::Null);
        (status, headers, value)
    }

    pub(crate) async fn get(&self, path: &str) -> Value {
        let (status, _, body) = self.call(reqwest::Method::GET, path, None).await;
        assert_eq!(status, StatusCode::OK, "GET {path}: {body}");
        body
    }

    pub(crate) async fn post(&self, path: &str, body: Value) -> (StatusCode, HeaderMap, Value) {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    /// POSTs a cluster action (`{"scale_in": {…}}`), which must be
    /// accepted; returns its `Location`.
    pub(crate) async fn act(&self, cluster_id: &str, action: Value) -> String {
        let (status, headers, body) = self
            .post(&format!("/clusters/{cluster_id}/actions"), action)
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        location(&headers)
    }

    /// Polls an action until it ends; returns its final status.
    pub(crate) async fn wait_action(&self, location: &str, expected: &str) {
        let path = location.trim_start_matches("/clustering/v1").to_owned();
        wait_for(
            &format!("action {path} to be {expected}"),
            Duration::from_secs(30),
            || {
                let path = path.clone();
                async move {
                    let action = self.get(&path).await;
                    let status = action["action"]["status"].as_str().unwrap_or("").to_owned();
                    assert!(
                        status != "FAILED" || expected == "FAILED",
                        "action failed: {action}"
                    );
                    status == expected
                }
            },
        )
        .await;
    }

    pub(crate) async fn nodes(&self, cluster_id: &str) -> Vec<Value> {
        self.get(&format!("/nodes?cluster_id={cluster_id}")).await["nodes"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

pub(crate) fn location(headers: &HeaderMap) -> String {
    headers
        .get("location")
        .and_then(|value| value.to_str().ok())
        .expect("Location header")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_in_with_a_webhook_hook_completes_two_and_lets_one_expire() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let (hook_url, received) = webhook_target().await;

    let (status, _, body) = rest
        .post(
            "/profiles",
            json!({"profile": {"name": "web", "spec": {"type": "ember.instance", "version": "1.0",
                "properties": {"flavor": "m1.small", "image": "debian-12"}}}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["profile"]["type"], "ember.instance-1.0", "{body}");

    let (status, headers, body) = rest
        .post(
            "/clusters",
            json!({"cluster": {"name": "web", "profile_id": "web", "min_size": 0, "max_size": 10, "desired_capacity": 3}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let cluster_id = body["cluster"]["id"]
        .as_str()
        .expect("cluster id")
        .to_owned();
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    let nodes = rest.nodes(&cluster_id).await;
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    assert!(
        nodes.iter().all(|node| node["status"] == "ACTIVE"),
        "{nodes:?}"
    );

    let (status, _, body) = rest
        .post(
            "/policies",
            json!({"policy": {"name": "drain", "spec": {"type": "senlin.policy.deletion", "version": "1.1",
                "properties": {"criteria": "OLDEST_FIRST",
                    "hooks": {"type": "webhook", "params": {"url": hook_url}, "timeout": 4}}}}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let done = rest
        .act(
            &cluster_id,
            json!({"policy_attach": {"policy_id": "drain"}}),
        )
        .await;
    rest.wait_action(&done, "SUCCEEDED").await;

    let scale_in = rest
        .act(&cluster_id, json!({"scale_in": {"count": 3}}))
        .await;

    wait_for("3 webhook messages", Duration::from_secs(15), || {
        let received = received.clone();
        async move { received.lock().expect("lock").len() >= 3 }
    })
    .await;
    let messages = received.lock().expect("lock").clone();
    assert_eq!(messages.len(), 3, "one message per node");
    let mut tokens = Vec::new();
    let node_ids: Vec<&str> = nodes
        .iter()
        .filter_map(|node| node["id"].as_str())
        .collect();
    for (signature, body) in &messages {
        assert_eq!(
            signature,
            &hex_hmac(&ember.running.webhook_secret, body),
            "signed with the deployment's secret"
        );
        let message: Value = serde_json::from_slice(body).expect("JSON message");
        assert_eq!(
            message["lifecycle_transition_type"], "terminating",
            "{message}"
        );
        assert_eq!(message["cluster_id"], cluster_id.as_str(), "{message}");
        assert!(
            node_ids.contains(&message["node_id"].as_str().unwrap_or("")),
            "{message}"
        );
        assert!(
            message["resource_id"]
                .as_str()
                .is_some_and(|id| !id.is_empty()),
            "{message}"
        );
        assert!(message["deadline"].as_str().is_some(), "{message}");
        tokens.push(
            message["lifecycle_action_token"]
                .as_str()
                .expect("token")
                .to_owned(),
        );
    }

    // Another project cannot see the cluster, so not the token either.
    let outsider = ember.outsider_token();
    let foreign = Rest {
        ember: &ember,
        token: outsider,
    };
    let (status, _, body) = foreign
        .post(
            &format!("/clusters/{cluster_id}/actions"),
            json!({"complete_lifecycle": {"lifecycle_action_token": tokens[0]}}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    // An unknown token of the right cluster is 404 too, not a silent 202.
    let (status, _, body) = rest
        .post(
            &format!("/clusters/{cluster_id}/actions"),
            json!({"complete_lifecycle": {"lifecycle_action_token": uuid::Uuid::now_v7().to_string()}}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");

    for token in &tokens[..2] {
        let (status, headers, body) = rest
            .post(
                &format!("/clusters/{cluster_id}/actions"),
                json!({"complete_lifecycle": {"lifecycle_action_token": token}}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        assert_eq!(
            location(&headers),
            format!("/clustering/v1/actions/{token}")
        );
    }
    // Completing twice: 409, saying it was already completed.
    let (status, _, body) = rest
        .post(
            &format!("/clusters/{cluster_id}/actions"),
            json!({"complete_lifecycle": {"lifecycle_action_token": tokens[0]}}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("already completed"),
        "{body}"
    );

    // The third is left to its deadline (4 s).
    rest.wait_action(&scale_in, "SUCCEEDED").await;
    wait_for("every node deleted", Duration::from_secs(20), || async {
        rest.nodes(&cluster_id).await.is_empty()
    })
    .await;
    for (index, token) in tokens.iter().enumerate() {
        let action = rest.get(&format!("/actions/{token}")).await;
        assert_eq!(action["action"]["action"], "NODE_DELETE", "{action}");
        assert_eq!(action["action"]["status"], "SUCCEEDED", "{action}");
        let outcome = if index < 2 { "COMPLETED" } else { "EXPIRED" };
        assert_eq!(action["action"]["lifecycle_outcome"], outcome, "{action}");
    }
    // Late completion of the expired one: 409, saying it expired.
    let (status, _, body) = rest
        .post(
            &format!("/clusters/{cluster_id}/actions"),
            json!({"complete_lifecycle": {"lifecycle_action_token": tokens[2]}}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("expired"),
        "{body}"
    );

    // Exactly one delete per node: one NODE_DELETE action each, and the
    // instances behind them are gone.
    let actions = rest.get(&format!("/actions?cluster_id={cluster_id}")).await;
    let deletes = actions["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .filter(|action| action["action"] == "NODE_DELETE")
        .count();
    assert_eq!(deletes, 3, "{actions}");
    // Each node's own history: created once, deleted once.
    for node in &nodes {
        let id = node["id"].as_str().expect("id");
        let events = rest.get(&format!("/events?obj_id={id}")).await;
        let steps: Vec<(String, String)> = events["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|event| {
                (
                    event["action"].as_str().unwrap_or("").to_owned(),
                    event["status"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        let step = |action: &str, status: &str| (action.to_owned(), status.to_owned());
        assert_eq!(
            steps,
            vec![
                step("NODE_CREATE", "ACTIVE"),
                step("NODE_DELETE", "DELETED")
            ],
            "{events}"
        );
    }
    let cluster = rest.get(&format!("/clusters/{cluster_id}")).await;
    assert_eq!(cluster["cluster"]["desired_capacity"], 0, "{cluster}");
    ember.stop().await;
}

/// A cluster of `size` ACTIVE nodes with a deletion-1.1 policy whose hooks
/// are `hooks` attached; returns the cluster id and its nodes.
pub(crate) async fn cluster_with_hooks(
    rest: &Rest<'_>,
    size: u32,
    hooks: Value,
) -> (String, Vec<Value>) {
    rest.create_profile(
        json!({"name": "web", "spec": {"type": "ember.instance", "version": "1.0",
                "properties": {"flavor": "m1.small", "image": "debian-12"}}}),
    )
    .await;
    let (status, headers, body) = rest
        .post(
            "/clusters",
            json!({"cluster": {"name": "web", "profile_id": "web", "desired_capacity": size}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let cluster_id = body["cluster"]["id"]
        .as_str()
        .expect("cluster id")
        .to_owned();
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    attach(
        rest,
        &cluster_id,
        "drain",
        json!({"type": "senlin.policy.deletion", "version": "1.1", "properties": {"hooks": hooks}}),
    )
    .await;
    let nodes = rest.nodes(&cluster_id).await;
    assert_eq!(nodes.len(), size as usize, "{nodes:?}");
    (cluster_id, nodes)
}

async fn complete_all(rest: &Rest<'_>, cluster_id: &str, tokens: &[String]) {
    for token in tokens {
        let (status, _, body) = rest
            .post(
                &format!("/clusters/{cluster_id}/actions"),
                json!({"complete_lifecycle": {"lifecycle_action_token": token}}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    wait_for("every node deleted", Duration::from_secs(20), || async {
        rest.nodes(cluster_id).await.is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_nats_queue_hooks_land_on_the_embedded_queue() {
    use ember_proto::lifecyclehook::v1 as hook_pb;
    use ember_proto::lifecyclehook::v1::lifecycle_hook_service_client::LifecycleHookServiceClient;

    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let (cluster_id, _) = cluster_with_hooks(
        &rest,
        2,
        json!({"type": "zaqar", "params": {"queue": "drain-web"}, "timeout": 120}),
    )
    .await;
    rest.act(&cluster_id, json!({"scale_in": {"count": 2}}))
        .await;

    let mut hooks = LifecycleHookServiceClient::new(ember.gateway_channel().await);
    let mut messages = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while messages.len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "2 queued messages, got {messages:?}"
        );
        messages = hooks
            .list_queue_messages(ember_tests::with_bearer(
                hook_pb::ListQueueMessagesRequest {
                    queue: "drain-web".into(),
                    after_id: 0,
                    limit: 10,
                    ..Default::default()
                },
                ember.member_token(),
            ))
            .await
            .expect("ListQueueMessages")
            .into_inner()
            .messages;
        if messages.len() < 2 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let tokens: Vec<String> = messages
        .iter()
        .map(|message| message.token.clone())
        .collect();
    for message in &messages {
        let body: Value = serde_json::from_str(&message.body).expect("JSON body");
        assert_eq!(body["lifecycle_action_token"], message.token.as_str());
        assert_eq!(body["cluster_id"], cluster_id.as_str());
        assert_eq!(message.project_id, "demo");
    }
    // The queue is the project's: another project's member reading a
    // queue of the same name reads its own (empty) one, and may not name
    // the owner's project; an admin may.
    let outsider = ember.outsider_token();
    let read = |project: &str, token: &str| {
        let request = ember_tests::with_bearer(
            hook_pb::ListQueueMessagesRequest {
                queue: "drain-web".into(),
                limit: 10,
                project_id: project.into(),
                ..Default::default()
            },
            token,
        );
        let mut hooks = hooks.clone();
        async move { hooks.list_queue_messages(request).await }
    };
    let theirs = read("", &outsider).await.expect("own queue").into_inner();
    assert!(theirs.messages.is_empty(), "{:?}", theirs.messages);
    let refused = read("demo", &outsider).await.expect_err("not theirs");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    let by_admin = read("demo", ember.admin_token())
        .await
        .expect("admin")
        .into_inner();
    assert_eq!(by_admin.messages.len(), 2);
    let pending = hooks
        .list_pending(ember_tests::with_bearer(
            hook_pb::ListPendingRequest {
                cluster_id: cluster_id.clone(),
                ..Default::default()
            },
            ember.member_token(),
        ))
        .await
        .expect("ListPending")
        .into_inner()
        .actions;
    assert_eq!(pending.len(), 2, "{pending:?}");
    assert!(
        pending
            .iter()
            .all(|action| action.delivery_state == hook_pb::DeliveryState::Delivered as i32),
        "{pending:?}"
    );
    complete_all(&rest, &cluster_id, &tokens).await;
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_nats_queue_hooks_are_published_to_jetstream_once_per_node() {
    use futures::StreamExt;

    let Ok(nats_url) = std::env::var("EMBER_TEST_NATS_URL") else {
        eprintln!("EMBER_TEST_NATS_URL is not set: skipping the NATS lifecycle-hook test");
        return;
    };
    let queue = format!("e2e-{}", uuid::Uuid::now_v7().simple());
    let configured_url = nats_url.clone();
    let ember = TestEmber::start_configured(move |config| {
        config.lifecycle_hook.nats_url = configured_url;
    })
    .await;
    let rest = Rest::member(&ember);
    let (cluster_id, _) = cluster_with_hooks(
        &rest,
        2,
        json!({"type": "zaqar", "params": {"queue": queue}, "timeout": 120}),
    )
    .await;
    rest.act(&cluster_id, json!({"scale_in": {"count": 2}}))
        .await;

    let client = async_nats::connect(nats_url.as_str()).await.expect("NATS");
    let jetstream = async_nats::jetstream::new(client);
    // The project's subject: ember.lifecycle.<project>.<queue>.
    let subject = format!("ember.lifecycle.demo.{queue}");
    let stream = {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            match jetstream.get_stream("EMBER_LIFECYCLE").await {
                Ok(stream) => break stream,
                Err(error) => {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "stream EMBER_LIFECYCLE: {error}"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    };
    let consumer = stream
        .create_consumer(async_nats::jetstream::consumer::pull::Config {
            filter_subject: subject.clone(),
            ..Default::default()
        })
        .await
        .expect("consumer");
    let mut incoming = consumer.messages().await.expect("messages");
    let mut tokens = Vec::new();
    while tokens.len() < 2 {
        let message = tokio::time::timeout(Duration::from_secs(15), incoming.next())
            .await
            .expect("a message within 15 s")
            .expect("stream open")
            .expect("message");
        let body: Value = serde_json::from_slice(&message.payload).expect("JSON body");
        let token = body["lifecycle_action_token"]
            .as_str()
            .expect("token")
            .to_owned();
        let message_id = message
            .headers
            .as_ref()
            .and_then(|headers| headers.get("Nats-Msg-Id"))
            .map(|value| value.as_str().to_owned());
        assert_eq!(
            message_id.as_deref(),
            Some(token.as_str()),
            "message id = token"
        );
        message.ack().await.expect("ack");
        tokens.push(token);
    }
    // Once lifecycle-hook published, the stream keeps messages a bounded
    // time and size (a stream an earlier version made gets the limits too).
    let limits = jetstream
        .get_stream("EMBER_LIFECYCLE")
        .await
        .expect("the stream")
        .cached_info()
        .config
        .clone();
    assert_eq!(
        limits.max_age,
        Duration::from_secs(7 * 24 * 3600),
        "{limits:?}"
    );
    assert_eq!(limits.max_bytes, 1024 * 1024 * 1024, "{limits:?}");
    complete_all(&rest, &cluster_id, &tokens).await;
    ember.stop().await;
}

/// The hook's pending actions of a cluster, resolved ones too if asked.
pub(crate) async fn pending_hooks(
    ember: &TestEmber,
    cluster_id: &str,
    include_resolved: bool,
) -> Vec<ember_proto::lifecyclehook::v1::PendingLifecycleAction> {
    use ember_proto::lifecyclehook::v1 as hook_pb;
    use ember_proto::lifecyclehook::v1::lifecycle_hook_service_client::LifecycleHookServiceClient;
    LifecycleHookServiceClient::new(ember.gateway_channel().await)
        .list_pending(ember_tests::with_bearer(
            hook_pb::ListPendingRequest {
                cluster_id: cluster_id.to_owned(),
                include_resolved,
                ..Default::default()
            },
            ember.member_token(),
        ))
        .await
        .expect("ListPending")
        .into_inner()
        .actions
}

/// The kinds of the hook events about `token`, oldest first.
async fn hook_event_kinds(ember: &TestEmber, cluster_id: &str, token: &str) -> Vec<String> {
    use ember_proto::lifecyclehook::v1 as hook_pb;
    use ember_proto::lifecyclehook::v1::lifecycle_hook_service_client::LifecycleHookServiceClient;
    let mut events = LifecycleHookServiceClient::new(ember.gateway_channel().await)
        .list_hook_events(ember_tests::with_bearer(
            hook_pb::ListHookEventsRequest {
                cluster_id: cluster_id.to_owned(),
                token: token.to_owned(),
                limit: 100,
            },
            ember.member_token(),
        ))
        .await
        .expect("ListHookEvents")
        .into_inner()
        .events;
    events.sort_by_key(|event| event.created_at.map(|at| (at.seconds, at.nanos)));
    events.into_iter().map(|event| event.kind).collect()
}

/// Unlike Senlin (scale_in only), every way of removing a node waits for
/// the hook: del_nodes, resize and deleting the node itself. As in Senlin,
/// a removal holds the cluster's lock while it waits, so the removals asked
/// for meanwhile queue (accepted, READY) and run in turn, each waiting for
/// its own hook.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn del_nodes_resize_and_node_delete_all_wait_for_the_hook() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let (cluster_id, nodes) = cluster_with_hooks(
        &rest,
        4,
        json!({"type": "zaqar", "params": {"queue": "drain-all"}, "timeout": 120}),
    )
    .await;
    let node_id = |index: usize| nodes[index]["id"].as_str().expect("id").to_owned();
    let actions = format!("/clusters/{cluster_id}/actions");
    let unresolved = || pending_hooks(&ember, &cluster_id, false);
    // As the application would, each hook is completed once its message
    // is on the queue (a completion before that leaves nothing to send).
    let complete = |token: String| {
        let rest = &rest;
        let actions = actions.clone();
        let (ember, cluster_id) = (&ember, cluster_id.clone());
        async move {
            wait_for(
                "the hook's message sent",
                Duration::from_secs(10),
                || async {
                    hook_event_kinds(ember, &cluster_id, &token)
                        .await
                        .iter()
                        .any(|kind| kind == "SENT")
                },
            )
            .await;
            let (status, _, body) = rest
                .post(
                    &actions,
                    json!({"complete_lifecycle": {"lifecycle_action_token": token}}),
                )
                .await;
            assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        }
    };
    let action_status = |location: String| {
        let rest = &rest;
        async move {
            let path = location.trim_start_matches("/clustering/v1").to_owned();
            rest.get(&path).await["action"]["status"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        }
    };

    let (status, _, body) = rest
        .post(&actions, json!({"del_nodes": {"nodes": [node_id(0)]}}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "del_nodes: {body}");
    wait_for("the del_nodes hook", Duration::from_secs(10), || async {
        unresolved().await.len() == 1
    })
    .await;
    // Deleting a node that already waits is refused, not a second delete.
    let (status, _, body) = rest
        .call(
            reqwest::Method::DELETE,
            &format!("/nodes/{}", node_id(0)),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.to_string().contains("already being deleted"), "{body}");

    // Accepted, but queued behind the del_nodes that holds the lock.
    let (status, headers, body) = rest
        .call(
            reqwest::Method::DELETE,
            &format!("/nodes/{}", node_id(3)),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "node delete: {body}");
    let node_delete = location(&headers);
    let resize = rest
        .act(
            &cluster_id,
            json!({"resize": {"adjustment_type": "CHANGE_IN_CAPACITY", "number": -1}}),
        )
        .await;
    assert_eq!(action_status(node_delete.clone()).await, "READY");
    assert_eq!(action_status(resize.clone()).await, "READY");
    let first = unresolved().await;
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].node_id, node_id(0));
    let listed = rest.nodes(&cluster_id).await;
    assert_eq!(listed.len(), 4, "nothing deleted yet: {listed:?}");
    for node in &listed {
        if node["id"] == node_id(0).as_str() {
            assert_eq!(node["status"], "DELETING", "{node}");
            assert_eq!(
                node["status_reason"], "waiting for lifecycle completion",
                "{node}"
            );
        } else {
            assert_eq!(node["status"], "ACTIVE", "{node}");
        }
    }
    let waiting_actions = rest
        .get(&format!(
            "/actions?cluster_id={cluster_id}&status=WAITING_LIFECYCLE_COMPLETION"
        ))
        .await;
    assert_eq!(
        waiting_actions["actions"].as_array().map(Vec::len),
        Some(1),
        "{waiting_actions}"
    );
    // "Allowed?" says what a scale-in would wait for: the node waiting for
    // its hook, and the actions queued behind it.
    let allowed = rest
        .get(&format!(
            "/clusters/{cluster_id}/allowed?operation=scale_in&count=1"
        ))
        .await;
    assert_eq!(allowed["allowed"], true, "{allowed}");
    let pending = allowed["pending_lifecycle_actions"]
        .as_array()
        .expect("pending_lifecycle_actions");
    assert_eq!(pending.len(), 1, "{allowed}");
    assert_eq!(pending[0]["target"], node_id(0).as_str(), "{allowed}");
    assert_eq!(
        pending[0]["status"], "WAITING_LIFECYCLE_COMPLETION",
        "{allowed}"
    );
    let queued: Vec<(&str, &str)> = allowed["queued_behind"]
        .as_array()
        .expect("queued_behind")
        .iter()
        .map(|action| {
            (
                action["action"].as_str().unwrap_or_default(),
                action["status"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    for expected in [
        ("NODE_DELETE", "WAITING_LIFECYCLE_COMPLETION"),
        ("NODE_DELETE", "READY"),
        ("CLUSTER_RESIZE", "READY"),
    ] {
        assert!(queued.contains(&expected), "{expected:?} in {allowed}");
    }

    // Completing it lets the node delete run: its hook comes next.
    let mut tokens = vec![first[0].token.clone()];
    complete(first[0].token.clone()).await;
    wait_for("the node delete hook", Duration::from_secs(20), || async {
        let pending = unresolved().await;
        pending.len() == 1 && pending[0].node_id == node_id(3)
    })
    .await;
    assert_eq!(rest.nodes(&cluster_id).await.len(), 3, "node 0 deleted");
    assert_eq!(action_status(resize.clone()).await, "READY", "still queued");
    let second = unresolved().await;
    tokens.push(second[0].token.clone());
    complete(second[0].token.clone()).await;
    rest.wait_action(&node_delete, "SUCCEEDED").await;

    // Then the resize, which picks one of the two nodes left (RANDOM, the
    // deletion policy's default criteria).
    wait_for("the resize hook", Duration::from_secs(20), || async {
        let pending = unresolved().await;
        pending.len() == 1 && pending[0].node_id != node_id(3)
    })
    .await;
    let third = unresolved().await;
    let victim = third[0].node_id.clone();
    assert!(victim == node_id(1) || victim == node_id(2), "{third:?}");
    let survivor = if victim == node_id(1) {
        node_id(2)
    } else {
        node_id(1)
    };
    tokens.push(third[0].token.clone());
    complete(third[0].token.clone()).await;
    rest.wait_action(&resize, "SUCCEEDED").await;
    let left = rest.nodes(&cluster_id).await;
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["id"], survivor.as_str());
    for token in &tokens {
        let kinds = hook_event_kinds(&ember, &cluster_id, token).await;
        assert_eq!(kinds.first().map(String::as_str), Some("SENT"), "{kinds:?}");
        wait_for("the completion event", Duration::from_secs(10), || async {
            hook_event_kinds(&ember, &cluster_id, token)
                .await
                .iter()
                .any(|kind| kind == "COMPLETED")
        })
        .await;
    }
    let cluster = rest.get(&format!("/clusters/{cluster_id}")).await;
    assert_eq!(cluster["cluster"]["desired_capacity"], 1, "{cluster}");
    assert_eq!(cluster["cluster"]["status"], "ACTIVE", "{cluster}");
    ember.stop().await;
}

/// Many completions at once, by two users, each told to lifecycle-hook by
/// the engine as it lands: none is lost — every token's hook ends COMPLETED
/// there, resolved by the user who completed it, none is left unresolved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_by_many_callers_at_once_each_reach_lifecycle_hook() {
    const NODES: usize = 16;
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let (cluster_id, _) = cluster_with_hooks(
        &rest,
        u32::try_from(NODES).expect("a few"),
        json!({"type": "zaqar", "params": {"queue": "drain-many"}, "timeout": 3600}),
    )
    .await;
    let scale_in = rest
        .act(&cluster_id, json!({"scale_in": {"count": NODES}}))
        .await;
    let unresolved = || pending_hooks(&ember, &cluster_id, false);
    wait_for(
        "every removal waiting on its hook",
        Duration::from_secs(15),
        || async { unresolved().await.len() == NODES },
    )
    .await;
    let tokens: Vec<String> = unresolved()
        .await
        .into_iter()
        .map(|action| action.token)
        .collect();
    let actions = format!("/clusters/{cluster_id}/actions");
    let admin = Rest {
        ember: &ember,
        token: ember.admin_token().to_owned(),
    };
    // Every other token is completed by the admin, all at once; each
    // completer with the user id lifecycle-hook is to record.
    let completers = [(&rest, "demo"), (&admin, "admin")];
    let completer = |index: usize| completers[index % completers.len()];
    futures::future::join_all(tokens.iter().enumerate().map(|(index, token)| {
        let (rest, actions) = (completer(index).0, &actions);
        async move {
            let (status, _, body) = rest
                .post(
                    actions,
                    json!({"complete_lifecycle": {"lifecycle_action_token": token}}),
                )
                .await;
            assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        }
    }))
    .await;
    rest.wait_action(&scale_in, "SUCCEEDED").await;
    wait_for(
        "lifecycle-hook told of every completion",
        Duration::from_secs(10),
        || async { unresolved().await.is_empty() },
    )
    .await;
    let resolved: std::collections::HashMap<String, String> =
        pending_hooks(&ember, &cluster_id, true)
            .await
            .into_iter()
            .map(|action| (action.token, action.resolved_by))
            .collect();
    for (index, token) in tokens.iter().enumerate() {
        let kinds = hook_event_kinds(&ember, &cluster_id, token).await;
        assert!(
            kinds.iter().any(|kind| kind == "COMPLETED"),
            "{token}: {kinds:?}"
        );
        let by = completer(index).1;
        assert_eq!(resolved.get(token).map(String::as_str), Some(by), "{token}");
    }
    ember.stop().await;
}

/// A webhook target that is down when the hook is sent gets the message
/// once it is up: connection errors are retried with backoff, each failure
/// recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_target_down_then_up_gets_the_message_by_retry() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    // A port with nothing listening yet.
    let address = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port");
    let hook_url = format!("http://{address}/hook");
    let (cluster_id, _) = cluster_with_hooks(
        &rest,
        1,
        json!({"type": "webhook", "params": {"url": hook_url}, "timeout": 60}),
    )
    .await;
    rest.act(&cluster_id, json!({"scale_in": {"count": 1}}))
        .await;

    wait_for("two failed attempts", Duration::from_secs(15), || async {
        pending_hooks(&ember, &cluster_id, false)
            .await
            .first()
            .is_some_and(|hook| hook.delivery_attempts >= 2)
    })
    .await;
    let hook = pending_hooks(&ember, &cluster_id, false).await.remove(0);
    assert_eq!(
        hook.delivery_state,
        ember_proto::lifecyclehook::v1::DeliveryState::Retrying as i32,
        "{hook:?}"
    );
    assert!(
        !hook.last_error.is_empty(),
        "the error is recorded: {hook:?}"
    );
    assert!(hook.delivered_at.is_none(), "{hook:?}");

    // The target comes up on that address.
    let received: Received = Arc::default();
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .expect("bind the target's address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    wait_for("the retried delivery", Duration::from_secs(20), || {
        let received = received.clone();
        async move { !received.lock().expect("lock").is_empty() }
    })
    .await;
    let (signature, body) = received.lock().expect("lock")[0].clone();
    assert_eq!(signature, hex_hmac(&ember.running.webhook_secret, &body));
    let message: Value = serde_json::from_slice(&body).expect("JSON message");
    assert_eq!(message["lifecycle_action_token"], hook.token.as_str());
    wait_for("delivery recorded", Duration::from_secs(10), || async {
        pending_hooks(&ember, &cluster_id, false)
            .await
            .first()
            .is_some_and(|hook| {
                hook.delivery_state
                    == ember_proto::lifecyclehook::v1::DeliveryState::Delivered as i32
                    && hook.delivered_at.is_some()
            })
    })
    .await;
    let kinds = hook_event_kinds(&ember, &cluster_id, &hook.token).await;
    assert!(
        kinds
            .iter()
            .filter(|kind| *kind == "DELIVERY_RETRY")
            .count()
            >= 2,
        "each failed attempt is an event: {kinds:?}"
    );
    assert_eq!(kinds.last().map(String::as_str), Some("SENT"), "{kinds:?}");
    assert_eq!(received.lock().expect("lock").len(), 1, "delivered once");
    complete_all(&rest, &cluster_id, std::slice::from_ref(&hook.token)).await;
    ember.stop().await;
}

/// A certificate authority of the test's own and a server certificate it
/// signed for 127.0.0.1: (CA PEM, server certificate DER, server key DER).
fn private_ca() -> (String, Vec<u8>, Vec<u8>) {
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "Ember test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).expect("CA");
    let server_key = rcgen::KeyPair::generate().expect("server key");
    let server = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .expect("server params")
        .signed_by(&server_key, &ca)
        .expect("server certificate");
    (ca.pem(), server.der().to_vec(), server_key.serialize_der())
}

/// An HTTPS server on 127.0.0.1:0 with this certificate, recording every
/// POST to `/hook`.
async fn https_webhook_target(certificate: Vec<u8>, key: Vec<u8>) -> (String, Received) {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

    let tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(
        vec![CertificateDer::from(certificate)],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
    )
    .expect("server TLS config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let received: Received = Arc::default();
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let app = app.clone();
            tokio::spawn(async move {
                // A client that does not trust the certificate hangs up here.
                let Ok(stream) = acceptor.accept(tcp).await else {
                    return;
                };
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(
                    hyper_util::rt::TokioIo::new(stream),
                    hyper_util::service::TowerToHyperService::new(app),
                )
                .await;
            });
        }
    });
    (format!("https://{address}/hook"), received)
}

/// `https://` webhooks: delivered when the target's certificate chains to
/// a trusted CA (`lifecycle_hook.webhook_ca_file` adds a private one), and
/// retried with the TLS error recorded when it does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_webhooks_trust_the_configured_ca_and_refuse_others() {
    let (ca_pem, certificate, key) = private_ca();
    let (_, untrusted_certificate, untrusted_key) = private_ca();
    let ca_dir = tempfile::tempdir().expect("dir");
    let ca_file = ca_dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca_pem).expect("CA file");
    let ember = TestEmber::start_configured(|config| {
        config.lifecycle_hook.webhook_ca_file = ca_file.display().to_string();
    })
    .await;
    let rest = Rest::member(&ember);
    let (trusted_url, received) = https_webhook_target(certificate, key).await;
    let (untrusted_url, untrusted_received) =
        https_webhook_target(untrusted_certificate, untrusted_key).await;

    let (cluster_id, _) = cluster_with_hooks(
        &rest,
        1,
        json!({"type": "webhook", "params": {"url": trusted_url}, "timeout": 60}),
    )
    .await;
    rest.act(&cluster_id, json!({"scale_in": {"count": 1}}))
        .await;
    wait_for("the HTTPS delivery", Duration::from_secs(15), || {
        let received = received.clone();
        async move { !received.lock().expect("lock").is_empty() }
    })
    .await;
    let (signature, body) = received.lock().expect("lock")[0].clone();
    assert_eq!(signature, hex_hmac(&ember.running.webhook_secret, &body));
    let message: Value = serde_json::from_slice(&body).expect("JSON message");
    let token = message["lifecycle_action_token"]
        .as_str()
        .expect("token")
        .to_owned();
    complete_all(&rest, &cluster_id, &[token]).await;

    // A target whose certificate no trusted CA signed: never delivered,
    // the TLS failure recorded and retried (the certificate may be fixed).
    let untrusted_cluster = plain_cluster(&rest, "untrusted", 1).await;
    attach(
        &rest,
        &untrusted_cluster,
        "drain-untrusted",
        json!({"type": "senlin.policy.deletion", "version": "1.1", "properties": {
            "hooks": {"type": "webhook", "params": {"url": untrusted_url}, "timeout": 60}}}),
    )
    .await;
    rest.act(&untrusted_cluster, json!({"scale_in": {"count": 1}}))
        .await;
    wait_for("a failed TLS attempt", Duration::from_secs(15), || async {
        pending_hooks(&ember, &untrusted_cluster, false)
            .await
            .first()
            .is_some_and(|hook| hook.delivery_attempts >= 1)
    })
    .await;
    let hook = pending_hooks(&ember, &untrusted_cluster, false)
        .await
        .remove(0);
    assert_eq!(
        hook.delivery_state,
        ember_proto::lifecyclehook::v1::DeliveryState::Retrying as i32,
        "{hook:?}"
    );
    assert!(
        hook.last_error.contains("certificate"),
        "the TLS failure is named: {hook:?}"
    );
    assert!(untrusted_received.lock().expect("lock").is_empty());
    ember.stop().await;
}

/// A profile `web` and a cluster `name` of `size` nodes; returns its id.
async fn plain_cluster(rest: &Rest<'_>, name: &str, size: u32) -> String {
    rest.create_profile(json!({"name": format!("{name}-profile"), "spec": {"type": "ember.instance", "version": "1.0",
                "properties": {"flavor": "m1.small", "image": "debian-12"}}})).await;
    let (status, headers, body) = rest
        .post(
            "/clusters",
            json!({"cluster": {"name": name, "profile_id": format!("{name}-profile"), "desired_capacity": size}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    body["cluster"]["id"].as_str().expect("id").to_owned()
}

pub(crate) async fn attach(rest: &Rest<'_>, cluster_id: &str, name: &str, spec: Value) {
    let (status, _, body) = rest
        .post("/policies", json!({"policy": {"name": name, "spec": spec}}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let done = rest
        .act(cluster_id, json!({"policy_attach": {"policy_id": name}}))
        .await;
    rest.wait_action(&done, "SUCCEEDED").await;
}

/// A scaling policy's cooldown: the next scale of its event is refused
/// (409, naming the policy and the time left) until it has passed; the
/// other event is not held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scaling_policy_cooldown_holds_the_next_scale_of_its_event() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let cluster_id = plain_cluster(&rest, "cool", 1).await;
    attach(
        &rest,
        &cluster_id,
        "out-by-one",
        json!({"type": "senlin.policy.scaling", "version": "1.0", "properties": {
            "event": "CLUSTER_SCALE_OUT",
            "adjustment": {"type": "CHANGE_IN_CAPACITY", "number": 1, "cooldown": 2}}}),
    )
    .await;
    let actions = format!("/clusters/{cluster_id}/actions");
    let (status, headers, body) = rest.post(&actions, json!({"scale_out": {}})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    let started = std::time::Instant::now();
    assert_eq!(rest.nodes(&cluster_id).await.len(), 2);

    let (status, _, body) = rest.post(&actions, json!({"scale_out": {}})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("\"out-by-one\"") && message.contains("cooldown"),
        "{body}"
    );
    // Scaling in is not held by a scale-out policy.
    let (status, headers, body) = rest.post(&actions, json!({"scale_in": {"count": 1}})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;

    // Once the cooldown has passed, the policy scales again.
    tokio::time::sleep(Duration::from_secs(2).saturating_sub(started.elapsed())).await;
    let (status, headers, body) = rest.post(&actions, json!({"scale_out": {}})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    wait_for("two nodes again", Duration::from_secs(10), || async {
        rest.nodes(&cluster_id).await.len() == 2
    })
    .await;
    ember.stop().await;
}

/// Senlin's scale semantics: a scale beyond the cluster's sizes is taken
/// (202) and its action fails with Senlin's reason, naming the scaling
/// policy when one applied; a best-effort policy takes what fits instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scales_beyond_the_sizes_fail_their_action_unless_a_policy_takes_what_fits() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    rest.create_profile(
        json!({"name": "bounded-profile", "spec": {"type": "ember.instance", "version": "1.0",
                "properties": {"flavor": "m1.small", "image": "debian-12"}}}),
    )
    .await;
    let (status, headers, body) = rest
        .post(
            "/clusters",
            json!({"cluster": {"name": "bounded", "profile_id": "bounded-profile",
                "desired_capacity": 2, "min_size": 1, "max_size": 3}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    let cluster_id = body["cluster"]["id"].as_str().expect("id").to_owned();
    let actions = format!("/clusters/{cluster_id}/actions");
    let (rest, actions) = (&rest, actions.as_str());
    let failed_with = |body: Value| async move {
        let (status, headers, answer) = rest.post(actions, body).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
        let action = location(&headers);
        rest.wait_action(&action, "FAILED").await;
        let shown = rest.get(action.trim_start_matches("/clustering/v1")).await;
        shown["action"]["status_reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };

    assert_eq!(
        failed_with(json!({"scale_out": {"count": 2}})).await,
        "The target capacity (4) is greater than the cluster's max_size (3)."
    );
    assert_eq!(
        failed_with(json!({"scale_in": {"count": 2}})).await,
        "The target capacity (0) is less than the cluster's min_size (1)."
    );
    assert_eq!(rest.nodes(&cluster_id).await.len(), 2);

    attach(
        rest,
        &cluster_id,
        "in-strict",
        json!({"type": "senlin.policy.scaling", "version": "1.0", "properties": {
            "event": "CLUSTER_SCALE_IN",
            "adjustment": {"type": "CHANGE_IN_CAPACITY", "number": 1}}}),
    )
    .await;
    assert_eq!(
        failed_with(json!({"scale_in": {"count": 2}})).await,
        "Policy check failure: Failed policy 'in-strict': The target capacity (0) is less than the cluster's min_size (1)."
    );

    attach(
        rest,
        &cluster_id,
        "out-best-effort",
        json!({"type": "senlin.policy.scaling", "version": "1.0", "properties": {
            "event": "CLUSTER_SCALE_OUT",
            "adjustment": {"type": "CHANGE_IN_CAPACITY", "number": 1, "best_effort": true}}}),
    )
    .await;
    let (status, headers, body) = rest.post(actions, json!({"scale_out": {"count": 5}})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    wait_for(
        "three nodes, the max_size",
        Duration::from_secs(10),
        || async { rest.nodes(&cluster_id).await.len() == 3 },
    )
    .await;
    ember.stop().await;
}

/// A deletion policy's grace period (no hooks): the victim stays DELETING
/// for that long before it is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_grace_period_delays_the_delete() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let cluster_id = plain_cluster(&rest, "graceful", 2).await;
    attach(
        &rest,
        &cluster_id,
        "graceful-delete",
        json!({"type": "senlin.policy.deletion", "version": "1.0",
            "properties": {"criteria": "OLDEST_FIRST", "grace_period": 1}}),
    )
    .await;
    let started = std::time::Instant::now();
    let scale_in = rest
        .act(&cluster_id, json!({"scale_in": {"count": 1}}))
        .await;
    wait_for("the victim DELETING", Duration::from_secs(5), || async {
        rest.nodes(&cluster_id)
            .await
            .iter()
            .any(|node| node["status"] == "DELETING")
    })
    .await;
    rest.wait_action(&scale_in, "SUCCEEDED").await;
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "deleted after {:?}, before the grace period",
        started.elapsed()
    );
    assert_eq!(rest.nodes(&cluster_id).await.len(), 1);
    ember.stop().await;
}
