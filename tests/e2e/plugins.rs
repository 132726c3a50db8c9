//! Lifecycle plugins through the gateway: operators update and deregister
//! plugins over gRPC (admin only), the change reaches the runner at once, and
//! the runner itself is not reachable from outside.

use ember_plugin_registry::testing::{Behaviour, CallJournal, TestPlugin};
use ember_proto::common::v1::StackOperation;
use ember_proto::plugin::v1::StackSnapshot;
use ember_proto::pluginregistry::v1 as pb;
use ember_proto::pluginregistry::v1::plugin_registry_service_client::PluginRegistryServiceClient;
use ember_proto::pluginregistry::v1::plugin_runner_service_client::PluginRunnerServiceClient;
use ember_runtime::Identity;
use ember_runtime::identity::InternalCredential;
use ember_tests::{TestEmber, channel, with_bearer};
use tonic::Code;

fn run_request(ember: &TestEmber) -> tonic::Request<pb::RunPreOperationsRequest> {
    let mut request = tonic::Request::new(pb::RunPreOperationsRequest {
        operation: StackOperation::Create as i32,
        project_id: "demo".to_owned(),
        stack: Some(StackSnapshot {
            stack_name: "web".to_owned(),
            project_id: "demo".to_owned(),
            ..StackSnapshot::default()
        }),
        previous: None,
        snapshot_on_demand: false,
        dry_run: false,
        break_glass: false,
    });
    Identity::new("demo", "demo", vec!["member".to_owned()]).attach(
        &InternalCredential::new(&ember.secrets().internal_credential),
        &mut request,
    );
    request
}

/// A test plug-in `name` that answers as `behaviour`, registered through
/// the gateway by the admin for `operations` (none: every operation).
async fn registered_plugin(
    ember: &TestEmber,
    journal: &CallJournal,
    name: &str,
    behaviour: Behaviour,
    operations: &[StackOperation],
) -> TestPlugin {
    registered_with(
        ember,
        journal,
        name,
        behaviour,
        pb::RegisterPluginRequest {
            operations: operations
                .iter()
                .map(|operation| *operation as i32)
                .collect(),
            ..pb::RegisterPluginRequest::default()
        },
    )
    .await
}

/// A test plug-in `name` answering as `behaviour`, registered by the admin
/// through the gateway with the other settings of `settings`.
async fn registered_with(
    ember: &TestEmber,
    journal: &CallJournal,
    name: &str,
    behaviour: Behaviour,
    settings: pb::RegisterPluginRequest,
) -> TestPlugin {
    let plugin = TestPlugin::start(name, behaviour, journal)
        .await
        .expect("test plugin");
    PluginRegistryServiceClient::new(ember.gateway_channel().await)
        .register_plugin(with_bearer(
            pb::RegisterPluginRequest {
                name: name.to_owned(),
                endpoint: plugin.endpoint.clone(),
                ..settings
            },
            ember.admin_token(),
        ))
        .await
        .expect("registered");
    plugin
}

