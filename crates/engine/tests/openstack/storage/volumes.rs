//! `OS::Cinder::Volume` and `AWS::EC2::Volume` on the real Cinder.

use ember_engine::resources::validate_properties;
use ember_engine::store::delegations::DelegationStore;
use ember_openstack::Service;
use ember_openstack::cinder::Cinder;
use ember_openstack::session::Call;
use serde_json::json;

use super::unrecorded;
use crate::harness::{Harness, unique};

const VOLUME: &str = "OS::Cinder::Volume";

#[tokio::test]
async fn a_volume_is_made_once_grown_renamed_and_deleted() {
    let Some(harness) = Harness::start("a_volume_is_made_once_grown_renamed_and_deleted").await
    else {
        return;
    };
    // Everything is done as demo, through the stack's delegation.
    let delegation = harness
        .delegations
        .delegation_of_stack(harness.stack_id)
        .await
        .expect("read")
        .expect("the stack's delegation");
    assert_eq!(delegation.trust_id, harness.trust_id);
    let acting = harness
        .cloud
        .stack_session(harness.stack_id)
        .await
        .expect("the stack's session")
        .token()
        .await
        .expect("a token through the trust");
    assert_eq!(acting.user_id, harness.test_cloud.facts.demo.user_id);

    let name = unique("vol");
    let request = harness.request(
        VOLUME,
        "data",
        json!({"size": 1, "name": name, "metadata": {"role": "db", "replicas": 2}}),
    );
    let volume_type = harness.resource_type(VOLUME);
    let outcome = volume_type.create(&request).await.expect("created");
    let row = harness.created(&request, &outcome);
    let volume_id = outcome.physical_id.clone();

    // Demo's own Cinder shows it, with what the template asked and the
    // row's marker; alt's project does not.
    let cinder = Cinder::connect(&harness.demo())
        .await
        .expect("demo's Cinder");
    let volume = cinder
        .volume(&volume_id)
        .await
        .expect("read")
        .expect("demo sees it");
    assert_eq!(volume.size, 1);
    assert_eq!(volume.status, "available");
    assert_eq!(volume.name.as_deref(), Some(name.as_str()));
    assert_eq!(volume.metadata["role"], "db");
    assert_eq!(volume.metadata["replicas"], "2");
    let marker = volume.metadata["ember_resource"].clone();
    assert!(marker.starts_with("ember-"), "{marker}");
    let alt = Cinder::connect(&harness.alt()).await.expect("alt's Cinder");
    assert!(
        alt.volume(&volume_id).await.expect("read").is_none(),
        "another project cannot see it"
    );
    // Heat's attributes, over Cinder's fields.
    assert_eq!(outcome.attributes["size"], json!("1"));
    assert_eq!(outcome.attributes["status"], json!("available"));
    assert_eq!(outcome.attributes["display_name"], json!(name));
    assert_eq!(outcome.attributes["metadata_values"]["role"], json!("db"));
    assert_eq!(outcome.attributes["attachments_list"], json!([]));
    assert_eq!(outcome.attributes["id"], json!(volume_id));
    assert_eq!(volume_type.reference(&row), json!(volume_id));

    // The same row's create again finds the volume it made.
    let again = volume_type.create(&request).await.expect("created again");
    assert_eq!(again.physical_id, volume_id);
    assert_eq!(
        cinder
            .volumes_with_metadata("ember_resource", &marker)
            .await
            .expect("listed")
            .len(),
        1,
        "one volume"
    );

    // Grown and renamed in place.
    let renamed = unique("vol-renamed");
    let grown = harness.request_in(
        harness.stack_id,
        row.id,
        VOLUME,
        "data",
        json!({"size": 2, "name": renamed, "description": "grown", "metadata": {"role": "db"}}),
    );
    assert!(!volume_type.needs_replacement(
        row.properties.as_object().expect("a map"),
        &grown.properties
    ));
    let updated = volume_type.update(&grown, &row).await.expect("updated");
    assert_eq!(updated.physical_id, volume_id);
    let volume = cinder
        .volume(&volume_id)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(volume.size, 2);
    assert_eq!(volume.name.as_deref(), Some(renamed.as_str()));
    assert_eq!(volume.description.as_deref(), Some("grown"));
    assert!(
        !volume.metadata.contains_key("replicas"),
        "metadata replaced"
    );
    assert_eq!(volume.metadata["ember_resource"], marker, "the marker kept");
    assert_eq!(updated.attributes["size"], json!("2"));
    let row = harness.created(&grown, &updated);

    // Shrinking is refused, in Heat's words, before anything changes.
    let shrunk = harness.request_in(
        harness.stack_id,
        row.id,
        VOLUME,
        "data",
        json!({"size": 1, "name": "never", "metadata": {"role": "db"}}),
    );
    let refused = volume_type
        .update(&shrunk, &row)
        .await
        .expect_err("shrinking");
    assert_eq!(refused.to_string(), "Shrinking volume is not supported.");
    let volume = cinder
        .volume(&volume_id)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(volume.name.as_deref(), Some(renamed.as_str()));
    // Other properties replace it.
    assert!(
        volume_type.needs_replacement(
            row.properties.as_object().expect("a map"),
            &harness
                .request(
                    VOLUME,
                    "data",
                    json!({"size": 2, "availability_zone": "elsewhere"})
                )
                .properties
        )
    );

    // Retyped in place (a type the admin makes for the test).
    let admin = harness.test_cloud.session(&harness.test_cloud.facts.admin);
    let fast = unique("ember-fast");
    let created_type: serde_json::Value = admin
        .call(Call::post(
            Service::BlockStorage,
            "/types",
            json!({"volume_type": {"name": fast}}),
        ))
        .await
        .expect("a volume type")
        .json()
        .expect("its answer");
    let retyped = harness.request_in(
        harness.stack_id,
        row.id,
        VOLUME,
        "data",
        json!({"size": 2, "name": renamed, "description": "grown", "metadata": {"role": "db"}, "volume_type": fast}),
    );
    let outcome = volume_type.update(&retyped, &row).await.expect("retyped");
    assert_eq!(outcome.attributes["volume_type"], json!(fast));
    let row = harness.created(&retyped, &outcome);

    volume_type.check(&row).await.expect("available is healthy");
    harness.delete(&row).await;
    assert!(
        cinder.volume(&volume_id).await.expect("read").is_none(),
        "gone"
    );
    harness.delete(&row).await;
    let checked = volume_type.check(&row).await.expect_err("gone");
    assert_eq!(
        checked.to_string(),
        format!("Volume {volume_id} could not be found.")
    );
    let type_id = created_type["volume_type"]["id"].as_str().expect("an id");
    admin
        .call(Call::delete(
            Service::BlockStorage,
            format!("/types/{type_id}"),
        ))
        .await
        .expect("the type deleted");
}

