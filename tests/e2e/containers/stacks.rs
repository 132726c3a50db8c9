//! Servers in stacks as containers: a stack of two `OS::Nova::Server`s
//! makes two running containers; an update to a new image replaces both
//! (new containers, the old ones removed); a container killed behind
//! Ember's back makes its server CHECK_FAILED on a stack check, so the next
//! update replaces it; deleting the stack removes everything.

use ember_tests::containers::{ContainerEngine, ENGINE_DEADLINE};
use ember_tests::{TestEmber, wait_for};
use serde_json::{Value, json};

use super::ember_on;

async fn heat(
    ember: &TestEmber,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = ember
        .http
        .request(method, ember.url(&format!("/orchestration/v1/demo{path}")))
        .header("X-Auth-Token", ember.member_token());
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn template(image: &str) -> Value {
    let server = |name: &str| {
        json!({"type": "OS::Nova::Server", "properties": {
            "name": name, "flavor": "half", "image": image,
            "metadata": {"tier": "web"}, "command": ["/bin/sleep", "3600"]}})
    };
    json!({"heat_template_version": "2018-08-31",
        "resources": {"web1": server("web-1"), "web2": server("web-2")}})
}

async fn wait_stack(ember: &TestEmber, path: &str, expected: &str) -> Value {
    wait_for(&format!("stack {expected}"), ENGINE_DEADLINE, || async {
        let (_, body) = heat(ember, reqwest::Method::GET, path, None).await;
        let status = body["stack"]["stack_status"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            !status.ends_with("FAILED") || expected.ends_with("FAILED"),
            "stack failed: {body}"
        );
        status == expected
    })
    .await;
    heat(ember, reqwest::Method::GET, path, None).await.1
}

async fn server_ids(ember: &TestEmber, path: &str) -> Vec<(String, String, String)> {
    let (status, body) = heat(
        ember,
        reqwest::Method::GET,
        &format!("{path}/resources"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let mut servers: Vec<(String, String, String)> = body["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|resource| {
            (
                resource["resource_name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                resource["physical_resource_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                resource["resource_status"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    servers.sort();
    servers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_are_containers_replaced_by_an_image_update_and_checked() {
    let Some(engine) = ContainerEngine::from_env("two_servers_are_containers").await else {
        return;
    };
    let (ember, prefix) = ember_on(&engine, |_| {}).await;
    let (status, body) = heat(
        &ember,
        reqwest::Method::POST,
        "/stacks",
        Some(json!({"stack_name": "web", "template": template(&engine.image)})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let id = body["stack"]["id"].as_str().expect("id").to_owned();
    let path = format!("/stacks/web/{id}");
    wait_stack(&ember, &path, "CREATE_COMPLETE").await;
    let first = server_ids(&ember, &path).await;
    assert_eq!(first.len(), 2, "{first:?}");
    for (_, uuid, _) in &first {
        assert!(engine.running(uuid).await, "{uuid} runs");
        let container = engine.container_of(uuid).await.expect("container");
        assert_eq!(
            container.config.and_then(|config| config.image),
            Some(engine.image.clone())
        );
    }

    // A new image replaces both servers: new containers, the old removed.
    let (status, body) = heat(
        &ember,
        reqwest::Method::PUT,
        &path,
        Some(json!({"template": template(&engine.image_2)})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    wait_stack(&ember, &path, "UPDATE_COMPLETE").await;
    let second = server_ids(&ember, &path).await;
    for ((name, old, _), (_, new, _)) in first.iter().zip(&second) {
        assert_ne!(old, new, "{name} was replaced");
        assert!(
            engine.container_of(old).await.is_none(),
            "{name}'s old container is removed"
        );
        let container = engine.container_of(new).await.expect("new container");
        assert_eq!(
            container.config.and_then(|config| config.image),
            Some(engine.image_2.clone())
        );
    }
    assert_eq!(engine.containers(&prefix).await.len(), 2);

    // A killed container fails the check, and the next update replaces it.
    let (_, victim, _) = second[0].clone();
    engine
        .kill_behind_the_back(&format!("{prefix}{victim}"))
        .await;
    wait_for("the server's instance ERROR", ENGINE_DEADLINE, || async {
        let (status, body) = crate::instances::call(
            &ember,
            reqwest::Method::GET,
            &format!("/instances/{victim}"),
            ember.member_token(),
            None,
        )
        .await;
        status == 200 && body["instance"]["status"] == "ERROR"
    })
    .await;
    let (status, body) = heat(
        &ember,
        reqwest::Method::POST,
        &format!("{path}/actions"),
        Some(json!({"check": null})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    wait_stack(&ember, &path, "CHECK_FAILED").await;
    let checked = server_ids(&ember, &path).await;
    assert_eq!(checked[0].2, "CHECK_FAILED", "{checked:?}");
    assert_eq!(checked[1].2, "CHECK_COMPLETE", "{checked:?}");
    let (status, body) = heat(
        &ember,
        reqwest::Method::PATCH,
        &path,
        Some(json!({"parameters": {}})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    wait_stack(&ember, &path, "UPDATE_COMPLETE").await;
    let third = server_ids(&ember, &path).await;
    assert_ne!(third[0].1, victim, "the dead server was replaced");
    assert_eq!(third[1].1, second[1].1, "the healthy one was kept");
    assert!(engine.running(&third[0].1).await);

    let (status, body) = heat(&ember, reqwest::Method::DELETE, &path, None).await;
    assert_eq!(status, 204, "{body}");
    wait_for("every container removed", ENGINE_DEADLINE, || async {
        engine.containers(&prefix).await.is_empty()
    })
    .await;
    ember.stop().await;
}
