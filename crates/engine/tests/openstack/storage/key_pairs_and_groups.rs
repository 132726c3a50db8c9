//! `OS::Nova::KeyPair` and `OS::Nova::ServerGroup` on the real Nova.

use ember_openstack::nova::Nova;
use serde_json::json;

use super::unrecorded;
use crate::harness::{Harness, unique};

const KEY_PAIR: &str = "OS::Nova::KeyPair";
const SERVER_GROUP: &str = "OS::Nova::ServerGroup";

#[tokio::test]
async fn a_generated_key_pair_keeps_its_private_key_only_when_asked() {
    let Some(harness) =
        Harness::start("a_generated_key_pair_keeps_its_private_key_only_when_asked").await
    else {
        return;
    };
    let nova = Nova::connect(&harness.demo()).await.expect("demo's Nova");
    let key_pair_type = harness.resource_type(KEY_PAIR);

    let saved_name = unique("kp-saved");
    let saved = harness
        .create(
            KEY_PAIR,
            "saved",
            json!({"name": saved_name, "save_private_key": true}),
        )
        .await;
    assert_eq!(key_pair_type.reference(&saved), json!(saved_name));
    let private_key = saved.attributes["private_key"]
        .as_str()
        .expect("a private key");
    assert!(private_key.contains("PRIVATE KEY"), "{private_key}");
    let shown = nova
        .key_pair(&saved_name, None)
        .await
        .expect("read")
        .expect("demo's key pair");
    assert_eq!(saved.attributes["public_key"], json!(shown.public_key));
    assert_eq!(saved.attributes["fingerprint"], json!(shown.fingerprint));

    let unsaved_name = unique("kp-unsaved");
    let unsaved = harness
        .create(KEY_PAIR, "unsaved", json!({"name": unsaved_name}))
        .await;
    assert_eq!(unsaved.attributes["private_key"], json!(""));
    assert!(
        unsaved.attributes["public_key"]
            .as_str()
            .is_some_and(|key| key.starts_with("ssh-")),
        "{}",
        unsaved.attributes["public_key"]
    );

    // A generated key cannot be adopted (its private key is gone): a
    // second create of the name meets Nova's conflict, as in Heat.
    let conflict = key_pair_type
        .create(&harness.request(KEY_PAIR, "again", json!({"name": unsaved_name})))
        .await
        .expect_err("the name is taken");
    assert!(
        conflict.to_string().contains("already exists"),
        "{conflict}"
    );

    key_pair_type.check(&saved).await.expect("there");
    harness.delete(&saved).await;
    harness.delete(&unsaved).await;
    assert!(
        nova.key_pair(&saved_name, None)
            .await
            .expect("read")
            .is_none()
    );
    assert!(
        nova.key_pair(&unsaved_name, None)
            .await
            .expect("read")
            .is_none()
    );
    harness.delete(&saved).await;
    let checked = key_pair_type.check(&saved).await.expect_err("gone");
    assert_eq!(
        checked.to_string(),
        format!("Keypair {saved_name} not found")
    );
}

