//! `PUT /compute/v1/instances/{uuid}/lock`: every status code of the spec,
//! the owner/admin matrix, and what a lock blocks.

use ember_tests::TestEmber;
use reqwest::Method;
use serde_json::json;

use super::{
    Callers, call, create, create_active, lock, message, power, show, wait_for_status,
    wait_until_deleted,
};

#[tokio::test]
async fn lock_and_unlock_answer_202_and_show_who_locked_when_and_why() {
    let ember = TestEmber::start().await;
    let callers = Callers::of(&ember);
    let uuid = create_active(&ember, &callers.member, "web-1").await;

    let (status, body) = lock(
        &ember,
        &callers.member,
        &uuid,
        json!({"target": true, "reason": "maintenance"}),
    )
    .await;
    assert_eq!((status, &body), (202, &serde_json::Value::Null));
    let shown = show(&ember, &callers.member, &uuid).await;
    assert_eq!(shown["locked"], true);
    assert_eq!(shown["locked_by"], "owner");
    assert_eq!(shown["locked_by_user"], "demo");
    assert_eq!(shown["locked_reason"], "maintenance");
    assert!(
        shown["locked_at"]
            .as_str()
            .is_some_and(|at| at.ends_with('Z'))
    );

    assert_eq!(shown["lock_expires_at"], serde_json::Value::Null);

    // The owner locking again changes nothing; with an expiry, it renews
    // the lock until then (same holder, time and reason).
    let (status, _) = lock(&ember, &callers.member, &uuid, json!({"target": true})).await;
    assert_eq!(status, 202);
    assert_eq!(
        show(&ember, &callers.member, &uuid).await["locked_reason"],
        "maintenance"
    );
    let (status, body) = lock(
        &ember,
        &callers.member,
        &uuid,
        json!({"target": true, "expires_in": 3600}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let renewed = show(&ember, &callers.member, &uuid).await;
    assert!(renewed["lock_expires_at"].is_string(), "{renewed}");
    assert_eq!(renewed["locked_at"], shown["locked_at"], "{renewed}");
    assert_eq!(renewed["locked_reason"], "maintenance", "{renewed}");

    let (listed_status, listed) = call(
        &ember,
        Method::GET,
        "/instances?locked=true",
        &callers.member,
        None,
    )
    .await;
    assert_eq!(listed_status, 200);
    assert_eq!(listed["instances"][0]["uuid"], uuid.as_str());
    let (_, unlocked_list) = call(
        &ember,
        Method::GET,
        "/instances?locked=false",
        &callers.member,
        None,
    )
    .await;
    assert_eq!(unlocked_list["instances"], json!([]));

    let (status, _) = lock(&ember, &callers.member, &uuid, json!({"target": false})).await;
    assert_eq!(status, 202);
    let shown = show(&ember, &callers.member, &uuid).await;
    assert_eq!(shown["locked"], false);
    assert_eq!(shown["locked_by"], serde_json::Value::Null);
    ember.stop().await;
}

#[tokio::test]
async fn bad_lock_bodies_are_400_naming_the_key() {
    let ember = TestEmber::start().await;
    let callers = Callers::of(&ember);
    let uuid = create(&ember, &callers.member, "web-1", json!({})).await;
    let cases = [
        (json!({}), "target: missing"),
        (json!({"target": "yes"}), "target: must be true or false"),
        (json!({"target": 1}), "target: must be true or false"),
        (json!({"target": null}), "target: must be true or false"),
        (
            json!({"target": true, "force": true}),
            "unknown key \"force\"",
        ),
        (
            json!({"target": true, "reason": "r".repeat(256)}),
            "reason: must be 1-255 characters (got 256)",
        ),
        (
            json!({"target": true, "reason": ""}),
            "reason: must be 1-255 characters (got 0)",
        ),
        (
            json!({"target": true, "reason": 7}),
            "reason: must be a string",
        ),
        (
            json!({"target": false, "reason": "done"}),
            "reason: only a lock",
        ),
        (
            json!({"target": true, "expires_in": 0}),
            "expires_in: 0 is not a positive number of seconds",
        ),
        (
            json!({"target": true, "expires_in": "1h"}),
            "expires_in: must be whole seconds",
        ),
        (
            json!({"target": true, "expires_at": "noon"}),
            "expires_at: \"noon\" is not an ISO 8601 time",
        ),
        (
            json!({"target": true, "expires_at": "2001-01-01T00:00:00Z"}),
            "expires_at: 2001-01-01T00:00:00Z is not in the future",
        ),
        (
            json!({"target": false, "expires_in": 60}),
            "only a lock (\"target\": true) expires",
        ),
        (json!([true]), "the body must be a JSON object"),
    ];
    for (body, expected) in cases {
        let (status, answer) = lock(&ember, &callers.member, &uuid, body.clone()).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(
            message(&answer).contains(expected),
            "{body}: {expected:?} not in {answer}"
        );
        assert_eq!(answer["error"]["type"], "InvalidInput");
    }

    let response = ember
        .http
        .put(ember.url(&format!("/compute/v1/instances/{uuid}/lock")))
        .header("X-Auth-Token", &callers.member)
        .body("{not json")
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 400);

    let (status, answer) = lock(&ember, &callers.member, "web-1", json!({"target": true})).await;
    assert_eq!(status, 400);
    assert!(
        message(&answer).contains("instance uuid: \"web-1\" is not a UUID"),
        "{answer}"
    );
    // Nothing was half-applied by the refused requests.
    assert_eq!(show(&ember, &callers.member, &uuid).await["locked"], false);
    ember.stop().await;
}

#[tokio::test]
async fn unknown_and_other_projects_instances_are_404_and_no_token_is_401() {
    let ember = TestEmber::start().await;
    let callers = Callers::of(&ember);
    let uuid = create(&ember, &callers.member, "web-1", json!({})).await;
    let unknown = uuid::Uuid::now_v7().to_string();
    for (token, target) in [
        (&callers.member, unknown.as_str()),
        (&callers.stranger, uuid.as_str()),
    ] {
        for body in [json!({"target": true}), json!({"target": false})] {
            let (status, answer) = lock(&ember, token, target, body).await;
            assert_eq!(status, 404, "{answer}");
            assert!(message(&answer).contains("not found"), "{answer}");
        }
    }
    let response = ember
        .http
        .put(ember.url(&format!("/compute/v1/instances/{uuid}/lock")))
        .json(&json!({"target": true}))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 401);
    ember.stop().await;
}

