//! `ember bench stacks`: stack operations as a user sees them, over REST
//! through the gateway with a keep-alive client — create then delete 100
//! independent resources, a chain of 20 dependent ones, a mark-unhealthy
//! repair of the chain (wall time from the call to the final state), the
//! scaling series from 10 to 10,000 resources, 8 clients creating and
//! deleting at once, the cost of lifecycle plugins, and the latency of
//! showing one stack and listing 200. On the embedded SQLite default, or on
//! PostgreSQL with `--postgres URL` (a fresh schema).

use std::time::{Duration, Instant};

use ember_proto::pluginregistry::v1::plugin_registry_service_client::PluginRegistryServiceClient;
use tonic::transport::Channel;

use self::client::{RestStacks, StackRef};
use super::allow_plugin::AllowPlugin;
use super::summarize;
use crate::dev::{DevCredentials, RunningEmber};

pub(crate) mod client;

/// How often a waiting client asks for the stack's status.
pub(super) const GATEWAY_POLL: Duration = Duration::from_micros(500);

/// The benchmark's cases, to run one alone (`--only`) under a profiler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Case {
    /// Create and delete 100 independent resources.
    Independent,
    /// A chain of 20 dependent resources, and its mark-unhealthy repair.
    Chain,
    /// Create and delete at 10 to 10,000 resources.
    Scaling,
    /// 8 clients creating and deleting at once.
    Throughput,
    /// A chain of 5 lifecycle plugins on a 10-resource create.
    Plugins,
    /// GET one stack, and the list of 200.
    Reads,
}

pub async fn run(runs: usize, postgres: Option<String>, only: &[Case]) -> Result<(), String> {
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let (mut config, secrets) = crate::dev::ephemeral_config(data_dir.path());
    let schema = EngineSchema::use_postgres(&mut config, postgres.as_deref()).await?;
    let backend = schema.backend();
    let running = RunningEmber::start(config, secrets.clone()).await?;
    let credentials =
        DevCredentials::mint(running.gateway_addr, &secrets, Duration::from_secs(3600))?;
    let selected = |case: Case| only.is_empty() || only.contains(&case);
    let result = measure(&running, &credentials, runs, backend, &selected).await;
    let stopped = running.stop().await;
    schema.drop().await;
    result.and(stopped)
}

/// The engine's database for a benchmark: the embedded SQLite, or a fresh
/// schema on a PostgreSQL server, dropped afterwards.
pub(super) struct EngineSchema {
    postgres: Option<(String, String)>,
}

impl EngineSchema {
    /// Points `config`'s engine at a new schema on `postgres` if given.
    pub(super) async fn use_postgres(
        config: &mut crate::config::EmberConfig,
        postgres: Option<&str>,
    ) -> Result<EngineSchema, String> {
        let Some(url) = postgres else {
            return Ok(EngineSchema { postgres: None });
        };
        let schema = create_schema(url).await?;
        let separator = if url.contains('?') { '&' } else { '?' };
        config.engine.database_url = format!("{url}{separator}options[search_path]={schema}");
        Ok(EngineSchema {
            postgres: Some((url.to_owned(), schema)),
        })
    }

    pub(super) fn backend(&self) -> &'static str {
        if self.postgres.is_some() {
            "PostgreSQL"
        } else {
            "SQLite (embedded default)"
        }
    }

    pub(super) async fn drop(self) {
        if let Some((url, schema)) = &self.postgres {
            drop_schema(url, schema).await;
        }
    }
}

async fn measure(
    running: &RunningEmber,
    credentials: &DevCredentials,
    runs: usize,
    backend: &str,
    selected: &dyn Fn(Case) -> bool,
) -> Result<(), String> {
    let client = RestStacks::new(running.gateway_addr, &credentials.member.token);
    println!(
        "stack benchmarks on {backend}: REST through the gateway, keep-alive client, \
         polled every {} µs ({runs} runs each; milliseconds)",
        GATEWAY_POLL.as_micros()
    );
    println!("{:<56} {:>10} {:>10}", "case", "median", "p99");

    if selected(Case::Independent) {
        independent(&client, runs).await?;
    }
    let kept_chain = if selected(Case::Chain) || selected(Case::Reads) {
        chain(&client, runs).await?
    } else {
        None
    };
    if selected(Case::Scaling) {
        scaling(&client, runs).await?;
    }
    if selected(Case::Throughput) {
        throughput(running, credentials, runs).await?;
    }
    if selected(Case::Plugins) {
        plugin_overhead(&client, credentials, running, runs).await?;
    }
    if selected(Case::Reads) {
        let kept_chain = kept_chain.ok_or("no chain was created")?;
        reads(&client, &kept_chain, runs).await?;
    }
    Ok(())
}

