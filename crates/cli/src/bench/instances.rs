//! `ember bench instances`: latency of the instance lock API and of
//! `GET /compute/v1/instances/{uuid}` with many instances in the database.
//!
//! The instances are inserted through the engine's store directly (1 000
//! per transaction, ACTIVE, project `demo`) into a fresh SQLite data
//! directory before Ember starts; then every call goes through the gateway
//! the way a client makes it (REST with `X-Auth-Token`, gRPC with a bearer
//! token), one at a time, on instances picked in a scattered order. Prints
//! figures; never passes or fails on time.

use std::time::{Duration, Instant};

use ember_engine::domain::instance::{Instance, InstanceStatus, NewInstance, PowerState};
use ember_engine::store::instances::{InstanceStore, SqlInstanceStore};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::instance_service_client::InstanceServiceClient;
use serde_json::json;

use super::summarize;
use crate::dev::{DEV_PROJECT, DevCredentials, RunningEmber};

const WARM_UP_CALLS: usize = 200;
const INSERT_BATCH: usize = 1000;
/// A prime, so stepping by it visits every index of the population once.
const SCATTER_STEP: usize = 7919;

pub async fn run(instance_count: usize, calls: usize) -> Result<(), String> {
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let (config, secrets) = crate::dev::ephemeral_config(data_dir.path());
    let database_url = config.engine(&secrets).database_url;

    let started = Instant::now();
    let uuids = seed(&database_url, instance_count).await?;
    println!(
        "{instance_count} instances inserted through the engine store (SQLite, {INSERT_BATCH} per transaction) in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let running = RunningEmber::start(config, secrets.clone()).await?;
    let credentials =
        DevCredentials::mint(running.gateway_addr, &secrets, Duration::from_secs(3600))?;
    let token = credentials.member.token.clone();
    let http = reqwest::Client::new();
    let base = format!("http://{}/compute/v1/instances", running.gateway_addr);
    let channel = super::connect(running.gateway_addr).await?;
    let mut grpc = InstanceServiceClient::new(channel)
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES);

    // Scattered picks: consecutive calls hit instances far apart.
    let picks = |offset: usize, count: usize| -> Vec<String> {
        (0..count)
            .map(|index| uuids[((offset + index) * SCATTER_STEP) % uuids.len()].to_string())
            .collect()
    };
    let measured = calls.min(uuids.len() / 2);
    let rest_get = |uuid: String| {
        let request = http
            .get(format!("{base}/{uuid}"))
            .header("X-Auth-Token", &token);
        expect_status(request, 200)
    };
    let rest_lock = |uuid: String, target: bool| {
        let request = http
            .put(format!("{base}/{uuid}/lock"))
            .header("X-Auth-Token", &token)
            .json(&json!({ "target": target }));
        expect_status(request, 202)
    };

    for uuid in picks(0, WARM_UP_CALLS) {
        rest_get(uuid).await?;
    }

    let mut rows = Vec::new();
    let mut samples = Vec::with_capacity(measured);
    for uuid in picks(WARM_UP_CALLS, measured) {
        let call_started = Instant::now();
        rest_get(uuid).await?;
        samples.push(call_started.elapsed());
    }
    rows.push(("REST GET /instances/{uuid}", summarize(&mut samples)));

    // Lock a set of unlocked instances, then unlock the same ones: every
    // call is a real state change (a read, a decision, a conditional write).
    let lock_targets = picks(WARM_UP_CALLS + measured, measured);
    let mut locks = Vec::with_capacity(measured);
    for uuid in &lock_targets {
        let call_started = Instant::now();
        rest_lock(uuid.clone(), true).await?;
        locks.push(call_started.elapsed());
    }
    let mut unlocks = Vec::with_capacity(measured);
    for uuid in &lock_targets {
        let call_started = Instant::now();
        rest_lock(uuid.clone(), false).await?;
        unlocks.push(call_started.elapsed());
    }
    rows.push(("REST PUT /lock {target: true}", summarize(&mut locks)));
    rows.push(("REST PUT /lock {target: false}", summarize(&mut unlocks)));

    let bearer: tonic::metadata::MetadataValue<tonic::metadata::Ascii> = format!("Bearer {token}")
        .parse()
        .map_err(|_| "token is not a valid header".to_owned())?;
    let mut gets = Vec::with_capacity(measured);
    for uuid in picks(0, measured) {
        let call_started = Instant::now();
        grpc.get_instance(with_token(pb::GetInstanceRequest { uuid }, &bearer))
            .await
            .map_err(|status| format!("GetInstance failed: {status}"))?;
        gets.push(call_started.elapsed());
    }
    let mut grpc_locks = Vec::with_capacity(measured);
    for uuid in &lock_targets {
        let call_started = Instant::now();
        let request = pb::LockInstanceRequest {
            uuid: uuid.clone(),
            reason: None,
            ..pb::LockInstanceRequest::default()
        };
        grpc.lock_instance(with_token(request, &bearer))
            .await
            .map_err(|status| format!("LockInstance failed: {status}"))?;
        grpc_locks.push(call_started.elapsed());
    }
    rows.push(("gRPC GetInstance", summarize(&mut gets)));
    rows.push(("gRPC LockInstance", summarize(&mut grpc_locks)));

    println!(
        "{measured} calls per row through the gateway, one at a time, after {WARM_UP_CALLS} warm-up calls (milliseconds)"
    );
    println!("{:<32} {:>8} {:>8} {:>8}", "call", "p50", "p90", "p99");
    for (call, summary) in rows {
        println!(
            "{call:<32} {:>8.2} {:>8.2} {:>8.2}",
            summary.median_us / 1e3,
            summary.p90_us / 1e3,
            summary.p99_us / 1e3
        );
    }
    running.stop().await
}