#[tokio::test]
async fn invalid_states_are_409() {
    let ember = TestEmber::start().await;
    let callers = Callers::of(&ember);
    let uuid = create_active(&ember, &callers.member, "web-1").await;

    let (status, answer) = lock(&ember, &callers.member, &uuid, json!({"target": false})).await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(message(&answer), "instance \"web-1\" is not locked");

    let (status, _) = call(
        &ember,
        Method::DELETE,
        &format!("/instances/{uuid}"),
        &callers.member,
        None,
    )
    .await;
    assert_eq!(status, 202);
    // DELETING right after the request: it cannot be locked; once the
    // driver is done it is gone (404), as in Nova.
    let (status, answer) = lock(&ember, &callers.member, &uuid, json!({"target": true})).await;
    assert_eq!(status, 409, "{answer}");
    assert!(message(&answer).contains("cannot be locked"), "{answer}");
    wait_until_deleted(&ember, &callers.member, &uuid).await;
    let (status, answer) = lock(&ember, &callers.member, &uuid, json!({"target": true})).await;
    assert_eq!(status, 404, "{answer}");
    ember.stop().await;
}

#[tokio::test]
async fn a_building_instance_can_be_locked() {
    let ember = TestEmber::start().await;
    let callers = Callers::of(&ember);
    let uuid = create(
        &ember,
        &callers.member,
        "slow",
        json!({"ember:simulate_build_ms": "60000"}),
    )
    .await;
    let (status, _) = lock(&ember, &callers.member, &uuid, json!({"target": true})).await;
    assert_eq!(status, 202);
    let shown = show(&ember, &callers.member, &uuid).await;
    assert_eq!(
        (&shown["status"], &shown["locked"]),
        (&json!("BUILDING"), &json!(true))
    );
    ember.stop().await;
}

