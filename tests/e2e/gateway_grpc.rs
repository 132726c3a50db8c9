//! gRPC through the gateway: authentication, identity forwarding, errors.

use ember_proto::engine::v1::identity_service_client::IdentityServiceClient;
use ember_proto::engine::v1::stack_service_client::StackServiceClient;
use ember_proto::engine::v1::{GetStackRequest, ListStacksRequest, WhoAmIRequest};
use ember_proto::lifecyclehook::v1::ListPendingRequest;
use ember_proto::lifecyclehook::v1::lifecycle_hook_service_client::LifecycleHookServiceClient;
use ember_proto::pluginregistry::v1 as registry;
use ember_proto::pluginregistry::v1::plugin_registry_service_client::PluginRegistryServiceClient;
use ember_runtime::Identity;
use ember_runtime::auth::TokenSigner;
use ember_tests::{TestEmber, with_bearer};
use tonic::Code;

#[tokio::test]
async fn a_valid_token_reaches_the_engine_with_its_identity() {
    let ember = TestEmber::start().await;
    let mut client = IdentityServiceClient::new(ember.gateway_channel().await);
    let identity = client
        .who_am_i(with_bearer(WhoAmIRequest {}, ember.member_token()))
        .await
        .expect("authenticated call")
        .into_inner();
    assert_eq!(identity.user_id, "demo");
    assert_eq!(identity.project_id, "demo");
    assert_eq!(identity.roles, ["member"]);

    let stacks = StackServiceClient::new(ember.gateway_channel().await)
        .list_stacks(with_bearer(
            ListStacksRequest::default(),
            ember.member_token(),
        ))
        .await
        .expect("list stacks")
        .into_inner();
    assert!(stacks.stacks.is_empty());
    ember.stop().await;
}

#[tokio::test]
async fn calls_without_a_token_are_unauthenticated_with_a_clear_message() {
    let ember = TestEmber::start().await;
    let status = StackServiceClient::new(ember.gateway_channel().await)
        .list_stacks(ListStacksRequest::default())
        .await
        .expect_err("refused");
    assert_eq!(status.code(), Code::Unauthenticated);
    assert!(
        status.message().contains("authentication required"),
        "{}",
        status.message()
    );
    ember.stop().await;
}

#[tokio::test]
async fn refused_calls_are_counted_once_in_the_gateway_metrics() {
    let ember = TestEmber::start().await;
    let mut stacks = StackServiceClient::new(ember.gateway_channel().await);
    stacks
        .list_stacks(ListStacksRequest::default())
        .await
        .expect_err("no token");
    stacks
        .list_stacks(with_bearer(ListStacksRequest::default(), "not-a-token"))
        .await
        .expect_err("a forged token");
    stacks
        .list_stacks(with_bearer(
            ListStacksRequest::default(),
            ember.member_token(),
        ))
        .await
        .expect("a valid token");
    let text = ember.metrics().await;
    assert!(
        text.contains("ember_gateway_unauthenticated_total 2"),
        "{text}"
    );
    ember.stop().await;
}

#[tokio::test]
async fn forged_and_expired_tokens_are_refused() {
    let ember = TestEmber::start().await;
    let identity = Identity::new("mallory", "demo", vec!["admin".to_owned()]);
    let forged = TokenSigner::new(&"f".repeat(40))
        .issue(&identity, std::time::Duration::from_secs(60))
        .expect("issued");
    let status = IdentityServiceClient::new(ember.gateway_channel().await)
        .who_am_i(with_bearer(WhoAmIRequest {}, &forged))
        .await
        .expect_err("forged");
    assert_eq!(status.code(), Code::Unauthenticated);
    assert!(
        status.message().contains("signature does not match"),
        "{}",
        status.message()
    );

    let status = IdentityServiceClient::new(ember.gateway_channel().await)
        .who_am_i(with_bearer(WhoAmIRequest {}, "not.a.token"))
        .await
        .expect_err("malformed");
    assert_eq!(status.code(), Code::Unauthenticated);
    assert!(
        status.message().contains("malformed"),
        "{}",
        status.message()
    );
    ember.stop().await;
}

#[tokio::test]
async fn identity_headers_sent_by_a_caller_are_ignored() {
    let ember = TestEmber::start().await;
    let mut request = with_bearer(WhoAmIRequest {}, ember.member_token());
    for (name, value) in [
        ("x-ember-user-id", "mallory"),
        ("x-ember-project-id", "other"),
        ("x-ember-roles", "admin"),
        ("x-ember-internal-credential", "guess"),
    ] {
        request
            .metadata_mut()
            .insert(name, value.parse().expect("header"));
    }
    let identity = IdentityServiceClient::new(ember.gateway_channel().await)
        .who_am_i(request)
        .await
        .expect("authenticated")
        .into_inner();
    assert_eq!(identity.user_id, "demo");
    assert_eq!(identity.roles, ["member"]);
    ember.stop().await;
}

