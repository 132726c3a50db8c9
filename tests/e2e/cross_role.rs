//! The cross-role suite (issue 40): Keystone's default roles nest reader ⊂
//! member ⊂ admin, and a `reader` may read and never change. Project
//! "demo" makes one of everything (the cross-project suite's objects);
//! then **every** REST route (from the gateway's own route table, each
//! path's methods from its 405 `Allow`) and **every** public gRPC method
//! (from the proto descriptors) is called as a reader, a member of another
//! project, a member and an admin — so a new route or method is walked
//! without anyone listing it:
//! - a reader is refused every write (403 / PERMISSION_DENIED naming the
//!   reader role and the role needed) and answered every read exactly as a
//!   member is; afterwards nothing of the project changed;
//! - a member of another project reaches nothing (the cross-project
//!   suite's rule: refused, never a success on an object);
//! - a member and an admin are never refused for their role.
//!
//! Which calls are writes is the gateway's own table
//! (`ember_api_gateway::roles`): everything but GET and a few listed calls
//! that change nothing, and every RPC not named like a read.

use std::time::Duration;

use ember_api_gateway::roles::{Access, grpc_access, rest_access};
use ember_tests::{TestEmber, wait_for};
use reqwest::Method;
use serde_json::{Value, json};

use super::cross_project::{
    call, concrete, grpcurl, methods_of, names_an_object, public_grpc_methods, router_paths,
    victim_objects, victim_state,
};

/// What the gateway says when the rule refuses a reader.
const READER_REFUSAL: &str = "has only the reader role";

fn body_for(method: &Method) -> Option<Value> {
    (*method != Method::GET && *method != Method::DELETE).then(|| json!({}))
}

