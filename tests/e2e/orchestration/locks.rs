//! The maintenance lock through the Orchestration REST API and gRPC: lock
//! and unlock actions, the allowed-action table answering 409 with the lock
//! named, the dry-run endpoint, `stack_lock` in show and list, bad bodies,
//! and the admin rule.

use ember_proto::engine::v1::stack_service_client::StackServiceClient;
use ember_proto::engine::v1::{CheckOperationRequest, LockStackRequest};
use ember_tests::{TestEmber, with_bearer};
use reqwest::{Method, StatusCode};
use serde_json::json;

use super::HeatRest;

async fn action(rest: &HeatRest, stack: &str, body: serde_json::Value) -> super::Answer {
    rest.post(&format!("{stack}/actions"), body).await
}

#[tokio::test]
async fn a_locked_stack_refuses_changes_until_unlocked() {
    let ember = TestEmber::start().await;
    let member = HeatRest::member(&ember);
    let stack = member
        .create_stack("maintained", json!({"greeting": "hi"}))
        .await;
    member.wait_until_settled(&stack).await;

    for (body, message) in [
        (
            json!({"lock": {"level": "everything"}}),
            "lock level \"everything\" is not one of stacks, all",
        ),
        (
            json!({"lock": {"reason": ""}}),
            "lock reason must be 1-255 characters",
        ),
        (json!({"unlock": {"force": true}}), "takes no options"),
        (
            json!({"lock": {"expires_in": "1h"}}),
            "expires_in: must be whole seconds",
        ),
        (
            json!({"lock": {"expires_at": "noon"}}),
            "expires_at: \"noon\" is not an ISO 8601 time",
        ),
        (
            json!({"lock": {"expires_in": -5}}),
            "expires_in: -5 is not a positive number of seconds",
        ),
    ] {
        let answer = action(&member, &stack, body).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{answer:?}");
        assert!(answer.message().contains(message), "{answer:?}");
    }
    let answer = action(&member, &stack, json!({"unlock": null})).await;
    assert_eq!(
        answer.status,
        StatusCode::CONFLICT,
        "nothing to unlock: {answer:?}"
    );

    // Another project's caller cannot see the stack, let alone lock it.
    let stranger_token = ember.outsider_token();
    let stranger = HeatRest::new(&ember, "other", Some(&stranger_token));
    let answer = action(&stranger, &stack, json!({"lock": null})).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{answer:?}");
    let answer = stranger.get(&format!("{stack}/actions/lock/allowed")).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{answer:?}");

    let answer = action(
        &member,
        &stack,
        json!({"lock": {"level": "stacks", "reason": "db upgrade", "expires_in": 3600}}),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let shown = member.wait_until_settled(&stack).await;
    assert_eq!(shown["stack_status"], "LOCK_COMPLETE", "{shown}");
    assert!(shown["stack_lock"]["expires_at"].is_string(), "{shown}");
    assert_eq!(shown["stack_lock"]["level"], "stacks");
    assert_eq!(shown["stack_lock"]["locked_by_user"], "demo");
    assert_eq!(shown["stack_lock"]["locked_by_role"], "owner");
    assert_eq!(shown["stack_lock"]["reason"], "db upgrade");

    let answer = member.call(Method::DELETE, &stack, None).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{answer:?}");
    assert!(
        answer
            .message()
            .contains("is locked (level stacks, by owner \"demo\""),
        "{answer:?}"
    );
    assert!(answer.message().contains("db upgrade"), "{answer:?}");
    let answer = member
        .call(
            Method::PATCH,
            &stack,
            Some(json!({"parameters": {"greeting": "bye"}})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{answer:?}");
    let answer = action(&member, &stack, json!({"suspend": null})).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{answer:?}");

    let answer = member.get(&format!("{stack}/actions/delete/allowed")).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["allowed"], false);
    assert!(
        answer.body["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("unlock it first")
    );
    assert_eq!(answer.body["stack_lock"]["level"], "stacks");
    let answer = member.get(&format!("{stack}/actions/unlock/allowed")).await;
    assert_eq!(answer.body["allowed"], true, "{answer:?}");
    let answer = member.get(&format!("{stack}/actions/launch/allowed")).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{answer:?}");

    let listed = member.get("/stacks?locked=true").await;
    let names: Vec<&str> = listed.body["stacks"]
        .as_array()
        .expect("stacks")
        .iter()
        .filter_map(|stack| stack["stack_name"].as_str())
        .collect();
    assert_eq!(names, ["maintained"]);
    assert!(
        member.get("/stacks?locked=false").await.body["stacks"]
            .as_array()
            .expect("stacks")
            .is_empty()
    );

    let answer = action(&member, &stack, json!({"unlock": null})).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let shown = member.wait_until_settled(&stack).await;
    assert_eq!(shown["stack_status"], "UNLOCK_COMPLETE", "{shown}");
    assert!(shown["stack_lock"].is_null());
    let answer = member.call(Method::DELETE, &stack, None).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");
    ember.stop().await;
}

#[tokio::test]
async fn an_admin_lock_needs_an_admin_to_lift_it_and_grpc_answers_the_same() {
    let ember = TestEmber::start().await;
    let member = HeatRest::member(&ember);
    let admin = HeatRest::new(&ember, "demo", Some(ember.admin_token()));
    let stack = member
        .create_stack("audited", json!({"greeting": "hi"}))
        .await;
    member.wait_until_settled(&stack).await;

    let mut stacks = StackServiceClient::new(ember.gateway_channel().await);
    stacks
        .lock_stack(with_bearer(
            LockStackRequest {
                stack: "audited".into(),
                level: "all".into(),
                reason: "audit".into(),
                ..LockStackRequest::default()
            },
            ember.admin_token(),
        ))
        .await
        .expect("admin locks over gRPC");
    let shown = member.wait_until_settled(&stack).await;
    assert_eq!(shown["stack_lock"]["locked_by_role"], "admin", "{shown}");

    let check = stacks
        .check_operation(with_bearer(
            CheckOperationRequest {
                stack: "audited".into(),
                operation: "unlock".into(),
            },
            ember.member_token(),
        ))
        .await
        .expect("check")
        .into_inner();
    assert!(!check.allowed);
    assert!(
        check.reason.contains("only an admin can unlock"),
        "{}",
        check.reason
    );

    let answer = action(&member, &stack, json!({"unlock": null})).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{answer:?}");
    let answer = action(&admin, &stack, json!({"unlock": null})).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        member.wait_until_settled(&stack).await["stack_status"],
        "UNLOCK_COMPLETE"
    );
    ember.stop().await;
}
