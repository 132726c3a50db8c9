//! `ember bench plugins`: what a chain of lifecycle plugins costs an
//! operation. Starts a plugin-registry (temporary SQLite) and N allow-all
//! test plugins, all on loopback in this process, then times the engine's
//! calls: RunPreOperations when no plugin matches (the runner's own cost:
//! one generation read and the RPC), with N plugins, and RunPostOperations.
//! Prints figures; never passes or fails on time.

use std::time::{Duration, Instant};

use ember_proto::common::v1::StackOperation;
use ember_proto::plugin::v1 as plugin_pb;
use ember_proto::pluginregistry::v1 as pb;
use ember_proto::pluginregistry::v1::plugin_registry_service_client::PluginRegistryServiceClient;
use ember_proto::pluginregistry::v1::plugin_runner_service_client::PluginRunnerServiceClient;
use ember_runtime::Identity;
use ember_runtime::identity::InternalCredential;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

use crate::bench::allow_plugin::AllowPlugin;
use crate::bench::summarize;

const WARM_UP_CALLS: usize = 200;

/// Runs the benchmark: `calls` measured calls per case, `plugins` in the chain,
/// `resources` servers in the stack snapshot sent to each plugin.
pub async fn run(calls: usize, plugins: usize, resources: usize) -> Result<(), String> {
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let credential = format!("bench-{}", uuid::Uuid::new_v4().simple());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|error| error.to_string())?;
    let address = listener.local_addr().map_err(|error| error.to_string())?;
    let shutdown = CancellationToken::new();
    let config = ember_plugin_registry::Config {
        database_url: ember_runtime::database::sqlite_url(&data_dir.path().join("registry.db")),
        internal_credential: credential.clone(),
        request_timeout: Duration::from_secs(30),
        in_process: None,
    };
    let server = tokio::spawn(ember_plugin_registry::serve(
        config,
        listener,
        shutdown.clone(),
    ));
    let channel = connect(address).await?;
    let caller = Caller {
        channel,
        credential: InternalCredential::new(&credential),
    };

    let mut test_plugins = Vec::with_capacity(plugins);
    for index in 0..plugins {
        test_plugins.push(
            AllowPlugin::start(&format!("plugin-{index}"))
                .await
                .map_err(|error| format!("cannot start a test plugin: {error}"))?,
        );
    }
    let request = pre_request(resources);

    println!(
        "lifecycle plugins: {calls} calls per case after {WARM_UP_CALLS} warm-up calls, {resources}-server snapshot (microseconds)"
    );
    println!(
        "{:<44} {:>10} {:>10} {:>10}",
        "case", "median", "p90", "p99"
    );
    // The plugins filter on create, so a delete runs the same runner path
    // with an empty chain; the two alternate, so drift hits both alike.
    for (ordinal, plugin) in (1..).zip(&test_plugins) {
        caller
            .register(&plugin.name, &plugin.endpoint, ordinal)
            .await?;
    }
    let timings = caller.time_pre(&request, calls, plugins).await?;
    print_row("RunPreOperations, no plugin matching", timings.empty_chain);
    print_row(
        &format!("RunPreOperations, {plugins} plugins"),
        timings.full_chain,
    );
    print_row(
        "  one PreOperation as the runner times it",
        timings.per_call,
    );
    let post = caller.time_post(&request, calls, plugins).await?;
    print_row(&format!("RunPostOperations, {plugins} plugins"), post);
    if plugins > 0 {
        println!(
            "{:<44} {:>10.1}",
            "per plugin call, median (chain - empty) / N",
            (timings.full_chain.0 - timings.empty_chain.0) / plugins as f64
        );
    }

    for plugin in test_plugins {
        plugin.stop().await;
    }
    shutdown.cancel();
    server
        .await
        .map_err(|error| error.to_string())?
        .map_err(|error| error.to_string())
}

/// Median, p90, p99 in microseconds.
type Figures = (f64, f64, f64);

struct PreTimings {
    empty_chain: Figures,
    full_chain: Figures,
    per_call: Figures,
}

fn print_row(case: &str, (median, p90, p99): Figures) {
    println!("{case:<44} {median:>10.1} {p90:>10.1} {p99:>10.1}");
}

fn figures(samples: &mut [Duration]) -> Figures {
    let summary = summarize(samples);
    (summary.median_us, summary.p90_us, summary.p99_us)
}