/// The status of a gRPC failure (`grpcurl -format-error` prints it as JSON).
fn grpc_code(stderr: &str) -> Option<u64> {
    serde_json::from_str::<Value>(stderr)
        .ok()
        .and_then(|error| error["code"].as_u64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_and_method_as_reader_other_project_member_and_admin() {
    let ember = TestEmber::start_configured(|config| {
        config.engine.compute.build_ms = 0;
        config.engine.compute.delete_ms = 0;
        config.engine.compute.power_ms = 0;
    })
    .await;
    let victim = victim_objects(&ember).await;
    let before = victim_state(&ember, &victim).await;
    let reader = ember.token_for("rita", "demo", &["reader"]);
    let stranger = ember.outsider_token();
    let member = ember.member_token().to_owned();
    let admin = ember.admin_token().to_owned();

    let mut routes = Vec::new();
    for pattern in router_paths().await {
        // The router's 404 fallback is not a route.
        if pattern == "/healthz" || pattern == "/metrics" || pattern.contains("axum_fallback") {
            continue;
        }
        let path = concrete(&pattern, &victim, "demo");
        // A pattern of the table no request reaches (a nested router's
        // root) answers the fallback's 404: not a route.
        let (status, text) = call(&ember, &member, Method::GET, &path, None).await;
        if status == 404 && text.contains("no API at") {
            continue;
        }
        for method in methods_of(&ember, &member, &path).await {
            routes.push((pattern.clone(), path.clone(), method));
        }
    }
    let writes = routes
        .iter()
        .filter(|(pattern, _, method)| rest_access(method, pattern) == Access::Write)
        .count();
    assert!(
        routes.len() >= 80 && writes >= 40,
        "only {} REST calls ({writes} writes) were found",
        routes.len()
    );

    // The reader, then the other project: neither may change anything.
    let mut problems = Vec::new();
    for (pattern, path, method) in &routes {
        let (status, text) = call(&ember, &reader, method.clone(), path, body_for(method)).await;
        match rest_access(method, pattern) {
            Access::Write => {
                if status != 403
                    || !text.contains(READER_REFUSAL)
                    || !text.contains("member or admin role")
                {
                    problems.push(format!(
                        "reader: {method} {pattern} answered {status}, not the 403 of the rule: {text}"
                    ));
                }
            }
            Access::Read | Access::CredentialInUrl => {
                // ("allowed?" may tell a reader it may not: a 200.)
                if status == 403 && text.contains(READER_REFUSAL) {
                    problems.push(format!(
                        "reader: the read {method} {pattern} was refused: {text}"
                    ));
                } else if *method == Method::GET {
                    // A read answers a reader as it answers a member.
                    let (member_status, member_text) =
                        call(&ember, &member, method.clone(), path, None).await;
                    if member_status != status {
                        problems.push(format!(
                            "reader: GET {pattern} answered {status} ({text}), a member {member_status} ({member_text})"
                        ));
                    }
                }
            }
        }
        let (status, text) = call(&ember, &stranger, method.clone(), path, body_for(method)).await;
        if names_an_object(pattern) && (200..300).contains(&status) {
            problems.push(format!(
                "another project: {method} {pattern} answered {status}: {text}"
            ));
        }
    }

    // Every public gRPC method as the reader.
    let methods = public_grpc_methods(&victim);
    assert!(methods.len() >= 60, "only {} gRPC methods", methods.len());
    for (target, request) in &methods {
        let (success, stdout, stderr) = grpcurl(&ember, &reader, target, request);
        match grpc_access(&format!("/{target}")) {
            Access::Write => {
                if success || grpc_code(&stderr) != Some(7) || !stderr.contains(READER_REFUSAL) {
                    problems.push(format!(
                        "reader: gRPC {target} was not refused PERMISSION_DENIED: {stdout}{stderr}"
                    ));
                }
            }
            Access::Read | Access::CredentialInUrl => {
                if stderr.contains(READER_REFUSAL) {
                    problems.push(format!("reader: the read {target} was refused: {stderr}"));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} call(s) broke the rule of roles:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert_eq!(
        before,
        victim_state(&ember, &victim).await,
        "a reader or another project changed the project's objects"
    );

    // A member and an admin are never refused for their role (these calls
    // do change things: they run last).
    for caller in [&member, &admin] {
        for (target, request) in &methods {
            let (_, _, stderr) = grpcurl(&ember, caller, target, request);
            if stderr.contains(READER_REFUSAL) {
                problems.push(format!("gRPC {target} refused a member or admin: {stderr}"));
            }
        }
        for (pattern, path, method) in &routes {
            let (status, text) = call(&ember, caller, method.clone(), path, body_for(method)).await;
            if status == 403 && text.contains(READER_REFUSAL) {
                problems.push(format!(
                    "{method} {pattern} refused a member or admin ({status}): {text}"
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} call(s) refused a member or an admin:\n{}",
        problems.len(),
        problems.join("\n")
    );
    ember.stop().await;
}

/// The calls the issue found a reader making — software configs and
/// deployments (REST and gRPC) and a wait condition handle's signal —
/// refused for a reader and done for a member; a handle's own signal URL
/// still works (its token is the credential, not a user's roles).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_cannot_write_configs_deployments_or_signals_and_a_member_can() {
    let ember = TestEmber::start().await;
    let reader = ember.token_for("rita", "demo", &["reader"]);
    let member = ember.member_token().to_owned();
    let heat = "/orchestration/v1/demo";
    let refused = |(status, text): (u16, String), what: &str| {
        assert_eq!(status, 403, "{what}: {text}");
        assert!(
            text.contains(READER_REFUSAL) && text.contains("rita"),
            "{what}: {text}"
        );
    };

    let config_body = json!({"name": "c", "config": "echo hi"});
    refused(
        call(
            &ember,
            &reader,
            Method::POST,
            &format!("{heat}/software_configs"),
            Some(config_body.clone()),
        )
        .await,
        "a reader's config",
    );
    let (status, text) = call(
        &ember,
        &member,
        Method::POST,
        &format!("{heat}/software_configs"),
        Some(config_body),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let config_id = serde_json::from_str::<Value>(&text).expect("json")["software_config"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let deployment_body = json!({"config_id": config_id, "server_id": "server-1"});
    refused(
        call(
            &ember,
            &reader,
            Method::POST,
            &format!("{heat}/software_deployments"),
            Some(deployment_body.clone()),
        )
        .await,
        "a reader's deployment",
    );
    let (status, text) = call(
        &ember,
        &member,
        Method::POST,
        &format!("{heat}/software_deployments"),
        Some(deployment_body),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let deployment_id = serde_json::from_str::<Value>(&text).expect("json")["software_deployment"]
        ["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let deployment = format!("{heat}/software_deployments/{deployment_id}");
    let update = json!({"status": "COMPLETE", "status_reason": "done"});
    refused(
        call(
            &ember,
            &reader,
            Method::PUT,
            &deployment,
            Some(update.clone()),
        )
        .await,
        "a reader's deployment update",
    );
    refused(
        call(&ember, &reader, Method::DELETE, &deployment, None).await,
        "a reader's deployment delete",
    );
    // Still there, unchanged, and readable by the reader.
    let (status, text) = call(&ember, &reader, Method::GET, &deployment, None).await;
    assert_eq!(status, 200, "{text}");
    assert_ne!(
        serde_json::from_str::<Value>(&text).expect("json")["software_deployment"]["status"],
        "COMPLETE"
    );
    let (status, text) = call(&ember, &member, Method::PUT, &deployment, Some(update)).await;
    assert_eq!(status, 200, "{text}");
    let (status, text) = call(&ember, &member, Method::DELETE, &deployment, None).await;
    assert!((200..300).contains(&status), "{text}");

    // gRPC: the same rule.
    let request = json!({"id": config_id}).to_string();
    let target = "ember.engine.v1.SoftwareConfigService/DeleteSoftwareConfig";
    let (success, _, stderr) = grpcurl(&ember, &reader, target, &request);
    assert!(
        !success && grpc_code(&stderr) == Some(7) && stderr.contains(READER_REFUSAL),
        "{stderr}"
    );
    let (status, _) = call(
        &ember,
        &reader,
        Method::GET,
        &format!("{heat}/software_configs/{config_id}"),
        None,
    )
    .await;
    assert_eq!(status, 200, "the config survived the reader's delete");
    let (success, stdout, stderr) = grpcurl(&ember, &member, target, &request);
    assert!(success, "{stdout}{stderr}");

    // A wait condition: the reader's signal is refused, the member's lands.
    let template = json!({
        "heat_template_version": "2021-04-16",
        "resources": {
            "handle": {"type": "OS::Heat::WaitConditionHandle"},
            "wait": {"type": "OS::Heat::WaitCondition",
                     "properties": {"handle": {"get_resource": "handle"}, "count": 1, "timeout": 600}}}});
    let (status, text) = call(
        &ember,
        &member,
        Method::POST,
        &format!("{heat}/stacks"),
        Some(json!({"stack_name": "waiting", "template": template})),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    let stack_id = serde_json::from_str::<Value>(&text).expect("json")["stack"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let stack = format!("{heat}/stacks/waiting/{stack_id}");
    let signal = format!("{stack}/resources/handle/signal");
    let data = json!({"status": "SUCCESS", "reason": "up", "data": "ok", "id": "1"});
    // A handle takes signals once it is created (a 409 before then).
    wait_for(
        "the handle to be created",
        Duration::from_secs(20),
        || async {
            let (_, text) = call(
                &ember,
                &member,
                Method::GET,
                &format!("{stack}/resources/handle"),
                None,
            )
            .await;
            serde_json::from_str::<Value>(&text)
                .map(|handle| handle["resource"]["resource_status"] == "CREATE_COMPLETE")
                .unwrap_or(false)
        },
    )
    .await;
    refused(
        call(&ember, &reader, Method::POST, &signal, Some(data.clone())).await,
        "a reader's signal",
    );
    let (status, text) = call(&ember, &reader, Method::GET, &stack, None).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("json")["stack"]["stack_status"],
        "CREATE_IN_PROGRESS",
        "the reader's signal did not count"
    );
    let (status, text) = call(&ember, &member, Method::POST, &signal, Some(data)).await;
    assert_eq!(status, 200, "{text}");
    wait_for("the signalled stack", Duration::from_secs(20), || async {
        let (_, text) = call(&ember, &member, Method::GET, &stack, None).await;
        serde_json::from_str::<Value>(&text)
            .map(|stack| stack["stack"]["stack_status"] == "CREATE_COMPLETE")
            .unwrap_or(false)
    })
    .await;
    ember.stop().await;
}
