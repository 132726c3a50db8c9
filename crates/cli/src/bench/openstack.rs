//! `ember bench openstack`: Ember against real Heat on the same cloud.
//!
//! One template — a network, subnet, router with a gateway and an
//! interface, and N servers each on a port of its own with a floating IP —
//! created until COMPLETE and deleted until gone, through Ember (in this
//! process, its engine on the cloud through the caller's trust) and
//! through the cloud's own Heat (`tests/openstack/heat.sh`), alternating,
//! both polled every 250 ms by the same client with the same Keystone
//! token. Besides the wall times and their ratio, the CPU time Ember's
//! process spent per server: its own work above what the cloud's services
//! do — whole, above its rate at rest, and that less what answering the
//! bench's own polls cost (a client's choice, not the stack's work: what
//! one poll costs is measured once, on the finished stack).
//!
//! The cloud is the one `tests/openstack/cloud.sh` prepares; its facts file
//! (`EMBER_TEST_OPENSTACK`, or `--cloud`) names the users, image, flavor and
//! external network.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ember_openstack::auth::{Credentials, Domain, Method, Named, Scope, Secret};
use ember_openstack::{Cloud, CloudConfig, Interface};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::dev::RunningEmber;

/// How often both are asked whether the stack is done.
const POLL: Duration = Duration::from_millis(250);
/// The longest one create or delete may take.
const LIMIT: Duration = Duration::from_secs(900);
/// How long Ember's CPU at rest is measured for.
const AT_REST: Duration = Duration::from_secs(10);
/// How many polls of a finished stack measure what one costs.
const POLLS_MEASURED: u32 = 20;
/// How long Ember is left alone before that: what its start began (the
/// service user's first token and catalog, the machine watcher's first
/// resync, the threads its pools start) is not rest.
const SETTLE: Duration = Duration::from_secs(5);

pub struct OpenStackBench {
    /// The facts file of the cloud.
    pub cloud: Option<PathBuf>,
    pub servers: usize,
    pub runs: usize,
    /// Also run the template through the cloud's Heat.
    pub heat: bool,
}

#[derive(Deserialize)]
struct Account {
    user: String,
    password: String,
    project: String,
    project_id: String,
}

#[derive(Deserialize)]
struct NamedThing {
    name: String,
}

/// What the bench reads of `tests/openstack/setup_cloud.py`'s facts.
#[derive(Deserialize)]
struct Facts {
    auth_url: String,
    region: String,
    domain: String,
    service: Account,
    demo: Account,
    image: NamedThing,
    public_network: NamedThing,
}

/// One client of both orchestration APIs, as demo.
struct Orchestration {
    http: reqwest::Client,
    token: String,
}

/// Where a stack is and what its create and delete took.
#[derive(Clone, Copy)]
struct Timed {
    create: Duration,
    delete: Duration,
    create_cpu: Duration,
    delete_cpu: Duration,
    /// How many times the bench asked while each waited.
    create_polls: u32,
    delete_polls: u32,
    /// The CPU one poll of the finished stack cost, above the rate at
    /// rest (measured when asked).
    poll_cpu: Option<Duration>,
}