#[tokio::test]
async fn the_owner_admin_matrix() {
    let ember = TestEmber::start().await;
    let callers = Callers::of(&ember);
    let uuid = create_active(&ember, &callers.member, "web-1").await;
    let locked_by = |value: serde_json::Value| value["locked_by"].clone();

    // An admin of another project locks as admin, over the owner's lock.
    assert_eq!(
        lock(&ember, &callers.member, &uuid, json!({"target": true}))
            .await
            .0,
        202
    );
    let (status, _) = lock(
        &ember,
        &callers.other_admin,
        &uuid,
        json!({"target": true, "reason": "hardware maintenance"}),
    )
    .await;
    assert_eq!(status, 202);
    let shown = show(&ember, &callers.member, &uuid).await;
    assert_eq!(locked_by(shown.clone()), "admin");
    assert_eq!(shown["locked_by_user"], "ops");

    // The owner cannot lift an admin lock: 403, naming the lock.
    for owner in [&callers.member, &callers.colleague] {
        let (status, answer) = lock(&ember, owner, &uuid, json!({"target": false})).await;
        assert_eq!(status, 403, "{answer}");
        assert!(
            message(&answer).contains("only an admin can unlock it")
                && message(&answer).contains("hardware maintenance"),
            "{answer}"
        );
    }
    // A reader can change nothing, locked or not: 403.
    let (status, answer) = lock(&ember, &callers.reader, &uuid, json!({"target": false})).await;
    assert_eq!(status, 403, "{answer}");
    assert!(message(&answer).contains("reader"), "{answer}");
    // An admin can, from any project.
    let (status, _) = lock(
        &ember,
        &callers.project_admin,
        &uuid,
        json!({"target": false}),
    )
    .await;
    assert_eq!(status, 202);

    // An owner lock is lifted by the owner, a colleague or an admin.
    for unlocker in [&callers.member, &callers.colleague, &callers.other_admin] {
        assert_eq!(
            lock(&ember, &callers.member, &uuid, json!({"target": true}))
                .await
                .0,
            202
        );
        assert_eq!(
            locked_by(show(&ember, &callers.member, &uuid).await),
            "owner"
        );
        let (status, answer) = lock(&ember, unlocker, &uuid, json!({"target": false})).await;
        assert_eq!(status, 202, "{answer}");
    }

    // An admin scoped to the instance's own project locks as owner (as in
    // Mogan and Nova), so the project's members can lift it.
    assert_eq!(
        lock(
            &ember,
            &callers.project_admin,
            &uuid,
            json!({"target": true})
        )
        .await
        .0,
        202
    );
    assert_eq!(
        locked_by(show(&ember, &callers.member, &uuid).await),
        "owner"
    );
    assert_eq!(
        lock(&ember, &callers.member, &uuid, json!({"target": false}))
            .await
            .0,
        202
    );

    // Another project's admin lifts its own lock.
    assert_eq!(
        lock(&ember, &callers.other_admin, &uuid, json!({"target": true}))
            .await
            .0,
        202
    );
    assert_eq!(
        lock(
            &ember,
            &callers.other_admin,
            &uuid,
            json!({"target": false})
        )
        .await
        .0,
        202
    );
    assert_eq!(show(&ember, &callers.member, &uuid).await["locked"], false);
    ember.stop().await;
}

#[tokio::test]
async fn a_lock_blocks_members_and_lets_admins_act() {
    let ember = TestEmber::start().await;
    let callers = Callers::of(&ember);
    let uuid = create_active(&ember, &callers.member, "web-1").await;
    let (status, _) = lock(
        &ember,
        &callers.member,
        &uuid,
        json!({"target": true, "reason": "db migration"}),
    )
    .await;
    assert_eq!(status, 202);

    for member in [&callers.member, &callers.colleague] {
        let blocked = [
            call(
                &ember,
                Method::PATCH,
                &format!("/instances/{uuid}"),
                member,
                Some(json!({"name": "renamed"})),
            )
            .await,
            power(&ember, member, &uuid, "off").await,
            power(&ember, member, &uuid, "reboot").await,
            call(
                &ember,
                Method::DELETE,
                &format!("/instances/{uuid}"),
                member,
                None,
            )
            .await,
        ];
        for (status, answer) in blocked {
            assert_eq!(status, 409, "{answer}");
            let text = message(&answer);
            assert!(
                text.starts_with("instance \"web-1\" is locked (by owner \"demo\" at ")
                    && text.ends_with(": db migration): unlock it first"),
                "{text}"
            );
        }
    }
    let shown = show(&ember, &callers.member, &uuid).await;
    assert_eq!(
        (&shown["name"], &shown["status"]),
        (&json!("web-1"), &json!("ACTIVE"))
    );

    // Admins act through the lock, and the lock stays.
    let (status, answer) = call(
        &ember,
        Method::PATCH,
        &format!("/instances/{uuid}"),
        &callers.other_admin,
        Some(json!({"name": "web-1-maintained"})),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["instance"]["name"], "web-1-maintained");
    assert_eq!(answer["instance"]["locked"], true);
    assert_eq!(
        power(&ember, &callers.project_admin, &uuid, "off").await.0,
        202
    );
    wait_for_status(&ember, &callers.member, &uuid, "STOPPED").await;
    let (status, _) = call(
        &ember,
        Method::DELETE,
        &format!("/instances/{uuid}"),
        &callers.other_admin,
        None,
    )
    .await;
    assert_eq!(status, 202);
    wait_until_deleted(&ember, &callers.member, &uuid).await;
    ember.stop().await;
}
