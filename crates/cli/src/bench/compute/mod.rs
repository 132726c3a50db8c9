//! `ember bench compute`: the docker compute driver against a real engine
//! (Docker, or Podman's API: `scripts/containers.sh start` runs one and
//! builds the default image).
//!
//! - Instance create → ACTIVE (its container running) and delete → gone
//!   (404, container removed), each `runs` times, measured as a client sees
//!   them (REST through the gateway, polling every millisecond), beside the
//!   engine's own create+start and stop+remove of the same container body
//!   made straight with bollard — alternated, so a noisy machine hits both
//!   alike. The server-side part (instance recorded → build event) is shown
//!   too. On a shared machine the engine's own times vary by tens of
//!   milliseconds, more than Ember adds; so Ember reaches the engine
//!   through a pass-through proxy ([`proxy`]) that notes each API call, and
//!   Ember's own time is each operation's time less the engine's busy time
//!   within it — measured on the same operation, free of that noise.
//! - A cluster of `nodes` worker containers (container.dockerinc.docker-1.0)
//!   scaled out from 0 to ACTIVE, beside the engine creating and starting
//!   as many containers at once; then deleted.
//!
//! Prints figures; never passes or fails on time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::query_parameters::{
    CreateContainerOptions, RemoveContainerOptions, StopContainerOptions,
};
use ember_engine::compute::docker::{DockerComputeConfig, PullPolicy, spec};
use ember_engine::compute::flavors::Flavor;
use ember_engine::domain::instance::{Instance, NewInstance, Workload};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::instance_service_client::InstanceServiceClient;
use serde_json::{Value, json};

use super::{Summary, summarize};

mod proxy;
use crate::dev::{DevCredentials, RunningEmber};

/// The test image `scripts/containers.sh` builds (FROM scratch + busybox).
pub const DEFAULT_IMAGE: &str = "localhost/ember-test/busybox:1";
const NETWORK: &str = "ember-bench";
const POLL: Duration = Duration::from_millis(1);
const DEADLINE: Duration = Duration::from_secs(120);

pub struct ComputeBench {
    pub runs: usize,
    pub nodes: usize,
    pub docker_host: Option<String>,
    pub image: String,
}

struct Rest {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Rest {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value), String> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("X-Auth-Token", &self.token)
            .header("OpenStack-API-Version", "clustering 1.12");
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .map_err(|error| format!("{path}: {error}"))?;
        let status = response.status().as_u16();
        let text = response
            .text()
            .await
            .map_err(|error| format!("{path}: {error}"))?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    async fn expect(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        expected: u16,
    ) -> Result<Value, String> {
        let (status, body) = self.call(method, path, body).await?;
        if status == expected {
            Ok(body)
        } else {
            Err(format!(
                "{path} answered {status} instead of {expected}: {body}"
            ))
        }
    }

