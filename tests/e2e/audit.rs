//! The audit trail and break-glass through the REST API and gRPC: a
//! cluster and a stack are locked, a member's operations and receivers'
//! webhooks (scale out, recover) are refused and recorded with the lock
//! that refused them, as is a scaling policy's signal to a locked stack;
//! an admin's break-glass without a reason is 400, a member's is 403, an
//! admin's with a reason runs the operation, keeps the lock and is
//! recorded (who, why, what it broke, the request id); update is not
//! breakable through a stack lock; unlock is recorded. The trail reads
//! the same under Heat's root, Senlin's and gRPC; another project reads
//! nothing of it and a member cannot ask for every project's.

use std::time::Duration;

use axum::http::StatusCode;
use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::audit_service_client::AuditServiceClient;
use ember_tests::{TestEmber, with_bearer};
use serde_json::{Value, json};

use crate::clustering::clusters::Rest;
use crate::clustering::senlin_receivers::{active_cluster, trigger};
use crate::orchestration::{HeatRest, stack_template};

const BREAK_GLASS: &str = "X-Ember-Break-Glass";

/// A clustering POST with extra headers.
async fn post_with(
    ember: &TestEmber,
    token: &str,
    path: &str,
    body: Value,
    headers: &[(&str, &str)],
) -> (StatusCode, Value) {
    let mut request = ember
        .http
        .post(ember.url(&format!("/clustering/v1{path}")))
        .header("X-Auth-Token", token)
        .header("OpenStack-API-Version", "clustering 1.12")
        .json(&body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("request");
    let status = StatusCode::from_u16(response.status().as_u16()).expect("status");
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The audit records `query` selects, as `token` reads them under `root`
/// (`/clustering/v1` or `/orchestration/v1/demo`).
async fn audit(ember: &TestEmber, token: &str, root: &str, query: &str) -> (StatusCode, Value) {
    let response = ember
        .http
        .get(ember.url(&format!("{root}/audit{query}")))
        .header("X-Auth-Token", token)
        .send()
        .await
        .expect("request");
    let status = StatusCode::from_u16(response.status().as_u16()).expect("status");
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn records(ember: &TestEmber, token: &str, query: &str) -> Vec<Value> {
    let (status, body) = audit(ember, token, "/clustering/v1", query).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["audit_records"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_locks_refusals_and_break_glass_are_audited() {
    let ember = TestEmber::start().await;
    let member = ember.member_token().to_owned();
    let admin = ember.admin_token().to_owned();
    let rest = Rest {
        ember: &ember,
        token: member.clone(),
    };
    let cluster_id = active_cluster(&rest, "db", 1).await;
    let alarm_url = crate::clustering::cluster_locks::scale_out_webhook(&rest, "db").await;
    let actions = format!("/clusters/{cluster_id}/actions");
    let (status, _, body) = rest
        .post(
            &actions,
            json!({"lock": {"level": "clusters", "reason": "db maintenance"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // "Allowed?" says why before anyone tries, and records nothing.
    let allowed = rest
        .get(&format!(
            "/clusters/{cluster_id}/allowed?operation=scale_out&count=1"
        ))
        .await;
    assert_eq!(allowed["allowed"], false, "{allowed}");
    assert_eq!(
        allowed["blockers"][0]["kind"], "maintenance_lock",
        "{allowed}"
    );
    assert_eq!(allowed["blockers"][0]["status"], 409, "{allowed}");
    assert_eq!(allowed["break_glass_would_pass"], true, "{allowed}");
    assert_eq!(
        allowed["maintenance_lock"]["reason"], "db maintenance",
        "{allowed}"
    );
    let node_id = rest.nodes(&cluster_id).await[0]["id"]
        .as_str()
        .expect("node id")
        .to_owned();
    let node = rest
        .get(&format!("/nodes/{node_id}/allowed?operation=delete"))
        .await;
    assert_eq!(node["allowed"], false, "{node}");
    assert_eq!(node["blockers"][0]["kind"], "maintenance_lock", "{node}");
    // Another project finds neither; a reader hears its role first.
    let callers = crate::instances::Callers::of(&ember);
    let stranger = Rest {
        ember: &ember,
        token: callers.stranger.clone(),
    };
    for path in [
        format!("/clusters/{cluster_id}/allowed?operation=scale_out"),
        format!("/nodes/{node_id}/allowed?operation=delete"),
    ] {
        let (status, _, body) = stranger.call(reqwest::Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
    }
    let reading = Rest {
        ember: &ember,
        token: callers.reader.clone(),
    }
    .get(&format!(
        "/clusters/{cluster_id}/allowed?operation=scale_out"
    ))
    .await;
    assert_eq!(reading["blockers"][0]["kind"], "role", "{reading}");
    assert_eq!(reading["blockers"][0]["status"], 403, "{reading}");
    assert_eq!(
        reading["blockers"][1]["kind"], "maintenance_lock",
        "{reading}"
    );
    let (status, _, body) = rest
        .call(
            reqwest::Method::GET,
            &format!("/clusters/{cluster_id}/allowed"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(message(&body).contains("?operation="), "{body}");
    let (status, _, body) = Rest {
        ember: &ember,
        token: ember.outsider_token(),
    }
    .call(
        reqwest::Method::GET,
        &format!("/clusters/{cluster_id}/allowed?operation=delete"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");

    // Refused, and recorded: the member's scale-out and the webhook.
    let (status, _, body) = rest
        .post(&actions, json!({"scale_out": {"count": 1}}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        message(&body),
        allowed["reason"],
        "the dry run said it first"
    );
    let (status, _, body) = trigger(&ember, &alarm_url, None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    // A health receiver's recover is refused and recorded alike.
    let (status, _, body) = rest
        .post(
            "/receivers",
            json!({"receiver": {"name": "heal", "type": "webhook", "cluster_id": "db",
                "action": "CLUSTER_RECOVER"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let heal_url = body["receiver"]["channel"]["alarm_url"]
        .as_str()
        .expect("alarm_url")
        .to_owned();
    let (status, _, body) = trigger(&ember, &heal_url, None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(message(&body).contains("recover is not allowed"), "{body}");

    // Break-glass: a reason is required, and an admin's role.
    let scale_out = json!({"scale_out": {"count": 1}});
    let (status, body) = post_with(
        &ember,
        &admin,
        &actions,
        scale_out.clone(),
        &[(BREAK_GLASS, " ")],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(message(&body).contains("needs a reason"), "{body}");
    let (status, body) = post_with(
        &ember,
        &member,
        &actions,
        scale_out.clone(),
        &[(BREAK_GLASS, "I really need to")],
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        message(&body).contains("only an admin can break glass"),
        "{body}"
    );
    // An admin without break-glass is refused like anyone.
    let (status, body) = post_with(&ember, &admin, &actions, scale_out.clone(), &[]).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, body) = post_with(
        &ember,
        &admin,
        &actions,
        scale_out,
        &[
            (BREAK_GLASS, "INC-7 primary lost"),
            ("X-Request-Id", "req-break-glass-7"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    ember_tests::wait_for("the cluster to grow", Duration::from_secs(30), || async {
        rest.nodes(&cluster_id).await.len() == 2
    })
    .await;
    let shown = rest.get(&format!("/clusters/{cluster_id}")).await;
    assert_eq!(
        shown["cluster"]["maintenance_lock"]["reason"], "db maintenance",
        "the lock stays: {shown}"
    );

    let (status, _, body) = rest.post(&actions, json!({"unlock": {}})).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // What the trail says, newest first.
    let trail = records(&ember, &member, "?target=db").await;
    let seen: Vec<(String, String, String)> = trail
        .iter()
        .map(|record| {
            (
                record["operation"].as_str().unwrap_or_default().to_owned(),
                record["outcome"].as_str().unwrap_or_default().to_owned(),
                record["user_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, String, String)> = [
        ("unlock", "accepted", "demo"),
        ("scale out", "broke_glass", "admin"),
        ("scale out", "refused", "admin"),
        ("recover", "refused", "demo"),
        ("scale out", "refused", "demo"),
        ("scale out", "refused", "demo"),
        ("lock", "accepted", "demo"),
    ]
    .into_iter()
    .map(|(operation, outcome, user)| (operation.into(), outcome.into(), user.into()))
    .collect();
    assert_eq!(seen, expected, "{trail:#?}");
    let broke = &trail[1];
    assert_eq!(broke["reason"], "INC-7 primary lost", "{broke}");
    assert_eq!(broke["request_id"], "req-break-glass-7", "{broke}");
    assert!(
        broke["blocker"]
            .as_str()
            .is_some_and(|blocker| blocker.contains("is locked (level clusters")),
        "{broke}"
    );
    assert_eq!(broke["target_type"], "cluster", "{broke}");
    assert_eq!(broke["target_id"], cluster_id.as_str(), "{broke}");
    assert_eq!(broke["project_id"], "demo", "{broke}");
    let refused = &trail[4];
    assert!(
        refused["blocker"]
            .as_str()
            .is_some_and(|blocker| blocker.contains("db maintenance")),
        "{refused}"
    );
    assert!(
        refused["request_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "the gateway's request id: {refused}"
    );
    assert_eq!(trail[6]["reason"], "db maintenance", "{trail:#?}");

    // Filters, and the same records under Heat's root.
    let broken = records(&ember, &member, "?outcome=broke_glass").await;
    assert_eq!(broken.len(), 1, "{broken:#?}");
    let (status, heat) = audit(&ember, &member, "/orchestration/v1/demo", "?target=db").await;
    assert_eq!(status, StatusCode::OK, "{heat}");
    assert_eq!(heat["audit_records"].as_array().map(Vec::len), Some(7));
    let page = records(&ember, &member, "?target=db&limit=2").await;
    let marker = page[1]["id"].as_str().expect("id");
    let next = records(
        &ember,
        &member,
        &format!("?target=db&limit=2&marker={marker}"),
    )
    .await;
    assert_eq!(next[0]["id"], trail[2]["id"], "{next:#?}");
    for (query, expected) in [
        ("?outcome=won", "outcome \"won\" is not one of"),
        (
            "?target_type=volume",
            "target_type \"volume\" is not one of",
        ),
        (
            "?since=yesterday",
            "since: \"yesterday\" is not an RFC 3339 time",
        ),
        ("?limit=5000", "limit 5000 is more than 1000"),
        ("?marker=nope", "marker: \"nope\" is not a UUID"),
        ("?colour=red", "unknown field `colour`"),
    ] {
        let (status, body) = audit(&ember, &member, "/clustering/v1", query).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert!(message(&body).contains(expected), "{query}: {body}");
    }

    // Another project reads nothing of it; a member cannot read every
    // project's; an admin can.
    let stranger = ember.outsider_token();
    assert!(records(&ember, &stranger, "").await.is_empty());
    assert!(records(&ember, &stranger, "?target=db").await.is_empty());
    let (status, body) = audit(&ember, &member, "/clustering/v1", "?all_projects=true").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(
        records(&ember, &admin, "?all_projects=true&target=db")
            .await
            .len(),
        7
    );

    // gRPC reads the same, and refuses a member's break-glass.
    let mut grpc = AuditServiceClient::new(ember.gateway_channel().await);
    let listed = grpc
        .list_audit_records(with_bearer(
            pb::ListAuditRecordsRequest {
                target: "db".into(),
                ..Default::default()
            },
            &member,
        ))
        .await
        .expect("listed")
        .into_inner()
        .records;
    assert_eq!(listed.len(), 7);
    assert_eq!(listed[1].outcome, "broke_glass");
    assert_eq!(listed[1].reason, "INC-7 primary lost");
    let mut clusters = ember_proto::engine::v1::cluster_service_client::ClusterServiceClient::new(
        ember.gateway_channel().await,
    );
    let mut request = with_bearer(
        pb::GetObjectRequest {
            id: cluster_id.clone(),
        },
        &member,
    );
    request.metadata_mut().insert(
        "x-ember-break-glass",
        "members cannot".parse().expect("metadata"),
    );
    let status = clusters
        .check(request)
        .await
        .expect_err("a member's break-glass");
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_lock_is_broken_only_for_what_keeps_it() {
    let ember = TestEmber::start().await;
    let member = HeatRest::new(&ember, "demo", Some(ember.member_token()));
    let stack = member
        .create_stack("audited", json!({"greeting": "hello"}))
        .await;
    member.wait_until_settled(&stack).await;
    let answer = member
        .post(
            &format!("{stack}/actions"),
            json!({"lock": {"level": "stacks", "reason": "freeze"}}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let shown = member.wait_until_settled(&stack).await;
    assert_eq!(shown["stack_status"], "LOCK_COMPLETE", "{shown}");

    let call = |method: reqwest::Method, body: Option<Value>, break_glass: Option<&str>| {
        let mut request = ember
            .http
            .request(method, format!("{}{stack}", member.base))
            .header("X-Auth-Token", ember.admin_token());
        if let Some(reason) = break_glass {
            request = request.header(BREAK_GLASS, reason);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        async move {
            let response = request.send().await.expect("request");
            let status = StatusCode::from_u16(response.status().as_u16()).expect("status");
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    // An update would take the stack out of LOCK_COMPLETE: refused even
    // through the glass, and recorded.
    let update = json!({"template": stack_template(), "parameters": {"greeting": "bye"}});
    let (status, body) = call(reqwest::Method::PUT, Some(update), Some("INC-9 hotfix")).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    // A delete leaves no unlocked stack behind: it runs through the lock.
    let (status, body) = call(reqwest::Method::DELETE, None, None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, body) = call(reqwest::Method::DELETE, None, Some("INC-9 decommission")).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    member.wait_until_deleted(&stack).await;

    let trail = records(&ember, ember.member_token(), "?target=audited").await;
    let seen: Vec<(&str, &str)> = trail
        .iter()
        .map(|record| {
            (
                record["operation"].as_str().unwrap_or_default(),
                record["outcome"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("delete", "broke_glass"),
            ("delete", "refused"),
            ("update", "refused"),
            ("lock", "accepted"),
        ],
        "{trail:#?}"
    );
    assert_eq!(trail[0]["reason"], "INC-9 decommission", "{trail:#?}");
    assert_eq!(trail[0]["target_type"], "stack", "{trail:#?}");
    assert_eq!(trail[3]["reason"], "freeze", "{trail:#?}");
}

/// The lock spec: a locked stack ignores "signals that modify the stack
/// (such as scaling)". A scaling policy's signal is refused with the lock
/// and recorded; the group keeps its size; after the unlock it scales.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scaling_signal_to_a_locked_stack_is_refused_and_audited() {
    let ember = TestEmber::start().await;
    let member = HeatRest::new(&ember, "demo", Some(ember.member_token()));
    let template = "heat_template_version: 2021-04-16
resources:
  group:
    type: OS::Heat::AutoScalingGroup
    properties: {min_size: 1, max_size: 3, resource: {type: OS::Heat::None}}
  grow:
    type: OS::Heat::ScalingPolicy
    properties: {auto_scaling_group_id: {get_resource: group}, adjustment_type: change_in_capacity, scaling_adjustment: 1, cooldown: 0}
outputs:
  size: {value: {get_attr: [group, current_size]}}
";
    let answer = member
        .post(
            "/stacks",
            json!({"stack_name": "scaled", "template": template}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let stack = format!(
        "/stacks/scaled/{}",
        answer.body["stack"]["id"].as_str().expect("id")
    );
    member.wait_until_settled(&stack).await;
    let answer = member
        .post(
            &format!("{stack}/actions"),
            json!({"lock": {"level": "stacks", "reason": "quiet hours"}}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    member.wait_until_settled(&stack).await;

    let signal = format!("{stack}/resources/grow/signal");
    let answer = member.post(&signal, json!({})).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{answer:?}");
    assert!(
        answer.message().contains("is locked") && answer.message().contains("quiet hours"),
        "the refusal names the lock: {answer:?}"
    );
    let size = |shown: &Value| {
        shown["outputs"]
            .as_array()
            .and_then(|outputs| outputs.iter().find(|output| output["output_key"] == "size"))
            .map(|output| output["output_value"].clone())
            .unwrap_or(Value::Null)
    };
    let shown = member.wait_until_settled(&stack).await;
    assert_eq!(size(&shown), json!(1), "the group kept its size: {shown}");

    let trail = records(&ember, ember.member_token(), "?target=scaled").await;
    let refused = &trail[0];
    assert_eq!(refused["operation"], "signal", "{trail:#?}");
    assert_eq!(refused["outcome"], "refused", "{trail:#?}");
    assert!(
        refused["blocker"]
            .as_str()
            .is_some_and(|blocker| blocker.contains("quiet hours")),
        "{refused}"
    );

    let answer = member
        .post(&format!("{stack}/actions"), json!({"unlock": {}}))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    member.wait_until_settled(&stack).await;
    let answer = member.post(&signal, json!({})).await;
    assert!(answer.status.is_success(), "{answer:?}");
    ember_tests::wait_for("the group to grow", Duration::from_secs(30), || async {
        size(&member.wait_until_settled(&stack).await) == json!(2)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_acting_on_a_locked_instance_is_audited_with_the_reason() {
    use crate::instances::{Callers, call, create_active, lock, wait_until_deleted};
    let ember = TestEmber::start().await;
    let callers = Callers::of(&ember);
    let uuid = create_active(&ember, &callers.member, "db-1").await;
    let (status, body) = lock(
        &ember,
        &callers.member,
        &uuid,
        json!({"target": true, "reason": "backup running"}),
    )
    .await;
    assert_eq!(status, 202, "{body}");

    // "Allowed?" for the member: the lock; for the admin: nothing (Nova
    // lets an admin act on a locked instance).
    let (status, allowed) = call(
        &ember,
        reqwest::Method::GET,
        &format!("/instances/{uuid}/allowed?operation=delete"),
        &callers.member,
        None,
    )
    .await;
    assert_eq!(status, 200, "{allowed}");
    assert_eq!(allowed["allowed"], false, "{allowed}");
    assert_eq!(
        allowed["blockers"][0]["kind"], "maintenance_lock",
        "{allowed}"
    );
    let (status, body) = call(
        &ember,
        reqwest::Method::DELETE,
        &format!("/instances/{uuid}"),
        &callers.member,
        None,
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(message(&body), allowed["reason"], "{body}");
    let (_, allowed) = call(
        &ember,
        reqwest::Method::GET,
        &format!("/instances/{uuid}/allowed?operation=delete"),
        &callers.project_admin,
        None,
    )
    .await;
    assert_eq!(allowed["allowed"], true, "{allowed}");
    let (status, body) = call(
        &ember,
        reqwest::Method::GET,
        &format!("/instances/{uuid}/allowed?operation=explode"),
        &callers.member,
        None,
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = call(
        &ember,
        reqwest::Method::GET,
        &format!("/instances/{uuid}/allowed?operation=delete"),
        &callers.stranger,
        None,
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = call(
        &ember,
        reqwest::Method::GET,
        &format!("/instances/{uuid}/allowed?operation=delete"),
        &callers.reader,
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["blockers"][0]["kind"], "role", "{body}");

    let response = ember
        .http
        .delete(ember.url(&format!("/compute/v1/instances/{uuid}")))
        .header("X-Auth-Token", &callers.project_admin)
        .header(BREAK_GLASS, "INC-12 disk full")
        .send()
        .await
        .expect("request");
    assert_eq!(response.status().as_u16(), 202);
    wait_until_deleted(&ember, &callers.member, &uuid).await;

    let trail = records(&ember, &callers.member, &format!("?target={uuid}")).await;
    let seen: Vec<(&str, &str, &str)> = trail
        .iter()
        .map(|record| {
            (
                record["operation"].as_str().unwrap_or_default(),
                record["outcome"].as_str().unwrap_or_default(),
                record["user_id"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("delete", "broke_glass", "admin"),
            ("delete", "refused", "demo"),
            ("lock", "accepted", "demo"),
        ],
        "{trail:#?}"
    );
    assert_eq!(trail[0]["reason"], "INC-12 disk full", "{trail:#?}");
    assert!(
        trail[0]["blocker"]
            .as_str()
            .is_some_and(|blocker| blocker.contains("backup running")),
        "{trail:#?}"
    );
    assert_eq!(trail[2]["reason"], "backup running", "{trail:#?}");
    // By name too, and not from another project.
    assert_eq!(
        records(&ember, &callers.member, "?target=db-1").await.len(),
        3
    );
    assert!(
        records(&ember, &callers.stranger, &format!("?target={uuid}"))
            .await
            .is_empty()
    );
}
