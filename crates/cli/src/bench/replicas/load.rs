//! The clients: each creates a stack through the gateway's REST API, polls
//! it to CREATE_COMPLETE, reads which engine took its lease, deletes it and
//! polls it to DELETE_COMPLETE, again and again until the window ends.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use serde_json::{Value, json};

/// How long a stack may stay in progress before the benchmark gives up.
const STACK_DEADLINE: Duration = Duration::from_secs(120);

pub(super) fn none_template(resources: usize) -> Value {
    let resources: serde_json::Map<String, Value> = (0..resources)
        .map(|index| (format!("r{index}"), json!({"type": "OS::Heat::None"})))
        .collect();
    json!({"heat_template_version": "2021-04-16", "resources": resources})
}

/// What the clients of one window did.
#[derive(Default)]
pub(super) struct Window {
    pub(super) stacks: usize,
    /// Until the last client finished its last cycle.
    pub(super) elapsed: Duration,
    /// Creates per engine id, from the lease rows.
    pub(super) creates: BTreeMap<String, usize>,
    pub(super) latencies: Latencies,
}

/// Wall times the clients saw.
#[derive(Default, Clone)]
pub(super) struct Latencies {
    /// POST to CREATE_COMPLETE seen by a poll.
    pub(super) create: Vec<Duration>,
    /// The create call's answer (201).
    pub(super) post: Vec<Duration>,
    /// One status poll.
    pub(super) get: Vec<Duration>,
}

/// The clients' shared settings, and the engines' database for the lease
/// rows.
pub(super) struct Load {
    pub(super) gateway: String,
    pub(super) token: String,
    pub(super) project: String,
    pub(super) template: Value,
    pub(super) poll: Duration,
    pub(super) database: DatabaseConnection,
}

impl Load {
    /// `clients` clients create and delete stacks until `duration` has
    /// passed (a cycle under way then is finished and counted).
    pub(super) async fn run(
        &self,
        prefix: &str,
        clients: usize,
        duration: Duration,
    ) -> Result<Window, String> {
        let started = Instant::now();
        let deadline = started + duration;
        let workers = (0..clients).map(|client| async move {
            let http = reqwest::Client::builder()
                .pool_max_idle_per_host(1)
                .tcp_nodelay(true)
                .build()
                .map_err(|error| error.to_string())?;
            let mut creates: BTreeMap<String, usize> = BTreeMap::new();
            let mut latencies = Latencies::default();
            let mut done = 0usize;
            while Instant::now() < deadline {
                let name = format!("{prefix}-{client}-{done}");
                let engine = self.cycle(&http, &name, &mut latencies).await?;
                *creates.entry(engine).or_default() += 1;
                done += 1;
            }
            Ok::<_, String>((done, creates, latencies))
        });
        let mut window = Window::default();
        for finished in futures::future::join_all(workers).await {
            let (done, by_engine, latencies) = finished?;
            window.stacks += done;
            for (engine, count) in by_engine {
                *window.creates.entry(engine).or_default() += count;
            }
            window.latencies.create.extend(latencies.create);
            window.latencies.post.extend(latencies.post);
            window.latencies.get.extend(latencies.get);
        }
        window.elapsed = started.elapsed();
        Ok(window)
    }

    /// Creates one stack, waits for CREATE_COMPLETE, reads which engine
    /// took its lease, deletes it and waits for DELETE_COMPLETE.
    async fn cycle(
        &self,
        http: &reqwest::Client,
        name: &str,
        latencies: &mut Latencies,
    ) -> Result<String, String> {
        let stacks = format!("{}/orchestration/v1/{}/stacks", self.gateway, self.project);
        let started = Instant::now();
        let (status, answer) = self
            .call(
                http,
                reqwest::Method::POST,
                &stacks,
                Some(json!({"stack_name": name, "template": self.template})),
            )
            .await?;
        latencies.post.push(started.elapsed());
        if status != 201 {
            return Err(format!("create {name} answered {status}: {answer}"));
        }
        let id = answer["stack"]["id"]
            .as_str()
            .ok_or_else(|| format!("create {name}: no id in {answer}"))?
            .to_owned();
        let url = format!("{stacks}/{name}/{id}");
        self.wait_for(http, &url, name, "CREATE_COMPLETE", latencies)
            .await?;
        latencies.create.push(started.elapsed());
        let engine = self.lease_holder(&id).await?;
        let (status, answer) = self.call(http, reqwest::Method::DELETE, &url, None).await?;
        if status != 204 {
            return Err(format!("delete {name} answered {status}: {answer}"));
        }
        self.wait_for(http, &url, name, "DELETE_COMPLETE", latencies)
            .await?;
        Ok(engine)
    }

