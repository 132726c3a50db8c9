//! The openstack types on the simulated backend: a template written for
//! Heat on a real cloud — a network, subnet, router and interface, a
//! security group and rule, a port, two servers, a floating IP, a volume
//! and its attachment, a key pair, a server group, an image — runs
//! unchanged, its `get_attr`s answer as the services would (addresses
//! from the subnet, a floating address from the external network), an
//! update changes what it can in place, a delete leaves nothing in the
//! simulated cloud, the services' refusals fail the resource in their own
//! words, and another project's objects are never found.

mod stack_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ember_engine::cloud::simulated::{Kind, SimulatedCloud};
use ember_engine::domain::Stack;
use ember_engine::stacks::{CreateStack, StackOperations, UpdateStack};
use ember_runtime::Identity;
use ember_runtime::database::testing::TestDatabase;
use serde_json::{Value, json};

struct Engine {
    operations: Arc<StackOperations>,
    cloud: Arc<SimulatedCloud>,
}

async fn engine() -> (Engine, TestDatabase) {
    let database = TestDatabase::sqlite().await;
    let engine =
        stack_support::simulated_compute_engine(&database, Duration::from_millis(5), "").await;
    let cloud = engine
        .instances
        .simulated_cloud()
        .expect("the simulated cloud");
    let operations = engine.operations;
    (Engine { operations, cloud }, database)
}

fn member(project: &str) -> Identity {
    Identity::new(project, project, vec!["member".to_owned()])
}

impl Engine {
    async fn create(&self, who: &Identity, name: &str, template: &str) -> Stack {
        self.operations
            .create_stack(
                who,
                CreateStack {
                    name: name.into(),
                    template: template.into(),
                    disable_rollback: true,
                    ..CreateStack::default()
                },
            )
            .await
            .expect("create accepted");
        self.settled(who, name).await
    }

    async fn settled(&self, who: &Identity, name: &str) -> Stack {
        stack_support::settled(&self.operations, who, name, Duration::from_secs(30)).await
    }

    /// Creates `name` and expects it CREATE_COMPLETE.
    async fn created(&self, who: &Identity, name: &str, template: &str) -> Stack {
        let stack = self.create(who, name, template).await;
        assert_eq!(
            stack.stack_status(),
            "CREATE_COMPLETE",
            "{name}: {}",
            stack.status_reason
        );
        stack
    }

    /// Updates `name` with the same template and new `parameters`, and
    /// expects it UPDATE_COMPLETE.
    async fn updated(&self, who: &Identity, name: &str, parameters: &[(&str, Value)]) -> Stack {
        let mut update = UpdateStack {
            name_or_id: name.into(),
            existing: true,
            ..UpdateStack::default()
        };
        for (key, value) in parameters {
            update.parameters.insert((*key).into(), value.clone());
        }
        self.update_completes(who, update).await
    }

    /// Updates `name` to `template` and expects it UPDATE_COMPLETE.
    async fn updated_to(&self, who: &Identity, name: &str, template: &str) -> Stack {
        let update = UpdateStack {
            name_or_id: name.into(),
            template: template.into(),
            ..UpdateStack::default()
        };
        self.update_completes(who, update).await
    }

    async fn update_completes(&self, who: &Identity, update: UpdateStack) -> Stack {
        let name = update.name_or_id.clone();
        self.operations
            .update_stack(who, update)
            .await
            .expect("update accepted");
        let stack = self.settled(who, &name).await;
        assert_eq!(
            stack.stack_status(),
            "UPDATE_COMPLETE",
            "{name}: {}",
            stack.status_reason
        );
        stack
    }

    /// `key` of each object of `kind` `project` sees that `filter` takes.
    fn fields(
        &self,
        project: &str,
        kind: Kind,
        filter: impl Fn(&ember_engine::cloud::simulated::Object) -> bool,
        key: &str,
    ) -> Vec<Value> {
        self.cloud.with(|world| {
            world
                .list(project, kind, |object| filter(object))
                .map(|object| object.fields.get(key).cloned().unwrap_or(Value::Null))
                .collect()
        })
    }

