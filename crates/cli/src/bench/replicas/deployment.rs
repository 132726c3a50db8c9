//! The deployment one engine count runs on: lifecycle-hook, plugin-registry,
//! the engines on one database, and the gateway balancing over the engines
//! (see the parent module for why its engine channel is assembled here).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tonic::transport::Endpoint;

use crate::dev::{ServiceName, bind, serve_one};

/// How long the services may take to start answering.
const START_DEADLINE: Duration = Duration::from_secs(30);

/// Starts lifecycle-hook, plugin-registry, `engines` engines sharing the
/// database of `config` (the first migrates it before the others start),
/// and the gateway balancing over the engines. Returns the gateway's
/// address once its `/healthz` answers 200.
pub(super) async fn start(
    engines: usize,
    mut config: crate::config::EmberConfig,
    secrets: &crate::config::Secrets,
    shutdown: &CancellationToken,
    tasks: &mut JoinSet<(String, Result<(), String>)>,
) -> Result<SocketAddr, String> {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let lifecycle_hook = bind("lifecycle-hook", loopback).await?;
    let plugin_registry = bind("plugin-registry", loopback).await?;
    let gateway = bind("api-gateway", loopback).await?;
    let mut engine_listeners = Vec::with_capacity(engines);
    for _ in 0..engines {
        engine_listeners.push(bind("engine", loopback).await?);
    }
    let address = |listener: &TcpListener| {
        listener
            .local_addr()
            .map_err(|error| format!("cannot read a bound address: {error}"))
    };
    let gateway_addr = address(&gateway)?;
    let engine_addrs = engine_listeners
        .iter()
        .map(address)
        .collect::<Result<Vec<_>, _>>()?;
    let first_engine = *engine_addrs.first().ok_or("no engine to start")?;
    let lifecycle_hook_url = format!("http://{}", address(&lifecycle_hook)?);
    let plugin_registry_url = format!("http://{}", address(&plugin_registry)?);
    config.engine.plugin_registry_url = plugin_registry_url.clone();
    config.engine.lifecycle_hook_url = lifecycle_hook_url.clone();
    config.engine.public_url = format!("http://{gateway_addr}");
    // Deadline callbacks (unused by stacks) go to the first engine.
    config.lifecycle_hook.engine_url = format!("http://{first_engine}");
    config
        .lifecycle_hook
        .webhook_secret
        .get_or_insert_with(ember_runtime::auth::random_secret);
    // Every engine, as a deployment across hosts names them.
    config.gateway.engine_url = engine_addrs
        .iter()
        .map(|address| format!("http://{address}"))
        .collect::<Vec<_>>()
        .join(",");
    config.gateway.lifecycle_hook_url = lifecycle_hook_url;
    config.gateway.plugin_registry_url = plugin_registry_url;

    let mut spawn = |service: ServiceName, listener: TcpListener, label: String| {
        let config = config.clone();
        let secrets = secrets.clone();
        let shutdown = shutdown.clone();
        tasks.spawn(async move {
            let result = serve_one(service, &config, &secrets, listener, shutdown)
                .await
                .map_err(|error| error.to_string());
            (label, result)
        });
    };
    spawn(
        ServiceName::LifecycleHook,
        lifecycle_hook,
        "lifecycle-hook".to_owned(),
    );
    spawn(
        ServiceName::PluginRegistry,
        plugin_registry,
        "plugin-registry".to_owned(),
    );
    for (index, (listener, address)) in engine_listeners.into_iter().zip(&engine_addrs).enumerate()
    {
        spawn(
            ServiceName::Engine,
            listener,
            format!("engine {}", index + 1),
        );
        // The first engine migrates the fresh schema; the others start on
        // a migrated one, as replicas of a running deployment do.
        wait_for_serving(*address).await?;
    }

    let state = ember_api_gateway::GatewayState::new(&config.gateway(secrets), shutdown.clone())
        .await
        .map_err(|error| format!("api-gateway: {error}"))?;
    let router = ember_api_gateway::router(state);
    let stopped = shutdown.clone().cancelled_owned();
    tasks.spawn(async move {
        let result = axum::serve(gateway, router)
            .with_graceful_shutdown(stopped)
            .await
            .map_err(|error| format!("gateway server: {error}"));
        ("api-gateway".to_owned(), result)
    });
    wait_for_healthz(gateway_addr).await?;
    Ok(gateway_addr)
}

/// Polls an engine's gRPC health until SERVING (its migrations ran).
async fn wait_for_serving(address: SocketAddr) -> Result<(), String> {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    let deadline = Instant::now() + START_DEADLINE;
    let endpoint = Endpoint::from_shared(format!("http://{address}"))
        .map_err(|error| format!("{address}: {error}"))?
        .timeout(Duration::from_secs(1));
    loop {
        if let Ok(channel) = endpoint.connect().await
            && let Ok(answer) = HealthClient::new(channel)
                .check(HealthCheckRequest {
                    service: String::new(),
                })
                .await
            && answer.into_inner().status == ServingStatus::Serving as i32
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the engine on {address} was not serving within {} s",
                START_DEADLINE.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls the gateway's `/healthz` (which asks the services behind it)
/// until 200.
async fn wait_for_healthz(gateway: SocketAddr) -> Result<(), String> {
    let http = reqwest::Client::new();
    let url = format!("http://{gateway}/healthz");
    let deadline = Instant::now() + START_DEADLINE;
    loop {
        if let Ok(response) = http.get(&url).send().await
            && response.status().is_success()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{url} did not answer 200 within {} s",
                START_DEADLINE.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Stops every service and waits for them (at most 30 s); the first
/// failure of a service is returned.
pub(super) async fn stop(
    shutdown: CancellationToken,
    mut tasks: JoinSet<(String, Result<(), String>)>,
) -> Result<(), String> {
    shutdown.cancel();
    let drained = tokio::time::timeout(Duration::from_secs(30), async {
        let mut first_failure = None;
        while let Some(joined) = tasks.join_next().await {
            let failure = match joined {
                Ok((_, Ok(()))) => None,
                Ok((service, Err(error))) => Some(format!("{service}: {error}")),
                Err(error) => Some(format!("a service task failed: {error}")),
            };
            if let Some(failure) = failure {
                first_failure.get_or_insert(failure);
            }
        }
        first_failure.map_or(Ok(()), Err)
    })
    .await;
    drained.unwrap_or_else(|_| Err("the services did not stop within 30 s".to_owned()))
}
