//! The runner end to end: the plugin-registry service on an ephemeral port
//! with a temporary SQLite database, and real test plugins (gRPC servers on
//! ephemeral ports) that record every call they receive.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ember_plugin_registry::testing::{Behaviour, CallJournal, TestPlugin, unreachable_endpoint};
use ember_proto::common::v1::StackOperation;
use ember_proto::plugin::v1::StackSnapshot;
use ember_proto::pluginregistry::v1 as pb;
use ember_proto::pluginregistry::v1::plugin_registry_service_client::PluginRegistryServiceClient;
use ember_proto::pluginregistry::v1::plugin_runner_service_client::PluginRunnerServiceClient;
use ember_runtime::Identity;
use ember_runtime::identity::InternalCredential;
use ember_runtime::testing::wait_for;
use tokio_util::sync::CancellationToken;
use tonic::Code;
use tonic::transport::Channel;

const CREDENTIAL: &str = "a-test-internal-credential-of-32-characters";

struct Registry {
    address: SocketAddr,
    channel: Channel,
    shutdown: CancellationToken,
    server: tokio::task::JoinHandle<()>,
    _data_dir: tempfile::TempDir,
}

impl Registry {
    async fn start() -> Registry {
        Registry::start_in(tempfile::tempdir().expect("temporary directory")).await
    }

    /// Another replica, on the same database as `self` (which must outlive
    /// it).
    async fn replica(&self) -> Registry {
        Registry::start_on(
            self._data_dir.path().join("plugin-registry.db"),
            tempfile::tempdir().expect("temporary directory"),
        )
        .await
    }

    async fn start_in(data_dir: tempfile::TempDir) -> Registry {
        let database = data_dir.path().join("plugin-registry.db");
        Registry::start_on(database, data_dir).await
    }

    async fn start_on(database: std::path::PathBuf, data_dir: tempfile::TempDir) -> Registry {
        let config = ember_plugin_registry::Config {
            database_url: ember_runtime::database::sqlite_url(&database),
            internal_credential: CREDENTIAL.to_owned(),
            request_timeout: Duration::from_secs(30),
            in_process: None,
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bound");
        let address = listener.local_addr().expect("address");
        let shutdown = CancellationToken::new();
        let server = tokio::spawn({
            let shutdown = shutdown.clone();
            async move {
                ember_plugin_registry::serve(config, listener, shutdown)
                    .await
                    .expect("plugin-registry serves");
            }
        });
        let channel = Channel::from_shared(format!("http://{address}"))
            .expect("url")
            .connect_lazy();
        wait_for(
            "the plugin-registry to serve",
            Duration::from_secs(10),
            || {
                let channel = channel.clone();
                async move {
                    tonic_health::pb::health_client::HealthClient::new(channel)
                        .check(tonic_health::pb::HealthCheckRequest {
                            service: "ember.pluginregistry.v1.PluginRunnerService".to_owned(),
                        })
                        .await
                        .is_ok_and(|response| response.into_inner().status == 1)
                }
            },
        )
        .await;
        Registry {
            address,
            channel,
            shutdown,
            server,
            _data_dir: data_dir,
        }
    }

    fn request<T>(&self, message: T, roles: &[&str]) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        Identity::new(
            "alice",
            "team-a",
            roles.iter().map(|role| (*role).to_owned()).collect(),
        )
        .attach(&InternalCredential::new(CREDENTIAL), &mut request);
        request
    }

    fn admin<T>(&self, message: T) -> tonic::Request<T> {
        self.request(message, &["admin", "member"])
    }

    fn member<T>(&self, message: T) -> tonic::Request<T> {
        self.request(message, &["member"])
    }

    fn registry(&self) -> PluginRegistryServiceClient<Channel> {
        PluginRegistryServiceClient::new(self.channel.clone())
    }

    fn runner(&self) -> PluginRunnerServiceClient<Channel> {
        PluginRunnerServiceClient::new(self.channel.clone())
    }

    async fn register(&self, request: pb::RegisterPluginRequest) -> pb::Plugin {
        self.registry()
            .register_plugin(self.admin(request))
            .await
            .expect("registered")
            .into_inner()
    }

    /// Registers `plugins` with ordinals 1, 2, … in the order given.
    async fn register_in_order(&self, plugins: &[TestPlugin]) {
        for (ordinal, test_plugin) in (1..).zip(plugins) {
            self.register(plugin(&test_plugin.name, &test_plugin.endpoint, ordinal))
                .await;
        }
    }

    async fn update(&self, request: pb::UpdatePluginRequest) -> pb::Plugin {
        self.registry()
            .update_plugin(self.admin(request))
            .await
            .expect("updated")
            .into_inner()
    }

    /// The engine's call before `operation` on a stack of `project_id`; the
    /// engine calls on behalf of a member, no admin role needed.
    async fn pre(
        &self,
        operation: StackOperation,
        project_id: &str,
    ) -> pb::RunPreOperationsResponse {
        self.runner()
            .run_pre_operations(self.member(pb::RunPreOperationsRequest {
                operation: operation as i32,
                project_id: project_id.to_owned(),
                stack: Some(snapshot(project_id)),
                previous: None,
                snapshot_on_demand: false,
                dry_run: false,
                break_glass: false,
            }))
            .await
            .expect("pre-operations ran")
            .into_inner()
    }

