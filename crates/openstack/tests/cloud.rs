//! The clients against a real OpenStack (tests/openstack/cloud.sh): trusts
//! acting for their trustor, Neutron objects found by their tags, a server
//! built, locked with a reason and deleted, volumes found by metadata and
//! grown, the services' own error messages, another project kept out, and
//! a revoked token renewed.

use std::time::Duration;

use ember_openstack::cinder::{Cinder, NewVolume};
use ember_openstack::keystone::{Keystone, NewTrust};
use ember_openstack::neutron::{Kind, Neutron};
use ember_openstack::nova::{NewServer, Nova, ServerAction, ServerNetwork, ServerNetworks};
use ember_openstack::session::Call;
use ember_openstack::testing::TestCloud;
use ember_openstack::{Error, Service};
use ember_runtime::testing::poll_until;
use serde_json::{Map, Value, json};

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

#[tokio::test]
async fn a_trust_acts_for_its_trustor_until_it_is_deleted() {
    let Some(cloud) = TestCloud::from_env("a_trust_acts_for_its_trustor_until_it_is_deleted")
    else {
        return;
    };
    let demo = cloud.session(&cloud.facts.demo);
    let token = demo.token().await.expect("demo authenticates");
    let trust = Keystone::new(&demo)
        .create_trust(&NewTrust {
            trustor_user_id: token.user_id.clone(),
            trustee_user_id: cloud.facts.service.user_id.clone(),
            project_id: cloud.facts.demo.project_id.clone(),
            role_names: token.role_names().map(str::to_owned).collect(),
            impersonation: true,
            expires_at: None,
        })
        .await
        .expect("demo delegates to ember");
    let acting = cloud.trust_session(&trust.id);
    let acting_token = acting.token().await.expect("ember acts through the trust");
    assert_eq!(
        acting_token.user_id, cloud.facts.demo.user_id,
        "impersonation"
    );
    assert_eq!(
        acting_token.project_id.as_deref(),
        Some(cloud.facts.demo.project_id.as_str())
    );
    assert_eq!(acting_token.trust_id.as_deref(), Some(trust.id.as_str()));

    // What the trust makes is the trustor's project's.
    let neutron = Neutron::new(&acting);
    let network = neutron
        .create(
            Kind::Network,
            object(json!({"name": unique("trusted")})),
            &[],
        )
        .await
        .expect("a network through the trust");
    assert_eq!(network["project_id"], json!(cloud.facts.demo.project_id));
    let id = network["id"].as_str().expect("an id").to_owned();
    neutron.delete(Kind::Network, &id).await.expect("deleted");

    Keystone::new(&demo)
        .delete_trust(&trust.id)
        .await
        .expect("the trustor deletes it");
    Keystone::new(&demo)
        .delete_trust(&trust.id)
        .await
        .expect("deleting a deleted trust is done");
    let refused = cloud
        .trust_session(&trust.id)
        .token()
        .await
        .expect_err("a deleted trust acts for nobody");
    assert!(matches!(refused, Error::Authentication(_)), "{refused}");
}

