//! The cloud's failures on the cloud, as its users read them: a flavor or
//! image the cloud does not have, a network that is not there, a server no
//! host can take, one beyond the project's quota — each resource FAILED
//! with the service's own words,
//! and nothing left behind once the stack is deleted.

use ember_openstack::neutron::{Kind, Neutron};
use ember_openstack::nova::Nova;
use serde_json::json;

use super::{CloudEmber, unique};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clouds_refusals_fail_the_resource_in_its_own_words_and_leave_nothing() {
    let Some(env) = CloudEmber::start(
        "openstack::failures::the_clouds_refusals_fail_the_resource_in_its_own_words_and_leave_nothing",
    )
    .await
    else {
        return;
    };
    let demo = env.demo().clone();
    let image = env.cloud.facts.image.name.clone();
    let session = env.session(&demo);
    let nova = Nova::connect(&session).await.expect("Nova");
    let neutron = Neutron::new(&session);
    let network = neutron
        .create(
            Kind::Network,
            serde_json::from_value(json!({"name": unique("refused-net")})).expect("a map"),
            &[],
        )
        .await
        .expect("a network");
    let network_id = network["id"].as_str().expect("id").to_owned();
    neutron
        .create(
            Kind::Subnet,
            serde_json::from_value(
                json!({"network_id": network_id, "cidr": "10.89.0.0/24", "ip_version": 4}),
            )
            .expect("a map"),
            &[],
        )
        .await
        .expect("a subnet");
    let cases = [
        (
            json!({"flavor": "no-such-flavor", "image": image, "networks": [{"network": network_id}]}),
            "flavor \"no-such-flavor\": the cloud has no flavor of that name or id",
        ),
        (
            json!({"flavor": "ember.tiny", "image": "no-such-image", "networks": [{"network": network_id}]}),
            "No image found with name or ID 'no-such-image'",
        ),
        (
            json!({"flavor": "ember.tiny", "image": image, "networks": [{"network": "no-such-network"}]}),
            "Unable to find network with name or id 'no-such-network'",
        ),
        (
            json!({"flavor": "ember.nohost", "image": image, "networks": [{"network": network_id}]}),
            "No valid host was found",
        ),
        (
            json!({"flavor": "ember.huge", "image": image, "networks": [{"network": network_id}]}),
            "Nova: Quota exceeded for ram",
        ),
    ];
    for (properties, expected) in &cases {
        let template = json!({
            "heat_template_version": "2018-08-31",
            "resources": {"web": {"type": "OS::Nova::Server", "properties": properties}}
        });
        let stack = env.create_stack(&demo, &unique("refused"), template).await;
        let settled = env.settled(&demo, &stack).await;
        assert_eq!(settled["stack_status"], "CREATE_FAILED", "{settled}");
        let reason = env.failures(&demo, &stack).await;
        assert!(reason.contains(expected), "{expected:?} in {reason}");
        env.delete_stack(&demo, &stack).await;
    }
    // No server of these stacks is left (a server Nova made and put in
    // ERROR went with its stack).
    let left: Vec<String> = nova
        .servers_tagged("ember", false)
        .await
        .expect("listed")
        .into_iter()
        .filter(|server| server.name.starts_with("refused-"))
        .map(|server| format!("{} {}", server.name, server.status))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    neutron
        .delete(Kind::Network, &network_id)
        .await
        .expect("the network");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloud_the_engine_cannot_reach_is_a_503_naming_the_service_and_nothing_is_made() {
    // The gateway validates tokens at the cloud's Keystone; the engine's
    // own way to it is broken (nothing listens on port 9).
    let Some(env) = CloudEmber::start_configured(
        "openstack::failures::a_cloud_the_engine_cannot_reach_is_a_503_naming_the_service_and_nothing_is_made",
        |config| config.engine.openstack.auth_url = "http://127.0.0.1:9/v3".to_owned(),
    )
    .await
    else {
        return;
    };
    let demo = env.demo().clone();
    let name = unique("unreachable");
    let refused = env
        .call(
            &demo,
            reqwest::Method::POST,
            &CloudEmber::stacks(&demo),
            Some(json!({"stack_name": name, "template": {
                "heat_template_version": "2018-08-31",
                "resources": {"net": {"type": "OS::Neutron::Net"}}}})),
        )
        .await;
    assert_eq!(
        refused.status,
        reqwest::StatusCode::SERVICE_UNAVAILABLE,
        "{refused:?}"
    );
    let message = refused.body["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.starts_with("Keystone (identity) is unreachable"),
        "{message}"
    );
    let listed = env
        .call(
            &demo,
            reqwest::Method::GET,
            &format!("{}?name={name}", CloudEmber::stacks(&demo)),
            None,
        )
        .await;
    assert_eq!(listed.body["stacks"], json!([]), "nothing recorded");
}
