//! `ember bench …`: benchmarks that print figures (never pass/fail on time;
//! machines are noisy). Each starts its own Ember on ephemeral ports with a
//! temporary data directory, so it can run anywhere.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::identity_service_client::IdentityServiceClient;
use ember_proto::engine::v1::stack_service_client::StackServiceClient;
use ember_runtime::Identity;
use ember_runtime::identity::InternalCredential;
use tonic::transport::Channel;

use crate::dev::{DevCredentials, RunningEmber};

pub(crate) mod allow_plugin;
mod clustering;
mod compute;
mod console;
mod heat;
mod hooks;
mod identity;
mod instances;
pub mod invariants;
mod load;
mod lock_expiry;
mod locks;
mod memory;
mod openstack;
mod quotas;
mod replicas;
mod scale;
pub(crate) mod stacks;
mod unhealthy;

#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Lock/unlock of 10 nested stacks x 100 resources, and the cost of the lock check
    Locks {
        /// Lock/unlock rounds
        #[arg(long, default_value_t = 10)]
        runs: usize,
    },
    /// The expiry sweep: 100,000 locked clusters, 1,000 expiring at once
    LockExpiry {
        /// Locked clusters (or instances) in all
        #[arg(long, default_value_t = 100_000)]
        locks: usize,
        /// Lock instances instead of clusters
        #[arg(long, conflicts_with = "stacks")]
        instances: bool,
        /// Lock stacks (of one OS::Heat::None) instead of clusters: each
        /// expiry is an UNLOCK operation (try --locks 10000)
        #[arg(long)]
        stacks: bool,
        /// Of which expire at the same moment
        #[arg(long, default_value_t = 1_000)]
        expiring: usize,
        /// Run on this PostgreSQL database instead of a temporary SQLite one
        #[arg(long)]
        postgres: Option<String>,
    },
    /// Stack create/delete of 100 resources, a chain of 20, and GET latencies
    Stacks {
        /// Runs per create/delete case
        #[arg(long, default_value_t = 10)]
        runs: usize,
        /// Run the engine on PostgreSQL (a fresh schema on this server)
        #[arg(long)]
        postgres: Option<String>,
        /// Only these cases (repeatable; for profiling one path)
        #[arg(long, value_enum)]
        only: Vec<stacks::Case>,
    },
    /// Mark one member of a 100-member AutoScalingGroup unhealthy then update; scaling signals of 10 members
    Unhealthy {
        /// Runs per case
        #[arg(long, default_value_t = 10)]
        runs: usize,
        /// Members of the group
        #[arg(long, default_value_t = 100)]
        members: usize,
    },
    /// Latency of gRPC calls through the gateway versus straight to the engine
    Gateway {
        /// Measured calls per path and RPC
        #[arg(long, default_value_t = 5000)]
        calls: usize,
    },
    /// Time from starting `ember dev` to /healthz 200, and to exit after SIGTERM
    Startup {
        /// Starts to measure (the first on an empty data dir, then reusing it)
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
    /// Latency of the instance lock API and GET /instances/{uuid} with many instances stored
    Instances {
        /// Instances in the database (inserted through the store before start)
        #[arg(long, default_value_t = 10_000)]
        instances: usize,
        /// Measured calls per row
        #[arg(long, default_value_t = 2000)]
        calls: usize,
    },
    /// Lifecycle hooks: scale_in to every message delivered, complete_lifecycle to the node deleted, many pending deadlines firing, 1,000 launching nodes completed by 50 callers
    Hooks {
        /// Clusters scaled in (one scale-in of every node each)
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Nodes per cluster, all removed by the scale-in
        #[arg(long, default_value_t = 100)]
        nodes: usize,
        /// Pending actions held by lifecycle-hook until their deadline
        #[arg(long, default_value_t = 10_000)]
        pending: usize,
        /// Nodes of one scale-out that all wait on a launch hook (0: skip)
        #[arg(long, default_value_t = 1000)]
        launch: usize,
        /// Concurrent callers completing the launch hooks
        #[arg(long, default_value_t = 50)]
        callers: usize,
    },
    /// Clustering reads at size (cluster list of 200, node lists with 5,000 nodes) and a webhook receiver's trigger to a READY action
    Clustering {
        /// Clusters stored
        #[arg(long, default_value_t = 200)]
        clusters: usize,
        /// Nodes of each cluster
        #[arg(long, default_value_t = 25)]
        nodes: usize,
        /// Measured calls per read
        #[arg(long, default_value_t = 1000)]
        calls: usize,
        /// Measured webhook triggers
        #[arg(long, default_value_t = 200)]
        triggers: usize,
    },
    /// One cluster at growing sizes: create, scale out and in by a tenth (µs per node), cluster show and the node list paged by 100, and a hooked scale-in completed by many callers
    ClusterScale {
        /// Cluster sizes, each on a fresh deployment (comma-separated)
        #[arg(long, value_delimiter = ',', default_values_t = [100, 1_000, 10_000])]
        sizes: Vec<usize>,
        /// Concurrent callers completing the hooked scale-in (at the largest size)
        #[arg(long, default_value_t = 50)]
        completers: usize,
    },
    /// Many clients at once for a fixed time (70% reads, 20% stack create/delete, 10% cluster scaling), then the invariant check of everything they touched
    Load {
        /// Concurrent clients, each with its own keep-alive connection
        #[arg(long, default_value_t = 32)]
        clients: usize,
        /// How long the load runs
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Run the engine on PostgreSQL (a fresh schema on this server)
        #[arg(long)]
        postgres: Option<String>,
        /// Seed of the clients' random choices (a run is reproducible in what it asks)
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Stack create+delete throughput through two engine replicas sharing one PostgreSQL, against one
    Replicas {
        /// Concurrent REST clients, each with its own keep-alive connection
        #[arg(long, default_value_t = 16)]
        clients: usize,
        /// Seconds measured per engine count and round
        #[arg(long, default_value_t = 20)]
        seconds: u64,
        /// Seconds of the same load before each measurement (not counted)
        #[arg(long, default_value_t = 3)]
        warm_up: u64,
        /// OS::Heat::None resources per stack
        #[arg(long, default_value_t = 10)]
        resources: usize,
        /// How often a client polls the stack it waits for, in milliseconds
        #[arg(long, default_value_t = 10)]
        poll_ms: u64,
        /// Rounds of one engine then two (alternating, so drift hits both)
        #[arg(long, default_value_t = 2)]
        rounds: usize,
        /// PostgreSQL server; each engine count gets a fresh schema on it [default: $EMBER_TEST_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres]
        #[arg(long)]
        database_url: Option<String>,
    },
    /// What the quota checks add to a stack create
    Quotas {
        /// Stacks the project already holds
        #[arg(long, default_value_t = 500)]
        stacks: usize,
        /// Measured checks
        #[arg(long, default_value_t = 5000)]
        checks: usize,
    },
    /// The docker compute driver on a real engine: instance create/delete beside the engine's own create+start and stop+remove, and a container cluster's scale-out
    Compute {
        /// Measured creates and deletes of each kind
        #[arg(long, default_value_t = 50)]
        runs: usize,
        /// Nodes of the scaled-out cluster
        #[arg(long, default_value_t = 20)]
        nodes: usize,
        /// The engine's API [default: $DOCKER_HOST, else unix:///var/run/docker.sock]
        #[arg(long)]
        docker_host: Option<String>,
        /// The image instances run (it must be on the engine)
        #[arg(long, default_value = compute::DEFAULT_IMAGE)]
        image: String,
    },
    /// The Keystone front door: POST /identity/v3/auth/tokens, and what token validation adds per request (built-in, and keystone mode against a real Keystone with a warm cache)
    Identity {
        /// Tokens issued (measured)
        #[arg(long, default_value_t = 200)]
        tokens: usize,
        /// Measured validations and REST calls per case
        #[arg(long, default_value_t = 2000)]
        calls: usize,
        /// Python of a venv with Keystone (tests/keystone/setup.sh) [default: target/test-tools/keystone-venv/bin/python when present]
        #[arg(long)]
        keystone_python: Option<std::path::PathBuf>,
    },
    /// A real OpenStack (tests/openstack/cloud.sh, Heat from tests/openstack/heat.sh): a stack of servers with a port and floating IP each, created and deleted through Ember and through the cloud's own Heat
    #[command(name = "openstack")]
    OpenStack {
        /// The cloud's facts file [default: $EMBER_TEST_OPENSTACK]
        #[arg(long)]
        cloud: Option<std::path::PathBuf>,
        /// Servers in the stack
        #[arg(long, default_value_t = 10)]
        servers: usize,
        /// Create/delete runs of each
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Only Ember (no Heat on the cloud)
        #[arg(long)]
        no_heat: bool,
    },
    /// Heat-native paths: 50 WaitConditions signalled by 50 concurrent curls; an agent's metadata poll with 1,000 deployments stored
    Heat {
        /// WaitConditions (each with its own handle)
        #[arg(long, default_value_t = 50)]
        conditions: usize,
        /// Software deployments stored
        #[arg(long, default_value_t = 1000)]
        deployments: usize,
        /// Measured metadata polls per case
        #[arg(long, default_value_t = 2000)]
        polls: usize,
    },
    /// RSS of a child `ember dev` holding many idle stacks of 10 resources, then over a create/delete loop (growth per 1,000 cycles)
    Memory {
        /// Stacks of 10 OS::Heat::None created and left idle
        #[arg(long, default_value_t = 10_000)]
        stacks: usize,
        /// Concurrent REST clients, each with its own keep-alive connection
        #[arg(long, default_value_t = 8)]
        clients: usize,
        /// Seconds left idle before an idle reading (after the stacks are created, and after the loop)
        #[arg(long, default_value_t = 10)]
        settle_seconds: u64,
        /// How long the clients create and delete stacks
        #[arg(long, default_value_t = 600)]
        loop_seconds: u64,
        /// How often an admin purges deleted stacks during the loop (0: never)
        #[arg(long, default_value_t = 30)]
        purge_every_seconds: u64,
    },
    /// The web console in a headless Chromium: the stacks list of 1,000 stacks and a stack page of 500 resources, and what the console costs the API
    Console {
        /// Stacks in the list
        #[arg(long, default_value_t = 1000)]
        stacks: usize,
        /// Resources of the stack whose page is drawn
        #[arg(long, default_value_t = 500)]
        resources: usize,
        /// Page loads of each
        #[arg(long, default_value_t = 10)]
        runs: usize,
        /// GET one stack calls with the console on, and as many with it off
        #[arg(long, default_value_t = 2000)]
        calls: usize,
    },
    /// Cost of a chain of lifecycle plugins: RunPreOperations/RunPostOperations on loopback
    Plugins {
        /// Measured calls per case
        #[arg(long, default_value_t = 2000)]
        calls: usize,
        /// Plugins in the chain
        #[arg(long, default_value_t = 5)]
        plugins: usize,
        /// Servers in the stack snapshot sent to every plugin
        #[arg(long, default_value_t = 10)]
        resources: usize,
    },
}

pub async fn run(command: BenchCommand) -> Result<(), String> {
    match command {
        BenchCommand::Locks { runs } => locks::run(runs.max(1)).await,
        BenchCommand::LockExpiry {
            locks,
            instances,
            stacks,
            expiring,
            postgres,
        } => {
            let target = if instances {
                lock_expiry::Target::Instances
            } else if stacks {
                lock_expiry::Target::Stacks
            } else {
                lock_expiry::Target::Clusters
            };
            lock_expiry::run(target, locks.max(1), expiring.max(1), postgres).await
        }
        BenchCommand::Stacks {
            runs,
            postgres,
            only,
        } => stacks::run(runs.max(1), postgres, &only).await,
        BenchCommand::Unhealthy { runs, members } => {
            unhealthy::run(runs.max(1), members.max(1)).await
        }
        BenchCommand::Gateway { calls } => gateway(calls.max(10)).await,
        BenchCommand::Startup { runs } => startup(runs.max(1)).await,
        BenchCommand::Instances { instances, calls } => {
            instances::run(instances.max(100), calls.max(10)).await
        }
        BenchCommand::Hooks {
            runs,
            nodes,
            pending,
            launch,
            callers,
        } => {
            hooks::run(
                runs.max(1),
                nodes.max(1),
                pending.max(1),
                launch,
                callers.max(1),
            )
            .await
        }
        BenchCommand::Clustering {
            clusters,
            nodes,
            calls,
            triggers,
        } => {
            clustering::run(clustering::ClusteringBench {
                clusters: clusters.max(1),
                nodes_per_cluster: nodes.max(1),
                calls: calls.max(10),
                triggers: triggers.max(1),
            })
            .await
        }
        BenchCommand::ClusterScale { sizes, completers } => {
            scale::run(scale::ClusterScaleBench {
                sizes: sizes.into_iter().map(|size| size.max(10)).collect(),
                completers: completers.max(1),
            })
            .await
        }
        BenchCommand::Load {
            clients,
            seconds,
            postgres,
            seed,
        } => {
            load::run(load::LoadSettings {
                clients: clients.max(1),
                duration: Duration::from_secs(seconds.max(1)),
                postgres,
                seed,
            })
            .await
        }
        BenchCommand::Replicas {
            clients,
            seconds,
            warm_up,
            resources,
            poll_ms,
            rounds,
            database_url,
        } => {
            replicas::run(replicas::ReplicasBench {
                clients: clients.max(1),
                duration: Duration::from_secs(seconds.max(1)),
                warm_up: Duration::from_secs(warm_up),
                resources: resources.max(1),
                poll: Duration::from_millis(poll_ms.max(1)),
                rounds: rounds.max(1),
                database_url,
            })
            .await
        }
        BenchCommand::Quotas { stacks, checks } => quotas::run(stacks, checks.max(10)).await,
        BenchCommand::Compute {
            runs,
            nodes,
            docker_host,
            image,
        } => {
            compute::run(compute::ComputeBench {
                runs: runs.max(1),
                nodes: nodes.max(1),
                docker_host,
                image,
            })
            .await
        }
        BenchCommand::Identity {
            tokens,
            calls,
            keystone_python,
        } => {
            identity::run(identity::IdentityBench {
                tokens: tokens.max(10),
                calls: calls.max(10),
                keystone_python,
            })
            .await
        }
        BenchCommand::OpenStack {
            cloud,
            servers,
            runs,
            no_heat,
        } => {
            openstack::run(openstack::OpenStackBench {
                cloud,
                servers: servers.max(1),
                runs: runs.max(1),
                heat: !no_heat,
            })
            .await
        }
        BenchCommand::Heat {
            conditions,
            deployments,
            polls,
        } => heat::run(conditions.max(1), deployments.max(100), polls.max(10)).await,
        BenchCommand::Memory {
            stacks,
            clients,
            settle_seconds,
            loop_seconds,
            purge_every_seconds,
        } => {
            memory::run(memory::MemoryBench {
                stacks: stacks.max(1),
                clients: clients.max(1),
                settle: Duration::from_secs(settle_seconds),
                loop_duration: Duration::from_secs(loop_seconds.max(1)),
                purge_every: (purge_every_seconds > 0)
                    .then(|| Duration::from_secs(purge_every_seconds)),
            })
            .await
        }
        BenchCommand::Console {
            stacks,
            resources,
            runs,
            calls,
        } => {
            console::run(console::ConsoleBench {
                stacks: stacks.max(1),
                resources: resources.max(1),
                runs: runs.max(1),
                calls: calls.max(10),
            })
            .await
        }
        BenchCommand::Plugins {
            calls,
            plugins,
            resources,
        } => crate::commands::plugin_bench::run(calls.max(10), plugins, resources).await,
    }
}

/// Median, p90 and p99 of a set of durations, in microseconds.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub median_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
}

