//! Ember driving a real OpenStack (tests/openstack/cloud.sh) end to end:
//! the gateway validates the cloud's own Keystone tokens, the engine's
//! backend is the cloud, and what a stack or an instance makes lives in
//! Nova, Neutron, Cinder and Glance — made as its owner through a Keystone
//! trust, and seen through the services' own APIs.

mod aws;
mod clusters;
mod failures;
mod keystone;
mod renetwork;
mod servers;
mod topology;

use std::time::{Duration, Instant};

use ember_openstack::Session;
use ember_openstack::testing::{Account, TestCloud};
use ember_tests::TestEmber;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// How long a stack on the cloud may take to settle (servers boot in
/// seconds on the fake driver; a loaded CI machine is slower).
pub const SETTLE: Duration = Duration::from_secs(300);

/// Ember on the cloud, with the cloud's facts.
pub struct CloudEmber {
    pub ember: TestEmber,
    pub cloud: TestCloud,
}

/// One answer of Ember's REST API.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
}

impl CloudEmber {
    /// Ember whose gateway takes the cloud's Keystone tokens and whose
    /// engine acts on the cloud; `None` (said loudly) without a cloud.
    pub async fn start(test: &str) -> Option<CloudEmber> {
        CloudEmber::start_configured(test, |_| {}).await
    }

    /// [`CloudEmber::start`] with `configure` applied last.
    pub async fn start_configured(
        test: &str,
        configure: impl FnOnce(&mut ember::config::EmberConfig) + Send + 'static,
    ) -> Option<CloudEmber> {
        let cloud = TestCloud::from_env(test)?;
        let facts = cloud.facts.clone();
        let ember = TestEmber::start_configured(move |config| {
            config.auth.mode = "keystone".into();
            config.auth.keystone.url = facts.auth_url.clone();
            config.auth.keystone.user = facts.service.user.clone();
            config.auth.keystone.password = Some(facts.service.password.clone());
            config.auth.keystone.project = facts.service.project.clone();
            config.engine.compute.driver = "openstack".into();
            // The watcher's resync lists every server of Ember's: often
            // enough for the tests to see a server die.
            config.engine.compute.resync_ms = 2_000;
            let openstack = &mut config.engine.openstack;
            openstack.auth_url = facts.auth_url.clone();
            openstack.user = facts.service.user.clone();
            openstack.password = facts.service.password.clone();
            openstack.project = facts.service.project.clone();
            openstack.region = facts.region.clone();
            configure(config);
        })
        .await;
        Some(CloudEmber { ember, cloud })
    }

    /// `account`'s own session on the cloud (to look at what Ember made).
    pub fn session(&self, account: &Account) -> Session {
        self.cloud.session(account)
    }

    pub fn demo(&self) -> &Account {
        &self.cloud.facts.demo
    }

    pub fn alt(&self) -> &Account {
        &self.cloud.facts.alt
    }

    /// A Keystone token of `account`'s.
    pub async fn token(&self, account: &Account) -> String {
        self.session(account)
            .token()
            .await
            .expect("the account authenticates")
            .value
            .expose()
            .to_owned()
    }

    /// Calls Ember's REST API with `account`'s Keystone token.
    pub async fn call(
        &self,
        account: &Account,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Answer {
        let token = self.token(account).await;
        let mut request = self
            .ember
            .http
            .request(method.clone(), self.ember.url(path))
            .header("x-auth-token", token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .unwrap_or_else(|error| panic!("{method} {path}: {error}"));
        let status = response.status();
        let text = response.text().await.expect("a body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|_| json!({ "text": text }))
        };
        Answer { status, body }
    }

    /// `account`'s Heat API path of its stacks.
    pub fn stacks(account: &Account) -> String {
        format!("/orchestration/v1/{}/stacks", account.project_id)
    }

    /// Creates a stack of `account`'s from `template` (JSON); returns its
    /// path `/orchestration/v1/{project}/stacks/{name}/{id}`.
    pub async fn create_stack(&self, account: &Account, name: &str, template: Value) -> String {
        let created = self
            .call(
                account,
                Method::POST,
                &Self::stacks(account),
                Some(json!({"stack_name": name, "template": template, "disable_rollback": true})),
            )
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
        let id = created.body["stack"]["id"].as_str().expect("an id");
        format!("{}/{name}/{id}", Self::stacks(account))
    }

    /// Polls the stack until it leaves `*_IN_PROGRESS`; returns its body.
    pub async fn settled(&self, account: &Account, stack: &str) -> Value {
        let deadline = Instant::now() + SETTLE;
        loop {
            let answer = self.call(account, Method::GET, stack, None).await;
            assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
            let status = answer.body["stack"]["stack_status"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if !status.ends_with("_IN_PROGRESS") {
                return answer.body["stack"].clone();
            }
            assert!(
                Instant::now() < deadline,
                "{stack} still {status} after {SETTLE:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Polls the stack until it settles, and expects it `wanted`
    /// (`CREATE_COMPLETE`, …), naming its failed resources if not; returns
    /// its body.
    pub async fn settled_as(&self, account: &Account, stack: &str, wanted: &str) -> Value {
        let settled = self.settled(account, stack).await;
        assert_eq!(
            settled["stack_status"],
            wanted,
            "{}",
            self.failures(account, stack).await
        );
        settled
    }

    /// The reasons of the stack's failed resources, for a failure message.
    pub async fn failures(&self, account: &Account, stack: &str) -> String {
        let resources = self
            .call(account, Method::GET, &format!("{stack}/resources"), None)
            .await;
        resources.body["resources"]
            .as_array()
            .map(|resources| {
                resources
                    .iter()
                    .filter(|resource| {
                        resource["resource_status"]
                            .as_str()
                            .is_some_and(|status| status.ends_with("FAILED"))
                    })
                    .map(|resource| {
                        format!(
                            "{}: {}",
                            resource["resource_name"].as_str().unwrap_or_default(),
                            resource["resource_status_reason"]
                                .as_str()
                                .unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default()
    }

    /// The stack's outputs, by key.
    pub async fn outputs(&self, account: &Account, stack: &str) -> serde_json::Map<String, Value> {
        let answer = self.call(account, Method::GET, stack, None).await;
        answer.body["stack"]["outputs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|output| {
                (
                    output["output_key"].as_str().unwrap_or_default().to_owned(),
                    output["output_value"].clone(),
                )
            })
            .collect()
    }

    /// Deletes the stack and waits until it is gone.
    pub async fn delete_stack(&self, account: &Account, stack: &str) {
        let deleted = self.call(account, Method::DELETE, stack, None).await;
        assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{deleted:?}");
        let deadline = Instant::now() + SETTLE;
        loop {
            let answer = self.call(account, Method::GET, stack, None).await;
            let status = answer.body["stack"]["stack_status"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if answer.status == StatusCode::NOT_FOUND || status == "DELETE_COMPLETE" {
                return;
            }
            assert_ne!(
                status,
                "DELETE_FAILED",
                "{}",
                self.failures(account, stack).await
            );
            assert!(Instant::now() < deadline, "{stack} still {status}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// A short unique name.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}
