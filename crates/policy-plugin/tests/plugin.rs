//! The policy plugin as a real gRPC server: called directly, through the
//! plugin-registry's runner, and as a binary given a bad rules file.

use std::net::SocketAddr;
use std::time::Duration;

use ember_policy_plugin::Policy;
use ember_proto::common::v1::StackOperation;
use ember_proto::plugin::v1 as plugin_pb;
use ember_proto::plugin::v1::lifecycle_plugin_client::LifecyclePluginClient;
use ember_proto::pluginregistry::v1 as registry_pb;
use ember_proto::pluginregistry::v1::plugin_registry_service_client::PluginRegistryServiceClient;
use ember_proto::pluginregistry::v1::plugin_runner_service_client::PluginRunnerServiceClient;
use ember_runtime::Identity;
use ember_runtime::identity::InternalCredential;
use ember_runtime::testing::wait_for;
use prost_types::value::Kind;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

const RULES: &str = r#"
[[max_resources]]
type = "OS::Nova::Server"
limit = 100
verdict = "deny"

[[required_properties]]
type = "OS::Nova::Server"
property = "image"
"#;

const CREDENTIAL: &str = "a-test-internal-credential-of-32-characters";

/// Waits until the gRPC server at `address` reports `service` SERVING.
async fn wait_serving(address: SocketAddr, service: &str) -> Channel {
    let channel = Channel::from_shared(format!("http://{address}"))
        .expect("url")
        .connect_lazy();
    wait_for(service, Duration::from_secs(10), || {
        let channel = channel.clone();
        async move {
            tonic_health::pb::health_client::HealthClient::new(channel)
                .check(tonic_health::pb::HealthCheckRequest {
                    service: service.to_owned(),
                })
                .await
                .is_ok_and(|response| response.into_inner().status == 1)
        }
    })
    .await;
    channel
}

struct Running {
    address: SocketAddr,
    channel: Channel,
    shutdown: CancellationToken,
}

async fn start_policy_plugin(rules: &str) -> Running {
    let policy = Policy::from_toml(rules).expect("valid rules");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bound");
    let address = listener.local_addr().expect("address");
    let shutdown = CancellationToken::new();
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            ember_policy_plugin::serve(policy, listener, shutdown)
                .await
                .expect("policy plugin serves");
        }
    });
    let channel = wait_serving(address, "ember.plugin.v1.LifecyclePlugin").await;
    Running {
        address,
        channel,
        shutdown,
    }
}

fn server(name: &str) -> plugin_pb::ResourceSnapshot {
    plugin_pb::ResourceSnapshot {
        name: name.to_owned(),
        r#type: "OS::Nova::Server".to_owned(),
        properties: Some(prost_types::Struct {
            fields: [(
                "image".to_owned(),
                prost_types::Value {
                    kind: Some(Kind::StringValue("cirros".to_owned())),
                },
            )]
            .into_iter()
            .collect(),
        }),
        status: "INIT_COMPLETE".to_owned(),
        physical_id: String::new(),
    }
}

/// A stack of `total` servers: 40 in the root, the rest in a nested group.
fn snapshot(total: usize) -> plugin_pb::StackSnapshot {
    let in_root = total.min(40);
    plugin_pb::StackSnapshot {
        stack_id: "c0ffee00-0000-4000-8000-000000000001".to_owned(),
        stack_name: "web".to_owned(),
        project_id: "team-a".to_owned(),
        user_id: "alice".to_owned(),
        resources: (0..in_root)
            .map(|i| server(&format!("server_{i}")))
            .collect(),
        nested_stacks: vec![plugin_pb::StackSnapshot {
            stack_name: "group".to_owned(),
            project_id: "team-a".to_owned(),
            resources: (in_root..total)
                .map(|i| server(&format!("member_{i}")))
                .collect(),
            ..plugin_pb::StackSnapshot::default()
        }],
        ..plugin_pb::StackSnapshot::default()
    }
}

async fn ask(
    channel: &Channel,
    operation: StackOperation,
    total: usize,
) -> plugin_pb::PreOperationResponse {
    LifecyclePluginClient::new(channel.clone())
        .pre_operation(plugin_pb::PreOperationRequest {
            operation: operation as i32,
            stack: Some(snapshot(total)),
            previous: None,
            dry_run: false,
        })
        .await
        .expect("answered")
        .into_inner()
}

