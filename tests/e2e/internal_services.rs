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

/// Reflection on an internal port would list the internal services to
/// anyone who reaches it: it answers only the internal credential (health
/// stays open, above).
#[tokio::test]
async fn internal_ports_answer_reflection_only_with_the_internal_credential() {
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::{ServerReflectionRequest, server_reflection_response};

    let ember = TestEmber::start().await;
    let list = || ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    for address in [
        ember.running.engine_addr,
        ember.running.lifecycle_hook_addr,
        ember.running.plugin_registry_addr,
    ] {
        let mut client = ServerReflectionClient::new(channel(address).await);
        let refused = client
            .server_reflection_info(futures::stream::iter([list()]))
            .await
            .expect_err("no credential");
        assert_eq!(
            refused.code(),
            Code::Unauthenticated,
            "{address}: {refused:?}"
        );

        let mut request = tonic::Request::new(futures::stream::iter([list()]));
        Identity::new("gateway", "demo", vec!["admin".into()]).attach(
            &InternalCredential::new(&ember.secrets().internal_credential),
            &mut request,
        );
        let mut answers = client
            .server_reflection_info(request)
            .await
            .expect("with the credential")
            .into_inner();
        let answer = answers.message().await.expect("answer").expect("one");
        let Some(server_reflection_response::MessageResponse::ListServicesResponse(services)) =
            answer.message_response
        else {
            panic!("{address}: not a list: {answer:?}");
        };
        assert!(!services.service.is_empty(), "{address}");
    }
    ember.stop().await;
}
