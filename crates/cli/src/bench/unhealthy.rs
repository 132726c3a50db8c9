//! `ember bench unhealthy`: mark unhealthy and scaling as a user sees them,
//! through the gateway's gRPC services on the embedded SQLite default —
//! one member of a 100-member AutoScalingGroup marked unhealthy then the
//! stack updated with the same template (wall time from the update call to
//! UPDATE_COMPLETE; only that member is replaced), and a scaling policy
//! signal adding 10 members, then one removing 10 (wall time from the
//! signal to the group's UPDATE_COMPLETE at its new size).

use std::time::{Duration, Instant};

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::resource_service_client::ResourceServiceClient;
use ember_proto::engine::v1::stack_service_client::StackServiceClient;
use serde_json::json;
use tonic::transport::Channel;

use super::summarize;
use crate::dev::{DevCredentials, RunningEmber};

const POLL: Duration = Duration::from_micros(500);
const DEADLINE: Duration = Duration::from_secs(120);

pub async fn run(runs: usize, members: usize) -> Result<(), String> {
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let (config, secrets) = crate::dev::ephemeral_config(data_dir.path());
    let running = RunningEmber::start(config, secrets.clone()).await?;
    let credentials =
        DevCredentials::mint(running.gateway_addr, &secrets, Duration::from_secs(3600))?;
    let result = measure(&running, &credentials, runs, members).await;
    let stopped = running.stop().await;
    result.and(stopped)
}

fn template(members: usize, runs: usize) -> String {
    let policy = |adjustment: i64| {
        json!({
            "type": "OS::Heat::ScalingPolicy",
            "properties": {
                "auto_scaling_group_id": {"get_resource": "asg"},
                "adjustment_type": "change_in_capacity",
                "scaling_adjustment": adjustment,
            },
        })
    };
    json!({
        "heat_template_version": "2021-04-16",
        "resources": {
            "asg": {
                "type": "OS::Heat::AutoScalingGroup",
                "properties": {
                    "min_size": 1,
                    "max_size": members + 10 * runs,
                    "desired_capacity": members,
                    "resource": {"type": "OS::Heat::None"},
                },
            },
            "grow": policy(10),
            "shrink": policy(-10),
        },
    })
    .to_string()
}

struct Bench {
    stacks: StackServiceClient<Channel>,
    resources: ResourceServiceClient<Channel>,
    token: String,
}

impl Bench {
    fn request<T>(&self, message: T) -> Result<tonic::Request<T>, String> {
        let mut request = tonic::Request::new(message);
        let header = format!("Bearer {}", self.token)
            .parse()
            .map_err(|_| "token is not a valid header".to_owned())?;
        request.metadata_mut().insert("authorization", header);
        Ok(request)
    }