#[tokio::test]
async fn domain_errors_keep_their_codes_through_the_gateway() {
    let ember = TestEmber::start().await;
    let mut stacks = StackServiceClient::new(ember.gateway_channel().await);
    let status = stacks
        .get_stack(with_bearer(
            GetStackRequest {
                stack: "absent".into(),
            },
            ember.member_token(),
        ))
        .await
        .expect_err("not found");
    assert_eq!(status.code(), Code::NotFound);
    assert!(
        status.message().contains("\"absent\""),
        "{}",
        status.message()
    );
    let status = stacks
        .list_stacks(with_bearer(
            ListStacksRequest {
                marker: "nope".into(),
                ..Default::default()
            },
            ember.member_token(),
        ))
        .await
        .expect_err("bad marker");
    assert_eq!(status.code(), Code::InvalidArgument);
    let status = LifecycleHookServiceClient::new(ember.gateway_channel().await)
        .list_pending(with_bearer(
            ListPendingRequest {
                cluster_id: "x".into(),
                ..Default::default()
            },
            ember.member_token(),
        ))
        .await
        .expect_err("bad cluster id");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().contains("cluster_id"),
        "{}",
        status.message()
    );
    ember.stop().await;
}

fn register_request(name: &str) -> registry::RegisterPluginRequest {
    registry::RegisterPluginRequest {
        name: name.to_owned(),
        endpoint: "http://127.0.0.1:7000".to_owned(),
        ordinal: 10,
        ..Default::default()
    }
}

#[tokio::test]
async fn the_plugin_registry_is_admin_only() {
    let ember = TestEmber::start().await;
    let mut plugins = PluginRegistryServiceClient::new(ember.gateway_channel().await);
    let status = plugins
        .register_plugin(with_bearer(register_request("quota"), ember.member_token()))
        .await
        .expect_err("members may not register");
    assert_eq!(status.code(), Code::PermissionDenied);
    assert!(
        status.message().contains("admin only"),
        "{}",
        status.message()
    );

    let registered = plugins
        .register_plugin(with_bearer(register_request("quota"), ember.admin_token()))
        .await
        .expect("admin registers")
        .into_inner();
    assert_eq!(registered.timeout_ms, 5000);
    assert!(registered.enabled);
    let listed = plugins
        .list_plugins(with_bearer(
            registry::ListPluginsRequest {},
            ember.admin_token(),
        ))
        .await
        .expect("listed")
        .into_inner();
    assert_eq!(listed.plugins.len(), 1);

    let status = plugins
        .register_plugin(with_bearer(register_request("quota"), ember.admin_token()))
        .await
        .expect_err("duplicate");
    assert_eq!(status.code(), Code::FailedPrecondition);
    let status = plugins
        .register_plugin(with_bearer(
            registry::RegisterPluginRequest {
                endpoint: "ftp://x".into(),
                ..register_request("bad")
            },
            ember.admin_token(),
        ))
        .await
        .expect_err("bad endpoint");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().contains("endpoint"),
        "{}",
        status.message()
    );
    let after = plugins
        .list_plugins(with_bearer(
            registry::ListPluginsRequest {},
            ember.admin_token(),
        ))
        .await
        .expect("listed")
        .into_inner();
    assert_eq!(
        after.plugins.len(),
        1,
        "refused registrations leave nothing behind"
    );
    ember.stop().await;
}

#[tokio::test]
async fn an_unknown_service_is_unimplemented() {
    let ember = TestEmber::start().await;
    let mut client = tonic::client::Grpc::new(ember.gateway_channel().await);
    client.ready().await.expect("ready");
    let codec = tonic_prost::ProstCodec::<WhoAmIRequest, WhoAmIRequest>::default();
    let status = client
        .unary(
            with_bearer(WhoAmIRequest {}, ember.member_token()),
            "/ember.engine.v9.Nope/Call".parse().expect("path"),
            codec,
        )
        .await
        .expect_err("unknown");
    assert_eq!(status.code(), Code::Unimplemented);
    assert!(
        status.message().contains("ember.engine.v9.Nope"),
        "{}",
        status.message()
    );
    ember.stop().await;
}
