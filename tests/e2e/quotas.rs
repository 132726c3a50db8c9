//! Quotas end to end: read and set over gRPC through the gateway (members
//! read their own project's, admins any and set them), and every limit
//! refusing over REST before anything starts, with the limit named; other
//! projects are untouched.

use std::time::Duration;

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::quota_service_client::QuotaServiceClient;
use ember_tests::{TestEmber, with_bearer};
use serde_json::{Value, json};

async fn call(
    ember: &TestEmber,
    token: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let response = ember.send_as(token, method, path, body).await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn limit(quota: &pb::ProjectQuota, name: &str) -> pb::QuotaLimit {
    quota
        .limits
        .iter()
        .find(|limit| limit.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("no quota {name} in {quota:?}"))
}

fn assert_over_quota(status: u16, body: &Value, quota: &str) {
    assert_eq!(status, 403, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("quota exceeded") && message.contains(&format!("(quota {quota})")),
        "{message}"
    );
}

fn template(resources: usize) -> Value {
    let resources: serde_json::Map<String, Value> = (0..resources)
        .map(|index| (format!("r{index}"), json!({"type": "OS::Heat::None"})))
        .collect();
    json!({"heat_template_version": "2021-04-16", "resources": resources})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_are_read_set_and_enforced_per_project() {
    let ember = TestEmber::start_configured(|config| {
        config.engine.compute.build_ms = 0;
        config.engine.compute.delete_ms = 0;
    })
    .await;
    let member = ember.member_token().to_owned();
    let admin = ember.admin_token().to_owned();
    let stranger = ember.outsider_token();
    let mut quotas = QuotaServiceClient::new(ember.gateway_channel().await);

    // A member reads its own project's quotas: defaults and use.
    let own = quotas
        .get_quota(with_bearer(pb::GetQuotaRequest::default(), &member))
        .await
        .expect("own quotas")
        .into_inner();
    assert_eq!(own.project_id, "demo");
    assert_eq!(limit(&own, "resources_per_stack").limit, 10_000);
    assert_eq!(limit(&own, "stacks").used, Some(0));
    assert!(!limit(&own, "stacks").overridden);
    // ... not another's, and sets nothing.
    let refused = quotas
        .get_quota(with_bearer(
            pb::GetQuotaRequest {
                project_id: "demo".into(),
            },
            &stranger,
        ))
        .await
        .expect_err("another project's");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    let refused = quotas
        .set_quota(with_bearer(
            pb::SetQuotaRequest {
                project_id: "demo".into(),
                limits: [("stacks".to_owned(), 1000)].into(),
                reset: vec![],
            },
            &member,
        ))
        .await
        .expect_err("members do not set quotas");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    // Bad limits are refused by name, and nothing is written.
    for (name, value, expected) in [
        ("stack", 1, "quota \"stack\" does not exist"),
        ("stacks", -1, "quota stacks: -1 must be between 0 and"),
    ] {
        let refused = quotas
            .set_quota(with_bearer(
                pb::SetQuotaRequest {
                    project_id: "demo".into(),
                    limits: [(name.to_owned(), value), ("clusters".to_owned(), 7)].into(),
                    reset: vec![],
                },
                &admin,
            ))
            .await
            .expect_err("refused");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
        assert!(refused.message().contains(expected), "{refused:?}");
    }
    let unchanged = quotas
        .get_quota(with_bearer(pb::GetQuotaRequest::default(), &member))
        .await
        .expect("quotas")
        .into_inner();
    assert_eq!(limit(&unchanged, "clusters").limit, 100, "nothing written");

    // The admin sets demo's limits.
    let set = quotas
        .set_quota(with_bearer(
            pb::SetQuotaRequest {
                project_id: "demo".into(),
                limits: [
                    ("stacks".to_owned(), 1),
                    ("resources_per_stack".to_owned(), 3),
                    ("clusters".to_owned(), 1),
                    ("nodes_per_cluster".to_owned(), 5),
                ]
                .into(),
                reset: vec![],
            },
            &admin,
        ))
        .await
        .expect("set")
        .into_inner();
    assert_eq!(limit(&set, "stacks").limit, 1);
    assert!(limit(&set, "stacks").overridden);

    // Stacks: the template's size, then the count.
    let stacks = "/orchestration/v1/demo/stacks";
    let (status, body) = call(
        &ember,
        &member,
        reqwest::Method::POST,
        stacks,
        Some(json!({"stack_name": "big", "template": template(4)})),
    )
    .await;
    assert_over_quota(status, &body, "resources_per_stack");
    // A group of groups counts every member of the tree before anything
    // is made (Heat's max_resources_per_stack): a group of two groups of
    // two is seven resources, not one.
    let (status, body) = call(
        &ember,
        &member,
        reqwest::Method::POST,
        stacks,
        Some(json!({"stack_name": "bomb", "template": {
            "heat_template_version": "2021-04-16",
            "resources": {"bomb": {"type": "OS::Heat::ResourceGroup", "properties": {
                "count": 2,
                "resource_def": {"type": "OS::Heat::ResourceGroup", "properties": {
                    "count": 2, "resource_def": {"type": "OS::Heat::None"}}}}}}}})),
    )
    .await;
    assert_over_quota(status, &body, "resources_per_stack");
    let (status, body) = call(
        &ember,
        &member,
        reqwest::Method::POST,
        stacks,
        Some(json!({"stack_name": "first", "template": template(3)})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        &ember,
        &member,
        reqwest::Method::POST,
        stacks,
        Some(json!({"stack_name": "second", "template": template(1)})),
    )
    .await;
    assert_over_quota(status, &body, "stacks");
    // Another project is not limited by demo's quotas.
    let (status, body) = call(
        &ember,
        &stranger,
        reqwest::Method::POST,
        "/orchestration/v1/other/stacks",
        Some(json!({"stack_name": "theirs", "template": template(4)})),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    // Clusters: nodes per cluster bounds a cluster without max_size.
    let (status, body) = call(
        &ember,
        &member,
        reqwest::Method::POST,
        "/clustering/v1/profiles",
        Some(
            json!({"profile": {"name": "p", "spec": {"type": "ember.instance", "version": "1.0",
            "properties": {"flavor": "m1.small", "image": "debian-12"}}}}),
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let cluster = |name: &str, desired: u32| json!({"cluster": {"name": name, "profile_id": "p", "min_size": 0, "desired_capacity": desired}});
    let (status, body) = call(
        &ember,
        &member,
        reqwest::Method::POST,
        "/clustering/v1/clusters",
        Some(cluster("huge", 6)),
    )
    .await;
    assert_over_quota(status, &body, "nodes_per_cluster");
    let (status, body) = call(
        &ember,
        &member,
        reqwest::Method::POST,
        "/clustering/v1/clusters",
        Some(cluster("web", 2)),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = call(
        &ember,
        &member,
        reqwest::Method::POST,
        "/clustering/v1/clusters",
        Some(cluster("another", 1)),
    )
    .await;
    assert_over_quota(status, &body, "clusters");
    for growth in [
        json!({"resize": {"adjustment_type": "EXACT_CAPACITY", "number": 100000, "strict": false}}),
        json!({"scale_out": {"count": 4}}),
    ] {
        let (status, body) = call(
            &ember,
            &member,
            reqwest::Method::POST,
            "/clustering/v1/clusters/web/actions",
            Some(growth.clone()),
        )
        .await;
        assert_over_quota(status, &body, "nodes_per_cluster");
    }
    let (status, body) = call(
        &ember,
        &member,
        reqwest::Method::POST,
        "/clustering/v1/clusters/web/actions",
        Some(json!({"scale_out": {"count": 3}})),
    )
    .await;
    assert_eq!(status, 202, "up to the limit is fine: {body}");

    // Instances, in another project with a limit of 1.
    quotas
        .set_quota(with_bearer(
            pb::SetQuotaRequest {
                project_id: "other".into(),
                limits: [("instances".to_owned(), 1)].into(),
                reset: vec![],
            },
            &admin,
        ))
        .await
        .expect("set");
    let instance = |name: &str| json!({"instance": {"name": name, "flavor": "m1.small", "image": "debian-12"}});
    let (status, body) = call(
        &ember,
        &stranger,
        reqwest::Method::POST,
        "/compute/v1/instances",
        Some(instance("one")),
    )
    .await;
    assert!(status == 201 || status == 202, "{status} {body}");
    let (status, body) = call(
        &ember,
        &stranger,
        reqwest::Method::POST,
        "/compute/v1/instances",
        Some(instance("two")),
    )
    .await;
    assert_over_quota(status, &body, "instances");

    // Reset: back to the default.
    let reset = quotas
        .set_quota(with_bearer(
            pb::SetQuotaRequest {
                project_id: "demo".into(),
                limits: Default::default(),
                reset: vec!["stacks".into()],
            },
            &admin,
        ))
        .await
        .expect("reset")
        .into_inner();
    assert_eq!(limit(&reset, "stacks").limit, 512);
    assert!(!limit(&reset, "stacks").overridden);
    assert_eq!(limit(&reset, "stacks").used, Some(1));
    let (status, body) = call(
        &ember,
        &member,
        reqwest::Method::POST,
        stacks,
        Some(json!({"stack_name": "second", "template": template(1)})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    ember.stop().await;
}

/// The default `resources_per_stack` quota is 10,000: a stack that large is
/// created and deleted (inserts are batched under SQLite's variable limit;
/// 2,500 resources used to fail with "too many SQL variables").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_as_large_as_the_default_quota_is_created_and_deleted() {
    let ember = TestEmber::start().await;
    let token = ember.member_token().to_owned();
    let (status, body) = call(
        &ember,
        &token,
        reqwest::Method::POST,
        "/orchestration/v1/demo/stacks",
        Some(json!({"stack_name": "large", "template": template(10_000)})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let id = body["stack"]["id"].as_str().expect("id").to_owned();
    let path = format!("/orchestration/v1/demo/stacks/large/{id}");
    let status_of = || {
        let ember = &ember;
        let token = token.clone();
        let path = path.clone();
        async move {
            let (_, body) = call(ember, &token, reqwest::Method::GET, &path, None).await;
            body["stack"]["stack_status"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        }
    };
    ember_tests::wait_for(
        "10,000 resources created",
        Duration::from_secs(120),
        || async { !status_of().await.ends_with("IN_PROGRESS") },
    )
    .await;
    assert_eq!(status_of().await, "CREATE_COMPLETE");
    let (status, body) = call(
        &ember,
        &token,
        reqwest::Method::GET,
        &format!("{path}/resources"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let resources = body["resources"].as_array().expect("resources");
    assert_eq!(resources.len(), 10_000);
    assert!(
        resources
            .iter()
            .all(|resource| resource["resource_status"] == "CREATE_COMPLETE")
    );

    let (status, body) = call(&ember, &token, reqwest::Method::DELETE, &path, None).await;
    assert_eq!(status, 204, "{body}");
    ember_tests::wait_for(
        "10,000 resources deleted",
        Duration::from_secs(120),
        || async { !status_of().await.ends_with("IN_PROGRESS") },
    )
    .await;
    assert_eq!(status_of().await, "DELETE_COMPLETE");
    ember.stop().await;
}

/// Software configs and deployments count against their project (a
/// stack's too), a config's text is bounded, and another project is not
/// touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn software_configs_and_deployments_are_bounded_per_project() {
    let ember = TestEmber::start().await;
    let member = ember.member_token().to_owned();
    let admin = ember.admin_token().to_owned();
    let stranger = ember.outsider_token();
    let mut quotas = QuotaServiceClient::new(ember.gateway_channel().await);
    quotas
        .set_quota(with_bearer(
            pb::SetQuotaRequest {
                project_id: "demo".into(),
                limits: [
                    ("software_configs".to_owned(), 2),
                    ("software_deployments".to_owned(), 1),
                ]
                .into(),
                reset: vec![],
            },
            &admin,
        ))
        .await
        .expect("set");
    let heat = "/orchestration/v1/demo";
    let config = |name: &str| json!({"name": name, "config": "echo hi"});
    let mut ids = Vec::new();
    for name in ["one", "two"] {
        let (status, body) = call(
            &ember,
            &member,
            reqwest::Method::POST,
            &format!("{heat}/software_configs"),
            Some(config(name)),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        ids.push(
            body["software_config"]["id"]
                .as_str()
                .expect("id")
                .to_owned(),
        );
    }
    let (status, body) = call(
        &ember,
        &member,
        reqwest::Method::POST,
        &format!("{heat}/software_configs"),
        Some(config("three")),
    )
    .await;
    assert_over_quota(status, &body, "software_configs");
    // Another project is not touched.
    let (status, body) = call(
        &ember,
        &stranger,
        reqwest::Method::POST,
        "/orchestration/v1/other/software_configs",
        Some(config("theirs")),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // A config's text is bounded whatever the quota.
    let (status, body) = call(
        &ember,
        &stranger,
        reqwest::Method::POST,
        "/orchestration/v1/other/software_configs",
        Some(json!({"name": "huge", "config": "x".repeat(600 * 1024)})),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("a software config holds at most 524288 bytes"),
        "{body}"
    );
    let deployment = json!({"config_id": ids[0], "server_id": "server-1"});
    let (status, body) = call(
        &ember,
        &member,
        reqwest::Method::POST,
        &format!("{heat}/software_deployments"),
        Some(deployment.clone()),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(
        &ember,
        &member,
        reqwest::Method::POST,
        &format!("{heat}/software_deployments"),
        Some(deployment),
    )
    .await;
    assert_over_quota(status, &body, "software_deployments");
    // A stack's config counts too: its create fails naming the quota.
    let (status, body) = call(
        &ember,
        &member,
        reqwest::Method::POST,
        &format!("{heat}/stacks"),
        Some(json!({"stack_name": "configured", "template": {
            "heat_template_version": "2021-04-16",
            "resources": {"config": {"type": "OS::Heat::SoftwareConfig",
                                     "properties": {"config": "echo hi"}}}}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let stack = format!(
        "{heat}/stacks/configured/{}",
        body["stack"]["id"].as_str().expect("id")
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let failed = loop {
        let (_, shown) = call(&ember, &member, reqwest::Method::GET, &stack, None).await;
        if shown["stack"]["stack_status"] != "CREATE_IN_PROGRESS" {
            break shown;
        }
        assert!(std::time::Instant::now() < deadline, "{shown}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(failed["stack"]["stack_status"], "CREATE_FAILED", "{failed}");
    assert!(
        failed["stack"]["stack_status_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("(quota software_configs)"),
        "{failed}"
    );
    let own = quotas
        .get_quota(with_bearer(pb::GetQuotaRequest::default(), &member))
        .await
        .expect("own quotas")
        .into_inner();
    assert_eq!(limit(&own, "software_configs").used, Some(2));
    assert_eq!(limit(&own, "software_deployments").used, Some(1));
    ember.stop().await;
}

/// Snapshots of one stack are bounded (`snapshots_per_stack`): one more is
/// refused naming the quota, and deleting one makes room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_of_a_stack_are_bounded() {
    let ember = TestEmber::start().await;
    let member = ember.member_token().to_owned();
    let admin = ember.admin_token().to_owned();
    let mut quotas = QuotaServiceClient::new(ember.gateway_channel().await);
    quotas
        .set_quota(with_bearer(
            pb::SetQuotaRequest {
                project_id: "demo".into(),
                limits: [("snapshots_per_stack".to_owned(), 1)].into(),
                reset: vec![],
            },
            &admin,
        ))
        .await
        .expect("set");
    let heat = "/orchestration/v1/demo";
    let (status, body) = call(
        &ember,
        &member,
        reqwest::Method::POST,
        &format!("{heat}/stacks"),
        Some(json!({"stack_name": "kept", "template": template(2)})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let stack = format!(
        "{heat}/stacks/kept/{}",
        body["stack"]["id"].as_str().expect("id")
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, shown) = call(&ember, &member, reqwest::Method::GET, &stack, None).await;
        if shown["stack"]["stack_status"] == "CREATE_COMPLETE" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{shown}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let snapshots = format!("{stack}/snapshots");
    let snapshot = |name: &str| {
        call(
            &ember,
            &member,
            reqwest::Method::POST,
            &snapshots,
            Some(json!({ "name": name })),
        )
    };
    let (status, first) = snapshot("first").await;
    assert_eq!(status, 200, "{first}");
    let (status, body) = snapshot("second").await;
    assert_over_quota(status, &body, "snapshots_per_stack");
    let (status, body) = call(
        &ember,
        &member,
        reqwest::Method::DELETE,
        &format!("{stack}/snapshots/{}", first["id"].as_str().expect("id")),
        None,
    )
    .await;
    assert!(status == 204 || status == 200, "{status} {body}");
    let (status, body) = snapshot("third").await;
    assert_eq!(status, 200, "{body}");
    ember.stop().await;
}

/// The quota over REST (Ember's, under Heat's root, for the console and
/// scripts): a member reads their project's with what it uses, an admin
/// reads and sets any project's; a member may not set it nor read
/// another project's; bad bodies and unknown limits are 400 by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_are_read_and_set_over_rest() {
    use reqwest::Method;
    let ember = TestEmber::start().await;
    let member = ember.member_token().to_owned();
    let admin = ember.admin_token().to_owned();
    let (status, created) = call(
        &ember,
        &member,
        Method::POST,
        "/orchestration/v1/demo/stacks",
        Some(json!({"stack_name": "counted", "template":
            {"heat_template_version": "2021-04-16", "resources": {"n": {"type": "OS::Heat::None"}}}})),
    )
    .await;
    assert_eq!(status, 201, "{created}");

    let (status, own) = call(
        &ember,
        &member,
        Method::GET,
        "/orchestration/v1/demo/quotas",
        None,
    )
    .await;
    assert_eq!(status, 200, "{own}");
    assert_eq!(own["quota"]["project_id"], "demo");
    let limit = |quota: &Value, name: &str| {
        quota["quota"]["limits"]
            .as_array()
            .expect("limits")
            .iter()
            .find(|limit| limit["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {quota}"))
    };
    let stacks = limit(&own, "stacks");
    assert_eq!(
        (&stacks["used"], &stacks["overridden"]),
        (&json!(1), &json!(false)),
        "{stacks}"
    );
    assert_eq!(
        limit(&own, "nested_depth")["used"],
        Value::Null,
        "a per-object limit"
    );

    let (status, refused) = call(
        &ember,
        &member,
        Method::PUT,
        "/orchestration/v1/demo/quotas",
        Some(json!({"quota": {"limits": {"stacks": 100}}})),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    let (status, refused) = call(
        &ember,
        &member,
        Method::GET,
        "/orchestration/v1/other/quotas",
        None,
    )
    .await;
    assert_eq!(status, 403, "another project's quota: {refused}");

    let (status, set) = call(
        &ember,
        &admin,
        Method::PUT,
        "/orchestration/v1/other/quotas",
        Some(json!({"quota": {"limits": {"stacks": 3, "clusters": 2}}})),
    )
    .await;
    assert_eq!(status, 200, "{set}");
    assert_eq!(set["quota"]["project_id"], "other");
    assert_eq!(
        (
            &limit(&set, "stacks")["limit"],
            &limit(&set, "stacks")["overridden"]
        ),
        (&json!(3), &json!(true))
    );
    let (_, reset) = call(
        &ember,
        &admin,
        Method::PUT,
        "/orchestration/v1/other/quotas",
        Some(json!({"quota": {"reset": ["clusters"]}})),
    )
    .await;
    assert_eq!(limit(&reset, "clusters")["overridden"], false, "{reset}");
    assert_eq!(limit(&reset, "stacks")["limit"], 3);
    let (_, untouched) = call(
        &ember,
        &member,
        Method::GET,
        "/orchestration/v1/demo/quotas",
        None,
    )
    .await;
    assert_eq!(
        limit(&untouched, "stacks")["overridden"],
        false,
        "demo's quota is its own"
    );

    for (body, wanted) in [
        (json!({"quota": {"limits": {"widgets": 3}}}), "widgets"),
        (json!({"quota": {"limits": {"stacks": "many"}}}), "quota"),
        (json!({"limits": {"stacks": 3}}), "quota"),
    ] {
        let (status, refused) = call(
            &ember,
            &admin,
            Method::PUT,
            "/orchestration/v1/other/quotas",
            Some(body.clone()),
        )
        .await;
        assert_eq!(status, 400, "{body}: {refused}");
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(wanted), "{body}: {message}");
    }
}
