//! Networks, subnets, ports, volumes and attachments on the docker backend
//! (issue 38): a stack of a net, a subnet, a port with a fixed IP, a server
//! on that port, a volume and its attachment makes a container network
//! with that subnet, a container with that address and the volume mounted;
//! deleting the stack removes all of it. What the engine cannot honour or
//! refuses fails with a message naming it, and another project cannot
//! reach a network by its name or id.

use ember_tests::containers::{ContainerEngine, ENGINE_DEADLINE};
use ember_tests::{TestEmber, wait_for};
use serde_json::{Value, json};

use super::ember_on;

async fn heat(
    ember: &TestEmber,
    token: &str,
    project: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = ember
        .http
        .request(
            method,
            ember.url(&format!("/orchestration/v1/{project}{path}")),
        )
        .header("X-Auth-Token", token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Creates a stack and waits until it settles; returns its path and body.
async fn settle(
    ember: &TestEmber,
    token: &str,
    project: &str,
    name: &str,
    template: Value,
) -> (String, Value) {
    let (status, body) = heat(
        ember,
        token,
        project,
        reqwest::Method::POST,
        "/stacks",
        Some(json!({"stack_name": name, "template": template})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let id = body["stack"]["id"].as_str().expect("id").to_owned();
    let path = format!("/stacks/{name}/{id}");
    wait_for(
        &format!("stack {name} to settle"),
        ENGINE_DEADLINE,
        || async {
            let (_, body) = heat(ember, token, project, reqwest::Method::GET, &path, None).await;
            let status = body["stack"]["stack_status"].as_str().unwrap_or_default();
            status.ends_with("COMPLETE") || status.ends_with("FAILED")
        },
    )
    .await;
    let (_, body) = heat(ember, token, project, reqwest::Method::GET, &path, None).await;
    (path, body["stack"].clone())
}

/// A /24 of 10.0.0.0/8 no other test run is likely to hold: container
/// networks may not overlap.
fn unique_cidr_prefix() -> String {
    let bytes = *uuid::Uuid::new_v4().as_bytes();
    format!("10.{}.{}", 100 + bytes[0] % 100, bytes[1])
}

async fn engine_networks(engine: &ContainerEngine, prefix: &str) -> Vec<String> {
    engine
        .docker
        .list_networks(None::<bollard::query_parameters::ListNetworksOptions>)
        .await
        .expect("networks")
        .into_iter()
        .filter_map(|network| network.name)
        .filter(|name| name.starts_with(prefix))
        .collect()
}

async fn engine_volumes(engine: &ContainerEngine, prefix: &str) -> Vec<String> {
    engine
        .docker
        .list_volumes(None::<bollard::query_parameters::ListVolumesOptions>)
        .await
        .expect("volumes")
        .volumes
        .unwrap_or_default()
        .into_iter()
        .map(|volume| volume.name)
        .filter(|name| name.starts_with(prefix))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_on_a_port_with_a_fixed_ip_and_a_volume_is_a_real_container() {
    let Some(engine) = ContainerEngine::from_env("a_server_on_a_port_with_a_fixed_ip").await else {
        return;
    };
    let (ember, prefix) = ember_on(&engine, |_| {}).await;
    let token = ember.member_token().to_owned();
    let net = unique_cidr_prefix();
    let fixed_ip = format!("{net}.10");
    let template = json!({"heat_template_version": "2018-08-31",
        "resources": {
            "net": {"type": "OS::Neutron::Net", "properties": {"name": "app"}},
            "subnet": {"type": "OS::Neutron::Subnet", "properties": {
                "network": {"get_resource": "net"}, "cidr": format!("{net}.0/24")}},
            "port": {"type": "OS::Neutron::Port", "properties": {
                "network": {"get_resource": "net"},
                "fixed_ips": [{"subnet": {"get_resource": "subnet"}, "ip_address": fixed_ip}]}},
            "server": {"type": "OS::Nova::Server", "properties": {
                "flavor": "half", "image": engine.image, "command": ["/bin/sleep", "3600"],
                "networks": [{"port": {"get_resource": "port"}}]}},
            "data": {"type": "OS::Cinder::Volume", "properties": {"size": 1}},
            "attach": {"type": "OS::Cinder::VolumeAttachment", "properties": {
                "instance_uuid": {"get_resource": "server"},
                "volume_id": {"get_resource": "data"}, "mountpoint": "/dev/vdb"}}},
        "outputs": {
            "address": {"value": {"get_attr": ["server", "first_address"]}},
            "port_ips": {"value": {"get_attr": ["port", "fixed_ips"]}},
            "networks": {"value": {"get_attr": ["server", "networks"]}}}});
    let (path, stack) = settle(&ember, &token, "demo", "app", template).await;
    assert_eq!(stack["stack_status"], "CREATE_COMPLETE", "{stack}");
    let output = |key: &str| {
        stack["outputs"]
            .as_array()
            .and_then(|outputs| outputs.iter().find(|output| output["output_key"] == key))
            .map(|output| output["output_value"].clone())
            .unwrap_or(Value::Null)
    };
    assert_eq!(output("address"), json!(fixed_ip), "{stack}");
    assert_eq!(output("port_ips")[0]["ip_address"], json!(fixed_ip));
    assert_eq!(output("networks"), json!({"app": [fixed_ip]}));

    // The container really is on the subnet's network with that address,
    // and has the volume mounted at /mnt/vdb.
    let (_, resources) = heat(
        &ember,
        &token,
        "demo",
        reqwest::Method::GET,
        &format!("{path}/resources"),
        None,
    )
    .await;
    let physical = |name: &str| {
        resources["resources"]
            .as_array()
            .and_then(|all| {
                all.iter()
                    .find(|resource| resource["resource_name"] == name)
            })
            .and_then(|resource| resource["physical_resource_id"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let server = physical("server");
    let container = engine.container_of(&server).await.expect("the container");
    let networks = container
        .network_settings
        .and_then(|settings| settings.networks)
        .expect("networks");
    let subnet_network = format!("{prefix}subnet-{}", physical("subnet"));
    let endpoint = networks.get(&subnet_network).unwrap_or_else(|| {
        panic!(
            "the container is on {subnet_network}: {:?}",
            networks.keys()
        )
    });
    assert_eq!(endpoint.ip_address.as_deref(), Some(fixed_ip.as_str()));
    assert_eq!(networks.len(), 1, "on that network only: {networks:?}");
    let inspected = engine
        .docker
        .inspect_network(&subnet_network, None)
        .await
        .expect("the network");
    let subnet = inspected
        .ipam
        .and_then(|ipam| ipam.config)
        .and_then(|config| config.first().and_then(|config| config.subnet.clone()));
    assert_eq!(subnet, Some(format!("{net}.0/24")));
    let mounts = container.mounts.unwrap_or_default();
    let volume_name = format!("{prefix}vol-{}", physical("data"));
    assert!(
        mounts
            .iter()
            .any(|mount| mount.name.as_deref() == Some(volume_name.as_str())
                && mount.destination.as_deref() == Some("/mnt/vdb")),
        "{volume_name} is mounted at /mnt/vdb: {mounts:?}"
    );
    assert!(engine.running(&server).await, "the server runs");

    let (status, body) = heat(&ember, &token, "demo", reqwest::Method::DELETE, &path, None).await;
    assert_eq!(status, 204, "{body}");
    wait_for(
        "the container, network and volume gone",
        ENGINE_DEADLINE,
        || async {
            engine.containers(&prefix).await.is_empty()
                && engine_networks(&engine, &prefix).await.is_empty()
                && engine_volumes(&engine, &prefix).await.is_empty()
        },
    )
    .await;
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_engine_refuses_fails_clearly_and_projects_keep_their_networks() {
    let Some(engine) = ContainerEngine::from_env("what_the_engine_refuses_fails_clearly").await
    else {
        return;
    };
    let (ember, prefix) = ember_on(&engine, |_| {}).await;
    let token = ember.member_token().to_owned();
    let net = unique_cidr_prefix();
    let network = |subnet: Value| {
        json!({"heat_template_version": "2018-08-31", "resources": {
            "net": {"type": "OS::Neutron::Net", "properties": {"name": "private"}},
            "subnet": {"type": "OS::Neutron::Subnet",
                "properties": subnet}}, "outputs": {"net": {"value": {"get_resource": "net"}}}})
    };
    let (_, first) = settle(
        &ember,
        &token,
        "demo",
        "first",
        network(json!({"network": {"get_resource": "net"}, "cidr": format!("{net}.0/24")})),
    )
    .await;
    assert_eq!(first["stack_status"], "CREATE_COMPLETE", "{first}");
    let net_id = first["outputs"][0]["output_value"]
        .as_str()
        .expect("the net's id")
        .to_owned();

    // A property the engine has no setting for, named when the template
    // is validated: the create is refused (400) and nothing is made.
    let (status, body) = heat(
        &ember,
        &token,
        "demo",
        reqwest::Method::POST,
        "/stacks",
        Some(json!({"stack_name": "dns", "template": network(
            json!({"network": {"get_resource": "net"}, "cidr": "10.1.2.0/24",
            "dns_nameservers": ["192.0.2.53"]}),
        )})),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("OS::Neutron::Subnet on the docker backend cannot honour dns_nameservers"),
        "{body}"
    );
    // A type the backend does not offer says so.
    let (status, body) = heat(
        &ember,
        &token,
        "demo",
        reqwest::Method::POST,
        "/stacks",
        Some(
            json!({"stack_name": "routed", "template": {"heat_template_version": "2018-08-31",
            "resources": {"router": {"type": "OS::Neutron::Router"}}}}),
        ),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message
            .contains("OS::Neutron::Router is not offered here: the docker backend has no routers"),
        "{body}"
    );
    // The same value given by a parameter is refused when the resource is
    // made, by name.
    let mut from_parameter = network(
        json!({"network": {"get_resource": "net"}, "cidr": "10.1.2.0/24",
        "dns_nameservers": {"get_param": "dns"}}),
    );
    from_parameter["parameters"] =
        json!({"dns": {"type": "comma_delimited_list", "default": "192.0.2.53"}});
    let (_, refused) = settle(&ember, &token, "demo", "dns", from_parameter).await;
    assert_eq!(refused["stack_status"], "CREATE_FAILED", "{refused}");
    let reason = refused["stack_status_reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("OS::Neutron::Subnet on the docker backend cannot honour dns_nameservers"),
        "{reason}"
    );

    // A cidr the container engine refuses (it overlaps the first's).
    let (_, overlapping) = settle(
        &ember,
        &token,
        "demo",
        "overlap",
        network(json!({"network": {"get_resource": "net"}, "cidr": format!("{net}.0/25")})),
    )
    .await;
    assert_eq!(
        overlapping["stack_status"], "CREATE_FAILED",
        "{overlapping}"
    );
    let reason = overlapping["stack_status_reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains(&format!("cannot make subnet {net}.0/25 on network private")),
        "{reason}"
    );

    // Another project reaches the network neither by name nor by id.
    let other = ember.outsider_token();
    for reference in ["private".to_owned(), net_id.clone()] {
        let template = json!({"heat_template_version": "2018-08-31", "resources": {
            "port": {"type": "OS::Neutron::Port", "properties": {"network": reference}}}});
        let name = format!("steal-{}", &uuid::Uuid::new_v4().simple().to_string()[..6]);
        let (_, stolen) = settle(&ember, &other, "other", &name, template).await;
        assert_eq!(stolen["stack_status"], "CREATE_FAILED", "{stolen}");
        let reason = stolen["stack_status_reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains(&format!(
                "Unable to find network with name or id '{reference}'"
            )),
            "{reason}"
        );
    }
    // The owner's own port on it works.
    let template = json!({"heat_template_version": "2018-08-31", "resources": {
        "port": {"type": "OS::Neutron::Port", "properties": {"network": net_id}}},
        "outputs": {"ip": {"value": {"get_attr": ["port", "fixed_ips", 0, "ip_address"]}}}});
    let (_, mine) = settle(&ember, &token, "demo", "mine", template).await;
    assert_eq!(mine["stack_status"], "CREATE_COMPLETE", "{mine}");
    assert_eq!(
        mine["outputs"][0]["output_value"],
        json!(format!("{net}.2")),
        "the first free address after the gateway"
    );
    engine.clean_up(&prefix).await;
    for volume in engine_volumes(&engine, &prefix).await {
        let _ = engine
            .docker
            .remove_volume(
                &volume,
                None::<bollard::query_parameters::RemoveVolumeOptions>,
            )
            .await;
    }
    for network in engine_networks(&engine, &prefix).await {
        let _ = engine.docker.remove_network(&network).await;
    }
    ember.stop().await;
}
