//! Instances end to end: the Compute REST API, gRPC and the simulated
//! driver, through the gateway as users call them — every status code of
//! the lock spec, the owner/admin matrix, projects that cannot see each
//! other, and asynchronous builds, power actions and failures.

mod grpc;
mod lifecycle;
mod lock;

use std::time::Duration;

use ember_tests::{TestEmber, wait_for};
use reqwest::Method;
use serde_json::{Value, json};

/// How long the simulated driver may take for anything in these tests.
const DRIVER_DEADLINE: Duration = Duration::from_secs(15);

/// The callers the tests use.
pub struct Callers {
    /// `demo` in project `demo`, role member (the dev member).
    pub member: String,
    /// `admin` in project `demo`, roles admin and member (the dev admin).
    pub project_admin: String,
    /// `ops` in project `operations`, role admin.
    pub other_admin: String,
    /// `bob`, another member of project `demo`.
    pub colleague: String,
    /// `eve` in project `other`, role member.
    pub stranger: String,
    /// `rita` in project `demo`, role reader only.
    pub reader: String,
}

impl Callers {
    pub fn of(ember: &TestEmber) -> Callers {
        Callers {
            member: ember.member_token().to_owned(),
            project_admin: ember.admin_token().to_owned(),
            other_admin: ember.token_for("ops", "operations", &["admin"]),
            colleague: ember.token_for("bob", "demo", &["member"]),
            stranger: ember.outsider_token(),
            reader: ember.token_for("rita", "demo", &["reader"]),
        }
    }
}

/// One REST call: the status and the JSON body (null when empty).
pub async fn call(
    ember: &TestEmber,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = ember
        .http
        .request(method, ember.url(&format!("/compute/v1{path}")))
        .header("X-Auth-Token", token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"))
    };
    (status, body)
}

/// The message of an OpenStack error body.
pub fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

/// Creates an instance and returns its uuid (without waiting for the build).
pub async fn create(ember: &TestEmber, token: &str, name: &str, metadata: Value) -> String {
    let (status, body) = call(
        ember,
        Method::POST,
        "/instances",
        token,
        Some(json!({"instance": {"name": name, "flavor": "m1.small", "image": "debian-12", "metadata": metadata}})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    body["instance"]["uuid"].as_str().expect("uuid").to_owned()
}

pub async fn show(ember: &TestEmber, token: &str, uuid: &str) -> Value {
    let (status, body) = call(
        ember,
        Method::GET,
        &format!("/instances/{uuid}"),
        token,
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["instance"].clone()
}

/// Polls the instance until its status is `status`, and returns it.
pub async fn wait_for_status(ember: &TestEmber, token: &str, uuid: &str, status: &str) -> Value {
    wait_for(
        &format!("instance {uuid} to be {status}"),
        DRIVER_DEADLINE,
        || async { show(ember, token, uuid).await["status"] == status },
    )
    .await;
    show(ember, token, uuid).await
}

/// Polls the instance until its delete has completed: GET answers 404
/// (as Nova does; openstacksdk's `wait_for_delete` waits for it), and a
/// second DELETE is a 404 too. Returns the 404 body of the GET.
pub async fn wait_until_deleted(ember: &TestEmber, token: &str, uuid: &str) -> Value {
    let path = format!("/instances/{uuid}");
    wait_for(
        &format!("instance {uuid} to answer 404"),
        DRIVER_DEADLINE,
        || async {
            let (status, body) = call(ember, Method::GET, &path, token, None).await;
            assert!(
                status == 404 || (status == 200 && body["instance"]["status"] == "DELETING"),
                "a deleted instance is DELETING, then gone: {status} {body}"
            );
            status == 404
        },
    )
    .await;
    let (status, body) = call(ember, Method::GET, &path, token, None).await;
    assert_eq!(status, 404, "{body}");
    assert!(message(&body).contains(uuid), "{body}");
    let (status, again) = call(ember, Method::DELETE, &path, token, None).await;
    assert_eq!(status, 404, "a second delete: {again}");
    body
}

/// Creates an instance and waits until it is ACTIVE.
pub async fn create_active(ember: &TestEmber, token: &str, name: &str) -> String {
    let uuid = create(ember, token, name, json!({})).await;
    wait_for_status(ember, token, &uuid, "ACTIVE").await;
    uuid
}

pub async fn lock(ember: &TestEmber, token: &str, uuid: &str, body: Value) -> (u16, Value) {
    call(
        ember,
        Method::PUT,
        &format!("/instances/{uuid}/lock"),
        token,
        Some(body),
    )
    .await
}

pub async fn power(ember: &TestEmber, token: &str, uuid: &str, target: &str) -> (u16, Value) {
    call(
        ember,
        Method::PUT,
        &format!("/instances/{uuid}/states/power"),
        token,
        Some(json!({ "target": target })),
    )
    .await
}
