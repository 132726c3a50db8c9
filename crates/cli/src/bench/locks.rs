//! `ember bench locks`: the maintenance lock at scale — lock, then unlock, a
//! stack of 10 nested stacks × 100 resources (time from the request to
//! LOCK_COMPLETE / UNLOCK_COMPLETE, through the gateway), and the cost of
//! the lock check every operation makes (the pure allowed-action decision).

use std::time::{Duration, Instant};

use ember_engine::domain::admission::{Subject, admit};
use ember_engine::domain::{ActionStatus, LockLevel, MaintenanceLock, Stack, StackAction};
use ember_engine::stacks::{StackCaller, StackOperation};
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::stack_service_client::StackServiceClient;
use tonic::transport::Channel;

use super::summarize;
use crate::dev::{DevCredentials, RunningEmber};

pub async fn run(runs: usize) -> Result<(), String> {
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let (config, secrets) = crate::dev::ephemeral_config(data_dir.path());
    let running = RunningEmber::start(config, secrets.clone()).await?;
    let credentials =
        DevCredentials::mint(running.gateway_addr, &secrets, Duration::from_secs(3600))?;
    let result = measure(&running, &credentials.member.token, runs).await;
    let stopped = running.stop().await;
    result.and(stopped)
}

fn request<T>(token: &str, message: T) -> Result<tonic::Request<T>, String> {
    let mut request = tonic::Request::new(message);
    let header = format!("Bearer {token}")
        .parse()
        .map_err(|_| "token is not a valid header".to_owned())?;
    request.metadata_mut().insert("authorization", header);
    Ok(request)
}

async fn wait_for(
    client: &StackServiceClient<Channel>,
    token: &str,
    expected: &str,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let stacks = client
            .clone()
            .list_stacks(request(
                token,
                pb::ListStacksRequest {
                    name: "big".into(),
                    ..Default::default()
                },
            )?)
            .await
            .map_err(|status| status.message().to_owned())?
            .into_inner()
            .stacks;
        let status = stacks
            .first()
            .map(|stack| stack.stack_status.clone())
            .unwrap_or_default();
        if status == expected {
            return Ok(());
        }
        if !status.ends_with("IN_PROGRESS") && !status.is_empty() {
            return Err(format!("stack big ended {status}, not {expected}"));
        }
        if Instant::now() > deadline {
            return Err(format!("stack big still {status}"));
        }
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
}

async fn measure(running: &RunningEmber, token: &str, runs: usize) -> Result<(), String> {
    let channel = Channel::from_shared(format!("http://{}", running.gateway_addr))
        .map_err(|error| error.to_string())?
        .connect()
        .await
        .map_err(|error| error.to_string())?;
    let client = StackServiceClient::new(channel)
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES);
    let child = super::stacks::template_of_independent_resources(100);
    let mut parent = String::from("heat_template_version: 2021-04-16\nresources:\n");
    for index in 0..10 {
        parent.push_str(&format!("  tier{index}: {{type: child.yaml}}\n"));
    }
    let create = pb::CreateStackRequest {
        stack_name: "big".into(),
        template: parent,
        files: [("child.yaml".to_owned(), child)].into_iter().collect(),
        ..Default::default()
    };
    client
        .clone()
        .create_stack(request(token, create)?)
        .await
        .map_err(|status| status.message().to_owned())?;
    wait_for(&client, token, "CREATE_COMPLETE").await?;

    let (mut locks, mut unlocks) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let started = Instant::now();
        client
            .clone()
            .lock_stack(request(
                token,
                pb::LockStackRequest {
                    stack: "big".into(),
                    level: "all".into(),
                    reason: String::new(),
                    ..pb::LockStackRequest::default()
                },
            )?)
            .await
            .map_err(|status| status.message().to_owned())?;
        wait_for(&client, token, "LOCK_COMPLETE").await?;
        locks.push(started.elapsed());
        let started = Instant::now();
        client
            .clone()
            .unlock_stack(request(
                token,
                pb::GetStackRequest {
                    stack: "big".into(),
                },
            )?)
            .await
            .map_err(|status| status.message().to_owned())?;
        wait_for(&client, token, "UNLOCK_COMPLETE").await?;
        unlocks.push(started.elapsed());
    }
    println!(
        "maintenance lock of 10 nested stacks x 100 resources, through the gateway ({runs} runs, milliseconds)"
    );
    println!("{:<44} {:>10} {:>10}", "case", "median", "p99");
    for (label, samples) in [
        ("lock to LOCK_COMPLETE", &mut locks),
        ("unlock to UNLOCK_COMPLETE", &mut unlocks),
    ] {
        let summary = summarize(samples);
        println!(
            "{label:<44} {:>10.2} {:>10.2}",
            summary.median_us / 1000.0,
            summary.p99_us / 1000.0
        );
    }

    // The check every operation makes before it starts.
    let now = ember_runtime::time::now();
    let mut stack = Stack {
        status: ActionStatus::Complete,
        ..Stack::starting_create(uuid::Uuid::new_v4(), "web", "demo", "demo", now)
    };
    let iterations = 1_000_000u32;
    for (label, locked) in [
        ("lock check, unlocked stack (allowed)", false),
        ("lock check, locked stack (refused)", true),
    ] {
        if locked {
            stack.action = StackAction::Lock;
            stack.maintenance_lock = Some(MaintenanceLock {
                level: LockLevel::All,
                locked_by_user: "demo".into(),
                locked_by_admin: false,
                locked_at: now,
                reason: Some("maintenance".into()),
                expires_at: None,
            });
        }
        let caller = ember_runtime::Identity::new("demo", "demo", vec!["member".into()]);
        let started = Instant::now();
        let mut refused = 0u32;
        for _ in 0..iterations {
            if admit(Subject::Stack {
                stack: std::hint::black_box(&stack),
                ancestors: &[],
                operation: std::hint::black_box(StackOperation::Update),
                caller: StackCaller::User(&caller),
            })
            .is_err()
            {
                refused += 1;
            }
        }
        let per_call = started.elapsed().as_secs_f64() * 1e9 / f64::from(iterations);
        println!("{label:<44} {per_call:>9.0} ns per check ({refused} refused)");
    }
    Ok(())
}