#[tokio::test]
async fn neutron_objects_are_found_by_tag_and_kept_from_other_projects() {
    let Some(cloud) =
        TestCloud::from_env("neutron_objects_are_found_by_tag_and_kept_from_other_projects")
    else {
        return;
    };
    let neutron = Neutron::new(&cloud.session(&cloud.facts.demo));
    let tag = unique("ember");
    let network = neutron
        .create(
            Kind::Network,
            object(json!({"name": unique("net")})),
            std::slice::from_ref(&tag),
        )
        .await
        .expect("a network");
    let network_id = network["id"].as_str().expect("id").to_owned();
    assert_eq!(network["tags"], json!([tag]));
    let subnet = neutron
        .create(
            Kind::Subnet,
            object(json!({"network_id": network_id, "cidr": "10.77.0.0/24", "ip_version": 4})),
            std::slice::from_ref(&tag),
        )
        .await
        .expect("a subnet");
    let port = neutron
        .create(
            Kind::Port,
            object(json!({"network_id": network_id})),
            std::slice::from_ref(&tag),
        )
        .await
        .expect("a port");
    assert_eq!(port["fixed_ips"][0]["subnet_id"], subnet["id"]);
    let tagged = neutron
        .list(Kind::Port, &[("tags", tag.as_str())])
        .await
        .expect("listed");
    assert_eq!(tagged.len(), 1);
    assert_eq!(tagged[0]["id"], port["id"]);
    assert_eq!(
        neutron
            .find_id(Kind::Network, network["name"].as_str().expect("name"))
            .await
            .expect("found by name"),
        network_id
    );

    // Another project neither sees nor finds it.
    let alt = Neutron::new(&cloud.session(&cloud.facts.alt));
    assert!(
        alt.get(Kind::Network, &network_id)
            .await
            .expect("asked")
            .is_none()
    );
    let unknown = alt
        .find_id(Kind::Network, network["name"].as_str().expect("name"))
        .await
        .expect_err("not found");
    assert!(unknown.is_not_found(), "{unknown}");
    assert!(
        unknown.to_string().contains("Unable to find network"),
        "{unknown}"
    );

    let port_id = port["id"].as_str().expect("id");
    neutron.delete(Kind::Port, port_id).await.expect("deleted");
    neutron
        .delete(Kind::Port, port_id)
        .await
        .expect("gone is deleted");
    neutron
        .delete(Kind::Network, &network_id)
        .await
        .expect("the network and its subnet");
    assert!(
        neutron
            .get(Kind::Network, &network_id)
            .await
            .expect("asked")
            .is_none()
    );
}

#[tokio::test]
async fn a_server_is_built_locked_with_its_reason_and_deleted() {
    let Some(cloud) = TestCloud::from_env("a_server_is_built_locked_with_its_reason_and_deleted")
    else {
        return;
    };
    let session = cloud.session(&cloud.facts.demo);
    let nova = Nova::connect(&session).await.expect("version negotiated");
    assert!(nova.version() >= Nova::LEAST);
    let neutron = Neutron::new(&session);
    let network = neutron
        .create(
            Kind::Network,
            object(json!({"name": unique("srv-net")})),
            &[],
        )
        .await
        .expect("a network");
    let network_id = network["id"].as_str().expect("id").to_owned();
    neutron
        .create(
            Kind::Subnet,
            object(json!({"network_id": network_id, "cidr": "10.78.0.0/24", "ip_version": 4})),
            &[],
        )
        .await
        .expect("a subnet");
    let flavor = nova
        .flavor("ember.tiny")
        .await
        .expect("asked")
        .expect("found by name");
    let tag = unique("ember");
    let created = nova
        .create_server(&NewServer {
            name: unique("srv"),
            image_id: Some(cloud.facts.image.id.clone()),
            flavor_id: flavor.id.clone(),
            networks: Some(ServerNetworks::List(vec![ServerNetwork {
                network_id: Some(network_id.clone()),
                ..ServerNetwork::default()
            }])),
            tags: vec![tag.clone()],
            user_data: Some("#!/bin/sh\necho hi\n".to_owned()),
            ..NewServer::default()
        })
        .await
        .expect("accepted");
    let active = poll_until("ACTIVE", Duration::from_secs(120), || async {
        let server = nova.server(&created.id).await.expect("read")?;
        assert_ne!(server.status, "ERROR", "{}", server.fault_message());
        (server.status == "ACTIVE").then_some(server)
    })
    .await;
    let addresses = &active.addresses[network["name"].as_str().expect("name")];
    assert!(addresses[0].addr.starts_with("10.78.0."), "{addresses:?}");
    assert_eq!(active.tags, vec![tag.clone()]);
    let found = nova.servers_tagged(&tag, false).await.expect("listed");
    assert_eq!(found.len(), 1);

    nova.act(
        &created.id,
        &ServerAction::Lock {
            reason: Some("db maintenance".to_owned()),
        },
    )
    .await
    .expect("locked");
    let locked = nova
        .server(&created.id)
        .await
        .expect("read")
        .expect("there");
    assert_eq!(locked.locked, Some(true));
    assert_eq!(locked.locked_reason.as_deref(), Some("db maintenance"));
    nova.act(&created.id, &ServerAction::Unlock)
        .await
        .expect("unlocked");
    nova.act(&created.id, &ServerAction::Unlock)
        .await
        .expect("unlocking twice is harmless");

    nova.delete_server(&created.id).await.expect("asked");
    poll_until("gone", Duration::from_secs(120), || async {
        nova.server(&created.id)
            .await
            .expect("read")
            .is_none()
            .then_some(())
    })
    .await;
    nova.delete_server(&created.id)
        .await
        .expect("deleting a deleted server is done");
    neutron
        .delete(Kind::Network, &network_id)
        .await
        .expect("network deleted");
}