    async fn post(
        &self,
        operation: StackOperation,
        plugins: Vec<String>,
        failed: bool,
        reason: &str,
    ) -> pb::RunPostOperationsResponse {
        self.runner()
            .run_post_operations(self.member(pb::RunPostOperationsRequest {
                operation: operation as i32,
                project_id: "team-a".to_owned(),
                stack: Some(snapshot("team-a")),
                failed,
                reason: reason.to_owned(),
                plugins,
            }))
            .await
            .expect("post-operations ran")
            .into_inner()
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.server.await.expect("stopped cleanly");
    }
}

fn snapshot(project_id: &str) -> StackSnapshot {
    StackSnapshot {
        stack_id: "5b7e4c1e-0000-4000-8000-000000000001".to_owned(),
        stack_name: "web".to_owned(),
        project_id: project_id.to_owned(),
        user_id: "alice".to_owned(),
        ..StackSnapshot::default()
    }
}

fn plugin(name: &str, endpoint: &str, ordinal: i32) -> pb::RegisterPluginRequest {
    pb::RegisterPluginRequest {
        name: name.to_owned(),
        endpoint: endpoint.to_owned(),
        ordinal,
        timeout_ms: 2_000,
        ..pb::RegisterPluginRequest::default()
    }
}

fn warn_mode(request: pb::RegisterPluginRequest) -> pb::RegisterPluginRequest {
    pb::RegisterPluginRequest {
        failure_mode: pb::FailureMode::Warn as i32,
        ..request
    }
}

/// `plugin:phase:outcome` of each reported call.
fn outcomes(calls: &[pb::PluginCallOutcome]) -> Vec<String> {
    calls
        .iter()
        .map(|call| {
            let phase = pb::PluginPhase::try_from(call.phase)
                .expect("phase")
                .as_str_name()
                .trim_start_matches("PLUGIN_PHASE_")
                .to_ascii_lowercase();
            let outcome = pb::PluginCallResult::try_from(call.outcome)
                .expect("outcome")
                .as_str_name()
                .trim_start_matches("PLUGIN_CALL_RESULT_")
                .to_ascii_lowercase();
            format!("{}:{phase}:{outcome}", call.plugin)
        })
        .collect()
}

async fn start_plugins(journal: &CallJournal, plugins: &[(&str, Behaviour)]) -> Vec<TestPlugin> {
    let mut started = Vec::new();
    for (name, behaviour) in plugins {
        started.push(
            TestPlugin::start(name, behaviour.clone(), journal)
                .await
                .expect("test plugin starts"),
        );
    }
    started
}

#[tokio::test]
async fn pre_operations_run_by_ordinal_then_name_and_post_operations_follow_in_that_order() {
    let registry = Registry::start().await;
    let journal = CallJournal::default();
    let plugins = start_plugins(
        &journal,
        &[
            ("charlie", Behaviour::Allow),
            ("bravo", Behaviour::Allow),
            ("alpha", Behaviour::Allow),
            ("zulu", Behaviour::Allow),
        ],
    )
    .await;
    for (test_plugin, ordinal) in plugins.iter().zip([1, 2, 2, -1]) {
        registry
            .register(plugin(&test_plugin.name, &test_plugin.endpoint, ordinal))
            .await;
    }

    let answer = registry.pre(StackOperation::Create, "team-a").await;
    assert!(answer.allowed, "{answer:?}");
    assert_eq!(answer.reason, "");
    assert_eq!(
        outcomes(&answer.calls),
        [
            "zulu:pre:allow",
            "charlie:pre:allow",
            "alpha:pre:allow",
            "bravo:pre:allow"
        ]
    );
    assert_eq!(
        answer.post_operation_plugins,
        ["zulu", "charlie", "alpha", "bravo"]
    );
    assert!(journal.calls().iter().all(|call| call.stack_name == "web"
        && call.operation == StackOperation::Create as i32));

    journal.clear();
    let finished = registry
        .post(
            StackOperation::Create,
            answer.post_operation_plugins.clone(),
            false,
            "",
        )
        .await;
    assert_eq!(
        outcomes(&finished.calls),
        [
            "zulu:post:ok",
            "charlie:post:ok",
            "alpha:post:ok",
            "bravo:post:ok"
        ]
    );
    assert_eq!(
        journal.summary(),
        ["zulu:post", "charlie:post", "alpha:post", "bravo:post"]
    );
    assert!(journal.calls().iter().all(|call| !call.failed));
    registry.stop().await;
}

#[tokio::test]
async fn a_deny_in_fail_mode_stops_the_chain_and_unwinds_the_passed_plugins_in_reverse() {
    let registry = Registry::start().await;
    let journal = CallJournal::default();
    let plugins = start_plugins(
        &journal,
        &[
            ("scheduler", Behaviour::Allow),
            (
                "license",
                Behaviour::Warn("license expires in 3 days".into()),
            ),
            (
                "quota",
                Behaviour::Deny("101 servers exceed the quota of 100".into()),
            ),
            ("audit", Behaviour::Allow),
        ],
    )
    .await;
    registry.register_in_order(&plugins).await;

    let answer = registry.pre(StackOperation::Create, "team-a").await;
    assert!(!answer.allowed);
    let reason = "plugin quota: 101 servers exceed the quota of 100";
    assert_eq!(answer.reason, reason);
    assert_eq!(
        outcomes(&answer.calls),
        [
            "scheduler:pre:allow",
            "license:pre:warn",
            "quota:pre:deny",
            "license:post:ok",
            "scheduler:post:ok"
        ]
    );
    assert_eq!(answer.calls[1].message, "license expires in 3 days");
    assert!(answer.calls[2].stopped_chain);
    assert!(answer.calls[3].failed && answer.calls[4].failed);
    assert!(
        answer.post_operation_plugins.is_empty(),
        "already unwound: nothing is owed"
    );
    assert_eq!(
        journal.summary(),
        [
            "scheduler:pre",
            "license:pre",
            "quota:pre",
            "license:post",
            "scheduler:post"
        ],
        "audit is never called; the unwinding runs in reverse"
    );
    for call in journal.calls().iter().filter(|call| call.phase == "post") {
        assert!(call.failed, "{call:?}");
        assert_eq!(call.reason, reason);
    }
    registry.stop().await;
}