async fn independent(client: &RestStacks, runs: usize) -> Result<(), String> {
    let independent = template_of_independent_resources(100);
    let (mut creates, mut deletes) = (Vec::new(), Vec::new());
    for run in 0..runs {
        let (stack, created) = client
            .create_and_wait(&format!("independent-{run}"), &independent)
            .await?;
        creates.push(created);
        deletes.push(client.delete_and_wait(&stack).await?);
    }
    print_row("100 OS::Heat::None: create → CREATE_COMPLETE", &mut creates);
    print_row("100 OS::Heat::None: delete → DELETE_COMPLETE", &mut deletes);
    Ok(())
}

/// The chain of 20 and its repair; the first chain is kept (the stack the
/// reads show).
async fn chain(client: &RestStacks, runs: usize) -> Result<Option<StackRef>, String> {
    let chain = template_of_chain(20);
    let (mut chains, mut repairs) = (Vec::new(), Vec::new());
    let mut kept_chain = None;
    for run in 0..runs {
        let (stack, created) = client
            .create_and_wait(&format!("chain-{run}"), &chain)
            .await?;
        chains.push(created);
        repairs.push(client.mark_unhealthy_and_update(&stack, "r10").await?);
        match kept_chain {
            None => kept_chain = Some(stack),
            Some(_) => {
                client.delete_and_wait(&stack).await?;
            }
        }
    }
    print_row("chain of 20 OS::Heat::TestResource: create", &mut chains);
    print_row(
        "mark r10 of the chain unhealthy, PATCH update → COMPLETE",
        &mut repairs,
    );
    Ok(kept_chain)
}

/// Reads: one stack of 20 resources, and the list of 200 stacks.
async fn reads(client: &RestStacks, kept_chain: &StackRef, runs: usize) -> Result<(), String> {
    let single = template_of_independent_resources(1);
    for index in 0..199 {
        client
            .create_and_wait(&format!("listed-{index}"), &single)
            .await?;
    }
    let show_url = client.stack_url(kept_chain);
    let list_url = format!("{}/stacks", client.base);
    for (label, url) in [
        ("GET one stack of 20 resources (one connection)", show_url),
        ("GET /stacks with 200 stacks (one connection)", list_url),
    ] {
        let mut samples = Vec::new();
        for round in 0..(runs * 100).max(1000) + 100 {
            let started = Instant::now();
            client.get_ok(&url).await?;
            if round >= 100 {
                samples.push(started.elapsed());
            }
        }
        print_row(label, &mut samples);
    }
    Ok(())
}

/// Create and delete at 10 to 10,000 resources: linear means the µs per
/// resource stay flat.
async fn scaling(client: &RestStacks, runs: usize) -> Result<(), String> {
    println!(
        "{:<56} {:>10} {:>10} {:>16}",
        "scaling (medians; ms)", "create", "delete", "µs/resource c/d"
    );
    for size in [10usize, 100, 1_000, 2_500, 10_000] {
        let template = template_of_independent_resources(size);
        let rounds = if size >= 2_500 {
            runs.clamp(1, 3)
        } else {
            runs
        };
        let (mut creates, mut deletes) = (Vec::new(), Vec::new());
        for run in 0..rounds {
            let (stack, created) = client
                .create_and_wait(&format!("scaling-{size}-{run}"), &template)
                .await?;
            creates.push(created);
            deletes.push(client.delete_and_wait(&stack).await?);
        }
        let create = summarize(&mut creates).median_us;
        let delete = summarize(&mut deletes).median_us;
        println!(
            "{:<56} {:>10.2} {:>10.2} {:>7.1} / {:<7.1}",
            format!("{size} OS::Heat::None"),
            create / 1000.0,
            delete / 1000.0,
            create / size as f64,
            delete / size as f64
        );
    }
    Ok(())
}