pub async fn run(bench: OpenStackBench) -> Result<(), String> {
    let path = match bench.cloud {
        Some(path) => path,
        None => std::env::var_os("EMBER_TEST_OPENSTACK")
            .map(PathBuf::from)
            .ok_or(
                "--cloud (or EMBER_TEST_OPENSTACK): the facts file of tests/openstack/cloud.sh",
            )?,
    };
    let text =
        std::fs::read_to_string(&path).map_err(|error| format!("{}: {error}", path.display()))?;
    let facts: Facts =
        serde_json::from_str(&text).map_err(|error| format!("{}: {error}", path.display()))?;
    let cloud = Cloud::new(CloudConfig {
        auth_url: facts.auth_url.clone(),
        region: Some(facts.region.clone()),
        interface: Interface::Public,
        ca_file: String::new(),
        timeout: Duration::from_secs(60),
    })?;
    let demo = cloud.session(Credentials {
        method: Method::Password {
            user: Named::Name {
                name: facts.demo.user.clone(),
                domain: Domain::Name(facts.domain.clone()),
            },
            password: Secret::new(facts.demo.password.clone()),
        },
        scope: Scope::Project(Named::Name {
            name: facts.demo.project.clone(),
            domain: Domain::Name(facts.domain.clone()),
        }),
    });
    let token = demo
        .token()
        .await
        .map_err(|error| format!("demo's token: {error}"))?;
    let heat_url = token
        .catalog
        .0
        .iter()
        .filter(|entry| entry.service_type == "orchestration")
        .flat_map(|entry| &entry.endpoints)
        .find(|endpoint| endpoint.interface == "public")
        .map(|endpoint| endpoint.url.trim_end_matches('/').to_owned());
    if bench.heat && heat_url.is_none() {
        return Err(
            "the cloud's catalog has no orchestration endpoint: start Heat with tests/openstack/heat.sh (or pass --no-heat)"
                .to_owned(),
        );
    }
    let client = Orchestration {
        http: reqwest::Client::new(),
        token: token.value.expose().to_owned(),
    };

    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let (mut config, secrets) = crate::dev::ephemeral_config(data_dir.path());
    config.auth.mode = "keystone".into();
    config.auth.keystone.url = facts.auth_url.clone();
    config.auth.keystone.user = facts.service.user.clone();
    config.auth.keystone.password = Some(facts.service.password.clone());
    config.auth.keystone.project = facts.service.project.clone();
    config.engine.compute.driver = "openstack".into();
    config.engine.openstack.auth_url = facts.auth_url.clone();
    config.engine.openstack.user = facts.service.user.clone();
    config.engine.openstack.password = facts.service.password.clone();
    config.engine.openstack.project = facts.service.project.clone();
    config.engine.openstack.region = facts.region.clone();
    // `RUST_LOG=ember_openstack=debug` shows every call to the cloud.
    if std::env::var_os("RUST_LOG").is_some() {
        ember_runtime::telemetry::init(&config.log);
    }
    let running = RunningEmber::start(config, secrets).await?;
    // What the process spends with nothing to do (its sweeps and polls),
    // so the CPU per server can be told apart from the time it ran.
    tokio::time::sleep(SETTLE).await;
    let at_rest = {
        let before = super::stacks::process_cpu_time()?;
        tokio::time::sleep(AT_REST).await;
        (super::stacks::process_cpu_time()? - before).as_secs_f64() / AT_REST.as_secs_f64()
    };
    println!(
        "Ember at rest (no stack, {} s, after {} s to settle): {:.2} ms of CPU per second",
        AT_REST.as_secs(),
        SETTLE.as_secs(),
        at_rest * 1000.0
    );
    let ember_url = format!(
        "http://{}/orchestration/v1/{}",
        running.gateway_addr, facts.demo.project_id
    );

    println!(
        "A stack of {} servers, each on its own port with a floating IP, on one network with a routed subnet ({} resources); {} runs each, alternating",
        bench.servers,
        4 + 3 * bench.servers,
        bench.runs
    );
    let mut ember_runs = Vec::new();
    let mut heat_runs = Vec::new();
    for run in 0..bench.runs {
        let template = template(&facts, bench.servers);
        let timed = client
            .measure(
                &ember_url,
                &format!("bench-ember-{run}"),
                &template,
                (run == 0).then_some(at_rest),
            )
            .await?;
        println!(
            "  ember run {run}: create {:.2} s, delete {:.2} s",
            timed.create.as_secs_f64(),
            timed.delete.as_secs_f64()
        );
        ember_runs.push(timed);
        if let (true, Some(heat_url)) = (bench.heat, &heat_url) {
            let timed = client
                .measure(heat_url, &format!("bench-heat-{run}"), &template, None)
                .await?;
            println!(
                "  heat  run {run}: create {:.2} s, delete {:.2} s",
                timed.create.as_secs_f64(),
                timed.delete.as_secs_f64()
            );
            heat_runs.push(timed);
        }
    }
    report(&ember_runs, &heat_runs, bench.servers, at_rest);
    running.stop().await
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        length if length % 2 == 1 => values[length / 2],
        length => (values[length / 2 - 1] + values[length / 2]) / 2.0,
    }
}