    async fn call(
        &self,
        http: &reqwest::Client,
        method: reqwest::Method,
        url: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value), String> {
        crate::bench::rest_call(http, &self.token, method, url, body).await
    }

    /// Polls the stack until it is no longer in progress; it must end
    /// `expected` (a deleted stack may also answer 404).
    async fn wait_for(
        &self,
        http: &reqwest::Client,
        url: &str,
        name: &str,
        expected: &str,
        latencies: &mut Latencies,
    ) -> Result<(), String> {
        let deadline = Instant::now() + STACK_DEADLINE;
        loop {
            tokio::time::sleep(self.poll).await;
            let asked = Instant::now();
            let (status, answer) = self.call(http, reqwest::Method::GET, url, None).await?;
            latencies.get.push(asked.elapsed());
            if status == 404 && expected == "DELETE_COMPLETE" {
                return Ok(());
            }
            let stack_status = answer["stack"]["stack_status"].as_str().unwrap_or_default();
            if status == 200 && !stack_status.is_empty() && !stack_status.ends_with("_IN_PROGRESS")
            {
                return if stack_status == expected {
                    Ok(())
                } else {
                    Err(format!(
                        "stack {name} ended {stack_status}, not {expected}: {}",
                        answer["stack"]["stack_status_reason"]
                    ))
                };
            }
            if status != 200 {
                return Err(format!("GET {url} answered {status}: {answer}"));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "stack {name} still {stack_status} after {} s",
                    STACK_DEADLINE.as_secs()
                ));
            }
        }
    }

    /// The engine whose lease the stack's last operation ran under.
    async fn lease_holder(&self, stack_id: &str) -> Result<String, String> {
        let stack_id = uuid::Uuid::parse_str(stack_id)
            .map_err(|error| format!("stack id {stack_id:?}: {error}"))?;
        let row = self
            .database
            .query_one_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "SELECT engine_id::text AS engine FROM stack_leases WHERE stack_id = $1",
                [stack_id.into()],
            ))
            .await
            .map_err(|error| format!("reading the lease of stack {stack_id}: {error}"))?
            .ok_or_else(|| format!("stack {stack_id} has no lease row"))?;
        row.try_get::<String>("", "engine")
            .map_err(|error| format!("reading the lease of stack {stack_id}: {error}"))
    }

    /// Deletes per engine: every stack's lease row names the engine of its
    /// last operation, its delete.
    pub(super) async fn deletes_by_engine(&self) -> Result<BTreeMap<String, usize>, String> {
        let rows = self
            .database
            .query_all_raw(Statement::from_string(
                DbBackend::Postgres,
                "SELECT engine_id::text AS engine, count(*) AS deletes FROM stack_leases \
                 WHERE operation = 'DELETE' AND stack_id IN \
                 (SELECT id FROM stacks WHERE name LIKE 'bench-%') GROUP BY engine_id",
            ))
            .await
            .map_err(|error| format!("reading the lease rows: {error}"))?;
        let mut deletes = BTreeMap::new();
        for row in rows {
            let engine: String = row
                .try_get("", "engine")
                .map_err(|error| format!("reading the lease rows: {error}"))?;
            let count: i64 = row
                .try_get("", "deletes")
                .map_err(|error| format!("reading the lease rows: {error}"))?;
            deletes.insert(engine, usize::try_from(count).unwrap_or(0));
        }
        Ok(deletes)
    }
}
