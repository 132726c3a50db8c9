//! `OS::Cinder::VolumeType` and `OS::Cinder::EncryptedVolumeType` on the
//! real Cinder: an admin's stack makes, changes and deletes them; a
//! user's stack gets Cinder's refusal.

use ember_engine::domain::delegation::{Delegation, DelegationOwner, TrustOwnership};
use ember_engine::store::delegations::DelegationStore;
use ember_openstack::cinder::Cinder;
use serde_json::json;
use uuid::Uuid;

use super::unrecorded;
use crate::harness::{Harness, unique};

const VOLUME_TYPE: &str = "OS::Cinder::VolumeType";
const ENCRYPTED: &str = "OS::Cinder::EncryptedVolumeType";

/// A stack of the admin's, acting through the admin's own trust.
async fn admin_stack(harness: &Harness) -> Uuid {
    let facts = &harness.test_cloud.facts;
    let stack_id = Uuid::now_v7();
    let trust_id = Harness::trust(&harness.test_cloud, &facts.admin).await;
    harness
        .delegations
        .record_delegation(
            DelegationOwner::Stack(stack_id),
            &Delegation {
                trust_id,
                trustor_user_id: facts.admin.user_id.clone(),
                project_id: facts.admin.project_id.clone(),
            },
            TrustOwnership::Borrows,
        )
        .await
        .expect("recorded");
    stack_id
}