/// The table, and Ember's CPU per server: all its process spent, and
/// that less what it spends at rest (`at_rest`, CPU seconds per second)
/// over the same time.
fn report(ember: &[Timed], heat: &[Timed], servers: usize, at_rest: f64) {
    let seconds = |runs: &[Timed], pick: fn(&Timed) -> Duration| {
        median(runs.iter().map(|run| pick(run).as_secs_f64()).collect())
    };
    let per_server_ms = |runs: &[Timed], pick: fn(&Timed) -> Duration| {
        median(
            runs.iter()
                .map(|run| pick(run).as_secs_f64() * 1000.0 / servers as f64)
                .collect(),
        )
    };
    println!();
    println!(
        "| median of {} runs | Ember | Heat 27 | Heat / Ember |",
        ember.len()
    );
    println!("|---|---|---|---|");
    for (case, pick) in [
        (
            "create → CREATE_COMPLETE",
            (|run: &Timed| run.create) as fn(&Timed) -> Duration,
        ),
        ("delete → gone", |run: &Timed| run.delete),
    ] {
        let (ours, theirs) = (seconds(ember, pick), seconds(heat, pick));
        if heat.is_empty() {
            println!("| {case} | {ours:.2} s | – | – |");
        } else {
            println!(
                "| {case} | {ours:.2} s | {theirs:.2} s | {:.2}× |",
                theirs / ours
            );
        }
    }
    println!();
    println!(
        "Ember's own CPU per server (its process, above the cloud's services): create {:.2} ms, delete {:.2} ms",
        per_server_ms(ember, |run| run.create_cpu),
        per_server_ms(ember, |run| run.delete_cpu)
    );
    let above_rest = |cpu: Duration, wall: Duration| {
        cpu.saturating_sub(Duration::from_secs_f64(at_rest * wall.as_secs_f64()))
    };
    let worked: Vec<Timed> = ember
        .iter()
        .map(|run| Timed {
            create_cpu: above_rest(run.create_cpu, run.create),
            delete_cpu: above_rest(run.delete_cpu, run.delete),
            ..*run
        })
        .collect();
    println!(
        "  of which above its rate at rest ({:.2} ms/s over the same time): create {:.2} ms, delete {:.2} ms",
        at_rest * 1000.0,
        per_server_ms(&worked, |run| run.create_cpu),
        per_server_ms(&worked, |run| run.delete_cpu)
    );
    if let Some(poll) = ember.iter().find_map(|run| run.poll_cpu) {
        let less_polls: Vec<Timed> = worked
            .iter()
            .map(|run| Timed {
                create_cpu: run.create_cpu.saturating_sub(poll * run.create_polls),
                delete_cpu: run.delete_cpu.saturating_sub(poll * run.delete_polls),
                ..*run
            })
            .collect();
        let polls = |pick: fn(&Timed) -> u32| {
            median(ember.iter().map(|run| f64::from(pick(run))).collect())
        };
        println!(
            "  and of that, less answering the bench's polls ({:.2} ms each, {:.0} during a create, {:.0} during a delete): create {:.2} ms, delete {:.2} ms",
            poll.as_secs_f64() * 1000.0,
            polls(|run| run.create_polls),
            polls(|run| run.delete_polls),
            per_server_ms(&less_polls, |run| run.create_cpu),
            per_server_ms(&less_polls, |run| run.delete_cpu)
        );
    }
}

/// The benchmark's template: shared network plumbing and `servers`
/// servers, each on a port of its own with a floating IP.
fn template(facts: &Facts, servers: usize) -> Value {
    let mut resources = serde_json::Map::new();
    resources.insert("net".into(), json!({"type": "OS::Neutron::Net"}));
    resources.insert(
        "subnet".into(),
        json!({"type": "OS::Neutron::Subnet", "properties": {
            "network": {"get_resource": "net"}, "cidr": "10.120.0.0/22"}}),
    );
    resources.insert(
        "router".into(),
        json!({"type": "OS::Neutron::Router", "properties": {
            "external_gateway_info": {"network": facts.public_network.name}}}),
    );
    resources.insert(
        "interface".into(),
        json!({"type": "OS::Neutron::RouterInterface", "properties": {
            "router": {"get_resource": "router"}, "subnet": {"get_resource": "subnet"}}}),
    );
    for index in 0..servers {
        resources.insert(
            format!("port{index}"),
            json!({"type": "OS::Neutron::Port", "properties": {
                "network": {"get_resource": "net"},
                "fixed_ips": [{"subnet": {"get_resource": "subnet"}}]}}),
        );
        resources.insert(
            format!("server{index}"),
            json!({"type": "OS::Nova::Server", "properties": {
                "image": facts.image.name, "flavor": "ember.tiny",
                "networks": [{"port": {"get_resource": format!("port{index}")}}]}}),
        );
        resources.insert(
            format!("fip{index}"),
            json!({"type": "OS::Neutron::FloatingIP", "depends_on": ["interface"], "properties": {
                "floating_network": facts.public_network.name,
                "port_id": {"get_resource": format!("port{index}")}}}),
        );
    }
    json!({"heat_template_version": "2018-08-31", "resources": resources})
}

