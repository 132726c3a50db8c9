//! `ember bench load`: many clients at once, as real users drive Ember —
//! 70% reads (one stack, or the stack list), 20% stack creates and deletes,
//! 10% cluster scale-outs and scale-ins — through the gateway's REST API
//! with keep-alive connections, for a fixed time. Prints requests per
//! second, median and p99 per kind, answers by status, and then, once Ember
//! is quiet, the anomalies the invariant checker finds (there must be
//! none). On the embedded SQLite default, or on PostgreSQL with
//! `--postgres URL` (a fresh schema).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use super::invariants::{Checker, StackRef};
use crate::dev::{DevCredentials, RunningEmber};

/// Stacks every reader reads (10 resources each).
const READ_STACKS: usize = 20;
/// Clusters the scaling clients share.
const CLUSTERS: usize = 4;
const CLUSTER_MAX_SIZE: i64 = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    GetStack,
    ListStacks,
    CreateStack,
    DeleteStack,
    ScaleOut,
    ScaleIn,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::GetStack => "GET one stack",
            Kind::ListStacks => "GET /stacks",
            Kind::CreateStack => "POST /stacks (3 resources)",
            Kind::DeleteStack => "DELETE a stack",
            Kind::ScaleOut => "POST scale_out",
            Kind::ScaleIn => "POST scale_in",
        }
    }
}

/// What every client records: latency and status per request.
#[derive(Default)]
struct Journal {
    samples: BTreeMap<Kind, Vec<(Duration, u16)>>,
    created: Vec<StackRef>,
}

pub struct LoadSettings {
    pub clients: usize,
    pub duration: Duration,
    pub postgres: Option<String>,
    pub seed: u64,
}

pub async fn run(settings: LoadSettings) -> Result<(), String> {
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let (mut config, secrets) = crate::dev::ephemeral_config(data_dir.path());
    config.engine.compute.build_ms = 0;
    config.engine.compute.delete_ms = 0;
    let schema =
        super::stacks::EngineSchema::use_postgres(&mut config, settings.postgres.as_deref())
            .await?;
    let backend = schema.backend();
    let running = RunningEmber::start(config, secrets.clone()).await?;
    let credentials =
        DevCredentials::mint(running.gateway_addr, &secrets, Duration::from_secs(3600))?;
    let result = drive(&running, &credentials, &settings, backend).await;
    let stopped = running.stop().await;
    schema.drop().await;
    result.and(stopped)
}

/// One keep-alive client of the gateway, as one project member.
#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    gateway: String,
    token: String,
    project: String,
}

impl Client {
    fn new(gateway: &str, token: &str, project: &str) -> Result<Client, String> {
        Ok(Client {
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(1)
                .build()
                .map_err(|error| error.to_string())?,
            gateway: gateway.to_owned(),
            token: token.to_owned(),
            project: project.to_owned(),
        })
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (Duration, u16, Value) {
        let started = Instant::now();
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.gateway))
            .header("X-Auth-Token", &self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let body = response.json().await.unwrap_or(Value::Null);
                (started.elapsed(), status, body)
            }
            // No answer at all: counted as status 0.
            Err(_) => (started.elapsed(), 0, Value::Null),
        }
    }

    fn stacks(&self) -> String {
        format!("/orchestration/v1/{}/stacks", self.project)
    }
}

fn none_template(resources: usize) -> Value {
    let resources: serde_json::Map<String, Value> = (0..resources)
        .map(|index| (format!("r{index}"), json!({"type": "OS::Heat::None"})))
        .collect();
    json!({"heat_template_version": "2021-04-16", "resources": resources})
}

async fn create_stack(client: &Client, name: &str, resources: usize) -> Result<StackRef, String> {
    let (_, status, body) = client
        .send(
            reqwest::Method::POST,
            &client.stacks(),
            Some(json!({"stack_name": name, "template": none_template(resources)})),
        )
        .await;
    if status != 201 {
        return Err(format!("create {name}: {status} {body}"));
    }
    Ok(StackRef {
        name: name.to_owned(),
        id: body["stack"]["id"].as_str().unwrap_or_default().to_owned(),
    })
}

