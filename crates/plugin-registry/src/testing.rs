//! Lifecycle plugins for tests: real gRPC servers implementing
//! `ember.plugin.v1.LifecyclePlugin` on an ephemeral loopback port, answering
//! as told and writing every call into a journal shared by all of them, so a
//! test can check the order of calls across plugins. Compiled only with the
//! `testing` feature, which the crates whose tests use it enable in their
//! dev-dependencies; a release build does not ship it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ember_proto::plugin::v1 as plugin_pb;
use ember_proto::plugin::v1::lifecycle_plugin_server::{LifecyclePlugin, LifecyclePluginServer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

/// How a test plugin answers PreOperation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    Allow,
    Deny(String),
    Warn(String),
    /// Answers ALLOW after this long (PostOperation too).
    Slow(Duration),
    /// Answers PreOperation with ALLOW and fails PostOperation.
    FailPost,
}

/// One call a test plugin received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedCall {
    pub plugin: String,
    /// "pre" or "post".
    pub phase: &'static str,
    pub operation: i32,
    pub stack_name: String,
    /// Post only: the flag received.
    pub failed: bool,
    /// Post only: the reason received.
    pub reason: String,
    /// The stack sent: its resources as `name:STATUS`, in order.
    pub resources: Vec<String>,
    /// Pre only, for updates: the stack before the change (`None` when
    /// none was sent).
    pub previous: Option<SnapshotDigest>,
}

/// What a test checks of a stack snapshot a plugin received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotDigest {
    /// Its resources as `name:STATUS`, in order.
    pub resources: Vec<String>,
    /// The resource names its template declares, sorted.
    pub template_resources: Vec<String>,
    /// `type=count` of its planned resources, sorted.
    pub planned: Vec<String>,
    /// Its nested stacks' names.
    pub nested_stacks: Vec<String>,
}

impl SnapshotDigest {
    fn of(snapshot: &plugin_pb::StackSnapshot) -> SnapshotDigest {
        let mut template_resources: Vec<String> = snapshot
            .template
            .as_ref()
            .and_then(|template| template.fields.get("resources"))
            .and_then(|resources| match &resources.kind {
                Some(prost_types::value::Kind::StructValue(resources)) => {
                    Some(resources.fields.keys().cloned().collect())
                }
                _ => None,
            })
            .unwrap_or_default();
        template_resources.sort();
        let mut planned: Vec<String> = snapshot
            .planned_resources
            .iter()
            .map(|(type_name, count)| format!("{type_name}={count}"))
            .collect();
        planned.sort();
        SnapshotDigest {
            resources: resource_statuses(Some(snapshot)),
            template_resources,
            planned,
            nested_stacks: snapshot
                .nested_stacks
                .iter()
                .map(|nested| nested.stack_name.clone())
                .collect(),
        }
    }
}

fn resource_statuses(snapshot: Option<&plugin_pb::StackSnapshot>) -> Vec<String> {
    snapshot
        .map(|snapshot| {
            snapshot
                .resources
                .iter()
                .map(|resource| format!("{}:{}", resource.name, resource.status))
                .collect()
        })
        .unwrap_or_default()
}

/// Calls received by every plugin sharing the journal, in arrival order.
#[derive(Debug, Clone, Default)]
pub struct CallJournal {
    calls: Arc<Mutex<Vec<RecordedCall>>>,
}

impl CallJournal {
    pub fn calls(&self) -> Vec<RecordedCall> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// `plugin:phase` for each call, e.g. `["a:pre", "b:pre", "a:post"]`.
    pub fn summary(&self) -> Vec<String> {
        self.calls()
            .iter()
            .map(|call| format!("{}:{}", call.plugin, call.phase))
            .collect()
    }

