//! `OS::Glance::WebImage` on the real Glance: imported from the test
//! cloud's image server (web-download), found by its id and marker,
//! protected by a stack lock only when the template did not protect it.
//!
//! A Glance whose import filter refuses the image server (its port, or a
//! loopback host not in `allowed_hosts`) refuses the import (`URI for
//! web-download does not pass filtering`): the create then fails with
//! Glance's own reason, which is asserted, and the rest runs on the image
//! record the refused create left (queued), which a delete of its row
//! finds by its marker.

use ember_engine::domain::{LockLevel, Resource};
use ember_engine::resources::{LockRequest, ResourceType};
use ember_openstack::glance::Glance;
use ember_runtime::Identity;
use serde_json::{Value, json};

use super::unrecorded;
use crate::harness::{Harness, unique};

const WEB_IMAGE: &str = "OS::Glance::WebImage";

fn lock(level: LockLevel) -> LockRequest {
    LockRequest {
        level,
        caller: Identity::new("demo", "demo", vec!["member".to_owned()]),
        reason: Some("maintenance".to_owned()),
        expires_at: None,
    }
}

/// The image's row, its import finished.
async fn image_row(harness: &Harness, name: &str, protected: bool) -> Resource {
    let facts = &harness.test_cloud.facts;
    let request = harness.request(
        WEB_IMAGE,
        name,
        json!({
            "name": unique("web-image"),
            "location": facts.image_url,
            "disk_format": "raw",
            "container_format": "bare",
            "protected": protected,
            "tags": ["ember", "test"],
            "os_distro": "cirros",
            "extra_properties": {"hw_disk_bus": "virtio"},
        }),
    );
    let image_type = harness.resource_type(WEB_IMAGE);
    // tests/openstack/cloud.sh lets Glance download from the image server:
    // the import must finish.
    let outcome = image_type
        .create(&request)
        .await
        .unwrap_or_else(|failure| panic!("the web image is imported: {failure}"));
    assert_eq!(outcome.attributes["status"], json!("active"));
    assert_eq!(outcome.physical_id, request.derived_id("image").to_string());
    harness.created(&request, &outcome)
}

async fn protected(glance: &Glance, image_id: &str) -> bool {
    glance
        .image(image_id)
        .await
        .expect("read")
        .expect("the image")
        .protected
}

async fn locked(image_type: &dyn ResourceType, row: &Resource, level: LockLevel) -> Resource {
    let mut row = row.clone();
    row.data = image_type.lock(&row, &lock(level)).await.expect("locked");
    row
}

async fn unlocked(image_type: &dyn ResourceType, row: &Resource) -> Resource {
    let mut row = row.clone();
    row.data = image_type
        .unlock(&row, &lock(LockLevel::All))
        .await
        .expect("unlocked");
    row
}

#[tokio::test]
async fn a_web_image_is_imported_and_a_stack_lock_protects_it() {
    let Some(harness) =
        Harness::start("a_web_image_is_imported_and_a_stack_lock_protects_it").await
    else {
        return;
    };
    let glance = Glance::new(&harness.demo());
    let image_type = harness.resource_type(WEB_IMAGE).as_ref();
    assert!(image_type.has_lock_handler());
    let row = image_row(&harness, "image", false).await;
    let image_id = row.physical_id.clone().expect("an image");
    let image = glance
        .image(&image_id)
        .await
        .expect("read")
        .expect("demo's");
    assert_eq!(
        image.visibility.as_deref(),
        Some("private"),
        "Heat's default"
    );
    assert_eq!(image.raw["os_distro"], json!("cirros"));
    assert!(image.tags.contains(&"ember".to_owned()));
    assert_eq!(image.status, "active");
    assert_eq!(image.raw["hw_disk_bus"], json!("virtio"));
    assert!(image.size.is_some_and(|size| size > 0));
    assert!(
        Glance::new(&harness.alt())
            .image(&image_id)
            .await
            .expect("read")
            .is_none(),
        "a private image is demo's"
    );

    // A lock at level stacks leaves the image alone; at level all it
    // protects it, and the unlock undoes exactly that.
    let row = locked(image_type, &row, LockLevel::Stacks).await;
    assert!(!protected(&glance, &image_id).await);
    let row = locked(image_type, &row, LockLevel::All).await;
    assert!(protected(&glance, &image_id).await);
    // Protected, a delete fails with Glance's message (Heat does not
    // unprotect either).
    let refused = image_type.delete(&row).await.expect_err("protected");
    assert!(refused.to_string().starts_with("Glance: "), "{refused}");
    assert!(refused.to_string().contains("protected"), "{refused}");
    let row = unlocked(image_type, &row).await;
    assert!(!protected(&glance, &image_id).await);
    assert_eq!(row.data.get("protected_by_stack_lock"), None);

    // Changed in place (an image the refused import left queued takes
    // changes too): tags, fields, extra properties.
    {
        let update = harness.request_in(
            harness.stack_id,
            row.id,
            WEB_IMAGE,
            "image",
            json!({
                "name": row.properties["name"],
                "location": row.properties["location"],
                "disk_format": "raw",
                "container_format": "bare",
                "tags": ["ember", "changed"],
                "os_version": "0.6",
                "extra_properties": {"hw_scsi_model": "virtio-scsi"},
            }),
        );
        assert!(!image_type.needs_replacement(
            row.properties.as_object().expect("a map"),
            &update.properties
        ));
        let outcome = image_type.update(&update, &row).await.expect("updated");
        let image = glance.image(&image_id).await.expect("read").expect("kept");
        let mut tags = image.tags.clone();
        tags.sort();
        assert_eq!(tags, ["changed", "ember"]);
        assert_eq!(image.raw["os_version"], json!("0.6"));
        assert_eq!(image.raw.get("os_distro"), None, "removed");
        assert_eq!(image.raw.get("hw_disk_bus"), None, "removed");
        assert_eq!(image.raw["hw_scsi_model"], json!("virtio-scsi"));
        assert_eq!(image.raw["ember_resource"], row_marker(&row));
        assert_eq!(outcome.attributes["os_version"], json!("0.6"));
        // A row that recorded no id (its create interrupted) still
        // deletes the image it made: found by its id and marker.
        let mut orphan = harness.created(&update, &outcome);
        orphan.physical_id = None;
        image_type.delete(&orphan).await.expect("deleted");
    }
    assert!(
        glance.image(&image_id).await.expect("read").is_none(),
        "gone"
    );
}

