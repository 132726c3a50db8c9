//! The internal services accept calls only from other Ember services.

use ember_proto::engine::v1::WhoAmIRequest;
use ember_proto::engine::v1::identity_service_client::IdentityServiceClient;
use ember_proto::pluginregistry::v1::ListPluginsRequest;
use ember_proto::pluginregistry::v1::plugin_registry_service_client::PluginRegistryServiceClient;
use ember_runtime::Identity;
use ember_runtime::identity::InternalCredential;
use ember_tests::{TestEmber, channel, with_bearer};
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

#[tokio::test]
async fn an_internal_service_refuses_a_call_without_the_internal_credential() {
    let ember = TestEmber::start().await;
    let engine = channel(ember.running.engine_addr).await;

    // Even a valid user token is not enough: only the gateway may call in.
    let status = IdentityServiceClient::new(engine.clone())
        .who_am_i(with_bearer(WhoAmIRequest {}, ember.admin_token()))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), Code::Unauthenticated);
    assert!(
        status
            .message()
            .contains("internal service credential is missing"),
        "{}",
        status.message()
    );

    let mut forged = tonic::Request::new(WhoAmIRequest {});
    Identity::new("mallory", "demo", vec!["admin".into()])
        .attach(&InternalCredential::new("not-the-credential"), &mut forged);
    let status = IdentityServiceClient::new(engine.clone())
        .who_am_i(forged)
        .await
        .expect_err("refused");
    assert_eq!(status.code(), Code::Unauthenticated);
    assert!(
        status.message().contains("credential is wrong"),
        "{}",
        status.message()
    );

    let registry = channel(ember.running.plugin_registry_addr).await;
    let status = PluginRegistryServiceClient::new(registry)
        .list_plugins(ListPluginsRequest {})
        .await
        .expect_err("refused");
    assert_eq!(status.code(), Code::Unauthenticated);
    ember.stop().await;
}

#[tokio::test]
async fn internal_services_answer_health_checks_without_credentials() {
    let ember = TestEmber::start().await;
    for address in [
        ember.running.engine_addr,
        ember.running.lifecycle_hook_addr,
        ember.running.plugin_registry_addr,
    ] {
        let response = HealthClient::new(channel(address).await)
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .expect("health")
            .into_inner();
        assert_eq!(response.status, 1, "SERVING at {address}");
    }
    ember.stop().await;
}

#[test]
fn the_gateway_forwards_exactly_the_services_the_services_serve() {
    let mut served: Vec<&str> = ember_engine::SERVICE_NAMES
        .iter()
        .chain(ember_lifecycle_hook::SERVICE_NAMES)
        .chain(ember_plugin_registry::SERVICE_NAMES)
        .copied()
        .collect();
    let mut forwarded = ember_api_gateway::upstream::public_service_names();
    served.sort_unstable();
    forwarded.sort_unstable();
    assert_eq!(served, forwarded);
}