/// 8 clients, each creating a stack of 10 resources and deleting it, in a
/// loop: stacks (created and deleted) per second. These clients wait as a
/// script would, reading the stack's status — not every 0.5 ms as the
/// latency cases do to time one operation closely (eight clients doing
/// that would measure mostly their own status reads). Measured twice:
/// - reading first at once, then after 1, 2, 4, 8 and 10 ms (a waiter's
///   exponential backoff): what Ember sustains;
/// - every 10 ms: each client then spends at least 10 ms on each of the
///   two waits, so eight clients cannot go past 8 / 20 ms = 400 stacks/s
///   however fast the stacks are made — the row shows what a plainly
///   polling script gets.
async fn throughput(
    running: &RunningEmber,
    credentials: &DevCredentials,
    runs: usize,
) -> Result<(), String> {
    const FIRST_POLL: Duration = Duration::from_millis(1);
    const POLL: Duration = Duration::from_millis(10);
    let duration = Duration::from_secs((runs as u64).clamp(3, 10));
    for (label, first) in [
        ("status read backing off 1→10 ms", FIRST_POLL),
        ("status read every 10 ms", POLL),
    ] {
        let busy =
            clients_creating_and_deleting(running, credentials, duration, first, POLL).await?;
        println!(
            "{:<56} {:>10.1}",
            format!("{THROUGHPUT_CLIENTS} clients create+delete 10 None: stacks/s"),
            busy.stacks_per_second
        );
        println!(
            "{:<56} {:>10.1}",
            format!("  {label}: reads per stack"),
            busy.reads_per_stack
        );
        println!(
            "{:<56} {:>10.2}",
            "  CPU per stack, clients and Ember (ms)", busy.cpu_ms_per_stack
        );
    }
    Ok(())
}

const THROUGHPUT_CLIENTS: usize = 8;

/// What [`clients_creating_and_deleting`] measured.
struct Busy {
    stacks_per_second: f64,
    reads_per_stack: f64,
    /// The whole process's CPU time (user and system, every thread: the
    /// clients and all of Ember's services) per stack created and deleted —
    /// steadier than the rate on a noisy machine, and what bounds the rate
    /// once the cores are busy.
    cpu_ms_per_stack: f64,
}

/// CPU time this process has used, user and system.
pub(crate) fn process_cpu_time() -> Result<Duration, String> {
    use nix::sys::resource::{UsageWho, getrusage};
    let usage = getrusage(UsageWho::RUSAGE_SELF).map_err(|error| format!("getrusage: {error}"))?;
    let time = |value: nix::sys::time::TimeVal| {
        Duration::from_secs(value.tv_sec().unsigned_abs())
            + Duration::from_micros(value.tv_usec().unsigned_abs())
    };
    Ok(time(usage.user_time()) + time(usage.system_time()))
}

