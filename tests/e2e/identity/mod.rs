//! The identity front door: the Keystone v3 API at `/identity` with the
//! built-in identity (REST and the gRPC admin service), real OpenStack
//! clients with a plain clouds.yaml, and `auth.mode = "keystone"` against a
//! real Keystone.

mod admin;
pub(crate) mod clients;
mod keystone;
mod rest;
mod upgrade;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use ember_tests::TestEmber;

/// `message` with the dev admin's token.
pub fn admin<T>(ember: &TestEmber, message: T) -> tonic::Request<T> {
    ember_tests::with_bearer(message, ember.admin_token())
}

/// A password authentication body, scoped to a project by name.
pub fn password_body(user: &str, password: &str, project: &str) -> Value {
    json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": user, "domain": {"name": "Default"}, "password": password}}},
        "scope": {"project": {"name": project, "domain": {"id": "default"}}},
    }})
}

pub struct Answer {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Answer {
    pub fn subject_token(&self) -> String {
        self.headers
            .get("x-subject-token")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_else(|| panic!("no X-Subject-Token: {}", self.body))
            .to_owned()
    }

    pub fn message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or_default()
    }
}

pub async fn call(
    ember: &TestEmber,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Answer {
    let mut request = ember.http.request(method, ember.url(path));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request.json(body);
    }
    answer(request.send().await.expect("the gateway answers")).await
}

/// A response read whole: its status, headers, and JSON body (or text).
pub async fn answer(response: reqwest::Response) -> Answer {
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.expect("a body");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Answer {
        status,
        headers,
        body,
    }
}

/// A token for `user` on `project` from the front door (201 expected).
pub async fn login(ember: &TestEmber, user: &str, password: &str, project: &str) -> String {
    let answer = call(
        ember,
        Method::POST,
        "/identity/v3/auth/tokens",
        &[],
        Some(&password_body(user, password, project)),
    )
    .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    answer.subject_token()
}

/// The status of listing the project's stacks with `token`.
pub async fn stacks_status(ember: &TestEmber, project: &str, token: &str) -> StatusCode {
    call(
        ember,
        Method::GET,
        &format!("/orchestration/v1/{project}/stacks"),
        &[("x-auth-token", token)],
        None,
    )
    .await
    .status
}