#[tokio::test]
async fn an_admin_updates_and_deregisters_plugins_through_the_gateway() {
    let ember = TestEmber::start().await;
    let admin = ember.admin_token().to_owned();
    let mut plugins = PluginRegistryServiceClient::new(ember.gateway_channel().await);
    plugins
        .register_plugin(with_bearer(
            pb::RegisterPluginRequest {
                name: "quota".to_owned(),
                endpoint: "http://127.0.0.1:7000".to_owned(),
                ordinal: 10,
                ..pb::RegisterPluginRequest::default()
            },
            &admin,
        ))
        .await
        .expect("registered");

    let updated = plugins
        .update_plugin(with_bearer(
            pb::UpdatePluginRequest {
                name: "quota".to_owned(),
                ordinal: Some(-5),
                operations: Some(pb::OperationFilter {
                    values: vec![StackOperation::Create as i32, StackOperation::Update as i32],
                }),
                failure_mode: Some(pb::FailureMode::Warn as i32),
                timeout_ms: Some(750),
                enabled: Some(false),
                ..pb::UpdatePluginRequest::default()
            },
            &admin,
        ))
        .await
        .expect("updated")
        .into_inner();
    assert_eq!(updated.ordinal, -5);
    assert_eq!(updated.operations.len(), 2);
    assert_eq!(updated.failure_mode, pb::FailureMode::Warn as i32);
    assert_eq!(updated.timeout_ms, 750);
    assert!(!updated.enabled);
    assert_eq!(
        updated.endpoint, "http://127.0.0.1:7000",
        "unnamed fields are kept"
    );
    let shown = plugins
        .get_plugin(with_bearer(
            pb::GetPluginRequest {
                name: "quota".to_owned(),
            },
            &admin,
        ))
        .await
        .expect("shown")
        .into_inner();
    assert_eq!(shown, updated);

    let status = plugins
        .update_plugin(with_bearer(
            pb::UpdatePluginRequest {
                name: "quota".to_owned(),
                enabled: Some(true),
                ..pb::UpdatePluginRequest::default()
            },
            ember.member_token(),
        ))
        .await
        .expect_err("members may not update");
    assert_eq!(status.code(), Code::PermissionDenied);
    let status = plugins
        .update_plugin(with_bearer(
            pb::UpdatePluginRequest {
                name: "quota".to_owned(),
                endpoint: Some("quota:7000".to_owned()),
                ..pb::UpdatePluginRequest::default()
            },
            &admin,
        ))
        .await
        .expect_err("bad endpoint");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().contains("endpoint"),
        "{}",
        status.message()
    );
    let status = plugins
        .update_plugin(with_bearer(
            pb::UpdatePluginRequest {
                name: "absent".to_owned(),
                ordinal: Some(1),
                ..pb::UpdatePluginRequest::default()
            },
            &admin,
        ))
        .await
        .expect_err("unknown");
    assert_eq!(status.code(), Code::NotFound);

    let status = plugins
        .deregister_plugin(with_bearer(
            pb::DeregisterPluginRequest {
                name: "quota".to_owned(),
            },
            ember.member_token(),
        ))
        .await
        .expect_err("members may not deregister");
    assert_eq!(status.code(), Code::PermissionDenied);
    let removed = plugins
        .deregister_plugin(with_bearer(
            pb::DeregisterPluginRequest {
                name: "quota".to_owned(),
            },
            &admin,
        ))
        .await
        .expect("deregistered")
        .into_inner();
    assert_eq!(removed.plugin.expect("the removed plugin").ordinal, -5);
    for status in [
        plugins
            .get_plugin(with_bearer(
                pb::GetPluginRequest {
                    name: "quota".to_owned(),
                },
                &admin,
            ))
            .await
            .expect_err("gone"),
        plugins
            .deregister_plugin(with_bearer(
                pb::DeregisterPluginRequest {
                    name: "quota".to_owned(),
                },
                &admin,
            ))
            .await
            .expect_err("already gone"),
    ] {
        assert_eq!(status.code(), Code::NotFound);
    }
    ember.stop().await;
}

#[tokio::test]
async fn gateway_changes_reach_the_runner_which_only_the_engine_can_call() {
    let ember = TestEmber::start().await;
    let admin = ember.admin_token().to_owned();
    let journal = CallJournal::default();
    let plugin = TestPlugin::start(
        "gatekeeper",
        Behaviour::Deny("closed for maintenance".into()),
        &journal,
    )
    .await
    .expect("test plugin");
    let mut plugins = PluginRegistryServiceClient::new(ember.gateway_channel().await);
    let mut runner =
        PluginRunnerServiceClient::new(channel(ember.running.plugin_registry_addr).await);

    plugins
        .register_plugin(with_bearer(
            pb::RegisterPluginRequest {
                name: "gatekeeper".to_owned(),
                endpoint: plugin.endpoint.clone(),
                ..pb::RegisterPluginRequest::default()
            },
            &admin,
        ))
        .await
        .expect("registered");
    let answer = runner
        .run_pre_operations(run_request(&ember))
        .await
        .expect("ran")
        .into_inner();
    assert!(!answer.allowed);
    assert_eq!(answer.reason, "plugin gatekeeper: closed for maintenance");

    plugins
        .update_plugin(with_bearer(
            pb::UpdatePluginRequest {
                name: "gatekeeper".to_owned(),
                failure_mode: Some(pb::FailureMode::Warn as i32),
                ..pb::UpdatePluginRequest::default()
            },
            &admin,
        ))
        .await
        .expect("updated");
    let answer = runner
        .run_pre_operations(run_request(&ember))
        .await
        .expect("ran")
        .into_inner();
    assert!(answer.allowed, "WARN mode goes on: {answer:?}");

    plugins
        .deregister_plugin(with_bearer(
            pb::DeregisterPluginRequest {
                name: "gatekeeper".to_owned(),
            },
            &admin,
        ))
        .await
        .expect("deregistered");
    let answer = runner
        .run_pre_operations(run_request(&ember))
        .await
        .expect("ran")
        .into_inner();
    assert!(answer.allowed && answer.calls.is_empty(), "{answer:?}");
    assert_eq!(journal.summary(), ["gatekeeper:pre", "gatekeeper:pre"]);

    // The runner is internal: the gateway does not forward it, even for an admin.
    let status = PluginRunnerServiceClient::new(ember.gateway_channel().await)
        .run_pre_operations(with_bearer(
            pb::RunPreOperationsRequest {
                operation: StackOperation::Create as i32,
                ..pb::RunPreOperationsRequest::default()
            },
            &admin,
        ))
        .await
        .expect_err("not public");
    assert_eq!(status.code(), Code::Unimplemented);
    plugin.stop().await;
    ember.stop().await;
}

