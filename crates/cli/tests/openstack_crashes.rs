//! Crashes on a real cloud: the deployment shape (four `ember serve`
//! processes) with the openstack backend, its engine killed with SIGKILL at
//! seeded random moments while a stack is created and deleted and while a
//! cluster of Nova servers scales out, and started again on the same data.
//! After each operation settles, Nova, Neutron and Cinder hold exactly
//! what the stacks and clusters say: each server, port and volume made
//! once (a create resumed by the restarted engine finds what the killed
//! one made), nothing left behind by a delete.
//!
//! Needs the cloud of tests/openstack/cloud.sh (`EMBER_TEST_OPENSTACK`);
//! without it the test says so and does nothing. The seed is printed;
//! `CRASH_SUITE_SEED=<n>` replays a run's choices.

mod support;

use std::time::{Duration, Instant};

use ember_openstack::cinder::Cinder;
use ember_openstack::neutron::{Kind, Neutron};
use ember_openstack::nova::Nova;
use ember_openstack::testing::TestCloud;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use support::deployment::{Deployment, Service};

/// The longest an operation on the cloud may take to settle, kills and
/// takeovers included.
const SETTLE: Duration = Duration::from_secs(300);

fn object(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// A call to the gateway with the deployment's (Keystone) token; 0 when
/// nothing answered (the gateway is up throughout, the engine may not be).
async fn call(
    deployment: &Deployment,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = deployment
        .http
        .request(method, deployment.gateway(path))
        .header("X-Auth-Token", &deployment.token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            (status, response.json().await.unwrap_or(Value::Null))
        }
        Err(error) => (0, json!(error.to_string())),
    }
}

/// Kills the engine after a random pause of up to `within`, then starts it
/// again after another short one.
async fn crash_engine(deployment: &mut Deployment, rng: &mut rand::rngs::StdRng, within: Duration) {
    let pause = rng.random_range(Duration::from_millis(200)..within);
    tokio::time::sleep(pause).await;
    deployment.kill(Service::Engine);
    let down = rng.random_range(Duration::from_millis(0)..Duration::from_millis(700));
    eprintln!("engine killed {pause:?} in; restarted after {down:?}");
    tokio::time::sleep(down).await;
    deployment.spawn(Service::Engine);
}

