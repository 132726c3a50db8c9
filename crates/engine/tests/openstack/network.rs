//! The Neutron types against the real cloud: what they make is what demo's
//! own client sees (and alt's does not), changes land in place where Heat
//! allows them, a create run again makes nothing twice, a lost id is still
//! deleted, and failures keep Neutron's words.

use ember_engine::domain::Resource;
use ember_engine::domain::delegation::{Delegation, DelegationOwner, TrustOwnership};
use ember_engine::resources::ResourceRequest;
use ember_engine::store::delegations::DelegationStore;
use ember_openstack::keystone::Keystone;
use ember_openstack::neutron::{Kind, Neutron};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::harness::{Harness, unique};

fn neutron_of(session: &ember_openstack::Session) -> Neutron {
    Neutron::new(session)
}

/// What demo's own client shows of `id`.
async fn shown(harness: &Harness, kind: Kind, id: &str) -> Value {
    neutron_of(&harness.demo())
        .get(kind, id)
        .await
        .expect("demo reads")
        .unwrap_or_else(|| panic!("demo sees the {} {id}", kind.noun()))
}

/// Whether demo's own client still finds `id`.
async fn exists(harness: &Harness, kind: Kind, id: &str) -> bool {
    neutron_of(&harness.demo())
        .get(kind, id)
        .await
        .expect("demo reads")
        .is_some()
}

fn id(resource: &Resource) -> &str {
    resource.physical_id.as_deref().expect("a physical id")
}

