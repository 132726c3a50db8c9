//! The concurrency suite: many clients at once on overlapping objects,
//! through the REST API, bounded in time, on SQLite and on PostgreSQL — then
//! the invariant checker (`ember::bench::invariants`) over everything they
//! touched. Stacks: creates, updates, deletes, locks, signals, marks,
//! suspends and checks on a handful of shared stacks while the orphan sweep
//! runs with a short lease. Clusters: scale-ins, scale-outs, resizes and
//! del_nodes racing on one cluster. Every answer must be a success or a
//! clear refusal (404/409), never a 5xx; afterwards nothing is left in
//! progress, no finished stack changed without an operation, no node was
//! deleted twice and every count agrees.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ember::bench::invariants::{Checker, StackRef};
use ember_runtime::database::testing::TestDatabase;
use ember_tests::TestEmber;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// How long the clients run.
const LOAD: Duration = Duration::from_secs(6);
const CLIENTS: usize = 16;
/// The stacks every stack client picks from.
const STACK_NAMES: [&str; 5] = ["alpha", "bravo", "charlie", "delta", "echo"];

const TEMPLATE: &str = r#"
heat_template_version: 2021-04-16
parameters:
  word: {type: string, default: one}
resources:
  slow:
    type: OS::Heat::TestResource
    properties: {value: {get_param: word}, action_wait_secs: {create: 0.03, update: 0.03, delete: 0.01}}
  plain: {type: OS::Heat::None}
  group:
    type: OS::Heat::AutoScalingGroup
    properties:
      min_size: 1
      max_size: 3
      resource: {type: OS::Heat::None}
  grow:
    type: OS::Heat::ScalingPolicy
    properties: {auto_scaling_group_id: {get_resource: group}, adjustment_type: change_in_capacity, scaling_adjustment: 1}
"#;

/// Starts Ember with the engine on `database` (None: the embedded SQLite)
/// and stack leases short enough for the sweep to run during the load.
async fn ember_on(database: Option<&TestDatabase>) -> TestEmber {
    let url = database.map(|database| database.url.clone());
    TestEmber::start_configured(move |config| {
        if let Some(url) = url {
            config.engine.database_url = url;
        }
        config.engine.stack_lease_ttl_ms = 1500;
        config.engine.compute.build_ms = 0;
        config.engine.compute.delete_ms = 0;
    })
    .await
}

/// One REST client as the dev member.
#[derive(Clone)]
struct Rest {
    http: reqwest::Client,
    base: String,
    token: String,
    /// Answers that are neither a success nor a clear refusal.
    unexpected: Arc<Mutex<Vec<String>>>,
}

impl Rest {
    fn new(ember: &TestEmber) -> Rest {
        Rest {
            http: reqwest::Client::new(),
            base: ember.url(""),
            token: ember.member_token().to_owned(),
            unexpected: Arc::default(),
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .header("X-Auth-Token", &self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let (status, body) = match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.json().await.unwrap_or(Value::Null))
            }
            Err(error) => (0, json!(error.to_string())),
        };
        if !matches!(status, 200..=204 | 404 | 409)
            && let Ok(mut unexpected) = self.unexpected.lock()
        {
            unexpected.push(format!("{method} {path}: {status} {body}"));
        }
        (status, body)
    }

    fn unexpected(&self) -> Vec<String> {
        self.unexpected
            .lock()
            .map(|unexpected| unexpected.clone())
            .unwrap_or_default()
    }
}

const STACKS: &str = "/orchestration/v1/demo/stacks";

/// The live stack named `name`, if any.
async fn live(rest: &Rest, name: &str) -> Option<StackRef> {
    let (status, body) = rest
        .call(reqwest::Method::GET, &format!("{STACKS}?name={name}"), None)
        .await;
    if status != 200 {
        return None;
    }
    body["stacks"].as_array()?.first().map(|stack| StackRef {
        name: name.to_owned(),
        id: stack["id"].as_str().unwrap_or_default().to_owned(),
    })
}

async fn stack_client(rest: Rest, seed: u64, created: Arc<Mutex<BTreeSet<StackRef>>>) {
    let mut random = rand::rngs::StdRng::seed_from_u64(seed);
    let deadline = Instant::now() + LOAD;
    while Instant::now() < deadline {
        let name = STACK_NAMES[random.random_range(0..STACK_NAMES.len())];
        let Some(stack) = live(&rest, name).await else {
            let (status, body) = rest
                .call(
                    reqwest::Method::POST,
                    STACKS,
                    Some(
                        json!({"stack_name": name, "template": TEMPLATE, "disable_rollback": true}),
                    ),
                )
                .await;
            if status == 201
                && let Some(id) = body["stack"]["id"].as_str()
                && let Ok(mut created) = created.lock()
            {
                created.insert(StackRef {
                    name: name.to_owned(),
                    id: id.to_owned(),
                });
            }
            continue;
        };
        let path = format!("{STACKS}/{}/{}", stack.name, stack.id);
        let (method, path, body) = match random.random_range(0..10) {
            0 => (reqwest::Method::DELETE, path, None),
            1 | 2 => (
                reqwest::Method::PATCH,
                path,
                Some(json!({"parameters": {"word": format!("w{}", random.random_range(0..1000))}})),
            ),
            3 => (
                reqwest::Method::POST,
                format!("{path}/actions"),
                Some(json!({"lock": null})),
            ),
            4 => (
                reqwest::Method::POST,
                format!("{path}/actions"),
                Some(json!({"unlock": null})),
            ),
            5 => (
                reqwest::Method::POST,
                format!("{path}/resources/grow/signal"),
                Some(json!({})),
            ),
            6 => (
                reqwest::Method::PATCH,
                format!("{path}/resources/plain"),
                Some(json!({"mark_unhealthy": random.random_bool(0.5)})),
            ),
            7 => (
                reqwest::Method::POST,
                format!("{path}/actions"),
                Some(json!({"suspend": null})),
            ),
            8 => (
                reqwest::Method::POST,
                format!("{path}/actions"),
                Some(json!({"resume": null})),
            ),
            _ => (
                reqwest::Method::POST,
                format!("{path}/actions"),
                Some(json!({"check": null})),
            ),
        };
        rest.call(method, &path, body).await;
    }
}

