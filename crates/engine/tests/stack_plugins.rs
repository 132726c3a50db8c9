//! Lifecycle plug-points around stack operations, with a real
//! plugin-registry and real (recording) plugins on loopback: order, deny
//! with unwinding and no resource created, post-operations with the right
//! flag, every operation path, and an unreachable registry.

mod stack_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ember_engine::domain::{Stack, StackWideAction};
use ember_engine::resources::ResourceTypeRegistry;
use ember_engine::stacks::{
    CreateStack, PluginGate, RegistryUnavailable, StackOperations, UpdateStack,
};
use ember_engine::store::{SqlStackStore, StackStore, migrations::Migrator};
use ember_plugin_registry::testing::{Behaviour, CallJournal, TestPlugin};
use ember_proto::common::v1::StackOperation;
use ember_proto::pluginregistry::v1 as pb;
use ember_proto::pluginregistry::v1::plugin_registry_service_client::PluginRegistryServiceClient;
use ember_runtime::Identity;
use ember_runtime::database::{connect_and_migrate, sqlite_url};
use ember_runtime::identity::InternalCredential;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

const CREDENTIAL: &str = "engine-plugin-tests-internal-credential";

struct Registry {
    url: String,
    channel: Channel,
    shutdown: CancellationToken,
    _data_dir: tempfile::TempDir,
}