#[tokio::test]
async fn a_given_key_is_adopted_and_a_replacement_keeps_it() {
    let Some(harness) = Harness::start("a_given_key_is_adopted_and_a_replacement_keeps_it").await
    else {
        return;
    };
    let nova = Nova::connect(&harness.demo()).await.expect("demo's Nova");
    let key_pair_type = harness.resource_type(KEY_PAIR);
    // A public key Nova generated for a scratch pair.
    let scratch = unique("kp-scratch");
    let public_key = nova
        .create_key_pair(&ember_openstack::nova::NewKeyPair {
            name: scratch.clone(),
            ..Default::default()
        })
        .await
        .expect("a scratch pair")
        .public_key;
    nova.delete_key_pair(&scratch, None).await.expect("deleted");

    let name = unique("kp-given");
    let request = harness.request(
        KEY_PAIR,
        "given",
        json!({"name": name, "public_key": public_key, "save_private_key": true}),
    );
    let outcome = key_pair_type.create(&request).await.expect("created");
    assert_eq!(outcome.physical_id, name);
    assert_eq!(outcome.attributes["public_key"], json!(public_key));
    assert_eq!(
        outcome.attributes["private_key"],
        json!(""),
        "Nova made none"
    );
    // The same row's create again adopts it (made again, same key).
    let again = key_pair_type.create(&request).await.expect("adopted");
    let first = harness.created(&request, &outcome);
    let second = harness.created(&request, &again);
    assert_ne!(first.data["nova_id"], second.data["nova_id"]);
    assert_eq!(
        nova.key_pair(&name, None)
            .await
            .expect("read")
            .expect("there")
            .public_key
            .trim(),
        public_key.trim()
    );
    // A replacement's new row made it again: the old row's delete leaves it.
    harness.delete(&first).await;
    assert!(nova.key_pair(&name, None).await.expect("read").is_some());
    // Another key under the name is someone else's: Nova's conflict.
    let other = unique("kp-other");
    let other_key = nova
        .create_key_pair(&ember_openstack::nova::NewKeyPair {
            name: other.clone(),
            ..Default::default()
        })
        .await
        .expect("another pair")
        .public_key;
    nova.delete_key_pair(&other, None).await.expect("deleted");
    let conflict = key_pair_type
        .create(&harness.request(
            KEY_PAIR,
            "clash",
            json!({"name": name, "public_key": other_key}),
        ))
        .await
        .expect_err("taken by another key");
    assert!(
        conflict.to_string().contains("already exists"),
        "{conflict}"
    );
    harness.delete(&second).await;
    assert!(nova.key_pair(&name, None).await.expect("read").is_none());
}

#[tokio::test]
async fn a_server_group_has_its_policy_and_is_found_by_its_marked_name() {
    let Some(harness) =
        Harness::start("a_server_group_has_its_policy_and_is_found_by_its_marked_name").await
    else {
        return;
    };
    let nova = Nova::connect(&harness.demo()).await.expect("demo's Nova");
    let group_type = harness.resource_type(SERVER_GROUP);

    let request = harness.request(
        SERVER_GROUP,
        "spread",
        json!({"policies": ["anti-affinity"], "rules": {"max_server_per_host": 2}}),
    );
    let outcome = group_type.create(&request).await.expect("created");
    let group = nova
        .server_group(&outcome.physical_id)
        .await
        .expect("read")
        .expect("demo's group");
    assert_eq!(group.policy.as_deref(), Some("anti-affinity"));
    assert_eq!(group.raw["rules"], json!({"max_server_per_host": 2}));
    let marker = format!("ember-{}", request.derived_id("server group"));
    assert_eq!(group.name, format!("ostest-spread-{marker}"));
    assert_eq!(outcome.attributes["policy"], json!("anti-affinity"));
    // The same row's create again adopts it.
    let again = group_type.create(&request).await.expect("adopted");
    assert_eq!(again.physical_id, outcome.physical_id);
    // A row that recorded nothing: the marked name finds the group.
    group_type
        .resume_delete(&unrecorded(&harness, &request))
        .await
        .expect("deleted");
    assert!(
        nova.server_group(&outcome.physical_id)
            .await
            .expect("read")
            .is_none()
    );

    // A name given is used as is; a resumed create cannot tell a group of
    // that name from others, and says so instead of guessing.
    let name = unique("sg");
    let request = harness.request(SERVER_GROUP, "named", json!({"name": name}));
    let named = group_type.create(&request).await.expect("created");
    let row = harness.created(&request, &named);
    let group = nova
        .server_group(&named.physical_id)
        .await
        .expect("read")
        .expect("there");
    assert_eq!(group.name, name);
    assert_eq!(
        group.policy.as_deref(),
        Some("anti-affinity"),
        "Heat's default"
    );
    let refused = group_type
        .resume_create(&request, &unrecorded(&harness, &request))
        .await
        .expect_err("cannot tell");
    assert!(refused.to_string().contains("carry no tags"), "{refused}");
    harness.delete(&row).await;
    assert!(
        nova.server_group(&named.physical_id)
            .await
            .expect("read")
            .is_none()
    );
    harness.delete(&row).await;
}
