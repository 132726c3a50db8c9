//! A CloudFormation template on the cloud: `AWS::EC2::Instance` on a
//! subnet (a Nova server on a port Ember makes there) with an
//! `AWS::EC2::EIP` on it — the instance's `PrivateIp` is its real address,
//! the elastic IP a floating IP forwarded to it — and a security group by
//! the AWS twin. Deleting the stack leaves nothing.

use ember_openstack::neutron::{Kind, Neutron, RouterInterface};
use ember_openstack::nova::Nova;
use serde_json::{Map, Value, json};

use super::{CloudEmber, unique};

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ec2_instance_with_an_elastic_ip_runs_on_nova_and_neutron() {
    let Some(env) = CloudEmber::start(
        "openstack::aws::an_ec2_instance_with_an_elastic_ip_runs_on_nova_and_neutron",
    )
    .await
    else {
        return;
    };
    let demo = env.demo().clone();
    let facts = env.cloud.facts.clone();
    let session = env.session(&demo);
    let neutron = Neutron::new(&session);
    let nova = Nova::connect(&session).await.expect("Nova");
    // A routed subnet of demo's, made with demo's own Neutron.
    let network = neutron
        .create(
            Kind::Network,
            object(json!({"name": unique("aws-net")})),
            &[],
        )
        .await
        .expect("a network");
    let network_id = network["id"].as_str().expect("id").to_owned();
    let subnet = neutron
        .create(
            Kind::Subnet,
            object(json!({"network_id": network_id, "cidr": "10.97.0.0/24", "ip_version": 4})),
            &[],
        )
        .await
        .expect("a subnet");
    let subnet_id = subnet["id"].as_str().expect("id").to_owned();
    let router = neutron
        .create(
            Kind::Router,
            object(json!({"name": unique("aws-router"),
                "external_gateway_info": {"network_id": facts.public_network.id}})),
            &[],
        )
        .await
        .expect("a router");
    let router_id = router["id"].as_str().expect("id").to_owned();
    neutron
        .add_router_interface(&router_id, &RouterInterface::Subnet(subnet_id.clone()))
        .await
        .expect("plugged");

    let template = json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Resources": {
            "WebGroup": {"Type": "AWS::EC2::SecurityGroup", "Properties": {
                "GroupDescription": "web",
                "SecurityGroupIngress": [{"IpProtocol": "tcp", "FromPort": "80", "ToPort": "80", "CidrIp": "0.0.0.0/0"}]}},
            "Web": {"Type": "AWS::EC2::Instance", "Properties": {
                "ImageId": facts.image.name, "InstanceType": "ember.tiny",
                "SubnetId": subnet_id,
                "SecurityGroups": [{"Ref": "WebGroup"}],
                "Tags": [{"Key": "role", "Value": "web"}]}},
            "Address": {"Type": "AWS::EC2::EIP", "Properties": {"InstanceId": {"Ref": "Web"}}}
        },
        "Outputs": {
            "Server": {"Value": {"Ref": "Web"}},
            "PrivateIp": {"Value": {"Fn::GetAtt": ["Web", "PrivateIp"]}},
            "PublicAddress": {"Value": {"Ref": "Address"}},
            "Group": {"Value": {"Ref": "WebGroup"}}
        }
    });
    let stack = env.create_stack(&demo, &unique("ec2"), template).await;
    env.settled_as(&demo, &stack, "CREATE_COMPLETE").await;
    let outputs = env.outputs(&demo, &stack).await;
    let server_id = outputs["Server"].as_str().expect("the server").to_owned();
    let server = nova
        .server(&server_id)
        .await
        .expect("read")
        .expect("Nova has it");
    assert_eq!(server.status, "ACTIVE");
    assert_eq!(server.metadata["role"], "web", "Tags are the metadata");
    // The port Ember made on the subnet has the instance's security
    // group (Nova gives groups only to the ports it makes).
    let group = outputs["Group"].as_str().expect("the group").to_owned();
    let ports = neutron
        .list(Kind::Port, &[("device_id", server_id.as_str())])
        .await
        .expect("listed");
    assert_eq!(ports.len(), 1, "{ports:?}");
    let groups = neutron
        .list(Kind::SecurityGroup, &[])
        .await
        .expect("listed");
    let group_id = groups
        .iter()
        .find(|candidate| candidate["id"] == json!(group) || candidate["name"] == json!(group))
        .map(|found| found["id"].clone())
        .expect("the group in Neutron");
    assert_eq!(ports[0]["security_groups"], json!([group_id]));
    let private = outputs["PrivateIp"].as_str().expect("an address");
    assert!(private.starts_with("10.97.0."), "{private}");
    let public = outputs["PublicAddress"].as_str().expect("the elastic IP");
    let floating = neutron
        .list(Kind::FloatingIp, &[("floating_ip_address", public)])
        .await
        .expect("listed");
    assert_eq!(floating.len(), 1, "{floating:?}");
    assert_eq!(floating[0]["fixed_ip_address"], json!(private));

    env.delete_stack(&demo, &stack).await;
    assert!(nova.server(&server_id).await.expect("read").is_none());
    assert!(
        neutron
            .list(Kind::FloatingIp, &[("floating_ip_address", public)])
            .await
            .expect("listed")
            .is_empty()
    );
    assert!(
        neutron
            .list(Kind::Port, &[("network_id", network_id.as_str())])
            .await
            .expect("listed")
            .iter()
            .all(|port| port["device_owner"]
                .as_str()
                .is_some_and(|owner| owner.starts_with("network:"))),
        "only the router's port is left on the network"
    );
    neutron
        .remove_router_interface(&router_id, &RouterInterface::Subnet(subnet_id))
        .await
        .expect("unplugged");
    neutron
        .delete(Kind::Router, &router_id)
        .await
        .expect("router");
    neutron
        .delete(Kind::Network, &network_id)
        .await
        .expect("network");
}