/// An admin's break-glass: the plugins that would stop the chain do not;
/// the rest are called, nothing is unwound, and the answer names each one
/// broken through and owes a post-operation to those that allowed it.
#[tokio::test]
async fn under_a_break_glass_every_plugin_is_called_and_the_stops_are_reported_not_unwound() {
    let registry = Registry::start().await;
    let journal = CallJournal::default();
    let plugins = start_plugins(
        &journal,
        &[
            ("scheduler", Behaviour::Allow),
            ("freeze", Behaviour::Deny("change freeze".into())),
            ("quota", Behaviour::Deny("over quota".into())),
            ("audit", Behaviour::Allow),
        ],
    )
    .await;
    registry.register_in_order(&plugins).await;
    let request = |break_glass: bool, dry_run: bool| pb::RunPreOperationsRequest {
        operation: StackOperation::Delete as i32,
        project_id: "team-a".to_owned(),
        stack: Some(snapshot("team-a")),
        previous: None,
        snapshot_on_demand: false,
        dry_run,
        break_glass,
    };

    let answer = registry
        .runner()
        .run_pre_operations(registry.member(request(true, false)))
        .await
        .expect("ran")
        .into_inner();
    assert!(!answer.allowed, "the caller records the break-glass");
    assert_eq!(answer.reason, "plugin freeze: change freeze");
    assert_eq!(
        outcomes(&answer.calls),
        [
            "scheduler:pre:allow",
            "freeze:pre:deny",
            "quota:pre:deny",
            "audit:pre:allow"
        ]
    );
    let stopped: Vec<&str> = answer
        .calls
        .iter()
        .filter(|call| call.stopped_chain)
        .map(|call| call.plugin.as_str())
        .collect();
    assert_eq!(stopped, ["freeze", "quota"]);
    assert_eq!(answer.post_operation_plugins, ["scheduler", "audit"]);
    assert_eq!(
        journal.summary(),
        ["scheduler:pre", "freeze:pre", "quota:pre", "audit:pre"],
        "no post-operation: the operation goes on"
    );

    // A dry run is a dry run, whatever else the request says.
    journal.clear();
    let answer = registry
        .runner()
        .run_pre_operations(registry.member(request(true, true)))
        .await
        .expect("ran")
        .into_inner();
    assert!(answer.post_operation_plugins.is_empty());
    assert_eq!(
        journal.summary(),
        [
            "scheduler:dry-run",
            "freeze:dry-run",
            "quota:dry-run",
            "audit:dry-run"
        ]
    );
    registry.stop().await;
}

#[tokio::test]
async fn failures_of_warn_mode_plugins_are_recorded_and_the_chain_goes_on() {
    let registry = Registry::start().await;
    let journal = CallJournal::default();
    let plugins = start_plugins(
        &journal,
        &[
            ("denier", Behaviour::Deny("not on Fridays".into())),
            ("sleeper", Behaviour::Slow(Duration::from_secs(3))),
            ("last", Behaviour::Allow),
        ],
    )
    .await;
    registry
        .register(warn_mode(plugin("denier", &plugins[0].endpoint, 1)))
        .await;
    registry
        .register(pb::RegisterPluginRequest {
            timeout_ms: 100,
            ..warn_mode(plugin("sleeper", &plugins[1].endpoint, 2))
        })
        .await;
    registry
        .register(warn_mode(plugin(
            "ghost",
            &unreachable_endpoint().await.expect("port"),
            3,
        )))
        .await;
    registry
        .register(plugin("last", &plugins[2].endpoint, 4))
        .await;

    let answer = registry.pre(StackOperation::Update, "team-a").await;
    assert!(answer.allowed, "{answer:?}");
    assert_eq!(
        outcomes(&answer.calls),
        [
            "denier:pre:deny",
            "sleeper:pre:timeout",
            "ghost:pre:error",
            "last:pre:allow"
        ]
    );
    assert_eq!(answer.calls[0].message, "not on Fridays");
    assert_eq!(answer.calls[1].message, "timed out after 100 ms");
    assert!(
        answer.calls[2].message.contains("is unreachable"),
        "{}",
        answer.calls[2].message
    );
    assert!(answer.calls.iter().all(|call| !call.stopped_chain
        && call.failure_mode == pb::FailureMode::Warn as i32
        || call.plugin == "last"));
    assert_eq!(
        answer.post_operation_plugins,
        ["denier", "sleeper", "ghost", "last"]
    );
    registry.stop().await;
}