#[tokio::test]
async fn the_policy_plugin_denies_101_servers_and_allows_100() {
    let plugin = start_policy_plugin(RULES).await;
    let allowed = ask(&plugin.channel, StackOperation::Create, 100).await;
    assert_eq!(
        allowed.verdict,
        plugin_pb::Verdict::Allow as i32,
        "{allowed:?}"
    );

    let denied = ask(&plugin.channel, StackOperation::Create, 101).await;
    assert_eq!(denied.verdict, plugin_pb::Verdict::Deny as i32);
    assert_eq!(
        denied.message,
        "101 OS::Nova::Server resources (nested stacks included) exceed the limit of 100"
    );
    let update = ask(&plugin.channel, StackOperation::Update, 101).await;
    assert_eq!(update.verdict, plugin_pb::Verdict::Deny as i32);
    let delete = ask(&plugin.channel, StackOperation::Delete, 101).await;
    assert_eq!(
        delete.verdict,
        plugin_pb::Verdict::Allow as i32,
        "deleting is never blocked by a size rule"
    );

    let status = LifecyclePluginClient::new(plugin.channel.clone())
        .pre_operation(plugin_pb::PreOperationRequest {
            operation: StackOperation::Create as i32,
            stack: None,
            previous: None,
            dry_run: false,
        })
        .await
        .expect_err("no snapshot");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().starts_with("stack:"),
        "{}",
        status.message()
    );

    LifecyclePluginClient::new(plugin.channel.clone())
        .post_operation(plugin_pb::PostOperationRequest {
            operation: StackOperation::Create as i32,
            stack: Some(snapshot(1)),
            failed: true,
            reason: "plugin other: no".to_owned(),
        })
        .await
        .expect("post-operation answered");
    plugin.shutdown.cancel();
}

#[tokio::test]
async fn the_runner_stops_a_create_with_the_policy_plugins_reason() {
    let plugin = start_policy_plugin(RULES).await;
    let data_dir = tempfile::tempdir().expect("dir");
    let config = ember_plugin_registry::Config {
        database_url: ember_runtime::database::sqlite_url(&data_dir.path().join("registry.db")),
        internal_credential: CREDENTIAL.to_owned(),
        request_timeout: Duration::from_secs(30),
        in_process: None,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bound");
    let registry_address = listener.local_addr().expect("address");
    let shutdown = CancellationToken::new();
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            ember_plugin_registry::serve(config, listener, shutdown)
                .await
                .expect("registry serves");
        }
    });
    let channel = wait_serving(
        registry_address,
        "ember.pluginregistry.v1.PluginRunnerService",
    )
    .await;
    let as_admin = |message| {
        let mut request = tonic::Request::new(message);
        Identity::new("admin", "demo", vec!["admin".to_owned()])
            .attach(&InternalCredential::new(CREDENTIAL), &mut request);
        request
    };
    PluginRegistryServiceClient::new(channel.clone())
        .register_plugin(as_admin(registry_pb::RegisterPluginRequest {
            name: "policy".to_owned(),
            endpoint: format!("http://{}", plugin.address),
            ordinal: 10,
            ..registry_pb::RegisterPluginRequest::default()
        }))
        .await
        .expect("registered");

    let mut runner = PluginRunnerServiceClient::new(channel);
    let run = |total: usize| {
        let mut request = tonic::Request::new(registry_pb::RunPreOperationsRequest {
            operation: StackOperation::Create as i32,
            project_id: "team-a".to_owned(),
            stack: Some(snapshot(total)),
            previous: None,
            snapshot_on_demand: false,
            dry_run: false,
            break_glass: false,
        });
        Identity::new("alice", "team-a", vec!["member".to_owned()])
            .attach(&InternalCredential::new(CREDENTIAL), &mut request);
        request
    };
    let answer = runner
        .run_pre_operations(run(101))
        .await
        .expect("ran")
        .into_inner();
    assert!(!answer.allowed);
    assert_eq!(
        answer.reason,
        "plugin policy: 101 OS::Nova::Server resources (nested stacks included) exceed the limit of 100"
    );
    let answer = runner
        .run_pre_operations(run(100))
        .await
        .expect("ran")
        .into_inner();
    assert!(answer.allowed, "{answer:?}");
    assert_eq!(answer.post_operation_plugins, ["policy"]);
    shutdown.cancel();
    plugin.shutdown.cancel();
}

#[test]
fn the_binary_refuses_a_bad_rules_file_naming_the_key() {
    let directory = tempfile::tempdir().expect("dir");
    let rules = directory.path().join("rules.toml");
    std::fs::write(
        &rules,
        "[[max_resources]]\ntype = \"OS::Nova::Server\"\nlimit = \"a hundred\"\n",
    )
    .expect("written");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ember-policy-plugin"))
        .arg("--rules")
        .arg(&rules)
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("max_resources[0].limit"),
        "the key is named: {stderr}"
    );
}