async fn connect(address: std::net::SocketAddr) -> Result<Channel, String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Channel::from_shared(format!("http://{address}"))
            .map_err(|error| error.to_string())?
            .connect()
            .await
        {
            Ok(channel) => return Ok(channel),
            Err(error) if Instant::now() > deadline => {
                return Err(format!("the plugin-registry did not start: {error}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

fn pre_request(resources: usize) -> pb::RunPreOperationsRequest {
    let property = |text: &str| prost_types::Value {
        kind: Some(prost_types::value::Kind::StringValue(text.to_owned())),
    };
    let servers = (0..resources)
        .map(|index| plugin_pb::ResourceSnapshot {
            name: format!("server_{index}"),
            r#type: "OS::Nova::Server".to_owned(),
            properties: Some(prost_types::Struct {
                fields: [
                    ("image".to_owned(), property("cirros-0.6")),
                    ("flavor".to_owned(), property("m1.small")),
                    ("key_name".to_owned(), property("ops")),
                ]
                .into_iter()
                .collect(),
            }),
            status: "INIT_COMPLETE".to_owned(),
            physical_id: String::new(),
        })
        .collect();
    pb::RunPreOperationsRequest {
        operation: StackOperation::Create as i32,
        project_id: "demo".to_owned(),
        stack: Some(plugin_pb::StackSnapshot {
            stack_id: uuid::Uuid::new_v4().to_string(),
            stack_name: "bench".to_owned(),
            project_id: "demo".to_owned(),
            user_id: "demo".to_owned(),
            resources: servers,
            ..plugin_pb::StackSnapshot::default()
        }),
        previous: None,
        snapshot_on_demand: false,
        dry_run: false,
        break_glass: false,
    }
}

/// Calls the plugin-registry as the engine does: internal credential plus
/// the caller's identity.
struct Caller {
    channel: Channel,
    credential: InternalCredential,
}

impl Caller {
    fn request<T>(&self, message: T, roles: &[&str]) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        Identity::new(
            "demo",
            "demo",
            roles.iter().map(|role| (*role).to_owned()).collect(),
        )
        .attach(&self.credential, &mut request);
        request
    }

    async fn register(&self, name: &str, endpoint: &str, ordinal: i32) -> Result<(), String> {
        PluginRegistryServiceClient::new(self.channel.clone())
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
            .register_plugin(self.request(
                pb::RegisterPluginRequest {
                    name: name.to_owned(),
                    endpoint: endpoint.to_owned(),
                    ordinal,
                    operations: vec![StackOperation::Create as i32],
                    ..pb::RegisterPluginRequest::default()
                },
                &["admin"],
            ))
            .await
            .map_err(|status| format!("cannot register {name}: {}", status.message()))?;
        Ok(())
    }

    /// Times RunPreOperations for a create (the full chain) and a delete
    /// (no plugin matches), alternating; also collects the per-plugin call
    /// durations the runner reported.
    async fn time_pre(
        &self,
        request: &pb::RunPreOperationsRequest,
        calls: usize,
        plugins: usize,
    ) -> Result<PreTimings, String> {
        let mut empty_chain = Vec::with_capacity(calls);
        let mut full_chain = Vec::with_capacity(calls);
        let mut per_call = Vec::with_capacity(calls * plugins);
        let delete = pb::RunPreOperationsRequest {
            operation: StackOperation::Delete as i32,
            ..request.clone()
        };
        let mut client = PluginRunnerServiceClient::new(self.channel.clone())
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES);
        for round in 0..WARM_UP_CALLS + calls {
            for (message, expected_calls) in [(&delete, 0), (request, plugins)] {
                let started = Instant::now();
                let answer = client
                    .run_pre_operations(self.request(message.clone(), &["member"]))
                    .await
                    .map_err(|status| format!("RunPreOperations failed: {}", status.message()))?
                    .into_inner();
                let elapsed = started.elapsed();
                if !answer.allowed || answer.calls.len() != expected_calls {
                    return Err(format!(
                        "unexpected answer: allowed {} with {} calls ({})",
                        answer.allowed,
                        answer.calls.len(),
                        answer.reason
                    ));
                }
                if round < WARM_UP_CALLS {
                    continue;
                }
                if expected_calls == 0 {
                    empty_chain.push(elapsed);
                } else {
                    full_chain.push(elapsed);
                    per_call.extend(
                        answer
                            .calls
                            .iter()
                            .map(|call| Duration::from_micros(call.duration_us)),
                    );
                }
            }
        }
        Ok(PreTimings {
            empty_chain: figures(&mut empty_chain),
            full_chain: figures(&mut full_chain),
            per_call: figures(&mut per_call),
        })
    }

    async fn time_post(
        &self,
        request: &pb::RunPreOperationsRequest,
        calls: usize,
        plugins: usize,
    ) -> Result<Figures, String> {
        let post = pb::RunPostOperationsRequest {
            operation: request.operation,
            project_id: request.project_id.clone(),
            stack: request.stack.clone(),
            failed: false,
            reason: String::new(),
            plugins: (0..plugins)
                .map(|index| format!("plugin-{index}"))
                .collect(),
        };
        let mut samples = Vec::with_capacity(calls);
        let mut client = PluginRunnerServiceClient::new(self.channel.clone())
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES);
        for round in 0..WARM_UP_CALLS + calls {
            let started = Instant::now();
            client
                .run_post_operations(self.request(post.clone(), &["member"]))
                .await
                .map_err(|status| format!("RunPostOperations failed: {}", status.message()))?;
            if round >= WARM_UP_CALLS {
                samples.push(started.elapsed());
            }
        }
        Ok(figures(&mut samples))
    }
}