#[tokio::test]
async fn a_timeout_in_fail_mode_fails_the_operation_with_a_reason_that_says_so() {
    let registry = Registry::start().await;
    let journal = CallJournal::default();
    let plugins = start_plugins(
        &journal,
        &[
            ("first", Behaviour::Allow),
            ("quota", Behaviour::Slow(Duration::from_secs(5))),
        ],
    )
    .await;
    registry
        .register(plugin("first", &plugins[0].endpoint, 1))
        .await;
    registry
        .register(pb::RegisterPluginRequest {
            timeout_ms: 250,
            ..plugin("quota", &plugins[1].endpoint, 2)
        })
        .await;

    let started = Instant::now();
    let answer = registry.pre(StackOperation::Delete, "team-a").await;
    let elapsed = started.elapsed();
    assert!(!answer.allowed);
    assert_eq!(answer.reason, "plugin quota: timed out after 250 ms");
    assert_eq!(
        outcomes(&answer.calls),
        ["first:pre:allow", "quota:pre:timeout", "first:post:ok"]
    );
    assert!(answer.calls[1].duration_ms >= 250, "{:?}", answer.calls[1]);
    assert!(
        elapsed < Duration::from_secs(5),
        "the runner gave up at the timeout, not when the plugin answered ({elapsed:?})"
    );
    registry.stop().await;
}

#[tokio::test]
async fn an_unreachable_plugin_in_fail_mode_fails_the_operation() {
    let registry = Registry::start().await;
    let endpoint = unreachable_endpoint().await.expect("port");
    registry.register(plugin("gone", &endpoint, 1)).await;
    let answer = registry.pre(StackOperation::Create, "team-a").await;
    assert!(!answer.allowed);
    assert!(
        answer
            .reason
            .starts_with(&format!("plugin gone: endpoint {endpoint} is unreachable")),
        "{}",
        answer.reason
    );
    assert_eq!(outcomes(&answer.calls), ["gone:pre:error"]);
    registry.stop().await;
}

#[tokio::test]
async fn plugins_are_chosen_by_operation_and_project_and_disabled_ones_are_skipped() {
    let registry = Registry::start().await;
    let journal = CallJournal::default();
    let plugins = start_plugins(
        &journal,
        &[
            ("on-create", Behaviour::Allow),
            ("for-team-a", Behaviour::Allow),
            ("switched-off", Behaviour::Allow),
            ("everything", Behaviour::Allow),
        ],
    )
    .await;
    registry
        .register(pb::RegisterPluginRequest {
            operations: vec![StackOperation::Create as i32, StackOperation::Adopt as i32],
            ..plugin("on-create", &plugins[0].endpoint, 1)
        })
        .await;
    registry
        .register(pb::RegisterPluginRequest {
            project_ids: vec!["team-a".to_owned()],
            ..plugin("for-team-a", &plugins[1].endpoint, 2)
        })
        .await;
    registry
        .register(pb::RegisterPluginRequest {
            disabled: true,
            ..plugin("switched-off", &plugins[2].endpoint, 3)
        })
        .await;
    registry
        .register(plugin("everything", &plugins[3].endpoint, 4))
        .await;

    let answer = registry.pre(StackOperation::Create, "team-b").await;
    assert_eq!(answer.post_operation_plugins, ["on-create", "everything"]);
    let answer = registry.pre(StackOperation::Delete, "team-a").await;
    assert_eq!(answer.post_operation_plugins, ["for-team-a", "everything"]);
    let answer = registry.pre(StackOperation::Lock, "team-c").await;
    assert_eq!(answer.post_operation_plugins, ["everything"]);

    // Without a project_id the stack's own project selects.
    let answer = registry
        .runner()
        .run_pre_operations(registry.member(pb::RunPreOperationsRequest {
            operation: StackOperation::Create as i32,
            project_id: String::new(),
            stack: Some(snapshot("team-a")),
            previous: None,
            snapshot_on_demand: false,
            dry_run: false,
            break_glass: false,
        }))
        .await
        .expect("ran")
        .into_inner();
    assert_eq!(
        answer.post_operation_plugins,
        ["on-create", "for-team-a", "everything"]
    );
    assert!(
        !journal
            .summary()
            .iter()
            .any(|call| call.starts_with("switched-off")),
        "a disabled plugin is never called"
    );
    registry.stop().await;
}

#[tokio::test]
async fn a_snapshot_on_demand_is_asked_for_only_when_a_plugin_applies() {
    let registry = Registry::start().await;
    let journal = CallJournal::default();
    let plugins = start_plugins(&journal, &[("for-team-a", Behaviour::Allow)]).await;
    let without_snapshot = |operation: StackOperation, project_id: &str| {
        let request = registry.member(pb::RunPreOperationsRequest {
            operation: operation as i32,
            project_id: project_id.to_owned(),
            stack: None,
            previous: None,
            snapshot_on_demand: true,
            dry_run: false,
            break_glass: false,
        });
        let mut runner = registry.runner();
        async move {
            runner
                .run_pre_operations(request)
                .await
                .expect("ran")
                .into_inner()
        }
    };
    // No plugin registered: allowed at once, nothing to gather.
    let answer = without_snapshot(StackOperation::Create, "team-a").await;
    assert!(answer.allowed && !answer.snapshot_needed, "{answer:?}");
    assert!(answer.calls.is_empty());

    registry
        .register(pb::RegisterPluginRequest {
            project_ids: vec!["team-a".to_owned()],
            operations: vec![StackOperation::Create as i32],
            ..plugin("for-team-a", &plugins[0].endpoint, 1)
        })
        .await;
    // The plugin applies: the snapshot is asked for and nothing is called.
    let answer = without_snapshot(StackOperation::Create, "team-a").await;
    assert!(answer.snapshot_needed && !answer.allowed, "{answer:?}");
    assert!(answer.calls.is_empty() && answer.post_operation_plugins.is_empty());
    assert!(
        journal.summary().is_empty(),
        "no plugin called without the stack"
    );
    // Another project, another operation: nothing applies.
    for (operation, project_id) in [
        (StackOperation::Create, "team-b"),
        (StackOperation::Delete, "team-a"),
    ] {
        let answer = without_snapshot(operation, project_id).await;
        assert!(answer.allowed && !answer.snapshot_needed, "{answer:?}");
    }
    // Sent again with the stack, the chain runs.
    let answer = registry.pre(StackOperation::Create, "team-a").await;
    assert!(answer.allowed && !answer.snapshot_needed);
    assert_eq!(answer.post_operation_plugins, ["for-team-a"]);
    assert_eq!(journal.summary().len(), 1, "{:?}", journal.summary());
    registry.stop().await;
}

