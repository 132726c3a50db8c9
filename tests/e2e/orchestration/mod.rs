//! The Orchestration (Heat) API end to end: stacks created, watched, changed
//! and deleted through the gateway's REST API and its gRPC services, error
//! answers a Heat client relies on, and python-heatclient driving the same
//! flow (`tests/compat/`). The `ember stack` CLI has its own binary tests in
//! `crates/cli/tests/stack_cli.rs`.

mod cfn;
mod grpc_flow;
mod heat_resources;
mod heatclient;
mod keystone;
mod locks;
mod policy_plugin;
mod rest_errors;
mod rest_flow;
mod snapshots;
mod software;
mod wait_conditions;

use std::time::Duration;

use ember_tests::{TestEmber, poll_until_ok};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// How long a stack of the test templates may take to settle.
pub const SETTLE: Duration = Duration::from_secs(20);

/// A template with every resource type the engine offers, a parameter per
/// kind and outputs that read attributes: what the flows create.
pub fn stack_template() -> Value {
    json!({
        "heat_template_version": "2018-08-31",
        "description": "end-to-end stack",
        "parameters": {
            "greeting": {"type": "string", "description": "what slow stores"},
            "length": {"type": "number", "default": 8},
        },
        "resources": {
            "random": {
                "type": "OS::Heat::RandomString",
                "properties": {"length": {"get_param": "length"}},
            },
            "slow": {
                "type": "OS::Heat::TestResource",
                "properties": {
                    "value": {"get_param": "greeting"},
                    "action_wait_secs": {"create": 0.2, "update": 0.1, "delete": 0.1},
                },
            },
            "echo": {
                "type": "OS::Heat::Value",
                "properties": {"value": {"get_attr": ["slow", "output"]}},
            },
            "nothing": {"type": "OS::Heat::None"},
        },
        "outputs": {
            "greeting": {"description": "what echo says", "value": {"get_attr": ["echo", "value"]}},
            "random_value": {"value": {"get_attr": ["random", "value"]}},
        },
    })
}

/// A REST client of one project's Heat API that does not follow redirects,
/// so tests see Heat's 302s.
pub struct HeatRest {
    http: reqwest::Client,
    token: Option<String>,
    pub base: String,
}

/// One answer: status, `Location` (if any) and the JSON body (null if none).
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub location: Option<String>,
    pub body: Value,
}

impl Answer {
    /// The Heat error message, for assertions on what a client reads.
    pub fn message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or_default()
    }
}

impl HeatRest {
    pub fn new(ember: &TestEmber, project_id: &str, token: Option<&str>) -> HeatRest {
        HeatRest {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("http client"),
            token: token.map(str::to_owned),
            base: ember.url(&format!("/orchestration/v1/{project_id}")),
        }
    }

    pub fn member(ember: &TestEmber) -> HeatRest {
        HeatRest::new(ember, "demo", Some(ember.member_token()))
    }

    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        let url = if path.starts_with("http") {
            path.to_owned()
        } else {
            format!("{}{path}", self.base)
        };
        let mut request = self.http.request(method.clone(), &url);
        if let Some(token) = &self.token {
            request = request.header("X-Auth-Token", token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .unwrap_or_else(|error| panic!("{method} {url}: {error}"));
        let status = response.status();
        let location = response
            .headers()
            .get("location")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let text = response.text().await.expect("body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|error| {
                panic!("{method} {url}: body is not JSON ({error}): {text}")
            })
        };
        Answer {
            status,
            location,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Answer {
        self.call(Method::POST, path, Some(body)).await
    }

    /// Creates a stack and returns its canonical path `/stacks/{name}/{id}`.
    pub async fn create_stack(&self, name: &str, parameters: Value) -> String {
        let answer = self
            .post(
                "/stacks",
                json!({
                    "stack_name": name,
                    "template": stack_template(),
                    "parameters": parameters,
                }),
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        let id = answer.body["stack"]["id"].as_str().expect("id");
        format!("/stacks/{name}/{id}")
    }

    /// Polls the stack until it leaves `*_IN_PROGRESS`; returns its body.
    pub async fn wait_until_settled(&self, stack_path: &str) -> Value {
        poll_until_ok(&format!("{stack_path} to settle"), SETTLE, || async {
            let answer = self.get(stack_path).await;
            assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
            let stack = &answer.body["stack"];
            match stack["stack_status"].as_str().unwrap_or_default() {
                status if status.ends_with("_IN_PROGRESS") => Err(format!("still {status}")),
                _ => Ok(stack.clone()),
            }
        })
        .await
    }

    /// Polls until the stack is gone (404) or DELETE_COMPLETE — with its
    /// `deletion_time`, which Heat's own suite waits for after
    /// DELETE_COMPLETE.
    pub async fn wait_until_deleted(&self, stack_path: &str) {
        poll_until_ok(&format!("{stack_path} to be deleted"), SETTLE, || async {
            let answer = self.get(stack_path).await;
            if answer.status == StatusCode::NOT_FOUND {
                return Ok(());
            }
            if answer.body["stack"]["stack_status"] == "DELETE_COMPLETE" {
                assert!(
                    answer.body["stack"]["deletion_time"].is_string(),
                    "a deleted stack shows when it was deleted: {answer:?}"
                );
                return Ok(());
            }
            assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
            assert_ne!(
                answer.body["stack"]["stack_status"], "DELETE_FAILED",
                "{answer:?}"
            );
            Err(format!("{answer:?}"))
        })
        .await;
    }
}

/// Heat's timestamp format.
pub fn assert_heat_time(value: &Value) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not a time: {value}"));
    assert!(
        chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%SZ").is_ok(),
        "{text} is not in Heat's format"
    );
}