async fn stacks_stay_consistent_under_many_clients(database: Option<&TestDatabase>) {
    let ember = ember_on(database).await;
    let rest = Rest::new(&ember);
    let created = Arc::new(Mutex::new(BTreeSet::new()));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|index| {
            tokio::spawn(stack_client(
                rest.clone(),
                1000 + index as u64,
                created.clone(),
            ))
        })
        .collect();
    for client in clients {
        client.await.expect("client ran");
    }
    let stacks: Vec<StackRef> = created.lock().expect("created").iter().cloned().collect();
    assert!(stacks.len() >= STACK_NAMES.len(), "{stacks:?}");
    let checker = Checker::new(&ember.url(""), ember.member_token(), "demo");
    checker
        .wait_for_quiescence(&stacks, &[], Duration::from_secs(60))
        .await
        .expect("quiet");
    let anomalies = checker.check(&stacks, &[]).await.expect("checked");
    assert!(anomalies.is_empty(), "anomalies: {anomalies:#?}");
    let unexpected = rest.unexpected();
    assert!(unexpected.is_empty(), "unexpected answers: {unexpected:#?}");
    ember.stop().await;
}

async fn cluster_client(rest: Rest, seed: u64, cluster: String) {
    let mut random = rand::rngs::StdRng::seed_from_u64(seed);
    let deadline = Instant::now() + LOAD;
    let actions = format!("/clustering/v1/clusters/{cluster}/actions");
    while Instant::now() < deadline {
        let body = match random.random_range(0..4) {
            0 => json!({"scale_out": {"count": random.random_range(1..3)}}),
            1 => json!({"scale_in": {"count": random.random_range(1..3)}}),
            2 => json!({"resize": {"adjustment_type": "EXACT_CAPACITY",
                "number": random.random_range(0..6), "strict": false}}),
            _ => {
                let (_, nodes) = rest
                    .call(
                        reqwest::Method::GET,
                        &format!("/clustering/v1/nodes?cluster_id={cluster}"),
                        None,
                    )
                    .await;
                let Some(node) = nodes["nodes"]
                    .as_array()
                    .and_then(|nodes| nodes.first())
                    .and_then(|node| node["id"].as_str())
                    .map(str::to_owned)
                else {
                    continue;
                };
                json!({"del_nodes": {"nodes": [node]}})
            }
        };
        rest.call(reqwest::Method::POST, &actions, Some(body)).await;
        tokio::time::sleep(Duration::from_millis(random.random_range(0..20))).await;
    }
}

async fn a_cluster_stays_consistent_under_racing_scaling(database: Option<&TestDatabase>) {
    let ember = ember_on(database).await;
    let rest = Rest::new(&ember);
    let (status, body) = rest
        .call(
            reqwest::Method::POST,
            "/clustering/v1/profiles",
            Some(json!({"profile": {"name": "racing", "spec": {"type": "ember.instance", "version": "1.0",
                "properties": {"flavor": "m1.small", "image": "debian-12"}}}})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = rest
        .call(
            reqwest::Method::POST,
            "/clustering/v1/clusters",
            Some(json!({"cluster": {"name": "racing", "profile_id": "racing",
                "min_size": 0, "max_size": 8, "desired_capacity": 3}})),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let cluster = body["cluster"]["id"].as_str().expect("id").to_owned();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|index| {
            tokio::spawn(cluster_client(
                rest.clone(),
                2000 + index as u64,
                cluster.clone(),
            ))
        })
        .collect();
    for client in clients {
        client.await.expect("client ran");
    }
    let checker = Checker::new(&ember.url(""), ember.member_token(), "demo");
    let clusters = [cluster];
    checker
        .wait_for_quiescence(&[], &clusters, Duration::from_secs(90))
        .await
        .expect("quiet");
    let anomalies = checker.check(&[], &clusters).await.expect("checked");
    assert!(anomalies.is_empty(), "anomalies: {anomalies:#?}");
    // Refusals (a resize below min, del_nodes of a node already going)
    // are 400/409 answers, never 5xx.
    let unexpected: Vec<String> = rest
        .unexpected()
        .into_iter()
        .filter(|answer| !answer.contains(": 400 "))
        .collect();
    assert!(unexpected.is_empty(), "unexpected answers: {unexpected:#?}");
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stacks_stay_consistent_under_many_clients_on_sqlite() {
    stacks_stay_consistent_under_many_clients(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stacks_stay_consistent_under_many_clients_on_postgres() {
    let Some(database) = TestDatabase::postgres().await else {
        eprintln!("PostgreSQL variant not run: EMBER_TEST_DATABASE_URL is not set");
        return;
    };
    stacks_stay_consistent_under_many_clients(Some(&database)).await;
    database.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_stays_consistent_under_racing_scaling_on_sqlite() {
    a_cluster_stays_consistent_under_racing_scaling(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_stays_consistent_under_racing_scaling_on_postgres() {
    let Some(database) = TestDatabase::postgres().await else {
        eprintln!("PostgreSQL variant not run: EMBER_TEST_DATABASE_URL is not set");
        return;
    };
    a_cluster_stays_consistent_under_racing_scaling(Some(&database)).await;
    database.drop_schema().await;
}