fn row_marker(row: &Resource) -> Value {
    json!(format!(
        "ember-{}",
        ember_engine::resources::derived_id(row.stack_id, row.id, "image")
    ))
}

#[tokio::test]
async fn an_image_the_template_protects_stays_protected_after_an_unlock() {
    let Some(harness) =
        Harness::start("an_image_the_template_protects_stays_protected_after_an_unlock").await
    else {
        return;
    };
    let glance = Glance::new(&harness.demo());
    let image_type = harness.resource_type(WEB_IMAGE).as_ref();
    let row = image_row(&harness, "kept", true).await;
    let image_id = row.physical_id.clone().expect("an image");
    assert!(protected(&glance, &image_id).await, "the template's");
    let row = locked(image_type, &row, LockLevel::All).await;
    assert_eq!(
        row.data.get("protected_by_stack_lock"),
        None,
        "not the lock's"
    );
    let row = unlocked(image_type, &row).await;
    assert!(
        protected(&glance, &image_id).await,
        "the template's protection"
    );
    // Cleaned up as the template's author would: unprotected, deleted.
    glance
        .update_image(&image_id, &[("protected", json!(false))])
        .await
        .expect("unprotected");
    image_type.delete(&row).await.expect("deleted");
    assert!(glance.image(&image_id).await.expect("read").is_none());
}

#[tokio::test]
async fn an_image_id_someone_else_holds_is_refused() {
    let Some(harness) = Harness::start("an_image_id_someone_else_holds_is_refused").await else {
        return;
    };
    let glance = Glance::new(&harness.demo());
    let taken = uuid::Uuid::new_v4().to_string();
    glance
        .create_image(&ember_openstack::glance::NewImage {
            id: taken.clone(),
            name: Some(unique("not-ember")),
            tags: Vec::new(),
            properties: json!({"disk_format": "raw", "container_format": "bare"})
                .as_object()
                .cloned()
                .expect("a map"),
        })
        .await
        .expect("demo's own image");
    let request = harness.request(
        WEB_IMAGE,
        "clash",
        json!({
            "id": taken,
            "location": harness.test_cloud.facts.image_url,
            "disk_format": "raw",
            "container_format": "bare",
        }),
    );
    let image_type = harness.resource_type(WEB_IMAGE);
    let refused = image_type.create(&request).await.expect_err("taken");
    assert!(refused.to_string().starts_with("Glance: "), "{refused}");
    assert!(refused.to_string().contains("409"), "{refused}");
    // Nor does a delete of the row take someone else's image.
    image_type
        .delete(&unrecorded(&harness, &request))
        .await
        .expect("nothing of its own");
    assert!(glance.image(&taken).await.expect("read").is_some());
    glance.delete_image(&taken).await.expect("cleaned up");
    // Heat's checks come first.
    let refused = image_type
        .create(&harness.request(
            WEB_IMAGE,
            "mixed",
            json!({
                "location": harness.test_cloud.facts.image_url,
                "disk_format": "raw",
                "container_format": "ami",
            }),
        ))
        .await
        .expect_err("mixed formats");
    assert!(
        refused
            .to_string()
            .starts_with("Invalid mix of disk and container formats.")
    );
}