    /// Polls the stack until it leaves IN_PROGRESS; returns its status.
    async fn settle(&self, stack: &str) -> Result<String, String> {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let found = self
                .stacks
                .clone()
                .get_stack(self.request(pb::GetStackRequest {
                    stack: stack.to_owned(),
                })?)
                .await
                .map_err(|status| format!("get {stack}: {}", status.message()))?
                .into_inner();
            if !found.stack_status.ends_with("_IN_PROGRESS") {
                return Ok(found.stack_status);
            }
            if Instant::now() > deadline {
                return Err(format!("{stack} still {}", found.stack_status));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    async fn group(&self, stack: &str) -> Result<pb::Resource, String> {
        Ok(self
            .resources
            .clone()
            .get_resource(self.request(pb::GetResourceRequest {
                stack: stack.to_owned(),
                resource_name: "asg".to_owned(),
                attributes: vec!["current_size".to_owned()],
            })?)
            .await
            .map_err(|status| format!("get the group: {}", status.message()))?
            .into_inner())
    }

    /// Polls the group until it settles at `size` members.
    async fn group_at(&self, stack: &str, size: usize) -> Result<(), String> {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let group = self.group(stack).await?;
            let current = group
                .attributes
                .as_ref()
                .and_then(|attributes| attributes.fields.get("current_size"))
                .and_then(|value| match value.kind {
                    Some(prost_types::value::Kind::NumberValue(number)) => Some(number),
                    _ => None,
                });
            if group.resource_status != "UPDATE_IN_PROGRESS" && current == Some(size as f64) {
                return Ok(());
            }
            if group.resource_status.ends_with("_FAILED") {
                return Err(format!(
                    "the group failed: {}",
                    group.resource_status_reason
                ));
            }
            if Instant::now() > deadline {
                return Err(format!("the group never reached {size} members"));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

async fn measure(
    running: &RunningEmber,
    credentials: &DevCredentials,
    runs: usize,
    members: usize,
) -> Result<(), String> {
    let channel = Channel::from_shared(format!("http://{}", running.gateway_addr))
        .map_err(|error| error.to_string())?
        .connect()
        .await
        .map_err(|error| error.to_string())?;
    let bench = Bench {
        stacks: StackServiceClient::new(channel.clone())
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES),
        resources: ResourceServiceClient::new(channel)
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES),
        token: credentials.member.token.clone(),
    };
    println!(
        "mark unhealthy and scaling on SQLite (embedded default), through the gateway, {members}-member AutoScalingGroup of OS::Heat::None ({runs} runs, milliseconds)"
    );
    let started = Instant::now();
    let created = bench
        .stacks
        .clone()
        .create_stack(bench.request(pb::CreateStackRequest {
            stack_name: "fleet".to_owned(),
            template: template(members, runs),
            ..Default::default()
        })?)
        .await
        .map_err(|status| format!("create: {}", status.message()))?
        .into_inner();
    let status = bench.settle(&created.id).await?;
    if status != "CREATE_COMPLETE" {
        return Err(format!("the stack ended {status}"));
    }
    println!(
        "{:<52} {:>10.2}",
        format!("create with {members} members (once)"),
        started.elapsed().as_secs_f64() * 1e3
    );
    let nested = bench.group(&created.id).await?.physical_resource_id;
    println!("{:<52} {:>10} {:>10}", "case", "median", "p99");

    let (mut marks, mut updates) = (Vec::new(), Vec::new());
    for run in 0..runs {
        let member = (run * 7) % members;
        let started = Instant::now();
        bench
            .resources
            .clone()
            .mark_unhealthy(bench.request(pb::MarkUnhealthyRequest {
                stack: nested.clone(),
                resource: member.to_string(),
                mark_unhealthy: true,
                resource_status_reason: "bench".to_owned(),
            })?)
            .await
            .map_err(|status| format!("mark {member}: {}", status.message()))?;
        marks.push(started.elapsed());
        let started = Instant::now();
        bench
            .stacks
            .clone()
            .update_stack(bench.request(pb::UpdateStackRequest {
                stack: created.id.clone(),
                existing: true,
                ..Default::default()
            })?)
            .await
            .map_err(|status| format!("update: {}", status.message()))?;
        let status = bench.settle(&created.id).await?;
        if status != "UPDATE_COMPLETE" {
            return Err(format!("the update ended {status}"));
        }
        updates.push(started.elapsed());
    }
    print_row("MarkUnhealthy of one member (gRPC call)", &mut marks);
    print_row(
        "update to UPDATE_COMPLETE (1 of 100 replaced)",
        &mut updates,
    );

    let (mut grows, mut shrinks) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        for (policy, size, samples) in [
            ("grow", members + 10, &mut grows),
            ("shrink", members, &mut shrinks),
        ] {
            let started = Instant::now();
            bench
                .resources
                .clone()
                .signal(bench.request(pb::SignalResourceRequest {
                    stack: created.id.clone(),
                    resource: policy.to_owned(),
                    details: None,
                    signal_token: String::new(),
                })?)
                .await
                .map_err(|status| format!("signal {policy}: {}", status.message()))?;
            bench.group_at(&created.id, size).await?;
            samples.push(started.elapsed());
        }
    }
    print_row("signal +10 members to UPDATE_COMPLETE", &mut grows);
    print_row("signal -10 members to UPDATE_COMPLETE", &mut shrinks);
    Ok(())
}

fn print_row(label: &str, samples: &mut [Duration]) {
    let summary = summarize(samples);
    println!(
        "{label:<52} {:>10.2} {:>10.2}",
        summary.median_us / 1000.0,
        summary.p99_us / 1000.0
    );
}