/// "Allowed?" asks the plug-ins in their dry-run mode: every one, each
/// told it is a dry run, with no post-operation; a deny is a `plugin`
/// blocker naming the plug-in and its reason, and the operation itself is
/// then accepted and fails with that reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_asks_every_plugin_in_its_dry_run_mode() {
    use crate::orchestration::HeatRest;
    let ember = TestEmber::start().await;
    let journal = CallJournal::default();
    let _gatekeeper = registered_plugin(
        &ember,
        &journal,
        "gatekeeper",
        Behaviour::Deny("closed for maintenance".into()),
        &[StackOperation::Delete],
    )
    .await;
    let _auditor = registered_plugin(&ember, &journal, "auditor", Behaviour::Allow, &[]).await;
    let member = HeatRest::new(&ember, "demo", Some(ember.member_token()));
    let stack = member
        .create_stack("guarded", serde_json::json!({"greeting": "hi"}))
        .await;
    member.wait_until_settled(&stack).await;
    // The create's post-operation may land after the stack settled.
    ember_tests::wait_for(
        "the create's post-operation",
        std::time::Duration::from_secs(10),
        || async { journal.summary().contains(&"auditor:post".to_owned()) },
    )
    .await;
    journal.clear();

    let answer = member.get(&format!("{stack}/actions/delete/allowed")).await;
    assert_eq!(answer.status, reqwest::StatusCode::OK, "{answer:?}");
    let body = &answer.body;
    assert_eq!(body["allowed"], false, "{body}");
    assert_eq!(body["blockers"][0]["kind"], "plugin", "{body}");
    assert!(
        body["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("\"gatekeeper\"")
                && reason.contains("closed for maintenance")),
        "{body}"
    );
    assert_eq!(
        body["break_glass_would_pass"], true,
        "an admin may break through a plug-in: {body}"
    );
    let mut asked = journal.summary();
    asked.sort();
    assert_eq!(
        asked,
        ["auditor:dry-run", "gatekeeper:dry-run"],
        "no post-operation"
    );
    // An update meets only the auditor, which allows it.
    journal.clear();
    let answer = member.get(&format!("{stack}/actions/update/allowed")).await;
    assert_eq!(answer.body["allowed"], true, "{answer:?}");
    assert_eq!(journal.summary(), ["auditor:dry-run"]);

    // The delete itself is accepted, and fails with the plug-in's reason.
    let answer = member.call(reqwest::Method::DELETE, &stack, None).await;
    assert_eq!(answer.status, reqwest::StatusCode::NO_CONTENT, "{answer:?}");
    let shown = member.wait_until_settled(&stack).await;
    assert_eq!(shown["stack_status"], "DELETE_FAILED", "{shown}");
    assert!(
        shown["stack_status_reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("closed for maintenance")),
        "{shown}"
    );
}

