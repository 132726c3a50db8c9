//! A real lifecycle plugin end to end: the shipped policy plugin, registered
//! through the gateway, denies a template of 101 servers created through
//! the REST API (nothing is created) and lets 100 through.

use std::time::Duration;

use ember_policy_plugin::rules::Policy;
use ember_proto::pluginregistry::v1::RegisterPluginRequest;
use ember_proto::pluginregistry::v1::plugin_registry_service_client::PluginRegistryServiceClient;
use ember_tests::{TestEmber, with_bearer};
use reqwest::StatusCode;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::HeatRest;

fn servers(count: usize) -> Value {
    let resources: Map<String, Value> = (0..count)
        .map(|index| {
            (
                format!("server-{index}"),
                json!({"type": "OS::Nova::Server", "properties": {"flavor": "m1.tiny", "image": "cirros"}}),
            )
        })
        .collect();
    json!({"heat_template_version": "2021-04-16", "resources": resources})
}

#[tokio::test]
async fn the_policy_plugin_denies_101_servers_through_the_rest_api() {
    let ember = TestEmber::start().await;
    let policy = Policy::from_toml(
        "[[max_resources]]\ntype = \"OS::Nova::Server\"\nlimit = 100\nverdict = \"deny\"\n",
    )
    .expect("policy");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bound");
    let endpoint = format!("http://{}", listener.local_addr().expect("address"));
    let shutdown = CancellationToken::new();
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            let _ = ember_policy_plugin::serve(policy, listener, shutdown).await;
        }
    });
    PluginRegistryServiceClient::new(ember.gateway_channel().await)
        .register_plugin(with_bearer(
            RegisterPluginRequest {
                name: "policy".into(),
                endpoint,
                ordinal: 10,
                timeout_ms: 5000,
                ..Default::default()
            },
            ember.admin_token(),
        ))
        .await
        .expect("registered through the gateway");

    let member = HeatRest::member(&ember);
    let answer = member
        .post(
            "/stacks",
            json!({"stack_name": "too-big", "template": servers(101)}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let id = answer.body["stack"]["id"].as_str().expect("id").to_owned();
    let stack = member
        .wait_until_settled(&format!("/stacks/too-big/{id}"))
        .await;
    assert_eq!(stack["stack_status"], "CREATE_FAILED", "{stack}");
    let reason = stack["stack_status_reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("plugin policy: "), "{reason}");
    assert!(reason.contains("101"), "{reason}");
    let resources = member.get(&format!("/stacks/too-big/{id}/resources")).await;
    let statuses: Vec<&str> = resources.body["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|resource| resource["resource_status"].as_str())
        .collect();
    assert_eq!(statuses.len(), 101);
    assert!(
        statuses.iter().all(|status| *status == "INIT_COMPLETE"),
        "nothing was created"
    );

    let answer = member
        .post(
            "/stacks",
            json!({"stack_name": "just-fits", "template": servers(100), "timeout_mins": 5}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let id = answer.body["stack"]["id"].as_str().expect("id").to_owned();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let shown = member.get(&format!("/stacks/just-fits/{id}")).await;
        let status = shown.body["stack"]["stack_status"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if !status.ends_with("IN_PROGRESS") {
            assert_eq!(status, "CREATE_COMPLETE", "{shown:?}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The limit holds through nesting: a ResourceGroup of 101 servers (one
    // group in the template, its members not yet created) is denied
    // before anything is made, as 101 top-level servers are.
    let grouped = json!({"heat_template_version": "2021-04-16",
        "parameters": {"size": {"type": "number", "default": 101}},
        "resources": {"fleet": {"type": "OS::Heat::ResourceGroup", "properties": {
            "count": {"get_param": "size"},
            "resource_def": {"type": "OS::Nova::Server",
                "properties": {"flavor": "m1.tiny", "image": "cirros"}}}}}});
    let answer = member
        .post(
            "/stacks",
            json!({"stack_name": "nested-too-big", "template": grouped}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let id = answer.body["stack"]["id"].as_str().expect("id").to_owned();
    let stack = member
        .wait_until_settled(&format!("/stacks/nested-too-big/{id}"))
        .await;
    assert_eq!(stack["stack_status"], "CREATE_FAILED", "{stack}");
    let reason = stack["stack_status_reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("plugin policy: ") && reason.contains("101 OS::Nova::Server"),
        "{reason}"
    );
    let resources = member
        .get(&format!("/stacks/nested-too-big/{id}/resources"))
        .await;
    assert_eq!(
        resources.body["resources"][0]["resource_status"], "INIT_COMPLETE",
        "the group was never created: {resources:?}"
    );
    shutdown.cancel();
    ember.stop().await;
}
