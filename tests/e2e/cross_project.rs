//! Projects never see or touch each other's objects (issue 13). Project
//! "demo" (the victim) makes one of everything; a member of project
//! "other" then calls **every** REST route and **every** public gRPC
//! method on it. The routes come from the gateway's own router (its
//! path table, each path's methods from the 405 `Allow` it answers) and
//! the methods from the proto descriptors, so a new route or method is
//! walked without anyone listing it. Every call naming one of the
//! victim's objects must be refused (403/404, NOT_FOUND/PERMISSION_DENIED,
//! or a 400 for a body the attacker's own request got wrong — never a
//! success); a call that succeeds (a list, a create in the attacker's own
//! project) may show none of the victim's identifiers; and afterwards the
//! victim's objects are exactly as they were.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use ember_tests::{TestEmber, wait_for};
use prost::Message;
use reqwest::Method;
use serde_json::{Value, json};

/// The victim's objects, and every identifier that must not leak.
#[derive(Debug, Default)]
pub(crate) struct Victim {
    pub(crate) stack_name: String,
    pub(crate) stack_id: String,
    pub(crate) event_id: String,
    pub(crate) cluster_id: String,
    pub(crate) node_id: String,
    pub(crate) profile_id: String,
    pub(crate) policy_id: String,
    pub(crate) action_id: String,
    pub(crate) instance_id: String,
    pub(crate) config_id: String,
    pub(crate) deployment_id: String,
    pub(crate) server_id: String,
}

impl Victim {
    /// Identifiers no answer to the attacker may contain.
    fn secrets(&self) -> Vec<&str> {
        vec![
            &self.stack_id,
            &self.cluster_id,
            &self.node_id,
            &self.profile_id,
            &self.policy_id,
            &self.action_id,
            &self.instance_id,
            &self.config_id,
            &self.deployment_id,
            &self.server_id,
            "victim-stack",
            "victim-cluster",
            "victim-profile",
            "victim-instance",
        ]
    }
}