#[tokio::test]
async fn a_delete_without_a_physical_id_deletes_what_the_marker_finds() {
    let Some(harness) =
        Harness::start("a_delete_without_a_physical_id_deletes_what_the_marker_finds").await
    else {
        return;
    };
    let request = harness.request(VOLUME, "orphan", json!({"size": 1}));
    let volume_type = harness.resource_type(VOLUME);
    let outcome = volume_type.create(&request).await.expect("created");
    let cinder = Cinder::connect(&harness.demo())
        .await
        .expect("demo's Cinder");
    let volume = cinder
        .volume(&outcome.physical_id)
        .await
        .expect("read")
        .expect("made");
    // No name given: Heat's physical name, the same on every attempt.
    assert!(
        volume
            .name
            .as_deref()
            .is_some_and(|name| name.starts_with("ostest-orphan-")),
        "{:?}",
        volume.name
    );
    let row = unrecorded(&harness, &request);
    volume_type.resume_delete(&row).await.expect("deleted");
    assert!(
        cinder
            .volume(&outcome.physical_id)
            .await
            .expect("read")
            .is_none(),
        "what the marker found is gone"
    );
}

#[tokio::test]
async fn a_volume_from_an_image_is_made_or_fails_in_heats_words() {
    let Some(harness) =
        Harness::start("a_volume_from_an_image_is_made_or_fails_in_heats_words").await
    else {
        return;
    };
    // The image named, as templates do: Glance finds its id.
    let image = &harness.test_cloud.facts.image;
    let request = harness.request(VOLUME, "boot", json!({"size": 1, "image": image.name}));
    let volume_type = harness.resource_type(VOLUME);
    let cinder = Cinder::connect(&harness.demo())
        .await
        .expect("demo's Cinder");
    let marker = format!("ember-{}", request.derived_id("volume"));
    match volume_type.create(&request).await {
        Ok(outcome) => assert_eq!(outcome.attributes["bootable"], json!("true")),
        // Cinder's fake driver cannot copy an image into a volume: the
        // volume goes into error, which fails the create as Heat words it.
        Err(failed) => {
            assert_eq!(
                failed.to_string(),
                "Went to status error due to \"Unknown\""
            );
            let made = cinder
                .volumes_with_metadata("ember_resource", &marker)
                .await
                .expect("listed");
            assert_eq!(made.len(), 1);
            assert_eq!(made[0].status, "error");
        }
    }
    // Either way the row recorded nothing the executor could keep from a
    // failure: its delete finds the volume by the marker.
    volume_type
        .resume_delete(&unrecorded(&harness, &request))
        .await
        .expect("deleted");
    assert!(
        cinder
            .volumes_with_metadata("ember_resource", &marker)
            .await
            .expect("listed")
            .is_empty()
    );
}

