//! Cluster maintenance locks through the Clustering REST API (Ember's
//! `lock` and `unlock` cluster actions): the lock shows on the cluster;
//! while it holds, a scale-out by the user and a receiver's webhook fired
//! with no token are both refused 409 naming it; bad lock requests are
//! 400 naming what is wrong; another project cannot find the cluster to
//! lock it; unlock lifts it and the webhook works again.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::clustering::clusters::Rest;
use crate::clustering::senlin_receivers::{active_cluster, trigger};

/// A webhook receiver that scales `cluster` out by one; its alarm URL.
pub(crate) async fn scale_out_webhook(rest: &Rest<'_>, cluster: &str) -> String {
    let (status, _, body) = rest
        .post(
            "/receivers",
            json!({"receiver": {"name": "grow", "type": "webhook", "cluster_id": cluster,
                "action": "CLUSTER_SCALE_OUT", "params": {"count": 1}}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["receiver"]["channel"]["alarm_url"]
        .as_str()
        .expect("alarm_url")
        .to_owned()
}

fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_cluster_refuses_users_and_webhooks_until_unlocked() {
    let ember = ember_tests::TestEmber::start().await;
    let rest = Rest::member(&ember);
    let cluster_id = active_cluster(&rest, "db", 1).await;
    let alarm_url = scale_out_webhook(&rest, "db").await;
    let actions = format!("/clusters/{cluster_id}/actions");

    // Bad requests name what is wrong, and lock nothing.
    for (lock, expected) in [
        (
            json!({"level": "stacks"}),
            "level: \"stacks\" is not a lock level",
        ),
        (
            json!({"expires_in": -1}),
            "expires_in: -1 is not a positive",
        ),
        (
            json!({"expires_in": 60, "expires_at": "2099-01-01T00:00:00Z"}),
            "not both",
        ),
        (
            json!({"expires_at": "tomorrow"}),
            "expires_at: \"tomorrow\" is not an ISO 8601 time",
        ),
        (json!({"reason": ""}), "reason: must be 1-255 characters"),
        (json!({"holder": "me"}), "'holder' was unexpected"),
    ] {
        let (status, _, body) = rest.post(&actions, json!({ "lock": lock })).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{lock}: {body}");
        assert!(message(&body).contains(expected), "{lock}: {body}");
    }
    let shown = rest.get(&format!("/clusters/{cluster_id}")).await;
    assert_eq!(shown["cluster"]["maintenance_lock"], Value::Null, "{shown}");

    // Another project does not find it.
    let other = Rest {
        ember: &ember,
        token: ember.outsider_token(),
    };
    let (status, _, body) = other.post(&actions, json!({"lock": {}})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");

    // Locked, for an hour.
    let (status, _, body) = rest
        .post(
            &actions,
            json!({"lock": {"level": "clusters", "reason": "database maintenance", "expires_in": 3600}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let lock = &body["cluster"]["maintenance_lock"];
    assert_eq!(lock["level"], "clusters", "{body}");
    assert_eq!(lock["reason"], "database maintenance", "{body}");
    assert_eq!(lock["locked_by_role"], "owner", "{body}");
    assert!(lock["expires_at"].is_string(), "{body}");
    let shown = rest.get(&format!("/clusters/{cluster_id}")).await;
    assert_eq!(&shown["cluster"]["maintenance_lock"], lock, "{shown}");

    // The user's scale-out and the receiver's webhook are refused alike.
    let (status, _, body) = rest
        .post(&actions, json!({"scale_out": {"count": 1}}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        message(&body).contains("is locked (level clusters, by owner")
            && message(&body).contains("database maintenance"),
        "{body}"
    );
    let (status, _, body) = trigger(&ember, &alarm_url, None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(message(&body).contains("is locked"), "{body}");
    assert_eq!(rest.nodes(&cluster_id).await.len(), 1, "nothing grew");

    // Unlocked: the lock is gone, a second unlock finds nothing, and the
    // webhook works again.
    let (status, _, body) = rest.post(&actions, json!({"unlock": {}})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["cluster"]["maintenance_lock"], Value::Null, "{body}");
    let (status, _, body) = rest.post(&actions, json!({"unlock": null})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(message(&body).contains("is not locked"), "{body}");
    let (status, location, body) = trigger(&ember, &alarm_url, None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location, "SUCCEEDED").await;
    assert_eq!(rest.nodes(&cluster_id).await.len(), 2, "grown");
}
