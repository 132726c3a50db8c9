//! Lifecycle results beyond Senlin's: `complete_lifecycle` with ABANDON,
//! and a hook's `default_result` when its deadline passes first. For a
//! scale-in, ABANDON keeps the node — out of its cluster and out of
//! service, for the operator (AWS's Retain) — and CONTINUE deletes it.
//! New policies' hook timeouts are bounded (the harness lowers the floor
//! to 1 s to watch deadlines pass).

use std::time::Duration;

use axum::http::StatusCode;
use ember_tests::{TestEmber, wait_for};
use serde_json::{Value, json};

use crate::clustering::clusters::{Rest, location, webhook_target};

/// A cluster of `size` instances with a deletion policy whose webhook hook
/// has `hooks` (merged into the type, url and params).
async fn hooked_cluster(
    rest: &Rest<'_>,
    name: &str,
    size: u32,
    hooks: Value,
) -> (String, crate::clustering::clusters::Received) {
    let (hook_url, received) = webhook_target().await;
    rest.create_profile(
        json!({"name": format!("{name}-p"), "spec": {"type": "ember.instance",
                "version": "1.0", "properties": {"flavor": "m1.small", "image": "debian-12"}}}),
    )
    .await;
    let (status, headers, body) = rest
        .post(
            "/clusters",
            json!({"cluster": {"name": name, "profile_id": format!("{name}-p"),
                "min_size": 0, "max_size": 10, "desired_capacity": size}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let cluster_id = body["cluster"]["id"].as_str().expect("id").to_owned();
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    let mut spec_hooks = json!({"type": "webhook", "params": {"url": hook_url}});
    for (key, value) in hooks.as_object().expect("hooks") {
        spec_hooks[key] = value.clone();
    }
    let (status, _, body) = rest
        .post(
            "/policies",
            json!({"policy": {"name": format!("{name}-drain"), "spec": {"type": "senlin.policy.deletion",
                "version": "1.1", "properties": {"criteria": "OLDEST_FIRST", "hooks": spec_hooks}}}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let attached = rest
        .act(
            &cluster_id,
            json!({"policy_attach": {"policy_id": format!("{name}-drain")}}),
        )
        .await;
    rest.wait_action(&attached, "SUCCEEDED").await;
    (cluster_id, received)
}

/// The tokens of the first `count` hook messages.
async fn tokens(received: &crate::clustering::clusters::Received, count: usize) -> Vec<String> {
    wait_for("the hook messages", Duration::from_secs(15), || {
        let received = received.clone();
        async move { received.lock().expect("lock").len() >= count }
    })
    .await;
    received
        .lock()
        .expect("lock")
        .iter()
        .map(|(_, body)| {
            let message: Value = serde_json::from_slice(body).expect("JSON");
            message["lifecycle_action_token"]
                .as_str()
                .expect("token")
                .to_owned()
        })
        .collect()
}

async fn node(rest: &Rest<'_>, id: &str) -> Value {
    rest.get(&format!("/nodes/{id}")).await["node"].clone()
}

async fn action(rest: &Rest<'_>, id: &str) -> Value {
    rest.get(&format!("/actions/{id}")).await["action"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandon_keeps_the_node_out_of_service_and_continue_deletes_it() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let (cluster_id, received) = hooked_cluster(&rest, "drained", 2, json!({"timeout": 60})).await;
    let scale_in = rest
        .act(&cluster_id, json!({"scale_in": {"count": 2}}))
        .await;
    let tokens = tokens(&received, 2).await;
    let victims: Vec<String> = {
        let mut ids = Vec::new();
        for token in &tokens {
            ids.push(
                action(&rest, token).await["target"]
                    .as_str()
                    .expect("target")
                    .to_owned(),
            );
        }
        ids
    };

    let (status, _, body) = rest
        .post(
            &format!("/clusters/{cluster_id}/actions"),
            json!({"complete_lifecycle": {"lifecycle_action_token": tokens[0],
                "lifecycle_action_result": "RETAIN"}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|message| message
                .contains("lifecycle_action_result \"RETAIN\" must be CONTINUE or ABANDON")),
        "{body}"
    );
    for (token, result) in tokens.iter().zip(["abandon", "CONTINUE"]) {
        let (status, _, body) = rest
            .post(
                &format!("/clusters/{cluster_id}/actions"),
                json!({"complete_lifecycle": {"lifecycle_action_token": token,
                    "lifecycle_action_result": result}}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    rest.wait_action(&scale_in, "SUCCEEDED").await;

    // ABANDON: the node is kept, no longer a member, and says why.
    let kept = node(&rest, &victims[0]).await;
    assert_eq!(kept["cluster_id"], "", "{kept}");
    assert_eq!(kept["status"], "ACTIVE", "{kept}");
    let reason = kept["status_reason"].as_str().unwrap_or_default();
    assert!(
        reason
            .starts_with("kept out of service: lifecycle ABANDON (completed with ABANDON by demo")
            && reason.ends_with("the node left its cluster: delete it, or add it back"),
        "{kept}"
    );
    // CONTINUE: deleted.
    let (status, _, _) = rest
        .call(
            reqwest::Method::GET,
            &format!("/nodes/{}", victims[1]),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(rest.nodes(&cluster_id).await.is_empty());
    // The answer to completing it again says how it ended.
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
            .is_some_and(|message| message.contains("already completed with ABANDON")),
        "{body}"
    );
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_applies_the_hooks_default_result() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let (cluster_id, received) = hooked_cluster(
        &rest,
        "retained",
        1,
        json!({"timeout": 1, "default_result": "ABANDON"}),
    )
    .await;
    let victim = rest.nodes(&cluster_id).await[0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let scale_in = rest
        .act(&cluster_id, json!({"scale_in": {"count": 1}}))
        .await;
    tokens(&received, 1).await;
    rest.wait_action(&scale_in, "SUCCEEDED").await;
    let kept = node(&rest, &victim).await;
    assert_eq!(kept["cluster_id"], "", "{kept}");
    assert!(
        kept["status_reason"].as_str().is_some_and(|reason| reason
            .contains("lifecycle deadline passed, the hook's default result is ABANDON")),
        "{kept}"
    );
    let events = rest.get(&format!("/events?obj_id={victim}")).await;
    assert!(
        events["events"]
            .as_array()
            .is_some_and(|events| events.iter().any(|event| event["status"] == "RETAINED")),
        "{events}"
    );

    // The default, CONTINUE, deletes it as Senlin does.
    let (cluster_id, received) = hooked_cluster(&rest, "continued", 1, json!({"timeout": 1})).await;
    let victim = rest.nodes(&cluster_id).await[0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let scale_in = rest
        .act(&cluster_id, json!({"scale_in": {"count": 1}}))
        .await;
    tokens(&received, 1).await;
    rest.wait_action(&scale_in, "SUCCEEDED").await;
    let (status, _, _) = rest
        .call(reqwest::Method::GET, &format!("/nodes/{victim}"), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A new hook's timeout lies within the bounds (at most 2 h).
    let (status, _, body) = rest
        .post(
            "/policies",
            json!({"policy": {"name": "too-long", "spec": {"type": "senlin.policy.deletion",
                "version": "1.1", "properties": {"hooks": {"params": {"queue": "q"}, "timeout": 7201}}}}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("hooks.timeout 7201 must be 1-7200 seconds")),
        "{body}"
    );
    ember.stop().await;
}

/// `GET /clusters/{id}/lifecycle-actions` (Ember's): what waits, with the
/// deadline as heartbeats move it — for the console's countdown and any
/// operator's script — and nothing for another project.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_lists_its_waiting_lifecycle_actions_with_their_deadlines() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let (cluster_id, received) = hooked_cluster(&rest, "listed", 2, json!({"timeout": 120})).await;
    let empty = rest
        .get(&format!("/clusters/{cluster_id}/lifecycle-actions"))
        .await;
    assert_eq!(empty, json!({"lifecycle_actions": []}));

    let scale_in = rest
        .act(&cluster_id, json!({"scale_in": {"count": 1}}))
        .await;
    let token = tokens(&received, 1).await.remove(0);
    // By name as well as by id.
    let listed = rest.get("/clusters/listed/lifecycle-actions").await;
    let waiting = listed["lifecycle_actions"]
        .as_array()
        .expect("a list")
        .clone();
    assert_eq!(waiting.len(), 1, "{listed}");
    let entry = &waiting[0];
    assert_eq!(entry["lifecycle_action_token"], token.as_str());
    assert_eq!(entry["cluster_id"], cluster_id.as_str());
    assert_eq!(entry["node_id"], action(&rest, &token).await["target"]);
    assert_eq!(entry["lifecycle_transition_type"], "terminating");
    assert_eq!(entry["timeout"], 120);
    let at = |value: &Value| {
        chrono::DateTime::parse_from_rfc3339(value.as_str().expect("a time")).expect("RFC 3339")
    };
    let first_deadline = at(&entry["deadline"]);
    let created = at(&entry["created_at"]);
    let span = (first_deadline - created).num_seconds();
    assert!(
        (119..=121).contains(&span),
        "deadline {span} s after the wait began"
    );

    // A heartbeat moves the deadline, and the list shows where to.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, _, body) = rest
        .post(
            &format!("/clusters/{cluster_id}/actions"),
            json!({"record_lifecycle_heartbeat": {"lifecycle_action_token": token}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let moved = rest
        .get(&format!("/clusters/{cluster_id}/lifecycle-actions"))
        .await;
    let moved_deadline = at(&moved["lifecycle_actions"][0]["deadline"]);
    assert!(moved_deadline > first_deadline, "{moved}");
    assert_eq!(moved["lifecycle_actions"][0]["deadline"], body["deadline"]);

    // Another project sees no such cluster; an unknown one is 404 too.
    let outsider = ember.outsider_token();
    let foreign = Rest {
        ember: &ember,
        token: outsider,
    };
    for path in [
        format!("/clusters/{cluster_id}/lifecycle-actions"),
        "/clusters/listed/lifecycle-actions".to_owned(),
        "/clusters/no-such-cluster/lifecycle-actions".to_owned(),
    ] {
        let (status, _, body) = foreign.call(reqwest::Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
    }

    // Answered: nothing waits any more.
    let (status, _, body) = rest
        .post(
            &format!("/clusters/{cluster_id}/actions"),
            json!({"complete_lifecycle": {"lifecycle_action_token": token}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&scale_in, "SUCCEEDED").await;
    let after = rest
        .get(&format!("/clusters/{cluster_id}/lifecycle-actions"))
        .await;
    assert_eq!(after, json!({"lifecycle_actions": []}));
}