#[tokio::test]
async fn post_operations_carry_the_flag_and_report_failures_as_outcomes() {
    let registry = Registry::start().await;
    let journal = CallJournal::default();
    let plugins = start_plugins(
        &journal,
        &[
            ("books", Behaviour::FailPost),
            ("slow", Behaviour::Slow(Duration::from_secs(3))),
            ("fine", Behaviour::Allow),
        ],
    )
    .await;
    registry
        .register(plugin("books", &plugins[0].endpoint, 1))
        .await;
    registry
        .register(pb::RegisterPluginRequest {
            timeout_ms: 100,
            ..plugin("slow", &plugins[1].endpoint, 2)
        })
        .await;
    registry
        .register(plugin("fine", &plugins[2].endpoint, 3))
        .await;

    let names = ["books", "slow", "retired", "fine"]
        .map(str::to_owned)
        .to_vec();
    let finished = registry
        .post(
            StackOperation::Create,
            names,
            true,
            "resource server_1 failed: no valid host",
        )
        .await;
    assert_eq!(
        outcomes(&finished.calls),
        [
            "books:post:error",
            "slow:post:timeout",
            "retired:post:error",
            "fine:post:ok"
        ]
    );
    assert!(finished.calls.iter().all(|call| call.failed));
    assert!(
        finished.calls[0]
            .message
            .contains("post-operation bookkeeping failed"),
        "{}",
        finished.calls[0].message
    );
    assert!(
        finished.calls[2].message.contains("no longer registered"),
        "{}",
        finished.calls[2].message
    );
    for call in journal.calls() {
        assert!(call.failed);
        assert_eq!(call.reason, "resource server_1 failed: no valid host");
    }

    journal.clear();
    let finished = registry
        .post(StackOperation::Create, vec!["fine".to_owned()], false, "")
        .await;
    assert_eq!(outcomes(&finished.calls), ["fine:post:ok"]);
    assert!(!journal.calls()[0].failed);
    registry.stop().await;
}

#[tokio::test]
async fn registry_changes_apply_to_the_very_next_run() {
    let registry = Registry::start().await;
    let journal = CallJournal::default();
    let plugins = start_plugins(
        &journal,
        &[("one", Behaviour::Allow), ("two", Behaviour::Allow)],
    )
    .await;
    assert!(
        registry
            .pre(StackOperation::Create, "team-a")
            .await
            .calls
            .is_empty()
    );

    registry
        .register(plugin("one", &plugins[0].endpoint, 1))
        .await;
    let answer = registry.pre(StackOperation::Create, "team-a").await;
    assert_eq!(
        answer.post_operation_plugins,
        ["one"],
        "registered → called"
    );

    registry
        .register(plugin("two", &plugins[1].endpoint, 2))
        .await;
    registry
        .update(pb::UpdatePluginRequest {
            name: "one".to_owned(),
            ordinal: Some(3),
            ..pb::UpdatePluginRequest::default()
        })
        .await;
    let answer = registry.pre(StackOperation::Create, "team-a").await;
    assert_eq!(answer.post_operation_plugins, ["two", "one"], "reordered");

    registry
        .update(pb::UpdatePluginRequest {
            name: "two".to_owned(),
            enabled: Some(false),
            ..pb::UpdatePluginRequest::default()
        })
        .await;
    let answer = registry.pre(StackOperation::Create, "team-a").await;
    assert_eq!(answer.post_operation_plugins, ["one"], "disabled → skipped");

    plugins[0].set_behaviour(Behaviour::Deny("closed".into()));
    let answer = registry.pre(StackOperation::Create, "team-a").await;
    assert_eq!(answer.reason, "plugin one: closed");
    registry
        .update(pb::UpdatePluginRequest {
            name: "one".to_owned(),
            failure_mode: Some(pb::FailureMode::Warn as i32),
            ..pb::UpdatePluginRequest::default()
        })
        .await;
    assert!(registry.pre(StackOperation::Create, "team-a").await.allowed);

    let removed = registry
        .registry()
        .deregister_plugin(registry.admin(pb::DeregisterPluginRequest {
            name: "one".to_owned(),
        }))
        .await
        .expect("deregistered")
        .into_inner();
    assert_eq!(removed.plugin.expect("plugin").name, "one");
    let answer = registry.pre(StackOperation::Create, "team-a").await;
    assert!(
        answer.calls.is_empty(),
        "deregistered → not called: {answer:?}"
    );
    registry.stop().await;
}