impl Orchestration {
    async fn call(
        &self,
        method: reqwest::Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), String> {
        let mut request = self
            .http
            .request(method.clone(), url)
            .header("x-auth-token", &self.token);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|error| format!("{method} {url}: {error}"))?;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// Creates the stack at `base`, waits for CREATE_COMPLETE, deletes it
    /// and waits until it is gone; with `polls_at_rest` (Ember's CPU rate
    /// at rest), first measures what a poll of the finished stack costs.
    async fn measure(
        &self,
        base: &str,
        name: &str,
        template: &Value,
        polls_at_rest: Option<f64>,
    ) -> Result<Timed, String> {
        let cpu = super::stacks::process_cpu_time()?;
        let started = Instant::now();
        let (status, body) = self
            .call(
                reqwest::Method::POST,
                &format!("{base}/stacks"),
                Some(&json!({"stack_name": name, "template": template, "disable_rollback": true})),
            )
            .await?;
        if status != 201 {
            return Err(format!("{base}: create answered {status}: {body}"));
        }
        let id = body["stack"]["id"]
            .as_str()
            .ok_or("no stack id")?
            .to_owned();
        let stack = format!("{base}/stacks/{name}/{id}");
        let create_polls = self.wait(&stack, "CREATE_COMPLETE", started).await?;
        let create = started.elapsed();
        let create_cpu = super::stacks::process_cpu_time()? - cpu;
        let poll_cpu = match polls_at_rest {
            Some(at_rest) => Some(self.poll_cost(&stack, at_rest).await?),
            None => None,
        };

        let cpu = super::stacks::process_cpu_time()?;
        let started = Instant::now();
        let (status, body) = self.call(reqwest::Method::DELETE, &stack, None).await?;
        if status != 204 {
            return Err(format!("{stack}: delete answered {status}: {body}"));
        }
        let delete_polls = self.wait(&stack, "DELETE_COMPLETE", started).await?;
        Ok(Timed {
            create,
            delete: started.elapsed(),
            create_cpu,
            delete_cpu: super::stacks::process_cpu_time()? - cpu,
            create_polls,
            delete_polls,
            poll_cpu,
        })
    }

    /// The CPU Ember spends answering one poll of `stack` (finished, so
    /// nothing else runs), above its rate at rest, asked as a wait asks.
    async fn poll_cost(&self, stack: &str, at_rest: f64) -> Result<Duration, String> {
        let cpu = super::stacks::process_cpu_time()?;
        let started = Instant::now();
        for _ in 0..POLLS_MEASURED {
            let (status, body) = self.call(reqwest::Method::GET, stack, None).await?;
            if status != 200 {
                return Err(format!("{stack}: a poll answered {status}: {body}"));
            }
            tokio::time::sleep(POLL).await;
        }
        let spent = super::stacks::process_cpu_time()? - cpu;
        let resting = Duration::from_secs_f64(at_rest * started.elapsed().as_secs_f64());
        Ok(spent.saturating_sub(resting) / POLLS_MEASURED)
    }

    /// Polls `stack` until it is `wanted`; returns how many times it asked.
    async fn wait(&self, stack: &str, wanted: &str, started: Instant) -> Result<u32, String> {
        let mut polls = 0;
        loop {
            let (status, body) = self.call(reqwest::Method::GET, stack, None).await?;
            polls += 1;
            let state = body["stack"]["stack_status"].as_str().unwrap_or_default();
            if state == wanted || (wanted == "DELETE_COMPLETE" && status == 404) {
                return Ok(polls);
            }
            if state.ends_with("_FAILED") {
                return Err(format!(
                    "{stack}: {state}: {}",
                    body["stack"]["stack_status_reason"]
                ));
            }
            if started.elapsed() > LIMIT {
                return Err(format!("{stack}: still {state} after {LIMIT:?}"));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}