async fn setup(client: &Client) -> Result<(Vec<StackRef>, Vec<String>), String> {
    let mut read_stacks = Vec::new();
    for index in 0..READ_STACKS {
        read_stacks.push(create_stack(client, &format!("read-{index}"), 10).await?);
    }
    let (_, status, body) = client
        .send(
            reqwest::Method::POST,
            "/clustering/v1/profiles",
            Some(json!({"profile": {"name": "load", "spec": {
                "type": "ember.instance", "version": "1.0",
                "properties": {"flavor": "m1.small", "image": "debian-12"}}}})),
        )
        .await;
    if status != 201 {
        return Err(format!("profile: {status} {body}"));
    }
    let mut clusters = Vec::new();
    for index in 0..CLUSTERS {
        let (_, status, body) = client
            .send(
                reqwest::Method::POST,
                "/clustering/v1/clusters",
                Some(
                    json!({"cluster": {"name": format!("load-{index}"), "profile_id": "load",
                    "min_size": 0, "max_size": CLUSTER_MAX_SIZE, "desired_capacity": 2}}),
                ),
            )
            .await;
        if status != 202 {
            return Err(format!("cluster: {status} {body}"));
        }
        clusters.push(
            body["cluster"]["id"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
    }
    Ok((read_stacks, clusters))
}

async fn drive(
    running: &RunningEmber,
    credentials: &DevCredentials,
    settings: &LoadSettings,
    backend: &str,
) -> Result<(), String> {
    let gateway = format!("http://{}", running.gateway_addr);
    let project = credentials.member.project_id.clone();
    let setup_client = Client::new(&gateway, &credentials.member.token, &project)?;
    let (read_stacks, clusters) = setup(&setup_client).await?;
    let checker = Checker::new(&gateway, &credentials.member.token, &project);
    checker
        .wait_for_quiescence(&read_stacks, &clusters, Duration::from_secs(60))
        .await?;

    let journal = Arc::new(Mutex::new(Journal::default()));
    let started = Instant::now();
    let deadline = started + settings.duration;
    let mut clients = tokio::task::JoinSet::new();
    for index in 0..settings.clients {
        let client = Client::new(&gateway, &credentials.member.token, &project)?;
        let read_stacks = read_stacks.clone();
        let clusters = clusters.clone();
        let journal = journal.clone();
        let seed = settings.seed.wrapping_add(index as u64);
        clients.spawn(async move {
            one_client(
                index,
                client,
                read_stacks,
                clusters,
                journal,
                seed,
                deadline,
            )
            .await
        });
    }
    while clients.join_next().await.is_some() {}
    let elapsed = started.elapsed();

    let (samples, created) = {
        let mut journal = journal.lock().map_err(|_| "journal poisoned".to_owned())?;
        (
            std::mem::take(&mut journal.samples),
            std::mem::take(&mut journal.created),
        )
    };
    let total: usize = samples.values().map(Vec::len).sum();
    let succeeded: usize = samples
        .values()
        .flatten()
        .filter(|(_, status)| (200..300).contains(status))
        .count();
    println!(
        "load on {backend}: {} clients for {:.0} s through the gateway's REST API ({} cores)",
        settings.clients,
        elapsed.as_secs_f64(),
        std::thread::available_parallelism().map_or(0, |cores| cores.get())
    );
    println!(
        "{total} requests, {:.0} requests/s ({:.0}/s answered 2xx; the rest are refusals such as 409 for a delete of a stack still being created)",
        total as f64 / elapsed.as_secs_f64(),
        succeeded as f64 / elapsed.as_secs_f64()
    );
    println!(
        "{:<30} {:>8} {:>10} {:>10}  answers",
        "kind", "count", "p50 ms", "p99 ms"
    );
    for (kind, mut samples) in samples {
        samples.sort_by_key(|(latency, _)| *latency);
        let percentile = |fraction: f64| {
            let index = ((samples.len() as f64 - 1.0) * fraction).round() as usize;
            samples
                .get(index)
                .map_or(0.0, |(latency, _)| latency.as_secs_f64() * 1000.0)
        };
        let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
        for (_, status) in &samples {
            *statuses.entry(*status).or_default() += 1;
        }
        let answers: Vec<String> = statuses
            .iter()
            .map(|(status, count)| format!("{status}×{count}"))
            .collect();
        println!(
            "{:<30} {:>8} {:>10.2} {:>10.2}  {}",
            kind.label(),
            samples.len(),
            percentile(0.5),
            percentile(0.99),
            answers.join(" ")
        );
    }

    let mut stacks = read_stacks;
    stacks.extend(created);
    let quiet = Instant::now();
    checker
        .wait_for_quiescence(&stacks, &clusters, Duration::from_secs(120))
        .await?;
    println!(
        "quiet {:.1} s after the load stopped; checking {} stacks and {} clusters",
        quiet.elapsed().as_secs_f64(),
        stacks.len(),
        clusters.len()
    );
    let anomalies = checker.check(&stacks, &clusters).await?;
    println!("anomalies: {}", anomalies.len());
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for anomaly in &anomalies {
        *kinds.entry(anomaly_kind(anomaly)).or_default() += 1;
    }
    for (kind, count) in &kinds {
        println!("  {count:>5} × {kind}");
    }
    for anomaly in anomalies.iter().take(10) {
        println!("  e.g. {anomaly}");
    }
    if anomalies.is_empty() {
        Ok(())
    } else {
        Err(format!("{} anomalies found", anomalies.len()))
    }
}

/// An anomaly with its ids, names and numbers blanked: what kind it is.
fn anomaly_kind(anomaly: &str) -> String {
    anomaly
        .split(' ')
        .map(|word| {
            if word.chars().any(|c| c.is_ascii_digit()) {
                "…"
            } else {
                word
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

async fn one_client(
    index: usize,
    client: Client,
    read_stacks: Vec<StackRef>,
    clusters: Vec<String>,
    journal: Arc<Mutex<Journal>>,
    seed: u64,
    deadline: Instant,
) {
    let mut random = rand::rngs::StdRng::seed_from_u64(seed);
    let mut mine: Option<StackRef> = None;
    let mut created = 0usize;
    let mut samples: Vec<(Kind, Duration, u16)> = Vec::new();
    let mut made: Vec<StackRef> = Vec::new();
    while Instant::now() < deadline {
        let roll: u32 = random.random_range(0..100);
        if roll < 70 {
            if roll < 35 {
                let stack = &read_stacks[random.random_range(0..read_stacks.len())];
                let (latency, status, _) = client
                    .send(
                        reqwest::Method::GET,
                        &format!("{}/{}/{}", client.stacks(), stack.name, stack.id),
                        None,
                    )
                    .await;
                samples.push((Kind::GetStack, latency, status));
            } else {
                let (latency, status, _) = client
                    .send(reqwest::Method::GET, &client.stacks(), None)
                    .await;
                samples.push((Kind::ListStacks, latency, status));
            }
        } else if roll < 90 {
            match mine.take() {
                Some(stack) => {
                    let (latency, status, _) = client
                        .send(
                            reqwest::Method::DELETE,
                            &format!("{}/{}/{}", client.stacks(), stack.name, stack.id),
                            None,
                        )
                        .await;
                    samples.push((Kind::DeleteStack, latency, status));
                    if status == 409 {
                        // Still being created: delete it next time.
                        mine = Some(stack);
                    }
                }
                None => {
                    let name = format!("load-{index}-{created}");
                    created += 1;
                    let (latency, status, body) = client
                        .send(
                            reqwest::Method::POST,
                            &client.stacks(),
                            Some(json!({"stack_name": name, "template": none_template(3)})),
                        )
                        .await;
                    samples.push((Kind::CreateStack, latency, status));
                    if status == 201
                        && let Some(id) = body["stack"]["id"].as_str()
                    {
                        let stack = StackRef {
                            name,
                            id: id.to_owned(),
                        };
                        made.push(stack.clone());
                        mine = Some(stack);
                    }
                }
            }
        } else {
            let cluster = &clusters[random.random_range(0..clusters.len())];
            let (kind, body) = if random.random_bool(0.5) {
                (Kind::ScaleOut, json!({"scale_out": {"count": 1}}))
            } else {
                (Kind::ScaleIn, json!({"scale_in": {"count": 1}}))
            };
            let (latency, status, _) = client
                .send(
                    reqwest::Method::POST,
                    &format!("/clustering/v1/clusters/{cluster}/actions"),
                    Some(body),
                )
                .await;
            samples.push((kind, latency, status));
        }
    }
    if let Ok(mut journal) = journal.lock() {
        for (kind, latency, status) in samples {
            journal
                .samples
                .entry(kind)
                .or_default()
                .push((latency, status));
        }
        journal.created.extend(made);
    }
}