    async fn output(&self, stack: &Stack, name: &str) -> Value {
        self.operations
            .output(stack, name)
            .await
            .expect("output")
            .value
            .unwrap_or_else(|error| panic!("output {name}: {error:?}"))
    }

    async fn delete(&self, who: &Identity, name: &str) {
        self.operations
            .delete_stack(who, name)
            .await
            .expect("delete accepted");
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Ok(stack) = self.operations.find_stack(who, name).await {
            if stack.stack_status() == "DELETE_COMPLETE" {
                break;
            }
            assert_ne!(
                stack.stack_status(),
                "DELETE_FAILED",
                "{}",
                stack.status_reason
            );
            assert!(
                Instant::now() < deadline,
                "{name} still {}",
                stack.stack_status()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// How many objects of `kind` `project` has that the cloud was not
    /// taken to have had.
    fn count(&self, project: &str, kind: Kind) -> usize {
        self.cloud.with(|world| {
            world
                .list(project, kind, |object| {
                    object.project == project && !world.is_assumed(&object.id)
                })
                .count()
        })
    }
}

const TOPOLOGY: &str = r#"
heat_template_version: 2021-04-16
parameters:
  flavor: {type: string, default: m1.small}
  image: {type: string, default: cirros}
resources:
  net:
    type: OS::Neutron::Net
    properties: {name: app-net}
  subnet:
    type: OS::Neutron::Subnet
    properties:
      network: {get_resource: net}
      cidr: 192.168.40.0/24
      dns_nameservers: [8.8.8.8]
  router:
    type: OS::Neutron::Router
    properties:
      external_gateway_info: {network: public}
  interface:
    type: OS::Neutron::RouterInterface
    properties:
      router: {get_resource: router}
      subnet: {get_resource: subnet}
  group:
    type: OS::Neutron::SecurityGroup
    properties:
      rules:
        - {protocol: tcp, port_range_min: 22, port_range_max: 22}
  icmp:
    type: OS::Neutron::SecurityGroupRule
    properties:
      security_group: {get_resource: group}
      protocol: icmp
  port:
    type: OS::Neutron::Port
    depends_on: subnet
    properties:
      network: {get_resource: net}
      security_groups: [{get_resource: group}]
      fixed_ips: [{subnet: {get_resource: subnet}, ip_address: 192.168.40.10}]
  key:
    type: OS::Nova::KeyPair
    properties: {name: app-key, save_private_key: true}
  spread:
    type: OS::Nova::ServerGroup
    properties: {policies: [anti-affinity]}
  front:
    type: OS::Nova::Server
    properties:
      flavor: {get_param: flavor}
      image: {get_param: image}
      key_name: {get_resource: key}
      networks: [{port: {get_resource: port}}]
      scheduler_hints: {group: {get_resource: spread}}
  back:
    type: OS::Nova::Server
    depends_on: subnet
    properties:
      flavor: {get_param: flavor}
      image: {get_param: image}
      networks: [{network: {get_resource: net}}]
  address:
    type: OS::Neutron::FloatingIP
    depends_on: interface
    properties:
      floating_network: public
      port_id: {get_resource: port}
  data:
    type: OS::Cinder::Volume
    properties: {size: 2}
  attached:
    type: OS::Cinder::VolumeAttachment
    properties:
      instance_uuid: {get_resource: back}
      volume_id: {get_resource: data}
  disk:
    type: OS::Glance::WebImage
    properties:
      location: http://example.com/disk.qcow2
      disk_format: qcow2
      container_format: bare
outputs:
  front_address: {value: {get_attr: [front, first_address]}}
  back_networks: {value: {get_attr: [back, networks]}}
  back_address: {value: {get_attr: [back, first_address]}}
  port_ip: {value: {get_attr: [port, fixed_ips, 0, ip_address]}}
  floating: {value: {get_attr: [address, floating_ip_address]}}
  floating_router: {value: {get_attr: [address, router_id]}}
  router_gateway: {value: {get_attr: [router, external_gateway_info]}}
  subnet_gateway: {value: {get_attr: [subnet, gateway_ip]}}
  private_key: {value: {get_attr: [key, private_key]}}
  group_rules: {value: {get_attr: [group, show, security_group_rules]}}
  image_status: {value: {get_attr: [disk, show, status]}}
  attachment_device: {value: {get_attr: [attached, show, device]}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_for_a_real_cloud_runs_unchanged_and_leaves_nothing_behind() {
    let (engine, _database) = engine().await;
    let demo = member("demo");
    let stack = engine.created(&demo, "topology", TOPOLOGY).await;

    // Addresses as the services would give them.
    assert_eq!(
        engine.output(&stack, "port_ip").await,
        json!("192.168.40.10")
    );
    assert_eq!(
        engine.output(&stack, "front_address").await,
        json!("192.168.40.10")
    );
    assert_eq!(
        engine.output(&stack, "subnet_gateway").await,
        json!("192.168.40.1")
    );
    let back = engine.output(&stack, "back_address").await;
    let back = back.as_str().expect("an address");
    assert!(
        back.starts_with("192.168.40.") && back != "192.168.40.10" && back != "192.168.40.1",
        "{back}"
    );
    assert_eq!(
        engine.output(&stack, "back_networks").await,
        json!({"app-net": [back]})
    );
    let floating = engine.output(&stack, "floating").await;
    assert!(
        floating
            .as_str()
            .is_some_and(|ip| ip.starts_with("172.24.4.")),
        "{floating}"
    );
    let router = engine.cloud.with(|world| {
        world
            .list("demo", Kind::Router, |_| true)
            .map(|router| router.id.clone())
            .collect::<Vec<_>>()
    });
    assert_eq!(router.len(), 1);
    assert_eq!(
        engine.output(&stack, "floating_router").await,
        json!(router[0])
    );
    let gateway = engine.output(&stack, "router_gateway").await;
    assert!(
        gateway["external_fixed_ips"][0]["ip_address"]
            .as_str()
            .is_some_and(|ip| ip.starts_with("172.24.4.") && Some(ip) != floating.as_str()),
        "{gateway}"
    );
    let subnets = engine.fields(
        "demo",
        Kind::Network,
        |net| net.name() == "app-net",
        "subnets",
    );
    assert_eq!(subnets.len(), 1);
    assert_eq!(subnets[0].as_array().map(Vec::len), Some(1));
    assert!(
        engine
            .output(&stack, "private_key")
            .await
            .as_str()
            .is_some_and(|key| key.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----")),
    );
    // Port 22 and the default egress pair, as the group was made…
    let shown = engine.output(&stack, "group_rules").await;
    assert_eq!(shown.as_array().map(Vec::len), Some(3), "{shown}");
    // …and the rule resource's ICMP added to it.
    let rules = engine.cloud.with(|world| {
        world
            .list("demo", Kind::SecurityGroup, |group| {
                group.fields["security_group_rules"] != json!([]) && !world.is_assumed(&group.id)
            })
            .map(|group| group.fields["security_group_rules"].clone())
            .collect::<Vec<_>>()
    });
    assert_eq!(rules.len(), 1);
    let rules = rules[0].as_array().expect("rules");
    assert_eq!(rules.len(), 4, "{rules:?}");
    assert!(rules.iter().any(|rule| rule["protocol"] == "icmp"));
    assert_eq!(engine.output(&stack, "image_status").await, json!("active"));
    assert_eq!(
        engine.output(&stack, "attachment_device").await,
        json!("/dev/vdb")
    );
    assert_eq!(
        engine.fields("demo", Kind::Volume, |_| true, "status"),
        [json!("in-use")]
    );
    // Two servers' interfaces, the given port and the router's interface.
    assert_eq!(engine.count("demo", Kind::Port), 3);

    engine.delete(&demo, "topology").await;
    for kind in [
        Kind::Network,
        Kind::Subnet,
        Kind::Port,
        Kind::Router,
        Kind::SecurityGroup,
        Kind::FloatingIp,
        Kind::Volume,
        Kind::KeyPair,
        Kind::ServerGroup,
        Kind::Image,
    ] {
        assert_eq!(engine.count("demo", kind), 0, "{kind:?} left behind");
    }
}

const NETWORK: &str = r#"
heat_template_version: 2021-04-16
parameters:
  net_name: {type: string, default: first}
  address: {type: string, default: 10.20.0.5}
resources:
  net:
    type: OS::Neutron::Net
    properties: {name: {get_param: net_name}}
  subnet:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net}, cidr: 10.20.0.0/24}
  port:
    type: OS::Neutron::Port
    properties:
      network: {get_resource: net}
      fixed_ips: [{subnet: {get_resource: subnet}, ip_address: {get_param: address}}]
outputs:
  net: {value: {get_resource: net}}
  net_name: {value: {get_attr: [net, name]}}
  port: {value: {get_resource: port}}
  ip: {value: {get_attr: [port, fixed_ips, 0, ip_address]}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_changes_names_and_addresses_in_place() {
    let (engine, _database) = engine().await;
    let demo = member("demo");
    let stack = engine.created(&demo, "network", NETWORK).await;
    let (net, port) = (
        engine.output(&stack, "net").await,
        engine.output(&stack, "port").await,
    );
    let stack = engine
        .updated(
            &demo,
            "network",
            &[
                ("net_name", json!("second")),
                ("address", json!("10.20.0.6")),
            ],
        )
        .await;
    assert_eq!(engine.output(&stack, "net").await, net, "the same network");
    assert_eq!(engine.output(&stack, "port").await, port, "the same port");
    assert_eq!(engine.output(&stack, "net_name").await, json!("second"));
    assert_eq!(engine.output(&stack, "ip").await, json!("10.20.0.6"));
    // The old address went back to the subnet: another port may take it.
    let taken = engine.cloud.with(|world| {
        let subnet = world
            .list("demo", Kind::Subnet, |subnet| {
                subnet.fields["cidr"] == "10.20.0.0/24"
            })
            .map(|subnet| subnet.id.clone())
            .next()
            .expect("the subnet");
        let network = net.as_str().expect("id").to_owned();
        world.allocate(
            "demo",
            &network,
            &[ember_engine::cloud::simulated::FixedIp {
                subnet_id: Some(subnet),
                ip_address: Some("10.20.0.5".to_owned()),
            }],
        )
    });
    let taken = taken.expect("10.20.0.5 is free again");
    engine.cloud.with(|world| world.release_all(&json!(taken)));
    engine.delete(&demo, "network").await;
    assert_eq!(engine.count("demo", Kind::Network), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_services_refusals_fail_the_resource_in_their_own_words() {
    let (engine, _database) = engine().await;
    let demo = member("demo");
    let cases = [
        (
            "outside",
            r#"
heat_template_version: 2021-04-16
resources:
  net: {type: OS::Neutron::Net}
  subnet:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net}, cidr: 10.30.0.0/24}
  port:
    type: OS::Neutron::Port
    properties:
      network: {get_resource: net}
      fixed_ips: [{subnet: {get_resource: subnet}, ip_address: 10.31.0.4}]
"#,
            "IP address 10.31.0.4 is not a valid IP for the specified subnet.",
        ),
        (
            "unrouted",
            r#"
heat_template_version: 2021-04-16
resources:
  net: {type: OS::Neutron::Net}
  subnet:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net}, cidr: 10.32.0.0/24}
  port:
    type: OS::Neutron::Port
    depends_on: subnet
    properties: {network: {get_resource: net}}
  address:
    type: OS::Neutron::FloatingIP
    properties: {floating_network: public, port_id: {get_resource: port}}
"#,
            "is not reachable from subnet",
        ),
        (
            "overlap",
            r#"
heat_template_version: 2021-04-16
resources:
  net: {type: OS::Neutron::Net}
  one:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: net}, cidr: 10.33.0.0/16}
  two:
    type: OS::Neutron::Subnet
    depends_on: one
    properties: {network: {get_resource: net}, cidr: 10.33.4.0/24}
"#,
            "overlaps with another subnet",
        ),
        (
            "noname",
            r#"
heat_template_version: 2021-04-16
resources:
  port:
    type: OS::Neutron::Port
    properties: {network: private, fixed_ips: [{subnet: nowhere}]}
"#,
            "Unable to find subnet with name or id 'nowhere'",
        ),
    ];
    for (name, template, expected) in cases {
        let stack = engine.create(&demo, name, template).await;
        assert_eq!(stack.stack_status(), "CREATE_FAILED", "{name}");
        assert!(
            stack.status_reason.contains(expected),
            "{name}: {}",
            stack.status_reason
        );
        engine.delete(&demo, name).await;
    }
    for kind in [Kind::Network, Kind::Subnet, Kind::Port, Kind::FloatingIp] {
        assert_eq!(engine.count("demo", kind), 0, "{kind:?} left behind");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_projects_objects_are_never_found_by_id_or_by_name() {
    let (engine, _database) = engine().await;
    let (alice, bob) = (member("alice"), member("bob"));
    let stack = engine.created(&alice, "network", NETWORK).await;
    let alices_net = engine.output(&stack, "net").await;
    let alices_net = alices_net.as_str().expect("id");
    let alices_port = engine.output(&stack, "port").await;
    let alices_port = alices_port.as_str().expect("id");

    for (name, reference, expected) in [
        (
            "by-network-id",
            format!("{{type: OS::Neutron::Port, properties: {{network: {alices_net}}}}}"),
            format!("Unable to find network with name or id '{alices_net}'"),
        ),
        (
            "by-port-id",
            format!(
                "{{type: OS::Nova::Server, properties: {{flavor: m1.small, image: cirros, networks: [{{port: {alices_port}}}]}}}}"
            ),
            format!("Unable to find port with name or id '{alices_port}'"),
        ),
    ] {
        let template =
            format!("heat_template_version: 2021-04-16\nresources:\n  thing: {reference}\n");
        let stack = engine.create(&bob, name, &template).await;
        assert_eq!(stack.stack_status(), "CREATE_FAILED", "{name}");
        assert!(
            stack.status_reason.contains(&expected),
            "{name}: {}",
            stack.status_reason
        );
    }

    // Nor adopted through external_id; alice adopts her own and reads it.
    let adopt = |network: &str| {
        format!(
            "heat_template_version: 2021-04-16\nresources:\n  net: {{type: OS::Neutron::Net, external_id: {network}}}\noutputs:\n  name: {{value: {{get_attr: [net, show, name]}}}}\n"
        )
    };
    let stolen = engine.create(&bob, "adopter", &adopt(alices_net)).await;
    assert_eq!(stolen.stack_status(), "CREATE_FAILED");
    assert!(
        stolen.status_reason.contains(&format!(
            "resources.net.external_id: no OS::Neutron::Net {alices_net} in this project"
        )),
        "{}",
        stolen.status_reason
    );
    let adopted = engine.created(&alice, "adopter", &adopt(alices_net)).await;
    assert_eq!(engine.output(&adopted, "name").await, json!("first"));

    // By name, bob's "first" is a network of his own, never alice's.
    let by_name = "heat_template_version: 2021-04-16\nresources:\n  port: {type: OS::Neutron::Port, properties: {network: first}}\noutputs:\n  network: {value: {get_attr: [port, network_id]}}\n";
    let stack = engine.created(&bob, "by-name", by_name).await;
    let bobs = engine.output(&stack, "network").await;
    assert_ne!(bobs, json!(alices_net));
    // Alice's port is still hers, unbound.
    let port = engine.cloud.with(|world| {
        world
            .get("alice", Kind::Port, alices_port)
            .map(|port| port.fields["device_id"].clone())
    });
    assert_eq!(port, Some(json!("")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_level_all_lock_protects_the_stacks_images_and_unlock_lifts_exactly_that() {
    let (engine, _database) = engine().await;
    let demo = member("demo");
    let template = r#"
heat_template_version: 2021-04-16
resources:
  mine:
    type: OS::Glance::WebImage
    properties: {location: http://example.com/a.qcow2, disk_format: qcow2, container_format: bare}
  kept:
    type: OS::Glance::WebImage
    properties: {location: http://example.com/b.qcow2, disk_format: qcow2, container_format: bare, protected: true}
"#;
    engine.created(&demo, "images", template).await;
    let protected = || {
        engine.cloud.with(|world| {
            let mut flags: Vec<(String, Value)> = world
                .list("demo", Kind::Image, |_| true)
                .map(|image| {
                    (
                        image.fields["direct_url"].to_string(),
                        image.fields["protected"].clone(),
                    )
                })
                .collect();
            flags.sort_by(|a, b| a.0.cmp(&b.0));
            flags.into_iter().map(|(_, flag)| flag).collect::<Vec<_>>()
        })
    };
    assert_eq!(protected(), [json!(false), json!(true)]);
    engine
        .operations
        .lock_stack(
            &demo,
            "images",
            ember_engine::domain::LockLevel::All,
            Some("audit".into()),
        )
        .await
        .expect("lock accepted");
    let locked = engine.settled(&demo, "images").await;
    assert_eq!(
        locked.stack_status(),
        "LOCK_COMPLETE",
        "{}",
        locked.status_reason
    );
    assert_eq!(protected(), [json!(true), json!(true)]);
    engine
        .operations
        .unlock_stack(&demo, "images")
        .await
        .expect("unlock accepted");
    let unlocked = engine.settled(&demo, "images").await;
    assert_eq!(
        unlocked.stack_status(),
        "UNLOCK_COMPLETE",
        "{}",
        unlocked.status_reason
    );
    assert_eq!(protected(), [json!(false), json!(true)]);
}

const MOVING_SERVER: &str = r#"
heat_template_version: 2021-04-16
parameters:
  on: {type: string, default: a}
resources:
  a: {type: OS::Neutron::Net}
  a_subnet:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: a}, cidr: 10.51.0.0/24}
  b: {type: OS::Neutron::Net}
  b_subnet:
    type: OS::Neutron::Subnet
    properties: {network: {get_resource: b}, cidr: 10.52.0.0/24}
  server:
    type: OS::Nova::Server
    depends_on: [a_subnet, b_subnet]
    properties:
      flavor: m1.small
      image: cirros
      networks: [{network: {get_resource: {get_param: on}}}]
outputs:
  server: {value: {get_resource: server}}
  address: {value: {get_attr: [server, first_address]}}
  port: {value: {get_attr: [server, addresses]}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_moved_to_another_network_is_replugged_in_place_and_never_left_where_it_was() {
    let (engine, _database) = engine().await;
    let demo = member("demo");
    let stack = engine.created(&demo, "moving", MOVING_SERVER).await;
    let before = engine.output(&stack, "server").await;
    let address = engine.output(&stack, "address").await;
    assert!(
        address
            .as_str()
            .is_some_and(|ip| ip.starts_with("10.51.0.")),
        "{address}"
    );
    let addresses = engine.output(&stack, "port").await;
    let entry = addresses
        .as_object()
        .and_then(|networks| networks.values().next())
        .and_then(|entries| entries.get(0))
        .cloned()
        .expect("an address");
    assert!(
        entry["port"].as_str().is_some(),
        "each address names its port: {entry}"
    );

    let stack = engine.updated(&demo, "moving", &[("on", json!("b"))]).await;
    assert_eq!(
        engine.output(&stack, "server").await,
        before,
        "the same server, replugged"
    );
    let address = engine.output(&stack, "address").await;
    assert!(
        address
            .as_str()
            .is_some_and(|ip| ip.starts_with("10.52.0.")),
        "{address}"
    );
    // Its interface on the first network went with the move.
    assert_eq!(
        engine.cloud.with(|world| {
            world
                .list("demo", Kind::Port, |port| {
                    port.fields["fixed_ips"][0]["ip_address"]
                        .as_str()
                        .is_some_and(|ip| ip.starts_with("10.51.0."))
                })
                .count()
        }),
        0
    );
    engine.delete(&demo, "moving").await;
    assert_eq!(engine.count("demo", Kind::Port), 0, "no port left behind");
}

/// Heat's UpdateServerNetworksTest templates: `$NETWORKS` is the server's
/// networks; the outputs name the ports of the server's addresses.
const RENETWORKED: &str = r#"
heat_template_version: 2016-04-08
resources:
  net:
    type: OS::Neutron::Net
    properties: {name: the_net}
  subnet:
    type: OS::Neutron::Subnet
    properties: {name: the_subnet, network: {get_resource: net}, cidr: 11.11.11.0/24}
  spare:
    type: OS::Neutron::Port
    properties: {network: {get_resource: net}}
  server:
    type: OS::Nova::Server
    depends_on: [subnet]
    properties:
      image: cirros
      flavor: m1.small
      networks: $NETWORKS
outputs:
  ports:
    value: {get_attr: [server, addresses, the_net]}
  server:
    value: {get_resource: server}
  spare:
    value: {get_resource: spare}
"#;

/// The ports of the server's addresses, in their order.
async fn ports_of(engine: &Engine, stack: &Stack) -> Vec<String> {
    let entries = engine.output(stack, "ports").await;
    let mut ports: Vec<String> = entries
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| entry["port"].as_str().map(str::to_owned))
        .collect();
    ports.sort();
    ports
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_entries_that_name_what_the_server_has_keep_its_ports_as_heat_does() {
    let (engine, _database) = engine().await;
    let demo = member("demo");
    // (created with, updated to) — each update names what the server
    // already has another way, so its ports stay.
    let cases = [
        (
            "[{network: {get_resource: net}}]",
            "[{subnet: {get_resource: subnet}}]",
        ),
        (
            "[{subnet: {get_resource: subnet}}]",
            "[{network: {get_resource: net}}]",
        ),
        (
            "[{network: {get_resource: net}}]",
            "[{network: {get_resource: net}, subnet: {get_resource: subnet}}]",
        ),
        (
            "[{network: {get_resource: net}}, {network: {get_resource: net}, fixed_ip: 11.11.11.33}, {subnet: {get_resource: subnet}}]",
            "[{subnet: {get_resource: subnet}}, {network: {get_resource: net}}, {network: {get_resource: net}, subnet: {get_resource: subnet}}]",
        ),
    ];
    for (index, (before, after)) in cases.into_iter().enumerate() {
        let name = format!("renetworked-{index}");
        let stack = engine
            .created(&demo, &name, &RENETWORKED.replace("$NETWORKS", before))
            .await;
        let server = engine.output(&stack, "server").await;
        let ports = ports_of(&engine, &stack).await;
        assert!(!ports.is_empty(), "{name}: addresses name their ports");
        let stack = engine
            .updated_to(&demo, &name, &RENETWORKED.replace("$NETWORKS", after))
            .await;
        assert_eq!(
            engine.output(&stack, "server").await,
            server,
            "{name}: same server"
        );
        assert_eq!(ports_of(&engine, &stack).await, ports, "{name}: same ports");
        engine.delete(&demo, &name).await;
    }

    // Naming the port the cloud made for the server keeps it too; a port
    // of another subnet is swapped in, and the one made for the server goes.
    let stack = engine
        .created(
            &demo,
            "swapped",
            &RENETWORKED.replace("$NETWORKS", "[{network: {get_resource: net}}]"),
        )
        .await;
    let ports = ports_of(&engine, &stack).await;
    let by_port = format!("[{{port: {}}}]", ports[0]);
    let stack = engine
        .updated_to(
            &demo,
            "swapped",
            &RENETWORKED.replace("$NETWORKS", &by_port),
        )
        .await;
    assert_eq!(
        ports_of(&engine, &stack).await,
        ports,
        "the named port stays"
    );
    let stack = engine
        .updated_to(
            &demo,
            "swapped",
            &RENETWORKED.replace(
                "$NETWORKS",
                "[{network: {get_resource: net}, fixed_ip: 11.11.11.77}]",
            ),
        )
        .await;
    let swapped = ports_of(&engine, &stack).await;
    assert_eq!(swapped.len(), 1);
    assert_ne!(swapped, ports, "another address is another interface");
    assert!(
        engine
            .fields("demo", Kind::Port, |port| port.id == ports[0], "id")
            .is_empty(),
        "the port made for the server went with its interface, as Nova deletes it"
    );
    // A port the stack made is plugged in and, taken off, kept unbound.
    let spare = engine.output(&stack, "spare").await;
    let spare = spare.as_str().expect("the spare port's id").to_owned();
    let stack = engine
        .updated_to(
            &demo,
            "swapped",
            &RENETWORKED.replace("$NETWORKS", "[{port: {get_resource: spare}}]"),
        )
        .await;
    assert_eq!(ports_of(&engine, &stack).await, vec![spare.clone()]);
    let stack = engine
        .updated_to(
            &demo,
            "swapped",
            &RENETWORKED.replace(
                "$NETWORKS",
                "[{network: {get_resource: net}, fixed_ip: 11.11.11.88}]",
            ),
        )
        .await;
    assert_ne!(ports_of(&engine, &stack).await, vec![spare.clone()]);
    assert_eq!(
        engine.fields("demo", Kind::Port, |port| port.id == spare, "device_id"),
        vec![json!("")],
        "the stack's port is unbound, not deleted"
    );
    engine.delete(&demo, "swapped").await;
}

/// Heat's own functional test's template (`test_encryption_vol_type`),
/// with the encryption shown as an output.
const ENCRYPTED_TYPE: &str = r#"
heat_template_version: 2015-04-30
parameters:
  cipher: {type: string, default: aes-xts-plain64}
  key_size: {type: number, default: 512}
  type_name: {type: string, default: LUKS}
resources:
  my_volume_type:
    type: OS::Cinder::VolumeType
    properties: {name: {get_param: type_name}, is_public: false, projects: [demo]}
  my_encrypted_vol_type:
    type: OS::Cinder::EncryptedVolumeType
    properties:
      provider: nova.volume.encryptors.luks.LuksEncryptor
      control_location: front-end
      cipher: {get_param: cipher}
      key_size: {get_param: key_size}
      volume_type: {get_resource: my_volume_type}
outputs:
  encryption: {value: {get_attr: [my_encrypted_vol_type, show]}}
  type_id: {value: {get_resource: my_volume_type}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_type_and_its_encryption_are_made_changed_in_place_and_deleted() {
    let (engine, _database) = engine().await;
    let admin = Identity::new("admin", "admin", vec!["admin".to_owned()]);
    let stack = engine.created(&admin, "luks", ENCRYPTED_TYPE).await;
    let type_id = engine.output(&stack, "type_id").await;
    let encryption = engine.output(&stack, "encryption").await;
    assert_eq!(encryption["volume_type_id"], type_id);
    assert_eq!(encryption["key_size"], json!(512));
    assert_eq!(encryption["cipher"], json!("aes-xts-plain64"));
    // Shared with demo (private, so no one else sees it).
    let type_id = type_id.as_str().expect("an id").to_owned();
    let seen = |project: &str| {
        engine
            .cloud
            .with(|world| world.get(project, Kind::VolumeType, &type_id).is_some())
    };
    assert!(seen("admin") && seen("demo") && !seen("alt"));

    // Changed in place: the same type, the encryption's new fields.
    let stack = engine
        .updated(
            &admin,
            "luks",
            &[("cipher", json!("aes-cbc-essiv")), ("key_size", json!(256))],
        )
        .await;
    assert_eq!(engine.output(&stack, "type_id").await, json!(type_id));
    let encryption = engine.output(&stack, "encryption").await;
    assert_eq!(encryption["key_size"], json!(256));
    assert_eq!(encryption["cipher"], json!("aes-cbc-essiv"));

    // Names are unique in the cloud, as Cinder keeps them.
    let taken = engine.create(&admin, "again", ENCRYPTED_TYPE).await;
    assert_eq!(taken.stack_status(), "CREATE_FAILED");
    assert!(
        taken
            .status_reason
            .contains("Volume Type LUKS already exists."),
        "{}",
        taken.status_reason
    );
    engine.delete(&admin, "again").await;
    // Another project cannot encrypt the private type.
    let outsider = format!(
        r#"
heat_template_version: 2015-04-30
resources:
  encryption:
    type: OS::Cinder::EncryptedVolumeType
    properties: {{provider: luks, volume_type: {type_id}}}
"#
    );
    let refused = engine.create(&member("alt"), "outsider", &outsider).await;
    assert_eq!(refused.stack_status(), "CREATE_FAILED");
    assert!(
        refused
            .status_reason
            .contains(&format!("The VolumeType ({type_id}) could not be found.")),
        "{}",
        refused.status_reason
    );

    engine.delete(&admin, "luks").await;
    assert_eq!(
        engine.count("admin", Kind::VolumeType),
        0,
        "the type is gone"
    );
}
