//! A server's networks changed by a stack update on the real cloud: the
//! same Nova server is replugged in place (interface detach and attach, as
//! Heat does), an entry that names what the server already has another way
//! keeps its port, and the ports made for it go with their interface or
//! with the server; a port the stack made is only unbound.

use ember_openstack::neutron::{Kind, Neutron};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{CloudEmber, unique};

fn template(image: &str, networks: Value) -> Value {
    json!({
        "heat_template_version": "2016-04-08",
        "resources": {
            "net": {"type": "OS::Neutron::Net", "properties": {"name": "the_net"}},
            "subnet": {"type": "OS::Neutron::Subnet", "properties": {
                "network": {"get_resource": "net"}, "cidr": "11.11.11.0/24"}},
            "spare": {"type": "OS::Neutron::Port", "properties": {
                "network": {"get_resource": "net"}}},
            "server": {"type": "OS::Nova::Server", "depends_on": ["subnet"], "properties": {
                "flavor": "ember.tiny", "image": image, "networks": networks}}
        },
        "outputs": {
            "server": {"value": {"get_resource": "server"}},
            "spare": {"value": {"get_resource": "spare"}},
            "net": {"value": {"get_resource": "net"}},
            "addresses": {"value": {"get_attr": ["server", "addresses", "the_net"]}}
        }
    })
}

/// The server's id and the ports of its addresses (sorted).
async fn server_and_ports(env: &CloudEmber, stack: &str) -> (String, Vec<String>) {
    let outputs = env.outputs(env.demo(), stack).await;
    let mut ports: Vec<String> = outputs["addresses"]
        .as_array()
        .unwrap_or_else(|| panic!("addresses: {outputs:?}"))
        .iter()
        .filter_map(|entry| entry["port"].as_str().map(str::to_owned))
        .collect();
    ports.sort();
    (
        outputs["server"].as_str().expect("server").to_owned(),
        ports,
    )
}

async fn update(env: &CloudEmber, stack: &str, template: Value) {
    let answer = env
        .call(
            env.demo(),
            Method::PATCH,
            stack,
            Some(json!({ "template": template })),
        )
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{answer:?}");
    env.settled_as(env.demo(), stack, "UPDATE_COMPLETE").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_networks_change_in_place_keeping_the_ports_it_still_names() {
    let Some(env) = CloudEmber::start(
        "openstack::renetwork::a_servers_networks_change_in_place_keeping_the_ports_it_still_names",
    )
    .await
    else {
        return;
    };
    let demo = env.demo().clone();
    let image = env.cloud.facts.image.name.clone();
    let neutron = Neutron::new(&env.session(&demo));
    let stack = env
        .create_stack(
            &demo,
            &unique("renetwork"),
            template(&image, json!([{"network": {"get_resource": "net"}}])),
        )
        .await;
    env.settled_as(&demo, &stack, "CREATE_COMPLETE").await;
    let (server, ports) = server_and_ports(&env, &stack).await;
    assert_eq!(ports.len(), 1, "{ports:?}");

    // The same interface named by its subnet: nothing changes in Nova.
    update(
        &env,
        &stack,
        template(&image, json!([{"subnet": {"get_resource": "subnet"}}])),
    )
    .await;
    assert_eq!(
        server_and_ports(&env, &stack).await,
        (server.clone(), ports.clone())
    );

    // Another address: a new interface; the one Nova made is gone.
    update(
        &env,
        &stack,
        template(
            &image,
            json!([{"network": {"get_resource": "net"}, "fixed_ip": "11.11.11.77"}]),
        ),
    )
    .await;
    let (same, swapped) = server_and_ports(&env, &stack).await;
    assert_eq!(same, server, "the same server, replugged");
    assert_eq!(swapped.len(), 1);
    assert_ne!(swapped, ports);
    assert!(
        neutron
            .get(Kind::Port, &ports[0])
            .await
            .expect("read")
            .is_none(),
        "the port Nova made went with its interface"
    );

    // The stack's own port in, then out again: unbound, not deleted.
    update(
        &env,
        &stack,
        template(&image, json!([{"port": {"get_resource": "spare"}}])),
    )
    .await;
    let spare = env.outputs(&demo, &stack).await["spare"]
        .as_str()
        .expect("spare")
        .to_owned();
    assert_eq!(
        server_and_ports(&env, &stack).await,
        (server.clone(), vec![spare.clone()])
    );
    update(
        &env,
        &stack,
        template(
            &image,
            json!([{"subnet": {"get_resource": "subnet"}, "fixed_ip": "11.11.11.88"}]),
        ),
    )
    .await;
    let (same, made) = server_and_ports(&env, &stack).await;
    assert_eq!(same, server);
    assert_ne!(made, vec![spare.clone()]);
    let port = neutron
        .get(Kind::Port, &spare)
        .await
        .expect("read")
        .expect("the spare port stays");
    assert_eq!(port["device_id"], json!(""), "{port}");

    // Delete: the port made for the subnet goes with the server, and the
    // network with the stack.
    let network = env.outputs(&demo, &stack).await["net"]
        .as_str()
        .expect("net")
        .to_owned();
    env.delete_stack(&demo, &stack).await;
    assert!(
        neutron
            .get(Kind::Network, &network)
            .await
            .expect("read")
            .is_none(),
        "nothing left on the network"
    );
}