#[tokio::test]
async fn registry_writes_are_admin_only_and_validated() {
    let registry = Registry::start().await;
    let mut client = registry.registry();
    let status = client
        .register_plugin(registry.member(plugin("quota", "http://127.0.0.1:7000", 1)))
        .await
        .expect_err("member");
    assert_eq!(status.code(), Code::PermissionDenied);
    registry
        .register(plugin("quota", "http://127.0.0.1:7000", 1))
        .await;

    let status = client
        .update_plugin(registry.member(pb::UpdatePluginRequest {
            name: "quota".to_owned(),
            enabled: Some(false),
            ..pb::UpdatePluginRequest::default()
        }))
        .await
        .expect_err("member");
    assert_eq!(status.code(), Code::PermissionDenied);
    assert!(
        status.message().contains("admin only"),
        "{}",
        status.message()
    );
    let status = client
        .deregister_plugin(registry.member(pb::DeregisterPluginRequest {
            name: "quota".to_owned(),
        }))
        .await
        .expect_err("member");
    assert_eq!(status.code(), Code::PermissionDenied);

    for (update, key) in [
        (
            pb::UpdatePluginRequest {
                endpoint: Some("quota:7000".to_owned()),
                ..pb::UpdatePluginRequest::default()
            },
            "endpoint",
        ),
        (
            pb::UpdatePluginRequest {
                timeout_ms: Some(60_001),
                ..pb::UpdatePluginRequest::default()
            },
            "timeout_ms",
        ),
        (
            pb::UpdatePluginRequest {
                failure_mode: Some(pb::FailureMode::Unspecified as i32),
                ..pb::UpdatePluginRequest::default()
            },
            "failure_mode",
        ),
        (
            pb::UpdatePluginRequest {
                operations: Some(pb::OperationFilter { values: vec![42] }),
                ..pb::UpdatePluginRequest::default()
            },
            "operations",
        ),
    ] {
        let status = client
            .update_plugin(registry.admin(pb::UpdatePluginRequest {
                name: "quota".to_owned(),
                ..update
            }))
            .await
            .expect_err("invalid");
        assert_eq!(status.code(), Code::InvalidArgument, "{key}");
        assert!(status.message().starts_with(key), "{}", status.message());
    }
    let kept = client
        .get_plugin(registry.admin(pb::GetPluginRequest {
            name: "quota".to_owned(),
        }))
        .await
        .expect("read")
        .into_inner();
    assert!(kept.enabled && kept.endpoint == "http://127.0.0.1:7000");

    let status = client
        .update_plugin(registry.admin(pb::UpdatePluginRequest {
            name: "nope".to_owned(),
            ..pb::UpdatePluginRequest::default()
        }))
        .await
        .expect_err("unknown");
    assert_eq!(status.code(), Code::NotFound);
    let status = client
        .deregister_plugin(registry.admin(pb::DeregisterPluginRequest {
            name: "nope".to_owned(),
        }))
        .await
        .expect_err("unknown");
    assert_eq!(status.code(), Code::NotFound);
    assert!(
        status.message().contains("\"nope\""),
        "{}",
        status.message()
    );
    registry.stop().await;
}

#[tokio::test]
async fn the_runner_wants_the_internal_credential_and_a_real_operation() {
    let registry = Registry::start().await;
    let status = registry
        .runner()
        .run_pre_operations(pb::RunPreOperationsRequest {
            operation: StackOperation::Create as i32,
            ..pb::RunPreOperationsRequest::default()
        })
        .await
        .expect_err("no credential");
    assert_eq!(status.code(), Code::Unauthenticated);

    let status = registry
        .runner()
        .run_pre_operations(registry.member(pb::RunPreOperationsRequest::default()))
        .await
        .expect_err("no operation");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().starts_with("operation:"),
        "{}",
        status.message()
    );
    let status = registry
        .runner()
        .run_post_operations(registry.member(pb::RunPostOperationsRequest {
            operation: 99,
            ..pb::RunPostOperationsRequest::default()
        }))
        .await
        .expect_err("bad operation");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(registry.address.port() > 0);
    registry.stop().await;
}

/// A registration with a breaker of `failures` and a cool-down of
/// `cooldown_ms`, calls timing out after 100 ms.
fn with_breaker(
    request: pb::RegisterPluginRequest,
    failures: u32,
    cooldown_ms: u32,
) -> pb::RegisterPluginRequest {
    pb::RegisterPluginRequest {
        timeout_ms: 100,
        breaker_failures: Some(failures),
        breaker_cooldown_ms: Some(cooldown_ms),
        ..request
    }
}

impl Registry {
    async fn show(&self, name: &str) -> pb::Plugin {
        self.registry()
            .get_plugin(self.admin(pb::GetPluginRequest {
                name: name.to_owned(),
            }))
            .await
            .expect("shown")
            .into_inner()
    }

    /// Waits for `name`'s cool-down to pass (its circuit half-open).
    async fn wait_until_half_open(&self, name: &str) {
        wait_for(
            "the circuit to be half-open",
            Duration::from_secs(5),
            || async { circuit_state(&self.show(name).await) == pb::CircuitState::HalfOpen },
        )
        .await;
    }