#[tokio::test]
async fn volumes_are_found_by_metadata_and_grow() {
    let Some(cloud) = TestCloud::from_env("volumes_are_found_by_metadata_and_grow") else {
        return;
    };
    let cinder = Cinder::connect(&cloud.session(&cloud.facts.demo))
        .await
        .expect("version negotiated");
    let marker = unique("vol");
    let created = cinder
        .create_volume(&NewVolume {
            name: Some(marker.clone()),
            size: Some(1),
            metadata: [("ember".to_owned(), marker.clone())].into(),
            ..NewVolume::default()
        })
        .await
        .expect("accepted");
    poll_until("available", Duration::from_secs(60), || async {
        let volume = cinder.volume(&created.id).await.expect("read")?;
        (volume.status == "available").then_some(())
    })
    .await;
    let found = cinder
        .volumes_with_metadata("ember", &marker)
        .await
        .expect("listed");
    assert_eq!(
        found
            .iter()
            .map(|volume| volume.id.as_str())
            .collect::<Vec<_>>(),
        [created.id.as_str()]
    );
    cinder
        .extend_volume(&created.id, 2)
        .await
        .expect("extended");
    poll_until("2 GiB", Duration::from_secs(60), || async {
        let volume = cinder.volume(&created.id).await.expect("read")?;
        (volume.size == 2 && volume.status == "available").then_some(())
    })
    .await;
    cinder.delete_volume(&created.id).await.expect("asked");
    poll_until("gone", Duration::from_secs(60), || async {
        cinder
            .volume(&created.id)
            .await
            .expect("read")
            .is_none()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn errors_carry_the_services_own_words() {
    let Some(cloud) = TestCloud::from_env("errors_carry_the_services_own_words") else {
        return;
    };
    let session = cloud.session(&cloud.facts.demo);
    let nova = Nova::connect(&session).await.expect("version negotiated");
    assert!(
        nova.flavor("no-such-flavor")
            .await
            .expect("asked")
            .is_none()
    );
    let refused = nova
        .create_server(&NewServer {
            name: unique("bad"),
            image_id: Some(cloud.facts.image.id.clone()),
            flavor_id: "no-such-flavor".to_owned(),
            networks: Some(ServerNetworks::None),
            ..NewServer::default()
        })
        .await
        .expect_err("no such flavor");
    assert_eq!(refused.status(), Some(400), "{refused}");
    assert!(
        refused
            .service_message()
            .contains("Flavor no-such-flavor could not be found"),
        "{refused}"
    );
    assert!(refused.to_string().starts_with("Nova: "), "{refused}");

    let wrong_password = cloud.cloud.session(ember_openstack::Credentials {
        method: ember_openstack::Method::Password {
            user: ember_openstack::Named::Name {
                name: cloud.facts.demo.user.clone(),
                domain: ember_openstack::Domain::Name(cloud.facts.domain.clone()),
            },
            password: ember_openstack::Secret::new("wrong"),
        },
        scope: ember_openstack::Scope::Unscoped,
    });
    let refused = wrong_password.token().await.expect_err("refused");
    assert!(matches!(refused, Error::Authentication(_)), "{refused}");

    let mut config = cloud.facts.cloud_config();
    config.region = Some("NoSuchRegion".to_owned());
    let elsewhere = ember_openstack::Cloud::new(config)
        .expect("configured")
        .session(cloud.facts.password(&cloud.facts.demo));
    let missing = Neutron::new(&elsewhere)
        .list(Kind::Network, &[])
        .await
        .expect_err("no such region");
    assert_eq!(
        missing.to_string(),
        "the cloud's catalog has no public endpoint for Neutron (network) in region \"NoSuchRegion\""
    );
}

#[tokio::test]
async fn a_revoked_token_is_renewed_once_and_the_call_goes_through() {
    let Some(cloud) =
        TestCloud::from_env("a_revoked_token_is_renewed_once_and_the_call_goes_through")
    else {
        return;
    };
    let demo = cloud.session(&cloud.facts.demo);
    let first = demo.token().await.expect("a token");
    let admin = cloud.session(&cloud.facts.admin);
    admin
        .call(Call::delete(Service::Identity, "/auth/tokens").header(
            http::HeaderName::from_static("x-subject-token"),
            first.value.expose(),
        ))
        .await
        .expect("revoked");
    let networks = Neutron::new(&demo)
        .list(Kind::Network, &[])
        .await
        .expect("the call goes through on a new token");
    assert!(networks.iter().all(|network| network.get("id").is_some()));
    let second = demo.token().await.expect("a token");
    assert_ne!(first.value.expose(), second.value.expose());
}

#[tokio::test]
async fn lookups_of_one_name_started_together_ask_the_service_once() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let Some(cloud) =
        TestCloud::from_env("lookups_of_one_name_started_together_ask_the_service_once")
    else {
        return;
    };
    let demo = cloud.session(&cloud.facts.demo);
    demo.token().await.expect("demo authenticates");
    let name = unique("lookup");
    let asked = Arc::new(AtomicUsize::new(0));
    // The first resolution fails: nothing is remembered, and the next in
    // turn asks again; the others wait for its answer.
    let lookup = |fail: bool| {
        let (demo, name, asked) = (demo.clone(), name.clone(), asked.clone());
        async move {
            demo.remembered_id("test-things", &name, || async {
                asked.fetch_add(1, Ordering::SeqCst);
                let asking = if fail { 500 } else { 50 };
                tokio::time::sleep(Duration::from_millis(asking)).await;
                if fail {
                    return Err(Error::Authentication("the first one fails".to_owned()));
                }
                Ok("the-id".to_owned())
            })
            .await
        }
    };
    let first = tokio::spawn(lookup(true));
    // The others start once the failing one is asking.
    poll_until(
        "the first resolution to start",
        Duration::from_secs(5),
        || {
            let asked = asked.clone();
            async move { (asked.load(Ordering::SeqCst) == 1).then_some(()) }
        },
    )
    .await;
    let mut others = tokio::task::JoinSet::new();
    for _ in 0..9 {
        others.spawn(lookup(false));
    }
    assert!(
        first.await.expect("joined").is_err(),
        "the failing resolution fails its caller"
    );
    while let Some(id) = others.join_next().await {
        assert_eq!(id.expect("joined").expect("resolved"), "the-id");
    }
    assert_eq!(
        asked.load(Ordering::SeqCst),
        2,
        "the failed resolution and one more: the other eight waited for its answer"
    );
    let again = lookup(false).await.expect("remembered");
    assert_eq!(again, "the-id");
    assert_eq!(
        asked.load(Ordering::SeqCst),
        2,
        "remembered: not asked again"
    );
}