    /// Polls `path` until `done` says so.
    async fn wait(
        &self,
        path: &str,
        what: &str,
        done: impl Fn(u16, &Value) -> Result<bool, String>,
    ) -> Result<(), String> {
        let started = Instant::now();
        loop {
            let (status, body) = self.call(reqwest::Method::GET, path, None).await?;
            if done(status, &body)? {
                return Ok(());
            }
            if started.elapsed() > DEADLINE {
                return Err(format!("{what} did not happen within {DEADLINE:?}: {body}"));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

fn row(name: &str, summary: &Summary) {
    println!(
        "{:<46} {:>9.1} {:>9.1} {:>9.1}",
        name,
        summary.median_us / 1e3,
        summary.p90_us / 1e3,
        summary.p99_us / 1e3
    );
}

pub async fn run(settings: ComputeBench) -> Result<(), String> {
    let docker_host = settings
        .docker_host
        .clone()
        .unwrap_or_else(DockerComputeConfig::default_host);
    let docker = if docker_host.starts_with("unix://") {
        Docker::connect_with_unix(&docker_host, 120, bollard::API_DEFAULT_VERSION)
    } else {
        Docker::connect_with_http(&docker_host, 120, bollard::API_DEFAULT_VERSION)
    }
    .map_err(|error| format!("cannot reach the container engine at {docker_host}: {error}"))?
    .negotiate_version()
    .await
    .map_err(|error| format!("cannot reach the container engine at {docker_host}: {error}"))?;
    docker.inspect_image(&settings.image).await.map_err(|error| {
        format!(
            "image {:?} is not on the engine ({error}): `scripts/containers.sh start` builds {DEFAULT_IMAGE}",
            settings.image
        )
    })?;

    let prefix = format!(
        "ember-bench-{}-",
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    );
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    // Ember reaches a unix-socket engine through the counting proxy.
    let proxy = match docker_host.strip_prefix("unix://") {
        Some(path) => Some(proxy::EngineProxy::start(
            std::path::Path::new(path),
            data_dir.path(),
        )?),
        None => None,
    };
    let (mut config, secrets) = crate::dev::ephemeral_config(data_dir.path());
    let compute = &mut config.engine.compute;
    compute.driver = "docker".to_owned();
    compute.docker_host = match &proxy {
        Some(proxy) => format!("unix://{}", proxy.socket.display()),
        None => docker_host.clone(),
    };
    compute.network = NETWORK.to_owned();
    compute.name_prefix = prefix.clone();
    compute.stop_grace_secs = 10;
    compute.flavors.insert(
        "small".to_owned(),
        ember_engine::config::FlavorSection {
            vcpus: 1.0,
            memory_mb: 64,
        },
    );
    let driver_config = match config.engine.compute.resolve().driver {
        ember_engine::compute::DriverConfig::Docker(docker) => docker,
        ember_engine::compute::DriverConfig::Simulated(_)
        | ember_engine::compute::DriverConfig::OpenStack => {
            return Err("the bench configures the docker driver".to_owned());
        }
    };
    let running = RunningEmber::start(config, secrets.clone()).await?;
    let credentials =
        DevCredentials::mint(running.gateway_addr, &secrets, Duration::from_secs(3600))?;
    let rest = Rest {
        http: reqwest::Client::new(),
        base: format!("http://{}", running.gateway_addr),
        token: credentials.member.token.clone(),
    };
    let outcome = measure(
        &settings,
        &docker,
        &driver_config,
        &rest,
        &running,
        &credentials.member.token,
        proxy.as_ref(),
    )
    .await;
    // Whatever a failure left behind.
    clean_up(&docker, &prefix).await;
    running.stop().await?;
    outcome
}

async fn measure(
    settings: &ComputeBench,
    docker: &Docker,
    driver_config: &DockerComputeConfig,
    rest: &Rest,
    running: &RunningEmber,
    token: &str,
    proxy: Option<&proxy::EngineProxy>,
) -> Result<(), String> {
    let flavor = Flavor {
        vcpus: 1.0,
        memory_mb: 64,
    };
    let mut grpc = InstanceServiceClient::new(super::connect(running.gateway_addr).await?);
    let raw_config = DockerComputeConfig {
        name_prefix: format!("{}raw-", driver_config.name_prefix),
        pull: PullPolicy::Never,
        ..driver_config.clone()
    };
    // Warm up both paths (Ember's first build makes the network; images
    // are cached).
    let (warm, _) = ember_instance(rest, &settings.image, "warm-up").await?;
    ember_delete(rest, &warm).await?;
    let (warm, _) = engine_create_start(docker, &raw_config, &settings.image, &flavor, 0).await?;
    engine_stop_remove(docker, &warm, driver_config).await?;

    let runs = settings.runs;
    let samples = || Vec::with_capacity(runs);
    let (mut raw_create, mut raw_delete) = (samples(), samples());
    let (mut ember_create, mut ember_delete_times) = (samples(), samples());
    let (mut own_create, mut own_delete, mut server_side) = (samples(), samples(), samples());
    // Ember's time less the engine's busy time within the same window.
    let own = |window: (Instant, Instant)| {
        proxy.map(|proxy| {
            (window.1 - window.0).saturating_sub(proxy.busy_between(window.0, window.1))
        })
    };
    for run in 0..runs {
        // Each path goes first every other run: whichever follows a delete
        // meets the engine still cleaning up after it.
        let ember_first = run % 2 == 1;
        for ember_turn in [ember_first, !ember_first] {
            if ember_turn {
                let (uuid, window) =
                    ember_instance(rest, &settings.image, &format!("bench-{run}")).await?;
                ember_create.push(window.1 - window.0);
                own_create.extend(own(window));
                server_side.push(build_time(&mut grpc, token, &uuid).await?);
                let window = ember_delete(rest, &uuid).await?;
                ember_delete_times.push(window.1 - window.0);
                own_delete.extend(own(window));
            } else {
                let (name, created) =
                    engine_create_start(docker, &raw_config, &settings.image, &flavor, run + 1)
                        .await?;
                raw_create.push(created);
                raw_delete.push(engine_stop_remove(docker, &name, driver_config).await?);
            }
        }
    }
    let raw_create = summarize(&mut raw_create);
    let raw_delete = summarize(&mut raw_delete);
    let ember_create_summary = summarize(&mut ember_create);
    let ember_delete_summary = summarize(&mut ember_delete_times);
    let server_side = summarize(&mut server_side);
    println!(
        "instance create → ACTIVE (container running) and delete → gone, {runs} runs each, alternated (milliseconds)"
    );
    println!("{:<46} {:>9} {:>9} {:>9}", "", "p50", "p90", "p99");
    row("engine: create + start (bollard, same body)", &raw_create);
    row(
        "Ember: POST → ACTIVE (REST, 1 ms polls)",
        &ember_create_summary,
    );
    row("Ember: server side, recorded → build event", &server_side);
    row("engine: stop + remove (bollard)", &raw_delete);
    row(
        "Ember: DELETE → 404 (REST, 1 ms polls)",
        &ember_delete_summary,
    );
    println!(
        "difference of the quantiles: create {:+.1} ms at p50, {:+.1} ms at p99; delete {:+.1} ms at p50, {:+.1} ms at p99",
        (ember_create_summary.median_us - raw_create.median_us) / 1e3,
        (ember_create_summary.p99_us - raw_create.p99_us) / 1e3,
        (ember_delete_summary.median_us - raw_delete.median_us) / 1e3,
        (ember_delete_summary.p99_us - raw_delete.p99_us) / 1e3,
    );
    if proxy.is_some() {
        println!(
            "Ember's own time in each operation (its time less the engine's busy time in it, through the proxy):"
        );
        row("  create → ACTIVE", &summarize(&mut own_create));
        row("  DELETE → 404", &summarize(&mut own_delete));
    }
    println!();
    scale_out(settings, docker, &raw_config, &flavor, rest).await
}

/// Creates and starts one container as the driver would; returns its name
/// and the time both calls took.
async fn engine_create_start(
    docker: &Docker,
    config: &DockerComputeConfig,
    image: &str,
    flavor: &Flavor,
    index: usize,
) -> Result<(String, Duration), String> {
    let new = NewInstance {
        name: format!("raw-{index}"),
        flavor: "small".to_owned(),
        image: image.to_owned(),
        metadata: BTreeMap::new(),
        workload: Workload {
            command: vec!["/bin/sleep".to_owned(), "3600".to_owned()],
            ..Workload::default()
        },
        placement: Default::default(),
        delegation: None,
    };
    let instance = Instance::new_building("demo", "bench", new, ember_runtime::time::now())
        .map_err(|error| error.to_string())?;
    let name = spec::container_name(config, &instance);
    let body = spec::container_body(config, &instance, flavor);
    let started = Instant::now();
    let created = docker
        .create_container(
            Some(CreateContainerOptions {
                name: Some(name.clone()),
                ..CreateContainerOptions::default()
            }),
            body,
        )
        .await
        .map_err(|error| format!("engine create: {error}"))?;
    docker
        .start_container(&created.id, None)
        .await
        .map_err(|error| format!("engine start: {error}"))?;
    Ok((name, started.elapsed()))
}

async fn engine_stop_remove(
    docker: &Docker,
    name: &str,
    config: &DockerComputeConfig,
) -> Result<Duration, String> {
    let started = Instant::now();
    docker
        .stop_container(
            name,
            Some(StopContainerOptions {
                t: Some(i32::try_from(config.stop_grace.as_secs()).unwrap_or(10)),
                ..StopContainerOptions::default()
            }),
        )
        .await
        .map_err(|error| format!("engine stop: {error}"))?;
    docker
        .remove_container(
            name,
            Some(RemoveContainerOptions {
                force: true,
                v: true,
                ..RemoveContainerOptions::default()
            }),
        )
        .await
        .map_err(|error| format!("engine remove: {error}"))?;
    Ok(started.elapsed())
}

/// POSTs an instance and polls until ACTIVE; returns its uuid and when the
/// POST went out and ACTIVE was seen.
async fn ember_instance(
    rest: &Rest,
    image: &str,
    name: &str,
) -> Result<(String, (Instant, Instant)), String> {
    let started = Instant::now();
    let body = rest
        .expect(
            reqwest::Method::POST,
            "/compute/v1/instances",
            Some(
                json!({"instance": {"name": name, "flavor": "small", "image": image,
                "command": ["/bin/sleep", "3600"]}}),
            ),
            202,
        )
        .await?;
    let uuid = body["instance"]["uuid"]
        .as_str()
        .ok_or("no uuid in the answer")?
        .to_owned();
    rest.wait(
        &format!("/compute/v1/instances/{uuid}"),
        "ACTIVE",
        |status, body| {
            let instance_status = body["instance"]["status"].as_str().unwrap_or_default();
            if status != 200 || instance_status == "ERROR" {
                return Err(format!("the instance failed: {body}"));
            }
            Ok(instance_status == "ACTIVE")
        },
    )
    .await?;
    Ok((uuid, (started, Instant::now())))
}

async fn ember_delete(rest: &Rest, uuid: &str) -> Result<(Instant, Instant), String> {
    let started = Instant::now();
    let path = format!("/compute/v1/instances/{uuid}");
    rest.expect(reqwest::Method::DELETE, &path, None, 202)
        .await?;
    rest.wait(&path, "gone", |status, body| {
        if status == 200 && body["instance"]["status"] == "ERROR" {
            return Err(format!("the delete failed: {body}"));
        }
        Ok(status == 404)
    })
    .await?;
    Ok((started, Instant::now()))
}

/// The engine's own time from recording the instance to its build event.
async fn build_time(
    grpc: &mut InstanceServiceClient<tonic::transport::Channel>,
    token: &str,
    uuid: &str,
) -> Result<Duration, String> {
    fn authorized<T>(message: T, token: &str) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Ok(value) = format!("Bearer {token}").parse() {
            request.metadata_mut().insert("authorization", value);
        }
        request
    }
    let instance = grpc
        .get_instance(authorized(
            pb::GetInstanceRequest {
                uuid: uuid.to_owned(),
            },
            token,
        ))
        .await
        .map_err(|status| status.to_string())?
        .into_inner();
    let events = grpc
        .list_instance_events(authorized(
            pb::ListInstanceEventsRequest {
                uuid: uuid.to_owned(),
                limit: 10,
            },
            token,
        ))
        .await
        .map_err(|status| status.to_string())?
        .into_inner()
        .events;
    let nanos = |time: Option<&prost_types::Timestamp>| {
        time.map_or(0_i128, |time| {
            i128::from(time.seconds) * 1_000_000_000 + i128::from(time.nanos)
        })
    };
    let built = events
        .iter()
        .find(|event| event.kind == "build")
        .ok_or("no build event")?;
    let elapsed = nanos(built.at.as_ref()) - nanos(instance.created_at.as_ref());
    Ok(Duration::from_nanos(
        u64::try_from(elapsed.max(0)).unwrap_or(0),
    ))
}

async fn scale_out(
    settings: &ComputeBench,
    docker: &Docker,
    raw_config: &DockerComputeConfig,
    flavor: &Flavor,
    rest: &Rest,
) -> Result<(), String> {
    let nodes = settings.nodes;
    let started = Instant::now();
    let creations = (0..nodes).map(|index| {
        engine_create_start(docker, raw_config, &settings.image, flavor, 1000 + index)
    });
    let created = futures::future::join_all(creations).await;
    let raw_elapsed = started.elapsed();
    let names: Vec<String> = created
        .into_iter()
        .map(|result| result.map(|(name, _)| name))
        .collect::<Result<_, _>>()?;
    let removals = names
        .iter()
        .map(|name| engine_stop_remove(docker, name, raw_config));
    for removed in futures::future::join_all(removals).await {
        removed?;
    }

    rest.expect(
        reqwest::Method::POST,
        "/clustering/v1/profiles",
        Some(json!({"profile": {"name": "bench-worker", "spec": {
            "type": "container.dockerinc.docker", "version": "1.0",
            "properties": {"image": settings.image, "command": "/bin/sleep 3600", "flavor": "small"}}}})),
        201,
    )
    .await?;
    let body = rest
        .expect(
            reqwest::Method::POST,
            "/clustering/v1/clusters",
            Some(
                json!({"cluster": {"name": "bench-workers", "profile_id": "bench-worker",
                "desired_capacity": 0, "max_size": -1}}),
            ),
            202,
        )
        .await?;
    let cluster_id = body["cluster"]["id"]
        .as_str()
        .ok_or("no cluster id")?
        .to_owned();
    let cluster_path = format!("/clustering/v1/clusters/{cluster_id}");
    rest.wait(&cluster_path, "the cluster ACTIVE", |_, body| {
        Ok(body["cluster"]["status"] == "ACTIVE")
    })
    .await?;
    let started = Instant::now();
    rest.expect(
        reqwest::Method::POST,
        &format!("{cluster_path}/actions"),
        Some(json!({"scale_out": {"count": nodes}})),
        202,
    )
    .await?;
    let nodes_path = format!("/clustering/v1/nodes?cluster_id={cluster_id}");
    rest.wait(&nodes_path, "every node ACTIVE", |_, body| {
        let listed = body["nodes"].as_array().cloned().unwrap_or_default();
        if listed.iter().any(|node| node["status"] == "ERROR") {
            return Err(format!("a node failed: {body}"));
        }
        Ok(listed.len() == nodes && listed.iter().all(|node| node["status"] == "ACTIVE"))
    })
    .await?;
    let ember_elapsed = started.elapsed();
    let started = Instant::now();
    rest.expect(reqwest::Method::DELETE, &cluster_path, None, 202)
        .await?;
    rest.wait(&cluster_path, "the cluster gone", |status, _| {
        Ok(status == 404)
    })
    .await?;
    let delete_elapsed = started.elapsed();
    println!(
        "scale-out of a {nodes}-node container cluster (container.dockerinc.docker-1.0) to ACTIVE (milliseconds)"
    );
    println!(
        "{:<46} {:>9.1}",
        format!("engine: {nodes} × create + start, all at once"),
        raw_elapsed.as_secs_f64() * 1e3
    );
    println!(
        "{:<46} {:>9.1}",
        "Ember: scale_out → every node ACTIVE",
        ember_elapsed.as_secs_f64() * 1e3
    );
    println!(
        "{:<46} {:>9.1}",
        "Ember: cluster delete → gone (containers removed)",
        delete_elapsed.as_secs_f64() * 1e3
    );
    Ok(())
}

async fn clean_up(docker: &Docker, prefix: &str) {
    let options = bollard::query_parameters::ListContainersOptions {
        all: true,
        filters: Some(std::collections::HashMap::from([(
            "name".to_owned(),
            vec![prefix.to_owned()],
        )])),
        ..Default::default()
    };
    if let Ok(containers) = docker.list_containers(Some(options)).await {
        for id in containers.into_iter().filter_map(|container| container.id) {
            let _ = docker
                .remove_container(
                    &id,
                    Some(RemoveContainerOptions {
                        force: true,
                        ..RemoveContainerOptions::default()
                    }),
                )
                .await;
        }
    }
}