/// One REST call of a benchmark's keep-alive client, as `token`: the
/// status and the JSON answer (`null` when it is not JSON).
pub(crate) async fn rest_call(
    http: &reqwest::Client,
    token: &str,
    method: reqwest::Method,
    url: &str,
    body: Option<serde_json::Value>,
) -> Result<(u16, serde_json::Value), String> {
    let mut request = http
        .request(method.clone(), url)
        .header("X-Auth-Token", token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request
        .send()
        .await
        .map_err(|error| format!("{method} {url}: {error}"))?;
    let status = response.status().as_u16();
    let bytes = response
        .bytes()
        .await
        .map_err(|error| format!("{method} {url}: {error}"))?;
    let body = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    Ok((status, body))
}

pub fn summarize(samples: &mut [Duration]) -> Summary {
    samples.sort_unstable();
    let at = |quantile: f64| {
        let index = ((samples.len() as f64 - 1.0) * quantile).round() as usize;
        samples
            .get(index.min(samples.len().saturating_sub(1)))
            .map_or(0.0, |duration| duration.as_secs_f64() * 1e6)
    };
    Summary {
        median_us: at(0.5),
        p90_us: at(0.9),
        p99_us: at(0.99),
    }
}

async fn connect(address: SocketAddr) -> Result<Channel, String> {
    Channel::from_shared(format!("http://{address}"))
        .map_err(|error| error.to_string())?
        .connect()
        .await
        .map_err(|error| format!("cannot connect to {address}: {error}"))
}

async fn gateway(calls: usize) -> Result<(), String> {
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let (config, secrets) = crate::dev::ephemeral_config(data_dir.path());
    let running = RunningEmber::start(config, secrets.clone()).await?;
    let credentials =
        DevCredentials::mint(running.gateway_addr, &secrets, Duration::from_secs(3600))?;
    let gateway_channel = connect(running.gateway_addr).await?;
    let engine_channel = connect(running.engine_addr).await?;

    let credential = InternalCredential::new(&secrets.internal_credential);
    let identity = Identity::new("demo", "demo", vec!["member".to_owned()]);
    let bearer: tonic::metadata::MetadataValue<_> = format!("Bearer {}", credentials.member.token)
        .parse()
        .map_err(|_| "token is not a valid header".to_owned())?;
    let authorize = Authorize {
        bearer,
        identity,
        credential,
    };

    println!("gateway overhead: {calls} calls per path, after 500 warm-up calls (microseconds)");
    println!(
        "{:<34} {:>10} {:>10} {:>10}",
        "call", "median", "p90", "p99"
    );
    for rpc in ["IdentityService/WhoAmI", "StackService/ListStacks"] {
        let mut direct = Vec::with_capacity(calls);
        let mut proxied = Vec::with_capacity(calls);
        for round in 0..calls + 500 {
            // Alternate the two paths so drift on a noisy machine hits both.
            for (channel, via_gateway) in [(&engine_channel, false), (&gateway_channel, true)] {
                let started = Instant::now();
                let result = match rpc {
                    "IdentityService/WhoAmI" => {
                        let message = pb::WhoAmIRequest {};
                        let request = authorize.request(message, via_gateway);
                        IdentityServiceClient::new(channel.clone())
                            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
                            .who_am_i(request)
                            .await
                            .map(|_| ())
                    }
                    _ => {
                        let message = pb::ListStacksRequest::default();
                        let request = authorize.request(message, via_gateway);
                        StackServiceClient::new(channel.clone())
                            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
                            .list_stacks(request)
                            .await
                            .map(|_| ())
                    }
                };
                let elapsed = started.elapsed();
                result.map_err(|status| format!("{rpc} failed: {status}"))?;
                if round >= 500 {
                    if via_gateway {
                        proxied.push(elapsed)
                    } else {
                        direct.push(elapsed)
                    }
                }
            }
        }
        let direct = summarize(&mut direct);
        let proxied = summarize(&mut proxied);
        println!(
            "{:<34} {:>10.1} {:>10.1} {:>10.1}",
            format!("{rpc} (engine)"),
            direct.median_us,
            direct.p90_us,
            direct.p99_us
        );
        println!(
            "{:<34} {:>10.1} {:>10.1} {:>10.1}",
            format!("{rpc} (gateway)"),
            proxied.median_us,
            proxied.p90_us,
            proxied.p99_us
        );
        println!(
            "{:<34} {:>10.1}",
            format!("{rpc} overhead (median)"),
            proxied.median_us - direct.median_us
        );
    }
    running.stop().await
}

/// Credentials for the two paths: a bearer token for the gateway, and the
/// identity plus internal credential the gateway would forward.
struct Authorize {
    bearer: tonic::metadata::MetadataValue<tonic::metadata::Ascii>,
    identity: Identity,
    credential: InternalCredential,
}

impl Authorize {
    fn request<T>(&self, message: T, via_gateway: bool) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if via_gateway {
            request
                .metadata_mut()
                .insert("authorization", self.bearer.clone());
        } else {
            self.identity.attach(&self.credential, &mut request);
        }
        request
    }
}