    /// "Allowed?": the dry run of the chain.
    async fn ask(&self, operation: StackOperation) -> pb::RunPreOperationsResponse {
        self.runner()
            .run_pre_operations(self.member(pb::RunPreOperationsRequest {
                operation: operation as i32,
                project_id: "team-a".to_owned(),
                stack: Some(snapshot("team-a")),
                dry_run: true,
                ..pb::RunPreOperationsRequest::default()
            }))
            .await
            .expect("asked")
            .into_inner()
    }
}

fn circuit_state(plugin: &pb::Plugin) -> pb::CircuitState {
    pb::CircuitState::try_from(plugin.circuit.as_ref().expect("a circuit").state).expect("state")
}

#[tokio::test]
async fn a_failing_plugins_circuit_opens_fails_at_once_on_every_replica_and_a_probe_closes_it() {
    let registry = Registry::start().await;
    let other = registry.replica().await;
    let journal = CallJournal::default();
    let plugins = start_plugins(
        &journal,
        &[("quota", Behaviour::Slow(Duration::from_secs(5)))],
    )
    .await;
    registry
        .register(with_breaker(
            plugin("quota", &plugins[0].endpoint, 1),
            3,
            400,
        ))
        .await;

    for failure in 1..=3 {
        let answer = registry.pre(StackOperation::Create, "team-a").await;
        assert!(!answer.allowed);
        assert_eq!(outcomes(&answer.calls)[0], "quota:pre:timeout", "{failure}");
    }
    let shown = other.show("quota").await;
    assert_eq!(circuit_state(&shown), pb::CircuitState::Open, "{shown:?}");
    let circuit = shown.circuit.expect("circuit");
    assert_eq!(circuit.consecutive_failures, 3);
    assert_eq!(circuit.last_failure, "timed out after 100 ms");
    assert!(circuit.opened_at.is_some() && circuit.open_until.is_some());

    // Open: no call, no timeout waited out, on either replica.
    journal.clear();
    for replica in [&registry, &other] {
        let answer = replica.pre(StackOperation::Create, "team-a").await;
        assert!(!answer.allowed);
        assert_eq!(outcomes(&answer.calls), ["quota:pre:circuit_open"]);
        assert!(answer.calls[0].stopped_chain);
        assert!(
            answer
                .reason
                .starts_with("plugin quota: unavailable: circuit open since ")
                && answer
                    .reason
                    .contains("after 3 consecutive failures (last: timed out after 100 ms)"),
            "{}",
            answer.reason
        );
        assert_eq!(
            answer.calls[0].duration_us, 0,
            "an open circuit waits out no timeout"
        );
    }
    assert!(journal.calls().is_empty(), "{:?}", journal.summary());
    // Asked without the stack, as the engine first asks: the answer needs
    // no snapshot, since no plugin will be called.
    let on_demand = other
        .runner()
        .run_pre_operations(other.member(pb::RunPreOperationsRequest {
            operation: StackOperation::Create as i32,
            project_id: "team-a".to_owned(),
            snapshot_on_demand: true,
            ..pb::RunPreOperationsRequest::default()
        }))
        .await
        .expect("ran")
        .into_inner();
    assert!(
        !on_demand.snapshot_needed && !on_demand.allowed,
        "{on_demand:?}"
    );
    assert_eq!(outcomes(&on_demand.calls), ["quota:pre:circuit_open"]);

    // Half-open: asking ("allowed?") does not probe; the next operation
    // does, and an answer closes the circuit for every replica.
    plugins[0].set_behaviour(Behaviour::Allow);
    registry.wait_until_half_open("quota").await;
    let asked = other.ask(StackOperation::Create).await;
    assert_eq!(outcomes(&asked.calls), ["quota:pre:circuit_open"]);
    assert!(
        asked.reason.contains("a probe is under way"),
        "{}",
        asked.reason
    );
    assert!(journal.calls().is_empty(), "{:?}", journal.summary());
    let probed = registry.pre(StackOperation::Create, "team-a").await;
    assert!(probed.allowed, "{probed:?}");
    assert_eq!(outcomes(&probed.calls), ["quota:pre:allow"]);
    assert_eq!(
        circuit_state(&other.show("quota").await),
        pb::CircuitState::Closed
    );
    let after = other.pre(StackOperation::Create, "team-a").await;
    assert_eq!(outcomes(&after.calls), ["quota:pre:allow"]);
    other.stop().await;
    registry.stop().await;
}

#[tokio::test]
async fn a_failed_probe_opens_the_circuit_again_and_an_admin_may_close_it() {
    let registry = Registry::start().await;
    let journal = CallJournal::default();
    let plugins = start_plugins(
        &journal,
        &[("quota", Behaviour::Slow(Duration::from_secs(5)))],
    )
    .await;
    registry
        .register(with_breaker(
            plugin("quota", &plugins[0].endpoint, 1),
            1,
            300,
        ))
        .await;
    registry.pre(StackOperation::Create, "team-a").await;
    let opened = registry.show("quota").await.circuit.expect("circuit");
    registry.wait_until_half_open("quota").await;
    let probe = registry.pre(StackOperation::Create, "team-a").await;
    assert_eq!(outcomes(&probe.calls), ["quota:pre:timeout"]);
    let reopened = registry.show("quota").await;
    assert_eq!(circuit_state(&reopened), pb::CircuitState::Open);
    let circuit = reopened.circuit.expect("circuit");
    assert_eq!(
        circuit.opened_at, opened.opened_at,
        "open since the first time"
    );
    let seconds = |time: Option<prost_types::Timestamp>| {
        let time = time.expect("a time");
        (time.seconds, time.nanos)
    };
    assert!(seconds(circuit.open_until) > seconds(opened.open_until));
    assert_eq!(circuit.consecutive_failures, 2);

    let closed = registry
        .update(pb::UpdatePluginRequest {
            name: "quota".to_owned(),
            close_circuit: true,
            ..pb::UpdatePluginRequest::default()
        })
        .await;
    assert_eq!(circuit_state(&closed), pb::CircuitState::Closed);
    assert_eq!(closed.circuit.expect("circuit").consecutive_failures, 0);
    plugins[0].set_behaviour(Behaviour::Allow);
    let answer = registry.pre(StackOperation::Create, "team-a").await;
    assert_eq!(outcomes(&answer.calls), ["quota:pre:allow"]);
    registry.stop().await;
}

