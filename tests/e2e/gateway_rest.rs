//! REST through the gateway: health, authentication, Heat's shapes.

use ember_runtime::Identity;
use ember_runtime::auth::TokenSigner;
use ember_tests::TestEmber;
use serde_json::Value;

#[tokio::test]
async fn healthz_reports_every_service_serving() {
    let ember = TestEmber::start().await;
    let response = ember
        .http
        .get(ember.url("/healthz"))
        .send()
        .await
        .expect("healthz");
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["status"], "ok");
    for service in ["engine", "lifecycle-hook", "plugin-registry"] {
        assert_eq!(body["services"][service], "SERVING", "{body}");
    }
    ember.stop().await;
}

#[tokio::test]
async fn stacks_list_needs_a_token_and_answers_in_heat_format() {
    let ember = TestEmber::start().await;
    let url = ember.url("/orchestration/v1/demo/stacks");

    let response = ember.http.get(&url).send().await.expect("request");
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["type"], "NotAuthenticated");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .contains("X-Auth-Token")
    );

    let response = ember
        .http
        .get(&url)
        .header("X-Auth-Token", ember.member_token())
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body, serde_json::json!({ "stacks": [] }));

    let response = ember
        .http
        .get(&url)
        .bearer_auth(ember.member_token())
        .send()
        .await
        .expect("request");
    assert_eq!(
        response.status(),
        200,
        "Authorization: Bearer works for REST too"
    );
    ember.stop().await;
}

#[tokio::test]
async fn an_expired_token_is_refused_naming_the_expiry() {
    let ember = TestEmber::start().await;
    let signer = TokenSigner::new(&ember.secrets().signing_key);
    let identity = Identity::new("demo", "demo", vec!["member".to_owned()]);
    // A token that lived for one second, a little over a second ago.
    let token = signer
        .issue(&identity, std::time::Duration::from_secs(1))
        .expect("issued");
    let url = ember.url("/orchestration/v1/demo/stacks");
    let http = ember.http.clone();
    ember_tests::wait_for(
        "the token to expire",
        std::time::Duration::from_secs(5),
        || {
            let http = http.clone();
            let url = url.clone();
            let token = token.clone();
            async move {
                let response = http.get(&url).header("X-Auth-Token", token).send().await;
                response.is_ok_and(|response| response.status() == 401)
            }
        },
    )
    .await;
    let response = ember
        .http
        .get(&url)
        .header("X-Auth-Token", &token)
        .send()
        .await
        .expect("request");
    let body: Value = response.json().await.expect("json");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .contains("expired at"),
        "{body}"
    );
    ember.stop().await;
}

#[tokio::test]
async fn another_projects_url_is_forbidden_and_unknown_stacks_are_404() {
    let ember = TestEmber::start().await;
    let response = ember
        .http
        .get(ember.url("/orchestration/v1/someone-else/stacks"))
        .header("X-Auth-Token", ember.member_token())
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 403);
    let body: Value = response.json().await.expect("json");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .contains("someone-else")
    );

    let response = ember
        .http
        .get(ember.url("/orchestration/v1/demo/stacks/absent"))
        .header("X-Auth-Token", ember.member_token())
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["code"], 404);
    assert_eq!(body["title"], "Not Found");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .contains("absent")
    );

    let response = ember
        .http
        .get(ember.url("/no/such/api"))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 404);
    ember.stop().await;
}

#[tokio::test]
async fn metrics_count_requests_and_refusals() {
    let ember = TestEmber::start().await;
    let _ = ember
        .http
        .get(ember.url("/orchestration/v1/demo/stacks"))
        .send()
        .await;
    let text = ember.metrics().await;
    assert!(
        text.contains("ember_gateway_unauthenticated_total 1"),
        "{text}"
    );
    assert!(
        text.contains("ember_gateway_rest_requests_total 1"),
        "{text}"
    );
    ember.stop().await;
}

/// Tokens from the future (issue 13): an `nbf` an hour ahead or an `iat` a
/// year ahead is refused at the gateway with a 401 saying so; a little
/// ahead (a replica's clock) is fine.
#[tokio::test]
async fn tokens_not_yet_valid_or_issued_in_the_future_are_refused() {
    let ember = TestEmber::start().await;
    let key = ember.secrets().signing_key.clone();
    let now = chrono::Utc::now().timestamp();
    let token = |iat: i64, nbf: i64| {
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &serde_json::json!({"sub": "alice", "project": "demo", "roles": ["member"],
                "iss": "ember", "iat": iat, "nbf": nbf, "exp": now + 7200}),
            &jsonwebtoken::EncodingKey::from_secret(key.as_bytes()),
        )
        .expect("encoded")
    };
    for (iat, nbf, expected) in [
        (now, now + 3600, "not valid before"),
        (now + 365 * 86_400, now, "issued at"),
    ] {
        let response = ember
            .http
            .get(ember.url("/orchestration/v1/demo/stacks"))
            .header("X-Auth-Token", token(iat, nbf))
            .send()
            .await
            .expect("answered");
        assert_eq!(response.status(), 401);
        let body: Value = response.json().await.expect("json");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|message| message.contains(expected)),
            "{body}"
        );
    }
    let response = ember
        .http
        .get(ember.url("/orchestration/v1/demo/stacks"))
        .header("X-Auth-Token", token(now + 20, now + 20))
        .send()
        .await
        .expect("answered");
    assert_eq!(
        response.status(),
        200,
        "a clock 20 s ahead is within the skew"
    );
    ember.stop().await;
}