async fn startup(runs: usize) -> Result<(), String> {
    let executable = std::env::current_exe().map_err(|error| error.to_string())?;
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let http = reqwest::Client::new();
    println!(
        "ember dev start-up: binary start to /healthz 200, and SIGTERM to exit (milliseconds)"
    );
    println!(
        "{:<6} {:<18} {:>10} {:>10}",
        "run", "data dir", "ready", "shutdown"
    );
    for run in 0..runs {
        let port = free_port()?;
        let started = Instant::now();
        let mut child = spawn_dev(
            &executable,
            port,
            data_dir.path(),
            &[],
            std::process::Stdio::null(),
        )?;
        let url = format!("http://127.0.0.1:{port}/healthz");
        let deadline = started + Duration::from_secs(30);
        loop {
            if let Ok(response) = http.get(&url).send().await
                && response.status().is_success()
            {
                break;
            }
            if Instant::now() > deadline {
                return Err("ember dev did not become ready within 30 s".to_owned());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let ready = started.elapsed();
        let pid = child.id().ok_or("ember dev exited early")?;
        let stop_started = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(pid).map_err(|error| error.to_string())?),
            nix::sys::signal::Signal::SIGTERM,
        )
        .map_err(|error| format!("cannot signal ember dev: {error}"))?;
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .map_err(|_| "ember dev did not exit within 10 s of SIGTERM".to_owned())?
            .map_err(|error| error.to_string())?;
        let stopped = stop_started.elapsed();
        if !status.success() {
            return Err(format!("ember dev exited with {status} after SIGTERM"));
        }
        println!(
            "{:<6} {:<18} {:>10.1} {:>10.1}",
            run + 1,
            if run == 0 { "empty" } else { "reused" },
            ready.as_secs_f64() * 1e3,
            stopped.as_secs_f64() * 1e3
        );
    }
    Ok(())
}

/// `executable dev` as a child process listening on `port` with its data
/// in `data_dir`, logging warnings and errors only (to `stderr`), with the
/// variables of `env` added; killed if dropped.
fn spawn_dev(
    executable: &std::path::Path,
    port: u16,
    data_dir: &std::path::Path,
    env: &[(&str, String)],
    stderr: std::process::Stdio,
) -> Result<tokio::process::Child, String> {
    tokio::process::Command::new(executable)
        .args([
            "dev",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(data_dir)
        .env("RUST_LOG", "warn")
        .envs(env.iter().map(|(name, value)| (*name, value.as_str())))
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| format!("cannot start {}: {error}", executable.display()))
}

fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|error| error.to_string())?;
    listener
        .local_addr()
        .map(|address| address.port())
        .map_err(|error| error.to_string())
}
