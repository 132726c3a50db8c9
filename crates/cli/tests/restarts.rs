//! Crash and restart with lifecycle hooks pending, on the deployment shape:
//! each service is its own `ember serve` process (as in docker-compose),
//! killed with SIGKILL and started again on the same port and data.
//!
//! What must hold (issue: scale-in lifecycle hooks): nothing is lost while a
//! service is down, deadlines still fire (one that passed while
//! lifecycle-hook was down fires when it starts), and no node is deleted
//! twice.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use ember_runtime::testing::{poll_until_ok, wait_for};
use serde_json::{Value, json};
use support::deployment::{Deployment, Service, bearer};
use support::hooked_cluster_commands;

impl Deployment {
    /// A cluster `web` of `size` nodes with a deletion-1.1 policy whose
    /// queue hook times out after `timeout` seconds.
    async fn hooked_cluster(&self, size: u32, timeout: u32) -> Vec<String> {
        for command in hooked_cluster_commands(self.data_dir.path(), size, timeout) {
            let command: Vec<&str> = command.iter().map(String::as_str).collect();
            self.ember(&command);
        }
        self.node_ids().await
    }

    async fn node_ids(&self) -> Vec<String> {
        let nodes = self.get("/nodes?cluster_id=web").await;
        nodes["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|node| node["id"].as_str().expect("id").to_owned())
            .collect()
    }

    /// Tokens of the pending (unresolved) lifecycle actions, from
    /// `ember hook list`; `None` while the list cannot be had (a service
    /// just restarted and not yet reachable).
    fn pending_tokens(&self) -> Option<Vec<String>> {
        let output = self
            .ember_command(&["hook", "list", "--cluster", "web"])
            .stdout(std::process::Stdio::piped())
            .output()
            .expect("ember runs");
        if !output.status.success() {
            return None;
        }
        let listed = String::from_utf8_lossy(&output.stdout);
        let tokens = listed
            .lines()
            .skip(1)
            .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
            .collect();
        Some(tokens)
    }

    /// How many NODE_DELETE actions of the cluster wait for a lifecycle
    /// completion: the engine chose their nodes and holds them.
    async fn node_deletions_waiting(&self) -> usize {
        let actions = self.get("/actions?cluster_id=web&limit=1000").await;
        actions["actions"]
            .as_array()
            .expect("actions")
            .iter()
            .filter(|action| {
                action["action"] == "NODE_DELETE"
                    && action["status"] == "WAITING_LIFECYCLE_COMPLETION"
            })
            .count()
    }

    /// Every NODE_DELETE action of the cluster, and how often each node's
    /// deletion succeeded (the SUCCEEDED events about its actions).
    async fn node_deletions(&self) -> HashMap<String, usize> {
        let actions = self.get("/actions?cluster_id=web&limit=1000").await;
        let mut deleted = HashMap::new();
        for action in actions["actions"].as_array().expect("actions") {
            if action["action"] != "NODE_DELETE" {
                continue;
            }
            let id = action["id"].as_str().expect("id");
            let events = self.get(&format!("/events?obj_id={id}&limit=1000")).await;
            let succeeded = events["events"]
                .as_array()
                .expect("events")
                .iter()
                .filter(|event| event["status"] == "SUCCEEDED")
                .count();
            *deleted
                .entry(action["target"].as_str().expect("target").to_owned())
                .or_insert(0) += succeeded;
        }
        deleted
    }
}

fn assert_each_deleted_once(deletions: &HashMap<String, usize>, victims: &[String]) {
    for victim in victims {
        assert_eq!(
            deletions.get(victim),
            Some(&1),
            "node {victim} must be deleted exactly once: {deletions:?}"
        );
    }
    assert_eq!(deletions.len(), victims.len(), "{deletions:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_hook_killed_with_hooks_pending_loses_nothing_and_deadlines_fire_after_restart() {
    let mut deployment = Deployment::start();
    deployment.wait_healthy().await;
    let nodes = deployment.hooked_cluster(4, 3).await;
    assert_eq!(nodes.len(), 4);

    // Down before the scale-in: the engine cannot hand the hooks over, the
    // nodes wait, and the hand-over happens once lifecycle-hook is back.
    deployment.kill(Service::LifecycleHook);
    deployment.ember(&["cluster", "scale-in", "web", "--count", "2"]);
    wait_for(
        "both node deletions waiting for lifecycle completion",
        Duration::from_secs(20),
        || async { deployment.node_deletions_waiting().await == 2 },
    )
    .await;
    assert_eq!(deployment.node_ids().await.len(), 4, "nodes wait for hooks");
    deployment.spawn(Service::LifecycleHook);
    deployment.wait_healthy().await;
    let mut tokens = Vec::new();
    wait_for("both hooks recorded", Duration::from_secs(20), || {
        tokens = deployment.pending_tokens().unwrap_or_default();
        std::future::ready(tokens.len() == 2)
    })
    .await;
    let messages = deployment.ember(&["hook", "messages", "drain"]);
    for token in &tokens {
        assert!(messages.contains(token.as_str()), "{token} in {messages}");
    }

    // Killed again with both pending: one is completed while it is down
    // (the engine decides), the other's deadline passes while it is down
    // and fires when it starts.
    deployment.kill(Service::LifecycleHook);
    let killed = std::time::Instant::now();
    deployment.ember(&["hook", "complete", "web", &tokens[0]]);
    wait_for(
        "the completed node deleted while lifecycle-hook is down",
        Duration::from_secs(20),
        || async { deployment.node_ids().await.len() == 3 },
    )
    .await;
    // This sleep is the point: the other's deadline (3 s) must pass while
    // lifecycle-hook is down, so that it fires when it starts again.
    tokio::time::sleep(Duration::from_secs(4).saturating_sub(killed.elapsed())).await;
    assert_eq!(
        deployment.node_ids().await.len(),
        3,
        "the completed node is deleted, the other waits for its deadline"
    );
    deployment.spawn(Service::LifecycleHook);
    wait_for(
        "the expired deadline to fire after the restart",
        Duration::from_secs(20),
        || async { deployment.node_ids().await.len() == 2 },
    )
    .await;

    let remaining = deployment.node_ids().await;
    let victims: Vec<String> = nodes
        .iter()
        .filter(|node| !remaining.contains(node))
        .cloned()
        .collect();
    // OLDEST_FIRST: the first two nodes created.
    assert_eq!(victims, nodes[..2].to_vec());
    assert_each_deleted_once(&deployment.node_deletions().await, &victims);
    wait_for(
        "both lifecycle actions resolved",
        Duration::from_secs(10),
        || std::future::ready(deployment.pending_tokens() == Some(Vec::new())),
    )
    .await;
    let scale_in = deployment.get("/actions?cluster_id=web&limit=1000").await["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .find(|action| action["action"] == "CLUSTER_SCALE_IN")
        .cloned()
        .expect("the scale-in action");
    assert_eq!(scale_in["status"], "SUCCEEDED", "{scale_in}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_killed_with_hooks_pending_continues_after_restart_and_deletes_each_node_once() {
    let mut deployment = Deployment::start();
    deployment.wait_healthy().await;
    let nodes = deployment.hooked_cluster(3, 3).await;
    deployment.ember(&["cluster", "scale-in", "web", "--count", "2"]);
    let mut tokens = Vec::new();
    wait_for("both hooks delivered", Duration::from_secs(20), || {
        tokens = deployment.pending_tokens().unwrap_or_default();
        std::future::ready(tokens.len() == 2)
    })
    .await;

    // The engine dies with both nodes waiting; their deadlines pass while
    // it is down (lifecycle-hook keeps firing them until it answers).
    deployment.kill(Service::Engine);
    let (status, body) = deployment
        .rest(
            reqwest::Method::POST,
            "/clusters/web/actions",
            Some(json!({"complete_lifecycle": {"lifecycle_action_token": tokens[0]}})),
        )
        .await;
    assert_eq!(status, 503, "the engine is down: {body}");
    // The gateway says so: its readiness names the engine, and the failed
    // call is counted.
    let health = reqwest::get(deployment.gateway("/healthz"))
        .await
        .expect("healthz");
    assert_eq!(health.status(), 503);
    let health: Value = health.json().await.expect("json");
    assert!(
        health["services"]["engine"]
            .as_str()
            .is_some_and(|status| status.starts_with("UNAVAILABLE")),
        "{health}"
    );
    assert_eq!(health["services"]["lifecycle-hook"], "SERVING", "{health}");
    let metrics = reqwest::get(deployment.gateway("/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    let upstream_errors: u64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("ember_gateway_upstream_errors_total "))
        .and_then(|value| value.trim().parse().ok())
        .expect("the upstream errors counter");
    assert!(upstream_errors >= 1, "{metrics}");
    // This sleep is the point: both deadlines (3 s) pass while the engine
    // is down.
    tokio::time::sleep(Duration::from_secs(4)).await;
    deployment.spawn(Service::Engine);
    deployment.wait_healthy().await;
    wait_for(
        "both nodes deleted after the engine restarts",
        Duration::from_secs(30),
        || async { deployment.node_ids().await.len() == 1 },
    )
    .await;
    let victims = nodes[..2].to_vec();
    assert_eq!(deployment.node_ids().await, nodes[2..].to_vec());
    // Completing after the deadline won is a conflict, not a second delete.
    let (status, body) = deployment
        .rest(
            reqwest::Method::POST,
            "/clusters/web/actions",
            Some(json!({"complete_lifecycle": {"lifecycle_action_token": tokens[0]}})),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body.to_string().contains("expired"),
        "the conflict says the deadline won: {body}"
    );
    assert_each_deleted_once(&deployment.node_deletions().await, &victims);
}

/// Two lifecycle-hook replicas on one database (PostgreSQL when
/// `EMBER_TEST_DATABASE_URL` is set, else a shared SQLite file): each
/// deadline fires once, from one replica, and each node is deleted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_lifecycle_hook_replicas_each_deadline_fires_once() {
    use ember_proto::lifecyclehook::v1 as pb;
    use ember_proto::lifecyclehook::v1::lifecycle_hook_service_client::LifecycleHookServiceClient;

    let database = ember_runtime::database::testing::TestDatabase::postgres().await;
    let settings: Vec<(&str, &str)> = database
        .as_ref()
        .map(|database| ("EMBER_LIFECYCLE_HOOK__DATABASE_URL", database.url.as_str()))
        .into_iter()
        .collect();
    let mut deployment = Deployment::start_with(&settings);
    deployment.spawn_lifecycle_hook_replica();
    deployment.wait_healthy().await;
    let nodes = deployment.hooked_cluster(6, 2).await;
    deployment.ember(&["cluster", "scale-in", "web", "--count", "6"]);
    wait_for(
        "every node deleted after the deadlines",
        Duration::from_secs(30),
        || async { deployment.node_ids().await.is_empty() },
    )
    .await;
    assert_each_deleted_once(&deployment.node_deletions().await, &nodes);

    let channel = tonic::transport::Channel::from_shared(deployment.gateway(""))
        .expect("url")
        .connect()
        .await
        .expect("gateway");
    let mut hooks = LifecycleHookServiceClient::new(channel);
    let resolved = hooks
        .list_pending(bearer(
            pb::ListPendingRequest {
                include_resolved: true,
                ..Default::default()
            },
            &deployment.token,
        ))
        .await
        .expect("ListPending")
        .into_inner()
        .actions;
    assert_eq!(resolved.len(), nodes.len(), "{resolved:?}");
    for action in &resolved {
        assert_eq!(action.resolution, "EXPIRED", "{action:?}");
        let events = hooks
            .list_hook_events(bearer(
                pb::ListHookEventsRequest {
                    token: action.token.clone(),
                    ..Default::default()
                },
                &deployment.token,
            ))
            .await
            .expect("ListHookEvents")
            .into_inner()
            .events;
        let fired = events
            .iter()
            .filter(|event| event.kind == "EXPIRED")
            .count();
        assert_eq!(fired, 1, "one deadline firing per token: {events:?}");
    }
    drop(deployment);
    if let Some(database) = database {
        database.drop_schema().await;
    }
}

/// Launch hooks through kills: the engine killed while the new nodes are
/// built and held, lifecycle-hook killed while they wait, the engine
/// killed again right after the answers. Every node ends in service or
/// built again once, and the cluster settles with the nodes it reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_waits_survive_kills_of_the_engine_and_lifecycle_hook() {
    let mut deployment = Deployment::start_with(&[
        ("EMBER_ENGINE__CLUSTER_ACTION_LEASE_MS", "1500"),
        ("EMBER_ENGINE__COMPUTE__BUILD_MS", "100"),
    ]);
    deployment.wait_healthy().await;
    let dir = deployment.data_dir.path().to_owned();
    let profile = dir.join("web-profile.yaml");
    std::fs::write(
        &profile,
        "type: ember.instance\nversion: \"1.0\"\nproperties: {flavor: m1.small, image: debian-12}\n",
    )
    .expect("profile written");
    let policy = dir.join("warm-policy.yaml");
    std::fs::write(
        &policy,
        "type: ember.policy.launch\nversion: \"1.0\"\nproperties:\n  hooks: {type: zaqar, params: {queue: warm}, timeout: 120}\n  on_abandon: RETRY\n  retries: 1\n",
    )
    .expect("policy written");
    let (profile, policy) = (profile.display().to_string(), policy.display().to_string());
    for command in [
        vec!["cluster", "profile-create", "web", "--spec", &profile],
        vec!["cluster", "policy-create", "warm", "--spec", &policy],
        vec![
            "cluster",
            "create",
            "web",
            "--profile",
            "web",
            "--desired",
            "1",
            "--max",
            "6",
            "--wait",
        ],
        vec!["cluster", "policy-attach", "web", "warm", "--wait"],
    ] {
        deployment.ember(&command);
    }

    // Killed while the three new nodes build (100 ms each) and are held.
    deployment.ember(&["cluster", "scale-out", "web", "--count", "3"]);
    wait_for(
        "the three new nodes recorded",
        Duration::from_secs(10),
        || async { deployment.node_ids().await.len() == 4 },
    )
    .await;
    deployment.kill(Service::Engine);
    deployment.spawn(Service::Engine);
    let mut tokens = Vec::new();
    wait_for("three launch waits", Duration::from_secs(30), || {
        tokens = deployment.pending_tokens().unwrap_or_default();
        std::future::ready(tokens.len() == 3)
    })
    .await;
    let listed = deployment.ember(&["hook", "list", "--cluster", "web", "-c", "transition"]);
    assert_eq!(listed.matches("launching").count(), 3, "{listed}");

    // lifecycle-hook killed while they wait: the answers need only the
    // engine; the engine killed right after them.
    deployment.kill(Service::LifecycleHook);
    deployment.ember(&["hook", "complete", "web", &tokens[0]]);
    deployment.ember(&["hook", "complete", "web", &tokens[1], "--result", "abandon"]);
    deployment.kill(Service::Engine);
    deployment.spawn(Service::Engine);
    deployment.spawn(Service::LifecycleHook);
    deployment.wait_healthy().await;
    deployment.ember(&["hook", "complete", "web", &tokens[2]]);

    // The abandoned node is built again and waits on a new action.
    let mut again = Vec::new();
    wait_for(
        "the abandoned node's new wait",
        Duration::from_secs(30),
        || {
            again = deployment
                .pending_tokens()
                .unwrap_or_default()
                .into_iter()
                .filter(|token| !tokens.contains(token))
                .collect();
            std::future::ready(again.len() == 1)
        },
    )
    .await;
    deployment.ember(&["hook", "complete", "web", &again[0]]);
    wait_for("the scale-out to end", Duration::from_secs(30), || async {
        let cluster = deployment.get("/clusters/web").await;
        cluster["cluster"]["status"] == "ACTIVE"
    })
    .await;
    let nodes = deployment.get("/nodes?cluster_id=web").await;
    let nodes = nodes["nodes"].as_array().expect("nodes").clone();
    assert_eq!(nodes.len(), 4, "{nodes:?}");
    assert!(
        nodes.iter().all(|node| node["status"] == "ACTIVE"),
        "{nodes:?}"
    );
    let cluster = deployment.get("/clusters/web").await;
    assert_eq!(cluster["cluster"]["desired_capacity"], 4, "{cluster}");
    let late = deployment
        .ember_command(&["hook", "complete", "web", &tokens[1]])
        .status()
        .expect("ember runs");
    assert!(!late.success(), "an answered wait is answered once");
}

/// Plug-in circuit breakers through kills: plugin-registry is killed right
/// after each operation that counts a failure (while it records it or
/// opens the circuit), and again while the half-open probe is under way.
/// The circuit's state lives in the registry's database: it opens after
/// the failures that were recorded, fails operations at once while open,
/// and closes once a probe gets an answer — no failure counted twice, no
/// circuit stuck half-open, every stack final.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_circuit_opens_and_closes_across_kills_of_the_plugin_registry() {
    use ember_plugin_registry::testing::{Behaviour, CallJournal, TestPlugin};

    let mut deployment = Deployment::start();
    deployment.wait_healthy().await;
    let admin = deployment.admin_token();
    let journal = CallJournal::default();
    // Answers after 2 s: every call times out (200 ms), a failure.
    let plugin = TestPlugin::start("guard", Behaviour::Slow(Duration::from_secs(2)), &journal)
        .await
        .expect("plugin");
    deployment.ember(&[
        "--token",
        &admin,
        "plugin",
        "register",
        "guard",
        "--endpoint",
        &plugin.endpoint,
        "--operations",
        "create",
        "--timeout-ms",
        "200",
        "--breaker-failures",
        "3",
        "--breaker-cooldown-ms",
        "1500",
    ]);
    let circuit = |deployment: &Deployment| circuit_of(deployment, &admin);

    // Failures, each followed at once by a kill of the registry.
    let mut attempts = 0;
    loop {
        attempts += 1;
        assert!(
            attempts <= 12,
            "the circuit never opened: {}",
            circuit(&deployment)
        );
        let (status, body) = create_empty_stack(&deployment, format!("guarded-{attempts}")).await;
        assert!(status == 201 || status >= 400, "{status} {body}");
        // Around the moment the call times out (200 ms) and the failure
        // is recorded: before it, during it, after it. This sleep is the
        // point: it places the kill in time.
        let around = [150, 200, 220, 240, 260, 300, 400][attempts % 7];
        tokio::time::sleep(Duration::from_millis(around)).await;
        deployment.kill(Service::PluginRegistry);
        deployment.spawn(Service::PluginRegistry);
        deployment.wait_healthy().await;
        if circuit(&deployment)["state"] == "open" {
            break;
        }
    }
    let open = circuit(&deployment);
    eprintln!("the circuit opened after {attempts} operations, each followed by a kill: {open}");
    assert!(open["consecutive_failures"].as_u64() >= Some(3), "{open}");

    // Open: an operation fails at once, naming the circuit.
    let started = std::time::Instant::now();
    let (status, body) = create_empty_stack(&deployment, "while-open".to_owned()).await;
    let stack = wait_for_final_stack(&deployment, "while-open", status, &body).await;
    assert!(
        stack["stack_status_reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("circuit open")),
        "{stack}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );

    // The plugin answers again; the registry is killed while the first
    // operation after the cool-down probes. The probe's claim lapses with
    // the dead process, a later call probes, and the circuit closes.
    plugin.set_behaviour(Behaviour::Allow);
    wait_for("the cool-down to end", Duration::from_secs(10), || {
        std::future::ready(circuit(&deployment)["state"] == "half-open")
    })
    .await;
    let _ = create_empty_stack(&deployment, "probe-killed".to_owned()).await;
    deployment.kill(Service::PluginRegistry);
    deployment.spawn(Service::PluginRegistry);
    deployment.wait_healthy().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let closed = loop {
        let now = circuit(&deployment);
        if now["state"] == "closed" {
            break now;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the circuit never closed: {now}"
        );
        let _ = create_empty_stack(&deployment, format!("probe-{}", uuid_suffix())).await;
        // Paces the probes: each look creates a stack, so this loop does
        // not use the shared poll's quick first looks.
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(closed["consecutive_failures"], 0, "{closed}");
    let (status, body) = create_empty_stack(&deployment, "after-close".to_owned()).await;
    let stack = wait_for_final_stack(&deployment, "after-close", status, &body).await;
    assert_eq!(stack["stack_status"], "CREATE_COMPLETE", "{stack}");

    // No stack is left in progress.
    let stacks = deployment
        .http
        .get(deployment.gateway("/orchestration/v1/demo/stacks"))
        .header("X-Auth-Token", &deployment.token)
        .send()
        .await
        .expect("list")
        .json::<Value>()
        .await
        .expect("json");
    for stack in stacks["stacks"].as_array().expect("stacks") {
        let status = stack["stack_status"].as_str().unwrap_or("");
        assert!(!status.ends_with("IN_PROGRESS"), "{stack}");
    }
    plugin.stop().await;
}

/// The plugin `guard`'s circuit, as `ember plugin show -f json` shows it.
fn circuit_of(deployment: &Deployment, admin: &str) -> Value {
    let shown = deployment.ember(&["--token", admin, "plugin", "show", "guard", "-f", "json"]);
    let shown: Value = serde_json::from_str(&shown).expect("plugin show -f json");
    shown["circuit"].clone()
}

/// POSTs a stack with no resources: its create is what the plugin is
/// called for.
async fn create_empty_stack(deployment: &Deployment, name: String) -> (u16, Value) {
    let template = "heat_template_version: 2021-04-16\nresources: {}\n";
    let response = deployment
        .http
        .post(deployment.gateway("/orchestration/v1/demo/stacks"))
        .header("X-Auth-Token", &deployment.token)
        .json(&json!({"stack_name": name, "template": template}))
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    (
        status,
        response.json::<Value>().await.unwrap_or(Value::Null),
    )
}

fn uuid_suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_owned()
}

/// The stack `name` once final (a create refused outright has no stack:
/// its answer is returned as the stack's reason).
async fn wait_for_final_stack(
    deployment: &Deployment,
    name: &str,
    status: u16,
    body: &Value,
) -> Value {
    if status != 201 {
        return json!({"stack_status": "REFUSED", "stack_status_reason": body.to_string()});
    }
    let id = body["stack"]["id"].as_str().unwrap_or_default();
    let url = deployment.gateway(&format!("/orchestration/v1/demo/stacks/{name}/{id}"));
    poll_until_ok(
        &format!("stack {name} to be final"),
        Duration::from_secs(30),
        || async {
            let stack = deployment
                .http
                .get(&url)
                .header("X-Auth-Token", &deployment.token)
                .send()
                .await
                .expect("get")
                .json::<Value>()
                .await
                .unwrap_or(Value::Null)["stack"]
                .clone();
            let status = stack["stack_status"].as_str().unwrap_or("IN_PROGRESS");
            if status.ends_with("IN_PROGRESS") {
                Err(stack)
            } else {
                Ok(stack)
            }
        },
    )
    .await
}
