//! Servers on the cloud: a stack's `OS::Nova::Server` is a Nova server made
//! as the stack's owner through the stack's trust (its physical id Nova's,
//! its addresses Nova's), locked in Nova with the stack lock's reason and
//! unlocked again, checked against Nova's real state, and gone from Nova —
//! its trust deleted — with the stack. Another project reaches neither the
//! stack nor the networks it names. An instance of the instances API is a
//! Nova server with a trust of its own.

use std::time::{Duration, Instant};

use ember_openstack::keystone::Keystone;
use ember_openstack::neutron::{Kind, Neutron};
use ember_openstack::nova::Nova;
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value, json};

use super::{CloudEmber, SETTLE, unique};

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// A network and subnet of `account`'s on `cidr`, made with its own
/// Neutron; returns the network's name and id.
async fn network_of(
    env: &CloudEmber,
    account: &ember_openstack::testing::Account,
    cidr: &str,
) -> (String, String) {
    let neutron = Neutron::new(&env.session(account));
    let name = unique("e2e-net");
    let network = neutron
        .create(Kind::Network, object(json!({ "name": name })), &[])
        .await
        .expect("a network");
    let id = network["id"].as_str().expect("an id").to_owned();
    neutron
        .create(
            Kind::Subnet,
            object(json!({"network_id": id, "cidr": cidr, "ip_version": 4})),
            &[],
        )
        .await
        .expect("a subnet");
    (name, id)
}

