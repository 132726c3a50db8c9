//! The docker compute driver against a real container engine (Podman's
//! Docker-compatible API, started by `scripts/containers.sh`): instances,
//! servers in stacks and cluster nodes are real containers, and what
//! happens to them behind Ember's back shows up. Each test skips — loudly —
//! when no engine can be reached, unless `EMBER_TEST_REQUIRE_CONTAINERS=1`.

mod clusters;
mod driver;
mod instances;
mod networks;
mod stacks;

use ember_tests::containers::{ContainerEngine, ENGINE_DEADLINE};
use ember_tests::{TestEmber, wait_for};
use reqwest::Method;
use serde_json::{Value, json};

use crate::instances::{call, show};

/// An Ember on the docker driver of `engine`, its containers named with a
/// prefix of their own; configure more with `more`.
pub async fn ember_on(
    engine: &ContainerEngine,
    more: impl FnOnce(&mut ember::config::EmberConfig),
) -> (TestEmber, String) {
    let prefix = ContainerEngine::unique_prefix();
    let ember = TestEmber::start_configured(|config| {
        engine.configure(config, &prefix);
        more(config);
    })
    .await;
    (ember, prefix)
}

/// Creates an instance (REST) from `body`'s fields and returns its uuid.
pub async fn create(ember: &TestEmber, token: &str, instance: Value) -> String {
    let (status, body) = call(
        ember,
        Method::POST,
        "/instances",
        token,
        Some(json!({ "instance": instance })),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    body["instance"]["uuid"].as_str().expect("uuid").to_owned()
}

/// Polls the instance until `done` holds (failing on a status in `never`).
pub async fn wait_instance(
    ember: &TestEmber,
    token: &str,
    uuid: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    wait_for(
        &format!("instance {uuid} to be {what}"),
        ENGINE_DEADLINE,
        || async { done(&show(ember, token, uuid).await) },
    )
    .await;
    show(ember, token, uuid).await
}

pub async fn wait_status(ember: &TestEmber, token: &str, uuid: &str, status: &str) -> Value {
    wait_instance(ember, token, uuid, status, |instance| {
        assert!(
            instance["status"] != "ERROR" || status == "ERROR",
            "instance went into ERROR: {instance}"
        );
        instance["status"] == status
    })
    .await
}

/// Polls until the instance answers 404.
pub async fn wait_gone(ember: &TestEmber, token: &str, uuid: &str) {
    let path = format!("/instances/{uuid}");
    wait_for(
        &format!("instance {uuid} to be gone"),
        ENGINE_DEADLINE,
        || async { call(ember, Method::GET, &path, token, None).await.0 == 404 },
    )
    .await;
}

/// The instance's events (REST).
pub async fn events(ember: &TestEmber, token: &str, uuid: &str) -> Vec<Value> {
    let (status, body) = call(
        ember,
        Method::GET,
        &format!("/instances/{uuid}/events"),
        token,
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["events"].as_array().cloned().unwrap_or_default()
}

/// Waits for the engine to agree: the container of `uuid` runs (or not).
pub async fn wait_running(engine: &ContainerEngine, uuid: &str, running: bool) {
    wait_for(
        &format!("the container of {uuid} to be running={running}"),
        ENGINE_DEADLINE,
        || async { engine.running(uuid).await == running },
    )
    .await;
}