/// Inserts `count` ACTIVE instances of the dev project; returns their uuids.
async fn seed(database_url: &str, count: usize) -> Result<Vec<uuid::Uuid>, String> {
    let connection = ember_runtime::database::connect_and_migrate::<
        ember_engine::store::migrations::Migrator,
    >(database_url)
    .await
    .map_err(|error| error.to_string())?;
    let store = SqlInstanceStore::new(connection);
    let now = ember_runtime::time::now();
    let mut uuids = Vec::with_capacity(count);
    let mut batch = Vec::with_capacity(INSERT_BATCH);
    for index in 0..count {
        let new = NewInstance {
            name: format!("bench-{index}"),
            flavor: "m1.small".to_owned(),
            image: "debian-12".to_owned(),
            metadata: [("bench".to_owned(), "true".to_owned())].into(),
            workload: Default::default(),
            placement: Default::default(),
            delegation: None,
        };
        let offset = chrono::Duration::milliseconds(i64::try_from(index).unwrap_or(i64::MAX));
        let instance = Instance {
            status: InstanceStatus::Active,
            power_state: PowerState::On,
            ..Instance::new_building(DEV_PROJECT, "demo", new, now + offset)
                .map_err(|error| error.to_string())?
        };
        uuids.push(instance.uuid);
        batch.push(instance);
        if batch.len() == INSERT_BATCH || index + 1 == count {
            store
                .insert_instances(&batch)
                .await
                .map_err(|error| error.to_string())?;
            batch.clear();
        }
    }
    Ok(uuids)
}

/// A gRPC request carrying the bearer token.
fn with_token<T>(
    message: T,
    bearer: &tonic::metadata::MetadataValue<tonic::metadata::Ascii>,
) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", bearer.clone());
    request
}

/// Sends `request` and reads the whole answer (so the connection is reused).
async fn expect_status(request: reqwest::RequestBuilder, expected: u16) -> Result<(), String> {
    let response = request
        .send()
        .await
        .map_err(|error| format!("request failed: {error}"))?;
    let status = response.status().as_u16();
    let url = response.url().to_string();
    let body = response
        .bytes()
        .await
        .map_err(|error| format!("{url}: reading the answer failed: {error}"))?;
    if status == expected {
        Ok(())
    } else {
        Err(format!(
            "{url} answered {status} instead of {expected}: {}",
            String::from_utf8_lossy(&body)
        ))
    }
}