#[tokio::test]
async fn an_admin_makes_changes_and_deletes_an_encrypted_private_type() {
    let Some(harness) =
        Harness::start("an_admin_makes_changes_and_deletes_an_encrypted_private_type").await
    else {
        return;
    };
    let facts = &harness.test_cloud.facts;
    let admin_cinder = Cinder::connect(&harness.test_cloud.session(&facts.admin))
        .await
        .expect("the admin's Cinder");
    let name = unique("ember-luks");

    // A user's stack: Cinder's default policy keeps types to admins.
    let refused = harness
        .resource_type(VOLUME_TYPE)
        .create(&harness.request(VOLUME_TYPE, "kind", json!({"name": name})))
        .await
        .expect_err("a member may not make volume types");
    assert!(refused.to_string().contains("HTTP 403"), "{refused}");
    assert!(
        admin_cinder
            .find_volume_type(&name)
            .await
            .expect("read")
            .is_none(),
        "nothing was made"
    );
    // Heat's validation: a public type names no projects.
    let public_with_projects = harness
        .resource_type(VOLUME_TYPE)
        .create(&harness.request(
            VOLUME_TYPE,
            "kind",
            json!({"name": name, "projects": [facts.demo.project]}),
        ))
        .await
        .expect_err("public with projects");
    assert_eq!(
        public_with_projects.to_string(),
        "Can not specify property \"projects\" if the volume type is public."
    );

    // The admin's stack: private, shared with demo's project (by name).
    let stack_id = admin_stack(&harness).await;
    let row_id = Uuid::now_v7();
    let asked = json!({"name": name, "is_public": false, "projects": [facts.demo.project],
        "metadata": {"volume_backend_name": "ember-test"}, "description": "encrypted"});
    let request = harness.request_in(stack_id, row_id, VOLUME_TYPE, "kind", asked.clone());
    let types = harness.resource_type(VOLUME_TYPE);
    let outcome = types.create(&request).await.expect("made");
    let type_row = harness.created(&request, &outcome);
    let type_id = outcome.physical_id.clone();
    let made = admin_cinder
        .volume_type(&type_id)
        .await
        .expect("read")
        .expect("Cinder has it");
    assert_eq!(made.name, name);
    assert!(!made.is_public);
    assert_eq!(made.extra_specs["volume_backend_name"], "ember-test");
    assert!(made.extra_specs["ember:resource"].starts_with("ember-"));
    assert_eq!(
        admin_cinder.type_access(&type_id).await.expect("read"),
        vec![facts.demo.project_id.clone()]
    );
    // A create run again (a crash before the id was recorded) adopts it.
    let again = types
        .resume_create(&request, &unrecorded(&harness, &request))
        .await
        .expect("adopted");
    assert_eq!(again.physical_id, type_id);

    // Its encryption, named by the type's id as `get_resource` gives it.
    let encrypted = harness.resource_type(ENCRYPTED);
    let encryption_asked = json!({"provider": "nova.volume.encryptors.luks.LuksEncryptor",
        "control_location": "front-end", "cipher": "aes-xts-plain64", "key_size": 512,
        "volume_type": type_id});
    let encryption_request = harness.request_in(
        stack_id,
        Uuid::now_v7(),
        ENCRYPTED,
        "encryption",
        encryption_asked.clone(),
    );
    let outcome = encrypted
        .create(&encryption_request)
        .await
        .expect("encrypted");
    assert_eq!(outcome.physical_id, type_id);
    let encryption_row = harness.created(&encryption_request, &outcome);
    let shown = admin_cinder
        .encryption(&type_id)
        .await
        .expect("read")
        .expect("an encryption");
    assert_eq!(shown.key_size, Some(512));
    assert_eq!(shown.cipher.as_deref(), Some("aes-xts-plain64"));
    // A second encryption of the same type is Cinder's refusal.
    let second = encrypted
        .create(&harness.request_in(
            stack_id,
            Uuid::now_v7(),
            ENCRYPTED,
            "encryption",
            encryption_asked,
        ))
        .await
        .expect_err("one encryption per type");
    assert!(second.to_string().contains("already exists"), "{second}");

    // Heat's functional test's update: key size and cipher, in place.
    let changed = harness.request_in(
        stack_id,
        encryption_row.id,
        ENCRYPTED,
        "encryption",
        json!({"provider": "nova.volume.encryptors.luks.LuksEncryptor",
            "control_location": "front-end", "cipher": "aes-cbc-essiv", "key_size": 256,
            "volume_type": type_id}),
    );
    let outcome = encrypted
        .update(&changed, &encryption_row)
        .await
        .expect("updated");
    let encryption_row = harness.created(&changed, &outcome);
    let shown = admin_cinder
        .encryption(&type_id)
        .await
        .expect("read")
        .expect("an encryption");
    assert_eq!(shown.key_size, Some(256));
    assert_eq!(shown.cipher.as_deref(), Some("aes-cbc-essiv"));
    encrypted.check(&encryption_row).await.expect("there");

    // The type renamed, its specs replaced (the marker kept), its
    // projects emptied.
    let renamed = unique("ember-luks2");
    let update = harness.request_in(
        stack_id,
        row_id,
        VOLUME_TYPE,
        "kind",
        json!({"name": renamed, "is_public": false, "projects": [],
            "metadata": {"replication": "on"}, "description": "encrypted"}),
    );
    let outcome = types.update(&update, &type_row).await.expect("updated");
    assert_eq!(outcome.physical_id, type_id);
    let type_row = harness.created(&update, &outcome);
    let updated = admin_cinder
        .volume_type(&type_id)
        .await
        .expect("read")
        .expect("there");
    assert_eq!(updated.name, renamed);
    assert_eq!(
        updated.extra_specs.keys().collect::<Vec<_>>(),
        vec!["ember:resource", "replication"]
    );
    assert!(
        admin_cinder
            .type_access(&type_id)
            .await
            .expect("read")
            .is_empty()
    );

    // Deleted: the encryption, then the type (twice is fine; a row that
    // recorded nothing finds its type by the marker).
    harness.delete(&encryption_row).await;
    assert!(
        admin_cinder
            .encryption(&type_id)
            .await
            .expect("read")
            .is_none()
    );
    harness.delete(&encryption_row).await;
    harness.delete(&unrecorded(&harness, &update)).await;
    assert!(
        admin_cinder
            .volume_type(&type_id)
            .await
            .expect("read")
            .is_none(),
        "the type is gone"
    );
    harness.delete(&type_row).await;
    let checked = types.check(&type_row).await.expect_err("gone");
    assert_eq!(
        checked.to_string(),
        format!("Volume type {type_id} could not be found.")
    );
}