/// A lifecycle plug-in stops an update and a delete; an admin runs each
/// through it with `X-Ember-Break-Glass` (a member cannot, a blank reason
/// is 400): the operation completes, the plug-ins that ran get their
/// post-operation, and the audit trail and the stack's events say who
/// broke through what, and why. A delete through a lock and the plug-in is
/// recorded as two break-glasses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_breaks_glass_through_a_failing_plugin() {
    use crate::orchestration::{HeatRest, stack_template};
    use reqwest::StatusCode;
    use serde_json::{Value, json};
    let ember = TestEmber::start().await;
    let admin = ember.admin_token().to_owned();
    let journal = CallJournal::default();
    let gatekeeper = registered_plugin(
        &ember,
        &journal,
        "gatekeeper",
        Behaviour::Deny("change freeze".into()),
        &[StackOperation::Update, StackOperation::Delete],
    )
    .await;
    let member = HeatRest::new(&ember, "demo", Some(ember.member_token()));
    let stack = member
        .create_stack("frozen", json!({"greeting": "hi"}))
        .await;
    member.wait_until_settled(&stack).await;

    let call = |token: &str, method: reqwest::Method, body: Option<Value>, glass: Option<&str>| {
        let mut request = ember
            .http
            .request(method, format!("{}{stack}", member.base))
            .header("X-Auth-Token", token)
            .header("X-Request-Id", "req-glass-1");
        if let Some(reason) = glass {
            request = request.header("X-Ember-Break-Glass", reason);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        async move {
            let response = request.send().await.expect("request");
            let status = response.status();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let update = |greeting: &str| {
        Some(json!({"template": stack_template(), "parameters": {"greeting": greeting}}))
    };
    let (status, body) = call(
        ember.member_token(),
        reqwest::Method::PUT,
        update("a"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let shown = member.wait_until_settled(&stack).await;
    assert_eq!(shown["stack_status"], "UPDATE_FAILED", "{shown}");
    let (status, body) = call(
        ember.member_token(),
        reqwest::Method::PUT,
        update("b"),
        Some("members cannot"),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = call(&admin, reqwest::Method::PUT, update("b"), Some("  ")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    let (status, body) = call(
        &admin,
        reqwest::Method::PUT,
        update("through"),
        Some("INC-3 freeze exemption"),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let shown = member.wait_until_settled(&stack).await;
    assert_eq!(shown["stack_status"], "UPDATE_COMPLETE", "{shown}");
    assert_eq!(shown["parameters"]["greeting"], "through", "{shown}");
    let events = member.get(&format!("{stack}/events?limit=1000")).await;
    assert!(
        events.body["events"]
            .as_array()
            .is_some_and(|events| events.iter().any(|event| {
                event["resource_status_reason"]
                    .as_str()
                    .is_some_and(|reason| {
                        reason.contains("broken through by admin \"admin\"")
                            && reason.contains("INC-3 freeze exemption")
                    })
            })),
        "an event says who broke through: {events:?}"
    );

    // Locked too: the delete breaks through the lock at admission and
    // through the plug-in when its run meets it.
    let answer = member
        .post(
            &format!("{stack}/actions"),
            json!({"lock": {"reason": "quarter end"}}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    member.wait_until_settled(&stack).await;
    let (status, body) = call(
        &admin,
        reqwest::Method::DELETE,
        None,
        Some("INC-4 decommission"),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    member.wait_until_deleted(&stack).await;

    let trail = ember
        .http
        .get(ember.url("/orchestration/v1/demo/audit?target=frozen&outcome=broke_glass"))
        .header("X-Auth-Token", ember.member_token())
        .send()
        .await
        .expect("audit")
        .json::<Value>()
        .await
        .expect("audit JSON");
    let records = trail["audit_records"].as_array().expect("records");
    let seen: Vec<(&str, &str, &str)> = records
        .iter()
        .map(|record| {
            let blocker = record["blocker"].as_str().unwrap_or_default();
            let what = if blocker.contains("\"gatekeeper\"") && blocker.contains("change freeze") {
                "plugin"
            } else if blocker.contains("quarter end") {
                "lock"
            } else {
                blocker
            };
            (
                record["operation"].as_str().unwrap_or_default(),
                what,
                record["reason"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("delete", "plugin", "INC-4 decommission"),
            ("delete", "lock", "INC-4 decommission"),
            ("update", "plugin", "INC-3 freeze exemption"),
        ],
        "{records:#?}"
    );
    for record in records {
        assert_eq!(record["user_id"], "admin", "{record}");
        assert_eq!(record["request_id"], "req-glass-1", "{record}");
    }
    gatekeeper.stop().await;
}

/// The reasons of a stack's events from plug-in `plugin`, oldest first.
async fn plugin_event_reasons(
    member: &crate::orchestration::HeatRest,
    stack: &str,
    plugin: &str,
) -> Vec<String> {
    let events = member.get(&format!("{stack}/events?limit=1000")).await;
    events.body["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|event| event["resource_name"] == plugin)
        .filter_map(|event| event["resource_status_reason"].as_str())
        .map(str::to_owned)
        .collect()
}

/// A plug-in that keeps timing out opens its circuit: the next stack fails
/// at once with why (no timeout waited out), the plug-in is not called,
/// and `/metrics` and the registry show the circuit open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_whose_circuit_opened_fails_stacks_at_once_and_shows_it() {
    use crate::orchestration::HeatRest;
    use serde_json::json;
    let ember = TestEmber::start().await;
    let journal = CallJournal::default();
    let _slowpoke = registered_with(
        &ember,
        &journal,
        "slowpoke",
        Behaviour::Slow(std::time::Duration::from_secs(10)),
        pb::RegisterPluginRequest {
            operations: vec![StackOperation::Create as i32],
            timeout_ms: 300,
            breaker_failures: Some(2),
            breaker_cooldown_ms: Some(600_000),
            ..pb::RegisterPluginRequest::default()
        },
    )
    .await;
    let member = HeatRest::new(&ember, "demo", Some(ember.member_token()));
    for name in ["first", "second"] {
        let stack = member.create_stack(name, json!({"greeting": "hi"})).await;
        let shown = member.wait_until_settled(&stack).await;
        assert_eq!(shown["stack_status"], "CREATE_FAILED", "{shown}");
        assert_eq!(
            shown["stack_status_reason"], "plugin slowpoke: timed out after 300 ms",
            "{shown}"
        );
    }
    journal.clear();
    let stack = member
        .create_stack("third", json!({"greeting": "hi"}))
        .await;
    let shown = member.wait_until_settled(&stack).await;
    assert_eq!(shown["stack_status"], "CREATE_FAILED", "{shown}");
    let reason = shown["stack_status_reason"].as_str().expect("reason");
    assert!(
        reason.starts_with("plugin slowpoke: unavailable: circuit open since ")
            && reason.contains("after 2 consecutive failures (last: timed out after 300 ms)"),
        "{reason}"
    );
    assert_eq!(
        plugin_event_reasons(&member, &stack, "slowpoke").await,
        [format!(
            "plugin slowpoke: pre-operation CIRCUIT_OPEN in 0 ms: {}",
            &reason["plugin slowpoke: ".len()..]
        )],
        "not called, no time spent"
    );
    assert!(journal.calls().is_empty(), "{:?}", journal.summary());

    let shown = PluginRegistryServiceClient::new(ember.gateway_channel().await)
        .get_plugin(with_bearer(
            pb::GetPluginRequest {
                name: "slowpoke".to_owned(),
            },
            ember.admin_token(),
        ))
        .await
        .expect("shown")
        .into_inner();
    let circuit = shown.circuit.expect("circuit");
    assert_eq!(circuit.state, pb::CircuitState::Open as i32);
    assert_eq!(circuit.consecutive_failures, 2);

    let open_line = "ember_plugin_circuit_open{service=\"plugin-registry\",plugin=\"slowpoke\"} 1";
    ember_tests::wait_for(
        "/metrics to show the open circuit",
        std::time::Duration::from_secs(20),
        || async { ember.metrics().await.contains(open_line) },
    )
    .await;

    // The same over REST (the console's admin page): shown, then closed.
    let admin = HeatRest::new(&ember, "demo", Some(ember.admin_token()));
    let listed = admin.get("/plugins").await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    let plugin = &listed.body["plugins"][0];
    assert_eq!(
        (&plugin["name"], &plugin["circuit"]["state"]),
        (&json!("slowpoke"), &json!("OPEN")),
        "{plugin}"
    );
    assert_eq!(plugin["circuit"]["consecutive_failures"], 2);
    assert_eq!(plugin["circuit"]["last_failure"], "timed out after 300 ms");
    assert_eq!(plugin["operations"], json!(["create"]));
    assert_eq!(
        (&plugin["failure_mode"], &plugin["timeout_ms"]),
        (&json!("fail"), &json!(300))
    );
    let closed = admin
        .call(
            reqwest::Method::PATCH,
            "/plugins/slowpoke",
            Some(json!({"plugin": {"close_circuit": true}})),
        )
        .await;
    assert_eq!(closed.status, 200, "{:?}", closed.body);
    assert_eq!(closed.body["plugin"]["circuit"]["state"], "CLOSED");
    assert_eq!(
        admin.get("/plugins/slowpoke").await.body["plugin"]["circuit"]["state"],
        "CLOSED"
    );
    ember.stop().await;
}

/// A plug-in in observe mode denies: the stack is created anyway, and the
/// verdict is an event and an audit record (`observed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observing_plugins_verdict_is_recorded_and_not_enforced() {
    use crate::orchestration::HeatRest;
    use serde_json::{Value, json};
    let ember = TestEmber::start().await;
    let journal = CallJournal::default();
    let _policy = registered_with(
        &ember,
        &journal,
        "new-policy",
        Behaviour::Deny("no public ports".into()),
        pb::RegisterPluginRequest {
            operations: vec![StackOperation::Create as i32],
            enforce: Some(false),
            ..pb::RegisterPluginRequest::default()
        },
    )
    .await;
    let member = HeatRest::new(&ember, "demo", Some(ember.member_token()));
    let stack = member
        .create_stack("watched", json!({"greeting": "hi"}))
        .await;
    let shown = member.wait_until_settled(&stack).await;
    assert_eq!(shown["stack_status"], "CREATE_COMPLETE", "{shown}");
    let reasons = plugin_event_reasons(&member, &stack, "new-policy").await;
    assert!(
        reasons.iter().any(|reason| {
            reason.starts_with("plugin new-policy: pre-operation DENY in ")
                && reason.ends_with(": no public ports (observe mode: not enforced)")
        }),
        "{reasons:?}"
    );
    assert_eq!(journal.summary(), ["new-policy:pre", "new-policy:post"]);

    let trail = ember
        .http
        .get(ember.url("/orchestration/v1/demo/audit?target=watched&outcome=observed"))
        .header("X-Auth-Token", ember.member_token())
        .send()
        .await
        .expect("audit")
        .json::<Value>()
        .await
        .expect("audit JSON");
    let records = trail["audit_records"].as_array().expect("records");
    assert_eq!(records.len(), 1, "{trail}");
    assert_eq!(records[0]["operation"], "create");
    assert_eq!(records[0]["outcome"], "observed");
    assert_eq!(
        records[0]["blocker"],
        "lifecycle plugin \"new-policy\" would have stopped it: no public ports"
    );
    ember.stop().await;
}

/// The plug-in REST routes (Ember's, for the console and scripts): an
/// admin changes settings by name; bad bodies are 400 naming what is
/// wrong, an unknown plug-in 404, and a member or reader may not even
/// read the registry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_are_read_and_changed_over_rest_by_admins_only() {
    use crate::orchestration::HeatRest;
    use reqwest::Method;
    use serde_json::json;
    let ember = TestEmber::start().await;
    let journal = CallJournal::default();
    let _policy = registered_plugin(&ember, &journal, "policy", Behaviour::Allow, &[]).await;
    let admin = HeatRest::new(&ember, "demo", Some(ember.admin_token()));
    let changed = admin
        .call(
            Method::PATCH,
            "/plugins/policy",
            Some(
                json!({"plugin": {"enabled": false, "enforce": false, "ordinal": 7,
                "failure_mode": "warn", "timeout_ms": 900, "breaker_failures": 3,
                "breaker_cooldown_ms": 5000}}),
            ),
        )
        .await;
    assert_eq!(changed.status, 200, "{:?}", changed.body);
    let plugin = &changed.body["plugin"];
    assert_eq!(
        json!([
            plugin["enabled"],
            plugin["enforce"],
            plugin["ordinal"],
            plugin["failure_mode"],
            plugin["timeout_ms"],
            plugin["breaker_failures"],
            plugin["breaker_cooldown_ms"]
        ]),
        json!([false, false, 7, "warn", 900, 3, 5000])
    );
    assert_eq!(admin.get("/plugins/policy").await.body, changed.body);

    for (body, wanted) in [
        (
            json!({"plugin": {"failure_mode": "explode"}}),
            "failure_mode",
        ),
        (json!({"plugin": {"colour": "red"}}), "colour"),
        (json!({"enabled": false}), "plugin"),
        (json!({"plugin": {"timeout_ms": 0}}), "timeout"),
    ] {
        let refused = admin
            .call(Method::PATCH, "/plugins/policy", Some(body.clone()))
            .await;
        assert_eq!(refused.status, 400, "{body}: {:?}", refused.body);
        assert!(
            refused.message().contains(wanted),
            "{body}: {}",
            refused.message()
        );
    }
    let missing = admin.get("/plugins/nothing-here").await;
    assert_eq!(missing.status, 404, "{:?}", missing.body);

    let member = HeatRest::member(&ember);
    for answer in [
        member.get("/plugins").await,
        member.get("/plugins/policy").await,
        member
            .call(
                Method::PATCH,
                "/plugins/policy",
                Some(json!({"plugin": {"enabled": true}})),
            )
            .await,
    ] {
        assert_eq!(answer.status, 403, "{:?}", answer.body);
    }
    assert_eq!(
        admin.get("/plugins/policy").await.body["plugin"]["enabled"],
        false
    );
    ember.stop().await;
}
