//! Property-based fuzzing of the REST body decoders (issue 13), through the
//! gateway of a running Ember: every route that takes a body gets
//! arbitrary JSON, valid bodies with one field replaced by arbitrary JSON,
//! and bytes that are not JSON at all. Whatever comes in, the answer is a
//! success or a client error in the OpenStack error shape — never a 5xx
//! (the services are all up, so not even a 503), never a panic, and the
//! process's memory stays bounded.

use std::time::Duration;

use ember_tests::{TestEmber, wait_for};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reqwest::Method;
use serde_json::{Map, Value, json};

/// Arbitrary JSON with the keys and values Ember's bodies use mixed in, so
/// mutations reach the decoders' deeper branches.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "\\PC{0,24}".prop_map(Value::String),
        prop::sample::select(vec![
            "",
            "true",
            "false",
            "1",
            "-1",
            "0",
            "null",
            "on",
            "off",
            "EXACT_CAPACITY",
            "CHANGE_IN_PERCENTAGE",
            "CHANGE_IN_CAPACITY",
            "OS::Heat::None",
            "2021-04-16",
            "ember.instance",
            "1.0",
            "senlin.policy.deletion",
            "stacks",
            "all",
            "m1.small",
        ])
        .prop_map(|text| Value::String(text.to_owned())),
    ];
    leaf.prop_recursive(4, 48, 5, |inner| {
        let keys = prop::sample::select(vec![
            "stack_name",
            "template",
            "parameters",
            "environment",
            "files",
            "timeout_mins",
            "disable_rollback",
            "tags",
            "resources",
            "type",
            "properties",
            "name",
            "spec",
            "version",
            "profile_id",
            "min_size",
            "max_size",
            "desired_capacity",
            "count",
            "number",
            "adjustment_type",
            "strict",
            "nodes",
            "lock",
            "level",
            "target",
            "mark_unhealthy",
            "resource_status_reason",
            "flavor",
            "image",
            "metadata",
            "x",
        ]);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(keys, inner, 0..5).prop_map(|map| {
                Value::Object(map.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

/// What one case sends.
#[derive(Debug, Clone)]
enum Body {
    Json(Value),
    Bytes(Vec<u8>),
}

/// `valid` with the value at one of its paths (top level or one below)
/// replaced by `replacement`, or removed when `replacement` is `None`.
fn mutate(valid: &Value, path_choice: usize, replacement: Option<Value>) -> Value {
    let mut paths: Vec<Vec<String>> = Vec::new();
    if let Value::Object(top) = valid {
        for (key, value) in top {
            paths.push(vec![key.clone()]);
            if let Value::Object(inner) = value {
                for inner_key in inner.keys() {
                    paths.push(vec![key.clone(), inner_key.clone()]);
                }
            }
        }
    }
    let mut body = valid.clone();
    let Some(path) = paths.get(path_choice % paths.len().max(1)) else {
        return replacement.unwrap_or(body);
    };
    let (last, parents) = path.split_last().expect("paths are never empty");
    let mut target = &mut body;
    for key in parents {
        target = &mut target[key.as_str()];
    }
    if let Value::Object(map) = target {
        match replacement {
            Some(value) => {
                map.insert(last.clone(), value);
            }
            None => {
                map.remove(last);
            }
        }
    }
    body
}

fn bodies(valid: Value) -> impl Strategy<Value = Body> {
    let valid_again = valid.clone();
    let mutated = (any::<usize>(), proptest::option::of(any_json()))
        .prop_map(move |(choice, replacement)| Body::Json(mutate(&valid, choice, replacement)));
    prop_oneof![
        1 => Just(Body::Json(valid_again)),
        4 => mutated,
        2 => any_json().prop_map(Body::Json),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Body::Bytes),
        1 => "\\PC{0,64}".prop_map(|text| Body::Bytes(text.into_bytes())),
    ]
}

struct Target {
    method: Method,
    path: String,
    valid: Value,
}

async fn send(ember: &TestEmber, target: &Target, body: &Body) -> (u16, String) {
    let request = ember
        .http
        .request(target.method.clone(), ember.url(&target.path))
        .header("X-Auth-Token", ember.member_token())
        .header("Content-Type", "application/json");
    let request = match body {
        Body::Json(value) => request.body(value.to_string()),
        Body::Bytes(bytes) => request.body(bytes.clone()),
    };
    let response = request.send().await.expect("the gateway answers");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

async fn call(ember: &TestEmber, method: Method, path: &str, body: Option<Value>) -> Value {
    let mut request = ember
        .http
        .request(method, ember.url(path))
        .header("X-Auth-Token", ember.member_token());
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("answered");
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "{path}: {status} {body}");
    body
}

fn rss_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .unwrap_or(0.0);
    pages * 4096.0 / (1024.0 * 1024.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_body_makes_a_route_fail_with_a_server_error() {
    let ember = TestEmber::start_configured(|config| {
        config.engine.compute.build_ms = 0;
        config.engine.compute.delete_ms = 0;
        config.engine.compute.power_ms = 0;
        config.engine.compute.reboot_ms = 0;
        // Mutations that happen to be valid really run: keep them small.
        config.engine.quotas.nodes_per_cluster = 8;
        config.engine.quotas.resources_per_stack = 50;
        config.engine.quotas.stacks = 60;
        config.engine.quotas.instances = 60;
    })
    .await;

    // One of each object, for the routes that act on one.
    let template = json!({"heat_template_version": "2021-04-16",
        "resources": {"r": {"type": "OS::Heat::None"}}});
    let heat = "/orchestration/v1/demo";
    let stack = call(
        &ember,
        Method::POST,
        &format!("{heat}/stacks"),
        Some(json!({"stack_name": "s", "template": template})),
    )
    .await;
    let stack_id = stack["stack"]["id"].as_str().expect("id").to_owned();
    let stack_path = format!("{heat}/stacks/s/{stack_id}");
    wait_for("stack s", Duration::from_secs(20), || async {
        let body = call(&ember, Method::GET, &stack_path, None).await;
        body["stack"]["stack_status"] == "CREATE_COMPLETE"
    })
    .await;
    let profile_spec = json!({"type": "ember.instance", "version": "1.0",
        "properties": {"flavor": "m1.small", "image": "debian-12"}});
    call(
        &ember,
        Method::POST,
        "/clustering/v1/profiles",
        Some(json!({"profile": {"name": "p", "spec": profile_spec}})),
    )
    .await;
    let cluster = call(
        &ember,
        Method::POST,
        "/clustering/v1/clusters",
        Some(
            json!({"cluster": {"name": "c", "profile_id": "p", "min_size": 0,
            "max_size": 4, "desired_capacity": 1}}),
        ),
    )
    .await;
    let cluster_id = cluster["cluster"]["id"].as_str().expect("id").to_owned();
    let instance = call(
        &ember,
        Method::POST,
        "/compute/v1/instances",
        Some(json!({"instance": {"name": "i", "flavor": "m1.small", "image": "debian-12"}})),
    )
    .await;
    let instance_id = instance["instance"]["uuid"]
        .as_str()
        .expect("uuid")
        .to_owned();

    let targets = vec![
        Target {
            method: Method::POST,
            path: format!("{heat}/stacks"),
            valid: json!({"stack_name": "fuzzed", "template": template,
                "parameters": {}, "timeout_mins": 5, "disable_rollback": true}),
        },
        Target {
            method: Method::POST,
            path: format!("{heat}/stacks/preview"),
            valid: json!({"stack_name": "preview", "template": template}),
        },
        Target {
            method: Method::POST,
            path: format!("{heat}/validate"),
            valid: json!({"template": template, "environment": {"parameters": {}}}),
        },
        Target {
            method: Method::PUT,
            path: stack_path.clone(),
            valid: json!({"template": template, "parameters": {}}),
        },
        Target {
            method: Method::PATCH,
            path: stack_path.clone(),
            valid: json!({"parameters": {}, "timeout_mins": 5}),
        },
        Target {
            method: Method::POST,
            path: format!("{stack_path}/actions"),
            valid: json!({"lock": {"level": "stacks"}}),
        },
        Target {
            method: Method::PATCH,
            path: format!("{stack_path}/resources/r"),
            valid: json!({"mark_unhealthy": true, "resource_status_reason": "fuzz"}),
        },
        Target {
            method: Method::POST,
            path: format!("{stack_path}/resources/r/signal"),
            valid: json!({"data": "x"}),
        },
        Target {
            method: Method::POST,
            path: "/clustering/v1/profiles".to_owned(),
            valid: json!({"profile": {"name": "fuzzed", "spec": profile_spec}}),
        },
        Target {
            method: Method::POST,
            path: "/clustering/v1/policies".to_owned(),
            valid: json!({"policy": {"name": "fuzzed", "spec": {
                "type": "senlin.policy.deletion", "version": "1.1",
                "properties": {"criteria": "OLDEST_FIRST"}}}}),
        },
        Target {
            method: Method::POST,
            path: "/clustering/v1/clusters".to_owned(),
            valid: json!({"cluster": {"name": "fuzzed", "profile_id": "p",
                "min_size": 0, "max_size": 2, "desired_capacity": 0}}),
        },
        Target {
            method: Method::POST,
            path: format!("/clustering/v1/clusters/{cluster_id}/actions"),
            valid: json!({"resize": {"adjustment_type": "EXACT_CAPACITY", "number": 1,
                "strict": false}}),
        },
        Target {
            method: Method::POST,
            path: "/clustering/v1/nodes".to_owned(),
            valid: json!({"node": {"name": "n", "profile_id": "p"}}),
        },
        Target {
            method: Method::POST,
            path: "/compute/v1/instances".to_owned(),
            valid: json!({"instance": {"name": "fuzzed", "flavor": "m1.small",
                "image": "debian-12", "metadata": {}}}),
        },
        Target {
            method: Method::PATCH,
            path: format!("/compute/v1/instances/{instance_id}"),
            valid: json!({"instance": {"name": "renamed", "metadata": {"k": "v"}}}),
        },
        Target {
            method: Method::PUT,
            path: format!("/compute/v1/instances/{instance_id}/states/power"),
            valid: json!({"target": "reboot"}),
        },
        Target {
            method: Method::PUT,
            path: format!("/compute/v1/instances/{instance_id}/lock"),
            valid: json!({"target": false}),
        },
    ];

    let rss_before = rss_mib();
    let handle = tokio::runtime::Handle::current();
    let mut answered: Map<String, Value> = Map::new();
    for target in &targets {
        let mut runner = TestRunner::new(Config {
            cases: 48,
            failure_persistence: None,
            ..Config::default()
        });
        let statuses = std::sync::Mutex::new(Vec::<u16>::new());
        let outcome = runner.run(&bodies(target.valid.clone()), |body| {
            let (status, text) =
                tokio::task::block_in_place(|| handle.block_on(send(&ember, target, &body)));
            statuses.lock().expect("statuses").push(status);
            if status >= 500 {
                return Err(TestCaseError::fail(format!(
                    "{} {} answered {status} to {body:?}: {text}",
                    target.method, target.path
                )));
            }
            if status >= 400 {
                let error: Value = serde_json::from_str(&text).map_err(|_| {
                    TestCaseError::fail(format!("{status} without a JSON error body: {text}"))
                })?;
                let message = error["error"]["message"].as_str().unwrap_or_default();
                if message.is_empty() || message.len() > 4096 {
                    return Err(TestCaseError::fail(format!(
                        "{status}: the error needs a bounded message: {text}"
                    )));
                }
            }
            Ok(())
        });
        if let Err(failure) = outcome {
            panic!("{} {}: {failure}", target.method, target.path);
        }
        let mut statuses = statuses.into_inner().expect("statuses");
        statuses.sort_unstable();
        statuses.dedup();
        answered.insert(
            format!("{} {}", target.method, target.path),
            json!(statuses),
        );
    }
    let grown = rss_mib() - rss_before;
    eprintln!("statuses answered per route: {answered:#?}; memory grew {grown:.1} MiB");
    assert!(
        grown < 256.0,
        "memory grew by {grown:.0} MiB over the fuzzing run (answers: {answered:?})"
    );
    // The fuzzing reached more than the outermost decoder somewhere: at
    // least one route accepted a mutated body.
    assert!(
        answered.values().any(|statuses| statuses
            .as_array()
            .is_some_and(|all| all.iter().any(|s| s.as_u64().is_some_and(|s| s < 300)))),
        "no mutated body was ever accepted: {answered:?}"
    );
    ember.stop().await;
}