#[tokio::test]
async fn an_open_circuit_skips_a_warn_plugin_and_owes_it_no_post_operation() {
    let registry = Registry::start().await;
    let journal = CallJournal::default();
    let plugins = start_plugins(
        &journal,
        &[("audit-log", Behaviour::Allow), ("last", Behaviour::Allow)],
    )
    .await;
    registry
        .register(with_breaker(
            warn_mode(plugin(
                "flaky",
                &unreachable_endpoint().await.expect("port"),
                1,
            )),
            2,
            60_000,
        ))
        .await;
    registry
        .register(plugin("last", &plugins[1].endpoint, 2))
        .await;
    for _ in 0..2 {
        let answer = registry.pre(StackOperation::Update, "team-a").await;
        assert!(answer.allowed);
        assert_eq!(
            outcomes(&answer.calls),
            ["flaky:pre:error", "last:pre:allow"]
        );
    }
    let answer = registry.pre(StackOperation::Update, "team-a").await;
    assert!(answer.allowed, "{answer:?}");
    assert_eq!(
        outcomes(&answer.calls),
        ["flaky:pre:circuit_open", "last:pre:allow"]
    );
    assert!(!answer.calls[0].stopped_chain);
    assert_eq!(answer.post_operation_plugins, ["last"]);
    registry.stop().await;
}

#[tokio::test]
async fn an_observing_plugin_is_called_and_reported_but_never_stops_the_chain() {
    let registry = Registry::start().await;
    let journal = CallJournal::default();
    let plugins = start_plugins(
        &journal,
        &[
            ("new-policy", Behaviour::Deny("no public ports".into())),
            ("last", Behaviour::Allow),
        ],
    )
    .await;
    let registered = registry
        .register(pb::RegisterPluginRequest {
            enforce: Some(false),
            ..plugin("new-policy", &plugins[0].endpoint, 1)
        })
        .await;
    assert!(!registered.enforce);
    registry
        .register(plugin("last", &plugins[1].endpoint, 2))
        .await;
    let answer = registry.pre(StackOperation::Create, "team-a").await;
    assert!(answer.allowed, "{answer:?}");
    assert_eq!(
        outcomes(&answer.calls),
        ["new-policy:pre:deny", "last:pre:allow"]
    );
    assert!(answer.calls[0].observed && !answer.calls[0].stopped_chain);
    assert!(!answer.calls[1].observed);
    assert_eq!(answer.post_operation_plugins, ["new-policy", "last"]);
    let asked = registry.ask(StackOperation::Create).await;
    assert!(asked.allowed, "{asked:?}");
    assert!(asked.calls[0].observed);

    // Enforced from now on.
    registry
        .update(pb::UpdatePluginRequest {
            name: "new-policy".to_owned(),
            enforce: Some(true),
            ..pb::UpdatePluginRequest::default()
        })
        .await;
    let answer = registry.pre(StackOperation::Create, "team-a").await;
    assert!(!answer.allowed);
    assert_eq!(answer.reason, "plugin new-policy: no public ports");
    registry.stop().await;
}

#[tokio::test]
async fn breaker_settings_are_validated() {
    let registry = Registry::start().await;
    for (request, key) in [
        (
            pb::RegisterPluginRequest {
                breaker_cooldown_ms: Some(50),
                ..plugin("a", "http://127.0.0.1:1", 1)
            },
            "breaker_cooldown_ms",
        ),
        (
            pb::RegisterPluginRequest {
                breaker_failures: Some(1_001),
                ..plugin("a", "http://127.0.0.1:1", 1)
            },
            "breaker_failures",
        ),
    ] {
        let status = registry
            .registry()
            .register_plugin(registry.admin(request))
            .await
            .expect_err("refused");
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(status.message().starts_with(key), "{}", status.message());
    }
    let registered = registry
        .register(plugin("a", "http://127.0.0.1:1", 1))
        .await;
    assert_eq!(
        (
            registered.breaker_failures,
            registered.breaker_cooldown_ms,
            registered.enforce
        ),
        (5, 30_000, true),
        "the defaults"
    );
    assert_eq!(circuit_state(&registered), pb::CircuitState::Closed);
    let status = registry
        .registry()
        .update_plugin(registry.admin(pb::UpdatePluginRequest {
            name: "a".to_owned(),
            breaker_cooldown_ms: Some(3_600_001),
            ..pb::UpdatePluginRequest::default()
        }))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().starts_with("breaker_cooldown_ms"),
        "{}",
        status.message()
    );
    registry.stop().await;
}
