//! The Keystone v3 API at `/identity`, as keystoneauth and tempest use it.

use std::time::Duration;

use ember_proto::identity::v1 as pb;
use ember_proto::identity::v1::identity_admin_service_client::IdentityAdminServiceClient;
use ember_tests::{TestEmber, with_bearer};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{Answer, admin, answer, call, login, password_body, stacks_status};

fn keystone_time(value: &Value) {
    let text = value.as_str().unwrap_or_else(|| panic!("a time: {value}"));
    chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.6fZ")
        .unwrap_or_else(|error| panic!("{text} is not %Y-%m-%dT%H:%M:%S.%fZ: {error}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_documents_answer_without_a_token() {
    let ember = TestEmber::start().await;
    let root = call(&ember, Method::GET, "/identity", &[], None).await;
    assert_eq!(root.status, StatusCode::MULTIPLE_CHOICES, "{}", root.body);
    let v3 = &root.body["versions"]["values"][0];
    assert_eq!(v3["id"], "v3.14");
    assert_eq!(v3["status"], "stable");
    assert_eq!(
        v3["links"][0]["href"],
        ember.url("/identity/v3/"),
        "an absolute self link"
    );
    assert_eq!(
        v3["media-types"][0]["type"],
        "application/vnd.openstack.identity-v3+json"
    );
    for path in ["/identity/v3", "/identity/v3/"] {
        let version = call(&ember, Method::GET, path, &[], None).await;
        assert_eq!(version.status, StatusCode::OK, "{path}");
        assert_eq!(version.body["version"]["id"], "v3.14");
        assert!(version.body["version"]["updated"].is_string());
    }
    for path in ["/clustering", "/clustering/"] {
        let versions = call(&ember, Method::GET, path, &[], None).await;
        assert_eq!(versions.status, StatusCode::MULTIPLE_CHOICES, "{path}");
        let version = &versions.body["versions"][0];
        assert_eq!(version["id"], "1.0");
        for key in [
            "links",
            "min_version",
            "max_version",
            "media-types",
            "status",
            "updated",
        ] {
            assert!(!version[key].is_null(), "{key} in {version}");
        }
    }
    let slash = call(&ember, Method::GET, "/clustering/v1/", &[], None).await;
    let plain = call(&ember, Method::GET, "/clustering/v1", &[], None).await;
    assert_eq!(slash.status, StatusCode::OK);
    assert_eq!(slash.body, plain.body);
    let heat = call(&ember, Method::GET, "/orchestration/", &[], None).await;
    assert_eq!(heat.status, StatusCode::MULTIPLE_CHOICES);
    assert_eq!(heat.body["versions"][0]["id"], "v1.0");
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_token_works_everywhere_and_says_what_keystone_says() {
    let ember = TestEmber::start().await;
    let passwords = ember.seed_identity().await;
    let answer = call(
        &ember,
        Method::POST,
        "/identity/v3/auth/tokens",
        &[],
        Some(&password_body("demo", &passwords.demo, "demo")),
    )
    .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    let token = answer.subject_token();
    let body = &answer.body["token"];
    assert_eq!(body["methods"], json!(["password"]));
    assert_eq!(body["user"]["id"], "demo");
    assert_eq!(body["user"]["name"], "demo");
    assert_eq!(
        body["user"]["domain"],
        json!({"id": "default", "name": "Default"})
    );
    assert_eq!(body["project"]["id"], "demo");
    assert_eq!(
        body["project"]["domain"],
        json!({"id": "default", "name": "Default"})
    );
    assert_eq!(body["roles"], json!([{"id": "member", "name": "member"}]));
    keystone_time(&body["expires_at"]);
    keystone_time(&body["issued_at"]);
    assert_eq!(body["audit_ids"].as_array().map(Vec::len), Some(1));
    let catalog = body["catalog"].as_array().expect("a catalog");
    let url_of = |kind: &str| {
        let service = catalog
            .iter()
            .find(|service| service["type"] == kind)
            .unwrap_or_else(|| panic!("{kind} in {catalog:?}"));
        let endpoints = service["endpoints"].as_array().expect("endpoints");
        let interfaces: Vec<&str> = endpoints
            .iter()
            .map(|endpoint| endpoint["interface"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(interfaces, ["public", "internal", "admin"], "{kind}");
        for endpoint in endpoints {
            assert_eq!(endpoint["region"], "RegionOne");
            assert_eq!(endpoint["region_id"], "RegionOne");
        }
        endpoints[0]["url"].as_str().unwrap_or_default().to_owned()
    };
    assert_eq!(url_of("identity"), ember.url("/identity"));
    assert_eq!(url_of("orchestration"), ember.url("/orchestration/v1/demo"));
    assert_eq!(url_of("clustering"), ember.url("/clustering"));
    assert_eq!(url_of("ember-instance"), ember.url("/compute/v1"));
    assert!(
        catalog.iter().all(|service| service["type"] != "compute"),
        "Ember's instances are not Nova's"
    );

    // The token is an Ember token: REST and gRPC take it.
    assert_eq!(stacks_status(&ember, "demo", &token).await, StatusCode::OK);
    let mut channel = ember_proto::engine::v1::identity_service_client::IdentityServiceClient::new(
        ember.gateway_channel().await,
    );
    let me = channel
        .who_am_i(with_bearer(
            ember_proto::engine::v1::WhoAmIRequest {},
            &token,
        ))
        .await
        .expect("gRPC takes it")
        .into_inner();
    assert_eq!(
        (me.user_id.as_str(), me.project_id.as_str()),
        ("demo", "demo")
    );

    // ?nocatalog, by id, and the default domain when none is named.
    let by_id = json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {"id": "demo", "password": passwords.demo}}},
        "scope": {"project": {"id": "demo"}},
    }});
    let answer = call(
        &ember,
        Method::POST,
        "/identity/v3/auth/tokens?nocatalog",
        &[],
        Some(&by_id),
    )
    .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    assert!(answer.body["token"]["catalog"].is_null());
    // No scope: the user's default project.
    let unscoped = json!({"auth": {"identity": {"methods": ["password"],
        "password": {"user": {"name": "demo", "password": passwords.demo}}}}});
    let answer = call(
        &ember,
        Method::POST,
        "/identity/v3/auth/tokens",
        &[],
        Some(&unscoped),
    )
    .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    assert_eq!(answer.body["token"]["project"]["id"], "demo");

    // A dev token (`ember token issue`) validates with names from the store.
    let validated = call(
        &ember,
        Method::GET,
        "/identity/v3/auth/tokens",
        &[
            ("x-auth-token", ember.admin_token()),
            ("x-subject-token", ember.member_token()),
        ],
        None,
    )
    .await;
    assert_eq!(validated.status, StatusCode::OK, "{}", validated.body);
    assert_eq!(validated.body["token"]["user"]["name"], "demo");
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_authentications_are_one_401_and_bad_bodies_say_what_is_wrong() {
    let ember = TestEmber::start().await;
    let passwords = ember.seed_identity().await;
    let admin = ember.gateway_channel().await;
    let mut identities = IdentityAdminServiceClient::new(admin);
    identities
        .create_project(with_bearer(
            pb::CreateProjectRequest {
                name: "other".into(),
                ..Default::default()
            },
            ember.admin_token(),
        ))
        .await
        .expect("project");
    let wrong = [
        password_body("demo", "not-the-password", "demo"),
        password_body("nobody", &passwords.demo, "demo"),
        password_body("demo", &passwords.demo, "no-such-project"),
        // A project the user has no role on.
        password_body("demo", &passwords.demo, "other"),
        json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": "demo", "domain": {"name": "Elsewhere"}, "password": passwords.demo}}},
            "scope": {"project": {"name": "demo"}}}}),
        json!({"auth": {"identity": {"methods": ["token"], "token": {"id": "forged.token.here"}}}}),
    ];
    let mut messages = Vec::new();
    for body in &wrong {
        let answer = call(
            &ember,
            Method::POST,
            "/identity/v3/auth/tokens",
            &[],
            Some(body),
        )
        .await;
        assert_eq!(
            answer.status,
            StatusCode::UNAUTHORIZED,
            "{body}: {}",
            answer.body
        );
        assert_eq!(answer.body["error"]["code"], 401);
        assert!(answer.body["error"]["title"].is_string());
        assert!(answer.headers.get("x-subject-token").is_none());
        messages.push(answer.message().to_owned());
    }
    messages.dedup();
    assert_eq!(
        messages.len(),
        1,
        "nothing tells which part was wrong: {messages:?}"
    );

    let malformed = [
        (json!("not an object"), "'auth' is a required property"),
        (
            json!({"auth": {"identity": {"methods": "password"}}}),
            "methods must be a list",
        ),
        (
            json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "demo"}}}}}),
            "user.password is required",
        ),
        (
            json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {"password": "x"}}}}}),
            "needs an id or a name",
        ),
        (
            json!({"auth": {"identity": {"methods": ["token"], "token": {}}}}),
            "token.id is required",
        ),
    ];
    for (body, expected) in malformed {
        let answer = call(
            &ember,
            Method::POST,
            "/identity/v3/auth/tokens",
            &[],
            Some(&body),
        )
        .await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            answer.body
        );
        assert!(
            answer.message().contains(expected),
            "{body}: {}",
            answer.body
        );
    }
    let text = ember
        .http
        .post(ember.url("/identity/v3/auth/tokens"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("answer");
    assert_eq!(text.status(), StatusCode::BAD_REQUEST);
    for (body, expected) in [
        (
            json!({"auth": {"identity": {"methods": ["totp"], "totp": {}}}}),
            "unsupported method",
        ),
        (
            json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": "demo", "password": passwords.demo}}}, "scope": {"system": {"all": true}}}}),
            "project-scoped",
        ),
    ] {
        let answer = call(
            &ember,
            Method::POST,
            "/identity/v3/auth/tokens",
            &[],
            Some(&body),
        )
        .await;
        assert_eq!(
            answer.status,
            StatusCode::UNAUTHORIZED,
            "{body}: {}",
            answer.body
        );
        assert!(answer.message().contains(expected), "{}", answer.body);
    }
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_rescoped_validated_and_revoked_and_lose_what_was_taken_away() {
    let ember = TestEmber::start().await;
    let passwords = ember.seed_identity().await;
    let mut identities = IdentityAdminServiceClient::new(ember.gateway_channel().await);
    identities
        .create_project(admin(
            &ember,
            pb::CreateProjectRequest {
                name: "blue".into(),
                id: "blue".into(),
                ..Default::default()
            },
        ))
        .await
        .expect("project");
    identities
        .add_role(admin(
            &ember,
            pb::RoleAssignment {
                user: "demo".into(),
                project: "blue".into(),
                role: "member".into(),
                ..Default::default()
            },
        ))
        .await
        .expect("role");

    let token = login(&ember, "demo", &passwords.demo, "demo").await;
    // The token method: the same user, another project.
    let rescope = json!({"auth": {"identity": {"methods": ["token"], "token": {"id": token}},
        "scope": {"project": {"name": "blue", "domain": {"name": "Default"}}}}});
    let answer = call(
        &ember,
        Method::POST,
        "/identity/v3/auth/tokens",
        &[],
        Some(&rescope),
    )
    .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    assert_eq!(answer.body["token"]["methods"], json!(["token"]));
    assert_eq!(
        answer.body["token"]["audit_ids"].as_array().map(Vec::len),
        Some(2)
    );
    let blue = answer.subject_token();
    assert_eq!(stacks_status(&ember, "blue", &blue).await, StatusCode::OK);
    // Another project's URL with it: refused like any foreign URL.
    assert_eq!(
        stacks_status(&ember, "demo", &blue).await,
        StatusCode::FORBIDDEN
    );

    // Validate: its own user may, another member may not, an admin may.
    let validate = |caller: String, subject: String| {
        let ember = &ember;
        async move {
            call(
                ember,
                Method::GET,
                "/identity/v3/auth/tokens",
                &[("x-auth-token", &caller), ("x-subject-token", &subject)],
                None,
            )
            .await
        }
    };
    assert_eq!(
        validate(token.clone(), blue.clone()).await.status,
        StatusCode::OK
    );
    let head = ember
        .http
        .head(ember.url("/identity/v3/auth/tokens"))
        .header("x-auth-token", &token)
        .header("x-subject-token", &blue)
        .send()
        .await
        .expect("answer");
    assert_eq!(head.status(), StatusCode::OK);
    identities
        .create_user(admin(
            &ember,
            pb::CreateUserRequest {
                name: "mallory".into(),
                password: "mallory-password".into(),
                ..Default::default()
            },
        ))
        .await
        .expect("user");
    identities
        .add_role(admin(
            &ember,
            pb::RoleAssignment {
                user: "mallory".into(),
                project: "demo".into(),
                role: "member".into(),
                ..Default::default()
            },
        ))
        .await
        .expect("role");
    let mallory = login(&ember, "mallory", "mallory-password", "demo").await;
    let answer = validate(mallory.clone(), token.clone()).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{}", answer.body);
    let answer = call(
        &ember,
        Method::DELETE,
        "/identity/v3/auth/tokens",
        &[("x-auth-token", &mallory), ("x-subject-token", &token)],
        None,
    )
    .await;
    assert_eq!(
        answer.status,
        StatusCode::FORBIDDEN,
        "another member cannot revoke it"
    );
    assert_eq!(
        validate(ember.admin_token().to_owned(), token.clone())
            .await
            .status,
        StatusCode::OK
    );
    let missing = call(
        &ember,
        Method::GET,
        "/identity/v3/auth/tokens",
        &[("x-auth-token", &token)],
        None,
    )
    .await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert!(missing.message().contains("X-Subject-Token"));

    // Revoke: refused everywhere from then on.
    let answer = call(
        &ember,
        Method::DELETE,
        "/identity/v3/auth/tokens",
        &[("x-auth-token", &token), ("x-subject-token", &blue)],
        None,
    )
    .await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{}", answer.body);
    let refused = call(
        &ember,
        Method::GET,
        "/orchestration/v1/blue/stacks",
        &[("x-auth-token", &blue)],
        None,
    )
    .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert!(refused.message().contains("revoked"), "{}", refused.body);
    let mut grpc = ember_proto::engine::v1::identity_service_client::IdentityServiceClient::new(
        ember.gateway_channel().await,
    );
    let status = grpc
        .who_am_i(with_bearer(
            ember_proto::engine::v1::WhoAmIRequest {},
            &blue,
        ))
        .await
        .expect_err("refused over gRPC too");
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    assert_eq!(
        validate(token.clone(), blue.clone()).await.status,
        StatusCode::NOT_FOUND
    );
    let again = call(
        &ember,
        Method::POST,
        "/identity/v3/auth/tokens",
        &[],
        Some(&json!({"auth": {"identity": {"methods": ["token"], "token": {"id": blue}}}})),
    )
    .await;
    assert_eq!(
        again.status,
        StatusCode::UNAUTHORIZED,
        "a revoked token gets no new one"
    );
    assert_eq!(
        stacks_status(&ember, "demo", &token).await,
        StatusCode::OK,
        "only that token"
    );

    // Losing the role refuses the tokens for that project, not the others.
    let demo_blue = login(&ember, "demo", &passwords.demo, "blue").await;
    identities
        .remove_role(admin(
            &ember,
            pb::RoleAssignment {
                user: "demo".into(),
                project: "blue".into(),
                role: "member".into(),
                ..Default::default()
            },
        ))
        .await
        .expect("removed");
    assert_eq!(
        stacks_status(&ember, "blue", &demo_blue).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(stacks_status(&ember, "demo", &token).await, StatusCode::OK);
    let answer = call(
        &ember,
        Method::POST,
        "/identity/v3/auth/tokens",
        &[],
        Some(&password_body("demo", &passwords.demo, "blue")),
    )
    .await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "no role, no token");

    // A deleted user's tokens stop working; so does a changed password's.
    assert_eq!(
        stacks_status(&ember, "demo", &mallory).await,
        StatusCode::OK
    );
    identities
        .delete_user(admin(
            &ember,
            pb::DeleteUserRequest {
                user: "mallory".into(),
            },
        ))
        .await
        .expect("deleted");
    assert_eq!(
        stacks_status(&ember, "demo", &mallory).await,
        StatusCode::UNAUTHORIZED
    );
    identities
        .set_password(admin(
            &ember,
            pb::SetPasswordRequest {
                user: "demo".into(),
                password: "a-new-password".into(),
            },
        ))
        .await
        .expect("password changed");
    assert_eq!(
        stacks_status(&ember, "demo", &token).await,
        StatusCode::UNAUTHORIZED
    );
    let answer = call(
        &ember,
        Method::POST,
        "/identity/v3/auth/tokens",
        &[],
        Some(&password_body("demo", &passwords.demo, "demo")),
    )
    .await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "the old password");
    // A token issued right after the change (the same second) works.
    let fresh = login(&ember, "demo", "a-new-password", "demo").await;
    assert_eq!(stacks_status(&ember, "demo", &fresh).await, StatusCode::OK);
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_revoked_on_one_gateway_replica_is_refused_by_the_other() {
    let ember = TestEmber::start().await;
    let passwords = ember.seed_identity().await;
    // A second gateway on the same identity store, signing key and engine.
    let mut config = ember.config.clone();
    config.gateway.engine_url = format!("http://{}", ember.running.engine_addr);
    config.gateway.lifecycle_hook_url = format!("http://{}", ember.running.lifecycle_hook_addr);
    config.gateway.plugin_registry_url = format!("http://{}", ember.running.plugin_registry_addr);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let second = listener.local_addr().expect("address");
    let stop = tokio_util::sync::CancellationToken::new();
    let gateway = config.gateway(ember.secrets());
    let served = tokio::spawn(ember_api_gateway::serve(gateway, listener, stop.clone()));
    let on_second = |token: String| {
        let http = ember.http.clone();
        async move {
            http.get(format!("http://{second}/orchestration/v1/demo/stacks"))
                .header("x-auth-token", token)
                .send()
                .await
                .map(|response| response.status())
                .ok()
        }
    };
    let token = login(&ember, "demo", &passwords.demo, "demo").await;
    ember_tests::wait_for(
        "the second gateway to serve",
        Duration::from_secs(10),
        || {
            let token = token.clone();
            async move { on_second(token).await == Some(StatusCode::OK) }
        },
    )
    .await;
    let answer = call(
        &ember,
        Method::DELETE,
        "/identity/v3/auth/tokens",
        &[("x-auth-token", &token), ("x-subject-token", &token)],
        None,
    )
    .await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    let revoked_at = std::time::Instant::now();
    ember_tests::wait_for(
        "the second replica to refuse the token",
        Duration::from_secs(5),
        || {
            let token = token.clone();
            async move { on_second(token).await == Some(StatusCode::UNAUTHORIZED) }
        },
    )
    .await;
    let took = revoked_at.elapsed();
    assert!(took < Duration::from_secs(2), "took {took:?}");
    stop.cancel();
    served.await.expect("joined").expect("clean stop");
    ember.stop().await;
}

/// A token request from the loopback address `source` (each 127.0.0.x is
/// an address of its own to the gateway).
async fn login_from(ember: &TestEmber, source: &str, body: &Value) -> Answer {
    let client = reqwest::Client::builder()
        .local_address(source.parse::<std::net::IpAddr>().expect("address"))
        .build()
        .expect("client");
    let response = client
        .post(ember.url("/identity/v3/auth/tokens"))
        .json(body)
        .send()
        .await
        .expect("the gateway answers");
    answer(response).await
}

/// Keystone's account lockout and a per-address rate on the front door:
/// wrong passwords in a row lock the user (the right one is then refused
/// with the same 401), a token it already had keeps working until it
/// expires, and an admin unlocks it (gRPC); an address asking too fast
/// gets 429 with `Retry-After` while another address is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_passwords_lock_a_user_out_and_an_address_asking_too_fast_gets_429() {
    let ember = TestEmber::start_configured(|config| {
        config.auth.lockout_failure_attempts = 3;
        config.auth.lockout_duration_secs = 0;
        config.auth.login_rate_per_source = 1;
        config.auth.login_burst_per_source = 8;
        // The test's addresses are all loopback.
        config.auth.login_rate_limits_loopback = true;
    })
    .await;
    let passwords = ember.seed_identity().await;
    let right = password_body("demo", &passwords.demo, "demo");
    let wrong = password_body("demo", "not-the-password", "demo");
    let source = "127.0.0.2";
    let before = login_from(&ember, source, &right).await;
    assert_eq!(before.status, StatusCode::CREATED, "{}", before.body);
    let kept = before.subject_token();
    for _ in 0..3 {
        let answer = login_from(&ember, source, &wrong).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{}", answer.body);
    }
    let locked = login_from(&ember, source, &right).await;
    assert_eq!(locked.status, StatusCode::UNAUTHORIZED, "{}", locked.body);
    assert_eq!(
        locked.message(),
        "The request you have made requires authentication.",
        "a lockout says no more than any failure"
    );
    // The token it had still works.
    let stacks = call(
        &ember,
        Method::GET,
        "/orchestration/v1/demo/stacks",
        &[("X-Auth-Token", &kept)],
        None,
    )
    .await;
    assert_eq!(stacks.status, StatusCode::OK, "{}", stacks.body);
    // An admin sees the lockout and lifts it.
    let mut identities = IdentityAdminServiceClient::new(ember.gateway_channel().await);
    let users = identities
        .list_users(with_bearer(pb::ListUsersRequest {}, ember.admin_token()))
        .await
        .expect("users")
        .into_inner()
        .users;
    let demo = users.iter().find(|user| user.name == "demo").expect("demo");
    assert!(demo.locked && demo.locked_until.is_none(), "{demo:?}");
    assert_eq!(demo.failed_auth_count, 3);
    let member = identities
        .unlock_user(with_bearer(
            pb::UnlockUserRequest {
                user: "demo".into(),
            },
            ember.member_token(),
        ))
        .await
        .expect_err("admins only");
    assert_eq!(member.code(), tonic::Code::PermissionDenied, "{member:?}");
    let unknown = identities
        .unlock_user(with_bearer(
            pb::UnlockUserRequest {
                user: "nobody".into(),
            },
            ember.admin_token(),
        ))
        .await
        .expect_err("no such user");
    assert_eq!(unknown.code(), tonic::Code::NotFound, "{unknown:?}");
    let unlocked = identities
        .unlock_user(with_bearer(
            pb::UnlockUserRequest {
                user: "demo".into(),
            },
            ember.admin_token(),
        ))
        .await
        .expect("unlocked")
        .into_inner();
    assert!(
        !unlocked.locked && unlocked.failed_auth_count == 0,
        "{unlocked:?}"
    );
    let after = login_from(&ember, source, &right).await;
    assert_eq!(after.status, StatusCode::CREATED, "{}", after.body);

    // A flood from one address: its burst, then 429 — before the password
    // is even read — while another address is served.
    // (Guessing another name's password: demo is not locked out again.)
    let flood = "127.0.0.3";
    let guess = password_body("someone", "guess", "demo");
    let mut refused = None;
    for _ in 0..20 {
        let answer = login_from(&ember, flood, &guess).await;
        if answer.status == StatusCode::TOO_MANY_REQUESTS {
            refused = Some(answer);
            break;
        }
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{}", answer.body);
    }
    let refused = refused.expect("the flood is refused");
    assert_eq!(refused.body["error"]["code"], 429);
    assert!(
        refused
            .message()
            .starts_with("Too many token requests from this address"),
        "{}",
        refused.body
    );
    let retry: u64 = refused
        .headers
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse().ok())
        .expect("Retry-After");
    assert!((1..=2).contains(&retry), "{retry}");
    let elsewhere = login_from(&ember, "127.0.0.4", &right).await;
    assert_eq!(elsewhere.status, StatusCode::CREATED, "{}", elsewhere.body);
    let metrics = call(&ember, Method::GET, "/metrics", &[], None).await;
    let text = metrics.body.as_str().unwrap_or_default().to_owned();
    assert!(
        text.lines().any(
            |line| line.starts_with("ember_gateway_logins_throttled_total ")
                && !line.ends_with(" 0")
        ),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|line| line == "ember_gateway_logins_locked_total 1"),
        "{text}"
    );
    ember.stop().await;
}