pub(crate) async fn call(
    ember: &TestEmber,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, String) {
    let response = ember.send_as(token, method, path, body).await;
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

pub(crate) async fn json_of(ember: &TestEmber, token: &str, path: &str) -> Value {
    let (status, text) = call(ember, token, Method::GET, path, None).await;
    assert_eq!(status, 200, "{path}: {text}");
    serde_json::from_str(&text).expect("json")
}

async fn post(ember: &TestEmber, token: &str, path: &str, body: Value) -> Value {
    let (status, text) = call(ember, token, Method::POST, path, Some(body)).await;
    assert!((200..300).contains(&status), "{path}: {status} {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// The victim makes one of everything.
pub(crate) async fn victim_objects(ember: &TestEmber) -> Victim {
    let token = ember.member_token().to_owned();
    let heat = "/orchestration/v1/demo";
    let stack = post(
        ember,
        &token,
        &format!("{heat}/stacks"),
        json!({"stack_name": "victim-stack", "template": {
            "heat_template_version": "2021-04-16",
            "resources": {"app": {"type": "OS::Heat::TestResource", "properties": {"value": "v"}}},
            "outputs": {"out": {"value": {"get_attr": ["app", "output"]}}}}}),
    )
    .await;
    let stack_id = stack["stack"]["id"].as_str().expect("id").to_owned();
    let stack_path = format!("{heat}/stacks/victim-stack/{stack_id}");
    wait_for("the victim's stack", Duration::from_secs(20), || async {
        json_of(ember, &token, &stack_path).await["stack"]["stack_status"] == "CREATE_COMPLETE"
    })
    .await;
    let events = json_of(ember, &token, &format!("{stack_path}/events")).await;
    let event_id = events["events"][0]["id"]
        .as_str()
        .expect("event")
        .to_owned();

    let profile = post(
        ember,
        &token,
        "/clustering/v1/profiles",
        json!({"profile": {"name": "victim-profile", "spec": {"type": "ember.instance",
            "version": "1.0", "properties": {"flavor": "m1.small", "image": "debian-12"}}}}),
    )
    .await;
    let profile_id = profile["profile"]["id"].as_str().expect("id").to_owned();
    let policy = post(
        ember,
        &token,
        "/clustering/v1/policies",
        json!({"policy": {"name": "victim-policy", "spec": {"type": "senlin.policy.deletion",
            "version": "1.1", "properties": {"criteria": "OLDEST_FIRST"}}}}),
    )
    .await;
    let policy_id = policy["policy"]["id"].as_str().expect("id").to_owned();
    let cluster = post(
        ember,
        &token,
        "/clustering/v1/clusters",
        json!({"cluster": {"name": "victim-cluster", "profile_id": profile_id,
            "min_size": 0, "desired_capacity": 1}}),
    )
    .await;
    let cluster_id = cluster["cluster"]["id"].as_str().expect("id").to_owned();
    let cluster_path = format!("/clustering/v1/clusters/{cluster_id}");
    wait_for("the victim's cluster", Duration::from_secs(20), || async {
        let cluster = json_of(ember, &token, &cluster_path).await;
        cluster["cluster"]["status"] == "ACTIVE"
            && cluster["cluster"]["nodes"].as_array().map(Vec::len) == Some(1)
    })
    .await;
    let cluster = json_of(ember, &token, &cluster_path).await;
    let node_id = cluster["cluster"]["nodes"][0]
        .as_str()
        .expect("node")
        .to_owned();
    // A list writes member ids from the 16-byte form the engine packs them
    // in for lists, a show from text: the same ids either way.
    let listed = json_of(ember, &token, "/clustering/v1/clusters").await;
    assert_eq!(
        listed["clusters"][0]["nodes"], cluster["cluster"]["nodes"],
        "{listed}"
    );
    let actions = json_of(ember, &token, "/clustering/v1/actions").await;
    let action_id = actions["actions"][0]["id"]
        .as_str()
        .expect("action")
        .to_owned();
    let instance = post(
        ember,
        &token,
        "/compute/v1/instances",
        json!({"instance": {"name": "victim-instance", "flavor": "m1.small", "image": "debian-12"}}),
    )
    .await;
    let instance_id = instance["instance"]["uuid"]
        .as_str()
        .expect("uuid")
        .to_owned();
    let config = post(
        ember,
        &token,
        &format!("{heat}/software_configs"),
        json!({"name": "victim-config", "config": "echo"}),
    )
    .await;
    let config_id = config["software_config"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let server_id = "victim-server-7f3a".to_owned();
    let deployment = post(
        ember,
        &token,
        &format!("{heat}/software_deployments"),
        json!({"config_id": config_id, "server_id": server_id}),
    )
    .await;
    let deployment_id = deployment["software_deployment"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    Victim {
        stack_name: "victim-stack".to_owned(),
        stack_id,
        event_id,
        cluster_id,
        node_id,
        profile_id,
        policy_id,
        action_id,
        instance_id,
        config_id,
        deployment_id,
        server_id,
    }
}

/// The victim's objects as the victim sees them (what nothing may change).
pub(crate) async fn victim_state(ember: &TestEmber, victim: &Victim) -> Value {
    let token = ember.member_token().to_owned();
    let heat = "/orchestration/v1/demo";
    let stack_path = format!("{heat}/stacks/victim-stack/{}", victim.stack_id);
    let stack = json_of(ember, &token, &stack_path).await;
    let resources = json_of(ember, &token, &format!("{stack_path}/resources")).await;
    let events = json_of(ember, &token, &format!("{stack_path}/events")).await;
    let cluster = json_of(
        ember,
        &token,
        &format!("/clustering/v1/clusters/{}", victim.cluster_id),
    )
    .await;
    let actions = json_of(ember, &token, "/clustering/v1/actions").await;
    let instance = json_of(
        ember,
        &token,
        &format!("/compute/v1/instances/{}", victim.instance_id),
    )
    .await;
    let deployment = json_of(
        ember,
        &token,
        &format!("{heat}/software_deployments/{}", victim.deployment_id),
    )
    .await;
    json!({
        "stack": [stack["stack"]["stack_status"], stack["stack"]["updated_time"],
                  stack["stack"]["stack_status_reason"], stack["stack"]["stack_lock"]],
        "resources": resources["resources"].as_array().map(|resources| resources.iter()
            .map(|resource| json!([resource["resource_name"], resource["resource_status"],
                resource["physical_resource_id"]])).collect::<Vec<_>>()),
        "events": events["events"].as_array().map(Vec::len),
        "cluster": [cluster["cluster"]["status"], cluster["cluster"]["desired_capacity"],
                    cluster["cluster"]["nodes"], cluster["cluster"]["policies"]],
        "actions": actions["actions"].as_array().map(Vec::len),
        "instance": [instance["instance"]["status"], instance["instance"]["locked"],
                     instance["instance"]["name"], instance["instance"]["metadata"]],
        "deployment": [deployment["software_deployment"]["status"],
                       deployment["software_deployment"]["output_values"]],
        "configs": json_of(ember, &token, &format!("{heat}/software_configs")).await,
        "profiles": json_of(ember, &token, "/clustering/v1/profiles").await["profiles"]
            .as_array().map(Vec::len),
        "policies": json_of(ember, &token, "/clustering/v1/policies").await["policies"]
            .as_array().map(Vec::len),
    })
}

/// Every path of the gateway's REST router, from its path table (axum
/// prints it as `RouteId(n): "/path"`).
pub(crate) async fn router_paths() -> Vec<String> {
    let data_dir = tempfile::tempdir().expect("a temporary directory");
    let database_url = ember_runtime::database::sqlite_url(&data_dir.path().join("gateway.db"));
    let stop = tokio_util::sync::CancellationToken::new();
    let state = ember_api_gateway::GatewayState::new(
        &ember_api_gateway::Config {
            signing_key: "cross-project-test-signing-key-0123456789".to_owned(),
            internal_credential: "cross-project-test-credential-0123456789".to_owned(),
            engine_url: "http://127.0.0.1:9".to_owned(),
            lifecycle_hook_url: "http://127.0.0.1:9".to_owned(),
            plugin_registry_url: "http://127.0.0.1:9".to_owned(),
            request_timeout: Duration::from_secs(5),
            clock_skew: Duration::from_secs(60),
            auth: ember_api_gateway::AuthMode::BuiltIn { database_url },
            identity: ember_api_gateway::IdentitySettings::default(),
            peers: ember_runtime::in_process::Peers::default(),
            connections: ember_api_gateway::connections::ConnectionLimits::default(),
            // Static files for anyone (the console's own tests cover them):
            // not API routes.
            console: ember_api_gateway::console::ConsoleSource::Off,
        },
        stop.clone(),
    )
    .await
    .expect("a gateway state");
    stop.cancel();
    let printed = format!("{:?}", ember_api_gateway::rest::router(state));
    let mut paths = BTreeSet::new();
    for piece in printed.split("RouteId(").skip(1) {
        if let Some(start) = piece.find(": \"") {
            let rest = &piece[start + 3..];
            if let Some(end) = rest.find('"') {
                paths.insert(rest[..end].to_owned());
            }
        }
    }
    let paths: Vec<String> = paths.into_iter().collect();
    assert!(
        paths.len() >= 40,
        "the router's path table was not read (axum changed its Debug output?): {paths:?}"
    );
    paths
}

/// A path with the victim's identifiers in it; the Heat paths name the
/// attacker's own project (naming the victim's is refused outright — that
/// is walked too).
pub(crate) fn concrete(path: &str, victim: &Victim, project: &str) -> String {
    let kind = |segment: &str| {
        path.split('/')
            .take_while(|part| *part != segment)
            .last()
            .unwrap_or_default()
            .to_owned()
    };
    let id_for = |collection: &str| -> String {
        match collection {
            "clusters" => victim.cluster_id.clone(),
            "nodes" => victim.node_id.clone(),
            "profiles" => victim.profile_id.clone(),
            "policies" => victim.policy_id.clone(),
            "actions" => victim.action_id.clone(),
            _ => victim.cluster_id.clone(),
        }
    };
    let id_kind = kind("{id}");
    path.replace("{project_id}", project)
        .replace("{stack_name}", &victim.stack_name)
        .replace("{stack_id}", &victim.stack_id)
        .replace("{resource_name}", "app")
        .replace("{event_id}", &victim.event_id)
        .replace("{output_key}", "out")
        .replace("{action}", "delete")
        .replace("{type_name}", "OS::Heat::TestResource")
        .replace("{template_version}", "heat_template_version.2021-04-16")
        .replace("{config_id}", &victim.config_id)
        .replace("{deployment_id}", &victim.deployment_id)
        .replace("{server_id}", &victim.server_id)
        .replace("{handle_id}", "app")
        .replace("{uuid}", &victim.instance_id)
        .replace("{id}", &id_for(&id_kind))
        .replace("{path}", "status")
        .replace("{policy}", &victim.policy_id)
        .replace("{*path}", "name")
}

/// The methods a path answers, from the 405 its router gives to a method
/// no route takes (`any` routes take every method).
pub(crate) async fn methods_of(ember: &TestEmber, token: &str, path: &str) -> Vec<Method> {
    let response = ember
        .http
        .request(Method::TRACE, ember.url(path))
        .header("X-Auth-Token", token)
        .send()
        .await
        .expect("answered");
    let everything = vec![
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::DELETE,
    ];
    if response.status().as_u16() != 405 {
        return everything;
    }
    let allowed = response
        .headers()
        .get("allow")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    everything
        .into_iter()
        .filter(|method| {
            allowed
                .split(',')
                .any(|listed| listed.trim().eq_ignore_ascii_case(method.as_str()))
        })
        .collect()
}

/// Whether a route is about one object (has an identifier in its path),
/// as opposed to a collection, the catalog or the service itself.
pub(crate) fn names_an_object(pattern: &str) -> bool {
    [
        "{stack_id}",
        "{stack_name}",
        "{id}",
        "{uuid}",
        "{config_id}",
        "{deployment_id}",
        "{handle_id}",
        "{event_id}",
    ]
    .iter()
    .any(|parameter| pattern.contains(parameter))
}

fn leaked<'a>(answer: &str, victim: &'a Victim) -> Option<&'a str> {
    victim
        .secrets()
        .into_iter()
        .find(|secret| !secret.is_empty() && answer.contains(secret))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_project_reaches_nothing_through_any_route_or_method() {
    let ember = TestEmber::start_configured(|config| {
        config.engine.compute.build_ms = 0;
        config.engine.compute.delete_ms = 0;
        config.engine.compute.power_ms = 0;
    })
    .await;
    let victim = victim_objects(&ember).await;
    let before = victim_state(&ember, &victim).await;
    let attacker = ember.outsider_token();

    // Every REST route.
    let mut walked = 0;
    let mut problems = Vec::new();
    for pattern in router_paths().await {
        if pattern == "/healthz" || pattern == "/metrics" {
            continue;
        }
        let projects: &[&str] = if pattern.contains("{project_id}") {
            &["demo", "other"]
        } else {
            &["other"]
        };
        for project in projects {
            let path = concrete(&pattern, &victim, project);
            for method in methods_of(&ember, &attacker, &path).await {
                walked += 1;
                let body = (method != Method::GET && method != Method::DELETE).then(|| json!({}));
                let (status, text) = call(&ember, &attacker, method.clone(), &path, body).await;
                let refused = matches!(status, 400 | 401 | 403 | 404 | 405);
                let object = names_an_object(&pattern) || *project == "demo";
                if object && !refused {
                    problems.push(format!(
                        "{method} {pattern} ({path}) answered {status}: {text}"
                    ));
                } else if status >= 500 {
                    problems.push(format!("{method} {pattern} answered {status}: {text}"));
                } else if (200..300).contains(&status)
                    && let Some(secret) = leaked(&text, &victim)
                {
                    problems.push(format!("{method} {pattern} leaked {secret:?}: {text}"));
                }
            }
        }
    }
    assert!(walked >= 80, "only {walked} REST calls were walked");

    // Every public gRPC method.
    let grpc_walked = walk_grpc(&ember, &attacker, &victim, &mut problems).await;
    assert!(
        grpc_walked >= 60,
        "only {grpc_walked} gRPC methods were walked"
    );
    eprintln!("walked {walked} REST calls and {grpc_walked} gRPC methods as another project");

    assert!(
        problems.is_empty(),
        "{} call(s) reached the victim:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // Nothing of the victim's changed.
    let after = victim_state(&ember, &victim).await;
    assert_eq!(before, after, "the victim's objects changed");
    ember.stop().await;
}

/// The request of a gRPC method: every string field named after an
/// identifier gets the victim's (by the service, for a bare `id`).
pub(crate) fn grpc_request(
    service: &str,
    input: &prost_types::DescriptorProto,
    victim: &Victim,
) -> Value {
    let id_for_service = || -> &str {
        match service.rsplit('.').next().unwrap_or_default() {
            "ClusterService" => &victim.cluster_id,
            "NodeService" => &victim.node_id,
            "ProfileService" => &victim.profile_id,
            "PolicyService" => &victim.policy_id,
            "ActionService" => &victim.action_id,
            "SoftwareConfigService" => &victim.config_id,
            "SoftwareDeploymentService" => &victim.deployment_id,
            _ => &victim.stack_id,
        }
    };
    let mut request = serde_json::Map::new();
    for field in &input.field {
        let name = field.name();
        let value = match name {
            "stack" | "stack_id" | "stack_name" => json!(victim.stack_id),
            "resource" | "resource_name" => json!("app"),
            "cluster" | "cluster_id" => json!(victim.cluster_id),
            "node" | "node_id" => json!(victim.node_id),
            "nodes" => json!([victim.node_id]),
            "profile" | "profile_id" => json!(victim.profile_id),
            "policy" | "policy_id" => json!(victim.policy_id),
            "uuid" | "instance" | "instance_id" => json!(victim.instance_id),
            "config_id" => json!(victim.config_id),
            "server_id" => json!(victim.server_id),
            "event_id" => json!(victim.event_id),
            "output_key" => json!("out"),
            "id" => json!(id_for_service()),
            "project_id" => json!("demo"),
            "queue" => json!("victim-queue"),
            _ => continue,
        };
        // Only string (type 9) or repeated string fields take these.
        if field.r#type() == prost_types::field_descriptor_proto::Type::String {
            request.insert(field.json_name().to_owned(), value);
        }
    }
    Value::Object(request)
}

/// Every public gRPC method (`package.Service/Method`) with a request
/// naming the victim's objects (see [`grpc_request`]).
pub(crate) fn public_grpc_methods(victim: &Victim) -> Vec<(String, String)> {
    let descriptors = prost_types::FileDescriptorSet::decode(ember_proto::FILE_DESCRIPTOR_SET)
        .expect("the descriptor set decodes");
    let messages: std::collections::HashMap<String, prost_types::DescriptorProto> = descriptors
        .file
        .iter()
        .flat_map(|file| {
            file.message_type.iter().map(move |message| {
                (
                    format!(".{}.{}", file.package(), message.name()),
                    message.clone(),
                )
            })
        })
        .collect();
    let public = ember_api_gateway::upstream::public_service_names();
    let mut methods = Vec::new();
    for file in &descriptors.file {
        for service in &file.service {
            let full = format!("{}.{}", file.package(), service.name());
            if !public.contains(&full.as_str()) {
                continue;
            }
            for method in &service.method {
                let Some(input) = messages.get(method.input_type()) else {
                    continue;
                };
                let request = grpc_request(&full, input, victim).to_string();
                methods.push((format!("{full}/{}", method.name()), request));
            }
        }
    }
    methods
}

/// One gRPC call through the gateway with `grpcurl`: whether it succeeded,
/// its stdout and its stderr (with `-format-error`, the status as JSON).
pub(crate) fn grpcurl(
    ember: &TestEmber,
    token: &str,
    target: &str,
    request: &str,
) -> (bool, String, String) {
    let address = ember.running.gateway_addr.to_string();
    let grpcurl = std::env::var("EMBER_GRPCURL").unwrap_or_else(|_| "grpcurl".to_owned());
    let output = Command::new(&grpcurl)
        .args([
            "-plaintext",
            "-format-error",
            "-H",
            &format!("authorization: Bearer {token}"),
            "-d",
            request,
            &address,
            target,
        ])
        .output()
        .unwrap_or_else(|error| panic!("cannot run grpcurl ({error}): ./scripts/test installs it"));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

async fn walk_grpc(
    ember: &TestEmber,
    attacker: &str,
    victim: &Victim,
    problems: &mut Vec<String>,
) -> usize {
    let mut walked = 0;
    for (target, request) in public_grpc_methods(victim) {
        let (success, stdout, stderr) = grpcurl(ember, attacker, &target, &request);
        walked += 1;
        let answer = format!("{stdout}{stderr}");
        let names_victim = request.contains(&victim.stack_id)
            || request.contains(&victim.cluster_id)
            || request.contains(&victim.instance_id)
            || request.contains(&victim.config_id)
            || request.contains(&victim.deployment_id)
            || request.contains(&victim.node_id)
            || request.contains(&victim.profile_id)
            || request.contains(&victim.policy_id)
            || request.contains(&victim.action_id);
        let listing = target
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .starts_with("List");
        if success {
            if names_victim && !listing {
                problems.push(format!("gRPC {target} {request} succeeded: {stdout}"));
            } else if let Some(secret) = leaked(&stdout, victim) {
                problems.push(format!("gRPC {target} leaked {secret:?}: {stdout}"));
            }
        } else {
            // grpcurl -format-error prints the status as JSON:
            // NOT_FOUND, PERMISSION_DENIED, INVALID_ARGUMENT (the
            // attacker's own request incomplete), UNAUTHENTICATED,
            // FAILED_PRECONDITION are refusals.
            let code = serde_json::from_str::<Value>(&stderr)
                .ok()
                .and_then(|error| error["code"].as_u64());
            let refused = matches!(code, Some(3 | 5 | 7 | 9 | 16));
            if !refused {
                problems.push(format!(
                    "gRPC {target} {request} failed unexpectedly: {answer}"
                ));
            }
        }
    }
    walked
}
