//! The crash suite: on the deployment shape (four `ember serve` processes),
//! stack and cluster operations are started and the engine is killed with
//! SIGKILL at seeded random moments — twenty of them a run — and started
//! again on the same data. Once everything has settled (short leases: a
//! dead engine's work is taken over within seconds), the invariant checker
//! reads every stack and the cluster through the REST API: nothing left in
//! progress, no finished stack changed without an operation, desired
//! capacity equal to the nodes and to their instances, no node deleted
//! twice, no name repeated.
//!
//! The seed is printed; `CRASH_SUITE_SEED=<n>` replays a run's choices.

mod support;

use std::time::{Duration, Instant};

use ember::bench::invariants::{Checker, StackRef};
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use support::deployment::{Deployment, Service};

const KILLS: usize = 20;

const TEMPLATE: &str = r#"
heat_template_version: 2021-04-16
parameters:
  word: {type: string, default: one}
resources:
  first:
    type: OS::Heat::TestResource
    properties: {value: {get_param: word}, action_wait_secs: {create: 0.05, update: 0.05, delete: 0.03}}
  second:
    type: OS::Heat::TestResource
    properties: {value: {get_attr: [first, output]}, action_wait_secs: {create: 0.05, update: 0.05, delete: 0.03}}
  third:
    type: OS::Heat::TestResource
    properties: {value: {get_attr: [second, output]}, action_wait_secs: {create: 0.05, delete: 0.03}}
"#;

async fn call(
    deployment: &Deployment,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = deployment
        .http
        .request(method, deployment.gateway(path))
        .header("X-Auth-Token", &deployment.token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            (status, response.json().await.unwrap_or(Value::Null))
        }
        Err(error) => (0, json!(error.to_string())),
    }
}