    pub fn clear(&self) {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    fn record(&self, call: RecordedCall) {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(call);
    }
}

/// A running test plugin. Stops when dropped or with [`TestPlugin::stop`].
pub struct TestPlugin {
    pub name: String,
    /// `http://127.0.0.1:PORT`, to register.
    pub endpoint: String,
    behaviour: Arc<Mutex<Behaviour>>,
    shutdown: CancellationToken,
    server: tokio::task::JoinHandle<()>,
}

impl TestPlugin {
    /// Starts a plugin named `name` on an ephemeral loopback port.
    pub async fn start(
        name: &str,
        behaviour: Behaviour,
        journal: &CallJournal,
    ) -> std::io::Result<TestPlugin> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let behaviour = Arc::new(Mutex::new(behaviour));
        let service = RecordingPlugin {
            name: name.to_owned(),
            behaviour: Arc::clone(&behaviour),
            journal: journal.clone(),
        };
        let shutdown = CancellationToken::new();
        let server = tokio::spawn({
            let shutdown = shutdown.clone();
            async move {
                let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
                let served = tonic::transport::Server::builder()
                    .add_service(LifecyclePluginServer::new(service))
                    .serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned())
                    .await;
                if let Err(error) = served {
                    tracing::error!(%error, "test plugin server failed");
                }
            }
        });
        Ok(TestPlugin {
            name: name.to_owned(),
            endpoint,
            behaviour,
            shutdown,
            server,
        })
    }

    /// Changes how the plugin answers from the next call on.
    pub fn set_behaviour(&self, behaviour: Behaviour) {
        *self
            .behaviour
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = behaviour;
    }

    pub async fn stop(mut self) {
        self.shutdown.cancel();
        // The server task only ends; a panic in it already failed the test.
        let _ = (&mut self.server).await;
    }
}

impl Drop for TestPlugin {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// An address on which nothing listens: for an unreachable plugin.
pub async fn unreachable_endpoint() -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    drop(listener);
    Ok(format!("http://{address}"))
}

struct RecordingPlugin {
    name: String,
    behaviour: Arc<Mutex<Behaviour>>,
    journal: CallJournal,
}

impl RecordingPlugin {
    fn behaviour(&self) -> Behaviour {
        self.behaviour
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

fn stack_name(stack: Option<&plugin_pb::StackSnapshot>) -> String {
    stack
        .map(|stack| stack.stack_name.clone())
        .unwrap_or_default()
}

#[tonic::async_trait]
impl LifecyclePlugin for RecordingPlugin {
    async fn pre_operation(
        &self,
        request: Request<plugin_pb::PreOperationRequest>,
    ) -> Result<Response<plugin_pb::PreOperationResponse>, Status> {
        let request = request.into_inner();
        self.journal.record(RecordedCall {
            plugin: self.name.clone(),
            // A dry run ("allowed?") is told apart.
            phase: if request.dry_run { "dry-run" } else { "pre" },
            operation: request.operation,
            stack_name: stack_name(request.stack.as_ref()),
            failed: false,
            reason: String::new(),
            resources: resource_statuses(request.stack.as_ref()),
            previous: request.previous.as_ref().map(SnapshotDigest::of),
        });
        let (verdict, message) = match self.behaviour() {
            Behaviour::Allow | Behaviour::FailPost => (plugin_pb::Verdict::Allow, String::new()),
            Behaviour::Deny(reason) => (plugin_pb::Verdict::Deny, reason),
            Behaviour::Warn(message) => (plugin_pb::Verdict::Warn, message),
            Behaviour::Slow(delay) => {
                tokio::time::sleep(delay).await;
                (plugin_pb::Verdict::Allow, String::new())
            }
        };
        Ok(Response::new(plugin_pb::PreOperationResponse {
            verdict: verdict as i32,
            message,
        }))
    }

    async fn post_operation(
        &self,
        request: Request<plugin_pb::PostOperationRequest>,
    ) -> Result<Response<plugin_pb::PostOperationResponse>, Status> {
        let request = request.into_inner();
        self.journal.record(RecordedCall {
            plugin: self.name.clone(),
            phase: "post",
            operation: request.operation,
            stack_name: stack_name(request.stack.as_ref()),
            failed: request.failed,
            reason: request.reason,
            resources: resource_statuses(request.stack.as_ref()),
            previous: None,
        });
        match self.behaviour() {
            Behaviour::FailPost => Err(Status::internal("post-operation bookkeeping failed")),
            Behaviour::Slow(delay) => {
                tokio::time::sleep(delay).await;
                Ok(Response::new(plugin_pb::PostOperationResponse {}))
            }
            Behaviour::Allow | Behaviour::Deny(_) | Behaviour::Warn(_) => {
                Ok(Response::new(plugin_pb::PostOperationResponse {}))
            }
        }
    }
}