/// Polls a stack until its status leaves `*_IN_PROGRESS` (or it is gone,
/// 404); returns the final status.
async fn settled(deployment: &Deployment, path: &str, status_key: &str) -> String {
    let deadline = Instant::now() + SETTLE;
    loop {
        let (status, body) = call(deployment, reqwest::Method::GET, path, None).await;
        if status == 404 {
            return "GONE".to_owned();
        }
        let state = body
            .pointer(status_key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if status == 200 && !state.ends_with("_IN_PROGRESS") && !state.is_empty() {
            return state;
        }
        assert!(Instant::now() < deadline, "{path}: still {state} ({body})");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_deletes_and_scale_outs_killed_at_seeded_moments_leave_exactly_what_they_say() {
    let Some(cloud) = TestCloud::from_env(
        "creates_deletes_and_scale_outs_killed_at_seeded_moments_leave_exactly_what_they_say",
    ) else {
        return;
    };
    let seed: u64 = std::env::var("CRASH_SUITE_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("CRASH_SUITE_SEED={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let facts = cloud.facts.clone();
    let keystone_url = facts.auth_url.clone();
    let mut deployment = Deployment::start_with(&[
        ("EMBER_AUTH__MODE", "keystone"),
        ("EMBER_AUTH__KEYSTONE__URL", &keystone_url),
        ("EMBER_AUTH__KEYSTONE__USER", &facts.service.user),
        ("EMBER_AUTH__KEYSTONE__PASSWORD", &facts.service.password),
        ("EMBER_AUTH__KEYSTONE__PROJECT", &facts.service.project),
        ("EMBER_ENGINE__COMPUTE__DRIVER", "openstack"),
        ("EMBER_ENGINE__COMPUTE__RESYNC_MS", "2000"),
        ("EMBER_ENGINE__OPENSTACK__AUTH_URL", &keystone_url),
        ("EMBER_ENGINE__OPENSTACK__USER", &facts.service.user),
        ("EMBER_ENGINE__OPENSTACK__PASSWORD", &facts.service.password),
        ("EMBER_ENGINE__OPENSTACK__PROJECT", &facts.service.project),
        ("EMBER_ENGINE__OPENSTACK__REGION", &facts.region),
        // A dead engine's work is taken over within seconds.
        ("EMBER_ENGINE__STACK_LEASE_TTL_MS", "1500"),
        ("EMBER_ENGINE__CLUSTER_ACTION_LEASE_MS", "2000"),
    ]);
    let demo = cloud.session(&facts.demo);
    deployment.token = demo
        .token()
        .await
        .expect("demo's token")
        .value
        .expose()
        .to_owned();
    deployment.wait_healthy().await;
    let nova = Nova::connect(&demo).await.expect("Nova");
    let neutron = Neutron::new(&demo);
    let cinder = Cinder::connect(&demo).await.expect("Cinder");

    // A stack: its create and its delete each with the engine killed.
    let name = format!("crash-{seed}");
    let stacks = format!("/orchestration/v1/{}/stacks", facts.demo.project_id);
    let template = json!({
        "heat_template_version": "2018-08-31",
        "resources": {
            "net": {"type": "OS::Neutron::Net"},
            "subnet": {"type": "OS::Neutron::Subnet", "properties": {
                "network": {"get_resource": "net"}, "cidr": "10.98.0.0/24"}},
            "port": {"type": "OS::Neutron::Port", "properties": {"network": {"get_resource": "net"}}},
            "alpha": {"type": "OS::Nova::Server", "properties": {
                "image": facts.image.name, "flavor": "ember.tiny",
                "networks": [{"port": {"get_resource": "port"}}]}},
            "beta": {"type": "OS::Nova::Server", "properties": {
                "image": facts.image.name, "flavor": "ember.tiny",
                "networks": [{"network": {"get_resource": "net"}}]}},
            "data": {"type": "OS::Cinder::Volume", "properties": {"size": 1}},
            "attach": {"type": "OS::Cinder::VolumeAttachment", "properties": {
                "instance_uuid": {"get_resource": "beta"}, "volume_id": {"get_resource": "data"}}}
        },
        "outputs": {
            "net": {"value": {"get_resource": "net"}},
            "alpha": {"value": {"get_resource": "alpha"}},
            "beta": {"value": {"get_resource": "beta"}},
            "volume": {"value": {"get_resource": "data"}}
        }
    });
    let (status, body) = call(
        &deployment,
        reqwest::Method::POST,
        &stacks,
        Some(json!({"stack_name": name, "template": template, "disable_rollback": true})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let stack = format!(
        "{stacks}/{name}/{}",
        body["stack"]["id"].as_str().expect("id")
    );
    crash_engine(&mut deployment, &mut rng, Duration::from_secs(8)).await;
    let state = settled(&deployment, &stack, "/stack/stack_status").await;
    let (_, resources) = call(
        &deployment,
        reqwest::Method::GET,
        &format!("{stack}/resources"),
        None,
    )
    .await;
    assert_eq!(state, "CREATE_COMPLETE", "seed {seed}: {resources}");
    let (_, shown) = call(&deployment, reqwest::Method::GET, &stack, None).await;
    let output = |key: &str| {
        shown["stack"]["outputs"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|output| output["output_key"] == key)
            .and_then(|output| output["output_value"].as_str())
            .unwrap_or_else(|| panic!("output {key}: {shown}"))
            .to_owned()
    };
    let network = output("net");
    let servers = [output("alpha"), output("beta")];
    // Exactly the two servers: every compute port on the stack's network is
    // one of theirs, one each.
    let ports = neutron
        .list(Kind::Port, &[("network_id", network.as_str())])
        .await
        .expect("ports");
    let mut devices: Vec<String> = ports
        .iter()
        .filter(|port| {
            port["device_owner"]
                .as_str()
                .is_some_and(|owner| owner.starts_with("compute:"))
        })
        .filter_map(|port| port["device_id"].as_str().map(str::to_owned))
        .collect();
    devices.sort();
    let mut expected = servers.to_vec();
    expected.sort();
    assert_eq!(devices, expected, "seed {seed}: one server each, no other");
    for server in &servers {
        let server = nova.server(server).await.expect("read").expect("in Nova");
        assert_eq!(server.status, "ACTIVE", "seed {seed}");
    }
    // Exactly one port made by the Port resource, and one volume.
    let made_ports = ports
        .iter()
        .filter(|port| {
            port["name"]
                .as_str()
                .is_some_and(|port| port.starts_with(&format!("{name}-port-")))
        })
        .count();
    assert_eq!(made_ports, 1, "seed {seed}: {ports:?}");
    let volumes = cinder
        .volumes_named_like(&format!("{name}-data-"))
        .await
        .expect("volumes");
    assert_eq!(volumes.len(), 1, "seed {seed}: {volumes:?}");
    assert_eq!(volumes[0].id, output("volume"));
    assert_eq!(volumes[0].status, "in-use");

    let (status, body) = call(&deployment, reqwest::Method::DELETE, &stack, None).await;
    assert_eq!(status, 204, "{body}");
    crash_engine(&mut deployment, &mut rng, Duration::from_secs(4)).await;
    let state = settled(&deployment, &stack, "/stack/stack_status").await;
    assert!(
        state == "DELETE_COMPLETE" || state == "GONE",
        "seed {seed}: {state}"
    );
    for server in &servers {
        assert!(
            nova.server(server).await.expect("read").is_none(),
            "seed {seed}"
        );
    }
    assert!(
        neutron
            .get(Kind::Network, &network)
            .await
            .expect("read")
            .is_none(),
        "seed {seed}: the network is gone, its ports with it"
    );
    assert!(
        cinder
            .volumes_named_like(&format!("{name}-data-"))
            .await
            .expect("volumes")
            .is_empty(),
        "seed {seed}"
    );

    // A cluster of Nova servers scaling out, the engine killed midway.
    let net = neutron
        .create(
            Kind::Network,
            object(json!({"name": format!("crash-net-{seed}")})),
            &[],
        )
        .await
        .expect("a network");
    let net_id = net["id"].as_str().expect("id").to_owned();
    neutron
        .create(
            Kind::Subnet,
            object(json!({"network_id": net_id, "cidr": "10.99.0.0/24", "ip_version": 4})),
            &[],
        )
        .await
        .expect("a subnet");
    let (status, body) = deployment
        .rest(
            reqwest::Method::POST,
            "/profiles",
            Some(json!({"profile": {"name": format!("crash-{seed}"), "spec": {"type": "os.nova.server",
                "version": "1.0", "properties": {"flavor": "ember.tiny", "image": facts.image.name,
                    "networks": [{"network": net_id}]}}}})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let profile = body["profile"]["id"].as_str().expect("id").to_owned();
    let (status, body) = deployment
        .rest(
            reqwest::Method::POST,
            "/clusters",
            Some(
                json!({"cluster": {"name": format!("crash-{seed}"), "profile_id": profile,
                "min_size": 0, "max_size": 5, "desired_capacity": 1}}),
            ),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let cluster = body["cluster"]["id"].as_str().expect("id").to_owned();
    let deadline = Instant::now() + SETTLE;
    loop {
        let status = deployment.get(&format!("/clusters/{cluster}")).await["cluster"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if status == "ACTIVE" {
            break;
        }
        assert!(
            !matches!(status.as_str(), "ERROR" | "CRITICAL" | "WARNING"),
            "seed {seed}: the cluster is {status}"
        );
        assert!(
            Instant::now() < deadline,
            "seed {seed}: the cluster is {status}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (status, body) = deployment
        .rest(
            reqwest::Method::POST,
            &format!("/clusters/{cluster}/actions"),
            Some(json!({"scale_out": {"count": 2}})),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    crash_engine(&mut deployment, &mut rng, Duration::from_secs(6)).await;
    let deadline = Instant::now() + SETTLE;
    let nodes = loop {
        // The restarted engine may not answer yet (503): asked again.
        let (_, body) = deployment
            .rest(
                reqwest::Method::GET,
                &format!("/nodes?cluster_id={cluster}"),
                None,
            )
            .await;
        let nodes = body["nodes"].as_array().cloned().unwrap_or_default();
        if nodes.len() == 3 && nodes.iter().all(|node| node["status"] == "ACTIVE") {
            break nodes;
        }
        assert!(Instant::now() < deadline, "seed {seed}: {nodes:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let mut made = Vec::new();
    for node in &nodes {
        let instance = node["physical_id"].as_str().expect("an instance");
        let tagged = nova
            .servers_tagged(&format!("ember-{instance}"), false)
            .await
            .expect("listed");
        assert_eq!(
            tagged.len(),
            1,
            "seed {seed}: one server per node: {tagged:?}"
        );
        made.push(tagged[0].id.clone());
    }
    let on_network = neutron
        .list(Kind::Port, &[("network_id", net_id.as_str())])
        .await
        .expect("ports")
        .iter()
        .filter(|port| {
            port["device_owner"]
                .as_str()
                .is_some_and(|owner| owner.starts_with("compute:"))
        })
        .count();
    assert_eq!(on_network, 3, "seed {seed}: no server beside the nodes'");

    let (status, body) = deployment
        .rest(
            reqwest::Method::DELETE,
            &format!("/clusters/{cluster}"),
            None,
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let deadline = Instant::now() + SETTLE;
    loop {
        let (status, _) = deployment
            .rest(reqwest::Method::GET, &format!("/clusters/{cluster}"), None)
            .await;
        if status == 404 {
            break;
        }
        assert!(Instant::now() < deadline, "seed {seed}: the cluster stays");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for server in &made {
        assert!(
            nova.server(server).await.expect("read").is_none(),
            "seed {seed}"
        );
    }
    neutron
        .delete(Kind::Network, &net_id)
        .await
        .expect("the network");
}