/// Calls until the gateway answers something other than 503 (the engine
/// may still be starting).
async fn call_when_up(
    deployment: &Deployment,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answer = call(deployment, method.clone(), path, body.clone()).await;
        if !matches!(answer.0, 0 | 503) || Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const STACKS: &str = "/orchestration/v1/demo/stacks";

/// Six steps of 0.3 s, each waiting for the one before.
const CHAIN: &str = r#"
heat_template_version: 2021-04-16
resources:
  one: {type: OS::Heat::TestResource, properties: {action_wait_secs: {create: 0.3}}}
  two: {type: OS::Heat::TestResource, depends_on: one, properties: {action_wait_secs: {create: 0.3}}}
  three: {type: OS::Heat::TestResource, depends_on: two, properties: {action_wait_secs: {create: 0.3}}}
  four: {type: OS::Heat::TestResource, depends_on: three, properties: {action_wait_secs: {create: 0.3}}}
  five: {type: OS::Heat::TestResource, depends_on: four, properties: {action_wait_secs: {create: 0.3}}}
  six: {type: OS::Heat::TestResource, depends_on: five, properties: {action_wait_secs: {create: 0.3}}}
"#;

/// A stopped or crashed engine does not fail the create it was running:
/// stopped with SIGTERM (as `docker-compose restart` does) it hands the
/// create back and, started again, resumes it at once; killed with SIGKILL,
/// the new process takes it over once the lease expired. Both end
/// CREATE_COMPLETE, with each resource created once and a "resumed" event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_survives_its_engine_being_restarted_or_killed() {
    let mut deployment = Deployment::start_with(&[("EMBER_ENGINE__STACK_LEASE_TTL_MS", "1500")]);
    deployment.wait_healthy().await;
    for (name, crash) in [("restarted", false), ("killed", true)] {
        let (status, body) = call_when_up(
            &deployment,
            reqwest::Method::POST,
            STACKS,
            Some(json!({"stack_name": name, "template": CHAIN})),
        )
        .await;
        assert_eq!(status, 201, "{body}");
        let path = format!(
            "{STACKS}/{name}/{}",
            body["stack"]["id"].as_str().expect("id")
        );
        tokio::time::sleep(Duration::from_millis(700)).await;
        if crash {
            deployment.kill(Service::Engine);
        } else {
            deployment.terminate(Service::Engine);
        }
        deployment.spawn(Service::Engine);
        let deadline = Instant::now() + Duration::from_secs(30);
        let stack = loop {
            let (_, body) = call_when_up(&deployment, reqwest::Method::GET, &path, None).await;
            let status = body["stack"]["stack_status"].as_str().unwrap_or_default();
            if !status.ends_with("IN_PROGRESS") && !status.is_empty() {
                break body["stack"].clone();
            }
            assert!(
                Instant::now() < deadline,
                "{name}: still {status} after 30 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(stack["stack_status"], "CREATE_COMPLETE", "{name}: {stack}");
        let (_, events) = call_when_up(
            &deployment,
            reqwest::Method::GET,
            &format!("{path}/events?limit=200"),
            None,
        )
        .await;
        let events = events["events"].as_array().expect("events").clone();
        let reasons: Vec<&str> = events
            .iter()
            .filter(|event| event["resource_name"] == name)
            .filter_map(|event| event["resource_status_reason"].as_str())
            .collect();
        assert!(
            reasons
                .iter()
                .any(|reason| reason.starts_with("Stack CREATE resumed")),
            "{name}: {reasons:?}"
        );
        for resource in ["one", "two", "three", "four", "five", "six"] {
            let completed = events
                .iter()
                .filter(|event| {
                    event["resource_name"] == resource
                        && event["resource_status"] == "CREATE_COMPLETE"
                })
                .count();
            assert_eq!(completed, 1, "{name}: {resource} created once");
        }
    }
}

/// A server and a nested stack, each step slow enough to be in flight
/// when the engine is killed.
const OUTSIDE: &str = r#"
heat_template_version: 2021-04-16
resources:
  web:
    type: OS::Nova::Server
    properties: {flavor: m1.small, image: debian-12, name: web-1}
  child:
    type: OS::Heat::Stack
    properties:
      template: |
        heat_template_version: 2021-04-16
        resources:
          slow:
            type: OS::Heat::TestResource
            properties: {action_wait_secs: {create: 2.5, delete: 2.5}}
"#;

/// Polls (at most 20 s) until each `(resource, status)` of the stack at
/// `path` holds.
async fn resources_reach(deployment: &Deployment, path: &str, wanted: &[(&str, &str)]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, body) = call_when_up(
            deployment,
            reqwest::Method::GET,
            &format!("{path}/resources"),
            None,
        )
        .await;
        let resources = body["resources"].as_array().cloned().unwrap_or_default();
        let holds = wanted.iter().all(|(name, status)| {
            resources
                .iter()
                .any(|row| row["resource_name"] == *name && row["resource_status"] == *status)
        });
        if holds {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{path}: never {wanted:?}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The stack at `path` once its operation ended (at most 40 s); `None`
/// once it is deleted (404).
async fn final_stack(deployment: &Deployment, path: &str) -> Option<Value> {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let (code, body) = call_when_up(deployment, reqwest::Method::GET, path, None).await;
        if code == 404 {
            return None;
        }
        let status = body["stack"]["stack_status"].as_str().unwrap_or_default();
        if !status.ends_with("IN_PROGRESS") && !status.is_empty() {
            return Some(body["stack"].clone());
        }
        assert!(
            Instant::now() < deadline,
            "{path}: still {status} after 40 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The project's instances, as the Compute API lists them.
async fn instances(deployment: &Deployment) -> Vec<Value> {
    let (status, body) = call_when_up(
        deployment,
        reqwest::Method::GET,
        "/compute/v1/instances",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["instances"].as_array().cloned().unwrap_or_default()
}

/// The live nested stacks whose parent is `stack_id`.
async fn nested_stacks(deployment: &Deployment, stack_id: &str) -> Vec<Value> {
    let (status, body) = call_when_up(
        deployment,
        reqwest::Method::GET,
        &format!("{STACKS}?show_nested=true"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["stacks"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|stack| stack["parent"] == stack_id)
        .collect()
}

/// How many events of `resource` in the stack at `path` are `status`
/// with a reason starting with `reason`.
async fn events_of(
    deployment: &Deployment,
    path: &str,
    resource: &str,
    status: &str,
    reason: &str,
) -> usize {
    let (_, body) = call_when_up(
        deployment,
        reqwest::Method::GET,
        &format!("{path}/events?limit=500"),
        None,
    )
    .await;
    body["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|event| {
            event["resource_name"] == resource
                && event["resource_status"] == status
                && event["resource_status_reason"]
                    .as_str()
                    .is_some_and(|text| text.starts_with(reason))
        })
        .count()
}

/// Steps in flight outside the engine survive it being killed: a server
/// being built and a nested stack being created are found by the
/// restarted engine, not made twice — CREATE_COMPLETE with one instance
/// and one nested stack; a suspend of the server (and of the nested
/// stack) in flight is finished — SUSPEND_COMPLETE, the server's instance
/// powered off once; a delete in flight is finished, and nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_in_flight_outside_the_engine_are_finished_after_it_is_killed() {
    let mut deployment = Deployment::start_with(&[
        ("EMBER_ENGINE__STACK_LEASE_TTL_MS", "1500"),
        ("EMBER_ENGINE__COMPUTE__BUILD_MS", "2500"),
        ("EMBER_ENGINE__COMPUTE__POWER_MS", "2500"),
        ("EMBER_ENGINE__COMPUTE__DELETE_MS", "2500"),
    ]);
    deployment.wait_healthy().await;
    let (status, body) = call_when_up(
        &deployment,
        reqwest::Method::POST,
        STACKS,
        Some(json!({"stack_name": "outside", "template": OUTSIDE, "disable_rollback": true})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let id = body["stack"]["id"].as_str().expect("id").to_owned();
    let path = format!("{STACKS}/outside/{id}");

    // Killed mid-create.
    resources_reach(
        &deployment,
        &path,
        &[
            ("web", "CREATE_IN_PROGRESS"),
            ("child", "CREATE_IN_PROGRESS"),
        ],
    )
    .await;
    deployment.kill(Service::Engine);
    deployment.spawn(Service::Engine);
    let stack = final_stack(&deployment, &path).await.expect("the stack");
    assert_eq!(stack["stack_status"], "CREATE_COMPLETE", "{stack}");
    let made = instances(&deployment).await;
    assert_eq!(made.len(), 1, "one instance: {made:?}");
    assert_eq!(made[0]["status"], "ACTIVE", "{made:?}");
    assert_eq!(
        nested_stacks(&deployment, &id).await.len(),
        1,
        "one nested stack"
    );
    for resource in ["web", "child"] {
        assert_eq!(
            events_of(
                &deployment,
                &path,
                resource,
                "CREATE_IN_PROGRESS",
                "state changed (resumed"
            )
            .await,
            1,
            "{resource}: its step in flight was taken over"
        );
        assert_eq!(
            events_of(&deployment, &path, resource, "CREATE_COMPLETE", "").await,
            1,
            "{resource}: created once"
        );
    }

    // Killed mid-suspend: the power action in flight is continued (or
    // found done) by the restarted engine, not asked for twice.
    let (status, body) = call_when_up(
        &deployment,
        reqwest::Method::POST,
        &format!("{path}/actions"),
        Some(json!({"suspend": null})),
    )
    .await;
    assert!(matches!(status, 200..=202), "{status}: {body}");
    resources_reach(&deployment, &path, &[("web", "SUSPEND_IN_PROGRESS")]).await;
    deployment.kill(Service::Engine);
    deployment.spawn(Service::Engine);
    let stack = final_stack(&deployment, &path).await.expect("the stack");
    assert_eq!(stack["stack_status"], "SUSPEND_COMPLETE", "{stack}");
    assert_eq!(
        events_of(&deployment, &path, "web", "SUSPEND_COMPLETE", "").await,
        1,
        "web: suspended once"
    );
    let made = instances(&deployment).await;
    assert_eq!(made.len(), 1, "one instance: {made:?}");
    assert_eq!(made[0]["status"], "STOPPED", "{made:?}");
    let uuid = made[0]["uuid"].as_str().expect("the instance's uuid");
    let (status, body) = call_when_up(
        &deployment,
        reqwest::Method::GET,
        &format!("/compute/v1/instances/{uuid}/events"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let powered_off = body["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|event| event["kind"] == "power_off")
        .count();
    assert_eq!(powered_off, 1, "powered off once: {body}");
    let nested = nested_stacks(&deployment, &id).await;
    assert_eq!(nested.len(), 1, "one nested stack: {nested:?}");
    assert_eq!(nested[0]["stack_status"], "SUSPEND_COMPLETE", "{nested:?}");

    // Killed mid-delete: the delete is finished.
    let (status, body) = call_when_up(&deployment, reqwest::Method::DELETE, &path, None).await;
    assert!(matches!(status, 202 | 204), "{status}: {body}");
    resources_reach(
        &deployment,
        &path,
        &[
            ("web", "DELETE_IN_PROGRESS"),
            ("child", "DELETE_IN_PROGRESS"),
        ],
    )
    .await;
    deployment.kill(Service::Engine);
    deployment.spawn(Service::Engine);
    if let Some(stack) = final_stack(&deployment, &path).await {
        assert_eq!(stack["stack_status"], "DELETE_COMPLETE", "{stack}");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while !instances(&deployment).await.is_empty() {
        assert!(Instant::now() < deadline, "the instance was not deleted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(nested_stacks(&deployment, &id).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_killed_at_random_moments_leaves_everything_consistent() {
    kill_at_random_moments(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_on_postgres_killed_at_random_moments_leaves_everything_consistent() {
    let Some(database) = ember_runtime::database::testing::TestDatabase::postgres().await else {
        eprintln!("PostgreSQL variant not run: EMBER_TEST_DATABASE_URL is not set");
        return;
    };
    kill_at_random_moments(Some(&database.url)).await;
    database.drop_schema().await;
}

/// The engine's database is `engine_database` (PostgreSQL), else its
/// SQLite file in the deployment's data directory.
async fn kill_at_random_moments(engine_database: Option<&str>) {
    let seed: u64 = std::env::var("CRASH_SUITE_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(20261123);
    eprintln!("crash suite seed {seed} (CRASH_SUITE_SEED replays it)");
    let mut random = rand::rngs::StdRng::seed_from_u64(seed);
    let mut settings = vec![
        ("EMBER_ENGINE__STACK_LEASE_TTL_MS", "1500"),
        ("EMBER_ENGINE__CLUSTER_ACTION_LEASE_MS", "1500"),
        ("EMBER_ENGINE__COMPUTE__BUILD_MS", "40"),
        ("EMBER_ENGINE__COMPUTE__DELETE_MS", "20"),
    ];
    if let Some(url) = engine_database {
        settings.push(("EMBER_ENGINE__DATABASE_URL", url));
    }
    let mut deployment = Deployment::start_with(&settings);
    deployment.wait_healthy().await;

    let (status, body) = call_when_up(
        &deployment,
        reqwest::Method::POST,
        "/clustering/v1/profiles",
        Some(
            json!({"profile": {"name": "crash", "spec": {"type": "ember.instance", "version": "1.0",
            "properties": {"flavor": "m1.small", "image": "debian-12"}}}}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call_when_up(
        &deployment,
        reqwest::Method::POST,
        "/clustering/v1/clusters",
        Some(json!({"cluster": {"name": "crash", "profile_id": "crash",
            "min_size": 0, "max_size": 8, "desired_capacity": 2}})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let cluster = body["cluster"]["id"].as_str().expect("id").to_owned();

    let mut stacks: Vec<StackRef> = Vec::new();
    let mut kill_points = Vec::new();
    for round in 0..KILLS {
        // A stack operation: a new stack, or an update or delete of one.
        let live: Vec<&StackRef> = stacks.iter().collect();
        let choice = random.random_range(0..3);
        if choice == 0 || live.is_empty() {
            let name = format!("crash-{round}");
            let (status, body) = call_when_up(
                &deployment,
                reqwest::Method::POST,
                STACKS,
                Some(json!({"stack_name": name, "template": TEMPLATE, "disable_rollback": true})),
            )
            .await;
            if status == 201 {
                stacks.push(StackRef {
                    name,
                    id: body["stack"]["id"].as_str().expect("id").to_owned(),
                });
            }
        } else {
            let stack = live[random.random_range(0..live.len())];
            let path = format!("{STACKS}/{}/{}", stack.name, stack.id);
            if choice == 1 {
                call_when_up(
                    &deployment,
                    reqwest::Method::PATCH,
                    &path,
                    Some(json!({"parameters": {"word": format!("round-{round}")}})),
                )
                .await;
            } else {
                call_when_up(&deployment, reqwest::Method::DELETE, &path, None).await;
            }
        }
        // A cluster operation.
        let body = if random.random_bool(0.5) {
            json!({"scale_out": {"count": random.random_range(1..3)}})
        } else {
            json!({"scale_in": {"count": random.random_range(1..3)}})
        };
        call_when_up(
            &deployment,
            reqwest::Method::POST,
            &format!("/clustering/v1/clusters/{cluster}/actions"),
            Some(body),
        )
        .await;
        // The kill, somewhere inside what was just started.
        let after = Duration::from_millis(random.random_range(0..300));
        kill_points.push(after.as_millis());
        tokio::time::sleep(after).await;
        deployment.kill(Service::Engine);
        deployment.spawn(Service::Engine);
    }
    eprintln!("killed the engine {KILLS} times, at {kill_points:?} ms into each round");
    deployment.wait_healthy().await;

    let checker = Checker::new(&deployment.gateway(""), &deployment.token, "demo");
    let clusters = [cluster];
    checker
        .wait_for_quiescence(&stacks, &clusters, Duration::from_secs(120))
        .await
        .expect("everything settles after the crashes");
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for stack in &stacks {
        let (_, body) = call(
            &deployment,
            reqwest::Method::GET,
            &format!("{STACKS}/{}/{}", stack.name, stack.id),
            None,
        )
        .await;
        let reason = body["stack"]["stack_status_reason"]
            .as_str()
            .unwrap_or_default();
        let key = format!(
            "{}{}",
            body["stack"]["stack_status"].as_str().unwrap_or("?"),
            if reason.contains("went away") {
                " (engine went away)"
            } else {
                ""
            }
        );
        *outcomes.entry(key).or_default() += 1;
    }
    eprintln!("stacks after the crashes: {outcomes:?}");
    let anomalies = checker.check(&stacks, &clusters).await.expect("checked");
    assert!(
        anomalies.is_empty(),
        "seed {seed}: anomalies after {KILLS} kills: {anomalies:#?}"
    );
}