fn tags(object: &Value) -> Vec<&str> {
    object["tags"]
        .as_array()
        .map(|tags| tags.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Runs an in-place update of `row` to `properties`, as the executor does
/// (the same row), and returns the row it leaves.
async fn update(harness: &Harness, row: &Resource, properties: Value) -> Resource {
    let request = harness.request_in(row.stack_id, row.id, &row.type_name, &row.name, properties);
    let resource_type = harness.resource_type(&row.type_name);
    let old = row.properties.as_object().cloned().unwrap_or_default();
    assert!(
        !resource_type.needs_replacement(&old, &request.properties),
        "{} {}: the change is made in place",
        row.type_name,
        row.name
    );
    let outcome = resource_type
        .update(&request, row)
        .await
        .unwrap_or_else(|failure| panic!("update {}: {failure}", row.name));
    assert_eq!(outcome.physical_id, id(row), "the same object");
    harness.created(&request, &outcome)
}

/// A network with a subnet, routed to `public` (a router with its gateway
/// there and an interface on the subnet): floating IPs can reach its ports.
struct Routed {
    net: Resource,
    subnet: Resource,
    router: Resource,
    interface: Resource,
}

impl Routed {
    async fn make(harness: &Harness, cidr: &str) -> Routed {
        let net = harness
            .create("OS::Neutron::Net", "net", json!({"name": unique("net")}))
            .await;
        let subnet = harness
            .create(
                "OS::Neutron::Subnet",
                "subnet",
                json!({"network": id(&net), "cidr": cidr}),
            )
            .await;
        let router = harness
            .create(
                "OS::Neutron::Router",
                "router",
                json!({"external_gateway_info": {"network": "public"}}),
            )
            .await;
        let interface = harness
            .create(
                "OS::Neutron::RouterInterface",
                "interface",
                json!({"router": id(&router), "subnet": id(&subnet)}),
            )
            .await;
        Routed {
            net,
            subnet,
            router,
            interface,
        }
    }

    async fn delete(self, harness: &Harness) {
        for resource in [&self.interface, &self.router, &self.subnet, &self.net] {
            harness.delete(resource).await;
        }
    }
}

#[tokio::test]
async fn a_routed_network_is_made_as_demo_and_hidden_from_alt() {
    let Some(harness) =
        Harness::start("a_routed_network_is_made_as_demo_and_hidden_from_alt").await
    else {
        return;
    };
    let public = harness.test_cloud.facts.public_network.clone();
    let net_name = unique("net");
    let net = harness
        .create(
            "OS::Neutron::Net",
            "net",
            json!({"name": net_name, "tags": ["blue"]}),
        )
        .await;
    // Another object is named, not given by id: resolved as demo.
    let subnet_name = unique("subnet");
    let subnet = harness
        .create(
            "OS::Neutron::Subnet",
            "subnet",
            json!({"network": net_name, "name": subnet_name, "cidr": "10.71.0.0/24", "dns_nameservers": ["10.71.0.2"]}),
        )
        .await;
    let group = harness
        .create(
            "OS::Neutron::SecurityGroup",
            "group",
            json!({"description": "web", "rules": [
                {"protocol": "tcp", "port_range_min": 22, "port_range_max": 22, "remote_ip_prefix": "10.0.0.0/8"},
                {"protocol": "icmp", "remote_mode": "remote_group_id"},
            ]}),
        )
        .await;
    let rule = harness
        .create(
            "OS::Neutron::SecurityGroupRule",
            "rule",
            json!({"security_group": id(&group), "port_range_min": 443, "port_range_max": 443}),
        )
        .await;
    let port = harness
        .create(
            "OS::Neutron::Port",
            "port",
            json!({
                "network": id(&net),
                "fixed_ips": [{"subnet": subnet_name, "ip_address": "10.71.0.10"}],
                "security_groups": [id(&group)],
            }),
        )
        .await;
    let second_port = harness
        .create(
            "OS::Neutron::Port",
            "second_port",
            json!({"network": net_name}),
        )
        .await;
    let router = harness
        .create(
            "OS::Neutron::Router",
            "router",
            json!({"external_gateway_info": {"network": "public"}}),
        )
        .await;
    let interface = harness
        .create(
            "OS::Neutron::RouterInterface",
            "interface",
            json!({"router": id(&router), "subnet": subnet_name}),
        )
        .await;
    let floating_ip = harness
        .create(
            "OS::Neutron::FloatingIP",
            "floating_ip",
            json!({"floating_network": "public", "port_id": id(&port)}),
        )
        .await;
    let loose_floating_ip = harness
        .create(
            "OS::Neutron::FloatingIP",
            "loose_floating_ip",
            json!({"floating_network": public.id}),
        )
        .await;
    let association = harness
        .create(
            "OS::Neutron::FloatingIPAssociation",
            "association",
            json!({"floatingip_id": id(&loose_floating_ip), "port_id": id(&second_port)}),
        )
        .await;

    // What demo's own client sees.
    let shown_net = shown(&harness, Kind::Network, id(&net)).await;
    assert_eq!(shown_net["name"], json!(net_name));
    let net_tags = tags(&shown_net);
    assert!(
        net_tags.contains(&"blue"),
        "the template's tag: {net_tags:?}"
    );
    assert!(
        net_tags.iter().any(|tag| tag.starts_with("ember-")),
        "the row's marker: {net_tags:?}"
    );
    let shown_subnet = shown(&harness, Kind::Subnet, id(&subnet)).await;
    assert_eq!(shown_subnet["network_id"], json!(id(&net)));
    assert_eq!(shown_subnet["cidr"], json!("10.71.0.0/24"));
    assert_eq!(shown_subnet["dns_nameservers"], json!(["10.71.0.2"]));
    assert_eq!(subnet.attributes["cidr"], json!("10.71.0.0/24"));

    let shown_port = shown(&harness, Kind::Port, id(&port)).await;
    assert_eq!(shown_port["security_groups"], json!([id(&group)]));
    assert_eq!(
        port.attributes["fixed_ips"],
        json!([{"subnet_id": id(&subnet), "ip_address": "10.71.0.10"}])
    );
    assert_eq!(port.attributes["mac_address"], shown_port["mac_address"]);
    assert_eq!(port.attributes["subnets"][0]["id"], json!(id(&subnet)));
    assert_eq!(port.attributes["network"]["id"], json!(id(&net)));
    assert!(
        port.name.starts_with("port")
            && shown_port["name"]
                .as_str()
                .is_some_and(|name| name.starts_with("ostest-port-")),
        "an unnamed port is named after the resource: {}",
        shown_port["name"]
    );

    let shown_router = shown(&harness, Kind::Router, id(&router)).await;
    assert_eq!(
        shown_router["external_gateway_info"]["network_id"],
        json!(public.id)
    );
    assert_eq!(
        router.attributes["external_gateway_info"]["network_id"],
        json!(public.id)
    );
    assert_eq!(
        id(&interface),
        format!("{}:subnet_id={}", id(&router), id(&subnet)),
        "Heat's id of an interface"
    );
    let router_ports = neutron_of(&harness.demo())
        .list(Kind::Port, &[("device_id", id(&router))])
        .await
        .expect("router ports");
    assert!(
        router_ports.iter().any(
            |port| port["device_owner"] == json!("network:router_interface")
                && port["fixed_ips"][0]["subnet_id"] == json!(id(&subnet))
        ),
        "the interface on the subnet: {router_ports:?}"
    );

    let rules = shown(&harness, Kind::SecurityGroup, id(&group)).await["security_group_rules"]
        .as_array()
        .cloned()
        .expect("rules");
    let has = |direction: &str, protocol: Option<&str>, port: Option<i64>| {
        rules.iter().any(|rule| {
            rule["direction"] == json!(direction)
                && rule["protocol"].as_str() == protocol
                && rule["port_range_min"].as_i64() == port
        })
    };
    assert!(has("ingress", Some("tcp"), Some(22)), "{rules:?}");
    assert!(
        has("ingress", Some("tcp"), Some(443)),
        "the standalone rule: {rules:?}"
    );
    assert!(
        has("egress", None, None),
        "the default egress rules stay: {rules:?}"
    );
    let icmp = rules
        .iter()
        .find(|rule| rule["protocol"] == json!("icmp"))
        .expect("the icmp rule");
    assert_eq!(
        icmp["remote_group_id"],
        json!(id(&group)),
        "remote_group_id mode without a group: the group itself"
    );
    assert_eq!(
        rules
            .iter()
            .filter(|rule| rule["direction"] == json!("ingress"))
            .count(),
        3
    );
    assert_eq!(
        shown(&harness, Kind::SecurityGroupRule, id(&rule)).await["port_range_max"],
        json!(443)
    );

    let shown_floating_ip = shown(&harness, Kind::FloatingIp, id(&floating_ip)).await;
    assert_eq!(shown_floating_ip["port_id"], json!(id(&port)));
    assert_eq!(
        floating_ip.attributes["fixed_ip_address"],
        json!("10.71.0.10")
    );
    let address = floating_ip.attributes["floating_ip_address"]
        .as_str()
        .expect("an address");
    assert!(address.starts_with("172.24.4."), "on public: {address}");
    assert_eq!(shown_floating_ip["floating_ip_address"], json!(address));
    assert_eq!(
        harness
            .resource_type("OS::Neutron::FloatingIP")
            .reference(&floating_ip),
        json!(id(&floating_ip)),
        "get_resource of a floating IP is its id"
    );
    assert_eq!(
        shown(&harness, Kind::FloatingIp, id(&loose_floating_ip)).await["port_id"],
        json!(id(&second_port)),
        "the association forwards to the second port"
    );

    // Every type's check reads the object.
    for resource in [
        &net,
        &subnet,
        &group,
        &rule,
        &port,
        &router,
        &interface,
        &floating_ip,
        &association,
    ] {
        harness
            .resource_type(&resource.type_name)
            .check(resource)
            .await
            .unwrap_or_else(|failure| panic!("check {}: {failure}", resource.name));
    }

    // alt's project does not see any of it.
    let alt = neutron_of(&harness.alt());
    for (kind, resource) in [
        (Kind::Network, &net),
        (Kind::Subnet, &subnet),
        (Kind::Port, &port),
        (Kind::Router, &router),
        (Kind::SecurityGroup, &group),
        (Kind::FloatingIp, &floating_ip),
    ] {
        assert_eq!(
            alt.get(kind, id(resource)).await.expect("alt reads"),
            None,
            "{}",
            resource.name
        );
    }

    // Deleted in dependency order; each is gone from demo's view.
    harness.delete(&association).await;
    assert_eq!(
        shown(&harness, Kind::FloatingIp, id(&loose_floating_ip)).await["port_id"],
        Value::Null,
        "the association let go"
    );
    for resource in [&loose_floating_ip, &floating_ip, &interface] {
        harness.delete(resource).await;
    }
    let router_ports = neutron_of(&harness.demo())
        .list(Kind::Port, &[("device_id", id(&router))])
        .await
        .expect("router ports");
    assert!(
        router_ports
            .iter()
            .all(|port| port["device_owner"] != json!("network:router_interface")),
        "the interface is unplugged: {router_ports:?}"
    );
    for (kind, resource) in [
        (Kind::Router, &router),
        (Kind::Port, &second_port),
        (Kind::Port, &port),
        (Kind::SecurityGroupRule, &rule),
        (Kind::SecurityGroup, &group),
        (Kind::Subnet, &subnet),
        (Kind::Network, &net),
    ] {
        harness.delete(resource).await;
        assert!(
            !exists(&harness, kind, id(resource)).await,
            "{} is gone",
            resource.name
        );
    }
}

#[tokio::test]
async fn changes_are_made_in_place_where_heat_allows_them() {
    let Some(harness) = Harness::start("changes_are_made_in_place_where_heat_allows_them").await
    else {
        return;
    };
    let net = harness
        .create("OS::Neutron::Net", "net", json!({"name": unique("net")}))
        .await;
    let renamed = unique("renamed");
    let net = update(&harness, &net, json!({"name": renamed, "tags": ["green"]})).await;
    let shown_net = shown(&harness, Kind::Network, id(&net)).await;
    assert_eq!(shown_net["name"], json!(renamed));
    assert!(tags(&shown_net).contains(&"green"));
    assert!(
        tags(&shown_net).iter().any(|tag| tag.starts_with("ember-")),
        "the marker stays when the template's tags change"
    );
    assert_eq!(net.attributes["name"], json!(renamed));

    let subnet = harness
        .create(
            "OS::Neutron::Subnet",
            "subnet",
            json!({"network": id(&net), "cidr": "10.72.0.0/24"}),
        )
        .await;
    let subnet_type = harness.resource_type("OS::Neutron::Subnet");
    let subnet_properties = subnet.properties.as_object().cloned().expect("properties");
    let new_cidr = harness
        .request(
            "OS::Neutron::Subnet",
            "subnet",
            json!({"network": id(&net), "cidr": "10.73.0.0/24"}),
        )
        .properties;
    assert!(
        subnet_type.needs_replacement(&subnet_properties, &new_cidr),
        "a new CIDR is a new subnet"
    );
    let subnet = update(
        &harness,
        &subnet,
        json!({"network": id(&net), "cidr": "10.72.0.0/24", "gateway_ip": "", "enable_dhcp": false}),
    )
    .await;
    let shown_subnet = shown(&harness, Kind::Subnet, id(&subnet)).await;
    assert_eq!(
        shown_subnet["gateway_ip"],
        Value::Null,
        "'' takes the gateway off"
    );
    assert_eq!(shown_subnet["enable_dhcp"], json!(false));

    let first_group = harness
        .create("OS::Neutron::SecurityGroup", "first_group", json!({}))
        .await;
    let second_group = harness
        .create("OS::Neutron::SecurityGroup", "second_group", json!({}))
        .await;
    let port = harness
        .create(
            "OS::Neutron::Port",
            "port",
            json!({"network": id(&net), "security_groups": [id(&first_group)]}),
        )
        .await;
    let port_type = harness.resource_type("OS::Neutron::Port");
    let port_properties = port.properties.as_object().cloned().expect("properties");
    let moved = harness
        .request(
            "OS::Neutron::Port",
            "port",
            json!({"network": id(&subnet), "security_groups": [id(&first_group)]}),
        )
        .properties;
    assert!(
        port_type.needs_replacement(&port_properties, &moved),
        "another network is another port"
    );
    // Named, not by id: resolved among demo's own groups.
    let second_name = shown(&harness, Kind::SecurityGroup, id(&second_group)).await["name"]
        .as_str()
        .expect("a name")
        .to_owned();
    let port = update(
        &harness,
        &port,
        json!({"network": id(&net), "security_groups": [second_name]}),
    )
    .await;
    assert_eq!(
        shown(&harness, Kind::Port, id(&port)).await["security_groups"],
        json!([id(&second_group)])
    );
    // Removed from the template: back in the project's default group.
    let port = update(&harness, &port, json!({"network": id(&net)})).await;
    let groups = shown(&harness, Kind::Port, id(&port)).await["security_groups"].clone();
    let default_group = neutron_of(&harness.demo())
        .list(
            Kind::SecurityGroup,
            &[
                ("name", "default"),
                (
                    "project_id",
                    harness.test_cloud.facts.demo.project_id.as_str(),
                ),
            ],
        )
        .await
        .expect("demo's default group");
    assert_eq!(groups, json!([default_group[0]["id"]]));

    let router = harness
        .create(
            "OS::Neutron::Router",
            "router",
            json!({"external_gateway_info": {"network": "public"}}),
        )
        .await;
    let router = update(&harness, &router, json!({})).await;
    assert_eq!(
        shown(&harness, Kind::Router, id(&router)).await["external_gateway_info"],
        Value::Null,
        "the gateway is taken off"
    );
    assert_eq!(router.attributes["external_gateway_info"], Value::Null);

    let group = harness
        .create(
            "OS::Neutron::SecurityGroup",
            "group",
            json!({"rules": [{"protocol": "tcp", "port_range_min": 80, "port_range_max": 80, "remote_ip_prefix": "0.0.0.0/0"}]}),
        )
        .await;
    let new_rules = json!({"rules": [
        {"protocol": "tcp", "port_range_min": 8080, "port_range_max": 8080, "remote_ip_prefix": "0.0.0.0/0"},
        {"direction": "egress", "protocol": "udp", "port_range_min": 53, "port_range_max": 53, "remote_ip_prefix": "10.0.0.2/32"},
    ]});
    let group = update(&harness, &group, new_rules.clone()).await;
    let rules_of = |group: Value| {
        let mut rules: Vec<(String, Option<String>, Option<i64>)> = group["security_group_rules"]
            .as_array()
            .expect("rules")
            .iter()
            .map(|rule| {
                (
                    rule["direction"].as_str().unwrap_or_default().to_owned(),
                    rule["protocol"].as_str().map(str::to_owned),
                    rule["port_range_min"].as_i64(),
                )
            })
            .collect();
        rules.sort();
        rules
    };
    let shown_group = shown(&harness, Kind::SecurityGroup, id(&group)).await;
    assert_eq!(
        rules_of(shown_group.clone()),
        vec![
            ("egress".to_owned(), Some("udp".to_owned()), Some(53)),
            ("ingress".to_owned(), Some("tcp".to_owned()), Some(8080)),
        ],
        "the old rule and the default egress rules are gone, the new ones made"
    );
    // The same rules again: nothing made or deleted.
    let rule_ids = |group: &Value| {
        let mut ids: Vec<String> = group["security_group_rules"]
            .as_array()
            .expect("rules")
            .iter()
            .filter_map(|rule| rule["id"].as_str().map(str::to_owned))
            .collect();
        ids.sort();
        ids
    };
    let mut changed_description = new_rules.clone();
    changed_description["description"] = json!("same rules");
    let group = update(&harness, &group, changed_description).await;
    assert_eq!(
        rule_ids(&shown(&harness, Kind::SecurityGroup, id(&group)).await),
        rule_ids(&shown_group),
        "reconciling the same rules keeps them"
    );

    for resource in [
        &router,
        &port,
        &group,
        &second_group,
        &first_group,
        &subnet,
        &net,
    ] {
        harness.delete(resource).await;
    }
}

#[tokio::test]
async fn a_create_run_again_makes_nothing_twice_and_a_lost_id_is_still_deleted() {
    let Some(harness) =
        Harness::start("a_create_run_again_makes_nothing_twice_and_a_lost_id_is_still_deleted")
            .await
    else {
        return;
    };
    let row = Uuid::now_v7();
    let request = harness.request_in(harness.stack_id, row, "OS::Neutron::Net", "net", json!({}));
    let net_type = harness.resource_type("OS::Neutron::Net");
    let first = net_type.create(&request).await.expect("created");
    let again = net_type.create(&request).await.expect("created again");
    assert_eq!(first.physical_id, again.physical_id, "the same network");
    let marker = format!("ember-{}", request.derived_id("network"));
    let marked = neutron_of(&harness.demo())
        .list(Kind::Network, &[("tags", marker.as_str())])
        .await
        .expect("listed");
    assert_eq!(marked.len(), 1, "one network carries the row's marker");

    // A crash before the id was recorded: the delete finds it by marker.
    let lost = Resource {
        physical_id: None,
        ..harness.created(&request, &first)
    };
    net_type.delete(&lost).await.expect("deleted by marker");
    assert!(!exists(&harness, Kind::Network, &first.physical_id).await);
    net_type.delete(&lost).await.expect("deleted again");
    net_type
        .resume_delete(&harness.created(&request, &first))
        .await
        .expect("a delete of a gone network is done");

    // A crash between Neutron's create and the tag: the object Ember named
    // is found by its name and tagged.
    let row = Uuid::now_v7();
    let request: ResourceRequest = harness.request_in(
        harness.stack_id,
        row,
        "OS::Neutron::Net",
        "untagged",
        json!({}),
    );
    let derived = request.derived_id("network").simple().to_string();
    let name = format!("ostest-untagged-{}", &derived[..12]);
    let mut body = serde_json::Map::new();
    body.insert("name".to_owned(), json!(name));
    let orphan = neutron_of(&harness.demo())
        .create(Kind::Network, body, &[])
        .await
        .expect("an untagged network");
    let adopted = net_type
        .resume_create(&request, &harness.created(&request, &first))
        .await
        .expect("adopted");
    assert_eq!(
        json!(adopted.physical_id),
        orphan["id"],
        "the untagged network is adopted"
    );
    assert!(
        tags(&shown(&harness, Kind::Network, &adopted.physical_id).await)
            .contains(&format!("ember-{}", request.derived_id("network")).as_str())
    );
    let net = harness.created(&request, &adopted);

    // A rule (no tags) made twice is one rule.
    let group = harness
        .create("OS::Neutron::SecurityGroup", "group", json!({}))
        .await;
    let rule_request = harness.request_in(
        harness.stack_id,
        Uuid::now_v7(),
        "OS::Neutron::SecurityGroupRule",
        "rule",
        json!({"security_group": id(&group), "port_range_min": 25, "port_range_max": 25}),
    );
    let rule_type = harness.resource_type("OS::Neutron::SecurityGroupRule");
    let rule = rule_type.create(&rule_request).await.expect("a rule");
    let rule_again = rule_type
        .create(&rule_request)
        .await
        .expect("the rule again");
    assert_eq!(rule.physical_id, rule_again.physical_id, "the same rule");
    // Lost before its id was recorded: found by its fields.
    let lost_rule = Resource {
        physical_id: None,
        ..harness.created(&rule_request, &rule)
    };
    rule_type
        .resume_delete(&lost_rule)
        .await
        .expect("deleted by its fields");
    assert!(!exists(&harness, Kind::SecurityGroupRule, &rule.physical_id).await);

    // A security group made twice keeps one set of rules.
    let group_request = harness.request_in(
        harness.stack_id,
        Uuid::now_v7(),
        "OS::Neutron::SecurityGroup",
        "ruled",
        json!({"rules": [{"protocol": "tcp", "port_range_min": 22, "port_range_max": 22}]}),
    );
    let group_type = harness.resource_type("OS::Neutron::SecurityGroup");
    let ruled = group_type.create(&group_request).await.expect("a group");
    let ruled_again = group_type
        .create(&group_request)
        .await
        .expect("the group again");
    assert_eq!(ruled.physical_id, ruled_again.physical_id);
    let rule_count =
        shown(&harness, Kind::SecurityGroup, &ruled.physical_id).await["security_group_rules"]
            .as_array()
            .map(Vec::len);
    assert_eq!(
        rule_count,
        Some(3),
        "one ingress rule and the two default egress rules"
    );

    // An interface plugged twice is one interface.
    let subnet = harness
        .create(
            "OS::Neutron::Subnet",
            "subnet",
            json!({"network": id(&net), "cidr": "10.74.0.0/24"}),
        )
        .await;
    let router = harness
        .create("OS::Neutron::Router", "router", json!({}))
        .await;
    let interface_request = harness.request_in(
        harness.stack_id,
        Uuid::now_v7(),
        "OS::Neutron::RouterInterface",
        "interface",
        json!({"router": id(&router), "subnet": id(&subnet)}),
    );
    let interface_type = harness.resource_type("OS::Neutron::RouterInterface");
    let interface = interface_type
        .create(&interface_request)
        .await
        .expect("plugged");
    interface_type
        .create(&interface_request)
        .await
        .expect("plugged again");
    let interface_ports = neutron_of(&harness.demo())
        .list(Kind::Port, &[("device_id", id(&router))])
        .await
        .expect("router ports");
    assert_eq!(
        interface_ports.len(),
        1,
        "one interface port: {interface_ports:?}"
    );
    let lost_interface = Resource {
        physical_id: None,
        ..harness.created(&interface_request, &interface)
    };
    interface_type
        .resume_delete(&lost_interface)
        .await
        .expect("unplugged by what it plugs");
    let interface_ports = neutron_of(&harness.demo())
        .list(Kind::Port, &[("device_id", id(&router))])
        .await
        .expect("router ports");
    assert!(interface_ports.is_empty(), "unplugged: {interface_ports:?}");

    let ruled = harness.created(&group_request, &ruled);
    for resource in [&router, &subnet, &ruled, &group, &net] {
        harness.delete(resource).await;
        harness.delete(resource).await;
    }
}

#[tokio::test]
async fn failures_keep_neutrons_words_and_other_projects_stay_hidden() {
    let Some(harness) =
        Harness::start("failures_keep_neutrons_words_and_other_projects_stay_hidden").await
    else {
        return;
    };
    let missing = unique("no-such-network");
    let request = harness.request(
        "OS::Neutron::Subnet",
        "subnet",
        json!({"network": missing, "cidr": "10.75.0.0/24"}),
    );
    let failure = harness
        .resource_type("OS::Neutron::Subnet")
        .create(&request)
        .await
        .expect_err("no such network");
    assert!(
        failure.to_string().contains(&format!(
            "Unable to find network with name or id '{missing}'"
        )),
        "{failure}"
    );

    // alt's network, made through Ember in a stack of alt's (alt's own
    // trust): demo's stack does not find it, by name or by id.
    let alt_account = harness.test_cloud.facts.alt.clone();
    let alt_stack = Uuid::now_v7();
    let alt_trust = Harness::trust(&harness.test_cloud, &alt_account).await;
    harness
        .delegations
        .record_delegation(
            DelegationOwner::Stack(alt_stack),
            &Delegation {
                trust_id: alt_trust.clone(),
                trustor_user_id: alt_account.user_id.clone(),
                project_id: alt_account.project_id.clone(),
            },
            TrustOwnership::Borrows,
        )
        .await
        .expect("recorded");
    let alt_name = unique("alt-net");
    let alt_request = harness.request_in(
        alt_stack,
        Uuid::now_v7(),
        "OS::Neutron::Net",
        "alt_net",
        json!({"name": alt_name}),
    );
    let net_type = harness.resource_type("OS::Neutron::Net");
    let alt_net = harness.created(
        &alt_request,
        &net_type.create(&alt_request).await.expect("alt's network"),
    );
    let alt_session = harness
        .cloud
        .stack_session(alt_stack)
        .await
        .expect("alt's stack session");
    let alt_shown = neutron_of(&alt_session)
        .get(Kind::Network, id(&alt_net))
        .await
        .expect("alt reads")
        .expect("alt sees its network");
    assert_eq!(
        alt_shown["project_id"],
        json!(alt_account.project_id),
        "made as alt"
    );
    let port_type = harness.resource_type("OS::Neutron::Port");
    for network in [alt_name.as_str(), id(&alt_net)] {
        let failure = port_type
            .create(&harness.request("OS::Neutron::Port", "port", json!({"network": network})))
            .await
            .expect_err("another project's network");
        assert!(
            failure.to_string().contains(&format!(
                "Unable to find network with name or id '{network}'"
            )),
            "{failure}"
        );
    }
    harness.delete(&alt_net).await;
    Keystone::new(&harness.alt())
        .delete_trust(&alt_trust)
        .await
        .expect("alt's trust deleted");

    // A check of an object deleted behind Ember's back fails.
    let net = harness.create("OS::Neutron::Net", "net", json!({})).await;
    neutron_of(&harness.demo())
        .delete(Kind::Network, id(&net))
        .await
        .expect("deleted behind Ember's back");
    let failure = harness
        .resource_type("OS::Neutron::Net")
        .check(&net)
        .await
        .expect_err("gone");
    assert_eq!(
        failure.to_string(),
        format!("the network {} is gone", id(&net))
    );

    // A refused rule set names the bad rule before anything is made.
    let failure = harness
        .resource_type("OS::Neutron::SecurityGroup")
        .create(&harness.request(
            "OS::Neutron::SecurityGroup",
            "group",
            json!({"rules": [{"direction": "sideways"}]}),
        ))
        .await
        .expect_err("a bad rule");
    assert_eq!(
        failure.to_string(),
        "rules[0].direction: \"sideways\" is not one of ingress, egress"
    );
}

#[tokio::test]
async fn aws_security_groups_and_elastic_ips() {
    let Some(harness) = Harness::start("aws_security_groups_and_elastic_ips").await else {
        return;
    };
    let group = harness
        .create(
            "AWS::EC2::SecurityGroup",
            "web",
            json!({
                "GroupDescription": "web servers",
                "SecurityGroupIngress": [
                    {"IpProtocol": "tcp", "FromPort": "80", "ToPort": "80", "CidrIp": "0.0.0.0/0"},
                    {"IpProtocol": "icmp", "FromPort": "-1", "ToPort": "-1", "CidrIp": "10.0.0.0/8"},
                ],
            }),
        )
        .await;
    let shown_group = shown(&harness, Kind::SecurityGroup, id(&group)).await;
    assert_eq!(shown_group["description"], json!("web servers"));
    assert!(
        shown_group["name"]
            .as_str()
            .is_some_and(|name| name.starts_with("ostest-web-")),
        "named after the resource: {}",
        shown_group["name"]
    );
    let rules = shown_group["security_group_rules"]
        .as_array()
        .cloned()
        .expect("rules");
    assert!(rules.iter().any(|rule| rule["protocol"] == json!("tcp")
        && rule["port_range_min"] == json!(80)
        && rule["remote_ip_prefix"] == json!("0.0.0.0/0")));
    assert!(rules.iter().any(|rule| rule["protocol"] == json!("icmp")
        && rule["port_range_min"].is_null()
        && rule["remote_ip_prefix"] == json!("10.0.0.0/8")));
    assert_eq!(
        harness
            .resource_type("AWS::EC2::SecurityGroup")
            .reference(&group),
        json!(id(&group))
    );
    let group = update(
        &harness,
        &group,
        json!({
            "GroupDescription": "web servers",
            "SecurityGroupIngress": [{"IpProtocol": "tcp", "FromPort": "443", "ToPort": "443", "CidrIp": "0.0.0.0/0"}],
        }),
    )
    .await;
    let rules = shown(&harness, Kind::SecurityGroup, id(&group)).await["security_group_rules"]
        .as_array()
        .cloned()
        .expect("rules");
    let ingress: Vec<&Value> = rules
        .iter()
        .filter(|rule| rule["direction"] == json!("ingress"))
        .collect();
    assert_eq!(ingress.len(), 1, "{rules:?}");
    assert_eq!(ingress[0]["port_range_min"], json!(443));
    assert_eq!(
        rules
            .iter()
            .filter(|rule| rule["direction"] == json!("egress"))
            .count(),
        2,
        "the default egress rules stay"
    );

    // An EIP: get_resource is its address.
    let eip = harness.create("AWS::EC2::EIP", "eip", json!({})).await;
    let address = eip.attributes["floating_ip_address"]
        .as_str()
        .expect("an address")
        .to_owned();
    assert_eq!(
        harness.resource_type("AWS::EC2::EIP").reference(&eip),
        json!(address)
    );
    assert_eq!(eip.attributes["AllocationId"], json!(id(&eip)));
    let shown_eip = shown(&harness, Kind::FloatingIp, id(&eip)).await;
    assert_eq!(shown_eip["floating_ip_address"], json!(address));
    assert_eq!(
        shown_eip["floating_network_id"],
        json!(harness.test_cloud.facts.public_network.id)
    );

    // An instance's interface is its port (device_id = the server's id).
    let routed = Routed::make(&harness, "10.76.0.0/24").await;
    let instance = Uuid::new_v4().to_string();
    let instance_port = harness
        .create(
            "OS::Neutron::Port",
            "instance_port",
            json!({"network": id(&routed.net), "device_id": instance}),
        )
        .await;
    let instance_address = instance_port.attributes["fixed_ips"][0]["ip_address"].clone();
    let bound = harness
        .create("AWS::EC2::EIP", "bound", json!({"InstanceId": instance}))
        .await;
    let shown_bound = shown(&harness, Kind::FloatingIp, id(&bound)).await;
    assert_eq!(shown_bound["port_id"], json!(id(&instance_port)));
    assert_eq!(shown_bound["fixed_ip_address"], instance_address);
    // InstanceId removed: the EIP is let go.
    let bound = update(&harness, &bound, json!({})).await;
    assert_eq!(
        shown(&harness, Kind::FloatingIp, id(&bound)).await["port_id"],
        Value::Null
    );

    let association = harness
        .create(
            "AWS::EC2::EIPAssociation",
            "association",
            json!({"AllocationId": id(&eip), "InstanceId": instance}),
        )
        .await;
    assert_eq!(
        id(&association),
        id(&eip),
        "an allocation's association is named by it"
    );
    assert_eq!(
        shown(&harness, Kind::FloatingIp, id(&eip)).await["port_id"],
        json!(id(&instance_port))
    );
    harness.delete(&association).await;
    assert_eq!(
        shown(&harness, Kind::FloatingIp, id(&eip)).await["port_id"],
        Value::Null
    );

    let by_address = harness
        .create(
            "AWS::EC2::EIPAssociation",
            "by_address",
            json!({"EIP": address, "InstanceId": instance}),
        )
        .await;
    assert_eq!(id(&by_address), address);
    assert_eq!(
        shown(&harness, Kind::FloatingIp, id(&eip)).await["fixed_ip_address"],
        instance_address
    );
    harness.delete(&by_address).await;
    assert_eq!(
        shown(&harness, Kind::FloatingIp, id(&eip)).await["port_id"],
        Value::Null
    );

    for (kind, resource) in [
        (Kind::FloatingIp, &bound),
        (Kind::FloatingIp, &eip),
        (Kind::Port, &instance_port),
        (Kind::SecurityGroup, &group),
    ] {
        harness.delete(resource).await;
        assert!(
            !exists(&harness, kind, id(resource)).await,
            "{} is gone",
            resource.name
        );
    }
    routed.delete(&harness).await;
}

#[tokio::test]
async fn a_replaced_port_hands_its_fixed_ip_to_its_replacement() {
    let Some(harness) =
        Harness::start("a_replaced_port_hands_its_fixed_ip_to_its_replacement").await
    else {
        return;
    };
    let net = harness
        .create("OS::Neutron::Net", "net", json!({"name": unique("net")}))
        .await;
    let subnet = harness
        .create(
            "OS::Neutron::Subnet",
            "subnet",
            json!({"network": id(&net), "cidr": "10.74.0.0/24"}),
        )
        .await;
    let properties = |mac: &str| {
        json!({"network": id(&net), "mac_address": mac,
            "fixed_ips": [{"subnet": id(&subnet), "ip_address": "10.74.0.11"}]})
    };
    let old = harness
        .create("OS::Neutron::Port", "port", properties("fa:16:3e:00:00:01"))
        .await;
    let port_type = harness.resource_type("OS::Neutron::Port");
    let new_properties = harness
        .request("OS::Neutron::Port", "port", properties("fa:16:3e:00:00:02"))
        .properties;
    let old_properties = old.properties.as_object().cloned().expect("properties");
    assert!(
        port_type.needs_replacement(&old_properties, &new_properties),
        "a new MAC address is a new port, as in Heat"
    );
    // Heat's order: the old port lets its address go, the new one takes it.
    port_type
        .prepare_for_replace(&old)
        .await
        .expect("the old port gives up its address");
    assert_eq!(
        shown(&harness, Kind::Port, id(&old)).await["fixed_ips"],
        json!([])
    );
    let new = harness
        .create("OS::Neutron::Port", "port", properties("fa:16:3e:00:00:02"))
        .await;
    let shown_new = shown(&harness, Kind::Port, id(&new)).await;
    assert_eq!(shown_new["fixed_ips"][0]["ip_address"], json!("10.74.0.11"));
    assert_eq!(shown_new["mac_address"], json!("fa:16:3e:00:00:02"));
    for resource in [&old, &new, &subnet, &net] {
        harness.delete(resource).await;
    }
}
