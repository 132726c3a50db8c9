//! A Senlin cluster of Nova servers (`os.nova.server-1.0`) on the cloud: its
//! nodes' servers are made as the cluster's owner through the cluster's
//! trust, scale out, and on a scale-in under a deletion policy with a
//! webhook lifecycle hook the chosen node's server stays in Nova until
//! `complete_lifecycle`, then goes — once. Deleting the cluster removes
//! every server and the cluster's trust.

use std::time::{Duration, Instant};

use ember_openstack::keystone::Keystone;
use ember_openstack::neutron::{Kind, Neutron};
use ember_openstack::nova::Nova;
use ember_tests::wait_for;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{CloudEmber, SETTLE, unique};
use crate::clustering::clusters::{Rest, location, webhook_target};

/// The Nova servers of the cluster's nodes, by node (through demo's own
/// Nova: the servers are demo's).
async fn servers_of(nova: &Nova, nodes: &[Value]) -> Vec<String> {
    let mut servers = Vec::new();
    for node in nodes {
        let instance = node["physical_id"].as_str().expect("the node's instance");
        let tagged = nova
            .servers_tagged(&format!("ember-{instance}"), false)
            .await
            .expect("listed");
        assert!(tagged.len() <= 1, "one server per node: {tagged:?}");
        servers.extend(tagged.into_iter().map(|server| server.id));
    }
    servers
}

