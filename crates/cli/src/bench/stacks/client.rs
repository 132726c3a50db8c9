//! The stacks benchmark's client: Heat's REST API through the gateway, one
//! keep-alive connection per client, as python-heatclient or a script
//! would call it. Waiting is polling the stack's status.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::GATEWAY_POLL;

/// A stack the benchmark made: its name and id, for its canonical URL.
#[derive(Debug, Clone)]
pub struct StackRef {
    name: String,
    id: String,
}

impl StackRef {
    pub fn id(&self) -> &str {
        &self.id
    }
}

pub struct RestStacks {
    http: reqwest::Client,
    pub base: String,
    token: String,
    /// How long a waiting client sleeps before its second status read…
    poll: Duration,
    /// …and at most between two later ones (each pause doubles up to it).
    poll_max: Duration,
    /// Status reads made while waiting.
    polls: AtomicU64,
}

impl RestStacks {
    pub fn new(gateway: SocketAddr, token: &str) -> RestStacks {
        RestStacks {
            // Idle connections kept as a requests.Session keeps them (up to
            // 10): a request sent before the previous response's connection
            // is back in the pool opens another, and with room for only one
            // idle the spare was closed again — a new connection every few
            // dozen requests.
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(10)
                .tcp_nodelay(true)
                .build()
                .unwrap_or_default(),
            base: format!("http://{gateway}/orchestration/v1/demo"),
            token: token.to_owned(),
            poll: GATEWAY_POLL,
            poll_max: GATEWAY_POLL,
            polls: AtomicU64::new(0),
        }
    }

    /// The same client, waiting `poll` between two status reads.
    pub fn polling_every(mut self, poll: Duration) -> RestStacks {
        self.poll = poll;
        self.poll_max = poll;
        self
    }

    /// The same client, waiting `first` after its first status read and
    /// twice as long after each later one, up to `most` (a waiter's
    /// exponential backoff).
    pub fn polling_backoff(mut self, first: Duration, most: Duration) -> RestStacks {
        self.poll = first;
        self.poll_max = most.max(first);
        self
    }

    /// Status reads made while waiting, so far.
    pub fn polls(&self) -> u64 {
        self.polls.load(Ordering::Relaxed)
    }

    pub fn stack_url(&self, stack: &StackRef) -> String {
        format!("{}/stacks/{}/{}", self.base, stack.name, stack.id)
    }

    async fn call(
        &self,
        method: reqwest::Method,
        url: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value), String> {
        crate::bench::rest_call(&self.http, &self.token, method, url, body).await
    }

    async fn expect(
        &self,
        method: reqwest::Method,
        url: &str,
        body: Option<Value>,
        expected: u16,
    ) -> Result<Value, String> {
        let (status, answer) = self.call(method.clone(), url, body).await?;
        if status != expected {
            return Err(format!(
                "{method} {url} answered {status} (expected {expected}): {answer}"
            ));
        }
        Ok(answer)
    }

    /// A GET that must succeed; the body is read and dropped.
    pub async fn get_ok(&self, url: &str) -> Result<(), String> {
        let response = self
            .http
            .get(url)
            .header("X-Auth-Token", &self.token)
            .send()
            .await
            .map_err(|error| format!("GET {url}: {error}"))?;
        let status = response.status();
        response
            .bytes()
            .await
            .map_err(|error| format!("GET {url}: {error}"))?;
        if !status.is_success() {
            return Err(format!("GET {url} answered {status}"));
        }
        Ok(())
    }

    /// Creates a stack (`template` is YAML text, as clients send files) and
    /// waits until it is no longer in progress: its reference and the wall
    /// time from the call to CREATE_COMPLETE.
    pub async fn create_and_wait(
        &self,
        name: &str,
        template: &str,
    ) -> Result<(StackRef, Duration), String> {
        let started = Instant::now();
        let answer = self
            .expect(
                reqwest::Method::POST,
                &format!("{}/stacks", self.base),
                Some(json!({"stack_name": name, "template": template})),
                201,
            )
            .await?;
        let id = answer["stack"]["id"]
            .as_str()
            .ok_or_else(|| format!("create {name}: no id in {answer}"))?;
        let stack = StackRef {
            name: name.to_owned(),
            id: id.to_owned(),
        };
        self.wait_for(&stack, "CREATE_COMPLETE").await?;
        Ok((stack, started.elapsed()))
    }

    pub async fn delete_and_wait(&self, stack: &StackRef) -> Result<Duration, String> {
        let started = Instant::now();
        self.expect(reqwest::Method::DELETE, &self.stack_url(stack), None, 204)
            .await?;
        self.wait_for(stack, "DELETE_COMPLETE").await?;
        Ok(started.elapsed())
    }

    /// Marks `resource` unhealthy, then updates the stack with its own
    /// template (PATCH, `existing`): the time until UPDATE_COMPLETE.
    pub async fn mark_unhealthy_and_update(
        &self,
        stack: &StackRef,
        resource: &str,
    ) -> Result<Duration, String> {
        let started = Instant::now();
        self.expect(
            reqwest::Method::PATCH,
            &format!("{}/resources/{resource}", self.stack_url(stack)),
            Some(json!({"mark_unhealthy": true, "resource_status_reason": "bench"})),
            200,
        )
        .await?;
        self.expect(
            reqwest::Method::PATCH,
            &self.stack_url(stack),
            Some(json!({})),
            202,
        )
        .await?;
        self.wait_for(stack, "UPDATE_COMPLETE").await?;
        Ok(started.elapsed())
    }

    async fn wait_for(&self, stack: &StackRef, expected: &str) -> Result<(), String> {
        let url = self.stack_url(stack);
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut pause = self.poll;
        loop {
            let (status, answer) = self.call(reqwest::Method::GET, &url, None).await?;
            self.polls.fetch_add(1, Ordering::Relaxed);
            let stack_status = answer["stack"]["stack_status"].as_str().unwrap_or_default();
            if status == 200 && !stack_status.is_empty() && !stack_status.ends_with("_IN_PROGRESS")
            {
                return if stack_status == expected {
                    Ok(())
                } else {
                    Err(format!(
                        "stack {} ended {stack_status}, not {expected}: {}",
                        stack.name, answer["stack"]["stack_status_reason"]
                    ))
                };
            }
            if status == 404 && expected == "DELETE_COMPLETE" {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "stack {} still {stack_status} after 120 s",
                    stack.name
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(self.poll_max);
        }
    }
}