/// Polls the stack until its status is `wanted`.
async fn wait_for_status(env: &CloudEmber, stack: &str, wanted: &str) -> Value {
    let deadline = Instant::now() + SETTLE;
    loop {
        let body = env.settled(env.demo(), stack).await;
        if body["stack_status"] == wanted {
            return body;
        }
        assert!(
            !body["stack_status"]
                .as_str()
                .unwrap_or_default()
                .ends_with("FAILED"),
            "{body}: {}",
            env.failures(env.demo(), stack).await
        );
        assert!(Instant::now() < deadline, "{stack}: {body}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The trust Ember recorded for `owner_id` (a stack or an instance), read
/// from the engine's own database.
pub(super) async fn recorded_trust(env: &CloudEmber, owner_id: &str) -> Option<String> {
    use sea_orm::{ConnectionTrait, Database, Statement};
    let path = env.ember.data_dir.path().join("engine.db");
    let connection = Database::connect(format!("sqlite://{}?mode=ro", path.display()))
        .await
        .expect("the engine's database");
    let uuid = uuid::Uuid::parse_str(owner_id).expect("a uuid");
    let row = connection
        .query_one_raw(Statement::from_sql_and_values(
            connection.get_database_backend(),
            "SELECT trust_id FROM delegations WHERE owner_id = $1",
            [uuid.into()],
        ))
        .await
        .expect("read");
    row.map(|row| row.try_get::<String>("", "trust_id").expect("trust_id"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stacks_server_is_novas_made_as_its_owner_locked_in_nova_and_gone_with_its_trust() {
    let Some(env) = CloudEmber::start(
        "openstack::servers::a_stacks_server_is_novas_made_as_its_owner_locked_in_nova_and_gone_with_its_trust",
    )
    .await
    else {
        return;
    };
    let demo = env.demo().clone();
    let session = env.session(&demo);
    let nova = Nova::connect(&session).await.expect("Nova");
    let (network, network_id) = network_of(&env, &demo, "10.91.0.0/24").await;
    let template = json!({
        "heat_template_version": "2018-08-31",
        "resources": {"web": {"type": "OS::Nova::Server", "properties": {
            "image": env.cloud.facts.image.name,
            "flavor": "ember.tiny",
            "networks": [{"network": network}],
            "metadata": {"role": "web"},
            "user_data": "#!/bin/sh\necho hello\n",
            "user_data_format": "RAW"
        }}},
        "outputs": {
            "id": {"value": {"get_resource": "web"}},
            "first_address": {"value": {"get_attr": ["web", "first_address"]}},
            "networks": {"value": {"get_attr": ["web", "networks"]}}
        }
    });
    let stack = env.create_stack(&demo, &unique("servers"), template).await;
    let created = env.settled_as(&demo, &stack, "CREATE_COMPLETE").await;
    let stack_id = created["id"].as_str().expect("an id").to_owned();
    let trust = recorded_trust(&env, &stack_id)
        .await
        .expect("the stack's trust");
    assert!(
        Keystone::new(&session)
            .trust(&trust)
            .await
            .expect("asked")
            .is_some(),
        "the trust is demo's"
    );

    // The physical id is Nova's, the server demo's, with its addresses.
    let outputs = env.outputs(&demo, &stack).await;
    let server_id = outputs["id"].as_str().expect("the server id").to_owned();
    let server = nova
        .server(&server_id)
        .await
        .expect("read")
        .expect("Nova has it, in demo's project");
    assert_eq!(server.status, "ACTIVE");
    assert_eq!(server.metadata["role"], "web");
    assert!(
        server.tags.iter().any(|tag| tag == "ember"),
        "{:?}",
        server.tags
    );
    let address = outputs["first_address"].as_str().expect("an address");
    assert!(address.starts_with("10.91.0."), "{address}");
    assert_eq!(outputs["networks"][&network], json!([address]));
    let resource = env
        .call(&demo, Method::GET, &format!("{stack}/resources/web"), None)
        .await;
    assert_eq!(
        resource.body["resource"]["physical_resource_id"],
        json!(server_id)
    );

    // Lock level all: Nova locks the server with the reason, and refuses
    // demo's own delete; unlock lifts it.
    let locked = env
        .call(
            &demo,
            Method::POST,
            &format!("{stack}/actions"),
            Some(json!({"lock": {"level": "all", "reason": "db maintenance"}})),
        )
        .await;
    assert_eq!(locked.status, StatusCode::OK, "{locked:?}");
    wait_for_status(&env, &stack, "LOCK_COMPLETE").await;
    let server = nova.server(&server_id).await.expect("read").expect("there");
    assert_eq!(server.locked, Some(true));
    assert_eq!(server.locked_reason.as_deref(), Some("db maintenance"));
    let refused = nova
        .delete_server(&server_id)
        .await
        .expect_err("Nova refuses to delete a locked server");
    assert_eq!(refused.status(), Some(409), "{refused}");
    let unlocked = env
        .call(
            &demo,
            Method::POST,
            &format!("{stack}/actions"),
            Some(json!({"unlock": null})),
        )
        .await;
    assert_eq!(unlocked.status, StatusCode::OK, "{unlocked:?}");
    wait_for_status(&env, &stack, "UNLOCK_COMPLETE").await;
    let server = nova.server(&server_id).await.expect("read").expect("there");
    assert_eq!(server.locked, Some(false));

    // A check reads Nova: the server is ACTIVE.
    let checked = env
        .call(
            &demo,
            Method::POST,
            &format!("{stack}/actions"),
            Some(json!({"check": null})),
        )
        .await;
    assert_eq!(checked.status, StatusCode::OK, "{checked:?}");
    wait_for_status(&env, &stack, "CHECK_COMPLETE").await;

    // Delete: the server is gone from Nova and the trust from Keystone.
    env.delete_stack(&demo, &stack).await;
    assert!(nova.server(&server_id).await.expect("read").is_none());
    assert!(
        Keystone::new(&session)
            .trust(&trust)
            .await
            .expect("asked")
            .is_none(),
        "the stack's trust is deleted with it"
    );
    Neutron::new(&session)
        .delete(Kind::Network, &network_id)
        .await
        .expect("the network");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_project_reaches_neither_the_stack_nor_the_networks_it_names() {
    let Some(env) = CloudEmber::start(
        "openstack::servers::another_project_reaches_neither_the_stack_nor_the_networks_it_names",
    )
    .await
    else {
        return;
    };
    let demo = env.demo().clone();
    let alt = env.alt().clone();
    let (network, network_id) = network_of(&env, &demo, "10.92.0.0/24").await;
    let template = |network: &str| {
        json!({
            "heat_template_version": "2018-08-31",
            "resources": {"web": {"type": "OS::Nova::Server", "properties": {
                "image": env.cloud.facts.image.name,
                "flavor": "ember.tiny",
                "networks": [{"network": network}]
            }}}
        })
    };
    // alt names demo's network by name and by id: Neutron does not show
    // it to alt's trust, so the server fails saying so.
    for reference in [network.as_str(), network_id.as_str()] {
        let stack = env
            .create_stack(&alt, &unique("intruder"), template(reference))
            .await;
        let settled = env.settled(&alt, &stack).await;
        assert_eq!(settled["stack_status"], "CREATE_FAILED", "{settled}");
        let reason = env.failures(&alt, &stack).await;
        assert!(
            reason.contains(&format!(
                "Unable to find network with name or id '{reference}'"
            )),
            "{reason}"
        );
        env.delete_stack(&alt, &stack).await;
    }
    // demo's stack is not alt's to read, by demo's project or alt's.
    let stack = env
        .create_stack(&demo, &unique("private"), template(&network))
        .await;
    let settled = env.settled_as(&demo, &stack, "CREATE_COMPLETE").await;
    let stack_id = settled["id"].as_str().expect("id");
    let by_demo_url = env.call(&alt, Method::GET, &stack, None).await;
    assert_eq!(by_demo_url.status, StatusCode::FORBIDDEN, "{by_demo_url:?}");
    let by_alt_url = env
        .call(
            &alt,
            Method::GET,
            &format!("{}/{stack_id}", CloudEmber::stacks(&alt)),
            None,
        )
        .await;
    assert_eq!(by_alt_url.status, StatusCode::NOT_FOUND, "{by_alt_url:?}");
    env.delete_stack(&demo, &stack).await;
    Neutron::new(&env.session(&demo))
        .delete(Kind::Network, &network_id)
        .await
        .expect("the network");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_of_the_instances_api_is_a_nova_server_with_a_trust_of_its_own() {
    let Some(env) = CloudEmber::start(
        "openstack::servers::an_instance_of_the_instances_api_is_a_nova_server_with_a_trust_of_its_own",
    )
    .await
    else {
        return;
    };
    let demo = env.demo().clone();
    let session = env.session(&demo);
    let nova = Nova::connect(&session).await.expect("Nova");
    let (network, network_id) = network_of(&env, &demo, "10.93.0.0/24").await;
    let created = env
        .call(
            &demo,
            Method::POST,
            "/compute/v1/instances",
            Some(json!({"instance": {
                "name": unique("api"),
                "flavor": "ember.tiny",
                "image": env.cloud.facts.image.name,
                "networks": [{"network": network}]
            }})),
        )
        .await;
    assert_eq!(created.status, StatusCode::ACCEPTED, "{created:?}");
    assert_eq!(
        created.body["instance"]["networks"],
        json!([{"network": network}])
    );
    let uuid = created.body["instance"]["uuid"]
        .as_str()
        .expect("uuid")
        .to_owned();
    let path = format!("/compute/v1/instances/{uuid}");
    let deadline = Instant::now() + SETTLE;
    loop {
        let instance = env.call(&demo, Method::GET, &path, None).await;
        let status = instance.body["instance"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if status == "ACTIVE" {
            break;
        }
        assert_ne!(status, "ERROR", "{instance:?}");
        assert!(Instant::now() < deadline, "{instance:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let servers = nova
        .servers_tagged(&format!("ember-{uuid}"), false)
        .await
        .expect("listed");
    assert_eq!(servers.len(), 1, "one Nova server, demo's");
    let server_id = servers[0].id.clone();
    let trust = recorded_trust(&env, &uuid).await.expect("its own trust");

    // The instance lock is Nova's lock.
    let locked = env
        .call(
            &demo,
            Method::PUT,
            &format!("{path}/lock"),
            Some(json!({"target": true})),
        )
        .await;
    assert_eq!(locked.status, StatusCode::ACCEPTED, "{locked:?}");
    let server = nova.server(&server_id).await.expect("read").expect("there");
    assert_eq!(server.locked, Some(true));
    let unlocked = env
        .call(
            &demo,
            Method::PUT,
            &format!("{path}/lock"),
            Some(json!({"target": false})),
        )
        .await;
    assert_eq!(unlocked.status, StatusCode::ACCEPTED, "{unlocked:?}");
    let server = nova.server(&server_id).await.expect("read").expect("there");
    assert_eq!(server.locked, Some(false));

    // alt sees nothing of it.
    let foreign = env.call(env.alt(), Method::GET, &path, None).await;
    assert_eq!(foreign.status, StatusCode::NOT_FOUND, "{foreign:?}");

    let deleted = env.call(&demo, Method::DELETE, &path, None).await;
    assert_eq!(deleted.status, StatusCode::ACCEPTED, "{deleted:?}");
    let deadline = Instant::now() + SETTLE;
    while env.call(&demo, Method::GET, &path, None).await.status != StatusCode::NOT_FOUND {
        assert!(Instant::now() < deadline, "the instance is not deleted");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(nova.server(&server_id).await.expect("read").is_none());
    assert!(
        Keystone::new(&session)
            .trust(&trust)
            .await
            .expect("asked")
            .is_none(),
        "the instance's trust is deleted with it"
    );
    Neutron::new(&session)
        .delete(Kind::Network, &network_id)
        .await
        .expect("the network");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_nova_reports_in_error_fails_its_check_and_is_replaced_by_the_next_update() {
    let Some(env) = CloudEmber::start(
        "openstack::servers::a_server_nova_reports_in_error_fails_its_check_and_is_replaced_by_the_next_update",
    )
    .await
    else {
        return;
    };
    let demo = env.demo().clone();
    let session = env.session(&demo);
    let nova = Nova::connect(&session).await.expect("Nova");
    let (network, network_id) = network_of(&env, &demo, "10.96.0.0/24").await;
    let template = json!({
        "heat_template_version": "2018-08-31",
        "resources": {"web": {"type": "OS::Nova::Server", "properties": {
            "image": env.cloud.facts.image.name, "flavor": "ember.tiny",
            "networks": [{"network": network}]}}},
        "outputs": {"id": {"value": {"get_resource": "web"}}}
    });
    let stack = env
        .create_stack(&demo, &unique("healing"), template.clone())
        .await;
    env.settled_as(&demo, &stack, "CREATE_COMPLETE").await;
    let first = env.outputs(&demo, &stack).await["id"]
        .as_str()
        .expect("id")
        .to_owned();

    // Nova reports the server in ERROR (an admin resets its state): the
    // stack's check reads Nova and fails it.
    let admin = Nova::connect(&env.session(&env.cloud.facts.admin))
        .await
        .expect("Nova as admin");
    admin
        .act(
            &first,
            &ember_openstack::nova::ServerAction::ResetState {
                state: "error".to_owned(),
            },
        )
        .await
        .expect("reset to error");
    let checked = env
        .call(
            &demo,
            Method::POST,
            &format!("{stack}/actions"),
            Some(json!({"check": null})),
        )
        .await;
    assert_eq!(checked.status, StatusCode::OK, "{checked:?}");
    let settled = env.settled(&demo, &stack).await;
    assert_eq!(settled["stack_status"], "CHECK_FAILED", "{settled}");
    let resource = env
        .call(&demo, Method::GET, &format!("{stack}/resources/web"), None)
        .await;
    assert_eq!(
        resource.body["resource"]["resource_status"], "CHECK_FAILED",
        "{resource:?}"
    );

    // The next update replaces it: a new server, the old one deleted.
    let updated = env
        .call(
            &demo,
            Method::PATCH,
            &stack,
            Some(json!({"template": template})),
        )
        .await;
    assert_eq!(updated.status, StatusCode::ACCEPTED, "{updated:?}");
    env.settled_as(&demo, &stack, "UPDATE_COMPLETE").await;
    let second = env.outputs(&demo, &stack).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_ne!(second, first, "replaced");
    let replacement = nova.server(&second).await.expect("read").expect("in Nova");
    assert_eq!(replacement.status, "ACTIVE");
    let deadline = Instant::now() + SETTLE;
    while nova.server(&first).await.expect("read").is_some() {
        assert!(
            Instant::now() < deadline,
            "the failed server is not deleted"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    env.delete_stack(&demo, &stack).await;
    Neutron::new(&session)
        .delete(Kind::Network, &network_id)
        .await
        .expect("the network");
}