#[tokio::test]
async fn an_aws_volume_is_tagged_and_immutable() {
    let Some(harness) = Harness::start("an_aws_volume_is_tagged_and_immutable").await else {
        return;
    };
    let request = harness.request(
        "AWS::EC2::Volume",
        "DataVolume",
        json!({"AvailabilityZone": "nova", "Size": 1, "Tags": [{"Key": "role", "Value": "db"}]}),
    );
    let volume_type = harness.resource_type("AWS::EC2::Volume");
    let outcome = volume_type.create(&request).await.expect("created");
    let row = harness.created(&request, &outcome);
    let cinder = Cinder::connect(&harness.demo())
        .await
        .expect("demo's Cinder");
    let volume = cinder
        .volume(&outcome.physical_id)
        .await
        .expect("read")
        .expect("made");
    assert_eq!(volume.metadata["role"], "db");
    assert_eq!(volume.availability_zone.as_deref(), Some("nova"));
    // Heat names and describes it with the physical name.
    assert_eq!(volume.name, volume.description);
    let grown = harness.request_in(
        harness.stack_id,
        row.id,
        "AWS::EC2::Volume",
        "DataVolume",
        json!({"AvailabilityZone": "nova", "Size": 2, "Tags": [{"Key": "role", "Value": "db"}]}),
    );
    assert!(!volume_type.needs_replacement(
        row.properties.as_object().expect("a map"),
        &grown.properties
    ));
    let refused = volume_type
        .update(&grown, &row)
        .await
        .expect_err("immutable");
    assert_eq!(
        refused.to_string(),
        "Update to properties Size of DataVolume (AWS::EC2::Volume) is not supported."
    );
    harness.delete(&row).await;
    assert!(
        cinder
            .volume(&outcome.physical_id)
            .await
            .expect("read")
            .is_none()
    );
}

#[tokio::test]
async fn bad_volumes_are_refused_naming_what_is_wrong() {
    let Some(harness) = Harness::start("bad_volumes_are_refused_naming_what_is_wrong").await else {
        return;
    };
    let volume_type = harness.resource_type(VOLUME);
    // A size of 0 does not pass the schema: the message names the property.
    let refused = validate_properties(
        volume_type.schema(),
        &json!({"size": 0}),
        "resources.data.properties",
    )
    .expect_err("size 0");
    assert!(
        refused.starts_with("resources.data.properties.size: value 0 is outside the range 1-"),
        "{refused}"
    );
    // Neither a size nor a source: Heat's message.
    let request = harness.request(VOLUME, "data", json!({}));
    let refused = volume_type.create(&request).await.expect_err("no source");
    assert!(
        refused
            .to_string()
            .starts_with("If neither \"backup_id\" nor \"size\" is provided"),
        "{refused}"
    );
    // A volume type Cinder does not have: Cinder's message names it, and
    // nothing is left behind.
    let missing_type = unique("no-such-type");
    let request = harness.request(
        VOLUME,
        "data",
        json!({"size": 1, "volume_type": missing_type}),
    );
    let refused = volume_type
        .create(&request)
        .await
        .expect_err("no such type");
    assert!(refused.to_string().contains(&missing_type), "{refused}");
    assert!(refused.to_string().starts_with("Cinder: "), "{refused}");
    let cinder = Cinder::connect(&harness.demo())
        .await
        .expect("demo's Cinder");
    let marker = format!("ember-{}", request.derived_id("volume"));
    assert!(
        cinder
            .volumes_with_metadata("ember_resource", &marker)
            .await
            .expect("listed")
            .is_empty()
    );
    // A backup Cinder does not have (this cloud runs no backup service):
    // Cinder's message names it.
    let missing_backup = uuid::Uuid::new_v4().to_string();
    let request = harness.request(VOLUME, "data", json!({"backup_id": missing_backup}));
    let refused = volume_type
        .create(&request)
        .await
        .expect_err("no such backup");
    assert!(refused.to_string().contains(&missing_backup), "{refused}");
    // An image Glance does not have: Glance's message names it.
    let missing_image = unique("no-such-image");
    let request = harness.request(VOLUME, "data", json!({"size": 1, "image": missing_image}));
    let refused = volume_type
        .create(&request)
        .await
        .expect_err("no such image");
    assert!(refused.to_string().contains(&missing_image), "{refused}");
}