impl Registry {
    async fn start() -> Registry {
        let data_dir = tempfile::tempdir().expect("tempdir");
        let config = ember_plugin_registry::Config {
            database_url: sqlite_url(&data_dir.path().join("plugin-registry.db")),
            internal_credential: CREDENTIAL.to_owned(),
            request_timeout: Duration::from_secs(30),
            in_process: None,
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bound");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let shutdown = CancellationToken::new();
        tokio::spawn({
            let shutdown = shutdown.clone();
            async move {
                let _ = ember_plugin_registry::serve(config, listener, shutdown).await;
            }
        });
        let channel = Channel::from_shared(url.clone())
            .expect("url")
            .connect_lazy();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let serving = tonic_health::pb::health_client::HealthClient::new(channel.clone())
                .check(tonic_health::pb::HealthCheckRequest {
                    service: String::new(),
                })
                .await
                .is_ok_and(|response| response.into_inner().status == 1);
            if serving {
                break;
            }
            assert!(Instant::now() < deadline, "plugin-registry did not start");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Registry {
            url,
            channel,
            shutdown,
            _data_dir: data_dir,
        }
    }

    async fn register(&self, plugin: &TestPlugin, ordinal: i32, failure_mode: pb::FailureMode) {
        let mut request = tonic::Request::new(pb::RegisterPluginRequest {
            name: plugin.name.clone(),
            endpoint: plugin.endpoint.clone(),
            ordinal,
            failure_mode: failure_mode as i32,
            timeout_ms: 2000,
            ..Default::default()
        });
        Identity::new("operator", "ops", vec!["admin".to_owned()])
            .attach(&InternalCredential::new(CREDENTIAL), &mut request);
        PluginRegistryServiceClient::new(self.channel.clone())
            .register_plugin(request)
            .await
            .expect("registered");
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn operations(gate: PluginGate) -> (Arc<StackOperations>, tempfile::TempDir) {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let connection =
        connect_and_migrate::<Migrator>(&sqlite_url(&data_dir.path().join("engine.db")))
            .await
            .expect("migrated");
    let store: Arc<dyn StackStore> = Arc::new(SqlStackStore::new(connection));
    (
        StackOperations::with_plugins(store, Arc::new(ResourceTypeRegistry::builtin()), gate),
        data_dir,
    )
}

fn demo() -> Identity {
    Identity::new("demo", "demo", vec!["member".to_owned()])
}

async fn settled(operations: &StackOperations, name_or_id: &str) -> Stack {
    stack_support::settled(operations, &demo(), name_or_id, Duration::from_secs(20)).await
}

/// Post-operations run after the final state is written: wait for them.
async fn journal_reaches(journal: &CallJournal, length: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let summary = journal.summary();
        if summary.len() >= length {
            return summary;
        }
        assert!(Instant::now() < deadline, "journal stuck at {summary:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

const TEMPLATE: &str = "heat_template_version: 2021-04-16\nresources:\n  a: {type: OS::Heat::TestResource}\n  b: {type: OS::Heat::None, depends_on: a}\n";

fn create(name: &str, template: &str) -> CreateStack {
    CreateStack {
        name: name.to_owned(),
        template: template.to_owned(),
        disable_rollback: true,
        ..CreateStack::default()
    }
}

#[tokio::test]
async fn plugins_run_in_order_around_an_operation_and_get_their_post_operation() {
    let registry = Registry::start().await;
    let journal = CallJournal::default();
    let second = TestPlugin::start("second", Behaviour::Warn("looks big".into()), &journal)
        .await
        .expect("plugin");
    let first = TestPlugin::start("first", Behaviour::Allow, &journal)
        .await
        .expect("plugin");
    registry.register(&second, 20, pb::FailureMode::Fail).await;
    registry.register(&first, 10, pb::FailureMode::Fail).await;
    let gate = PluginGate::connect(&registry.url, None, CREDENTIAL, RegistryUnavailable::Fail)
        .expect("gate");
    let (operations, _data) = operations(gate).await;

    operations
        .create_stack(&demo(), create("ordered", TEMPLATE))
        .await
        .expect("create");
    let stack = settled(&operations, "ordered").await;
    assert_eq!(
        stack.stack_status(),
        "CREATE_COMPLETE",
        "{}",
        stack.status_reason
    );
    let summary = journal_reaches(&journal, 4).await;
    assert_eq!(
        summary,
        ["first:pre", "second:pre", "first:post", "second:post"]
    );
    assert!(
        journal
            .calls()
            .iter()
            .filter(|call| call.phase == "post")
            .all(|call| !call.failed)
    );

    let (events, _) = operations
        .events(&stack, None, 0, (0, None, false))
        .await
        .expect("events");
    let plugin_events: Vec<&str> = events
        .iter()
        .filter(|event| event.resource_type == "Ember::LifecyclePlugin")
        .map(|event| event.reason.as_str())
        .collect();
    assert!(
        plugin_events
            .iter()
            .any(|reason| reason.starts_with("plugin first: pre-operation ALLOW in")),
        "{plugin_events:?}"
    );
    assert!(
        plugin_events
            .iter()
            .any(|reason| reason.contains("WARN") && reason.contains("looks big")),
        "{plugin_events:?}"
    );
}

#[tokio::test]
async fn a_deny_stops_the_chain_unwinds_in_reverse_and_creates_nothing() {
    let registry = Registry::start().await;
    let journal = CallJournal::default();
    let one = TestPlugin::start("one", Behaviour::Allow, &journal)
        .await
        .expect("plugin");
    let two = TestPlugin::start("two", Behaviour::Allow, &journal)
        .await
        .expect("plugin");
    let quota = TestPlugin::start("quota", Behaviour::Deny("quota exceeded".into()), &journal)
        .await
        .expect("plugin");
    let never = TestPlugin::start("never", Behaviour::Allow, &journal)
        .await
        .expect("plugin");
    registry.register(&one, 1, pb::FailureMode::Fail).await;
    registry.register(&two, 2, pb::FailureMode::Fail).await;
    registry.register(&quota, 3, pb::FailureMode::Fail).await;
    registry.register(&never, 4, pb::FailureMode::Fail).await;
    let gate = PluginGate::connect(&registry.url, None, CREDENTIAL, RegistryUnavailable::Fail)
        .expect("gate");
    let (operations, _data) = operations(gate).await;

    operations
        .create_stack(&demo(), create("denied", TEMPLATE))
        .await
        .expect("create accepted");
    let stack = settled(&operations, "denied").await;
    assert_eq!(stack.stack_status(), "CREATE_FAILED");
    assert_eq!(stack.status_reason, "plugin quota: quota exceeded");
    let summary = journal_reaches(&journal, 5).await;
    assert_eq!(
        summary,
        ["one:pre", "two:pre", "quota:pre", "two:post", "one:post"]
    );
    assert!(
        journal
            .calls()
            .iter()
            .filter(|call| call.phase == "post")
            .all(|call| call.failed)
    );
    let resources = operations.resources(&stack, 0).await.expect("resources");
    assert!(
        resources
            .iter()
            .all(|view| view.resource.resource_status() == "INIT_COMPLETE"),
        "no resource was created"
    );
}

#[tokio::test]
async fn every_operation_path_calls_the_plugins_with_its_operation() {
    let registry = Registry::start().await;
    let journal = CallJournal::default();
    let audit = TestPlugin::start("audit", Behaviour::Allow, &journal)
        .await
        .expect("plugin");
    registry.register(&audit, 1, pb::FailureMode::Warn).await;
    let gate = PluginGate::connect(&registry.url, None, CREDENTIAL, RegistryUnavailable::Fail)
        .expect("gate");
    let (operations, _data) = operations(gate).await;

    operations
        .create_stack(&demo(), create("paths", TEMPLATE))
        .await
        .expect("create");
    settled(&operations, "paths").await;
    let mut patch = UpdateStack {
        name_or_id: "paths".into(),
        existing: true,
        ..UpdateStack::default()
    };
    patch.template = TEMPLATE.replace(
        "{type: OS::Heat::None, depends_on: a}",
        "{type: OS::Heat::Value, properties: {value: 1}}",
    );
    operations
        .update_stack(&demo(), patch)
        .await
        .expect("update");
    settled(&operations, "paths").await;
    for action in [
        StackWideAction::Suspend,
        StackWideAction::Resume,
        StackWideAction::Check,
    ] {
        operations
            .run_stack_wide_action(&demo(), "paths", action)
            .await
            .expect("action");
        settled(&operations, "paths").await;
    }
    let stack = operations
        .find_stack(&demo(), "paths")
        .await
        .expect("stack");
    operations
        .delete_stack(&demo(), "paths")
        .await
        .expect("delete");
    settled(&operations, &stack.id.to_string()).await;
    operations
        .create_stack(&demo(), create("abandoned", TEMPLATE))
        .await
        .expect("create");
    settled(&operations, "abandoned").await;
    operations
        .abandon_stack(&demo(), "abandoned")
        .await
        .expect("abandon");

    let expected = [
        StackOperation::Create,
        StackOperation::Update,
        StackOperation::Suspend,
        StackOperation::Resume,
        StackOperation::Check,
        StackOperation::Delete,
        StackOperation::Create,
        StackOperation::Abandon,
    ];
    journal_reaches(&journal, expected.len() * 2).await;
    let pre_operations: Vec<i32> = journal
        .calls()
        .iter()
        .filter(|call| call.phase == "pre")
        .map(|call| call.operation)
        .collect();
    assert_eq!(pre_operations, expected.map(|operation| operation as i32));
}

#[tokio::test]
async fn a_failed_operation_gives_post_operations_the_failed_flag() {
    let registry = Registry::start().await;
    let journal = CallJournal::default();
    let watcher = TestPlugin::start("watcher", Behaviour::Allow, &journal)
        .await
        .expect("plugin");
    registry.register(&watcher, 1, pb::FailureMode::Fail).await;
    let gate = PluginGate::connect(&registry.url, None, CREDENTIAL, RegistryUnavailable::Fail)
        .expect("gate");
    let (operations, _data) = operations(gate).await;
    let failing = "heat_template_version: 2021-04-16\nresources:\n  bad: {type: OS::Heat::TestResource, properties: {fail: true}}\n";
    operations
        .create_stack(&demo(), create("failing", failing))
        .await
        .expect("create");
    let stack = settled(&operations, "failing").await;
    assert_eq!(stack.stack_status(), "CREATE_FAILED");
    journal_reaches(&journal, 2).await;
    let post = journal
        .calls()
        .into_iter()
        .find(|call| call.phase == "post")
        .expect("post");
    assert!(post.failed);
    assert!(
        post.reason.contains("Test Resource failed"),
        "{}",
        post.reason
    );
}

#[tokio::test]
async fn an_unreachable_registry_fails_the_operation_unless_configured_to_allow() {
    let unreachable = "http://127.0.0.1:9";
    let gate = PluginGate::connect(unreachable, None, CREDENTIAL, RegistryUnavailable::Fail)
        .expect("gate");
    let (strict, _data) = operations(gate).await;
    strict
        .create_stack(&demo(), create("strict", TEMPLATE))
        .await
        .expect("create");
    let stack = settled(&strict, "strict").await;
    assert_eq!(stack.stack_status(), "CREATE_FAILED");
    assert!(
        stack
            .status_reason
            .starts_with("the plugin registry is unavailable"),
        "{}",
        stack.status_reason
    );

    let gate = PluginGate::connect(unreachable, None, CREDENTIAL, RegistryUnavailable::Allow)
        .expect("gate");
    let (lenient, _data) = operations(gate).await;
    lenient
        .create_stack(&demo(), create("lenient", TEMPLATE))
        .await
        .expect("create");
    let stack = settled(&lenient, "lenient").await;
    assert_eq!(stack.stack_status(), "CREATE_COMPLETE");
    let (events, _) = lenient
        .events(&stack, None, 0, (0, None, false))
        .await
        .expect("events");
    assert!(
        events
            .iter()
            .any(|event| event.resource_name == "plugin-registry"),
        "the outage is an event"
    );
}

#[tokio::test]
async fn an_update_shows_plugins_the_stack_before_it_and_as_it_will_be() {
    let registry = Registry::start().await;
    let journal = CallJournal::default();
    let audit = TestPlugin::start("audit", Behaviour::Allow, &journal)
        .await
        .expect("plugin");
    registry.register(&audit, 1, pb::FailureMode::Fail).await;
    let gate = PluginGate::connect(&registry.url, None, CREDENTIAL, RegistryUnavailable::Fail)
        .expect("gate");
    let (operations, _data) = operations(gate).await;
    let before = "heat_template_version: 2021-04-16
resources:
  a: {type: OS::Heat::TestResource}
  b: {type: OS::Heat::None, depends_on: a}
  inner:
    type: OS::Heat::Stack
    properties:
      template: {get_file: inner.yaml}
";
    let mut request = create("shown", before);
    request.files.insert(
        "inner.yaml".to_owned(),
        "heat_template_version: 2021-04-16\nresources:\n  x: {type: OS::Heat::None}\n".to_owned(),
    );
    operations
        .create_stack(&demo(), request)
        .await
        .expect("create");
    let created = settled(&operations, "shown").await;
    assert_eq!(
        created.stack_status(),
        "CREATE_COMPLETE",
        "{}",
        created.status_reason
    );
    journal_reaches(&journal, 2).await;
    journal.clear();

    let mut patch = UpdateStack {
        name_or_id: "shown".into(),
        existing: true,
        ..UpdateStack::default()
    };
    patch.template = before.replace(
        "  b: {type: OS::Heat::None, depends_on: a}\n",
        "  c: {type: OS::Heat::Value, properties: {value: 1}}\n",
    );
    operations
        .update_stack(&demo(), patch)
        .await
        .expect("update");
    let updated = settled(&operations, "shown").await;
    assert_eq!(
        updated.stack_status(),
        "UPDATE_COMPLETE",
        "{}",
        updated.status_reason
    );
    journal_reaches(&journal, 2).await;
    let calls = journal.calls();
    let pre = calls
        .iter()
        .find(|call| call.phase == "pre")
        .expect("a pre-operation");
    // The stack as the update will make it: the new resource is there,
    // not created yet; the one it removes is still there.
    assert!(
        pre.resources.contains(&"c:INIT_COMPLETE".to_owned()),
        "{pre:?}"
    );
    assert!(
        pre.resources.contains(&"b:CREATE_COMPLETE".to_owned()),
        "{pre:?}"
    );
    // The stack before it: its own resources, template and plan, and its
    // nested stack.
    let previous = pre
        .previous
        .as_ref()
        .expect("an update sends the previous stack");
    assert_eq!(
        previous.resources,
        [
            "a:CREATE_COMPLETE",
            "b:CREATE_COMPLETE",
            "inner:CREATE_COMPLETE"
        ],
        "{previous:?}"
    );
    assert_eq!(previous.template_resources, ["a", "b", "inner"]);
    assert!(
        previous.planned.contains(&"OS::Heat::None=2".to_owned())
            && !previous
                .planned
                .iter()
                .any(|planned| planned.starts_with("OS::Heat::Value")),
        "the plan of the template before the update: {previous:?}"
    );
    assert_eq!(previous.nested_stacks.len(), 1, "{previous:?}");
    let post = calls
        .iter()
        .find(|call| call.phase == "post")
        .expect("a post-operation");
    assert!(post.previous.is_none());
    assert!(
        post.resources.contains(&"c:UPDATE_COMPLETE".to_owned())
            || post.resources.contains(&"c:CREATE_COMPLETE".to_owned()),
        "{post:?}"
    );
    assert!(
        !post
            .resources
            .iter()
            .any(|resource| resource.starts_with("b:")),
        "{post:?}"
    );
}
