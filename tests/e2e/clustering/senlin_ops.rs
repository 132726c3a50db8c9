//! Senlin's cluster operations (`POST /clusters/{id}/ops`, microversion
//! 1.4): an operation of the profile type run on the members the filters
//! select, as a CLUSTER_OPERATION that queues behind the cluster's other
//! actions, with Senlin's messages for what cannot run, per-node outcomes
//! in the action, and nothing reachable from another project — through
//! REST and gRPC. And the `next` links of every paged clustering list.

use std::time::Duration;

use axum::http::StatusCode;
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::cluster_service_client::ClusterServiceClient;
use ember_tests::{TestEmber, wait_for, with_bearer};
use reqwest::Method;
use serde_json::{Value, json};

use crate::clustering::clusters::{Rest, location};

fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

/// A cluster of `size` `os.nova.server` nodes whose instances carry
/// `metadata`, ACTIVE; its id.
async fn nova_cluster(rest: &Rest<'_>, name: &str, size: u32, metadata: Value) -> String {
    rest.create_profile(
        json!({"name": format!("{name}-p"), "spec": {"type": "os.nova.server",
                "version": "1.0", "properties": {"flavor": "m1.small", "image": "cirros",
                "metadata": metadata}}}),
    )
    .await;
    let (status, headers, body) = rest
        .post(
            "/clusters",
            json!({"cluster": {"name": name, "profile_id": format!("{name}-p"),
                "desired_capacity": size, "max_size": -1}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    body["cluster"]["id"].as_str().expect("id").to_owned()
}

/// POSTs `body` to the cluster's `ops` in `version`: the status, body and
/// `Location`.
async fn operate(
    rest: &Rest<'_>,
    cluster: &str,
    version: &str,
    body: Value,
) -> (StatusCode, Value, Option<String>) {
    let response = rest
        .ember
        .http
        .post(
            rest.ember
                .url(&format!("/clustering/v1/clusters/{cluster}/ops")),
        )
        .header("X-Auth-Token", &rest.token)
        .header("OpenStack-API-Version", format!("clustering {version}"))
        .json(&body)
        .send()
        .await
        .expect("request");
    let status = StatusCode::from_u16(response.status().as_u16()).expect("status");
    let location = response
        .headers()
        .get("location")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body, location)
}

/// Runs an accepted operation to `expected`; the action as it ended.
async fn operate_to(rest: &Rest<'_>, cluster: &str, body: Value, expected: &str) -> Value {
    let (status, answer, at) = operate(rest, cluster, "1.4", body.clone()).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}: {answer}");
    let at = at.expect("Location");
    assert_eq!(
        at,
        format!(
            "/clustering/v1/actions/{}",
            answer["action"].as_str().expect("action id")
        )
    );
    rest.wait_action(&at, expected).await;
    rest.get(at.trim_start_matches("/clustering/v1")).await["action"].clone()
}

/// The status of the instance behind a node, as it is now.
async fn instance_status(rest: &Rest<'_>, node: &str) -> String {
    rest.get(&format!("/nodes/{node}?show_details=true")).await["node"]["details"]["status"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn ids(nodes: &[Value]) -> Vec<String> {
    nodes
        .iter()
        .map(|node| node["id"].as_str().expect("id").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_runs_on_the_members_its_filters_select() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let cluster = nova_cluster(&rest, "ops", 3, json!({})).await;
    let nodes = ids(&rest.nodes(&cluster).await);
    assert_eq!(nodes.len(), 3);
    let (status, headers, body) = rest
        .call(
            Method::PATCH,
            &format!("/nodes/{}", nodes[0]),
            Some(json!({"node": {"role": "master"}})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;

    // stop the master only, then start it again.
    let stop = operate_to(
        &rest,
        &cluster,
        json!({"stop": {"filters": {"role": "master"}}}),
        "SUCCEEDED",
    )
    .await;
    assert_eq!(stop["action"], "CLUSTER_OPERATION", "{stop}");
    assert_eq!(stop["status_reason"], "Cluster operation 'stop' completed.");
    let outcomes = stop["outputs"]["nodes"].as_object().expect("outcomes");
    assert_eq!(outcomes.len(), 1, "{stop}");
    assert_eq!(outcomes[&nodes[0]]["status"], "SUCCEEDED", "{stop}");
    assert_eq!(instance_status(&rest, &nodes[0]).await, "STOPPED");
    assert_eq!(instance_status(&rest, &nodes[1]).await, "ACTIVE");
    operate_to(
        &rest,
        &cluster,
        json!({"start": {"filters": {"role": ["master", "chief"]}}}),
        "SUCCEEDED",
    )
    .await;
    assert_eq!(instance_status(&rest, &nodes[0]).await, "ACTIVE");

    // reboot everyone (no filters), with the operation's parameters.
    let reboot = operate_to(
        &rest,
        &cluster,
        json!({"reboot": {"params": {"type": "HARD"}}}),
        "SUCCEEDED",
    )
    .await;
    assert_eq!(
        reboot["outputs"]["nodes"]
            .as_object()
            .map(|nodes| nodes.len()),
        Some(3),
        "{reboot}"
    );
    assert_eq!(reboot["inputs"]["params"], json!({"type": "HARD"}));
    let cluster_view = rest.get(&format!("/clusters/{cluster}")).await["cluster"].clone();
    assert_eq!(cluster_view["status"], "ACTIVE", "{cluster_view}");
    assert_eq!(cluster_view["desired_capacity"], 3, "{cluster_view}");

    // A node whose operation fails fails the action, naming it; the
    // others still ran. The master's instance is locked: it refuses a stop.
    operate_to(
        &rest,
        &cluster,
        json!({"lock": {"filters": {"role": "master"}}}),
        "SUCCEEDED",
    )
    .await;
    let failed = operate_to(&rest, &cluster, json!({"stop": {}}), "FAILED").await;
    let reason = failed["status_reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("Cluster operation 'stop' failed on 1 of 3 node(s)"),
        "{failed}"
    );
    let outcomes = failed["outputs"]["nodes"].as_object().expect("outcomes");
    assert_eq!(outcomes[&nodes[0]]["status"], "FAILED", "{failed}");
    assert_eq!(outcomes[&nodes[1]]["status"], "SUCCEEDED", "{failed}");
    assert_eq!(instance_status(&rest, &nodes[0]).await, "ACTIVE");
    assert_eq!(instance_status(&rest, &nodes[2]).await, "STOPPED");
    operate_to(
        &rest,
        &cluster,
        json!({"unlock": {"filters": {"role": "master"}}}),
        "SUCCEEDED",
    )
    .await;
    let others: Vec<Value> = rest
        .nodes(&cluster)
        .await
        .into_iter()
        .filter(|node| node["id"] != nodes[0].as_str())
        .map(|node| node["name"].clone())
        .collect();
    operate_to(
        &rest,
        &cluster,
        json!({"start": {"filters": {"name": others}}}),
        "SUCCEEDED",
    )
    .await;
    assert_eq!(instance_status(&rest, &nodes[2]).await, "ACTIVE");

    let listed = rest
        .get(&format!(
            "/actions?cluster_id={cluster}&action=CLUSTER_OPERATION"
        ))
        .await;
    assert_eq!(
        listed["actions"].as_array().map(Vec::len),
        Some(7),
        "{listed}"
    );
    let events = rest
        .get(&format!("/events?oid={}&action=NODE_OPERATION", nodes[0]))
        .await;
    assert!(
        events["events"]
            .as_array()
            .is_some_and(|events| !events.is_empty()),
        "{events}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_run_is_refused_with_senlins_messages() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    let cluster = nova_cluster(&rest, "bad", 1, json!({})).await;
    for (version, body, expected) in [
        (
            "1.3",
            json!({"reboot": {}}),
            "API version '1.3' is not supported on this method.",
        ),
        ("1.4", json!({}), "No operation specified"),
        (
            "1.4",
            json!({"reboot": {}, "stop": {}}),
            "Multiple operations specified",
        ),
        (
            "1.4",
            json!({"dance": {}}),
            "The requested operation 'dance' is not supported by the profile type 'os.nova.server-1.0'.",
        ),
        (
            "1.4",
            json!({"reboot": {"params": {"type": "Unknown"}}}),
            "'Unknown' must be one of the allowed values: SOFT, HARD.",
        ),
        (
            "1.4",
            json!({"reboot": {"params": {"kind": "SOFT"}}}),
            "Unrecognizable parameter 'kind'",
        ),
        (
            "1.4",
            json!({"reboot": {"params": "HARD"}}),
            "params: must be an object",
        ),
        (
            "1.4",
            json!({"reboot": {"filters": {"zone": "a", "flavor": "b"}}}),
            "Filter key 'zone' is unsupported\nFilter key 'flavor' is unsupported",
        ),
        (
            "1.4",
            json!({"reboot": {"filters": {"role": "nobody"}}}),
            "No node (matching the filter) could be found",
        ),
    ] {
        let (status, answer, at) = operate(&rest, &cluster, version, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(message(&answer), expected, "{body}");
        assert!(at.is_none(), "{body}");
    }
    // None of them recorded an action.
    let listed = rest
        .get(&format!(
            "/actions?cluster_id={cluster}&action=CLUSTER_OPERATION"
        ))
        .await;
    assert_eq!(listed["actions"], json!([]), "{listed}");

    let (status, answer, _) = operate(&rest, "nowhere", "1.4", json!({"reboot": {}})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert_eq!(
        message(&answer),
        "The cluster 'nowhere' could not be found."
    );

    // Another project's cluster is not found, by REST or by gRPC.
    let stranger = Rest {
        ember: &ember,
        token: ember.outsider_token(),
    };
    let (status, answer, _) = operate(&stranger, &cluster, "1.4", json!({"reboot": {}})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert_eq!(
        message(&answer),
        format!("The cluster '{cluster}' could not be found.")
    );
    let mut grpc = ClusterServiceClient::new(ember.gateway_channel().await);
    let refused = grpc
        .operate_cluster(with_bearer(
            pb::ClusterOperationRequest {
                cluster: cluster.clone(),
                operation: "reboot".into(),
                ..Default::default()
            },
            &stranger.token,
        ))
        .await
        .expect_err("another project's cluster");
    assert_eq!(refused.code(), tonic::Code::NotFound, "{refused:?}");

    // The owner's gRPC call records the action, as REST does.
    let accepted = grpc
        .operate_cluster(with_bearer(
            pb::ClusterOperationRequest {
                cluster: cluster.clone(),
                operation: "reboot".into(),
                params: r#"{"type": "SOFT"}"#.into(),
                filters: r#"{"status": ["ACTIVE"]}"#.into(),
            },
            ember.member_token(),
        ))
        .await
        .expect("accepted")
        .into_inner();
    rest.wait_action(
        &format!("/clustering/v1/actions/{}", accepted.action_id),
        "SUCCEEDED",
    )
    .await;
    let bad_filters = grpc
        .operate_cluster(with_bearer(
            pb::ClusterOperationRequest {
                cluster: cluster.clone(),
                operation: "reboot".into(),
                filters: "[1]".into(),
                ..Default::default()
            },
            ember.member_token(),
        ))
        .await
        .expect_err("filters not an object");
    assert_eq!(bad_filters.code(), tonic::Code::InvalidArgument);
    assert!(bad_filters.message().contains("filters"), "{bad_filters:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_waits_for_the_action_holding_the_cluster_lock() {
    let ember = TestEmber::start().await;
    let rest = Rest::member(&ember);
    // Each instance takes two seconds to build: a scale-out holds the
    // cluster's lock that long.
    let cluster = nova_cluster(&rest, "busy", 1, json!({"ember:simulate_build_ms": "2000"})).await;
    let scale_out = rest.act(&cluster, json!({"scale_out": {"count": 1}})).await;
    let action_status = |at: String| {
        let rest = &rest;
        async move {
            rest.get(at.trim_start_matches("/clustering/v1")).await["action"]["status"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        }
    };
    wait_for("the scale-out to run", Duration::from_secs(10), || async {
        action_status(scale_out.clone()).await == "RUNNING"
    })
    .await;
    let (status, answer, at) = operate(
        &rest,
        &cluster,
        "1.4",
        json!({"reboot": {"filters": {"status": "ACTIVE"}}}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    let operation = at.expect("Location");
    assert_eq!(action_status(operation.clone()).await, "READY", "queued");
    rest.wait_action(&scale_out, "SUCCEEDED").await;
    rest.wait_action(&operation, "SUCCEEDED").await;
    let ended = rest
        .get(operation.trim_start_matches("/clustering/v1"))
        .await["action"]
        .clone();
    assert_eq!(
        ended["outputs"]["nodes"]
            .as_object()
            .map(|nodes| nodes.len()),
        Some(1),
        "only the node ACTIVE when asked: {ended}"
    );
}

/// GETs `url` (absolute) as `token`; the body.
async fn get_absolute(ember: &TestEmber, url: &str, token: &str) -> Value {
    let response = ember
        .http
        .get(url)
        .header("X-Auth-Token", token)
        .send()
        .await
        .expect("request");
    assert!(response.status().is_success(), "GET {url}");
    response.json().await.expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_page_links_the_next_until_the_last() {
    let ember = TestEmber::start_configured(|config| {
        config.engine.compute.build_ms = 0;
    })
    .await;
    let rest = Rest::member(&ember);
    rest.create_profile(json!({"name": "pager", "spec": {"type": "os.nova.server",
                "version": "1.0", "properties": {"flavor": "m1.small", "image": "cirros"}}}))
        .await;
    let mut created = Vec::new();
    for index in 0..5 {
        let (status, headers, body) = rest
            .post(
                "/clusters",
                json!({"cluster": {"name": format!("page-{index}"), "profile_id": "pager",
                    "desired_capacity": 1}}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        rest.wait_action(&location(&headers), "SUCCEEDED").await;
        created.push(body["cluster"]["id"].as_str().expect("id").to_owned());
    }

    // Follow the links: 2 + 2 + 1, every other parameter kept.
    let mut url = ember.url("/clustering/v1/clusters?limit=2&sort=name:asc&status=ACTIVE");
    let mut seen = Vec::new();
    let mut pages = Vec::new();
    loop {
        let page = get_absolute(&ember, &url, &rest.token).await;
        let names: Vec<String> = page["clusters"]
            .as_array()
            .expect("clusters")
            .iter()
            .map(|cluster| cluster["name"].as_str().expect("name").to_owned())
            .collect();
        pages.push(names.len());
        seen.extend(names);
        match page.get("clusters_links") {
            Some(links) => {
                assert_eq!(links[0]["rel"], "next", "{page}");
                let next = links[0]["href"].as_str().expect("href").to_owned();
                assert!(
                    next.starts_with(&ember.url("/clustering/v1/clusters?")),
                    "{next}"
                );
                for kept in ["limit=2", "sort=name:asc", "status=ACTIVE", "marker="] {
                    assert!(next.contains(kept), "{kept} in {next}");
                }
                url = next;
            }
            None => break,
        }
        assert!(pages.len() < 5, "the links never end: {pages:?}");
    }
    assert_eq!(pages, [2, 2, 1]);
    assert_eq!(seen, ["page-0", "page-1", "page-2", "page-3", "page-4"]);

    // A limit the objects fill exactly has one more, empty, page; none
    // when the page is short, and none without paging past the default.
    let full = rest.get("/clusters?limit=5").await;
    assert!(full.get("clusters_links").is_some(), "{full}");
    let short = rest.get("/clusters?limit=6").await;
    assert!(short.get("clusters_links").is_none(), "{short}");
    let all = rest.get("/clusters").await;
    assert!(all.get("clusters_links").is_none(), "{all}");
    // Without `limit`, Senlin's answer: the list as the body's one key
    // (its clients read such a body as the list), up to 1000 objects.
    let events = rest.get("/events").await;
    assert_eq!(
        events
            .as_object()
            .map(|body| body.keys().map(String::as_str).collect::<Vec<_>>()),
        Some(vec!["events"]),
        "{events}"
    );
    assert!(events["events"].as_array().expect("events").len() > 2);

    // Every paged list links the same way.
    for name in ["hook-a", "hook-b"] {
        let (status, _, body) = rest
            .post(
                "/receivers",
                json!({"receiver": {"name": name, "type": "webhook", "cluster_id": created[0],
                    "action": "CLUSTER_SCALE_OUT"}}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    for (path, key) in [
        ("/nodes?limit=2", "nodes"),
        ("/profiles?limit=1", "profiles"),
        ("/actions?limit=2", "actions"),
        ("/events?limit=2", "events"),
        ("/receivers?limit=1", "receivers"),
    ] {
        let page = rest.get(path).await;
        let links = &page[format!("{key}_links")];
        let last = page[key][page[key].as_array().map_or(0, Vec::len) - 1]["id"]
            .as_str()
            .expect("last id")
            .to_owned();
        assert!(
            links[0]["href"]
                .as_str()
                .is_some_and(|href| href.ends_with(&format!("marker={last}"))),
            "{path}: {page}"
        );
        let next = get_absolute(
            &ember,
            links[0]["href"].as_str().expect("href"),
            &rest.token,
        )
        .await;
        assert!(
            !next[key]
                .as_array()
                .expect("items")
                .iter()
                .any(|item| item["id"] == last.as_str()),
            "{path}: the next page starts after the marker"
        );
    }

    // Another project sees none of them, and no link.
    let stranger = ember.outsider_token();
    let page = get_absolute(
        &ember,
        &ember.url("/clustering/v1/clusters?limit=2"),
        &stranger,
    )
    .await;
    assert_eq!(page["clusters"], json!([]), "{page}");
    assert!(page.get("clusters_links").is_none(), "{page}");
    let page = get_absolute(
        &ember,
        &ember.url("/clustering/v1/nodes?limit=2"),
        &stranger,
    )
    .await;
    assert_eq!(page["nodes"], json!([]), "{page}");
    assert!(page.get("nodes_links").is_none(), "{page}");
    assert_eq!(created.len(), 5);
}
