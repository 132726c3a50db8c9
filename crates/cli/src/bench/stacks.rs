//! `ember bench stacks`: stack operations as a user sees them, through the
//! gateway — create then delete 100 independent resources, create a chain of
//! 20 dependent ones (wall time from the create call to the final state),
//! and the latency of showing one stack and listing 200. On the embedded
//! SQLite default, or on PostgreSQL with `--postgres URL` (a fresh schema).

use std::time::{Duration, Instant};

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::stack_service_client::StackServiceClient;
use tonic::transport::Channel;

use super::summarize;
use crate::dev::{DevCredentials, RunningEmber};

const GATEWAY_POLL: Duration = Duration::from_micros(500);

pub async fn run(runs: usize, postgres: Option<String>) -> Result<(), String> {
    let data_dir = tempfile::tempdir().map_err(|error| error.to_string())?;
    let (mut config, secrets) = crate::dev::ephemeral_config(data_dir.path());
    let schema = match &postgres {
        Some(url) => Some(create_schema(url).await?),
        None => None,
    };
    if let (Some(url), Some(schema)) = (&postgres, &schema) {
        let separator = if url.contains('?') { '&' } else { '?' };
        config.engine.database_url = format!("{url}{separator}options[search_path]={schema}");
    }
    let backend = if postgres.is_some() {
        "PostgreSQL"
    } else {
        "SQLite (embedded default)"
    };
    let running = RunningEmber::start(config, secrets.clone()).await?;
    let credentials =
        DevCredentials::mint(running.gateway_addr, &secrets, Duration::from_secs(3600))?;
    let result = measure(&running, &credentials, runs, backend).await;
    let stopped = running.stop().await;
    if let (Some(url), Some(schema)) = (&postgres, &schema) {
        drop_schema(url, schema).await;
    }
    result.and(stopped)
}

async fn measure(
    running: &RunningEmber,
    credentials: &DevCredentials,
    runs: usize,
    backend: &str,
) -> Result<(), String> {
    let channel = Channel::from_shared(format!("http://{}", running.gateway_addr))
        .map_err(|error| error.to_string())?
        .connect()
        .await
        .map_err(|error| error.to_string())?;
    let client = Stacks {
        channel: channel.clone(),
        client: StackServiceClient::new(channel),
        token: credentials.member.token.clone(),
    };
    println!("stack benchmarks on {backend}, through the gateway ({runs} runs each, milliseconds)");
    println!("{:<48} {:>10} {:>10}", "case", "median", "p99");

    let independent = template_of_independent_resources(100);
    let (mut creates, mut deletes) = (Vec::new(), Vec::new());
    for run in 0..runs {
        let name = format!("independent-{run}");
        let (stack_id, created) = client.create_and_wait(&name, &independent).await?;
        creates.push(created);
        deletes.push(client.delete_and_wait(&stack_id).await?);
    }
    print_row(
        "100 OS::Heat::None: create to CREATE_COMPLETE",
        &mut creates,
    );
    print_row(
        "100 OS::Heat::None: delete to DELETE_COMPLETE",
        &mut deletes,
    );

    let chain = template_of_chain(20);
    let mut chains = Vec::new();
    for run in 0..runs {
        let (stack_id, created) = client
            .create_and_wait(&format!("chain-{run}"), &chain)
            .await?;
        chains.push(created);
        client.delete_and_wait(&stack_id).await?;
    }
    print_row("chain of 20 OS::Heat::TestResource: create", &mut chains);

    // A chain of 5 lifecycle plugins around each create: their cost per call.
    let small = template_of_independent_resources(10);
    let mut without_plugins = Vec::new();
    for run in 0..runs {
        let (stack_id, created) = client
            .create_and_wait(&format!("no-plugins-{run}"), &small)
            .await?;
        without_plugins.push(created);
        client.delete_and_wait(&stack_id).await?;
    }
    let journal = ember_plugin_registry::testing::CallJournal::default();
    let mut plugins = Vec::new();
    for index in 0..5 {
        let plugin = ember_plugin_registry::testing::TestPlugin::start(
            &format!("bench-plugin-{index}"),
            ember_plugin_registry::testing::Behaviour::Allow,
            &journal,
        )
        .await
        .map_err(|error| error.to_string())?;
        let mut registration =
            tonic::Request::new(ember_proto::pluginregistry::v1::RegisterPluginRequest {
                name: plugin.name.clone(),
                endpoint: plugin.endpoint.clone(),
                ordinal: index,
                ..Default::default()
            });
        let header = format!("Bearer {}", credentials.admin.token)
            .parse()
            .map_err(|_| "token is not a valid header".to_owned())?;
        registration.metadata_mut().insert("authorization", header);
        ember_proto::pluginregistry::v1::plugin_registry_service_client::PluginRegistryServiceClient::new(
            client.channel.clone(),
        )
        .register_plugin(registration)
        .await
        .map_err(|status| format!("register plugin: {}", status.message()))?;
        plugins.push(plugin);
    }
    let mut with_plugins = Vec::new();
    for run in 0..runs {
        let (stack_id, created) = client
            .create_and_wait(&format!("plugins-{run}"), &small)
            .await?;
        with_plugins.push(created);
        client.delete_and_wait(&stack_id).await?;
    }
    let plain = summarize(&mut without_plugins);
    let chained = summarize(&mut with_plugins);
    print_row(
        "10 OS::Heat::None: create, no plugins",
        &mut without_plugins,
    );
    print_row("10 OS::Heat::None: create, 5 plugins", &mut with_plugins);
    println!(
        "{:<48} {:>10.2}",
        "  pre-operation overhead per plugin (median)",
        (chained.median_us - plain.median_us) / 5.0 / 1000.0
    );
    // The plugins stay registered (FAIL mode) and running for the rest.

    let single = template_of_independent_resources(1);
    let mut last = String::new();
    for index in 0..200 {
        let name = format!("listed-{index}");
        client.create_and_wait(&name, &single).await?;
        last = name;
    }
    let http = reqwest::Client::new();
    let base = format!("http://{}/orchestration/v1/demo", running.gateway_addr);
    let found = http
        .get(format!("{base}/stacks/{last}"))
        .header("X-Auth-Token", &credentials.member.token)
        .send()
        .await
        .map_err(|error| error.to_string())?;
    let show_url = format!("http://{}{}", running.gateway_addr, found.url().path());
    let list_url = format!("{base}/stacks");
    for (label, url) in [
        ("GET one stack (REST)", show_url),
        ("GET /stacks with 200 stacks (REST)", list_url),
    ] {
        let mut samples = Vec::new();
        for round in 0..(runs * 25).max(200) + 50 {
            let started = Instant::now();
            let response = http
                .get(&url)
                .header("X-Auth-Token", &credentials.member.token)
                .send()
                .await
                .map_err(|error| error.to_string())?;
            let status = response.status();
            response.bytes().await.map_err(|error| error.to_string())?;
            if !status.is_success() {
                return Err(format!("{label}: {url} answered {status}"));
            }
            if round >= 50 {
                samples.push(started.elapsed());
            }
        }
        print_row(label, &mut samples);
    }
    for plugin in plugins {
        plugin.stop().await;
    }
    Ok(())
}

