//! The rest of the Compute API: create, list, show, update, power and
//! delete, with the simulated driver's asynchronous transitions and its
//! failure injection, and projects that cannot see each other.

use ember_tests::TestEmber;
use reqwest::Method;
use serde_json::{Value, json};

use super::{
    Callers, call, create, create_active, message, power, show, wait_for_status, wait_until_deleted,
};

#[tokio::test]
async fn an_instance_is_accepted_building_and_becomes_active() {
    let ember = TestEmber::start().await;
    let callers = Callers::of(&ember);
    let response = ember
        .http
        .post(ember.url("/compute/v1/instances"))
        .header("X-Auth-Token", &callers.member)
        .json(
            &json!({"instance": {"name": "web-1", "flavor": "m1.small", "image": "debian-12",
                       "metadata": {"role": "web"}}}),
        )
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 202);
    let location = response
        .headers()
        .get("location")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let body: Value = response.json().await.expect("json");
    let instance = &body["instance"];
    let uuid = instance["uuid"].as_str().expect("uuid").to_owned();
    assert_eq!(location, Some(format!("/compute/v1/instances/{uuid}")));
    assert_eq!(instance["status"], "BUILDING");
    assert_eq!(instance["power_state"], "nostate");
    assert_eq!(instance["project_id"], "demo");
    assert_eq!(instance["user_id"], "demo");
    assert_eq!(instance["metadata"], json!({"role": "web"}));
    assert_eq!(instance["locked"], false);

    let active = wait_for_status(&ember, &callers.member, &uuid, "ACTIVE").await;
    assert_eq!(active["power_state"], "on");
    assert_eq!(active["status_reason"], Value::Null);

    // The bare object (Mogan's shape) is accepted too.
    let (status, body) = call(
        &ember,
        Method::POST,
        "/instances",
        &callers.member,
        Some(json!({"name": "web-2", "flavor": "m1.small", "image": "debian-12"})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    ember.stop().await;
}

#[tokio::test]
async fn a_failed_build_leaves_the_instance_in_error_with_the_fault() {
    let ember = TestEmber::start().await;
    let callers = Callers::of(&ember);
    let uuid = create(
        &ember,
        &callers.member,
        "doomed",
        json!({"ember:simulate_failure": "build"}),
    )
    .await;
    let failed = wait_for_status(&ember, &callers.member, &uuid, "ERROR").await;
    assert_eq!(failed["power_state"], "nostate");
    assert!(
        failed["status_reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("build failed: simulated build failure")),
        "{failed}"
    );
    // An instance in ERROR can still be deleted.
    let (status, _) = call(
        &ember,
        Method::DELETE,
        &format!("/instances/{uuid}"),
        &callers.member,
        None,
    )
    .await;
    assert_eq!(status, 202);
    wait_until_deleted(&ember, &callers.member, &uuid).await;
    ember.stop().await;
}

#[tokio::test]
async fn power_actions_follow_the_state_machine() {
    let ember = TestEmber::start().await;
    let callers = Callers::of(&ember);
    let uuid = create_active(&ember, &callers.member, "web-1").await;

    let (status, answer) = power(&ember, &callers.member, &uuid, "on").await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(message(&answer), "instance \"web-1\" is already on");

    assert_eq!(power(&ember, &callers.member, &uuid, "off").await.0, 202);
    let stopped = wait_for_status(&ember, &callers.member, &uuid, "STOPPED").await;
    assert_eq!(stopped["power_state"], "off");
    let (status, answer) = power(&ember, &callers.member, &uuid, "reboot").await;
    assert_eq!(status, 409, "{answer}");

    assert_eq!(power(&ember, &callers.member, &uuid, "on").await.0, 202);
    wait_for_status(&ember, &callers.member, &uuid, "ACTIVE").await;
    assert_eq!(power(&ember, &callers.member, &uuid, "reboot").await.0, 202);
    assert_eq!(
        show(&ember, &callers.member, &uuid).await["status"],
        "REBOOTING"
    );
    let rebooted = wait_for_status(&ember, &callers.member, &uuid, "ACTIVE").await;
    assert_eq!(rebooted["power_state"], "on");

    for (body, expected) in [
        (
            json!({"target": "sideways"}),
            "target: must be \"on\", \"off\" or \"reboot\"",
        ),
        (json!({}), "target: missing"),
        (
            json!({"target": "on", "force": true}),
            "unknown key \"force\"",
        ),
    ] {
        let (status, answer) = call(
            &ember,
            Method::PUT,
            &format!("/instances/{uuid}/states/power"),
            &callers.member,
            Some(body),
        )
        .await;
        assert_eq!(status, 400, "{answer}");
        assert!(message(&answer).contains(expected), "{answer}");
    }
    ember.stop().await;
}

#[tokio::test]
async fn a_failing_power_action_leaves_the_instance_in_error() {
    let ember = TestEmber::start().await;
    let callers = Callers::of(&ember);
    let uuid = create(
        &ember,
        &callers.member,
        "flaky",
        json!({"ember:simulate_failure": "reboot"}),
    )
    .await;
    wait_for_status(&ember, &callers.member, &uuid, "ACTIVE").await;
    assert_eq!(power(&ember, &callers.member, &uuid, "reboot").await.0, 202);
    let failed = wait_for_status(&ember, &callers.member, &uuid, "ERROR").await;
    assert!(
        failed["status_reason"]
            .as_str()
            .is_some_and(|reason| reason.starts_with("reboot failed")),
        "{failed}"
    );
    ember.stop().await;
}

#[tokio::test]
async fn update_renames_and_replaces_metadata() {
    let ember = TestEmber::start().await;
    let callers = Callers::of(&ember);
    let uuid = create(&ember, &callers.member, "web-1", json!({"a": "1"})).await;
    let path = format!("/instances/{uuid}");
    let (status, answer) = call(
        &ember,
        Method::PATCH,
        &path,
        &callers.member,
        Some(json!({"name": "web-2", "metadata": {"b": "2"}})),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["instance"]["name"], "web-2");
    assert_eq!(answer["instance"]["metadata"], json!({"b": "2"}));

    for (body, expected) in [
        (json!({"flavor": "m1.large"}), "unknown key \"flavor\""),
        (json!({}), "nothing to update"),
        (json!({"name": ""}), "name: must not be empty"),
        (json!({"name": 3}), "name: must be a string"),
        (
            json!({"metadata": {"k": 1}}),
            "metadata \"k\": values must be strings",
        ),
    ] {
        let (status, answer) = call(
            &ember,
            Method::PATCH,
            &path,
            &callers.member,
            Some(body.clone()),
        )
        .await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(message(&answer).contains(expected), "{body}: {answer}");
    }
    assert_eq!(show(&ember, &callers.member, &uuid).await["name"], "web-2");
    ember.stop().await;
}

#[tokio::test]
async fn bad_create_bodies_are_400_naming_the_key() {
    let ember = TestEmber::start().await;
    let callers = Callers::of(&ember);
    for (body, expected) in [
        (
            json!({"instance": {"flavor": "f", "image": "i"}}),
            "name: missing",
        ),
        (
            json!({"instance": {"name": "n", "flavor": 1, "image": "i"}}),
            "flavor: must be a string",
        ),
        (
            json!({"instance": {"name": "n", "flavor": "f", "image": "i", "color": "red"}}),
            "unknown key \"color\"",
        ),
        (
            json!({"instance": {"name": "n".repeat(256), "flavor": "f", "image": "i"}}),
            "name: must be at most 255",
        ),
        (json!({"instance": "web"}), "instance: must be an object"),
    ] {
        let (status, answer) = call(
            &ember,
            Method::POST,
            "/instances",
            &callers.member,
            Some(body.clone()),
        )
        .await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(message(&answer).contains(expected), "{body}: {answer}");
    }
    let (_, listed) = call(&ember, Method::GET, "/instances", &callers.member, None).await;
    assert_eq!(listed["instances"], json!([]), "nothing was recorded");

    let (status, answer) = call(
        &ember,
        Method::POST,
        "/instances",
        &callers.reader,
        Some(json!({"name": "n", "flavor": "f", "image": "i"})),
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    ember.stop().await;
}

#[tokio::test]
async fn projects_do_not_see_each_others_instances() {
    let ember = TestEmber::start().await;
    let callers = Callers::of(&ember);
    let uuid = create(&ember, &callers.member, "web-1", json!({})).await;
    let path = format!("/instances/{uuid}");
    let attempts = [
        call(&ember, Method::GET, &path, &callers.stranger, None).await,
        call(
            &ember,
            Method::PATCH,
            &path,
            &callers.stranger,
            Some(json!({"name": "x"})),
        )
        .await,
        call(&ember, Method::DELETE, &path, &callers.stranger, None).await,
        power(&ember, &callers.stranger, &uuid, "off").await,
    ];
    for (status, answer) in attempts {
        assert_eq!(status, 404, "{answer}");
        assert_eq!(message(&answer), format!("instance {uuid} not found"));
    }
    let (_, listed) = call(&ember, Method::GET, "/instances", &callers.stranger, None).await;
    assert_eq!(listed["instances"], json!([]));

    // Admins see any instance by uuid, and every project's on request.
    assert_eq!(
        show(&ember, &callers.other_admin, &uuid).await["name"],
        "web-1"
    );
    let (_, own) = call(
        &ember,
        Method::GET,
        "/instances",
        &callers.other_admin,
        None,
    )
    .await;
    assert_eq!(own["instances"], json!([]));
    let (status, all) = call(
        &ember,
        Method::GET,
        "/instances?all_projects=true",
        &callers.other_admin,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(all["instances"][0]["uuid"], uuid.as_str());
    let (status, answer) = call(
        &ember,
        Method::GET,
        "/instances?all_projects=true",
        &callers.member,
        None,
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    ember.stop().await;
}

#[tokio::test]
async fn lists_filter_page_and_hide_deleted_instances() {
    let ember = TestEmber::start().await;
    let callers = Callers::of(&ember);
    let mut uuids = Vec::new();
    for name in ["web-1", "web-2", "db-1"] {
        uuids.push(create(&ember, &callers.member, name, json!({})).await);
    }
    for uuid in &uuids {
        wait_for_status(&ember, &callers.member, uuid, "ACTIVE").await;
    }
    let names = |body: &Value| -> Vec<String> {
        body["instances"]
            .as_array()
            .expect("instances")
            .iter()
            .map(|instance| instance["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let (_, all) = call(&ember, Method::GET, "/instances", &callers.member, None).await;
    assert_eq!(names(&all), ["db-1", "web-2", "web-1"]);
    let (_, first) = call(
        &ember,
        Method::GET,
        "/instances?limit=2",
        &callers.member,
        None,
    )
    .await;
    assert_eq!(names(&first), ["db-1", "web-2"]);
    let next = first["instances_links"][0]["href"]
        .as_str()
        .expect("next link");
    let next_path = next.strip_prefix("/compute/v1").expect("compute path");
    let (_, second) = call(&ember, Method::GET, next_path, &callers.member, None).await;
    assert_eq!(names(&second), ["web-1"]);
    let (_, by_name) = call(
        &ember,
        Method::GET,
        "/instances?name=web-2",
        &callers.member,
        None,
    )
    .await;
    assert_eq!(names(&by_name), ["web-2"]);

    let (status, _) = call(
        &ember,
        Method::DELETE,
        &format!("/instances/{}", uuids[2]),
        &callers.member,
        None,
    )
    .await;
    assert_eq!(status, 202);
    wait_until_deleted(&ember, &callers.member, &uuids[2]).await;
    let (_, live) = call(&ember, Method::GET, "/instances", &callers.member, None).await;
    assert_eq!(names(&live), ["web-2", "web-1"]);
    let (_, deleted) = call(
        &ember,
        Method::GET,
        "/instances?status=deleted",
        &callers.member,
        None,
    )
    .await;
    assert!(
        names(&deleted).is_empty(),
        "a deleted instance is never listed: {deleted}"
    );

    for (query, expected) in [
        (
            "status=ASLEEP",
            "status: \"ASLEEP\" is not an instance status",
        ),
        ("locked=maybe", "locked: must be true or false"),
        ("limit=0", "limit: must be a number from 1 to 1000"),
        ("marker=abc", "marker: \"abc\" is not a UUID"),
        ("color=red", "unknown query parameter \"color\""),
    ] {
        let (status, answer) = call(
            &ember,
            Method::GET,
            &format!("/instances?{query}"),
            &callers.member,
            None,
        )
        .await;
        assert_eq!(status, 400, "{query}: {answer}");
        assert!(message(&answer).contains(expected), "{query}: {answer}");
    }
    let unknown_marker = uuid::Uuid::now_v7();
    let (status, answer) = call(
        &ember,
        Method::GET,
        &format!("/instances?marker={unknown_marker}"),
        &callers.member,
        None,
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    ember.stop().await;
}
