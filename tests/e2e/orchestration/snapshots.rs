//! Stack snapshots (issue 16): saved as the stack action SNAPSHOT, listed,
//! shown, deleted, and restored — an update back to the snapshot's
//! definition (RESTORE_COMPLETE) that also gives a RandomString its value
//! back after it was replaced; bad input and other projects refused.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use ember_tests::TestEmber;

use super::HeatRest;

fn template(length: u64, extra: bool) -> Value {
    let mut resources = json!({
        "word": {"type": "OS::Heat::RandomString", "properties": {"length": length}},
    });
    if extra {
        resources["extra"] = json!({"type": "OS::Heat::None"});
    }
    json!({
        "heat_template_version": "2021-04-16",
        "resources": resources,
        "outputs": {"word": {"value": {"get_attr": ["word", "value"]}}},
    })
}

async fn word(heat: &HeatRest, stack: &str) -> String {
    heat.get(&format!("{stack}/outputs/word")).await.body["output"]["output_value"]
        .as_str()
        .expect("a word")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_is_saved_listed_restored_and_deleted() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let created = heat
        .post(
            "/stacks",
            json!({"stack_name": "snappy", "template": template(12, false)}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
    let stack = format!(
        "/stacks/snappy/{}",
        created.body["stack"]["id"].as_str().expect("id")
    );
    heat.wait_until_settled(&stack).await;
    let before = word(&heat, &stack).await;
    assert_eq!(before.len(), 12);

    let saved = heat
        .post(&format!("{stack}/snapshots"), json!({"name": "before"}))
        .await;
    assert_eq!(saved.status, StatusCode::OK, "{saved:?}");
    let snapshot = &saved.body;
    assert_eq!(snapshot["name"], "before");
    assert_eq!(snapshot["status"], "COMPLETE");
    super::assert_heat_time(&snapshot["creation_time"]);
    assert_eq!(
        snapshot["data"]["resources"]["word"]["attributes"]["value"],
        before.as_str()
    );
    let snapshot_id = snapshot["id"].as_str().expect("id").to_owned();
    let shown = heat.get(&stack).await;
    assert_eq!(shown.body["stack"]["stack_status"], "SNAPSHOT_COMPLETE");
    let events = heat.get(&format!("{stack}/events")).await;
    let reasons: Vec<&str> = events.body["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|event| event["resource_status_reason"].as_str())
        .collect();
    assert!(reasons.contains(&"Stack SNAPSHOT started"), "{reasons:?}");
    assert!(
        reasons.contains(&"Stack SNAPSHOT completed successfully"),
        "{reasons:?}"
    );

    // A second, unnamed one: its name is null.
    let unnamed = heat
        .call(Method::POST, &format!("{stack}/snapshots"), None)
        .await;
    assert_eq!(unnamed.status, StatusCode::OK, "{unnamed:?}");
    assert!(unnamed.body["name"].is_null());

    // Change the stack: the word is replaced (a new length), a resource added.
    let updated = heat
        .call(
            Method::PUT,
            &stack,
            Some(json!({"template": template(20, true)})),
        )
        .await;
    assert_eq!(updated.status, StatusCode::ACCEPTED, "{updated:?}");
    assert_eq!(
        heat.wait_until_settled(&stack).await["stack_status"],
        "UPDATE_COMPLETE"
    );
    let changed = word(&heat, &stack).await;
    assert_eq!(changed.len(), 20);

    // Restore: the definition and the word come back, the extra goes.
    let restored = heat
        .call(
            Method::POST,
            &format!("{stack}/snapshots/{snapshot_id}/restore"),
            None,
        )
        .await;
    assert_eq!(restored.status, StatusCode::ACCEPTED, "{restored:?}");
    let settled = heat.wait_until_settled(&stack).await;
    assert_eq!(settled["stack_status"], "RESTORE_COMPLETE", "{settled}");
    assert_eq!(
        settled["stack_status_reason"],
        "Stack RESTORE completed successfully"
    );
    assert_eq!(word(&heat, &stack).await, before);
    let resources = heat.get(&format!("{stack}/resources")).await;
    let names: Vec<&str> = resources.body["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|resource| resource["resource_name"].as_str())
        .collect();
    assert_eq!(names, ["word"], "{resources:?}");

    let listed = heat.get(&format!("{stack}/snapshots")).await;
    assert_eq!(listed.status, StatusCode::OK);
    assert_eq!(listed.body["snapshots"].as_array().map(Vec::len), Some(2));
    let one = heat.get(&format!("{stack}/snapshots/{snapshot_id}")).await;
    assert_eq!(one.status, StatusCode::OK);
    assert_eq!(one.body["snapshot"]["id"], snapshot_id.as_str());

    // Bad input and other projects.
    let bad = heat
        .post(&format!("{stack}/snapshots"), json!({"name": 7}))
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{bad:?}");
    assert!(bad.message().contains("name must be a string"), "{bad:?}");
    let long = heat
        .post(
            &format!("{stack}/snapshots"),
            json!({"name": "x".repeat(300)}),
        )
        .await;
    assert_eq!(long.status, StatusCode::BAD_REQUEST, "{long:?}");
    for path in [
        format!("{stack}/snapshots/01a20000-0000-7000-8000-000000000000"),
        format!("{stack}/snapshots/not-a-uuid"),
    ] {
        let missing = heat.get(&path).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND, "{missing:?}");
        assert!(
            missing.message().contains("could not be found"),
            "{missing:?}"
        );
    }
    let missing = heat
        .call(
            Method::POST,
            &format!("{stack}/snapshots/01a20000-0000-7000-8000-000000000000/restore"),
            None,
        )
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{missing:?}");
    let other = HeatRest::new(&ember, "other", Some(&ember.outsider_token()));
    let id = stack.rsplit('/').next().expect("id");
    for (method, path) in [
        (Method::GET, format!("/stacks/snappy/{id}/snapshots")),
        (
            Method::GET,
            format!("/stacks/snappy/{id}/snapshots/{snapshot_id}"),
        ),
        (Method::POST, format!("/stacks/snappy/{id}/snapshots")),
        (
            Method::POST,
            format!("/stacks/snappy/{id}/snapshots/{snapshot_id}/restore"),
        ),
        (
            Method::DELETE,
            format!("/stacks/snappy/{id}/snapshots/{snapshot_id}"),
        ),
    ] {
        let refused = other.call(method.clone(), &path, None).await;
        assert_eq!(
            refused.status,
            StatusCode::NOT_FOUND,
            "{method} {path}: {refused:?}"
        );
    }
    // A locked stack takes no snapshot and no restore.
    let locked = heat
        .post(
            &format!("{stack}/actions"),
            json!({"lock": {"level": "stacks"}}),
        )
        .await;
    assert!(locked.status.is_success(), "{locked:?}");
    heat.wait_until_settled(&stack).await;
    let refused = heat.post(&format!("{stack}/snapshots"), json!({})).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{refused:?}");
    assert!(refused.message().contains("locked"), "{refused:?}");
    let refused = heat
        .call(
            Method::POST,
            &format!("{stack}/snapshots/{snapshot_id}/restore"),
            None,
        )
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{refused:?}");
    let unlocked = heat
        .post(&format!("{stack}/actions"), json!({"unlock": null}))
        .await;
    assert!(unlocked.status.is_success(), "{unlocked:?}");
    heat.wait_until_settled(&stack).await;

    let deleted = heat
        .call(
            Method::DELETE,
            &format!("{stack}/snapshots/{snapshot_id}"),
            None,
        )
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{deleted:?}");
    let gone = heat.get(&format!("{stack}/snapshots/{snapshot_id}")).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_powers_a_server_back_as_the_snapshot_found_it() {
    let ember = TestEmber::start().await;
    let heat = HeatRest::member(&ember);
    let template = json!({
        "heat_template_version": "2021-04-16",
        "resources": {
            "word": {"type": "OS::Heat::RandomString"},
            "server": {"type": "OS::Nova::Server", "properties": {"flavor": "m1.small", "image": "debian-12"}},
        },
        "outputs": {"server": {"value": {"get_resource": "server"}}},
    });
    let created = heat
        .post(
            "/stacks",
            json!({"stack_name": "powered", "template": template}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
    let stack = format!(
        "/stacks/powered/{}",
        created.body["stack"]["id"].as_str().expect("id")
    );
    assert_eq!(
        heat.wait_until_settled(&stack).await["stack_status"],
        "CREATE_COMPLETE"
    );
    let server = heat.get(&format!("{stack}/outputs/server")).await.body["output"]["output_value"]
        .as_str()
        .expect("a server")
        .to_owned();
    let saved = heat
        .post(&format!("{stack}/snapshots"), json!({"name": "running"}))
        .await;
    assert_eq!(saved.status, StatusCode::OK, "{saved:?}");
    assert_eq!(
        saved.body["data"]["resources"]["server"]["state"]["status"], "ACTIVE",
        "{saved:?}"
    );
    let snapshot_id = saved.body["id"].as_str().expect("id").to_owned();

    // Someone powers the server off; the restore powers it back on.
    let instance_status = |ember: &TestEmber, server: String| {
        let http = ember.http.clone();
        let url = ember.url(&format!("/compute/v1/instances/{server}"));
        let token = ember.member_token().to_owned();
        async move {
            let body: Value = http
                .get(url)
                .header("X-Auth-Token", token)
                .send()
                .await
                .expect("request")
                .json()
                .await
                .expect("json");
            body["instance"]["status"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        }
    };
    let off = ember
        .http
        .put(ember.url(&format!("/compute/v1/instances/{server}/states/power")))
        .header("X-Auth-Token", ember.member_token())
        .json(&json!({"target": "off"}))
        .send()
        .await
        .expect("request");
    assert_eq!(off.status(), StatusCode::ACCEPTED);
    ember_tests::wait_for(
        "the server to stop",
        std::time::Duration::from_secs(10),
        || {
            let status = instance_status(&ember, server.clone());
            async move { status.await == "STOPPED" }
        },
    )
    .await;
    let restored = heat
        .call(
            Method::POST,
            &format!("{stack}/snapshots/{snapshot_id}/restore"),
            None,
        )
        .await;
    assert_eq!(restored.status, StatusCode::ACCEPTED, "{restored:?}");
    let settled = heat.wait_until_settled(&stack).await;
    assert_eq!(settled["stack_status"], "RESTORE_COMPLETE", "{settled}");
    assert_eq!(instance_status(&ember, server.clone()).await, "ACTIVE");
    ember.stop().await;
}
