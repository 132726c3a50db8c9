//! Senlin's microversions, type and info endpoints, list parameters and
//! request-body messages through the Clustering REST API: the answers and
//! messages Senlin's clients compare, filters applied before a page is cut,
//! and other projects' objects listed only for an admin who asks.

use axum::http::{HeaderMap, StatusCode};
use ember_tests::TestEmber;
use reqwest::Method;
use serde_json::{Value, json};

/// One call with an explicit microversion header (`None`: no header).
async fn call(
    ember: &TestEmber,
    token: &str,
    version: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, HeaderMap, Value) {
    let mut request = ember
        .http
        .request(method, ember.url(&format!("/clustering/v1{path}")))
        .header("X-Auth-Token", token);
    if let Some(version) = version {
        request = request.header("OpenStack-API-Version", format!("clustering {version}"));
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = StatusCode::from_u16(response.status().as_u16()).expect("status");
    let headers = response.headers().clone();
    let text = response.text().await.expect("body");
    (
        status,
        headers,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

async fn get(ember: &TestEmber, token: &str, path: &str) -> (StatusCode, Value) {
    let (status, _, body) = call(ember, token, Some("latest"), Method::GET, path, None).await;
    (status, body)
}

fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
}

async fn create_profile(ember: &TestEmber, token: &str, name: &str) -> String {
    let spec = json!({"type": "os.nova.server", "version": "1.0",
        "properties": {"flavor": "m1.small", "image": "cirros"}});
    let (status, _, body) = call(
        ember,
        token,
        None,
        Method::POST,
        "/profiles",
        Some(json!({"profile": {"name": name, "spec": spec}})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["profile"]["id"].as_str().expect("id").to_owned()
}

fn names(body: &Value, key: &str) -> Vec<String> {
    body[key]
        .as_array()
        .expect("a list")
        .iter()
        .map(|object| object["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn microversions_are_negotiated_and_named_back() {
    let ember = TestEmber::start().await;
    let token = ember.member_token().to_owned();

    let (status, headers, _) = call(&ember, &token, None, Method::GET, "/profiles", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&headers, "openstack-api-version"), "clustering 1.0");
    assert_eq!(header(&headers, "vary"), "OpenStack-API-Version");

    let (_, headers, _) = call(
        &ember,
        &token,
        Some("latest"),
        Method::GET,
        "/profiles",
        None,
    )
    .await;
    assert_eq!(header(&headers, "openstack-api-version"), "clustering 1.14");

    let (status, _, body) =
        call(&ember, &token, Some("1.15"), Method::GET, "/profiles", None).await;
    assert_eq!(status, StatusCode::NOT_ACCEPTABLE, "{body}");
    assert_eq!(
        message(&body),
        "Version '1.15' is not supported by the API. Minimum is '1.0' and maximum is '1.14'."
    );

    let (status, _, body) = call(&ember, &token, Some("one"), Method::GET, "/profiles", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        message(&body),
        "API Version String 'one' is of invalid format. It must be of format 'major.minor'."
    );

    // Operations came in 1.4.
    let (status, _, body) = call(
        &ember,
        &token,
        Some("1.3"),
        Method::GET,
        "/profile-types/os.nova.server-1.0/ops",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        message(&body),
        "API version '1.3' is not supported on this method."
    );
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn types_build_info_and_services() {
    let ember = TestEmber::start().await;
    let token = ember.member_token().to_owned();

    let (status, _, body) = call(
        &ember,
        &token,
        Some("1.4"),
        Method::GET,
        "/profile-types",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["profile_types"],
        json!([{"name": "os.nova.server-1.0"}, {"name": "os.heat.stack-1.0"},
            {"name": "container.dockerinc.docker-1.0"}])
    );
    let (_, body) = get(&ember, &token, "/profile-types").await;
    let first = &body["profile_types"][0];
    assert_eq!(first["name"], "os.nova.server");
    assert_eq!(first["version"], "1.0");
    assert_eq!(first["support_status"]["1.0"][0]["status"], "SUPPORTED");

    let (status, body) = get(&ember, &token, "/profile-types/os.nova.server-1.0").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["profile_type"]["name"], "os.nova.server-1.0");
    assert_eq!(body["profile_type"]["schema"]["flavor"]["required"], true);
    assert!(body["profile_type"]["support_status"].is_object(), "{body}");
    let (_, _, old) = call(
        &ember,
        &token,
        Some("1.4"),
        Method::GET,
        "/profile-types/os.nova.server-1.0",
        None,
    )
    .await;
    assert!(old["profile_type"].get("support_status").is_none(), "{old}");
    // Ember's own type is described, not listed.
    let (status, _) = get(&ember, &token, "/profile-types/ember.instance-1.0").await;
    assert_eq!(status, StatusCode::OK);

    let (status, body) = get(&ember, &token, "/profile-types/os.nova.server-1.0/ops").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body["operations"]["reboot"]["parameters"].is_object(),
        "{body}"
    );

    let (status, body) = get(&ember, &token, "/profile-types/bogus-1.0").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(
        message(&body),
        "The profile_type 'bogus-1.0' could not be found."
    );

    let (_, body) = get(&ember, &token, "/policy-types").await;
    let listed: Vec<String> = body["policy_types"]
        .as_array()
        .expect("list")
        .iter()
        .map(|entry| {
            format!(
                "{}-{}",
                entry["name"].as_str().unwrap(),
                entry["version"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            "senlin.policy.deletion-1.0",
            "senlin.policy.deletion-1.1",
            "senlin.policy.scaling-1.0",
            "senlin.policy.health-1.0",
            "senlin.policy.health-1.1"
        ]
    );
    let (status, body) = get(&ember, &token, "/policy-types/senlin.policy.deletion-1.1").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["policy_type"]["schema"]["hooks"]["type"], "Map");
    let (status, body) = get(&ember, &token, "/policy-types/senlin.policy.bogus-1.0").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        message(&body),
        "The policy_type 'senlin.policy.bogus-1.0' could not be found."
    );

    let (status, body) = get(&ember, &token, "/build-info").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body["build_info"]["api"]["revision"].is_string(), "{body}");
    assert!(
        body["build_info"]["engine"]["revision"].is_string(),
        "{body}"
    );

    let (status, body) = get(&ember, &token, "/services").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = get(&ember, ember.admin_token(), "/services").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let engine = body["services"]
        .as_array()
        .expect("list")
        .iter()
        .find(|service| service["binary"] == "ember-engine")
        .expect("the engine is listed")
        .clone();
    assert_eq!(engine["state"], "up", "{engine}");
    assert_eq!(engine["status"], "enabled");
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_parameters_are_checked_with_senlins_messages() {
    let ember = TestEmber::start().await;
    let token = ember.member_token().to_owned();
    let refused = [
        ("/clusters?bogus=foo", "Invalid parameter 'bogus'"),
        ("/nodes?bogus=foo", "Invalid parameter bogus"),
        (
            "/profiles?limit=not-int",
            "The value for limit must be an integer: 'not-int'.",
        ),
        ("/nodes?limit=-5", "Value must be >= 0 for field 'limit'."),
        (
            "/events?marker=bad-marker",
            "The value for marker is not a valid UUID: 'bad-marker'.",
        ),
        (
            "/actions?sort=bad-sort",
            "Unsupported sort key 'bad-sort' for 'sort'.",
        ),
        (
            "/policies?global_project=not-bool",
            "Invalid value 'not-bool' specified for 'global_project'",
        ),
        ("/clusters?status=bad", "Field value bad is invalid"),
        ("/events?level=bad", "Field value bad is invalid"),
        ("/events?action=bad", "Field value bad is invalid"),
        (
            "/nodes?cluster_id=fake",
            "Cannot find the given cluster: fake.",
        ),
        // A cluster's policies come unpaged: Senlin refuses paging there.
        ("/clusters/any/policies?limit=1", "Invalid parameter limit"),
        (
            "/clusters/any/policies?marker=bad",
            "Invalid parameter marker",
        ),
        (
            "/clusters/any/policies?global_project=true",
            "Invalid parameter global_project",
        ),
    ];
    for (path, expected) in refused {
        let (status, body) = get(&ember, &token, path).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert_eq!(message(&body), expected, "{path}");
    }
    let (status, body) = get(&ember, &token, "/clusters?global_project=True").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        message(&body),
        "You are not authorized to complete this operation."
    );
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_apply_before_paging_and_projects_stay_apart() {
    let ember = TestEmber::start().await;
    let member = ember.member_token().to_owned();
    for name in ["alpha", "bravo", "charlie", "delta"] {
        create_profile(&ember, &member, name).await;
    }
    let other = ember.outsider_token();
    create_profile(&ember, &other, "echo").await;

    // The one match is found however far it is from the start.
    let (_, body) = get(&ember, &member, "/profiles?name=delta&limit=1").await;
    assert_eq!(names(&body, "profiles"), ["delta"]);
    let (_, body) = get(&ember, &member, "/profiles?name=bravo&name=delta").await;
    assert_eq!(names(&body, "profiles"), ["bravo", "delta"]);

    // Sorted pages, the marker a place in that order.
    let (_, body) = get(&ember, &member, "/profiles?sort=name:desc&limit=2").await;
    assert_eq!(names(&body, "profiles"), ["delta", "charlie"]);
    let marker = body["profiles"][1]["id"].as_str().expect("id").to_owned();
    let (_, body) = get(
        &ember,
        &member,
        &format!("/profiles?sort=name:desc&limit=2&marker={marker}"),
    )
    .await;
    assert_eq!(names(&body, "profiles"), ["bravo", "alpha"]);

    // Another project's objects are not listed, by name or otherwise.
    let (_, body) = get(&ember, &other, "/profiles").await;
    assert_eq!(names(&body, "profiles"), ["echo"]);
    let (_, body) = get(&ember, &other, "/profiles?name=alpha").await;
    assert_eq!(names(&body, "profiles"), Vec::<String>::new());

    // An admin sees their own project unless they ask for every one.
    let admin = ember.token_for("root", "ops", &["admin"]);
    create_profile(&ember, &admin, "foxtrot").await;
    let (_, body) = get(&ember, &admin, "/profiles").await;
    assert_eq!(names(&body, "profiles"), ["foxtrot"]);
    let (status, body) = get(&ember, &admin, "/profiles?global_project=true&sort=name").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        names(&body, "profiles"),
        ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    );
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bodies_are_refused_with_senlins_messages() {
    let ember = TestEmber::start().await;
    let token = ember.member_token().to_owned();
    let spec = json!({"type": "os.nova.server", "version": "1.0",
        "properties": {"flavor": "m1.small", "image": "cirros"}});
    let refused = [
        (
            "/profiles",
            json!({"profile": {"name": "web"}}),
            "'spec' is a required property",
        ),
        (
            "/profiles",
            json!({"profile": {"spec": spec}}),
            "'name' is a required property",
        ),
        (
            "/profiles",
            json!({"profile": {"name": "web", "spec": spec, "boo": "foo"}}),
            "Additional properties are not allowed ('boo' was unexpected)",
        ),
        (
            "/policies",
            json!({"policy": {"name": "p"}}),
            "'spec' is a required property",
        ),
        (
            "/clusters",
            json!({"bad": {"name": "web", "profile_id": "web"}}),
            "Request body missing 'cluster' key.",
        ),
        (
            "/clusters",
            json!({"cluster": {"name": "web"}}),
            "'profile_id' is a required property",
        ),
        (
            "/clusters",
            json!({"cluster": {"name": "web", "profile_id": "web", "bogus": 1}}),
            "Additional properties are not allowed ('bogus' was unexpected)",
        ),
    ];
    for (path, body, expected) in refused {
        let (status, _, answer) = call(&ember, &token, None, Method::POST, path, Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {answer}");
        assert_eq!(message(&answer), expected, "{path}");
    }
    ember.stop().await;
}
