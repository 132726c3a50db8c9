//! A whole application on the cloud from one Heat template, as a Heat user
//! writes it (no `depends_on`: Ember keeps Heat's implicit dependencies): a
//! network, subnet, router with a gateway and an interface, a security
//! group with a rule, a port, two servers, a floating IP, a volume and its
//! attachment. Every object is seen in the services' own listings as
//! demo's, `get_attr` gives the real addresses; an update to another flavor
//! and image gives new servers (Ember replaces: see docs/openstack.md);
//! the delete leaves nothing in any service.

use ember_openstack::cinder::Cinder;
use ember_openstack::neutron::{Kind, Neutron};
use ember_openstack::nova::Nova;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{CloudEmber, unique};

fn template(facts: &ember_openstack::testing::Facts, flavor: &str, image: &str) -> Value {
    json!({
        "heat_template_version": "2018-08-31",
        "resources": {
            "net": {"type": "OS::Neutron::Net"},
            "subnet": {"type": "OS::Neutron::Subnet", "properties": {
                "network": {"get_resource": "net"}, "cidr": "10.95.0.0/24",
                "dns_nameservers": ["10.95.0.2"]}},
            "router": {"type": "OS::Neutron::Router", "properties": {
                "external_gateway_info": {"network": facts.public_network.name}}},
            "interface": {"type": "OS::Neutron::RouterInterface", "properties": {
                "router": {"get_resource": "router"}, "subnet": {"get_resource": "subnet"}}},
            "web_sg": {"type": "OS::Neutron::SecurityGroup", "properties": {
                "description": "web", "rules": [{"protocol": "tcp", "port_range_min": 80, "port_range_max": 80}]}},
            "ssh_rule": {"type": "OS::Neutron::SecurityGroupRule", "properties": {
                "security_group": {"get_resource": "web_sg"}, "protocol": "tcp",
                "port_range_min": 22, "port_range_max": 22, "remote_ip_prefix": "10.0.0.0/8"}},
            "port": {"type": "OS::Neutron::Port", "properties": {
                "network": {"get_resource": "net"},
                "security_groups": [{"get_resource": "web_sg"}]}},
            "web": {"type": "OS::Nova::Server", "properties": {
                "flavor": flavor, "image": image, "networks": [{"port": {"get_resource": "port"}}]}},
            "worker": {"type": "OS::Nova::Server", "properties": {
                "flavor": flavor, "image": image, "networks": [{"network": {"get_resource": "net"}}]}},
            "fip": {"type": "OS::Neutron::FloatingIP", "properties": {
                "floating_network": facts.public_network.name, "port_id": {"get_resource": "port"}}},
            "data": {"type": "OS::Cinder::Volume", "properties": {"size": 1}},
            "attach": {"type": "OS::Cinder::VolumeAttachment", "properties": {
                "instance_uuid": {"get_resource": "worker"}, "volume_id": {"get_resource": "data"}}}
        },
        "outputs": {
            "web": {"value": {"get_resource": "web"}},
            "worker": {"value": {"get_resource": "worker"}},
            "web_address": {"value": {"get_attr": ["web", "first_address"]}},
            "port_ip": {"value": {"get_attr": ["port", "fixed_ips", 0, "ip_address"]}},
            "floating_ip": {"value": {"get_attr": ["fip", "floating_ip_address"]}},
            "fip_fixed": {"value": {"get_attr": ["fip", "fixed_ip_address"]}},
            "net": {"value": {"get_resource": "net"}},
            "volume": {"value": {"get_resource": "data"}},
            "router": {"value": {"get_resource": "router"}},
            "web_sg": {"value": {"get_resource": "web_sg"}}
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heat_template_builds_a_whole_application_on_the_cloud_and_leaves_nothing_behind() {
    let Some(env) = CloudEmber::start(
        "openstack::topology::a_heat_template_builds_a_whole_application_on_the_cloud_and_leaves_nothing_behind",
    )
    .await
    else {
        return;
    };
    let demo = env.demo().clone();
    let facts = env.cloud.facts.clone();
    let session = env.session(&demo);
    let nova = Nova::connect(&session).await.expect("Nova");
    let neutron = Neutron::new(&session);
    let cinder = Cinder::connect(&session).await.expect("Cinder");

    let stack = env
        .create_stack(
            &demo,
            &unique("app"),
            template(&facts, "ember.tiny", &facts.image.name),
        )
        .await;
    env.settled_as(&demo, &stack, "CREATE_COMPLETE").await;
    let outputs = env.outputs(&demo, &stack).await;
    let id = |key: &str| {
        outputs[key]
            .as_str()
            .unwrap_or_else(|| panic!("output {key}: {outputs:?}"))
            .to_owned()
    };

    // Every object is demo's, in the services' own listings.
    let (web, worker) = (id("web"), id("worker"));
    for server in [&web, &worker] {
        let server = nova.server(server).await.expect("read").expect("in Nova");
        assert_eq!(server.status, "ACTIVE");
        assert_eq!(server.tenant_id, demo.project_id);
    }
    let network = id("net");
    let ports = neutron
        .list(Kind::Port, &[("network_id", network.as_str())])
        .await
        .expect("ports");
    let address = id("web_address");
    assert!(address.starts_with("10.95.0."), "{address}");
    assert_eq!(address, id("port_ip"), "the web server is on the port");
    assert!(
        ports.iter().any(|port| port["device_id"] == web.as_str()),
        "{ports:?}"
    );
    assert!(
        ports
            .iter()
            .any(|port| port["device_id"] == worker.as_str()),
        "{ports:?}"
    );
    let floating = neutron
        .list(
            Kind::FloatingIp,
            &[("floating_ip_address", id("floating_ip").as_str())],
        )
        .await
        .expect("floating IPs");
    assert_eq!(floating.len(), 1, "{floating:?}");
    assert_eq!(floating[0]["fixed_ip_address"], json!(address));
    assert_eq!(id("fip_fixed"), address);
    let router = neutron
        .get(Kind::Router, &id("router"))
        .await
        .expect("read")
        .expect("the router");
    assert_eq!(
        router["external_gateway_info"]["network_id"],
        json!(facts.public_network.id)
    );
    let group = neutron
        .get(Kind::SecurityGroup, &id("web_sg"))
        .await
        .expect("read")
        .expect("the group");
    let ports_open: Vec<i64> = group["security_group_rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter_map(|rule| rule["port_range_min"].as_i64())
        .collect();
    assert!(
        ports_open.contains(&80) && ports_open.contains(&22),
        "{ports_open:?}"
    );
    let volume = cinder
        .volume(&id("volume"))
        .await
        .expect("read")
        .expect("the volume");
    assert_eq!(volume.status, "in-use");
    assert_eq!(volume.attachments[0].server_id, worker);

    // Another flavor and image: new servers (the old ones deleted).
    let updated = env
        .call(
            &demo,
            Method::PATCH,
            &stack,
            Some(json!({"template": template(&facts, "ember.small", &facts.image.id)})),
        )
        .await;
    assert_eq!(updated.status, StatusCode::ACCEPTED, "{updated:?}");
    env.settled_as(&demo, &stack, "UPDATE_COMPLETE").await;
    let outputs = env.outputs(&demo, &stack).await;
    let new_web = outputs["web"].as_str().expect("web").to_owned();
    assert_ne!(new_web, web, "a new server");
    let server = nova.server(&new_web).await.expect("read").expect("in Nova");
    assert_eq!(
        server.raw["flavor"]["original_name"], "ember.small",
        "{}",
        server.raw
    );
    assert!(
        nova.server(&web).await.expect("read").is_none(),
        "the old one is gone"
    );

    // Delete: nothing of the stack is left in any service.
    let new_worker = outputs["worker"].as_str().expect("worker").to_owned();
    env.delete_stack(&demo, &stack).await;
    for server in [&new_web, &new_worker] {
        assert!(
            nova.server(server).await.expect("read").is_none(),
            "{server}"
        );
    }
    assert!(
        neutron
            .get(Kind::Network, &network)
            .await
            .expect("read")
            .is_none()
    );
    assert!(
        neutron
            .get(Kind::Router, &id("router"))
            .await
            .expect("read")
            .is_none()
    );
    assert!(
        neutron
            .list(
                Kind::FloatingIp,
                &[("floating_ip_address", id("floating_ip").as_str())]
            )
            .await
            .expect("listed")
            .is_empty()
    );
    assert!(cinder.volume(&id("volume")).await.expect("read").is_none());
}