/// [`THROUGHPUT_CLIENTS`] clients creating and deleting stacks of 10
/// resources for `duration`, waiting `first` after their first status read
/// and doubling up to `most`.
async fn clients_creating_and_deleting(
    running: &RunningEmber,
    credentials: &DevCredentials,
    duration: Duration,
    first: Duration,
    most: Duration,
) -> Result<Busy, String> {
    let template = template_of_independent_resources(10);
    let cpu_before = process_cpu_time()?;
    let started = Instant::now();
    let workers = (0..THROUGHPUT_CLIENTS).map(|worker| {
        let client = RestStacks::new(running.gateway_addr, &credentials.member.token)
            .polling_backoff(first, most);
        let template = template.clone();
        async move {
            let mut done = 0usize;
            while started.elapsed() < duration {
                let (stack, _) = client
                    .create_and_wait(
                        &format!("busy-{worker}-{}-{done}", first.as_millis()),
                        &template,
                    )
                    .await?;
                client.delete_and_wait(&stack).await?;
                done += 1;
            }
            Ok::<(usize, u64), String>((done, client.polls()))
        }
    });
    let (mut total, mut polls) = (0, 0);
    // Each client a task of its own, as separate client processes would
    // be, not all polled by the benchmark's one thread (every response
    // would then wake that thread too).
    let running_clients: Vec<_> = workers.map(tokio::spawn).collect();
    for outcome in futures::future::join_all(running_clients).await {
        let (done, reads) = outcome.map_err(|error| format!("a client stopped: {error}"))??;
        total += done;
        polls += reads;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = process_cpu_time()?.saturating_sub(cpu_before);
    let stacks = total.max(1) as f64;
    Ok(Busy {
        stacks_per_second: total as f64 / elapsed,
        reads_per_stack: polls as f64 / stacks,
        cpu_ms_per_stack: cpu.as_secs_f64() * 1000.0 / stacks,
    })
}

/// What a chain of 5 lifecycle plugins adds to a 10-resource create.
async fn plugin_overhead(
    client: &RestStacks,
    credentials: &DevCredentials,
    running: &RunningEmber,
    runs: usize,
) -> Result<(), String> {
    let small = template_of_independent_resources(10);
    let mut without_plugins = Vec::new();
    for run in 0..runs {
        let (stack, created) = client
            .create_and_wait(&format!("no-plugins-{run}"), &small)
            .await?;
        without_plugins.push(created);
        client.delete_and_wait(&stack).await?;
    }
    let channel = Channel::from_shared(format!("http://{}", running.gateway_addr))
        .map_err(|error| error.to_string())?
        .connect()
        .await
        .map_err(|error| error.to_string())?;
    let mut plugins = Vec::new();
    let mut names = Vec::new();
    for index in 0..5 {
        let plugin = AllowPlugin::start(&format!("bench-plugin-{index}"))
            .await
            .map_err(|error| error.to_string())?;
        let registration = admin_request(
            credentials,
            ember_proto::pluginregistry::v1::RegisterPluginRequest {
                name: plugin.name.clone(),
                endpoint: plugin.endpoint.clone(),
                ordinal: index,
                ..Default::default()
            },
        )?;
        PluginRegistryServiceClient::new(channel.clone())
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
            .register_plugin(registration)
            .await
            .map_err(|status| format!("register plugin: {}", status.message()))?;
        names.push(plugin.name.clone());
        plugins.push(plugin);
    }
    let mut with_plugins = Vec::new();
    for run in 0..runs {
        let (stack, created) = client
            .create_and_wait(&format!("plugins-{run}"), &small)
            .await?;
        with_plugins.push(created);
        client.delete_and_wait(&stack).await?;
    }
    for name in names {
        let request = admin_request(
            credentials,
            ember_proto::pluginregistry::v1::DeregisterPluginRequest { name },
        )?;
        PluginRegistryServiceClient::new(channel.clone())
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
            .deregister_plugin(request)
            .await
            .map_err(|status| format!("deregister plugin: {}", status.message()))?;
    }
    for plugin in plugins {
        plugin.stop().await;
    }
    let plain = summarize(&mut without_plugins);
    let chained = summarize(&mut with_plugins);
    print_row(
        "10 OS::Heat::None: create, no plugins",
        &mut without_plugins,
    );
    print_row("10 OS::Heat::None: create, 5 plugins", &mut with_plugins);
    println!(
        "{:<56} {:>10.2}",
        "  pre-operation overhead per plugin (median)",
        (chained.median_us - plain.median_us) / 5.0 / 1000.0
    );
    open_circuit_overhead(client, credentials, &channel, runs, &small).await
}

/// What a plug-in whose circuit is open costs a create: none at all is
/// the aim. A WARN plug-in on an address where nothing listens opens its
/// circuit on the first create; then creates alternate with it disabled
/// (no plugin) and enabled (circuit open), so drift hits both alike.
async fn open_circuit_overhead(
    client: &RestStacks,
    credentials: &DevCredentials,
    channel: &Channel,
    runs: usize,
    template: &str,
) -> Result<(), String> {
    use ember_proto::pluginregistry::v1 as pb;
    const NAME: &str = "bench-circuit-open";
    let nowhere = {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").map_err(|error| error.to_string())?;
        format!(
            "http://{}",
            listener.local_addr().map_err(|error| error.to_string())?
        )
    };
    let registry = || {
        PluginRegistryServiceClient::new(channel.clone())
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
    };
    registry()
        .register_plugin(admin_request(
            credentials,
            pb::RegisterPluginRequest {
                name: NAME.to_owned(),
                endpoint: nowhere,
                operations: vec![ember_proto::common::v1::StackOperation::Create as i32],
                failure_mode: pb::FailureMode::Warn as i32,
                breaker_failures: Some(1),
                breaker_cooldown_ms: Some(3_600_000),
                ..Default::default()
            },
        )?)
        .await
        .map_err(|status| format!("register plugin: {}", status.message()))?;
    let (stack, _) = client
        .create_and_wait("opens-the-circuit", template)
        .await?;
    client.delete_and_wait(&stack).await?;
    let enable = |enabled: bool| {
        let request = admin_request(
            credentials,
            pb::UpdatePluginRequest {
                name: NAME.to_owned(),
                enabled: Some(enabled),
                ..Default::default()
            },
        );
        async move {
            let plugin = registry()
                .update_plugin(request?)
                .await
                .map_err(|status| format!("update plugin: {}", status.message()))?
                .into_inner();
            match plugin.circuit.map(|circuit| circuit.state) {
                Some(state) if state == pb::CircuitState::Open as i32 => Ok(()),
                other => Err(format!("the circuit is not open: {other:?}")),
            }
        }
    };
    let (mut without, mut open) = (Vec::new(), Vec::new());
    for run in 0..runs {
        enable(false).await?;
        let (stack, created) = client
            .create_and_wait(&format!("no-plugin-{run}"), template)
            .await?;
        without.push(created);
        client.delete_and_wait(&stack).await?;
        enable(true).await?;
        let (stack, created) = client
            .create_and_wait(&format!("circuit-open-{run}"), template)
            .await?;
        open.push(created);
        client.delete_and_wait(&stack).await?;
    }
    registry()
        .deregister_plugin(admin_request(
            credentials,
            pb::DeregisterPluginRequest {
                name: NAME.to_owned(),
            },
        )?)
        .await
        .map_err(|status| format!("deregister plugin: {}", status.message()))?;
    let plain = summarize(&mut without);
    let skipped = summarize(&mut open);
    print_row(
        "10 OS::Heat::None: create, no plugin (alternating)",
        &mut without,
    );
    print_row(
        "10 OS::Heat::None: create, 1 plugin, circuit open",
        &mut open,
    );
    println!(
        "{:<56} {:>10.2}",
        "  an open circuit's cost (median difference)",
        (skipped.median_us - plain.median_us) / 1000.0
    );
    Ok(())
}

fn admin_request<T>(credentials: &DevCredentials, message: T) -> Result<tonic::Request<T>, String> {
    let mut request = tonic::Request::new(message);
    let header = format!("Bearer {}", credentials.admin.token)
        .parse()
        .map_err(|_| "token is not a valid header".to_owned())?;
    request.metadata_mut().insert("authorization", header);
    Ok(request)
}

fn print_row(label: &str, samples: &mut [Duration]) {
    let summary = summarize(samples);
    println!(
        "{label:<56} {:>10.2} {:>10.2}",
        summary.median_us / 1000.0,
        summary.p99_us / 1000.0
    );
}

pub fn template_of_independent_resources(count: usize) -> String {
    let mut template = String::from("heat_template_version: 2021-04-16\nresources:\n");
    for index in 0..count {
        template.push_str(&format!("  r{index}: {{type: OS::Heat::None}}\n"));
    }
    template
}

pub fn template_of_chain(length: usize) -> String {
    let mut template = String::from(
        "heat_template_version: 2021-04-16\nresources:\n  r0: {type: OS::Heat::TestResource}\n",
    );
    for index in 1..length {
        template.push_str(&format!(
            "  r{index}: {{type: OS::Heat::TestResource, depends_on: r{}}}\n",
            index - 1
        ));
    }
    template
}

async fn create_schema(url: &str) -> Result<String, String> {
    use ember_runtime::database::connect;
    let schema = format!("bench_{}", uuid::Uuid::new_v4().simple());
    let connection = connect(url).await.map_err(|error| error.to_string())?;
    sea_orm_execute(&connection, &format!("CREATE SCHEMA {schema}")).await?;
    Ok(schema)
}

async fn drop_schema(url: &str, schema: &str) {
    if let Ok(connection) = ember_runtime::database::connect(url).await {
        let _ = sea_orm_execute(
            &connection,
            &format!("DROP SCHEMA IF EXISTS {schema} CASCADE"),
        )
        .await;
    }
}

async fn sea_orm_execute(
    connection: &sea_orm::DatabaseConnection,
    sql: &str,
) -> Result<(), String> {
    use sea_orm::ConnectionTrait;
    connection
        .execute_unprepared(sql)
        .await
        .map(|_| ())
        .map_err(|error| format!("{sql}: {error}"))
}