fn print_row(label: &str, samples: &mut [Duration]) {
    let summary = summarize(samples);
    println!(
        "{label:<48} {:>10.2} {:>10.2}",
        summary.median_us / 1000.0,
        summary.p99_us / 1000.0
    );
}

struct Stacks {
    channel: Channel,
    client: StackServiceClient<Channel>,
    token: String,
}

impl Stacks {
    fn request<T>(&self, message: T) -> Result<tonic::Request<T>, String> {
        let mut request = tonic::Request::new(message);
        let header = format!("Bearer {}", self.token)
            .parse()
            .map_err(|_| "token is not a valid header".to_owned())?;
        request.metadata_mut().insert("authorization", header);
        Ok(request)
    }

    /// Creates a stack and polls (every 0.5 ms) until it is no longer in
    /// progress. Returns its id and the wall time.
    async fn create_and_wait(
        &self,
        name: &str,
        template: &str,
    ) -> Result<(String, Duration), String> {
        let started = Instant::now();
        let stack = self
            .client
            .clone()
            .create_stack(self.request(pb::CreateStackRequest {
                stack_name: name.to_owned(),
                template: template.to_owned(),
                ..Default::default()
            })?)
            .await
            .map_err(|status| format!("create {name}: {}", status.message()))?
            .into_inner();
        let status = self.wait(&stack.id).await?;
        let elapsed = started.elapsed();
        if status != "CREATE_COMPLETE" {
            return Err(format!("stack {name} ended {status}"));
        }
        Ok((stack.id, elapsed))
    }

    async fn delete_and_wait(&self, stack_id: &str) -> Result<Duration, String> {
        let started = Instant::now();
        self.client
            .clone()
            .delete_stack(self.request(pb::GetStackRequest {
                stack: stack_id.to_owned(),
            })?)
            .await
            .map_err(|status| format!("delete {stack_id}: {}", status.message()))?;
        let status = self.wait(stack_id).await?;
        let elapsed = started.elapsed();
        if status != "DELETE_COMPLETE" {
            return Err(format!("stack {stack_id} ended {status}"));
        }
        Ok(elapsed)
    }

    async fn wait(&self, stack_id: &str) -> Result<String, String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let stack = self
                .client
                .clone()
                .list_stacks(self.request(pb::ListStacksRequest::default())?)
                .await
                .map_err(|status| status.message().to_owned())?
                .into_inner()
                .stacks
                .into_iter()
                .find(|stack| stack.id == stack_id);
            let status = match stack {
                Some(stack) => stack.stack_status,
                // Deleted stacks leave the list: read it by id.
                None => {
                    self.client
                        .clone()
                        .get_stack(self.request(pb::GetStackRequest {
                            stack: stack_id.to_owned(),
                        })?)
                        .await
                        .map_err(|status| status.message().to_owned())?
                        .into_inner()
                        .stack_status
                }
            };
            if !status.ends_with("_IN_PROGRESS") {
                return Ok(status);
            }
            if Instant::now() > deadline {
                return Err(format!("stack {stack_id} still {status} after 60 s"));
            }
            tokio::time::sleep(GATEWAY_POLL).await;
        }
    }
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
