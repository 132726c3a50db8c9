//! `ember bench heat`: the Heat-native paths users wait on.
//!
//! - 50 `OS::Heat::WaitCondition`s, each on its own handle, signalled by 50
//!   concurrent `curl` processes (the handles' own `curl_cli`): the time
//!   from the last signal's answer to CREATE_COMPLETE, and from the first
//!   signal sent;
//! - an agent's metadata poll (`GET /software_deployments/metadata/{server}`)
//!   with 1,000 deployments stored: p50/p99 for a server holding 10 of them
//!   and for one holding 100.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::summarize;
use crate::dev::{DevCredentials, RunningEmber};

pub async fn run(conditions: usize, deployments: usize, polls: usize) -> Result<(), String> {
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let (config, secrets) = crate::dev::ephemeral_config(data_dir.path());
    let running = RunningEmber::start(config, secrets.clone()).await?;
    let credentials =
        DevCredentials::mint(running.gateway_addr, &secrets, Duration::from_secs(3600))?;
    let client = Client {
        http: reqwest::Client::new(),
        base: format!("http://{}/orchestration/v1/demo", running.gateway_addr),
        token: credentials.member.token.clone(),
    };
    wait_conditions(&client, conditions).await?;
    metadata_polls(&client, deployments, polls).await?;
    running.stop().await
}

struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Client {
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, String> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("x-auth-token", &self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.map_err(|error| error.to_string())?;
        let status = response.status();
        let text = response.text().await.map_err(|error| error.to_string())?;
        if !status.is_success() {
            return Err(format!("{path}: {status} {text}"));
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

async fn wait_conditions(client: &Client, count: usize) -> Result<(), String> {
    let mut resources = serde_json::Map::new();
    let mut outputs = serde_json::Map::new();
    for index in 0..count {
        resources.insert(
            format!("handle_{index}"),
            json!({"type": "OS::Heat::WaitConditionHandle"}),
        );
        resources.insert(
            format!("wait_{index}"),
            json!({"type": "OS::Heat::WaitCondition",
                   "properties": {"handle": {"get_resource": format!("handle_{index}")}, "timeout": 120}}),
        );
        outputs.insert(
            format!("curl_{index}"),
            json!({"value": {"get_attr": [format!("handle_{index}"), "curl_cli"]}}),
        );
    }
    let template =
        json!({"heat_template_version": "2021-04-16", "resources": resources, "outputs": outputs});
    let created = client
        .send(
            reqwest::Method::POST,
            "/stacks",
            Some(json!({"stack_name": "waiting", "template": template})),
        )
        .await?;
    let id = created["stack"]["id"]
        .as_str()
        .ok_or("no stack id")?
        .to_owned();
    let stack = format!("/stacks/waiting/{id}");
    // Every handle made: their curl commands are known.
    let mut commands = Vec::with_capacity(count);
    for index in 0..count {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let output = client
                .send(
                    reqwest::Method::GET,
                    &format!("{stack}/outputs/curl_{index}"),
                    None,
                )
                .await?;
            if let Some(command) = output["output"]["output_value"].as_str() {
                commands.push(command.to_owned());
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("handle_{index} never got its curl_cli"));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let first_sent = Instant::now();
    let mut curls = tokio::task::JoinSet::new();
    for command in commands {
        curls.spawn(async move {
            let output = tokio::process::Command::new("sh")
                .arg("-c")
                .arg(format!("{command} --data-binary '{{\"status\": \"SUCCESS\", \"reason\": \"bench\"}}' -s -o /dev/null -w '%{{http_code}}'"))
                .output()
                .await
                .map_err(|error| format!("cannot run curl: {error}"))?;
            let code = String::from_utf8_lossy(&output.stdout).into_owned();
            if code.trim() != "200" {
                return Err(format!("a signal answered {code}: {}", String::from_utf8_lossy(&output.stderr)));
            }
            Ok(Instant::now())
        });
    }
    let mut last_answered = first_sent;
    while let Some(joined) = curls.join_next().await {
        let answered = joined.map_err(|error| error.to_string())??;
        last_answered = last_answered.max(answered);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let completed = loop {
        let shown = client.send(reqwest::Method::GET, &stack, None).await?;
        match shown["stack"]["stack_status"].as_str() {
            Some("CREATE_COMPLETE") => break Instant::now(),
            Some(status) if status.ends_with("FAILED") => {
                return Err(format!(
                    "the stack ended {status}: {}",
                    shown["stack"]["stack_status_reason"]
                ));
            }
            _ if Instant::now() > deadline => return Err("the stack never completed".to_owned()),
            _ => tokio::time::sleep(Duration::from_micros(500)).await,
        }
    };
    println!(
        "heat: {count} WaitConditions, one handle each, signalled by {count} concurrent curl processes"
    );
    println!(
        "  last signal answered → CREATE_COMPLETE   {:8.1} ms",
        completed.duration_since(last_answered).as_secs_f64() * 1e3
    );
    println!(
        "  first signal sent → CREATE_COMPLETE      {:8.1} ms   (all {count} curls, process start included)",
        completed.duration_since(first_sent).as_secs_f64() * 1e3
    );
    client.send(reqwest::Method::DELETE, &stack, None).await?;
    Ok(())
}

async fn metadata_polls(client: &Client, deployments: usize, polls: usize) -> Result<(), String> {
    let config = client
        .send(
            reqwest::Method::POST,
            "/software_configs",
            Some(
                json!({"name": "bench", "group": "script", "config": "#!/bin/sh\ntrue",
                        "inputs": [{"name": "port"}], "outputs": [{"name": "endpoint"}]}),
            ),
        )
        .await?;
    let config_id = config["software_config"]["id"]
        .as_str()
        .ok_or("no config id")?
        .to_owned();
    // Server "busy" holds 100 deployments; the rest spread 10 per server.
    let started = Instant::now();
    for index in 0..deployments {
        let server = if index < 100 {
            "busy".to_owned()
        } else {
            format!("server-{}", index / 10)
        };
        client
            .send(
                reqwest::Method::POST,
                "/software_deployments",
                Some(json!({"config_id": config_id, "server_id": server,
                            "input_values": {"port": index}, "action": "CREATE",
                            "status": "IN_PROGRESS"})),
            )
            .await?;
    }
    let stored = started.elapsed();
    println!(
        "heat: GET /software_deployments/metadata/{{server}} with {deployments} deployments stored ({:.1} s to create them over REST)",
        stored.as_secs_f64()
    );
    for (server, holds) in [("server-50", 10), ("busy", 100)] {
        let path = format!("/software_deployments/metadata/{server}");
        let mut samples = Vec::with_capacity(polls);
        for round in 0..polls + 50 {
            let started = Instant::now();
            let metadata = client.send(reqwest::Method::GET, &path, None).await?;
            if round >= 50 {
                samples.push(started.elapsed());
            }
            if round == 0 {
                let found = metadata["metadata"].as_array().map_or(0, Vec::len);
                if found != holds {
                    return Err(format!("{server} has {found} configs, expected {holds}"));
                }
            }
        }
        let summary = summarize(&mut samples);
        println!(
            "  a server with {holds:>3} deployments: p50 {:6.2} ms   p99 {:6.2} ms   ({polls} polls)",
            summary.median_us / 1000.0,
            summary.p99_us / 1000.0
        );
    }
    Ok(())
}