/// Polls an action until it ends `expected` (the cloud is slower than the
/// simulated fleet the shared helper is tuned for).
async fn wait_action(rest: &Rest<'_>, location: &str, expected: &str) {
    let path = location.trim_start_matches("/clustering/v1").to_owned();
    let deadline = Instant::now() + SETTLE;
    loop {
        let action = rest.get(&path).await;
        let status = action["action"]["status"].as_str().unwrap_or_default();
        if status == expected {
            return;
        }
        assert!(status != "FAILED", "action failed: {action}");
        assert!(Instant::now() < deadline, "{path}: {action}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_of_nova_servers_scales_and_a_hook_holds_the_server_until_completed() {
    let Some(env) = CloudEmber::start(
        "openstack::clusters::a_cluster_of_nova_servers_scales_and_a_hook_holds_the_server_until_completed",
    )
    .await
    else {
        return;
    };
    let demo = env.demo().clone();
    let session = env.session(&demo);
    let nova = Nova::connect(&session).await.expect("Nova");
    let neutron = Neutron::new(&session);
    let network = unique("cluster-net");
    let network_id = neutron
        .create(
            Kind::Network,
            serde_json::from_value(json!({ "name": network })).expect("a map"),
            &[],
        )
        .await
        .expect("a network")["id"]
        .as_str()
        .expect("id")
        .to_owned();
    neutron
        .create(
            Kind::Subnet,
            serde_json::from_value(
                json!({"network_id": network_id, "cidr": "10.94.0.0/24", "ip_version": 4}),
            )
            .expect("a map"),
            &[],
        )
        .await
        .expect("a subnet");
    let rest = Rest {
        ember: &env.ember,
        token: env.token(&demo).await,
    };
    let (hook_url, received) = webhook_target().await;

    rest.create_profile(
        json!({"name": "nova", "spec": {"type": "os.nova.server", "version": "1.0",
                "properties": {"flavor": "ember.tiny", "image": env.cloud.facts.image.name,
                    "networks": [{"network": network}], "metadata": {"tier": "web"}}}}),
    )
    .await;
    let (status, headers, body) = rest
        .post(
            "/clusters",
            json!({"cluster": {"name": unique("web"), "profile_id": "nova",
                "min_size": 0, "max_size": 5, "desired_capacity": 2}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let cluster_id = body["cluster"]["id"].as_str().expect("id").to_owned();
    wait_action(&rest, &location(&headers), "SUCCEEDED").await;
    let nodes = rest.nodes(&cluster_id).await;
    assert_eq!(servers_of(&nova, &nodes).await.len(), 2, "{nodes:?}");

    // Scale out: a third server.
    let scaled = rest
        .act(&cluster_id, json!({"scale_out": {"count": 1}}))
        .await;
    wait_action(&rest, &scaled, "SUCCEEDED").await;
    let nodes = rest.nodes(&cluster_id).await;
    let servers = servers_of(&nova, &nodes).await;
    assert_eq!(servers.len(), 3, "{nodes:?}");
    for id in &servers {
        let server = nova.server(id).await.expect("read").expect("there");
        assert_eq!(
            (server.status.as_str(), server.metadata["tier"].as_str()),
            ("ACTIVE", "web")
        );
    }

    // A deletion policy with a webhook hook: the scale-in waits.
    let (status, _, body) = rest
        .post(
            "/policies",
            json!({"policy": {"name": "drain", "spec": {"type": "senlin.policy.deletion", "version": "1.1",
                "properties": {"criteria": "OLDEST_FIRST",
                    "hooks": {"type": "webhook", "params": {"url": hook_url}, "timeout": 300}}}}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let attached = rest
        .act(
            &cluster_id,
            json!({"policy_attach": {"policy_id": "drain"}}),
        )
        .await;
    wait_action(&rest, &attached, "SUCCEEDED").await;
    rest.act(&cluster_id, json!({"scale_in": {"count": 1}}))
        .await;
    wait_for("the hook's message", Duration::from_secs(60), || {
        let received = received.clone();
        async move { !received.lock().expect("lock").is_empty() }
    })
    .await;
    let message: Value =
        serde_json::from_slice(&received.lock().expect("lock")[0].1).expect("a JSON message");
    let token = message["lifecycle_action_token"]
        .as_str()
        .expect("a token")
        .to_owned();
    let victim = message["node_id"].as_str().expect("the node").to_owned();
    let victim_node = nodes
        .iter()
        .find(|node| node["id"] == victim.as_str())
        .expect("one of the cluster's nodes")
        .clone();
    let held = servers_of(&nova, std::slice::from_ref(&victim_node)).await;
    assert_eq!(held.len(), 1, "the server stays until the hook completes");

    let (status, _, body) = rest
        .post(
            &format!("/clusters/{cluster_id}/actions"),
            json!({"complete_lifecycle": {"lifecycle_action_token": token}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let deadline = Instant::now() + SETTLE;
    while nova.server(&held[0]).await.expect("read").is_some() {
        assert!(Instant::now() < deadline, "the held server is not deleted");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(
        servers_of(&nova, &rest.nodes(&cluster_id).await)
            .await
            .len(),
        2,
        "exactly the one server went"
    );
    // One node held, one message (a delivery retried under load carries
    // the same token).
    let tokens: std::collections::BTreeSet<String> = received
        .lock()
        .expect("lock")
        .iter()
        .filter_map(|(_, body)| serde_json::from_slice::<Value>(body).ok())
        .filter_map(|message| {
            message["lifecycle_action_token"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(tokens.len(), 1, "one lifecycle action: {tokens:?}");

    // Deleting the cluster deletes every server and the cluster's trust.
    let trust = super::servers::recorded_trust(&env, &cluster_id)
        .await
        .expect("the cluster's trust");
    let (status, headers, body) = rest
        .call(
            reqwest::Method::DELETE,
            &format!("/clusters/{cluster_id}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    wait_action(&rest, &location(&headers), "SUCCEEDED").await;
    assert!(
        nova.servers_tagged("ember", false)
            .await
            .expect("listed")
            .iter()
            .all(|server| !servers.contains(&server.id)),
        "no server of the cluster is left"
    );
    assert!(
        Keystone::new(&session)
            .trust(&trust)
            .await
            .expect("asked")
            .is_none(),
        "the cluster's trust is deleted with it"
    );
    neutron
        .delete(Kind::Network, &network_id)
        .await
        .expect("the network");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_of_heat_stacks_makes_its_nodes_objects_through_the_clusters_trust() {
    let Some(env) = CloudEmber::start(
        "openstack::clusters::a_cluster_of_heat_stacks_makes_its_nodes_objects_through_the_clusters_trust",
    )
    .await
    else {
        return;
    };
    let demo = env.demo().clone();
    let session = env.session(&demo);
    let neutron = Neutron::new(&session);
    let rest = Rest {
        ember: &env.ember,
        token: env.token(&demo).await,
    };
    let tag = unique("node-net");
    rest.create_profile(json!({"name": "netstack", "spec": {"type": "os.heat.stack", "version": "1.0",
                "properties": {"template": {
                    "heat_template_version": "2018-08-31",
                    "resources": {"net": {"type": "OS::Neutron::Net", "properties": {"tags": [tag]}}},
                    "outputs": {"net": {"value": {"get_resource": "net"}}}}}}})).await;
    let (status, headers, body) = rest
        .post(
            "/clusters",
            json!({"cluster": {"name": unique("stacks"), "profile_id": "netstack",
                "min_size": 0, "max_size": 3, "desired_capacity": 2}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let cluster_id = body["cluster"]["id"].as_str().expect("id").to_owned();
    wait_action(&rest, &location(&headers), "SUCCEEDED").await;
    let tagged = || async {
        neutron
            .list(Kind::Network, &[("tags", tag.as_str())])
            .await
            .expect("listed")
    };
    let networks = tagged().await;
    assert_eq!(
        networks.len(),
        2,
        "one network per node, demo's: {networks:?}"
    );
    assert!(
        networks
            .iter()
            .all(|network| network["project_id"] == demo.project_id.as_str())
    );
    let trust = super::servers::recorded_trust(&env, &cluster_id)
        .await
        .expect("the cluster's trust");

    // A node's stack goes with its node; the cluster's trust stays.
    let scaled = rest
        .act(&cluster_id, json!({"scale_in": {"count": 1}}))
        .await;
    wait_action(&rest, &scaled, "SUCCEEDED").await;
    assert_eq!(tagged().await.len(), 1);
    assert!(
        Keystone::new(&session)
            .trust(&trust)
            .await
            .expect("asked")
            .is_some(),
        "a node's stack leaves its cluster's trust"
    );

    let (status, headers, body) = rest
        .call(
            reqwest::Method::DELETE,
            &format!("/clusters/{cluster_id}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    wait_action(&rest, &location(&headers), "SUCCEEDED").await;
    assert!(tagged().await.is_empty());
    assert!(
        Keystone::new(&session)
            .trust(&trust)
            .await
            .expect("asked")
            .is_none(),
        "the cluster's trust goes with the cluster"
    );
}
